//! Splitting a CSV's bytes into records as the `csv` crate's reader does with the options
//! msMemScope's files need (`,` between fields, `"` quoting with `""` for a quote inside, `\r`,
//! `\n` or `\r\n` ending a record, empty lines skipped, a quote opening a field only at its
//! start, text after a closing quote going on unquoted, any number of fields), without its
//! byte-at-a-time state machine: a field's end is looked for a byte at a time over its first 32
//! bytes, then with `memchr`; quoted fields are copied out between their quotes, and the rest of
//! a record in runs (a record without quotes is one copy of its line). `read.rs` reads every
//! msMemScope dump with it, as one stream and in pieces; the tests below and the `memscope_csv`
//! fuzz target check it against the csv crate.
//! Unlike the csv crate, it names each record by the line it starts on (the csv crate counted
//! the line ends before a record after naming it).
//!
//! The source is read in 1 MiB reads, as the `csv` crate's buffered reader read it: a source
//! that fails (a line past [`crate::capped::MAX_LINE_BYTES`]) fails on the same read, after the
//! same records. A record that spans reads is split again from its start once the bytes read
//! have doubled, so a record of any length up to `MAX_RECORD_BYTES` costs linear time.

use std::io::{self, Read};

/// Bytes asked of the source at a time (the `csv` reader's buffer in `read.rs`).
const READ_BYTES: usize = 1 << 20;

/// The longest record taken: every column at the field cap (16 MiB) and more. A quoted field
/// that never closes, over lines short enough to pass the line cap, is refused here instead of
/// growing the buffer until memory runs out.
pub(super) const MAX_RECORD_BYTES: usize = 256 << 20;

/// One record: its bytes (quotes removed, `""` made `"`; the delimiters between unquoted fields
/// kept, so a record without quotes is one copy of its line) and where each field starts and
/// ends in them.
#[derive(Default)]
pub(super) struct Record {
    bytes: Vec<u8>,
    starts: Vec<usize>,
    ends: Vec<usize>,
}

impl Record {
    pub(super) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(super) fn range(&self, k: usize) -> Option<std::ops::Range<usize>> {
        Some(*self.starts.get(k)?..*self.ends.get(k)?)
    }

    pub(super) fn get(&self, k: usize) -> Option<&[u8]> {
        self.range(k).map(|r| &self.bytes[r])
    }

    /// The record's bytes: every field's, with delimiters between some of them.
    pub(super) fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).filter_map(|k| self.get(k))
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.starts.clear();
        self.ends.clear();
    }
}

/// The records of a source, one at a time, each with the line it starts on.
pub(super) struct Splitter<R> {
    source: R,
    buf: Vec<u8>,
    /// The unread bytes are `buf[at..filled]`.
    at: usize,
    filled: usize,
    /// The source has no more bytes.
    ended: bool,
    /// The line `buf[at]` is on.
    line: u64,
    /// Bytes of the source before `buf[0]`.
    taken: u64,
    /// Unread bytes when the record at `at` was last found to go on past them (0: not yet
    /// tried): it is split again once they have doubled, so a long record costs linear time.
    tried_bytes: usize,
    /// A read that failed after the last split: returned once the records before it are.
    failed: Option<io::Error>,
}

impl<R: Read> Splitter<R> {
    /// The records of `source`, whose first byte is on line `first_line`.
    pub(super) fn new(source: R, first_line: u64) -> Self {
        Self {
            source,
            buf: Vec::new(),
            at: 0,
            filled: 0,
            ended: false,
            line: first_line,
            taken: 0,
            tried_bytes: 0,
            failed: None,
        }
    }

    /// The next record into `record` and the line it starts on; `None` at the end.
    pub(super) fn next_record(&mut self, record: &mut Record) -> io::Result<Option<u64>> {
        loop {
            // Line ends before a record: the end of the last one, or empty lines.
            while let Some(&b) = self.buf[..self.filled].get(self.at) {
                match b {
                    b'\n' => self.line += 1,
                    b'\r' => {}
                    _ => break,
                }
                self.at += 1;
            }
            let unread = self.filled - self.at;
            let settled = self.ended || self.failed.is_some();
            if unread > 0 && (settled || unread >= 2 * self.tried_bytes) {
                let bytes = &self.buf[self.at..self.filled];
                if let Some((length, newlines)) = split_record(bytes, self.ended, record) {
                    let line = self.line;
                    self.at += length;
                    self.line += newlines;
                    self.tried_bytes = 0;
                    return Ok(Some(line));
                }
                self.tried_bytes = unread;
            } else if unread == 0 && self.ended {
                return Ok(None);
            }
            if let Some(failed) = self.failed.take() {
                return Err(failed);
            }
            if unread > MAX_RECORD_BYTES {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "line {}: a record of more than {} (a quoted field that never closes?)",
                        self.line,
                        crate::units::format_bytes(MAX_RECORD_BYTES as i64)
                    ),
                ));
            }
            if let Err(failed) = self.read_more() {
                self.failed = Some(failed);
            }
        }
    }

    /// Takes the line end after a record (`\r`, `\n` or `\r\n`), where one is next.
    pub(super) fn skip_line_end(&mut self) -> io::Result<()> {
        for wanted in [b'\r', b'\n'] {
            if self.at == self.filled && !self.ended {
                self.read_more()?;
            }
            if self.buf[..self.filled].get(self.at) == Some(&wanted) {
                self.at += 1;
                if wanted == b'\n' {
                    self.line += 1;
                }
            }
        }
        Ok(())
    }

    /// Bytes of the source taken so far.
    pub(super) fn position(&self) -> u64 {
        self.taken + self.at as u64
    }

    /// The line the next byte is on.
    pub(super) fn line(&self) -> u64 {
        self.line
    }

    /// Keeps the unread bytes and reads [`READ_BYTES`] more after them.
    fn read_more(&mut self) -> io::Result<()> {
        self.taken += self.at as u64;
        self.buf.copy_within(self.at..self.filled, 0);
        self.filled -= self.at;
        self.at = 0;
        if self.buf.len() < self.filled + READ_BYTES {
            self.buf.resize(self.filled + READ_BYTES, 0);
        }
        let n = loop {
            match self
                .source
                .read(&mut self.buf[self.filled..self.filled + READ_BYTES])
            {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                read => break read?,
            }
        };
        self.filled += n;
        self.ended = n == 0;
        Ok(())
    }
}

/// Bytes of a field looked at one at a time before `memchr` takes over: most fields are shorter
/// (numbers, names, `N/A`), and a call costs more than the bytes.
const SHORT_FIELD_BYTES: usize = 32;

/// Where the first `,`, `\r` or `\n` of `bytes` is.
fn field_end(bytes: &[u8]) -> Option<usize> {
    let head = &bytes[..bytes.len().min(SHORT_FIELD_BYTES)];
    match head.iter().position(|&b| matches!(b, b',' | b'\r' | b'\n')) {
        Some(k) => Some(k),
        None if bytes.len() > SHORT_FIELD_BYTES => {
            memchr::memchr3(b',', b'\r', b'\n', &bytes[SHORT_FIELD_BYTES..])
                .map(|k| k + SHORT_FIELD_BYTES)
        }
        None => None,
    }
}

/// The record at the start of `bytes` (which starts with neither `\r` nor `\n`) into `record`:
/// how many bytes it takes (its line end not included) and the `\n`s inside its quoted fields;
/// `None` where it may go on past `bytes` and the source has not `ended`.
fn split_record(bytes: &[u8], ended: bool, record: &mut Record) -> Option<(usize, u64)> {
    record.clear();
    let n = bytes.len();
    let mut newlines = 0u64;
    let mut i = 0;
    // `bytes[copied..i]` are the record's too, not yet copied: unquoted text is copied in runs.
    let mut copied = 0;
    // Where `bytes[at]` (at ≥ `copied`) is, or will be, in the record.
    let place = |record: &Record, copied: usize, at: usize| record.bytes.len() + at - copied;
    loop {
        // A field starts at `i`: quoted where its first byte is a quote.
        if bytes.get(i) == Some(&b'"') {
            record.bytes.extend_from_slice(&bytes[copied..i]);
            record.starts.push(record.bytes.len());
            i += 1;
            loop {
                let Some(k) = memchr::memchr(b'"', &bytes[i..]) else {
                    if !ended {
                        return None;
                    }
                    // Quoting open at the end: the field and record end with the bytes.
                    newlines += count_newlines(&bytes[i..]);
                    record.bytes.extend_from_slice(&bytes[i..]);
                    record.ends.push(record.bytes.len());
                    return Some((n, newlines));
                };
                newlines += count_newlines(&bytes[i..i + k]);
                record.bytes.extend_from_slice(&bytes[i..i + k]);
                i += k + 1;
                match bytes.get(i) {
                    // `""`: a quote, and the quoting goes on.
                    Some(b'"') => {
                        record.bytes.push(b'"');
                        i += 1;
                    }
                    // The byte after the quote decides: wait for it.
                    None if !ended => return None,
                    _ => break,
                }
            }
            copied = i;
        } else {
            record.starts.push(place(record, copied, i));
        }
        // Unquoted, or the rest after a closing quote: up to a delimiter or line end.
        match field_end(&bytes[i..]) {
            Some(k) => {
                i += k;
                record.ends.push(place(record, copied, i));
                if bytes[i] != b',' {
                    record.bytes.extend_from_slice(&bytes[copied..i]);
                    return Some((i, newlines));
                }
                i += 1;
            }
            None if !ended => return None,
            None => {
                record.ends.push(place(record, copied, n));
                record.bytes.extend_from_slice(&bytes[copied..]);
                return Some((n, newlines));
            }
        }
    }
}

/// Every record of `bytes` and the line it starts on, read in reads of at most `read_bytes`:
/// for the `memscope_csv` fuzz target, which checks them against the csv crate's.
pub fn records(bytes: &[u8], read_bytes: usize) -> Vec<(u64, Vec<Vec<u8>>)> {
    /// A source that gives at most `.1` bytes per read.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut splitter = Splitter::new(Trickle(bytes, read_bytes.max(1)), 1);
    let mut record = Record::default();
    let mut all = Vec::new();
    while let Ok(Some(line)) = splitter.next_record(&mut record) {
        all.push((line, record.iter().map(<[u8]>::to_vec).collect()));
    }
    all
}

fn count_newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

#[cfg(test)]
mod tests {
    use super::{Record, Splitter};

    /// Each record's line and fields.
    type Split = Vec<(u64, Vec<Vec<u8>>)>;

    /// Every record and its line, as the csv crate (with `read.rs`'s options) and the splitter
    /// give them, read in reads of `chunk` bytes.
    fn both(text: &[u8], chunk: usize) -> (Split, Split) {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .has_headers(false)
            .from_reader(text);
        let mut theirs = Vec::new();
        let mut record = csv::ByteRecord::new();
        while reader.read_byte_record(&mut record).expect("csv reads") {
            let line = record.position().map_or(0, csv::Position::line);
            theirs.push((line, record.iter().map(<[u8]>::to_vec).collect()));
        }
        let ours = super::records(text, chunk);
        (theirs, ours)
    }

    #[test]
    fn records_split_as_the_csv_crate_splits_them() {
        let cases: [&[u8]; 14] = [
            b"a,b,c\n1,2,3\n",
            b"a,b\r\n1,\"x\r\ny\",3\r\n\r\n4,5",
            b"\"a\"\"b\",c\n",
            b"x\"y,z\n\"q\"rest,t\n",
            b"\n\n\ra,b\r\rc\n",
            b"a,\"open quote\nnever closed",
            b"a,\"\"\n,,\n",
            b",\n",
            b"\"\"",
            b"a,b,",
            b"1,\"{k:v,w:\"\"x\"\"}\",\"f.py(1): g\nh.py(2): i\n\",\n2,3\n",
            b"\"a\" b,\"c\"\"\",\"\"\"\"\n",
            b"\r\n\"x\"\r",
            "中文,路径\n\"堆栈\n第二行\",\u{ff}\n".as_bytes(),
        ];
        for text in cases {
            for chunk in [1, 2, 3, 7, 1 << 20] {
                let (theirs, ours) = both(text, chunk);
                // The csv crate numbers lines from 1 as the splitter does, but counts a record's
                // line before skipping the line ends ahead of it: compare the records, and the
                // lines where no empty line comes before a record.
                let fields = |r: &[(u64, Vec<Vec<u8>>)]| -> Vec<Vec<Vec<u8>>> {
                    r.iter().map(|(_, f)| f.clone()).collect()
                };
                assert_eq!(
                    fields(&theirs),
                    fields(&ours),
                    "{:?} in reads of {chunk}",
                    String::from_utf8_lossy(text)
                );
            }
        }
    }

    /// Texts of the bytes that matter (delimiter, quote, line ends, text, a byte that is not
    /// UTF-8), 20,000 of them from a fixed seed, split the same way in reads of any size: short
    /// ones of every byte alike, and longer ones mostly of text, whose fields pass
    /// `SHORT_FIELD_BYTES`.
    #[test]
    fn random_texts_split_as_the_csv_crate_splits_them() {
        let alphabet = [b'a', b',', b'"', b'\r', b'\n', 0xff];
        let mostly_text = [[b'a'; 24].as_slice(), alphabet.as_slice()].concat();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..20_000 {
            let (len, bytes) = if case % 2 == 0 {
                (next() % 24, alphabet.as_slice())
            } else {
                (next() % 160, mostly_text.as_slice())
            };
            let text: Vec<u8> = (0..len)
                .map(|_| bytes[(next() % bytes.len() as u64) as usize])
                .collect();
            for chunk in [1, 3, 1 << 20] {
                let (theirs, ours) = both(&text, chunk);
                let fields = |r: &[(u64, Vec<Vec<u8>>)]| -> Vec<Vec<Vec<u8>>> {
                    r.iter().map(|(_, f)| f.clone()).collect()
                };
                assert_eq!(
                    fields(&theirs),
                    fields(&ours),
                    "{text:?} in reads of {chunk}"
                );
            }
        }
    }

    /// A quote that never closes, over short lines, is refused once the record passes the bound,
    /// naming the line it starts on, not read until memory runs out.
    #[test]
    fn a_record_past_the_bound_is_refused_as_it_streams() {
        /// `a,"` then short lines forever.
        struct Endless(bool);
        impl std::io::Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if std::mem::replace(&mut self.0, false) {
                    buf[..5].copy_from_slice(b"x\na,\"");
                    return Ok(5);
                }
                // Doubled quotes (each a quote in the field) over short lines: the slowest
                // bytes to split, and no line long enough for the line cap.
                let fill = b"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\n";
                let n = buf.len() / fill.len() * fill.len();
                for chunk in buf[..n].chunks_mut(fill.len()) {
                    chunk.copy_from_slice(fill);
                }
                Ok(n)
            }
        }
        let mut splitter = Splitter::new(Endless(true), 1);
        let mut record = Record::default();
        assert_eq!(splitter.next_record(&mut record).expect("first"), Some(1));
        let error = splitter
            .next_record(&mut record)
            .expect_err("past the bound");
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            error
                .to_string()
                .starts_with("line 2: a record of more than 256 MiB"),
            "{error}"
        );
        assert!(splitter.buf.len() <= super::MAX_RECORD_BYTES + 2 * super::READ_BYTES);
    }

    #[test]
    fn lines_are_where_records_start() {
        let text = b"h\n1,\"a\nb\nc\"\n\n2\r\n3,\"x\"\n";
        let (_, ours) = both(text, 4);
        let lines: Vec<u64> = ours.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [1, 2, 6, 7]);
    }
}

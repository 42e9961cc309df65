//! Reading msMemScope's rows: `memscope_dump_*.csv` (records split by `split`, as one
//! stream or in pieces side by side) and the `.db` (`memscope_dump`, or `leaks_dump` in older
//! files, with `rusqlite`), into [`Row`]s.
//!
//! What the writer does, checked on its source (docs/memscope-format.md): the CSV is written with
//! `fprintf`, so only `Attr`, MSTX names and the call stacks are quoted, stacks hold newlines, and
//! an op name could hold commas (a row with more fields than the header gives the extra ones back
//! to `Name`). Rows are not in time order. Times are epoch ns, but µs in files written before
//! 2025-05-29 under the same header; pointers are hex, decimal before 2025-09; FREE sizes were
//! negative in early files.

use std::borrow::Cow;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap;

use super::split::{Record, Splitter};
use super::{Attrs, DeviceId, Kind, MemscopeError, Pool, Row, Rows, Subtype};

/// Fields longer than this are refused (a stack of 10,000 frames is under 1 MiB).
pub const MAX_FIELD_BYTES: usize = 16 << 20;

/// The columns memsight reads, by header name (the writer's names; older files lack the stacks).
const COLUMNS: [&str; 11] = [
    "ID",
    "Event",
    "Event Type",
    "Name",
    "Timestamp(ns)",
    "Process Id",
    "Thread Id",
    "Device Id",
    "Ptr",
    "Attr",
    "Call Stack(Python)",
];
/// Columns a file must have to be read at all.
const REQUIRED: [&str; 6] = [
    "ID",
    "Event",
    "Event Type",
    "Timestamp(ns)",
    "Device Id",
    "Attr",
];

/// Whether `header` (a CSV's first line, or a table's column names) is msMemScope's.
pub fn is_memscope_header(header: &[&str]) -> bool {
    REQUIRED
        .iter()
        .all(|r| header.iter().any(|h| h.trim() == *r))
}

/// Files from this size on are read in pieces on rayon's threads; smaller ones (and pipes,
/// devices, anything that is not a regular file) are read as one stream.
const PARALLEL_FROM_BYTES: u64 = 4 << 20;

/// Pieces per thread: enough that a piece of long rows does not leave the others idle.
const PIECES_PER_THREAD: usize = 4;

/// Rows between two looks at the memory bound (every piece counts into one total).
const CHECK_EVERY_ROWS: u64 = 1 << 12;

/// Reads a `memscope_dump_*.csv`, adding its rows to `rows`. A large file is split at record
/// boundaries (found by one pass over its bytes that follows the quotes: stacks hold newlines)
/// and its pieces parsed side by side, each into its own room of the list (as many places as it
/// has record ends), then the gaps closed: the same rows, lines and first error as reading it
/// from the top.
pub fn read_csv(path: &Path, rows: &mut Rows) -> Result<(), MemscopeError> {
    read_csv_in(path, rows, PARALLEL_FROM_BYTES)
}

/// [`read_csv`] with the file in pieces however small it is: the differential check of the
/// pieces against the stream (fuzzing, tests).
pub fn read_csv_in_pieces(path: &Path, rows: &mut Rows) -> Result<(), MemscopeError> {
    read_csv_in(path, rows, 0)
}

/// [`read_csv`], in pieces from `parallel_from_bytes` on.
fn read_csv_in(
    path: &Path,
    rows: &mut Rows,
    parallel_from_bytes: u64,
) -> Result<(), MemscopeError> {
    let io_error = |source| MemscopeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let open = || -> Result<_, MemscopeError> {
        let file = std::fs::File::open(path).map_err(io_error)?;
        let size = file
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|m| m.len());
        let mut records = Splitter::new(crate::capped::LineCapped::new(file), 1);
        let mut header = Record::default();
        if next_record(path, &mut records, &mut header)?.is_none() {
            return Err(MemscopeError::NotMemscope {
                path: path.to_path_buf(),
                why: "the file is empty".into(),
            });
        }
        let (header_len, index) = csv_columns(path, &header)?;
        let columns: Vec<Option<usize>> = COLUMNS.iter().map(|c| index.get(c).copied()).collect();
        records.skip_line_end().map_err(io_error)?;
        Ok((records, size, header_len, columns))
    };
    let (mut records, size, header_len, columns) = open()?;
    let layout = (header_len, columns.as_slice());
    let file = rows.add_file(path);
    let rows_read = AtomicU64::new(0);
    // The whole file as one stream: a small one, or where pieces cannot be read.
    let one_stream = |records: &mut Splitter<_>, rows: &mut Rows| {
        read_records(
            path,
            records,
            layout,
            file,
            rows,
            &rows_read,
            &mut Sink::List,
        )
        .map(|_| ())
    };
    let (body_start, body_line) = (records.position(), records.line());
    let Some(size) = size.filter(|&s| s >= parallel_from_bytes && body_start < s) else {
        return one_stream(&mut records, rows);
    };
    drop(records);
    let pieces = rayon::current_num_threads().max(1) * PIECES_PER_THREAD;
    // In pieces however small (tests, fuzzing): in segments however small too.
    let segments_from = SEGMENTS_FROM_BYTES.min(parallel_from_bytes);
    let starts = piece_starts(path, (body_start, size), body_line, pieces, segments_from)
        .map_err(io_error)?;
    let base = rows.rows.len();
    let read = rows
        .make_room(starts.iter().map(|s| s.rows_at_most).sum(), file)
        .then(|| read_pieces(path, size, layout, &starts, (file, base), rows, &rows_read));
    match read {
        Some(Ok(Some(pieces))) => {
            rows.take_pieces(pieces, &starts, (file, base));
            Ok(())
        }
        Some(Err(e)) => {
            rows.truncate(base);
            Err(e)
        }
        // No memory for as many rows as the file has line ends (a file of empty lines?), or a
        // piece with more rows than line ends (never seen): read as one stream, the memory
        // bound counting the rows as they come.
        None | Some(Ok(None)) => {
            rows.truncate(base);
            let (mut records, ..) = open()?;
            rows_read.store(0, Ordering::Relaxed);
            one_stream(&mut records, rows)
        }
    }
}

/// Reads the pieces of `path` (its body ending at `size`) side by side, each into its room of
/// `rows` (from `base` on, [`PieceStart::rows_at_most`] places each, in order): per piece, its
/// text and what it left out, and how many places it filled; `None` where a piece had more rows
/// than places. Text ids in the rooms are the pieces' own until [`Rows::take_pieces`].
fn read_pieces(
    path: &Path,
    size: u64,
    layout: (usize, &[Option<usize>]),
    starts: &[PieceStart],
    (file, base): (u32, usize),
    rows: &mut Rows,
    rows_read: &AtomicU64,
) -> Result<Option<Vec<(Rows, usize)>>, MemscopeError> {
    use rayon::prelude::*;
    let io_error = |source| MemscopeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let rooms = rooms(rows, base, starts);
    let read: Vec<Result<Option<(Rows, usize)>, MemscopeError>> = starts
        .par_iter()
        .zip(rooms)
        .enumerate()
        .map(|(k, (start, (room, origin)))| {
            use std::io::{Read, Seek, SeekFrom};
            let end = starts.get(k + 1).map_or(size, |next| next.offset);
            let mut piece = std::fs::File::open(path).map_err(io_error)?;
            piece
                .seek(SeekFrom::Start(start.offset))
                .map_err(io_error)?;
            let mut records = Splitter::new(
                crate::capped::LineCapped::after_lines(
                    piece.take(end - start.offset),
                    start.line - 1,
                ),
                start.line,
            );
            // The piece's text and what it left out; its rows go to its room.
            let mut text = Rows::default();
            let mut sink = Sink::Room {
                rows: room,
                origin,
                filled: 0,
            };
            let fits = read_records(
                path,
                &mut records,
                layout,
                file,
                &mut text,
                rows_read,
                &mut sink,
            )?;
            let Sink::Room { filled, .. } = sink else {
                unreachable!("a piece reads into its room")
            };
            Ok(fits.then_some((text, filled)))
        })
        .collect();
    read.into_iter().collect()
}

/// A piece's places in the list of rows, and their origins.
type Room<'r> = (&'r mut [Row], &'r mut [(u32, u64)]);

/// Each piece's room in `rows` from `base` on.
fn rooms<'r>(rows: &'r mut Rows, base: usize, starts: &[PieceStart]) -> Vec<Room<'r>> {
    let (mut room_rows, mut room_origin) = (&mut rows.rows[base..], &mut rows.origin[base..]);
    starts
        .iter()
        .map(|start| {
            let (here, rest) = std::mem::take(&mut room_rows).split_at_mut(start.rows_at_most);
            room_rows = rest;
            let (origin, rest) = std::mem::take(&mut room_origin).split_at_mut(start.rows_at_most);
            room_origin = rest;
            (here, origin)
        })
        .collect()
}

/// Where the rows read go: the end of the list (one stream), or a piece's room in it.
enum Sink<'w> {
    List,
    Room {
        rows: &'w mut [Row],
        origin: &'w mut [(u32, u64)],
        filled: usize,
    },
}

impl Sink<'_> {
    /// Puts `row`, read from `line` of `file`; false where the room is full.
    fn put(&mut self, rows: &mut Rows, row: Row, (file, line): (u32, u64)) -> bool {
        match self {
            Self::List => {
                rows.push(row, file, line);
                true
            }
            Self::Room {
                rows: room,
                origin,
                filled,
            } => {
                let Some(place) = room.get_mut(*filled) else {
                    return false;
                };
                *place = row;
                origin[*filled] = (file, line);
                *filled += 1;
                true
            }
        }
    }
}

/// The next record of `records` into `record` and the line it starts on (`None` at the end);
/// an error naming the file where reading fails or a line passes the cap (its message names the
/// line).
fn next_record<R: std::io::Read>(
    path: &Path,
    records: &mut Splitter<R>,
    record: &mut Record,
) -> Result<Option<u64>, MemscopeError> {
    records
        .next_record(record)
        .map_err(|source| MemscopeError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Reads every record of `records` into `sink` as rows of `file` (their text and what is left
/// out into `rows`); `rows_read` counts the rows of every piece, for the memory bound. False
/// where the sink is full.
fn read_records<R: std::io::Read>(
    path: &Path,
    records: &mut Splitter<R>,
    layout: (usize, &[Option<usize>]),
    file: u32,
    rows: &mut Rows,
    rows_read: &AtomicU64,
    sink: &mut Sink,
) -> Result<bool, MemscopeError> {
    let mut record = Record::default();
    let mut since_check = 0u64;
    while let Some(line) = next_record(path, records, &mut record)? {
        since_check += 1;
        if since_check == CHECK_EVERY_ROWS {
            since_check = 0;
            let read = rows_read.fetch_add(CHECK_EVERY_ROWS, Ordering::Relaxed) + CHECK_EVERY_ROWS;
            if let Some(why) = crate::budget::exceeded(read * Rows::ROW_BYTES + rows.text_bytes()) {
                return Err(MemscopeError::BadRow {
                    path: path.to_path_buf(),
                    line,
                    message: why,
                });
            }
        }
        match csv_row(&record, layout, rows) {
            Ok(Some(row)) => {
                if !sink.put(rows, row, (file, line)) {
                    return Ok(false);
                }
            }
            Ok(None) => {}
            Err(RowError::LeftOut(reason)) => rows.leave_out(reason, file, line),
            Err(RowError::Bad(message)) => {
                return Err(MemscopeError::BadRow {
                    path: path.to_path_buf(),
                    line,
                    message,
                });
            }
        }
    }
    Ok(true)
}

/// Where a piece of a CSV's body begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PieceStart {
    pub(super) offset: u64,
    /// The line its first byte is on.
    line: u64,
    /// The most rows it can hold: its record ends (a line end outside quotes; `\r\n` is one),
    /// one more for the body's last piece (a last record without an end).
    pub(super) rows_at_most: usize,
}

/// Bodies from this size on are scanned in segments side by side, cut where a row seems to start
/// (where the file is read in pieces at all).
const SEGMENTS_FROM_BYTES: u64 = 1 << 16;

/// Bytes looked through after a guessed cut for a line that starts a row.
const CUT_SEARCH_BYTES: usize = 1 << 20;

/// Where `pieces` pieces of the CSV body `start..end` begin: just after a `\n` outside quotes,
/// about evenly spread, each with the line it starts on (the body starting on `first_line`) and
/// how many rows it can hold. The first piece starts at `start`.
///
/// A body of `segments_from` bytes or more is scanned in segments side by side, each cut just
/// before a line that looks like a row's start (`ID,EVENT,`) and scanned as if outside quotes
/// there; the guess holds where every segment but the last ends outside quotes (the scan of each
/// is then the scan from the top), and where it does not (the cut was inside a quoted field) the
/// body is scanned again from the top.
fn piece_starts(
    path: &Path,
    (start, end): (u64, u64),
    first_line: u64,
    pieces: usize,
    segments_from: u64,
) -> std::io::Result<Vec<PieceStart>> {
    use rayon::prelude::*;
    let segments = rayon::current_num_threads().max(2);
    let mut bounds = vec![start];
    if end - start >= segments_from {
        for k in 1..segments as u64 {
            let guess = start + (end - start) / segments as u64 * k;
            if let Some(cut) = row_start_after(path, guess, end)?
                && cut > *bounds.last().unwrap_or(&start)
            {
                bounds.push(cut);
            }
        }
    }
    bounds.push(end);
    let per_segment = pieces.div_ceil(bounds.len() - 1).max(1);
    let scanned: Vec<Segment> = bounds
        .par_windows(2)
        .map(|w| scan_segment(path, (w[0], w[1]), per_segment))
        .collect::<std::io::Result<_>>()?;
    let guessed_right = scanned.iter().rev().skip(1).all(|s| s.ends_outside);
    let scanned = if guessed_right {
        scanned
    } else {
        vec![scan_segment(path, (start, end), pieces)?]
    };
    let mut starts = Vec::new();
    let mut lines_before = first_line;
    for segment in scanned {
        starts.extend(segment.starts.into_iter().map(|s| PieceStart {
            line: s.line + lines_before,
            ..s
        }));
        lines_before += segment.newlines;
    }
    // One more place for a last record without a line end (only the body's last can lack one).
    if let Some(last) = starts.last_mut() {
        last.rows_at_most += 1;
    }
    Ok(starts)
}

/// Where the first line after `from` that looks like a row's start (digits, a comma, an
/// upper-case letter) begins, looking through [`CUT_SEARCH_BYTES`] before `end`.
fn row_start_after(path: &Path, from: u64, end: u64) -> std::io::Result<Option<u64>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take((end - from).min(CUT_SEARCH_BYTES as u64))
        .read_to_end(&mut bytes)?;
    let looks_like_row = |rest: &[u8]| {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        digits > 0
            && rest.get(digits) == Some(&b',')
            && rest.get(digits + 1).is_some_and(u8::is_ascii_uppercase)
    };
    Ok(memchr::memchr_iter(b'\n', &bytes)
        .find(|&i| looks_like_row(&bytes[i + 1..]))
        .map(|i| from + i as u64 + 1))
}

/// A segment of a body, scanned: its pieces (lines counted from 0 at its start, no place for a
/// last record without a line end), its line ends, and whether it ends outside quotes.
struct Segment {
    starts: Vec<PieceStart>,
    newlines: u64,
    ends_outside: bool,
}

/// [`piece_starts`] over `start..end` alone, as if outside quotes at `start` (a field's start).
/// Reads the bytes once, holding 1 MiB.
///
/// Quotes are followed as the csv crate and [`super::split`] read them: a quote opens a field
/// only at the field's start (elsewhere it is text), `""` inside a quoted field is a quote, and a
/// field goes on unquoted after its closing quote; `\r`, `\n` or both end a record.
fn scan_segment(path: &Path, (start, end): (u64, u64), pieces: usize) -> std::io::Result<Segment> {
    use std::io::{Read, Seek, SeekFrom};
    /// Where the scan is, as the csv crate's reader would be.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum At {
        /// Outside quotes: a quote at a field's start (after a delimiter or a line end) opens
        /// a quoted field, elsewhere it is text; only quotes and line ends matter.
        Outside,
        Quoted,
        /// Right after a quote inside a quoted field: a second one is a quote, anything else
        /// ends the quoting.
        QuoteInQuoted,
    }
    let step = ((end - start) / pieces.max(1) as u64).max(1);
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut file = file.take(end - start);
    let mut starts = vec![PieceStart {
        offset: start,
        line: 0,
        rows_at_most: 0,
    }];
    let mut next_cut = start + step;
    let mut buf = vec![0u8; 1 << 20];
    // The byte before the buffer's first (the body starts at a field's start).
    let (mut at, mut line, mut before) = (start, 0, b'\n');
    let mut state = At::Outside;
    let newlines = |bytes: &[u8]| memchr::memchr_iter(b'\n', bytes).count() as u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let bytes = &buf[..n];
        let previous = |i: usize| if i > 0 { bytes[i - 1] } else { before };
        let mut i = 0;
        while i < n {
            match state {
                At::Quoted => {
                    if let Some(k) = memchr::memchr(b'"', &bytes[i..]) {
                        line += newlines(&bytes[i..i + k]);
                        i += k + 1;
                        state = At::QuoteInQuoted;
                    } else {
                        line += newlines(&bytes[i..]);
                        i = n;
                    }
                }
                At::QuoteInQuoted => {
                    if bytes[i] == b'"' {
                        i += 1;
                        state = At::Quoted;
                    } else {
                        state = At::Outside;
                    }
                }
                At::Outside => {
                    let Some(k) = memchr::memchr3(b'"', b'\r', b'\n', &bytes[i..]) else {
                        i = n;
                        continue;
                    };
                    i += k;
                    match bytes[i] {
                        b'"' => {
                            if matches!(previous(i), b',' | b'\r' | b'\n') {
                                state = At::Quoted;
                            }
                        }
                        b'\r' => count_record_end(&mut starts),
                        _ => {
                            line += 1;
                            if previous(i) != b'\r' {
                                count_record_end(&mut starts);
                            }
                            let boundary = at + i as u64 + 1;
                            if boundary >= next_cut && boundary < end {
                                starts.push(PieceStart {
                                    offset: boundary,
                                    line,
                                    rows_at_most: 0,
                                });
                                next_cut = boundary + step;
                            }
                        }
                    }
                    i += 1;
                }
            }
        }
        before = bytes[n - 1];
        at += n as u64;
    }
    Ok(Segment {
        starts,
        newlines: line,
        ends_outside: state == At::Outside,
    })
}

/// A record end outside quotes, in the last piece found.
fn count_record_end(starts: &mut [PieceStart]) {
    if let Some(last) = starts.last_mut() {
        last.rows_at_most += 1;
    }
}

/// One record as a row (`None`: an empty line). `columns`: where each of [`COLUMNS`] is.
fn csv_row(
    record: &Record,
    (header_len, columns): (usize, &[Option<usize>]),
    rows: &mut Rows,
) -> Result<Option<Row>, RowError> {
    if record.as_slice().len() > MAX_FIELD_BYTES && record.iter().any(|f| f.len() > MAX_FIELD_BYTES)
    {
        return Err(RowError::Bad(format!(
            "a field of more than {} (the file is not msMemScope's, or is damaged)",
            crate::units::format_bytes(MAX_FIELD_BYTES as i64)
        )));
    }
    if record.len() == 1 && record.get(0).is_some_and(<[u8]>::is_empty) {
        return Ok(None);
    }
    if record.len() < REQUIRED.len() {
        return Err(RowError::Bad(format!(
            "{} fields where the header has {header_len} (the file is cut short?)",
            record.len()
        )));
    }
    // Fields missing at the end (a line cut short, a writer that died): what they held is
    // unknown, and the row is not taken for what its first fields say.
    if record.len() < header_len {
        return Err(RowError::LeftOut(
            "with fewer fields than the header (cut short?)",
        ));
    }
    // An unquoted op name with commas: the extra fields belong to `Name` (column 3).
    let extra = record.len().saturating_sub(header_len);
    // The record's fields as text: checked as one (the common case, at SIMD speed), each field
    // then a slice of it; lossy only where the bytes are not UTF-8.
    let whole = std::str::from_utf8(record.as_slice()).ok();
    if let (Some(whole), 0) = (whole, extra) {
        // The common case: each cell a slice of the text (a field's ends are char boundaries
        // unless quotes removed from between the bytes of one char).
        let mut cells = [""; COLUMNS.len()];
        let mut whole_cells = true;
        for (cell, column) in cells.iter_mut().zip(columns) {
            if let Some(range) = column.and_then(|i| record.range(i)) {
                match whole.get(range) {
                    Some(text) => *cell = text,
                    None => whole_cells = false,
                }
            }
        }
        if whole_cells {
            return parse_row(RawRow::of(cells), rows).map(Some);
        }
    }
    let name_column = columns[3];
    let field = |k: usize| -> Cow<'_, str> {
        let Some(i) = columns[k] else {
            return Cow::Borrowed("");
        };
        let cell = |i: usize| {
            record.range(i).map_or(Cow::Borrowed(""), |range| {
                match whole.and_then(|w| w.get(range.clone())) {
                    Some(text) => Cow::Borrowed(text),
                    None => String::from_utf8_lossy(&record.as_slice()[range]),
                }
            })
        };
        match name_column {
            Some(n) if extra > 0 && i == n => {
                let parts: Vec<&[u8]> = (n..=n + extra).filter_map(|k| record.get(k)).collect();
                Cow::Owned(String::from_utf8_lossy(&parts.join(&b","[..])).into_owned())
            }
            Some(n) if extra > 0 && i > n => cell(i + extra),
            _ => cell(i),
        }
    };
    let cells: [Cow<'_, str>; COLUMNS.len()] = std::array::from_fn(field);
    parse_row(RawRow::of(cells.each_ref().map(AsRef::as_ref)), rows).map(Some)
}

/// The header's length and where each column memsight reads is; an error when the header is
/// not msMemScope's.
fn csv_columns(
    path: &Path,
    record: &Record,
) -> Result<(usize, FxHashMap<&'static str, usize>), MemscopeError> {
    let header: Vec<String> = record
        .iter()
        .map(|c| {
            String::from_utf8_lossy(c)
                .trim()
                .trim_start_matches('\u{feff}')
                .to_string()
        })
        .collect();
    let names: Vec<&str> = header.iter().map(String::as_str).collect();
    if !is_memscope_header(&names) {
        return Err(MemscopeError::NotMemscope {
            path: path.to_path_buf(),
            why: format!(
                "its header is not msMemScope's (it needs {})",
                REQUIRED.join(", ")
            ),
        });
    }
    let index = COLUMNS
        .iter()
        .filter_map(|c| names.iter().position(|h| h == c).map(|i| (*c, i)))
        .collect();
    Ok((header.len(), index))
}

/// Reads the `memscope_dump` (or older `leaks_dump`) table of a `.db`, adding its rows to `rows`.
pub fn read_db(path: &Path, rows: &mut Rows) -> Result<(), MemscopeError> {
    let db_error = |e: rusqlite::Error| MemscopeError::Db {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    // `copy` (a WAL database's temporary copy) outlives the connection: dropped after it.
    let (conn, copy) = open_db(path, rows)?;
    let (table, names) = db_table(path, &conn)?;
    let select: Vec<String> = COLUMNS
        .iter()
        .map(|c| {
            if names.iter().any(|n| n == c) {
                format!("CAST(\"{c}\" AS TEXT)")
            } else {
                "''".to_string()
            }
        })
        .collect();
    let mut statement = conn
        .prepare(&format!(
            "SELECT rowid, {} FROM \"{table}\"",
            select.join(", ")
        ))
        .map_err(db_error)?;
    let mut query = statement.query([]).map_err(db_error)?;
    let file = rows.add_file(path);
    let mut not_utf8 = NotUtf8::default();
    while let Some(r) = query.next().map_err(db_error)? {
        let rowid: i64 = r.get(0).map_err(db_error)?;
        not_utf8.at_row(rowid);
        let mut cells: Vec<String> = Vec::with_capacity(COLUMNS.len());
        for i in 1..=COLUMNS.len() {
            let cell = text_cell(r, i, &mut not_utf8).map_err(db_error)?;
            if cell.len() > MAX_FIELD_BYTES {
                return Err(MemscopeError::BadDbRow {
                    path: path.to_path_buf(),
                    table: table.to_string(),
                    rowid,
                    message: "a field of more than 16 MiB".into(),
                });
            }
            cells.push(cell);
        }
        let row = parse_row(RawRow::of(std::array::from_fn(|k| cells[k].as_str())), rows);
        match row {
            Ok(row) => rows.push(row, file, rowid.max(0) as u64),
            Err(RowError::LeftOut(reason)) => rows.leave_out(reason, file, rowid.max(0) as u64),
            Err(RowError::Bad(message)) => {
                return Err(MemscopeError::BadDbRow {
                    path: path.to_path_buf(),
                    table: table.to_string(),
                    rowid,
                    message,
                });
            }
        }
    }
    not_utf8.note(path, table, rows);
    drop(query);
    drop(statement);
    let read = super::python_trace::read_db(path, &conn, file, rows);
    drop(conn);
    drop(copy);
    read
}

/// Opens a `.db` without writing anything beside it. A database with a rollback journal (the
/// default) is opened read-only, which writes nothing and still honours a writer's lock. One in
/// WAL mode would get `-shm` and `-wal` files made beside it (and could not be opened at all on
/// a read-only mount without them), and keeps its recent rows in the `-wal` file: where that
/// file is beside it, the database and its log are copied to a temporary folder and read there
/// (the folder, returned, must outlive the connection); where none is, it is opened
/// `immutable` (nothing made, no lock) and a note says rows written after its last checkpoint
/// are not in the reading.
fn open_db(
    path: &Path,
    rows: &mut Rows,
) -> Result<(rusqlite::Connection, Option<tempfile::TempDir>), MemscopeError> {
    use rusqlite::{Connection, OpenFlags};
    let db_error = |e: rusqlite::Error| MemscopeError::Db {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let io_error = |source: std::io::Error| MemscopeError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut header = [0u8; 20];
    {
        use std::io::Read;
        let mut file = std::fs::File::open(path).map_err(io_error)?;
        // A file shorter than the header is not a database: SQLite says so below.
        let _ = file.read(&mut header).map_err(io_error)?;
    }
    // Bytes 18 and 19 of the header: 2 where the database is in WAL mode.
    let wal_mode = header.starts_with(b"SQLite format 3\0") && header[18] == 2;
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let (target, copy) = if wal_mode && wal.is_file() {
        let folder = tempfile::tempdir().map_err(io_error)?;
        let copied = folder.path().join("recording.db");
        std::fs::copy(path, &copied).map_err(io_error)?;
        std::fs::copy(&wal, folder.path().join("recording.db-wal")).map_err(|source| {
            MemscopeError::Io {
                path: wal.clone(),
                source,
            }
        })?;
        (copied, Some(folder))
    } else {
        if wal_mode {
            rows.notes.push(format!(
                "{}: the database is in WAL mode and its -wal file is not beside it: rows written \
                 after its last checkpoint are not in this reading",
                path.display()
            ));
        }
        (path.to_path_buf(), None)
    };
    // Never created: a wrong name is an error, not a new empty database.
    let conn = if copy.is_some() {
        Connection::open_with_flags(
            &target,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
    } else if !wal_mode {
        Connection::open_with_flags(
            &target,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
    } else {
        let mut uri = url_path(&target);
        uri.insert_str(0, "file:");
        uri.push_str("?immutable=1");
        Connection::open_with_flags(
            &uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
    }
    .map_err(db_error)?;
    conn.busy_timeout(std::time::Duration::from_secs(2))
        .map_err(db_error)?;
    Ok((conn, copy))
}

/// `path` as the path of a `file:` URI: every byte but unreserved ones and `/` percent-encoded
/// (a Chinese folder, a `?` or `#` in a name).
fn url_path(path: &Path) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Cells whose text was not UTF-8 (a Chinese path in GBK), decoded with U+FFFD as CSV cells are:
/// counted, and the first one's row kept for the note.
#[derive(Default)]
pub(super) struct NotUtf8 {
    count: u64,
    first_rowid: Option<i64>,
    rowid: i64,
}

impl NotUtf8 {
    pub(super) fn at_row(&mut self, rowid: i64) {
        self.rowid = rowid;
    }

    /// One note for the table, where any cell was not UTF-8.
    pub(super) fn note(&self, path: &Path, table: &str, rows: &mut Rows) {
        if let Some(first) = self.first_rowid {
            rows.notes.push(format!(
                "{}: table `{table}`: {} cell{} not UTF-8 (first in row {first}): read with \
                 U+FFFD for the bytes that are not",
                path.display(),
                self.count,
                if self.count == 1 { " is" } else { "s are" },
            ));
        }
    }
}

/// Column `i` of a row as text (NULL: empty), decoded lossily where it is not UTF-8.
pub(super) fn text_cell(
    r: &rusqlite::Row<'_>,
    i: usize,
    not_utf8: &mut NotUtf8,
) -> Result<String, rusqlite::Error> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Null => String::new(),
        ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
            if let Ok(text) = std::str::from_utf8(bytes) {
                text.to_string()
            } else {
                not_utf8.count += 1;
                not_utf8.first_rowid.get_or_insert(not_utf8.rowid);
                String::from_utf8_lossy(bytes).into_owned()
            }
        }
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(x) => x.to_string(),
    })
}

/// The names of `conn`'s tables, decoded lossily (`SQLite` stores whatever bytes it was given).
pub(super) fn table_names(conn: &rusqlite::Connection) -> Result<Vec<String>, rusqlite::Error> {
    let mut statement = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
    let mut query = statement.query([])?;
    let mut names = Vec::new();
    while let Some(r) = query.next()? {
        names.push(text_cell(r, 0, &mut NotUtf8::default())?);
    }
    Ok(names)
}

/// The column names of `table`, decoded lossily: rusqlite's `column_names` panics on a name that
/// is not UTF-8.
pub(super) fn column_names(
    conn: &rusqlite::Connection,
    table: &str,
) -> Result<Vec<String>, rusqlite::Error> {
    let mut statement = conn.prepare(&format!(
        "SELECT name FROM pragma_table_info('{}')",
        table.replace('\'', "''")
    ))?;
    let mut query = statement.query([])?;
    let mut names = Vec::new();
    while let Some(r) = query.next()? {
        names.push(text_cell(r, 0, &mut NotUtf8::default())?);
    }
    Ok(names)
}

/// The dump table of `conn` (`memscope_dump`, else `leaks_dump`) and its column names; an error
/// naming what is there when neither is, or when the table lacks msMemScope's columns.
fn db_table(
    path: &Path,
    conn: &rusqlite::Connection,
) -> Result<(&'static str, Vec<String>), MemscopeError> {
    let db_error = |e: rusqlite::Error| MemscopeError::Db {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let tables = table_names(conn).map_err(db_error)?;
    let Some(table) = ["memscope_dump", "leaks_dump"]
        .into_iter()
        .find(|t| tables.iter().any(|n| n == t))
    else {
        return Err(MemscopeError::NotMemscope {
            path: path.to_path_buf(),
            why: format!(
                "no `memscope_dump` or `leaks_dump` table (its tables: {})",
                if tables.is_empty() {
                    "none".to_string()
                } else {
                    tables.join(", ")
                }
            ),
        });
    };
    let columns = column_names(conn, table).map_err(db_error)?;
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    if !is_memscope_header(&names) {
        return Err(MemscopeError::NotMemscope {
            path: path.to_path_buf(),
            why: format!(
                "table `{table}` lacks msMemScope's columns (it needs {})",
                REQUIRED.join(", ")
            ),
        });
    }
    Ok((table, columns))
}

/// One row's cells, as text.
#[derive(Clone, Copy)]
struct RawRow<'a> {
    id: &'a str,
    event: &'a str,
    event_type: &'a str,
    name: &'a str,
    time: &'a str,
    pid: &'a str,
    tid: &'a str,
    device: &'a str,
    ptr: &'a str,
    attr: &'a str,
    python_stack: &'a str,
}

impl<'a> RawRow<'a> {
    /// The cells in [`COLUMNS`]' order.
    fn of(
        [
            id,
            event,
            event_type,
            name,
            time,
            pid,
            tid,
            device,
            ptr,
            attr,
            python_stack,
        ]: [&'a str; COLUMNS.len()],
    ) -> Self {
        Self {
            id,
            event,
            event_type,
            name,
            time,
            pid,
            tid,
            device,
            ptr,
            attr,
            python_stack,
        }
    }
}

/// Why a row was not read: it is damaged (the recording is refused, naming the row), or it
/// cannot be taken for what its columns say and is left out with a warning.
enum RowError {
    Bad(String),
    LeftOut(&'static str),
}

impl From<String> for RowError {
    fn from(message: String) -> Self {
        Self::Bad(message)
    }
}

/// The `Timestamp(ns)` cell: an integer, or a float a spreadsheet wrote.
fn timestamp(cell: &str) -> Result<i64, String> {
    let time = trim(cell);
    plain_decimal(time)
        .and_then(|t| i64::try_from(t).ok())
        .or_else(|| time.parse::<i64>().ok())
        .or_else(|| {
            time.parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && t.abs() < 9.0e18)
                .map(|t| t as i64)
        })
        .ok_or_else(|| format!("Timestamp(ns) \"{}\" is not a number of ns", short(time)))
}

fn parse_row(raw: RawRow, rows: &mut Rows) -> Result<Row, RowError> {
    let kind = Kind::of(trim(raw.event));
    if kind == Kind::Unknown {
        rows.count_unknown(trim(raw.event));
    }
    let subtype = Subtype::of(kind, trim(raw.event_type));
    let json;
    let mut attrs = KnownAttrs::default();
    match attr_text(raw.attr) {
        AttrText::Json(text) => {
            json = json_attr(text)?;
            for (key, value) in &json.0 {
                attrs.add(key, value);
            }
        }
        AttrText::Pairs(text) => csv_attr_pairs(text, |key, value| attrs.add(key, value))?,
    }
    let time_raw = timestamp(raw.time)?;
    let pool = pool_of(kind, subtype, raw.event_type, &attrs);
    // Sizes may be negative (early files' FREE rows): their magnitude, which must fit in u64.
    let number = |key: &str, value: Option<&str>| -> Result<Option<u64>, String> {
        value.map_or(Ok(None), |v| {
            parse_int(v)
                .and_then(|n| u64::try_from(n.unsigned_abs()).ok())
                .map(Some)
                .ok_or_else(|| format!("Attr `{key}` \"{}\" is not a 64-bit number", short(v)))
        })
    };
    let bytes = |key: &str, value: Option<&str>| -> Result<Option<u64>, String> {
        match number(key, value)? {
            Some(value) if value > crate::units::MAX_PLAUSIBLE_BYTES => Err(format!(
                "Attr `{key}` is {value} bytes, more than 1 PiB: no device holds that"
            )),
            other => Ok(other),
        }
    };
    if let Some(reason) = attrs.conflict() {
        return Err(RowError::LeftOut(reason));
    }
    let size_bytes = bytes("size", attrs.size)?.unwrap_or(0);
    let ptr = trim(raw.ptr);
    let addr = match parse_int(ptr) {
        Some(a) => u64::try_from(a)
            .map_err(|_| format!("Ptr \"{}\" is not a 64-bit address", short(ptr)))?,
        None => number("addr", attrs.addr)?.unwrap_or(0),
    };
    let name = without_quotes(trim(raw.name));
    let owner = attrs.owner.map(str::trim).filter(|o| !o.is_empty());
    let inefficient = inefficient_flags(&attrs);
    let stack = trim(without_quotes(trim(raw.python_stack)));
    let allocation_id = number("allocation_id", attrs.allocation_id)?;
    let total_bytes = bytes("total", attrs.total)?;
    // Not kept (nothing reads it), but a damaged one is an error like the others.
    bytes("used", attrs.used)?;
    let free_bytes = if kind == Kind::Snapshot {
        bytes("free", attrs.free)?
    } else {
        None
    };
    let request_bytes = bytes("req_size", attrs.req_size)?;
    let row = Row {
        id: parse_int(trim(raw.id))
            .and_then(|i| u64::try_from(i).ok())
            .unwrap_or(0),
        kind,
        subtype,
        pool,
        name: if name.is_empty() || name == "N/A" {
            None
        } else {
            Some(rows.intern(name))
        },
        time_raw,
        pid: parse_int(trim(raw.pid))
            .and_then(|p| u64::try_from(p).ok())
            .unwrap_or(0),
        tid: parse_int(trim(raw.tid))
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0),
        device: DeviceId::of(trim(raw.device)),
        addr,
        size_bytes,
        owner: owner.map(|o| rows.intern(o)),
        inefficient,
        stack: if stack.is_empty() || stack == "NA" {
            None
        } else {
            Some(rows.intern(stack))
        },
        expandable: attrs.alloc_type.is_some_and(|t| trim(t) == "create"),
        shadow: attrs.shadow.is_some_and(|t| trim(t) == "true"),
        owner_is_workspace: owner.is_some_and(|o| o.starts_with("PTA_WORKSPACE"))
            || attrs.type_.is_some_and(|t| trim(t) == "PTA_WORKSPACE"),
        ..Row::PLACEHOLDER
    }
    .with_numbers(allocation_id, total_bytes, free_bytes, request_bytes);
    // Checked last: a damaged Attr is an error above, not a missing size.
    if kind == Kind::Malloc && attrs.size.is_none() {
        return Err(RowError::LeftOut(
            "that is a MALLOC without a `size` in its Attr",
        ));
    }
    Ok(row)
}

/// The pool a row is about: MALLOC / FREE's Event Type, an operator's library (`ATB_START`: ATB;
/// `ATEN_START`: PTA's), else the `type` attr (ACCESS).
fn pool_of(kind: Kind, subtype: Subtype, event_type: &str, attrs: &KnownAttrs) -> Pool {
    match subtype {
        Subtype::Pool(p) => p,
        _ if kind == Kind::OpLaunch => {
            if trim(event_type).starts_with("ATB") {
                Pool::Atb
            } else {
                Pool::Pta
            }
        }
        _ => attrs.type_.map_or(Pool::Other, |t| Pool::of(trim(t))),
    }
}

/// msMemScope's own `inefficient_type` flags on a MALLOC row (`inefficient` in its docs).
fn inefficient_flags(attrs: &KnownAttrs) -> u8 {
    attrs.inefficient_type.or(attrs.inefficient).map_or(0, |v| {
        v.split(',')
            .map(|t| match trim(t) {
                "early_allocation" => super::EARLY_ALLOCATION,
                "late_deallocation" => super::LATE_DEALLOCATION,
                "temporary_idleness" => super::TEMPORARY_IDLENESS,
                _ => 0,
            })
            .fold(0, |a, b| a | b)
    })
}

/// `text` without the whitespace around it: `str::trim`, which most cells (ASCII, no blanks
/// at either end) pass at the cost of two comparisons.
fn trim(text: &str) -> &str {
    match (text.as_bytes().first(), text.as_bytes().last()) {
        (Some(first), Some(last)) if !first.is_ascii_graphic() || !last.is_ascii_graphic() => {
            text.trim()
        }
        _ => text,
    }
}

/// `text` without the quotes it starts and ends with (any number): `str::trim_matches('"')`,
/// a byte at a time (it is on every row's name, stack and Attr).
fn without_quotes(text: &str) -> &str {
    let bytes = text.as_bytes();
    let start = bytes.iter().position(|&b| b != b'"').unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|&b| b != b'"')
        .map_or(start, |e| e + 1);
    // Quotes are ASCII: both ends are char boundaries.
    &text[start..end]
}

/// `0x…` hex or decimal, either sign.
pub fn parse_int(text: &str) -> Option<i128> {
    let text = trim(text);
    // `N/A` and other words, on most rows' Ptr: no number starts with a letter.
    if !text
        .as_bytes()
        .first()
        .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-'))
    {
        return None;
    }
    // Most cells are plain decimals that fit in 64 bits: read without 128-bit arithmetic.
    if let Some(n) = plain_decimal(text) {
        return Some(i128::from(n));
    }
    if let Ok(n) = text.parse::<u64>() {
        return Some(i128::from(n));
    }
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        // Pointers: up to 16 hex digits, read without 128-bit arithmetic.
        if let Some(n) = plain_hex(hex) {
            return Some(i128::from(n));
        }
        if let Ok(n) = u64::from_str_radix(hex, 16) {
            return Some(i128::from(n));
        }
        return i128::from_str_radix(hex, 16).ok();
    }
    text.parse::<i128>().ok()
}

/// 1 to 19 ASCII digits, no sign (always under 2⁶⁴): ids, sizes and times, read without the
/// standard parser's sign and overflow checks. `None` for anything else.
fn plain_decimal(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() > 19 {
        return None;
    }
    // Eight digits at a time (a time has 19), then one at a time.
    let mut chunks = bytes.chunks_exact(8);
    let mut n = 0u64;
    for chunk in &mut chunks {
        let eight = u64::from_le_bytes(chunk.try_into().ok()?);
        n = n * 100_000_000 + eight_digits(eight)?;
    }
    chunks.remainder().iter().try_fold(n, |n, &b| {
        let digit = b.wrapping_sub(b'0');
        (digit <= 9).then(|| n * 10 + u64::from(digit))
    })
}

/// Eight ASCII digits, the first in the lowest byte, as a number; `None` where one is not a
/// digit. Pairs, then fours, then the eight are combined with three multiplications.
fn eight_digits(bytes: u64) -> Option<u64> {
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    const HIGH: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    // Each byte is 0x30..=0x39: its high half is 3, and adding 6 does not carry into it.
    let digits = bytes & HIGH == ZEROS && bytes.wrapping_add(0x0606_0606_0606_0606) & HIGH == ZEROS;
    if !digits {
        return None;
    }
    let values = bytes - ZEROS;
    let pairs = (values * 10 + (values >> 8)) & 0x00ff_00ff_00ff_00ff;
    let fours = (pairs * 100 + (pairs >> 16)) & 0x0000_ffff_0000_ffff;
    Some((fours * 10_000 + (fours >> 32)) & 0xffff_ffff)
}

/// 1 to 16 hex digits, no sign or prefix (always under 2⁶⁴): pointers. `None` for anything else.
fn plain_hex(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    bytes.iter().try_fold(0u64, |n, &b| {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        Some(n << 4 | u64::from(digit))
    })
}

/// `text` cut for a message.
fn short(text: &str) -> String {
    crate::quote::quoted(text)
}

/// Parses an `Attr` cell: `{k:v,...}` as the CSV writes it (values may hold commas and brackets:
/// a comma ends a value only where a `key:` follows), or the JSON object the `.db` holds.
pub fn parse_attr(cell: &str) -> Result<Attrs<'_>, String> {
    let mut pairs = Vec::new();
    match attr_text(cell) {
        AttrText::Json(text) => return json_attr(text),
        AttrText::Pairs(text) => {
            csv_attr_pairs(text, |key, value| {
                pairs.push((Cow::Borrowed(key), Cow::Borrowed(value)));
            })?;
        }
    }
    Ok(Attrs(pairs))
}

/// What an `Attr` cell holds, quotes and blanks around it removed.
enum AttrText<'a> {
    /// `{k:v,...}` as the CSV writes it (or nothing).
    Pairs(&'a str),
    /// The JSON object the `.db` holds.
    Json(&'a str),
}

fn attr_text(cell: &str) -> AttrText<'_> {
    let text = trim(without_quotes(trim(cell)));
    if text.starts_with("{\"") {
        AttrText::Json(text)
    } else {
        AttrText::Pairs(text)
    }
}

/// A `.db`'s JSON `Attr`, its values as text.
fn json_attr(text: &str) -> Result<Attrs<'static>, String> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("Attr is not valid JSON ({e}): \"{}\"", short(text)))?;
    let serde_json::Value::Object(map) = value else {
        return Err(format!("Attr is not an object: \"{}\"", short(text)));
    };
    let pairs = map
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (Cow::Owned(k), Cow::Owned(v))
        })
        .collect();
    Ok(Attrs(pairs))
}

/// Calls `pair` with each key (trimmed) and value of a CSV `Attr` (`text`: the cell without
/// quotes and blanks; empty: no pairs), in order; an error where it is not `{…}` or a pair has no
/// `:`. A comma ends a value only where a `key:` follows it.
fn csv_attr_pairs<'a>(text: &'a str, mut pair: impl FnMut(&'a str, &'a str)) -> Result<(), String> {
    if text.is_empty() {
        return Ok(());
    }
    let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) else {
        return Err(format!("Attr is not {{key:value,…}}: \"{}\"", short(text)));
    };
    let bytes = inner.as_bytes();
    let key_follows = |from: usize| -> bool {
        let rest = &bytes[from..];
        let Some(&first) = rest.first() else {
            return false;
        };
        if !(first.is_ascii_alphabetic() || first == b'_') {
            return false;
        }
        let end = rest
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b' '))
            .unwrap_or(rest.len());
        rest.get(end) == Some(&b':')
    };
    let mut take = |piece: &'a str| -> Result<(), String> {
        // `split_once(':')`, with `memchr` (a char pattern costs more than these short pairs).
        let split = memchr::memchr(b':', piece.as_bytes()).map(|k| (&piece[..k], &piece[k + 1..]));
        let Some((key, value)) = split else {
            if trim(piece).is_empty() {
                return Ok(());
            }
            return Err(format!(
                "Attr pair \"{}\" has no `:` (in \"{}\")",
                short(piece),
                short(text)
            ));
        };
        pair(trim(key), value);
        Ok(())
    };
    // A pair starts at the text's start and after each comma followed by `key:`.
    let mut start = 0;
    for comma in memchr::memchr_iter(b',', bytes) {
        if key_follows(comma + 1) {
            take(&inner[start..comma])?;
            start = comma + 1;
        }
    }
    take(&inner[start..])
}

/// The `Attr` values a row's reading uses, found in one pass over its pairs: the first value of
/// each key (as [`Attrs::get`]), and which of the keys that must agree was given twice with
/// different values.
#[derive(Default)]
struct KnownAttrs<'a> {
    size: Option<&'a str>,
    addr: Option<&'a str>,
    owner: Option<&'a str>,
    total: Option<&'a str>,
    used: Option<&'a str>,
    free: Option<&'a str>,
    req_size: Option<&'a str>,
    allocation_id: Option<&'a str>,
    inefficient_type: Option<&'a str>,
    inefficient: Option<&'a str>,
    alloc_type: Option<&'a str>,
    shadow: Option<&'a str>,
    type_: Option<&'a str>,
    /// Per key of [`KnownAttrs::MUST_AGREE`]: given again with another value.
    conflicting: [bool; 5],
}

impl<'a> KnownAttrs<'a> {
    /// Keys whose values must agree where given twice, and why a row where they do not is left
    /// out (first in this order).
    const MUST_AGREE: [(&'static str, &'static str); 5] = [
        ("size", "whose Attr gives two different `size` values"),
        ("addr", "whose Attr gives two different `addr` values"),
        ("owner", "whose Attr gives two different `owner` values"),
        ("total", "whose Attr gives two different `total` values"),
        ("used", "whose Attr gives two different `used` values"),
    ];

    fn add(&mut self, key: &str, value: &'a str) {
        let (place, agree) = match key {
            "size" => (&mut self.size, Some(0)),
            "addr" => (&mut self.addr, Some(1)),
            "owner" => (&mut self.owner, Some(2)),
            "total" => (&mut self.total, Some(3)),
            "used" => (&mut self.used, Some(4)),
            "free" => (&mut self.free, None),
            "req_size" => (&mut self.req_size, None),
            "allocation_id" => (&mut self.allocation_id, None),
            "inefficient_type" => (&mut self.inefficient_type, None),
            "inefficient" => (&mut self.inefficient, None),
            "alloc_type" => (&mut self.alloc_type, None),
            "shadow" => (&mut self.shadow, None),
            "type" => (&mut self.type_, None),
            _ => return,
        };
        match (*place, agree) {
            (None, _) => *place = Some(value),
            (Some(first), Some(k)) if trim(first) != trim(value) => self.conflicting[k] = true,
            _ => {}
        }
    }

    /// Why the row cannot be read: a key that must agree given twice with different values.
    fn conflict(&self) -> Option<&'static str> {
        Self::MUST_AGREE
            .iter()
            .zip(self.conflicting)
            .find(|(_, conflicting)| *conflicting)
            .map(|((_, reason), _)| *reason)
    }
}

#[cfg(test)]
mod tests {
    /// A recording read in pieces gives the rows, lines, text, rows left out and first error of
    /// the same file read as one stream: CRLF or LF line ends, stacks with newlines and doubled
    /// quotes, quotes inside unquoted fields, a row cut short and a damaged row near the end.
    #[test]
    fn a_recording_read_in_pieces_reads_as_one_stream() {
        use std::fmt::Write as _;
        let dir = tempfile::tempdir().expect("temp dir");
        let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)";
        let mut good = String::from(header);
        good.push_str("\r\n");
        for i in 0..3000u64 {
            let stack = if i % 3 == 0 {
                format!("\"train.py({i}): step\r\nmodel.py(7): \"\"fwd\"\"\r\n\"")
            } else {
                String::new()
            };
            // A quote inside an unquoted field is text; text after a closing quote goes on
            // unquoted (neither opens a quoted field that would run over line ends).
            let c_stack = match i % 7 {
                0 => "at::empty\" (x.cpp:1)",
                3 => "\"at::mm\" (mm.cpp:2)",
                _ => "",
            };
            let _ = write!(
                good,
                "{i},MALLOC,PTA,N/A,{},1,1,0,0x{:x},\"{{allocation_id:{i},size:512,owner:PTA@ops@aten}}\",{stack},{c_stack}\r\n",
                1_000 + i,
                0x10_0000 + i * 512
            );
            if i == 1234 {
                good.push_str("9999,MALLOC,PTA,N/A,5,1,1,0\r\n");
            }
        }
        let mut bad = good.clone();
        bad.push_str("3001,MALLOC,PTA,N/A,soon,1,1,0,0x10,\"{size:4}\",,\r\n");
        let lf = |text: &str| text.replace("\r\n", "\n");
        for (name, text) in [
            ("good.csv", good.clone()),
            ("bad.csv", bad.clone()),
            ("good-lf.csv", lf(&good)),
            ("bad-lf.csv", lf(&bad)),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, &text).expect("written");
            // Every record has its place in the rooms, one more for a last record without a
            // line end, and no more (line ends inside quoted stacks and CRLF's `\n` are not
            // record ends): no gaps to close in a file without empty lines.
            let body = (header.len()
                + 1
                + usize::from(name.starts_with("good.") || name.starts_with("bad.")))
                as u64;
            let starts =
                super::piece_starts(&path, (body, text.len() as u64), 2, 7, 0).expect("scanned");
            let records = if name.starts_with("bad") { 3002 } else { 3001 };
            assert_eq!(
                starts.iter().map(|s| s.rows_at_most).sum::<usize>(),
                records + 1,
                "{name}"
            );
            assert!(starts.len() > 1, "{name}");
            assert_eq!(
                starts.iter().map(|s| s.line).collect::<Vec<_>>(),
                lines_at(&text, &starts),
                "{name}"
            );
            let read = |parallel_from: u64| {
                let mut rows = super::Rows::default();
                super::read_csv_in(&path, &mut rows, parallel_from).map(|()| rows)
            };
            match (read(u64::MAX), read(0)) {
                (Ok(one), Ok(pieces)) => {
                    assert_eq!(one.rows.len(), 3000);
                    let differ = one
                        .origin
                        .iter()
                        .zip(&pieces.origin)
                        .position(|(a, b)| a != b);
                    assert_eq!(
                        (one.origin.len(), differ),
                        (pieces.origin.len(), None),
                        "{:?}",
                        differ.map(|k| (one.origin[k], pieces.origin[k]))
                    );
                    assert_eq!(one.left_out, pieces.left_out);
                    assert_eq!(one.left_out[0].2, 2061);
                    for (a, b) in one.rows.iter().zip(&pieces.rows) {
                        assert_eq!((a.id, a.time_raw, a.addr), (b.id, b.time_raw, b.addr));
                        let text = |rows: &super::Rows, id: Option<u32>| {
                            id.map(|i| rows.text(i).to_string())
                        };
                        assert_eq!(text(&one, a.stack), text(&pieces, b.stack));
                        assert_eq!(text(&one, a.owner), text(&pieces, b.owner));
                    }
                }
                (Err(one), Err(pieces)) => {
                    assert_eq!(one.to_string(), pieces.to_string());
                    assert!(one.to_string().contains("line 5003"), "{one}");
                }
                (one, pieces) => panic!("{name}: {:?} / {:?}", one.err(), pieces.err()),
            }
        }
    }

    /// A damaged row after empty lines is named by the line it is on, with LF and CRLF line
    /// ends (the csv crate's count was one line short per line end skipped before a record).
    /// The line each piece starts on, counted in `text`.
    fn lines_at(text: &str, starts: &[super::PieceStart]) -> Vec<u64> {
        starts
            .iter()
            .map(|s| {
                1 + memchr::memchr_iter(b'\n', &text.as_bytes()[..s.offset as usize]).count() as u64
            })
            .collect()
    }

    /// A cut guessed where a line inside a quoted field looks like a row is found wrong (the
    /// segment before it ends inside quotes) and the body scanned again from the top.
    #[test]
    fn a_cut_guessed_inside_a_quoted_field_is_scanned_again() {
        let dir = tempfile::tempdir().expect("temp dir");
        let header = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";
        let fake_rows = "7,MALLOC,PTA,N/A,2,1,1,0,0x20,x\n".repeat(20_000);
        let text = format!(
            "{header}1,MALLOC,PTA,N/A,1,1,1,0,0x10,\"{{size:4}}\",\"{fake_rows}\",\n\
             2,FREE,PTA,N/A,3,1,1,0,0x10,\"{{size:4}}\",,\n"
        );
        let path = dir.path().join("fake_rows.csv");
        std::fs::write(&path, &text).expect("written");
        let starts = super::piece_starts(&path, (header.len() as u64, text.len() as u64), 2, 8, 0)
            .expect("scanned");
        assert_eq!(starts.iter().map(|s| s.rows_at_most).sum::<usize>(), 3);
        assert_eq!(
            starts.iter().map(|s| s.line).collect::<Vec<_>>(),
            lines_at(&text, &starts)
        );
        let mut rows = super::Rows::default();
        super::read_csv_in(&path, &mut rows, 0).expect("read");
        assert_eq!(rows.rows.len(), 2);
        assert_eq!(rows.origin, [(0, 2), (0, 20_003)]);
    }

    #[test]
    fn rows_after_empty_lines_are_named_by_their_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n\
                    1,MALLOC,PTA,N/A,1000,1,1,0,0x10,\"{size:512,owner:PTA@ops}\",\"a.py(1): f\nb.py(2): g\",\n\
                    \n\
                    \n\
                    2,MALLOC,PTA,N/A,soon,1,1,0,0x20,\"{size:4}\",,\n";
        for (name, text) in [
            ("lf.csv", text.to_string()),
            ("crlf.csv", text.replace('\n', "\r\n")),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("written");
            for parallel_from in [u64::MAX, 0] {
                let mut rows = super::Rows::default();
                let error =
                    super::read_csv_in(&path, &mut rows, parallel_from).expect_err("a damaged row");
                assert!(error.to_string().contains("line 6:"), "{name}: {error}");
            }
        }
    }

    use super::{parse_attr, parse_int};

    #[test]
    fn attrs_keep_commas_and_brackets_inside_values() {
        let a = parse_attr(
            "\"{allocation_id:1,addr:0x0000000000003039,size:10,type:PTA,dtype:torch.float16,shape:torch.Size([1,5])}\"",
        )
        .expect("valid");
        assert_eq!(a.get("shape"), Some("torch.Size([1,5])"));
        assert_eq!(a.get("size"), Some("10"));
        let b =
            parse_attr("{inefficient_type:early_allocation,temporary_idleness,owner:PTA@gradient}")
                .expect("valid");
        assert_eq!(
            b.get("inefficient_type"),
            Some("early_allocation,temporary_idleness")
        );
        assert_eq!(b.get("owner"), Some("PTA@gradient"));
        let old = parse_attr("{addr:20617990504448,size:6356992,owner:,MID:7}").expect("valid");
        assert_eq!(old.get("owner"), Some(""));
        assert_eq!(old.get("MID"), Some("7"));
        let json =
            parse_attr(r#"{"allocation_id":"4","addr":"0x000012c080000000","size":6356992}"#)
                .expect("valid");
        assert_eq!(json.get("size"), Some("6356992"));
        assert!(parse_attr("{no colon here}").is_err());
        assert!(parse_attr("allocation_id:1").is_err());
        assert!(parse_attr("{\"a\":").is_err());
        assert_eq!(parse_attr("").expect("empty").0.len(), 0);
    }

    /// The byte-wise trims cut what `str::trim` and `trim_matches('"')` cut.
    #[test]
    fn trims_cut_as_the_standard_ones() {
        for text in [
            "",
            " ",
            "\"",
            "\"\"",
            "a",
            " a ",
            "\"a\"",
            "\"\"a\"",
            " \"a\" ",
            "\t中文\u{3000}",
            "\u{a0}x",
            "x\u{2003}",
            "\"中\"",
            "N/A",
            "\"\"\"",
        ] {
            assert_eq!(super::trim(text), text.trim(), "{text:?}");
            assert_eq!(
                super::without_quotes(text),
                text.trim_matches('"'),
                "{text:?}"
            );
        }
    }

    #[test]
    fn numbers_are_hex_or_decimal() {
        assert_eq!(parse_int("0x000012c041400000"), Some(0x12c0_4140_0000));
        assert_eq!(parse_int("20617990504448"), Some(20_617_990_504_448));
        assert_eq!(parse_int("-512"), Some(-512));
        assert_eq!(parse_int("N/A"), None);
        assert_eq!(parse_int(" +7 "), Some(7));
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("x1"), None);
        // The fast paths read what the standard parsers read, and leave the rest to them.
        let eights: Vec<String> = (0..64u8)
            .map(|k| {
                let mut digits = *b"1234567890123456789";
                digits[usize::from(k % 19)] =
                    [b'/', b':', b'a', b' ', b'0' + k % 10, 0x80][usize::from(k % 6)];
                String::from_utf8_lossy(&digits).into_owned()
            })
            .collect();
        for text in eights.iter().map(String::as_str).chain([
            "0",
            "7",
            "0042",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "+5",
            "-5",
            "1_0",
            "12a",
            "0x0",
            "0xffffffffffffffff",
            "0x1ffffffffffffffff",
            "0xFfA",
            "0xg",
            "0x",
            "0x+1",
            "0x-1",
            "٣",
            "12345678",
            "98765432109876543",
            "00000000",
            "99999999",
        ]) {
            // Both read the cell without the blanks around it.
            let text = text.trim();
            let standard = text.parse::<i128>().ok().or_else(|| {
                text.strip_prefix("0x")
                    .and_then(|h| i128::from_str_radix(h, 16).ok())
            });
            assert_eq!(parse_int(text), standard, "{text}");
            assert_eq!(
                super::timestamp(text).ok(),
                text.parse::<i64>().ok().or_else(|| text
                    .parse::<f64>()
                    .ok()
                    .filter(|t| t.is_finite() && t.abs() < 9.0e18)
                    .map(|t| t as i64)),
                "{text}"
            );
        }
    }
}

//! Reading text tables with a bound on the line being read: a CSV line longer than
//! [`MAX_LINE_BYTES`] is refused as it streams in, before a parser buffers it whole (a 2 GB
//! line once took 4.2 GB and 19 s before the field cap saw it; a dump that is a link to
//! `/dev/zero` grew until killed).

use std::io::{self, Read};

/// The longest line a table may have. msMemScope's longest rows (a deep Python stack) are a few
/// hundred KiB; the fields themselves are capped lower after parsing.
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// `inner`, failing with [`io::ErrorKind::InvalidData`] once more than [`MAX_LINE_BYTES`] come
/// without a line end.
pub struct LineCapped<R> {
    inner: R,
    since_line_end: u64,
    /// Line ends read so far: the line being read is one more.
    line_ends: u64,
}

impl<R> LineCapped<R> {
    pub fn new(inner: R) -> Self {
        Self::after_lines(inner, 0)
    }

    /// `inner`, a part of a file that starts after `line_ends` line ends (its messages name the
    /// file's lines).
    pub fn after_lines(inner: R, line_ends: u64) -> Self {
        Self {
            inner,
            since_line_end: 0,
            line_ends,
        }
    }
}

impl<R: Read> Read for LineCapped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let read = &buf[..n];
        self.line_ends += memchr::memchr_iter(b'\n', read).count() as u64;
        self.since_line_end = match memchr::memrchr(b'\n', read) {
            Some(i) => (n - 1 - i) as u64,
            None => self.since_line_end + n as u64,
        };
        if self.since_line_end > MAX_LINE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "line {}: a line of more than {}: not a table (a stream with no line \
                     ends?)",
                    self.line_ends + 1,
                    crate::units::format_bytes(MAX_LINE_BYTES as i64)
                ),
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::{LineCapped, MAX_LINE_BYTES};

    #[test]
    fn lines_within_the_bound_pass_and_a_longer_one_fails_as_it_streams() {
        let mut text = b"a,b\n".repeat(1000);
        let mut out = Vec::new();
        LineCapped::new(text.as_slice())
            .read_to_end(&mut out)
            .expect("short lines");
        assert_eq!(out, text);
        // Endless zeros: refused after the bound, not after the end of the stream.
        let mut zeros = LineCapped::new(std::io::repeat(0));
        let mut read = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        let err = loop {
            match zeros.read(&mut buf) {
                Ok(n) => read += n as u64,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(read <= MAX_LINE_BYTES);
        text.clear();
    }
}

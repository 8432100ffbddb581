//! NDJSON line splitting (docs/protocol.md §1): `\n`-separated lines under a
//! size cap, a line over it discarded up to its `\n` and reported, never
//! holding more than the cap of one line. I/O free but for [`LineReader`]
//! over any `BufRead`; the broker's async reader drives the same
//! [`Splitter`], and the fuzz targets run this code.

use std::io::{self, BufRead};

/// One read from a [`LineReader`].
#[derive(Debug, PartialEq)]
pub enum Line<'a> {
    /// A line, without its `\n`.
    Line(&'a [u8]),
    /// A line longer than the cap, discarded up to its `\n`.
    TooLarge,
    /// End of input.
    Eof,
}

/// The line-splitting rules, shared by the blocking reader here and the
/// broker's async one: collect bytes up to `\n`; past `max` bytes, stop
/// collecting and report the line as too large once its `\n` (or the end
/// of input) arrives.
#[derive(Debug)]
pub struct Splitter {
    buf: Vec<u8>,
    max: usize,
    discarding: bool,
    /// Report a line as too large as soon as it passes `max`, without
    /// waiting for its end (before a socket handshake: the connection is
    /// closed then, so there is nothing to resynchronise).
    eager: bool,
    /// The input ended during this read (see [`Splitter::take`]).
    ended: bool,
}

/// What a [`Splitter::feed`] made of its bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The chunk ended inside a line.
    More,
    /// A whole line is ready ([`Splitter::line`]).
    Line,
    /// A line longer than `max` ended.
    TooLarge,
}

impl Splitter {
    /// Lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            max,
            discarding: false,
            eager: false,
            ended: false,
        }
    }

    /// Changes the line bound from the next line on; `eager` reports a
    /// line over it as soon as it passes the bound.
    pub fn set_max(&mut self, max: usize, eager: bool) {
        self.max = max;
        self.eager = eager;
    }

    /// Begins a new line.
    pub fn start(&mut self) {
        self.buf.clear();
        self.discarding = false;
        self.ended = false;
    }

    /// Takes what it can of `avail`: returns the bytes used and what they made.
    pub fn feed(&mut self, avail: &[u8]) -> (usize, Step) {
        // memchr: a 30 MB line is scanned with SIMD, not byte by byte.
        let (chunk, found) = match memchr::memchr(b'\n', avail) {
            Some(i) => (&avail[..i], Some(i)),
            None => (avail, None),
        };
        if !self.discarding {
            if self.buf.len() + chunk.len() > self.max {
                self.discarding = true;
                self.buf = Vec::new();
                if self.eager {
                    return (chunk.len(), Step::TooLarge);
                }
            } else {
                self.buf.extend_from_slice(chunk);
            }
        }
        match found {
            None => (chunk.len(), Step::More),
            Some(i) if self.discarding => (i + 1, Step::TooLarge),
            Some(i) => (i + 1, Step::Line),
        }
    }

    /// Takes what a fill of the reader gave (`avail`; empty: the input
    /// ended): returns the bytes used and whether a read is done, its line
    /// then in [`Splitter::done`]. The one loop body of both readers.
    pub fn take(&mut self, avail: &[u8]) -> (usize, bool) {
        if avail.is_empty() {
            self.ended = true;
            return (0, true);
        }
        let (used, step) = self.feed(avail);
        (used, step != Step::More)
    }

    /// What the read that [`Splitter::take`] finished gave.
    pub fn done(&self) -> Line<'_> {
        if self.ended {
            self.at_eof()
        } else if self.discarding {
            Line::TooLarge
        } else {
            Line::Line(&self.buf)
        }
    }

    /// The line completed by the last [`Step::Line`], without its `\n`.
    pub fn line(&self) -> &[u8] {
        &self.buf
    }

    /// What the input held when it ended.
    pub fn at_eof(&self) -> Line<'_> {
        if self.discarding {
            Line::TooLarge
        } else if self.buf.is_empty() {
            Line::Eof
        } else {
            Line::Line(&self.buf)
        }
    }
}

/// Reads `\n`-separated lines, discarding (and reporting) any longer than
/// `max` bytes without ever holding more than `max` bytes of one.
pub struct LineReader<R> {
    inner: R,
    split: Splitter,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of at most `max` bytes out of `inner`.
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            split: Splitter::new(max),
        }
    }

    /// The next line.
    pub fn next_line(&mut self) -> io::Result<Line<'_>> {
        self.split.start();
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let (used, done) = self.split.take(avail);
            self.inner.consume(used);
            if done {
                return Ok(self.split.done());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_discarded_and_reading_resumes() {
        let input = b"short\nthis-line-is-too-long\n\nlast".to_vec();
        let mut r = LineReader::new(io::BufReader::with_capacity(4, &input[..]), 8);
        assert_eq!(r.next_line().unwrap(), Line::Line(b"short"));
        assert_eq!(r.next_line().unwrap(), Line::TooLarge);
        assert_eq!(r.next_line().unwrap(), Line::Line(b""));
        assert_eq!(r.next_line().unwrap(), Line::Line(b"last"));
        assert_eq!(r.next_line().unwrap(), Line::Eof);
    }

    #[test]
    fn a_too_long_last_line_is_reported_at_the_end_of_input() {
        let input = b"ok\n0123456789".to_vec();
        let mut r = LineReader::new(io::BufReader::with_capacity(4, &input[..]), 8);
        assert_eq!(r.next_line().unwrap(), Line::Line(b"ok"));
        assert_eq!(r.next_line().unwrap(), Line::TooLarge);
        assert_eq!(r.next_line().unwrap(), Line::Eof);
    }

    #[test]
    fn a_line_of_exactly_max_bytes_passes() {
        let input = b"12345678\n123456789\n".to_vec();
        let mut r = LineReader::new(&input[..], 8);
        assert_eq!(r.next_line().unwrap(), Line::Line(b"12345678"));
        assert_eq!(r.next_line().unwrap(), Line::TooLarge);
    }
}

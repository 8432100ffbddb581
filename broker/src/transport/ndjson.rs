//! NDJSON framing (PROTOCOL.md §1.1): reading lines with a size cap, and
//! writing the outbox's typed items as JSON lines.

use crate::delivery::Outgoing;
use a2a_proto::jsonrpc::{write_notification, write_response, write_response_body};
use a2a_proto::limits::A2A_MAX_OUT_FRAME_BYTES;
use a2a_proto::types::Notification;
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

/// The line-splitting rules, shared by the blocking and the async reader:
/// collect bytes up to `\n`; past `max` bytes, stop collecting and report
/// the line as too large once its `\n` (or the end of input) arrives.
struct Splitter {
    buf: Vec<u8>,
    max: usize,
    discarding: bool,
    /// Report a line as too large as soon as it passes `max`, without
    /// waiting for its end (before a socket handshake: the connection is
    /// closed then, so there is nothing to resynchronise).
    eager: bool,
}

enum Step {
    /// The chunk ended inside a line.
    More,
    /// A whole line is in `buf`.
    Line,
    /// A line longer than `max` ended.
    TooLarge,
}

impl Splitter {
    fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            max,
            discarding: false,
            eager: false,
        }
    }

    fn start(&mut self) {
        self.buf.clear();
        self.discarding = false;
    }

    /// Takes what it can of `avail`: returns the bytes used and what they made.
    fn feed(&mut self, avail: &[u8]) -> (usize, Step) {
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

    /// What the input held when it ended.
    fn at_eof(&self) -> Line<'_> {
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
            if avail.is_empty() {
                return Ok(self.split.at_eof());
            }
            let (used, step) = self.split.feed(avail);
            self.inner.consume(used);
            match step {
                Step::More => {}
                Step::Line => return Ok(Line::Line(&self.split.buf)),
                Step::TooLarge => return Ok(Line::TooLarge),
            }
        }
    }
}

/// The async twin of [`LineReader`], for socket connections.
pub struct AsyncLineReader<R> {
    inner: R,
    split: Splitter,
}

impl<R: tokio::io::AsyncBufRead + Unpin> AsyncLineReader<R> {
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            split: Splitter::new(max),
        }
    }

    /// Changes the line bound from the next line on; `eager` reports a
    /// line over it as soon as it passes the bound (see `Splitter::eager`).
    pub fn set_max(&mut self, max: usize, eager: bool) {
        self.split.max = max;
        self.split.eager = eager;
    }

    /// The next line; same rules as [`LineReader::next_line`].
    pub async fn next_line(&mut self) -> io::Result<Line<'_>> {
        use tokio::io::AsyncBufReadExt;
        self.split.start();
        loop {
            let avail = self.inner.fill_buf().await?;
            if avail.is_empty() {
                return Ok(self.split.at_eof());
            }
            let (used, step) = self.split.feed(avail);
            self.inner.consume(used);
            match step {
                Step::More => {}
                Step::Line => return Ok(Line::Line(&self.split.buf)),
                Step::TooLarge => return Ok(Line::TooLarge),
            }
        }
    }
}

/// Appends one outbox item as a JSON line (a batch as one array line),
/// never longer than `A2A_MAX_OUT_FRAME_BYTES` (§1.1): a response that
/// would be is answered `-32603` instead, and in a batch each response that
/// would take the reply past the bound is replaced by `-32600`.
pub fn write_outgoing(out: &mut Vec<u8>, item: &Outgoing) -> io::Result<()> {
    let start = out.len();
    match item {
        Outgoing::Response(r) => {
            write_response(out, &r.id, r.result.as_ref())?;
            if out.len() - start > A2A_MAX_OUT_FRAME_BYTES {
                out.truncate(start);
                write_response::<_, ()>(
                    out,
                    &r.id,
                    Err(&super::frame_limit::response_too_large()),
                )?;
            }
            Ok(())
        }
        Outgoing::Batch(rs) => {
            out.push(b'[');
            for (i, r) in rs.iter().enumerate() {
                let at = out.len();
                if i > 0 {
                    out.push(b',');
                }
                write_response_body(out, &r.id, r.result.as_ref())?;
                // Room for the closing `]\n` and for the remaining
                // responses' replacements, which are small.
                if out.len() - start + 2 + 256 * (rs.len() - i) > A2A_MAX_OUT_FRAME_BYTES {
                    out.truncate(at);
                    if i > 0 {
                        out.push(b',');
                    }
                    let e = super::frame_limit::batch_reply_too_large();
                    write_response_body::<_, ()>(out, &r.id, Err(&e))?;
                }
            }
            out.extend_from_slice(b"]\n");
            Ok(())
        }
        Outgoing::Fatal(e) => write_response::<_, ()>(out, &a2a_proto::jsonrpc::Id::Null, Err(e)),
        Outgoing::Event(n) => {
            match &**n {
                Notification::TaskEvent(p) => {
                    write_notification(out, a2a_proto::methods::TASK_EVENT, p)?
                }
                Notification::Push(p) => write_notification(out, a2a_proto::methods::PUSH, p)?,
                Notification::Lagged(p) => write_notification(out, a2a_proto::methods::LAGGED, p)?,
            }
            // The task bounds keep every event far below this; one that is
            // not is never written (a client may resubscribe for it).
            if out.len() - start > A2A_MAX_OUT_FRAME_BYTES {
                out.truncate(start);
            }
            Ok(())
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
    fn a_line_of_exactly_max_bytes_passes() {
        let input = b"12345678\n123456789\n".to_vec();
        let mut r = LineReader::new(&input[..], 8);
        assert_eq!(r.next_line().unwrap(), Line::Line(b"12345678"));
        assert_eq!(r.next_line().unwrap(), Line::TooLarge);
    }
}

//! A broker's NDJSON output cut into lines by the client's wire core
//! (`a2a_client::wire`, docs/protocol.md §1 Framing), for the kit's
//! connections ([`Conn`](crate::Conn), [`RawConn`](crate::raw::RawConn))
//! and transcripts: the kit keeps no splitter of its own, so what it reads
//! is framed (bounds, `\r\n`, blank lines) as every client of the broker
//! frames it.

use a2a_client::wire::{Framer, Ndjson, WireError};
use std::io::Read;

/// Bytes asked of each read.
const READ_CHUNK: usize = 1 << 20;

/// Why a stream of lines stopped early.
#[derive(Debug)]
pub enum LinesEnd {
    /// A line the core refuses (past the bound the broker keeps, §9).
    Frame(WireError),
    /// The reader failed.
    Io(std::io::Error),
    /// Bytes after the last line end when the stream closed.
    Partial(usize),
}

impl std::fmt::Display for LinesEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinesEnd::Frame(e) => write!(f, "{e}"),
            LinesEnd::Io(e) => write!(f, "read failed: {e}"),
            LinesEnd::Partial(n) => write!(f, "{n} bytes after the last line end"),
        }
    }
}

/// Reads `r` until it ends, handing each line (without its line end) to
/// `each` until `each` returns false. Blank lines carry nothing and are
/// skipped. `Ok` at a clean end of input (or when `each` stopped); the
/// reason otherwise, after every whole line before it was handed over.
pub fn for_each_line(
    mut r: impl Read,
    mut each: impl FnMut(&[u8]) -> bool,
) -> Result<(), LinesEnd> {
    let mut framer = Framer::<Ndjson>::new();
    loop {
        loop {
            match framer.next_frame() {
                Ok(Some(line)) => {
                    if !each(line) {
                        return Ok(());
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(LinesEnd::Frame(e)),
            }
        }
        let n = match r.read(framer.read_buf(READ_CHUNK)) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LinesEnd::Io(e)),
        };
        if n == 0 {
            return match framer.buffered() {
                0 => Ok(()),
                left => Err(LinesEnd::Partial(left)),
            };
        }
        framer.filled(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes `step` at a time.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(self.1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn lines_of(bytes: &[u8], step: usize) -> (Vec<String>, Result<(), LinesEnd>) {
        let mut got = Vec::new();
        let end = for_each_line(Trickle(bytes, step), |l| {
            got.push(String::from_utf8_lossy(l).into_owned());
            true
        });
        (got, end)
    }

    #[test]
    fn lines_split_at_any_read_size_come_out_whole() {
        let bytes = b"{\"a\":1}\n\n{\"b\":\"x\\ny\"}\r\n{\"c\":[1,2]}\n";
        for step in 1..bytes.len() + 1 {
            let (got, end) = lines_of(bytes, step);
            assert!(end.is_ok(), "step {step}: {end:?}");
            assert_eq!(
                got,
                ["{\"a\":1}", "{\"b\":\"x\\ny\"}", "{\"c\":[1,2]}"],
                "step {step}"
            );
        }
    }

    #[test]
    fn a_cut_last_line_is_reported_after_the_whole_ones() {
        let (got, end) = lines_of(b"{\"a\":1}\n{\"b\":", 4);
        assert_eq!(got, ["{\"a\":1}"]);
        assert!(matches!(end, Err(LinesEnd::Partial(5))), "{end:?}");
    }

    #[test]
    fn the_caller_can_stop_early() {
        let mut n = 0;
        let end = for_each_line(&b"1\n2\n3\n"[..], |_| {
            n += 1;
            n < 2
        });
        assert!(end.is_ok());
        assert_eq!(n, 2);
    }
}

//! A Server-Sent Events decoder for the streams a remote agent answers
//! `SendStreamingMessage` and `SubscribeToTask` with: bytes in, the `data`
//! of each event out (WHATWG "event stream" rules: lines end in LF, CRLF or
//! CR; `data:` lines of one event are joined with LF; a blank line ends the
//! event; comments and other fields are ignored).
//!
//! Bounded: a remote that never ends a line or an event cannot make the
//! gateway hold more than `max_event` bytes for it.

/// Why a stream could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// One event (or one unterminated line) grew past the bound.
    #[error("event stream: an event exceeds {0} bytes")]
    TooLarge(usize),
    /// An event's data was not UTF-8.
    #[error("event stream: data is not UTF-8")]
    NotUtf8,
}

/// Incremental decoder: feed it chunks as they arrive, collect events.
#[derive(Debug)]
pub struct SseDecoder {
    /// The bytes of the line not yet ended.
    line: Vec<u8>,
    /// The data lines of the event not yet ended.
    data: Vec<u8>,
    /// Whether the event being read has any `data` field (an event with
    /// none is not dispatched).
    has_data: bool,
    /// A CR ended the last line: a LF right after it belongs to it.
    after_cr: bool,
    max_event: usize,
}

impl SseDecoder {
    /// A decoder that refuses events (and lines) over `max_event` bytes.
    pub fn new(max_event: usize) -> SseDecoder {
        SseDecoder {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            after_cr: false,
            max_event,
        }
    }

    /// Decodes `chunk`, appending the data of every event it completes to
    /// `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<String>) -> Result<(), SseError> {
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(out)?;
                }
                _ => {
                    if self.line.len() + self.data.len() >= self.max_event {
                        return Err(SseError::TooLarge(self.max_event));
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<String>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                let data = std::mem::take(&mut self.data);
                self.has_data = false;
                out.push(String::from_utf8(data).map_err(|_| SseError::NotUtf8)?);
            }
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(0) => return Ok(()), // a comment (keep-alive)
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
            if self.data.len() > self.max_event {
                return Err(SseError::TooLarge(self.max_event));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_chunks(input: &[u8], size: usize) -> Vec<String> {
        let mut d = SseDecoder::new(1 << 20);
        let mut out = Vec::new();
        for chunk in input.chunks(size) {
            d.feed(chunk, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn events_are_the_same_whatever_the_chunking() {
        let input = b": keep-alive\n\ndata: {\"a\":1}\n\nevent: x\r\ndata:{\"b\":2}\r\n\r\ndata: l1\rdata: l2\r\r";
        let want = vec!["{\"a\":1}", "{\"b\":2}", "l1\nl2"];
        for size in [1, 2, 3, 7, input.len()] {
            assert_eq!(decode_in_chunks(input, size), want, "chunk size {size}");
        }
    }

    #[test]
    fn an_event_without_data_or_without_its_blank_line_is_not_dispatched() {
        assert!(decode_in_chunks(b"event: ping\n\n", 4).is_empty());
        assert!(decode_in_chunks(b"data: half", 4).is_empty());
    }

    #[test]
    fn an_unbounded_line_is_refused() {
        let mut d = SseDecoder::new(8);
        let mut out = Vec::new();
        assert_eq!(
            d.feed(b"data: 0123456789", &mut out),
            Err(SseError::TooLarge(8))
        );
        let mut d = SseDecoder::new(8);
        assert_eq!(
            d.feed(b"data: 0123\ndata: 4567\n", &mut out),
            Err(SseError::TooLarge(8))
        );
    }

    #[test]
    fn invalid_utf8_is_an_error_not_a_panic() {
        let mut d = SseDecoder::new(64);
        let mut out = Vec::new();
        assert_eq!(
            d.feed(b"data: \xff\xfe\n\n", &mut out),
            Err(SseError::NotUtf8)
        );
    }
}

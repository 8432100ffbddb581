//! The raw baseline of the stdio benchmarks: the least a JSON-RPC server on
//! a pipe can do per request.
//!
//! `raw_echo LEN` reads NDJSON lines from stdin, parses each one into a
//! `serde_json::Value` (the parse every JSON-RPC server pays), and answers
//! `{"jsonrpc":"2.0","id":<its id>,"result":{"pad":"xxx…"}}` padded to `LEN`
//! bytes (without the `\n`): the size of the broker's real response, so both
//! sides move the same bytes through the same kind of pipe. Output is
//! buffered and flushed only when the input has drained (when the next read
//! would block), the same batching the broker's stdout writer does.

use std::io::{self, BufRead, BufReader, BufWriter, Write};

fn main() -> io::Result<()> {
    let len: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    let stdin = io::stdin().lock();
    let mut input = BufReader::with_capacity(256 * 1024, stdin);
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut line = Vec::with_capacity(4096);
    let mut resp = Vec::with_capacity(len + 64);
    loop {
        if input.buffer().is_empty() {
            // The next read may block: hand over what is answered so far.
            out.flush()?;
        }
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let id = match serde_json::from_slice::<serde_json::Value>(&line) {
            Ok(v) => v.get("id").cloned().unwrap_or(serde_json::Value::Null),
            Err(_) => serde_json::Value::Null,
        };
        resp.clear();
        resp.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        serde_json::to_writer(&mut resp, &id)?;
        resp.extend_from_slice(b",\"result\":{\"pad\":\"");
        let tail = b"\"}}";
        let pad = len.saturating_sub(resp.len() + tail.len());
        resp.resize(resp.len() + pad, b'x');
        resp.extend_from_slice(tail);
        resp.push(b'\n');
        out.write_all(&resp)?;
    }
    out.flush()
}

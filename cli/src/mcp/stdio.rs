//! The MCP server's stdio, between the host and `rmcp`. `rmcp` drops a
//! line that is not JSON without a word (and one over its length bound),
//! so the host would wait for an answer forever: JSON-RPC 2.0 answers such
//! a line with a `-32700` parse error (`-32600` for the over-long one) whose
//! id is null, and the server goes on serving. So every line the host
//! writes is checked here first; those that parse go on to `rmcp` through
//! an in-memory pipe, the others are answered here. Every line for the
//! host, `rmcp`'s and these errors, goes through one writer, whole, so that
//! they never interleave within a line.

use rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
use serde_json::json;
use serde_json::value::RawValue;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line read from the host, with its newline: `rmcp`'s own
/// bound, so that a line passed on is one `rmcp` reads.
pub const MAX_LINE: usize = DEFAULT_MAX_LINE_LENGTH;

/// Bytes buffered in the pipe each way between this filter and `rmcp`.
const PIPE_BYTES: usize = 64 * 1024;

/// Lines queued for stdout (each is whole, so this bounds the lines, not
/// their bytes: `rmcp` writes one answer at a time per request).
const LINES_QUEUED: usize = 64;

/// JSON-RPC 2.0's codes for a line that is not JSON, and for one that is
/// not a request (here: too long to read).
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// `rmcp`'s end of the stdio, and the task that writes stdout.
pub struct Stdio {
    /// What `rmcp` serves on: it reads the host's lines that parse from
    /// it and writes its own lines into it.
    pub transport: DuplexStream,
    /// Ends once stdin is closed and every line `rmcp` wrote is on stdout.
    pub flushed: JoinHandle<()>,
}

/// Starts the filter on this process's stdin and stdout (in the current
/// runtime).
pub fn start() -> Stdio {
    let (stdin, stdout) = rmcp::transport::stdio();
    start_on(stdin, stdout)
}

fn start_on<R, W>(input: R, output: W) -> Stdio
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (transport, ours) = tokio::io::duplex(PIPE_BYTES);
    let (from_rmcp, to_rmcp) = tokio::io::split(ours);
    let (lines, queued) = mpsc::channel(LINES_QUEUED);
    tokio::spawn(read_host(input, to_rmcp, lines.clone()));
    tokio::spawn(read_rmcp(from_rmcp, lines));
    let flushed = tokio::spawn(write_host(output, queued));
    Stdio { transport, flushed }
}

/// Reads the host's lines: passes on those that parse, answers the others.
async fn read_host<R, W>(input: R, mut to_rmcp: W, lines: mpsc::Sender<Vec<u8>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let answer = match next_line(&mut input, &mut line, MAX_LINE).await {
            Ok(Line::End) | Err(_) => break,
            Ok(Line::TooLong(len)) => error_line(
                INVALID_REQUEST,
                &format!("request too large: a line of {len} bytes or more, over the bound of {MAX_LINE}"),
            ),
            Ok(Line::Whole) => match check(&line) {
                Checked::Blank => continue,
                Checked::Json(json) => {
                    let mut pass = json.to_vec();
                    pass.push(b'\n');
                    if to_rmcp.write_all(&pass).await.is_err() {
                        break; // rmcp is gone
                    }
                    continue;
                }
                Checked::NotJson(e) => error_line(PARSE_ERROR, &format!("parse error: {e}")),
                Checked::Invalid { id, code, message } => answer_line(&id, code, message),
            },
        };
        if lines.send(answer).await.is_err() {
            break;
        }
    }
    // End of stdin: rmcp reads the end of its input and stops.
    let _ = to_rmcp.shutdown().await;
}

/// Copies `rmcp`'s lines to the writer, one whole line at a time.
async fn read_rmcp<R: AsyncRead + Unpin>(from_rmcp: R, lines: mpsc::Sender<Vec<u8>>) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    loop {
        let mut line = Vec::new();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if lines.send(line).await.is_err() {
                    break;
                }
            }
        }
    }
}

/// Writes each queued line to the host and flushes it.
async fn write_host<W: AsyncWrite + Unpin>(mut output: W, mut queued: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = queued.recv().await {
        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            break;
        }
    }
}

enum Line {
    /// A line is in the buffer (its newline included, if it had one).
    Whole,
    /// A line of at least this many bytes was skipped, up to its newline.
    TooLong(usize),
    /// The end of the input.
    End,
}

/// Reads one line into `buf`, never holding more than `max` bytes of it: a
/// longer line is skipped to its end (as `rmcp` bounds its own).
async fn next_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let mut skipped = 0usize;
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            // A last line without its newline is still a line.
            return Ok(match (skipped, buf.is_empty()) {
                (0, true) => Line::End,
                (0, false) => Line::Whole,
                (n, _) => Line::TooLong(n),
            });
        }
        let newline = memchr::memchr(b'\n', available);
        let take = newline.map_or(available.len(), |i| i + 1);
        if skipped == 0 && buf.len() + take <= max {
            buf.extend_from_slice(&available[..take]);
        } else {
            skipped = skipped.max(buf.len()) + take;
            buf.clear();
        }
        r.consume(take);
        if newline.is_some() {
            return Ok(if skipped == 0 {
                Line::Whole
            } else {
                Line::TooLong(skipped)
            });
        }
    }
}

enum Checked<'a> {
    /// Nothing but white space: skipped, as `rmcp` skips an empty line.
    Blank,
    /// JSON (without its line end and any byte order mark).
    Json(&'a [u8]),
    /// Not JSON: why (a position, never the input).
    NotJson(String),
    /// JSON, but not a request `rmcp` can take (no batch, an object with
    /// `"jsonrpc": "2.0"`, `params` an object): answered here, with the
    /// request's own id when it has a valid one (`rmcp` answers these with
    /// no `id` member at all, which JSON-RPC 2.0 does not allow).
    Invalid {
        /// The id as written (a string, a number or `null`).
        id: String,
        code: i64,
        message: &'static str,
    },
}

/// What the filter reads of a request object.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<&'a RawValue>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

/// JSON-RPC 2.0's code for params of the wrong shape.
const INVALID_PARAMS: i64 = -32602;

/// A JSON line that `rmcp` would answer without an id, answered here;
/// `None` for one to pass on (responses to the server's own requests and
/// notifications included: a notification is never answered).
/// `env`: the line read as an object, or why it could not be.
fn invalid(
    text: &str,
    env: Result<Envelope<'_>, serde_json::Error>,
) -> Option<(String, i64, &'static str)> {
    let null = || "null".to_owned();
    let env = match env {
        Ok(env) => env,
        Err(_) if text.trim_start().starts_with('[') => {
            return Some((
                null(),
                INVALID_REQUEST,
                "invalid request: batches are not supported",
            ))
        }
        Err(_) => return Some((null(), INVALID_REQUEST, "invalid request: not an object")),
    };
    let (Some(id), Some(_)) = (env.id, env.method) else {
        return None;
    };
    let id = id.get();
    let id = match id.as_bytes().first() {
        Some(b'"' | b'-' | b'0'..=b'9') => id.to_owned(),
        _ if id == "null" => id.to_owned(),
        _ => {
            return Some((
                null(),
                INVALID_REQUEST,
                "invalid request: id must be a string or a number",
            ))
        }
    };
    if env.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return Some((
            id,
            INVALID_REQUEST,
            "invalid request: \"jsonrpc\" must be \"2.0\"",
        ));
    }
    match env.params.map(|p| p.get().as_bytes().first().copied()) {
        None | Some(Some(b'{')) => None,
        Some(_) => Some((
            id,
            INVALID_PARAMS,
            "invalid params: params must be an object",
        )),
    }
}

/// Is the line JSON, and a request `rmcp` can take?
fn check(line: &[u8]) -> Checked<'_> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Checked::Blank;
    }
    // JSON text is UTF-8, and serde_json skips over the bytes of a string
    // it is asked to ignore without checking them.
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => return Checked::NotJson(format!("not UTF-8 (at byte {})", e.valid_up_to())),
    };
    // One reading for the usual line, an object; what fails it is read
    // again for its syntax alone (not JSON, or JSON but not an object).
    let env = serde_json::from_str::<Envelope<'_>>(text);
    if env.is_err() {
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
            return Checked::NotJson(e.to_string());
        }
    }
    match invalid(text, env) {
        None => Checked::Json(line),
        Some((id, code, message)) => Checked::Invalid { id, code, message },
    }
}

/// A JSON-RPC error response to no request in particular (id null), as a
/// line.
fn error_line(code: i64, message: &str) -> Vec<u8> {
    answer_line("null", code, message)
}

/// A JSON-RPC error response to the request of `id` (its JSON text), as a
/// line.
fn answer_line(id: &str, code: i64, message: &str) -> Vec<u8> {
    let id: serde_json::Value = serde_json::from_str(id).unwrap_or(serde_json::Value::Null);
    let mut line = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    })
    .to_string()
    .into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn lines_of(input: &[u8], max: usize) -> Vec<(String, bool)> {
        let mut r = BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        loop {
            let mut buf = Vec::new();
            match next_line(&mut r, &mut buf, max).await.unwrap() {
                Line::End => return out,
                Line::Whole => out.push((String::from_utf8(buf).unwrap(), true)),
                Line::TooLong(n) => out.push((n.to_string(), false)),
            }
        }
    }

    #[tokio::test]
    async fn lines_are_read_whole_and_an_over_long_one_is_skipped_to_its_end() {
        let got = lines_of(b"{}\n0123456789abcdef\n[1]\r\nlast", 8).await;
        let want = [
            ("{}\n".to_string(), true),
            ("17".to_string(), false),
            ("[1]\r\n".to_string(), true),
            ("last".to_string(), true),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_line_is_json_or_says_why_not() {
        assert!(matches!(check(b"  \r\n"), Checked::Blank));
        assert!(matches!(
            check(b"\xEF\xBB\xBF{\"a\": [1]}\r\n"),
            Checked::Json(b"{\"a\": [1]}")
        ));
        assert!(matches!(check(b"{bad json\n"), Checked::NotJson(_)));
        assert!(
            matches!(check(b"{\"a\": \"\xff\"}\n"), Checked::NotJson(e) if e == "not UTF-8 (at byte 7)")
        );
        assert!(matches!(check(b"{} {}\n"), Checked::NotJson(_)));
    }

    /// What `rmcp` would answer with no `id` at all is answered here, with
    /// the request's id when it has one.
    #[test]
    fn a_request_rmcp_cannot_take_is_answered_with_its_id() {
        let invalid = |line: &str| match check(line.as_bytes()) {
            Checked::Invalid { id, code, .. } => Some((id, code)),
            _ => None,
        };
        let ok = r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#;
        assert!(matches!(check(ok.as_bytes()), Checked::Json(_)));
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[1,2]}"#),
            Some(("5".into(), INVALID_PARAMS))
        );
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":"a","method":"ping","params":"x"}"#),
            Some(("\"a\"".into(), INVALID_PARAMS))
        );
        assert_eq!(
            invalid(r#"{"id":8,"method":"ping"}"#),
            Some(("8".into(), INVALID_REQUEST))
        );
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
            Some(("null".into(), INVALID_REQUEST))
        );
        assert_eq!(invalid("5"), Some(("null".into(), INVALID_REQUEST)));
        assert_eq!(
            invalid(r#"[{"jsonrpc":"2.0","id":6,"method":"ping"}]"#),
            Some(("null".into(), INVALID_REQUEST))
        );
        // A notification is never answered, and a response to the
        // server's own request goes on to rmcp.
        assert_eq!(
            invalid(r#"{"jsonrpc":"2.0","method":"x","params":[1]}"#),
            None
        );
        assert_eq!(invalid(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#), None);
    }

    #[tokio::test]
    async fn rmcp_reads_the_json_lines_and_the_host_reads_an_error_for_the_rest() {
        let input: &[u8] = b"{\"id\": 1}\n{bad json\n\n[2]\n";
        let (out_w, mut out_r) = tokio::io::duplex(4096);
        let stdio = start_on(input, out_w);
        let mut rmcp_side = stdio.transport;
        let mut passed = String::new();
        rmcp_side.read_to_string(&mut passed).await.unwrap();
        assert_eq!(passed, "{\"id\": 1}\n");
        rmcp_side
            .write_all(b"{\"id\":1,\"result\":{}}\n")
            .await
            .unwrap();
        drop(rmcp_side);
        stdio.flushed.await.unwrap();
        let mut host = String::new();
        out_r.read_to_string(&mut host).await.unwrap();
        let lines: Vec<serde_json::Value> = host
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{host}");
        assert_eq!(lines[0]["error"]["code"], PARSE_ERROR);
        assert_eq!(lines[0]["id"], serde_json::Value::Null);
        assert_eq!(lines[1]["error"]["code"], INVALID_REQUEST, "a batch");
        assert_eq!(lines[1]["id"], serde_json::Value::Null);
        assert_eq!(lines[2]["id"], 1);
    }
}

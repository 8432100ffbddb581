//! Entry points of the fuzz targets (`fuzz/`, outside the workspace): each
//! takes arbitrary bytes and runs them through the decoders and pre-checks
//! the broker runs on every request, all of which live in this crate. They
//! must never panic. `tests/fuzz_corpus.rs` runs them over the committed
//! corpus, so every input a fuzzer ever found stays a regression test in
//! the ordinary test command. Not part of the supported surface.

use crate::binary::{decode_payload, split_frames, ClientFrame, ServerFrame};
use crate::call::Call;
use crate::check as validate;
use crate::jsonrpc::{parse_line, Incoming};
use crate::lines::{Line, LineReader};
use crate::types::{Message, Part};

/// The NDJSON path: line splitting (with a small cap, so oversized lines
/// are exercised), envelope parsing, params into typed calls, and the
/// validation a call gets before it reaches the writer.
pub fn ndjson(data: &[u8]) {
    let mut lines = LineReader::new(data, 4096);
    while let Ok(line) = lines.next_line() {
        match line {
            Line::Eof => break,
            Line::TooLarge => continue,
            Line::Line(l) => request(l),
        }
    }
}

fn request(line: &[u8]) {
    let reqs = match parse_line(line) {
        Incoming::Blank => return,
        Incoming::Single(r) => vec![r],
        Incoming::Batch(rs) => rs,
    };
    for req in reqs.into_iter().flatten() {
        if let Ok(mut call) = Call::from_json(&req.method, req.params_str()) {
            let _ = call.precheck();
        }
    }
}

/// The binary path: frame splitting and payload decoding, both directions
/// (the broker decodes client frames, clients decode server frames).
pub fn binary(data: &[u8]) {
    let Ok((frames, _)) = split_frames(data) else {
        return;
    };
    for range in frames {
        if let Ok(ClientFrame::Request { mut call, .. } | ClientFrame::Notify { mut call }) =
            decode_payload::<ClientFrame>(&data[range.clone()])
        {
            let _ = call.precheck();
        }
        let _ = decode_payload::<ServerFrame>(&data[range]);
    }
}

/// Part validation: the bytes as a JSON message or part list, and as a
/// base64 file payload.
pub fn parts(data: &[u8]) {
    if let Ok(m) = serde_json::from_slice::<Message>(data) {
        let _ = validate::check_message(&m);
    }
    if let Ok(ps) = serde_json::from_slice::<Vec<Part>>(data) {
        let _ = validate::check_parts(&ps);
    }
    let b64 = String::from_utf8_lossy(data).into_owned();
    let file = Part::File {
        file: crate::types::FileContent {
            bytes: Some(b64),
            ..Default::default()
        },
        metadata: None,
    };
    let _ = validate::check_parts(&[file]);
}

//! Unit tests of the wire core: bytes in, answers out, no I/O.

use super::*;
use crate::error::{ClientError, CloseReason};
use a2a_proto::binary::{encode_frame, preamble, ClientFrame, ServerFrame};
use a2a_proto::call::{Call, Outcome};
use a2a_proto::error::RpcError;
use a2a_proto::limits::{A2A_MAX_OUT_FRAME_BYTES, MAX_FRAME_BYTES};
use a2a_proto::params::{GetParams, OkResult, TokenParams};
use a2a_proto::types::{LaggedParams, Notification};
use proptest::prelude::*;

fn get(id: &str) -> Call {
    Call::Get(GetParams {
        token: Some("tok".into()),
        id: id.into(),
        history_length: None,
    })
}

fn ok(id: u64, flag: bool) -> ServerFrame {
    ServerFrame::Response {
        id,
        result: Ok(Outcome::Ok(OkResult { ok: flag })),
    }
}

fn event(n: u64) -> ServerFrame {
    ServerFrame::Notification(lagged(n))
}

fn lagged(n: u64) -> Notification {
    Notification::Lagged(LaggedParams {
        recipient: "a".into(),
        recipient_context_id: "c".into(),
        dropped: n,
    })
}

fn frames(fs: &[ServerFrame]) -> Vec<u8> {
    let mut buf = Vec::new();
    for f in fs {
        encode_frame(f, &mut buf).unwrap();
    }
    buf
}

/// Everything a binary session yields for `bytes` fed in `cuts` pieces, as
/// (waiter, inbound) pairs; stops at the first error.
fn run_binary(
    s: &mut Session<Binary, &'static str>,
    bytes: &[u8],
    cuts: &[usize],
) -> (Vec<(Option<&'static str>, Inbound)>, Option<WireError>) {
    let mut out = Vec::new();
    let mut at = 0;
    let mut ends: Vec<usize> = cuts.iter().copied().filter(|&c| c < bytes.len()).collect();
    ends.sort_unstable();
    ends.push(bytes.len());
    for end in ends {
        if end < at {
            continue;
        }
        s.feed(&bytes[at..end]);
        at = end;
        loop {
            match s.poll() {
                Ok(Some(p)) => out.push((p.waiter, p.inbound)),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

#[test]
fn the_binary_request_is_the_client_frame_bincode_writes() {
    let call = get("t-1");
    let mut ours = vec![9];
    Binary::encode_request(42, &call, &mut ours).unwrap();
    let mut theirs = vec![9];
    encode_frame(&ClientFrame::Request { id: 42, call }, &mut theirs).unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(Binary::PREAMBLE, &preamble()[..]);
}

#[test]
fn the_ndjson_request_is_one_json_rpc_line() {
    let call = get("t-\"1\"");
    let mut out = b"x".to_vec();
    Ndjson::encode_request(18_446_744_073_709_551_615, &call, &mut out).unwrap();
    assert_eq!(out[0], b'x');
    assert_eq!(*out.last().unwrap(), b'\n');
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
    let v: serde_json::Value = serde_json::from_slice(&out[1..]).unwrap();
    assert_eq!(v["jsonrpc"], "2.0");
    assert_eq!(v["id"], u64::MAX);
    assert_eq!(v["method"], "a2a.tasks.get");
    assert_eq!(v["params"], call.params_json());
}

#[test]
fn a_raw_ndjson_request_is_one_line_and_its_answer_finds_its_waiter() {
    let mut s: Session<Ndjson, &'static str> = Session::new();
    let id = s.reserve("raw").unwrap();
    Ndjson::encode_raw(Some(id), "x.\"odd\"", Some(b"{\"a\":[1]}"), s.out_mut()).unwrap();
    Ndjson::encode_raw(None, "n", None, s.out_mut()).unwrap();
    let text = std::str::from_utf8(s.out()).unwrap().to_owned();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "x.\"odd\"", "params": {"a": [1]}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "n"}),
        ]
    );
    s.sent(text.len());
    assert!(s.out().is_empty());
    s.feed(format!("{{\"id\":{id},\"result\":null}}\n").as_bytes());
    let p = s.poll().unwrap().unwrap();
    assert_eq!(p.waiter, Some("raw"));
    let big = vec![b' '; MAX_FRAME_BYTES];
    let mut out = Vec::new();
    assert!(Ndjson::encode_raw(Some(1), "m", Some(&big), &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn a_request_over_the_bound_is_refused_and_leaves_the_buffer_alone() {
    let call = Call::Deregister(TokenParams {
        token: Some("x".repeat(MAX_FRAME_BYTES + 1)),
    });
    for encode in [Binary::encode_request, Ndjson::encode_request] {
        let mut out = b"kept".to_vec();
        let e = encode(1, &call, &mut out).unwrap_err();
        assert!(matches!(e, ClientError::FrameTooLarge { max, .. } if max == MAX_FRAME_BYTES));
        assert_eq!(out, b"kept");
    }
}

#[test]
fn answers_find_their_waiters_and_events_keep_their_place() {
    let mut s: Session<Binary, &'static str> = Session::new();
    assert_eq!(s.out(), &preamble()[..]);
    let a = s.call(&get("a"), "a").unwrap();
    let b = s.call(&get("b"), "b").unwrap();
    assert_ne!(a, b);
    assert_eq!(s.calls().len(), 2);
    // Answered out of order, an event between them, an id nobody waits for.
    let bytes = frames(&[ok(b, true), event(1), ok(99, true), ok(a, false)]);
    let (got, err) = run_binary(&mut s, &bytes, &[]);
    assert_eq!(err, None);
    let waiters: Vec<_> = got.iter().map(|(w, _)| *w).collect();
    assert_eq!(waiters, vec![Some("b"), None, None, Some("a")]);
    assert_eq!(got[1].1, Inbound::Event(lagged(1)));
    assert_eq!(
        got[2].1,
        Inbound::Answer {
            id: 99,
            result: Ok(Outcome::Ok(OkResult { ok: true }))
        }
    );
    assert!(s.calls().is_empty());
    // An id answered twice finds nobody the second time.
    let (got, _) = run_binary(&mut s, &frames(&[ok(a, true)]), &[]);
    assert_eq!(got[0].0, None);
}

#[test]
fn frames_split_at_every_offset_read_the_same() {
    let fs = [ok(1, true), event(7), ok(2, false), event(8)];
    let bytes = frames(&fs);
    let whole = {
        let mut s: Session<Binary, &'static str> = Session::new();
        run_binary(&mut s, &bytes, &[]).0
    };
    assert_eq!(whole.len(), 4);
    for cut in 0..=bytes.len() {
        for cut2 in [cut, cut + 1, cut + 5] {
            let mut s: Session<Binary, &'static str> = Session::new();
            let (got, err) = run_binary(&mut s, &bytes, &[cut, cut2]);
            assert_eq!(err, None, "cut at {cut}");
            assert_eq!(got, whole, "cut at {cut}, {cut2}");
        }
    }
}

#[test]
fn an_oversized_frame_is_an_error_before_its_bytes_arrive() {
    let mut f: Framer<Binary> = Framer::with_max(16);
    f.feed(&17u32.to_le_bytes());
    assert_eq!(
        f.next_frame(),
        Err(WireError::TooLarge { bytes: 17, max: 16 })
    );
    // It stays an error: binary framing cannot resynchronise.
    assert!(f.next_frame().is_err());
    let reason: CloseReason = f.next_frame().unwrap_err().into();
    assert_eq!(
        reason,
        CloseReason::BadFrame("frame of 17 bytes exceeds the 16-byte limit".into())
    );
    // The default bound is the broker's largest frame.
    let mut f: Framer<Binary> = Framer::new();
    assert_eq!(f.max(), A2A_MAX_OUT_FRAME_BYTES);
    f.feed(&((A2A_MAX_OUT_FRAME_BYTES + 1) as u32).to_le_bytes());
    assert!(matches!(f.next_frame(), Err(WireError::TooLarge { .. })));
    // A frame exactly at the bound is fine.
    let mut f: Framer<Binary> = Framer::with_max(3);
    f.feed(&[3, 0, 0, 0, 1, 2, 3]);
    assert_eq!(f.next_frame(), Ok(Some(&[1u8, 2, 3][..])));
}

#[test]
fn an_oversized_line_is_an_error_with_or_without_its_end() {
    let mut f: Framer<Ndjson> = Framer::with_max(8);
    f.feed(b"123456789");
    assert_eq!(
        f.next_frame(),
        Ok(None),
        "a trailing \\r may still come off"
    );
    f.feed(b"\r\n");
    assert_eq!(
        f.next_frame(),
        Err(WireError::TooLarge { bytes: 9, max: 8 })
    );
    let mut f: Framer<Ndjson> = Framer::with_max(8);
    f.feed(b"12345678\r");
    f.feed(b"9");
    assert!(matches!(f.next_frame(), Err(WireError::TooLarge { .. })));
    let mut f: Framer<Ndjson> = Framer::with_max(8);
    f.feed(b"12345678\r\n{}\n");
    assert_eq!(f.next_frame(), Ok(Some(&b"12345678"[..])));
    assert_eq!(f.next_frame(), Ok(Some(&b"{}"[..])));
    assert_eq!(f.next_frame(), Ok(None));
}

#[test]
fn a_fatal_frame_or_a_bad_payload_ends_the_connection_with_its_reason() {
    let fatal = RpcError::invalid_params("bad frame");
    let mut s: Session<Binary, ()> = Session::new();
    let id = s.call(&get("a"), ()).unwrap();
    let bytes = frames(&[event(1), ServerFrame::Fatal(fatal.clone()), ok(id, true)]);
    let mut s2: Session<Binary, &'static str> = Session::new();
    let (got, err) = run_binary(&mut s2, &bytes, &[]);
    assert_eq!(got.len(), 1);
    let err = err.unwrap();
    assert_eq!(err, WireError::Fatal(fatal.clone()));
    assert_eq!(err.close_reason(), CloseReason::Fatal(fatal));
    // Bytes that are no ServerFrame.
    let mut s: Session<Binary, ()> = Session::new();
    s.feed(&[2, 0, 0, 0, 0xff, 0xff]);
    let e = s.poll().unwrap_err();
    assert!(
        matches!(e.close_reason(), CloseReason::BadFrame(m) if m.starts_with("malformed frame"))
    );
    // Trailing bytes inside a frame are refused too.
    let mut one = frames(&[ok(1, true)]);
    one[0] += 1;
    one.push(0);
    s = Session::new();
    s.feed(&one);
    assert!(matches!(s.poll(), Err(WireError::Malformed(_))));
}

#[test]
fn a_closed_session_refuses_calls_and_hands_back_its_waiters() {
    let mut s: Session<Ndjson, u32> = Session::new();
    assert!(s.out().is_empty(), "ndjson has no preamble");
    let a = s.call(&get("a"), 10).unwrap();
    let b = s.call(&get("b"), 20).unwrap();
    let mut left = s.close(CloseReason::ByBroker);
    left.sort_unstable();
    assert_eq!(left, vec![(a, 10), (b, 20)]);
    assert!(s.out().is_empty());
    assert!(matches!(
        s.call(&get("c"), 30),
        Err(ClientError::Closed(CloseReason::ByBroker))
    ));
    // The first reason wins.
    assert!(s.close(CloseReason::Shutdown).is_empty());
    assert_eq!(s.closed(), Some(&CloseReason::ByBroker));
    let mut calls: Calls<u8> = Calls::new();
    calls.mark_closed(CloseReason::Shutdown);
    assert_eq!(calls.insert(1, 7), Err((CloseReason::Shutdown, 7)));
}

#[test]
fn ndjson_lines_read_as_answers_events_and_batches() {
    let mut s: Session<Ndjson, &'static str> = Session::new();
    let a = s.call(&get("a"), "a").unwrap();
    let b = s.call(&get("b"), "b").unwrap();
    let text = format!(
        "\n{{\"id\":{b},\"jsonrpc\":\"2.0\",\"result\":{{\"ok\":true,\"s\":\"}}\\\"\"}}}}\r\n\
         \r\n\
         {{\"jsonrpc\":\"2.0\",\"method\":\"a2a.lagged\",\"params\":{{\"dropped\":3}}}}\n\
         {{\"error\":{{\"code\":-32600,\"message\":\"invalid request\"}},\"id\":null,\"jsonrpc\":\"2.0\"}}\n\
         [{{\"id\":5,\"result\":1}}]\n\
         {{\"error\":{{\"code\":-1,\"message\":\"no\"}},\"id\":{a},\"jsonrpc\":\"2.0\"}}\n"
    );
    s.feed(text.as_bytes());
    let mut got = Vec::new();
    while let Some(p) = s.poll().unwrap() {
        got.push(format!("{:?} {:?}", p.waiter, show(&p.inbound)));
    }
    assert_eq!(
        got,
        vec![
            r#"Some("b") "answer Some(2) 2 ok {\"ok\":true,\"s\":\"}\\\"\"}""#.to_string(),
            r#"None "event a2a.lagged {\"dropped\":3}""#.to_string(),
            r#"None "answer None null err {\"code\":-32600,\"message\":\"invalid request\"}""#
                .to_string(),
            r#"None "batch [{\"id\":5,\"result\":1}]""#.to_string(),
            r#"Some("a") "answer Some(1) 1 err {\"code\":-1,\"message\":\"no\"}""#.to_string(),
        ]
    );
    s.feed(b"{\"id\":1}\n");
    assert!(matches!(s.poll(), Err(WireError::Malformed(_))));
    let mut s: Session<Ndjson, ()> = Session::new();
    s.feed(b"not json\n");
    assert!(matches!(s.poll(), Err(WireError::Malformed(_))));
}

fn show(l: &Line<'_>) -> String {
    let t = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match l {
        Line::Answer { id, id_raw, result } => match result {
            Ok(r) => format!("answer {id:?} {} ok {}", t(id_raw), t(r)),
            Err(e) => format!("answer {id:?} {} err {}", t(id_raw), t(e)),
        },
        Line::Event { method, params } => format!("event {method} {}", t(params)),
        Line::Batch(b) => format!("batch {}", t(b)),
    }
}

#[test]
fn reading_into_the_framer_needs_no_copy_and_a_huge_frame_is_given_back() {
    let mut f: Framer<Binary> = Framer::new();
    let big = vec![7u8; 3 << 20];
    let mut bytes = (big.len() as u32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&big);
    bytes.extend_from_slice(&[1, 0, 0, 0, 9]);
    let mut at = 0;
    let mut seen = Vec::new();
    while at < bytes.len() {
        let room = f.read_buf(64 * 1024);
        let n = room.len().min(bytes.len() - at).min(64 * 1024);
        room[..n].copy_from_slice(&bytes[at..at + n]);
        f.filled(n);
        at += n;
        while let Some(frame) = f.next_frame().unwrap() {
            seen.push(frame.len());
        }
    }
    assert_eq!(seen, vec![big.len(), 1]);
    assert_eq!(f.buffered(), 0);
    // The next read starts on a small buffer again.
    assert!(f.read_buf(64 * 1024).len() < 2 << 20);
}

fn binary_stream() -> impl Strategy<Value = Vec<ServerFrame>> {
    prop::collection::vec(
        prop_oneof![
            (1u64..20, any::<bool>()).prop_map(|(id, f)| ok(id, f)),
            any::<u64>().prop_map(event),
        ],
        0..12,
    )
}

proptest! {
    #[test]
    fn any_chunking_of_binary_frames_reads_the_same(
        fs in binary_stream(),
        cuts in prop::collection::vec(0usize..2048, 0..16),
    ) {
        let bytes = frames(&fs);
        let mut whole: Session<Binary, &'static str> = Session::new();
        let mut pieces: Session<Binary, &'static str> = Session::new();
        for s in [&mut whole, &mut pieces] {
            for _ in 0..20 {
                s.call(&get("x"), "w").unwrap();
            }
        }
        let (a, ea) = run_binary(&mut whole, &bytes, &[]);
        let (b, eb) = run_binary(&mut pieces, &bytes, &cuts);
        prop_assert_eq!(ea, None);
        prop_assert_eq!(eb, None);
        prop_assert_eq!(a.len(), fs.len());
        prop_assert_eq!(a, b);
    }

    #[test]
    fn any_chunking_of_ndjson_lines_reads_the_same(
        lines in prop::collection::vec((0u64..50, "[a-z \\\\\"{}\\[\\]]{0,40}", any::<bool>()), 0..10),
        cuts in prop::collection::vec(0usize..1024, 0..16),
    ) {
        let mut text = Vec::new();
        for (id, s, crlf) in &lines {
            let v = serde_json::json!({"id": id, "jsonrpc": "2.0", "result": {"s": s}});
            serde_json::to_writer(&mut text, &v).unwrap();
            text.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
        }
        let read = |cuts: &[usize]| {
            let mut f: Framer<Ndjson> = Framer::new();
            let mut out = Vec::new();
            let mut ends: Vec<usize> = cuts.iter().copied().filter(|&c| c < text.len()).collect();
            ends.sort_unstable();
            ends.push(text.len());
            let mut at = 0;
            for end in ends {
                f.feed(&text[at..end]);
                at = end;
                while let Some(line) = f.next_frame().unwrap() {
                    match Ndjson::decode(line).unwrap() {
                        Line::Answer { id, result: Ok(r), .. } => {
                            let v: serde_json::Value = serde_json::from_slice(r).unwrap();
                            out.push((id, v["s"].as_str().unwrap().to_owned()));
                        }
                        other => panic!("not an answer: {other:?}"),
                    }
                }
            }
            out
        };
        let want: Vec<_> = lines.iter().map(|(id, s, _)| (Some(*id), s.clone())).collect();
        prop_assert_eq!(read(&[]), want.clone());
        prop_assert_eq!(read(&cuts), want);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_core(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        crate::wire::fuzz(&bytes);
    }
}

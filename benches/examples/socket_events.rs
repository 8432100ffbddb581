//! Diagnostic: one event stream of the socket benchmark, run for a while,
//! to profile (`perf record -g --call-graph dwarf`) where the time goes.
//!
//! `cargo run --release -p a2a-benches --example socket_events -- [binary|ndjson] [resub1|replay|status|raw1|raw-replay] [SECONDS]`
//! (defaults: binary replay 10).

use a2a_benches::socket::{EventStreams, Flow, SocketBroker};
use a2a_broker::Durability;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let codec = match args.first().map(String::as_str) {
        Some("ndjson") => a2a_benches::socket::Codec::Ndjson,
        _ => a2a_benches::socket::Codec::Binary,
    };
    let flow = args
        .get(1)
        .and_then(|a| Flow::ALL.into_iter().find(|f| f.label() == a))
        .unwrap_or(Flow::Replay);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let sb = SocketBroker::start(Durability::Normal);
    let mut ev = EventStreams::setup(&sb, codec);
    let burst = 20_000;
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let made = ev.events_made(flow, burst);
        let w0 = sb.write_stats();
        let d = ev.run(flow, burst);
        let w1 = sb.write_stats();
        eprintln!(
            "{} {}: {:.0} events/s, {:.1} frames/write",
            codec.label(),
            flow.label(),
            made as f64 / d.as_secs_f64(),
            (w1.0 - w0.0) as f64 / (w1.1 - w0.1).max(1) as f64
        );
    }
    drop(ev);
    sb.shutdown();
}

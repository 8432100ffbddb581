//! Diagnostic: the in-process broker's creation rate as open tasks pile up
//! (12 rounds of 2000 creations, 64 outstanding, durability normal).
//!
//! `cargo run --release -p a2a-benches --example creation_scaling -- [BATCH_MAX]`
//! (default 1). Run it under `perf record -e cpu-clock` to see where the
//! writer's time goes once the open tasks outnumber the task cache target.

use a2a_benches::inproc::InProc;
use a2a_benches::workload::{handshake, Creator};
use a2a_broker::Durability;

fn main() {
    let batch_max: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let mut broker = InProc::start(Durability::Normal, batch_max);
    handshake(&mut broker);
    let mut creator = Creator::new(&mut broker);
    let mut total = 0;
    for _ in 0..12 {
        let lines = creator.prepare(&mut broker, 2000);
        let d = a2a_benches::workload::Client::timed(&mut broker, &lines, 64);
        total += 2000;
        eprintln!(
            "batch_max {batch_max}: open tasks {total:>6}: {:>6.0} creations/s",
            2000.0 / d.as_secs_f64()
        );
    }
    broker.shutdown();
}

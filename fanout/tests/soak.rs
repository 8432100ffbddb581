//! The short soak (about 70 s, part of `cargo test --workspace`): a minute
//! of fan-out (16 delegates, socket-binary, `--durability normal`) against
//! the real broker, sampled every second. It fails when the write-ahead
//! log passes its bound or the broker's resident memory trends upward.
//!
//! The limits, from issue 29's targets for a 10-minute soak:
//! - the `-wal` file never above 64 MB ([`LOG_BOUND`]; the broker restarts
//!   its log past 16 MB, `store::checkpoint`), at any sample;
//! - resident memory growing by at most 16 MB from minute 1 to minute 10,
//!   i.e. a slope of at most 16/9 ≈ 1.8 MB per minute ([`RSS_SLOPE`]),
//!   computed by least squares over the samples after a 20 s warm-up (one
//!   sample's noise moves a fitted line little, a steady leak moves it all),
//!   while new jobs are started (the drain after the minute is left out).

use a2a_fanout::soak::SoakConfig;
use a2a_fanout::{run, Config, Durability, Transport};
use std::time::Duration;

const LOG_BOUND: u64 = 64 * 1024 * 1024;
const RSS_SLOPE: f64 = 16.0 / 9.0;

#[test]
fn a_minute_of_fan_out_keeps_the_log_bounded_and_memory_flat() {
    let mut c = Config::new(Transport::SocketBinary, Durability::Normal, 16);
    c.tasks = None;
    c.seconds = Some(60.0);
    c.timeout = Duration::from_secs(120);
    c.soak = Some(SoakConfig {
        every: Duration::from_secs(1),
        warmup: Duration::from_secs(20),
        idle: Duration::from_secs(3),
        print: true,
        out_dir: std::env::var_os("A2A_SOAK_OUT").map(Into::into),
    });
    let r = run(&c).expect("the run is made");
    let table = a2a_fanout::report::table(std::slice::from_ref(&r));
    eprintln!("{table}");
    assert!(r.checks.passed, "{table}");
    let s = r.soak.as_ref().expect("a soak report");
    let loaded = s.samples.iter().filter(|x| x.loaded).count();
    assert!(loaded >= 50, "{loaded} samples under load");
    // The sampler saw the broker: memory, a database, writes, jobs.
    let last = s.samples.last().expect("samples");
    assert!(last.rss_bytes > 0 && last.db_bytes > 0 && last.write_bytes > 0);
    assert!(s.bytes_per_job.is_some() && s.jobs_per_s.unwrap_or(0.0) > 0.0);
    // Both limits are checked and reported together.
    let mut failed = Vec::new();
    if s.max_wal_bytes > LOG_BOUND {
        failed.push(format!(
            "the -wal reached {:.1} MB, past its 64 MB bound",
            s.max_wal_bytes as f64 / 1048576.0
        ));
    }
    let slope = s.rss_slope_mb_per_min.expect("enough samples for a slope");
    if slope > RSS_SLOPE {
        failed.push(format!(
            "resident memory grows by {slope:.2} MB/min under load (limit {RSS_SLOPE:.2})"
        ));
    }
    assert!(failed.is_empty(), "{}\n{}", failed.join("; "), s.summary());
}

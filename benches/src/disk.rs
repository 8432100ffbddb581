//! How long the disk under the benchmark's databases takes to make a write
//! durable: the cost a `synchronous = FULL` commit cannot avoid, and the
//! number that says how much group commit can save on this machine. SQLite
//! as bundled here syncs with `fsync` (which also flushes the file's
//! metadata); `fdatasync` is shown beside it.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::time::{Duration, Instant};

fn median_of(n: usize, mut round: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..n.max(1))
        .map(|_| {
            let start = Instant::now();
            round();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn overwrite(f: &mut File, page: &[u8]) {
    f.seek(SeekFrom::Start(0)).expect("seek");
    f.write_all(page).expect("write");
}

/// Medians of `n` rounds of "overwrite 4 KiB, then `fsync`" and of
/// "overwrite 4 KiB, then `fdatasync`", in a temporary file on the disk of
/// the benchmark databases.
pub fn sync_latency(n: usize) -> (Duration, Duration) {
    let mut f = tempfile::tempfile().expect("temp file");
    let page = [7u8; 4096];
    f.write_all(&page).expect("write");
    f.sync_all().expect("sync");
    let full = median_of(n, || {
        overwrite(&mut f, &page);
        f.sync_all().expect("fsync");
    });
    let data = median_of(n, || {
        overwrite(&mut f, &page);
        f.sync_data().expect("fdatasync");
    });
    (full, data)
}

/// `fsync X us, fdatasync Y us` for a summary line.
pub fn describe(lat: (Duration, Duration)) -> String {
    format!(
        "fsync {:.0} us, fdatasync {:.0} us",
        lat.0.as_secs_f64() * 1e6,
        lat.1.as_secs_f64() * 1e6
    )
}

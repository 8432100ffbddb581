//! Helpers shared by the ring benches: thread pinning, the load average,
//! rate formatting, medians.

/// Pins the calling thread to one CPU.
pub fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it;
    // sched_setaffinity(0, ..) applies to the calling thread.
    #[allow(unsafe_code)]
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The 1, 5 and 15 minute load averages, as printed in /proc/loadavg.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Whether cargo runs this as a benchmark (`cargo bench` passes `--bench`;
/// `cargo test --benches` does not).
pub fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The (placement, producer CPU, consumer CPU) pairs this machine allows.
pub fn placements() -> &'static [(&'static str, usize, usize)] {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        &[("same-core", 0, 0), ("cross-core", 0, 1)]
    } else {
        &[("same-core", 0, 0)]
    }
}

//! Thread placement for latency benchmarks: a same-core hand-off costs a
//! few µs and a cross-core wake-up 30 to 60 µs on this kind of machine, so
//! a figure means little unless it says which it was.
//!
//! [`place`] pins every thread of this process by name: the client's
//! threads (`a2a-client-*`: reader, writer, ring consumer) on one CPU,
//! every other thread (the broker's runtime and writer, the bench's own)
//! on another. Threads created later are not pinned: call it again after
//! connecting. [`pin_self`] pins just the calling thread.

/// Placements this machine allows: `(name, broker CPU, client CPU)`.
pub fn placements() -> &'static [(&'static str, usize, usize)] {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        &[("same-core", 0, 0), ("cross-core", 0, 1)]
    } else {
        &[("same-core", 0, 0)]
    }
}

/// Pins the client's threads to `client_cpu`, all others to `broker_cpu`.
pub fn place(broker_cpu: usize, client_cpu: usize) {
    place_with(broker_cpu, client_cpu, false);
}

/// [`place`], counting the calling thread as a client's when
/// `caller_is_client` (a bench thread that speaks to the broker itself).
pub fn place_with(broker_cpu: usize, client_cpu: usize, caller_is_client: bool) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    // SAFETY: gettid has no arguments and cannot fail.
    #[allow(unsafe_code)]
    let me = unsafe { libc::gettid() };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let client = comm.starts_with("a2a-client") || (caller_is_client && tid == me);
        pin(tid, if client { client_cpu } else { broker_cpu });
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin_self(cpu: usize) {
    // SAFETY: gettid has no arguments and cannot fail.
    #[allow(unsafe_code)]
    let me = unsafe { libc::gettid() };
    pin(me, cpu);
}

/// Lets every thread of this process run anywhere again.
pub fn unpin_all() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for t in tasks.flatten() {
        if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
            set(tid, 0..cpus);
        }
    }
}

fn pin(tid: i32, cpu: usize) {
    set(tid, cpu..cpu + 1);
}

fn set(tid: i32, cpus: std::ops::Range<usize>) {
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET writes inside it
    // (CPU numbers are far below CPU_SETSIZE); sched_setaffinity only reads
    // the set. A thread that exited meanwhile makes the call fail (ESRCH),
    // which is harmless.
    #[allow(unsafe_code)]
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

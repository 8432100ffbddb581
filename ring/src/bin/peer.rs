//! The other process of the multi-process tests (`tests/process.rs`).
//!
//! - `consume NAME BYTES [gate]`: opens the ring as the client would, prints
//!   `ready`, (with `gate`: waits for a line on stdin first), then reads
//!   sequence-numbered records until the end record, checking that every
//!   event is the next expected one or that the lag records just before it
//!   account exactly for the gap. Prints one summary line:
//!   `events=N lagged=L markers=M bad=B cpu_us=C` and exits 0, or prints
//!   `error ...` and exits 1.
//! - `crash-create PREFIX BYTES`: creates a segment, prints its name and exits
//!   without removing it (a broker that crashed).
//!
//! Records are 16 bytes or more: `seq: u64 LE`, `seq * CHECK: u64 LE`,
//! filler; the end record has `seq = u64::MAX`.

#[cfg(not(loom))]
fn main() -> std::process::ExitCode {
    peer::main()
}

/// Loom builds have no shared memory (their atomics are not plain memory);
/// the peer is then an empty program.
#[cfg(loom)]
fn main() {}

#[cfg(not(loom))]
mod peer {
    use a2a_ring::{Popped, Segment};
    use std::io::{BufRead, Write};
    use std::process::ExitCode;
    use std::time::Duration;

    /// The multiplier of the check word.
    const CHECK: u64 = 0x9E37_79B9_7F4A_7C15;
    /// The longest a `wait` may take before the peer gives up (so a lost wake-up
    /// shows as an error, not a hang).
    const WAIT_LIMIT: Duration = Duration::from_secs(30);

    pub fn main() -> ExitCode {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let result = match args.first().map(String::as_str) {
            Some("consume") if args.len() >= 3 => consume(&args[1], &args[2], args.get(3)),
            Some("crash-create") if args.len() == 3 => crash_create(&args[1], &args[2]),
            _ => Err("usage: consume NAME BYTES [gate] | crash-create PREFIX BYTES".into()),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("error {e}");
                ExitCode::FAILURE
            }
        }
    }

    fn parse(bytes: &str) -> Result<usize, String> {
        bytes
            .parse()
            .map_err(|e| format!("bad size {bytes:?}: {e}"))
    }

    fn cpu_us() -> u128 {
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage fills the struct it is given.
        #[allow(unsafe_code)]
        let usage = unsafe {
            libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
            usage.assume_init()
        };
        let us = |t: libc::timeval| t.tv_sec as u128 * 1_000_000 + t.tv_usec as u128;
        us(usage.ru_utime) + us(usage.ru_stime)
    }

    fn consume(name: &str, bytes: &str, gate: Option<&String>) -> Result<(), String> {
        let mut consumer = Segment::open(name, parse(bytes)?).map_err(|e| e.to_string())?;
        println!("ready");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        if gate.is_some() {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .map_err(|e| e.to_string())?;
        }
        let (mut next, mut events, mut lagged, mut markers, mut bad) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        // Dropped events announced since the last event (consecutive lag
        // records add up: the producer writes one whenever it has room).
        let mut pending_lag = 0u64;
        let mut buf = Vec::new();
        loop {
            if !consumer.wait(Some(WAIT_LIMIT)).map_err(|e| e.to_string())? {
                return Err(format!(
                    "no record within {WAIT_LIMIT:?} after {events} events"
                ));
            }
            while let Some(popped) = consumer.try_pop(&mut buf).map_err(|e| e.to_string())? {
                match popped {
                    Popped::Lagged(n) => {
                        markers += 1;
                        lagged += n;
                        pending_lag += n;
                    }
                    Popped::Event => {
                        if buf.len() < 16 {
                            bad += 1;
                            continue;
                        }
                        let seq = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
                        let check = u64::from_le_bytes(buf[8..16].try_into().unwrap_or_default());
                        if seq == u64::MAX {
                            println!(
                                "events={events} lagged={lagged} markers={markers} bad={bad} cpu_us={}",
                                cpu_us()
                            );
                            return Ok(());
                        }
                        let skipped = std::mem::take(&mut pending_lag);
                        if seq != next + skipped || check != seq.wrapping_mul(CHECK) {
                            bad += 1;
                        }
                        next = seq + 1;
                        events += 1;
                    }
                }
            }
        }
    }

    fn crash_create(prefix: &str, bytes: &str) -> Result<(), String> {
        let (producer, name) =
            Segment::create_with_prefix(prefix, parse(bytes)?).map_err(|e| e.to_string())?;
        println!("{name}");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        // Exit as a crash would: no destructor runs, the name stays.
        std::mem::forget(producer);
        std::process::exit(0)
    }
}

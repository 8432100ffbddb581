//! Task ids: time-ordered (version 7) UUIDs from a generator seeded once
//! from the OS.
//!
//! Each id once came from `uuid::Uuid::now_v7()`, whose random
//! bits cost one `getrandom` system call per id (4.8 % of the writer thread
//! when creating tasks). Ids must be unique and time-ordered, not secret
//! (tokens are the credentials, and they still come from the OS each), so
//! the random bits now come from a splitmix64 stream seeded once per
//! process, and uniqueness inside the process is guaranteed by the layout
//! itself (milliseconds, then a counter), not by chance.

use parking_lot::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The generator's state: the last millisecond used, the counter within
/// it, and the random stream.
struct Gen {
    last_ms: u64,
    /// 42 bits: `rand_a` (12) and the top 30 bits of `rand_b`.
    counter: u64,
    rng: u64,
}

/// Counter values start below this in each new millisecond (a random
/// start, with room for 2^41 more ids in the same millisecond).
const COUNTER_START_MAX: u64 = 1 << 41;
const COUNTER_MAX: u64 = (1 << 42) - 1;

static GEN: Mutex<Option<Gen>> = Mutex::new(None);

impl Gen {
    fn seeded() -> Gen {
        let mut seed = [0u8; 8];
        // No OS random source: the time and the pid still give distinct
        // streams; uniqueness in the process does not depend on it.
        if getrandom::fill(&mut seed).is_err() {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            seed = (t ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
        }
        Gen {
            last_ms: 0,
            counter: 0,
            rng: u64::from_le_bytes(seed),
        }
    }

    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The 128 bits of the next id.
    fn next(&mut self, now_ms: u64) -> u128 {
        if now_ms > self.last_ms {
            self.last_ms = now_ms;
            self.counter = self.next_random() % COUNTER_START_MAX;
        } else if self.counter >= COUNTER_MAX {
            // 2^41 ids in one millisecond (or a clock that went back):
            // borrow the next millisecond, so order and uniqueness hold.
            self.last_ms += 1;
            self.counter = 0;
        } else {
            self.counter += 1;
        }
        let rand_a = (self.counter >> 30) & 0xfff;
        let rand_b_hi = self.counter & 0x3fff_ffff;
        let rand_b_lo = self.next_random() & 0xffff_ffff;
        ((self.last_ms as u128 & 0xffff_ffff_ffff) << 80)
            | (0x7u128 << 76)
            | ((rand_a as u128) << 64)
            | (0b10u128 << 62)
            | ((rand_b_hi as u128) << 32)
            | rand_b_lo as u128
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A time-ordered (version 7) UUID, lowercase and hyphenated: 48 bits of
/// Unix milliseconds, then a counter that keeps ids minted in one
/// millisecond in order (and makes every id of this process distinct),
/// then random bits. Task ids lead the keys of the task, message and log
/// B-trees; ids that grow with time make inserts land at the end of those
/// trees instead of splitting pages all over them (about 10x less WAL per
/// creation than random ids).
pub fn uuid() -> String {
    let ms = now_ms();
    let bits = {
        let mut g = GEN.lock();
        g.get_or_insert_with(Gen::seeded).next(ms)
    };
    format(bits)
}

/// Hyphenated lowercase hex, without the formatting machinery.
fn format(bits: u128) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 36];
    let mut j = 0;
    for i in 0..32 {
        if matches!(i, 8 | 12 | 16 | 20) {
            out[j] = b'-';
            j += 1;
        }
        let nibble = (bits >> (124 - 4 * i)) & 0xf;
        out[j] = HEX[nibble as usize];
        j += 1;
    }
    // Only ASCII hex digits and hyphens were written.
    out.iter().map(|&b| b as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_v7_time_ordered_and_distinct() {
        let a = uuid();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(parsed.to_string(), a);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = uuid();
        assert_ne!(a, b);
        assert!(a < b, "later ids sort after earlier ones");
    }

    #[test]
    fn ids_in_one_millisecond_stay_ordered_and_distinct() {
        let mut g = Gen {
            last_ms: 0,
            counter: 0,
            rng: 7,
        };
        let mut prev = g.next(1_000);
        for _ in 0..10_000 {
            let next = g.next(1_000);
            assert!(next > prev);
            prev = next;
        }
        // A clock that goes back never gives an earlier or equal id.
        let back = g.next(500);
        assert!(back > prev);
        // The counter's end borrows the next millisecond.
        g.counter = COUNTER_MAX;
        let borrowed = g.next(1_000);
        assert!(borrowed > back);
        assert_eq!((borrowed >> 80) as u64, 1_001);
    }

    #[test]
    fn the_timestamp_leads() {
        let id = uuid::Uuid::parse_str(&uuid()).unwrap();
        let (secs, _) = id.get_timestamp().unwrap().to_unix();
        let now = now_ms() / 1000;
        assert!(secs.abs_diff(now) <= 1, "{secs} vs {now}");
    }
}

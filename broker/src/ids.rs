//! Task ids: time-ordered (version 7) UUIDs.

use std::time::{SystemTime, UNIX_EPOCH};

/// A time-ordered (version 7) UUID: 48 bits of Unix milliseconds, then 74
/// random bits. Task ids lead the keys of the task, message and log
/// B-trees; ids that grow with time make inserts land at the end of those
/// trees instead of splitting pages all over them (about 10x less WAL per
/// creation than random ids), while staying unguessable enough for ids
/// (they are not credentials: tokens are).
pub fn uuid() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6] = (b[6] & 0x0f) | 0x70;
    b[8] = (b[8] & 0x3f) | 0x80;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(HEX[(x >> 4) as usize] as char);
        out.push(HEX[(x & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_v7_time_ordered_and_distinct() {
        let a = uuid();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "7");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = uuid();
        assert_ne!(a, b);
        assert!(a < b, "later ids sort after earlier ones");
    }
}

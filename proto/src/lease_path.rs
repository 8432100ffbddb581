//! Lease paths (docs/protocol.md §11 Leases): their normal form, and when
//! two of them could name one file.
//!
//! A path is relative and `/`-separated. Normalising refuses what would
//! make two spellings of one file look different (`..`, `.`, empty
//! segments, a leading `/`) and rewrites a trailing `/` as a last `**`
//! segment: `src/` covers the directory `src` and everything under it.
//! Within a segment `*` matches any run of characters (none included); a
//! segment that is exactly `**` matches any number of whole segments (none
//! included). `**` inside a longer segment is refused rather than guessed at.
//!
//! [`overlaps`] answers "could one concrete path match both patterns?"
//! exactly, by dynamic programming over segments and, inside a segment pair,
//! over characters: no enumeration, so its cost is bounded by the product of
//! the two patterns' lengths (both bounded by `A2A_MAX_LEASE_PATH_BYTES`).

use crate::limits::A2A_MAX_LEASE_PATH_BYTES;

/// The segment that matches any number of whole segments.
const ANY_SEGMENTS: &str = "**";

/// Why a path is not a lease path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// Over `A2A_MAX_LEASE_PATH_BYTES`.
    TooLong { actual: u64 },
    /// Not relative, not normalised, or empty; the reason says which.
    Invalid(&'static str),
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathError::TooLong { actual } => write!(
                f,
                "a lease path is {actual} bytes long; at most {A2A_MAX_LEASE_PATH_BYTES} (A2A_MAX_LEASE_PATH_BYTES)"
            ),
            PathError::Invalid(why) => f.write_str(why),
        }
    }
}

/// The normal form of a lease path: `src/` becomes `src/**`, runs of `**`
/// segments become one. Refuses an empty path, a leading `/`, `.`, `..`,
/// empty segments, NUL, and `**` inside a longer segment.
pub fn normalize(path: &str) -> Result<String, PathError> {
    if path.len() > A2A_MAX_LEASE_PATH_BYTES {
        return Err(PathError::TooLong {
            actual: path.len() as u64,
        });
    }
    if path.is_empty() {
        return Err(PathError::Invalid("a lease path must not be empty"));
    }
    if path.starts_with('/') {
        return Err(PathError::Invalid(
            "a lease path is relative: it must not start with `/`",
        ));
    }
    if path.contains('\0') {
        return Err(PathError::Invalid("a lease path must not contain NUL"));
    }
    let (body, dir) = match path.strip_suffix('/') {
        Some(b) => (b, true),
        None => (path, false),
    };
    let mut out: Vec<&str> = Vec::new();
    for seg in body.split('/') {
        match seg {
            "" => {
                return Err(PathError::Invalid(
                    "a lease path must not have empty segments (`//`, or a lone `/`)",
                ))
            }
            "." | ".." => {
                return Err(PathError::Invalid(
                    "a lease path must not have `.` or `..` segments",
                ))
            }
            ANY_SEGMENTS if out.last() == Some(&ANY_SEGMENTS) => {}
            s if s != ANY_SEGMENTS && s.contains(ANY_SEGMENTS) => {
                return Err(PathError::Invalid(
                    "`**` must be a whole segment (`a/**/b`), not part of one",
                ))
            }
            s => out.push(s),
        }
    }
    if dir && out.last() != Some(&ANY_SEGMENTS) {
        out.push(ANY_SEGMENTS);
    }
    Ok(out.join("/"))
}

/// Could one concrete path (non-empty segments, no wildcards of its own)
/// match both normalised patterns?
pub fn overlaps(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let a: Vec<&str> = a.split('/').collect();
    let b: Vec<&str> = b.split('/').collect();
    // A `**` segment matches any run of whole segments.
    both_match(
        &a,
        &b,
        |s| *s == ANY_SEGMENTS,
        |x, y| segments_overlap(x, y),
    )
}

/// Could one non-empty segment match both segment patterns (`*` any run)?
fn segments_overlap(p: &str, q: &str) -> bool {
    if !p.contains('*') && !q.contains('*') {
        return p == q;
    }
    // Both patterns are non-empty segments: if they share only the empty
    // string they are made of stars alone, and then share every string.
    both_match(p.as_bytes(), q.as_bytes(), |c| *c == b'*', |x, y| x == y)
}

/// Could one concrete sequence match both pattern sequences, where `any`
/// says an element matches any run of elements (none included) and `meet`
/// whether two other elements can match one concrete element? The same
/// table serves paths (segments, `**`) and segments (bytes, `*`).
fn both_match<T>(
    a: &[T],
    b: &[T],
    any: impl Fn(&T) -> bool,
    meet: impl Fn(&T, &T) -> bool,
) -> bool {
    // ok[i][j]: could a[i..] and b[j..] match one sequence's tail? Filled
    // from the ends backwards, so each cell reads cells already set.
    let (n, m) = (a.len(), b.len());
    let w = m + 1;
    let mut ok = vec![false; (n + 1) * w];
    ok[n * w + m] = true;
    for i in (0..=n).rev() {
        for j in (0..=m).rev() {
            if i == n && j == m {
                continue;
            }
            let any_a = i < n && any(&a[i]);
            let any_b = j < m && any(&b[j]);
            ok[i * w + j] = if any_a || any_b {
                // A wildcard matches nothing (skip it), or takes the other
                // side's next element (whatever concrete element that one
                // matches) and stays.
                (any_a && (ok[(i + 1) * w + j] || (j < m && ok[i * w + j + 1])))
                    || (any_b && (ok[i * w + j + 1] || (i < n && ok[(i + 1) * w + j])))
            } else {
                i < n && j < m && meet(&a[i], &b[j]) && ok[(i + 1) * w + j + 1]
            };
        }
    }
    ok[0]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normal_forms() {
        assert_eq!(normalize("src/").unwrap(), "src/**");
        assert_eq!(normalize("src/**/").unwrap(), "src/**");
        assert_eq!(normalize("a/**/**/b").unwrap(), "a/**/b");
        assert_eq!(normalize("a/*.rs").unwrap(), "a/*.rs");
        for bad in [
            "", "/a", "a//b", "a/../b", "./a", "a/.", "a/b**", "/", "a\0",
        ] {
            assert!(normalize(bad).is_err(), "{bad:?}");
        }
        let long = "a".repeat(A2A_MAX_LEASE_PATH_BYTES + 1);
        assert_eq!(
            normalize(&long),
            Err(PathError::TooLong {
                actual: long.len() as u64
            })
        );
    }

    #[test]
    fn known_overlaps() {
        let o = |a: &str, b: &str| overlaps(&normalize(a).unwrap(), &normalize(b).unwrap());
        assert!(o("src/lib.rs", "src/lib.rs"));
        assert!(!o("src/lib.rs", "src/main.rs"));
        assert!(o("src/", "src/lib.rs"));
        assert!(o("src/", "src"));
        assert!(!o("src/", "srcs/x"));
        assert!(o("src/*.rs", "src/lib.rs"));
        assert!(!o("src/*.rs", "src/a/lib.rs"));
        assert!(o("**/*.rs", "src/a/lib.rs"));
        assert!(o("a*", "*b"));
        assert!(!o("a*x", "b*"));
        assert!(o("a/**/c", "**/b/**"));
        assert!(!o("a/b", "a/b/c"));
    }

    /// The oracle: does a normalised pattern match a concrete path?
    /// Plain backtracking, independent of the DP above.
    fn matches(pattern: &[&str], path: &[&str]) -> bool {
        match pattern.split_first() {
            None => path.is_empty(),
            Some((&"**", rest)) => (0..=path.len()).any(|k| matches(rest, &path[k..])),
            Some((seg, rest)) => match path.split_first() {
                Some((p, tail)) => seg_matches(seg.as_bytes(), p.as_bytes()) && matches(rest, tail),
                None => false,
            },
        }
    }

    fn seg_matches(pat: &[u8], s: &[u8]) -> bool {
        match pat.split_first() {
            None => s.is_empty(),
            Some((b'*', rest)) => (0..=s.len()).any(|k| seg_matches(rest, &s[k..])),
            Some((c, rest)) => s.first() == Some(c) && seg_matches(rest, &s[1..]),
        }
    }

    /// Every concrete path of up to four segments over {a, b, aa, ab, ba,
    /// bb}: enough to hold a witness for any two patterns of up to two
    /// segments whose literals are single letters (a witness needs at most
    /// one concrete segment per literal segment of either pattern, each of
    /// at most two letters).
    fn concrete_paths() -> Vec<Vec<&'static str>> {
        const SEGS: [&str; 6] = ["a", "b", "aa", "ab", "ba", "bb"];
        let mut all: Vec<Vec<&str>> = SEGS.iter().map(|s| vec![*s]).collect();
        let mut level = all.clone();
        for _ in 1..4 {
            let next: Vec<Vec<&str>> = level
                .iter()
                .flat_map(|p| {
                    SEGS.iter().map(move |s| {
                        let mut q = p.clone();
                        q.push(*s);
                        q
                    })
                })
                .collect();
            all.extend(next.iter().cloned());
            level = next;
        }
        all
    }

    fn pattern() -> impl Strategy<Value = String> {
        let seg = prop::sample::select(vec!["a", "b", "*", "a*", "*a", "**"]);
        (prop::collection::vec(seg, 1..=2), any::<bool>()).prop_map(|(segs, dir)| {
            let mut p = segs.join("/");
            if dir {
                p.push('/');
            }
            p
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        /// `overlaps` agrees with brute force: a shared concrete path
        /// exists among the generated ones exactly when it says so.
        #[test]
        fn overlaps_is_brute_force(a in pattern(), b in pattern()) {
            let (na, nb) = (normalize(&a).unwrap(), normalize(&b).unwrap());
            let (sa, sb): (Vec<&str>, Vec<&str>) = (na.split('/').collect(), nb.split('/').collect());
            let witness = concrete_paths()
                .into_iter()
                .find(|p| matches(&sa, p) && matches(&sb, p));
            prop_assert_eq!(overlaps(&na, &nb), witness.is_some(), "{} vs {}: witness {:?}", na, nb, witness);
            prop_assert_eq!(overlaps(&na, &nb), overlaps(&nb, &na));
        }

        /// A concrete path overlaps a pattern exactly when the pattern matches it.
        #[test]
        fn a_concrete_path_overlaps_what_matches_it(a in pattern(), p in prop::sample::select(concrete_paths())) {
            let na = normalize(&a).unwrap();
            let sa: Vec<&str> = na.split('/').collect();
            prop_assert_eq!(overlaps(&na, &p.join("/")), matches(&sa, &p));
        }
    }
}

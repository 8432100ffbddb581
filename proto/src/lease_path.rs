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
//! exactly, without enumerating paths and without a table of one pattern's
//! bytes against the other's (that table cost ~4 ms for two 1,000-byte
//! `a*a*…` patterns, on the broker's single writer, for every pair of
//! paths a call compared). A [`Pattern`] is split and classified once; two
//! segment globs meet when their literal heads and tails agree, a glob
//! meets a literal by a greedy linear scan, and two paths compare segment
//! by segment, a `**` taking whatever lies between the runs the other must
//! match. That is linear in the two lengths except when exactly one path
//! has a `**`; every comparison is charged to a [`Work`] budget that the
//! broker gives each call (`A2A_MAX_LEASE_MATCH_STEPS`), so no call holds
//! the writer for longer than that budget's worth of steps.

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
/// match both normalised patterns? With no budget: for callers that
/// compare a few paths of their own. The broker compares through
/// [`Pattern::overlaps`] within a call's [`Work`].
pub fn overlaps(a: &str, b: &str) -> bool {
    let mut work = Work::unlimited();
    // An unlimited budget never runs out; were it to, "overlaps" is the
    // answer that refuses rather than grants.
    Pattern::new(a)
        .overlaps(&Pattern::new(b), &mut work)
        .unwrap_or(true)
}

/// A lease path split once into its segments, each classified, so that
/// comparing it with another costs a step per segment pair and per byte
/// looked at (see [`Pattern::overlaps`]) instead of a table of every byte
/// of one against every byte of the other. Made from any string: a path
/// that is not normalised is compared as the same string would be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: Box<str>,
    /// 16 bytes a segment: a 1,024-byte lease path of one-byte segments
    /// (512 of them) holds 8 KiB here besides its text, as long as its
    /// lease lives.
    segs: Box<[Seg]>,
    /// Indexes (into `segs`) of the `**` segments, in order.
    anys: Box<[u32]>,
}

/// One segment: its bytes in the path, and (`head`) what kind of pattern
/// it is: [`LITERAL`], [`ANY`], or the bytes before a glob's first `*`
/// (then `tail`: those after its last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    start: u32,
    end: u32,
    head: u32,
    tail: u32,
}

/// `Seg::head` of a segment without `*`.
const LITERAL: u32 = u32::MAX;
/// `Seg::head` of a `**` segment.
const ANY: u32 = u32::MAX - 1;

/// The longest path a [`Pattern`] holds whole (its offsets are `u32`); a
/// longer one is cut there. Far over anything the broker accepts (its
/// frames are 32 MiB, its lease paths `A2A_MAX_LEASE_PATH_BYTES`).
const MAX_PATTERN_BYTES: usize = (u32::MAX - 2) as usize;

impl Seg {
    fn kind(&self) -> Kind {
        match self.head {
            LITERAL => Kind::Literal,
            ANY => Kind::AnySegments,
            head => Kind::Glob {
                head: head as usize,
                tail: self.tail as usize,
            },
        }
    }

    fn bytes<'a>(&self, text: &'a str) -> &'a [u8] {
        &text.as_bytes()[self.start as usize..self.end as usize]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No `*`: matches itself only.
    Literal,
    /// Has a `*`: `head` bytes before the first, `tail` after the last.
    Glob { head: usize, tail: usize },
    /// Exactly `**`: any number of whole segments.
    AnySegments,
}

impl Pattern {
    /// Splits `path` on `/` and classifies each segment (linear in its length).
    pub fn new(path: &str) -> Pattern {
        let mut cut = path.len().min(MAX_PATTERN_BYTES);
        while !path.is_char_boundary(cut) {
            cut -= 1;
        }
        let path = &path[..cut];
        // Every offset below is at most `cut`, which fits in a u32.
        let at = |n: usize| n as u32;
        let mut segs = Vec::with_capacity(memchr::memchr_iter(b'/', path.as_bytes()).count() + 1);
        let mut anys = Vec::new();
        let mut start = 0;
        for seg in path.split('/') {
            let end = start + seg.len();
            let (head, tail) = if seg == ANY_SEGMENTS {
                anys.push(at(segs.len()));
                (ANY, 0)
            } else {
                match (seg.find('*'), seg.rfind('*')) {
                    (Some(first), Some(last)) => (at(first), at(seg.len() - last - 1)),
                    _ => (LITERAL, 0),
                }
            };
            segs.push(Seg {
                start: at(start),
                end: at(end),
                head,
                tail,
            });
            start = end + 1;
        }
        Pattern {
            text: path.into(),
            segs: segs.into_boxed_slice(),
            anys: anys.into_boxed_slice(),
        }
    }

    /// The path as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Could one concrete path match both patterns ([`overlaps`]'s
    /// question, answered the same)? Charges `work` 8 steps for the pair
    /// of paths, 2 per pair of segments compared, one per 16 bytes they
    /// compare for equality and one per byte a glob is sought through,
    /// before doing it; refuses with [`OverBudget`] once the budget is
    /// spent. The steps are linear in the two paths' lengths (at most
    /// 10 + 3 x (both lengths together)), except when exactly one of them
    /// has a `**`: then each run of segments between two of its `**` is
    /// looked for along the other, (segments of the other) x (segments of
    /// the run) segment pairs at most, (segments of both + 1) times the
    /// linear bound, which the budget bounds.
    pub fn overlaps(&self, other: &Pattern, work: &mut Work) -> Result<bool, OverBudget> {
        work.charge(PAIR_STEPS)?;
        match (self.anys.is_empty(), other.anys.is_empty()) {
            // Two fixed-length sequences: segment by segment.
            (true, true) => {
                if self.segs.len() != other.segs.len() {
                    return Ok(false);
                }
                self.all_meet(&self.segs, other, &other.segs, work)
            }
            // Both have a `**`: whatever lies between the first and the
            // last `**` of either is taken by a `**` of the other, so only
            // the runs before the first and after the last must agree (a
            // witness is the longer head, then the middles of both, then the
            // longer tail).
            (false, false) => {
                let (h1, h2) = (self.head(), other.head());
                let n = h1.len().min(h2.len());
                if !self.all_meet(&h1[..n], other, &h2[..n], work)? {
                    return Ok(false);
                }
                let (t1, t2) = (self.tail(), other.tail());
                let n = t1.len().min(t2.len());
                self.all_meet(&t1[t1.len() - n..], other, &t2[t2.len() - n..], work)
            }
            (true, false) => self.fits(other, work),
            (false, true) => other.fits(self, work),
        }
    }

    /// The segments before the first `**` (all of them if none).
    fn head(&self) -> &[Seg] {
        &self.segs[..self.anys.first().map_or(self.segs.len(), |i| *i as usize)]
    }

    /// The segments after the last `**` (all of them if none).
    fn tail(&self) -> &[Seg] {
        &self.segs[self.anys.last().map_or(0, |i| *i as usize + 1)..]
    }

    /// Do the segments of `mine` (of `self`) and `theirs` (of `other`)
    /// meet pairwise? Both runs are of one length.
    fn all_meet(
        &self,
        mine: &[Seg],
        other: &Pattern,
        theirs: &[Seg],
        work: &mut Work,
    ) -> Result<bool, OverBudget> {
        for (x, y) in mine.iter().zip(theirs) {
            if !self.meet(x, other, y, work)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Could one concrete segment match segment `x` of `self` and `y` of
    /// `other`?
    fn meet(&self, x: &Seg, other: &Pattern, y: &Seg, work: &mut Work) -> Result<bool, OverBudget> {
        let (a, b) = (x.bytes(&self.text), y.bytes(&other.text));
        match (x.kind(), y.kind()) {
            (Kind::Literal, Kind::Literal) => {
                let same_len = a.len() == b.len();
                work.charge(SEGMENT_STEPS + if same_len { compared(a.len()) } else { 0 })?;
                Ok(same_len && a == b)
            }
            // Two globs share a string exactly when one head starts the
            // other and one tail ends the other: the longer head, then
            // every literal piece of both, then the longer tail, is matched
            // by each (its stars take the other's pieces).
            (Kind::Glob { head: h1, tail: t1 }, Kind::Glob { head: h2, tail: t2 }) => {
                let (h, t) = (h1.min(h2), t1.min(t2));
                work.charge(SEGMENT_STEPS + compared(h + t))?;
                Ok(a[..h] == b[..h] && a[a.len() - t..] == b[b.len() - t..])
            }
            (Kind::Glob { head, tail }, Kind::Literal) => glob_matches(a, head, tail, b, work),
            (Kind::Literal, Kind::Glob { head, tail }) => glob_matches(b, head, tail, a, work),
            // A `**` is never compared as one segment (the callers split
            // on them); it would meet anything.
            (Kind::AnySegments, _) | (_, Kind::AnySegments) => {
                work.charge(SEGMENT_STEPS)?;
                Ok(true)
            }
        }
    }

    /// `self` has no `**`, `other` has: does `other` match a path of
    /// `self`'s segment count, each segment meeting `self`'s? Its head
    /// takes the first segments, its tail the last, and each run between
    /// two `**` the leftmost place after the previous run where it fits:
    /// any later place would leave less room for the runs after it.
    fn fits(&self, other: &Pattern, work: &mut Work) -> Result<bool, OverBudget> {
        let (head, tail) = (other.head(), other.tail());
        let n = self.segs.len();
        if head.len() + tail.len() > n {
            return Ok(false);
        }
        if !self.all_meet(&self.segs[..head.len()], other, head, work)?
            || !self.all_meet(&self.segs[n - tail.len()..], other, tail, work)?
        {
            return Ok(false);
        }
        let (mut from, to) = (head.len(), n - tail.len());
        for pair in other.anys.windows(2) {
            let run = &other.segs[pair[0] as usize + 1..pair[1] as usize];
            if run.is_empty() {
                continue;
            }
            let mut at = None;
            for start in from..(to + 1).saturating_sub(run.len()) {
                if self.all_meet(&self.segs[start..start + run.len()], other, run, work)? {
                    at = Some(start);
                    break;
                }
            }
            match at {
                Some(start) => from = start + run.len(),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// Steps charged for one pair of paths, one pair of segments, and (see
/// [`compared`]) bytes. Weighed so that a step is about the same time
/// whatever a call spends its budget on: a pair costs its lookups and
/// dispatch even when its first bytes differ, a segment pair its slicing,
/// and a plain byte comparison does 16 bytes in about the time of a step
/// (BENCHMARKS.md, "Lease paths", measures each kind).
const PAIR_STEPS: usize = 8;
const SEGMENT_STEPS: usize = 2;

/// Steps for `n` bytes compared for equality (one per 16).
fn compared(n: usize) -> usize {
    n.div_ceil(16)
}

/// Does the glob segment `glob` (`head` bytes before its first `*`, `tail`
/// after its last) match the literal segment `s`? The head starts it, the
/// tail ends it, and each piece between stars is found leftmost after the
/// previous one (a later find only leaves less room): linear in both
/// lengths (`memmem` is linear in the worst case), and charged so. Most
/// pairs differ in their heads or tails, and are charged for those only.
fn glob_matches(
    glob: &[u8],
    head: usize,
    tail: usize,
    s: &[u8],
    work: &mut Work,
) -> Result<bool, OverBudget> {
    work.charge(SEGMENT_STEPS + compared(head + tail))?;
    if head + tail > s.len()
        || glob[..head] != s[..head]
        || glob[glob.len() - tail..] != s[s.len() - tail..]
    {
        return Ok(false);
    }
    let (middle, mut rest) = (&glob[head..glob.len() - tail], &s[head..s.len() - tail]);
    work.charge(middle.len() + rest.len())?;
    for piece in middle.split(|c| *c == b'*').filter(|p| !p.is_empty()) {
        match memchr::memmem::find(rest, piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// The steps one call may spend comparing lease paths
/// ([`Pattern::overlaps`]), and those spent so far. One budget is shared
/// by every pair a call compares, so the call's cost is bounded whatever
/// the number of leases, paths and wildcards.
#[derive(Debug, Clone)]
pub struct Work {
    spent: u64,
    limit: u64,
}

impl Work {
    /// A budget of `limit` steps.
    pub fn new(limit: u64) -> Work {
        Work { spent: 0, limit }
    }

    /// No budget (for callers comparing a few paths of their own).
    pub fn unlimited() -> Work {
        Work::new(u64::MAX)
    }

    /// Steps charged so far (each before its work was done).
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// Charges `steps` for work about to be done, or refuses it.
    fn charge(&mut self, steps: usize) -> Result<(), OverBudget> {
        self.spent = self.spent.saturating_add(steps as u64);
        if self.spent > self.limit {
            return Err(OverBudget {
                limit: self.limit,
                spent: self.spent,
            });
        }
        Ok(())
    }
}

/// A comparison that would take more steps than its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    /// The budget that ran out.
    pub limit: u64,
    /// The steps charged when it did (the work asked for was at least this).
    pub spent: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "comparing these lease paths with the context's live leases takes more than {} steps (A2A_MAX_LEASE_MATCH_STEPS): name fewer paths, or fewer wildcards",
            self.limit
        )
    }
}

/// The quadratic matcher lease paths were compared with before [`Pattern`]
/// (not used by the broker): one copy for the property tests and the
/// lease bench.
#[doc(hidden)]
pub mod table {
    use super::ANY_SEGMENTS;

    /// The matcher this module had before [`Pattern`]: a table of every
    /// segment of one path against every segment of the other and, for
    /// each segment pair, of every byte against every byte. Exact, and
    /// independent of `Pattern`'s reasoning: the property tests' second
    /// oracle, and the lease bench's "before".
    pub fn table_overlaps(a: &str, b: &str) -> bool {
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

    use super::table::table_overlaps;

    /// The oracle: does a normalised pattern match a concrete path?
    /// Plain backtracking, independent of both matchers.
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

    /// Any string over `a`, `b`, `*` and `/`: empty segments, `***` and
    /// `a**` included, so the two matchers are held to one answer even on
    /// paths `normalize` would refuse.
    fn any_path() -> impl Strategy<Value = String> {
        "[ab*/]{0,12}"
    }

    /// Normalised patterns of up to five segments, globs with several stars.
    fn glob_path() -> impl Strategy<Value = String> {
        let seg = prop::sample::select(vec![
            "a", "b", "ab", "ba", "*", "a*", "*a", "*b*", "a*b", "b*a*", "aa*", "**",
        ]);
        prop::collection::vec(seg, 1..=5).prop_map(|segs| normalize(&segs.join("/")).unwrap())
    }

    /// Segments of a path, `**` included.
    fn segments(p: &str) -> u64 {
        p.split('/').count() as u64
    }

    /// The steps of one comparison with no budget.
    fn steps(a: &str, b: &str) -> (bool, u64) {
        let mut work = Work::unlimited();
        let hit = Pattern::new(a)
            .overlaps(&Pattern::new(b), &mut work)
            .unwrap();
        (hit, work.spent())
    }

    /// The bound `Pattern::overlaps` states: linear in the two lengths,
    /// or, when exactly one path has a `**`, that many per segment.
    fn step_bound(a: &str, b: &str) -> u64 {
        let linear = 10 + 3 * (a.len() + b.len()) as u64;
        let mixed = a.split('/').any(|s| s == "**") != b.split('/').any(|s| s == "**");
        if mixed {
            (segments(a) + segments(b) + 1) * linear
        } else {
            linear
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        /// `Pattern::overlaps` gives the old table's answer on any string,
        /// both ways round, within its stated steps.
        #[test]
        fn pattern_agrees_with_the_table(a in any_path(), b in any_path()) {
            let (hit, spent) = steps(&a, &b);
            prop_assert_eq!(hit, table_overlaps(&a, &b), "{:?} vs {:?}", a, b);
            prop_assert_eq!(hit, steps(&b, &a).0, "{:?} vs {:?} both ways", a, b);
            prop_assert!(spent <= step_bound(&a, &b), "{:?} vs {:?}: {} steps", a, b, spent);
        }

        /// The same on normalised globs of several segments and stars.
        #[test]
        fn pattern_agrees_with_the_table_on_globs(a in glob_path(), b in glob_path()) {
            let (hit, spent) = steps(&a, &b);
            prop_assert_eq!(hit, table_overlaps(&a, &b), "{} vs {}", a, b);
            prop_assert!(spent <= step_bound(&a, &b), "{} vs {}: {} steps", a, b, spent);
        }
    }

    /// Paths at `A2A_MAX_LEASE_PATH_BYTES` built to be costly: the reported
    /// pair of `a*a*…` globs, a glob against a literal, segments of one
    /// byte, and one `**` run looked for along 500 segments.
    fn worst_pairs() -> Vec<(String, String)> {
        let max = A2A_MAX_LEASE_PATH_BYTES;
        let stars = |c: &str, tail: &str| {
            let mut p = format!("{c}*").repeat((max - tail.len()) / 2);
            p.push_str(tail);
            p
        };
        let slashes = |c: &str, tail: &str| {
            let mut p = format!("{c}/").repeat((max - tail.len()) / 2);
            p.push_str(tail);
            p
        };
        vec![
            (stars("a", "a"), stars("a", "b")),
            (stars("a", "b"), stars("b", "a")),
            (stars("a", "a"), "a".repeat(max)),
            (stars("a", "ab"), "a".repeat(max)),
            (format!("*{}", "ab*".repeat(340)), "a".repeat(max)),
            (slashes("a", "a"), slashes("a", "b")),
            (slashes("*", "a"), slashes("a", "b")),
            (
                slashes("a", "a"),
                format!("**/{}**", "a/".repeat(250) + "b/"),
            ),
            (
                slashes("*", "a"),
                format!("**/{}**", "*/".repeat(250) + "b/"),
            ),
        ]
    }

    /// Each costly pair at the bounds within its stated steps, counted
    /// (not timed): the two reported 1,000-byte globs take a handful
    /// of steps where the table filled 1,000,000 cells.
    #[test]
    fn costly_pairs_stay_within_their_stated_steps() {
        for (a, b) in worst_pairs() {
            assert!(a.len() <= A2A_MAX_LEASE_PATH_BYTES && b.len() <= A2A_MAX_LEASE_PATH_BYTES);
            let (hit, spent) = steps(&a, &b);
            assert_eq!(hit, steps(&b, &a).0);
            assert!(spent <= step_bound(&a, &b), "{a} vs {b}: {spent} steps");
            eprintln!("{} vs {}: {hit} in {spent} steps", &a[..12], &b[..12]);
        }
        let (a, b) = &worst_pairs()[1];
        assert!(steps(a, b).1 <= 11, "two globs: their heads and tails only");
    }

    /// What a held lease keeps per segment, besides its text.
    #[test]
    fn a_segment_takes_16_bytes() {
        assert_eq!(std::mem::size_of::<Seg>(), 16);
        let p = Pattern::new(&"a/".repeat(512)[..1023]);
        assert_eq!((p.segs.len(), p.text.len()), (512, 1023));
    }

    /// A budget refuses the work past it, before doing it, and says so.
    #[test]
    fn a_budget_refuses_past_its_steps() {
        let (a, b) = &worst_pairs()[7];
        let (hit, all) = steps(a, b);
        assert!(!hit && all > 1000, "{all}");
        let mut work = Work::new(1000);
        let err = Pattern::new(a)
            .overlaps(&Pattern::new(b), &mut work)
            .unwrap_err();
        assert_eq!((err.limit, err.spent), (1000, work.spent()));
        // The last charge went past the limit; nothing after it ran.
        assert!(work.spent() > 1000 && work.spent() < 1000 + 10 + 3 * 2048);
        let mut work = Work::new(all);
        assert_eq!(
            Pattern::new(a).overlaps(&Pattern::new(b), &mut work),
            Ok(false)
        );
        assert_eq!(work.spent(), all);
        assert!(err.to_string().contains("A2A_MAX_LEASE_MATCH_STEPS"));
    }
}

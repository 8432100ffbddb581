//! Entry point of the `frame` fuzz target (`fuzz/`, outside the
//! workspace), and the check the property tests of `render` share: any
//! bytes, as a peer's name and text, go through every function that
//! renders a peer-chosen string, and a panic says which output broke the
//! rule (a frame tag the renderer did not write, a line break in a
//! single-line field, an unescaped quote in a quoted one).
//! `tests/fuzz_corpus.rs` replays the committed corpus
//! (`fuzz/corpus/frame/`), so every input a fuzzer kept stays a
//! regression test of the ordinary test command. Not part of the
//! supported surface.

use crate::render::{self, invisible};
use unicode_normalization::UnicodeNormalization;

/// The fuzz target: `data` as UTF-8 (lossily), split at its first NUL into
/// the peer's name and its text (both the whole input without one).
pub fn frame(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let (from, text) = s.split_once('\0').unwrap_or((&s, &s));
    check(from, text);
}

/// `s` as a reader that ignores case, width and invisible characters sees
/// it: compatibility-decomposed (fullwidth `＜` is `<`), lowercased, format
/// characters and the other invisible ones removed.
pub fn folded(s: &str) -> String {
    s.nfkd()
        .filter(|&c| !invisible(c))
        .collect::<String>()
        .to_lowercase()
}

/// The frame tags such a reader finds in `s`: (opening, closing).
pub fn tags(s: &str) -> (usize, usize) {
    let f = folded(s);
    (
        f.matches("<peer-text").count(),
        f.matches("</peer-text").count(),
    )
}

/// Line breaks as a reader may take them.
fn breaks(s: &str) -> bool {
    s.contains([
        '\n', '\r', '\u{0B}', '\u{0C}', '\u{85}', '\u{2028}', '\u{2029}',
    ])
}

/// Panics unless every rendering of `from` and `text` keeps the rule.
pub fn check(from: &str, text: &str) {
    // A frame holds the one opening and one closing tag the renderer
    // wrote, its attribute on the first line, its body on the next ones.
    for left in [0, 7] {
        let t = render::peer_text(from, text, left);
        assert_eq!(tags(&t), (1, 1), "{t:?}");
        assert!(t.ends_with("\n</peer-text>"), "{t:?}");
        let first = t.lines().next().unwrap_or_default();
        assert!(first.starts_with("<peer-text from=\"") && first.ends_with("\">"));
        assert!(!breaks(first), "{first:?}");
        assert_eq!(tags(&render::body(text, left)), (0, 0));
    }
    // A single-line field holds no tag, no bracket and no line break:
    // placed after the tool's own words it cannot begin a line.
    let both = [from.to_owned(), text.to_owned()];
    for s in [from, text] {
        for out in [
            render::name(s),
            render::quoted(s),
            render::attr(s),
            render::line(s),
            render::names(&both),
            render::array(&both),
        ] {
            assert_eq!(tags(&out), (0, 0), "{out:?}");
            assert!(!breaks(&out), "{out:?}");
            assert!(!out.contains(['<', '>']), "{out:?}");
        }
        // The closing quote is the only unescaped `"` after the first.
        let q = render::quoted(s);
        let inner = &q[1..q.len() - 1];
        let mut escaped = false;
        for c in inner.chars() {
            assert!(escaped || c != '"', "{q:?}");
            escaped = !escaped && c == '\\';
        }
        assert!(!escaped, "{q:?}");
    }
}

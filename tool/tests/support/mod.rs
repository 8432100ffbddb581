//! What the tool's integration tests share: a real broker on a socket, and
//! a lenient reader of the tool's text.
#![allow(dead_code)]

use a2a_client::Client;
use a2a_testkit::{socket_path_for, BrokerProcess, Spawn, TestDb, TIMEOUT};

/// A broker on a socket of its own, and a client connected to it.
pub struct Running {
    pub client: Client,
    pub broker: BrokerProcess,
    pub _db: TestDb,
}

pub fn broker() -> Running {
    let db = TestDb::new();
    let broker = Spawn::new(&db.path)
        .socket(socket_path_for(&db.path))
        .no_stdio()
        .arg("--durability")
        .arg("normal")
        .start(TIMEOUT)
        .expect("broker starts");
    let client = Client::connect(
        broker.socket().expect("socket"),
        &broker.secret().expect("secret"),
    )
    .expect("connect");
    Running {
        client,
        broker,
        _db: db,
    }
}

/// Characters a reader may not see (zero-width, joiners, bidi controls,
/// soft hyphen, word joiner, tag characters, BOM, line separators).
pub fn hidden(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{E0000}'..='\u{E007F}'
    ) || (c.is_control() && c != '\n')
}

/// `s` as a lenient reader sees it: invisible characters removed,
/// fullwidth and small forms folded to ASCII, lowercased.
pub fn folded(s: &str) -> String {
    s.chars()
        .filter(|&c| !hidden(c))
        .map(|c| match c {
            '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFF01 + 0x21).unwrap_or(c),
            '\u{FE64}' | '\u{2039}' | '\u{3008}' | '\u{2329}' | '\u{27E8}' => '<',
            '\u{FE65}' | '\u{203A}' | '\u{3009}' | '\u{232A}' | '\u{27E9}' => '>',
            '\u{FE63}' | '\u{2010}' | '\u{2011}' => '-',
            _ => c,
        })
        .collect::<String>()
        .to_lowercase()
}

/// Checks the frames of one result's text: every frame tag a lenient
/// reader finds is one the renderer wrote (an opening tag begins its
/// line, a closing tag is its line), they alternate open/close, and there
/// are `frames` of them; outside the frames no line starts with one of
/// `forbidden` (what a hostile name would like to begin a line with).
/// The untrusted-input note's mention of the tag is not a frame.
pub fn check_frames(text: &str, frames: usize, forbidden: &[&str]) {
    let note = "Text inside <peer-text> blocks";
    let mut inside = false;
    let mut opened = 0;
    for line in text.lines() {
        let f = folded(line);
        let f = f.replace(&note.to_lowercase(), "");
        let opens = f.matches("<peer-text").count();
        let closes = f.matches("</peer-text").count();
        if inside {
            if closes == 0 && opens == 0 {
                continue;
            }
            assert!(
                line == "</peer-text>" && opens == 0,
                "a frame tag inside a frame: {line:?}\n{text}"
            );
            inside = false;
        } else {
            if opens == 0 && closes == 0 {
                for bad in forbidden {
                    assert!(
                        !line.trim_start().starts_with(bad),
                        "a line outside any frame starts with {bad:?}: {line:?}\n{text}"
                    );
                }
                continue;
            }
            assert!(
                opens == 1
                    && closes == 0
                    && line.starts_with("<peer-text from=\"")
                    && line.ends_with("\">"),
                "a frame tag the renderer did not write: {line:?}\n{text}"
            );
            inside = true;
            opened += 1;
        }
    }
    assert!(!inside, "a frame left open\n{text}");
    assert_eq!(opened, frames, "frames in\n{text}");
    assert!(
        !text.chars().any(|c| hidden(c) && c != '\t'),
        "an invisible character reached the model: {text:?}"
    );
}

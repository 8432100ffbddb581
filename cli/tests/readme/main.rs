//! The command blocks of the README and of the guides, run as a new user
//! would run them: every ```` ```sh ```` block of `README.md`, then of each
//! page under `docs/` (sorted by name), in order; each file on a fresh
//! temporary `HOME` (and `TMPDIR`) of its own, with `XDG_RUNTIME_DIR` and
//! `A2A_BROKER_SECRET` unset, the built binaries first on `PATH` (this test never builds them:
//! `cargo test --workspace` has). A block must exit 0, and when a block
//! fenced as ```` ```json output ```` or ```` ```text output ```` follows
//! it, its stdout must match that (see [`matches_json`] and
//! [`matches_text`]: `…` stands for any value or any text).
//!
//! A block that is not meant to run (a synopsis with placeholders, a
//! long-running or building command) has `<!-- not run: WHY -->` on the
//! line before its fence; every other `sh` block runs, so a new one cannot
//! be left out silently.
//!
//! What the test changes in a block, and why: `cargo run [--release] -p
//! PKG --` or `--bin BIN --` becomes the built binary (no build here), and each example
//! address (`127.0.0.1:8080`, `:8081`, `:8082`) a free port of its own
//! (other tests share the machine). Each block runs in its own
//! `bash -euo pipefail`; what one starts in the background (a broker, the
//! gateway) lives on, in one process group that is ended at the end of
//! its file.
//!
//! The `reply` subcommand's own tests are in [`reply`].

mod reply;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-broker");

/// How long one block may take (the demo takes ~4 s in a debug build).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(60);

/// The marker of a block that is not run, on the line before its fence.
const NOT_RUN: &str = "<!-- not run: ";

/// The example addresses (the gateway quick start's, and the two hosts' of
/// `docs/two-hosts.md`), each replaced by a free port of its own.
const EXAMPLE_ADDRS: [&str; 3] = ["127.0.0.1:8080", "127.0.0.1:8081", "127.0.0.1:8082"];

/// One fenced block of a Markdown file.
#[derive(Debug)]
struct Block {
    /// The line of its opening fence (1-based).
    line: usize,
    /// Its info string (`sh`, `json output`, ...).
    info: String,
    body: String,
    /// Why it is not run, from a `<!-- not run: WHY -->` line before it.
    not_run: Option<String>,
    /// Only blank lines between this block and the one before.
    follows_previous: bool,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = markdown.lines().enumerate();
    let mut last_text = String::new();
    let mut blank_since_block = false;
    let mut after_block = false;
    while let Some((i, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            if !line.trim().is_empty() {
                last_text = line.trim().to_owned();
                after_block = false;
            }
            blank_since_block = blank_since_block && line.trim().is_empty();
            continue;
        };
        let mut body = String::new();
        for (_, l) in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            body.push_str(l);
            body.push('\n');
        }
        let not_run = last_text
            .strip_prefix(NOT_RUN)
            .and_then(|r| r.strip_suffix("-->"))
            .map(|r| r.trim().to_owned());
        out.push(Block {
            line: i + 1,
            info: info.trim().to_owned(),
            body,
            not_run,
            follows_previous: after_block && blank_since_block,
        });
        last_text.clear();
        after_block = true;
        blank_since_block = true;
    }
    out
}

/// A process group that everything the blocks start joins, ended on drop.
struct Group {
    leader: Child,
}

impl Group {
    fn new() -> Group {
        use std::os::unix::process::CommandExt;
        let leader = Command::new("sleep")
            .arg("3600")
            .process_group(0)
            .spawn()
            .expect("spawn the group's leader");
        Group { leader }
    }

    fn id(&self) -> i32 {
        self.leader.id() as i32
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SIGTERM lets the broker and the gateway stop cleanly; what is
        // left after a moment is killed.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.id())])
            .status();
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.id())])
            .status();
        let _ = self.leader.wait();
    }
}

/// Where the test's user lives: a fresh HOME and TMPDIR.
struct Sandbox {
    _dir: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    bin_dir: PathBuf,
    ports: [u16; 3],
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        let bin_dir = Path::new(BIN).parent().unwrap().to_path_buf();
        for tool in ["a2a-broker", "a2a-gateway"] {
            assert!(
                bin_dir.join(tool).exists(),
                "{} is not built: run `cargo build --bin {tool}` (or the README's test command)",
                bin_dir.join(tool).display()
            );
        }
        // Bound together so that the three differ; freed before the
        // blocks run (a race with another test's bind is possible but rare).
        let listeners = EXAMPLE_ADDRS.map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
        let ports = listeners.each_ref().map(|l| l.local_addr().unwrap().port());
        drop(listeners);
        Sandbox {
            _dir: dir,
            home,
            tmp,
            bin_dir,
            ports,
        }
    }

    /// The block as this test runs it (see the module's doc).
    fn rewrite(&self, body: &str) -> String {
        let mut s = body.to_string();
        for (addr, port) in EXAMPLE_ADDRS.iter().zip(self.ports) {
            s = s.replace(addr, &format!("127.0.0.1:{port}"));
        }
        // Each binary is named as its package (a2a-fanout, a2a-gateway) or
        // by itself (a2a-broker, whose package is a2a-cli).
        for (pkg, bin) in [
            ("a2a-cli", "a2a-broker"),
            ("a2a-fanout", "a2a-fanout"),
            ("a2a-gateway", "a2a-gateway"),
        ] {
            for profile in ["--release ", ""] {
                for select in [format!("-p {pkg}"), format!("--bin {bin}")] {
                    s = s.replace(
                        &format!("cargo run {profile}{select} -- "),
                        &format!("{bin} "),
                    );
                }
            }
        }
        s
    }

    /// Runs one block; its stdout, or why it failed.
    fn run(&self, group: &Group, block: &Block) -> Result<String, String> {
        use std::os::unix::process::CommandExt;
        let script = self.rewrite(&block.body);
        let out_path = self.tmp.join("block.out");
        let err_path = self.tmp.join("block.err");
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&self.home)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .env("PATH", path)
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("A2A_BROKER_SECRET")
            .env_remove("A2A_BROKER_BIN")
            .env_remove("CARGO_TARGET_DIR")
            .stdin(Stdio::null())
            // Files, not pipes: what a block leaves running keeps them open.
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .process_group(group.id())
            .spawn()
            .map_err(|e| format!("cannot run bash: {e}"))?;
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed() > BLOCK_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "still running after {BLOCK_TIMEOUT:?}; stderr:\n{}",
                    std::fs::read_to_string(&err_path).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        if !status.success() {
            return Err(format!(
                "{status}; stdout:\n{stdout}\nstderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            ));
        }
        Ok(stdout)
    }
}

/// Does `actual` match the page's `expected`? Objects have the same keys
/// with matching values, arrays the same length, a string with `…` matches
/// any string it is a pattern of, and the string `"…"` alone matches any
/// value.
fn matches_json(expected: &Value, actual: &Value) -> Result<(), String> {
    match (expected, actual) {
        (Value::String(e), _) if e == "…" => Ok(()),
        (Value::String(e), Value::String(a)) if e.contains('…') => {
            if matches_pattern(e, a) {
                Ok(())
            } else {
                Err(format!("{a:?} does not match {e:?}"))
            }
        }
        (Value::Object(e), Value::Object(a)) => {
            let (ek, ak): (Vec<_>, Vec<_>) = (e.keys().collect(), a.keys().collect());
            if ek != ak {
                return Err(format!("keys {ak:?}, the page says {ek:?}"));
            }
            for (k, v) in e {
                matches_json(v, &a[k]).map_err(|why| format!(".{k}{why}"))?;
            }
            Ok(())
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(": {} items, the page shows {}", a.len(), e.len()));
            }
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                matches_json(e, a).map_err(|why| format!("[{i}]{why}"))?;
            }
            Ok(())
        }
        (e, a) if e == a => Ok(()),
        (e, a) => Err(format!(": {a}, the page says {e}")),
    }
}

/// Each line of `actual` matches the page's line (`…`: any text).
fn matches_text(expected: &str, actual: &str) -> Result<(), String> {
    let (e, a): (Vec<_>, Vec<_>) = (expected.lines().collect(), actual.lines().collect());
    if e.len() != a.len() {
        return Err(format!(
            "{} lines, the page shows {}:\n{actual}",
            a.len(),
            e.len()
        ));
    }
    for (e, a) in e.iter().zip(&a) {
        if !matches_pattern(e, a) {
            return Err(format!("{a:?} does not match {e:?}"));
        }
    }
    Ok(())
}

/// `pattern` with each `…` standing for any text (possibly empty).
fn matches_pattern(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('…');
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    for (i, piece) in pieces.iter().enumerate() {
        if i + 1 == pieces.len() {
            return rest.ends_with(piece);
        }
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

fn check_output(output: &Block, stdout: &str) -> Result<(), String> {
    let expected = &output.body;
    if output.info.starts_with("json") {
        let want: Value = serde_json::from_str(expected)
            .map_err(|e| format!("the output block is not JSON: {e}"))?;
        let got: Value = serde_json::from_str(stdout)
            .map_err(|e| format!("stdout is not JSON ({e}):\n{stdout}"))?;
        matches_json(&want, &got).map_err(|why| format!("answer{why}\n{got:#}"))
    } else {
        matches_text(expected, stdout)
    }
}

/// The files whose blocks run: the README, then every page under `docs/`.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .map(|e| e.expect("read docs/").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    let mut out = vec![root.join("README.md")];
    out.extend(pages);
    out
}

/// What running one file's blocks did.
#[derive(Default)]
struct Ran {
    blocks: usize,
    outputs_checked: usize,
}

/// Runs every `sh` block of one file, in order, on a sandbox of its own.
fn run_file(path: &Path) -> Ran {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let name = path
        .strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {name}: {e}"));
    let all = blocks(&text);
    let sandbox = Sandbox::new();
    let group = Group::new();
    let mut ran = Ran::default();
    for (i, block) in all.iter().enumerate() {
        if block.info != "sh" {
            continue;
        }
        if let Some(why) = &block.not_run {
            assert!(
                !why.is_empty(),
                "{name}:{}: say why it is not run",
                block.line
            );
            continue;
        }
        let started = Instant::now();
        let stdout = sandbox
            .run(&group, block)
            .unwrap_or_else(|why| panic!("{name}:{}: {why}", block.line));
        eprintln!("{name}:{}: ran in {:.1?}", block.line, started.elapsed());
        if let Some(output) = all
            .get(i + 1)
            .filter(|o| o.follows_previous && o.info.ends_with(" output"))
        {
            check_output(output, &stdout).unwrap_or_else(|why| {
                panic!(
                    "{name}:{}: the output differs from {name}:{}: {why}",
                    block.line, output.line
                )
            });
            ran.outputs_checked += 1;
        }
        ran.blocks += 1;
    }
    // Every `output` block belongs to a block that ran.
    for (i, b) in all.iter().enumerate() {
        if b.info.ends_with(" output") {
            let owner = i.checked_sub(1).map(|j| &all[j]);
            assert!(
                b.follows_previous && owner.is_some_and(|o| o.info == "sh" && o.not_run.is_none()),
                "{name}:{}: an output block must follow the sh block that prints it",
                b.line
            );
        }
    }
    ran
}

/// The executed blocks and checked outputs of the README and the guides
/// together: moving a block from one file to another keeps the counts,
/// while a block lost on the way (or newly marked `not run`) fails here.
const EXECUTED_AT_LEAST: usize = 7;
const OUTPUTS_AT_LEAST: usize = 4;

#[test]
fn every_command_block_of_the_readme_and_the_guides_runs_as_written() {
    let mut total = Ran::default();
    for path in documents() {
        let ran = run_file(&path);
        total.blocks += ran.blocks;
        total.outputs_checked += ran.outputs_checked;
    }
    assert!(
        total.blocks >= EXECUTED_AT_LEAST,
        "only {} blocks ran, {EXECUTED_AT_LEAST} at least were",
        total.blocks
    );
    assert!(
        total.outputs_checked >= OUTPUTS_AT_LEAST,
        "only {} outputs were checked, {OUTPUTS_AT_LEAST} at least were",
        total.outputs_checked
    );
}

#[test]
fn the_parser_finds_markers_and_outputs() {
    let md = "Text.\n\n<!-- not run: a synopsis -->\n```sh\nx NAME\n```\n\n```sh\necho hi\n```\n\n```text output\nhi\n```\nprose\n```json\n{}\n```\n";
    let b = blocks(md);
    assert_eq!(b.len(), 4);
    assert_eq!(b[0].not_run.as_deref(), Some("a synopsis"));
    assert_eq!(b[1].not_run, None);
    assert_eq!(b[1].body, "echo hi\n");
    assert!(b[2].follows_previous && b[2].info == "text output");
    assert!(!b[3].follows_previous);
}

#[test]
fn outputs_match_with_ellipses_and_only_then() {
    let want: Value = serde_json::json!({"id": "…", "s": "TASK_…", "n": [1, {"t": "HI…"}]});
    let got =
        serde_json::json!({"id": 7, "s": "TASK_STATE_COMPLETED", "n": [1, {"t": "HI THERE"}]});
    assert_eq!(matches_json(&want, &got), Ok(()));
    let extra = serde_json::json!({"id": 7, "s": "TASK_X", "n": [1, {"t": "HI"}], "more": 1});
    assert!(matches_json(&want, &extra).is_err());
    let wrong = serde_json::json!({"id": 7, "s": "TASK_X", "n": [1, {"t": "LO"}]});
    assert!(matches_json(&want, &wrong).is_err());
    assert!(matches_pattern("a…c…e", "abcde"));
    assert!(!matches_pattern("a…c…e", "abde"));
    assert!(matches_pattern("…", ""));
    assert!(matches_text("x …\ny", "x 1\ny\n").is_ok());
    assert!(matches_text("x …\ny", "x 1\n").is_err());
}

//! The repository's files as the tree checks read them (doc_refs,
//! one_codec, bindings): the workspace root, and a walk that leaves build
//! outputs and installed packages out.

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Every file below the root whose name `keep` accepts, repo-relative with
/// `/` separators and sorted; a directory named in `skip` is not entered.
pub fn files(skip: &[&str], keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
            let p = e.expect("read dir").path();
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if p.is_dir() {
                if !skip.contains(&name.as_str()) {
                    stack.push(p);
                }
            } else if keep(&name) {
                let rel = p.strip_prefix(root()).expect("under the root");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

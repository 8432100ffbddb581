//! The checked-in header `include/a2a.h` is exactly what the pinned
//! cbindgen (a dev-dependency, so no global install) generates from this
//! crate: a change to the ABI that is not regenerated fails here.
//! `A2A_BLESS_HEADER=1 cargo test -p a2a-ffi --test header` rewrites it.

// Reads the static version string through the C ABI.
#![allow(unsafe_code)]

use std::path::Path;

fn generate() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn the_checked_in_header_is_the_generated_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/a2a.h");
    let generated = generate();
    if std::env::var_os("A2A_BLESS_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write include/a2a.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        let line = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or(
                checked_in.lines().count().min(generated.lines().count()),
                |i| i,
            );
        panic!(
            "include/a2a.h differs from the generated header (first at line {}); \
             regenerate with `A2A_BLESS_HEADER=1 cargo test -p a2a-ffi --test header`",
            line + 1
        );
    }
}

#[test]
fn the_header_version_is_the_crate_version() {
    let header = generate();
    let want = format!("#define A2A_FFI_VERSION \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(
        header.contains(&want),
        "cbindgen.toml after_includes: {want}"
    );
    // SAFETY: a2a_version returns a static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(a2a_ffi::a2a_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn every_function_says_which_threads_may_call_it() {
    let header = generate();
    let lines: Vec<&str> = header.lines().collect();
    let mut functions = 0;
    for (i, line) in lines.iter().enumerate() {
        let is_prototype = !line.starts_with("//")
            && !line.starts_with("typedef")
            && !line.starts_with(' ')
            && line.contains(" a2a_")
            && line.contains('(');
        if !is_prototype {
            continue;
        }
        functions += 1;
        // The doc comment right above the prototype.
        let doc: Vec<&str> = lines[..i]
            .iter()
            .rev()
            .take_while(|l| l.starts_with("//"))
            .copied()
            .collect();
        assert!(
            doc.iter().any(|l| l.contains("Threads:")),
            "no `Threads:` line in the doc of: {line}"
        );
    }
    assert!(functions > 50, "only {functions} prototypes found");
}

//! The C ABI tested from C: compiles the programs of `tests/c/` with `cc`
//! against the checked-in header and links them to this crate's static
//! library (which `cargo test` has just built), spawns a real broker
//! (`a2a-broker serve --socket ... --no-stdio`, through the test kit), and
//! runs each with the socket and secret; it must exit 0. `a2a_test` is run
//! plainly as a user builds it, installed by `ffi/install.sh` and compiled
//! with `pkg-config --cflags --libs a2a` only. Two programs:
//! `a2a_test.c` (the ABI used as documented) and `a2a_misuse.c` (NULLs,
//! out-of-range enumeration values, frees from inside callbacks). Each is
//! run plainly and under Valgrind (no leak, no invalid access; or the test
//! says why it skipped). Every child has a deadline.

use a2a_testkit::bin::{profile_dir, Profile};
use a2a_testkit::process::wait_exit;
use a2a_testkit::{Spawn, TestDb, TIMEOUT};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// The libraries a Rust static library needs on Linux (what `rustc
/// --print native-static-libs` lists).
const NATIVE_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The static library, brought up to date first: `cargo test` links the
/// tests against the rlib and need not have rebuilt the staticlib (a clean
/// `cargo test --workspace` does not make it at all), and a stale one
/// would test old code. A no-op when it is fresh.
fn static_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "a2a-ffi", "--lib"]);
        if Profile::current() == Profile::Release {
            cmd.arg("--release");
        }
        let status = cmd
            .current_dir(crate_dir())
            .status()
            .expect("run cargo build -p a2a-ffi");
        assert!(status.success(), "cargo build -p a2a-ffi failed");
        let lib = profile_dir(Profile::current()).join("liba2a_ffi.a");
        assert!(lib.exists(), "{} missing after the build", lib.display());
        lib
    })
}

/// Compiles `tests/c/<name>.c` (with the shared `check.h`) into
/// `<profile>/a2a-ffi-c/<name>`.
fn compile(name: &str) -> PathBuf {
    let lib = static_lib();
    let out_dir = profile_dir(Profile::current()).join("a2a-ffi-c");
    std::fs::create_dir_all(&out_dir).expect("create the C output directory");
    let exe = out_dir.join(name);
    let src = crate_dir().join(format!("tests/c/{name}.c"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-O1"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(&src)
        .arg(lib)
        .args(NATIVE_LIBS)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(status.success(), "{cc} failed to compile {}", src.display());
    exe
}

/// The C test program, compiled once per test binary.
fn c_program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile("a2a_test"))
}

/// The C test program built as a user of the installed library builds a
/// host: `ffi/install.sh PREFIX` (the documented step; with this build's
/// libraries instead of a `c-dist` build), then only `pkg-config --cflags
/// --libs a2a` for the flags. Linked to the installed `liba2a_ffi.so`.
fn c_program_by_pkg_config() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let lib_dir = static_lib().parent().expect("the library's directory");
        let prefix = profile_dir(Profile::current()).join("a2a-ffi-c/prefix");
        let status = Command::new(crate_dir().join("install.sh"))
            .arg(&prefix)
            .env("A2A_FFI_LIB_DIR", lib_dir)
            .status()
            .expect("run ffi/install.sh");
        assert!(status.success(), "ffi/install.sh failed");
        let pc_dir = prefix.join("lib/pkgconfig");
        let pkg_config = |args: &[&str]| {
            let out = Command::new("pkg-config")
                .args(args)
                .arg("a2a")
                .env("PKG_CONFIG_PATH", &pc_dir)
                .output()
                .expect("run pkg-config (install pkg-config or pkgconf)");
            assert!(out.status.success(), "pkg-config {args:?} a2a failed");
            String::from_utf8(out.stdout).expect("UTF-8 flags")
        };
        assert_eq!(
            pkg_config(&["--modversion"]).trim(),
            env!("CARGO_PKG_VERSION")
        );
        // A static link needs the system libraries too.
        assert!(pkg_config(&["--static", "--libs"]).contains("-lpthread"));
        let flags = pkg_config(&["--cflags", "--libs"]);
        let exe = profile_dir(Profile::current()).join("a2a-ffi-c/a2a_test_pkg_config");
        let src = crate_dir().join("tests/c/a2a_test.c");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = Command::new(&cc)
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1"])
            .arg(&src)
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
        assert!(
            status.success(),
            "{cc} $(pkg-config --cflags --libs a2a) failed"
        );
        exe
    })
}

/// The misuse program, compiled once per test binary.
fn misuse_program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile("a2a_misuse"))
}

/// Runs `cmd` to completion within `timeout` (killed after it), with its
/// output captured.
fn run(mut cmd: Command, timeout: Duration) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn the C test program");
    // Read the pipes on threads so that a chatty child never blocks.
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let status = match wait_exit(&mut child, timeout) {
        Some(s) => s,
        None => {
            let _ = child.kill();
            child.wait().expect("reap the killed child")
        }
    };
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// The NAME the broker is found by: its socket is where `serve --socket
/// main` puts it when `XDG_RUNTIME_DIR` is the test's directory.
const NAME: &str = "main";

/// A socket-only broker and the arguments the C program takes.
fn broker(db: &TestDb) -> (a2a_testkit::BrokerProcess, String, String) {
    let socket = db.dir.path().join("a2a-broker").join("main.sock");
    let process = Spawn::new(&db.path)
        .socket(&socket)
        .no_stdio()
        .start(TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    let secret = process.secret().expect("the broker's secret file");
    (
        process,
        socket.to_str().expect("utf-8 path").to_owned(),
        secret,
    )
}

/// `a2a_test` also connects by the broker's NAME with no secret given (the
/// locator: the socket under `$XDG_RUNTIME_DIR/a2a-broker/`, the secret
/// from the file beside it).
fn by_name(cmd: &mut Command, db: &TestDb, program: &str) {
    cmd.env("XDG_RUNTIME_DIR", db.dir.path())
        .env_remove("A2A_BROKER_SECRET");
    if program == "a2a_test" {
        cmd.arg(NAME);
    }
}

/// The program exited 0 after printing `<program>: all passed`, and no
/// thread panicked.
fn check(out: &Output, program: &str, what: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(&format!("{program}: all passed")),
        "{what}: {stdout}"
    );
    // A panic on one of the library's own threads (reader, writer, event
    // ring) never reaches C and would go unseen but for its message.
    assert!(
        !stderr.contains("panicked"),
        "{what}: a thread of the library panicked:\n{stderr}"
    );
    eprintln!("{what}:\n{stdout}");
}

/// Runs `exe` against a fresh broker, plainly.
fn run_plain(exe: &Path, program: &str) {
    let db = TestDb::new();
    let (_broker, socket, secret) = broker(&db);
    let mut cmd = Command::new(exe);
    cmd.arg(&socket).arg(&secret);
    by_name(&mut cmd, &db, program);
    let out = run(cmd, Duration::from_secs(300));
    check(&out, program, program);
}

/// Is Valgrind there? (Says so when it is not.)
fn valgrind_found() -> bool {
    let found = Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!(
            "SKIPPED: valgrind is not on PATH (CI installs it: `apt-get install -y valgrind`)"
        );
    }
    found
}

/// Runs `exe` against a fresh broker under Valgrind: any invalid access
/// or definite/possible leak makes it exit 1.
fn run_valgrind(exe: &Path, program: &str) {
    let db = TestDb::new();
    let (_broker, socket, secret) = broker(&db);
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--leak-check=full",
        "--error-exitcode=1",
        "--errors-for-leak-kinds=definite,possible",
        "--show-leak-kinds=definite,possible",
        "--quiet",
    ])
    .arg(format!(
        "--suppressions={}",
        crate_dir().join("tests/c/valgrind.supp").display()
    ))
    .arg(exe)
    .arg(&socket)
    .arg(&secret);
    by_name(&mut cmd, &db, program);
    let out = run(cmd, Duration::from_secs(900));
    check(&out, program, &format!("{program} under valgrind"));
}

/// Run plainly as built through pkg-config (the installed shared library);
/// under Valgrind as linked to the static library.
#[test]
fn the_c_program_built_by_pkg_config_passes_against_a_real_broker() {
    run_plain(c_program_by_pkg_config(), "a2a_test");
}

#[test]
fn the_c_program_is_clean_under_valgrind() {
    if valgrind_found() {
        run_valgrind(c_program(), "a2a_test");
    }
}

#[test]
fn the_misuse_program_passes_against_a_real_broker() {
    run_plain(misuse_program(), "a2a_misuse");
}

#[test]
fn the_misuse_program_is_clean_under_valgrind() {
    if valgrind_found() {
        run_valgrind(misuse_program(), "a2a_misuse");
    }
}

//! Prints the path of the `a2a-broker` binary the kit would spawn
//! (`A2A_BROKER_BIN`, else `target/<profile>/a2a-broker`, built if
//! missing), for test drivers outside Rust (the Node addon's tests):
//! `BROKER=$(cargo run -q -p a2a-testkit --bin a2a-broker-path)`.

fn main() -> std::process::ExitCode {
    let profile = match std::env::args().nth(1).as_deref() {
        Some("--release") => a2a_testkit::bin::Profile::Release,
        _ => a2a_testkit::bin::Profile::current(),
    };
    match a2a_testkit::bin::locate(profile, a2a_testkit::bin::Build::IfMissing) {
        Ok(p) => {
            println!("{}", p.display());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("a2a-broker-path: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

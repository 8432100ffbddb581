//! `a2a-broker serve` on the command line: its event log on stderr, and
//! the socket-only start when stdin is `/dev/null`.

use crate::args::ServeArgs;
use a2a_broker::server;

/// The event log of `serve`, on stderr: `warn` by default (so a quiet
/// broker's first stderr line is its ready line), `-v` info, `-vv` debug;
/// `RUST_LOG` (an env-filter directive) overrides both.
pub fn init_logs(verbose: u8) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::new(directives),
        _ => EnvFilter::new(level),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .compact()
        .init();
}

/// A socket broker whose stdin is `/dev/null` (started with `&` from a
/// script, `nohup`, a service manager) would meet the end of its input at
/// once and stop: it serves the socket only instead, as with `--no-stdio`,
/// and says so after its ready line. A pipe or a file on stdin keeps its
/// meaning (its end stops the broker).
fn socket_only_by_stdin(socket: Option<&str>) -> bool {
    socket.is_some() && stdin_is_dev_null()
}

const SOCKET_ONLY_NOTE: &str = "a2a-broker: stdin is /dev/null: serving the socket only \
     (as with --no-stdio); stop with SIGTERM or Ctrl-C";

fn stdin_is_dev_null() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return false;
    };
    let (Ok(stdin), Ok(null)) = (
        std::fs::File::from(fd).metadata(),
        std::fs::metadata("/dev/null"),
    ) else {
        return false;
    };
    stdin.file_type().is_char_device() && stdin.rdev() == null.rdev()
}

/// Runs the broker (`server::serve`) until stdin ends or a signal.
pub fn run(a: ServeArgs) -> Result<(), String> {
    let by_stdin = !a.no_stdio && socket_only_by_stdin(a.socket.as_deref());
    server::serve(server::ServeConfig {
        db: a.db,
        durability: a.durability.into(),
        batch_max: a.batch_max as usize,
        no_stdio: a.no_stdio || by_stdin,
        socket: a.socket,
        max_connections: a.max_connections as usize,
        serving_note: by_stdin.then(|| SOCKET_ONLY_NOTE.to_string()),
    })
    .map_err(|e| e.to_string())
}

//! Why a run could not be made: one error for the run and its soak
//! sampler, below both (`soak` writes the charts `run` asks for).

use a2a_testkit::process::SpawnError;

/// Why a run could not be made (a run that ran and failed its checks is a
/// [`Report`](crate::Report) whose `checks.passed` is false, not an error).
#[derive(Debug, thiserror::Error)]
pub enum FanoutError {
    #[error("cannot start the broker: {0}")]
    Broker(#[from] SpawnError),
    #[error("cannot find the broker binary: {0}")]
    Bin(#[from] a2a_testkit::bin::BinError),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("invalid options: {0}")]
    Options(String),
    #[error("worker process: {0}")]
    Worker(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

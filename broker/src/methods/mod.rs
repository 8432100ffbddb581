//! One file per method, and the dispatch of both the connection and the
//! writer, generated from `a2a_proto::method_table!` (one line per method).
//!
//! A method's route (the table's column) says which trait its file
//! implements:
//! - `write`: [`WriteMethod`], run on the writer thread against a
//!   [`WriteCtx`] (the connection inside the batch's transaction, the
//!   writer's caches, the call's undo record, the connection it came
//!   from); it returns the call's [`Effects`] (reply, events, blocking wait).
//! - `read`: [`ReadMethod`], answered without the writer: on the
//!   connection's thread when it needs no SQLite, else on a reader thread.
//! - `session` (`app.handshake`) and `wait` (`a2a.events.wait`): a `run`
//!   function of their own, as each is the only one of its kind.
//!
//! The compiler holds the table and these files together: a row whose
//! file is missing, or whose file implements the other trait, does not build.

/// One `mod` per row, named by its `handler` column: a method's file is
/// declared by its row, so adding one edits no list here. (rustfmt does not
/// look inside macros: `cargo fmt` does not reach these files, which
/// `rustfmt broker/src/methods/*.rs` formats.)
macro_rules! handlers {
    ($( $variant:ident($params:ty) $konst:ident, $route:ident, $result:ident, $h:ident, $bindings:tt; )*) => {
        $( mod $h; )*
    };
}

a2a_proto::method_table!(handlers);

use crate::broker::Broker;
use crate::core::CoreError;
use crate::delivery::Responder;
use crate::engine::{Effects, Op, Origin, RunOnWriter, Shared, WriteCtx};
use crate::read_calls::ReadCtx;
use crate::reply::Reply;
use crate::rpc_errors::{self, to_rpc};
use crate::session::Session;
use a2a_proto::call::Call;
use a2a_proto::error::RpcError;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A method the writer runs.
pub(crate) trait WriteMethod {
    type Params;
    /// Does it write rows? (One that does not still goes through the
    /// writer, so that its events are ordered with everyone else's.)
    const WRITES: bool = true;

    /// Does this call hold one of its connection's parking places until it
    /// is answered (`A2A_MAX_PARKED_WAITS`: a blocking send)?
    fn parks(_p: &Self::Params) -> bool {
        false
    }

    /// Validates everything, then writes, then changes the writer's memory
    /// (through `cx`, which records it for undo).
    fn run(p: Self::Params, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError>;
}

/// A method answered without the writer, from committed state only.
pub(crate) trait ReadMethod {
    type Params: Send + 'static;

    /// Can it be answered on the connection's own thread (it needs no
    /// SQLite)? Otherwise a reader thread answers it.
    fn here(p: &Self::Params, shared: &Shared) -> bool;

    fn run(p: Self::Params, cx: &mut ReadCtx<'_>) -> Result<Reply, CoreError>;
}

/// The connection's side of one call: `Some(result)` to answer now,
/// `None` when the responder was handed on.
type Answer = Option<Result<Reply, RpcError>>;

macro_rules! route {
    (session, $h:ident, $v:ident, $b:ident, $s:ident, $p:ident, $w:ident, $slot:ident) => {
        Some($h::run($s, $p))
    };
    (wait, $h:ident, $v:ident, $b:ident, $s:ident, $p:ident, $w:ident, $slot:ident) => {
        $h::run($b, $s, $p, $slot)
    };
    (read, $h:ident, $v:ident, $b:ident, $s:ident, $p:ident, $w:ident, $slot:ident) => {
        $b.read_method::<$h::Handler>($p, $slot)
    };
    (write, $h:ident, $v:ident, $b:ident, $s:ident, $p:ident, $w:ident, $slot:ident) => {{
        let parks = <$h::Handler as WriteMethod>::parks(&$p);
        $b.queue(Call::$v($p), $w, parks, $s, $slot)
    }};
}

macro_rules! on_writer {
    (write, $h:ident, $p:ident, $cx:ident) => {
        <$h::Handler as WriteMethod>::run($p, $cx)
    };
    ($route:ident, $h:ident, $p:ident, $cx:ident) => {{
        drop($p);
        Err(not_for_the_writer(stringify!($h)))
    }};
}

macro_rules! writes {
    (write, $h:ident) => {
        <$h::Handler as WriteMethod>::WRITES
    };
    ($route:ident, $h:ident) => {
        false
    };
}

macro_rules! dispatch {
    ($( $variant:ident($params:ty) $konst:ident, $route:ident, $result:ident, $h:ident, $bindings:tt; )*) => {
        impl Broker {
            /// Routes a pre-checked call to its method; `weight`: the payload
            /// bytes its pre-check counted (for the writer's groups).
            pub(crate) fn route_call(
                &self,
                s: &mut Session,
                call: Call,
                weight: usize,
                slot: &mut Option<Responder>,
            ) -> Answer {
                match call {
                    $( Call::$variant(p) => route!($route, $h, $variant, self, s, p, weight, slot), )*
                }
            }
        }

        /// The writer's side: runs a queued call's method.
        impl RunOnWriter for Call {
            fn run_on_writer(self, cx: &mut WriteCtx<'_>) -> Result<Effects, CoreError> {
                match self {
                    $( Call::$variant(p) => on_writer!($route, $h, p, cx), )*
                }
            }

            fn writes(&self) -> bool {
                match self {
                    $( Call::$variant(_) => writes!($route, $h), )*
                }
            }
        }
    };
}

a2a_proto::method_table!(dispatch);

/// A call that is not the writer's reached it (a bug: `queue` takes only
/// `write` methods).
fn not_for_the_writer(handler: &str) -> CoreError {
    CoreError::Internal(format!("{handler} is answered without the writer"))
}

impl Broker {
    /// Queues a call of `weight` payload bytes to the writer; a blocking
    /// send first takes one of the connection's parking places.
    fn queue(
        &self,
        call: Call,
        weight: usize,
        parks: bool,
        s: &Session,
        slot: &mut Option<Responder>,
    ) -> Answer {
        if parks {
            let parked = match s.park() {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            };
            let r = slot.take().expect("responder present");
            *slot = Some(r.parked(parked));
        }
        s.mark_queued();
        let from = Origin {
            conn: s.conn,
            outbox: s.outbox.clone(),
        };
        let op = Op {
            call,
            from,
            resume: None,
        };
        self.engine
            .call(op, weight, slot.take().expect("responder present"));
        None
    }

    /// Runs a read here if it needs no SQLite, else on a reader thread,
    /// which answers the responder itself.
    fn read_method<M: ReadMethod + 'static>(
        &self,
        p: M::Params,
        slot: &mut Option<Responder>,
    ) -> Answer {
        if M::here(&p, &self.shared) {
            let mut ctx = ReadCtx::new(&self.shared, &self.readers);
            return Some(M::run(p, &mut ctx).map_err(to_rpc));
        }
        let responder = slot.take().expect("responder present");
        let shared = self.shared.clone();
        self.read_workers.run(Box::new(move |pool| {
            let result = catch_unwind(AssertUnwindSafe(|| {
                let mut ctx = ReadCtx::new(&shared, pool);
                M::run(p, &mut ctx).map_err(to_rpc)
            }))
            .unwrap_or_else(|_| Err(rpc_errors::handler_panicked()));
            responder.send(result);
        }));
        None
    }
}

#[cfg(test)]
mod tests {
    /// With the `mod` lines made from the table, a file here that no row
    /// names would not be compiled at all: every file is a row's handler.
    #[test]
    fn every_file_here_is_a_rows_handler() {
        macro_rules! handlers {
            ($( $variant:ident($params:ty) $konst:ident, $route:ident, $result:ident, $h:ident, $bindings:tt; )*) => {
                vec![$( stringify!($h).to_owned() ),*]
            };
        }
        let mut rows: Vec<String> = a2a_proto::method_table!(handlers);
        rows.sort();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/methods");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("src/methods")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
            .filter(|stem| stem != "mod")
            .collect();
        files.sort();
        assert_eq!(
            files, rows,
            "broker/src/methods/ against the table's handlers"
        );
    }
}

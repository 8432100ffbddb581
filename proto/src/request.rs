//! One marker type per method of the table, each implementing [`Method`]:
//! its wire name, its binary number, where the broker answers it, its
//! params and its result types (as `lsp_types::request` does for LSP). A
//! client speaks any method through one generic call over these
//! (`a2a_client::Agent::call::<request::LeaseRenew>(params)`), so a method
//! added to [`method_table!`](crate::method_table) is reachable from Rust
//! with no other file edited.

use crate::call::{route, Call, Outcome, Route};
use crate::methods::ALL;
use crate::params::*;

/// A method of the protocol, named by its marker type.
pub trait Method: 'static {
    /// The wire name (`a2a.leases.renew`).
    const NAME: &'static str;
    /// The binary codec's number of its [`Call`] variant (its row in the
    /// table, counted from 0).
    const NUMBER: u32;
    /// Where the broker answers it.
    const ROUTE: Route;
    /// Its params.
    type Params: serde::Serialize + serde::de::DeserializeOwned + core::marker::Send + 'static;
    /// Its result.
    type Result: core::marker::Send + 'static;
    /// The call that carries `params`.
    fn call(params: Self::Params) -> Call;
    /// Its result out of the broker's answer; an answer of another kind is
    /// given back (a broker or codec bug the caller reports).
    fn result(outcome: Outcome) -> Result<Self::Result, Box<Outcome>>;
}

/// The answer of `a2a.message.send` and `a2a.message.stream`: one task, or
/// (a broadcast, `to: "*"`) one per peer.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskOrTasks {
    Task(TaskResult),
    Tasks(TasksResult),
}

// Clients name it here, beside the markers whose params it fills in.
pub use crate::params::Authed;

/// The place of `name` in the table (a `const fn`: the markers' numbers are
/// computed from [`ALL`], never written twice).
const fn index_of(name: &str) -> u32 {
    let mut i = 0;
    while i < ALL.len() {
        if str_eq(ALL[i], name) {
            return i as u32;
        }
        i += 1;
    }
    panic!("a marker's name is not in the method table")
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The payload type of each [`Outcome`] variant (the table's `Result`
/// column), and how to take it out.
macro_rules! result_type {
    (TaskOrTasks) => {
        TaskOrTasks
    };
    (Handshake) => {
        HandshakeResult
    };
    (Registered) => {
        RegisterResult
    };
    (Ok) => {
        OkResult
    };
    (Agents) => {
        AgentsResult
    };
    (Task) => {
        TaskResult
    };
    (TaskList) => {
        TaskListResult
    };
    (Config) => {
        ConfigResult
    };
    (Events) => {
        WaitResult
    };
    (Lease) => {
        LeaseResult
    };
    (Leases) => {
        LeasesResult
    };
}

macro_rules! take_result {
    (TaskOrTasks, $o:ident) => {
        match $o {
            Outcome::Task(t) => Ok(TaskOrTasks::Task(t)),
            Outcome::Tasks(t) => Ok(TaskOrTasks::Tasks(t)),
            other => Err(Box::new(other)),
        }
    };
    ($variant:ident, $o:ident) => {
        match $o {
            Outcome::$variant(r) => Ok(r),
            other => Err(Box::new(other)),
        }
    };
}

macro_rules! markers {
    ($( $variant:ident($params:ty) $konst:ident, $route:ident, $result:ident, $handler:ident, $bindings:tt; )*) => {
        $(
            #[doc = concat!("`", stringify!($konst), "`: the marker of `Call::", stringify!($variant), "`.")]
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub enum $variant {}

            impl Method for $variant {
                const NAME: &'static str = crate::methods::$konst;
                const NUMBER: u32 = index_of(crate::methods::$konst);
                const ROUTE: Route = route!($route);
                type Params = $params;
                type Result = result_type!($result);
                fn call(params: Self::Params) -> Call {
                    Call::$variant(params)
                }
                fn result(outcome: Outcome) -> Result<Self::Result, Box<Outcome>> {
                    take_result!($result, outcome)
                }
            }
        )*
    };
}

crate::method_table!(markers);

#[cfg(test)]
mod tests {
    use super::*;

    /// Each marker's number is its variant's on the wire: bincode writes a
    /// `Call`'s variant index first.
    #[test]
    fn marker_numbers_are_the_binary_variant_numbers() {
        let cfg = bincode::config::standard();
        let call = LeaseRenew::call(RenewLeaseParams {
            token: None,
            lease_id: "l".into(),
            ttl_seconds: 5,
        });
        let whole = bincode::encode_to_vec(&call, cfg).unwrap();
        let tag = bincode::encode_to_vec(LeaseRenew::NUMBER, cfg).unwrap();
        assert!(whole.starts_with(&tag));
        assert_eq!(call.method(), LeaseRenew::NAME);
        assert_eq!(Handshake::NUMBER, 0);
        // Each marker's number is its row's place, whatever rows follow it.
        assert_eq!(ALL[LeaseList::NUMBER as usize], LeaseList::NAME);
        assert_eq!(Get::ROUTE, Route::Read);
    }

    #[test]
    fn results_are_taken_out_or_given_back() {
        let ok = Outcome::Ok(OkResult { ok: true });
        assert_eq!(Deregister::result(ok.clone()), Ok(OkResult { ok: true }));
        assert_eq!(Get::result(ok.clone()), Err(Box::new(ok)));
    }
}

//! The lease workload end to end against the real `a2a-broker` binary:
//! delegates lease their own directory and a file shared with a
//! neighbour before their jobs; the run counts grants, conflicts and the
//! wait, and fails if two conflicting leases were ever held at once.

use a2a_fanout::engine::Workload;
use a2a_fanout::{run, Config, Durability, Transport};
use std::time::Duration;

fn leased(transport: Transport) -> a2a_fanout::Report {
    let mut c = Config::new(transport, Durability::Normal, 16);
    c.tasks = Some(64);
    c.timeout = Duration::from_secs(90);
    assert_eq!(c.workload, Workload::Leases, "leases are the default");
    let r = run(&c).expect("the run is made");
    assert!(
        r.checks.passed,
        "{}",
        a2a_fanout::report::table(std::slice::from_ref(&r))
    );
    r
}

#[test]
fn sixteen_delegates_lease_overlapping_files_one_holder_at_a_time() {
    for t in [Transport::SocketBinary, Transport::SocketNdjson] {
        let r = leased(t);
        let l = r.leases.clone().expect("the lease figures");
        assert_eq!(r.claim_mode, "leases");
        assert_eq!(l.granted, 16, "{t:?}: one lease per delegate");
        // The pairs ask at once and the first holds its lease for 20 ms:
        // the other is refused, waits, and is granted on the release.
        assert!(l.conflicts >= 1, "{t:?}: {l:?}");
        assert!(
            l.wait_ms > 0.0 && l.wait_max_ms <= l.wait_ms,
            "{t:?}: {l:?}"
        );
        assert_eq!(r.checks.overlapping_grants, 0);
        assert!(r.checks.leases_exclusive);
        // Lease events are counted apart; the job events are all there.
        assert_eq!(r.events, 64 * 5, "{t:?}");
        assert_eq!(r.claims, 0);
    }
}

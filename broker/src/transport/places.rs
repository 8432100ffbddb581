//! The local socket's `--max-connections` places, and who gives one up
//! when they are all taken.
//!
//! A connection takes a place when it is accepted and gives it back when
//! it ends. With every place taken, a new connection takes the place of
//! the oldest connection that has not completed its handshake (and is not
//! dispatching a line at that instant): that one is evicted, told why if
//! it chose a codec, and closed. Only when every place is held by a
//! handshaken connection is the new one refused. So connections that never
//! present the secret (silent, or trickling bytes) cannot lock the
//! broker's clients out for their handshake timeout; a client that holds
//! the secret completes its handshake in a round trip and is then never
//! evicted.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// Not handshaken, not dispatching: may be evicted.
const WAITING: u8 = 0;
/// Dispatching a line or frame before its handshake: not evicted meanwhile,
/// so a handshake is never answered on a connection already given away.
const DISPATCHING: u8 = 1;
/// Handshaken: keeps its place until it ends.
const OPEN: u8 = 2;
/// Its place went to a newer connection: it must close.
const EVICTED: u8 = 3;

/// The places of one socket.
pub(crate) struct Places {
    max: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Places held, evicted connections not counted (theirs went on).
    held: usize,
    next: u64,
    /// Connections not yet handshaken, oldest first.
    unauthenticated: BTreeMap<u64, Arc<Mark>>,
}

/// One connection's state, shared with the eviction.
struct Mark {
    state: AtomicU8,
    evicted: tokio::sync::Notify,
}

/// A connection's place, given back when dropped.
pub(crate) struct Place {
    id: u64,
    mark: Arc<Mark>,
    places: Arc<Places>,
}

/// What a new connection got.
pub(crate) enum Taken {
    /// A free place.
    Free(Place),
    /// The place of an unauthenticated connection, evicted for it.
    Evicted(Place),
    /// None: every place is held by a handshaken connection.
    Full,
}

impl Places {
    /// `max` places.
    pub(crate) fn new(max: usize) -> Arc<Places> {
        Arc::new(Places {
            max,
            inner: Mutex::new(Inner {
                held: 0,
                next: 0,
                unauthenticated: BTreeMap::new(),
            }),
        })
    }

    /// A place for a new connection: a free one, or the oldest waiting
    /// unauthenticated connection's, which is evicted.
    pub(crate) fn take(self: &Arc<Self>) -> Taken {
        let mut inner = self.inner.lock();
        let evicted = if inner.held < self.max {
            inner.held += 1;
            false
        } else {
            let victim = inner.unauthenticated.iter().find_map(|(&id, m)| {
                m.state
                    .compare_exchange(WAITING, EVICTED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                    .then_some(id)
            });
            let Some(id) = victim else {
                return Taken::Full;
            };
            if let Some(m) = inner.unauthenticated.remove(&id) {
                m.evicted.notify_one();
            }
            true
        };
        let id = inner.next;
        inner.next += 1;
        let mark = Arc::new(Mark {
            state: AtomicU8::new(WAITING),
            evicted: tokio::sync::Notify::new(),
        });
        inner.unauthenticated.insert(id, mark.clone());
        let place = Place {
            id,
            mark,
            places: self.clone(),
        };
        if evicted {
            Taken::Evicted(place)
        } else {
            Taken::Free(place)
        }
    }
}

impl Place {
    /// Before dispatching a line or frame ahead of the handshake: `false`
    /// if the connection was evicted (it must close without dispatching).
    pub(crate) fn hold(&self) -> bool {
        self.mark
            .state
            .compare_exchange(WAITING, DISPATCHING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// After that dispatch: a handshaken connection keeps its place for
    /// good; another may be evicted again.
    pub(crate) fn release(&self, handshaken: bool) {
        if handshaken {
            self.mark.state.store(OPEN, Ordering::Release);
            self.places.inner.lock().unauthenticated.remove(&self.id);
        } else {
            self.mark.state.store(WAITING, Ordering::Release);
        }
    }

    /// Resolves once the connection is evicted.
    pub(crate) async fn evicted(&self) {
        loop {
            if self.mark.state.load(Ordering::Acquire) == EVICTED {
                return;
            }
            self.mark.evicted.notified().await;
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut inner = self.places.inner.lock();
        inner.unauthenticated.remove(&self.id);
        // An evicted connection's place already belongs to another.
        if self.mark.state.load(Ordering::Acquire) != EVICTED {
            inner.held -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(t: Taken) -> Place {
        match t {
            Taken::Free(p) | Taken::Evicted(p) => p,
            Taken::Full => panic!("no place"),
        }
    }

    fn evicting(t: Taken) -> Place {
        match t {
            Taken::Evicted(p) => p,
            _ => panic!("no eviction"),
        }
    }

    /// At the bound the oldest waiting unauthenticated connection gives
    /// up its place; handshaken and dispatching ones never do, and with
    /// only those left a new connection is refused.
    #[test]
    fn the_oldest_unauthenticated_connection_gives_way() {
        let places = Places::new(3);
        let handshaken = place(places.take());
        assert!(handshaken.hold());
        handshaken.release(true);
        let old = place(places.take());
        let dispatching = place(places.take());
        assert!(dispatching.hold());
        let newcomer = evicting(places.take());
        assert!(!old.hold(), "an evicted connection dispatches nothing");
        drop(old);
        let second = evicting(places.take());
        assert!(!newcomer.hold(), "the oldest waiting one went next");
        drop(newcomer);
        assert!(second.hold());
        assert!(matches!(places.take(), Taken::Full));
        dispatching.release(false);
        let _third = evicting(places.take());
        assert!(!dispatching.hold());
    }

    /// Places come back when connections end, evicted ones not twice.
    #[test]
    fn places_come_back_once() {
        let places = Places::new(1);
        let a = place(places.take());
        let b = evicting(places.take());
        drop(a);
        assert!(b.hold());
        b.release(true);
        assert!(matches!(places.take(), Taken::Full), "a gave back no place");
        drop(b);
        assert!(matches!(places.take(), Taken::Free(_)));
    }
}

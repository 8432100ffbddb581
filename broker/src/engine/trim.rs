//! Gives the memory the broker freed back to the OS once the writer goes
//! idle (without it, resident memory did not come back after a load).
//!
//! Two allocators hold freed memory: mimalloc (the binary's Rust
//! allocator, `main.rs`), whose pages freed by other threads wait on the
//! allocating thread's lists until that thread collects them, and purges
//! only from a thread that calls into it; and glibc's malloc, which SQLite
//! allocates its page caches and statements from, whose arenas keep freed
//! chunks until trimmed. The writer allocates most of what the connection
//! threads free (records, notifications), so the writer collects its own
//! heap (and, forced, the abandoned and arena memory) and trims glibc's
//! arenas, once per idle period: a few milliseconds, never on a commit's path.

// Linked for `mi_collect` even where the binary's allocator is another
// (the library in tests): then there is nothing to collect, and it returns.
use mimalloc as _;

extern "C" {
    /// mimalloc: collects the calling thread's heap; `force` also purges
    /// its freed segments and the arenas' delayed purges at once.
    fn mi_collect(force: bool);
}

/// Returns free memory of both allocators to the OS (mimalloc's of the
/// calling thread's heap, glibc's of every arena).
#[allow(unsafe_code)]
pub(crate) fn release_free_memory() {
    // SAFETY: both calls take no pointer and only walk the allocators' own
    // free lists; they are safe to call from any thread at any time.
    unsafe {
        mi_collect(true);
        #[cfg(target_env = "gnu")]
        libc::malloc_trim(0);
    }
}

//! Benchmark: what the C ABI costs over the Rust client it wraps, against
//! a real broker (release build, local socket), in alternating rounds;
//! every figure is a median over the rounds and every ratio the median of
//! the per-round ratios (this shared machine's speed swings between
//! rounds, and a ratio of one round compares neighbours in time).
//!
//! (a) One round trip, one call outstanding: `a2a_agent_get_task`
//!     (`historyLength` 1, blocking, through the exported `extern "C"`
//!     functions, the task view built and freed) beside `Agent::get_task`.
//! (b) 256 in flight: an `A2A_DISPATCH_POLL` client driven the way an
//!     event-loop host drives it (poll(2) on the readiness descriptor,
//!     `a2a_client_poll`, each completion callback submitting the next
//!     `a2a_agent_get_task_async`) beside the Rust client keeping 256
//!     `get_task_async` in flight (wait for the oldest, take the answers
//!     already there, refill).
//!
//! Target: FFI / Rust time per call <= 1.2x in both.
//!
//! Run: `cargo bench -p a2a-ffi --bench ffi` (builds the release broker).

// Calls the C ABI from Rust, raw pointers and all.
#![allow(unsafe_code)]

use ::a2a_client::{agent_card, message_to, Agent, Client, Delivery};
use a2a_ffi::agent::{a2a_agent, a2a_agent_free, a2a_agent_id};
use a2a_ffi::calls::tasks::{a2a_agent_get_task, a2a_agent_get_task_async, a2a_agent_send};
use a2a_ffi::client::{
    a2a_client, a2a_client_fd, a2a_client_free, a2a_client_new, a2a_client_options,
    a2a_client_poll, a2a_client_register, a2a_delivery,
};
use a2a_ffi::parts::{a2a_parts_add_text, a2a_parts_free, a2a_parts_new};
use a2a_ffi::view::{a2a_task, a2a_task_free};
use a2a_ffi::{a2a_dispatch, a2a_status};
use a2a_testkit::bin::{locate, Build, Profile};
use a2a_testkit::{socket_path_for, Spawn, TestDb};
use std::cell::Cell;
use std::ffi::{c_void, CString};
use std::ptr;
use std::time::{Duration, Instant};

const ROUNDS: usize = 10;

thread_local! {
    /// Loop turns and callbacks run, for the callbacks-per-wake figure.
    static WAKES: Cell<u64> = const { Cell::new(0) };
    static RAN: Cell<u64> = const { Cell::new(0) };
}
const N_RTT: u64 = 2_000;
/// Alternating blocks per round of the round-trip measure.
const RTT_BLOCKS: usize = 20;
const WINDOW: usize = 256;
const N_WINDOW: u64 = 20_000;
/// Calls per alternating block of the window measure.
const WINDOW_BLOCK: u64 = 2_000;
const T: Duration = Duration::from_secs(60);

fn ok(st: a2a_status, what: &str) {
    assert_eq!(st, a2a_status::OK, "{what}");
}

fn rust_rtt(agent: &Agent, task: &str, n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        agent.get_task(task, Some(1)).expect("tasks.get");
    }
    start.elapsed()
}

fn ffi_rtt(agent: *const a2a_agent, task: &CString, n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        let mut t: *mut a2a_task = ptr::null_mut();
        ok(
            a2a_agent_get_task(agent, task.as_ptr(), 1, &mut t),
            "get_task",
        );
        a2a_task_free(t);
    }
    start.elapsed()
}

fn rust_window(agent: &Agent, task: &str, n: u64) -> Duration {
    a2a_benches::window::get_task_window(agent, task, n, WINDOW, T)
}

/// The state the poll loop's callbacks share (one thread: the loop's;
/// `Cell`s, since the callbacks reach it through a shared pointer while the
/// loop reads it).
struct Window {
    agent: *const a2a_agent,
    task: CString,
    sent: Cell<u64>,
    done: Cell<u64>,
    n: u64,
    failed: Cell<u64>,
}

unsafe extern "C" fn on_window(ud: *mut c_void, st: a2a_status, _t: *const a2a_task) {
    // SAFETY: `ud` is the `Window` the loop owns and outlives every
    // callback (they run only inside a2a_client_poll on the loop's thread,
    // before ffi_window returns); it is only read through `&`, with `Cell`s.
    let w = unsafe { &*ud.cast::<Window>() };
    w.done.set(w.done.get() + 1);
    if st != a2a_status::OK {
        w.failed.set(w.failed.get() + 1);
    }
    if w.sent.get() < w.n {
        w.sent.set(w.sent.get() + 1);
        ok(
            a2a_agent_get_task_async(w.agent, w.task.as_ptr(), 1, Some(on_window), ud),
            "resubmit",
        );
    }
}

fn ffi_window(
    client: *const a2a_client,
    agent: *const a2a_agent,
    task: &CString,
    n: u64,
) -> Duration {
    let mut fd = -1;
    ok(a2a_client_fd(client, &mut fd), "fd");
    let w = Window {
        agent,
        task: task.clone(),
        sent: Cell::new(0),
        done: Cell::new(0),
        n,
        failed: Cell::new(0),
    };
    let ud = (&w as *const Window).cast_mut().cast::<c_void>();
    let start = Instant::now();
    while w.sent.get() < n.min(WINDOW as u64) {
        w.sent.set(w.sent.get() + 1);
        ok(
            a2a_agent_get_task_async(agent, task.as_ptr(), 1, Some(on_window), ud),
            "submit",
        );
    }
    let deadline = Instant::now() + T;
    while w.done.get() < n {
        assert!(Instant::now() < deadline, "the poll loop stalled");
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own; the descriptor lives with the client.
        unsafe { libc::poll(&mut p, 1, 1000) };
        let mut ran = 0usize;
        ok(a2a_client_poll(client, usize::MAX, &mut ran), "poll");
        WAKES.with(|c| c.set(c.get() + 1));
        RAN.with(|c| c.set(c.get() + ran as u64));
    }
    let d = start.elapsed();
    assert_eq!(w.failed.get(), 0, "failed completions");
    d
}

/// CPU time of the calling thread so far: what the FFI layer adds to a
/// blocking call (submission, the task view, its free) runs here, and,
/// unlike wall time, it barely moves with the machine's load.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// One C client (`dispatch` mode) with a requester and a worker of its
/// own in context `ctx`, and a task of the benchmark's size: the client,
/// the requester and the task's id. The worker's handle is freed (the
/// agent stays registered on the client's connection).
fn c_side(
    c_socket: &CString,
    c_secret: &CString,
    dispatch: a2a_dispatch,
    ctx: &str,
) -> (*mut a2a_client, *mut a2a_agent, CString) {
    let opts = a2a_client_options {
        call_timeout_ms: 0,
        io_timeout_ms: 0,
        connect_retry_ms: 0,
        event_ring_bytes: 0,
        dispatch,
        client_name: ptr::null(),
    };
    let mut c = ptr::null_mut();
    ok(
        a2a_client_new(c_socket.as_ptr(), c_secret.as_ptr(), &opts, &mut c),
        "client",
    );
    let ctx = CString::new(ctx).expect("no NUL");
    let (mut r, mut w) = (ptr::null_mut(), ptr::null_mut());
    ok(
        a2a_client_register(
            c,
            ctx.as_ptr(),
            c"req".as_ptr(),
            ptr::null(),
            a2a_delivery::PUSH,
            &mut r,
        ),
        "register",
    );
    ok(
        a2a_client_register(
            c,
            ctx.as_ptr(),
            c"wrk".as_ptr(),
            ptr::null(),
            a2a_delivery::PUSH,
            &mut w,
        ),
        "register",
    );
    let mut parts = ptr::null_mut();
    ok(a2a_parts_new(&mut parts), "parts");
    ok(
        a2a_parts_add_text(parts, c"a task of typical size for the benchmark".as_ptr()),
        "text",
    );
    let mut t: *mut a2a_task = ptr::null_mut();
    // SAFETY: `w` is a live agent; its id borrows from it.
    let to = unsafe { a2a_agent_id(w).as_str() }.expect("id").to_owned();
    let to = CString::new(to).expect("no NUL");
    ok(
        a2a_agent_send(r, to.as_ptr(), parts, ptr::null(), &mut t),
        "send",
    );
    // SAFETY: `t` is the task just returned, alive until freed below.
    let id = unsafe { (*t).id.as_str() }.expect("id").to_owned();
    a2a_task_free(t);
    a2a_parts_free(parts);
    a2a_agent_free(w);
    (c, r, CString::new(id).expect("no NUL"))
}

/// Per round: the round trip and the window, Rust and FFI in alternating
/// blocks (us per call, their ratios, the calling thread's CPU per call);
/// the window loops' CPU summed over the rounds.
#[derive(Default)]
struct Rounds {
    rr: Vec<f64>,
    fr: Vec<f64>,
    rw: Vec<f64>,
    fw: Vec<f64>,
    ratio_rtt: Vec<f64>,
    ratio_win: Vec<f64>,
    rcpu: Vec<f64>,
    fcpu: Vec<f64>,
    wrc: Duration,
    wfc: Duration,
}

/// [`ROUNDS`] paired rounds: the Rust requester against the thread-mode C
/// agent for the round trip, against the poll-mode C client for the window.
fn paired_rounds(
    req: &Agent,
    task: &str,
    (ta, ttask): (*mut a2a_agent, &CString),
    (pc, pa, ptask): (*mut a2a_client, *mut a2a_agent, &CString),
) -> Rounds {
    let us = |n: u64, d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let mut out = Rounds::default();
    for round in 0..ROUNDS {
        // The round trip in short alternating blocks (the first side
        // alternating too), so that both sides see the same moments of
        // this shared machine's load.
        let (mut rd, mut fd) = (Duration::ZERO, Duration::ZERO);
        let (mut rc, mut fc) = (Duration::ZERO, Duration::ZERO);
        let per = N_RTT / RTT_BLOCKS as u64;
        for block in 0..RTT_BLOCKS {
            for side in 0..2 {
                let c0 = thread_cpu();
                if (block + round + side) % 2 == 0 {
                    rd += rust_rtt(req, task, per);
                    rc += thread_cpu().saturating_sub(c0);
                } else {
                    fd += ffi_rtt(ta, ttask, per);
                    fc += thread_cpu().saturating_sub(c0);
                }
            }
        }
        let (r1, f1) = (us(N_RTT, rd), us(N_RTT, fd));
        out.rcpu.push(us(N_RTT, rc));
        out.fcpu.push(us(N_RTT, fc));
        // The window likewise, in alternating blocks of WINDOW_BLOCK calls.
        let (mut rd, mut fd) = (Duration::ZERO, Duration::ZERO);
        for block in 0..(N_WINDOW / WINDOW_BLOCK) as usize {
            for side in 0..2 {
                let c0 = thread_cpu();
                if (block + round + side) % 2 == 0 {
                    rd += rust_window(req, task, WINDOW_BLOCK);
                    out.wrc += thread_cpu().saturating_sub(c0);
                } else {
                    fd += ffi_window(pc, pa, ptask, WINDOW_BLOCK);
                    out.wfc += thread_cpu().saturating_sub(c0);
                }
            }
        }
        let (r2, f2) = (us(N_WINDOW, rd), us(N_WINDOW, fd));
        out.rr.push(r1);
        out.fr.push(f1);
        out.rw.push(r2);
        out.fw.push(f2);
        out.ratio_rtt.push(f1 / r1);
        out.ratio_win.push(f2 / r2);
    }
    out
}

impl Rounds {
    /// The SUMMARY lines.
    fn report(self) {
        let verdict = |r: f64| if r <= 1.2 { "met" } else { "MISSED" };
        let (q1, q2) = (median(self.ratio_rtt), median(self.ratio_win));
        eprintln!(
            "SUMMARY ffi one round trip (get_task, historyLength 1): Rust {:.1} us, FFI {:.1} us; \
             FFI/Rust {q1:.3}x [{}] (median of {ROUNDS} paired rounds; target <= 1.2x)",
            median(self.rr),
            median(self.fr),
            verdict(q1)
        );
        eprintln!(
            "SUMMARY ffi one round trip, calling thread CPU per call: Rust {:.2} us, FFI {:.2} us \
             (FFI adds {:.2} us: the call through the C ABI, the task view and its free)",
            median(self.rcpu.clone()),
            median(self.fcpu.clone()),
            median(self.fcpu) - median(self.rcpu)
        );
        eprintln!(
            "SUMMARY ffi 256 in flight: Rust (Pending window) {:.2} us/call ({:.0} calls/s), \
             FFI (poll(2) + a2a_client_poll, callbacks resubmit) {:.2} us/call ({:.0} calls/s); \
             FFI/Rust {q2:.3}x [{}] (median of {ROUNDS} paired rounds; target <= 1.2x)",
            median(self.rw.clone()),
            1e6 / median(self.rw),
            median(self.fw.clone()),
            1e6 / median(self.fw),
            verdict(q2)
        );

        let total = (N_WINDOW * ROUNDS as u64) as f64;
        eprintln!(
            "SUMMARY ffi 256 in flight, loop thread CPU per call: Rust {:.2} us, FFI {:.2} us; \
             FFI poll loop: {:.1} callbacks per wake-up",
            self.wrc.as_secs_f64() * 1e6 / total,
            self.wfc.as_secs_f64() * 1e6 / total,
            RAN.with(Cell::get) as f64 / WAKES.with(Cell::get).max(1) as f64
        );
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("ffi: skipped (runs under `cargo bench` only)");
        return;
    }
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("ffi: load average at start {}", load().trim());
    let bin = locate(Profile::Release, Build::Always).expect("the release broker");
    let db = TestDb::new();
    let socket = socket_path_for(&db.path);
    let broker = Spawn::new(&db.path)
        .bin(bin)
        .socket(&socket)
        .no_stdio()
        .start(T)
        .expect("start the broker");
    let secret = broker.secret().expect("secret");

    // The Rust side.
    let client = Client::connect(&socket, &secret).expect("connect");
    let req = client
        .register("bench", agent_card("req"), Delivery::Push)
        .expect("register");
    let _wrk = client
        .register("bench", agent_card("wrk"), Delivery::Push)
        .expect("register");
    let task = req
        .send(
            message_to("wrk", "a task of typical size for the benchmark"),
            None,
        )
        .expect("send")
        .id;

    // The C side: a thread-mode client for the blocking round trip, a
    // poll-mode one for the loop; each registers its own requester and
    // worker and reads a task of its own, of the same size.
    let c_socket = CString::new(socket.to_str().expect("utf-8")).expect("no NUL");
    let c_secret = CString::new(secret).expect("no NUL");
    let (tc, ta, ttask) = c_side(&c_socket, &c_secret, a2a_dispatch::THREAD, "bench-c-thread");
    let (pc, pa, ptask) = c_side(&c_socket, &c_secret, a2a_dispatch::POLL, "bench-c-poll");

    // Warm-up: every path once.
    rust_rtt(&req, &task, 200);
    ffi_rtt(ta, &ttask, 200);
    rust_window(&req, &task, 2_000);
    ffi_window(pc, pa, &ptask, 2_000);

    let rounds = paired_rounds(&req, &task, (ta, &ttask), (pc, pa, &ptask));
    rounds.report();
    eprintln!("ffi: load average at end {}", load().trim());
    for a in [ta, pa] {
        a2a_agent_free(a);
    }
    for c in [tc, pc] {
        a2a_client_free(c);
    }
    drop((req, _wrk, client));
    drop(broker);
}

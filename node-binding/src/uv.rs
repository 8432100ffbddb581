//! The few libuv functions the loop's calls connection needs, looked up at
//! run time in the Node process that loaded the addon (`dlsym` of the
//! process's global scope: Node exports libuv for addons). Looking them up
//! instead of linking them keeps the addon loadable where they are not
//! exported: there [`get`] is `None` and calls take the client's threads,
//! as before (see `calls`).
//!
//! Only the handle types used here are sized: `uv_handle_size` says how
//! big each is in the running libuv, and `uv_handle_type_name` confirms
//! the type numbers below before anything is used, so a libuv whose
//! numbering differs is refused rather than misused.

use std::ffi::{c_int, c_void};
use std::sync::OnceLock;

/// `uv_handle_type` numbers (uv.h, `UV_HANDLE_TYPE_MAP`), checked against
/// `uv_handle_type_name` at load.
pub(crate) const UV_CHECK: c_int = 2;
pub(crate) const UV_POLL: c_int = 8;
pub(crate) const UV_PREPARE: c_int = 9;

/// `uv_poll_event` bits.
pub(crate) const UV_READABLE: c_int = 1;
pub(crate) const UV_WRITABLE: c_int = 2;

/// An opaque `uv_handle_t *` (any handle type: they all start alike).
pub(crate) type Handle = *mut c_void;
/// An opaque `uv_loop_t *`.
pub(crate) type Loop = *mut c_void;

pub(crate) type PollCb = unsafe extern "C" fn(Handle, c_int, c_int);
pub(crate) type HandleCb = unsafe extern "C" fn(Handle);

/// The functions, as found in the process.
pub(crate) struct Uv {
    pub(crate) handle_size: unsafe extern "C" fn(c_int) -> usize,
    pub(crate) poll_init: unsafe extern "C" fn(Loop, Handle, c_int) -> c_int,
    pub(crate) poll_start: unsafe extern "C" fn(Handle, c_int, PollCb) -> c_int,
    pub(crate) poll_stop: unsafe extern "C" fn(Handle) -> c_int,
    pub(crate) prepare_init: unsafe extern "C" fn(Loop, Handle) -> c_int,
    pub(crate) prepare_start: unsafe extern "C" fn(Handle, HandleCb) -> c_int,
    pub(crate) prepare_stop: unsafe extern "C" fn(Handle) -> c_int,
    pub(crate) check_init: unsafe extern "C" fn(Loop, Handle) -> c_int,
    pub(crate) check_start: unsafe extern "C" fn(Handle, HandleCb) -> c_int,
    pub(crate) check_stop: unsafe extern "C" fn(Handle) -> c_int,
    pub(crate) close: unsafe extern "C" fn(Handle, Option<HandleCb>),
    pub(crate) ref_: unsafe extern "C" fn(Handle),
    pub(crate) unref: unsafe extern "C" fn(Handle),
    pub(crate) set_data: unsafe extern "C" fn(Handle, *mut c_void),
    pub(crate) get_data: unsafe extern "C" fn(Handle) -> *mut c_void,
}

/// The process's libuv, or `None` where it cannot be used (not exported,
/// too old, unexpected numbering; or `A2A_NODE_NO_UV_CALLS=1`, which
/// forces the threaded path, for tests and comparisons).
pub(crate) fn get() -> Option<&'static Uv> {
    static UV: OnceLock<Option<Uv>> = OnceLock::new();
    UV.get_or_init(|| {
        if std::env::var_os("A2A_NODE_NO_UV_CALLS").is_some_and(|v| v == "1") {
            return None;
        }
        load()
    })
    .as_ref()
}

#[cfg(unix)]
#[allow(unsafe_code)]
fn load() -> Option<Uv> {
    use std::ffi::{c_char, CStr};
    fn sym(name: &CStr) -> Option<*mut c_void> {
        // SAFETY: dlsym with a NUL-terminated name; a null result is "absent".
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
    macro_rules! f {
        ($name:literal as $t:ty) => {
            // SAFETY: the symbol is the libuv function of that name, whose C
            // signature is `$t` (uv.h, stable since libuv 1.19).
            unsafe { std::mem::transmute::<*mut c_void, $t>(sym($name)?) }
        };
    }
    type Query = unsafe extern "C" fn(c_int) -> usize;
    type Init = unsafe extern "C" fn(Loop, Handle) -> c_int;
    type Start = unsafe extern "C" fn(Handle, HandleCb) -> c_int;
    type Op = unsafe extern "C" fn(Handle) -> c_int;
    type Void = unsafe extern "C" fn(Handle);
    let type_name = f!(c"uv_handle_type_name" as unsafe extern "C" fn(c_int) -> *const c_char);
    for (n, want) in [
        (UV_CHECK, "check"),
        (UV_POLL, "poll"),
        (UV_PREPARE, "prepare"),
    ] {
        // SAFETY: libuv returns a static string, or null for an unknown type.
        let name = unsafe { type_name(n) };
        if name.is_null() || unsafe { CStr::from_ptr(name) }.to_bytes() != want.as_bytes() {
            return None;
        }
    }
    Some(Uv {
        handle_size: f!(c"uv_handle_size" as Query),
        poll_init: f!(c"uv_poll_init" as unsafe extern "C" fn(Loop, Handle, c_int) -> c_int),
        poll_start: f!(c"uv_poll_start" as unsafe extern "C" fn(Handle, c_int, PollCb) -> c_int),
        poll_stop: f!(c"uv_poll_stop" as Op),
        prepare_init: f!(c"uv_prepare_init" as Init),
        prepare_start: f!(c"uv_prepare_start" as Start),
        prepare_stop: f!(c"uv_prepare_stop" as Op),
        check_init: f!(c"uv_check_init" as Init),
        check_start: f!(c"uv_check_start" as Start),
        check_stop: f!(c"uv_check_stop" as Op),
        close: f!(c"uv_close" as unsafe extern "C" fn(Handle, Option<HandleCb>)),
        ref_: f!(c"uv_ref" as Void),
        unref: f!(c"uv_unref" as Void),
        set_data: f!(c"uv_handle_set_data" as unsafe extern "C" fn(Handle, *mut c_void)),
        get_data: f!(c"uv_handle_get_data" as unsafe extern "C" fn(Handle) -> *mut c_void),
    })
}

#[cfg(not(unix))]
fn load() -> Option<Uv> {
    None
}

/// Alignment of a handle's memory (libuv's structs hold pointers and
/// 64-bit fields).
const HANDLE_ALIGN: usize = 16;

impl Uv {
    /// The bytes one handle gets: the largest of the three types used, so
    /// that freeing needs no type.
    #[allow(unsafe_code)]
    fn layout(&self) -> Option<std::alloc::Layout> {
        // SAFETY: plain libuv queries.
        let size = [UV_POLL, UV_PREPARE, UV_CHECK]
            .into_iter()
            .map(|t| unsafe { (self.handle_size)(t) })
            .max()
            .unwrap_or(0);
        std::alloc::Layout::from_size_align(size.max(1), HANDLE_ALIGN).ok()
    }

    /// Zeroed memory for a handle of any of the three types; freed by
    /// [`Uv::free`].
    #[allow(unsafe_code)]
    pub(crate) fn alloc(&self) -> Option<Handle> {
        let layout = self.layout()?;
        // SAFETY: a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        (!p.is_null()).then_some(p.cast())
    }

    /// Frees what [`Uv::alloc`] gave, once libuv is done with it (in its
    /// close callback, or when its init failed).
    #[allow(unsafe_code)]
    pub(crate) fn free(&self, h: Handle) {
        if let Some(layout) = self.layout() {
            // SAFETY: `h` came from `alloc` with this layout.
            unsafe { std::alloc::dealloc(h.cast(), layout) };
        }
    }
}

//! Reading the caller's arguments: every pointer is checked before use,
//! strings must be UTF-8, JSON must parse. Each failure names the argument.
//!
//! The functions here are `unsafe` because they read through the caller's
//! pointers; what the caller promises is the header's convention (a
//! non-NULL `const char *` is a NUL-terminated string, a handle came from
//! this library and was not freed).

use crate::status::FfiError;
use std::ffi::{c_char, CStr};

/// A required NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, name: &str) -> Result<&'a str, FfiError> {
    // SAFETY: forwarded from the caller (NULL is handled there).
    unsafe { opt_str_arg(p, name) }?.ok_or_else(|| FfiError::invalid(format!("`{name}` is NULL")))
}

/// An optional string argument (NULL: absent).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn opt_str_arg<'a>(
    p: *const c_char,
    name: &str,
) -> Result<Option<&'a str>, FfiError> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, and the caller promises a NUL-terminated string
    // living at least as long as `'a`.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str()
        .map(Some)
        .map_err(|e| FfiError::invalid(format!("`{name}` is not UTF-8: {e}")))
}

/// An optional JSON object argument, parsed into `T`.
///
/// # Safety
/// As [`opt_str_arg`].
pub(crate) unsafe fn opt_json_arg<T: serde::de::DeserializeOwned>(
    p: *const c_char,
    name: &str,
) -> Result<Option<T>, FfiError> {
    // SAFETY: forwarded from the caller.
    match unsafe { opt_str_arg(p, name) }? {
        None => Ok(None),
        Some(s) => serde_json::from_str(s)
            .map(Some)
            .map_err(|e| FfiError::invalid(format!("`{name}` is not the JSON expected: {e}"))),
    }
}

/// A required handle argument, borrowed.
///
/// # Safety
/// `p` is NULL or a live handle of type `T` made by this library, not
/// freed while the borrow lasts.
pub(crate) unsafe fn handle<'a, T>(p: *const T, name: &str) -> Result<&'a T, FfiError> {
    // SAFETY: the caller promises a live handle or NULL; `as_ref` maps NULL
    // to None.
    unsafe { p.as_ref() }.ok_or_else(|| FfiError::invalid(format!("`{name}` is NULL")))
}

/// Checks that an output pointer is there; the write happens on success.
pub(crate) fn out_arg<T>(p: *mut T, name: &str) -> Result<(), FfiError> {
    if p.is_null() {
        Err(FfiError::invalid(format!("`{name}` is NULL")))
    } else {
        Ok(())
    }
}

/// Writes an output after success.
///
/// # Safety
/// `p` was checked by [`out_arg`] and points to writable memory for a `T`.
pub(crate) unsafe fn write_out<T>(p: *mut T, v: T) {
    // SAFETY: promised by the caller: non-NULL, aligned, writable; `write`
    // does not drop the (uninitialised) old value.
    unsafe { p.write(v) }
}

/// A history length or version argument: negative means "not given".
pub(crate) fn opt_u64(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

/// Milliseconds as a duration, 0 meaning `default`.
pub(crate) fn millis_or(ms: u32, default: std::time::Duration) -> std::time::Duration {
    if ms == 0 {
        default
    } else {
        std::time::Duration::from_millis(u64::from(ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_checked() {
        // SAFETY: NULL and literals with NUL terminators.
        unsafe {
            assert!(str_arg(std::ptr::null(), "x").is_err());
            assert_eq!(opt_str_arg(std::ptr::null(), "x").unwrap(), None);
            assert_eq!(str_arg(c"hi".as_ptr(), "x").unwrap(), "hi");
            let bad = [0xffu8 as c_char, 0];
            let e = str_arg(bad.as_ptr(), "name").unwrap_err().to_string();
            assert!(e.contains("`name` is not UTF-8"), "{e}");
            let e =
                opt_json_arg::<serde_json::Map<String, serde_json::Value>>(c"[1]".as_ptr(), "data")
                    .unwrap_err()
                    .to_string();
            assert!(e.contains("`data`"), "{e}");
        }
        assert_eq!(opt_u64(-1), None);
        assert_eq!(opt_u64(3), Some(3));
    }
}

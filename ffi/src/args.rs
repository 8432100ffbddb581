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

/// A C enumeration the caller passes in: a fixed-width integer (a
/// `#[repr(transparent)]` newtype here, a typedef of `int32_t` in the
/// header) whose known values are its named constants. A Rust enum there
/// would make any other value from C undefined behaviour (a wild jump
/// through a match table); as an integer it is defined, and checked.
pub(crate) trait CEnum: Copy + Eq + 'static {
    /// Every known value, with its name in the header.
    const KNOWN: &'static [(Self, &'static str)];
    /// The integer C passed.
    fn raw(self) -> i32;
}

/// The error for an enumeration argument `name` whose value `v` is not one
/// of those `allowed` keeps: it names the parameter, the value, and the
/// allowed constants with their values.
pub(crate) fn bad_enum<T: CEnum>(v: T, name: &str, allowed: impl Fn(T) -> bool) -> FfiError {
    let list: Vec<String> = T::KNOWN
        .iter()
        .filter(|(k, _)| allowed(*k))
        .map(|(k, n)| format!("{n} ({})", k.raw()))
        .collect();
    FfiError::invalid(format!(
        "`{name}` is {}; allowed: {}",
        v.raw(),
        list.join(", ")
    ))
}

/// Makes the `#[repr(transparent)]` newtype `$t` (whose constants the
/// header shows) a [`CEnum`] of the constants listed with their C names,
/// and gives it a `Debug` that prints the name (or the raw integer when it
/// is not a known value). A macro is invisible to cbindgen, which sees the
/// newtype and its constants only.
macro_rules! c_enum {
    ($t:ident { $($c:ident => $n:literal),* $(,)? }) => {
        impl $crate::args::CEnum for $t {
            const KNOWN: &'static [($t, &'static str)] = &[$(($t::$c, $n)),*];
            fn raw(self) -> i32 {
                self.0
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match <$t as $crate::args::CEnum>::KNOWN.iter().find(|(k, _)| k == self) {
                    Some((_, n)) => f.write_str(n),
                    None => write!(f, "{}({})", stringify!($t), self.0),
                }
            }
        }
    };
}
pub(crate) use c_enum;

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

    /// Every constant of every enumeration argument, as `(name, value)`.
    fn every_known() -> Vec<(&'static str, i32)> {
        fn of<T: CEnum>() -> impl Iterator<Item = (&'static str, i32)> {
            T::KNOWN.iter().map(|(k, n)| (*n, k.raw()))
        }
        of::<crate::a2a_state>()
            .chain(of::<crate::a2a_list_role>())
            .chain(of::<crate::a2a_dispatch>())
            .chain(of::<crate::a2a_delivery>())
            .collect()
    }

    #[test]
    fn every_enum_constant_named_in_messages_is_the_headers() {
        // The names in error messages are written by hand beside the
        // constants; the header (drift-tested against the sources by
        // tests/header.rs) is where C reads them.
        let header = include_str!("../include/a2a.h");
        for (name, value) in every_known() {
            let line = format!("#define {name} {value}\n");
            assert!(header.contains(&line), "a2a.h lacks `{}`", line.trim());
        }
    }

    #[test]
    fn an_unknown_enum_value_is_named_with_the_allowed_ones() {
        let e = bad_enum(crate::a2a_delivery(9), "delivery_mode", |_| true).to_string();
        assert_eq!(
            e,
            "invalid argument: `delivery_mode` is 9; allowed: A2A_DELIVERY_PUSH (0), A2A_DELIVERY_PULL (1)"
        );
        assert_eq!(
            format!(
                "{:?} {:?}",
                crate::a2a_delivery::PULL,
                crate::a2a_delivery(-1)
            ),
            "A2A_DELIVERY_PULL a2a_delivery(-1)"
        );
    }
}

//! [`a2a_parts`]: the content of an outgoing message or artifact, built
//! part by part (text, data, file), with optional metadata and message id.
//! It is read, not consumed, by the calls that send it, so one builder can
//! be sent many times (each send mints a fresh message id unless one was
//! set: a set id makes sends idempotent, docs/protocol.md §5 Methods,
//! `a2a.message.send`).

use crate::args::{handle, opt_json_arg, opt_str_arg, out_arg, str_arg, write_out};
use crate::status::{a2a_status, guard, guard_value, FfiError};
use a2a_client::proto::types::{FileContent, Object, Role};
use a2a_client::{new_id, Artifact, Message, Part};
use base64::Engine as _;
use std::ffi::c_char;

/// The parts of an outgoing message or artifact (opaque). Made with
/// a2a_parts_new, freed with a2a_parts_free.
#[allow(non_camel_case_types)]
#[derive(Default, Clone)]
pub struct a2a_parts {
    parts: Vec<Part>,
    metadata: Option<Object>,
    message_id: Option<String>,
}

impl a2a_parts {
    /// The message these parts make, addressed to `to` or on `task_id`.
    pub(crate) fn message(&self, to: Option<&str>, task_id: Option<&str>) -> Message {
        Message {
            role: Role::User,
            parts: self.parts.clone(),
            message_id: self.message_id.clone().unwrap_or_else(new_id),
            task_id: task_id.map(str::to_owned),
            context_id: None,
            from: None,
            to: to.map(str::to_owned),
            metadata: self.metadata.clone(),
        }
    }

    /// The artifact these parts make.
    pub(crate) fn artifact(&self, artifact_id: &str, name: Option<&str>) -> Artifact {
        Artifact {
            artifact_id: artifact_id.to_owned(),
            name: name.map(str::to_owned),
            description: None,
            parts: self.parts.clone(),
            metadata: self.metadata.clone(),
        }
    }
}

fn with_parts(
    parts: *mut a2a_parts,
    f: impl FnOnce(&mut a2a_parts) -> Result<(), FfiError>,
) -> a2a_status {
    guard(|| {
        // SAFETY: `parts` is NULL or a live builder (header rule), used by
        // one thread at a time.
        let p = unsafe { parts.as_mut() }.ok_or_else(|| FfiError::invalid("`parts` is NULL"))?;
        f(p)
    })
}

/// Makes an empty builder.
///
/// Threads: any.
#[no_mangle]
pub extern "C" fn a2a_parts_new(out: *mut *mut a2a_parts) -> a2a_status {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: checked non-NULL above.
        unsafe { write_out(out, Box::into_raw(Box::<a2a_parts>::default())) };
        Ok(())
    })
}

/// Frees a builder. NULL is ignored.
///
/// Threads: any; not while another thread uses it.
#[no_mangle]
pub extern "C" fn a2a_parts_free(parts: *mut a2a_parts) {
    guard_value((), || {
        if !parts.is_null() {
            // SAFETY: made by a2a_parts_new as a Box, freed once (header rule).
            drop(unsafe { Box::from_raw(parts) });
        }
    })
}

/// Appends a text part.
///
/// Threads: any; one thread at a time per builder.
#[no_mangle]
pub extern "C" fn a2a_parts_add_text(parts: *mut a2a_parts, text: *const c_char) -> a2a_status {
    with_parts(parts, |p| {
        // SAFETY: NULL or a NUL-terminated string (header rule).
        let text = unsafe { str_arg(text, "text") }?;
        p.parts.push(Part::text(text));
        Ok(())
    })
}

/// Appends a data part: `json` must be a JSON object.
///
/// Threads: any; one thread at a time per builder.
#[no_mangle]
pub extern "C" fn a2a_parts_add_data(parts: *mut a2a_parts, json: *const c_char) -> a2a_status {
    with_parts(parts, |p| {
        // SAFETY: NULL or a NUL-terminated string (header rule).
        let data: Object = unsafe { opt_json_arg(json, "json") }?
            .ok_or_else(|| FfiError::invalid("`json` is NULL"))?;
        p.parts.push(Part::Data {
            data,
            metadata: None,
        });
        Ok(())
    })
}

/// Appends a file part with inline content: `len` bytes at `bytes` (NULL
/// allowed when `len` is 0), sent base64-encoded. `name` and `mime_type`
/// may be NULL.
///
/// Threads: any; one thread at a time per builder.
#[no_mangle]
pub extern "C" fn a2a_parts_add_file(
    parts: *mut a2a_parts,
    name: *const c_char,
    mime_type: *const c_char,
    bytes: *const u8,
    len: usize,
) -> a2a_status {
    with_parts(parts, |p| {
        if bytes.is_null() && len > 0 {
            return Err(FfiError::invalid("`bytes` is NULL"));
        }
        let data: &[u8] = if len == 0 {
            &[]
        } else {
            // SAFETY: non-NULL (checked) and, per the caller, `len`
            // readable bytes for the duration of this call.
            unsafe { std::slice::from_raw_parts(bytes, len) }
        };
        // SAFETY: NULL or NUL-terminated strings (header rule).
        let (name, mime) = unsafe {
            (
                opt_str_arg(name, "name")?,
                opt_str_arg(mime_type, "mime_type")?,
            )
        };
        p.parts.push(Part::File {
            file: FileContent {
                name: name.map(str::to_owned),
                mime_type: mime.map(str::to_owned),
                uri: None,
                bytes: Some(base64::engine::general_purpose::STANDARD.encode(data)),
            },
            metadata: None,
        });
        Ok(())
    })
}

/// Appends a file part by reference (`uri`). `name` and `mime_type` may be
/// NULL.
///
/// Threads: any; one thread at a time per builder.
#[no_mangle]
pub extern "C" fn a2a_parts_add_file_uri(
    parts: *mut a2a_parts,
    name: *const c_char,
    mime_type: *const c_char,
    uri: *const c_char,
) -> a2a_status {
    with_parts(parts, |p| {
        // SAFETY: NULL or NUL-terminated strings (header rule).
        let (name, mime, uri) = unsafe {
            (
                opt_str_arg(name, "name")?,
                opt_str_arg(mime_type, "mime_type")?,
                str_arg(uri, "uri")?,
            )
        };
        p.parts.push(Part::File {
            file: FileContent {
                name: name.map(str::to_owned),
                mime_type: mime.map(str::to_owned),
                uri: Some(uri.to_owned()),
                bytes: None,
            },
            metadata: None,
        });
        Ok(())
    })
}

/// Sets the metadata of the message or artifact (a JSON object), or
/// removes it with NULL.
///
/// Threads: any; one thread at a time per builder.
#[no_mangle]
pub extern "C" fn a2a_parts_set_metadata(parts: *mut a2a_parts, json: *const c_char) -> a2a_status {
    with_parts(parts, |p| {
        // SAFETY: NULL or a NUL-terminated string (header rule).
        p.metadata = unsafe { opt_json_arg(json, "json") }?;
        Ok(())
    })
}

/// Sets the message id every send of these parts uses (idempotent sends),
/// or with NULL goes back to a fresh id per send.
///
/// Threads: any; one thread at a time per builder.
#[no_mangle]
pub extern "C" fn a2a_parts_set_message_id(parts: *mut a2a_parts, id: *const c_char) -> a2a_status {
    with_parts(parts, |p| {
        // SAFETY: NULL or a NUL-terminated string (header rule).
        p.message_id = unsafe { opt_str_arg(id, "id") }?.map(str::to_owned);
        Ok(())
    })
}

/// Borrows a builder argument.
///
/// # Safety
/// `p` is NULL or a live builder.
pub(crate) unsafe fn parts_arg<'a>(
    p: *const a2a_parts,
    name: &str,
) -> Result<&'a a2a_parts, FfiError> {
    // SAFETY: forwarded.
    unsafe { handle(p, name) }
}

//! The request pre-checks: everything a call can be refused for without
//! the broker's state. Checks of messages, artifacts, cards and ids beyond
//! their shape (base64, ids, the size bounds of §9), which each method's
//! [`Precheck`] impl (beside its params type in `params.rs`) applies;
//! `Call::precheck` (`call.rs`) dispatches them over a whole call.
//!
//! The broker runs these on the connection's thread before a call reaches
//! the writer, so decoding a 20 MiB file part never holds up the commits of
//! others; the fuzz targets run the same code. They follow PI-Desktop's
//! broker where it is lenient (§3): a message may have no parts, a file part
//! may carry only a `name`, or both `uri` and `bytes`.

use crate::lease_path::{self, PathError};
use crate::limits::{
    A2A_MAX_ARTIFACT_BYTES, A2A_MAX_CARD_BYTES, A2A_MAX_FILE_BYTES, A2A_MAX_ID_BYTES,
    A2A_MAX_METADATA_BYTES, A2A_MAX_TEXT_CHARS,
};
use crate::limits::{
    A2A_MAX_LEASE_PATHS, A2A_MAX_LEASE_PATH_BYTES, A2A_MAX_LEASE_REASON_BYTES,
    A2A_MAX_LEASE_TTL_SECONDS, A2A_MAX_LEASE_WAIT_SECONDS, A2A_MIN_LEASE_TTL_SECONDS,
};
use crate::types::{AgentCard, Artifact, Message, Object, Part};
use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;

/// Why a request is refused before it reaches the broker's state. The
/// broker refuses the bounds it checks against its state (a task's bytes,
/// the lease match budget) with the same variants, and maps each to its
/// wire error in one place (`-32602` and `A2A_PAYLOAD_TOO_LARGE` of §8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// The params are well-formed JSON of the wrong shape or meaning.
    #[error("{0}")]
    InvalidParams(String),
    /// An id is longer than `A2A_MAX_ID_BYTES`: `-32602` (§9), with the
    /// bound's `data.limit`, `data.max` and `data.actual` (§8).
    #[error(
        "{field} is {actual} bytes long; ids are at most {max} bytes (A2A_MAX_ID_BYTES)",
        max = A2A_MAX_ID_BYTES
    )]
    IdTooLong { field: &'static str, actual: u64 },
    /// A size bound of §9 would be exceeded.
    #[error("payload exceeds {limit}")]
    PayloadTooLarge {
        limit: &'static str,
        max: u64,
        actual: u64,
    },
    /// A number or count outside a bound of §9 that is a params error
    /// (`-32602`, with `data.limit`, `data.min` when there is one,
    /// `data.max` and `data.actual`): the lease bounds.
    #[error("{reason}")]
    OutOfBounds {
        reason: String,
        limit: &'static str,
        min: Option<u64>,
        max: u64,
        actual: i64,
    },
    /// A value could not be serialized to be sized (a bug, not the caller's).
    #[error("sizing a value: {0}")]
    Unsizable(String),
}

/// A method's params' own pre-checks: one impl per params type of the
/// method table, written beside the type (`params.rs`; an empty one for
/// params with nothing to check).
pub trait Precheck {
    /// `Ok`: the payload bytes the call carries (its parts' content, as
    /// [`PartSizes::content_bytes`] counts it), which the writer's groups
    /// are bounded by; 0 for a call without parts.
    fn precheck(&mut self) -> Result<usize, CheckError> {
        Ok(0)
    }
}

/// A task id and an optional status message (`a2a.tasks.status`, `.cancel`).
pub(crate) fn check_task_message(
    id: &str,
    message: Option<&mut Message>,
) -> Result<usize, CheckError> {
    check_id("id", id)?;
    message.map_or(Ok(0), |m| {
        normalize_message(m);
        check_message(m)
    })
}

/// A lease's paths: 1 to `A2A_MAX_LEASE_PATHS`, each in its normal form,
/// duplicates dropped; a `ttlSeconds` in bounds, and the optional
/// `waitSeconds` and `reason` in theirs (`a2a.leases.acquire`).
pub(crate) fn check_acquire(
    paths: &mut Vec<String>,
    ttl_seconds: i64,
    wait_seconds: Option<i64>,
    reason: Option<&str>,
) -> Result<(), CheckError> {
    if paths.is_empty() || paths.len() > A2A_MAX_LEASE_PATHS {
        return Err(CheckError::OutOfBounds {
            reason: format!(
                "a lease names 1 to {A2A_MAX_LEASE_PATHS} paths (A2A_MAX_LEASE_PATHS); got {}",
                paths.len()
            ),
            limit: "A2A_MAX_LEASE_PATHS",
            min: Some(1),
            max: A2A_MAX_LEASE_PATHS as u64,
            actual: paths.len() as i64,
        });
    }
    let mut normal: Vec<String> = Vec::with_capacity(paths.len());
    for p in paths.iter() {
        let n = check_lease_path(p)?;
        if !normal.contains(&n) {
            normal.push(n);
        }
    }
    *paths = normal;
    check_ttl(ttl_seconds)?;
    if let Some(w) = wait_seconds {
        if !(0..=A2A_MAX_LEASE_WAIT_SECONDS as i64).contains(&w) {
            return Err(CheckError::OutOfBounds {
                reason: format!(
                    "waitSeconds is 0 to {A2A_MAX_LEASE_WAIT_SECONDS} (A2A_MAX_LEASE_WAIT_SECONDS); got {w}"
                ),
                limit: "A2A_MAX_LEASE_WAIT_SECONDS",
                min: Some(0),
                max: A2A_MAX_LEASE_WAIT_SECONDS,
                actual: w,
            });
        }
    }
    match reason {
        Some(r) if r.len() > A2A_MAX_LEASE_REASON_BYTES => Err(CheckError::OutOfBounds {
            reason: format!(
                "reason is {} bytes long; at most {A2A_MAX_LEASE_REASON_BYTES} (A2A_MAX_LEASE_REASON_BYTES)",
                r.len()
            ),
            limit: "A2A_MAX_LEASE_REASON_BYTES",
            min: None,
            max: A2A_MAX_LEASE_REASON_BYTES as u64,
            actual: r.len() as i64,
        }),
        _ => Ok(()),
    }
}

/// A lease path in its normal form (`lease_path::normalize`), or its error.
pub(crate) fn check_lease_path(p: &str) -> Result<String, CheckError> {
    lease_path::normalize(p).map_err(|e| match e {
        PathError::TooLong { actual } => CheckError::OutOfBounds {
            reason: e.to_string(),
            limit: "A2A_MAX_LEASE_PATH_BYTES",
            min: None,
            max: A2A_MAX_LEASE_PATH_BYTES as u64,
            actual: actual as i64,
        },
        PathError::Invalid(why) => CheckError::InvalidParams(format!("lease path {p:?}: {why}")),
    })
}

/// `ttlSeconds` within `A2A_MIN_LEASE_TTL_SECONDS..=A2A_MAX_LEASE_TTL_SECONDS`.
pub(crate) fn check_ttl(ttl: i64) -> Result<(), CheckError> {
    let (min, max) = (A2A_MIN_LEASE_TTL_SECONDS, A2A_MAX_LEASE_TTL_SECONDS);
    if (min as i64..=max as i64).contains(&ttl) {
        return Ok(());
    }
    Err(CheckError::OutOfBounds {
        reason: format!("ttlSeconds is {min} to {max} (A2A_MAX_LEASE_TTL_SECONDS); got {ttl}"),
        limit: "A2A_MAX_LEASE_TTL_SECONDS",
        min: Some(min),
        max,
        actual: ttl,
    })
}

/// Standard alphabet; padding optional, as clients differ.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Blank `to` and `taskId` mean omitted, as in PI-Desktop's broker (§3).
pub fn normalize_message(msg: &mut Message) {
    if msg.to.as_deref() == Some("") {
        msg.to = None;
    }
    if msg.task_id.as_deref() == Some("") {
        msg.task_id = None;
    }
}

/// Refuses an id over `A2A_MAX_ID_BYTES` (`-32602`, §9).
pub fn check_id(field: &'static str, id: &str) -> Result<(), CheckError> {
    if id.len() > A2A_MAX_ID_BYTES {
        return Err(CheckError::IdTooLong {
            field,
            actual: id.len() as u64,
        });
    }
    Ok(())
}

/// Checks a message: a non-empty `messageId`, the ids' lengths, the
/// metadata bound, every part valid. Parts may be empty.
pub fn check_message(msg: &Message) -> Result<usize, CheckError> {
    if msg.message_id.is_empty() {
        return Err(CheckError::InvalidParams(
            "messageId must not be empty".into(),
        ));
    }
    check_id("messageId", &msg.message_id)?;
    for (field, v) in [
        ("taskId", &msg.task_id),
        ("contextId", &msg.context_id),
        ("to", &msg.to),
    ] {
        if let Some(v) = v {
            check_id(field, v)?;
        }
    }
    check_metadata(msg.metadata.as_ref(), &msg.parts)?;
    let sizes = check_parts(&msg.parts)?;
    if sizes.text_chars > A2A_MAX_TEXT_CHARS {
        return Err(too_large(
            "A2A_MAX_TEXT_CHARS",
            A2A_MAX_TEXT_CHARS,
            sizes.text_chars,
        ));
    }
    Ok(sizes.content_bytes)
}

/// Checks an artifact (one `a2a.tasks.artifact` call's, possibly a chunk):
/// its id, metadata, parts, and that it alone fits `A2A_MAX_ARTIFACT_BYTES`.
/// Returns its content bytes, which the writer adds to what the artifact
/// already holds.
pub fn check_artifact(a: &Artifact) -> Result<u64, CheckError> {
    if a.artifact_id.is_empty() {
        return Err(CheckError::InvalidParams(
            "artifactId must not be empty".into(),
        ));
    }
    check_id("artifactId", &a.artifact_id)?;
    if a.artifact_id.contains('\0') {
        return Err(CheckError::InvalidParams(
            "artifactId must not contain NUL".into(),
        ));
    }
    check_metadata(a.metadata.as_ref(), &a.parts)?;
    let sizes = check_parts(&a.parts)?;
    if sizes.text_chars > A2A_MAX_TEXT_CHARS {
        return Err(too_large(
            "A2A_MAX_TEXT_CHARS",
            A2A_MAX_TEXT_CHARS,
            sizes.text_chars,
        ));
    }
    if sizes.content_bytes > A2A_MAX_ARTIFACT_BYTES {
        return Err(too_large(
            "A2A_MAX_ARTIFACT_BYTES",
            A2A_MAX_ARTIFACT_BYTES,
            sizes.content_bytes,
        ));
    }
    Ok(sizes.content_bytes as u64)
}

/// Checks a card before registration: its name's length and its size.
pub fn check_card(card: &AgentCard) -> Result<(), CheckError> {
    check_id("card.name", &card.name)?;
    let size = json_len(card)?;
    if size > A2A_MAX_CARD_BYTES {
        return Err(too_large("A2A_MAX_CARD_BYTES", A2A_MAX_CARD_BYTES, size));
    }
    Ok(())
}

/// What a list of parts holds, for the bounds that count it.
#[derive(Debug, Default, PartialEq)]
pub struct PartSizes {
    /// Unicode scalar values of the text parts.
    pub text_chars: usize,
    /// Decoded file bytes + UTF-8 text bytes + serialized data parts + `uri`
    /// lengths (what `A2A_MAX_ARTIFACT_BYTES` counts).
    pub content_bytes: usize,
}

/// Checks a list of parts (a message's or an artifact's) and sizes them.
pub fn check_parts(parts: &[Part]) -> Result<PartSizes, CheckError> {
    let mut sizes = PartSizes::default();
    for part in parts {
        match part {
            Part::Text { text, .. } => {
                sizes.text_chars += text.chars().count();
                sizes.content_bytes += text.len();
            }
            Part::File { file, .. } => {
                if let Some(b64) = &file.bytes {
                    sizes.content_bytes += check_file_bytes(b64)?;
                }
                if let Some(uri) = &file.uri {
                    sizes.content_bytes += uri.len();
                }
            }
            Part::Data { data, .. } => {
                let n = json_len(data)?;
                if n > A2A_MAX_FILE_BYTES {
                    return Err(too_large("A2A_MAX_FILE_BYTES", A2A_MAX_FILE_BYTES, n));
                }
                sizes.content_bytes += n;
            }
        }
    }
    Ok(sizes)
}

/// Refuses metadata (of the message or artifact and of its parts, summed)
/// over `A2A_MAX_METADATA_BYTES`.
fn check_metadata(own: Option<&Object>, parts: &[Part]) -> Result<(), CheckError> {
    let mut total = 0usize;
    let part_meta = parts.iter().filter_map(|p| match p {
        Part::Text { metadata, .. } | Part::File { metadata, .. } | Part::Data { metadata, .. } => {
            metadata.as_ref()
        }
    });
    for m in own.into_iter().chain(part_meta) {
        total += json_len(m)?;
        if total > A2A_MAX_METADATA_BYTES {
            return Err(too_large(
                "A2A_MAX_METADATA_BYTES",
                A2A_MAX_METADATA_BYTES,
                total,
            ));
        }
    }
    Ok(())
}

/// Decodes a file part's base64 (refused if invalid) and returns its size.
fn check_file_bytes(b64: &str) -> Result<usize, CheckError> {
    // Refuse a payload that cannot fit before paying for its decoding.
    let estimate = b64.len() / 4 * 3;
    if estimate > A2A_MAX_FILE_BYTES + 3 {
        return Err(too_large(
            "A2A_MAX_FILE_BYTES",
            A2A_MAX_FILE_BYTES,
            estimate,
        ));
    }
    let decoded = BASE64
        .decode(b64.as_bytes())
        .map_err(|e| CheckError::InvalidParams(format!("file bytes are not valid base64: {e}")))?;
    if decoded.len() > A2A_MAX_FILE_BYTES {
        return Err(too_large(
            "A2A_MAX_FILE_BYTES",
            A2A_MAX_FILE_BYTES,
            decoded.len(),
        ));
    }
    Ok(decoded.len())
}

fn too_large(limit: &'static str, max: usize, actual: usize) -> CheckError {
    CheckError::PayloadTooLarge {
        limit,
        max: max as u64,
        actual: actual as u64,
    }
}

/// The serialized (JSON) size of a value, without building the text.
pub fn json_len<T: serde::Serialize + ?Sized>(v: &T) -> Result<usize, CheckError> {
    let mut counter = ByteCounter(0);
    serde_json::to_writer(&mut counter, v).map_err(|e| CheckError::Unsizable(e.to_string()))?;
    Ok(counter.0)
}

struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::FileContent;

    fn file(uri: Option<&str>, bytes: Option<&str>) -> Part {
        Part::File {
            file: FileContent {
                uri: uri.map(Into::into),
                bytes: bytes.map(Into::into),
                ..Default::default()
            },
            metadata: None,
        }
    }

    fn msg(parts: Vec<Part>) -> Message {
        Message {
            parts,
            message_id: "m".into(),
            ..Message::default()
        }
    }

    #[test]
    fn text_bound_counts_scalar_values_over_all_parts() {
        let ok = vec![Part::text("é".repeat(8000)), Part::text("x".repeat(8000))];
        assert!(check_message(&msg(ok)).is_ok());
        let over = vec![Part::text("é".repeat(8000)), Part::text("x".repeat(8001))];
        assert_eq!(
            check_message(&msg(over)),
            Err(CheckError::PayloadTooLarge {
                limit: "A2A_MAX_TEXT_CHARS",
                max: 16000,
                actual: 16001
            })
        );
    }

    #[test]
    fn file_parts() {
        assert!(check_parts(&[file(Some("file:///a"), None)]).is_ok());
        assert!(check_parts(&[file(None, Some("aGVsbG8="))]).is_ok());
        assert!(check_parts(&[file(None, Some("aGVsbG8"))]).is_ok());
        assert!(matches!(
            check_parts(&[file(None, Some("***"))]),
            Err(CheckError::InvalidParams(_))
        ));
        // As PI-Desktop's broker: a reference by name, and uri + bytes together.
        assert!(check_parts(&[file(None, None)]).is_ok());
        assert_eq!(
            check_parts(&[file(Some("u"), Some("aGk="))])
                .unwrap()
                .content_bytes,
            3
        );
        let big = BASE64.encode(vec![0u8; A2A_MAX_FILE_BYTES + 1]);
        assert!(matches!(
            check_parts(&[file(None, Some(&big))]),
            Err(CheckError::PayloadTooLarge { .. })
        ));
        let max = BASE64.encode(vec![0u8; A2A_MAX_FILE_BYTES]);
        assert!(check_parts(&[file(None, Some(&max))]).is_ok());
    }

    #[test]
    fn empty_parts_and_ids() {
        assert!(check_message(&msg(vec![])).is_ok(), "parts may be empty");
        let mut m = msg(vec![Part::text("x")]);
        m.message_id = String::new();
        assert!(matches!(
            check_message(&m),
            Err(CheckError::InvalidParams(_))
        ));
        m.message_id = "x".repeat(A2A_MAX_ID_BYTES);
        assert!(check_message(&m).is_ok());
        m.message_id.push('x');
        assert_eq!(
            check_message(&m),
            Err(CheckError::IdTooLong {
                field: "messageId",
                actual: A2A_MAX_ID_BYTES as u64 + 1
            })
        );
        let mut m = msg(vec![]);
        m.task_id = Some("t".repeat(A2A_MAX_ID_BYTES + 1));
        assert!(matches!(
            check_message(&m),
            Err(CheckError::IdTooLong {
                field: "taskId",
                ..
            })
        ));
        let mut m = msg(vec![]);
        m.to = Some(String::new());
        m.task_id = Some(String::new());
        normalize_message(&mut m);
        assert_eq!((m.to, m.task_id), (None, None));
    }

    #[test]
    fn metadata_is_bounded_over_the_message_and_its_parts() {
        let meta = |n: usize| -> Object {
            serde_json::from_value(serde_json::json!({"k": "x".repeat(n)})).unwrap()
        };
        let half = A2A_MAX_METADATA_BYTES / 2 - 16;
        let mut m = msg(vec![Part::Text {
            text: "t".into(),
            metadata: Some(meta(half)),
        }]);
        m.metadata = Some(meta(half));
        assert!(check_message(&m).is_ok());
        m.metadata = Some(meta(half + 64));
        assert!(matches!(
            check_message(&m),
            Err(CheckError::PayloadTooLarge {
                limit: "A2A_MAX_METADATA_BYTES",
                ..
            })
        ));
    }

    #[test]
    fn artifacts_and_cards_are_sized() {
        let art = Artifact {
            artifact_id: "a".into(),
            name: None,
            description: None,
            parts: vec![Part::text("héllo"), file(Some("file:///x"), Some("aGk="))],
            metadata: None,
        };
        assert_eq!(check_artifact(&art), Ok(6 + 9 + 2));
        // A message's pre-check counts the same content bytes (what the
        // writer's groups are bounded by).
        assert_eq!(check_message(&msg(art.parts.clone())), Ok(6 + 9 + 2));
        let card: AgentCard = serde_json::from_value(
            serde_json::json!({"name": "w", "description": "d".repeat(A2A_MAX_CARD_BYTES)}),
        )
        .unwrap();
        assert!(matches!(
            check_card(&card),
            Err(CheckError::PayloadTooLarge {
                limit: "A2A_MAX_CARD_BYTES",
                ..
            })
        ));
    }
}

//! Checks of parts and messages beyond their shape: base64, exactly one of
//! `uri`/`bytes`, non-empty parts, and the payload bounds of §7.
//!
//! These run on the connection's thread before a call reaches the writer, so
//! decoding a 20 MiB file part never holds up the commits of others.

use super::CoreError;
use a2a_proto::limits::{A2A_MAX_FILE_BYTES, A2A_MAX_TEXT_CHARS};
use a2a_proto::types::{Message, Part};
use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode, GeneralPurposeConfig};
use base64::Engine as _;

/// Standard alphabet; padding optional, as clients differ.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Checks a message: a non-empty `messageId`, at least one part, every part valid.
pub fn check_message(msg: &Message) -> Result<(), CoreError> {
    if msg.message_id.is_empty() {
        return Err(CoreError::InvalidParams(
            "messageId must not be empty".into(),
        ));
    }
    check_parts(&msg.parts)
}

/// Checks a list of parts (a message's or an artifact's).
pub fn check_parts(parts: &[Part]) -> Result<(), CoreError> {
    if parts.is_empty() {
        return Err(CoreError::InvalidParams(
            "parts must hold at least one part".into(),
        ));
    }
    let mut text_chars = 0usize;
    for part in parts {
        match part {
            Part::Text { text, .. } => text_chars += text.chars().count(),
            Part::File { file, .. } => match (&file.uri, &file.bytes) {
                (Some(_), Some(_)) => {
                    return Err(CoreError::InvalidParams(
                        "file part must have exactly one of uri and bytes, not both".into(),
                    ))
                }
                (None, None) => {
                    return Err(CoreError::InvalidParams(
                        "file part must have exactly one of uri and bytes".into(),
                    ))
                }
                (Some(_), None) => {}
                (None, Some(b64)) => check_file_bytes(b64)?,
            },
            Part::Data { data, .. } => {
                let mut counter = ByteCounter(0);
                serde_json::to_writer(&mut counter, data)
                    .map_err(|e| CoreError::Internal(format!("sizing a data part: {e}")))?;
                if counter.0 > A2A_MAX_FILE_BYTES {
                    return Err(too_large(
                        "A2A_MAX_FILE_BYTES",
                        A2A_MAX_FILE_BYTES,
                        counter.0,
                    ));
                }
            }
        }
    }
    if text_chars > A2A_MAX_TEXT_CHARS {
        return Err(too_large(
            "A2A_MAX_TEXT_CHARS",
            A2A_MAX_TEXT_CHARS,
            text_chars,
        ));
    }
    Ok(())
}

fn check_file_bytes(b64: &str) -> Result<(), CoreError> {
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
        .map_err(|e| CoreError::InvalidParams(format!("file bytes are not valid base64: {e}")))?;
    if decoded.len() > A2A_MAX_FILE_BYTES {
        return Err(too_large(
            "A2A_MAX_FILE_BYTES",
            A2A_MAX_FILE_BYTES,
            decoded.len(),
        ));
    }
    Ok(())
}

fn too_large(limit: &'static str, max: usize, actual: usize) -> CoreError {
    CoreError::PayloadTooLarge {
        limit,
        max: max as u64,
        actual: actual as u64,
    }
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
    use a2a_proto::types::FileContent;

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

    #[test]
    fn text_bound_counts_scalar_values_over_all_parts() {
        let ok = vec![Part::text("é".repeat(8000)), Part::text("x".repeat(8000))];
        assert!(check_parts(&ok).is_ok());
        let over = vec![Part::text("é".repeat(8000)), Part::text("x".repeat(8001))];
        assert_eq!(
            check_parts(&over),
            Err(CoreError::PayloadTooLarge {
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
            Err(CoreError::InvalidParams(_))
        ));
        assert!(matches!(
            check_parts(&[file(None, None)]),
            Err(CoreError::InvalidParams(_))
        ));
        assert!(matches!(
            check_parts(&[file(Some("u"), Some("aGk="))]),
            Err(CoreError::InvalidParams(_))
        ));
        let big = BASE64.encode(vec![0u8; A2A_MAX_FILE_BYTES + 1]);
        assert!(matches!(
            check_parts(&[file(None, Some(&big))]),
            Err(CoreError::PayloadTooLarge { .. })
        ));
        let max = BASE64.encode(vec![0u8; A2A_MAX_FILE_BYTES]);
        assert!(check_parts(&[file(None, Some(&max))]).is_ok());
    }

    #[test]
    fn empty_parts_and_ids() {
        assert!(matches!(check_parts(&[]), Err(CoreError::InvalidParams(_))));
        let msg = Message {
            role: Default::default(),
            parts: vec![Part::text("x")],
            message_id: String::new(),
            task_id: None,
            context_id: None,
            from: None,
            to: None,
            metadata: None,
        };
        assert!(matches!(
            check_message(&msg),
            Err(CoreError::InvalidParams(_))
        ));
    }
}

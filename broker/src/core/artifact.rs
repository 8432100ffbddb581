//! A task's artifacts as the broker stores them: the call that created an
//! artifact and the chunks appended to it since, kept apart so that an
//! append costs the size of the chunk, not of the artifact (§9 Bounds), in memory
//! (a clone copies pointers), in SQLite (one new row per chunk) and on the
//! writer thread (no re-encoding of what was stored before).
//!
//! The merge rule of `append: true`: the parts accumulate in call order; a
//! `name`, `description` or `metadata` given by a later chunk replaces the
//! earlier one. [`StoredArtifact::merged`] is that rule; the wire renderings
//! (`reply`, `transport::binary`) walk the same pieces without building it.

use a2a_proto::types::{Artifact, Object, Part};
use std::sync::Arc;

/// One artifact: its first call and its appended chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredArtifact {
    /// The call that created (or last replaced) the artifact.
    pub head: Arc<Artifact>,
    /// Appended chunks, oldest first.
    pub chunks: Vec<Arc<Artifact>>,
    /// Content bytes so far (what `A2A_MAX_ARTIFACT_BYTES` counts).
    pub content_bytes: u64,
    /// Serialized bytes of its stored rows (counted in `A2A_MAX_TASK_BYTES`).
    pub stored_bytes: u64,
}

impl StoredArtifact {
    /// A new artifact from one call.
    pub fn new(head: Artifact, content_bytes: u64, stored_bytes: u64) -> Self {
        Self {
            head: Arc::new(head),
            chunks: Vec::new(),
            content_bytes,
            stored_bytes,
        }
    }

    /// This artifact with one more chunk.
    pub fn appended(&self, chunk: Artifact, content_bytes: u64, stored_bytes: u64) -> Self {
        let mut next = self.clone();
        next.chunks.push(Arc::new(chunk));
        next.content_bytes += content_bytes;
        next.stored_bytes += stored_bytes;
        next
    }

    pub fn id(&self) -> &str {
        &self.head.artifact_id
    }

    fn pieces(&self) -> impl DoubleEndedIterator<Item = &Artifact> {
        std::iter::once(&*self.head).chain(self.chunks.iter().map(|c| &**c))
    }

    /// The latest `name` given.
    pub fn name(&self) -> Option<&String> {
        self.pieces().rev().find_map(|a| a.name.as_ref())
    }

    /// The latest `description` given.
    pub fn description(&self) -> Option<&String> {
        self.pieces().rev().find_map(|a| a.description.as_ref())
    }

    /// The latest `metadata` given.
    pub fn metadata(&self) -> Option<&Object> {
        self.pieces().rev().find_map(|a| a.metadata.as_ref())
    }

    /// Every part, in call order.
    pub fn parts(&self) -> impl Iterator<Item = &Part> {
        self.pieces().flat_map(|a| a.parts.iter())
    }

    /// Number of parts.
    pub fn part_count(&self) -> usize {
        self.pieces().map(|a| a.parts.len()).sum()
    }

    /// The artifact as clients see it (an owned copy: for tests and the audit view).
    pub fn merged(&self) -> Artifact {
        Artifact {
            artifact_id: self.id().to_owned(),
            name: self.name().cloned(),
            description: self.description().cloned(),
            parts: self.parts().cloned().collect(),
            metadata: self.metadata().cloned(),
        }
    }
}

/// The key of an appended chunk's row in `a2a_artifacts`: the artifact's id,
/// a NUL (which artifact ids may not contain, so no client id can collide)
/// and the chunk's number, zero-padded so that keys sort in append order.
pub fn chunk_key(artifact_id: &str, n: usize) -> String {
    format!("{artifact_id}\u{0}{n:010}")
}

/// The artifact id of a stored row's key, and whether the row is a chunk.
pub fn split_key(key: &str) -> (&str, bool) {
    match key.split_once('\u{0}') {
        Some((id, _)) => (id, true),
        None => (key, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn art(id: &str, text: &str, name: Option<&str>) -> Artifact {
        Artifact {
            artifact_id: id.into(),
            name: name.map(Into::into),
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
        }
    }

    #[test]
    fn appends_accumulate_parts_and_later_names_win() {
        let a = StoredArtifact::new(art("a", "one", Some("first")), 3, 10);
        let b = a.appended(art("a", "two", None), 3, 10);
        let c = b.appended(art("a", "three", Some("last")), 5, 10);
        assert_eq!(
            a.chunks.len(),
            0,
            "appending leaves the earlier version as it was"
        );
        let m = c.merged();
        assert_eq!(
            m.parts,
            vec![Part::text("one"), Part::text("two"), Part::text("three")]
        );
        assert_eq!(m.name.as_deref(), Some("last"));
        assert_eq!(b.merged().name.as_deref(), Some("first"));
        assert_eq!(
            (c.content_bytes, c.stored_bytes, c.part_count()),
            (11, 30, 3)
        );
    }

    #[test]
    fn chunk_keys_sort_after_their_artifact_in_append_order() {
        let mut keys = vec![
            chunk_key("a", 10),
            "a".to_owned(),
            chunk_key("a", 2),
            chunk_key("a", 1),
        ];
        keys.sort();
        assert_eq!(
            keys,
            [
                "a".to_owned(),
                chunk_key("a", 1),
                chunk_key("a", 2),
                chunk_key("a", 10)
            ]
        );
        assert_eq!(split_key(&chunk_key("a-b", 3)), ("a-b", true));
        assert_eq!(split_key("a-b"), ("a-b", false));
    }
}

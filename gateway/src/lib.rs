//! Scratch crate root (replaced by gw-in's on merge).
pub mod outbound;

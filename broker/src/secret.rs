//! The secret a local-socket client presents in its handshake: compared
//! in constant time, never printed.

/// The secret a local-socket client must present in its handshake.
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Self {
        Secret(s)
    }

    /// Constant-time comparison.
    pub fn matches(&self, offered: &str) -> bool {
        use subtle::ConstantTimeEq;
        self.0.len() == offered.len() && bool::from(self.0.as_bytes().ct_eq(offered.as_bytes()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

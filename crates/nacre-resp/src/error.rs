//! [`CodecError`]: what the RESP parser refuses.

/// Bytes that are not valid RESP, or a length over the parser's limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The bytes are not valid RESP; the message says which byte or line.
    #[error("malformed RESP: {0}")]
    Protocol(String),
    /// A length in the stream is over the parser's [`Limits`](crate::Limits); nothing of
    /// that size was allocated.
    #[error("{what} of {len} is over the limit of {limit}")]
    TooLarge {
        /// What was too large (`"bulk string length"`, `"array length"`, ...).
        what: &'static str,
        /// The length the stream announced (saturated at `u64::MAX`).
        len: u64,
        /// The limit it broke.
        limit: u64,
    },
}

//! [`RespError`]: everything that can go wrong talking RESP.

/// An error from the RESP parser or a [`Connection`](super::Connection).
///
/// After any error other than [`RespError::Server`] and [`RespError::Queued`] a connection
/// no longer knows where the next reply starts; it refuses further use with
/// [`RespError::Broken`].
#[derive(Debug, thiserror::Error)]
pub enum RespError {
    /// Connecting (resolving the address, the TCP handshake, setting socket options) failed.
    #[error("connecting to {addr}: {source}")]
    Connect {
        /// The address as given.
        addr: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// Reading or writing an established connection failed (a timeout included).
    #[error("{op} {addr}: {source}")]
    Io {
        /// What was being done (`"writing commands to"`, `"reading replies from"`).
        op: &'static str,
        /// The server's address.
        addr: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The bytes received are not valid RESP; the message says which byte or line.
    #[error("malformed RESP: {0}")]
    Protocol(String),
    /// The server closed the connection while replies were still owed.
    #[error("{addr} closed the connection with {owed} replies still owed")]
    Closed {
        /// The server's address.
        addr: String,
        /// How many replies had not arrived.
        owed: usize,
    },
    /// The server answered with an error reply where the command had to succeed.
    #[error("server replied with an error: {0}")]
    Server(String),
    /// A length in the stream is over the parser's [`Limits`](super::Limits); nothing of
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
    /// [`Connection::command`](super::Connection::command) was called with pipelined
    /// commands still queued; flush them first.
    #[error("{queued} queued commands must be flushed before a single command")]
    Queued {
        /// How many commands are queued.
        queued: usize,
    },
    /// An earlier error left the connection in an unknown state.
    #[error("connection to {addr} is unusable after an earlier error")]
    Broken {
        /// The server's address.
        addr: String,
    },
}

impl From<nacre_resp::CodecError> for RespError {
    fn from(e: nacre_resp::CodecError) -> RespError {
        match e {
            nacre_resp::CodecError::Protocol(m) => RespError::Protocol(m),
            nacre_resp::CodecError::TooLarge { what, len, limit } => {
                RespError::TooLarge { what, len, limit }
            }
        }
    }
}

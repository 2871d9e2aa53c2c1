//! [`Reply`]: one RESP2 or RESP3 reply, with small accessors.

use std::borrow::Cow;

/// One reply as the server sent it, for every RESP2 and RESP3 type.
///
/// RESP3 attributes (`|`) are parsed, checked against the limits and dropped: the parser
/// returns the reply that follows them, so no variant carries them.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+`: a simple string (`+OK`). Bytes that are not UTF-8 are replaced with U+FFFD.
    Simple(String),
    /// `-`: an error reply (`-ERR unknown command`), the whole line after the `-`.
    Error(String),
    /// `:`: a signed 64-bit integer.
    Integer(i64),
    /// `$`: a bulk string, binary safe. RESP3 streamed strings (`$?`) arrive joined here.
    Bulk(Vec<u8>),
    /// A null: RESP2's null bulk string (`$-1`) and null array (`*-1`), RESP3's `_`.
    Nil,
    /// A null where an array was due, as a server sends it: RESP2's `*-1`, RESP3's `_` (the
    /// parser reads both as [`Reply::Nil`]).
    NilArray,
    /// `*`: an array, possibly nested.
    Array(Vec<Reply>),
    /// `#`: a RESP3 boolean (`#t`, `#f`).
    Boolean(bool),
    /// `,`: a RESP3 double, including `inf`, `-inf` and `nan`.
    Double(f64),
    /// `(`: a RESP3 big number, kept as its decimal digits (with a leading `-` if negative).
    BigNumber(String),
    /// `=`: a RESP3 verbatim string: a three-byte format (`txt`, `mkd`) and the text.
    Verbatim {
        /// The format, such as `txt` or `mkd`.
        format: String,
        /// The text after the `format:` prefix.
        text: Vec<u8>,
    },
    /// `%`: a RESP3 map, as key-value pairs in the order sent.
    Map(Vec<(Reply, Reply)>),
    /// `~`: a RESP3 set, in the order sent.
    Set(Vec<Reply>),
    /// `>`: a RESP3 push message (pub/sub message, client-side caching invalidation).
    Push(Vec<Reply>),
    /// `!`: a RESP3 blob error, binary safe.
    BlobError(Vec<u8>),
}

impl Reply {
    /// True for an error reply: [`Reply::Error`] or [`Reply::BlobError`].
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_) | Reply::BlobError(_))
    }

    /// True for [`Reply::Nil`].
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }

    /// The message of an error reply, `None` for any other reply.
    pub fn error_message(&self) -> Option<Cow<'_, str>> {
        match self {
            Reply::Error(s) => Some(Cow::Borrowed(s)),
            Reply::BlobError(b) => Some(String::from_utf8_lossy(b)),
            _ => None,
        }
    }

    /// The bytes of a string reply: [`Reply::Bulk`], [`Reply::Simple`] or the text of
    /// [`Reply::Verbatim`]; `None` for anything else.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => Some(b),
            Reply::Simple(s) => Some(s.as_bytes()),
            Reply::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// A string reply as UTF-8 text, `None` when it is not a string or not UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// An integer: [`Reply::Integer`], or a string reply holding a decimal integer (RESP2
    /// sends counters read with `GET` or `HGET` as bulk strings).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Integer(i) => Some(*i),
            _ => self.as_str().and_then(|s| s.parse().ok()),
        }
    }

    /// A floating-point number: [`Reply::Double`], [`Reply::Integer`], or a string reply
    /// holding a number (RESP2 sends scores as bulk strings).
    pub fn as_double(&self) -> Option<f64> {
        match self {
            Reply::Double(d) => Some(*d),
            Reply::Integer(i) => Some(*i as f64),
            _ => self.as_str().and_then(|s| s.parse().ok()),
        }
    }

    /// A boolean: [`Reply::Boolean`], or RESP2's `:1` / `:0`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Reply::Boolean(b) => Some(*b),
            Reply::Integer(0) => Some(false),
            Reply::Integer(1) => Some(true),
            _ => None,
        }
    }

    /// The elements of an [`Reply::Array`], [`Reply::Set`] or [`Reply::Push`]; `None` for
    /// anything else (including [`Reply::Nil`]).
    pub fn into_array(self) -> Option<Vec<Reply>> {
        match self {
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => Some(v),
            _ => None,
        }
    }

    /// Borrowed elements of an [`Reply::Array`], [`Reply::Set`] or [`Reply::Push`].
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => Some(v),
            _ => None,
        }
    }

    /// Key-value pairs: a RESP3 [`Reply::Map`], or a RESP2 flat array of even length
    /// (`HGETALL`, `CONFIG GET`) paired up in order. `None` for anything else.
    pub fn into_map(self) -> Option<Vec<(Reply, Reply)>> {
        match self {
            Reply::Map(m) => Some(m),
            Reply::Array(v) if v.len() % 2 == 0 => {
                let mut pairs = Vec::with_capacity(v.len() / 2);
                let mut it = v.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Some(pairs)
            }
            _ => None,
        }
    }

    /// `Ok(self)` unless this is an error reply, whose message is the error.
    pub fn into_result(self) -> Result<Reply, String> {
        match self.error_message() {
            Some(msg) => Err(msg.into_owned()),
            None => Ok(self),
        }
    }

    /// The name of this reply's type, for messages (`"bulk string"`, `"map"`, ...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Reply::Simple(_) => "simple string",
            Reply::Error(_) => "error",
            Reply::Integer(_) => "integer",
            Reply::Bulk(_) => "bulk string",
            Reply::Nil | Reply::NilArray => "null",
            Reply::Array(_) => "array",
            Reply::Boolean(_) => "boolean",
            Reply::Double(_) => "double",
            Reply::BigNumber(_) => "big number",
            Reply::Verbatim { .. } => "verbatim string",
            Reply::Map(_) => "map",
            Reply::Set(_) => "set",
            Reply::Push(_) => "push",
            Reply::BlobError(_) => "blob error",
        }
    }
}

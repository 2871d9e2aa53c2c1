//! RESP (REdis Serialization Protocol), RESP2 and RESP3: the codec the server and the
//! benchmark client share.
//!
//! - [`value`]: [`Reply`], every RESP2 and RESP3 value, with accessors.
//! - [`parse`](mod@parse): the incremental parser, [`parse()`] for one value at the start of
//!   a buffer and [`Parser`] for a stream arriving in pieces, both bounded by [`Limits`].
//!   RESP3 attributes (`|`) are parsed and dropped.
//! - [`encode`]: [`encode_command`] (an array of bulk strings) and [`encode_reply`].
//! - [`error`](mod@error): [`CodecError`].

pub mod encode;
pub mod error;
pub mod parse;
pub mod value;

#[cfg(test)]
mod tests;

pub use encode::{encode_command, encode_reply};
pub use error::CodecError;
pub use parse::{parse, parse_with, Limits, Parser};
pub use value::Reply;

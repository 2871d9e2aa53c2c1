//! RESP (REdis Serialization Protocol), RESP2 and RESP3: the codec the server and the
//! benchmark client share.
//!
//! - [`value`]: [`Reply`], every RESP2 and RESP3 value, with accessors.
//! - [`parse`](mod@parse): the incremental parser, [`parse()`] for one value at the start of
//!   a buffer and [`Parser`] for a stream arriving in pieces, both bounded by [`Limits`].
//!   RESP3 attributes (`|`) are parsed and dropped.
//! - [`encode`]: [`encode_command`] (an array of bulk strings) and [`encode_reply`].
//! - [`request`]: [`parse_request`] and the resumable [`RequestParser`], requests as a Redis server reads them (multibulk or
//!   inline, Redis's limits and protocol error messages).
//! - [`error`](mod@error): [`CodecError`].

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod encode;
pub mod error;
pub mod parse;
pub mod request;
pub mod value;

#[cfg(test)]
mod tests;

pub use encode::{encode_command, encode_reply, encode_reply_resp2, format_double};
pub use error::CodecError;
pub use parse::{parse, parse_with, Limits, Parser};
pub use request::{parse_request, split_args, RequestError, RequestLimits, RequestParser};
pub use value::Reply;

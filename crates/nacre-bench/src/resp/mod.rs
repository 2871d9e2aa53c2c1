//! A RESP (REdis Serialization Protocol) client: RESP2 and RESP3 replies, pipelining over
//! one blocking TCP connection, and a throwaway `redis-server` to talk to.
//!
//! - [`value`]: [`Reply`], every RESP2 and RESP3 reply type, with accessors.
//! - [`parse`](mod@parse): the incremental parser, [`parse()`] for one reply at the start of
//!   a buffer and [`Parser`] for a stream arriving in pieces, both bounded by [`Limits`].
//!   RESP3 attributes (`|`) are parsed and dropped.
//! - [`encode`]: [`encode_command`] (an array of bulk strings) and [`encode_reply`].
//! - [`client`]: [`Connection`], commands queued and flushed in one write, replies read in
//!   order.
//! - [`server`]: [`RedisServer`], a `redis-server` child on a free port, killed on drop.
//! - [`error`]: [`RespError`], everything that can go wrong.

pub mod client;
pub mod encode;
pub mod error;
pub mod parse;
pub mod server;
pub mod value;

#[cfg(test)]
mod tests;

pub use client::Connection;
pub use encode::{encode_command, encode_reply};
pub use error::RespError;
pub use parse::{parse, parse_with, Limits, Parser};
pub use server::{free_port, RedisServer, ServerError, DEFAULT_REDIS_SERVER, STARTUP_TIMEOUT};
pub use value::Reply;

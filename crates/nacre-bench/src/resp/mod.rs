//! A RESP (REdis Serialization Protocol) client: RESP2 and RESP3 replies (the codec is
//! `nacre-resp`, re-exported here), pipelining over one blocking TCP connection, and a
//! throwaway `redis-server` to talk to.
//!
//! - [`client`]: [`Connection`], commands queued and flushed in one write, replies read in
//!   order.
//! - [`server`]: [`RedisServer`], a `redis-server` child on a free port, killed on drop.
//! - [`error`]: [`RespError`], everything that can go wrong.

pub mod client;
pub mod error;
pub mod server;

#[cfg(test)]
mod tests;

pub use client::Connection;
pub use error::RespError;
pub use nacre_resp::{encode_command, encode_reply, parse, parse_with, Limits, Parser, Reply};
pub use server::{free_port, RedisServer, ServerError, DEFAULT_REDIS_SERVER, STARTUP_TIMEOUT};

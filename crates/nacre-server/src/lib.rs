//! nacre-server: a Redis-compatible, fully durable server on the Nacre engine
//! (shared/DESIGN.md §5).
//!
//! - [`config`]: the configuration as Redis reads it, plus Nacre's directives.
//! - [`store`]: Redis keys on engine subtables; the locking, pending-entry and ticket rules
//!   that make each command atomic, isolated and answered only once durable.
//! - [`cmd`]: the command table and the commands, family by family.
//! - `script`: Lua scripts (`EVAL`), run through the same command table.
//! - `conn`, [`server`]: connections (tokio) and the listener.
//! - [`transfer`]: RDB files in and out (`--import-rdb`, `--export-rdb`, `BGSAVE RDB`).

#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod acl;
pub(crate) mod bits;
pub mod client;
pub mod cmd;
pub(crate) mod cmdstats;
pub mod config;
pub(crate) mod config_rewrite;
pub(crate) mod conn;
pub(crate) mod glob;
pub(crate) mod latency;
pub(crate) mod lcs;
pub(crate) mod listen;
pub(crate) mod longdouble;
pub(crate) mod notify;
pub(crate) mod num;
pub(crate) mod params;
pub(crate) mod pubsub;
pub mod rdb;
pub mod repl;
pub(crate) mod script;
pub mod server;
pub mod shared;
pub mod store;
pub mod tracking;
pub mod transfer;
pub(crate) mod types;
pub(crate) mod waiters;

pub use config::{Config, ConfigError, LogLevel};

/// The Redis version whose behaviour the server follows (`INFO`, `HELLO`).
pub const REDIS_VERSION: &str = "7.0.15";

//! nacre-server: a Redis-compatible server on the Nacre engine (shared/DESIGN.md §5).
//!
//! Built so far: [`config`], the configuration as Redis reads it (a redis.conf-style file and
//! `--directive value` arguments) with Nacre's own directives. The connection layer and the
//! commands come next; there is no binary yet.

pub mod config;

pub use config::{Config, ConfigError, LogLevel};

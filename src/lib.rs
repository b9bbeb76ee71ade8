//! Strata: a Redis-compatible cache server, thread-per-core and shared-nothing.
//!
//! - [`protocol`]: RESP bytes in, replies out.
//! - [`cmd`]: the command table and every command, as functions that return replies.
//! - [`shard`]: the per-core keyspace (dashtable, entries, expiry).
//! - [`server`]: executors, the cross-core mesh, cross-shard transactions.
//! - [`net`]: client connections.

pub mod cmd;
pub mod config;
pub mod cron;
pub mod glob;
pub mod memory;
pub mod net;
pub mod protocol;
pub mod server;
pub mod shard;

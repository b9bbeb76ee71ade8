//! Strata: a Redis-compatible cache server, thread-per-core and shared-nothing.
//!
//! Layers, bottom up; a module never imports one above it (`tests/layers.rs` checks):
//! - [`memory`], [`glob`], [`cron`]: leaf utilities.
//! - [`protocol`]: wire codecs only (RESP requests in, replies out).
//! - [`config`]: flags and the settings CONFIG SET changes.
//! - [`shard`]: the keyspace of one core (dashtable, entries, typed objects, expiry, eviction
//!   policy); no I/O.
//! - [`cmd`]: keyed commands as pure functions over a shard.
//! - [`runtime`]: the per-core loop, task spawning, cross-core wake-ups.
//! - [`server`]: the command table and dispatcher, sessions, admin commands, the mesh,
//!   cross-shard transactions, tiering's loads, eviction, snapshots.
//! - [`net`]: sockets and connection tasks.
//! - [`boot`]: start-up (`main.rs` calls it).

pub mod boot;
pub mod cmd;
pub mod config;
pub mod cron;
pub mod glob;
pub mod memory;
pub mod net;
pub mod notify;
pub mod protocol;
pub mod runtime;
pub mod server;
pub mod shard;

//! Connection and server commands (`Exec::Session` and `Exec::Await` in the command table):
//! they run on the calling connection's core with its session, may change the session's state
//! (SELECT, AUTH, HELLO, CLIENT) and may fan out to every shard (DBSIZE, KEYS, SCAN, FLUSHALL,
//! INFO, DEBUG POPULATE). One file per family, as `cmd/` has for keyed commands.
//!
//! Never: runs on another core's shard except through `Core::on_shard` / `on_all`.

pub mod client;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod info;
pub mod keyspace;
pub mod keyspec;
mod keyspecs;
pub mod persist;
pub mod pubsub;

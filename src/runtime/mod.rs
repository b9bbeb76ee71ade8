//! The per-core runtime under the server: the loop that delivers socket readiness and naps
//! when idle ([`Poller`]), task spawning that the loop can see ([`spawn`]), and cross-core
//! wake-ups ([`Bell`], [`remote_wait`]).
//!
//! Owns how a core waits; knows nothing of commands, shards or protocols. Must never block a
//! core except in its own idle nap.

pub mod poller;

pub use poller::{io_wait, remote_wait, spawn, Bell, IoWait, Poller, RemoteWait};

//! Sockets and connection tasks: the RESP front end (and memcached's, `memcache`). A connection task reads bytes, parses
//! them with `protocol::resp`, hands each batch to the dispatcher (`server::dispatch`) and
//! writes the replies encoded with `protocol::reply`.
//!
//! Never: runs a command itself or touches a shard; everything goes through the dispatcher.

pub mod connection;
pub mod memcache;
pub mod socket;

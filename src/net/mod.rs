//! Client connections: reading requests, routing them to shards, writing replies.

pub mod connection;
pub mod poller;

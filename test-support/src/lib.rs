//! What Strata's tests (and load generators) share, once: the RESP test client, the launcher
//! of the `strata` binary and the one of a real `redis-server`.
//!
//! - [`resp`]: the request encoder, the parsed reply ([`Resp`]) and the byte builders that
//!   expected replies are written with.
//! - [`raw`]: [`Raw`], a TCP connection that reads exact reply bytes, parsed replies, or bulk
//!   bytes into a caller's buffer (the load generators' path, no allocation per reply).
//! - [`server`]: [`free_port`] and [`Server`], a `strata` process killed on drop. The binary's
//!   path is a parameter: only the strata package's own tests know it.
//! - [`redis_server`]: [`RedisServer`], and [`redis_server_binary`], the one place that decides
//!   what a cross-check does when redis-server is not installed (`STRATA_REQUIRE_REDIS=1`: fail).
//! - [`memcached`]: [`Memcached`], a real memcached, found by the same rule as redis-server.
//! - [`memory`]: a process's resident memory, read from `/proc`.
//!
//! It depends on no Strata crate, so any of them can take it as a dev-dependency. Everything
//! here panics on failure (it serves tests), except the fallible calls the load generators use.

pub mod memcached;
pub mod memory;
pub mod raw;
pub mod redis_server;
pub mod resp;
pub mod server;

pub use memcached::{memcached_binary, Memcached};
pub use memory::{
    assert_peak_rss_within, owned_rss, proc_status_kb, rss_sampler, rss_sampler_every, RssSampler,
};
pub use raw::{rt, Raw, Reply};
pub use redis_server::{redis_server_binary, RedisLookup, RedisServer, REQUIRE_REDIS};
pub use resp::*;
pub use server::{free_port, poll_started, run_to_exit, startup_error, Server};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

//! Sockets and connection tasks: the RESP front end (and memcached's, `memcache`). A connection task reads bytes, parses
//! them with `protocol::resp`, hands each batch to the dispatcher (`server::dispatch`) and
//! writes the replies encoded with `protocol::reply`. `busy` answers this core's idle connections
//! while a script on this core runs past `busy-reply-threshold`.
//!
//! Never: runs a command itself or touches a shard; everything goes through the dispatcher.

pub mod busy;
pub mod connection;
pub mod memcache;
pub mod socket;

use crate::server::session::Peer;

/// A new connection's addresses for its session (CLIENT LIST); turns Nagle off on the way.
pub fn peer_of(stream: &socket::Socket) -> Peer {
    let sock = socket2::SockRef::from(stream);
    let _ = sock.set_nodelay(true);
    let addr_of = |a: std::io::Result<socket2::SockAddr>| {
        a.ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.to_string())
            .unwrap_or_default()
    };
    Peer {
        addr: addr_of(sock.peer_addr()),
        laddr: addr_of(sock.local_addr()),
        fd: stream.raw_fd(),
    }
}

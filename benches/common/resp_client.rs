//! The load generators' (`zipf_get`, `hit_ratio`) blocking RESP client: test-support's `Raw`
//! on its allocation-free path (bulk bytes into the caller's buffer), with errors as the text
//! the generators report. Included with `#[path]`, as each bench is its own crate.

use std::time::Duration;

pub use test_support::{push_bulk, Reply};

pub struct Conn(test_support::Raw);

impl Conn {
    pub fn open(host: &str, port: u16) -> Result<Conn, String> {
        test_support::Raw::open(host, port, Duration::from_secs(60))
            .map(Conn)
            .map_err(|e| format!("connect {host}:{port}: {e}"))
    }

    /// Sends pipelined requests.
    pub fn send(&mut self, buf: &[u8]) -> Result<(), String> {
        self.0.try_send(buf).map_err(|e| format!("write: {e}"))
    }

    /// Reads one reply; a bulk string's bytes land in `data`.
    pub fn reply(&mut self, data: &mut Vec<u8>) -> Result<Reply, String> {
        self.0.next_reply(data).map_err(|e| format!("read: {e}"))
    }
}

//! The load generators' blocking memcached text-protocol client (`hit_ratio --protocol
//! memcache`): pipelined `get` and `set` out, replies read one at a time with the value's
//! bytes in the caller's buffer, in the shape of the RESP client's replies (a hit is `Bulk`, a
//! miss `Nil`, `STORED` a `Simple`, any error line an `Error`). Included with `#[path]`, as
//! each bench is its own crate.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub use test_support::Reply;

pub struct McConn {
    w: TcpStream,
    r: BufReader<TcpStream>,
    line: Vec<u8>,
}

impl McConn {
    pub fn open(host: &str, port: u16) -> Result<McConn, String> {
        let err = |e: std::io::Error| format!("connect {host}:{port}: {e}");
        let w = TcpStream::connect((host, port)).map_err(err)?;
        w.set_nodelay(true).map_err(err)?;
        w.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(err)?;
        let r = BufReader::with_capacity(64 * 1024, w.try_clone().map_err(err)?);
        Ok(McConn {
            w,
            r,
            line: Vec::with_capacity(256),
        })
    }

    /// Sends pipelined requests.
    pub fn send(&mut self, buf: &[u8]) -> Result<(), String> {
        self.w.write_all(buf).map_err(|e| format!("write: {e}"))
    }

    fn read_line(&mut self) -> Result<(), String> {
        self.line.clear();
        let n = self
            .r
            .read_until(b'\n', &mut self.line)
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("read: connection closed".into());
        }
        while matches!(self.line.last(), Some(b'\n' | b'\r')) {
            self.line.pop();
        }
        Ok(())
    }

    /// Reads the reply to one `get` (a hit's value lands in `data`) or one `set`.
    pub fn reply(&mut self, data: &mut Vec<u8>) -> Result<Reply, String> {
        self.read_line()?;
        let text = String::from_utf8_lossy(&self.line).into_owned();
        if text == "END" {
            return Ok(Reply::Nil);
        }
        if let Some(rest) = text.strip_prefix("VALUE ") {
            let len: usize = rest
                .split(' ')
                .nth(2)
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("bad VALUE line {text:?}"))?;
            data.clear();
            data.resize(len + 2, 0);
            self.r.read_exact(data).map_err(|e| format!("read: {e}"))?;
            data.truncate(len);
            self.read_line()?;
            if self.line != b"END" {
                return Err(format!(
                    "expected END after a value, got {:?}",
                    String::from_utf8_lossy(&self.line)
                ));
            }
            return Ok(Reply::Bulk);
        }
        if text == "STORED" {
            return Ok(Reply::Simple(text));
        }
        Ok(Reply::Error(text))
    }
}

/// `get <key>\r\n`.
pub fn push_get(buf: &mut Vec<u8>, key: &[u8]) {
    buf.extend_from_slice(b"get ");
    buf.extend_from_slice(key);
    buf.extend_from_slice(b"\r\n");
}

/// `set <key> 0 0 <len>\r\n<value>\r\n`.
pub fn push_set(buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    buf.extend_from_slice(b"set ");
    buf.extend_from_slice(key);
    let _ = write!(buf, " 0 0 {}\r\n", value.len());
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

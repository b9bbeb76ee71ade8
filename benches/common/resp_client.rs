//! A minimal blocking RESP client shared by the load generators in `benches/` (`zipf_get`,
//! `hit_ratio`): pipelined writes, one reply read at a time, bulk bytes into the caller's
//! buffer. Included with `#[path]`, as each bench is its own crate.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub fn push_bulk(buf: &mut Vec<u8>, s: &[u8]) {
    let _ = write!(buf, "${}\r\n", s.len());
    buf.extend_from_slice(s);
    buf.extend_from_slice(b"\r\n");
}

pub enum Reply {
    /// Bulk string; its bytes are in the caller's buffer.
    Bulk,
    Nil,
    Simple(String),
    Error(String),
    Int(i64),
}

pub struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
    line: Vec<u8>,
}

impl Conn {
    pub fn open(host: &str, port: u16) -> Result<Conn, String> {
        let addr = format!("{host}:{port}");
        let s = TcpStream::connect(&addr).map_err(|e| format!("connect {addr}: {e}"))?;
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
        let _ = s.set_write_timeout(Some(Duration::from_secs(60)));
        let r = s.try_clone().map_err(|e| format!("socket clone: {e}"))?;
        Ok(Conn {
            w: s,
            r: BufReader::with_capacity(256 * 1024, r),
            line: Vec::with_capacity(128),
        })
    }

    pub fn send(&mut self, buf: &[u8]) -> Result<(), String> {
        self.w.write_all(buf).map_err(|e| format!("write: {e}"))
    }

    /// Reads one reply; a bulk string's bytes land in `data`.
    pub fn reply(&mut self, data: &mut Vec<u8>) -> Result<Reply, String> {
        self.line.clear();
        let n = self
            .r
            .read_until(b'\n', &mut self.line)
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("server closed the connection".into());
        }
        if self.line.len() < 3 || !self.line.ends_with(b"\r\n") {
            return Err(format!(
                "protocol error: bad reply line {:?}",
                String::from_utf8_lossy(&self.line)
            ));
        }
        let body = String::from_utf8_lossy(&self.line[1..self.line.len() - 2]).into_owned();
        match self.line[0] {
            b'+' => Ok(Reply::Simple(body)),
            b'-' => Ok(Reply::Error(body)),
            b':' => body
                .parse()
                .map(Reply::Int)
                .map_err(|_| format!("protocol error: bad integer {body:?}")),
            b'_' => Ok(Reply::Nil),
            b'$' => {
                let len: i64 = body
                    .parse()
                    .map_err(|_| format!("protocol error: bad bulk length {body:?}"))?;
                if len < 0 {
                    return Ok(Reply::Nil);
                }
                data.resize(len as usize + 2, 0);
                self.r.read_exact(data).map_err(|e| format!("read: {e}"))?;
                if !data.ends_with(b"\r\n") {
                    return Err("protocol error: bulk string not ended by CRLF".into());
                }
                data.truncate(len as usize);
                Ok(Reply::Bulk)
            }
            c => Err(format!(
                "protocol error: unexpected reply type {:?} in {:?}",
                c as char,
                String::from_utf8_lossy(&self.line)
            )),
        }
    }
}

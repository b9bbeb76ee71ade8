//! [`Raw`]: one TCP connection to a RESP server, read three ways over one buffered reader —
//! the exact bytes of a reply (byte-for-byte tests), a parsed [`Resp`] (tests that want
//! values), or a [`Reply`] whose bulk bytes land in the caller's buffer (the load generators:
//! no allocation per bulk reply).
//!
//! The test-facing calls panic on any failure; the `try_*`/`next_reply`/`value` calls return
//! `io::Result` for the load generators and for callers that add context to the panic.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::resp::{assert_bytes, bulk_of, cmd, show, Resp};

/// How long a test waits for any one read.
const TEST_READ_TIMEOUT: Duration = Duration::from_secs(20);

/// A reply to the load generators' GET/SET: a bulk string's bytes are in the caller's buffer.
pub enum Reply {
    Bulk,
    Nil,
    Simple(String),
    Error(String),
    Int(i64),
}

/// A connection: writes go straight to the socket, reads through a buffer.
pub struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
    /// The reply line being read (kept to spare an allocation per reply).
    line: Vec<u8>,
}

impl Raw {
    /// Connects to `host:port` with `timeout` on every read and write.
    pub fn open(host: &str, port: u16, timeout: Duration) -> io::Result<Raw> {
        let s = TcpStream::connect((host, port))?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        Raw::wrap(s)
    }

    /// Connects to a local server for a test; panics when it cannot.
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        Raw::from_stream(s)
    }

    /// A test connection over an open stream (reads wait up to 20 s).
    pub fn from_stream(s: TcpStream) -> Raw {
        s.set_read_timeout(Some(TEST_READ_TIMEOUT)).unwrap();
        Raw::wrap(s).expect("clone the socket")
    }

    fn wrap(s: TcpStream) -> io::Result<Raw> {
        s.set_nodelay(true)?;
        let r = BufReader::with_capacity(256 * 1024, s.try_clone()?);
        Ok(Raw {
            w: s,
            r,
            line: Vec::with_capacity(128),
        })
    }

    /// The socket, for timeouts, a second writer, or a write whose error is expected.
    pub fn stream(&self) -> &TcpStream {
        &self.w
    }

    // -----------------------------------------------------------------------------------------
    // For tests: panics on failure
    // -----------------------------------------------------------------------------------------

    pub fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).expect("write");
    }

    /// Reads exactly `n` bytes.
    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        self.r.read_exact(&mut buf).expect("read");
        buf
    }

    /// Reads one complete reply (any RESP2/RESP3 type, nested) and returns its exact bytes.
    pub fn reply(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Err(e) = self.reply_bytes(&mut out) {
            panic!("reading a reply: {e}; got so far: {}", show(&out));
        }
        out
    }

    /// Sends a multibulk command and returns its reply's bytes.
    pub fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&cmd(args));
        self.reply()
    }

    /// Sends a multibulk command and returns the body of its bulk reply as text.
    pub fn call_text(&mut self, args: &[&[u8]]) -> String {
        String::from_utf8(bulk_of(&self.call(args))).unwrap()
    }

    /// Sends `req` (any bytes) and asserts the next reply is exactly `want`.
    pub fn expect(&mut self, req: &[u8], want: &[u8]) {
        self.send(req);
        let got = self.reply();
        assert_bytes(&got, want, &format!("reply to {}", show(req)));
    }

    /// Sends a multibulk command and asserts its reply is exactly `want`.
    pub fn expect_cmd(&mut self, args: &[&[u8]], want: &[u8]) {
        self.expect(&cmd(args), want);
    }

    /// Sends `req` and asserts the next `expect.len()` bytes (one reply or several) are
    /// exactly `expect`.
    pub fn roundtrip(&mut self, req: &[u8], expect: &[u8]) {
        self.send(req);
        let got = self.read_n(expect.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expect),
            "reply to {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Reads until the peer closes the connection (a reset counts as closed), waiting at most
    /// `timeout` for each read; returns what came, and the error if it was not closed.
    pub fn read_until_close(&mut self, timeout: Duration) -> (Vec<u8>, Option<io::Error>) {
        self.w.set_read_timeout(Some(timeout)).unwrap();
        let mut rest = Vec::new();
        let err = match self.r.read_to_end(&mut rest) {
            Ok(_) => None,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => None,
            Err(e) => Some(e),
        };
        (rest, err)
    }

    /// Asserts the peer closes the connection without sending anything more.
    pub fn expect_eof(&mut self, what: &str) {
        let (rest, err) = self.read_until_close(Duration::from_secs(5));
        if let Some(e) = err {
            panic!(
                "{what}: connection was not closed ({e}); got so far: {}",
                show(&rest)
            );
        }
        assert!(
            rest.is_empty(),
            "{what}: unexpected bytes before close: {}",
            show(&rest)
        );
    }

    // -----------------------------------------------------------------------------------------
    // Fallible
    // -----------------------------------------------------------------------------------------

    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.w.write_all(bytes)
    }

    /// Sends a multibulk command and parses its reply.
    pub fn request(&mut self, args: &[&[u8]]) -> io::Result<Resp> {
        self.try_send(&cmd(args))?;
        self.value()
    }

    /// Reads one reply as a value.
    pub fn value(&mut self) -> io::Result<Resp> {
        let kind = self.read_line()?;
        Ok(match kind {
            b'+' => Resp::Simple(self.text()),
            b'-' => Resp::Error(self.text()),
            b':' => Resp::Int(self.num()?),
            b'$' => match self.count()? {
                None => Resp::Bulk(None),
                Some(n) => {
                    let mut body = Vec::new();
                    self.bulk_body(n, &mut body)?;
                    Resp::Bulk(Some(body))
                }
            },
            b'*' => match self.count()? {
                None => Resp::Array(None),
                Some(n) => Resp::Array(Some(
                    (0..n).map(|_| self.value()).collect::<Result<_, _>>()?,
                )),
            },
            _ => return Err(self.unexpected()),
        })
    }

    /// Reads one reply to a GET or SET; a bulk string's bytes replace `data`'s.
    pub fn next_reply(&mut self, data: &mut Vec<u8>) -> io::Result<Reply> {
        let kind = self.read_line()?;
        Ok(match kind {
            b'+' => Reply::Simple(self.text()),
            b'-' => Reply::Error(self.text()),
            b':' => Reply::Int(self.num()?),
            b'_' => Reply::Nil,
            b'$' => match self.count()? {
                None => Reply::Nil,
                Some(n) => {
                    data.clear();
                    self.bulk_body(n, data)?;
                    Reply::Bulk
                }
            },
            _ => return Err(self.unexpected()),
        })
    }

    // -----------------------------------------------------------------------------------------
    // The reader all three ways share
    // -----------------------------------------------------------------------------------------

    /// Appends one complete reply's bytes to `out`.
    fn reply_bytes(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let kind = self.read_line()?;
        out.extend_from_slice(&self.line);
        let items = match kind {
            b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => 0,
            b'$' | b'!' | b'=' => {
                if let Some(n) = self.count()? {
                    self.bulk_body(n, out)?;
                    out.extend_from_slice(b"\r\n");
                }
                0
            }
            b'*' | b'~' | b'>' => self.count()?.unwrap_or(0),
            b'%' => 2 * self.count()?.unwrap_or(0),
            // Attributes, then the reply they describe.
            b'|' => 2 * self.count()?.unwrap_or(0) + 1,
            _ => return Err(self.unexpected()),
        };
        for _ in 0..items {
            self.reply_bytes(out)?;
        }
        Ok(())
    }

    /// Reads a reply's first line (CRLF included) into `self.line`; returns its type byte.
    fn read_line(&mut self) -> io::Result<u8> {
        self.line.clear();
        if self.r.read_until(b'\n', &mut self.line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        if self.line.len() < 3 || !self.line.ends_with(b"\r\n") {
            return Err(bad(format!(
                "reply line not terminated by CRLF: {}",
                show(&self.line)
            )));
        }
        Ok(self.line[0])
    }

    /// The line's text after the type byte.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.line[1..self.line.len() - 2]).into_owned()
    }

    fn num(&self) -> io::Result<i64> {
        let text = self.text();
        text.parse()
            .map_err(|_| bad(format!("bad number in reply line {text:?}")))
    }

    /// A bulk or aggregate length; None for -1 (null).
    fn count(&self) -> io::Result<Option<usize>> {
        Ok(usize::try_from(self.num()?).ok())
    }

    /// Appends a bulk string's `n` bytes to `out` (and checks the CRLF after them).
    fn bulk_body(&mut self, n: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let at = out.len();
        out.resize(at + n + 2, 0);
        self.r.read_exact(&mut out[at..])?;
        if !out.ends_with(b"\r\n") {
            return Err(bad("bulk string not followed by CRLF".into()));
        }
        out.truncate(at + n);
        Ok(())
    }

    fn unexpected(&self) -> io::Error {
        bad(format!("unexpected reply type in {}", show(&self.line)))
    }
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("protocol error: {msg}"))
}

/// Sends `args` and asserts the reply bytes exactly.
pub fn rt(raw: &mut Raw, args: &[&str], expect: &str) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    raw.send(&cmd(&a));
    let got = raw.reply();
    assert_eq!(String::from_utf8_lossy(&got), expect, "reply to {args:?}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connection to a peer that sends `bytes` and closes.
    fn peer_sending(bytes: &'static [u8]) -> Raw {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(bytes).unwrap();
        });
        Raw::connect(port)
    }

    #[test]
    fn reply_reads_exactly_one_reply_of_any_type() {
        let replies: [&[u8]; 7] = [
            b"+OK\r\n",
            b"$5\r\na\r\nb\0\r\n",
            b"$-1\r\n",
            b"*3\r\n:1\r\n*-1\r\n*1\r\n$0\r\n\r\n",
            b"%1\r\n+k\r\n~2\r\n_\r\n,1.5\r\n",
            b"|1\r\n+ttl\r\n:3\r\n=7\r\ntxt:abc\r\n",
            b"-ERR x\r\n",
        ];
        let mut raw = peer_sending(b"+OK\r\n$5\r\na\r\nb\0\r\n$-1\r\n*3\r\n:1\r\n*-1\r\n*1\r\n$0\r\n\r\n%1\r\n+k\r\n~2\r\n_\r\n,1.5\r\n|1\r\n+ttl\r\n:3\r\n=7\r\ntxt:abc\r\n-ERR x\r\n");
        for want in replies {
            assert_bytes(&raw.reply(), want, "reply");
        }
        raw.expect_eof("after the replies");
    }

    #[test]
    fn value_parses_nested_replies() {
        let mut raw = peer_sending(b"*3\r\n:-7\r\n$2\r\nhi\r\n*-1\r\n+PONG\r\n-ERR no\r\n");
        let got = raw.value().unwrap();
        let want = Resp::Array(Some(vec![
            Resp::Int(-7),
            Resp::Bulk(Some(b"hi".to_vec())),
            Resp::Array(None),
        ]));
        assert_eq!(got, want);
        assert_eq!(raw.value().unwrap(), Resp::Simple("PONG".into()));
        assert_eq!(raw.value().unwrap(), Resp::Error("ERR no".into()));
        assert!(raw.value().is_err(), "a closed connection is an error");
    }

    #[test]
    fn next_reply_puts_bulk_bytes_in_the_callers_buffer() {
        let mut raw = peer_sending(b"$3\r\nabc\r\n$-1\r\n_\r\n$1\r\nz\r\n:4\r\n$2\r\nxyz\r\n");
        let mut data = b"old".to_vec();
        assert!(matches!(raw.next_reply(&mut data), Ok(Reply::Bulk)));
        assert_eq!(data, b"abc");
        assert!(matches!(raw.next_reply(&mut data), Ok(Reply::Nil)));
        assert!(matches!(raw.next_reply(&mut data), Ok(Reply::Nil)));
        assert!(matches!(raw.next_reply(&mut data), Ok(Reply::Bulk)));
        assert_eq!(data, b"z");
        assert!(matches!(raw.next_reply(&mut data), Ok(Reply::Int(4))));
        let err = raw
            .next_reply(&mut data)
            .err()
            .expect("a bulk without its CRLF");
        assert!(err.to_string().contains("protocol error"), "{err}");
    }
}

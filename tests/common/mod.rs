//! Test harness: starts the real `strata` binary on a free port and talks to it over TCP.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server; killed when dropped.
pub struct Server {
    pub port: u16,
    child: Child,
}

impl Server {
    /// Starts `strata` with `args` (plus `--port`), waiting until it answers PING.
    pub fn start(args: &[&str]) -> Server {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("--port")
            .arg(port.to_string())
            .args(["--log_level", "warn"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn strata");
        let mut s = Server { port, child };
        s.wait_ready();
        s
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("strata exited early: {status}");
            }
            if let Ok(mut c) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                if c.write_all(b"PING\r\n").is_ok() {
                    let mut buf = [0u8; 7];
                    if c.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n" {
                        return;
                    }
                }
            }
            assert!(Instant::now() < deadline, "strata did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate connection.
    pub fn client(&self) -> redis::Connection {
        let c = redis::Client::open(self.url()).expect("client");
        c.get_connection().expect("connect")
    }

    /// A raw TCP connection for byte-exact checks.
    pub fn raw(&self) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Raw { s }
    }

    /// True while the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit (e.g. after SHUTDOWN); returns true if it did in time.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port no other test of this process has been given and nothing listens on. Ports come from
/// a per-process sequence (tests run in parallel threads, and asking the OS for port 0 can hand
/// two threads the same port before either server binds it).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 400) as u16 * 100;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = base + n % 100;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Raw connection: send bytes, read exact replies.
pub struct Raw {
    pub s: TcpStream,
}

impl Raw {
    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("write");
    }

    /// Reads exactly `n` bytes.
    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        self.s.read_exact(&mut buf).expect("read");
        buf
    }

    /// Sends `req` and asserts the reply is exactly `expect`.
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

    /// Reads until the peer closes; returns everything read.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = self.s.read_to_end(&mut out);
        out
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Shard of a key for `shards` threads, as the server computes it (for picking keys that land
/// on different shards).
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    strata::shard::shard_of(key, shards)
}

/// Two keys (with a prefix) that live on different shards out of `shards`.
pub fn keys_on_different_shards(prefix: &str, shards: usize) -> (String, String) {
    let a = format!("{prefix}:0");
    let sa = shard_of(a.as_bytes(), shards);
    for i in 1..1000 {
        let b = format!("{prefix}:{i}");
        if shard_of(b.as_bytes(), shards) != sa {
            return (a, b);
        }
    }
    panic!("no key on another shard");
}

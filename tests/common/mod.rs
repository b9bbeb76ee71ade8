//! Test harness: starts the real `strata` binary on a free port and talks to it over TCP.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::Connection;

/// A running server; killed when dropped.
pub struct Server {
    pub port: u16,
    child: Child,
    /// The snapshot directory made for it when `--dir` was not given (so a test never saves
    /// into, or loads from, the working directory).
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts `strata` with `args` (plus `--port`), waiting until it answers PING.
    pub fn start(args: &[&str]) -> Server {
        let mut s = Server::spawn(args);
        s.wait_ready();
        s
    }

    /// Starts `strata` with `args` (plus `--port`) without waiting for it.
    pub fn spawn(args: &[&str]) -> Server {
        let port = free_port();
        let dir = (!args
            .iter()
            .any(|a| *a == "--dir" || a.starts_with("--dir=")))
        .then(|| tempfile::tempdir().expect("temp dir"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        command
            .arg("--port")
            .arg(port.to_string())
            .args(["--log_level", "warn"]);
        if let Some(d) = &dir {
            command.arg("--dir").arg(d.path());
        }
        let child = command
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn strata");
        Server {
            port,
            child,
            _dir: dir,
        }
    }

    fn wait_ready(&mut self) {
        let ready = self.poll_started("strata", |port| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
            let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
            c.write_all(b"PING\r\n").ok()?;
            let mut buf = [0u8; 7];
            c.read_exact(&mut buf).ok()?;
            (&buf == b"+PONG\r\n").then_some(())
        });
        assert!(ready.is_some(), "strata did not start");
    }

    /// [`poll_started`] on this server's process; `ready` is given the port.
    pub fn poll_started<T>(
        &mut self,
        what: &str,
        mut ready: impl FnMut(u16) -> Option<T>,
    ) -> Option<T> {
        let port = self.port;
        poll_started(&mut self.child, what, || ready(port))
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

    /// Sends SIGTERM (a clean stop: the server saves, then exits).
    pub fn terminate(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -TERM failed");
    }

    /// Kills the process at once (SIGKILL), like a crash, and reaps it.
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Calls `ready` every 20 ms until it gives a value, for up to 20 s, panicking with
/// "`what` exited early" if `child` exits first; None when the time is up.
pub fn poll_started<T>(
    child: &mut Child,
    what: &str,
    mut ready: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early: {status}");
        }
        if let Some(v) = ready() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
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

/// A server with two proactor threads.
pub fn server() -> Server {
    server_with_threads(2)
}

/// A server with `threads` proactor threads (one shard each).
pub fn server_with_threads(threads: usize) -> Server {
    Server::start(&["--proactor_threads", &threads.to_string()])
}

// ---------------------------------------------------------------------------------------------
// Byte-exact replies on a raw connection
// ---------------------------------------------------------------------------------------------

/// Reads one complete RESP reply (any type, nested) and returns its bytes.
pub fn read_reply(raw: &mut Raw) -> Vec<u8> {
    let mut out = Vec::new();
    read_into(raw, &mut out);
    out
}

/// Appends one complete RESP reply (any type, nested) to `out`.
pub fn read_into(raw: &mut Raw, out: &mut Vec<u8>) {
    let start = out.len();
    loop {
        let c = raw.read_n(1)[0];
        out.push(c);
        if out.len() - start >= 2 && out.ends_with(b"\r\n") {
            break;
        }
    }
    let line = String::from_utf8_lossy(&out[start + 1..out.len() - 2]).into_owned();
    let n: i64 = line.parse().unwrap_or(-1);
    match out[start] {
        b'$' | b'=' | b'!' if n >= 0 => out.extend(raw.read_n(n as usize + 2)),
        b'*' | b'~' | b'>' => (0..n.max(0)).for_each(|_| read_into(raw, out)),
        b'%' => (0..2 * n.max(0)).for_each(|_| read_into(raw, out)),
        _ => {}
    }
}

/// Sends `args` on a raw connection and asserts the reply bytes exactly.
pub fn rt(raw: &mut Raw, args: &[&str], expect: &str) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    raw.send(&cmd(&a));
    let got = read_reply(raw);
    assert_eq!(String::from_utf8_lossy(&got), expect, "reply to {args:?}");
}

/// An error reply as RESP bytes.
pub fn e(msg: &str) -> String {
    format!("-{msg}\r\n")
}

/// A bulk reply as RESP bytes.
pub fn b(v: &str) -> String {
    format!("${}\r\n{v}\r\n", v.len())
}

/// An integer reply as RESP bytes.
pub fn i(n: i64) -> String {
    format!(":{n}\r\n")
}

/// The error reply for a wrong number of arguments to `cmd` (named in lower case, as Redis does).
pub fn wrong_args(cmd: &str) -> String {
    e(&format!(
        "ERR wrong number of arguments for '{cmd}' command"
    ))
}

/// An array reply of already encoded `items` as RESP bytes.
pub fn arr(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for it in items {
        s.push_str(it);
    }
    s
}

pub const OK: &str = "+OK\r\n";
pub const NIL: &str = "$-1\r\n";
pub const SYNTAX: &str = "-ERR syntax error\r\n";
pub const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
pub const NOT_FLOAT: &str = "-ERR value is not a valid float\r\n";
pub const NO_KEY: &str = "-ERR no such key\r\n";
pub const SAME: &str = "-ERR source and destination objects are the same\r\n";
pub const DB_RANGE: &str = "-ERR DB index is out of range\r\n";

// ---------------------------------------------------------------------------------------------
// Through the `redis` crate
// ---------------------------------------------------------------------------------------------

/// Samples the server's RSS every 20 ms until stopped; returns the peak.
pub fn rss_sampler(
    pid: u32,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<u64>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        let mut peak = 0u64;
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                if let Some(kb) = st
                    .lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    peak = peak.max(kb * 1024);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    });
    (stop, h)
}

/// The highest RSS process `pid` has had (VmHWM), in bytes.
pub fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("VmHWM in /proc status")
        * 1024
}

/// Stops a sampler of [`rss_sampler`] and asserts that the peak RSS it saw stayed within 5% of
/// `max` (the bound maxmemory promises); returns the peak.
pub fn assert_peak_rss_within(
    (stop, handle): (
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<u64>,
    ),
    max: u64,
) -> u64 {
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = handle.join().expect("the RSS sampler panicked");
    assert!(
        peak as f64 <= max as f64 * 1.05,
        "peak RSS {peak} passed maxmemory {max} by more than 5%"
    );
    peak
}

/// A numeric field of `INFO section`.
pub fn info_u64(c: &mut Connection, section: &str, field: &str) -> u64 {
    let v = info_str(c, section, field);
    v.parse()
        .unwrap_or_else(|_| panic!("{field} in INFO {section} is not a number: {v}"))
}

/// A field of `INFO section`, as text.
pub fn info_str(c: &mut Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(c).expect("INFO");
    info_field(&text, section, field)
}

/// Several numeric fields of one `INFO section` reply: consistent with each other while the
/// server keeps changing them in the background.
pub fn info_u64s<const N: usize>(c: &mut Connection, section: &str, fields: [&str; N]) -> [u64; N] {
    let text: String = redis::cmd("INFO").arg(section).query(c).expect("INFO");
    fields.map(|f| {
        let v = info_field(&text, section, f);
        v.parse()
            .unwrap_or_else(|_| panic!("{f} in INFO {section} is not a number: {v}"))
    })
}

fn info_field(text: &str, section: &str, field: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// Runs `args` (command name first) and converts the reply; panics on an error reply.
pub fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let mut command = redis::cmd(args[0]);
    for a in &args[1..] {
        command.arg(*a);
    }
    command
        .query(c)
        .unwrap_or_else(|err| panic!("{args:?} failed: {err}"))
}

/// Every key a full SCAN returns (with repeats), with extra arguments such as MATCH/COUNT.
pub fn scan_all(c: &mut Connection, extra: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    let mut rounds = 0;
    loop {
        let mut command = redis::cmd("SCAN");
        command.arg(&cursor);
        for a in extra {
            command.arg(*a);
        }
        let (next, keys): (String, Vec<String>) = command.query(c).unwrap();
        out.extend(keys);
        rounds += 1;
        assert!(rounds < 100_000, "SCAN does not terminate");
        if next == "0" {
            return out;
        }
        cursor = next;
    }
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

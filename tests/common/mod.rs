//! The strata package's test harness: test-support's launcher and clients bound to this
//! package's `strata` binary, and the helpers that need the `redis` crate or `strata` itself.
#![allow(dead_code)]

use redis::Connection;

pub use test_support::*;

/// The `strata` binary under test.
pub const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// A `redis` crate connection to a server, Strata or a real redis-server.
pub trait Client {
    fn client(&self) -> Connection;
}

impl Client for Server {
    fn client(&self) -> Connection {
        connect(&self.url())
    }
}

impl Client for RedisServer {
    fn client(&self) -> Connection {
        connect(&self.url())
    }
}

fn connect(url: &str) -> Connection {
    let c = redis::Client::open(url).expect("client");
    c.get_connection().expect("connect")
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
    Server::start(STRATA, &["--proactor_threads", &threads.to_string()])
}

// ---------------------------------------------------------------------------------------------
// Through the `redis` crate
// ---------------------------------------------------------------------------------------------

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

/// The command that adds elements to a collection of `kind` ("hash", "list", "set", else a
/// sorted set).
pub fn adding_command(kind: &str) -> &'static str {
    match kind {
        "hash" => "HSET",
        "list" => "RPUSH",
        "set" => "SADD",
        _ => "ZADD",
    }
}

/// Polls `field` of INFO tiered every `every` until it satisfies `ok` (panics, naming `what`,
/// after `within`); its last value.
pub fn wait_tiered(
    c: &mut Connection,
    field: &str,
    ok: impl Fn(u64) -> bool,
    what: &str,
    (within, every): (std::time::Duration, std::time::Duration),
) -> u64 {
    let deadline = std::time::Instant::now() + within;
    loop {
        let v = info_u64(c, "tiered", field);
        if ok(v) {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {field} is {v}"
        );
        std::thread::sleep(every);
    }
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

// ---------------------------------------------------------------------------------------------
// Tiering: servers whose values go to SSD, and data sets to fill them with
// ---------------------------------------------------------------------------------------------

/// A value of `len` bytes that can only belong to key number `i` (version `ver`).
pub fn value(i: usize, ver: usize, len: usize) -> Vec<u8> {
    let mut v = format!("{i}:{ver}:").into_bytes();
    let mut x = (i as u64 * 2654435761) ^ ver as u64;
    while v.len() < len {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.push((x >> 56) as u8);
    }
    v.truncate(len);
    v
}

pub fn tiered_server(dir: &tempfile::TempDir, maxmemory: &str, threads: &str) -> Server {
    tiered_server_with(dir, maxmemory, threads, &[])
}

/// A tiered server with its files under `dir`, plus `extra` flags.
pub fn tiered_server_with(
    dir: &tempfile::TempDir,
    maxmemory: &str,
    threads: &str,
    extra: &[&str],
) -> Server {
    let prefix = dir.path().join("strata");
    let mut args = vec![
        "--proactor_threads",
        threads,
        "--maxmemory",
        maxmemory,
        "--tiered_prefix",
        prefix.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Server::start(STRATA, &args)
}

/// How the value of key number `i` (version `ver`, `len` bytes) is made.
pub type ValueFn = fn(usize, usize, usize) -> Vec<u8>;

pub fn fill(c: &mut Connection, keys: std::ops::Range<usize>, ver: usize, len: usize) {
    fill_with(c, keys, value, ver, len);
}

/// SETs `key:i` to `f(i, ver, len)` for every `i` in `keys`, 500 to a pipeline.
pub fn fill_with(
    c: &mut Connection,
    keys: std::ops::Range<usize>,
    f: ValueFn,
    ver: usize,
    len: usize,
) {
    for chunk in keys.collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("SET")
                .arg(format!("key:{i}"))
                .arg(f(i, ver, len))
                .ignore();
        }
        p.query::<()>(c).expect("pipelined SET");
    }
}

// ---------------------------------------------------------------------------------------------
// DUMP / RESTORE payloads
// ---------------------------------------------------------------------------------------------

/// CRC-64/Jones as Redis computes it (reflected, poly 0xad93d23594c935a9, init 0).
pub fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &byte in data {
        crc ^= byte as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95AC_9329_AC4B_C9B5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// A DUMP payload for `body` (type byte + object) with RDB version `ver`.
pub fn payload(body: &[u8], ver: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&ver.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

pub fn check_crc(p: &[u8]) -> bool {
    p.len() >= 10 && crc64(&p[..p.len() - 8]).to_le_bytes() == p[p.len() - 8..]
}

pub fn set_bytes(c: &mut Connection, key: &str, v: &[u8]) {
    let _: () = redis::cmd("SET").arg(key).arg(v).query(c).unwrap();
}

pub fn get_bytes(c: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

pub fn dump(c: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap()
}

pub fn restore(
    c: &mut Connection,
    key: &str,
    ttl: i64,
    p: &[u8],
    opts: &[&str],
) -> redis::RedisResult<()> {
    let mut command = redis::cmd("RESTORE");
    command.arg(key).arg(ttl).arg(p);
    for o in opts {
        command.arg(*o);
    }
    command.query(c)
}

pub fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Sends each case (a command's arguments) to both servers in order; the cases whose reply
/// bytes differ, with both replies (empty when all match).
pub fn differing_replies(strata: &mut Raw, redis: &mut Raw, cases: &[&[&str]]) -> Vec<String> {
    let mut diffs = Vec::new();
    for case in cases {
        let args: Vec<&[u8]> = case.iter().map(|a| a.as_bytes()).collect();
        let (a, b) = (strata.call(&args), redis.call(&args));
        if a != b {
            diffs.push(format!(
                "{case:?}\n  strata: {}\n  redis:  {}",
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b)
            ));
        }
    }
    diffs
}

/// Flips one byte at `offset` in each 4 KiB page of `pages` of shard 0's tier file in `dir`
/// (page 0 is the file's header), as a damaged disk would.
pub fn flip_tier_file_bytes(dir: &tempfile::TempDir, pages: std::ops::Range<u64>, offset: u64) {
    use std::os::unix::fs::FileExt;
    let path = dir.path().join("strata-0000.ssd");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    for page in pages {
        let pos = page * 4096 + offset;
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, pos).unwrap();
        b[0] ^= 0x5a;
        f.write_all_at(&b, pos).unwrap();
    }
    f.sync_all().unwrap();
}

/// A keyspace channel no command writes to: published last, it marks the end of a test's events.
pub const KEYSPACE_END: &str = "__keyspace@0__:~end~";

/// The messages `listener` (subscribed to keyspace channels) got until the end marker, which
/// `publisher` publishes now: (channel, payload) in arrival order.
pub fn keyspace_messages(listener: &mut Raw, publisher: &mut Raw) -> Vec<(String, String)> {
    publisher.send(&cmd(&[b"PUBLISH", KEYSPACE_END.as_bytes(), b"end"]));
    publisher.reply();
    let mut out = Vec::new();
    loop {
        let Resp::Array(Some(parts)) = listener.value().expect("a message") else {
            panic!("not a message");
        };
        let text = |r: &Resp| match r {
            Resp::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not a bulk string: {other:?}"),
        };
        let (channel, payload) = (text(&parts[2]), text(&parts[3]));
        if channel == KEYSPACE_END {
            return out;
        }
        out.push((channel, payload));
    }
}

/// Element `j` of a kind for large collections: distinct, not an integer (no intset), `len`
/// bytes of pseudo-random hex after `kind-j-` (the RDB codec's LZF would shrink repeated text,
/// and the blob with it).
pub fn hex_elem(kind: &str, j: usize, digits: usize, len: usize) -> String {
    let mut s = format!("{kind}-{j:0digits$}-");
    let mut x = (j as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ kind.len() as u64;
    while s.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    s.truncate(len);
    s
}

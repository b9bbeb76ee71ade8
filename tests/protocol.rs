//! Wire-level integration tests: protocol errors, pipelining, inline commands, RESP3, auth,
//! databases, server/connection commands, the memory limit, flags and large values.
//!
//! Every expected reply below is byte-exact and was checked against a real `redis-server` fed
//! the same bytes (where Redis 7.0 and 7.2 differ, the 7.2 text is used and noted).
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn int(n: i64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// `used_memory` from INFO memory.
fn used_memory(c: &mut Raw) -> u64 {
    let text = c.call_text(&[b"INFO", b"memory"]);
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap_or_else(|| panic!("no used_memory in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Sends `req` on a fresh connection and asserts the server answers exactly `want`, then closes
/// the connection; meanwhile a connection opened earlier and a new one keep working.
fn assert_protocol_error(s: &Server, req: &[u8], want: &[u8]) {
    let mut before = s.raw();
    before.expect_cmd(&[b"SET", b"pe:k", b"v"], b"+OK\r\n");

    let mut bad = s.raw();
    // The server may close before reading everything a large request sent; a write error is
    // then expected and harmless.
    let _ = bad.stream().write_all(req);
    let (got, err) = bad.read_until_close(Duration::from_secs(5));
    if let Some(e) = err {
        panic!(
            "request {}: connection not closed after the error ({e}); got: {}",
            show(req),
            show(&got)
        );
    }
    assert_bytes(&got, want, &format!("reply to {}", show(req)));

    before.expect_cmd(&[b"GET", b"pe:k"], b"$1\r\nv\r\n");
    let mut after = s.raw();
    after.expect(b"PING\r\n", b"+PONG\r\n");
}

/// A server started with `--requirepass` (`Server::start` waits for `+PONG`, which a
/// password-protected server does not give before AUTH).
fn start_with_password(pass: &str) -> Server {
    let mut s = Server::spawn(STRATA, &["--proactor_threads", "2", "--requirepass", pass]);
    let ready = s.poll_started("strata --requirepass", |port| {
        let mut st = TcpStream::connect(("127.0.0.1", port)).ok()?;
        let _ = st.set_read_timeout(Some(Duration::from_secs(2)));
        let want = b"-NOAUTH Authentication required.\r\n";
        let mut buf = vec![0u8; want.len()];
        if st.write_all(b"PING\r\n").is_ok() && st.read_exact(&mut buf).is_ok() {
            assert_bytes(&buf, want, "PING before AUTH");
            return Some(());
        }
        None
    });
    assert!(ready.is_some(), "strata --requirepass did not start");
    s
}

/// Runs the binary with `args` and waits for it to exit; returns (status code, stdout+stderr).
fn run_binary(args: &[&str]) -> (Option<i32>, String) {
    let out = run_to_exit(STRATA, args);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

// ---------------------------------------------------------------------------------------------
// 1. Protocol errors
// ---------------------------------------------------------------------------------------------

#[test]
fn protocol_error_invalid_multibulk_length() {
    let s = server();
    let want: &[u8] = b"-ERR Protocol error: invalid multibulk length\r\n";
    assert_protocol_error(&s, b"*abc\r\n", want);
    assert_protocol_error(&s, b"*1x\r\n", want);
    // Redis 7 rejects counts above INT_MAX.
    assert_protocol_error(&s, b"*2147483648\r\n", want);
    assert_protocol_error(&s, b"*99999999999999999999\r\n", want);
    // Requests after a valid one in the same write are answered before the error.
    assert_protocol_error(
        &s,
        b"PING\r\n*abc\r\nPING\r\n",
        b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
    );
    // A multibulk count line longer than 64 KiB.
    let mut long = b"*".to_vec();
    long.extend(std::iter::repeat_n(b'1', 70_000));
    assert_protocol_error(
        &s,
        &long,
        b"-ERR Protocol error: too big mbulk count string\r\n",
    );
}

/// Redis 7.x only rejects multibulk counts above INT_MAX (networking.c: `ll > INT_MAX`);
/// 1048577 arguments are accepted (Redis <= 6.2 had the 1024*1024 limit). Checked against
/// redis-server 7.0.15 (and 7.2.6's source): `*1048577\r\n` gets no error, the server waits for
/// the arguments.
#[test]
fn multibulk_count_above_one_million_is_refused() {
    // The issue fixes the limit at 1M arguments (Redis 6's), so a hostile count cannot make the
    // server reserve for billions; 1048576 itself is still accepted.
    let s = server();
    assert_protocol_error(
        &s,
        b"*1048577\r\n",
        b"-ERR Protocol error: invalid multibulk length\r\n",
    );
    let n = 1024 * 1024 - 1; // keys; plus the command name makes 1048576 arguments
    let mut req = format!("*{}\r\n$3\r\nDEL\r\n", n + 1).into_bytes();
    for _ in 0..n {
        req.extend_from_slice(b"$1\r\nk\r\n");
    }
    let mut c = s.raw();
    let mut w = c.stream().try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&req);
    });
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let got = c.reply();
    let _ = writer.join();
    assert_bytes(&got, b":0\r\n", "DEL with 1048575 keys");
    c.expect(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn protocol_error_invalid_bulk_length() {
    let s = server();
    let want: &[u8] = b"-ERR Protocol error: invalid bulk length\r\n";
    assert_protocol_error(&s, b"*1\r\n$-5\r\n", want);
    assert_protocol_error(&s, b"*1\r\n$-1\r\n", want);
    assert_protocol_error(&s, b"*1\r\n$abc\r\n", want);
    // proto-max-bulk-len is 512 MB: one more byte is refused before any data is sent.
    assert_protocol_error(&s, b"*1\r\n$536870913\r\n", want);
    assert_protocol_error(&s, b"*2\r\n$3\r\nGET\r\n$536870913\r\n", want);
    // A bulk length line longer than 64 KiB.
    let mut long = b"*1\r\n$".to_vec();
    long.extend(std::iter::repeat_n(b'1', 70_000));
    assert_protocol_error(
        &s,
        &long,
        b"-ERR Protocol error: too big bulk count string\r\n",
    );
}

#[test]
fn protocol_error_expected_dollar() {
    let s = server();
    assert_protocol_error(
        &s,
        b"*1\r\n:1\r\n",
        b"-ERR Protocol error: expected '$', got ':'\r\n",
    );
    assert_protocol_error(
        &s,
        b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n",
        b"-ERR Protocol error: expected '$', got 'f'\r\n",
    );
}

#[test]
fn protocol_error_unbalanced_quotes_inline() {
    let s = server();
    let want: &[u8] = b"-ERR Protocol error: unbalanced quotes in request\r\n";
    assert_protocol_error(&s, b"SET \"a\r\n", want);
    assert_protocol_error(&s, b"ECHO 'abc\r\n", want);
    // A closing quote must be followed by a space.
    assert_protocol_error(&s, b"ECHO \"a\"b\r\n", want);
}

#[test]
fn protocol_error_too_big_inline_request() {
    let s = server();
    let big = vec![b'A'; 70_000];
    assert_protocol_error(&s, &big, b"-ERR Protocol error: too big inline request\r\n");
    let mut get = b"GET ".to_vec();
    get.extend(std::iter::repeat_n(b'k', 100_000));
    assert_protocol_error(&s, &get, b"-ERR Protocol error: too big inline request\r\n");
    // Just under the limit (no newline yet) is not an error: completing the line works.
    let mut c = s.raw();
    let mut echo = b"ECHO ".to_vec();
    echo.extend(std::iter::repeat_n(b'x', 60_000));
    c.send(&echo);
    std::thread::sleep(Duration::from_millis(100));
    c.send(b"\r\n");
    let got = c.reply();
    assert_bytes(&got, &bulk(&vec![b'x'; 60_000]), "long inline ECHO");
}

// ---------------------------------------------------------------------------------------------
// 2. Garbage
// ---------------------------------------------------------------------------------------------

#[test]
fn garbage_client_does_not_disturb_others() {
    let mut s = server();
    let port = s.port;
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let garbage = {
        let (stop, sent) = (stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(0x5eed);
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                let _ = c.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = c.set_read_timeout(Some(Duration::from_millis(20)));
                let len = rng.gen_range(1..8192);
                let mut buf = vec![0u8; len];
                rng.fill(&mut buf[..]);
                let prefix: &[u8] = match rng.gen_range(0..6) {
                    0 => b"*",
                    1 => b"*3\r\n$",
                    2 => b"*2\r\n$3\r\nGET\r\n$",
                    3 => b"*1\r\n$4\r\nPING\r\n",
                    4 => b"SET \"",
                    _ => b"",
                };
                let mut msg = prefix.to_vec();
                msg.extend_from_slice(&buf);
                let _ = c.write_all(&msg);
                if rng.gen_bool(0.5) {
                    let mut sink = [0u8; 4096];
                    let _ = c.read(&mut sink);
                }
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    let mut client = s.client();
    let mut raw = s.raw();
    let mut rng = SmallRng::seed_from_u64(42);
    let start = Instant::now();
    let mut i = 0u32;
    while i < 300 || start.elapsed() < Duration::from_millis(1500) {
        let key = format!("good:{}", i % 50);
        let len = rng.gen_range(0..300);
        let val: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(&val)
            .query(&mut client)
            .expect("SET during garbage");
        let back: Vec<u8> = redis::cmd("GET")
            .arg(&key)
            .query(&mut client)
            .expect("GET during garbage");
        assert_eq!(back, val, "value of {key}");
        raw.expect_cmd(&[b"GET", key.as_bytes()], &bulk(&val));
        i += 1;
        assert!(start.elapsed() < Duration::from_secs(30), "too slow");
    }
    stop.store(true, Ordering::Relaxed);
    garbage.join().unwrap();
    assert!(
        sent.load(Ordering::Relaxed) >= 20,
        "garbage thread only made {} connections",
        sent.load(Ordering::Relaxed)
    );
    assert!(s.alive(), "server died under garbage input");
    let mut fresh = s.raw();
    fresh.expect(b"PING\r\n", b"+PONG\r\n");
    assert!(s.alive());
}

// ---------------------------------------------------------------------------------------------
// 3. Pipelines
// ---------------------------------------------------------------------------------------------

fn pipe_value(i: usize) -> Vec<u8> {
    // Varying lengths, binary bytes and CRLF inside.
    let mut v = format!("value-{i}-").into_bytes();
    v.extend((0..(i % 97)).map(|j| (i * 31 + j) as u8));
    if i.is_multiple_of(5) {
        v.extend_from_slice(b"\r\n$3\r\n");
    }
    v
}

/// 1000 SETs and 1000 GETs written at once; the replies must come back exactly, in order.
fn raw_pipeline(s: &Server) {
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..1000 {
        req.extend(cmd(&[
            b"SET",
            format!("key:{i}").as_bytes(),
            &pipe_value(i),
        ]));
        want.extend_from_slice(b"+OK\r\n");
    }
    for i in 0..1000 {
        // Reverse order so replies cannot line up by accident.
        let k = 999 - i;
        req.extend(cmd(&[b"GET", format!("key:{k}").as_bytes()]));
        want.extend(bulk(&pipe_value(k)));
    }
    req.extend(cmd(&[b"GET", b"key:missing"]));
    want.extend_from_slice(b"$-1\r\n");
    let mut c = s.raw();
    c.send(&req);
    let got = c.read_n(want.len());
    assert_bytes(&got, &want, "pipelined 1000 SET + 1000 GET");
    c.expect(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn pipeline_raw_1000_set_get() {
    let s = server();
    raw_pipeline(&s);
}

#[test]
fn pipeline_raw_1000_set_get_three_shards() {
    let mut hit = [false; 3];
    for i in 0..1000 {
        hit[shard_of(format!("key:{i}").as_bytes(), 3)] = true;
    }
    assert_eq!(hit, [true; 3], "keys must cover all three shards");
    let s = server_with_threads(3);
    raw_pipeline(&s);
}

/// A mixed pipeline on 3 shards: per-key read-after-write chains, keys on every shard, and
/// barrier commands (PING, ECHO, MSET, MGET, DEL across shards) in between; every reply must be
/// the one a sequential Redis gives, in request order.
#[test]
fn pipeline_mixed_commands_keep_order_across_shards() {
    let s = server_with_threads(3);
    let (ma, mb) = keys_on_different_shards("m", 3);
    let mut req = Vec::new();
    let mut want = Vec::new();
    let mut counters = [0i64; 7];
    let mut logs: Vec<Vec<u8>> = vec![Vec::new(); 5];
    for i in 0..1500usize {
        let c = i % 7;
        counters[c] += 1;
        req.extend(cmd(&[b"INCR", format!("ctr:{c}").as_bytes()]));
        want.extend(int(counters[c]));

        let l = i % 5;
        let piece = format!("{i},");
        logs[l].extend_from_slice(piece.as_bytes());
        req.extend(cmd(&[
            b"APPEND",
            format!("log:{l}").as_bytes(),
            piece.as_bytes(),
        ]));
        want.extend(int(logs[l].len() as i64));

        if i % 3 == 0 {
            let g = (i / 3) % 5;
            req.extend(cmd(&[b"GET", format!("log:{g}").as_bytes()]));
            want.extend(if logs[g].is_empty() {
                b"$-1\r\n".to_vec()
            } else {
                bulk(&logs[g])
            });
        }
        if i % 10 == 0 {
            let e = format!("e{i}");
            req.extend(cmd(&[b"ECHO", e.as_bytes()]));
            want.extend(bulk(e.as_bytes()));
        }
        if i % 50 == 0 {
            req.extend(cmd(&[b"PING"]));
            want.extend_from_slice(b"+PONG\r\n");
        }
        if i % 100 == 0 {
            let v = i.to_string();
            req.extend(cmd(&[
                b"MSET",
                ma.as_bytes(),
                v.as_bytes(),
                mb.as_bytes(),
                v.as_bytes(),
            ]));
            want.extend_from_slice(b"+OK\r\n");
            req.extend(cmd(&[b"MGET", mb.as_bytes(), ma.as_bytes(), b"nokey"]));
            want.extend_from_slice(b"*3\r\n");
            want.extend(bulk(v.as_bytes()));
            want.extend(bulk(v.as_bytes()));
            want.extend_from_slice(b"$-1\r\n");
        }
        if i % 250 == 249 {
            req.extend(cmd(&[b"DEL", b"ctr:0", b"ctr:1", b"ctr:2", b"nokey"]));
            want.extend(int(3));
            counters[0] = 0;
            counters[1] = 0;
            counters[2] = 0;
        }
    }
    let mut c = s.raw();
    c.send(&req);
    let got = c.read_n(want.len());
    assert_bytes(&got, &want, "mixed pipeline on 3 shards");
}

fn crate_pipeline(s: &Server) {
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("SET").arg(format!("key:{i}")).arg(pipe_value(i));
    }
    for i in 0..1000 {
        p.cmd("GET").arg(format!("key:{}", (i * 7) % 1000));
    }
    let got: Vec<redis::Value> = p.query(&mut c).expect("pipeline");
    assert_eq!(got.len(), 2000);
    for (i, v) in got[..1000].iter().enumerate() {
        assert_eq!(*v, redis::Value::Okay, "reply {i}");
    }
    for (i, v) in got[1000..].iter().enumerate() {
        let k = (i * 7) % 1000;
        assert_eq!(
            *v,
            redis::Value::BulkString(pipe_value(k)),
            "GET key:{k} (reply {})",
            1000 + i
        );
    }
}

#[test]
fn pipeline_redis_crate() {
    let s = server();
    crate_pipeline(&s);
}

#[test]
fn pipeline_redis_crate_three_shards() {
    let s = server_with_threads(3);
    crate_pipeline(&s);
}

// ---------------------------------------------------------------------------------------------
// 4. Inline commands
// ---------------------------------------------------------------------------------------------

#[test]
fn inline_commands() {
    let s = server();
    let mut c = s.raw();
    c.expect(b"PING\r\n", b"+PONG\r\n");
    c.expect(b"PING\n", b"+PONG\r\n");
    c.expect(b"ping hello\r\n", b"$5\r\nhello\r\n");
    c.expect(b"SET k \"hello world\"\r\n", b"+OK\r\n");
    c.expect(b"GET k\r\n", b"$11\r\nhello world\r\n");
    c.expect(b"ECHO \"a\\x41\"\r\n", b"$2\r\naA\r\n");
    c.expect(b"ECHO \"tab\\there\\n\"\r\n", b"$9\r\ntab\there\n\r\n");
    c.expect(b"ECHO \"\\\"q\\\"\"\r\n", b"$3\r\n\"q\"\r\n");
    c.expect(b"ECHO 'it\\'s'\r\n", b"$4\r\nit's\r\n");
    c.expect(b"ECHO \"\\x4\"\r\n", b"$2\r\nx4\r\n");
    c.expect(b"ECHO ''\r\n", b"$0\r\n\r\n");
    c.expect(b"  ECHO   x  \r\n", b"$1\r\nx\r\n");
    c.expect(b"set k2 'a\"b'\r\n", b"+OK\r\n");
    c.expect(b"get k2\r\n", b"$3\r\na\"b\r\n");
    // Empty lines are skipped without a reply.
    c.expect(b"\r\n\r\nPING\r\n", b"+PONG\r\n");
    // Inline and multibulk mixed in one write.
    c.send(b"PING\r\n*1\r\n$4\r\nPING\r\nECHO x\n*-1\r\n*0\r\nPING\r\n");
    let got = c.read_n(b"+PONG\r\n+PONG\r\n$1\r\nx\r\n+PONG\r\n".len());
    assert_bytes(
        &got,
        b"+PONG\r\n+PONG\r\n$1\r\nx\r\n+PONG\r\n",
        "mixed inline/multibulk",
    );
    // An inline command split across writes.
    c.send(b"ECH");
    std::thread::sleep(Duration::from_millis(50));
    c.expect(b"O split\r\n", b"$5\r\nsplit\r\n");
}

// ---------------------------------------------------------------------------------------------
// 5. RESP3
// ---------------------------------------------------------------------------------------------

#[test]
fn resp3_hello_switches_encoding() {
    let s = server();
    let mut c = s.raw();
    c.send(&cmd(&[b"HELLO", b"3"]));
    let hello = c.reply();
    assert!(hello.starts_with(b"%7\r\n"), "HELLO 3: {}", show(&hello));
    for part in [
        &b"$5\r\nproto\r\n:3\r\n"[..],
        b"$6\r\nserver\r\n$5\r\nredis\r\n",
        b"$4\r\nmode\r\n$10\r\nstandalone\r\n",
        b"$4\r\nrole\r\n$6\r\nmaster\r\n",
    ] {
        assert!(contains(&hello, part), "HELLO 3: {}", show(&hello));
    }
    assert!(
        hello.ends_with(b"$7\r\nmodules\r\n*0\r\n"),
        "HELLO 3: {}",
        show(&hello)
    );
    let id = int_of(&c.call(&[b"CLIENT", b"ID"]));
    assert!(
        contains(&hello, format!("$2\r\nid\r\n:{id}\r\n").as_bytes()),
        "HELLO 3 id: {}",
        show(&hello)
    );

    c.expect_cmd(&[b"GET", b"missing"], b"_\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"maxmemory"],
        b"%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    );
    c.expect_cmd(
        &[b"HELLO", b"4"],
        b"-NOPROTO unsupported protocol version\r\n",
    );
    // A failed HELLO leaves the protocol as it was.
    c.expect_cmd(&[b"GET", b"missing"], b"_\r\n");
    c.expect_cmd(
        &[b"HELLO", b"abc"],
        b"-ERR Protocol version is not an integer or out of range\r\n",
    );

    let hello2 = c.call(&[b"HELLO", b"2"]);
    assert!(hello2.starts_with(b"*14\r\n"), "HELLO 2: {}", show(&hello2));
    assert!(
        contains(&hello2, b"$5\r\nproto\r\n:2\r\n"),
        "HELLO 2: {}",
        show(&hello2)
    );
    c.expect_cmd(&[b"GET", b"missing"], b"$-1\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"maxmemory"],
        b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    );
    c.expect_cmd(
        &[b"HELLO", b"1"],
        b"-NOPROTO unsupported protocol version\r\n",
    );
}

/// Each reply is encoded in the protocol in effect when its command ran: HELLO 3 and HELLO 2
/// pipelined in one write with commands between them (redis-server 7.0.15 answers exactly so).
#[test]
fn resp3_pipelined_hello_switches_encoding_per_command() {
    let s = server();
    let mut c = s.raw();
    c.send(b"GET missing\r\nHELLO 3\r\nGET missing\r\nHELLO 2\r\nGET missing\r\n");
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_bytes(&c.reply(), b"$-1\r\n", "GET before HELLO 3");
    let h3 = c.reply();
    assert!(
        h3.starts_with(b"%7\r\n"),
        "pipelined HELLO 3 must be a map: {}",
        show(&h3)
    );
    assert!(contains(&h3, b"$5\r\nproto\r\n:3\r\n"), "{}", show(&h3));
    assert_bytes(&c.reply(), b"_\r\n", "GET after pipelined HELLO 3");
    let h2 = c.reply();
    assert!(
        h2.starts_with(b"*14\r\n"),
        "pipelined HELLO 2: {}",
        show(&h2)
    );
    assert!(contains(&h2, b"$5\r\nproto\r\n:2\r\n"), "{}", show(&h2));
    assert_bytes(&c.reply(), b"$-1\r\n", "GET after pipelined HELLO 2");
}

// ---------------------------------------------------------------------------------------------
// 6. Auth
// ---------------------------------------------------------------------------------------------

#[test]
fn auth_requirepass() {
    let s = start_with_password("secret");
    let noauth: &[u8] = b"-NOAUTH Authentication required.\r\n";
    let wrongpass: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

    let mut c = Raw::connect(s.port);
    c.expect_cmd(&[b"GET", b"k"], noauth);
    c.expect_cmd(&[b"SET", b"k", b"v"], noauth);
    c.expect(b"PING\r\n", noauth);
    c.expect_cmd(&[b"SELECT", b"1"], noauth);
    c.expect_cmd(&[b"CLIENT", b"ID"], noauth);
    // Unknown commands and arity are checked before authentication, as in Redis.
    c.expect(
        b"foo\r\n",
        b"-ERR unknown command 'foo', with args beginning with: \r\n",
    );
    c.expect_cmd(
        &[b"AUTH"],
        b"-ERR wrong number of arguments for 'auth' command\r\n",
    );
    c.expect_cmd(&[b"AUTH", b"a", b"b", b"c"], b"-ERR syntax error\r\n");
    c.expect_cmd(&[b"AUTH", b"wrong"], wrongpass);
    c.expect_cmd(&[b"AUTH", b"default", b"wrong"], wrongpass);
    c.expect_cmd(&[b"AUTH", b"bob", b"secret"], wrongpass);
    c.expect_cmd(&[b"GET", b"k"], noauth);
    // Redis 7.2 text (networking.c helloCommand); 7.0 said "the HELLO AUTH <user> <pass>".
    c.expect(
        b"HELLO 3\r\n",
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n",
    );
    c.expect_cmd(&[b"AUTH", b"secret"], b"+OK\r\n");
    c.expect_cmd(&[b"SET", b"k", b"v"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", b"k"], b"$1\r\nv\r\n");

    let mut d = Raw::connect(s.port);
    d.expect_cmd(&[b"GET", b"k"], noauth);
    d.expect_cmd(&[b"AUTH", b"default", b"secret"], b"+OK\r\n");
    d.expect_cmd(&[b"GET", b"k"], b"$1\r\nv\r\n");

    let mut h = Raw::connect(s.port);
    h.expect_cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"wrong"], wrongpass);
    h.expect_cmd(&[b"GET", b"k"], noauth);
    let hello = h.call(&[
        b"HELLO", b"3", b"AUTH", b"default", b"secret", b"SETNAME", b"x",
    ]);
    assert!(
        hello.starts_with(b"%7\r\n"),
        "HELLO 3 AUTH: {}",
        show(&hello)
    );
    assert!(
        contains(&hello, b"$5\r\nproto\r\n:3\r\n"),
        "{}",
        show(&hello)
    );
    h.expect_cmd(&[b"CLIENT", b"GETNAME"], b"$1\r\nx\r\n");
    h.expect_cmd(&[b"GET", b"k"], b"$1\r\nv\r\n");
    h.expect_cmd(&[b"GET", b"missing"], b"_\r\n");

    // The redis crate authenticates from the URL.
    let url = format!("redis://:secret@127.0.0.1:{}/", s.port);
    let mut rc = redis::Client::open(url)
        .unwrap()
        .get_connection()
        .expect("auth via URL");
    let v: String = redis::cmd("GET").arg("k").query(&mut rc).unwrap();
    assert_eq!(v, "v");
    let mut plain = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .expect("connect without password");
    let e = redis::cmd("GET")
        .arg("k")
        .query::<Option<String>>(&mut plain)
        .expect_err("GET without the password must fail");
    assert_eq!(e.code(), Some("NOAUTH"), "{e}");
}

#[test]
fn auth_without_password_configured() {
    let s = server();
    let mut c = s.raw();
    c.expect_cmd(
        &[b"AUTH", b"x"],
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
    // The default user has no password: any password is accepted for it.
    c.expect_cmd(&[b"AUTH", b"default", b"x"], b"+OK\r\n");
    c.expect_cmd(
        &[b"AUTH", b"nobody", b"x"],
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    c.expect(b"PING\r\n", b"+PONG\r\n");
}

/// Redis 7 limits what an unauthenticated client may send: more than 10 arguments or a bulk
/// longer than 16 KiB is a protocol error (networking.c in 7.2; redis-server 7.0.15 answers
/// exactly so).
#[test]
fn auth_unauthenticated_request_size_limits() {
    let s = start_with_password("secret");
    let mut many = b"*11\r\n".to_vec();
    for _ in 0..11 {
        many.extend_from_slice(b"$4\r\nPING\r\n");
    }
    assert_protocol_error_auth(
        &s,
        &many,
        b"-ERR Protocol error: unauthenticated multibulk length\r\n",
    );
    assert_protocol_error_auth(
        &s,
        b"*2\r\n$4\r\nECHO\r\n$16385\r\n",
        b"-ERR Protocol error: unauthenticated bulk length\r\n",
    );
    // After AUTH the limits are gone.
    let mut c = Raw::connect(s.port);
    c.expect_cmd(&[b"AUTH", b"secret"], b"+OK\r\n");
    let big = vec![b'z'; 20_000];
    c.expect_cmd(&[b"ECHO", &big], &bulk(&big));
}

fn assert_protocol_error_auth(s: &Server, req: &[u8], want: &[u8]) {
    let mut bad = Raw::connect(s.port);
    let _ = bad.stream().write_all(req);
    let (got, err) = bad.read_until_close(Duration::from_secs(3));
    assert_bytes(
        &got,
        want,
        &format!("unauthenticated request {}", show(req)),
    );
    assert!(err.is_none(), "connection must close after {}", show(want));
}

// ---------------------------------------------------------------------------------------------
// 7. SELECT / SWAPDB
// ---------------------------------------------------------------------------------------------

#[test]
fn select_isolates_databases_and_swapdb() {
    let s = server();
    let (ka, kb) = keys_on_different_shards("db", 2);
    let mut c = s.raw();
    c.expect_cmd(&[b"SET", ka.as_bytes(), b"zero-a"], b"+OK\r\n");
    c.expect_cmd(&[b"SET", kb.as_bytes(), b"zero-b"], b"+OK\r\n");
    c.expect_cmd(&[b"SELECT", b"1"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", ka.as_bytes()], b"$-1\r\n");
    c.expect_cmd(&[b"GET", kb.as_bytes()], b"$-1\r\n");
    c.expect_cmd(&[b"DBSIZE"], b":0\r\n");
    c.expect_cmd(&[b"SET", ka.as_bytes(), b"one-a"], b"+OK\r\n");
    c.expect_cmd(&[b"DBSIZE"], b":1\r\n");
    c.expect_cmd(&[b"SELECT", b"15"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", ka.as_bytes()], b"$-1\r\n");
    c.expect_cmd(&[b"SELECT", b"0"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", ka.as_bytes()], b"$6\r\nzero-a\r\n");
    c.expect_cmd(&[b"DBSIZE"], b":2\r\n");

    c.expect_cmd(&[b"SELECT", b"16"], b"-ERR DB index is out of range\r\n");
    c.expect_cmd(&[b"SELECT", b"-1"], b"-ERR DB index is out of range\r\n");
    c.expect_cmd(
        &[b"SELECT", b"abc"],
        b"-ERR value is not an integer or out of range\r\n",
    );
    c.expect_cmd(
        &[b"SELECT"],
        b"-ERR wrong number of arguments for 'select' command\r\n",
    );
    // A failed SELECT keeps the current db.
    c.expect_cmd(&[b"GET", ka.as_bytes()], b"$6\r\nzero-a\r\n");

    // Another connection stays in db 0 while this one is elsewhere.
    let mut other = s.raw();
    other.expect_cmd(&[b"GET", ka.as_bytes()], b"$6\r\nzero-a\r\n");

    c.expect_cmd(&[b"SWAPDB", b"0", b"1"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", ka.as_bytes()], b"$5\r\none-a\r\n");
    c.expect_cmd(&[b"GET", kb.as_bytes()], b"$-1\r\n");
    c.expect_cmd(&[b"DBSIZE"], b":1\r\n");
    other.expect_cmd(&[b"GET", ka.as_bytes()], b"$5\r\none-a\r\n");
    other.expect_cmd(&[b"SELECT", b"1"], b"+OK\r\n");
    other.expect_cmd(&[b"GET", ka.as_bytes()], b"$6\r\nzero-a\r\n");
    other.expect_cmd(&[b"GET", kb.as_bytes()], b"$6\r\nzero-b\r\n");
    other.expect_cmd(&[b"DBSIZE"], b":2\r\n");

    c.expect_cmd(
        &[b"SWAPDB", b"0", b"16"],
        b"-ERR DB index is out of range\r\n",
    );
    c.expect_cmd(&[b"SWAPDB", b"a", b"1"], b"-ERR invalid first DB index\r\n");
    c.expect_cmd(
        &[b"SWAPDB", b"1", b"b"],
        b"-ERR invalid second DB index\r\n",
    );
}

#[test]
fn dbnum_flag_limits_select() {
    let s = Server::start(STRATA, &["--proactor_threads", "2", "--dbnum", "2"]);
    let mut c = s.raw();
    c.expect_cmd(&[b"SELECT", b"1"], b"+OK\r\n");
    c.expect_cmd(&[b"SELECT", b"2"], b"-ERR DB index is out of range\r\n");
    c.expect_cmd(
        &[b"SWAPDB", b"0", b"2"],
        b"-ERR DB index is out of range\r\n",
    );
    c.expect_cmd(&[b"SWAPDB", b"0", b"1"], b"+OK\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"databases"],
        b"*2\r\n$9\r\ndatabases\r\n$1\r\n2\r\n",
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Unknown commands and arity
// ---------------------------------------------------------------------------------------------

#[test]
fn unknown_command_and_arity_errors() {
    let s = server();
    let mut c = s.raw();
    c.expect_cmd(
        &[b"foo", b"a", b"b"],
        b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
    );
    c.expect(
        b"foo a b\r\n",
        b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
    );
    c.expect(
        b"FOO\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: \r\n",
    );
    // A newline inside an argument cannot break the reply's framing.
    c.expect_cmd(
        &[b"foo", b"a\r\nb"],
        b"-ERR unknown command 'foo', with args beginning with: 'a  b' \r\n",
    );
    // The command name is cut at 128 characters.
    let long_name = vec![b'X'; 200];
    let mut want = b"-ERR unknown command '".to_vec();
    want.extend(vec![b'X'; 128]);
    want.extend_from_slice(b"', with args beginning with: 'a' \r\n");
    c.expect_cmd(&[&long_name, b"a"], &want);

    c.expect_cmd(
        &[b"get"],
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    c.expect_cmd(
        &[b"GET", b"a", b"b"],
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    c.expect_cmd(
        &[b"SET", b"k"],
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    c.expect(
        b"SET\r\n",
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    c.expect_cmd(
        &[b"ECHO"],
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    );
    c.expect_cmd(
        &[b"PING", b"a", b"b"],
        b"-ERR wrong number of arguments for 'ping' command\r\n",
    );
    c.expect_cmd(
        &[b"MSET", b"a", b"1", b"b"],
        b"-ERR wrong number of arguments for 'mset' command\r\n",
    );
    c.expect_cmd(
        &[b"CONFIG", b"GET"],
        b"-ERR wrong number of arguments for 'config|get' command\r\n",
    );
    c.expect_cmd(
        &[b"CLIENT", b"NOSUCH"],
        b"-ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.\r\n",
    );
    // Errors do not break the connection.
    c.expect(b"PING\r\n", b"+PONG\r\n");
}

/// Redis lists the arguments of an unknown command only up to 128 characters in total
/// (server.c: `for (i=1; i < c->argc && sdslen(args) < 128; i++) ... '%.*s' ...128-sdslen`),
/// checked against redis-server 7.0.15.
#[test]
fn unknown_command_args_are_cut_at_128_chars_in_total() {
    let s = server();
    let mut c = s.raw();
    let a = vec![b'a'; 100];
    let b = vec![b'b'; 100];
    let mut want = b"-ERR unknown command 'FOO', with args beginning with: '".to_vec();
    want.extend(&a);
    want.extend_from_slice(b"' '");
    want.extend(vec![b'b'; 25]);
    want.extend_from_slice(b"' \r\n");
    c.expect_cmd(&[b"FOO", &a, &b, b"c"], &want);

    let line = b"FOO a b c d e f g h i j k l m n o p q r s t u v w x y z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40\r\n";
    c.expect(
        line,
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' 'c' 'd' 'e' 'f' 'g' 'h' 'i' 'j' 'k' 'l' 'm' 'n' 'o' 'p' 'q' 'r' 's' 't' 'u' 'v' 'w' 'x' 'y' 'z' '1' '2' '3' '4' '5' '6' \r\n",
    );
}

// ---------------------------------------------------------------------------------------------
// 9. Server and connection commands
// ---------------------------------------------------------------------------------------------

#[test]
fn client_id_setname_getname_list_info() {
    let s = server();
    let mut c = s.raw();
    let mut d = s.raw();
    let id = int_of(&c.call(&[b"CLIENT", b"ID"]));
    let id_d = int_of(&d.call(&[b"CLIENT", b"ID"]));
    assert!(id > 0 && id_d > 0 && id != id_d, "ids {id} {id_d}");
    // Stable per connection.
    c.expect_cmd(&[b"CLIENT", b"ID"], &int(id));

    c.expect_cmd(&[b"CLIENT", b"GETNAME"], b"$-1\r\n");
    c.expect_cmd(&[b"CLIENT", b"SETNAME", b"myname"], b"+OK\r\n");
    c.expect_cmd(&[b"CLIENT", b"GETNAME"], b"$6\r\nmyname\r\n");
    c.expect_cmd(
        &[b"CLIENT", b"SETNAME", b"a b"],
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    c.expect_cmd(&[b"CLIENT", b"GETNAME"], b"$6\r\nmyname\r\n");
    c.expect_cmd(
        &[b"CLIENT", b"SETNAME"],
        b"-ERR wrong number of arguments for 'client|setname' command\r\n",
    );

    let list = c.call_text(&[b"CLIENT", b"LIST"]);
    let mine = list
        .lines()
        .find(|l| l.starts_with(&format!("id={id} ")))
        .unwrap_or_else(|| panic!("CLIENT LIST lacks id={id}: {list}"));
    assert!(mine.contains(" name=myname "), "{mine}");
    assert!(mine.contains(" addr=127.0.0.1:"), "{mine}");
    assert!(mine.contains(" db=0 "), "{mine}");
    assert!(
        list.lines().any(|l| l.starts_with(&format!("id={id_d} "))),
        "CLIENT LIST lacks the other client: {list}"
    );
    assert!(list.ends_with('\n'));

    c.expect_cmd(&[b"SELECT", b"3"], b"+OK\r\n");
    let info = c.call_text(&[b"CLIENT", b"INFO"]);
    assert!(info.starts_with(&format!("id={id} ")), "{info}");
    assert!(info.contains(" name=myname "), "{info}");
    assert!(info.contains(" db=3 "), "{info}");
    assert!(
        info.ends_with('\n') && info.lines().count() == 1,
        "{info:?}"
    );
    let id_filtered = c.call_text(&[b"CLIENT", b"LIST", b"ID", id_d.to_string().as_bytes()]);
    assert_eq!(id_filtered.lines().count(), 1, "{id_filtered}");
    assert!(id_filtered.starts_with(&format!("id={id_d} ")));
}

#[test]
fn client_kill_closes_the_target_connection() {
    let s = server();
    let mut a = s.raw();
    let mut b = s.raw();
    let mut e = s.raw();
    let id_a = int_of(&a.call(&[b"CLIENT", b"ID"]));
    let id_b = int_of(&b.call(&[b"CLIENT", b"ID"]));
    a.expect_cmd(
        &[b"CLIENT", b"KILL", b"ID", id_b.to_string().as_bytes()],
        b":1\r\n",
    );
    b.expect_eof("killed client");
    // It is gone from CLIENT LIST (unregistering may take a moment).
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let list = a.call_text(&[b"CLIENT", b"LIST"]);
        if !list.lines().any(|l| l.starts_with(&format!("id={id_b} "))) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "killed client still listed: {list}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Killing it again finds nobody.
    a.expect_cmd(
        &[b"CLIENT", b"KILL", b"ID", id_b.to_string().as_bytes()],
        b":0\r\n",
    );
    // SKIPME yes (the default) never kills the caller.
    a.expect_cmd(
        &[
            b"CLIENT",
            b"KILL",
            b"ID",
            id_a.to_string().as_bytes(),
            b"SKIPME",
            b"yes",
        ],
        b":0\r\n",
    );
    a.expect_cmd(
        &[b"CLIENT", b"KILL", b"ID", id_a.to_string().as_bytes()],
        b":0\r\n",
    );
    a.expect(b"PING\r\n", b"+PONG\r\n");
    a.expect_cmd(
        &[b"CLIENT", b"KILL", b"ID", b"0"],
        b"-ERR client-id should be greater than 0\r\n",
    );

    // Old form: CLIENT KILL ip:port.
    let info_e = e.call_text(&[b"CLIENT", b"INFO"]);
    let addr = info_e
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    a.expect_cmd(&[b"CLIENT", b"KILL", addr.as_bytes()], b"+OK\r\n");
    e.expect_eof("client killed by address");
    a.expect_cmd(
        &[b"CLIENT", b"KILL", addr.as_bytes()],
        b"-ERR No such client\r\n",
    );
    a.expect(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn command_count_list_info_docs() {
    let s = server();
    let mut rc = s.client();
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut rc).unwrap();
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut rc).unwrap();
    // Redis counts top-level commands; COMMAND LIST also names subcommands as `name|sub`.
    let top_level = list.iter().filter(|n| !n.contains('|')).count();
    assert_eq!(
        count as usize, top_level,
        "COMMAND COUNT vs COMMAND LIST: {list:?}"
    );
    assert!(count > 60, "only {count} commands");
    for name in [
        "get", "set", "del", "hello", "client", "config", "info", "select", "command",
    ] {
        assert!(list.iter().any(|n| n == name), "COMMAND LIST lacks {name}");
    }
    let all: Vec<redis::Value> = redis::cmd("COMMAND").query(&mut rc).unwrap();
    assert_eq!(all.len(), count as usize, "COMMAND reply length");

    let mut c = s.raw();
    let info = c.call(&[b"COMMAND", b"INFO", b"get"]);
    let prefix: &[u8] =
        b"*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n";
    assert!(
        info.starts_with(prefix),
        "COMMAND INFO get: {}",
        show(&info)
    );
    let info_set = c.call(&[b"COMMAND", b"INFO", b"SET"]);
    assert!(
        info_set.starts_with(b"*1\r\n*10\r\n$3\r\nset\r\n:-3\r\n"),
        "COMMAND INFO SET: {}",
        show(&info_set)
    );

    let docs = c.call(&[b"COMMAND", b"DOCS", b"get"]);
    assert!(
        docs.starts_with(b"*2\r\n$3\r\nget\r\n*"),
        "COMMAND DOCS get: {}",
        show(&docs)
    );
    // Redis 7.2's commands/get.json (7.0 had "Get the value of a key").
    let summary = "Returns the string value of a key.";
    assert!(
        contains(
            &docs,
            format!("$7\r\nsummary\r\n${}\r\n{summary}\r\n", summary.len()).as_bytes()
        ),
        "COMMAND DOCS get summary: {}",
        show(&docs)
    );
    assert!(
        contains(&docs, b"$5\r\nsince\r\n$5\r\n1.0.0\r\n"),
        "{}",
        show(&docs)
    );
    assert!(
        contains(&docs, b"$5\r\ngroup\r\n$6\r\nstring\r\n"),
        "{}",
        show(&docs)
    );
    c.expect_cmd(
        &[b"COMMAND", b"GETKEYS", b"MSET", b"a", b"1", b"b", b"2"],
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
}

#[test]
fn config_get_set() {
    let s = server();
    let mut c = s.raw();
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"maxmemory"],
        b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
    );
    c.expect_cmd(&[b"CONFIG", b"SET", b"maxmemory", b"10mb"], b"+OK\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"maxmemory"],
        b"*2\r\n$9\r\nmaxmemory\r\n$8\r\n10485760\r\n",
    );
    let info = c.call_text(&[b"INFO", b"memory"]);
    assert!(info.contains("\r\nmaxmemory:10485760\r\n"), "{info}");
    c.expect_cmd(&[b"CONFIG", b"SET", b"maxmemory", b"0"], b"+OK\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"SET", b"nonexistent", b"1"],
        b"-ERR Unknown option or number of arguments for CONFIG SET - 'nonexistent'\r\n",
    );
    c.expect_cmd(
        &[b"CONFIG", b"SET", b"maxmemory", b"lots"],
        b"-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n",
    );
    c.expect_cmd(&[b"CONFIG", b"GET", b"nonexistent"], b"*0\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"port"],
        format!(
            "*2\r\n$4\r\nport\r\n${}\r\n{}\r\n",
            s.port.to_string().len(),
            s.port
        )
        .as_bytes(),
    );
}

#[test]
fn info_sections() {
    let s = server();
    let mut c = s.raw();
    for i in 0..37 {
        c.expect_cmd(&[b"SET", format!("info:{i}").as_bytes(), b"v"], b"+OK\r\n");
    }
    c.expect_cmd(&[b"SELECT", b"2"], b"+OK\r\n");
    c.expect_cmd(&[b"SET", b"x", b"v"], b"+OK\r\n");
    let info = c.call_text(&[b"INFO"]);
    for needle in [
        "# Server\r\n",
        "# Memory\r\n",
        "# Keyspace\r\n",
        "\r\nused_memory:",
        "\r\nused_memory_rss:",
        "\r\nmaxmemory:0\r\n",
        "redis_version:",
        &format!("\r\ntcp_port:{}\r\n", s.port),
    ] {
        assert!(info.contains(needle), "INFO lacks {needle:?}: {info}");
    }
    assert!(info.starts_with("# Server\r\n"), "{info}");
    assert!(
        info.contains("\r\ndb0:keys=37,"),
        "INFO keyspace db0: {info}"
    );
    assert!(
        info.contains("\r\ndb2:keys=1,"),
        "INFO keyspace db2: {info}"
    );
    assert!(!info.contains("db1:"), "empty dbs are not listed: {info}");

    let mem = c.call_text(&[b"INFO", b"memory"]);
    assert!(mem.starts_with("# Memory\r\n"), "{mem}");
    assert_eq!(
        mem.lines().filter(|l| l.starts_with('#')).count(),
        1,
        "INFO memory must hold only the Memory section: {mem}"
    );
    assert!(
        mem.contains("\r\nused_memory:") && mem.contains("\r\nused_memory_rss:"),
        "{mem}"
    );
    let ks = c.call_text(&[b"INFO", b"keyspace"]);
    assert_eq!(
        ks,
        "# Keyspace\r\ndb0:keys=37,expires=0,avg_ttl=0\r\ndb2:keys=1,expires=0,avg_ttl=0\r\n"
    );
    // Two sections, case-insensitively.
    let two = c.call_text(&[b"INFO", b"SERVER", b"Keyspace"]);
    assert!(
        two.starts_with("# Server\r\n") && two.contains("# Keyspace\r\n"),
        "{two}"
    );
    assert!(!two.contains("# Memory"), "{two}");
}

#[test]
fn time_and_lastsave() {
    let s = server();
    let mut c = s.raw();
    let before = now_ms() / 1000;
    let t = c.call(&[b"TIME"]);
    let after = now_ms() / 1000;
    assert!(t.starts_with(b"*2\r\n$"), "TIME: {}", show(&t));
    let text = String::from_utf8(t.clone()).unwrap();
    let parts: Vec<&str> = text.split("\r\n").collect();
    // *2, $n, secs, $n, micros, ""
    let secs: u64 = parts[2].parse().expect("seconds");
    let micros: u64 = parts[4].parse().expect("microseconds");
    assert!(
        secs >= before && secs <= after + 1,
        "TIME {secs} vs now {before}..{after}"
    );
    assert!(micros < 1_000_000, "micros {micros}");

    let ls = c.call(&[b"LASTSAVE"]);
    let ls = int_of(&ls) as u64;
    assert!(
        ls <= after + 1 && ls + 3600 > before,
        "LASTSAVE {ls} vs now {before}"
    );
}

#[test]
fn debug_populate() {
    let s = server();
    let mut c = s.raw();
    c.expect_cmd(&[b"SET", b"key:7", b"mine"], b"+OK\r\n");
    c.expect_cmd(&[b"DEBUG", b"POPULATE", b"1000"], b"+OK\r\n");
    c.expect_cmd(&[b"DBSIZE"], b":1000\r\n");
    c.expect_cmd(&[b"GET", b"key:5"], b"$7\r\nvalue:5\r\n");
    c.expect_cmd(&[b"GET", b"key:999"], b"$9\r\nvalue:999\r\n");
    c.expect_cmd(&[b"GET", b"key:1000"], b"$-1\r\n");
    // Existing keys are not overwritten.
    c.expect_cmd(&[b"GET", b"key:7"], b"$4\r\nmine\r\n");

    c.expect_cmd(&[b"DEBUG", b"POPULATE", b"10", b"p", b"20"], b"+OK\r\n");
    c.expect_cmd(&[b"DBSIZE"], b":1010\r\n");
    c.expect_cmd(&[b"STRLEN", b"p:3"], b":20\r\n");
    let mut v = b"value:3".to_vec();
    v.resize(20, 0);
    c.expect_cmd(&[b"GET", b"p:3"], &bulk(&v));
    c.expect_cmd(&[b"DEBUG", b"POPULATE", b"5", b"short", b"3"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", b"short:4"], b"$3\r\nval\r\n");
    // Another db.
    c.expect_cmd(&[b"SELECT", b"4"], b"+OK\r\n");
    c.expect_cmd(&[b"DEBUG", b"POPULATE", b"3"], b"+OK\r\n");
    c.expect_cmd(&[b"DBSIZE"], b":3\r\n");
}

/// Redis checks the count with getPositiveLongFromObjectOrReply (redis-server 7.0.15 answers
/// exactly so for both).
#[test]
fn debug_populate_rejects_bad_count() {
    let s = server();
    let mut c = s.raw();
    for count in [&b"abc"[..], b"-1"] {
        c.expect_cmd(
            &[b"DEBUG", b"POPULATE", count],
            b"-ERR value is out of range, must be positive\r\n",
        );
    }
    c.expect_cmd(&[b"DBSIZE"], b":0\r\n");
}

/// COMMAND INFO answers a null bulk (`addReplyNull`: `$-1` in RESP2, `_` in RESP3) for a
/// name it does not know (checked against redis-server 7.0.15).
#[test]
fn command_info_unknown_command_is_null() {
    let s = server();
    let mut c = s.raw();
    c.expect_cmd(&[b"COMMAND", b"INFO", b"nosuchcmd"], b"*1\r\n$-1\r\n");
    c.call(&[b"HELLO", b"3"]);
    c.expect_cmd(&[b"COMMAND", b"INFO", b"nosuchcmd"], b"*1\r\n_\r\n");
}

#[test]
fn memory_usage() {
    let s = server();
    let mut c = s.raw();
    c.expect_cmd(&[b"SET", b"small", b"v"], b"+OK\r\n");
    c.expect_cmd(&[b"SET", b"big", &vec![b'x'; 10_000]], b"+OK\r\n");
    let small = int_of(&c.call(&[b"MEMORY", b"USAGE", b"small"]));
    let big = int_of(&c.call(&[b"MEMORY", b"USAGE", b"big"]));
    assert!(small > 0, "MEMORY USAGE small = {small}");
    assert!(big >= 10_000, "MEMORY USAGE big = {big}");
    assert!(big > small);
    c.expect_cmd(&[b"MEMORY", b"USAGE", b"nokey"], b"$-1\r\n");
    c.expect_cmd(
        &[b"MEMORY", b"USAGE", b"small", b"SAMPLES", b"5"],
        &int(small),
    );
}

#[test]
fn echo_ping_quit() {
    let s = server();
    let mut c = s.raw();
    c.expect_cmd(&[b"ECHO", b"hello"], b"$5\r\nhello\r\n");
    c.expect_cmd(&[b"ECHO", b"a\r\nb\x00"], b"$5\r\na\r\nb\x00\r\n");
    c.expect_cmd(&[b"ECHO", b""], b"$0\r\n\r\n");
    c.expect_cmd(&[b"PING"], b"+PONG\r\n");
    c.expect_cmd(&[b"PING", b"msg"], b"$3\r\nmsg\r\n");
    // QUIT answers +OK, ignores what follows and closes.
    c.send(b"QUIT\r\nPING\r\n");
    assert_bytes(&c.read_n(5), b"+OK\r\n", "QUIT");
    c.expect_eof("after QUIT");

    let mut d = s.raw();
    d.send(&cmd(&[b"QUIT"]));
    assert_bytes(&d.read_n(5), b"+OK\r\n", "QUIT (multibulk)");
    d.expect_eof("after QUIT");
    let mut e = s.raw();
    e.expect(b"PING\r\n", b"+PONG\r\n");
}

// ---------------------------------------------------------------------------------------------
// 10. Memory limit
// ---------------------------------------------------------------------------------------------

#[test]
fn maxmemory_oom_then_recovery() {
    let s = Server::start(STRATA, &["--proactor_threads", "2", "--maxmemory", "20mb"]);
    let max: u64 = 20 * 1024 * 1024;
    let mut c = s.raw();
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"maxmemory"],
        b"*2\r\n$9\r\nmaxmemory\r\n$8\r\n20971520\r\n",
    );
    let oom: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    let mut rng = SmallRng::seed_from_u64(99);
    let mut stored: Vec<(String, Vec<u8>)> = Vec::new();
    let mut hit_oom = false;
    for i in 0..1000 {
        let key = format!("big:{i}");
        let mut val = vec![0u8; 100 * 1024];
        rng.fill(&mut val[..]);
        let r = c.call(&[b"SET", key.as_bytes(), &val]);
        if r == b"+OK\r\n" {
            stored.push((key, val));
        } else {
            assert_bytes(&r, oom, &format!("SET {key} over the limit"));
            hit_oom = true;
            break;
        }
    }
    assert!(hit_oom, "1000 x 100 KiB never hit a 20 MB maxmemory");
    assert!(
        stored.len() >= 50,
        "only {} values fit under 20 MB before OOM",
        stored.len()
    );
    // The same write again is refused again (nothing was freed in between). Whether a tiny
    // write still fits depends on how close to the limit the server is, so it is not checked.
    let mut again = vec![0u8; 100 * 1024];
    rng.fill(&mut again[..]);
    c.expect_cmd(&[b"SET", b"big:again", &again], oom);
    c.expect_cmd(&[b"GET", b"big:again"], b"$-1\r\n");
    // Reads and the key count still work.
    c.expect_cmd(&[b"DBSIZE"], &int(stored.len() as i64));
    for (k, v) in &stored {
        let got = c.call(&[b"GET", k.as_bytes()]);
        assert!(got == bulk(v), "value of {k} changed after OOM");
    }
    let used = used_memory(&mut c);
    assert!(
        used <= 2 * max,
        "used_memory {used} exceeds 2x maxmemory {max}"
    );
    assert!(
        used > max / 2,
        "used_memory {used} implausibly low with {} x 100 KiB",
        stored.len()
    );

    // DEL is allowed over the limit and frees memory; then writes work again.
    let half = stored.len() / 2;
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    for (k, _) in &stored[..half] {
        del.push(k.as_bytes());
    }
    c.expect_cmd(&del, &int(half as i64));
    c.expect_cmd(&[b"SET", b"tiny", b"1"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", b"tiny"], b"$1\r\n1\r\n");
    let mut val = vec![0u8; 100 * 1024];
    rng.fill(&mut val[..]);
    c.expect_cmd(&[b"SET", b"again", &val], b"+OK\r\n");
    c.expect_cmd(&[b"GET", b"again"], &bulk(&val));
    for (k, v) in &stored[half..] {
        let got = c.call(&[b"GET", k.as_bytes()]);
        assert!(got == bulk(v), "value of {k} changed");
    }
    let used = used_memory(&mut c);
    assert!(
        used <= max,
        "used_memory {used} still above maxmemory after DEL"
    );
}

// ---------------------------------------------------------------------------------------------
// 11. Flags
// ---------------------------------------------------------------------------------------------

#[test]
fn flagfile_sets_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strata.flags");
    std::fs::write(&path, "# test flags\n--dbnum=2\n\nhz=50\n").unwrap();
    let p = path.to_str().unwrap();
    let s = Server::start(STRATA, &["--proactor_threads", "2", "--flagfile", p]);
    let mut c = s.raw();
    c.expect_cmd(&[b"SELECT", b"1"], b"+OK\r\n");
    c.expect_cmd(&[b"SELECT", b"2"], b"-ERR DB index is out of range\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"hz"],
        b"*2\r\n$2\r\nhz\r\n$2\r\n50\r\n",
    );
}

#[test]
fn flagfile_with_port_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("strata.flags");
    let port = free_port();
    std::fs::write(
        &path,
        format!("--port={port}\n--dbnum=3\n--proactor_threads=2\n--log_level=warn\n"),
    )
    .unwrap();
    let child = Command::new(STRATA)
        .arg(format!("--flagfile={}", path.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn strata");
    let mut s = Server::adopt(child, port);
    let stream = s
        .poll_started("strata with --flagfile", |port| {
            TcpStream::connect(("127.0.0.1", port)).ok()
        })
        .unwrap_or_else(|| panic!("strata did not listen on the flagfile's port"));
    let mut c = Raw::from_stream(stream);
    c.expect(b"PING\r\n", b"+PONG\r\n");
    c.expect_cmd(&[b"SELECT", b"2"], b"+OK\r\n");
    c.expect_cmd(&[b"SELECT", b"3"], b"-ERR DB index is out of range\r\n");
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"port"],
        format!(
            "*2\r\n$4\r\nport\r\n${}\r\n{port}\r\n",
            port.to_string().len()
        )
        .as_bytes(),
    );
}

#[test]
fn help_lists_flags() {
    let (code, text) = run_binary(&["--help"]);
    assert_eq!(code, Some(0), "strata --help exit code; output: {text}");
    for flag in [
        "--maxmemory",
        "--proactor_threads",
        "--requirepass",
        "--port",
        "--dbnum",
        "--flagfile",
    ] {
        assert!(
            text.contains(flag),
            "--help does not mention {flag}: {text}"
        );
    }
}

#[test]
fn invalid_flag_value_exits_nonzero() {
    let port = free_port().to_string();
    let (code, text) = run_binary(&["--port", &port, "--maxmemory", "lots"]);
    assert!(
        code.is_some() && code != Some(0),
        "--maxmemory lots exit code {code:?}: {text}"
    );
    assert!(
        text.contains("lots") && text.contains("maxmemory"),
        "message: {text}"
    );

    let (code, text) = run_binary(&["--port", &port, "--no_such_flag", "1"]);
    assert!(
        code.is_some() && code != Some(0),
        "unknown flag exit code {code:?}: {text}"
    );
    assert!(text.contains("no_such_flag"), "message: {text}");

    let (code, text) = run_binary(&["--port", &port, "--dbnum", "0"]);
    assert!(
        code.is_some() && code != Some(0),
        "--dbnum 0 exit code {code:?}: {text}"
    );

    let (code, text) = run_binary(&["--flagfile", "/nonexistent/strata.flags"]);
    assert!(
        code.is_some() && code != Some(0),
        "missing flagfile exit code {code:?}: {text}"
    );
    assert!(
        text.contains("/nonexistent/strata.flags"),
        "message: {text}"
    );
}

#[test]
fn default_bind_is_loopback() {
    let s = server_with_threads(1);
    let mut c = s.raw();
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"bind"],
        b"*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n",
    );
    c.expect_cmd(
        &[b"CONFIG", b"GET", b"proactor_threads"],
        b"*2\r\n$16\r\nproactor_threads\r\n$1\r\n1\r\n",
    );
}

// ---------------------------------------------------------------------------------------------
// 12. Large values
// ---------------------------------------------------------------------------------------------

#[test]
fn large_binary_value_roundtrip() {
    let s = server();
    let mut rng = SmallRng::seed_from_u64(5);
    let n = 5 * 1024 * 1024;
    let mut val = vec![0u8; n];
    rng.fill(&mut val[..]);
    for i in (0..n - 8).step_by(4099) {
        val[i..i + 8].copy_from_slice(b"\r\n$5\r\n*1");
    }
    let mut c = s.raw();
    c.expect_cmd(&[b"SET", b"huge", &val], b"+OK\r\n");
    c.expect_cmd(&[b"STRLEN", b"huge"], &int(n as i64));
    let got = c.call(&[b"GET", b"huge"]);
    assert!(got == bulk(&val), "5 MB value differs after the round trip");
    // The same value written in small pieces with pauses.
    let req = cmd(&[b"SET", b"huge2", &val]);
    for chunk in req.chunks(1 << 20) {
        c.send(chunk);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_bytes(&c.reply(), b"+OK\r\n", "SET huge2 in pieces");
    let mut rc = s.client();
    let back: Vec<u8> = redis::cmd("GET").arg("huge2").query(&mut rc).unwrap();
    assert!(back == val, "5 MB value via the redis crate differs");
    c.expect(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn partial_huge_bulk_then_disconnect() {
    let mut s = server();
    let mut c = s.raw();
    let base = used_memory(&mut c);
    for round in 0..3 {
        let mut bad = s.raw();
        bad.send(b"*3\r\n$3\r\nSET\r\n$7\r\npartial\r\n$100000000\r\n");
        let chunk = vec![b'p'; 1 << 20];
        for _ in 0..4 {
            bad.send(&chunk);
        }
        // The server answers nothing while the value is incomplete.
        c.expect(b"PING\r\n", b"+PONG\r\n");
        drop(bad);
        c.expect_cmd(&[b"GET", b"partial"], b"$-1\r\n");
        assert!(s.alive(), "server died (round {round})");
    }
    // The buffers of the dropped clients are given back.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let used = used_memory(&mut c);
        if used < base + 20 * 1024 * 1024 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "used_memory {used} stays high after partial requests (base {base})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    c.expect_cmd(&[b"SET", b"partial", b"ok"], b"+OK\r\n");
    c.expect_cmd(&[b"GET", b"partial"], b"$2\r\nok\r\n");
    assert!(s.alive());
}

// ---------------------------------------------------------------------------------------------
// 13. SHUTDOWN
// ---------------------------------------------------------------------------------------------

#[test]
fn shutdown_nosave_exits() {
    let mut s = server();
    let mut c = s.raw();
    c.expect_cmd(&[b"SET", b"k", b"v"], b"+OK\r\n");
    c.expect_cmd(&[b"SHUTDOWN", b"BOGUS"], b"-ERR syntax error\r\n");
    assert!(s.alive());
    c.send(&cmd(&[b"SHUTDOWN", b"NOSAVE"]));
    assert!(
        s.wait_exit(Duration::from_secs(10)),
        "SHUTDOWN NOSAVE did not exit"
    );
    // A successful SHUTDOWN sends no reply; the connection just closes.
    c.expect_eof("after SHUTDOWN NOSAVE");
    assert!(
        TcpStream::connect(("127.0.0.1", s.port)).is_err(),
        "port still accepting"
    );
}

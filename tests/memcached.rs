//! Strata's memcached port driven by a real client library (the `memcache` crate, in its
//! ASCII and binary modes) and by raw bytes: CAS races between clients, keys crossing between
//! memcached and RESP, values offloaded to SSD read back with their flags, flags kept by a
//! snapshot, authentication, limits, and the counters `stats` and INFO report.

mod mc_common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mc_common::*;
use redis::Commands;

fn client(port: u16, binary: bool) -> memcache::Client {
    let url = if binary {
        format!("memcache://127.0.0.1:{port}?timeout=5")
    } else {
        format!("memcache://127.0.0.1:{port}?timeout=5&protocol=ascii")
    };
    memcache::Client::connect(url).expect("memcache client")
}

fn resp(s: &Server) -> redis::Connection {
    redis::Client::open(s.url())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// One text exchange: sends `req`, reads until a line equal to one of `ends`.
struct Text {
    r: BufReader<TcpStream>,
}

impl Text {
    fn open(port: u16) -> Text {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Text {
            r: BufReader::new(s),
        }
    }

    fn send(&mut self, req: &[u8]) {
        self.r.get_mut().write_all(req).unwrap();
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l
    }

    /// Sends `req` and returns the reply lines up to and including END (or one line).
    fn call(&mut self, req: &[u8]) -> Vec<String> {
        self.send(req);
        let mut out = Vec::new();
        loop {
            let l = self.line();
            let done = !l.starts_with("VALUE ") && !l.starts_with("STAT ");
            if l.starts_with("VALUE ") {
                let len: usize = l.split(' ').nth(3).unwrap().trim().parse().unwrap();
                let mut data = vec![0; len + 2];
                self.r.read_exact(&mut data).unwrap();
                out.push(l);
                out.push(String::from_utf8_lossy(&data).into_owned());
                continue;
            }
            out.push(l);
            if done {
                return out;
            }
        }
    }
}

fn check_client(c: &memcache::Client, binary: bool) {
    c.flush().unwrap();
    c.set("a", "hello", 0).unwrap();
    assert_eq!(c.get::<String>("a").unwrap().as_deref(), Some("hello"));
    assert_eq!(c.get::<String>("missing").unwrap(), None);
    // The crate reports NOT_STORED as an error in binary, as success in ASCII.
    let _ = c.add("a", "x", 0);
    assert_eq!(c.get::<String>("a").unwrap().as_deref(), Some("hello"));
    c.add("b", "bee", 0).unwrap();
    c.replace("b", "bee2", 0).unwrap();
    let _ = c.replace("nope", "x", 0);
    assert_eq!(c.get::<String>("nope").unwrap(), None);
    c.append("a", " world").unwrap();
    c.prepend("a", ">").unwrap();
    assert_eq!(
        c.get::<String>("a").unwrap().as_deref(),
        Some(">hello world")
    );
    let many: std::collections::HashMap<String, String> = c.gets(&["a", "b", "nope"]).unwrap();
    assert_eq!(many.len(), 2);
    assert_eq!(many["b"], "bee2");
    c.set("n", 10u64, 0).unwrap();
    assert_eq!(c.increment("n", 5).unwrap(), 15);
    assert_eq!(c.decrement("n", 20).unwrap(), 0);
    assert!(c.touch("n", 100).unwrap());
    assert!(!c.touch("nope", 100).unwrap());
    assert!(c.delete("n").unwrap());
    assert!(!c.delete("n").unwrap());
    // CAS through the library: the value read with its CAS, then a compare.
    let (_, _, cas) = c.get::<(Vec<u8>, u32, Option<u64>)>("b").unwrap().unwrap();
    let cas = cas.expect("cas");
    assert!(c.cas("b", "new", 0, cas).unwrap());
    assert!(!c.cas("b", "newer", 0, cas).unwrap());
    assert_eq!(c.get::<String>("b").unwrap().as_deref(), Some("new"));
    assert!(!c.version().unwrap().is_empty());
    let stats = c.stats().unwrap();
    // The crate's ASCII `stats` stops at the first line (its bug): binary only.
    if binary {
        assert!(stats[0].1.contains_key("curr_connections"), "{stats:?}");
    }
}

#[test]
fn the_memcache_crate_drives_strata_in_ascii_and_binary() {
    let (_s, port) = strata_mc(&[]);
    let a = client(port, false);
    // The crate reads `gets` CAS values only in binary; ASCII covers the rest.
    a.flush().unwrap();
    a.set("k", "v", 0).unwrap();
    assert_eq!(a.get::<String>("k").unwrap().as_deref(), Some("v"));
    check_client(&client(port, true), true);
    check_client(&client(port, false), false);
}

#[test]
fn cas_lets_one_of_two_racing_clients_win_every_round() {
    let (s, port) = strata_mc(&[]);
    let c = client(port, true);
    c.set("counter", 0u64, 0).unwrap();
    let rounds = 200;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                let c = client(port, true);
                let mut done = 0;
                let mut retries = 0;
                while done < rounds {
                    let (v, _, cas) = c
                        .get::<(Vec<u8>, u32, Option<u64>)>("counter")
                        .unwrap()
                        .unwrap();
                    let n: u64 = String::from_utf8(v).unwrap().parse().unwrap();
                    if c.cas("counter", n + 1, 0, cas.unwrap()).unwrap() {
                        done += 1;
                    } else {
                        retries += 1;
                    }
                }
                retries
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(c.get::<u64>("counter").unwrap(), Some(2 * rounds));
    // A CAS read before a RESP write no longer matches after it.
    let mut t = Text::open(port);
    let got = t.call(b"gets counter\r\n");
    let cas = got[0].split(' ').nth(4).unwrap().trim().to_string();
    let mut r = resp(&s);
    let _: () = r.append("counter", "0").unwrap();
    assert_eq!(
        t.call(format!("cas counter 0 0 1 {cas}\r\n1\r\n").as_bytes()),
        ["EXISTS\r\n"]
    );
    let got = t.call(b"gets counter\r\n");
    assert_eq!(got[1], format!("{}0\r\n", 2 * rounds));
    let fresh = got[0].split(' ').nth(4).unwrap().trim().to_string();
    assert_ne!(fresh, cas);
    assert_eq!(
        t.call(format!("cas counter 0 0 1 {fresh}\r\n1\r\n").as_bytes()),
        ["STORED\r\n"]
    );
}

#[test]
fn keys_cross_between_memcached_and_resp() {
    let (s, port) = strata_mc(&[]);
    let mut t = Text::open(port);
    let mut r = resp(&s);
    assert_eq!(t.call(b"set mc 42 100 5\r\nhello\r\n"), ["STORED\r\n"]);
    let v: String = r.get("mc").unwrap();
    assert_eq!(v, "hello");
    let ttl: i64 = r.ttl("mc").unwrap();
    assert!((98..=100).contains(&ttl), "ttl {ttl}");
    let ty: String = redis::cmd("TYPE").arg("mc").query(&mut r).unwrap();
    assert_eq!(ty, "string");
    // A RESP write keeps nothing of memcached's flags: a new value has flags 0.
    let _: () = r.set("mc", "from resp").unwrap();
    assert_eq!(
        t.call(b"get mc\r\n"),
        ["VALUE mc 0 9\r\n", "from resp\r\n", "END\r\n"]
    );
    let _: () = r.set("counter", 41).unwrap();
    assert_eq!(t.call(b"incr counter 1\r\n"), ["42\r\n"]);
    let n: i64 = r.incr("counter", 1).unwrap();
    assert_eq!(n, 43);
    assert_eq!(t.call(b"delete mc\r\n"), ["DELETED\r\n"]);
    let gone: Option<String> = r.get("mc").unwrap();
    assert_eq!(gone, None);
    // Other RESP types read as misses over memcached, and a set replaces them.
    let _: () = r.rpush("list", "x").unwrap();
    assert_eq!(t.call(b"get list\r\n"), ["END\r\n"]);
    assert_eq!(t.call(b"set list 0 0 1\r\ny\r\n"), ["STORED\r\n"]);
    let v: String = r.get("list").unwrap();
    assert_eq!(v, "y");
    // memcached works in db 0 only.
    let _: () = redis::cmd("SELECT").arg(1).query(&mut r).unwrap();
    let other: Option<String> = r.get("list").unwrap();
    assert_eq!(other, None);
    // INFO reports the memcached port.
    let info: String = redis::cmd("INFO").arg("memcached").query(&mut r).unwrap();
    assert!(info.contains(&format!("memcached_port:{port}")), "{info}");
    assert!(info.contains("memcached_connected_clients:1"), "{info}");
}

#[test]
fn offloaded_values_are_read_over_memcached_with_their_flags() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("strata");
    let (s, port) = strata_mc(&[
        "--proactor_threads",
        "1",
        "--maxmemory",
        "24mb",
        "--tiered_prefix",
        prefix.to_str().unwrap(),
    ]);
    let mut t = Text::open(port);
    // A CAS read before a fill that sends cold values (this one first) to SSD still matches.
    let first = "f".repeat(600);
    t.call(format!("set first 9 0 600\r\n{first}\r\n").as_bytes());
    let got = t.call(b"gets first\r\n");
    let cas = got[0].split(' ').nth(4).unwrap().trim().to_string();
    let n = 60_000;
    let value = |i: usize| format!("{i:08}-{}", "v".repeat(500));
    // Store mode may refuse a write for memory while the offloader catches up with a slow
    // disk: such a key is sent again; any other reply but STORED fails the test.
    let mut todo: Vec<usize> = (0..n).collect();
    for _ in 0..50 {
        let mut refused = Vec::new();
        for chunk in todo.chunks(400) {
            let mut batch = Vec::new();
            for &i in chunk {
                let v = value(i);
                batch.extend_from_slice(
                    format!("set key:{i} {i} 0 {}\r\n{v}\r\n", v.len()).as_bytes(),
                );
            }
            t.send(&batch);
            for &i in chunk {
                match t.line().as_str() {
                    "STORED\r\n" => {}
                    "SERVER_ERROR out of memory storing object\r\n" => refused.push(i),
                    other => panic!("set key:{i}: {other:?}"),
                }
            }
        }
        todo = refused;
        if todo.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(todo.is_empty(), "{} keys refused for memory", todo.len());
    let mut r = resp(&s);
    let info = |r: &mut redis::Connection, field: &str| -> u64 {
        let text: String = redis::cmd("INFO").arg("tiered").query(r).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let mut disk = 0;
    for _ in 0..100 {
        disk = info(&mut r, "tiered_disk_keys");
        if disk > (n / 2) as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(disk > 0, "nothing offloaded");
    let reads = info(&mut r, "tiered_reads");
    for i in (0..n).step_by(97) {
        let v = value(i);
        let got = t.call(format!("get key:{i}\r\n").as_bytes());
        assert_eq!(got[0], format!("VALUE key:{i} {i} {}\r\n", v.len()));
        assert_eq!(got[1], format!("{v}\r\n"));
    }
    // A multi-get of offloaded keys, pipelined.
    let keys: Vec<String> = (0..50).map(|i| format!("key:{}", i * 13)).collect();
    let got = t.call(format!("gets {}\r\n", keys.join(" ")).as_bytes());
    assert_eq!(got.len(), 101);
    assert!(
        info(&mut r, "tiered_reads") > reads,
        "no value came from disk"
    );
    assert_eq!(info(&mut r, "tiered_read_errors"), 0);
    assert_eq!(
        t.call(format!("cas first 9 0 1 {cas}\r\nx\r\n").as_bytes()),
        ["STORED\r\n"]
    );
    // Binary get of an offloaded value too.
    let c = client(port, true);
    let (v, flags, _) = c
        .get::<(Vec<u8>, u32, Option<u64>)>("key:12345")
        .unwrap()
        .unwrap();
    assert_eq!((v, flags), (value(12345).into_bytes(), 12345));
}

#[test]
fn a_snapshot_keeps_client_flags() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let (s, port) = strata_mc(&["--dir", &d]);
    let mut t = Text::open(port);
    assert_eq!(t.call(b"set f 12345 0 3\r\nabc\r\n"), ["STORED\r\n"]);
    let mut r = resp(&s);
    let _: () = redis::cmd("SAVE").query(&mut r).unwrap();
    drop(r);
    drop(t);
    drop(s);
    let (_s2, port2) = strata_mc(&["--dir", &d]);
    let mut t = Text::open(port2);
    assert_eq!(
        t.call(b"get f\r\n"),
        ["VALUE f 12345 3\r\n", "abc\r\n", "END\r\n"]
    );
}

#[test]
fn requirepass_asks_for_memcached_authentication() {
    let (_s, port) = strata_mc_unready(&["--requirepass", "sesame"]);
    let mut t = Text::open(port);
    assert_eq!(t.call(b"get a\r\n"), ["CLIENT_ERROR unauthenticated\r\n"]);
    assert_eq!(
        t.call(b"set auth 0 0 9\r\nuser nope\r\n"),
        ["CLIENT_ERROR authentication failure\r\n"]
    );
    assert_eq!(
        t.call(b"set auth 0 0 11\r\nuser sesame\r\n"),
        ["STORED\r\n"]
    );
    assert_eq!(t.call(b"set a 0 0 1\r\nx\r\n"), ["STORED\r\n"]);
    // Binary: SASL PLAIN through the library; a wrong password fails.
    let ok = memcache::Client::connect(format!("memcache://user:sesame@127.0.0.1:{port}"))
        .expect("sasl client");
    assert_eq!(ok.get::<String>("a").unwrap().as_deref(), Some("x"));
    let bad = memcache::Client::connect(format!("memcache://user:wrong@127.0.0.1:{port}"));
    assert!(bad.is_err() || bad.unwrap().get::<String>("a").is_err());
    // ASCII auth through the library.
    let a = memcache::Client::connect(format!(
        "memcache://user:sesame@127.0.0.1:{port}?protocol=ascii"
    ))
    .expect("ascii auth");
    assert_eq!(a.get::<String>("a").unwrap().as_deref(), Some("x"));
}

#[test]
fn limits_and_memory_errors_are_memcacheds() {
    let (_s, port) = strata_mc(&["--max_item_size", "1kb"]);
    let mut t = Text::open(port);
    let big = "x".repeat(2000);
    assert_eq!(
        t.call(format!("set a 0 0 2000\r\n{big}\r\n").as_bytes()),
        ["SERVER_ERROR object too large for cache\r\n"]
    );
    assert_eq!(t.call(b"set a 0 0 1\r\nx\r\n"), ["STORED\r\n"]);
    let half = "y".repeat(600);
    assert_eq!(
        t.call(format!("set b 0 0 600\r\n{half}\r\n").as_bytes()),
        ["STORED\r\n"]
    );
    assert_eq!(
        t.call(format!("append b 0 0 600\r\n{half}\r\n").as_bytes()),
        ["SERVER_ERROR out of memory storing object\r\n"]
    );
    // Store mode past maxmemory.
    let (_s, port) = strata_mc(&["--maxmemory", "8mb", "--proactor_threads", "1"]);
    let mut t = Text::open(port);
    let v = "z".repeat(50_000);
    let mut refused = false;
    for i in 0..400 {
        let got = t.call(format!("set k{i} 0 0 {}\r\n{v}\r\n", v.len()).as_bytes());
        if got[0] == "SERVER_ERROR out of memory storing object\r\n" {
            refused = true;
            break;
        }
        assert_eq!(got, ["STORED\r\n"]);
    }
    assert!(refused, "maxmemory never refused a store");
    assert_eq!(
        t.call(b"get k0\r\n")[0],
        format!("VALUE k0 0 {}\r\n", v.len())
    );
}

#[test]
fn stats_report_the_port_counters() {
    let (_s, port) = strata_mc(&[]);
    let mut t = Text::open(port);
    t.call(b"set a 0 0 1\r\nx\r\n");
    t.call(b"get a b\r\n");
    let stats = t.call(b"stats\r\n");
    let get = |name: &str| -> String {
        stats
            .iter()
            .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
            .unwrap_or_else(|| panic!("no {name} in {stats:?}"))
            .trim()
            .to_string()
    };
    assert_eq!(stats.last().unwrap(), "END\r\n");
    assert_eq!(get("curr_connections"), "1");
    assert_eq!(get("cmd_get"), "2");
    assert_eq!(get("get_hits"), "1");
    assert_eq!(get("get_misses"), "1");
    assert_eq!(get("cmd_set"), "1");
    assert_eq!(get("curr_items"), "1");
    // memcached's item size: 48-byte header, 8-byte CAS, key and NUL, value and CRLF.
    assert_eq!(get("bytes"), "61");
    assert_eq!(get("version"), "1.6.18");
    let settings = t.call(b"stats settings\r\n");
    assert!(
        settings.contains(&"STAT item_size_max 1048576\r\n".to_string()),
        "{settings:?}"
    );
    let items = t.call(b"stats items\r\n");
    assert!(
        items.contains(&"STAT items:1:number 1\r\n".to_string()),
        "{items:?}"
    );
    let slabs = t.call(b"stats slabs\r\n");
    assert!(
        slabs.iter().any(|l| l.starts_with("STAT active_slabs 1")),
        "{slabs:?}"
    );
    assert_eq!(t.call(b"stats reset\r\n"), ["RESET\r\n"]);
    let stats = t.call(b"stats\r\n");
    assert!(stats.contains(&"STAT cmd_get 0\r\n".to_string()));
}

/// Requests cut at every point: large values that arrive in small writes behind pipelined
/// requests (the input is parsed in place and a partial request is kept for the next read),
/// in the text and binary protocols; every value reads back whole.
#[test]
fn large_values_in_small_writes_read_back_whole() {
    let (_s, port) = strata_mc(&[]);
    let big: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    // Text: a small set, a get, then a 300 KB set, sent 1,000 bytes at a time.
    let mut req = b"set s 1 0 2\r\nhi\r\nget s\r\n".to_vec();
    req.extend_from_slice(format!("set big 7 0 {}\r\n", big.len()).as_bytes());
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\nget big\r\n");
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for piece in req.chunks(1000) {
        c.write_all(piece).unwrap();
    }
    let mut want = b"STORED\r\nVALUE s 1 2\r\nhi\r\nEND\r\nSTORED\r\n".to_vec();
    want.extend_from_slice(format!("VALUE big 7 {}\r\n", big.len()).as_bytes());
    want.extend_from_slice(&big);
    want.extend_from_slice(b"\r\nEND\r\n");
    let mut got = vec![0; want.len()];
    c.read_exact(&mut got).unwrap();
    assert!(got == want, "text reply differs");
    // Binary: a set of the same value under another key, then a getk, 777 bytes at a time.
    let frame = |opcode: u8, extras: &[u8], key: &[u8], value: &[u8]| {
        let mut v = vec![0x80, opcode];
        v.extend_from_slice(&(key.len() as u16).to_be_bytes());
        v.extend_from_slice(&[extras.len() as u8, 0, 0, 0]);
        let body = (extras.len() + key.len() + value.len()) as u32;
        v.extend_from_slice(&body.to_be_bytes());
        v.extend_from_slice(&[0; 12]);
        v.extend_from_slice(extras);
        v.extend_from_slice(key);
        v.extend_from_slice(value);
        v
    };
    let mut req = frame(0x01, &[0, 0, 0, 9, 0, 0, 0, 0], b"bin", &big);
    req.extend_from_slice(&frame(0x0c, &[], b"bin", &[]));
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for piece in req.chunks(777) {
        c.write_all(piece).unwrap();
    }
    let mut set = [0u8; 24];
    c.read_exact(&mut set).unwrap();
    assert_eq!((set[0], set[1], &set[6..8]), (0x81, 0x01, &[0u8, 0][..]));
    let mut head = [0u8; 24];
    c.read_exact(&mut head).unwrap();
    let body = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
    assert_eq!((head[1], body), (0x0c, 4 + 3 + big.len()));
    let mut rest = vec![0; body];
    c.read_exact(&mut rest).unwrap();
    assert_eq!(&rest[..4], &[0, 0, 0, 9]);
    assert_eq!(&rest[4..7], b"bin");
    assert!(rest[7..] == big[..], "binary value differs");
}

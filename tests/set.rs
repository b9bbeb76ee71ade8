//! Set commands against the real binary: exact reply bytes, WRONGTYPE, missing and emptied
//! keys, errors in Redis' words, the intset/hashtable encodings and their limit, SSCAN over a
//! large set (every member once), random members, key commands over sets (DUMP/RESTORE both
//! ways with redis-server, COPY, RENAME, SCAN TYPE, MEMORY USAGE), snapshots, and the
//! multi-key commands with their keys on two shards.
mod common;

use std::collections::HashSet;

use common::*;

fn a(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for it in items {
        s.push_str(&format!("${}\r\n{it}\r\n", it.len()));
    }
    s
}

fn txt(r: &mut Raw, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    String::from_utf8_lossy(&r.call(&a)).into_owned()
}

/// The bulk strings of an array reply, sorted.
fn members(r: &mut Raw, args: &[&str]) -> Vec<String> {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    let mut out: Vec<String> = match r.request(&a).expect("reply") {
        Resp::Array(Some(items)) => items
            .into_iter()
            .filter_map(|i| match i {
                Resp::Bulk(Some(b)) => Some(String::from_utf8(b).unwrap()),
                _ => None,
            })
            .collect(),
        other => panic!("{args:?}: {other:?}"),
    };
    out.sort();
    out
}

/// A DUMP payload with another RDB version (and its CRC-64/Jones made again).
fn restamp(p: &[u8], ver: u16) -> Vec<u8> {
    let mut out = p[..p.len() - 10].to_vec();
    out.extend_from_slice(&ver.to_le_bytes());
    let mut crc = 0u64;
    for &byte in &out {
        crc ^= u64::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95AC_9329_AC4B_C9B5
            } else {
                crc >> 1
            };
        }
    }
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn add_remove_members_and_encodings() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["SADD", "s", "3", "1", "2", "1"], &i(3));
    rt(&mut r, &["OBJECT", "ENCODING", "s"], "$6\r\nintset\r\n");
    rt(&mut r, &["SMEMBERS", "s"], &a(&["1", "2", "3"]));
    rt(&mut r, &["SISMEMBER", "s", "2"], &i(1));
    rt(&mut r, &["SISMEMBER", "s", "02"], &i(0));
    rt(
        &mut r,
        &["SMISMEMBER", "s", "1", "x", "3"],
        "*3\r\n:1\r\n:0\r\n:1\r\n",
    );
    rt(&mut r, &["SMISMEMBER", "nokey", "1"], "*1\r\n:0\r\n");
    rt(&mut r, &["SCARD", "s"], &i(3));
    rt(&mut r, &["SADD", "s", "x"], &i(1));
    rt(&mut r, &["OBJECT", "ENCODING", "s"], "$9\r\nhashtable\r\n");
    assert_eq!(members(&mut r, &["SMEMBERS", "s"]), ["1", "2", "3", "x"]);
    rt(&mut r, &["SREM", "s", "1", "x", "nope"], &i(2));
    rt(&mut r, &["SREM", "s", "2", "3"], &i(2));
    rt(&mut r, &["EXISTS", "s"], &i(0));
    rt(&mut r, &["SREM", "nokey", "1"], &i(0));
    rt(&mut r, &["SMEMBERS", "nokey"], "*0\r\n");
    // The intset limit, from CONFIG.
    rt(
        &mut r,
        &["CONFIG", "SET", "set-max-intset-entries", "4"],
        OK,
    );
    rt(&mut r, &["SADD", "n", "1", "2", "3", "4"], &i(4));
    rt(&mut r, &["OBJECT", "ENCODING", "n"], "$6\r\nintset\r\n");
    rt(&mut r, &["SADD", "n", "5"], &i(1));
    rt(&mut r, &["OBJECT", "ENCODING", "n"], "$9\r\nhashtable\r\n");
    rt(
        &mut r,
        &["CONFIG", "GET", "set-max-intset-entries"],
        &a(&["set-max-intset-entries", "4"]),
    );
}

#[test]
fn wrong_types() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["SET", "str", "x"], OK);
    rt(&mut r, &["SADD", "s", "a"], &i(1));
    for cmd in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SMEMBERS", "str"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SRANDMEMBER", "str"],
        &["SMOVE", "str", "s", "a"],
        &["SMOVE", "s", "str", "a"],
        &["SINTER", "s", "str"],
        &["SINTER", "nokey", "str"],
        &["SUNION", "s", "str"],
        &["SDIFF", "s", "str"],
        &["SINTERSTORE", "d", "s", "str"],
        &["SINTERCARD", "2", "s", "str"],
        &["SSCAN", "str", "0"],
    ] {
        rt(&mut r, cmd, WRONGTYPE);
    }
    rt(&mut r, &["SCARD", "s"], &i(1));
}

#[test]
fn algebra_on_one_and_two_shards() {
    let s = server();
    let mut r = s.raw();
    let (x, y) = keys_on_different_shards("alg", 2);
    let (z, _) = keys_on_different_shards("zz", 2);
    for (k1, k2, d) in [
        ("{t}1", "{t}2", "{t}d"),
        (x.as_str(), y.as_str(), z.as_str()),
    ] {
        rt(&mut r, &["SADD", k1, "1", "2", "3", "a"], &i(4));
        rt(&mut r, &["SADD", k2, "2", "3", "4"], &i(3));
        assert_eq!(members(&mut r, &["SINTER", k1, k2]), ["2", "3"]);
        assert_eq!(
            members(&mut r, &["SUNION", k1, k2, "nokey"]),
            ["1", "2", "3", "4", "a"]
        );
        assert_eq!(members(&mut r, &["SDIFF", k1, k2]), ["1", "a"]);
        rt(&mut r, &["SINTER", k1, "nokey"], "*0\r\n");
        rt(&mut r, &["SINTERCARD", "2", k1, k2], &i(2));
        rt(&mut r, &["SINTERCARD", "2", k1, k2, "LIMIT", "1"], &i(1));
        rt(&mut r, &["SINTERSTORE", d, k1, k2], &i(2));
        rt(&mut r, &["OBJECT", "ENCODING", d], "$6\r\nintset\r\n");
        rt(&mut r, &["SUNIONSTORE", d, k1, k2], &i(5));
        rt(&mut r, &["OBJECT", "ENCODING", d], "$9\r\nhashtable\r\n");
        rt(&mut r, &["SDIFFSTORE", d, k2, k1], &i(1));
        rt(&mut r, &["SMEMBERS", d], &a(&["4"]));
        rt(&mut r, &["SINTERSTORE", d, k1, "nokey"], &i(0));
        rt(&mut r, &["EXISTS", d], &i(0));
        rt(&mut r, &["SMOVE", k1, k2, "a"], &i(1));
        rt(&mut r, &["SMOVE", k1, k2, "a"], &i(0));
        rt(&mut r, &["SMOVE", "nokey", k2, "a"], &i(0));
        rt(&mut r, &["SISMEMBER", k2, "a"], &i(1));
        rt(&mut r, &["SMOVE", k2, k2, "a"], &i(1));
        rt(&mut r, &["DEL", k1, k2], &i(2));
    }
    rt(
        &mut r,
        &["SINTERCARD", "0", "a"],
        "-ERR numkeys should be greater than 0\r\n",
    );
    rt(
        &mut r,
        &["SINTERCARD", "3", "a"],
        "-ERR Number of keys can't be greater than number of args\r\n",
    );
    rt(
        &mut r,
        &["SINTERCARD", "1", "a", "LIMIT", "-1"],
        "-ERR LIMIT can't be negative\r\n",
    );
    rt(
        &mut r,
        &["SINTERCARD", "1", "a", "FOO"],
        "-ERR syntax error\r\n",
    );
}

#[test]
fn random_members_and_pops() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["SADD", "s", "a", "b", "c", "d", "e"], &i(5));
    let all: HashSet<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let got = members(&mut r, &["SRANDMEMBER", "s", "3"]);
    assert_eq!(got.len(), 3);
    assert_eq!(got.iter().collect::<HashSet<_>>().len(), 3);
    assert!(got.iter().all(|m| all.contains(m)));
    assert_eq!(members(&mut r, &["SRANDMEMBER", "s", "-8"]).len(), 8);
    assert_eq!(members(&mut r, &["SRANDMEMBER", "s", "10"]).len(), 5);
    rt(&mut r, &["SRANDMEMBER", "s", "0"], "*0\r\n");
    rt(&mut r, &["SRANDMEMBER", "nokey", "2"], "*0\r\n");
    rt(&mut r, &["SRANDMEMBER", "nokey"], "$-1\r\n");
    rt(&mut r, &["SRANDMEMBER", "s", "-9223372036854775808"], "-ERR value is out of range, must be between -9223372036854775807 and 9223372036854775807\r\n");
    // A huge negative count is refused, never built.
    assert!(txt(&mut r, &["SRANDMEMBER", "s", "-9223372036854775807"]).starts_with("-ERR"));
    rt(
        &mut r,
        &["SRANDMEMBER", "s", "1", "2"],
        "-ERR syntax error\r\n",
    );
    let popped = members(&mut r, &["SPOP", "s", "2"]);
    assert_eq!(popped.len(), 2);
    rt(&mut r, &["SCARD", "s"], &i(3));
    rt(
        &mut r,
        &["SPOP", "s", "-1"],
        "-ERR value is out of range, must be positive\r\n",
    );
    rt(&mut r, &["SPOP", "s", "0"], "*0\r\n");
    assert_eq!(members(&mut r, &["SPOP", "s", "10"]).len(), 3);
    rt(&mut r, &["EXISTS", "s"], &i(0));
    rt(&mut r, &["SPOP", "s"], "$-1\r\n");
    rt(&mut r, &["SPOP", "s", "1"], "*0\r\n");
}

#[test]
fn sscan_returns_every_member_once() {
    let s = server();
    let mut r = s.raw();
    let mut cmd = vec!["SADD".to_string(), "big".to_string()];
    cmd.extend((0..5000).map(|n| format!("m{n}")));
    let refs: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
    rt(&mut r, &refs, &i(5000));
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let reply = r
            .request(&[b"SSCAN", b"big", cursor.as_bytes(), b"COUNT", b"50"])
            .unwrap();
        let Resp::Array(Some(parts)) = reply else {
            panic!()
        };
        let Resp::Bulk(Some(c)) = &parts[0] else {
            panic!()
        };
        cursor = String::from_utf8(c.clone()).unwrap();
        let Resp::Array(Some(items)) = &parts[1] else {
            panic!()
        };
        for it in items {
            let Resp::Bulk(Some(m)) = it else { panic!() };
            assert!(seen.insert(m.clone()), "twice: {m:?}");
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 5000);
    let matched = r
        .request(&[
            b"SSCAN", b"big", b"0", b"MATCH", b"m42*", b"COUNT", b"100000",
        ])
        .unwrap();
    let Resp::Array(Some(parts)) = matched else {
        panic!()
    };
    let Resp::Array(Some(items)) = &parts[1] else {
        panic!()
    };
    assert_eq!(items.len(), 111);
    rt(&mut r, &["SSCAN", "big", "x"], "-ERR invalid cursor\r\n");
    rt(&mut r, &["SSCAN", "nokey", "0"], "*2\r\n$1\r\n0\r\n*0\r\n");
    let mem: i64 = txt(&mut r, &["MEMORY", "USAGE", "big"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!(mem > 20_000 && mem < 200_000, "{mem}");
}

#[test]
fn dump_restore_both_ways_with_redis_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let mut rr = Raw::connect(real.port);
    let d = dir.path().to_str().unwrap();
    let args = [
        "--proactor_threads",
        "2",
        "--dir",
        d,
        "--dbfilename",
        "s.rdb",
    ];
    let s = Server::start(STRATA, &args);
    let mut r = s.raw();
    let mut big = vec!["SADD".to_string(), "big".to_string()];
    big.extend((0..1000).map(|n| format!("member-{n}")));
    let mut ints = vec!["SADD".to_string(), "ints".to_string()];
    ints.extend((0..300).map(|n| (n * 1000).to_string()));
    for cmd in [&big, &ints] {
        let refs: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        r.call(&refs);
        rr.call(&refs);
    }
    let payload = |raw: &mut Raw, key: &[u8]| {
        let d = raw.call(&[b"DUMP", key]);
        d[d.iter().position(|&b| b == b'\n').unwrap() + 1..d.len() - 2].to_vec()
    };
    // The intset's payload is the same bytes, but for the RDB version and CRC.
    let (ps, pr) = (payload(&mut r, b"ints"), payload(&mut rr, b"ints"));
    assert_eq!(ps[..ps.len() - 10], pr[..pr.len() - 10]);
    // Strata -> Redis and Redis -> Strata.
    for key in [&b"big"[..], b"ints"] {
        // Strata's payload says RDB 11; redis-server 7.0 takes only its own 10: re-stamped.
        let ps = restamp(&payload(&mut r, key), 10);
        assert_eq!(
            rr.call(&[b"RESTORE", b"copy", b"0", &ps, b"REPLACE"]),
            b"+OK\r\n"
        );
        assert_eq!(
            members(&mut rr, &["SMEMBERS", "copy"]),
            members(&mut r, &["SMEMBERS", std::str::from_utf8(key).unwrap()])
        );
        let pr = payload(&mut rr, key);
        assert_eq!(
            r.call(&[b"RESTORE", b"copy", b"0", &pr, b"REPLACE"]),
            b"+OK\r\n"
        );
        assert_eq!(
            members(&mut r, &["SMEMBERS", "copy"]),
            members(&mut rr, &["SMEMBERS", std::str::from_utf8(key).unwrap()])
        );
    }
    rt(&mut r, &["OBJECT", "ENCODING", "copy"], "$6\r\nintset\r\n");
    rt(&mut r, &["SAVE"], OK);
    drop(r);
    drop(s);
    let s = Server::start(STRATA, &args);
    let mut r = s.raw();
    rt(&mut r, &["SCARD", "big"], &i(1000));
    rt(&mut r, &["SISMEMBER", "big", "member-999"], &i(1));
    rt(
        &mut r,
        &["OBJECT", "ENCODING", "big"],
        "$9\r\nhashtable\r\n",
    );
    rt(&mut r, &["SCARD", "ints"], &i(300));
    rt(&mut r, &["TYPE", "ints"], "+set\r\n");
    let (x, y) = keys_on_different_shards("cp", 2);
    rt(&mut r, &["COPY", "big", &x], &i(1));
    rt(&mut r, &["RENAME", &x, &y], OK);
    rt(&mut r, &["SREM", &y, "member-1"], &i(1));
    rt(&mut r, &["SCARD", "big"], &i(1000));
    let keys = sorted(scan_all(&mut s.client(), &["TYPE", "set"]));
    assert_eq!(keys.len(), 4);
}

#[test]
fn large_sets_are_freed_in_the_background_whatever_removes_them() {
    let s = server();
    let mut c = s.client();
    let freed = |c: &mut redis::Connection| info_u64(c, "stats", "lazyfreed_objects");
    let wait_for = |c: &mut redis::Connection, want: u64| {
        for _ in 0..500 {
            if freed(c) >= want {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("lazyfreed_objects stayed at {} (wanted {want})", freed(c));
    };
    let big = |c: &mut redis::Connection, key: &str| {
        for chunk in (0..20_000).collect::<Vec<u32>>().chunks(1000) {
            let mut cmd = redis::cmd("SADD");
            cmd.arg(key);
            for m in chunk {
                cmd.arg(format!("member:{m}"));
            }
            let _: i64 = cmd.query(c).expect("sadd");
        }
    };
    assert_eq!(freed(&mut c), 0);
    big(&mut c, "big");
    let _: i64 = redis::cmd("SADD")
        .arg("small")
        .arg("a")
        .query(&mut c)
        .unwrap();
    assert_eq!(q::<i64>(&mut c, &["DEL", "big", "small"]), 2);
    wait_for(&mut c, 1);
    // Overwritten and flushed objects take the same way.
    big(&mut c, "big");
    let _: () = redis::cmd("SET").arg("big").arg("x").query(&mut c).unwrap();
    wait_for(&mut c, 2);
    big(&mut c, "big2");
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    wait_for(&mut c, 3);
    assert_eq!(freed(&mut c), 3, "a small set went the background way");
    assert_eq!(info_u64(&mut c, "memory", "lazyfree_pending_objects"), 0);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
}

//! List commands against the real binary: exact reply bytes for every command, WRONGTYPE,
//! missing and emptied keys, negative indexes, errors in Redis' words and order, the encoding
//! and node layout (OBJECT ENCODING, DUMP round trips, large lists), key commands over lists
//! (TYPE, COPY, RENAME, MOVE, EXPIRE, SCAN TYPE, MEMORY USAGE), snapshots, and the multi-key
//! commands with their keys on two shards.
mod common;

use common::*;

fn a(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for it in items {
        s.push_str(&format!("${}\r\n{it}\r\n", it.len()));
    }
    s
}

const NIL: &str = "$-1\r\n";
const NIL_ARRAY: &str = "*-1\r\n";
const EMPTY: &str = "*0\r\n";
const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[test]
fn push_pop_len_range_index() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["RPUSH", "l", "a", "b", "c"], &i(3));
    rt(&mut r, &["LPUSH", "l", "z", "y"], &i(5));
    rt(
        &mut r,
        &["LRANGE", "l", "0", "-1"],
        &a(&["y", "z", "a", "b", "c"]),
    );
    rt(&mut r, &["LRANGE", "l", "-2", "100"], &a(&["b", "c"]));
    rt(&mut r, &["LRANGE", "l", "3", "1"], EMPTY);
    rt(&mut r, &["LRANGE", "l", "-100", "0"], &a(&["y"]));
    rt(
        &mut r,
        &["LRANGE", "l", "x", "1"],
        "-ERR value is not an integer or out of range\r\n",
    );
    rt(&mut r, &["LLEN", "l"], &i(5));
    rt(&mut r, &["LINDEX", "l", "-1"], "$1\r\nc\r\n");
    rt(&mut r, &["LINDEX", "l", "5"], NIL);
    rt(&mut r, &["LINDEX", "nokey", "x"], NIL);
    rt(
        &mut r,
        &["LINDEX", "l", "x"],
        "-ERR value is not an integer or out of range\r\n",
    );
    rt(&mut r, &["LPUSHX", "nokey", "a"], &i(0));
    rt(&mut r, &["RPUSHX", "l", "d"], &i(6));
    rt(&mut r, &["LPOP", "l"], "$1\r\ny\r\n");
    rt(&mut r, &["RPOP", "l", "2"], &a(&["d", "c"]));
    rt(&mut r, &["LPOP", "l", "0"], EMPTY);
    rt(
        &mut r,
        &["LPOP", "l", "-1"],
        "-ERR value is out of range, must be positive\r\n",
    );
    rt(
        &mut r,
        &["LPOP", "l", "1", "2"],
        "-ERR wrong number of arguments for 'lpop' command\r\n",
    );
    rt(&mut r, &["LPOP", "nokey"], NIL);
    rt(&mut r, &["LPOP", "nokey", "2"], NIL_ARRAY);
    rt(&mut r, &["LPOP", "l", "10"], &a(&["z", "a", "b"]));
    rt(&mut r, &["EXISTS", "l"], &i(0));
    // Integers come back as their text.
    rt(&mut r, &["RPUSH", "n", "-5", "12345678901", "007"], &i(3));
    rt(
        &mut r,
        &["LRANGE", "n", "0", "-1"],
        &a(&["-5", "12345678901", "007"]),
    );
}

#[test]
fn set_insert_rem_trim_pos() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["RPUSH", "l", "a", "b", "a", "c", "a"], &i(5));
    rt(&mut r, &["LSET", "l", "-1", "A"], OK);
    rt(
        &mut r,
        &["LSET", "l", "9", "A"],
        "-ERR index out of range\r\n",
    );
    rt(&mut r, &["LSET", "nokey", "0", "A"], "-ERR no such key\r\n");
    rt(&mut r, &["LINSERT", "l", "BEFORE", "b", "x"], &i(6));
    rt(&mut r, &["LINSERT", "l", "after", "c", "y"], &i(7));
    rt(&mut r, &["LINSERT", "l", "AFTER", "nope", "y"], &i(-1));
    rt(
        &mut r,
        &["LINSERT", "l", "MIDDLE", "c", "y"],
        "-ERR syntax error\r\n",
    );
    rt(&mut r, &["LINSERT", "nokey", "AFTER", "c", "y"], &i(0));
    rt(
        &mut r,
        &["LRANGE", "l", "0", "-1"],
        &a(&["a", "x", "b", "a", "c", "y", "A"]),
    );
    rt(&mut r, &["LPOS", "l", "a"], &i(0));
    rt(&mut r, &["LPOS", "l", "a", "RANK", "-1"], &i(3));
    rt(&mut r, &["LPOS", "l", "a", "COUNT", "0"], &a_int(&[0, 3]));
    rt(
        &mut r,
        &["LPOS", "l", "a", "RANK", "2", "COUNT", "5"],
        &a_int(&[3]),
    );
    rt(
        &mut r,
        &["LPOS", "l", "a", "COUNT", "0", "MAXLEN", "2"],
        &a_int(&[0]),
    );
    rt(&mut r, &["LPOS", "l", "zz"], NIL);
    rt(&mut r, &["LPOS", "nokey", "zz", "COUNT", "1"], EMPTY);
    rt(&mut r, &["LPOS", "l", "a", "RANK", "0"], "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n");
    rt(
        &mut r,
        &["LPOS", "l", "a", "COUNT", "-1"],
        "-ERR COUNT can't be negative\r\n",
    );
    rt(
        &mut r,
        &["LPOS", "l", "a", "MAXLEN", "-1"],
        "-ERR MAXLEN can't be negative\r\n",
    );
    rt(&mut r, &["LPOS", "l", "a", "RANK"], "-ERR syntax error\r\n");
    rt(&mut r, &["LREM", "l", "-1", "a"], &i(1));
    rt(&mut r, &["LREM", "l", "0", "a"], &i(1));
    rt(
        &mut r,
        &["LRANGE", "l", "0", "-1"],
        &a(&["x", "b", "c", "y", "A"]),
    );
    rt(&mut r, &["LTRIM", "l", "1", "-2"], OK);
    rt(&mut r, &["LRANGE", "l", "0", "-1"], &a(&["b", "c", "y"]));
    rt(&mut r, &["LTRIM", "l", "5", "10"], OK);
    rt(&mut r, &["EXISTS", "l"], &i(0));
    rt(&mut r, &["LTRIM", "nokey", "0", "1"], OK);
}

fn txt(r: &mut Raw, args: &[&[u8]]) -> String {
    String::from_utf8_lossy(&r.call(args)).into_owned()
}

fn a_int(v: &[i64]) -> String {
    let mut s = format!("*{}\r\n", v.len());
    for n in v {
        s.push_str(&format!(":{n}\r\n"));
    }
    s
}

#[test]
fn wrong_types_and_missing_keys() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["SET", "str", "x"], OK);
    rt(&mut r, &["SADD", "set", "1"], &i(1));
    for cmd in [
        &["LPUSH", "str", "a"][..],
        &["RPUSHX", "str", "a"],
        &["LPOP", "str"],
        &["LLEN", "set"],
        &["LRANGE", "str", "0", "1"],
        &["LINDEX", "str", "0"],
        &["LSET", "str", "0", "a"],
        &["LINSERT", "str", "BEFORE", "a", "b"],
        &["LREM", "str", "0", "a"],
        &["LTRIM", "str", "0", "1"],
        &["LPOS", "str", "a"],
        &["LMOVE", "str", "x", "LEFT", "LEFT"],
        &["LMPOP", "2", "nokey", "str", "LEFT"],
    ] {
        rt(&mut r, cmd, WRONGTYPE);
    }
    rt(&mut r, &["GET", "str"], "$1\r\nx\r\n");
    rt(&mut r, &["LLEN", "nokey"], &i(0));
    rt(&mut r, &["LRANGE", "nokey", "0", "-1"], EMPTY);
    rt(&mut r, &["RPUSH", "l", "a"], &i(1));
    rt(&mut r, &["LMOVE", "l", "str", "LEFT", "LEFT"], WRONGTYPE);
    rt(&mut r, &["LLEN", "l"], &i(1));
    rt(
        &mut r,
        &["LMOVE", "l", "x", "UP", "LEFT"],
        "-ERR syntax error\r\n",
    );
}

#[test]
fn moves_and_mpop_on_one_and_two_shards() {
    let s = server();
    let mut r = s.raw();
    let (x, y) = keys_on_different_shards("mv", 2);
    for (src, dst) in [("{t}a", "{t}b"), (x.as_str(), y.as_str())] {
        rt(&mut r, &["RPUSH", src, "1", "2", "3"], &i(3));
        rt(&mut r, &["LMOVE", src, dst, "LEFT", "RIGHT"], "$1\r\n1\r\n");
        rt(&mut r, &["RPOPLPUSH", src, dst], "$1\r\n3\r\n");
        rt(&mut r, &["LRANGE", dst, "0", "-1"], &a(&["3", "1"]));
        rt(&mut r, &["LMOVE", src, dst, "RIGHT", "LEFT"], "$1\r\n2\r\n");
        rt(&mut r, &["EXISTS", src], &i(0));
        rt(&mut r, &["LMOVE", src, dst, "RIGHT", "LEFT"], NIL);
        rt(
            &mut r,
            &["LMPOP", "2", src, dst, "RIGHT", "COUNT", "2"],
            &format!("*2\r\n${}\r\n{dst}\r\n{}", dst.len(), a(&["1", "3"])),
        );
        rt(
            &mut r,
            &["LMPOP", "2", src, dst, "LEFT"],
            &format!("*2\r\n${}\r\n{dst}\r\n{}", dst.len(), a(&["2"])),
        );
        rt(&mut r, &["LMPOP", "2", src, dst, "LEFT"], NIL_ARRAY);
    }
    // A list rotates onto itself.
    rt(&mut r, &["RPUSH", "rot", "a", "b"], &i(2));
    rt(&mut r, &["RPOPLPUSH", "rot", "rot"], "$1\r\nb\r\n");
    rt(&mut r, &["LRANGE", "rot", "0", "-1"], &a(&["b", "a"]));
    rt(
        &mut r,
        &["LMPOP", "0", "rot", "LEFT"],
        "-ERR numkeys should be greater than 0\r\n",
    );
    rt(
        &mut r,
        &["LMPOP", "1", "rot", "LEFT", "COUNT", "0"],
        "-ERR count should be greater than 0\r\n",
    );
    rt(
        &mut r,
        &["LMPOP", "5", "rot", "LEFT"],
        "-ERR syntax error\r\n",
    );
    rt(
        &mut r,
        &["LMPOP", "1", "rot", "LEFT", "COUNT", "1", "COUNT", "1"],
        "-ERR syntax error\r\n",
    );
}

#[test]
fn encoding_nodes_and_key_commands() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["RPUSH", "small", "a"], &i(1));
    rt(
        &mut r,
        &["OBJECT", "ENCODING", "small"],
        "$9\r\nquicklist\r\n",
    );
    let big: Vec<String> = (0..3000).map(|n| format!("element:{n}")).collect();
    let mut cmd = vec!["RPUSH", "big"];
    cmd.extend(big.iter().map(|s| s.as_str()));
    rt(&mut r, &cmd, &i(3000));
    rt(
        &mut r,
        &["OBJECT", "ENCODING", "big"],
        "$9\r\nquicklist\r\n",
    );
    rt(&mut r, &["TYPE", "big"], "+list\r\n");
    rt(
        &mut r,
        &["LINDEX", "big", "1500"],
        "$12\r\nelement:1500\r\n",
    );
    rt(&mut r, &["LINDEX", "big", "-3000"], "$9\r\nelement:0\r\n");
    // DUMP/RESTORE round trip, COPY, RENAME across shards, MOVE, EXPIRE, SCAN TYPE.
    let dump = r.call(&[b"DUMP", b"big"]);
    let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2];
    rt(&mut r, &["DEL", "big2"], &i(0));
    assert_eq!(r.call(&[b"RESTORE", b"big2", b"0", payload]), b"+OK\r\n");
    rt(
        &mut r,
        &["LINDEX", "big2", "2999"],
        "$12\r\nelement:2999\r\n",
    );
    rt(&mut r, &["COPY", "big", "big3"], &i(1));
    rt(&mut r, &["RPOP", "big3"], "$12\r\nelement:2999\r\n");
    rt(&mut r, &["LLEN", "big"], &i(3000));
    let (x, y) = keys_on_different_shards("rn", 2);
    rt(&mut r, &["RENAME", "big3", &x], OK);
    rt(&mut r, &["RENAME", &x, &y], OK);
    rt(&mut r, &["LLEN", &y], &i(2999));
    rt(&mut r, &["MOVE", &y, "1"], &i(1));
    rt(&mut r, &["EXPIRE", "small", "100"], &i(1));
    let ttl = txt(&mut r, &[b"TTL", b"small"]);
    assert!(ttl.starts_with(':'), "{ttl}");
    let keys = sorted(scan_all(&mut s.client(), &["TYPE", "list"]));
    assert_eq!(keys, vec!["big", "big2", "small"]);
    let mem = txt(&mut r, &[b"MEMORY", b"USAGE", b"big"]);
    let bytes: i64 = mem.trim_start_matches(':').trim().parse().unwrap();
    // 3000 elements take about 40 KB as plain listpacks; the nodes away from the ends are
    // kept compressed.
    assert!(bytes > 5_000 && bytes < 30_000, "{bytes}");
}

#[test]
fn config_names_and_limits() {
    let s = server();
    let mut r = s.raw();
    rt(
        &mut r,
        &["CONFIG", "GET", "list-max-ziplist-size"],
        &a(&["list-max-ziplist-size", "-2"]),
    );
    rt(
        &mut r,
        &["CONFIG", "SET", "list-max-listpack-size", "3"],
        OK,
    );
    rt(
        &mut r,
        &["CONFIG", "GET", "list-max-listpack-size"],
        &a(&["list-max-listpack-size", "3"]),
    );
    rt(&mut r, &["CONFIG", "SET", "list-compress-depth", "1"], OK);
    rt(&mut r, &["CONFIG", "SET", "list-compress-depth", "-1"], "-ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument must be between 0 and 2147483647 inclusive\r\n");
    rt(
        &mut r,
        &["RPUSH", "l", "1", "2", "3", "4", "5", "6", "7"],
        &i(7),
    );
    // Three per node: 3 nodes; the DUMP says so (node count 3).
    let dump = r.call(&[b"DUMP", b"l"]);
    let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..];
    assert_eq!(&payload[..2], b"\x12\x03");
}

#[test]
fn snapshot_keeps_lists() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "--proactor_threads",
        "2",
        "--dir",
        d,
        "--dbfilename",
        "l.rdb",
    ];
    let big: Vec<String> = (0..5000).map(|n| format!("v{n}")).collect();
    {
        let s = Server::start(STRATA, &args);
        let mut r = s.raw();
        let mut cmd = vec!["RPUSH", "big"];
        cmd.extend(big.iter().map(|s| s.as_str()));
        rt(&mut r, &cmd, &i(5000));
        rt(&mut r, &["RPUSH", "small", "a", "1"], &i(2));
        rt(&mut r, &["SAVE"], OK);
    }
    let s = Server::start(STRATA, &args);
    let mut r = s.raw();
    rt(&mut r, &["LLEN", "big"], &i(5000));
    rt(&mut r, &["LINDEX", "big", "4321"], "$5\r\nv4321\r\n");
    rt(&mut r, &["LRANGE", "small", "0", "-1"], &a(&["a", "1"]));
}

#[test]
fn oom_refuses_pushes_and_keeps_the_list() {
    let s = Server::start(STRATA, &["--proactor_threads", "1", "--maxmemory", "40mb"]);
    let mut r = s.raw();
    // Elements that do not compress (nodes away from the ends are kept compressed).
    let element =
        |k: usize| -> Vec<u8> { value(k, 0, 1000).iter().map(|b| b'a' + b % 26).collect() };
    let v = String::from_utf8(element(0)).expect("letters");
    let mut refused = false;
    let mut n = 0;
    for k in 0..200_000 {
        let reply = txt(&mut r, &[b"RPUSH", b"l", &element(k)]);
        if reply.starts_with("-OOM") {
            refused = true;
            break;
        }
        n += 1;
    }
    assert!(refused, "no -OOM after {n} pushes");
    rt(&mut r, &["LLEN", "l"], &i(n));
    rt(&mut r, &["LPOP", "l"], &format!("${}\r\n{v}\r\n", v.len()));
}

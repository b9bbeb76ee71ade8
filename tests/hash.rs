//! Hash commands against the real binary: every command's replies and errors byte for byte on
//! a raw connection (Redis 7.0's texts; Redis 7.4's for per-field expiry), the listpack to
//! hashtable conversions at Redis' thresholds, RESP3 shapes, and the key commands (TYPE, COPY,
//! RENAME, MOVE, SCAN TYPE, MEMORY USAGE, DUMP/RESTORE) over hashes of both encodings.
mod common;

use common::*;

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap()
}

fn encoding(raw: &mut Raw, key: &str) -> String {
    raw.call_text(&[b"OBJECT", b"ENCODING", key.as_bytes()])
}

#[test]
fn set_get_and_delete_fields() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["HSET", "h", "a", "1", "b", "2"], &i(2));
    rt(&mut raw, &["HSET", "h", "a", "10", "c", "3"], &i(1));
    rt(&mut raw, &["HGET", "h", "a"], &b("10"));
    rt(&mut raw, &["HGET", "h", "zz"], NIL);
    rt(&mut raw, &["HGET", "nokey", "a"], NIL);
    rt(
        &mut raw,
        &["HMGET", "h", "a", "zz", "c"],
        &arr(&[&b("10"), NIL, &b("3")]),
    );
    rt(&mut raw, &["HMGET", "nokey", "a", "b"], &arr(&[NIL, NIL]));
    rt(&mut raw, &["HMSET", "h", "d", "4"], OK);
    rt(&mut raw, &["HSETNX", "h", "d", "5"], &i(0));
    rt(&mut raw, &["HSETNX", "h", "e", "5"], &i(1));
    rt(&mut raw, &["HLEN", "h"], &i(5));
    rt(&mut raw, &["HLEN", "nokey"], &i(0));
    rt(&mut raw, &["HEXISTS", "h", "e"], &i(1));
    rt(&mut raw, &["HEXISTS", "h", "x"], &i(0));
    rt(&mut raw, &["HSTRLEN", "h", "a"], &i(2));
    rt(&mut raw, &["HSTRLEN", "h", "x"], &i(0));
    rt(
        &mut raw,
        &["HKEYS", "h"],
        &arr(&[&b("a"), &b("b"), &b("c"), &b("d"), &b("e")]),
    );
    rt(
        &mut raw,
        &["HVALS", "h"],
        &arr(&[&b("10"), &b("2"), &b("3"), &b("4"), &b("5")]),
    );
    rt(&mut raw, &["HKEYS", "nokey"], "*0\r\n");
    rt(&mut raw, &["HGETALL", "nokey"], "*0\r\n");
    rt(&mut raw, &["HDEL", "h", "a", "b", "zz"], &i(2));
    rt(
        &mut raw,
        &["HGETALL", "h"],
        &arr(&[&b("c"), &b("3"), &b("d"), &b("4"), &b("e"), &b("5")]),
    );
    rt(&mut raw, &["HDEL", "nokey", "a"], &i(0));
    // The last field gone, the key is gone.
    rt(&mut raw, &["HDEL", "h", "c", "d", "e"], &i(3));
    rt(&mut raw, &["EXISTS", "h"], &i(0));
    // Empty strings and binary data.
    rt(&mut raw, &["HSET", "h", "", ""], &i(1));
    rt(&mut raw, &["HGET", "h", ""], "$0\r\n\r\n");
    raw.expect_cmd(&[b"HSET", b"bin", b"\x00\xff", b"\r\n"], b":1\r\n");
    raw.expect_cmd(&[b"HGET", b"bin", b"\x00\xff"], b"$2\r\n\r\n\r\n");
}

#[test]
fn arity_wrongtype_and_bad_arguments() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "str", "x"], OK);
    for args in [
        &["HSET", "str", "a", "1"][..],
        &["HSETNX", "str", "a", "1"],
        &["HGET", "str", "a"],
        &["HMGET", "str", "a"],
        &["HDEL", "str", "a"],
        &["HLEN", "str"],
        &["HSTRLEN", "str", "a"],
        &["HKEYS", "str"],
        &["HVALS", "str"],
        &["HGETALL", "str"],
        &["HEXISTS", "str", "a"],
        &["HINCRBY", "str", "a", "1"],
        &["HINCRBYFLOAT", "str", "a", "1"],
        &["HRANDFIELD", "str"],
        &["HRANDFIELD", "str", "2"],
        &["HSCAN", "str", "0"],
        &["HTTL", "str", "FIELDS", "1", "a"],
        &["HEXPIRE", "str", "10", "FIELDS", "1", "a"],
        &["HPERSIST", "str", "FIELDS", "1", "a"],
    ] {
        rt(&mut raw, args, WRONGTYPE);
    }
    rt(&mut raw, &["HSET", "h", "a", "1"], &i(1));
    rt(&mut raw, &["GET", "h"], WRONGTYPE);
    rt(&mut raw, &["INCR", "h"], WRONGTYPE);
    rt(&mut raw, &["HSET", "h", "a"], &wrong_args("hset"));
    rt(&mut raw, &["HSET", "h", "a", "1", "b"], &wrong_args("hset"));
    rt(
        &mut raw,
        &["HMSET", "h", "a", "1", "b"],
        &wrong_args("hmset"),
    );
    rt(&mut raw, &["HGET", "h"], &wrong_args("hget"));
    rt(&mut raw, &["HDEL", "h"], &wrong_args("hdel"));
    rt(&mut raw, &["HLEN"], &wrong_args("hlen"));
    rt(&mut raw, &["HSETNX", "h", "a"], &wrong_args("hsetnx"));
    rt(&mut raw, &["HSCAN", "h"], &wrong_args("hscan"));
    rt(&mut raw, &["HSCAN", "h", "x"], "-ERR invalid cursor\r\n");
    rt(&mut raw, &["HSCAN", "h", "0", "COUNT", "0"], SYNTAX);
    rt(&mut raw, &["HSCAN", "h", "0", "COUNT", "x"], NOT_INT);
    rt(&mut raw, &["HSCAN", "h", "0", "BOGUS"], SYNTAX);
    rt(&mut raw, &["HRANDFIELD", "h", "x"], NOT_INT);
    rt(&mut raw, &["HRANDFIELD", "h", "1", "bogus"], SYNTAX);
    rt(
        &mut raw,
        &["HRANDFIELD", "h", "-9223372036854775808"],
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
    );
    rt(
        &mut raw,
        &["HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES"],
        "-ERR value is out of range\r\n",
    );
    // The failed commands changed nothing.
    rt(&mut raw, &["HGETALL", "h"], &arr(&[&b("a"), &b("1")]));
}

#[test]
fn counters() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["HINCRBY", "h", "n", "5"], &i(5));
    rt(&mut raw, &["HINCRBY", "h", "n", "-7"], &i(-2));
    rt(&mut raw, &["HINCRBY", "h", "n", "x"], NOT_INT);
    rt(
        &mut raw,
        &[
            "HSET",
            "h",
            "s",
            "abc",
            "big",
            "9223372036854775807",
            "f",
            "1.5",
        ],
        &i(3),
    );
    rt(
        &mut raw,
        &["HINCRBY", "h", "s", "1"],
        "-ERR hash value is not an integer\r\n",
    );
    rt(
        &mut raw,
        &["HINCRBY", "h", "big", "1"],
        "-ERR increment or decrement would overflow\r\n",
    );
    rt(&mut raw, &["HINCRBYFLOAT", "h", "f", "0.25"], &b("1.75"));
    rt(&mut raw, &["HINCRBYFLOAT", "h", "new", "3"], &b("3"));
    rt(&mut raw, &["HINCRBYFLOAT", "h", "f", "1e3"], &b("1001.75"));
    rt(
        &mut raw,
        &["HINCRBYFLOAT", "h", "s", "1"],
        "-ERR hash value is not a float\r\n",
    );
    rt(&mut raw, &["HINCRBYFLOAT", "h", "f", "x"], NOT_FLOAT);
    rt(
        &mut raw,
        &["HINCRBYFLOAT", "h", "f", "inf"],
        "-ERR value is NaN or Infinity\r\n",
    );
    raw.expect_cmd(&[b"HSET", b"h", b"nul", b"1\x002"], b":1\r\n");
    rt(
        &mut raw,
        &["HINCRBYFLOAT", "h", "nul", "1"],
        "-ERR hash value is not a float\r\n",
    );
    rt(&mut raw, &["HGET", "h", "n"], &b("-2"));
}

#[test]
fn conversions_happen_where_redis_converts() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["HSET", "h", "a", "1"], &i(1));
    assert_eq!(encoding(&mut raw, "h"), "listpack");
    for n in 1..128 {
        let f = format!("f{n}");
        rt(&mut raw, &["HSET", "h", &f, "v"], &i(1));
    }
    assert_eq!(encoding(&mut raw, "h"), "listpack");
    rt(&mut raw, &["HSET", "h", "one-more", "v"], &i(1));
    assert_eq!(encoding(&mut raw, "h"), "hashtable");
    rt(&mut raw, &["HLEN", "h"], &i(129));
    // Never back, even when small again.
    for n in 1..128 {
        rt(&mut raw, &["HDEL", "h", &format!("f{n}")], &i(1));
    }
    assert_eq!(encoding(&mut raw, "h"), "hashtable");
    // A value one byte past the limit converts; at the limit it does not.
    let at = "x".repeat(64);
    let past = "x".repeat(65);
    rt(&mut raw, &["HSET", "v", "a", &at], &i(1));
    assert_eq!(encoding(&mut raw, "v"), "listpack");
    rt(&mut raw, &["HSET", "v", "a", &past], &i(0));
    assert_eq!(encoding(&mut raw, "v"), "hashtable");
    rt(&mut raw, &["HSETNX", "k", &past, "1"], &i(1));
    assert_eq!(encoding(&mut raw, "k"), "hashtable");
    // HINCRBYFLOAT's result past the limit converts too (Redis' hashTypeSet check).
    rt(&mut raw, &["HSET", "fl", "a", "1"], &i(1));
    let _ = raw.call(&[b"HINCRBYFLOAT", b"fl", b"a", b"1e70"]);
    assert_eq!(encoding(&mut raw, "fl"), "hashtable");
    // CONFIG SET changes the limits, under both names.
    rt(
        &mut raw,
        &["CONFIG", "SET", "hash-max-ziplist-entries", "2"],
        OK,
    );
    rt(
        &mut raw,
        &["CONFIG", "GET", "hash-max-listpack-entries"],
        &arr(&[&b("hash-max-listpack-entries"), &b("2")]),
    );
    rt(&mut raw, &["HSET", "c", "a", "1", "b", "2"], &i(2));
    assert_eq!(encoding(&mut raw, "c"), "listpack");
    rt(&mut raw, &["HSET", "c", "c", "3"], &i(1));
    assert_eq!(encoding(&mut raw, "c"), "hashtable");
    rt(
        &mut raw,
        &["CONFIG", "SET", "hash-max-listpack-value", "3"],
        OK,
    );
    rt(
        &mut raw,
        &["CONFIG", "GET", "hash-max-ziplist-value"],
        &arr(&[&b("hash-max-ziplist-value"), &b("3")]),
    );
    rt(&mut raw, &["HSET", "d", "abcd", "1"], &i(1));
    assert_eq!(encoding(&mut raw, "d"), "hashtable");
}

#[test]
fn large_hashes_answer_like_small_ones() {
    let s = server();
    let mut c = s.client();
    let mut cmd = redis::cmd("HSET");
    cmd.arg("big");
    for n in 0..1000 {
        cmd.arg(format!("f{n}")).arg(format!("v{n}"));
    }
    let added: i64 = cmd.query(&mut c).unwrap();
    assert_eq!(added, 1000);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 1000);
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "f777"]), "v777");
    let all: std::collections::HashMap<String, String> = q(&mut c, &["HGETALL", "big"]);
    assert_eq!(all.len(), 1000);
    assert_eq!(all["f5"], "v5");
    for n in 0..500 {
        let _: i64 = q(&mut c, &["HDEL", "big", &format!("f{n}")]);
    }
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 500);
    let keys: Vec<String> = q(&mut c, &["HKEYS", "big"]);
    assert_eq!(keys.len(), 500);
    // HSCAN visits every field exactly once.
    let mut cursor = "0".to_string();
    let mut seen = std::collections::HashSet::new();
    loop {
        let (next, items): (String, Vec<String>) =
            q(&mut c, &["HSCAN", "big", &cursor, "COUNT", "7"]);
        for pair in items.chunks(2) {
            assert!(seen.insert(pair[0].clone()), "{} twice", pair[0]);
            assert_eq!(pair[1], pair[0].replace('f', "v"));
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 500);
    let (_, items): (String, Vec<String>) = q(
        &mut c,
        &[
            "HSCAN", "big", "0", "MATCH", "f99*", "COUNT", "10000", "NOVALUES",
        ],
    );
    let mut items = items;
    items.sort();
    assert_eq!(
        items,
        vec!["f990", "f991", "f992", "f993", "f994", "f995", "f996", "f997", "f998", "f999"]
    );
}

#[test]
fn hscan_on_small_hashes_returns_everything_at_once() {
    let s = server();
    let mut raw = s.raw();
    rt(
        &mut raw,
        &["HSET", "h", "a", "1", "b", "2", "ab", "3"],
        &i(3),
    );
    rt(
        &mut raw,
        &["HSCAN", "h", "0"],
        &arr(&[
            &b("0"),
            &arr(&[&b("a"), &b("1"), &b("b"), &b("2"), &b("ab"), &b("3")]),
        ]),
    );
    rt(
        &mut raw,
        &["HSCAN", "h", "0", "MATCH", "a*", "COUNT", "1"],
        &arr(&[&b("0"), &arr(&[&b("a"), &b("1"), &b("ab"), &b("3")])]),
    );
    rt(
        &mut raw,
        &["HSCAN", "h", "0", "NOVALUES"],
        &arr(&[&b("0"), &arr(&[&b("a"), &b("b"), &b("ab")])]),
    );
    rt(
        &mut raw,
        &["HSCAN", "nokey", "0"],
        &arr(&[&b("0"), "*0\r\n"]),
    );
}

#[test]
fn hrandfield_counts_and_shapes() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["HRANDFIELD", "nokey"], NIL);
    rt(&mut raw, &["HRANDFIELD", "nokey", "3"], "*0\r\n");
    rt(&mut raw, &["HSET", "h", "a", "1"], &i(1));
    rt(&mut raw, &["HRANDFIELD", "h"], &b("a"));
    rt(&mut raw, &["HRANDFIELD", "h", "0"], "*0\r\n");
    rt(&mut raw, &["HRANDFIELD", "h", "5"], &arr(&[&b("a")]));
    rt(
        &mut raw,
        &["HRANDFIELD", "h", "-3"],
        &arr(&[&b("a"), &b("a"), &b("a")]),
    );
    rt(
        &mut raw,
        &["HRANDFIELD", "h", "-2", "WITHVALUES"],
        &arr(&[&b("a"), &b("1"), &b("a"), &b("1")]),
    );
    // RESP3: pairs as two-element arrays; HGETALL as a map.
    let _ = raw.call(&[b"HELLO", b"3"]);
    rt(
        &mut raw,
        &["HRANDFIELD", "h", "-2", "WITHVALUES"],
        &arr(&[&arr(&[&b("a"), &b("1")]), &arr(&[&b("a"), &b("1")])]),
    );
    rt(
        &mut raw,
        &["HGETALL", "h"],
        &format!("%1\r\n{}{}", b("a"), b("1")),
    );
    rt(&mut raw, &["HRANDFIELD", "nokey"], "_\r\n");
    // Positive counts: distinct fields.
    let mut c = s.client();
    let _: i64 = q(
        &mut c,
        &["HSET", "m", "a", "1", "b", "2", "c", "3", "d", "4"],
    );
    let got: Vec<String> = q(&mut c, &["HRANDFIELD", "m", "3"]);
    let distinct: std::collections::HashSet<_> = got.iter().collect();
    assert_eq!((got.len(), distinct.len()), (3, 3));
    let got: Vec<String> = q(&mut c, &["HRANDFIELD", "m", "10", "WITHVALUES"]);
    assert_eq!(got.len(), 8);
}

#[test]
fn field_expiry_as_redis_7_4() {
    let s = server();
    let mut raw = s.raw();
    rt(
        &mut raw,
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &i(3),
    );
    rt(
        &mut raw,
        &["HTTL", "h", "FIELDS", "2", "a", "zz"],
        &arr(&[&i(-1), &i(-2)]),
    );
    rt(
        &mut raw,
        &["HTTL", "nokey", "FIELDS", "1", "a"],
        &arr(&[&i(-2)]),
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "100", "FIELDS", "2", "a", "zz"],
        &arr(&[&i(1), &i(-2)]),
    );
    assert_eq!(encoding(&mut raw, "h"), "listpackex");
    rt(
        &mut raw,
        &["HTTL", "h", "FIELDS", "1", "a"],
        &arr(&[&i(100)]),
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "50", "NX", "FIELDS", "2", "a", "b"],
        &arr(&[&i(0), &i(1)]),
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "200", "XX", "FIELDS", "2", "a", "c"],
        &arr(&[&i(1), &i(0)]),
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "10", "GT", "FIELDS", "2", "a", "c"],
        &arr(&[&i(0), &i(0)]),
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "10", "LT", "FIELDS", "2", "a", "c"],
        &arr(&[&i(1), &i(1)]),
    );
    rt(
        &mut raw,
        &["HPERSIST", "h", "FIELDS", "3", "a", "zz", "b"],
        &arr(&[&i(1), &i(-2), &i(1)]),
    );
    rt(
        &mut raw,
        &["HPERSIST", "h", "FIELDS", "1", "a"],
        &arr(&[&i(-1)]),
    );
    let at = (now_ms() / 1000 + 1000).to_string();
    rt(
        &mut raw,
        &["HEXPIREAT", "h", &at, "FIELDS", "1", "a"],
        &arr(&[&i(1)]),
    );
    rt(
        &mut raw,
        &["HEXPIRETIME", "h", "FIELDS", "1", "a"],
        &arr(&[&format!(":{at}\r\n")]),
    );
    let pat = format!("{}000", at);
    rt(
        &mut raw,
        &["HPEXPIRETIME", "h", "FIELDS", "1", "a"],
        &arr(&[&format!(":{pat}\r\n")]),
    );
    // A time in the past deletes the field (2); the last field gone deletes the key.
    rt(
        &mut raw,
        &["HPEXPIREAT", "h", "1", "FIELDS", "1", "b"],
        &arr(&[&i(2)]),
    );
    rt(&mut raw, &["HLEN", "h"], &i(2));
    // Errors, as Redis 7.4 words them.
    rt(
        &mut raw,
        &["HEXPIRE", "h", "-1", "FIELDS", "1", "a"],
        "-ERR invalid expire time, must be >= 0\r\n",
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "x", "FIELDS", "1", "a"],
        NOT_INT,
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "99999999999999", "FIELDS", "1", "a"],
        "-ERR invalid expire time in 'hexpire' command\r\n",
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "10", "FIELDX", "1", "a"],
        "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "10", "FIELDS", "0", "a"],
        "-ERR Parameter `numFields` should be greater than 0\r\n",
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "10", "FIELDS", "2", "a"],
        "-ERR The `numfields` parameter must match the number of arguments\r\n",
    );
    rt(
        &mut raw,
        &["HTTL", "h", "FIELDS", "0", "a"],
        "-ERR Number of fields must be a positive integer\r\n",
    );
    rt(
        &mut raw,
        &["HEXPIRE", "h", "10", "FIELDS", "1"],
        &wrong_args("hexpire"),
    );
    // Expired fields are invisible, then gone; the hash goes with its last field.
    rt(&mut raw, &["HSET", "e", "x", "1", "y", "2"], &i(2));
    rt(
        &mut raw,
        &["HPEXPIRE", "e", "50", "FIELDS", "1", "x"],
        &arr(&[&i(1)]),
    );
    std::thread::sleep(std::time::Duration::from_millis(120));
    rt(&mut raw, &["HGET", "e", "x"], NIL);
    rt(&mut raw, &["HLEN", "e"], &i(1));
    rt(&mut raw, &["HGETALL", "e"], &arr(&[&b("y"), &b("2")]));
    rt(
        &mut raw,
        &["HPEXPIRE", "e", "50", "FIELDS", "1", "y"],
        &arr(&[&i(1)]),
    );
    std::thread::sleep(std::time::Duration::from_millis(120));
    rt(&mut raw, &["HLEN", "e"], &i(0));
    rt(&mut raw, &["EXISTS", "e"], &i(0));
    // Removed actively too, with no command touching the hash.
    rt(&mut raw, &["DEL", "h"], &i(1));
    let mut c = s.client();
    let mut cmd = redis::cmd("HSET");
    cmd.arg("big");
    for n in 0..300 {
        cmd.arg(format!("f{n}")).arg("v");
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let _: () = redis::cmd("HPEXPIRE")
        .arg("big")
        .arg(50)
        .arg("FIELDS")
        .arg(300)
        .arg((0..300).map(|n| format!("f{n}")).collect::<Vec<_>>())
        .query(&mut c)
        .map(|_: Vec<i64>| ())
        .unwrap();
    rt(&mut raw, &["HSET", "act", "x", "1"], &i(1));
    rt(
        &mut raw,
        &["HPEXPIRE", "act", "50", "FIELDS", "1", "x"],
        &arr(&[&i(1)]),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n: i64 = q(&mut c, &["DBSIZE"]);
        if n == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{n} keys left");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn key_commands_cover_hashes() {
    let s = server();
    let mut raw = s.raw();
    let mut c = s.client();
    rt(&mut raw, &["HSET", "h", "a", "1", "b", "2"], &i(2));
    rt(&mut raw, &["TYPE", "h"], "+hash\r\n");
    rt(&mut raw, &["COPY", "h", "h2"], &i(1));
    rt(&mut raw, &["HSET", "h2", "c", "3"], &i(1));
    rt(&mut raw, &["HLEN", "h"], &i(2));
    rt(&mut raw, &["RENAME", "h2", "h3"], OK);
    rt(&mut raw, &["HGET", "h3", "c"], &b("3"));
    rt(&mut raw, &["MOVE", "h3", "1"], &i(1));
    rt(&mut raw, &["SELECT", "1"], OK);
    rt(
        &mut raw,
        &["HGETALL", "h3"],
        &arr(&[&b("a"), &b("1"), &b("b"), &b("2"), &b("c"), &b("3")]),
    );
    rt(&mut raw, &["SELECT", "0"], OK);
    rt(&mut raw, &["EXPIRE", "h", "100"], &i(1));
    rt(&mut raw, &["TTL", "h"], &i(100));
    rt(&mut raw, &["SET", "s", "x"], OK);
    let (_, keys): (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "TYPE", "hash", "COUNT", "100"]);
    assert_eq!(keys, vec!["h"]);
    // MEMORY USAGE grows with the hash, in both encodings.
    let small: i64 = q(&mut c, &["MEMORY", "USAGE", "h"]);
    let mut cmd = redis::cmd("HSET");
    cmd.arg("h");
    for n in 0..2000 {
        cmd.arg(format!("field:{n}")).arg(format!("value:{n}"));
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    let big: i64 = q(&mut c, &["MEMORY", "USAGE", "h"]);
    assert!(big > small + 2000 * 16, "{small} -> {big}");
    // A copy across dbs of a large hash, then DEL and UNLINK.
    rt(&mut raw, &["COPY", "h", "hc", "DB", "2"], &i(1));
    rt(&mut raw, &["DEL", "h"], &i(1));
    rt(&mut raw, &["SELECT", "2"], OK);
    rt(&mut raw, &["HLEN", "hc"], &i(2002));
    rt(&mut raw, &["UNLINK", "hc"], &i(1));
    rt(&mut raw, &["SELECT", "0"], OK);
    // DUMP/RESTORE of a hash with field expiries keeps them (listpackex and hashtable).
    rt(&mut raw, &["HSET", "x", "a", "1", "b", "2"], &i(2));
    rt(
        &mut raw,
        &["HEXPIRE", "x", "1000", "FIELDS", "1", "a"],
        &arr(&[&i(1)]),
    );
    let d: Vec<u8> = redis::cmd("DUMP").arg("x").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("x2")
        .arg(0)
        .arg(&d)
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut raw, "x2"), "listpackex");
    rt(
        &mut raw,
        &["HTTL", "x2", "FIELDS", "2", "a", "b"],
        &arr(&[&i(1000), &i(-1)]),
    );
    let mut cmd = redis::cmd("HSET");
    cmd.arg("y");
    for n in 0..200 {
        cmd.arg(format!("f{n}")).arg("v");
    }
    let _: i64 = cmd.query(&mut c).unwrap();
    rt(
        &mut raw,
        &["HEXPIRE", "y", "1000", "FIELDS", "1", "f7"],
        &arr(&[&i(1)]),
    );
    let d: Vec<u8> = redis::cmd("DUMP").arg("y").query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("y2")
        .arg(0)
        .arg(&d)
        .query(&mut c)
        .unwrap();
    assert_eq!(encoding(&mut raw, "y2"), "hashtable");
    rt(
        &mut raw,
        &["HTTL", "y2", "FIELDS", "2", "f7", "f8"],
        &arr(&[&i(1000), &i(-1)]),
    );
    rt(&mut raw, &["HLEN", "y2"], &i(200));
}

#[test]
fn hashes_on_two_shards_copy_and_rename_across() {
    let s = server();
    let mut raw = s.raw();
    let (a, b2) = keys_on_different_shards("hk", 2);
    rt(&mut raw, &["HSET", &a, "f", "1"], &i(1));
    rt(&mut raw, &["COPY", &a, &b2], &i(1));
    rt(&mut raw, &["HGET", &b2, "f"], &b("1"));
    rt(&mut raw, &["DEL", &b2], &i(1));
    rt(&mut raw, &["RENAME", &a, &b2], OK);
    rt(&mut raw, &["HGETALL", &b2], &arr(&[&b("f"), &b("1")]));
    rt(&mut raw, &["EXISTS", &a], &i(0));
}

#[test]
fn store_mode_answers_oom_and_keeps_what_it_has() {
    let s = Server::start(STRATA, &["--proactor_threads", "1", "--maxmemory", "32mb"]);
    let mut c = s.client();
    let mut stored = 0;
    let mut refused = false;
    for k in 0..20_000 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(format!("h{k}"));
        // Values that do not compress: a packed hash is kept compressed when that pays.
        for n in 0..100 {
            cmd.arg(format!("f{n}")).arg(value(k * 100 + n, 0, 50));
        }
        match cmd.query::<i64>(&mut c) {
            Ok(_) => stored += 1,
            Err(e) => {
                assert!(e.to_string().contains("OOM"), "{e}");
                refused = true;
                break;
            }
        }
    }
    assert!(refused, "{stored} hashes stored without -OOM");
    for k in 0..stored {
        let n: i64 = q(&mut c, &["HLEN", &format!("h{k}")]);
        assert_eq!(n, 100, "h{k}");
    }
}

#[test]
fn cache_mode_evicts_whole_hashes() {
    let s = Server::start(
        STRATA,
        &[
            "--proactor_threads",
            "1",
            "--maxmemory",
            "32mb",
            "--cache_mode",
        ],
    );
    let mut c = s.client();
    let n = 20_000;
    for k in 0..n {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(format!("h{k}"));
        // Values that do not compress: a packed hash is kept compressed when that pays.
        for f in 0..100 {
            cmd.arg(format!("f{f}")).arg(value(k * 100 + f, 0, 50));
        }
        let added: i64 = cmd.query(&mut c).unwrap();
        assert_eq!(added, 100);
    }
    let mut kept = 0;
    for k in 0..n {
        let len: i64 = q(&mut c, &["HLEN", &format!("h{k}")]);
        assert!(len == 0 || len == 100, "h{k} has {len} fields");
        kept += usize::from(len == 100);
    }
    assert!(kept > 0 && kept < n, "{kept} of {n} kept");
}

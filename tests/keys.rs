//! Generic key commands against the real binary, checked against Redis 7.2's replies: DEL,
//! UNLINK, EXISTS, TOUCH, TYPE, the EXPIRE family and TTLs, PERSIST, RENAME, COPY, MOVE, OBJECT,
//! DUMP/RESTORE (also against a real redis-server when one is installed), KEYS, SCAN, RANDOMKEY,
//! DBSIZE, FLUSHDB/FLUSHALL, SWAPDB, and lazy and active expiry.
mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

// ---------------------------------------------------------------------------------------------
// DEL / UNLINK / EXISTS / TOUCH / TYPE
// ---------------------------------------------------------------------------------------------

#[test]
fn del_unlink_exists_touch_type() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["MSET", "a", "1", "b", "2"], OK);
    rt(&mut raw, &["EXISTS", "a"], &i(1));
    // A key named twice counts twice.
    rt(&mut raw, &["EXISTS", "a", "a", "b", "a", "nokey"], &i(4));
    rt(&mut raw, &["EXISTS", "nokey", "nokey"], &i(0));
    rt(&mut raw, &["TOUCH", "a", "nokey", "a"], &i(2));
    rt(&mut raw, &["TOUCH", "nokey"], &i(0));
    rt(&mut raw, &["TYPE", "a"], "+string\r\n");
    rt(&mut raw, &["TYPE", "nokey"], "+none\r\n");
    rt(&mut raw, &["DEL", "a", "b", "c", "a"], &i(2));
    rt(&mut raw, &["EXISTS", "a", "b"], &i(0));
    rt(&mut raw, &["DEL", "a"], &i(0));
    rt(&mut raw, &["MSET", "a", "1", "b", "2"], OK);
    rt(&mut raw, &["UNLINK", "a", "a"], &i(1));
    rt(&mut raw, &["UNLINK", "b", "c"], &i(1));
    rt(&mut raw, &["UNLINK", "b"], &i(0));
    rt(&mut raw, &["DBSIZE"], &i(0));
    for name in ["del", "unlink", "exists", "touch", "type"] {
        rt(&mut raw, &[name], &wrong_args(name));
    }
    rt(&mut raw, &["TYPE", "a", "b"], &wrong_args("type"));
}

// ---------------------------------------------------------------------------------------------
// EXPIRE family, TTLs, PERSIST
// ---------------------------------------------------------------------------------------------

#[test]
fn expire_family_and_ttls() {
    let s = server();
    let mut raw = s.raw();
    for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        rt(&mut raw, &[cmd, "nokey"], &i(-2));
    }
    rt(&mut raw, &["SET", "k", "v"], OK);
    for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
        rt(&mut raw, &[cmd, "k"], &i(-1));
    }
    rt(&mut raw, &["EXPIRE", "nokey", "10"], &i(0));
    rt(&mut raw, &["PEXPIRE", "nokey", "10"], &i(0));
    rt(&mut raw, &["EXPIREAT", "nokey", "9999999999"], &i(0));
    rt(&mut raw, &["PEXPIREAT", "nokey", "9999999999999"], &i(0));

    rt(&mut raw, &["EXPIRE", "k", "100"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(100));
    let mut c = s.client();
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((99_000..=100_000).contains(&pttl), "PTTL {pttl}");
    let pexp: i64 = q(&mut c, &["PEXPIRETIME", "k"]);
    let now = now_ms() as i64;
    assert!(
        (now + 98_000..=now + 100_000).contains(&pexp),
        "PEXPIRETIME {pexp} now {now}"
    );
    let exp: i64 = q(&mut c, &["EXPIRETIME", "k"]);
    // EXPIRETIME rounds to the nearest second, as Redis does.
    assert_eq!(exp, (pexp + 500) / 1000);

    rt(&mut raw, &["PEXPIRE", "k", "5400"], &i(1));
    // Rounded to the nearest second, as Redis does ((ms + 500) / 1000).
    rt(&mut raw, &["TTL", "k"], &i(5));
    rt(&mut raw, &["PEXPIRE", "k", "5600"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(6));
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((5_100..=5_600).contains(&pttl), "PTTL {pttl}");

    rt(&mut raw, &["EXPIREAT", "k", "33177117420"], &i(1));
    rt(&mut raw, &["EXPIRETIME", "k"], &i(33177117420));
    rt(&mut raw, &["PEXPIRETIME", "k"], &i(33177117420000));
    rt(&mut raw, &["PEXPIREAT", "k", "33177117420123"], &i(1));
    rt(&mut raw, &["PEXPIRETIME", "k"], &i(33177117420123));
    rt(&mut raw, &["EXPIRETIME", "k"], &i(33177117420));

    // PERSIST.
    rt(&mut raw, &["PERSIST", "k"], &i(1));
    rt(&mut raw, &["PERSIST", "k"], &i(0));
    rt(&mut raw, &["PERSIST", "nokey"], &i(0));
    rt(&mut raw, &["TTL", "k"], &i(-1));
    rt(&mut raw, &["GET", "k"], &b("v"));

    // Times in the past delete the key.
    rt(&mut raw, &["EXPIRE", "k", "-1"], &i(1));
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["EXPIRE", "k", "0"], &i(1));
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["PEXPIREAT", "k", "1"], &i(1));
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["EXPIREAT", "k", "100"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(-2));

    // Overwriting with SET drops the TTL; EXPIRE on the new value works again.
    rt(&mut raw, &["SET", "k", "v", "EX", "10"], OK);
    rt(&mut raw, &["SET", "k", "w"], OK);
    rt(&mut raw, &["TTL", "k"], &i(-1));
}

#[test]
fn expire_nx_xx_gt_lt() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["EXPIRE", "k", "100", "XX"], &i(0));
    rt(&mut raw, &["TTL", "k"], &i(-1));
    // GT on a key without TTL: no TTL is infinite, nothing is greater.
    rt(&mut raw, &["EXPIRE", "k", "100", "GT"], &i(0));
    rt(&mut raw, &["TTL", "k"], &i(-1));
    rt(&mut raw, &["EXPIRE", "k", "100", "NX"], &i(1));
    rt(&mut raw, &["EXPIRE", "k", "200", "NX"], &i(0));
    rt(&mut raw, &["TTL", "k"], &i(100));
    rt(&mut raw, &["EXPIRE", "k", "50", "GT"], &i(0));
    rt(&mut raw, &["EXPIRE", "k", "200", "GT"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(200));
    rt(&mut raw, &["EXPIRE", "k", "300", "LT"], &i(0));
    rt(&mut raw, &["EXPIRE", "k", "50", "LT"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(50));
    rt(&mut raw, &["EXPIRE", "k", "60", "XX"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(60));
    rt(&mut raw, &["EXPIRE", "k", "70", "XX", "GT"], &i(1));
    rt(&mut raw, &["EXPIRE", "k", "80", "xx", "lt"], &i(0));
    rt(&mut raw, &["TTL", "k"], &i(70));
    // The same option twice is fine.
    rt(&mut raw, &["EXPIRE", "k", "90", "GT", "GT"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(90));
    // LT on a key without TTL: anything is less than infinite.
    rt(&mut raw, &["PERSIST", "k"], &i(1));
    rt(&mut raw, &["EXPIRE", "k", "10", "LT"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(10));
    // The same conditions for the other three commands.
    rt(&mut raw, &["PEXPIRE", "k", "20000", "LT"], &i(0));
    rt(&mut raw, &["PEXPIRE", "k", "20000", "GT"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(20));
    let at = now_ms() as i64 / 1000 + 1000;
    rt(&mut raw, &["EXPIREAT", "k", &at.to_string(), "NX"], &i(0));
    rt(&mut raw, &["EXPIREAT", "k", &at.to_string(), "XX"], &i(1));
    rt(&mut raw, &["EXPIRETIME", "k"], &i(at));
    rt(
        &mut raw,
        &["PEXPIREAT", "k", &(at * 1000 + 1).to_string(), "GT"],
        &i(1),
    );
    rt(&mut raw, &["PEXPIRETIME", "k"], &i(at * 1000 + 1));
    // A past time with a condition that holds deletes; one that fails does not.
    rt(&mut raw, &["EXPIRE", "k", "-100", "GT"], &i(0));
    rt(&mut raw, &["EXISTS", "k"], &i(1));
    rt(&mut raw, &["EXPIRE", "k", "-100", "LT"], &i(1));
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["EXPIRE", "k", "-100", "XX"], &i(0));
    rt(&mut raw, &["EXISTS", "k"], &i(1));
    rt(&mut raw, &["EXPIRE", "k", "-100", "NX"], &i(1));
    rt(&mut raw, &["EXISTS", "k"], &i(0));
}

#[test]
fn expire_option_errors() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v"], OK);
    let nx = e("ERR NX and XX, GT or LT options at the same time are not compatible");
    let gtlt = e("ERR GT and LT options at the same time are not compatible");
    for cmd in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
        rt(&mut raw, &[cmd, "k", "100000", "NX", "XX"], &nx);
        rt(&mut raw, &[cmd, "k", "100000", "NX", "GT"], &nx);
        rt(&mut raw, &[cmd, "k", "100000", "LT", "NX"], &nx);
        rt(&mut raw, &[cmd, "k", "100000", "GT", "LT"], &gtlt);
        rt(&mut raw, &[cmd, "k", "100000", "XX", "LT", "GT"], &gtlt);
        rt(
            &mut raw,
            &[cmd, "k", "100000", "FOO"],
            &e("ERR Unsupported option FOO"),
        );
        rt(
            &mut raw,
            &[cmd, "k", "100000", "XX", "bar"],
            &e("ERR Unsupported option bar"),
        );
        rt(&mut raw, &[cmd, "k", "abc"], NOT_INT);
        rt(&mut raw, &[cmd, "k", "1.5"], NOT_INT);
        rt(&mut raw, &[cmd, "k", ""], NOT_INT);
        rt(&mut raw, &[cmd, "k"], &wrong_args(&cmd.to_lowercase()));
    }
    // Overflowing times.
    rt(
        &mut raw,
        &["EXPIRE", "k", "9223372036854775807"],
        &e("ERR invalid expire time in 'expire' command"),
    );
    rt(
        &mut raw,
        &["PEXPIRE", "k", "9223372036854775807"],
        &e("ERR invalid expire time in 'pexpire' command"),
    );
    rt(
        &mut raw,
        &["EXPIREAT", "k", "9223372036854775807"],
        &e("ERR invalid expire time in 'expireat' command"),
    );
    rt(
        &mut raw,
        &["EXPIRE", "nokey", "9223372036854775807"],
        &e("ERR invalid expire time in 'expire' command"),
    );
    rt(&mut raw, &["TTL", "k"], &i(-1));
    // PEXPIREAT takes the largest value there is.
    rt(&mut raw, &["PEXPIREAT", "k", "9223372036854775807"], &i(1));
    rt(&mut raw, &["PEXPIRETIME", "k"], &i(i64::MAX));
    for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME", "PERSIST"] {
        rt(&mut raw, &[cmd], &wrong_args(&cmd.to_lowercase()));
    }
}

/// Redis checks the NX/XX/GT/LT options before it parses the time.
#[test]
fn expire_options_are_checked_before_the_time() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(
        &mut raw,
        &["EXPIRE", "k", "abc", "NX", "XX"],
        &e("ERR NX and XX, GT or LT options at the same time are not compatible"),
    );
    rt(
        &mut raw,
        &["EXPIRE", "k", "abc", "FOO"],
        &e("ERR Unsupported option FOO"),
    );
    rt(
        &mut raw,
        &["PEXPIREAT", "k", "x", "GT", "LT"],
        &e("ERR GT and LT options at the same time are not compatible"),
    );
}

// ---------------------------------------------------------------------------------------------
// RENAME / RENAMENX / COPY / MOVE
// ---------------------------------------------------------------------------------------------

#[test]
fn rename_and_renamenx() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["RENAME", "nokey", "x"], NO_KEY);
    rt(&mut raw, &["RENAME", "nokey", "nokey"], NO_KEY);
    rt(&mut raw, &["RENAMENX", "nokey", "x"], NO_KEY);
    rt(&mut raw, &["RENAMENX", "nokey", "nokey"], NO_KEY);
    rt(&mut raw, &["SET", "a", "1"], OK);
    rt(&mut raw, &["RENAME", "a", "a"], OK);
    rt(&mut raw, &["GET", "a"], &b("1"));
    rt(&mut raw, &["RENAMENX", "a", "a"], &i(0));
    rt(&mut raw, &["GET", "a"], &b("1"));
    rt(&mut raw, &["SET", "b", "2", "EX", "100"], OK);
    rt(&mut raw, &["RENAMENX", "a", "b"], &i(0));
    rt(
        &mut raw,
        &["MGET", "a", "b"],
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    // RENAME overwrites the destination, its TTL included.
    rt(&mut raw, &["RENAME", "a", "b"], OK);
    rt(&mut raw, &["GET", "b"], &b("1"));
    rt(&mut raw, &["TTL", "b"], &i(-1));
    rt(&mut raw, &["EXISTS", "a"], &i(0));
    // The TTL travels with the key.
    rt(&mut raw, &["PEXPIRE", "b", "100000"], &i(1));
    rt(&mut raw, &["RENAME", "b", "c"], OK);
    let mut c = s.client();
    let pttl: i64 = q(&mut c, &["PTTL", "c"]);
    assert!((99_000..=100_000).contains(&pttl), "PTTL {pttl}");
    rt(&mut raw, &["RENAMENX", "c", "d"], &i(1));
    rt(&mut raw, &["TTL", "d"], &i(100));
    rt(&mut raw, &["EXISTS", "c"], &i(0));
    rt(&mut raw, &["GET", "d"], &b("1"));
    rt(&mut raw, &["DBSIZE"], &i(1));
    rt(&mut raw, &["RENAME", "d"], &wrong_args("rename"));
    rt(
        &mut raw,
        &["RENAMENX", "d", "e", "f"],
        &wrong_args("renamenx"),
    );
}

#[test]
fn copy_with_db_and_replace() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["COPY", "nokey", "x"], &i(0));
    rt(&mut raw, &["SET", "d", "1", "EX", "100"], OK);
    rt(&mut raw, &["COPY", "d", "d"], SAME);
    rt(&mut raw, &["COPY", "d", "d", "REPLACE"], SAME);
    rt(&mut raw, &["COPY", "d", "d", "DB", "0"], SAME);
    rt(&mut raw, &["COPY", "d", "e"], &i(1));
    rt(&mut raw, &["GET", "e"], &b("1"));
    rt(&mut raw, &["TTL", "e"], &i(100));
    rt(&mut raw, &["SET", "e", "other"], OK);
    rt(&mut raw, &["COPY", "d", "e"], &i(0));
    rt(&mut raw, &["GET", "e"], &b("other"));
    rt(&mut raw, &["COPY", "d", "e", "REPLACE"], &i(1));
    rt(&mut raw, &["GET", "e"], &b("1"));
    rt(&mut raw, &["TTL", "e"], &i(100));
    // The copy is independent of the source.
    rt(&mut raw, &["APPEND", "e", "x"], &i(2));
    rt(&mut raw, &["GET", "d"], &b("1"));
    // Other dbs.
    rt(&mut raw, &["COPY", "d", "d", "DB", "1"], &i(1));
    rt(&mut raw, &["COPY", "d", "d", "DB", "1"], &i(0));
    rt(&mut raw, &["SET", "d", "2"], OK);
    rt(&mut raw, &["COPY", "d", "d", "DB", "1", "REPLACE"], &i(1));
    rt(&mut raw, &["COPY", "d", "f", "REPLACE", "DB", "2"], &i(1));
    rt(&mut raw, &["SELECT", "1"], OK);
    rt(&mut raw, &["GET", "d"], &b("2"));
    rt(&mut raw, &["TTL", "d"], &i(-1));
    rt(&mut raw, &["EXISTS", "f"], &i(0));
    rt(&mut raw, &["SELECT", "2"], OK);
    rt(&mut raw, &["GET", "f"], &b("2"));
    rt(&mut raw, &["SELECT", "0"], OK);
    // Errors.
    rt(&mut raw, &["COPY", "d", "x", "DB", "16"], DB_RANGE);
    rt(&mut raw, &["COPY", "d", "x", "DB", "-1"], DB_RANGE);
    rt(&mut raw, &["COPY", "d", "x", "DB", "abc"], NOT_INT);
    rt(&mut raw, &["COPY", "d", "x", "DB"], SYNTAX);
    rt(&mut raw, &["COPY", "d", "x", "foo"], SYNTAX);
    rt(&mut raw, &["EXISTS", "x"], &i(0));
    rt(&mut raw, &["COPY", "d"], &wrong_args("copy"));
}

#[test]
fn move_between_dbs() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v", "EX", "100"], OK);
    rt(&mut raw, &["MOVE", "k", "0"], SAME);
    rt(&mut raw, &["MOVE", "k", "16"], DB_RANGE);
    rt(&mut raw, &["MOVE", "k", "-1"], DB_RANGE);
    rt(&mut raw, &["MOVE", "k", "abc"], NOT_INT);
    rt(&mut raw, &["MOVE", "nokey", "1"], &i(0));
    rt(&mut raw, &["MOVE", "k", "1"], &i(1));
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["SET", "k", "here"], OK);
    // The destination already has it: nothing moves.
    rt(&mut raw, &["MOVE", "k", "1"], &i(0));
    rt(&mut raw, &["GET", "k"], &b("here"));
    rt(&mut raw, &["SELECT", "1"], OK);
    rt(&mut raw, &["GET", "k"], &b("v"));
    // Moved with its TTL. Rounded to the nearest second: on a loaded machine the round trips
    // above may take half a second.
    let ttl = String::from_utf8_lossy(&raw.call(&[b"TTL", b"k"])).into_owned();
    assert!([i(100), i(99)].contains(&ttl), "TTL after MOVE: {ttl:?}");
    rt(&mut raw, &["MOVE", "k", "1"], SAME);
    rt(&mut raw, &["DEL", "k"], &i(1));
    rt(&mut raw, &["SELECT", "0"], OK);
    rt(&mut raw, &["MOVE", "k", "1"], &i(1));
    rt(&mut raw, &["DBSIZE"], &i(0));
    rt(&mut raw, &["SELECT", "1"], OK);
    rt(&mut raw, &["GET", "k"], &b("here"));
    rt(&mut raw, &["TTL", "k"], &i(-1));
}

// ---------------------------------------------------------------------------------------------
// OBJECT
// ---------------------------------------------------------------------------------------------

#[test]
fn object_encoding() {
    let s = server();
    let mut raw = s.raw();
    let long44 = "a".repeat(44);
    let long45 = "a".repeat(45);
    let cases: &[(&str, &str)] = &[
        ("12345", "int"),
        ("0", "int"),
        ("-1", "int"),
        ("9223372036854775807", "int"),
        ("-9223372036854775808", "int"),
        ("92233720368547758070", "embstr"),
        ("01", "embstr"),
        ("1.5", "embstr"),
        (" 1", "embstr"),
        ("hello", "embstr"),
        ("", "embstr"),
        (&long44, "embstr"),
        (&long45, "raw"),
    ];
    for (n, (val, enc)) in cases.iter().enumerate() {
        let key = format!("k{n}");
        rt(&mut raw, &["SET", &key, val], OK);
        rt(&mut raw, &["OBJECT", "ENCODING", &key], &b(enc));
    }
    rt(&mut raw, &["OBJECT", "ENCODING", "nokey"], NIL);
    rt(&mut raw, &["OBJECT", "encoding", "k0"], &b("int"));
    // INCR results are integers.
    rt(&mut raw, &["INCR", "k0"], &i(12346));
    rt(&mut raw, &["OBJECT", "ENCODING", "k0"], &b("int"));
    rt(&mut raw, &["INCR", "counter"], &i(1));
    rt(&mut raw, &["OBJECT", "ENCODING", "counter"], &b("int"));
}

/// Redis turns a string it modifies in place (APPEND, SETRANGE) into a raw string.
#[test]
fn object_encoding_after_append_and_setrange_is_raw() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "e", "hello"], OK);
    rt(&mut raw, &["APPEND", "e", "x"], &i(6));
    rt(&mut raw, &["OBJECT", "ENCODING", "e"], &b("raw"));
    rt(&mut raw, &["SET", "f", "hello"], OK);
    rt(&mut raw, &["SETRANGE", "f", "0", "j"], &i(5));
    rt(&mut raw, &["OBJECT", "ENCODING", "f"], &b("raw"));
    rt(&mut raw, &["SET", "n", "1"], OK);
    rt(&mut raw, &["APPEND", "n", "2"], &i(2));
    rt(&mut raw, &["OBJECT", "ENCODING", "n"], &b("raw"));
}

#[test]
fn object_help_and_errors() {
    let s = server();
    let mut raw = s.raw();
    let lines = [
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Print this help.",
    ];
    let mut want = format!("*{}\r\n", lines.len());
    for l in lines {
        want.push_str(&format!("+{l}\r\n"));
    }
    rt(&mut raw, &["OBJECT", "HELP"], &want);
    rt(&mut raw, &["OBJECT", "help"], &want);
    rt(
        &mut raw,
        &["OBJECT", "foo"],
        &e("ERR unknown subcommand 'foo'. Try OBJECT HELP."),
    );
    rt(
        &mut raw,
        &["OBJECT", "ENCODING"],
        &wrong_args("object|encoding"),
    );
    rt(
        &mut raw,
        &["OBJECT", "encoding", "a", "b"],
        &wrong_args("object|encoding"),
    );
    rt(&mut raw, &["OBJECT"], &wrong_args("object"));
    rt(&mut raw, &["OBJECT", "IDLETIME", "nokey"], NIL);
    rt(&mut raw, &["OBJECT", "FREQ", "nokey"], NIL);
}

#[test]
fn object_idletime_and_what_touches_a_key() {
    let s = server();
    let mut raw = s.raw();
    rt(
        &mut raw,
        &["MSET", "a", "1", "b", "2", "c", "3", "d", "4"],
        OK,
    );
    rt(&mut raw, &["OBJECT", "IDLETIME", "a"], &i(0));
    std::thread::sleep(Duration::from_millis(1100));
    let mut c = s.client();
    // Commands that do not count as an access.
    let _: i64 = q(&mut c, &["EXISTS", "a"]);
    let _: String = q(&mut c, &["TYPE", "a"]);
    let _: i64 = q(&mut c, &["TTL", "a"]);
    for k in ["a", "b", "c", "d"] {
        let idle: i64 = q(&mut c, &["OBJECT", "IDLETIME", k]);
        assert!((1..=3).contains(&idle), "IDLETIME {k} after 1.1 s: {idle}");
    }
    // Accesses reset it. The clock is whole seconds: when it ticks between the access and the
    // query, the query reads 1, so a key gets three tries.
    let accesses: [&[&str]; 3] = [&["TOUCH", "a"], &["GET", "b"], &["SET", "c", "x"]];
    for (k, access) in ["a", "b", "c"].into_iter().zip(accesses) {
        let reset = (0..3).any(|_| {
            let _: redis::Value = q(&mut c, access);
            q::<i64>(&mut c, &["OBJECT", "IDLETIME", k]) == 0
        });
        assert!(reset, "IDLETIME {k} after an access");
    }
    let idle: i64 = q(&mut c, &["OBJECT", "IDLETIME", "d"]);
    assert!(idle >= 1);
}

/// With maxmemory-policy noeviction (the only policy Strata reports), Redis does not track
/// access frequency and OBJECT FREQ is an error.
#[test]
fn object_freq_without_lfu_policy_is_an_error() {
    let s = server();
    let mut raw = s.raw();
    rt(
        &mut raw,
        &["CONFIG", "GET", "maxmemory-policy"],
        "*2\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n",
    );
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(
        &mut raw,
        &["OBJECT", "FREQ", "k"],
        &e("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
    );
}

// ---------------------------------------------------------------------------------------------
// DUMP / RESTORE
// ---------------------------------------------------------------------------------------------

/// A raw RESTORE with the reply compared byte for byte.
fn restore_raw(raw: &mut Raw, args: &[&[u8]], expect: &str) {
    let mut a: Vec<&[u8]> = vec![b"RESTORE"];
    a.extend_from_slice(args);
    raw.send(&cmd(&a));
    let got = raw.reply();
    assert_eq!(String::from_utf8_lossy(&got), expect, "RESTORE reply");
}

#[test]
fn crc64_matches_redis() {
    // The CRC-64/Jones check value and a payload taken from a real Redis 7.0 (RDB 10).
    assert_eq!(crc64(b"123456789"), 0xe9c6d914c4b8d9ca);
    assert!(check_crc(
        b"\x00\x05hello\x0a\x00\x63\x72\xdf\x76\x65\x34\x20\x0a"
    ));
}

#[test]
fn dump_payload_is_redis_7_2_format() {
    let s = server();
    let mut c = s.client();
    let cases: &[(&str, &[u8])] = &[
        ("hello", b"\x00\x05hello"),
        ("", b"\x00\x00"),
        ("123", b"\x00\xc0\x7b"),
        ("-200", b"\x00\xc1\x38\xff"),
        ("70000", b"\x00\xc2\x70\x11\x01\x00"),
        ("-70000", b"\x00\xc2\x90\xee\xfe\xff"),
        // Not canonical integers: plain strings.
        ("0123", b"\x00\x040123"),
        ("2147483648", b"\x00\x0a2147483648"),
    ];
    for (val, body) in cases {
        let _: () = q(&mut c, &["SET", "k", val]);
        let got = dump(&mut c, "k");
        assert_eq!(got, payload(body, 10), "DUMP of {val:?}");
    }
    // A 100-byte value: 14-bit length.
    let v = "x".repeat(100);
    let _: () = q(&mut c, &["SET", "k", &v]);
    let got = dump(&mut c, "k");
    assert!(check_crc(&got));
    assert_eq!(
        &got[got.len() - 10..got.len() - 8],
        &[10, 0],
        "RDB version 10, as redis-server 7.0 writes"
    );
    let mut raw = s.raw();
    rt(&mut raw, &["DUMP", "nokey"], NIL);
    rt(&mut raw, &["DUMP"], &wrong_args("dump"));
}

#[test]
fn dump_restore_round_trip_and_options() {
    let s = server();
    let mut c = s.client();
    let mut raw = s.raw();
    let values: Vec<Vec<u8>> = vec![
        b"hello".to_vec(),
        b"".to_vec(),
        b"12345".to_vec(),
        b"-1".to_vec(),
        b"9223372036854775807".to_vec(),
        b"a\0b\r\n".to_vec(),
        vec![b'z'; 20_000],
        (0..=255u8).cycle().take(70_000).collect(),
    ];
    for (n, v) in values.iter().enumerate() {
        set_bytes(&mut c, "src", v);
        let p = dump(&mut c, "src");
        let dst = format!("dst{n}");
        restore(&mut c, &dst, 0, &p, &[]).unwrap();
        let got = get_bytes(&mut c, &dst);
        assert_eq!(&got, v, "value {n} after DUMP/RESTORE");
        let ttl: i64 = q(&mut c, &["TTL", &dst]);
        assert_eq!(ttl, -1);
    }
    let _: () = q(&mut c, &["SET", "src", "value"]);
    let p = dump(&mut c, "src");

    // BUSYKEY, then REPLACE.
    restore_raw(
        &mut raw,
        &[b"dst0", b"0", &p],
        &e("BUSYKEY Target key name already exists."),
    );
    restore_raw(&mut raw, &[b"dst0", b"0", &p, b"REPLACE"], OK);
    rt(&mut raw, &["GET", "dst0"], &b("value"));
    // A relative TTL.
    restore_raw(&mut raw, &[b"t1", b"100000", &p], OK);
    let pttl: i64 = q(&mut c, &["PTTL", "t1"]);
    assert!(
        (99_000..=100_000).contains(&pttl),
        "PTTL after RESTORE {pttl}"
    );
    // ABSTTL.
    let at = (now_ms() + 500_000).to_string();
    restore_raw(&mut raw, &[b"t2", at.as_bytes(), &p, b"ABSTTL"], OK);
    rt(&mut raw, &["PEXPIRETIME", "t2"], &format!(":{at}\r\n"));
    // ABSTTL in the past: OK, and no key (the old one goes too under REPLACE).
    restore_raw(&mut raw, &[b"t3", b"1", &p, b"ABSTTL"], OK);
    rt(&mut raw, &["EXISTS", "t3"], &i(0));
    restore_raw(&mut raw, &[b"t2", b"1", &p, b"ABSTTL", b"REPLACE"], OK);
    rt(&mut raw, &["EXISTS", "t2"], &i(0));
    // IDLETIME / FREQ.
    restore_raw(&mut raw, &[b"t4", b"0", &p, b"IDLETIME", b"1000"], OK);
    let idle: i64 = q(&mut c, &["OBJECT", "IDLETIME", "t4"]);
    assert!(
        (1000..=1002).contains(&idle),
        "IDLETIME after RESTORE IDLETIME 1000: {idle}"
    );
    restore_raw(&mut raw, &[b"t5", b"0", &p, b"FREQ", b"100"], OK);
    rt(&mut raw, &["GET", "t5"], &b("value"));

    // Errors.
    let bad = e("ERR DUMP payload version or checksum are wrong");
    restore_raw(&mut raw, &[b"x", b"0", b"garbage"], &bad);
    restore_raw(&mut raw, &[b"x", b"0", b""], &bad);
    let mut flipped = p.clone();
    flipped[2] ^= 1;
    restore_raw(&mut raw, &[b"x", b"0", &flipped], &bad);
    let mut badcrc = p.clone();
    let last = badcrc.len() - 1;
    badcrc[last] ^= 0x80;
    restore_raw(&mut raw, &[b"x", b"0", &badcrc], &bad);
    // A newer RDB version than 7.0's (Redis 7.2 writes 11; 7.0 refuses it).
    restore_raw(
        &mut raw,
        &[b"x", b"0", &payload(b"\x00\x05hello", 11)],
        &bad,
    );
    // Good checksum, bad contents.
    let bad_format = e("ERR Bad data format");
    restore_raw(
        &mut raw,
        &[b"x", b"0", &payload(b"\x63\x05hello", 10)],
        &bad_format,
    );
    restore_raw(&mut raw, &[b"x", b"0", &payload(b"", 10)], &bad_format);
    rt(&mut raw, &["EXISTS", "x"], &i(0));
    restore_raw(
        &mut raw,
        &[b"x", b"-1", &p],
        &e("ERR Invalid TTL value, must be >= 0"),
    );
    restore_raw(&mut raw, &[b"x", b"abc", &p], NOT_INT);
    restore_raw(&mut raw, &[b"x", b"0", &p, b"foo"], SYNTAX);
    restore_raw(&mut raw, &[b"x", b"0", &p, b"REPLACE", b"foo"], SYNTAX);
    restore_raw(&mut raw, &[b"x", b"0", &p, b"IDLETIME"], SYNTAX);
    restore_raw(
        &mut raw,
        &[b"x", b"0", &p, b"IDLETIME", b"-1"],
        &e("ERR Invalid IDLETIME value, must be >= 0"),
    );
    restore_raw(
        &mut raw,
        &[b"x", b"0", &p, b"FREQ", b"256"],
        &e("ERR Invalid FREQ value, must be >= 0 and <= 255"),
    );
    restore_raw(
        &mut raw,
        &[b"x", b"0", &p, b"IDLETIME", b"1", b"FREQ", b"1"],
        SYNTAX,
    );
    restore_raw(
        &mut raw,
        &[b"x", b"0", &p, b"FREQ", b"1", b"IDLETIME", b"1"],
        SYNTAX,
    );
    // The existing key is checked before the TTL and the payload.
    restore_raw(
        &mut raw,
        &[b"dst0", b"-1", b"garbage"],
        &e("BUSYKEY Target key name already exists."),
    );
    rt(&mut raw, &["EXISTS", "x"], &i(0));
    rt(&mut raw, &["RESTORE", "x", "0"], &wrong_args("restore"));
}

#[test]
fn restore_payloads_made_by_real_redis() {
    // Taken from redis-server 7.0 (RDB version 10): "hello", 123, -70000, "", and "ab" x 50,
    // which Redis LZF-compresses.
    let payloads: &[(&[u8], &[u8])] = &[
        (b"\x00\x05hello\x0a\x00\x63\x72\xdf\x76\x65\x34\x20\x0a", b"hello"),
        (b"\x00\xc0\x7b\x0a\x00\x48\xe2\x53\xe1\x00\x7a\x67\xb9", b"123"),
        (
            b"\x00\xc2\x90\xee\xfe\xff\x0a\x00\x28\x75\xde\x7b\x13\xeb\x28\x00",
            b"-70000",
        ),
        (b"\x00\x00\x0a\x00\x5d\x9b\x5c\x40\x0f\x7f\xa2\xda", b""),
        (
            b"\x00\xc3\x0a\x40\x64\x02\x61\x62\x61\xe0\x56\x01\x01\x61\x62\x0a\x00\x17\x38\x3d\x94\x20\x96\xd8\x63",
            b"abababababababababababababababababababababababababababababababababababababababababababababababababab",
        ),
    ];
    let s = server();
    let mut c = s.client();
    for (n, (p, want)) in payloads.iter().enumerate() {
        let key = format!("r{n}");
        restore(&mut c, &key, 0, p, &[]).unwrap_or_else(|err| panic!("RESTORE {n}: {err}"));
        let got = get_bytes(&mut c, &key);
        assert_eq!(&got, want, "payload {n}");
    }
}

#[test]
fn dump_restore_cross_check_with_real_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let mut rc = real.client();
    let s = server();
    let mut c = s.client();
    let values: Vec<Vec<u8>> = vec![
        b"hello".to_vec(),
        b"".to_vec(),
        b"0".to_vec(),
        b"127".to_vec(),
        b"-129".to_vec(),
        b"2147483647".to_vec(),
        b"-2147483648".to_vec(),
        b"9223372036854775807".to_vec(),
        b"007".to_vec(),
        b"a\0b\r\n\xff".to_vec(),
        "ab".repeat(50).into_bytes(),
        vec![b'q'; 20_000],
        (0..50_000u32).map(|n| (n * 31 % 251) as u8).collect(),
    ];
    let redis_version = {
        let _: () = q(&mut rc, &["SET", "probe", "x"]);
        let p = dump(&mut rc, "probe");
        u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]])
    };
    for (n, v) in values.iter().enumerate() {
        let key = format!("v{n}");
        // Redis -> Strata.
        set_bytes(&mut rc, &key, v);
        let from_redis = dump(&mut rc, &key);
        assert!(check_crc(&from_redis), "our CRC agrees with redis-server's");
        restore(&mut c, &key, 0, &from_redis, &[])
            .unwrap_or_else(|err| panic!("Strata refused redis-server's payload {n}: {err}"));
        let got = get_bytes(&mut c, &key);
        assert_eq!(&got, v, "value {n} restored from redis-server's DUMP");

        // Strata -> Redis.
        let mut from_strata = dump(&mut c, &key);
        assert!(check_crc(&from_strata));
        let ver = u16::from_le_bytes([
            from_strata[from_strata.len() - 10],
            from_strata[from_strata.len() - 9],
        ]);
        assert_eq!(ver, 10, "Strata dumps RDB version 10 (Redis 7.0)");
        if v.len() <= 20 {
            // Redis only compresses longer strings: the object bytes must be identical.
            assert_eq!(
                from_strata[..from_strata.len() - 10],
                from_redis[..from_redis.len() - 10],
                "DUMP body of value {n} differs from redis-server's"
            );
        }
        if redis_version < ver {
            // An older redis-server refuses a newer RDB version whatever the contents; stamp
            // its own version on the same bytes so the object itself is still checked.
            if n == 0 {
                println!(
                    "NOTE: redis-server speaks RDB {redis_version} (< 7.0); re-stamping Strata's payloads"
                );
            }
            let body = from_strata[..from_strata.len() - 10].to_vec();
            from_strata = payload(&body, redis_version);
        }
        let dst = format!("back{n}");
        restore(&mut rc, &dst, 0, &from_strata, &[])
            .unwrap_or_else(|err| panic!("redis-server refused Strata's payload {n}: {err}"));
        let got = get_bytes(&mut rc, &dst);
        assert_eq!(
            &got, v,
            "value {n} restored into redis-server from Strata's DUMP"
        );
    }
}

/// Small collections made by redis-server travel both ways through DUMP/RESTORE: Strata takes
/// Redis' packed blocks as they are, answers their TYPE and OBJECT ENCODING, and hands back
/// payloads redis-server restores to the same contents.
#[test]
fn small_collections_move_between_redis_and_strata_by_dump_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let mut rc = real.client();
    let s = server();
    let mut c = s.client();
    let redis_version = {
        let _: () = q(&mut rc, &["SET", "probe", "x"]);
        let p = dump(&mut rc, "probe");
        u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]])
    };
    // (key, command that makes it, its TYPE, Redis 7.0's OBJECT ENCODING, a read back).
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, &'a str, &'a [&'a str]);
    let cases: &[Case] = &[
        (
            "h",
            &["HSET", "h", "a", "1", "bb", "hello", "n", "-70000"],
            "hash",
            "listpack",
            &["HGETALL", "h"],
        ),
        (
            "l",
            &["RPUSH", "l", "x", "1", "", "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"],
            "list",
            "quicklist",
            &["LRANGE", "l", "0", "-1"],
        ),
        (
            "si",
            &["SADD", "si", "3", "-1", "70000"],
            "set",
            "intset",
            &["SMEMBERS", "si"],
        ),
        (
            "z",
            &["ZADD", "z", "1.5", "a", "-2", "b", "3", "c"],
            "zset",
            "listpack",
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        ),
    ];
    for (key, make, ty, _, read) in cases {
        let _: redis::Value = redis::cmd(make[0]).arg(&make[1..]).query(&mut rc).unwrap();
        let from_redis = dump(&mut rc, key);
        restore(&mut c, key, 0, &from_redis, &[])
            .unwrap_or_else(|e| panic!("Strata refused redis-server's {ty} payload: {e}"));
        assert_eq!(q::<String>(&mut c, &["TYPE", key]), *ty);
        let encoding: String = q(&mut c, &["OBJECT", "ENCODING", key]);
        let redis_encoding: String = q(&mut rc, &["OBJECT", "ENCODING", key]);
        // As Redis 7.0, which reports every list as "quicklist" (a small one is a quicklist
        // of one listpack node).
        assert_eq!(encoding, redis_encoding, "{ty}");
        // Strata's DUMP restores into redis-server to the same contents.
        let mut from_strata = dump(&mut c, key);
        assert!(check_crc(&from_strata));
        if redis_version < 11 {
            let body = from_strata[..from_strata.len() - 10].to_vec();
            from_strata = payload(&body, redis_version);
        }
        let back = format!("back:{key}");
        restore(&mut rc, &back, 0, &from_strata, &[])
            .unwrap_or_else(|e| panic!("redis-server refused Strata's {ty} payload: {e}"));
        let mut read_back: Vec<&str> = read.to_vec();
        let want: redis::Value = redis::cmd(read_back[0])
            .arg(&read_back[1..])
            .query(&mut rc)
            .unwrap();
        read_back[1] = &back;
        let got: redis::Value = redis::cmd(read_back[0])
            .arg(&read_back[1..])
            .query(&mut rc)
            .unwrap();
        assert_eq!(got, want, "{ty} back in redis-server");
        // A damaged block behind a good checksum is refused, never stored.
        let mut bad = from_redis[..from_redis.len() - 10].to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let bad = payload(&bad, redis_version.min(11));
        let err = restore(&mut c, "bad", 0, &bad, &[]).unwrap_err();
        assert!(err.to_string().contains("Bad data format"), "{ty}: {err}");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", "bad"]), 0);
    }
    // A hashtable-encoded hash (RDB type 4) moves both ways too, as a hashtable.
    let big: Vec<String> = (0..600).map(|i| format!("f{i}")).collect();
    let mut hset = redis::cmd("HSET");
    hset.arg("big");
    for f in &big {
        hset.arg(f).arg(f);
    }
    let _: i64 = hset.query(&mut rc).unwrap();
    restore(&mut c, "big", 0, &dump(&mut rc, "big"), &[]).expect("a large hash restores");
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "big"]),
        "hashtable"
    );
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 600);
    assert_eq!(q::<String>(&mut c, &["HGET", "big", "f599"]), "f599");
    let mut from_strata = dump(&mut c, "big");
    assert_eq!(from_strata[0], 4, "RDB_TYPE_HASH");
    if redis_version < 11 {
        let body = from_strata[..from_strata.len() - 10].to_vec();
        from_strata = payload(&body, redis_version);
    }
    restore(&mut rc, "big:back", 0, &from_strata, &[]).expect("redis-server takes it");
    let mut want: Vec<String> = q(&mut rc, &["HGETALL", "big"]);
    let mut got: Vec<String> = q(&mut rc, &["HGETALL", "big:back"]);
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(
        q::<String>(&mut rc, &["OBJECT", "ENCODING", "big:back"]),
        "hashtable"
    );
}

// ---------------------------------------------------------------------------------------------
// KEYS / SCAN / RANDOMKEY / DBSIZE / FLUSH / SWAPDB
// ---------------------------------------------------------------------------------------------

#[test]
fn keys_patterns() {
    let s = server();
    let mut c = s.client();
    let all = [
        "hello", "hallo", "hxllo", "hllo", "heeeello", "a*b", "axb", "h[llo", "HELLO", "foo:1",
        "foo:2", "foo:10",
    ];
    let mut mset = redis::cmd("MSET");
    for k in all {
        mset.arg(k).arg("1");
    }
    let _: () = mset.query(&mut c).unwrap();
    let cases: &[(&str, &[&str])] = &[
        ("h?llo", &["h[llo", "hallo", "hello", "hxllo"]),
        (
            "h*llo",
            &["h[llo", "hallo", "heeeello", "hello", "hllo", "hxllo"],
        ),
        ("h[ae]llo", &["hallo", "hello"]),
        ("h[^e]llo", &["h[llo", "hallo", "hxllo"]),
        ("h[a-b]llo", &["hallo"]),
        ("h[e-a]llo", &["hallo", "hello"]),
        ("a\\*b", &["a*b"]),
        ("a*b", &["a*b", "axb"]),
        ("foo:?", &["foo:1", "foo:2"]),
        ("foo:*", &["foo:1", "foo:10", "foo:2"]),
        ("h\\[llo", &["h[llo"]),
        ("HELLO", &["HELLO"]),
        ("nomatch*", &[]),
        ("h[a-", &[]),
    ];
    for (pat, want) in cases {
        let got: Vec<String> = q(&mut c, &["KEYS", pat]);
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(sorted(got), sorted(want), "KEYS {pat}");
    }
    let got: Vec<String> = q(&mut c, &["KEYS", "*"]);
    let want: Vec<String> = all.iter().map(|s| s.to_string()).collect();
    assert_eq!(sorted(got), sorted(want));
    let mut raw = s.raw();
    rt(&mut raw, &["KEYS", "nomatch"], "*0\r\n");
    rt(&mut raw, &["KEYS", "foo:1"], "*1\r\n$5\r\nfoo:1\r\n");
    rt(&mut raw, &["KEYS"], &wrong_args("keys"));
    // KEYS only sees the selected db.
    rt(&mut raw, &["SELECT", "3"], OK);
    rt(&mut raw, &["KEYS", "*"], "*0\r\n");
}

#[test]
fn scan_full_iteration_match_count_type() {
    let s = server();
    let mut c = s.client();
    let mut pipe = redis::pipe();
    for n in 0..1000 {
        pipe.cmd("SET").arg(format!("key:{n}")).arg(n).ignore();
    }
    for n in 0..50 {
        pipe.cmd("SET").arg(format!("other:{n}")).arg(n).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();

    for extra in [
        &[][..],
        &["COUNT", "1"][..],
        &["COUNT", "7"][..],
        &["COUNT", "1000"][..],
    ] {
        let got = scan_all(&mut c, extra);
        assert_eq!(
            got.len(),
            1050,
            "SCAN {extra:?} returned {} keys",
            got.len()
        );
        let set: HashSet<&String> = got.iter().collect();
        assert_eq!(set.len(), 1050, "SCAN {extra:?} repeated keys");
    }
    let got = scan_all(&mut c, &["MATCH", "other:*", "COUNT", "13"]);
    let want: Vec<String> = (0..50).map(|n| format!("other:{n}")).collect();
    assert_eq!(sorted(got), sorted(want));
    let got = scan_all(&mut c, &["MATCH", "key:99?"]);
    let want: Vec<String> = (990..1000).map(|n| format!("key:{n}")).collect();
    assert_eq!(sorted(got), sorted(want));
    let got = scan_all(&mut c, &["TYPE", "string", "COUNT", "100"]);
    assert_eq!(got.len(), 1050);
    let got = scan_all(&mut c, &["TYPE", "STRING", "MATCH", "other:1*"]);
    assert_eq!(got.len(), 11);
    for t in ["list", "hash", "set", "zset", "stream", "nosuchtype"] {
        let got = scan_all(&mut c, &["TYPE", t]);
        assert!(got.is_empty(), "SCAN TYPE {t}: {got:?}");
    }
    // COUNT is a hint, but a large one returns everything in one call here.
    let (cursor, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0", "COUNT", "100000"]);
    assert_eq!(cursor, "0");
    assert_eq!(keys.len(), 1050);

    let mut raw = s.raw();
    rt(&mut raw, &["SCAN", "abc"], &e("ERR invalid cursor"));
    rt(
        &mut raw,
        &["SCAN", "18446744073709551616"],
        &e("ERR invalid cursor"),
    );
    rt(&mut raw, &["SCAN", " 1"], &e("ERR invalid cursor"));
    rt(&mut raw, &["SCAN", "0", "COUNT", "0"], SYNTAX);
    rt(&mut raw, &["SCAN", "0", "COUNT", "-1"], SYNTAX);
    rt(&mut raw, &["SCAN", "0", "COUNT", "abc"], NOT_INT);
    rt(&mut raw, &["SCAN", "0", "MATCH"], SYNTAX);
    rt(&mut raw, &["SCAN", "0", "foo", "bar"], SYNTAX);
    rt(&mut raw, &["SCAN"], &wrong_args("scan"));
    rt(&mut raw, &["SELECT", "5"], OK);
    rt(&mut raw, &["SCAN", "0"], "*2\r\n$1\r\n0\r\n*0\r\n");
}

/// Redis reads the cursor with strtoul, which takes a leading '-' (wrapping around).
#[test]
fn scan_cursor_is_parsed_like_strtoul() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SCAN", "-1"], "*2\r\n$1\r\n0\r\n*0\r\n");
}

#[test]
fn randomkey_dbsize() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["RANDOMKEY"], NIL);
    rt(&mut raw, &["DBSIZE"], &i(0));
    rt(&mut raw, &["SET", "only", "1"], OK);
    rt(&mut raw, &["RANDOMKEY"], &b("only"));
    rt(&mut raw, &["DBSIZE"], &i(1));
    let mut c = s.client();
    let mut pipe = redis::pipe();
    for n in 0..200 {
        pipe.cmd("SET").arg(format!("r{n}")).arg(n).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    rt(&mut raw, &["DBSIZE"], &i(201));
    let mut seen = HashSet::new();
    for _ in 0..200 {
        let k: String = q(&mut c, &["RANDOMKEY"]);
        assert!(
            k == "only" || (k.starts_with('r') && k[1..].parse::<u32>().unwrap() < 200),
            "{k}"
        );
        seen.insert(k);
    }
    assert!(
        seen.len() > 20,
        "RANDOMKEY is hardly random: {} distinct",
        seen.len()
    );
    // Other dbs.
    rt(&mut raw, &["SELECT", "1"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    rt(&mut raw, &["RANDOMKEY"], NIL);
    rt(&mut raw, &["DBSIZE", "x"], &wrong_args("dbsize"));
    rt(&mut raw, &["RANDOMKEY", "x"], &wrong_args("randomkey"));
}

#[test]
fn flushdb_and_flushall() {
    let s = server();
    let mut raw = s.raw();
    let fill = |raw: &mut Raw| {
        for db in ["0", "1", "2"] {
            rt(raw, &["SELECT", db], OK);
            rt(raw, &["MSET", "a", "1", "b", "2", "c", "3"], OK);
        }
        rt(raw, &["SELECT", "1"], OK);
    };
    fill(&mut raw);
    rt(&mut raw, &["FLUSHDB"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    rt(&mut raw, &["SELECT", "0"], OK);
    rt(&mut raw, &["DBSIZE"], &i(3));
    rt(&mut raw, &["FLUSHDB", "ASYNC"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    rt(&mut raw, &["SELECT", "2"], OK);
    rt(&mut raw, &["FLUSHDB", "sync"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    fill(&mut raw);
    rt(&mut raw, &["FLUSHALL"], OK);
    for db in ["0", "1", "2"] {
        rt(&mut raw, &["SELECT", db], OK);
        rt(&mut raw, &["DBSIZE"], &i(0));
    }
    fill(&mut raw);
    rt(&mut raw, &["FLUSHALL", "ASYNC"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    fill(&mut raw);
    rt(&mut raw, &["FLUSHALL", "SYNC"], OK);
    rt(&mut raw, &["SELECT", "0"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["FLUSHDB", "foo"], SYNTAX);
    rt(&mut raw, &["FLUSHDB", "SYNC", "ASYNC"], SYNTAX);
    rt(&mut raw, &["FLUSHALL", "foo"], SYNTAX);
    rt(&mut raw, &["FLUSHALL", "ASYNC", "ASYNC"], SYNTAX);
    rt(&mut raw, &["DBSIZE"], &i(1));
}

#[test]
fn swapdb() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "zero", "EX", "100"], OK);
    rt(&mut raw, &["SELECT", "1"], OK);
    rt(&mut raw, &["MSET", "k", "one", "j", "one"], OK);
    rt(&mut raw, &["SWAPDB", "0", "1"], OK);
    // This connection still has db 1 selected, which now holds db 0's keys.
    rt(&mut raw, &["GET", "k"], &b("zero"));
    rt(&mut raw, &["TTL", "k"], &i(100));
    rt(&mut raw, &["DBSIZE"], &i(1));
    let mut other = s.raw();
    rt(
        &mut other,
        &["MGET", "k", "j"],
        "*2\r\n$3\r\none\r\n$3\r\none\r\n",
    );
    rt(&mut raw, &["SWAPDB", "1", "1"], OK);
    rt(&mut raw, &["GET", "k"], &b("zero"));
    rt(&mut raw, &["SWAPDB", "0", "16"], DB_RANGE);
    rt(&mut raw, &["SWAPDB", "-1", "0"], DB_RANGE);
    rt(
        &mut raw,
        &["SWAPDB", "a", "0"],
        &e("ERR invalid first DB index"),
    );
    rt(
        &mut raw,
        &["SWAPDB", "0", "b"],
        &e("ERR invalid second DB index"),
    );
    rt(&mut raw, &["SWAPDB", "0"], &wrong_args("swapdb"));
    rt(&mut raw, &["SWAPDB", "1", "0"], OK);
    rt(&mut raw, &["GET", "k"], &b("one"));
}

// ---------------------------------------------------------------------------------------------
// Expiry
// ---------------------------------------------------------------------------------------------

#[test]
fn lazy_expiry_on_access() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"], OK);
    rt(&mut raw, &["SET", "k", "v", "PX", "50"], OK);
    rt(&mut raw, &["SET", "keep", "v"], OK);
    rt(&mut raw, &["GET", "k"], &b("v"));
    std::thread::sleep(Duration::from_millis(100));
    // Not reaped yet (active expiry is off), but invisible to every read.
    rt(&mut raw, &["DBSIZE"], &i(2));
    rt(&mut raw, &["GET", "k"], NIL);
    rt(&mut raw, &["DBSIZE"], &i(1));
    for (cmd, reply) in [
        ("EXISTS", i(0)),
        ("TTL", i(-2)),
        ("PTTL", i(-2)),
        ("TYPE", "+none\r\n".to_string()),
        ("STRLEN", i(0)),
    ] {
        rt(&mut raw, &["SET", "k", "v", "PX", "30"], OK);
        std::thread::sleep(Duration::from_millis(60));
        rt(&mut raw, &[cmd, "k"], &reply);
    }
    // Writes see the key as gone too.
    rt(&mut raw, &["SET", "k", "v", "PX", "30"], OK);
    std::thread::sleep(Duration::from_millis(60));
    rt(&mut raw, &["SETNX", "k", "new"], &i(1));
    rt(&mut raw, &["TTL", "k"], &i(-1));
    rt(&mut raw, &["SET", "c", "5", "PX", "30"], OK);
    std::thread::sleep(Duration::from_millis(60));
    rt(&mut raw, &["INCR", "c"], &i(1));
    rt(&mut raw, &["SET", "a", "x", "PX", "30"], OK);
    std::thread::sleep(Duration::from_millis(60));
    rt(&mut raw, &["APPEND", "a", "y"], &i(1));
    rt(&mut raw, &["SET", "r", "x", "PX", "30"], OK);
    std::thread::sleep(Duration::from_millis(60));
    rt(&mut raw, &["RENAME", "r", "r2"], NO_KEY);
    rt(&mut raw, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"], OK);
}

/// Sets `vol:N` with PX `px` and `keep:N` without a TTL (value N) for N below `count`, in one
/// pipeline.
fn set_volatile_and_kept(c: &mut Connection, count: usize, px: u64) {
    let mut pipe = redis::pipe();
    for n in 0..count {
        pipe.cmd("SET")
            .arg(format!("vol:{n}"))
            .arg(n)
            .arg("PX")
            .arg(px)
            .ignore();
        pipe.cmd("SET").arg(format!("keep:{n}")).arg(n).ignore();
    }
    let _: () = pipe.query(c).unwrap();
}

#[test]
fn active_expiry_reaps_untouched_keys() {
    let s = server();
    let mut c = s.client();
    set_volatile_and_kept(&mut c, 500, 100);
    let set_at = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(set_at.elapsed() >= Duration::from_millis(1500));
    // Nothing read the volatile keys: only the active cycle can have removed them.
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 500, "DBSIZE 1.5 s after 500 keys with PX 100 expired");
    let keys: Vec<String> = q(&mut c, &["KEYS", "*"]);
    assert_eq!(keys.len(), 500);
    assert!(keys.iter().all(|k| k.starts_with("keep:")));
    let scanned = scan_all(&mut c, &["COUNT", "50"]);
    let want: Vec<String> = (0..500).map(|n| format!("keep:{n}")).collect();
    assert_eq!(sorted(scanned), sorted(want));
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(
        info.contains("db0:keys=500,expires=0,"),
        "INFO keyspace: {info}"
    );
}

/// A one-shard server sleeps in epoll between requests rather than in glommio (see
/// `net::poller`); its timers, the active expiry cycle among them, must still run while a
/// client keeps it busy one request at a time.
#[test]
fn active_expiry_runs_while_a_client_sends_one_request_at_a_time() {
    let s = server_with_threads(1);
    let mut c = s.client();
    set_volatile_and_kept(&mut c, 500, 100);
    let mut busy = s.client();
    let start = Instant::now();
    let mut pings = 0u32;
    while start.elapsed() < Duration::from_millis(1500) {
        let pong: String = q(&mut busy, &["PING"]);
        assert_eq!(pong, "PONG");
        pings += 1;
    }
    assert!(pings > 500, "only {pings} PINGs answered in 1.5 s");
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 500, "DBSIZE 1.5 s after 500 keys with PX 100 expired");
    assert_eq!(info_u64(&mut c, "stats", "expired_keys"), 500);
}

#[test]
fn keys_and_scan_never_return_expired_keys() {
    let s = server();
    let mut c = s.client();
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    set_volatile_and_kept(&mut c, 300, 40);
    std::thread::sleep(Duration::from_millis(80));
    // Still in the table, since nothing reaped them...
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 600);
    // ... but never listed.
    let keys: Vec<String> = q(&mut c, &["KEYS", "*"]);
    assert_eq!(keys.len(), 300, "KEYS * returned expired keys");
    assert!(keys.iter().all(|k| k.starts_with("keep:")));
    let keys: Vec<String> = q(&mut c, &["KEYS", "vol:*"]);
    assert!(keys.is_empty());
    let scanned = scan_all(&mut c, &["MATCH", "vol:*", "COUNT", "20"]);
    assert!(
        scanned.is_empty(),
        "SCAN returned expired keys: {scanned:?}"
    );
    let scanned = scan_all(&mut c, &["COUNT", "20"]);
    assert_eq!(scanned.len(), 300);
    assert!(scanned.iter().all(|k| k.starts_with("keep:")));
    let scanned = scan_all(&mut c, &["TYPE", "string"]);
    assert_eq!(scanned.len(), 300);
    for _ in 0..50 {
        let k: String = q(&mut c, &["RANDOMKEY"]);
        assert!(k.starts_with("keep:"), "RANDOMKEY returned expired {k}");
    }
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}

/// Redis' SCAN deletes the expired keys it comes across (like any other read), so after a full
/// SCAN they no longer count in DBSIZE even with active expiry off.
#[test]
fn scan_deletes_the_expired_keys_it_meets() {
    let s = server();
    let mut c = s.client();
    let _: () = q(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    set_volatile_and_kept(&mut c, 100, 30);
    std::thread::sleep(Duration::from_millis(60));
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 200);
    let scanned = scan_all(&mut c, &["COUNT", "1000"]);
    assert_eq!(scanned.len(), 100);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 100, "DBSIZE after a full SCAN met every expired key");
}

/// Reads racing a TTL: while the deadline is surely ahead the value comes back, once it is
/// surely past it never does again.
#[test]
fn a_key_never_outlives_its_deadline() {
    let s = server();
    let mut c = s.client();
    let mut stats: HashMap<&str, u32> = HashMap::new();
    for round in 0..5 {
        let key = format!("race{round}");
        let before = Instant::now();
        let _: () = q(&mut c, &["SET", &key, "old", "PX", "150"]);
        let after = Instant::now();
        // The server's deadline lies in [before + 150 ms, after + 150 ms].
        let surely_alive = before + Duration::from_millis(149);
        let surely_dead = after + Duration::from_millis(151);
        let mut gone = false;
        loop {
            let sent = Instant::now();
            let v: Option<String> = q(&mut c, &["GET", &key]);
            let received = Instant::now();
            match v {
                Some(v) => {
                    assert_eq!(v, "old");
                    assert!(!gone, "{key} came back after it was gone");
                    assert!(
                        sent < surely_dead,
                        "{key} read {:?} after its deadline",
                        sent - surely_dead
                    );
                    *stats.entry("alive").or_default() += 1;
                }
                None => {
                    assert!(
                        received > surely_alive,
                        "{key} vanished {:?} before its deadline",
                        surely_alive - received
                    );
                    gone = true;
                    *stats.entry("gone").or_default() += 1;
                }
            }
            if sent > surely_dead + Duration::from_millis(30) {
                break;
            }
        }
        assert!(gone);
        let ttl: i64 = q(&mut c, &["PTTL", &key]);
        assert_eq!(ttl, -2);
    }
    assert!(stats["alive"] > 0 && stats["gone"] > 0, "{stats:?}");
}

#[test]
fn info_keyspace_estimates_the_average_ttl() {
    let s = server();
    let mut c = s.client();
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("SET")
            .arg(format!("t:{i}"))
            .arg("v")
            .arg("EX")
            .arg(1000)
            .ignore();
        p.cmd("SET").arg(format!("p:{i}")).arg("v").ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    // The estimate comes from the active-expiry sweep (10 times a second by default).
    let field = |c: &mut Connection| -> u64 {
        let info: String = q(c, &["INFO", "keyspace"]);
        let line = info
            .lines()
            .find(|l| l.starts_with("db0:"))
            .unwrap_or_else(|| panic!("no db0 in {info}"));
        assert!(
            line.starts_with("db0:keys=400,expires=200,avg_ttl="),
            "{line}"
        );
        line.rsplit('=').next().unwrap().parse().unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut avg = field(&mut c);
    while avg == 0 {
        assert!(Instant::now() < deadline, "avg_ttl stayed 0");
        std::thread::sleep(Duration::from_millis(50));
        avg = field(&mut c);
    }
    assert!(
        (990_000..=1_000_000).contains(&avg),
        "avg_ttl {avg} ms for keys set with EX 1000"
    );
    // Without TTL keys it is 0 again.
    let _: () = q(&mut c, &["FLUSHALL"]);
    let _: () = q(&mut c, &["SET", "plain", "v"]);
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=1,expires=0,avg_ttl=0"), "{info}");
}

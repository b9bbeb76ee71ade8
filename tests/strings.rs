//! String commands against the real binary, checked against Redis 7.2's replies: GET/SET and
//! every SET option, SETNX/SETEX/PSETEX, GETSET/GETDEL/GETEX, MGET/MSET/MSETNX, APPEND/STRLEN,
//! the counters, GETRANGE/SUBSTR/SETRANGE, LCS, binary safety and big values.
//!
//! Error texts and reply types are checked byte for byte on a raw connection; bulk data goes
//! through the `redis` crate.
mod common;

use common::*;

// ---------------------------------------------------------------------------------------------
// GET / SET
// ---------------------------------------------------------------------------------------------

#[test]
fn get_and_set_basics() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["GET", "missing"], NIL);
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["GET", "k"], &b("v"));
    rt(&mut raw, &["SET", "k", "other"], OK);
    rt(&mut raw, &["GET", "k"], &b("other"));
    rt(&mut raw, &["SET", "empty", ""], OK);
    rt(&mut raw, &["GET", "empty"], "$0\r\n\r\n");
    rt(&mut raw, &["EXISTS", "empty"], &i(1));
    // Lower-case command names and options work the same.
    rt(&mut raw, &["set", "k", "x", "nx"], NIL);
    rt(&mut raw, &["get", "k"], &b("other"));
    // Arity.
    rt(&mut raw, &["GET"], &wrong_args("get"));
    rt(&mut raw, &["GET", "a", "b"], &wrong_args("get"));
    rt(&mut raw, &["SET", "k"], &wrong_args("set"));
}

#[test]
fn set_nx_and_xx() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "1", "XX"], NIL);
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["SET", "k", "1", "NX"], OK);
    rt(&mut raw, &["SET", "k", "2", "NX"], NIL);
    rt(&mut raw, &["GET", "k"], &b("1"));
    rt(&mut raw, &["SET", "k", "3", "XX"], OK);
    rt(&mut raw, &["GET", "k"], &b("3"));
    // NX/XX keep or drop the TTL like plain SET does when they store.
    rt(&mut raw, &["SET", "t", "1", "EX", "100"], OK);
    rt(&mut raw, &["SET", "t", "2", "XX"], OK);
    rt(&mut raw, &["TTL", "t"], &i(-1));
    rt(&mut raw, &["SET", "t", "3", "XX", "EX", "50"], OK);
    rt(&mut raw, &["TTL", "t"], &i(50));
}

#[test]
fn set_get_option() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v1", "GET"], NIL);
    rt(&mut raw, &["GET", "k"], &b("v1"));
    rt(&mut raw, &["SET", "k", "v2", "GET"], &b("v1"));
    rt(&mut raw, &["GET", "k"], &b("v2"));
    // GET with NX on an existing key: the old value, and nothing stored.
    rt(&mut raw, &["SET", "k", "v3", "GET", "NX"], &b("v2"));
    rt(&mut raw, &["GET", "k"], &b("v2"));
    // GET with XX on an existing key: old value, new one stored.
    rt(&mut raw, &["SET", "k", "v4", "XX", "GET"], &b("v2"));
    rt(&mut raw, &["GET", "k"], &b("v4"));
    // GET with XX on a missing key: nil, not created.
    rt(&mut raw, &["SET", "m", "v", "GET", "XX"], NIL);
    rt(&mut raw, &["EXISTS", "m"], &i(0));
    // GET with NX on a missing key: nil, created.
    rt(&mut raw, &["SET", "n", "v", "NX", "GET"], NIL);
    rt(&mut raw, &["GET", "n"], &b("v"));
    // GET with an expire option.
    rt(&mut raw, &["SET", "k", "v5", "GET", "EX", "100"], &b("v4"));
    rt(&mut raw, &["TTL", "k"], &i(100));
}

#[test]
fn set_expire_options() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "ex", "v", "EX", "100"], OK);
    rt(&mut raw, &["TTL", "ex"], &i(100));

    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "px", "v", "PX", "100000"]);
    let pttl: i64 = q(&mut c, &["PTTL", "px"]);
    assert!(
        (99_000..=100_000).contains(&pttl),
        "PTTL after PX 100000: {pttl}"
    );

    let at = now_ms() as i64 / 1000 + 1000;
    rt(&mut raw, &["SET", "exat", "v", "EXAT", &at.to_string()], OK);
    rt(&mut raw, &["EXPIRETIME", "exat"], &i(at));
    rt(&mut raw, &["PEXPIRETIME", "exat"], &i(at * 1000));

    let pat = now_ms() as i64 + 500_000;
    rt(
        &mut raw,
        &["SET", "pxat", "v", "PXAT", &pat.to_string()],
        OK,
    );
    rt(&mut raw, &["PEXPIRETIME", "pxat"], &i(pat));

    // KEEPTTL keeps it, a plain SET drops it.
    rt(&mut raw, &["SET", "exat", "w", "KEEPTTL"], OK);
    rt(&mut raw, &["GET", "exat"], &b("w"));
    rt(&mut raw, &["EXPIRETIME", "exat"], &i(at));
    rt(&mut raw, &["SET", "exat", "x"], OK);
    rt(&mut raw, &["TTL", "exat"], &i(-1));
    // KEEPTTL on a key without TTL, and on a missing key.
    rt(&mut raw, &["SET", "nottl", "v", "KEEPTTL"], OK);
    rt(&mut raw, &["TTL", "nottl"], &i(-1));
    // Options are case-insensitive.
    rt(&mut raw, &["SET", "lc", "v", "ex", "7"], OK);
    rt(&mut raw, &["TTL", "lc"], &i(7));
    // The largest PXAT is accepted.
    rt(
        &mut raw,
        &["SET", "far", "v", "PXAT", "9223372036854775807"],
        OK,
    );
    rt(&mut raw, &["PEXPIRETIME", "far"], &i(i64::MAX));
}

#[test]
fn set_exat_in_the_past_deletes_the_key() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["SET", "k", "w", "EXAT", "1"], OK);
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["GET", "k"], NIL);
    rt(&mut raw, &["SET", "k", "v"], OK);
    let past = (now_ms() - 10_000).to_string();
    rt(&mut raw, &["SET", "k", "w", "PXAT", &past], OK);
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    // A missing key stays missing.
    rt(&mut raw, &["SET", "n", "w", "EXAT", "1"], OK);
    rt(&mut raw, &["EXISTS", "n"], &i(0));
    rt(&mut raw, &["DBSIZE"], &i(0));
    // With GET: the old value comes back and the key is gone.
    rt(&mut raw, &["SET", "g", "old"], OK);
    rt(
        &mut raw,
        &["SET", "g", "new", "GET", "EXAT", "1"],
        &b("old"),
    );
    rt(&mut raw, &["EXISTS", "g"], &i(0));
}

#[test]
fn set_syntax_and_expire_errors() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "orig"], OK);
    let invalid = e("ERR invalid expire time in 'set' command");
    rt(&mut raw, &["SET", "k", "v", "NX", "XX"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "XX", "NX"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "EX", "0"], &invalid);
    rt(&mut raw, &["SET", "k", "v", "EX", "-5"], &invalid);
    rt(&mut raw, &["SET", "k", "v", "PX", "0"], &invalid);
    rt(&mut raw, &["SET", "k", "v", "PX", "-1"], &invalid);
    rt(&mut raw, &["SET", "k", "v", "EXAT", "0"], &invalid);
    rt(&mut raw, &["SET", "k", "v", "PXAT", "-1"], &invalid);
    rt(&mut raw, &["SET", "k", "v", "EX", "abc"], NOT_INT);
    rt(&mut raw, &["SET", "k", "v", "PX", "1.5"], NOT_INT);
    rt(&mut raw, &["SET", "k", "v", "EX", ""], NOT_INT);
    rt(&mut raw, &["SET", "k", "v", "EX", "10", "PX", "10"], SYNTAX);
    rt(
        &mut raw,
        &["SET", "k", "v", "EX", "10", "EXAT", "10"],
        SYNTAX,
    );
    rt(
        &mut raw,
        &["SET", "k", "v", "PXAT", "10", "PX", "10"],
        SYNTAX,
    );
    rt(&mut raw, &["SET", "k", "v", "KEEPTTL", "EX", "10"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "EX", "10", "KEEPTTL"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "PX", "100", "KEEPTTL"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "EX"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "PXAT"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "foo"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "PERSIST"], SYNTAX);
    // Overflowing expire times.
    rt(
        &mut raw,
        &["SET", "k", "v", "EXAT", "9999999999999999"],
        &invalid,
    );
    rt(
        &mut raw,
        &["SET", "k", "v", "EX", "9223372036854775"],
        &invalid,
    );
    rt(
        &mut raw,
        &["SET", "k", "v", "PX", "9223372036854775807"],
        &invalid,
    );
    rt(
        &mut raw,
        &["SET", "k", "v", "EX", "9223372036854775808"],
        NOT_INT,
    );
    // None of that touched the key.
    rt(&mut raw, &["GET", "k"], &b("orig"));
    rt(&mut raw, &["TTL", "k"], &i(-1));
}

/// Redis parses every option before it looks at the expire value, so a syntax error wins over
/// a bad number.
#[test]
fn set_syntax_error_wins_over_bad_expire_value() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v", "EX", "abc", "foo"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v", "EX", "0", "foo"], SYNTAX);
    rt(
        &mut raw,
        &["SET", "k", "v", "EX", "abc", "NX", "XX"],
        SYNTAX,
    );
    rt(&mut raw, &["EXISTS", "k"], &i(0));
}

/// Redis accepts an option given twice (the last expire value wins).
#[test]
fn set_repeated_options_are_accepted() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "k", "v", "EX", "10", "EX", "20"], OK);
    rt(&mut raw, &["TTL", "k"], &i(20));
    rt(
        &mut raw,
        &["SET", "k", "v", "PX", "5000", "PX", "10000"],
        OK,
    );
    rt(&mut raw, &["TTL", "k"], &i(10));
    rt(&mut raw, &["SET", "k", "v", "NX", "NX"], NIL);
    rt(&mut raw, &["SET", "k", "w", "XX", "XX"], OK);
    rt(&mut raw, &["SET", "k", "x", "GET", "GET"], &b("w"));
    rt(&mut raw, &["SET", "k", "y", "KEEPTTL", "KEEPTTL"], OK);
    rt(&mut raw, &["GET", "k"], &b("y"));
}

#[test]
fn setnx_setex_psetex() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SETNX", "k", "1"], &i(1));
    rt(&mut raw, &["SETNX", "k", "2"], &i(0));
    rt(&mut raw, &["GET", "k"], &b("1"));
    rt(&mut raw, &["SETNX", "k"], &wrong_args("setnx"));

    rt(&mut raw, &["SETEX", "e", "100", "v"], OK);
    rt(&mut raw, &["GET", "e"], &b("v"));
    rt(&mut raw, &["TTL", "e"], &i(100));
    rt(
        &mut raw,
        &["SETEX", "e", "0", "v"],
        &e("ERR invalid expire time in 'setex' command"),
    );
    rt(
        &mut raw,
        &["SETEX", "e", "-1", "v"],
        &e("ERR invalid expire time in 'setex' command"),
    );
    rt(&mut raw, &["SETEX", "e", "abc", "v"], NOT_INT);
    rt(&mut raw, &["SETEX", "e", "10"], &wrong_args("setex"));
    rt(&mut raw, &["TTL", "e"], &i(100));

    rt(&mut raw, &["PSETEX", "p", "100000", "v"], OK);
    rt(&mut raw, &["GET", "p"], &b("v"));
    let mut c = s.client();
    let pttl: i64 = q(&mut c, &["PTTL", "p"]);
    assert!(
        (99_000..=100_000).contains(&pttl),
        "PTTL after PSETEX: {pttl}"
    );
    rt(
        &mut raw,
        &["PSETEX", "p", "0", "v"],
        &e("ERR invalid expire time in 'psetex' command"),
    );
    rt(&mut raw, &["PSETEX", "p", "1.5", "v"], NOT_INT);
    // SETEX replaces an existing value and its TTL.
    rt(&mut raw, &["SETEX", "k", "5", "new"], OK);
    rt(&mut raw, &["GET", "k"], &b("new"));
    rt(&mut raw, &["TTL", "k"], &i(5));
}

#[test]
fn getset_and_getdel() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["GETSET", "k", "1"], NIL);
    rt(&mut raw, &["GET", "k"], &b("1"));
    rt(&mut raw, &["SET", "k", "old", "EX", "100"], OK);
    rt(&mut raw, &["GETSET", "k", "new"], &b("old"));
    rt(&mut raw, &["GET", "k"], &b("new"));
    // GETSET drops the TTL.
    rt(&mut raw, &["TTL", "k"], &i(-1));

    rt(&mut raw, &["GETDEL", "k"], &b("new"));
    rt(&mut raw, &["EXISTS", "k"], &i(0));
    rt(&mut raw, &["GETDEL", "k"], NIL);
    rt(&mut raw, &["GETDEL", "never"], NIL);
    rt(&mut raw, &["GETDEL"], &wrong_args("getdel"));
    rt(&mut raw, &["GETDEL", "a", "b"], &wrong_args("getdel"));
}

#[test]
fn getex_options() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["GETEX", "missing"], NIL);
    rt(&mut raw, &["GETEX", "missing", "EX", "10"], NIL);
    rt(&mut raw, &["EXISTS", "missing"], &i(0));
    rt(&mut raw, &["SET", "w", "1"], OK);
    rt(&mut raw, &["GETEX", "w"], &b("1"));
    rt(&mut raw, &["TTL", "w"], &i(-1));
    rt(&mut raw, &["GETEX", "w", "EX", "100"], &b("1"));
    rt(&mut raw, &["TTL", "w"], &i(100));
    // Plain GETEX leaves the TTL alone.
    rt(&mut raw, &["GETEX", "w"], &b("1"));
    rt(&mut raw, &["TTL", "w"], &i(100));
    rt(&mut raw, &["GETEX", "w", "PERSIST"], &b("1"));
    rt(&mut raw, &["TTL", "w"], &i(-1));
    rt(&mut raw, &["GETEX", "w", "PX", "50000"], &b("1"));
    rt(&mut raw, &["TTL", "w"], &i(50));
    let at = now_ms() as i64 / 1000 + 3000;
    rt(&mut raw, &["GETEX", "w", "EXAT", &at.to_string()], &b("1"));
    rt(&mut raw, &["EXPIRETIME", "w"], &i(at));
    let pat = now_ms() as i64 + 7_000_000;
    rt(&mut raw, &["GETEX", "w", "PXAT", &pat.to_string()], &b("1"));
    rt(&mut raw, &["PEXPIRETIME", "w"], &i(pat));

    // Errors leave the key alone.
    let invalid = e("ERR invalid expire time in 'getex' command");
    rt(&mut raw, &["GETEX", "w", "PX", "0"], &invalid);
    rt(&mut raw, &["GETEX", "w", "EX", "-1"], &invalid);
    rt(&mut raw, &["GETEX", "w", "EX", "abc"], NOT_INT);
    rt(&mut raw, &["GETEX", "w", "EX", "10", "PX", "10"], SYNTAX);
    rt(&mut raw, &["GETEX", "w", "PERSIST", "EX", "10"], SYNTAX);
    rt(&mut raw, &["GETEX", "w", "EX", "10", "PERSIST"], SYNTAX);
    rt(&mut raw, &["GETEX", "w", "KEEPTTL"], SYNTAX);
    rt(&mut raw, &["GETEX", "w", "NX"], SYNTAX);
    rt(&mut raw, &["GETEX", "w", "foo"], SYNTAX);
    rt(&mut raw, &["GETEX", "w", "EX"], SYNTAX);
    rt(&mut raw, &["PEXPIRETIME", "w"], &i(pat));
    rt(&mut raw, &["GETEX"], &wrong_args("getex"));

    // EXAT in the past: the value comes back and the key is deleted.
    rt(&mut raw, &["GETEX", "w", "EXAT", "1"], &b("1"));
    rt(&mut raw, &["EXISTS", "w"], &i(0));
}

/// Redis validates GETEX's expire value only once it has found the key: a missing key answers
/// nil whatever the number says.
#[test]
fn getex_missing_key_ignores_bad_expire_value() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["GETEX", "nokey", "EX", "abc"], NIL);
    rt(&mut raw, &["GETEX", "nokey", "EX", "0"], NIL);
    rt(&mut raw, &["GETEX", "nokey", "foo"], SYNTAX);
    rt(&mut raw, &["SET", "k", "v"], OK);
    rt(&mut raw, &["GETEX", "k", "EX", "abc", "foo"], SYNTAX);
}

/// Redis accepts the same GETEX option twice.
#[test]
fn getex_repeated_options_are_accepted() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "w", "1", "EX", "100"], OK);
    rt(&mut raw, &["GETEX", "w", "PERSIST", "PERSIST"], &b("1"));
    rt(&mut raw, &["TTL", "w"], &i(-1));
    rt(&mut raw, &["GETEX", "w", "EX", "10", "EX", "20"], &b("1"));
    rt(&mut raw, &["TTL", "w"], &i(20));
}

// ---------------------------------------------------------------------------------------------
// MGET / MSET / MSETNX
// ---------------------------------------------------------------------------------------------

#[test]
fn mget_and_mset() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["MSET", "a", "1", "b", "2", "c", "3"], OK);
    rt(
        &mut raw,
        &["MGET", "a", "nokey", "c", "a", "b"],
        "*5\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    rt(&mut raw, &["MGET", "nokey"], "*1\r\n$-1\r\n");
    let wrong = wrong_args("mset");
    rt(&mut raw, &["MSET", "a", "1", "b"], &wrong);
    rt(&mut raw, &["MSET", "a"], &wrong);
    rt(&mut raw, &["MSET"], &wrong);
    rt(&mut raw, &["MGET"], &wrong_args("mget"));
    // The failed MSET changed nothing.
    rt(&mut raw, &["GET", "a"], &b("1"));
    // The same key twice: the last value wins.
    rt(&mut raw, &["MSET", "d", "x", "d", "y"], OK);
    rt(&mut raw, &["GET", "d"], &b("y"));
    // MSET drops TTLs.
    rt(&mut raw, &["SET", "t", "v", "EX", "100"], OK);
    rt(&mut raw, &["MSET", "t", "w"], OK);
    rt(&mut raw, &["TTL", "t"], &i(-1));

    let mut c = s.client();
    let keys: Vec<String> = (0..100).map(|n| format!("key:{n}")).collect();
    let mut mset = redis::cmd("MSET");
    for k in &keys {
        mset.arg(k).arg(format!("val:{k}"));
    }
    let _: () = mset.query(&mut c).unwrap();
    let mut mget = redis::cmd("MGET");
    for k in keys.iter().rev() {
        mget.arg(k);
    }
    let got: Vec<Option<String>> = mget.query(&mut c).unwrap();
    let want: Vec<Option<String>> = keys
        .iter()
        .rev()
        .map(|k| Some(format!("val:{k}")))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn msetnx_all_or_nothing() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "a", "1"], OK);
    rt(&mut raw, &["MSETNX", "a", "x", "z", "2"], &i(0));
    rt(&mut raw, &["EXISTS", "z"], &i(0));
    rt(&mut raw, &["GET", "a"], &b("1"));
    rt(&mut raw, &["MSETNX", "x", "1", "y", "2"], &i(1));
    rt(
        &mut raw,
        &["MGET", "x", "y"],
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    rt(&mut raw, &["MSETNX", "x", "9", "new", "9"], &i(0));
    rt(&mut raw, &["EXISTS", "new"], &i(0));
    // The same new key twice: set, last value wins.
    rt(&mut raw, &["MSETNX", "q", "1", "q", "2"], &i(1));
    rt(&mut raw, &["GET", "q"], &b("2"));
}

#[test]
fn msetnx_odd_arguments_are_an_error() {
    let s = server();
    let mut raw = s.raw();
    let wrong = wrong_args("msetnx");
    rt(&mut raw, &["SET", "x", "1"], OK);
    rt(&mut raw, &["MSETNX", "x", "1", "y"], &wrong);
    rt(&mut raw, &["MSETNX", "f1", "1", "f2"], &wrong);
    rt(&mut raw, &["MSETNX", "f1"], &wrong);
    rt(&mut raw, &["EXISTS", "f1", "f2"], &i(0));
}

// ---------------------------------------------------------------------------------------------
// APPEND / STRLEN
// ---------------------------------------------------------------------------------------------

#[test]
fn append_and_strlen() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["STRLEN", "nk"], &i(0));
    rt(&mut raw, &["APPEND", "nk", "hello"], &i(5));
    rt(&mut raw, &["APPEND", "nk", " world"], &i(11));
    rt(&mut raw, &["GET", "nk"], &b("hello world"));
    rt(&mut raw, &["STRLEN", "nk"], &i(11));
    rt(&mut raw, &["APPEND", "nk", ""], &i(11));
    rt(&mut raw, &["APPEND", "e", ""], &i(0));
    rt(&mut raw, &["EXISTS", "e"], &i(1));
    rt(&mut raw, &["STRLEN", "e"], &i(0));
    // Integers are strings too.
    rt(&mut raw, &["SET", "n", "12345"], OK);
    rt(&mut raw, &["STRLEN", "n"], &i(5));
    rt(&mut raw, &["APPEND", "n", "6"], &i(6));
    rt(&mut raw, &["INCR", "n"], &i(123457));
    // APPEND keeps the TTL.
    rt(&mut raw, &["SET", "t", "a", "EX", "100"], OK);
    rt(&mut raw, &["APPEND", "t", "b"], &i(2));
    rt(&mut raw, &["TTL", "t"], &i(100));
    rt(&mut raw, &["APPEND", "t"], &wrong_args("append"));
    rt(&mut raw, &["STRLEN"], &wrong_args("strlen"));
}

// ---------------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------------

#[test]
fn incr_decr_family() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["INCR", "new1"], &i(1));
    rt(&mut raw, &["DECR", "new2"], &i(-1));
    rt(&mut raw, &["INCRBY", "new3", "-5"], &i(-5));
    rt(&mut raw, &["DECRBY", "new4", "7"], &i(-7));
    rt(&mut raw, &["SET", "n", "10"], OK);
    rt(&mut raw, &["INCR", "n"], &i(11));
    rt(&mut raw, &["DECR", "n"], &i(10));
    rt(&mut raw, &["INCRBY", "n", "5"], &i(15));
    rt(&mut raw, &["DECRBY", "n", "20"], &i(-5));
    rt(&mut raw, &["INCRBY", "n", "0"], &i(-5));
    rt(&mut raw, &["GET", "n"], &b("-5"));
    // Counters keep the TTL.
    rt(&mut raw, &["EXPIRE", "n", "100"], &i(1));
    rt(&mut raw, &["INCR", "n"], &i(-4));
    rt(&mut raw, &["TTL", "n"], &i(100));
    // Bad increments.
    rt(&mut raw, &["INCRBY", "n", "abc"], NOT_INT);
    rt(&mut raw, &["INCRBY", "n", "1.5"], NOT_INT);
    rt(&mut raw, &["INCRBY", "n", " 1"], NOT_INT);
    rt(&mut raw, &["DECRBY", "n", "9223372036854775808"], NOT_INT);
    rt(
        &mut raw,
        &["DECRBY", "n", "-9223372036854775808"],
        &e("ERR decrement would overflow"),
    );
    rt(&mut raw, &["GET", "n"], &b("-4"));
}

#[test]
fn incr_overflow_and_non_integer_values() {
    let s = server();
    let mut raw = s.raw();
    let overflow = e("ERR increment or decrement would overflow");
    rt(&mut raw, &["SET", "n", "9223372036854775807"], OK);
    rt(&mut raw, &["INCR", "n"], &overflow);
    rt(&mut raw, &["INCRBY", "n", "1"], &overflow);
    rt(&mut raw, &["GET", "n"], &b("9223372036854775807"));
    rt(&mut raw, &["DECRBY", "n", "-1"], &overflow);
    rt(&mut raw, &["SET", "n", "-9223372036854775808"], OK);
    rt(&mut raw, &["DECR", "n"], &overflow);
    rt(&mut raw, &["DECRBY", "n", "1"], &overflow);
    rt(&mut raw, &["INCRBY", "n", "-1"], &overflow);
    rt(&mut raw, &["INCRBY", "n", "9223372036854775807"], &i(-1));
    rt(&mut raw, &["SET", "m", "1"], OK);
    rt(&mut raw, &["INCRBY", "m", "9223372036854775807"], &overflow);

    for bad in [
        "abc",
        " 1",
        "1 ",
        "01",
        "1.5",
        "+1",
        "-0",
        "",
        "9223372036854775808",
    ] {
        rt(&mut raw, &["SET", "v", bad], OK);
        rt(&mut raw, &["INCR", "v"], NOT_INT);
        rt(&mut raw, &["DECR", "v"], NOT_INT);
        rt(&mut raw, &["INCRBY", "v", "2"], NOT_INT);
        rt(&mut raw, &["GET", "v"], &b(bad));
    }
    rt(&mut raw, &["SET", "z", "0"], OK);
    rt(&mut raw, &["INCR", "z"], &i(1));
    rt(&mut raw, &["SET", "z", "-7"], OK);
    rt(&mut raw, &["INCR", "z"], &i(-6));
}

#[test]
fn incrbyfloat_formats_like_redis() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "f", "10.50"], OK);
    rt(&mut raw, &["INCRBYFLOAT", "f", "0.1"], &b("10.6"));
    rt(&mut raw, &["GET", "f"], &b("10.6"));
    rt(&mut raw, &["SET", "g", "5.0e3"], OK);
    rt(&mut raw, &["INCRBYFLOAT", "g", "2.0e2"], &b("5200"));
    rt(&mut raw, &["GET", "g"], &b("5200"));
    rt(&mut raw, &["INCRBYFLOAT", "new", "1e2"], &b("100"));
    rt(&mut raw, &["INCRBYFLOAT", "new", "-100"], &b("0"));
    rt(&mut raw, &["INCRBYFLOAT", "new", "1.0e-5"], &b("0.00001"));
    rt(&mut raw, &["INCRBYFLOAT", "neg", "-1.5e-3"], &b("-0.0015"));
    rt(&mut raw, &["INCRBYFLOAT", "k3", "3.0e3"], &b("3000"));
    rt(&mut raw, &["SET", "i", "3"], OK);
    rt(&mut raw, &["INCRBYFLOAT", "i", "1.5"], &b("4.5"));
    rt(&mut raw, &["SET", "big", "17179869184"], OK);
    rt(
        &mut raw,
        &["INCRBYFLOAT", "big", "1.5"],
        &b("17179869185.5"),
    );
    // The result is stored as a string that INCR can no longer use.
    rt(&mut raw, &["INCR", "i"], NOT_INT);
    // Keeps the TTL.
    rt(&mut raw, &["SET", "t", "1", "EX", "100"], OK);
    rt(&mut raw, &["INCRBYFLOAT", "t", "1"], &b("2"));
    rt(&mut raw, &["TTL", "t"], &i(100));

    // Errors.
    for bad in ["abc", "nan", "1e", " 1", "1 ", ""] {
        rt(&mut raw, &["INCRBYFLOAT", "f", bad], NOT_FLOAT);
    }
    rt(
        &mut raw,
        &["INCRBYFLOAT", "f", "inf"],
        &e("ERR increment would produce NaN or Infinity"),
    );
    rt(&mut raw, &["SET", "s", "abc"], OK);
    rt(&mut raw, &["INCRBYFLOAT", "s", "1"], NOT_FLOAT);
    rt(&mut raw, &["SET", "s", "1.5 "], OK);
    rt(&mut raw, &["INCRBYFLOAT", "s", "1"], NOT_FLOAT);
    rt(&mut raw, &["GET", "f"], &b("10.6"));
    rt(&mut raw, &["INCRBYFLOAT", "f"], &wrong_args("incrbyfloat"));
}

/// Redis computes INCRBYFLOAT in long double and prints 17 significant digits, so decimal sums
/// come out as written and very large sums do not overflow to infinity.
#[test]
fn incrbyfloat_uses_long_double_precision() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "f", "0.1"], OK);
    rt(&mut raw, &["INCRBYFLOAT", "f", "0.2"], &b("0.3"));
    rt(&mut raw, &["SET", "p", "1.23456789012345678"], OK);
    rt(
        &mut raw,
        &["INCRBYFLOAT", "p", "0"],
        &b("1.23456789012345678"),
    );
    rt(
        &mut raw,
        &["INCRBYFLOAT", "n", "12345678901234567890"],
        &b("12345678901234567890"),
    );
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", "huge", "1e308"]);
    let v: String = q(&mut c, &["INCRBYFLOAT", "huge", "1e308"]);
    assert_eq!(v.len(), 309, "1e308 + 1e308 as a long double: {v}");
    assert!(v.starts_with("19999999999999999999"), "{v}");
}

// ---------------------------------------------------------------------------------------------
// GETRANGE / SUBSTR / SETRANGE
// ---------------------------------------------------------------------------------------------

#[test]
fn getrange_and_substr() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "s", "This is a string"], OK);
    let cases: &[(&str, &str, &str)] = &[
        ("0", "3", "This"),
        ("-3", "-1", "ing"),
        ("0", "-1", "This is a string"),
        ("10", "100", "string"),
        ("5", "3", ""),
        ("-1", "-5", ""),
        ("-100", "-50", "T"),
        ("-100", "2", "Thi"),
        ("3", "-100", ""),
        ("100", "200", ""),
        ("-1", "-1", "g"),
        ("0", "0", "T"),
        ("15", "15", "g"),
        ("16", "16", ""),
    ];
    for (start, end, want) in cases {
        rt(&mut raw, &["GETRANGE", "s", start, end], &b(want));
        rt(&mut raw, &["SUBSTR", "s", start, end], &b(want));
    }
    rt(&mut raw, &["GETRANGE", "nokey", "0", "-1"], &b(""));
    rt(&mut raw, &["SET", "e", ""], OK);
    rt(&mut raw, &["GETRANGE", "e", "0", "-1"], &b(""));
    rt(&mut raw, &["GETRANGE", "e", "-1", "-1"], &b(""));
    rt(&mut raw, &["GETRANGE", "s", "a", "1"], NOT_INT);
    rt(&mut raw, &["GETRANGE", "s", "0", "b"], NOT_INT);
    rt(&mut raw, &["GETRANGE", "s", "0"], &wrong_args("getrange"));
    rt(&mut raw, &["SUBSTR", "s", "0"], &wrong_args("substr"));
    // Integers.
    rt(&mut raw, &["SET", "n", "-12345"], OK);
    rt(&mut raw, &["GETRANGE", "n", "1", "2"], &b("12"));
}

#[test]
fn setrange_pads_and_checks_offsets() {
    let s = server();
    let mut raw = s.raw();
    rt(&mut raw, &["SETRANGE", "sr", "5", "abc"], &i(8));
    let mut c = s.client();
    let v: Vec<u8> = q(&mut c, &["GET", "sr"]);
    assert_eq!(v, b"\0\0\0\0\0abc");
    rt(&mut raw, &["STRLEN", "sr"], &i(8));
    rt(&mut raw, &["SET", "hw", "Hello World"], OK);
    rt(&mut raw, &["SETRANGE", "hw", "6", "Redis"], &i(11));
    rt(&mut raw, &["GET", "hw"], &b("Hello Redis"));
    rt(&mut raw, &["SETRANGE", "hw", "9", "xyz!"], &i(13));
    rt(&mut raw, &["GET", "hw"], &b("Hello Redxyz!"));
    rt(&mut raw, &["SETRANGE", "hw", "15", "Z"], &i(16));
    let v: Vec<u8> = q(&mut c, &["GET", "hw"]);
    assert_eq!(v, b"Hello Redxyz!\0\0Z");
    // Offsets.
    rt(
        &mut raw,
        &["SETRANGE", "sr", "-1", "x"],
        &e("ERR offset is out of range"),
    );
    rt(&mut raw, &["SETRANGE", "sr", "abc", "x"], NOT_INT);
    rt(
        &mut raw,
        &["SETRANGE", "sr", "536870912", "x"],
        &e("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
    );
    rt(
        &mut raw,
        &["SETRANGE", "sr", "536870910", "xyz"],
        &e("ERR string exceeds maximum allowed size (proto-max-bulk-len)"),
    );
    // An empty value changes nothing and answers the current length.
    rt(&mut raw, &["SETRANGE", "sr", "1", ""], &i(8));
    rt(&mut raw, &["SETRANGE", "sr", "536870912", ""], &i(8));
    // ... and does not create a missing key.
    rt(&mut raw, &["SETRANGE", "newkey", "0", ""], &i(0));
    rt(&mut raw, &["SETRANGE", "newkey", "10", ""], &i(0));
    rt(&mut raw, &["EXISTS", "newkey"], &i(0));
    // Keeps the TTL.
    rt(&mut raw, &["SET", "t", "abc", "EX", "100"], OK);
    rt(&mut raw, &["SETRANGE", "t", "1", "X"], &i(3));
    rt(&mut raw, &["GET", "t"], &b("aXc"));
    rt(&mut raw, &["TTL", "t"], &i(100));
    rt(&mut raw, &["SETRANGE", "t", "1"], &wrong_args("setrange"));
}

// ---------------------------------------------------------------------------------------------
// LCS
// ---------------------------------------------------------------------------------------------

#[test]
fn lcs_like_the_redis_docs() {
    let s = server();
    let mut raw = s.raw();
    rt(
        &mut raw,
        &["MSET", "key1", "ohmytext", "key2", "mynewtext"],
        OK,
    );
    rt(&mut raw, &["LCS", "key1", "key2"], &b("mytext"));
    rt(&mut raw, &["LCS", "key1", "key2", "LEN"], &i(6));
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "IDX"],
        "*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n",
    );
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
        "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n",
    );
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4"],
        "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n",
    );
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "IDX", "WITHMATCHLEN"],
        "*4\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n",
    );
    // A negative MINMATCHLEN is as good as 0.
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "MINMATCHLEN", "-1", "IDX"],
        "*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n",
    );
    // WITHMATCHLEN / MINMATCHLEN without IDX change nothing.
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "WITHMATCHLEN"],
        &b("mytext"),
    );
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "LEN", "WITHMATCHLEN"],
        &i(6),
    );
    // Missing keys are empty strings.
    rt(&mut raw, &["LCS", "key1", "nokey"], &b(""));
    rt(&mut raw, &["LCS", "nokey", "nokey2", "LEN"], &i(0));
    rt(
        &mut raw,
        &["LCS", "nokey", "nokey2", "IDX"],
        "*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n",
    );
    // Errors.
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "LEN", "IDX"],
        &e("ERR If you want both the length and indexes, please just use IDX."),
    );
    rt(&mut raw, &["LCS", "key1", "key2", "foo"], SYNTAX);
    rt(&mut raw, &["LCS", "key1", "key2", "MINMATCHLEN"], SYNTAX);
    rt(
        &mut raw,
        &["LCS", "key1", "key2", "MINMATCHLEN", "abc"],
        NOT_INT,
    );
    rt(&mut raw, &["LCS", "key1"], &wrong_args("lcs"));
    // Same key twice.
    rt(&mut raw, &["LCS", "key1", "key1"], &b("ohmytext"));

    let mut c = s.client();
    let _: () = q(
        &mut c,
        &[
            "MSET",
            "x",
            "ACCGGTCGAGTGCGCGGAAGCCGGCCGAA",
            "y",
            "GTCGTTCGGAATGCCGTTGCTCTGTAAA",
        ],
    );
    let lcs: String = q(&mut c, &["LCS", "x", "y"]);
    let len: i64 = q(&mut c, &["LCS", "x", "y", "LEN"]);
    assert_eq!(len, 20);
    // Redis' backtracking picks this one of the equally long answers.
    assert_eq!(lcs, "GTCGTCGGAAGCCGGCCGAA");
    assert!(is_subsequence(
        lcs.as_bytes(),
        b"ACCGGTCGAGTGCGCGGAAGCCGGCCGAA"
    ));
    assert!(is_subsequence(
        lcs.as_bytes(),
        b"GTCGTTCGGAATGCCGTTGCTCTGTAAA"
    ));
}

fn is_subsequence(needle: &[u8], hay: &[u8]) -> bool {
    let mut it = hay.iter();
    needle.iter().all(|c| it.any(|h| h == c))
}

// ---------------------------------------------------------------------------------------------
// Binary safety and size
// ---------------------------------------------------------------------------------------------

#[test]
fn values_and_keys_are_binary_safe() {
    let s = server();
    let mut raw = s.raw();
    let val: &[u8] = b"a\0b\r\nc\r\n\0\xff\xfe$3\r\n*1\r\n";
    raw.roundtrip(&cmd(&[b"SET", b"bin", val]), b"+OK\r\n");
    let mut want = format!("${}\r\n", val.len()).into_bytes();
    want.extend_from_slice(val);
    want.extend_from_slice(b"\r\n");
    raw.roundtrip(&cmd(&[b"GET", b"bin"]), &want);
    raw.roundtrip(
        &cmd(&[b"STRLEN", b"bin"]),
        format!(":{}\r\n", val.len()).as_bytes(),
    );
    raw.roundtrip(
        &cmd(&[b"GETRANGE", b"bin", b"1", b"4"]),
        b"$4\r\n\0b\r\n\r\n",
    );
    let key: &[u8] = b"k\0\r\n\xff";
    raw.roundtrip(&cmd(&[b"SET", key, b"v\0"]), b"+OK\r\n");
    raw.roundtrip(&cmd(&[b"GET", key]), b"$2\r\nv\0\r\n");
    raw.roundtrip(&cmd(&[b"GET", b"k"]), b"$-1\r\n");
    raw.roundtrip(&cmd(&[b"APPEND", key, b"\r\n"]), b":4\r\n");

    let mut c = s.client();
    let got: Vec<u8> = redis::cmd("GET").arg(key).query(&mut c).unwrap();
    assert_eq!(got, b"v\0\r\n");
    let all: Vec<u8> = (0..=255u8).collect();
    let _: () = redis::cmd("SET")
        .arg(&all[..])
        .arg(&all[..])
        .query(&mut c)
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg(&all[..]).query(&mut c).unwrap();
    assert_eq!(got, all);
    let got: Vec<Option<Vec<u8>>> = redis::cmd("MGET")
        .arg(&all[..])
        .arg(key)
        .arg(b"\0")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        got,
        vec![Some(all.clone()), Some(b"v\0\r\n".to_vec()), None]
    );
}

#[test]
fn one_megabyte_value() {
    let s = server();
    let mut c = s.client();
    let big: Vec<u8> = (0..(1usize << 20))
        .map(|n| (n * 7 + n / 251) as u8)
        .collect();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big[..])
        .query(&mut c)
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert_eq!(got.len(), big.len());
    assert!(got == big, "1 MB value came back changed");
    let len: i64 = q(&mut c, &["STRLEN", "big"]);
    assert_eq!(len, 1 << 20);
    let tail: Vec<u8> = q(&mut c, &["GETRANGE", "big", "-10", "-1"]);
    assert_eq!(tail, &big[big.len() - 10..]);
    let mid: Vec<u8> = q(&mut c, &["GETRANGE", "big", "500000", "500099"]);
    assert_eq!(mid, &big[500_000..500_100]);
    let n: i64 = redis::cmd("APPEND")
        .arg("big")
        .arg(&big[..])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2 << 20);
    let got: Vec<u8> = redis::cmd("GETDEL").arg("big").query(&mut c).unwrap();
    assert_eq!(got.len(), 2 << 20);
    assert!(got[..big.len()] == big[..] && got[big.len()..] == big[..]);
    let n: i64 = q(&mut c, &["EXISTS", "big"]);
    assert_eq!(n, 0);

    // The raw encoding of a large reply: exact header, exact body.
    let mut raw = s.raw();
    let v = vec![b'x'; 1 << 20];
    raw.roundtrip(&cmd(&[b"SET", b"x", &v]), b"+OK\r\n");
    let mut want = b"$1048576\r\n".to_vec();
    want.extend_from_slice(&v);
    want.extend_from_slice(b"\r\n");
    raw.roundtrip(&cmd(&[b"GET", b"x"]), &want);
}

#[test]
fn pipelined_string_commands_answer_in_order() {
    let s = server();
    let mut raw = s.raw();
    let mut req = Vec::new();
    let mut want = String::new();
    for n in 0..200 {
        let k = format!("p{}", n % 17);
        req.extend(cmd(&[b"INCR", k.as_bytes()]));
        want.push_str(&i((n / 17 + 1) as i64));
        req.extend(cmd(&[b"GET", k.as_bytes()]));
        want.push_str(&b(&(n / 17 + 1).to_string()));
    }
    raw.roundtrip(&req, want.as_bytes());
}

/// Every write that changes a string counts once in rdb_changes_since_last_save, as in Redis;
/// a RENAME of a missing key counts nothing.
#[test]
fn string_writes_count_as_changes_since_the_last_save() {
    let s = server();
    let mut c = s.client();
    let changes_by = |c: &mut redis::Connection, args: &[&str]| {
        let before = info_u64(c, "persistence", "rdb_changes_since_last_save");
        let mut command = redis::cmd(args[0]);
        for a in &args[1..] {
            command.arg(*a);
        }
        // An error reply is a result too: RENAME of a missing key.
        let _ = command.query::<redis::Value>(c);
        info_u64(c, "persistence", "rdb_changes_since_last_save") - before
    };
    assert_eq!(changes_by(&mut c, &["SET", "k", "1"]), 1);
    assert_eq!(changes_by(&mut c, &["APPEND", "k", "2"]), 1);
    assert_eq!(changes_by(&mut c, &["APPEND", "new", "2"]), 1);
    assert_eq!(changes_by(&mut c, &["INCR", "k"]), 1);
    assert_eq!(changes_by(&mut c, &["INCRBY", "fresh", "5"]), 1);
    assert_eq!(changes_by(&mut c, &["INCRBYFLOAT", "k", "1.5"]), 1);
    assert_eq!(changes_by(&mut c, &["GET", "k"]), 0);
    assert_eq!(changes_by(&mut c, &["RENAME", "nokey", "x"]), 0);
    assert_eq!(changes_by(&mut c, &["RENAME", "k", "x"]), 1);
}

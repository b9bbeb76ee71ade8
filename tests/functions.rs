//! FUNCTION / FCALL on a two-shard server: replies compared byte for byte with a real
//! redis-server (loading, listing, errors of the loader and of register_function, FCALL_RO),
//! a library loaded on one core callable on every core, DUMP/RESTORE round trips.
//!
//! With STRATA_REQUIRE_REDIS=1 a missing redis-server fails the differential test.
mod common;

use common::*;

const LIB: &str = "#!lua name=mylib\nredis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)\nredis.register_function{function_name='f2', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reader'}";

/// One function per library where their order shows: Redis lists them in hash order.
const SETTER: &str = "#!lua name=setter\nredis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)";
const GETTER: &str = "#!lua name=getter\nredis.register_function{function_name='f2', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes', 'allow-oom'}, description='reader'}";

const CASES: &[&[&str]] = &[
    &["function", "load", SETTER],
    &["function", "load", SETTER],
    &["function", "load", GETTER],
    &["fcall", "f1", "1", "k", "v"],
    &["fcall", "f2", "1", "k"],
    &["fcall_ro", "f2", "1", "k"],
    &["fcall_ro", "f1", "1", "k", "v"],
    &["fcall", "nosuch", "0"],
    &["fcall", "f1", "5", "k"],
    &["fcall", "f1", "-1", "k"],
    &["function", "list", "libraryname", "sett*"],
    &["function", "list", "withcode", "libraryname", "getter"],
    &["function", "list", "libraryname", "x*"],
    &["function", "list", "libraryname"],
    &["function", "list", "foo"],
    &["function", "stats"],
    &["function", "load", "return 1"],
    &["function", "load", "#!lua\nreturn 1"],
    &["function", "load", "#!lua name=x foo=bar\nreturn 1"],
    &["function", "load", "#!js name=x\nreturn 1"],
    &["function", "load", "#!lua name=x-y\nreturn 1"],
    &["function", "load", "#!lua name=x\nreturn 1"],
    &["function", "load", "#!lua name=x\nreturn 1 +"],
    &["function", "load", "#!lua name=x\nerror('boom')"],
    &["function", "load", "#!lua name=x\nredis.call('ping')"],
    &["function", "load", "#!lua name=x\nlocal s = string.len('a')"],
    &["function", "load", "#!lua name=x\nredis.register_function('f1', function() end)"],
    &["function", "load", "#!lua name=x\nredis.register_function('a-b', function() end)"],
    &["function", "load", "#!lua name=x\nredis.register_function('a', 1)"],
    &["function", "load", "#!lua name=x\nredis.register_function('a')"],
    &["function", "load", "#!lua name=x\nredis.register_function{function_name='a', callback=function() end, flags={'bad'}}"],
    &["function", "load", "#!lua name=x\nredis.register_function{function_name='a'}"],
    &["function", "load", "#!lua name=x\nredis.register_function('a', function() end); redis.register_function('a', function() end)"],
    &["function", "load", "#!lua name=x\nx = 1"],
    &["function", "load", "#!lua name=x\nredis.register_function('g', function() return a end)"],
    &["fcall", "g", "0"],
    &["function", "load", "replace", "#!lua name=x\nredis.register_function('g', function(k, a) return {k, a, redis.call('ping')} end)"],
    &["fcall", "g", "2", "a", "b", "c"],
    &["function", "load", "foo", "#!lua name=x\nreturn 1"],
    &["function", "delete", "x"],
    &["function", "delete", "x"],
    &["function", "flush", "foo"],
    &["function", "restore", "garbage"],
    &["function", "restore", "garbage", "foo"],
    &["function", "kill"],
    &["function", "foo"],
    &["function", "help"],
    &["function", "delete", "setter"],
    &["function", "list"],
    &["function", "list", "withcode"],
    &["function", "flush"],
    &["function", "list"],
];

#[test]
fn replies_match_redis_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let mut strata = s.raw();
    let mut redis = Raw::connect(real.port);
    let diffs = differing_replies(&mut strata, &mut redis, CASES);
    assert!(diffs.is_empty(), "replies differ:\n{}", diffs.join("\n"));
}

#[test]
fn a_library_loaded_on_one_core_runs_on_every_core() {
    let s = server();
    let mut c = s.client();
    let name: String = q(&mut c, &["function", "load", LIB]);
    assert_eq!(name, "mylib");
    for i in 0..12 {
        let mut c = s.client();
        let key = format!("k{i}");
        let _: () = q(&mut c, &["fcall", "f1", "1", &key, &i.to_string()]);
        let v: String = q(&mut c, &["fcall_ro", "f2", "1", &key]);
        assert_eq!(v, i.to_string());
    }
    // Replaced: every core runs the new code.
    let lib2 = LIB.replace("return redis.call('get', keys[1])", "return 'new'");
    let _: String = q(&mut c, &["function", "load", "replace", &lib2]);
    for _ in 0..8 {
        let mut c = s.client();
        let v: String = q(&mut c, &["fcall", "f2", "1", "k0"]);
        assert_eq!(v, "new");
    }
}

#[test]
fn dump_and_restore_round_trip() {
    let s = server();
    let mut r = s.raw();
    rt(&mut r, &["function", "load", LIB], "$5\r\nmylib\r\n");
    let payload: Vec<u8> = {
        let mut c = s.client();
        q(&mut c, &["function", "dump"])
    };
    rt(&mut r, &["function", "flush"], "+OK\r\n");
    rt(
        &mut r,
        &["fcall", "f2", "1", "k"],
        "-ERR Function not found\r\n",
    );
    let args: [&[u8]; 3] = [b"function", b"restore", &payload];
    assert_eq!(r.call(&args), b"+OK\r\n");
    rt(&mut r, &["fcall", "f1", "1", "k", "v"], "+OK\r\n");
    assert_eq!(r.call(&args), b"-ERR Library mylib already exists\r\n");
    let replace: [&[u8]; 4] = [b"function", b"restore", &payload, b"replace"];
    assert_eq!(r.call(&replace), b"+OK\r\n");
    let mut bad = payload.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    let args: [&[u8]; 3] = [b"function", b"restore", &bad];
    assert_eq!(
        r.call(&args),
        b"-ERR DUMP payload version or checksum are wrong\r\n"
    );
}

#[test]
fn restores_a_payload_redis_dumped() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let mut redis = Raw::connect(real.port);
    redis.call(&[b"function", b"load", LIB.as_bytes()]);
    let mut rc = redis::Client::open(real.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let payload: Vec<u8> = q(&mut rc, &["function", "dump"]);
    let s = server();
    let mut r = s.raw();
    let args: [&[u8]; 3] = [b"function", b"restore", &payload];
    assert_eq!(r.call(&args), b"+OK\r\n");
    rt(&mut r, &["fcall", "f1", "1", "k", "v"], "+OK\r\n");
    rt(&mut r, &["fcall", "f2", "1", "k"], "$1\r\nv\r\n");
}

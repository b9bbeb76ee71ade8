//! Lua scripting on a two-shard server: conversions between Lua and RESP2/RESP3, errors and the
//! sandbox compared byte for byte with a real redis-server; the script cache shared by both
//! cores; atomicity (a lock contest with the usual compare-and-delete script, a script moving
//! amounts between keys on both shards while readers sum them); a busy script answered with
//! -BUSY and stopped by SCRIPT KILL, or refused (-UNKILLABLE) once it wrote.
//!
//! With STRATA_REQUIRE_REDIS=1 a missing redis-server fails the differential test.
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;

/// Scripts whose replies must be the same bytes as Redis 7.0's (no randomness, no time).
const CASES: &[&[&str]] = &[
    // Lua -> RESP2
    &["eval", "return 1", "0"],
    &["eval", "return {1,2,3,'ciao',{1,2}}", "0"],
    &["eval", "return {1,2,nil,4}", "0"],
    &["eval", "return {1,{2,{3,'x'}},nil,7}", "0"],
    &["eval", "return 3.99", "0"],
    &["eval", "return -3.99", "0"],
    &["eval", "return 1e300 * 10", "0"],
    &["eval", "return 0/0", "0"],
    &["eval", "return 9007199254740993", "0"],
    &["eval", "return true", "0"],
    &["eval", "return false", "0"],
    &["eval", "return nil", "0"],
    &["eval", "return {'a', false, 'b'}", "0"],
    &["eval", "return {'a', true, 'b'}", "0"],
    &["eval", "return {ok='fine'}", "0"],
    &["eval", "return {err='My Error'}", "0"],
    &["eval", "return {ok=5}", "0"],
    &["eval", "return {err=5}", "0"],
    &["eval", "return redis.status_reply('a\\r\\nb')", "0"],
    &["eval", "return redis.error_reply('My Error')", "0"],
    &["eval", "return redis.error_reply('-WRONG x')", "0"],
    &["eval", "return redis.error_reply()", "0"],
    &["eval", "return redis.status_reply(1)", "0"],
    &["eval", "return {double=3.14}", "0"],
    &["eval", "return {map={a=1}}", "0"],
    &["eval", "return {set={a=true}}", "0"],
    &["eval", "return {big_number='123'}", "0"],
    &[
        "eval",
        "return {verbatim_string={format='txt',string='hi'}}",
        "0",
    ],
    // Lua -> RESP3 (the script's version; this client speaks RESP2)
    &["eval", "redis.setresp(3); return {double=3.5}", "0"],
    &["eval", "redis.setresp(3); return true", "0"],
    &["eval", "redis.setresp(3); return false", "0"],
    &["eval", "redis.setresp(3); return {map={a=1}}", "0"],
    // RESP -> Lua
    &[
        "eval",
        "return redis.call('set', KEYS[1], ARGV[1])",
        "1",
        "k1",
        "v1",
    ],
    &["eval", "return redis.call('get', KEYS[1])", "1", "k1"],
    &["eval", "return type(redis.call('get', 'nonex'))", "0"],
    &[
        "eval",
        "redis.setresp(3); return type(redis.call('get', 'nonex'))",
        "0",
    ],
    &["eval", "return redis.call('set', 'n', 3.5)", "0"],
    &["eval", "return redis.call('get', 'n')", "0"],
    &["eval", "return redis.call('set', 'n', 1e20)", "0"],
    &["eval", "return redis.call('get', 'n')", "0"],
    &["eval", "return redis.call('set', 'n', 0.1)", "0"],
    &["eval", "return redis.call('get', 'n')", "0"],
    &["eval", "return redis.call('ping')", "0"],
    &["eval", "return redis.call('ping')['ok']", "0"],
    &["eval", "return redis.call('hset', 'h', 'a', 1)", "0"],
    &["eval", "return redis.call('hgetall', 'h')", "0"],
    &[
        "eval",
        "redis.setresp(3); return redis.call('hgetall', 'h')",
        "0",
    ],
    &[
        "eval",
        "redis.setresp(3); return redis.call('hgetall', 'h').map.a",
        "0",
    ],
    &["eval", "return redis.call('zadd', 'z', 1.5, 'a')", "0"],
    &["eval", "return redis.call('zscore', 'z', 'a')", "0"],
    &[
        "eval",
        "redis.setresp(3); return redis.call('zscore', 'z', 'a').double",
        "0",
    ],
    &[
        "eval",
        "redis.setresp(3); return redis.call('smembers', 'nos')",
        "0",
    ],
    &[
        "eval",
        "return redis.call('mset', 'a', '1', 'b', '2', 'c', '3', 'd', '4')",
        "0",
    ],
    &[
        "eval",
        "return redis.call('mget', 'a', 'b', 'c', 'd', 'nonex')",
        "0",
    ],
    &["eval", "return redis.call('del', 'a', 'b', 'c', 'd')", "0"],
    &["eval", "return {KEYS, ARGV}", "2", "a", "b", "c", "d"],
    // commands over both shards, and keyspace-wide ones, inside a script
    &[
        "eval",
        "redis.call('mset','a','1','b','2','c','3','d','4'); return redis.call('dbsize')",
        "0",
    ],
    &["eval", "return redis.call('rename','a','zz')", "0"],
    &[
        "eval",
        "return redis.call('mget','zz','b','c','d','a')",
        "0",
    ],
    &[
        "eval",
        "local k = redis.call('keys','*'); table.sort(k); return k",
        "0",
    ],
    &["eval", "return redis.call('exists','zz','b','c','x')", "0"],
    &["eval", "return redis.call('del','zz','b','c','d')", "0"],
    &["eval", "return redis.call('multi')", "0"],
    &["eval", "return redis.call('config','get','maxmemory')", "0"],
    // errors
    &["eval", "return redis.call('nosuch')", "0"],
    &["eval", "return redis.call('get')", "0"],
    &["eval", "return redis.pcall('get')", "0"],
    &["eval", "return redis.call()", "0"],
    &["eval", "return redis.call({})", "0"],
    &["eval", "return redis.call('set', 'x', {})", "0"],
    &["eval", "return redis.call('incr', 'str')", "0"],
    &["eval", "return redis.pcall('incr', 'str')", "0"],
    &[
        "eval",
        "local ok, e = pcall(redis.call, 'nosuch'); return e",
        "0",
    ],
    &[
        "eval",
        "local ok, e = pcall(function() return redis.call('incr','str') end); return e",
        "0",
    ],
    &["eval", "error('x')", "0"],
    &["eval", "\n\nerror('x')", "0"],
    &["eval", "return redis.sha1hex()", "0"],
    &["eval", "return math.random(0)", "0"],
    &["eval", "return 1 +", "0"],
    &["eval", "return 1", "-1"],
    &["eval", "return 1", "3", "a"],
    &["eval", "return 1", "x"],
    &["evalsha", "ffffffffffffffffffffffffffffffffffffffff", "0"],
    &["evalsha", "fff", "0"],
    &["eval", "redis.setresp(4)", "0"],
    &["eval", "redis.setresp()", "0"],
    &["eval", "return redis.set_repl(redis.REPL_ALL)", "0"],
    &["eval", "return redis.set_repl(55)", "0"],
    &["eval", "return redis.log(redis.LOG_WARNING, 'hello')", "0"],
    &["eval", "return redis.log(99, 'hello')", "0"],
    &["eval", "return redis.log(1)", "0"],
    &["eval_ro", "return redis.call('set', 'x', 1)", "0"],
    // shebang flags
    &[
        "eval",
        "#!lua flags=no-writes\nreturn redis.call('set','x','1')",
        "0",
    ],
    &["eval", "#!lua flags=foo\nreturn 1", "0"],
    &["eval", "#!python\nreturn 1", "0"],
    &["eval", "#!lua", "0"],
    &["eval", "#!lua x=y\nreturn 1", "0"],
    &["eval_ro", "#!lua\nreturn 1", "0"],
    &["eval_ro", "#!lua flags=no-writes\nreturn 1", "0"],
    &["eval", "#!lua\nerror('x')", "0"],
    // sandbox
    &["eval", "return a", "0"],
    &["eval", "a = 1", "0"],
    &["eval", "redis.call = 1", "0"],
    &["eval", "string.x = 1", "0"],
    &["eval", "setmetatable(_G, {})", "0"],
    &["eval", "rawset(_G, 'x', 1)", "0"],
    &[
        "eval",
        "local t = {}; setmetatable(t, {}); rawset(t, 1, 2); return t",
        "0",
    ],
    &["eval", "return loadfile", "0"],
    &["eval", "return dofile", "0"],
    &["eval", "return print", "0"],
    &["eval", "return io", "0"],
    &["eval", "return os", "0"],
    &["eval", "return debug", "0"],
    &["eval", "return getfenv", "0"],
    &["eval", "return type(loadstring)", "0"],
    &["eval", "return loadstring('return 7')()", "0"],
    &["eval", "return _G == _G", "0"],
    // libraries
    &["eval", "return cjson.encode({a=1})", "0"],
    &["eval", "return cjson.decode('[1,2,{\"a\":3}]')[3].a", "0"],
    &[
        "eval",
        "return cjson.encode(cjson.decode('{\"x\":[1,2.5,true,null]}'))",
        "0",
    ],
    &["eval", "return cjson.decode('[')", "0"],
    &["eval", "return cmsgpack.pack({1,2,'x',{a=1}})", "0"],
    &[
        "eval",
        "return cmsgpack.unpack(cmsgpack.pack({1,2,3}))",
        "0",
    ],
    &["eval", "return struct.pack('>I', 1234)", "0"],
    &[
        "eval",
        "return struct.unpack('>I', struct.pack('>I', 1234))",
        "0",
    ],
    &["eval", "return bit.tohex(65535)", "0"],
    &["eval", "return bit.band(7, 3)", "0"],
    &["eval", "return redis.sha1hex('')", "0"],
    &["eval", "return redis.REDIS_VERSION_NUM", "0"],
    &["eval", "return table.concat({1,2},',')", "0"],
    &["eval", "return string.format('%d', 5)", "0"],
    // the script cache
    &["script", "load", "return 1"],
    &["script", "load", "return 1 +"],
    &[
        "script",
        "exists",
        "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
        "ff",
    ],
    &["evalsha", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
    &["evalsha", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"],
    &["script", "flush", "foo"],
    &["script", "kill"],
    // the declared keys, as cluster clients ask for them
    &[
        "command", "getkeys", "eval", "return 1", "2", "k1", "k2", "a",
    ],
    &["command", "getkeys", "evalsha_ro", "ab", "1", "k1", "a"],
    &["command", "getkeys", "fcall", "f", "1", "k1"],
    &["command", "getkeys", "fcall_ro", "f", "0"],
    &["command", "getkeys", "eval", "return 1", "5", "a"],
    &["command", "getkeys", "eval", "return 1", "x", "a"],
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
    for r in [&mut strata, &mut redis] {
        r.call(&[b"set", b"str", b"foo"]);
    }
    let diffs = differing_replies(&mut strata, &mut redis, CASES);
    assert!(diffs.is_empty(), "replies differ:\n{}", diffs.join("\n"));
}

#[test]
fn resp3_client_gets_resp3_types() {
    let s = server();
    let mut c = s.raw();
    c.call(&[b"hello", b"3"]);
    rt(
        &mut c,
        &["eval", "redis.setresp(3); return {double=1.5}", "0"],
        ",1.5\r\n",
    );
    rt(
        &mut c,
        &["eval", "redis.setresp(3); return true", "0"],
        "#t\r\n",
    );
    rt(&mut c, &["eval", "return false", "0"], "_\r\n");
    rt(
        &mut c,
        &["eval", "return {map={a=1}}", "0"],
        "%1\r\n$1\r\na\r\n:1\r\n",
    );
    rt(
        &mut c,
        &["eval", "return {set={x=true}}", "0"],
        "~1\r\n$1\r\nx\r\n",
    );
    rt(&mut c, &["eval", "return nil", "0"], "_\r\n");
}

#[test]
fn script_loaded_on_one_core_runs_on_every_core() {
    let s = server();
    let mut first = s.client();
    let sha: String = q(&mut first, &["script", "load", "return ARGV[1] .. '!'"]);
    // New connections land on either core.
    for i in 0..12 {
        let mut c = s.client();
        let got: String = q(&mut c, &["evalsha", &sha, "0", &i.to_string()]);
        assert_eq!(got, format!("{i}!"));
    }
    let script = redis::Script::new("return redis.call('incr', KEYS[1])");
    for _ in 0..5 {
        let mut c = s.client();
        let _: i64 = script.key("counter").invoke(&mut c).unwrap();
    }
    let n: i64 = q(&mut first, &["get", "counter"]);
    assert_eq!(n, 5);
    let _: () = q(&mut first, &["script", "flush"]);
    let exists: Vec<i64> = q(&mut first, &["script", "exists", &sha]);
    assert_eq!(exists, vec![0]);
    for _ in 0..4 {
        let mut c = s.client();
        let r: redis::RedisResult<String> = redis::cmd("evalsha").arg(&sha).arg(0).query(&mut c);
        assert_eq!(r.unwrap_err().kind(), redis::ErrorKind::NoScriptError);
    }
}

#[test]
fn select_inside_a_script_does_not_change_the_caller() {
    let s = server();
    let mut c = s.raw();
    rt(&mut c, &["set", "k", "db0"], "+OK\r\n");
    rt(
        &mut c,
        &[
            "eval",
            "redis.call('select', 9); redis.call('set', 'k', 'db9'); return 1",
            "0",
        ],
        ":1\r\n",
    );
    rt(&mut c, &["get", "k"], "$3\r\ndb0\r\n");
    rt(&mut c, &["select", "9"], "+OK\r\n");
    rt(&mut c, &["get", "k"], "$3\r\ndb9\r\n");
}

const UNLOCK: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

#[test]
fn lock_contest_never_has_two_holders() {
    let s = Arc::new(server());
    let holders = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (s, holders, acquired) = (s.clone(), holders.clone(), acquired.clone());
            thread::spawn(move || {
                let mut c = s.client();
                let unlock = redis::Script::new(UNLOCK);
                let deadline = Instant::now() + Duration::from_secs(3);
                let mut mine = 0;
                while Instant::now() < deadline && mine < 15 {
                    let token = format!("{t}-{mine}");
                    let got: Option<String> = redis::cmd("set")
                        .arg("lock")
                        .arg(&token)
                        .arg("nx")
                        .arg("px")
                        .arg(10_000)
                        .query(&mut c)
                        .unwrap();
                    if got.is_none() {
                        continue;
                    }
                    assert_eq!(holders.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    // A stale token must not release someone else's lock.
                    let stale: i64 = unlock.key("lock").arg("nobody").invoke(&mut c).unwrap();
                    assert_eq!(stale, 0);
                    thread::sleep(Duration::from_micros(200));
                    holders.fetch_sub(1, Ordering::SeqCst);
                    let released: i64 = unlock.key("lock").arg(&token).invoke(&mut c).unwrap();
                    assert_eq!(released, 1);
                    mine += 1;
                    acquired.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(acquired.load(Ordering::SeqCst) >= 8);
}

#[test]
fn a_script_over_both_shards_is_atomic() {
    let s = Arc::new(server());
    let (a, b) = keys_on_different_shards("acct", 2);
    let mut c = s.client();
    let _: () = q(&mut c, &["mset", &a, "1000", &b, "1000"]);
    let stop = Arc::new(AtomicBool::new(false));
    let moves = Arc::new(AtomicUsize::new(0));
    // Movers: one undeclared key each way, so the script must take both shards itself.
    let movers: Vec<_> = (0..3)
        .map(|i| {
            let (s, a, b, stop, moves) =
                (s.clone(), a.clone(), b.clone(), stop.clone(), moves.clone());
            thread::spawn(move || {
                let mut c = s.client();
                let mv = redis::Script::new(
                    "local n = tonumber(ARGV[3]); redis.call('decrby', ARGV[1], n); redis.call('incrby', ARGV[2], n); return 1",
                );
                let mut k = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (from, to) = if (k + i) % 2 == 0 { (&a, &b) } else { (&b, &a) };
                    let _: i64 = mv.arg(from).arg(to).arg(k % 7 + 1).invoke(&mut c).unwrap();
                    k += 1;
                    moves.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Until both sides did enough (the machine may be slow), 30 s at most.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut checks = 0;
    let mut c2 = s.client();
    let sum = redis::Script::new(
        "return tonumber(redis.call('get', KEYS[1])) + tonumber(redis.call('get', KEYS[2]))",
    );
    while Instant::now() < deadline && (checks < 100 || moves.load(Ordering::Relaxed) < 100) {
        let vals: Vec<i64> = q(&mut c, &["mget", &a, &b]);
        assert_eq!(
            vals.iter().sum::<i64>(),
            2000,
            "MGET saw a half-done script"
        );
        let total: i64 = sum.key(&a).key(&b).invoke(&mut c2).unwrap();
        assert_eq!(total, 2000, "a script saw a half-done script");
        checks += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for h in movers {
        h.join().unwrap();
    }
    let moved = moves.load(Ordering::Relaxed);
    assert!(
        checks >= 100 && moved >= 100,
        "checks {checks}, moves {moved}"
    );
}

/// Runs `script` on a new connection in a thread; its raw reply.
fn run_in_thread(port: u16, script: &'static str) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut c = Raw::connect(port);
        c.stream()
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        c.call(&[b"eval", script.as_bytes(), b"0"])
    })
}

/// Waits until a new connection gets -BUSY for PING; its reply.
fn wait_busy(port: u16) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = Raw::connect(port);
        let r = c.call(&[b"ping"]);
        if r.starts_with(b"-BUSY") || Instant::now() > deadline {
            return r;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn busy_script_is_reported_and_killed() {
    let s = server();
    let mut admin = s.raw();
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    rt(
        &mut admin,
        &["config", "get", "lua-time-limit"],
        "*2\r\n$14\r\nlua-time-limit\r\n$3\r\n100\r\n",
    );
    rt(
        &mut admin,
        &["script", "kill"],
        "-NOTBUSY No scripts in execution right now.\r\n",
    );
    let looping = run_in_thread(s.port, "local i = 0; while true do i = i + 1 end");
    assert_eq!(
        wait_busy(s.port),
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    // A new connection lands on the core that is not running the script.
    let mut killer = Raw::connect(s.port);
    rt(&mut killer, &["function", "kill"], "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n");
    rt(&mut killer, &["script", "kill"], "+OK\r\n");
    let reply = looping.join().unwrap();
    assert!(
        reply.starts_with(b"-ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    rt(&mut killer, &["ping"], "+PONG\r\n");

    // Once it wrote, it cannot be killed; it ends by itself.
    let writer = run_in_thread(
        s.port,
        "redis.call('set', 'w', '1'); local t = tonumber(redis.call('time')[1]); while tonumber(redis.call('time')[1]) < t + 2 do end; return 'done'",
    );
    wait_busy(s.port);
    let mut killer = Raw::connect(s.port);
    let r = killer.call(&[b"script", b"kill"]);
    assert!(
        r.starts_with(b"-UNKILLABLE Sorry the script already executed write commands"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert_eq!(writer.join().unwrap(), b"$4\r\ndone\r\n");
    rt(&mut killer, &["get", "w"], "$1\r\n1\r\n");
}

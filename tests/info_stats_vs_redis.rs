//! INFO commandstats, errorstats and latencystats against a real redis-server 7.0: the same
//! commands go to both (Strata on two cores, so keyed commands run on both shards), then every
//! command's calls, rejected_calls and failed_calls, every errorstat line and
//! total_error_replies must be the same. Covers refusals (unknown command or subcommand,
//! arity, OOM, NOAUTH, subscribe mode, inside MULTI), failures, MULTI/EXEC, scripts
//! (redis.call and redis.pcall errors are counted once, against the command the script
//! called), blocking commands, CONFIG RESETSTAT and the latency settings.
//!
//! Needs redis-server (found as test-support's `RedisLookup` finds it): fails without it.
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;

struct Pair {
    strata: Server,
    redis: RedisServer,
    _dir: tempfile::TempDir,
}

impl Pair {
    fn start() -> Pair {
        let dir = tempfile::tempdir().expect("tempdir");
        let redis = RedisServer::start(dir.path(), "dump.rdb", &[])
            .expect("redis-server is required for this test (see test-support's RedisLookup)");
        Pair {
            strata: server_with_threads(2),
            redis,
            _dir: dir,
        }
    }

    /// A connection to each: (Strata, Redis).
    fn conns(&self) -> (Raw, Raw) {
        (self.strata.raw(), Raw::connect(self.redis.port))
    }
}

fn words(cmd: &[&str]) -> Vec<Vec<u8>> {
    cmd.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn call(raw: &mut Raw, cmd: &[&str]) -> Vec<u8> {
    let w = words(cmd);
    let args: Vec<&[u8]> = w.iter().map(|a| &a[..]).collect();
    raw.call(&args)
}

/// Runs `cmds` on both connections, in order.
fn both(s: &mut Raw, r: &mut Raw, cmds: &[&[&str]]) {
    for c in cmds {
        call(s, c);
        call(r, c);
    }
}

fn info(raw: &mut Raw, section: &str) -> String {
    String::from_utf8(bulk_of(&call(raw, &["INFO", section]))).expect("utf-8")
}

/// INFO commandstats as name -> (calls, rejected_calls, failed_calls), each line checked for
/// Redis' format on the way (usec_per_call with two decimals, usec / calls).
fn commandstats(raw: &mut Raw) -> BTreeMap<String, (u64, u64, u64)> {
    let text = info(raw, "commandstats");
    let mut out = BTreeMap::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        if line == "# Commandstats" {
            continue;
        }
        let (name, fields) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
            .unwrap_or_else(|| panic!("not a cmdstat line: {line:?}"));
        let f: Vec<(&str, &str)> = fields
            .split(',')
            .map(|kv| kv.split_once('=').expect("field=value"))
            .collect();
        let keys: Vec<&str> = f.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "calls",
                "usec",
                "usec_per_call",
                "rejected_calls",
                "failed_calls"
            ],
            "{line}"
        );
        let n = |i: usize| -> u64 { f[i].1.parse().unwrap_or_else(|_| panic!("{line}")) };
        let per_call = f[2].1;
        assert_eq!(
            per_call.split_once('.').map(|(_, d)| d.len()),
            Some(2),
            "{line}"
        );
        let want = if n(0) == 0 {
            0.0
        } else {
            n(1) as f32 / n(0) as f32
        };
        assert_eq!(per_call, format!("{want:.2}"), "{line}");
        out.insert(name.to_string(), (n(0), n(3), n(4)));
    }
    out
}

fn errorstats(raw: &mut Raw) -> String {
    info(raw, "errorstats")
}

fn total_error_replies(raw: &mut Raw) -> u64 {
    stat(raw, "total_error_replies")
}

/// A counter of INFO stats.
fn stat(raw: &mut Raw, name: &str) -> u64 {
    let text = info(raw, "stats");
    let prefix = format!("{name}:");
    text.split("\r\n")
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO stats: {text}"))
}

/// Compares the counts of both servers (each read on its connection `s` / `r`), leaving out
/// the commands in `skip`.
fn same_counts(s: &mut Raw, r: &mut Raw, skip: &[&str]) {
    let keep = |m: BTreeMap<String, (u64, u64, u64)>| -> BTreeMap<String, (u64, u64, u64)> {
        m.into_iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .collect()
    };
    let (cs, cr) = (keep(commandstats(s)), keep(commandstats(r)));
    let diff: Vec<String> = cs
        .keys()
        .chain(cr.keys())
        .filter(|k| cs.get(*k) != cr.get(*k))
        .map(|k| format!("{k}: strata {:?} redis {:?}", cs.get(k), cr.get(k)))
        .collect();
    assert!(diff.is_empty(), "commandstats differ:\n{}", diff.join("\n"));
    assert_eq!(errorstats(s), errorstats(r), "errorstats");
    assert_eq!(
        total_error_replies(s),
        total_error_replies(r),
        "total_error_replies"
    );
}

fn reset(s: &mut Raw, r: &mut Raw) {
    both(s, r, &[&["FLUSHALL"], &["CONFIG", "RESETSTAT"]]);
}

#[test]
fn refused_failed_and_unknown_commands() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    both(
        &mut s,
        &mut r,
        &[
            &["SET", "k", "v"],
            &["GET", "k"],
            &["GET", "nokey"],
            &["INCR", "k"],
            &["LPUSH", "k", "x"],
            &["FOO", "bar"],
            &["SET", "k"],
            &["ECHO"],
            &["CLIENT", "ID"],
            &["CLIENT", "NOSUCH"],
            &["CLIENT"],
            &["CONFIG", "GET"],
            &["CONFIG", "GET", "maxmemory"],
            &["CONFIG", "SET", "maxmemory"],
            &["OBJECT", "ENCODING", "k"],
            &["OBJECT", "FREQ", "k"],
            &["MSET", "a{t}", "1", "b{t}", "2"],
            &["MGET", "a{t}", "b{t}", "k", "k2", "k3"],
            &["DEL", "a{t}", "b{t}", "k", "k2", "k3"],
            &["ZADD", "z", "1", "a"],
            &["ZADD", "z", "x", "a"],
            &["HSET", "h", "f"],
            &["EXPIRE", "z", "abc"],
            &["SELECT", "99"],
            &["PING"],
            &["SET", "k", "v", "EX", "0"],
        ],
    );
    same_counts(&mut s, &mut r, &[]);
    // Counting goes on from there, and RESETSTAT clears it all (its own call stays).
    both(&mut s, &mut r, &[&["INCR", "k"], &["GET", "k"]]);
    same_counts(&mut s, &mut r, &[]);
    both(&mut s, &mut r, &[&["CONFIG", "RESETSTAT"]]);
    same_counts(&mut s, &mut r, &[]);
}

#[test]
fn transactions() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    both(
        &mut s,
        &mut r,
        &[
            &["MULTI"],
            &["SET", "a", "b"],
            &["INCR", "a"],
            &["LPUSH", "a", "x"],
            &["GET", "other"],
            &["EXEC"],
            &["EXEC"],
            &["MULTI"],
            &["SET"],
            &["NOSUCHCMD"],
            &["GET", "a"],
            &["EXEC"],
            &["MULTI"],
            &["MULTI"],
            &["WATCH", "a"],
            &["DISCARD"],
            &["DISCARD"],
            &["WATCH", "a", "b"],
            &["MULTI"],
            &["SET", "x{t}", "1"],
            &["SET", "y{t}", "2"],
            &["INCR", "x{t}"],
            &["HGET", "y{t}", "f"],
            &["EXEC"],
        ],
    );
    same_counts(&mut s, &mut r, &[]);
    // A queued command is processed when EXEC runs it, not when queued; a refused or
    // discarded transaction's never.
    assert_eq!(
        stat(&mut s, "total_commands_processed"),
        stat(&mut r, "total_commands_processed"),
        "total_commands_processed"
    );
}

const INCR_CALL: &str = "return redis.call('incr', KEYS[1])";
const INCR_PCALL_KEPT: &str = "local t = redis.pcall('incr', KEYS[1]) return 1";
const INCR_PCALL_RETURNED: &str = "return redis.pcall('incr', KEYS[1])";

#[test]
fn scripts_count_errors_once() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    let lib = "#!lua name=statslib\nredis.register_function('incr_it', function(keys, args) return redis.call('incr', keys[1]) end)";
    both(
        &mut s,
        &mut r,
        &[
            &["SET", "s", "str"],
            &["EVAL", INCR_CALL, "1", "s"],
            &["EVAL", INCR_PCALL_KEPT, "1", "s"],
            &["EVAL", INCR_PCALL_RETURNED, "1", "s"],
            &["EVAL", "return redis.error_reply('MY_ERR custom')", "0"],
            &["EVAL", "return redis.error_reply('')", "0"],
            &["EVAL", "return redis.call('nosuchcmd')", "0"],
            &["EVAL", "return redis.call('get')", "0"],
            &["EVAL", "return redis.pcall('get')", "0"],
            &[
                "EVAL_RO",
                "return redis.call('set', KEYS[1], 'x')",
                "1",
                "s",
            ],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "s"],
            &["EVAL", "return redis.call('select', 99)", "0"],
            &["EVAL", "return {1, 2}", "0"],
            &["EVAL", "error('boom')", "0"],
            &["EVAL", "return redis.call('set', KEYS[1], {})", "1", "s"],
            &["EVAL", "a"],
            &["EVALSHA", "0000000000000000000000000000000000000000", "0"],
            &["SCRIPT", "LOAD", "return 1"],
            &[
                "SCRIPT",
                "EXISTS",
                "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            ],
            &["FUNCTION", "LOAD", lib],
            &["FCALL", "incr_it", "1", "s"],
            &["FCALL", "incr_it", "1", "n"],
            &["FUNCTION", "DELETE", "statslib"],
            &["MULTI"],
            &["EVAL", INCR_CALL, "1", "s"],
            &["EVAL", INCR_PCALL_RETURNED, "1", "s"],
            &["EXEC"],
        ],
    );
    same_counts(&mut s, &mut r, &[]);
}

/// Runs `cmds` on both connections, in order, and their replies must be the same bytes.
fn both_same(s: &mut Raw, r: &mut Raw, cmds: &[&[&str]]) {
    for c in cmds {
        let (a, b) = (call(s, c), call(r, c));
        assert_eq!(
            String::from_utf8_lossy(&a),
            String::from_utf8_lossy(&b),
            "{c:?}"
        );
    }
}

/// Errors inside a script's result, at any depth (arrays, RESP3 maps and sets, error tables,
/// redis.error_reply, redis.pcall's), are counted as Redis' luaReplyToRedisReply counts each
/// one: those the script made in errorstats and total_error_replies, those of a command it
/// called (counted there) only against the script's failed_calls, once each.
#[test]
fn errors_nested_in_a_script_result() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    let lib = "#!lua name=nestlib\nredis.register_function('nested', function(keys, args) return {1, {err='FN bad'}, redis.pcall('incr', keys[1])} end)";
    let cmds: &[&[&str]] = &[
        &["SET", "s", "str"],
        &["EVAL", "return {1, {err='X bad'}}", "0"],
        &[
            "EVAL",
            "return {{err='X bad'}, {err='Y bad'}, {err='nospace'}}",
            "0",
        ],
        &[
            "EVAL",
            "return {{err='-X bad'}, {err='bad\\r\\nx y\\r\\n'}, {err=''}}",
            "0",
        ],
        &["EVAL", "return {{err='Z\\0rest ignored'}}", "0"],
        &["EVAL", "return {1, redis.error_reply('MY thing')}", "0"],
        &["EVAL", "return {1, redis.error_reply('-MY thing')}", "0"],
        &["EVAL", "return {1, redis.pcall('nosuch')}", "0"],
        &[
            "EVAL",
            "return {redis.pcall('incr', KEYS[1]), redis.pcall('incr', KEYS[1])}",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "return {{err='A x'}, redis.pcall('incr', KEYS[1]), {err='A y'}}",
            "1",
            "s",
        ],
        &["EVAL", "return {1, {2, {3, {err='DEEP x'}}}}", "0"],
        &["EVAL", "return {1, {err=5}}", "0"],
        &["EVAL", "return {map={a={err='M bad'}}}", "0"],
        &[
            "EVAL",
            "redis.setresp(3) return {map={a={err='M bad'}}, x=1}",
            "0",
        ],
        &[
            "EVAL",
            "redis.setresp(3) return {set={[{err='S bad'}]=true}}",
            "0",
        ],
        &["EVAL", "return {{ok='fine'}, {err='ERR plain'}}", "0"],
        &["EVAL_RO", "return {1, {err='RO bad'}}", "0"],
        &["FUNCTION", "LOAD", lib],
        &["FCALL", "nested", "1", "s"],
        &["FCALL_RO", "nested", "1", "s"],
        &["MULTI"],
        &[
            "EVAL",
            "return {1, {err='TX bad'}, redis.pcall('incr', KEYS[1])}",
            "1",
            "s",
        ],
        &["EXEC"],
    ];
    both_same(&mut s, &mut r, cmds);
    same_counts(&mut s, &mut r, &[]);
    // The same from a RESP3 client (INFO read on the RESP2 connections).
    reset(&mut s, &mut r);
    let (mut s3, mut r3) = p.conns();
    both(&mut s3, &mut r3, &[&["HELLO", "3"]]);
    both_same(&mut s3, &mut r3, &cmds[..cmds.len() - 6]);
    same_counts(&mut s, &mut r, &["hello"]);
}

#[test]
fn out_of_memory_refusals() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    both(
        &mut s,
        &mut r,
        &[
            &["CONFIG", "SET", "maxmemory", "1"],
            &["SET", "a", "b"],
            &["GET", "a"],
            &["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "a"],
            &["EVAL", "return redis.pcall('set', KEYS[1], 'x')", "1", "a"],
            &[
                "EVAL",
                "local t = redis.pcall('set', KEYS[1], 'x') return 1",
                "1",
                "a",
            ],
            &["CONFIG", "SET", "maxmemory", "0"],
            &["SET", "a", "b"],
        ],
    );
    same_counts(&mut s, &mut r, &[]);
}

#[test]
fn subscribe_mode_authentication_and_protocol_errors() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    let (mut s2, mut r2) = p.conns();
    both(
        &mut s2,
        &mut r2,
        &[
            &["SUBSCRIBE", "ch"],
            &["GET", "k"],
            &["PING"],
            &["UNSUBSCRIBE", "ch"],
        ],
    );
    both(&mut s, &mut r, &[&["CONFIG", "SET", "requirepass", "pw"]]);
    let (mut s3, mut r3) = p.conns();
    both(
        &mut s3,
        &mut r3,
        &[
            &["GET", "k"],
            &["AUTH", "wrong"],
            &["AUTH", "pw"],
            &["GET", "k"],
            &["CONFIG", "SET", "requirepass", ""],
        ],
    );
    // A protocol error is an error reply without a command.
    let (mut s4, mut r4) = p.conns();
    for raw in [&mut s4, &mut r4] {
        raw.send(b"*x\r\n");
        assert_eq!(
            show(&raw.reply()),
            show(b"-ERR Protocol error: invalid multibulk length\r\n")
        );
    }
    same_counts(&mut s, &mut r, &[]);
}

/// Waits until `raw`'s server has a client blocked (polls INFO clients).
fn wait_blocked(raw: &mut Raw) {
    for _ in 0..500 {
        if info(raw, "clients").contains("blocked_clients:1\r\n") {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no client blocked");
}

#[test]
fn blocking_commands() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    let (mut bs, mut br) = p.conns();
    for (blocked, other) in [(&mut bs, &mut s), (&mut br, &mut r)] {
        let id = int_of(&call(blocked, &["CLIENT", "ID"])).to_string();
        call(blocked, &["BLPOP", "nolist", "0.01"]);
        blocked.send(&cmd(&[b"BLPOP", b"list", b"0"]));
        wait_blocked(other);
        call(other, &["CLIENT", "UNBLOCK", &id, "ERROR"]);
        let got = blocked.reply();
        assert!(got.starts_with(b"-UNBLOCKED"), "{}", show(&got));
        blocked.send(&cmd(&[b"BLPOP", b"list", b"0"]));
        wait_blocked(other);
        call(other, &["LPUSH", "list", "a"]);
        assert_eq!(blocked.reply(), b"*2\r\n$4\r\nlist\r\n$1\r\na\r\n");
    }
    // INFO polls may differ in number.
    same_counts(&mut s, &mut r, &["info"]);
    let lat = info(&mut s, "latencystats");
    assert!(
        lat.contains("\r\nlatency_percentiles_usec_blpop:p50="),
        "{lat}"
    );
}

/// INFO latencystats' command names, each line checked for `percentiles` in order with
/// non-decreasing values of three decimals.
fn latency_names(raw: &mut Raw, percentiles: &[&str]) -> Vec<String> {
    let text = info(raw, "latencystats");
    let mut names = Vec::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        if line == "# Latencystats" {
            continue;
        }
        let (name, values) = line
            .strip_prefix("latency_percentiles_usec_")
            .and_then(|l| l.split_once(':'))
            .unwrap_or_else(|| panic!("not a latency line: {line:?}"));
        let mut last = 0.0;
        let pairs: Vec<(&str, &str)> = values
            .split(',')
            .filter(|kv| !kv.is_empty())
            .map(|kv| kv.split_once('=').expect("pN=value"))
            .collect();
        let keys: Vec<&str> = pairs.iter().map(|(k, _)| *k).collect();
        let want: Vec<String> = percentiles.iter().map(|p| format!("p{p}")).collect();
        assert_eq!(keys, want, "{line}");
        for (_, v) in pairs {
            assert_eq!(v.split_once('.').map(|(_, d)| d.len()), Some(3), "{line}");
            let v: f64 = v.parse().expect("a number");
            assert!(v >= last, "{line}");
            last = v;
        }
        names.push(name.to_string());
    }
    names.sort();
    names
}

#[test]
fn latency_tracking_settings() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    let same = |s: &mut Raw, r: &mut Raw, c: &[&str]| {
        let (a, b) = (call(s, c), call(r, c));
        assert_eq!(show(&a), show(&b), "{c:?}");
    };
    for c in [
        &["CONFIG", "GET", "latency-tracking"][..],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "0 50 99.9 100",
        ],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "10 a"],
        &["CONFIG", "SET", "latency-tracking-info-percentiles", "101"],
        &["CONFIG", "SET", "latency-tracking", "maybe"],
        &["CONFIG", "GET", "latency-tracking-info-percentiles"],
    ] {
        same(&mut s, &mut r, c);
    }
    both(
        &mut s,
        &mut r,
        &[
            &["SET", "a", "b"],
            &["GET", "a"],
            &["CLIENT", "ID"],
            &["SET"],
        ],
    );
    let pct = ["0", "50", "99.9", "100"];
    let names = latency_names(&mut s, &pct);
    assert_eq!(names, latency_names(&mut r, &pct));
    assert!(names.contains(&"client|id".to_string()), "{names:?}");
    same_counts(&mut s, &mut r, &[]);
    // Off: nothing shown; on again: what was kept meanwhile.
    same(&mut s, &mut r, &["CONFIG", "SET", "latency-tracking", "no"]);
    same(&mut s, &mut r, &["CONFIG", "GET", "latency-tracking"]);
    assert_eq!(info(&mut s, "latencystats"), "# Latencystats\r\n");
    assert_eq!(info(&mut r, "latencystats"), "# Latencystats\r\n");
    both(
        &mut s,
        &mut r,
        &[&["SET", "c", "d"], &["HSET", "h", "f", "v"]],
    );
    both(
        &mut s,
        &mut r,
        &[&["CONFIG", "SET", "latency-tracking", "yes"]],
    );
    let names = latency_names(&mut s, &pct);
    assert_eq!(names, latency_names(&mut r, &pct));
    assert!(!names.contains(&"hset".to_string()), "{names:?}");
    // An empty list shows the commands with nothing after the colon.
    same(
        &mut s,
        &mut r,
        &["CONFIG", "SET", "latency-tracking-info-percentiles", ""],
    );
    let (a, b) = (info(&mut s, "latencystats"), info(&mut r, "latencystats"));
    assert!(a.contains("\r\nlatency_percentiles_usec_get:\r\n"), "{a}");
    assert!(b.contains("\r\nlatency_percentiles_usec_get:\r\n"), "{b}");
    both(&mut s, &mut r, &[&["CONFIG", "RESETSTAT"]]);
    assert_eq!(latency_names(&mut s, &[]), ["config|resetstat".to_string()]);
}

/// Which of the three sections an INFO reply has.
fn stats_sections(raw: &mut Raw, args: &[&str]) -> [bool; 3] {
    let mut c = vec!["INFO"];
    c.extend_from_slice(args);
    let text = String::from_utf8(bulk_of(&call(raw, &c))).expect("utf-8");
    [
        "# Commandstats\r\n",
        "# Errorstats\r\n",
        "# Latencystats\r\n",
    ]
    .map(|h| text.starts_with(h) || text.contains(&format!("\r\n{h}")))
}

#[test]
fn sections_shown_as_redis_shows_them() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    for args in [
        &[][..],
        &["default"],
        &["all"],
        &["everything"],
        &["commandstats"],
        &["ERRORSTATS"],
        &["latencystats", "server"],
        &["default", "commandstats"],
    ] {
        assert_eq!(
            stats_sections(&mut s, args),
            stats_sections(&mut r, args),
            "INFO {args:?}"
        );
    }
}

/// CLUSTER without cluster mode: Redis' replies byte for byte (arity per subcommand, unknown
/// subcommand, cluster support disabled, CLUSTER RESET refused in scripts), counted as Redis
/// counts them.
#[test]
fn cluster_without_cluster_mode() {
    let p = Pair::start();
    let (mut s, mut r) = p.conns();
    reset(&mut s, &mut r);
    both_same(
        &mut s,
        &mut r,
        &[
            &["CLUSTER"],
            &["CLUSTER", "INFO"],
            &["cluster", "keyslot"],
            &["cluster", "keyslot", "a"],
            &["CLUSTER", "nosuch"],
            &["CLUSTER", "HELP"],
            &["CLUSTER", "RESET", "HARD"],
            &["CLUSTER", "SLOTS"],
            &["EVAL", "return redis.call('cluster', 'reset', 'hard')", "0"],
            &["EVAL", "return redis.pcall('cluster', 'info')", "0"],
        ],
    );
    assert_eq!(
        call(&mut s, &["CLUSTER", "INFO"]),
        b"-ERR This instance has cluster support disabled\r\n"
    );
    call(&mut r, &["CLUSTER", "INFO"]);
    same_counts(&mut s, &mut r, &[]);
}

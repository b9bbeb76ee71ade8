//! Keyspace notifications against the real binary on two cores: the events of a command
//! sequence over every type compared with a real redis-server's, byte for byte; CONFIG SET/GET
//! and the start-up flag; events off by default; lazy and active expiry; cache-mode eviction.
mod common;

use std::time::{Duration, Instant};

use common::*;

/// A connection subscribed to every keyspace and keyevent channel.
fn listener(port: u16) -> Raw {
    let mut l = Raw::connect(port);
    l.send(&cmd(&[b"PSUBSCRIBE", b"__key*__:*"]));
    l.reply();
    l
}

/// Runs `cmds` on a fresh connection to `port` and returns the events they published.
fn events_of(port: u16, cmds: &[&[&str]]) -> Vec<(String, String)> {
    let mut l = listener(port);
    let mut c = Raw::connect(port);
    for args in cmds {
        if args[0] == "SLEEP" {
            std::thread::sleep(Duration::from_millis(args[1].parse().unwrap()));
            continue;
        }
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        c.send(&cmd(&a));
        let r = c.reply();
        assert!(
            !r.starts_with(b"-"),
            "{args:?}: {}",
            String::from_utf8_lossy(&r)
        );
    }
    keyspace_messages(&mut l, &mut c)
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// Every class's events for a sequence over all types (keys sharing a shard through a hash
/// tag where a command takes two), exactly as redis-server 7.0 publishes them.
const SEQUENCE: &[&[&str]] = &[
    &["CONFIG", "SET", "notify-keyspace-events", "KEAn"],
    &["SET", "s1", "v"],
    &["SET", "s1", "v2", "EX", "100"],
    &["APPEND", "s1", "x"],
    &["SETRANGE", "s1", "1", "yy"],
    &["INCR", "n1"],
    &["INCRBY", "n1", "5"],
    &["DECR", "n1"],
    &["INCRBYFLOAT", "f1", "1.5"],
    &["GETSET", "s1", "z"],
    &["EXPIRE", "s1", "100"],
    &["GETEX", "s1", "PERSIST"],
    &["GETEX", "s1", "EX", "100"],
    &["GETDEL", "s1"],
    &["SETNX", "s2", "a"],
    &["SETNX", "s2", "b"],
    &["SETEX", "s3", "100", "a"],
    &["MSET", "{t}a", "1", "{t}b", "2"],
    &["EXPIRE", "{t}a", "100"],
    &["PERSIST", "{t}a"],
    &["PEXPIRE", "{t}a", "0"],
    &["RENAME", "{t}b", "{t}c"],
    &["SET", "{t}e", "x"],
    &["RENAME", "{t}c", "{t}e"],
    &["COPY", "{t}e", "{t}d"],
    &["MOVE", "{t}d", "1"],
    &["DEL", "{t}e", "nokey"],
    &["HSET", "h", "f1", "1", "f2", "2"],
    &["HSETNX", "h", "f1", "x"],
    &["HSETNX", "h", "f3", "x"],
    &["HINCRBY", "h", "f1", "2"],
    &["HINCRBYFLOAT", "h", "f2", "0.5"],
    &["HDEL", "h", "nofield"],
    &["HDEL", "h", "f1", "f2", "f3"],
    &["LPUSH", "l", "a", "b", "c"],
    &["RPUSH", "l", "d"],
    &["LPUSHX", "nol", "a"],
    &["LSET", "l", "0", "z"],
    &["LINSERT", "l", "BEFORE", "z", "y"],
    &["LINSERT", "l", "BEFORE", "nopivot", "y"],
    &["LREM", "l", "1", "y"],
    &["LTRIM", "l", "0", "1"],
    &["LPOP", "l"],
    &["RPOP", "l"],
    &["RPUSH", "{t}l1", "a", "b"],
    &["LMOVE", "{t}l1", "{t}l2", "LEFT", "RIGHT"],
    &["RPOPLPUSH", "{t}l1", "{t}l2"],
    &["LMOVE", "{t}l2", "{t}l2", "LEFT", "RIGHT"],
    &["LMPOP", "2", "{t}none", "{t}l2", "LEFT", "COUNT", "5"],
    &["SADD", "st", "a", "b", "c"],
    &["SADD", "st", "a"],
    &["SREM", "st", "a"],
    &["SPOP", "st", "5"],
    &["SADD", "{t}s1", "a", "b"],
    &["SADD", "{t}s2", "c"],
    &["SMOVE", "{t}s1", "{t}s2", "a"],
    &["SMOVE", "{t}s1", "{t}s2", "b"],
    &["SINTERSTORE", "{t}s3", "{t}s1", "{t}s2"],
    &["SUNIONSTORE", "{t}s3", "{t}s1", "{t}s2"],
    &["SDIFFSTORE", "{t}s4", "{t}s2", "{t}s1"],
    &["SINTERSTORE", "{t}s3", "{t}s1", "{t}s9"],
    &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
    &["ZADD", "z", "1", "a"],
    &["ZINCRBY", "z", "1", "a"],
    &["ZADD", "z", "INCR", "1", "a"],
    &["ZREM", "z", "b", "nomember"],
    &["ZREMRANGEBYSCORE", "z", "100", "200"],
    &["ZADD", "z", "5", "d", "6", "e"],
    &["ZREMRANGEBYRANK", "z", "0", "0"],
    &["ZADD", "zl", "0", "a", "0", "b", "0", "c"],
    &["ZREMRANGEBYLEX", "zl", "[a", "[b"],
    &["ZPOPMIN", "z"],
    &["ZPOPMAX", "z", "10"],
    &["ZADD", "{t}z1", "1", "a", "2", "b"],
    &["ZUNIONSTORE", "{t}z2", "1", "{t}z1"],
    &["ZINTERSTORE", "{t}z3", "2", "{t}z1", "{t}z2"],
    &["ZDIFFSTORE", "{t}z2", "2", "{t}z1", "{t}z3"],
    &["ZRANGESTORE", "{t}z4", "{t}z1", "0", "0"],
    &["ZMPOP", "1", "{t}z4", "MIN"],
    &["SETBIT", "b1", "3", "1"],
    &["SETBIT", "b1", "3", "1"],
    &["BITFIELD", "b1", "SET", "u8", "0", "255"],
    &["SET", "{t}b2", "a"],
    &["BITOP", "OR", "{t}bd", "{t}b2"],
    &["BITOP", "AND", "{t}bd", "{t}b9"],
    &["PFADD", "{t}hl", "a", "b"],
    &["PFADD", "{t}hl", "a"],
    &["PFMERGE", "{t}hl2", "{t}hl"],
    &["RPUSH", "{t}srt", "3", "1", "2"],
    &["SORT", "{t}srt", "STORE", "{t}sorted"],
    &["SORT", "{t}nosrt", "STORE", "{t}sorted"],
    &["SET", "e1", "v", "PX", "1"],
    &["SLEEP", "20"],
    &["GET", "e1"],
    &["CONFIG", "SET", "notify-keyspace-events", "Egx"],
    &["SET", "e2", "v"],
    &["DEL", "e2"],
    &["CONFIG", "SET", "notify-keyspace-events", ""],
    &["SET", "e3", "v"],
];

#[test]
fn events_match_redis_server() {
    let s = server();
    let strata = events_of(s.port, SEQUENCE);
    // What Strata says on its own, in case no redis-server is there to compare with.
    assert!(strata.contains(&("__keyspace@1__:{t}d".into(), "move_to".into())));
    assert!(strata.contains(&("__keyevent@0__:expired".into(), "e1".into())));
    assert!(strata.contains(&("__keyevent@0__:del".into(), "e2".into())));
    assert!(!strata.iter().any(|(_, p)| p == "e3"));
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let redis = events_of(real.port, SEQUENCE);
    for (i, (a, b)) in strata.iter().zip(&redis).enumerate() {
        assert_eq!(
            a, b,
            "event {i} differs; Strata: {strata:#?}\nRedis: {redis:#?}"
        );
    }
    assert_eq!(
        strata.len(),
        redis.len(),
        "Strata: {strata:#?}\nRedis: {redis:#?}"
    );
}

/// Reads of missing keys (the `m` class), as redis-server reports them.
const MISSES: &[&[&str]] = &[
    &["CONFIG", "SET", "notify-keyspace-events", "KEm"],
    &["SET", "here", "v"],
    &["GET", "here"],
    &["GET", "nokey"],
    &["MGET", "here", "nokey2"],
    &["STRLEN", "nokey"],
    &["GETRANGE", "nokey", "0", "1"],
    &["HGET", "nohash", "f"],
    &["HGETALL", "nohash"],
    &["LRANGE", "nolist", "0", "-1"],
    &["LLEN", "nolist"],
    &["SMEMBERS", "noset"],
    &["SISMEMBER", "noset", "a"],
    &["ZRANGE", "noz", "0", "-1"],
    &["ZSCORE", "noz", "a"],
    &["GETBIT", "nokey", "1"],
    &["PFCOUNT", "nokey"],
    &["SET", "here", "w"],
    &["INCR", "nokey3"],
    &["TYPE", "nokey"],
    &["TTL", "nokey"],
    &["PTTL", "here"],
    &["EXISTS", "nokey", "here"],
    &["DUMP", "nokey"],
    &["OBJECT", "ENCODING", "nokey"],
];

#[test]
fn key_miss_events_match_redis_server() {
    let s = server();
    let strata = events_of(s.port, MISSES);
    assert!(strata.contains(&("__keyevent@0__:keymiss".into(), "nokey".into())));
    assert!(!strata.iter().any(|(_, p)| p == "here" || p == "nokey3"));
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let redis = events_of(real.port, MISSES);
    assert_eq!(strata, redis);
}

#[test]
fn config_flag_and_default_off() {
    let s = server();
    let mut c = s.raw();
    rt(
        &mut c,
        &["CONFIG", "GET", "notify-keyspace-events"],
        &arr(&[&b("notify-keyspace-events"), &b("")]),
    );
    // Off: nothing published.
    assert_eq!(events_of(s.port, &[&["SET", "k", "v"]]), vec![]);
    rt(
        &mut c,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        "+OK\r\n",
    );
    rt(
        &mut c,
        &["CONFIG", "GET", "notify-keyspace-events"],
        &arr(&[&b("notify-keyspace-events"), &b("AKE")]),
    );
    rt(
        &mut c,
        &["CONFIG", "SET", "notify-keyspace-events", "Kg$xn"],
        "+OK\r\n",
    );
    rt(
        &mut c,
        &["CONFIG", "GET", "notify-keyspace-events"],
        &arr(&[&b("notify-keyspace-events"), &b("g$xnK")]),
    );
    rt(
        &mut c,
        &["CONFIG", "SET", "notify-keyspace-events", "KQ"],
        &e("ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
    );
    // Classes without K or E publish nothing.
    rt(
        &mut c,
        &["CONFIG", "SET", "notify-keyspace-events", "A"],
        "+OK\r\n",
    );
    assert_eq!(events_of(s.port, &[&["SET", "k", "v"]]), vec![]);
    // The start-up flag.
    let s2 = Server::start(
        STRATA,
        &["--proactor_threads", "2", "--notify_keyspace_events", "E$"],
    );
    assert_eq!(
        events_of(s2.port, &[&["SET", "k", "v"], &["HSET", "h", "f", "v"]]),
        pairs(&[("__keyevent@0__:set", "k")])
    );
    assert!(startup_error(STRATA, &["--notify_keyspace_events", "KQ"]).contains("KQ"));
}

/// Keys on both shards, written from one connection: every event arrives, from whichever
/// core owns the key.
#[test]
fn events_from_both_cores() {
    let s = server();
    let (a, b) = keys_on_different_shards("k", 2);
    let got = events_of(
        s.port,
        &[
            &["CONFIG", "SET", "notify-keyspace-events", "E$g"],
            &["SET", &a, "1"],
            &["SET", &b, "2"],
            &["RENAME", &a, &b],
            &["MSET", &a, "1", &b, "2"],
            &["DEL", &a, &b],
        ],
    );
    let mut tail: Vec<(String, String)> = got[5..].to_vec();
    tail.sort();
    assert_eq!(
        got[..5].to_vec(),
        pairs(&[
            ("__keyevent@0__:set", &a),
            ("__keyevent@0__:set", &b),
            ("__keyevent@0__:rename_from", &a),
            ("__keyevent@0__:rename_to", &b),
            // MSET's halves run on their own cores at once: either order.
            (&got[4].0, &got[4].1),
        ])
    );
    let mut want = pairs(&[
        ("__keyevent@0__:set", if got[4].1 == a { &b } else { &a }),
        ("__keyevent@0__:del", &a),
        ("__keyevent@0__:del", &b),
    ]);
    want.sort();
    assert_eq!(tail, want);
}

/// A key nobody reads again still reports `expired`, from active expiry.
#[test]
fn active_expiry_reports_expired() {
    let s = server();
    let mut c = s.raw();
    rt(
        &mut c,
        &["CONFIG", "SET", "notify-keyspace-events", "Ex"],
        "+OK\r\n",
    );
    let mut l = listener(s.port);
    rt(&mut c, &["SET", "gone", "v", "PX", "30"], "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    l.stream()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let msg = l.value().expect("an expired event");
    assert!(Instant::now() < deadline);
    assert_eq!(
        msg,
        Resp::Array(Some(vec![
            Resp::Bulk(Some(b"pmessage".to_vec())),
            Resp::Bulk(Some(b"__key*__:*".to_vec())),
            Resp::Bulk(Some(b"__keyevent@0__:expired".to_vec())),
            Resp::Bulk(Some(b"gone".to_vec())),
        ]))
    );
}

/// Cache mode: keys pushed out past maxmemory report `evicted`.
#[test]
fn cache_mode_eviction_reports_evicted() {
    let s = Server::start(
        STRATA,
        &[
            "--proactor_threads",
            "2",
            "--cache_mode",
            "--maxmemory",
            "24mb",
            "--notify_keyspace_events",
            "Ee",
        ],
    );
    let mut l = Raw::connect(s.port);
    l.send(&cmd(&[b"SUBSCRIBE", b"__keyevent@0__:evicted"]));
    l.reply();
    let mut c = s.client();
    let value = vec![b'v'; 4096];
    for chunk in (0..16_000).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET")
                .arg(format!("key:{i}"))
                .arg(&value[..])
                .ignore();
        }
        p.query::<()>(&mut c).unwrap();
    }
    let evicted: u64 = info_u64(&mut c, "stats", "evicted_keys");
    assert!(evicted > 0, "nothing was evicted");
    let msg = l.value().expect("an evicted event");
    let Resp::Array(Some(parts)) = msg else {
        panic!("not a message: {msg:?}");
    };
    assert_eq!(
        parts[1],
        Resp::Bulk(Some(b"__keyevent@0__:evicted".to_vec()))
    );
    let Resp::Bulk(Some(key)) = &parts[2] else {
        panic!("no key");
    };
    assert!(key.starts_with(b"key:"));
}

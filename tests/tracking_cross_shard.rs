//! Client-side caching of read-only commands whose keys live on both shards of a two-thread
//! Strata (SUNION, ZINTER, LCS, PFCOUNT, MGET, ...): every key read is remembered, so a later
//! change of any of them pushes its invalidation (RESP3), as redis-server does; the same
//! sequences run against a real redis-server give the same bytes.
//!
//! Without redis-server installed the cross-check says so and passes, unless
//! STRATA_REQUIRE_REDIS=1.
mod common;

use common::*;

/// The RESP3 push that invalidates `key`.
fn inval3(key: &str) -> String {
    format!(">2\r\n$10\r\ninvalidate\r\n{}", arr(&[&b(key)]))
}

fn text(raw: &mut Raw, args: &[&str]) -> String {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    String::from_utf8_lossy(&raw.call(&a)).into_owned()
}

/// A reply's lines in sorted order: sets come in any order.
fn unordered(reply: &str) -> String {
    let mut lines: Vec<&str> = reply.split("\r\n").collect();
    lines.sort_unstable();
    lines.join("|")
}

/// One read: how to fill its two keys, and the read itself (`A` and `B` stand for the keys).
struct Read {
    fill: &'static [&'static str],
    read: &'static [&'static str],
}

const READS: &[Read] = &[
    Read {
        fill: &["SADD", "#", "x", "y"],
        read: &["SUNION", "A", "B"],
    },
    Read {
        fill: &["SADD", "#", "x", "y"],
        read: &["SINTER", "A", "B"],
    },
    Read {
        fill: &["SADD", "#", "x", "y"],
        read: &["SDIFF", "A", "B"],
    },
    Read {
        fill: &["SADD", "#", "x", "y"],
        read: &["SINTERCARD", "2", "A", "B"],
    },
    Read {
        fill: &["ZADD", "#", "1", "x"],
        read: &["ZUNION", "2", "A", "B"],
    },
    Read {
        fill: &["ZADD", "#", "1", "x"],
        read: &["ZINTER", "2", "A", "B", "WITHSCORES"],
    },
    Read {
        fill: &["ZADD", "#", "1", "x"],
        read: &["ZDIFF", "2", "A", "B"],
    },
    Read {
        fill: &["ZADD", "#", "1", "x"],
        read: &["ZINTERCARD", "2", "A", "B"],
    },
    Read {
        fill: &["SET", "#", "abcde"],
        read: &["LCS", "A", "B"],
    },
    Read {
        fill: &["PFADD", "#", "x", "y"],
        read: &["PFCOUNT", "A", "B"],
    },
    Read {
        fill: &["SET", "#", "v"],
        read: &["MGET", "A", "B"],
    },
    Read {
        fill: &["SET", "#", "v"],
        read: &["EXISTS", "A", "B"],
    },
];

/// Runs every read on the server at `port` with keys `ka` and `kb`, and returns the replies and
/// pushes the reading client got, in order, after checking them.
fn run(port: u16, ka: &str, kb: &str) -> Vec<String> {
    let (mut r, mut w) = (Raw::connect(port), Raw::connect(port));
    let _ = r.call(&[b"HELLO", b"3"]);
    assert_eq!(text(&mut r, &["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
    let sub = |args: &[&'static str]| -> Vec<String> {
        args.iter()
            .map(|s| match *s {
                "A" => ka.to_string(),
                "B" => kb.to_string(),
                s => s.to_string(),
            })
            .collect()
    };
    let mut seen = Vec::new();
    for rd in READS {
        for k in [ka, kb] {
            let fill: Vec<String> = rd
                .fill
                .iter()
                .map(|s| {
                    if *s == "#" {
                        k.to_string()
                    } else {
                        s.to_string()
                    }
                })
                .collect();
            let fill: Vec<&str> = fill.iter().map(String::as_str).collect();
            text(&mut w, &fill);
        }
        let read = sub(rd.read);
        let read: Vec<&str> = read.iter().map(String::as_str).collect();
        let reply = text(&mut r, &read);
        assert!(!reply.starts_with('-'), "{read:?}: {reply}");
        seen.push(unordered(&reply));
        // Each key read is told of once it changes, whichever shard holds it.
        for k in [ka, kb] {
            assert_eq!(text(&mut w, &["DEL", k]), ":1\r\n");
            let push = String::from_utf8_lossy(&r.reply()).into_owned();
            assert_eq!(push, inval3(k), "{read:?}: the change of {k}");
            seen.push(push);
        }
        assert_eq!(
            text(&mut r, &["PING"]),
            "+PONG\r\n",
            "{read:?}: nothing more"
        );
    }
    // SORT_RO remembers its key (on either shard).
    for k in [ka, kb] {
        text(&mut w, &["RPUSH", k, "2", "1"]);
        let reply = text(&mut r, &["SORT_RO", k]);
        assert_eq!(reply, arr(&[&b("1"), &b("2")]));
        text(&mut w, &["RPUSH", k, "3"]);
        assert_eq!(
            String::from_utf8_lossy(&r.reply()),
            inval3(k),
            "SORT_RO {k}"
        );
        text(&mut w, &["DEL", k]);
        seen.push(reply);
    }
    seen
}

#[test]
fn reads_across_shards_are_remembered_for_every_key() {
    let s = server();
    let (ka, kb) = keys_on_different_shards("trk", 2);
    let strata = run(s.port, &ka, &kb);
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    assert_eq!(strata, run(real.port, &ka, &kb));
}

/// Inside MULTI/EXEC a cross-shard read is remembered as outside; a script remembers the keys
/// it declared, not those its commands read (Redis' rule).
fn run_exec_and_script(port: u16, ka: &str, kb: &str) -> Vec<String> {
    let (mut r, mut w) = (Raw::connect(port), Raw::connect(port));
    let _ = r.call(&[b"HELLO", b"3"]);
    assert_eq!(text(&mut r, &["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
    let mut seen = Vec::new();
    text(&mut w, &["SADD", ka, "x"]);
    text(&mut w, &["SADD", kb, "y"]);
    assert_eq!(text(&mut r, &["MULTI"]), "+OK\r\n");
    assert_eq!(text(&mut r, &["SUNION", ka, kb]), "+QUEUED\r\n");
    seen.push(unordered(&text(&mut r, &["EXEC"])));
    for k in [ka, kb] {
        text(&mut w, &["SADD", k, "z"]);
        let push = String::from_utf8_lossy(&r.reply()).into_owned();
        assert_eq!(push, inval3(k), "EXEC: the change of {k}");
    }
    let script = "return #redis.call('SUNION', KEYS[1], ARGV[1])";
    seen.push(text(&mut r, &["EVAL", script, "1", ka, kb]));
    text(&mut w, &["SADD", kb, "w"]);
    text(&mut w, &["SADD", ka, "w"]);
    let push = String::from_utf8_lossy(&r.reply()).into_owned();
    assert_eq!(push, inval3(ka), "EVAL: only the declared key");
    assert_eq!(text(&mut r, &["PING"]), "+PONG\r\n");
    seen
}

#[test]
fn reads_across_shards_in_exec_are_remembered_and_in_scripts_the_declared_keys() {
    let s = server();
    let (ka, kb) = keys_on_different_shards("trkx", 2);
    let strata = run_exec_and_script(s.port, &ka, &kb);
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    assert_eq!(strata, run_exec_and_script(real.port, &ka, &kb));
}

/// Sends `args` and then PING, and returns everything that came back up to the PONG: the
/// reply, and any invalidation pushed meanwhile.
fn then_pong(raw: &mut Raw, args: &[&str]) -> String {
    all_then_pong(raw, &[args])
}

/// Sends each of `cmds` and then PING (after an EXEC), and returns everything that came back
/// up to the PONG.
fn all_then_pong(raw: &mut Raw, cmds: &[&[&str]]) -> String {
    let mut got = String::new();
    for args in cmds {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        got.push_str(&String::from_utf8_lossy(&raw.call(&a)));
    }
    raw.send(b"PING\r\n");
    loop {
        let r = String::from_utf8_lossy(&raw.reply()).into_owned();
        if r == "+PONG\r\n" {
            return got;
        }
        got.push_str(&r);
    }
}

/// `got` with its invalidation pushes taken out, and the keys they named in sorted order (how
/// they are grouped into messages is `bcast_sends_one_message_per_prefix_for_a_write_across_shards`'
/// matter).
fn keys_told(got: &str) -> String {
    let lines: Vec<&str> = got.split("\r\n").collect();
    let (mut rest, mut keys) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < lines.len() {
        if lines[i] == ">2" && lines.get(i + 2) == Some(&"invalidate") {
            let n: usize = lines[i + 3][1..].parse().unwrap_or(0);
            for j in 0..n {
                keys.push(lines[i + 5 + 2 * j]);
            }
            i += 4 + 2 * n;
        } else {
            rest.push(lines[i]);
            i += 1;
        }
    }
    keys.sort_unstable();
    format!("{} told {keys:?}", rest.join("|"))
}

/// A NOLOOP client (default mode, then BCAST) writes keys on both shards with MSET, DEL,
/// SMOVE, a script and MULTI/EXEC: it hears nothing of its own writes (but, in BCAST, of its
/// script's, as in Redis), and another tracking client hears of each key.
fn run_noloop(port: u16, ka: &str, kb: &str) -> Vec<String> {
    let (mut me, mut other) = (Raw::connect(port), Raw::connect(port));
    for c in [&mut me, &mut other] {
        let _ = c.call(&[b"HELLO", b"3"]);
    }
    let script = "redis.call('SET', KEYS[1], 1) redis.call('SET', KEYS[2], 2)";
    let writes: &[&[&[&str]]] = &[
        &[&["MSET", ka, "1", kb, "2"]],
        &[&["DEL", ka, kb]],
        &[&["SMOVE", ka, kb, "m"]],
        &[&["EVAL", script, "2", ka, kb]],
        &[&["MULTI"], &["SET", ka, "3"], &["SET", kb, "4"], &["EXEC"]],
    ];
    let mut seen = Vec::new();
    for mode in [
        &["CLIENT", "TRACKING", "ON", "NOLOOP"][..],
        &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"],
    ] {
        seen.push(then_pong(&mut me, mode));
        seen.push(then_pong(&mut other, &["CLIENT", "TRACKING", "ON"]));
        for w in writes {
            if w[0][0] == "SMOVE" {
                then_pong(&mut me, &["DEL", ka, kb]);
                then_pong(&mut me, &["SADD", ka, "m"]);
            }
            // Both read the keys (remembered in default mode).
            for c in [&mut me, &mut other] {
                for k in [ka, kb] {
                    then_pong(c, &["TYPE", k]);
                }
            }
            seen.push(format!("{w:?}: {}", keys_told(&all_then_pong(&mut me, w))));
            let told = keys_told(&then_pong(&mut other, &["ECHO", "x"]));
            seen.push(format!("other: {told}"));
        }
        seen.push(then_pong(&mut me, &["CLIENT", "TRACKING", "OFF"]));
        seen.push(then_pong(&mut other, &["CLIENT", "TRACKING", "OFF"]));
    }
    seen
}

#[test]
fn noloop_covers_writes_across_shards() {
    let s = server();
    let (ka, kb) = keys_on_different_shards("nl", 2);
    let strata = run_noloop(s.port, &ka, &kb);
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let want = run_noloop(real.port, &ka, &kb);
    let diffs: Vec<String> = strata
        .iter()
        .zip(&want)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("strata: {a}\n redis: {b}"))
        .collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// Everything a pipeline of `cmds` (sent in one write) got back, up to the PONG sent after it.
fn pipelined(raw: &mut Raw, cmds: &[&[&str]]) -> String {
    let mut req = Vec::new();
    for c in cmds {
        req.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
        for a in *c {
            req.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
        }
    }
    req.extend_from_slice(b"PING\r\n");
    raw.send(&req);
    let mut got = String::new();
    loop {
        let r = String::from_utf8_lossy(&raw.reply()).into_owned();
        if r == "+PONG\r\n" {
            return got;
        }
        got.push_str(&r);
    }
}

/// A client's own writes in a pipeline: each invalidation comes right after the reply of the
/// write that caused it (RESP3, and redirected to itself), keys on one shard and on both, of
/// plain writes, EXEC, a script, MSET, DEL and FLUSHDB/FLUSHALL (a null invalidation).
fn run_own_writes(port: u16, ka: &str, kb: &str) -> Vec<String> {
    let mut me = Raw::connect(port);
    let _ = me.call(&[b"HELLO", b"3"]);
    let id = text(&mut me, &["CLIENT", "ID"]);
    let id = id.trim_start_matches(':').trim_end().to_string();
    let mut seen = Vec::new();
    for on in [
        vec!["CLIENT", "TRACKING", "ON"],
        vec!["CLIENT", "TRACKING", "ON", "REDIRECT", id.as_str()],
    ] {
        seen.push(text(&mut me, &on));
        let same = format!("{ka}x");
        for (k1, k2) in [(ka, kb), (ka, same.as_str())] {
            seen.push(pipelined(&mut me, &[&["GET", k1], &["GET", k2]]));
            seen.push(pipelined(
                &mut me,
                &[
                    &["SET", k1, "1"],
                    &["SET", k2, "2"],
                    &["INCR", k1],
                    &["GET", k1],
                ],
            ));
            seen.push(pipelined(
                &mut me,
                &[&["DEL", k1], &["APPEND", k2, "x"], &["DEL", k2]],
            ));
            // Commands that span shards: after their reply, in the order they changed the keys.
            let script = "redis.call('SET', KEYS[1], 1) redis.call('SET', KEYS[2], 2)";
            let spans: &[&[&[&str]]] = &[
                &[
                    &["MULTI"],
                    &["SET", k1, "1"],
                    &["SET", k2, "2"],
                    &["EXEC"],
                    &["GET", k1],
                ],
                &[&["EVAL", script, "2", k1, k2], &["GET", k1]],
                &[&["MSET", k1, "1", k2, "2"], &["GET", k1]],
                &[&["DEL", k2, k1], &["GET", k1]],
                &[&["SET", k1, "1"], &["FLUSHDB"], &["GET", k1], &["FLUSHALL"]],
            ];
            for span in spans {
                seen.push(pipelined(&mut me, &[&["GET", k1], &["GET", k2]]));
                seen.push(pipelined(&mut me, span));
            }
        }
        seen.push(text(&mut me, &["CLIENT", "TRACKING", "OFF"]));
    }
    seen
}

#[test]
fn own_write_invalidations_follow_each_reply_in_a_pipeline() {
    let s = server();
    let (ka, kb) = keys_on_different_shards("own", 2);
    let strata = run_own_writes(s.port, &ka, &kb);
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let want = run_own_writes(real.port, &ka, &kb);
    let diffs: Vec<String> = strata
        .iter()
        .zip(&want)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("strata: {a:?}\n redis: {b:?}"))
        .collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// A BCAST client (prefixes `a` and `b`, then none) hears of a write that changes keys on
/// both shards in one message per prefix, with every key that prefix matches, as Redis sends
/// them once per event-loop turn: MSET, DEL of several keys, MULTI/EXEC, a script, its own
/// writes (after their reply) and a NOLOOP writer's.
fn run_bcast(port: u16, a: &[String], b: &[String]) -> Vec<String> {
    let (mut t, mut w) = (Raw::connect(port), Raw::connect(port));
    let _ = t.call(&[b"HELLO", b"3"]);
    let script = "for i, k in ipairs(KEYS) do redis.call('SET', k, i) end";
    let (a0, a1, a2, b0, b1) = (&*a[0], &*a[1], &*a[2], &*b[0], &*b[1]);
    let writes: &[&[&[&str]]] = &[
        &[&[
            "MSET", a0, "1", b0, "2", a1, "3", "c", "4", a2, "5", b1, "6",
        ]],
        &[&["DEL", a0, a1, b0, "nokey", a2]],
        &[&["MSET", "c", "1", "d", "2"]],
        &[
            &["MULTI"],
            &["SET", a2, "1"],
            &["SET", b1, "2"],
            &["SET", a0, "3"],
            &["EXEC"],
        ],
        &[&["EVAL", script, "4", a1, b0, a0, "c"]],
        &[&["UNLINK", a0, a1, a2, b0, b1]],
    ];
    let mut seen = Vec::new();
    for mode in [
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b",
        ][..],
        &["CLIENT", "TRACKING", "ON", "BCAST"],
    ] {
        seen.push(then_pong(&mut t, mode));
        for ws in writes {
            seen.push(format!("{ws:?}: {}", all_then_pong(&mut w, ws)));
            seen.push(format!("told: {}", then_pong(&mut t, &["ECHO", "x"])));
        }
        // Its own writes: the reply, then the message.
        for ws in &writes[..2] {
            seen.push(format!("own {ws:?}: {}", all_then_pong(&mut t, ws)));
        }
        seen.push(then_pong(&mut t, &["CLIENT", "TRACKING", "OFF"]));
    }
    // A NOLOOP writer's own keys are left out of what it hears; another client hears all.
    seen.push(then_pong(
        &mut t,
        &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"],
    ));
    let _ = w.call(&[b"HELLO", b"3"]);
    seen.push(then_pong(
        &mut w,
        &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"],
    ));
    seen.push(format!("w: {}", all_then_pong(&mut w, writes[0])));
    seen.push(format!("t: {}", then_pong(&mut t, &["ECHO", "x"])));
    seen
}

#[test]
fn bcast_sends_one_message_per_prefix_for_a_write_across_shards() {
    // Three keys per prefix, on both shards.
    let keys = |p: &str| -> Vec<String> {
        let all: Vec<String> = (0..20).map(|i| format!("{p}{i}")).collect();
        let on = |s: usize| all.iter().filter(move |k| shard_of(k.as_bytes(), 2) == s);
        let mut v: Vec<String> = on(0).take(1).chain(on(1).take(2)).cloned().collect();
        v.sort();
        v
    };
    let (a, b) = (keys("a"), keys("b"));
    // The writes name a[0..3] and b[0..2]: each pair on both shards.
    for k in [&a[..], &b[..2]] {
        let shards: std::collections::BTreeSet<usize> =
            k.iter().map(|k| shard_of(k.as_bytes(), 2)).collect();
        assert_eq!(shards.len(), 2, "{k:?}");
    }
    let s = server();
    let strata = run_bcast(s.port, &a, &b);
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let want = run_bcast(real.port, &a, &b);
    let diffs: Vec<String> = strata
        .iter()
        .zip(&want)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("strata: {a:?}\n redis: {b:?}"))
        .collect();
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

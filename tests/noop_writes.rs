//! Writes that change nothing, against the real binary on two cores and a real redis-server:
//! for each case, a client WATCHes keys, another runs the write, and EXEC must succeed exactly
//! when Redis' does (a no-op write fails no WATCH); the keyspace events the write fires and
//! the keys a BCAST tracking client is told of are compared with Redis' too. Writes that do
//! change something are among the cases, so the hook is seen to fire as well.
//!
//! Without redis-server installed the cross-check says so and checks Strata against the
//! expected outcome only, unless STRATA_REQUIRE_REDIS=1.
mod common;

use common::*;

/// One case: commands that set the keys up, the keys watched, the write, and whether it
/// changes a watched key (as Redis 7.0 decides).
struct Case {
    setup: &'static [&'static [&'static str]],
    watch: &'static [&'static str],
    write: &'static [&'static str],
    changes: bool,
}

const fn case(
    setup: &'static [&'static [&'static str]],
    watch: &'static [&'static str],
    write: &'static [&'static str],
    changes: bool,
) -> Case {
    Case {
        setup,
        watch,
        write,
        changes,
    }
}

/// Keys of a case on two shards (Strata, two threads): `@a` and `@b` stand for them.
const CASES: &[Case] = &[
    // strings
    case(
        &[&["SET", "k", "a"]],
        &["k"],
        &["SET", "k", "b", "NX"],
        false,
    ),
    case(&[], &["k"], &["SET", "k", "b", "XX"], false),
    case(&[&["SET", "k", "a"]], &["k"], &["SETNX", "k", "b"], false),
    case(
        &[&["SET", "{t}a", "1"]],
        &["{t}b"],
        &["MSETNX", "{t}a", "1", "{t}b", "2"],
        false,
    ),
    case(&[], &["k"], &["GETDEL", "k"], false),
    case(&[&["SET", "k", "a"]], &["k"], &["GETEX", "k"], false),
    case(
        &[&["SET", "k", "a"]],
        &["k"],
        &["GETEX", "k", "PERSIST"],
        false,
    ),
    case(
        &[&["SET", "k", "a"]],
        &["k"],
        &["SETRANGE", "k", "0", ""],
        false,
    ),
    case(&[&["SET", "k", "a"]], &["k"], &["APPEND", "k", ""], true),
    case(&[&["SET", "k", "a"]], &["k"], &["SET", "k", "a"], true),
    // keys
    case(&[], &["k"], &["DEL", "k"], false),
    case(
        &[&["SET", "k", "a", "EX", "100"]],
        &["k"],
        &["EXPIRE", "k", "200", "NX"],
        false,
    ),
    case(
        &[&["SET", "k", "a"]],
        &["k"],
        &["EXPIRE", "k", "200", "XX"],
        false,
    ),
    case(
        &[&["SET", "k", "a", "EX", "300"]],
        &["k"],
        &["EXPIRE", "k", "200", "GT"],
        false,
    ),
    case(&[&["SET", "k", "a"]], &["k"], &["PERSIST", "k"], false),
    case(&[], &["k"], &["PERSIST", "k"], false),
    case(&[&["SET", "k", "a"]], &["k"], &["RENAME", "k", "k"], false),
    case(
        &[&["SET", "{t}a", "1"], &["SET", "{t}b", "2"]],
        &["{t}a", "{t}b"],
        &["RENAMENX", "{t}a", "{t}b"],
        false,
    ),
    case(
        &[&["SET", "{t}a", "1"], &["SET", "{t}b", "2"]],
        &["{t}a", "{t}b"],
        &["COPY", "{t}a", "{t}b"],
        false,
    ),
    case(
        &[
            &["SET", "k", "a"],
            &["SELECT", "1"],
            &["SET", "k", "b"],
            &["SELECT", "0"],
        ],
        &["k"],
        &["MOVE", "k", "1"],
        false,
    ),
    case(&[&["SET", "k", "a"]], &["k"], &["EXPIRE", "k", "100"], true),
    // sets
    case(&[&["SADD", "s", "a"]], &["s"], &["SADD", "s", "a"], false),
    case(&[&["SADD", "s", "a"]], &["s"], &["SREM", "s", "b"], false),
    case(&[], &["s"], &["SREM", "s", "b"], false),
    case(
        &[&["SADD", "{t}s", "a"], &["SADD", "{t}d", "b"]],
        &["{t}s", "{t}d"],
        &["SMOVE", "{t}s", "{t}d", "x"],
        false,
    ),
    case(
        &[&["SADD", "{t}s", "a", "b"], &["SADD", "{t}d", "a"]],
        &["{t}d"],
        &["SMOVE", "{t}s", "{t}d", "a"],
        false,
    ),
    case(
        &[&["SADD", "{t}s", "a", "b"], &["SADD", "{t}d", "a"]],
        &["{t}s"],
        &["SMOVE", "{t}s", "{t}d", "a"],
        true,
    ),
    case(
        &[&["SADD", "@a", "a", "b"], &["SADD", "@b", "a"]],
        &["@b"],
        &["SMOVE", "@a", "@b", "a"],
        false,
    ),
    case(
        &[&["SADD", "@a", "a"], &["SADD", "@b", "b"]],
        &["@a", "@b"],
        &["SMOVE", "@a", "@b", "x"],
        false,
    ),
    case(
        &[&["SADD", "s", "a"]],
        &["s"],
        &["SMOVE", "s", "s", "a"],
        false,
    ),
    case(&[&["SADD", "s", "a"]], &["s"], &["SPOP", "s", "0"], false),
    case(
        &[&["SADD", "{t}s", "a"]],
        &["{t}d"],
        &["SINTERSTORE", "{t}d", "{t}s", "{t}x"],
        false,
    ),
    case(&[&["SADD", "s", "a"]], &["s"], &["SADD", "s", "b"], true),
    // hashes
    case(
        &[&["HSET", "h", "f", "1"]],
        &["h"],
        &["HDEL", "h", "g"],
        false,
    ),
    case(
        &[&["HSET", "h", "f", "1"]],
        &["h"],
        &["HSETNX", "h", "f", "2"],
        false,
    ),
    case(
        &[&["HSET", "h", "f", "1"]],
        &["h"],
        &["HSET", "h", "f", "1"],
        true,
    ),
    // lists
    case(
        &[&["RPUSH", "l", "a"]],
        &["l"],
        &["LREM", "l", "0", "b"],
        false,
    ),
    case(
        &[&["RPUSH", "l", "a"]],
        &["l"],
        &["LINSERT", "l", "BEFORE", "x", "b"],
        false,
    ),
    case(&[], &["l"], &["LPUSHX", "l", "a"], false),
    case(&[], &["l"], &["LPOP", "l"], false),
    case(&[&["RPUSH", "l", "a"]], &["l"], &["LPOP", "l", "0"], false),
    case(
        &[&["RPUSH", "{t}d", "a"]],
        &["{t}d"],
        &["LMOVE", "{t}s", "{t}d", "LEFT", "RIGHT"],
        false,
    ),
    case(
        &[&["RPUSH", "@b", "a"]],
        &["@b"],
        &["LMOVE", "@a", "@b", "LEFT", "RIGHT"],
        false,
    ),
    case(
        &[&["RPUSH", "l", "a"]],
        &["l"],
        &["LMPOP", "2", "x", "y", "LEFT"],
        false,
    ),
    case(
        &[&["RPUSH", "l", "a"]],
        &["l"],
        &["LTRIM", "l", "0", "-1"],
        true,
    ),
    // sorted sets
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZADD", "z", "XX", "1", "b"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZADD", "z", "NX", "2", "a"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZADD", "z", "1", "a"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZADD", "z", "GT", "0", "a"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZREM", "z", "b"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZREMRANGEBYSCORE", "z", "5", "6"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZREMRANGEBYRANK", "z", "5", "6"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZPOPMIN", "z", "0"],
        false,
    ),
    case(&[], &["{t}d"], &["ZUNIONSTORE", "{t}d", "1", "{t}x"], false),
    case(
        &[&["ZADD", "{t}z", "1", "a"]],
        &["{t}d"],
        &["ZRANGESTORE", "{t}d", "{t}z", "5", "6"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZINCRBY", "z", "0", "a"],
        false,
    ),
    case(
        &[&["ZADD", "z", "1", "a"]],
        &["z"],
        &["ZINCRBY", "z", "1", "a"],
        true,
    ),
    // bitmaps, HyperLogLog, SORT
    case(&[&["PFADD", "p", "a"]], &["p"], &["PFADD", "p", "a"], false),
    // A count cached by PFCOUNT changes the key; one read from the cache does not.
    case(&[&["PFADD", "p", "a"]], &["p"], &["PFCOUNT", "p"], true),
    case(
        &[&["PFADD", "p", "a"], &["PFCOUNT", "p"]],
        &["p"],
        &["PFCOUNT", "p"],
        false,
    ),
    case(
        &[&["SET", "b", "a"]],
        &["b"],
        &["BITFIELD", "b", "GET", "u8", "0"],
        false,
    ),
    case(
        &[&["SET", "b", "a"]],
        &["b"],
        &["SETBIT", "b", "1", "1"],
        false,
    ),
    case(
        &[&["SET", "b", "a"]],
        &["b"],
        &["SETBIT", "b", "0", "1"],
        true,
    ),
    case(&[], &["{t}d"], &["BITOP", "AND", "{t}d", "{t}x"], false),
    case(&[], &["{t}d"], &["SORT", "{t}x", "STORE", "{t}d"], false),
];

/// Replaces `@a` / `@b` with two keys on different shards of a two-thread Strata.
fn keys(args: &[&str]) -> Vec<String> {
    let (a, b) = keys_on_different_shards("noop", 2);
    args.iter()
        .map(|s| match *s {
            "@a" => a.clone(),
            "@b" => b.clone(),
            s => s.to_string(),
        })
        .collect()
}

fn call(c: &mut Raw, args: &[String]) -> Vec<u8> {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.call(&a)
}

/// What one case did on one server.
#[derive(Debug, PartialEq)]
struct Seen {
    /// EXEC's reply: `*1\r\n+PONG\r\n` when no watched key changed.
    exec: String,
    /// Keyspace events of the write, (channel, payload).
    events: Vec<(String, String)>,
    /// Pushes a BCAST tracking client got for the write.
    pushes: Vec<String>,
    /// Whether the write counted as a change (INFO's `rdb_changes_since_last_save`).
    dirty: bool,
}

/// The connections a run uses: watcher, writer, event listener, BCAST tracking client.
struct Conns {
    watcher: Raw,
    writer: Raw,
    listener: Raw,
    tracker: Raw,
}

impl Conns {
    fn open(port: u16) -> Conns {
        let mut writer = Raw::connect(port);
        let _ = writer.call(&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]);
        let mut listener = Raw::connect(port);
        listener.send(&cmd(&[b"PSUBSCRIBE", b"__key*__:*"]));
        listener.reply();
        let mut tracker = Raw::connect(port);
        let _ = tracker.call(&[b"HELLO", b"3"]);
        assert_eq!(
            tracker.call(&[b"CLIENT", b"TRACKING", b"ON", b"BCAST"]),
            b"+OK\r\n"
        );
        Conns {
            watcher: Raw::connect(port),
            writer,
            listener,
            tracker,
        }
    }

    /// Events the listener got until the end marker.
    fn events(&mut self) -> Vec<(String, String)> {
        keyspace_messages(&mut self.listener, &mut self.writer)
    }

    /// Pushes the tracker got before the reply to a PING.
    fn pushes(&mut self) -> Vec<String> {
        self.tracker.send(&cmd(&[b"PING"]));
        let mut out = Vec::new();
        loop {
            let r = String::from_utf8_lossy(&self.tracker.reply()).into_owned();
            if r == "+PONG\r\n" {
                return out;
            }
            out.push(r);
        }
    }

    fn run(&mut self, c: &Case) -> Seen {
        call(&mut self.writer, &keys(&["FLUSHALL"]));
        for args in c.setup {
            let r = call(&mut self.writer, &keys(args));
            assert!(
                !r.starts_with(b"-"),
                "{args:?}: {}",
                String::from_utf8_lossy(&r)
            );
        }
        self.events();
        self.pushes();
        let mut watch = vec!["WATCH".to_string()];
        watch.extend(keys(c.watch));
        assert_eq!(call(&mut self.watcher, &watch), b"+OK\r\n");
        let before = self.changes();
        let r = call(&mut self.writer, &keys(c.write));
        assert!(
            !r.starts_with(b"-"),
            "{:?}: {}",
            c.write,
            String::from_utf8_lossy(&r)
        );
        let dirty = self.changes() != before;
        let events = self.events();
        let pushes = self.pushes();
        assert_eq!(self.watcher.call(&[b"MULTI"]), b"+OK\r\n");
        assert_eq!(self.watcher.call(&[b"PING"]), b"+QUEUED\r\n");
        let exec = String::from_utf8_lossy(&self.watcher.call(&[b"EXEC"])).into_owned();
        Seen {
            exec,
            events,
            pushes,
            dirty,
        }
    }

    /// INFO's `rdb_changes_since_last_save`.
    fn changes(&mut self) -> u64 {
        let info =
            String::from_utf8_lossy(&self.writer.call(&[b"INFO", b"persistence"])).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("rdb_changes_since_last_save")
    }
}

fn exec_reply(changes: bool) -> &'static str {
    if changes {
        "*-1\r\n"
    } else {
        "*1\r\n+PONG\r\n"
    }
}

#[test]
fn no_op_writes_fail_no_watch_fire_no_event_and_invalidate_nothing() {
    let s = server();
    let mut strata = Conns::open(s.port);
    let seen: Vec<Seen> = CASES.iter().map(|c| strata.run(c)).collect();
    let mut wrong = Vec::new();
    for (c, got) in CASES.iter().zip(&seen) {
        if got.exec != exec_reply(c.changes) {
            wrong.push(format!("{:?}: {got:?}", c.write));
        }
        // A write that changed nothing says nothing about a watched key, to anyone.
        if c.changes {
            continue;
        }
        for k in keys(c.watch) {
            let channel = format!("__keyspace@0__:{k}");
            let named = format!("${}\r\n{k}\r\n", k.len());
            if got.events.iter().any(|(ch, _)| *ch == channel)
                || got.pushes.iter().any(|p| p.contains(&named))
            {
                wrong.push(format!("{:?}: told of {k}: {got:?}", c.write));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let mut redis = Conns::open(real.port);
    for (c, got) in CASES.iter().zip(&seen) {
        let want = redis.run(c);
        if *got != want {
            wrong.push(format!(
                "{:?}:\n  Strata {got:?}\n  Redis  {want:?}",
                c.write
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Per-field expiry (Redis 7.4, so no redis-server 7.0 to compare with): a change of a
/// field's TTL changes the hash, a command that changed no field changes nothing.
#[test]
fn field_expiry_changes_the_hash_only_when_a_field_changed() {
    const H: &[&str] = &["HSET", "h", "f", "1", "g", "2"];
    const HX: &[&str] = &["HEXPIRE", "h", "100", "FIELDS", "1", "f"];
    let cases = [
        case(&[H], &["h"], &["HPERSIST", "h", "FIELDS", "1", "f"], false),
        case(
            &[H],
            &["h"],
            &["HEXPIRE", "h", "100", "FIELDS", "1", "x"],
            false,
        ),
        case(
            &[H, HX],
            &["h"],
            &["HEXPIRE", "h", "200", "NX", "FIELDS", "1", "f"],
            false,
        ),
        case(
            &[H],
            &["h"],
            &["HEXPIRE", "h", "100", "FIELDS", "1", "f"],
            true,
        ),
        case(
            &[H, HX],
            &["h"],
            &["HPERSIST", "h", "FIELDS", "1", "f"],
            true,
        ),
        case(
            &[H],
            &["h"],
            &["HPEXPIRE", "h", "0", "FIELDS", "1", "f"],
            true,
        ),
    ];
    let s = server();
    let mut strata = Conns::open(s.port);
    for c in &cases {
        let got = strata.run(c);
        assert_eq!(got.exec, exec_reply(c.changes), "{:?}: {got:?}", c.write);
        assert_eq!(got.pushes.is_empty(), !c.changes, "{:?}: {got:?}", c.write);
        let events: Vec<&str> = got
            .events
            .iter()
            .filter(|(ch, _)| ch.starts_with("__keyevent"))
            .map(|(ch, _)| &ch[15..])
            .collect();
        let want: &[&str] = match (c.changes, c.write[0]) {
            (false, _) => &[],
            (true, "HPERSIST") => &["hpersist"],
            (true, "HEXPIRE") => &["hexpire"],
            (true, _) => &["hdel"],
        };
        assert_eq!(events, want, "{:?}", c.write);
    }
}

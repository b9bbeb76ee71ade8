//! Transactions (MULTI/EXEC/DISCARD/WATCH/UNWATCH) on a server with two shards: exact reply
//! bytes, the same bytes as redis-server for the same sessions, atomicity across shards (a
//! bank whose total never changes while transfers run), WATCH races that lose no update, and
//! WATCH seeing changes made on any shard, by expiry and by keyspace-wide commands.
mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

fn args(line: &str) -> Vec<&[u8]> {
    line.split(' ').map(str::as_bytes).collect()
}

/// Sends each line (space-separated arguments) and asserts the concatenated reply bytes.
fn script(raw: &mut Raw, lines: &[&str], want: &str) {
    let mut got = Vec::new();
    for l in lines {
        raw.send(&cmd(&args(l)));
    }
    for _ in lines {
        got.extend(raw.reply());
    }
    assert_eq!(String::from_utf8_lossy(&got), want, "replies to {lines:?}");
}

#[test]
fn transaction_replies_byte_for_byte() {
    let s = server();
    let mut c = s.raw();
    let (a, b) = keys_on_different_shards("acct", 2);
    let (q, ab) = ("+QUEUED\r\n", format!("{a} {b}"));
    script(
        &mut c,
        &[
            "MULTI",
            &format!("SET {a} 10"),
            &format!("INCRBY {b} 5"),
            &format!("MGET {ab}"),
            "PING",
            "EXEC",
        ],
        &format!("+OK\r\n{q}{q}{q}{q}*4\r\n+OK\r\n:5\r\n*2\r\n$2\r\n10\r\n$1\r\n5\r\n+PONG\r\n"),
    );
    // Errors while queueing abort the whole transaction; nothing of it runs.
    script(
        &mut c,
        &[
            "MULTI",
            &format!("SET {a} 99"),
            "NOSUCH x",
            "GET",
            "EXEC",
            &format!("GET {a}"),
        ],
        "+OK\r\n+QUEUED\r\n-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n\
         -ERR wrong number of arguments for 'get' command\r\n\
         -EXECABORT Transaction discarded because of previous errors.\r\n$2\r\n10\r\n",
    );
    // Run-time errors stay in EXEC's array; the other commands apply.
    script(
        &mut c,
        &[
            "MULTI",
            &format!("LPUSH {a} x"),
            &format!("INCR {b}"),
            "EXEC",
        ],
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n\
         -WRONGTYPE Operation against a key holding the wrong kind of value\r\n:6\r\n",
    );
    // Misuse.
    script(
        &mut c,
        &[
            "EXEC", "DISCARD", "MULTI", "MULTI", "WATCH x", "SAVE", "DISCARD", "MULTI", "EXEC",
        ],
        "-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n+OK\r\n\
         -ERR MULTI calls can not be nested\r\n-ERR WATCH inside MULTI is not allowed\r\n\
         -ERR Command not allowed inside a transaction\r\n+OK\r\n+OK\r\n*0\r\n",
    );
    // A failed WATCH: null array, `*-1` in RESP2 and `_` in RESP3.
    let mut other = s.raw();
    for (hello, null) in [("HELLO 2", "*-1\r\n"), ("HELLO 3", "_\r\n")] {
        c.call(&args(hello));
        script(&mut c, &[&format!("WATCH {a} {b}")], "+OK\r\n");
        other.call(&args(&format!("SET {b} 1")));
        script(
            &mut c,
            &["MULTI", &format!("GET {a}"), "EXEC"],
            &format!("+OK\r\n+QUEUED\r\n{null}"),
        );
    }
}

#[test]
fn transaction_replies_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let (a, b) = keys_on_different_shards("k", 2);
    let sessions: Vec<Vec<String>> = vec![
        vec![
            "MULTI".into(),
            format!("SET {a} 1"),
            format!("RPUSH {b} x y"),
            format!("MSET {a} 2 {b}z 3"),
            format!("RENAME {a} {b}r"),
            format!("EXISTS {a} {b} {b}r"),
            "SELECT 3".into(),
            format!("SET {a} indb3"),
            "DBSIZE".into(),
            "SELECT 0".into(),
            "DBSIZE".into(),
            "EXEC".into(),
        ],
        vec![
            "MULTI".into(),
            format!("INCR {b}"),
            format!("LPOP {b}"),
            "DISCARD".into(),
            format!("LRANGE {b} 0 -1"),
            "MULTI".into(),
            format!("SET {a} v EX"),
            "exec".into(),
        ],
        vec![
            format!("WATCH {a} {b}"),
            format!("WATCH {a}"),
            "UNWATCH".into(),
            format!("WATCH {a}"),
            format!("SET {a} changed"),
            "MULTI".into(),
            "PING".into(),
            "EXEC".into(),
            format!("WATCH {a}"),
            format!("GET {a}"),
            "MULTI".into(),
            "UNWATCH".into(),
            "EXEC".into(),
            "FLUSHALL".into(),
            "MULTI".into(),
            "FLUSHDB".into(),
            "DBSIZE".into(),
            "EXEC".into(),
        ],
    ];
    let mut strata = s.raw();
    let mut redis = Raw::connect(real.port);
    real.ok(&[b"FLUSHALL"]);
    for session in &sessions {
        for line in session {
            let a = args(line);
            let (want, got) = (redis.call(&a), strata.call(&a));
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want),
                "reply to {line}"
            );
        }
    }
}

fn mget(c: &mut Connection, keys: &[String]) -> Vec<i64> {
    redis::cmd("MGET").arg(keys).query(c).unwrap()
}

/// Two shards hold the accounts; transfers move amounts between any two, balance readers sum
/// them all inside MULTI. No reader ever sees money in flight.
#[test]
fn bank_transfers_keep_the_total_across_shards() {
    const ACCOUNTS: usize = 16;
    const START: i64 = 1000;
    let s = server();
    let accounts: Vec<String> = (0..ACCOUNTS).map(|i| format!("acct:{i}")).collect();
    let on = |shard| {
        accounts
            .iter()
            .filter(|a| shard_of(a.as_bytes(), 2) == shard)
            .count()
    };
    assert!(on(0) > 2 && on(1) > 2, "accounts on both shards");
    let mut c = s.client();
    for a in &accounts {
        let _: () = q(&mut c, &["SET", a, &START.to_string()]);
    }
    let total = START * ACCOUNTS as i64;
    let stop = Arc::new(AtomicBool::new(false));
    let transfers = Arc::new(AtomicU64::new(0));
    let mut movers = Vec::new();
    for t in 0..6u64 {
        let (stop, transfers, accounts, mut c) = (
            stop.clone(),
            transfers.clone(),
            accounts.clone(),
            s.client(),
        );
        movers.push(thread::spawn(move || {
            let mut x = t * 7919 + 1;
            while !stop.load(Ordering::Relaxed) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let from = &accounts[(x >> 33) as usize % ACCOUNTS];
                let to = &accounts[(x >> 17) as usize % ACCOUNTS];
                let amount = (x >> 40) % 50;
                let _: (i64, i64) = redis::pipe()
                    .atomic()
                    .cmd("DECRBY")
                    .arg(from)
                    .arg(amount)
                    .cmd("INCRBY")
                    .arg(to)
                    .arg(amount)
                    .query(&mut c)
                    .unwrap();
                transfers.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (stop, accounts, mut c) = (stop.clone(), accounts.clone(), s.client());
        readers.push(thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut p = redis::pipe();
                p.atomic();
                for a in &accounts {
                    p.cmd("GET").arg(a);
                }
                let balances: Vec<i64> = p.query(&mut c).unwrap();
                let sum: i64 = balances.iter().sum();
                assert_eq!(
                    sum, total,
                    "a reader saw a half-done transfer: {balances:?}"
                );
                // MGET spans both shards too: one atomic read.
                let balances = mget(&mut c, &accounts);
                assert_eq!(balances.iter().sum::<i64>(), total, "MGET: {balances:?}");
                reads += 1;
            }
            reads
        }));
    }
    thread::sleep(Duration::from_millis(2000));
    stop.store(true, Ordering::Relaxed);
    for m in movers {
        m.join().unwrap();
    }
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let moved = transfers.load(Ordering::Relaxed);
    assert!(moved > 20 && reads > 4, "{moved} transfers, {reads} reads");
    let end = mget(&mut c, &accounts);
    assert_eq!(end.iter().sum::<i64>(), total);
    assert!(
        end.iter().any(|&b| b != START),
        "no transfer changed a balance"
    );
}

/// Optimistic increments (WATCH, read, MULTI, write, EXEC, retry on null) of two counters on
/// different shards from many clients: none is lost, and EXEC sometimes had to fail.
#[test]
fn watch_races_lose_no_update() {
    const CLIENTS: u64 = 4;
    const EACH: u64 = 25;
    let s = server();
    let (a, b) = keys_on_different_shards("ctr", 2);
    let retries = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (a, b, retries, mut c) = (a.clone(), b.clone(), retries.clone(), s.client());
            thread::spawn(move || {
                for _ in 0..EACH {
                    loop {
                        let _: () = q(&mut c, &["WATCH", &a, &b]);
                        let (va, vb): (Option<u64>, Option<u64>) =
                            redis::pipe().get(&a).get(&b).query(&mut c).unwrap();
                        let done: Option<((), ())> = redis::pipe()
                            .atomic()
                            .set(&a, va.unwrap_or(0) + 1)
                            .set(&b, vb.unwrap_or(0) + 2)
                            .query(&mut c)
                            .unwrap();
                        if done.is_some() {
                            break;
                        }
                        retries.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut c = s.client();
    let (va, vb): (u64, u64) = redis::pipe().get(&a).get(&b).query(&mut c).unwrap();
    assert_eq!((va, vb), (CLIENTS * EACH, 2 * CLIENTS * EACH));
    assert!(retries.load(Ordering::Relaxed) > 0, "no EXEC ever failed");
}

fn exec_after(c: &mut Raw, watch: &[&str], change: impl FnOnce()) -> Vec<u8> {
    let mut w = vec!["WATCH"];
    w.extend_from_slice(watch);
    rt(c, &w, "+OK\r\n");
    change();
    rt(c, &["MULTI"], "+OK\r\n");
    rt(c, &["PING"], "+QUEUED\r\n");
    c.call(&[b"EXEC"])
}

const FAILED: &[u8] = b"*-1\r\n";
const RAN: &[u8] = b"*1\r\n+PONG\r\n";

#[test]
fn watch_sees_every_kind_of_change_on_any_shard() {
    let s = server();
    let (mut c, mut o) = (s.raw(), s.raw());
    let (a, b) = keys_on_different_shards("w", 2);
    let mut other = |line: String| {
        let r = o.call(&args(&line));
        assert!(
            !r.starts_with(b"-"),
            "{line}: {}",
            String::from_utf8_lossy(&r)
        );
    };
    let cases: Vec<(&str, Vec<String>, &[u8])> = vec![
        ("no change", vec![], RAN),
        ("a read", vec![format!("GET {b}")], RAN),
        (
            "write on the other shard",
            vec![format!("SET {b} 1")],
            FAILED,
        ),
        (
            "in-place list push",
            vec![format!("DEL {b}"), format!("RPUSH {b} x")],
            FAILED,
        ),
        ("list push again", vec![format!("RPUSH {b} y")], FAILED),
        (
            "cross-shard rename",
            vec![format!("RENAME {b} {a}")],
            FAILED,
        ),
        (
            "cross-shard MSET",
            vec![format!("MSET {a} 1 {b} 2")],
            FAILED,
        ),
        ("delete of a missing key", vec![format!("DEL {a}x")], RAN),
        ("expiry set", vec![format!("PEXPIRE {b} 100000")], FAILED),
        ("FLUSHALL", vec!["FLUSHALL".into()], FAILED),
        ("FLUSHALL of missing keys", vec!["FLUSHALL".into()], RAN),
        (
            "other db",
            vec!["SELECT 1".into(), format!("SET {a} 1"), "SELECT 0".into()],
            RAN,
        ),
    ];
    for (what, changes, want) in cases {
        let got = exec_after(&mut c, &[&a, &b], || {
            for ch in changes {
                other(ch);
            }
        });
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "{what}"
        );
    }
    // A key that expires after WATCH fails EXEC, found stale or reaped.
    rt(&mut c, &["SET", &b, "v", "PX", "50"], "+OK\r\n");
    let got = exec_after(&mut c, &[&a, &b], || {
        thread::sleep(Duration::from_millis(120))
    });
    assert_eq!(got, FAILED, "expired since WATCH");
    // Already expired at WATCH time: a missing key, no change.
    rt(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"], "+OK\r\n");
    rt(&mut c, &["SET", &b, "v", "PX", "1"], "+OK\r\n");
    thread::sleep(Duration::from_millis(10));
    let got = exec_after(&mut c, &[&b], || {});
    assert_eq!(got, RAN, "stale at WATCH");
    rt(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"], "+OK\r\n");
}

#[test]
fn keyspace_and_cross_shard_commands_run_inside_exec() {
    let s = server();
    let mut c = s.raw();
    let (a, b) = keys_on_different_shards("x", 2);
    script(
        &mut c,
        &[
            "MULTI",
            &format!("MSET {a} 1 {b} 2"),
            "DBSIZE",
            &format!("RENAME {a} {b}"),
            "KEYS *",
            &format!("COPY {b} {a}"),
            &format!("MGET {a} {b}"),
            "FLUSHDB",
            "DBSIZE",
            "EXEC",
        ],
        &format!(
            "+OK\r\n{}*8\r\n+OK\r\n:2\r\n+OK\r\n*1\r\n${}\r\n{b}\r\n:1\r\n\
             *2\r\n$1\r\n1\r\n$1\r\n1\r\n+OK\r\n:0\r\n",
            "+QUEUED\r\n".repeat(8),
            b.len()
        ),
    );
    // The server is still whole: both shards answer.
    script(
        &mut c,
        &[&format!("SET {a} 1"), &format!("SET {b} 2"), "DBSIZE"],
        "+OK\r\n+OK\r\n:2\r\n",
    );
}

#[test]
fn client_list_shows_the_queue() {
    let s = server();
    let mut c = s.raw();
    rt(&mut c, &["MULTI"], "+OK\r\n");
    rt(&mut c, &["SET", "a", "1"], "+QUEUED\r\n");
    rt(&mut c, &["GET", "a"], "+QUEUED\r\n");
    let mut o = s.client();
    let list: String = q(&mut o, &["CLIENT", "LIST"]);
    let line = list
        .lines()
        .find(|l| !l.contains("cmd=client"))
        .expect("the other client");
    assert!(
        line.contains(" flags=x ") && line.contains(" multi=2 "),
        "{line}"
    );
    rt(&mut c, &["DISCARD"], "+OK\r\n");
    let list: String = q(&mut o, &["CLIENT", "LIST"]);
    assert!(
        list.lines()
            .all(|l| l.contains(" flags=N ") && l.contains(" multi=-1 ")),
        "{list}"
    );
}

/// EXEC keeps a transaction's commands together while a client pipelines plain commands on
/// the same keys from another core: each EXEC reply shows its own two writes back to back.
#[test]
fn exec_is_not_interleaved_with_other_clients() {
    let s = server();
    let (a, b) = keys_on_different_shards("il", 2);
    let stop = Arc::new(AtomicBool::new(false));
    let noise = {
        let (stop, a, b, mut c) = (stop.clone(), a.clone(), b.clone(), s.client());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::pipe()
                    .incr(&a, 1)
                    .ignore()
                    .incr(&b, 1)
                    .ignore()
                    .query(&mut c)
                    .unwrap();
            }
        })
    };
    let mut c: Connection = s.client();
    let deadline = Instant::now() + Duration::from_millis(700);
    let mut runs = 0;
    while Instant::now() < deadline {
        let (x1, x2, y1, y2): (i64, i64, i64, i64) = redis::pipe()
            .atomic()
            .incr(&a, 1)
            .incr(&a, 1)
            .incr(&b, 1)
            .incr(&b, 1)
            .query(&mut c)
            .unwrap();
        assert_eq!((x2 - x1, y2 - y1), (1, 1), "another client ran inside EXEC");
        runs += 1;
    }
    stop.store(true, Ordering::Relaxed);
    noise.join().unwrap();
    assert!(runs > 10);
}

/// Cache mode: a watched key evicted to make room fails EXEC.
#[test]
fn an_evicted_watched_key_fails_exec() {
    let s = Server::start(
        STRATA,
        &[
            "--proactor_threads",
            "2",
            "--cache_mode",
            "--maxmemory",
            "24mb",
        ],
    );
    let (mut c, mut o) = (s.raw(), s.client());
    rt(&mut c, &["SET", "watched", "v"], "+OK\r\n");
    rt(&mut c, &["WATCH", "watched"], "+OK\r\n");
    let value = "x".repeat(16384);
    let mut n = 0;
    // Fill until the watched key is gone (a miss does not touch it).
    while q::<i64>(&mut o, &["EXISTS", "watched"]) == 1 {
        let mut p = redis::pipe();
        for _ in 0..100 {
            p.set(format!("fill:{n}"), &value).ignore();
            n += 1;
        }
        let _: () = p.query(&mut o).unwrap();
        assert!(n < 400_000, "the watched key was never evicted");
    }
    rt(&mut c, &["MULTI"], "+OK\r\n");
    rt(&mut c, &["PING"], "+QUEUED\r\n");
    rt(&mut c, &["EXEC"], "*-1\r\n");
}

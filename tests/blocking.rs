//! Blocking pops against the real binary on two shards: BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP
//! BZPOPMIN BZPOPMAX BZMPOP woken by pushes from other connections (so from the other core for
//! at least one of two keys on different shards), first blocked first served, timeouts with
//! decimals, RESP2/RESP3 null replies, CLIENT UNBLOCK, CLIENT KILL and hang-ups leaving
//! `blocked_clients` at 0 and no stale waiter, BLMOVE across shards, a Sidekiq-style job queue
//! (every job delivered exactly once), and scenarios compared byte for byte with a real
//! redis-server 7.0 (which must be there under STRATA_REQUIRE_REDIS=1).
mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use test_support::resp::cmd;

fn send(r: &mut Raw, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    r.send(&cmd(&a));
}

fn text(r: &mut Raw) -> String {
    String::from_utf8_lossy(&r.reply()).into_owned()
}

fn call(r: &mut Raw, args: &[&str]) -> String {
    send(r, args);
    text(r)
}

fn arr(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for it in items {
        s.push_str(&format!("${}\r\n{it}\r\n", it.len()));
    }
    s
}

const NIL_ARRAY: &str = "*-1\r\n";

/// INFO's `blocked_clients`.
fn blocked(ctl: &mut Raw) -> usize {
    let info = ctl.call_text(&[b"INFO", b"clients"]);
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("blocked_clients in INFO")
}

/// Waits until exactly `n` clients are blocked (tools poll INFO the same way).
fn wait_blocked(ctl: &mut Raw, n: usize) {
    let start = Instant::now();
    loop {
        let now = blocked(ctl);
        if now == n {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "blocked_clients stays {now}, want {n}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn client_id(r: &mut Raw) -> String {
    call(r, &["CLIENT", "ID"])
        .trim_start_matches(':')
        .trim_end()
        .to_string()
}

#[test]
fn pops_woken_by_pushes_on_either_shard() {
    let s = server();
    let mut ctl = s.raw();
    let (a, b) = keys_on_different_shards("q", 2);
    for key in [&a, &b] {
        // BLPOP on both keys, the push on one of them.
        let mut w = s.raw();
        send(&mut w, &["BLPOP", &a, &b, "0"]);
        wait_blocked(&mut ctl, 1);
        assert!(call(&mut ctl, &["CLIENT", "LIST"]).contains("flags=b"));
        assert_eq!(call(&mut ctl, &["RPUSH", key, "x", "y"]), ":2\r\n");
        assert_eq!(text(&mut w), arr(&[key, "x"]));
        assert_eq!(blocked(&mut ctl), 0);
        assert_eq!(call(&mut ctl, &["LRANGE", key, "0", "-1"]), arr(&["y"]));
        // BRPOP, then BLMPOP with a count, on the list that now exists: no wait.
        assert_eq!(call(&mut w, &["BRPOP", &a, &b, "0"]), arr(&[key, "y"]));
        send(&mut w, &["BLMPOP", "0", "2", &a, &b, "RIGHT", "COUNT", "5"]);
        wait_blocked(&mut ctl, 1);
        call(&mut ctl, &["LPUSH", key, "1", "2", "3"]);
        assert_eq!(
            text(&mut w),
            format!("*2\r\n${}\r\n{key}\r\n{}", key.len(), arr(&["1", "2", "3"]))
        );
        // Sorted sets: BZPOPMIN, BZPOPMAX, BZMPOP.
        send(&mut w, &["BZPOPMIN", &a, &b, "0"]);
        wait_blocked(&mut ctl, 1);
        call(
            &mut ctl,
            &["ZADD", key, "2", "two", "1", "one", "3", "three"],
        );
        assert_eq!(text(&mut w), arr(&[key, "one", "1"]));
        assert_eq!(
            call(&mut w, &["BZPOPMAX", &a, &b, "0"]),
            arr(&[key, "three", "3"])
        );
        assert_eq!(
            call(&mut w, &["BZMPOP", "0", "2", &a, &b, "MIN", "COUNT", "9"]),
            format!(
                "*2\r\n${}\r\n{key}\r\n*1\r\n{}",
                key.len(),
                arr(&["two", "2"])
            )
        );
        assert_eq!(call(&mut ctl, &["EXISTS", &a, &b]), ":0\r\n");
    }
    assert_eq!(blocked(&mut ctl), 0);
}

#[test]
fn three_waiters_are_served_in_the_order_they_blocked() {
    let s = server();
    let mut ctl = s.raw();
    let (a, b) = keys_on_different_shards("fair", 2);
    for key in [&a, &b] {
        let mut waiters: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
        for (n, w) in waiters.iter_mut().enumerate() {
            send(w, &["BRPOP", key, "0"]);
            wait_blocked(&mut ctl, n + 1);
        }
        // One push of three elements serves all three, in order.
        assert_eq!(call(&mut ctl, &["RPUSH", key, "e1", "e2", "e3"]), ":3\r\n");
        let got: Vec<String> = waiters.iter_mut().map(text).collect();
        assert_eq!(
            got,
            vec![arr(&[key, "e3"]), arr(&[key, "e2"]), arr(&[key, "e1"])]
        );
        // One element at a time: still first come, first served.
        for (n, w) in waiters.iter_mut().enumerate() {
            send(w, &["BLPOP", key, "0"]);
            wait_blocked(&mut ctl, n + 1);
        }
        for (n, w) in waiters.iter_mut().enumerate() {
            let v = format!("v{n}");
            call(&mut ctl, &["LPUSH", key, &v]);
            assert_eq!(text(w), arr(&[key, &v]));
        }
        assert_eq!(blocked(&mut ctl), 0);
    }
}

#[test]
fn timeouts_with_decimals_and_null_replies() {
    let s = server();
    let mut r = s.raw();
    for (args, want) in [
        (vec!["BLPOP", "none", "0.05"], NIL_ARRAY),
        (vec!["BRPOP", "none", "none2", "0.01"], NIL_ARRAY),
        (vec!["BLMPOP", "0.01", "1", "none", "LEFT"], NIL_ARRAY),
        (vec!["BZPOPMIN", "none", "0.01"], NIL_ARRAY),
        (vec!["BZMPOP", "0.01", "1", "none", "MAX"], NIL_ARRAY),
        // A timed-out BLMOVE answers the null array too (Redis' quirk).
        (
            vec!["BLMOVE", "none", "dst", "LEFT", "LEFT", "0.01"],
            NIL_ARRAY,
        ),
        (vec!["BRPOPLPUSH", "none", "dst", "0.01"], NIL_ARRAY),
    ] {
        let start = Instant::now();
        assert_eq!(call(&mut r, &args), want, "{args:?}");
        assert!(start.elapsed() >= Duration::from_millis(10), "{args:?}");
        assert!(start.elapsed() < Duration::from_secs(2), "{args:?}");
    }
    let start = Instant::now();
    assert_eq!(call(&mut r, &["BLPOP", "none", "0.3"]), NIL_ARRAY);
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    send(&mut r, &["HELLO", "3"]);
    r.reply();
    assert_eq!(call(&mut r, &["BLPOP", "none", "0.01"]), "_\r\n");
    assert_eq!(call(&mut r, &["BZPOPMAX", "none", "0.01"]), "_\r\n");
    assert_eq!(
        call(&mut r, &["BLPOP", "k", "-0.5"]),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        call(&mut r, &["BRPOP", "k", "1x"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
    assert_eq!(
        call(&mut r, &["BLMPOP", "x", "0", "k", "LEFT"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        call(&mut r, &["BLMOVE", "a", "b", "UP", "LEFT", "-1"]),
        "-ERR syntax error\r\n"
    );
    call(&mut r, &["SET", "str", "v"]);
    assert_eq!(
        call(&mut r, &["BLPOP", "none", "str", "0"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(
        call(&mut r, &["BZPOPMIN", "str", "0"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

#[test]
fn killed_and_vanished_waiters_leave_nothing_behind() {
    let s = server();
    let mut ctl = s.raw();
    let (a, b) = keys_on_different_shards("gone", 2);
    // CLIENT KILL of a client blocked on keys of both shards.
    let mut w = s.raw();
    let id = client_id(&mut w);
    send(&mut w, &["BLPOP", &a, &b, "0"]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(call(&mut ctl, &["CLIENT", "KILL", "ID", &id]), ":1\r\n");
    w.expect_eof("killed while blocked");
    wait_blocked(&mut ctl, 0);
    // A plain hang-up of clients blocked on one key.
    for _ in 0..3 {
        let mut w = s.raw();
        send(&mut w, &["BZPOPMIN", &a, "0"]);
        send(&mut w, &["PING"]);
        wait_blocked(&mut ctl, 1);
        drop(w);
        wait_blocked(&mut ctl, 0);
    }
    // Nobody is served any more: pushed data stays.
    call(&mut ctl, &["RPUSH", &a, "kept"]);
    call(&mut ctl, &["RPUSH", &b, "kept"]);
    call(&mut ctl, &["ZADD", "z", "1", "m"]);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(call(&mut ctl, &["LLEN", &a]), ":1\r\n");
    assert_eq!(call(&mut ctl, &["LLEN", &b]), ":1\r\n");
    // And a new waiter is served at once, as the first in line.
    call(&mut ctl, &["DEL", &a]);
    let mut w = s.raw();
    send(&mut w, &["BLPOP", &a, "0"]);
    wait_blocked(&mut ctl, 1);
    call(&mut ctl, &["RPUSH", &a, "new"]);
    assert_eq!(text(&mut w), arr(&[&a, "new"]));
    assert_eq!(blocked(&mut ctl), 0);
    assert!(call(&mut ctl, &["CLIENT", "LIST"]).contains("flags=N"));
}

#[test]
fn blmove_across_shards_wakes_the_destination_waiters() {
    let s = server();
    let mut ctl = s.raw();
    let (src, dst) = keys_on_different_shards("mv", 2);
    // A BLPOP on the destination, then a BLMOVE from the source into it.
    let mut popper = s.raw();
    send(&mut popper, &["BLPOP", &dst, "0"]);
    wait_blocked(&mut ctl, 1);
    let mut mover = s.raw();
    send(&mut mover, &["BLMOVE", &src, &dst, "RIGHT", "LEFT", "0"]);
    wait_blocked(&mut ctl, 2);
    call(&mut ctl, &["RPUSH", &src, "a", "b"]);
    assert_eq!(text(&mut mover), "$1\r\nb\r\n");
    assert_eq!(text(&mut popper), arr(&[&dst, "b"]));
    assert_eq!(call(&mut ctl, &["LRANGE", &src, "0", "-1"]), arr(&["a"]));
    assert_eq!(call(&mut ctl, &["EXISTS", &dst]), ":0\r\n");
    wait_blocked(&mut ctl, 0);
    // BRPOPLPUSH into a destination of the wrong type: the waiter gets WRONGTYPE, the element
    // stays.
    call(&mut ctl, &["DEL", &src]);
    call(&mut ctl, &["SET", &dst, "string"]);
    send(&mut mover, &["BRPOPLPUSH", &src, &dst, "0"]);
    wait_blocked(&mut ctl, 1);
    call(&mut ctl, &["RPUSH", &src, "x"]);
    assert_eq!(
        text(&mut mover),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(call(&mut ctl, &["LRANGE", &src, "0", "-1"]), arr(&["x"]));
    // Many moves in a row, each one a cross-shard transaction: nothing lost or duplicated.
    call(&mut ctl, &["DEL", &src, &dst]);
    let mut movers: Vec<Raw> = (0..4).map(|_| s.raw()).collect();
    for (n, m) in movers.iter_mut().enumerate() {
        send(m, &["BLMOVE", &src, &dst, "LEFT", "RIGHT", "0"]);
        wait_blocked(&mut ctl, n + 1);
    }
    call(&mut ctl, &["RPUSH", &src, "1", "2", "3", "4", "5"]);
    let got: Vec<String> = movers.iter_mut().map(text).collect();
    assert_eq!(
        got,
        vec!["$1\r\n1\r\n", "$1\r\n2\r\n", "$1\r\n3\r\n", "$1\r\n4\r\n"]
    );
    assert_eq!(
        call(&mut ctl, &["LRANGE", &dst, "0", "-1"]),
        arr(&["1", "2", "3", "4"])
    );
    assert_eq!(call(&mut ctl, &["LRANGE", &src, "0", "-1"]), arr(&["5"]));
    wait_blocked(&mut ctl, 0);
}

#[test]
fn client_unblock_answers_as_redis() {
    let s = server();
    let mut ctl = s.raw();
    let mut w = s.raw();
    let id = client_id(&mut w);
    assert_eq!(call(&mut ctl, &["CLIENT", "UNBLOCK", &id]), ":0\r\n");
    send(&mut w, &["BLPOP", "u", "0"]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(call(&mut ctl, &["CLIENT", "UNBLOCK", &id]), ":1\r\n");
    assert_eq!(text(&mut w), NIL_ARRAY);
    send(&mut w, &["BZPOPMIN", "u", "0"]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(
        call(&mut ctl, &["CLIENT", "UNBLOCK", &id, "error"]),
        ":1\r\n"
    );
    assert_eq!(
        text(&mut w),
        "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    send(&mut w, &["BLMOVE", "u", "v", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(
        call(&mut ctl, &["CLIENT", "UNBLOCK", &id, "TIMEOUT"]),
        ":1\r\n"
    );
    assert_eq!(text(&mut w), NIL_ARRAY);
    assert_eq!(blocked(&mut ctl), 0);
    assert_eq!(
        call(&mut ctl, &["CLIENT", "UNBLOCK", &id, "maybe"]),
        "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"
    );
    assert_eq!(
        call(&mut ctl, &["CLIENT", "UNBLOCK", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(call(&mut ctl, &["CLIENT", "UNBLOCK", "99999"]), ":0\r\n");
    // The unblocked client blocks again normally afterwards.
    send(&mut w, &["BLPOP", "u", "0"]);
    wait_blocked(&mut ctl, 1);
    call(&mut ctl, &["RPUSH", "u", "z"]);
    assert_eq!(text(&mut w), arr(&["u", "z"]));
}

/// Sidekiq's loop: producers LPUSH jobs onto two queues (one per shard), workers BRPOP both
/// queues with a short timeout, on connections spread over both cores. Every job comes out
/// exactly once.
#[test]
fn job_queue_delivers_every_job_exactly_once() {
    let s = server();
    let (q1, q2) = keys_on_different_shards("queue", 2);
    const PRODUCERS: usize = 4;
    const JOBS: usize = 250;
    const WORKERS: usize = 6;
    let total = PRODUCERS * JOBS;
    let done = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let mut handles = Vec::new();
    for _ in 0..WORKERS {
        let mut c = s.client();
        let (q1, q2, done, seen) = (q1.clone(), q2.clone(), done.clone(), seen.clone());
        handles.push(std::thread::spawn(move || {
            let mut mine = 0;
            while done.load(Ordering::SeqCst) < total {
                let got: Option<(String, String)> = redis::cmd("BRPOP")
                    .arg(&q1)
                    .arg(&q2)
                    .arg(0.2)
                    .query(&mut c)
                    .expect("BRPOP");
                if let Some((_, job)) = got {
                    assert!(seen.lock().unwrap().insert(job.clone()), "{job} twice");
                    done.fetch_add(1, Ordering::SeqCst);
                    mine += 1;
                }
            }
            mine
        }));
    }
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let mut c = s.client();
            let (q1, q2) = (q1.clone(), q2.clone());
            std::thread::spawn(move || {
                for j in 0..JOBS {
                    let q = if j % 2 == 0 { &q1 } else { &q2 };
                    let _: i64 = redis::cmd("LPUSH")
                        .arg(q)
                        .arg(format!("job-{p}-{j}"))
                        .query(&mut c)
                        .expect("LPUSH");
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let per_worker: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(per_worker.iter().sum::<usize>(), total);
    assert_eq!(seen.lock().unwrap().len(), total);
    let mut ctl = s.raw();
    assert_eq!(call(&mut ctl, &["EXISTS", &q1, &q2]), ":0\r\n");
    wait_blocked(&mut ctl, 0);
}

/// One side of a differential scenario: connections by index, each opened on first use.
struct Side {
    port: u16,
    conns: Vec<Raw>,
    ids: Vec<String>,
    ctl: Raw,
    transcript: Vec<String>,
}

enum Step<'a> {
    /// Send on a connection and record its reply.
    Call(usize, &'a [&'a str]),
    /// Send on a connection, reply not compared (HELLO: the servers' versions differ).
    Quiet(usize, &'a [&'a str]),
    /// Send a blocking command and wait until that many clients are blocked.
    Block(usize, &'a [&'a str], usize),
    /// Record the next reply on a connection.
    Read(usize),
    /// CLIENT UNBLOCK a connection (by its id on that server), with a reason.
    Unblock(usize, &'a str),
}

impl Side {
    fn new(port: u16) -> Side {
        Side {
            port,
            conns: Vec::new(),
            ids: Vec::new(),
            ctl: Raw::connect(port),
            transcript: Vec::new(),
        }
    }

    fn conn(&mut self, i: usize) -> &mut Raw {
        while self.conns.len() <= i {
            let mut r = Raw::connect(self.port);
            self.ids.push(client_id(&mut r));
            self.conns.push(r);
        }
        &mut self.conns[i]
    }

    fn run(&mut self, steps: &[Step]) {
        for step in steps {
            match step {
                Step::Call(c, args) => {
                    let got = call(self.conn(*c), args);
                    self.transcript.push(format!("{args:?} -> {got}"));
                }
                Step::Quiet(c, args) => {
                    call(self.conn(*c), args);
                }
                Step::Block(c, args, n) => {
                    send(self.conn(*c), args);
                    wait_blocked(&mut self.ctl, *n);
                }
                Step::Read(c) => {
                    let got = text(self.conn(*c));
                    self.transcript.push(format!("read {c} -> {got}"));
                }
                Step::Unblock(c, how) => {
                    self.conn(*c);
                    let id = self.ids[*c].clone();
                    let got = call(&mut self.ctl, &["CLIENT", "UNBLOCK", &id, how]);
                    self.transcript.push(format!("unblock {c} {how} -> {got}"));
                }
            }
        }
    }
}

#[test]
fn blocking_scenarios_answer_like_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let (a, b) = keys_on_different_shards("d", 2);
    let (a, b) = (a.as_str(), b.as_str());
    use Step::*;
    let steps = [
        // Errors, in Redis' order of checks.
        Call(0, &["BLPOP", a, "-1"]),
        Call(0, &["BLPOP", a, "nan"]),
        Call(0, &["BLPOP", a, "inf"]),
        Call(0, &["BLPOP", a, "1e30"]),
        Call(0, &["BLMPOP", "-1", "0", a, "LEFT"]),
        Call(0, &["BLMPOP", "-1", "1", a, "UP"]),
        Call(0, &["BLMPOP", "-1", "1", a, "LEFT", "COUNT", "0"]),
        Call(0, &["BLMPOP", "-1", "1", a, "LEFT"]),
        Call(0, &["BLMPOP", "0", "5", a, "LEFT"]),
        Call(0, &["BZMPOP", "x", "1", a, "MIN", "COUNT", "-3"]),
        Call(0, &["BZMPOP", "x", "1", a, "MIN"]),
        Call(0, &["BLMOVE", a, b, "LEFT", "NOWHERE", "x"]),
        Call(0, &["BLMOVE", a, b, "LEFT", "LEFT", "x"]),
        Call(0, &["BRPOPLPUSH", a, b, "-2"]),
        Call(0, &["BZPOPMIN", a]),
        // Data already there.
        Call(0, &["RPUSH", a, "1", "2", "3"]),
        Call(0, &["BLPOP", b, a, "0"]),
        Call(0, &["BLMPOP", "0", "2", b, a, "RIGHT", "COUNT", "10"]),
        Call(0, &["ZADD", b, "1", "x", "2.5", "y"]),
        Call(0, &["BZPOPMAX", a, b, "0"]),
        Call(0, &["BZMPOP", "0", "2", a, b, "MIN", "COUNT", "10"]),
        // Waiters served by pushes, several in one push, other types left waiting.
        Block(1, &["BLPOP", a, b, "0"], 1),
        Block(2, &["BZPOPMIN", a, "0"], 2),
        Block(3, &["BRPOP", a, "0"], 3),
        Call(0, &["RPUSH", a, "p", "q", "r"]),
        Read(1),
        Read(3),
        Call(0, &["LRANGE", a, "0", "-1"]),
        Call(0, &["DEL", a]),
        Call(0, &["ZADD", a, "5", "m"]),
        Read(2),
        // RESP3 replies of served and timed-out waiters.
        Quiet(4, &["HELLO", "3"]),
        Block(4, &["BZPOPMIN", b, "0"], 1),
        Call(0, &["ZADD", b, "1.5", "z"]),
        Read(4),
        Call(4, &["BZMPOP", "0.01", "1", b, "MAX"]),
        Call(4, &["BLMOVE", a, b, "LEFT", "LEFT", "0.01"]),
        Call(4, &["BLPOP", "nothing", "0.01"]),
        // CLIENT UNBLOCK.
        Block(5, &["BLMPOP", "0", "1", "nothing", "LEFT"], 1),
        Unblock(5, "TIMEOUT"),
        Read(5),
        Block(5, &["BRPOPLPUSH", "nothing", b, "0"], 1),
        Unblock(5, "ERROR"),
        Read(5),
        Unblock(5, "ERROR"),
        // BRPOPLPUSH chained into a BLPOP.
        Call(0, &["DEL", a, b]),
        Block(6, &["BLPOP", b, "0"], 1),
        Block(7, &["BRPOPLPUSH", a, b, "0"], 2),
        Call(0, &["LPUSH", a, "chain"]),
        Read(7),
        Read(6),
        Call(0, &["EXISTS", a, b]),
    ];
    let mut strata = Side::new(s.port);
    strata.run(&steps);
    let mut redis = Side::new(real.port);
    redis.run(&steps);
    for (got, want) in strata.transcript.iter().zip(&redis.transcript) {
        assert_eq!(got, want);
    }
    assert_eq!(strata.transcript.len(), redis.transcript.len());
}

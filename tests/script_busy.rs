//! A script past `busy-reply-threshold` on one and two cores: every other client, on the
//! script's own core too (`--proactor_threads 1` puts them all there), gets Redis' -BUSY;
//! SCRIPT KILL and FUNCTION KILL from any client stop it; new connections are answered
//! meanwhile; a pipelined client's commands all get their replies, in order; connections in
//! MULTI, RESP2 subscribe mode, CLIENT REPLY OFF/SKIP or not authenticated, and MULTI, EXEC,
//! DISCARD, UNWATCH, AUTH, QUIT sent meanwhile, get Redis' answers; HELLO (a connection made
//! during the script included), RESET and WATCH are answered, and a WATCH answered then sees
//! the script's later writes, on either shard; INFO counts what ran; a script of calls to the
//! other core is served and killed as promptly as one of Lua alone. The transcripts are
//! compared byte for byte with a real redis-server. Nothing waits on a fixed sleep: each step
//! that must come before another is seen to have happened (a -BUSY reply, a command counted)
//! or, for scripts that wrote and so end only by themselves, has seconds of room.
mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::*;

const BUSY_EVAL: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &[u8] =
    b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
const SPIN: &str = "while true do end";
/// Catches the kill's error with pcall, and is stopped all the same.
const PCALL_SPIN: &str =
    "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end";
const LIB: &str =
    "#!lua name=busylib\nredis.register_function('spin', function() while true do end end)";

/// Sends `args` on `c` without reading the reply.
fn send(c: &mut Raw, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    c.send(&cmd(&a));
}

/// Polls PING on `c` until it answers -BUSY (the script passed the threshold); that reply.
fn wait_busy(c: &mut Raw) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c.call(&[b"ping"]);
        if r.starts_with(b"-BUSY") || Instant::now() > deadline {
            return r;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Connects with a read timeout long enough for a script to be killed.
fn client(port: u16) -> Raw {
    let c = Raw::connect(port);
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    c
}

/// The busy period of an EVAL and of an FCALL as every client sees it: (what, reply bytes).
/// Only clients connected before the script run it, except the one `new connection` line.
fn transcript(port: u16) -> Vec<(&'static str, Vec<u8>)> {
    let mut t = Vec::new();
    let mut admin = client(port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    rt(
        &mut admin,
        &["function", "load", "replace", LIB],
        "$7\r\nbusylib\r\n",
    );
    let (mut runner, mut other, mut killer) = (client(port), client(port), client(port));

    send(&mut runner, &["eval", SPIN, "0"]);
    t.push(("ping", wait_busy(&mut other)));
    t.push(("ping, new connection", client(port).call(&[b"ping"])));
    t.push(("get", other.call(&[b"get", b"k"])));
    t.push((
        "script load",
        other.call(&[b"script", b"load", b"return 1"]),
    ));
    t.push(("unknown command", other.call(&[b"nosuch", b"a"])));
    t.push(("wrong arity", other.call(&[b"get"])));
    t.push(("function kill", other.call(&[b"function", b"kill"])));
    t.push(("function stats", other.call(&[b"function", b"stats"])));
    t.push(("shutdown (saving)", other.call(&[b"shutdown"])));
    t.push(("script kill", killer.call(&[b"script", b"kill"])));
    t.push(("eval's reply", runner.reply()));
    t.push(("ping after", other.call(&[b"ping"])));
    t.push(("script kill after", other.call(&[b"script", b"kill"])));

    send(&mut runner, &["eval", PCALL_SPIN, "0"]);
    t.push(("ping (pcall)", wait_busy(&mut other)));
    t.push(("script kill (pcall)", killer.call(&[b"script", b"kill"])));
    t.push(("pcall's reply", runner.reply()));

    send(&mut runner, &["fcall", "spin", "0"]);
    t.push(("ping (fcall)", wait_busy(&mut other)));
    t.push(("script kill (fcall)", other.call(&[b"script", b"kill"])));
    t.push((
        "function kill (fcall)",
        killer.call(&[b"function", b"kill"]),
    ));
    t.push(("fcall's reply", runner.reply()));
    t.push(("ping after fcall", other.call(&[b"ping"])));

    // Once it wrote, it cannot be killed; it ends by itself, after long enough (to the
    // millisecond, not a whole second that may be nearly over) for the two calls below on a
    // loaded machine.
    send(
        &mut runner,
        &[
            "eval",
            "redis.call('set', KEYS[1], '1'); local function ms() local t = redis.call('time') return t[1] * 1000 + t[2] / 1000 end local s = ms() while ms() < s + 3000 do end return 'done'",
            "1",
            "w",
        ],
    );
    t.push(("ping (writer)", wait_busy(&mut other)));
    t.push(("script kill (writer)", killer.call(&[b"script", b"kill"])));
    t.push(("writer's reply", runner.reply()));
    t.push(("get w", other.call(&[b"get", b"w"])));
    t
}

fn check(t: &[(&str, Vec<u8>)]) {
    let want: &[(&str, &[u8])] = &[
        ("ping", BUSY_EVAL),
        ("ping, new connection", BUSY_EVAL),
        ("get", BUSY_EVAL),
        ("script load", BUSY_EVAL),
        ("unknown command", b"-ERR unknown command 'nosuch', with args beginning with: 'a' \r\n"),
        ("wrong arity", b"-ERR wrong number of arguments for 'get' command\r\n"),
        ("function kill", BUSY_EVAL),
        ("function stats", BUSY_EVAL),
        ("shutdown (saving)", BUSY_EVAL),
        ("script kill", b"+OK\r\n"),
        ("eval's reply", b"-ERR Script killed by user with SCRIPT KILL... script: 694a5fe1ddb97a4c6a1bf299d9537c7d3d0f84e7, on @user_script:1.\r\n"),
        ("ping after", b"+PONG\r\n"),
        ("script kill after", b"-NOTBUSY No scripts in execution right now.\r\n"),
        ("ping (pcall)", BUSY_EVAL),
        ("script kill (pcall)", b"+OK\r\n"),
        ("pcall's reply", b"-ERR Script killed by user with SCRIPT KILL... script: 7c4647a0ff0df8a94e199764ea04d4f93a1c64b8, on @user_script:1.\r\n"),
        ("ping (fcall)", BUSY_FUNCTION),
        ("script kill (fcall)", BUSY_FUNCTION),
        ("function kill (fcall)", b"+OK\r\n"),
        ("fcall's reply", b"-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.\r\n"),
        ("ping after fcall", b"+PONG\r\n"),
        ("ping (writer)", BUSY_EVAL),
        ("script kill (writer)", b"-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n"),
        ("writer's reply", b"$4\r\ndone\r\n"),
        ("get w", b"$1\r\n1\r\n"),
    ];
    let got: Vec<(&str, String)> = t
        .iter()
        .map(|(w, r)| (*w, String::from_utf8_lossy(r).into_owned()))
        .collect();
    let want: Vec<(&str, String)> = want
        .iter()
        .map(|(w, r)| (*w, String::from_utf8_lossy(r).into_owned()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn busy_script_on_one_core() {
    let s = server_with_threads(1);
    check(&transcript(s.port));
}

#[test]
fn busy_script_on_two_cores() {
    let s = server_with_threads(2);
    check(&transcript(s.port));
}

#[test]
fn busy_script_replies_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server_with_threads(1);
    let (ours, theirs) = (transcript(s.port), transcript(real.port));
    let show = |t: &[(&str, Vec<u8>)]| -> Vec<String> {
        t.iter()
            .map(|(w, r)| format!("{w}: {}", String::from_utf8_lossy(r)))
            .collect()
    };
    assert_eq!(show(&ours), show(&theirs));
}

/// A client that pipelines during the busy period: every request gets its reply, in order, a
/// request split across writes included. On the script's core the hook answers them all (WATCH
/// too, as Redis does) until the script is killed; on two cores the client may sit on the
/// other core, whose dispatcher runs WATCH (as Redis, it is allowed) once the script frees its
/// shard and answers -BUSY to what it reads before the script ends. After the WATCH each reply
/// is -BUSY or the right one, in order.
fn pipeline_during_busy(threads: usize) {
    let s = server_with_threads(threads);
    let mut admin = client(s.port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    rt(&mut admin, &["set", "k", "v"], "+OK\r\n");
    let (mut runner, mut other, mut piper) = (client(s.port), client(s.port), client(s.port));
    // The server has accepted the piper (its connection waits for requests) before the script
    // starts: one accepted but not yet started when the script does waits for its end.
    rt(&mut piper, &["ping"], "+PONG\r\n");
    send(&mut runner, &["eval", SPIN, "0"]);
    assert_eq!(wait_busy(&mut other), BUSY_EVAL);

    const N: usize = 3000;
    let mut req = Vec::new();
    for i in 0..N {
        req.extend(cmd(&[b"echo", format!("a{i}").as_bytes()]));
    }
    req.extend(cmd(&[b"watch", b"k"]));
    let mut want = vec!["+OK\r\n".to_string()];
    for i in 0..N {
        let b = format!("b{i}");
        req.extend(cmd(&[b"echo", b.as_bytes()]));
        want.push(format!("${}\r\n{b}\r\n", b.len()));
    }
    let last = cmd(&[b"get", b"k"]);
    want.push("$1\r\nv\r\n".into());
    req.extend(&last[..5]);
    piper.send(&req);
    // Answered while the script still runs (on another core, WATCH waits for the script's
    // end, and with it the replies of its batch).
    let read_busy = |piper: &mut Raw| {
        for i in 0..N {
            assert_eq!(piper.reply(), BUSY_EVAL, "reply {i}");
        }
    };
    if threads == 1 {
        read_busy(&mut piper);
    }
    thread::sleep(Duration::from_millis(200));
    piper.send(&last[5..]);
    rt(&mut other, &["script", "kill"], "+OK\r\n");
    assert!(runner.reply().starts_with(b"-ERR Script killed by user"));
    if threads > 1 {
        read_busy(&mut piper);
    }
    let busy = String::from_utf8_lossy(BUSY_EVAL).into_owned();
    for (i, w) in want.iter().enumerate() {
        let got = String::from_utf8_lossy(&piper.reply()).into_owned();
        if got == busy && (threads > 1 || i > 0) {
            continue;
        }
        assert_eq!(&got, w, "reply {i} after the busy ones");
    }
    rt(&mut piper, &["ping"], "+PONG\r\n");
}

#[test]
fn pipelined_commands_keep_their_order_on_one_core() {
    pipeline_during_busy(1);
}

#[test]
fn pipelined_commands_keep_their_order_on_two_cores() {
    pipeline_during_busy(2);
}

/// A busy script that wrote, stopped by SHUTDOWN NOSAVE (from a client on its own core, with
/// one thread).
#[test]
fn shutdown_nosave_ends_a_busy_script() {
    for threads in [1, 2] {
        shutdown_nosave(threads);
    }
}

fn shutdown_nosave(threads: usize) {
    let mut s = server_with_threads(threads);
    let mut admin = client(s.port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    let mut runner = client(s.port);
    send(
        &mut runner,
        &[
            "eval",
            "redis.call('set', 'x', '1'); while true do end",
            "0",
        ],
    );
    assert_eq!(wait_busy(&mut admin), BUSY_EVAL);
    rt(
        &mut admin,
        &["shutdown", "save"],
        std::str::from_utf8(BUSY_EVAL).unwrap(),
    );
    send(&mut admin, &["shutdown", "nosave"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.alive() {
        assert!(Instant::now() < deadline, "the server did not exit");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Each connection state Redis answers differently during a busy script (connected before it
/// starts, so with one thread they sit on the script's own core): MULTI before and during it,
/// EXEC refused with -EXECABORT, DISCARD, UNWATCH, QUIT, RESP2 subscribe mode, CLIENT REPLY
/// OFF and SKIP, a client not authenticated yet. (what, reply bytes), read in one order.
fn states_transcript(port: u16) -> Vec<(&'static str, Vec<u8>)> {
    let mut t = Vec::new();
    let mut admin = client(port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    rt(&mut admin, &["set", "k", "v"], "+OK\r\n");
    let (mut runner, mut other) = (client(port), client(port));
    let mut multi = client(port);
    rt(&mut multi, &["multi"], "+OK\r\n");
    rt(&mut multi, &["incr", "n"], "+QUEUED\r\n");
    let (mut m2, mut m3, mut plain, mut q) =
        (client(port), client(port), client(port), client(port));
    let mut sub = client(port);
    t.push(("subscribe", sub.call(&[b"subscribe", b"c"])));
    let mut off = client(port);
    send(&mut off, &["client", "reply", "off"]);
    let mut skip = client(port);
    send(&mut skip, &["client", "reply", "skip"]);
    // Neither answers: the script must not start before both ran (another connection, on
    // another core maybe), or the hook would answer them -BUSY.
    wait_for_calls(&mut admin, "client|reply", 2);
    rt(
        &mut admin,
        &["config", "set", "requirepass", "pw"],
        "+OK\r\n",
    );
    let mut noauth = client(port);

    send(&mut runner, &["eval", SPIN, "0"]);
    t.push(("ping", wait_busy(&mut other)));
    // Inside MULTI since before: refused, and EXEC aborts.
    t.push(("multi: set", multi.call(&[b"set", b"k", b"x"])));
    t.push(("multi: multi", multi.call(&[b"multi"])));
    t.push(("multi: watch", multi.call(&[b"watch", b"k"])));
    t.push(("multi: nosuch", multi.call(&[b"nosuch"])));
    t.push(("multi: exec", multi.call(&[b"exec"])));
    t.push(("multi: exec again", multi.call(&[b"exec"])));
    // MULTI during the script.
    t.push(("m2: multi", m2.call(&[b"multi"])));
    t.push(("m2: get", m2.call(&[b"get", b"k"])));
    t.push(("m2: discard", m2.call(&[b"discard"])));
    t.push(("m2: discard again", m2.call(&[b"discard"])));
    t.push(("m2: multi again", m2.call(&[b"multi"])));
    t.push(("m2: ping", m2.call(&[b"ping"])));
    t.push(("m3: multi", m3.call(&[b"multi"])));
    t.push(("m3: shutdown", m3.call(&[b"shutdown", b"nosave"])));
    t.push(("m3: wrong arity", m3.call(&[b"get"])));
    // Pipelined in one write: each answered in turn.
    let mut piped = cmd(&[b"multi"]);
    piped.extend(cmd(&[b"set", b"k", b"y"]));
    piped.extend(cmd(&[b"exec"]));
    piped.extend(cmd(&[b"unwatch"]));
    piped.extend(cmd(&[b"get", b"k"]));
    plain.send(&piped);
    for what in [
        "piped: multi",
        "piped: set",
        "piped: exec",
        "piped: unwatch",
        "piped: get",
    ] {
        t.push((what, plain.reply()));
    }
    t.push(("plain: unwatch", plain.call(&[b"unwatch"])));
    t.push(("plain: exec", plain.call(&[b"exec"])));
    t.push(("plain: discard", plain.call(&[b"discard"])));
    // Pipelined: QUIT answers and closes; what follows it is not run.
    let mut quit = cmd(&[b"ping"]);
    quit.extend(cmd(&[b"quit"]));
    quit.extend(cmd(&[b"set", b"quit", b"1"]));
    q.send(&quit);
    let (bytes, open) = q.read_until_close(Duration::from_secs(5));
    t.push(("quit", bytes));
    t.push((
        "quit closes",
        if open.is_none() {
            b"closed".to_vec()
        } else {
            b"open".to_vec()
        },
    ));
    t.push(("sub: get", sub.call(&[b"get", b"k"])));
    t.push(("sub: ping", sub.call(&[b"ping"])));
    t.push(("sub: subscribe", sub.call(&[b"subscribe", b"d"])));
    t.push(("sub: quit", sub.call(&[b"quit"])));
    send(&mut off, &["get", "k"]);
    send(&mut off, &["client", "reply", "on"]);
    send(&mut skip, &["get", "k"]);
    t.push(("skip: ping", skip.call(&[b"ping"])));
    t.push(("noauth: get", noauth.call(&[b"get", b"k"])));
    t.push(("noauth: ping", noauth.call(&[b"ping"])));
    t.push(("noauth: auth wrong", noauth.call(&[b"auth", b"no"])));
    t.push(("noauth: auth", noauth.call(&[b"auth", b"pw"])));
    t.push(("noauth: get after auth", noauth.call(&[b"get", b"k"])));
    t.push(("noauth: quit", noauth.call(&[b"quit"])));

    t.push(("script kill", other.call(&[b"script", b"kill"])));
    t.push(("eval's reply", runner.reply()));
    t.push(("m2: exec after", m2.call(&[b"exec"])));
    t.push(("m3: exec after", m3.call(&[b"exec"])));
    t.push((
        "off: client reply on",
        off.call(&[b"client", b"reply", b"on"]),
    ));
    t.push(("off: ping", off.call(&[b"ping"])));
    t.push(("plain: multi, exec", {
        plain.call(&[b"multi"]);
        plain.call(&[b"exec"])
    }));
    t.push(("get quit", admin.call(&[b"get", b"quit"])));
    t.push(("get n", admin.call(&[b"get", b"n"])));
    t.push(("get k", admin.call(&[b"get", b"k"])));
    t
}

/// Waits until INFO commandstats counts `calls` calls of `command` (a command that sends no
/// reply has run).
fn wait_for_calls(admin: &mut Raw, command: &str, calls: u64) {
    let want = format!("cmdstat_{command}:calls={calls},");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = String::from_utf8_lossy(&admin.call(&[b"info", b"commandstats"])).into_owned();
        if info.lines().any(|l| l.starts_with(&want)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{command} did not run {calls} times"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// The states transcript on Strata with `threads` threads and on redis-server, byte for byte
/// (fails when redis-server is missing and required, see `redis_server_binary`).
fn states_match_redis(threads: usize) {
    let dir = tempfile::tempdir().unwrap();
    let real = RedisServer::start(dir.path(), "dump.rdb", &[])
        .expect("redis-server is needed for this comparison");
    let s = server_with_threads(threads);
    let (ours, theirs) = (states_transcript(s.port), states_transcript(real.port));
    let show = |t: &[(&str, Vec<u8>)]| -> Vec<String> {
        t.iter()
            .map(|(w, r)| format!("{w}: {}", String::from_utf8_lossy(r)))
            .collect()
    };
    assert_eq!(show(&ours), show(&theirs));
}

#[test]
fn busy_states_match_redis_on_one_core() {
    states_match_redis(1);
}

#[test]
fn busy_states_match_redis_on_two_cores() {
    states_match_redis(2);
}

/// A server on `threads` cores whose scripts are busy past 100 ms, an admin client and a
/// runner client (served once).
fn busy_server(threads: usize) -> (Server, Raw, Raw) {
    let s = server_with_threads(threads);
    let mut admin = client(s.port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    let mut runner = client(s.port);
    rt(&mut runner, &["ping"], "+PONG\r\n");
    (s, admin, runner)
}

/// Connections the server accepted but whose tasks had not started when the script began
/// (connected just before it, no request yet), and ones still in the listen queue then, get
/// -BUSY like the others while it runs, on the script's own core.
#[test]
fn connections_not_started_when_a_script_begins_get_busy() {
    let (s, mut admin, mut runner) = busy_server(1);
    let mut early: Vec<Raw> = (0..4).map(|_| client(s.port)).collect();
    send(&mut runner, &["eval", SPIN, "0"]);
    let mut queued: Vec<Raw> = (0..4).map(|_| client(s.port)).collect();
    assert_eq!(wait_busy(&mut early[0]), BUSY_EVAL);
    for (i, c) in early.iter_mut().chain(queued.iter_mut()).enumerate() {
        let mut two = cmd(&[b"ping"]);
        two.extend(cmd(&[b"get", b"k"]));
        c.send(&two);
        assert_eq!(c.reply(), BUSY_EVAL, "client {i}: ping");
        assert_eq!(c.reply(), BUSY_EVAL, "client {i}: get");
    }
    rt(&mut admin, &["script", "kill"], "+OK\r\n");
    assert!(runner.reply().starts_with(b"-ERR Script killed by user"));
    for c in early.iter_mut().chain(queued.iter_mut()) {
        rt(c, &["ping"], "+PONG\r\n");
    }
}

/// A script of calls that each wait for the other core (DBSIZE counts both shards) runs few
/// instructions between calls, so the hook's 100000 come seldom: its core's clients are
/// answered all the same, connections made just before it included, and SCRIPT KILL stops it
/// at once.
#[test]
fn a_script_of_calls_to_the_other_core_serves_its_core_and_stops_at_once() {
    let (s, mut admin, mut runner) = busy_server(2);
    // Several, so that some share the script's core whichever it is.
    let mut early: Vec<Raw> = (0..6).map(|_| client(s.port)).collect();
    send(
        &mut runner,
        &["eval", "while true do redis.call('dbsize') end", "0"],
    );
    assert_eq!(wait_busy(&mut admin), BUSY_EVAL);
    for (i, c) in early.iter_mut().enumerate() {
        let t = Instant::now();
        assert_eq!(c.call(&[b"ping"]), BUSY_EVAL, "client {i}");
        let waited = t.elapsed();
        assert!(
            waited < Duration::from_millis(500),
            "client {i} waited {waited:?}"
        );
    }
    let t = Instant::now();
    rt(&mut admin, &["script", "kill"], "+OK\r\n");
    assert!(runner.reply().starts_with(b"-ERR Script killed by user"));
    let waited = t.elapsed();
    assert!(
        waited < Duration::from_millis(500),
        "the kill took {waited:?}"
    );
    for c in early.iter_mut() {
        rt(c, &["ping"], "+PONG\r\n");
    }
}

/// HELLO's reply with the values that differ between servers (version, client id) masked.
fn masked(reply: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&reply).into_owned();
    let mut lines: Vec<String> = text.split("\r\n").map(str::to_string).collect();
    for i in 0..lines.len() {
        if lines[i] == "version" && i + 2 < lines.len() {
            lines[i + 1] = "$?".into();
            lines[i + 2] = "?".into();
        }
        if lines[i] == "id" && i + 1 < lines.len() {
            lines[i + 1] = ":?".into();
        }
    }
    lines.join("\r\n").into_bytes()
}

/// The `id` field of a HELLO reply, as its RESP line (`:5`).
fn hello_id(reply: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(reply).into_owned();
    let mut lines = text.split("\r\n");
    lines.find(|l| *l == "id")?;
    lines.next().map(str::to_string)
}

/// HELLO, RESET and WATCH outside MULTI (Redis flags them ALLOW_BUSY) from clients on the
/// script's core (with one thread) during a busy script: answered while it runs, and what
/// they changed holds once it ends (protocol, name, subscriptions, MULTI, db, keys watched).
fn allow_busy_transcript(port: u16) -> Vec<(&'static str, Vec<u8>)> {
    let mut t = Vec::new();
    let mut admin = client(port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    rt(&mut admin, &["set", "k", "v"], "+OK\r\n");
    let (mut runner, mut other) = (client(port), client(port));
    let (mut h, mut h2, mut w, mut w2) = (client(port), client(port), client(port), client(port));
    let (mut r, mut rm, mut sub) = (client(port), client(port), client(port));
    t.push(("sub: subscribe", sub.call(&[b"subscribe", b"c"])));
    rt(&mut rm, &["multi"], "+OK\r\n");
    rt(&mut r, &["client", "setname", "rname"], "+OK\r\n");
    rt(&mut r, &["select", "1"], "+OK\r\n");
    for c in [&mut h, &mut h2, &mut w, &mut w2] {
        rt(c, &["ping"], "+PONG\r\n");
    }

    send(&mut runner, &["eval", SPIN, "0"]);
    t.push(("ping", wait_busy(&mut other)));
    // Connected during the script: accepted by it, its session not started.
    let mut hn = client(port);
    let hello_new = hn.call(&[b"hello", b"3", b"setname", b"newname"]);
    t.push(("hello, new connection", masked(hello_new.clone())));
    t.push(("hello, new connection: get", hn.call(&[b"get", b"k"])));
    t.push(("hello", masked(h.call(&[b"hello"]))));
    t.push(("hello 3", masked(h.call(&[b"hello", b"3"]))));
    t.push(("hello 3: ping", h.call(&[b"ping"])));
    t.push(("hello 4", h.call(&[b"hello", b"4"])));
    t.push(("hello bad option", h.call(&[b"hello", b"3", b"foo"])));
    t.push((
        "hello setname",
        masked(h2.call(&[b"hello", b"2", b"setname", b"busyname"])),
    ));
    t.push((
        "hello auth wrong",
        masked(h2.call(&[b"hello", b"2", b"auth", b"default", b"nope"])),
    ));
    t.push(("watch", w.call(&[b"watch", b"k", b"k2"])));
    t.push(("watch2", w2.call(&[b"watch", b"k"])));
    t.push(("watch2: unwatch", w2.call(&[b"unwatch"])));
    t.push(("reset", r.call(&[b"reset"])));
    t.push(("sub: reset", sub.call(&[b"reset"])));
    t.push(("sub: ping", sub.call(&[b"ping"])));
    t.push(("multi: reset", rm.call(&[b"reset"])));
    t.push(("multi: get", rm.call(&[b"get", b"k"])));
    t.push(("script kill", other.call(&[b"script", b"kill"])));
    t.push(("eval's reply", runner.reply()));

    t.push(("hello 3: hgetall after", h.call(&[b"hgetall", b"nokey"])));
    t.push((
        "new connection: hgetall after",
        hn.call(&[b"hgetall", b"nokey"]),
    ));
    t.push((
        "new connection: getname after",
        hn.call(&[b"client", b"getname"]),
    ));
    let id = String::from_utf8_lossy(&hn.call(&[b"client", b"id"])).into_owned();
    t.push((
        "new connection: HELLO's id is CLIENT ID",
        (hello_id(&hello_new).as_deref() == Some(id.trim_end()))
            .to_string()
            .into_bytes(),
    ));
    t.push(("h2: getname after", h2.call(&[b"client", b"getname"])));
    rt(&mut admin, &["set", "k", "changed"], "+OK\r\n");
    t.push(("watch: exec after a change", {
        w.call(&[b"multi"]);
        w.call(&[b"set", b"k2", b"w"]);
        w.call(&[b"exec"])
    }));
    t.push(("watch2: exec after a change", {
        w2.call(&[b"multi"]);
        w2.call(&[b"set", b"k2", b"w2"]);
        w2.call(&[b"exec"])
    }));
    t.push(("reset: getname after", r.call(&[b"client", b"getname"])));
    t.push(("reset: set in db 0", r.call(&[b"set", b"r0", b"1"])));
    t.push(("admin: get r0", admin.call(&[b"get", b"r0"])));
    t.push(("sub: ping after", sub.call(&[b"ping"])));
    t.push(("numsub", admin.call(&[b"pubsub", b"numsub", b"c"])));
    t.push(("multi: exec after", rm.call(&[b"exec"])));

    // A WATCH answered while the script runs sees the script's own later write of the key.
    let (mut w3, mut w4) = (client(port), client(port));
    rt(&mut w3, &["ping"], "+PONG\r\n");
    rt(&mut w4, &["ping"], "+PONG\r\n");
    let writer = "local function ms() local t = redis.call('time') return t[1] * 1000 + t[2] / 1000 end local s = ms() while ms() < s + 4000 do end redis.call('set', KEYS[1], 'script') return 'done'";
    send(&mut runner, &["eval", writer, "1", "sw"]);
    t.push(("ping (writer)", wait_busy(&mut other)));
    t.push(("w3: watch", w3.call(&[b"watch", b"sw"])));
    t.push(("w4: watch", w4.call(&[b"watch", b"sw"])));
    t.push(("w4: unwatch", w4.call(&[b"unwatch"])));
    t.push(("writer's reply", runner.reply()));
    for (what, c) in [("w3: exec", &mut w3), ("w4: exec", &mut w4)] {
        c.call(&[b"multi"]);
        c.call(&[b"set", b"sw", b"client"]);
        t.push((what, c.call(&[b"exec"])));
    }
    t
}

#[test]
fn hello_reset_and_watch_are_answered_during_a_busy_script_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let real = RedisServer::start(dir.path(), "dump.rdb", &[])
        .expect("redis-server is needed for this comparison");
    let s = server_with_threads(1);
    let (ours, theirs) = (
        allow_busy_transcript(s.port),
        allow_busy_transcript(real.port),
    );
    let show = |t: &[(&str, Vec<u8>)]| -> Vec<String> {
        t.iter()
            .map(|(w, r)| format!("{w}: {}", String::from_utf8_lossy(r)))
            .collect()
    };
    assert_eq!(show(&ours), show(&theirs));
}

/// Each of `clients` clients (connected before the script) sends WATCH of one of `keys`
/// (client i the key i % 2) and a PING in one write while a script is busy writing both keys
/// over and over until `ms` milliseconds have passed (and once more at its end); once it
/// ended, MULTI, SET, EXEC. (index of the key watched, [WATCH, PING, MULTI, SET, EXEC
/// replies]) for each client, on whichever core the kernel put it: the script's hook answers
/// those of the script's core, the others' WATCH registers beside the script.
fn watch_while_writing(
    port: u16,
    keys: &[String; 2],
    clients: usize,
    ms: u64,
) -> Vec<(usize, Vec<Vec<u8>>)> {
    let mut admin = client(port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    let (mut runner, mut other) = (client(port), client(port));
    let mut cs: Vec<Raw> = (0..clients).map(|_| client(port)).collect();
    // Every connection has been served once before the script starts: one the server accepted
    // but had not served yet may wait for the script's end (see RESULTS.md, coord27).
    rt(&mut other, &["ping"], "+PONG\r\n");
    for c in &mut cs {
        rt(c, &["ping"], "+PONG\r\n");
    }
    // Mostly plain Lua (so the hook runs often), a write of both keys between.
    let writer =
        "local function ms() local t = redis.call('time') return t[1] * 1000 + t[2] / 1000 end \
        local s = ms() while ms() < s + tonumber(ARGV[1]) do \
        local x = 0 for i = 1, 20000 do x = x + i end \
        redis.call('incr', KEYS[1]) redis.call('incr', KEYS[2]) end \
        redis.call('incr', KEYS[1]) redis.call('incr', KEYS[2]) return 'done'";
    send(
        &mut runner,
        &["eval", writer, "2", &keys[0], &keys[1], &ms.to_string()],
    );
    assert_eq!(wait_busy(&mut other), BUSY_EVAL);
    for (i, c) in cs.iter_mut().enumerate() {
        let mut req = cmd(&[b"watch", keys[i % 2].as_bytes()]);
        req.extend(cmd(&[b"ping"]));
        c.send(&req);
    }
    let mut out: Vec<(usize, Vec<Vec<u8>>)> = cs
        .iter_mut()
        .enumerate()
        .map(|(i, c)| (i % 2, vec![c.reply(), c.reply()]))
        .collect();
    assert_eq!(runner.reply(), b"$4\r\ndone\r\n");
    for ((g, replies), c) in out.iter_mut().zip(cs.iter_mut()) {
        replies.push(c.call(&[b"multi"]));
        replies.push(c.call(&[b"set", keys[*g].as_bytes(), b"client"]));
        replies.push(c.call(&[b"exec"]));
    }
    out
}

/// A WATCH during a busy script registers the key at once on every shard, as Redis does, from
/// a client of the script's core (answered by its hook) or of another core: the script's
/// writes of it after the reply fail the EXEC.
#[test]
fn watch_during_a_busy_script_sees_its_later_writes_on_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    let real = RedisServer::start(dir.path(), "dump.rdb", &[])
        .expect("redis-server is needed for this comparison");
    let (k0, k1) = keys_on_different_shards("sw", 2);
    let keys = [k0, k1];
    let show = |r: &[Vec<u8>]| -> Vec<String> {
        r.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    };
    let theirs = watch_while_writing(real.port, &keys, 2, 1000);
    let want = show(&theirs[0].1);
    assert_eq!(want[1], String::from_utf8_lossy(BUSY_EVAL));
    assert_eq!(want[4], "*-1\r\n");
    assert!(theirs.iter().all(|(_, r)| show(r) == want));

    let one = server_with_threads(1);
    for (g, r) in watch_while_writing(one.port, &keys, 4, 1000) {
        assert_eq!(show(&r), want, "one core, key {g}");
    }
    // Twelve clients of each round land on both cores, watching keys of both shards.
    let two = server_with_threads(2);
    for round in 0..3 {
        for (g, r) in watch_while_writing(two.port, &keys, 12, 1500) {
            assert_eq!(show(&r), want, "two cores, round {round}, key {g}");
        }
    }
}

/// INFO's total_commands_processed after a busy period: what the busy script refused
/// (-BUSY, unknown or malformed commands, a refused EXEC) is not counted, what it ran
/// (MULTI, FUNCTION STATS, SCRIPT KILL) is, as in Redis.
fn commands_processed(port: u16) -> String {
    let mut admin = client(port);
    rt(
        &mut admin,
        &["config", "set", "busy-reply-threshold", "100"],
        "+OK\r\n",
    );
    let (mut runner, mut other, mut probe) = (client(port), client(port), client(port));
    // Commands queued in MULTI are not counted, nor are those refused with -BUSY: the probe
    // waits for the busy period without changing the count.
    rt(&mut probe, &["multi"], "+OK\r\n");
    rt(&mut admin, &["config", "resetstat"], "+OK\r\n");
    send(&mut runner, &["eval", SPIN, "0"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while probe.call(&[b"ping"]) != BUSY_EVAL {
        assert!(Instant::now() < deadline, "the script did not get busy");
        thread::sleep(Duration::from_millis(20));
    }
    for args in [
        &[&b"ping"[..]][..],
        &[b"get", b"k"],
        &[b"nosuch"],
        &[b"get"],
        &[b"multi"],
        &[b"set", b"k", b"1"],
        &[b"exec"],
        &[b"function", b"stats"],
        &[b"script", b"kill"],
    ] {
        other.call(args);
    }
    assert!(runner.reply().starts_with(b"-ERR Script killed"));
    let info = String::from_utf8_lossy(&admin.call(&[b"info", b"stats"])).into_owned();
    info.lines()
        .find(|l| l.starts_with("total_commands_processed:"))
        .unwrap_or("none")
        .to_string()
}

#[test]
fn busy_commands_counted_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let real = RedisServer::start(dir.path(), "dump.rdb", &[])
        .expect("redis-server is needed for this comparison");
    let want = commands_processed(real.port);
    for threads in [1, 2] {
        let s = server_with_threads(threads);
        assert_eq!(commands_processed(s.port), want, "{threads} threads");
    }
}

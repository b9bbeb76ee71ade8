//! Client-side caching (CLIENT TRACKING) against the real binary on two cores, byte for byte:
//! RESP3 push invalidations for keys read on either core and changed from another connection,
//! REDIRECT to a RESP2 subscriber of `__redis__:invalidate`, a broken redirect, BCAST with
//! prefixes (one message per prefix for a transaction), OPTIN / OPTOUT with CLIENT CACHING,
//! NOLOOP, the null invalidation of FLUSHALL / FLUSHDB, expiry, the table's key limit, scripts,
//! the INFO fields, CLIENT LIST flags, a disconnect leaving nothing behind, Redis' errors; and
//! the same sequences against redis-server with the bytes compared.
//!
//! Without redis-server installed the cross-check says so and passes, unless
//! STRATA_REQUIRE_REDIS=1.
mod common;

use std::time::{Duration, Instant};

use common::*;

/// The RESP3 push that invalidates `keys`.
fn inval3(keys: &[&str]) -> String {
    let items: Vec<String> = keys.iter().map(|k| b(k)).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    format!(">2\r\n$10\r\ninvalidate\r\n{}", arr(&refs))
}

/// The RESP2 message a redirect target subscribed to `__redis__:invalidate` gets.
fn inval2(keys: &[&str]) -> String {
    let items: Vec<String> = keys.iter().map(|k| b(k)).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    arr(&[&b("message"), &b("__redis__:invalidate"), &arr(&refs)])
}

fn next(raw: &mut Raw) -> String {
    String::from_utf8_lossy(&raw.reply()).into_owned()
}

/// Asserts nothing was pushed: the next reply is PING's.
fn nothing_pushed(raw: &mut Raw) {
    rt(raw, &["PING"], "+PONG\r\n");
}

fn hello3(raw: &mut Raw) {
    let _ = raw.call(&[b"HELLO", b"3"]);
}

fn client_id(raw: &mut Raw) -> String {
    int_of(&raw.call(&[b"CLIENT", b"ID"])).to_string()
}

/// A RESP2 connection subscribed to `__redis__:invalidate`, and its client id.
fn redirect_target(s: &Server) -> (Raw, String) {
    let mut r = s.raw();
    let id = client_id(&mut r);
    let _ = r.call(&[b"SUBSCRIBE", b"__redis__:invalidate"]);
    (r, id)
}

#[test]
fn resp3_push_for_keys_read_on_both_cores_changed_elsewhere() {
    let s = server();
    let (k0, k1) = keys_on_different_shards("inv", 2);
    let (mut a, mut w) = (s.raw(), s.raw());
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
    rt(&mut w, &["MSET", &k0, "1", &k1, "2"], "+OK\r\n");
    // One key at a time (each on its own shard), then both at once (across shards).
    rt(&mut a, &["GET", &k0], &b("1"));
    rt(&mut w, &["SET", &k0, "x"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&[&k0]));
    // Invalidated once: the key is forgotten until read again.
    rt(&mut w, &["SET", &k0, "y"], "+OK\r\n");
    nothing_pushed(&mut a);
    rt(&mut a, &["MGET", &k0, &k1], &arr(&[&b("y"), &b("2")]));
    rt(&mut w, &["DEL", &k1], &i(1));
    assert_eq!(next(&mut a), inval3(&[&k1]));
    rt(&mut w, &["APPEND", &k0, "z"], &i(2));
    assert_eq!(next(&mut a), inval3(&[&k0]));
    // A key never read is never reported.
    rt(&mut w, &["SET", "never-read", "1"], "+OK\r\n");
    nothing_pushed(&mut a);
    // A collection changed in place, and the client's own write (after its reply).
    rt(&mut a, &["HSET", "h", "f", "1"], &i(1));
    rt(&mut a, &["HGET", "h", "f"], &b("1"));
    a.send(&cmd(&[b"HDEL", b"h", b"f"]));
    assert_eq!(next(&mut a), i(1));
    assert_eq!(next(&mut a), inval3(&["h"]));
    // Off: nothing more.
    rt(&mut a, &["GET", &k0], &b("yz"));
    rt(&mut a, &["CLIENT", "TRACKING", "OFF"], "+OK\r\n");
    rt(&mut w, &["SET", &k0, "1"], "+OK\r\n");
    nothing_pushed(&mut a);
}

#[test]
fn resp2_redirect_to_a_subscriber_and_a_broken_redirect() {
    let s = server();
    let (k0, k1) = keys_on_different_shards("redir", 2);
    let (mut r, rid) = redirect_target(&s);
    let (mut a, mut w) = (s.raw(), s.raw());
    rt(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "REDIRECT", &rid],
        "+OK\r\n",
    );
    rt(&mut a, &["CLIENT", "GETREDIR"], &i(rid.parse().unwrap()));
    let info = String::from_utf8(bulk_of(&a.call(&[b"CLIENT", b"INFO"]))).unwrap();
    assert!(info.contains(" flags=t "), "{info}");
    assert!(info.contains(&format!(" redir={rid} ")), "{info}");
    rt(&mut a, &["MGET", &k0, &k1], &arr(&["$-1\r\n", "$-1\r\n"]));
    rt(&mut w, &["SET", &k1, "1"], "+OK\r\n");
    assert_eq!(next(&mut r), inval2(&[&k1]));
    rt(&mut w, &["INCR", &k0], &i(1));
    assert_eq!(next(&mut r), inval2(&[&k0]));
    // The target leaves: the tracker is marked broken (RESP2 cannot be told).
    drop(r);
    rt(&mut a, &["GET", &k0], &b("1"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        rt(&mut w, &["INCR", &k0], &i(2));
        let info = String::from_utf8(bulk_of(&a.call(&[b"CLIENT", b"INFO"]))).unwrap();
        if info.contains(" flags=tR ") {
            break;
        }
        assert!(Instant::now() < deadline, "never broken: {info}");
        rt(&mut w, &["SET", &k0, "1"], "+OK\r\n");
        rt(&mut a, &["GET", &k0], &b("1"));
    }
    rt(
        &mut a,
        &["CLIENT", "TRACKINGINFO"],
        &format!(
            "*6\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:{rid}\r\n$8\r\nprefixes\r\n*0\r\n"
        ),
    );
    // In RESP3 the tracker is told.
    hello3(&mut a);
    rt(&mut a, &["GET", &k0], &b("2"));
    rt(&mut w, &["SET", &k0, "3"], "+OK\r\n");
    assert_eq!(
        next(&mut a),
        format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{rid}\r\n")
    );
}

#[test]
fn bcast_prefixes_batch_a_transaction_per_prefix() {
    let s = server();
    let (mut a, mut w) = (s.raw(), s.raw());
    hello3(&mut a);
    rt(
        &mut a,
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "b:", "PREFIX", "a:",
        ],
        "+OK\r\n",
    );
    rt(&mut w, &["MULTI"], "+OK\r\n");
    for k in ["a:2{t}", "a:1{t}", "b:1{t}", "c:1{t}"] {
        rt(&mut w, &["INCR", k], "+QUEUED\r\n");
    }
    rt(&mut w, &["EXEC"], &arr(&[&i(1), &i(1), &i(1), &i(1)]));
    assert_eq!(next(&mut a), inval3(&["a:1{t}", "a:2{t}"]));
    assert_eq!(next(&mut a), inval3(&["b:1{t}"]));
    // Keys on both cores, nothing read first.
    let (k0, k1) = keys_on_different_shards("a:x", 2);
    rt(&mut w, &["SET", &k0, "1"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&[&k0]));
    rt(&mut w, &["SET", &k1, "1"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&[&k1]));
    rt(&mut w, &["SET", "c:2", "1"], "+OK\r\n");
    nothing_pushed(&mut a);
    // More prefixes may be added; overlapping ones are refused.
    rt(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "c:"],
        "+OK\r\n",
    );
    rt(
        &mut a,
        &["CLIENT", "TRACKINGINFO"],
        "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*3\r\n$2\r\na:\r\n$2\r\nb:\r\n$2\r\nc:\r\n",
    );
    let info = String::from_utf8(bulk_of(&w.call(&[b"INFO", b"stats"]))).unwrap();
    assert!(info.contains("tracking_total_prefixes:3\r\n"), "{info}");
    rt(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a:b"],
        &e("ERR Prefix 'a:b' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap."),
    );
    rt(&mut w, &["SET", "c:2", "2"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&["c:2"]));
    // NOLOOP: its own changes are left out.
    rt(&mut a, &["CLIENT", "TRACKING", "OFF"], "+OK\r\n");
    rt(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"],
        "+OK\r\n",
    );
    rt(&mut a, &["SET", "mine", "1"], "+OK\r\n");
    rt(&mut w, &["SET", "theirs", "1"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&["theirs"]));
}

#[test]
fn optin_optout_and_client_caching_last_one_command() {
    let s = server();
    let (mut a, mut w) = (s.raw(), s.raw());
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON", "OPTIN"], "+OK\r\n");
    rt(&mut a, &["GET", "k1"], "_\r\n");
    rt(&mut a, &["CLIENT", "CACHING", "YES"], "+OK\r\n");
    rt(
        &mut a,
        &["CLIENT", "TRACKINGINFO"],
        "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n",
    );
    rt(&mut a, &["GET", "k2"], "_\r\n");
    rt(&mut a, &["GET", "k3"], "_\r\n");
    rt(
        &mut w,
        &["MSET", "k1", "1", "k2", "2", "k3", "3"],
        "+OK\r\n",
    );
    assert_eq!(next(&mut a), inval3(&["k2"]));
    nothing_pushed(&mut a);
    rt(
        &mut a,
        &["CLIENT", "CACHING", "NO"],
        &e("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."),
    );
    rt(&mut a, &["CLIENT", "TRACKING", "OFF"], "+OK\r\n");
    rt(&mut a, &["CLIENT", "TRACKING", "ON", "OPTOUT"], "+OK\r\n");
    rt(&mut a, &["CLIENT", "CACHING", "NO"], "+OK\r\n");
    rt(&mut a, &["GET", "k1"], &b("1"));
    rt(&mut a, &["GET", "k2"], &b("2"));
    rt(&mut w, &["MSET", "k1", "x", "k2", "y"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&["k2"]));
    nothing_pushed(&mut a);
    // Inside MULTI the choice holds for the whole transaction.
    rt(&mut a, &["CLIENT", "CACHING", "NO"], "+OK\r\n");
    rt(&mut a, &["MULTI"], "+OK\r\n");
    rt(&mut a, &["GET", "k1"], "+QUEUED\r\n");
    rt(&mut a, &["EXEC"], &arr(&[&b("x")]));
    rt(&mut a, &["GET", "k2"], &b("y"));
    rt(&mut w, &["MSET", "k1", "1", "k2", "2"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&["k2"]));
    nothing_pushed(&mut a);
}

#[test]
fn noloop_skips_own_writes_in_default_mode() {
    let s = server();
    let (mut a, mut w) = (s.raw(), s.raw());
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON", "NOLOOP"], "+OK\r\n");
    rt(&mut a, &["MGET", "x{1}", "y{1}"], "*2\r\n_\r\n_\r\n");
    rt(&mut a, &["SET", "x{1}", "1"], "+OK\r\n");
    rt(&mut w, &["SET", "y{1}", "1"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&["y{1}"]));
    nothing_pushed(&mut a);
    // A script's writes are the caller's too.
    rt(&mut a, &["GET", "x{1}"], &b("1"));
    rt(
        &mut a,
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], '2')",
            "1",
            "x{1}",
        ],
        "+OK\r\n",
    );
    nothing_pushed(&mut a);
}

#[test]
fn flushall_and_flushdb_send_a_null_invalidation() {
    let s = server();
    let (mut r, rid) = redirect_target(&s);
    let (mut a3, mut a2, mut w) = (s.raw(), s.raw(), s.raw());
    hello3(&mut a3);
    rt(&mut a3, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
    rt(
        &mut a2,
        &["CLIENT", "TRACKING", "ON", "REDIRECT", &rid],
        "+OK\r\n",
    );
    rt(&mut a3, &["GET", "k"], "_\r\n");
    rt(&mut a2, &["GET", "k2"], "$-1\r\n");
    let info = String::from_utf8(bulk_of(&w.call(&[b"INFO"]))).unwrap();
    assert!(info.contains("tracking_clients:2\r\n"), "{info}");
    assert!(info.contains("tracking_total_keys:2\r\n"), "{info}");
    assert!(info.contains("tracking_total_items:2\r\n"), "{info}");
    rt(&mut w, &["FLUSHALL"], "+OK\r\n");
    assert_eq!(next(&mut a3), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    assert_eq!(
        next(&mut r),
        arr(&[&b("message"), &b("__redis__:invalidate"), "$-1\r\n"])
    );
    let info = String::from_utf8(bulk_of(&w.call(&[b"INFO", b"stats"]))).unwrap();
    assert!(info.contains("tracking_total_keys:0\r\n"), "{info}");
    // The flushing client's own null comes after its reply, and after EXEC's.
    rt(&mut a3, &["MULTI"], "+OK\r\n");
    rt(&mut a3, &["FLUSHDB"], "+QUEUED\r\n");
    a3.send(&cmd(&[b"EXEC"]));
    assert_eq!(next(&mut a3), arr(&["+OK\r\n"]));
    assert_eq!(next(&mut a3), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    assert_eq!(
        next(&mut r),
        arr(&[&b("message"), &b("__redis__:invalidate"), "$-1\r\n"])
    );
}

#[test]
fn expiry_and_the_key_limit_invalidate() {
    let s = server();
    let (mut a, mut w) = (s.raw(), s.raw());
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
    rt(&mut w, &["SET", "short", "1", "PX", "50"], "+OK\r\n");
    rt(&mut a, &["GET", "short"], &b("1"));
    // Nobody reads it again: the active expiry finds it.
    assert_eq!(next(&mut a), inval3(&["short"]));
    // Over the limit, keys are invalidated until one is left.
    for k in ["l1", "l2", "l3", "l4"] {
        rt(&mut a, &["GET", k], "_\r\n");
    }
    rt(
        &mut w,
        &["CONFIG", "SET", "tracking-table-max-keys", "1"],
        "+OK\r\n",
    );
    let mut got: Vec<String> = (0..3).map(|_| next(&mut a)).collect();
    got.sort();
    let info = String::from_utf8(bulk_of(&w.call(&[b"INFO", b"stats"]))).unwrap();
    assert!(info.contains("tracking_total_keys:1\r\n"), "{info}");
    let all: Vec<String> = ["l1", "l2", "l3", "l4"]
        .iter()
        .map(|k| inval3(&[k]))
        .collect();
    assert!(got.iter().all(|g| all.contains(g)), "{got:?}");
    rt(
        &mut w,
        &["CONFIG", "GET", "tracking-table-max-keys"],
        &arr(&[&b("tracking-table-max-keys"), &b("1")]),
    );
}

#[test]
fn scripts_track_their_declared_keys_when_they_read() {
    let s = server();
    let (mut a, mut w) = (s.raw(), s.raw());
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
    // A script that only writes tracks nothing.
    rt(
        &mut a,
        &[
            "EVAL",
            "redis.call('set', 'k3{t}', 'bar')",
            "2",
            "k1{t}",
            "k2{t}",
        ],
        "_\r\n",
    );
    rt(&mut w, &["MSET", "k2{t}", "2", "k1{t}", "2"], "+OK\r\n");
    nothing_pushed(&mut a);
    rt(
        &mut a,
        &[
            "EVAL_RO",
            "redis.call('get', 'k3{t}')",
            "2",
            "k1{t}",
            "k2{t}",
        ],
        "_\r\n",
    );
    rt(&mut w, &["MSET", "k2{t}", "3", "k1{t}", "3"], "+OK\r\n");
    assert_eq!(next(&mut a), inval3(&["k2{t}"]));
    assert_eq!(next(&mut a), inval3(&["k1{t}"]));
}

#[test]
fn a_disconnected_tracker_leaves_nothing_behind() {
    let s = server();
    let mut w = s.raw();
    for _ in 0..3 {
        let mut a = s.raw();
        hello3(&mut a);
        rt(
            &mut a,
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p"],
            "+OK\r\n",
        );
        let mut d = s.raw();
        rt(&mut d, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
        rt(&mut d, &["GET", "gone"], "$-1\r\n");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = String::from_utf8(bulk_of(&w.call(&[b"INFO"]))).unwrap();
        if info.contains("tracking_clients:0\r\n") && info.contains("tracking_total_prefixes:0\r\n")
        {
            break;
        }
        assert!(Instant::now() < deadline, "{info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its table entry goes at the key's next change, with nobody to tell.
    rt(&mut w, &["SET", "gone", "1"], "+OK\r\n");
    let info = String::from_utf8(bulk_of(&w.call(&[b"INFO", b"stats"]))).unwrap();
    assert!(info.contains("tracking_total_keys:0\r\n"), "{info}");
    assert!(info.contains("tracking_total_items:0\r\n"), "{info}");
}

/// Sends `args` on `raw` and appends its reply's bytes to `out`.
fn step(out: &mut String, raw: &mut Raw, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    out.push_str(&String::from_utf8_lossy(&raw.call(&a)));
}

/// Appends the next thing `raw` receives (a push) to `out`.
fn heard(out: &mut String, raw: &mut Raw) {
    out.push_str(&next(raw));
}

/// Redis' refusals, in its words.
const ERRORS: &[&[&str]] = &[
    &["CLIENT", "TRACKING"],
    &["CLIENT", "TRACKING", "MAYBE"],
    &["CLIENT", "TRACKING", "ON", "PREFIX", "a"],
    &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
    &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"],
    &["CLIENT", "TRACKING", "ON", "REDIRECT", "99999"],
    &["CLIENT", "TRACKING", "ON", "REDIRECT", "x"],
    &[
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO",
    ],
    &["CLIENT", "TRACKING", "ON", "NOSUCH"],
    &["CLIENT", "TRACKING", "ON", "PREFIX"],
    &["CLIENT", "CACHING", "YES"],
    &["CLIENT", "CACHING"],
    &["CLIENT", "GETREDIR"],
    &["CLIENT", "GETREDIR", "x"],
    &["CLIENT", "TRACKINGINFO"],
    &["CLIENT", "TRACKING", "ON", "OPTIN"],
    &["CLIENT", "CACHING", "NO"],
    &["CLIENT", "CACHING", "MAYBE"],
    &["CLIENT", "TRACKING", "ON", "OPTOUT"],
    &["CLIENT", "TRACKING", "ON", "BCAST"],
    &["CLIENT", "TRACKINGINFO"],
    &["CLIENT", "TRACKING", "OFF"],
    &[
        "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR",
    ],
    &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FO"],
    &["CLIENT", "TRACKING", "ON"],
    &["CLIENT", "TRACKINGINFO"],
    &["CLIENT", "TRACKING", "OFF"],
    &["CLIENT", "TRACKINGINFO"],
];

#[test]
fn errors_and_replies_are_redis_words() {
    let s = server();
    let mut a = s.raw();
    let want_err = |raw: &mut Raw, args: &[&str], msg: &str| rt(raw, args, &e(msg));
    want_err(
        &mut a,
        &["CLIENT", "TRACKING"],
        "ERR wrong number of arguments for 'client|tracking' command",
    );
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "PREFIX", "a"],
        "ERR PREFIX option requires BCAST mode to be enabled",
    );
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
        "ERR OPTIN and OPTOUT are not compatible with BCAST",
    );
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"],
        "ERR You can't specify both OPTIN mode and OPTOUT mode",
    );
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "99999"],
        "ERR The client ID you want redirect to does not exist",
    );
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "NOSUCH"],
        "ERR syntax error",
    );
    want_err(&mut a, &["CLIENT", "CACHING", "YES"], "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "FOOBAR"],
        "ERR Prefix 'FOO' overlaps with another provided prefix 'FOOBAR'. Prefixes for a single client must not overlap.",
    );
    rt(&mut a, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "BCAST"],
        "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
    );
    rt(&mut a, &["CLIENT", "TRACKING", "ON", "OPTIN"], "+OK\r\n");
    want_err(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "OPTOUT"],
        "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
    );
    rt(&mut a, &["CLIENT", "GETREDIR"], &i(0));
    rt(&mut a, &["CLIENT", "TRACKING", "OFF"], "+OK\r\n");
    rt(&mut a, &["CLIENT", "GETREDIR"], &i(-1));
}

#[test]
fn same_bytes_as_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let mut diffs = differing_replies(&mut s.raw(), &mut Raw::connect(real.port), ERRORS);
    // Pushes: the same sequence on both, every byte the tracker and the target receive.
    let session = |port: u16| -> String {
        let mut out = String::new();
        let (mut r, mut a, mut w) = (Raw::connect(port), Raw::connect(port), Raw::connect(port));
        let rid = client_id(&mut r);
        let _ = r.call(&[b"SUBSCRIBE", b"__redis__:invalidate"]);
        let o = &mut out;
        step(
            o,
            &mut a,
            &["CLIENT", "TRACKING", "ON", "REDIRECT", &rid, "NOLOOP"],
        );
        step(o, &mut a, &["MGET", "a{x}", "b{x}"]);
        step(o, &mut w, &["MSET", "a{x}", "1", "b{x}", "2"]);
        step(o, &mut a, &["SET", "own", "1"]);
        heard(o, &mut r);
        heard(o, &mut r);
        step(o, &mut w, &["FLUSHALL"]);
        heard(o, &mut r);
        let _ = a.call(&[b"HELLO", b"3"]);
        step(o, &mut a, &["CLIENT", "TRACKING", "OFF"]);
        step(
            o,
            &mut a,
            &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p:"],
        );
        step(o, &mut a, &["CLIENT", "TRACKINGINFO"]);
        step(
            o,
            &mut w,
            &["MSET", "p:2{x}", "1", "p:1{x}", "2", "q{x}", "3"],
        );
        heard(o, &mut a);
        step(o, &mut a, &["CLIENT", "TRACKING", "OFF"]);
        step(o, &mut a, &["CLIENT", "TRACKING", "ON", "OPTIN"]);
        step(o, &mut a, &["CLIENT", "CACHING", "YES"]);
        step(o, &mut a, &["GET", "p:1{x}"]);
        step(o, &mut w, &["DEL", "p:1{x}"]);
        heard(o, &mut a);
        step(o, &mut w, &["FLUSHDB"]);
        heard(o, &mut a);
        out
    };
    let (mine, theirs) = (session(s.port), session(real.port));
    if mine != theirs {
        diffs.push(format!("pushes\n  strata: {mine:?}\n  redis:  {theirs:?}"));
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn a_served_blocking_move_invalidates_after_its_reply() {
    let s = server();
    let (mut a, mut w) = (s.raw(), s.raw());
    rt(&mut w, &["RPUSH", "dst{l}", "a"], &i(1));
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
    rt(&mut a, &["LRANGE", "dst{l}", "0", "-1"], &arr(&[&b("a")]));
    a.send(&cmd(&[
        b"BLMOVE", b"src{l}", b"dst{l}", b"LEFT", b"LEFT", b"0",
    ]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&w.call(&[b"INFO", b"clients"])).contains("blocked_clients:1") {
        assert!(Instant::now() < deadline, "never blocked");
        std::thread::sleep(Duration::from_millis(5));
    }
    rt(&mut w, &["RPUSH", "src{l}", "foo"], &i(1));
    assert_eq!(next(&mut a), b("foo"));
    assert_eq!(next(&mut a), inval3(&["dst{l}"]));
}

#[test]
fn a_bcast_push_comes_before_the_reply_to_the_next_command() {
    let s = server();
    let (mut a, mut w) = (s.raw(), s.raw());
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON", "BCAST"], "+OK\r\n");
    for n in 0..20 {
        let k = format!("k{n}");
        rt(&mut w, &["INCR", &k], &i(1));
        // The writer has its reply: the push is already on its way, ahead of PING's.
        a.send(&cmd(&[b"PING"]));
        assert_eq!(next(&mut a), inval3(&[&k]));
        assert_eq!(next(&mut a), "+PONG\r\n");
    }
}

#[test]
fn reset_turns_tracking_off() {
    let s = server();
    let mut a = s.raw();
    rt(
        &mut a,
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "x"],
        "+OK\r\n",
    );
    rt(&mut a, &["RESET"], "+RESET\r\n");
    rt(
        &mut a,
        &["CLIENT", "TRACKINGINFO"],
        "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n",
    );
    let info = String::from_utf8(bulk_of(&a.call(&[b"INFO"]))).unwrap();
    assert!(info.contains("tracking_clients:0\r\n"), "{info}");
    assert!(info.contains("tracking_total_prefixes:0\r\n"), "{info}");
}

#[test]
fn memcached_port_writes_invalidate() {
    let port = free_port();
    let p = port.to_string();
    let s = Server::start(STRATA, &["--memcached_port", &p, "--proactor_threads", "2"]);
    let mut a = s.raw();
    hello3(&mut a);
    rt(&mut a, &["CLIENT", "TRACKING", "ON"], "+OK\r\n");
    rt(&mut a, &["GET", "mckey"], "_\r\n");
    let mut mc = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    use std::io::{Read, Write};
    mc.write_all(b"set mckey 0 0 1\r\nx\r\n").unwrap();
    let mut buf = [0u8; 8];
    mc.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"STORED\r\n");
    assert_eq!(next(&mut a), inval3(&["mckey"]));
}

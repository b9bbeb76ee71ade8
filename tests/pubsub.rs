//! Pub/sub against the real binary on two cores: exact RESP2 and RESP3 bytes, subscribe-mode
//! rules, patterns, sharded channels, PUBSUB introspection, CLIENT LIST fields, RESET, 50
//! subscribers across cores with per-publisher order, and a subscriber that never reads being
//! dropped at `--pubsub_client_output_limit` while the server's RSS stays bounded.
mod common;

use std::time::{Duration, Instant};

use common::*;

fn push3(kind: &str, a: &str, b: &str) -> String {
    format!(">3\r\n{}{}{}", self::b(kind), self::b(a), self::b(b))
}

fn msg(channel: &str, payload: &str) -> String {
    arr(&[&b("message"), &b(channel), &b(payload)])
}

fn confirm(kind: &str, name: &str, n: i64) -> String {
    arr(&[&b(kind), &b(name), &i(n)])
}

/// Sends `args` and asserts the replies that follow (one or several) are exactly `want`.
fn rt_many(raw: &mut Raw, args: &[&str], want: &str) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    raw.roundtrip(&cmd(&a), want.as_bytes());
}

/// Waits until PUBSUB NUMSUB of `channel` says `n` (subscriptions from other connections land
/// as soon as their confirmation is read, but a closed one leaves when its core notices).
fn wait_numsub(raw: &mut Raw, channel: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = arr(&[&b(channel), &i(n)]);
    loop {
        raw.send(&cmd(&[b"PUBSUB", b"NUMSUB", channel.as_bytes()]));
        if String::from_utf8_lossy(&raw.reply()) == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "NUMSUB {channel} never reached {n}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn resp2_subscribe_mode_bytes_and_rules() {
    let s = server();
    let mut sub = s.raw();
    let mut publ = s.raw();
    sub.roundtrip(
        &cmd(&[b"SUBSCRIBE", b"a", b"b", b"a"]),
        format!(
            "{}{}{}",
            confirm("subscribe", "a", 1),
            confirm("subscribe", "b", 2),
            confirm("subscribe", "a", 2)
        )
        .as_bytes(),
    );
    rt(&mut publ, &["PUBLISH", "a", "hello"], &i(1));
    rt(&mut publ, &["PUBLISH", "nobody", "x"], &i(0));
    assert_eq!(String::from_utf8_lossy(&sub.reply()), msg("a", "hello"));
    // Only the subscribe family, PING, QUIT and RESET in RESP2 subscribe mode.
    rt(
        &mut sub,
        &["GET", "a"],
        &e("ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"),
    );
    rt(&mut sub, &["PING"], &arr(&[&b("pong"), &b("")]));
    rt(&mut sub, &["PING", "hi"], &arr(&[&b("pong"), &b("hi")]));
    rt(
        &mut sub,
        &["PSUBSCRIBE", "h*"],
        &confirm("psubscribe", "h*", 3),
    );
    rt(&mut publ, &["PUBLISH", "hat", "x"], &i(1));
    assert_eq!(
        String::from_utf8_lossy(&sub.reply()),
        arr(&[&b("pmessage"), &b("h*"), &b("hat"), &b("x")])
    );
    // A channel matched by name and by pattern gets both.
    rt(
        &mut sub,
        &["SUBSCRIBE", "hat"],
        &confirm("subscribe", "hat", 4),
    );
    rt(&mut publ, &["PUBLISH", "hat", "y"], &i(2));
    let mut got = vec![
        String::from_utf8_lossy(&sub.reply()).into_owned(),
        String::from_utf8_lossy(&sub.reply()).into_owned(),
    ];
    got.sort();
    let mut want = vec![
        msg("hat", "y"),
        arr(&[&b("pmessage"), &b("h*"), &b("hat"), &b("y")]),
    ];
    want.sort();
    assert_eq!(got, want);
    rt(
        &mut sub,
        &["UNSUBSCRIBE", "nosuch"],
        &confirm("unsubscribe", "nosuch", 4),
    );
    rt(
        &mut sub,
        &["PUNSUBSCRIBE"],
        &confirm("punsubscribe", "h*", 3),
    );
    rt(
        &mut sub,
        &["PUNSUBSCRIBE"],
        &arr(&[&b("punsubscribe"), "$-1\r\n", &i(3)]),
    );
    sub.send(&cmd(&[b"UNSUBSCRIBE"]));
    let mut left: Vec<String> = (0..3)
        .map(|_| String::from_utf8_lossy(&sub.reply()).into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 3);
    assert!(left
        .iter()
        .all(|r| r.starts_with("*3\r\n$11\r\nunsubscribe\r\n")));
    assert!(left.iter().any(|r| r.ends_with(":0\r\n")));
    // Out of subscribe mode: everything works again.
    rt(&mut sub, &["PING"], "+PONG\r\n");
    rt(&mut sub, &["GET", "a"], "$-1\r\n");
    rt(
        &mut sub,
        &["UNSUBSCRIBE"],
        &arr(&[&b("unsubscribe"), "$-1\r\n", &i(0)]),
    );
    rt(&mut sub, &["SUBSCRIBE"], &wrong_args("subscribe"));
    rt(&mut publ, &["PUBLISH", "a"], &wrong_args("publish"));
}

#[test]
fn resp3_pushes_beside_replies() {
    let s = server();
    let mut sub = s.raw();
    let mut publ = s.raw();
    sub.send(&cmd(&[b"HELLO", b"3"]));
    sub.reply();
    rt(
        &mut sub,
        &["SUBSCRIBE", "ch"],
        ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    // RESP3 has no subscribe mode: any command runs, and its reply is a normal one.
    rt(&mut sub, &["SET", "k", "v"], "+OK\r\n");
    rt(&mut sub, &["GET", "k"], "$1\r\nv\r\n");
    rt(&mut sub, &["PING"], "+PONG\r\n");
    rt(&mut publ, &["PUBLISH", "ch", "m1"], &i(1));
    assert_eq!(
        String::from_utf8_lossy(&sub.reply()),
        push3("message", "ch", "m1")
    );
    rt(
        &mut sub,
        &["SSUBSCRIBE", "sc"],
        ">3\r\n$10\r\nssubscribe\r\n$2\r\nsc\r\n:1\r\n",
    );
    rt(&mut publ, &["SPUBLISH", "sc", "m2"], &i(1));
    assert_eq!(
        String::from_utf8_lossy(&sub.reply()),
        push3("smessage", "sc", "m2")
    );
    rt(
        &mut sub,
        &["UNSUBSCRIBE", "ch"],
        ">3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n",
    );
    rt(
        &mut sub,
        &["SUNSUBSCRIBE"],
        ">3\r\n$12\r\nsunsubscribe\r\n$2\r\nsc\r\n:0\r\n",
    );
    rt(
        &mut sub,
        &["PUNSUBSCRIBE"],
        ">3\r\n$12\r\npunsubscribe\r\n_\r\n:0\r\n",
    );
}

#[test]
fn sharded_channels_and_introspection() {
    let s = server();
    let mut a = s.raw();
    let mut c = s.raw();
    let mut publ = s.raw();
    rt_many(
        &mut a,
        &["SSUBSCRIBE", "s1", "s2"],
        &format!(
            "{}{}",
            confirm("ssubscribe", "s1", 1),
            confirm("ssubscribe", "s2", 2)
        ),
    );
    rt(&mut c, &["SUBSCRIBE", "s1"], &confirm("subscribe", "s1", 1));
    rt_many(
        &mut c,
        &["PSUBSCRIBE", "s*", "x*"],
        &format!(
            "{}{}",
            confirm("psubscribe", "s*", 2),
            confirm("psubscribe", "x*", 3)
        ),
    );
    // Sharded and plain channels are apart; patterns never see SPUBLISH.
    rt(&mut publ, &["SPUBLISH", "s1", "hi"], &i(1));
    assert_eq!(
        String::from_utf8_lossy(&a.reply()),
        arr(&[&b("smessage"), &b("s1"), &b("hi")])
    );
    rt(&mut publ, &["PUBLISH", "s1", "yo"], &i(2));
    assert_eq!(String::from_utf8_lossy(&c.reply()), msg("s1", "yo"));
    assert_eq!(
        String::from_utf8_lossy(&c.reply()),
        arr(&[&b("pmessage"), &b("s*"), &b("s1"), &b("yo")])
    );
    rt(
        &mut publ,
        &["PUBSUB", "NUMSUB", "s1", "s2", "none"],
        &arr(&[&b("s1"), &i(1), &b("s2"), &i(0), &b("none"), &i(0)]),
    );
    rt(
        &mut publ,
        &["PUBSUB", "SHARDNUMSUB", "s1", "s2"],
        &arr(&[&b("s1"), &i(1), &b("s2"), &i(1)]),
    );
    rt(&mut publ, &["PUBSUB", "NUMSUB"], "*0\r\n");
    rt(&mut publ, &["PUBSUB", "NUMPAT"], &i(2));
    rt(&mut publ, &["PUBSUB", "CHANNELS"], &arr(&[&b("s1")]));
    rt(&mut publ, &["PUBSUB", "CHANNELS", "x*"], "*0\r\n");
    let chans = publ.call(&[b"PUBSUB", b"SHARDCHANNELS"]);
    let chans = String::from_utf8_lossy(&chans);
    assert!(
        chans.starts_with("*2\r\n")
            && chans.contains("$2\r\ns1\r\n")
            && chans.contains("$2\r\ns2\r\n"),
        "{chans}"
    );
    rt(
        &mut publ,
        &["PUBSUB", "SHARDCHANNELS", "*2"],
        &arr(&[&b("s2")]),
    );
    rt(
        &mut publ,
        &["PUBSUB", "NUMPAT", "x"],
        &e("ERR wrong number of arguments for 'pubsub|numpat' command"),
    );
    rt(
        &mut publ,
        &["PUBSUB", "CHANNELS", "a", "b"],
        &e("ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP."),
    );
    rt(
        &mut publ,
        &["PUBSUB", "FOO"],
        &e("ERR unknown subcommand 'FOO'. Try PUBSUB HELP."),
    );
    // CLIENT LIST knows each client's subscriptions.
    let list = publ.call_text(&[b"CLIENT", b"LIST"]);
    assert!(list.contains("flags=P db=0 sub=0 psub=0 ssub=2 "), "{list}");
    assert!(list.contains("flags=P db=0 sub=1 psub=2 ssub=0 "), "{list}");
    assert!(list.contains("flags=N db=0 sub=0 psub=0 ssub=0 "), "{list}");
    // A client that leaves leaves its subscriptions.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    while publ.call(&[b"PUBSUB", b"SHARDCHANNELS"]) != b"*0\r\n" {
        assert!(
            Instant::now() < deadline,
            "shard channels outlived their subscriber"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // RESET leaves subscribe mode.
    rt(&mut c, &["RESET"], "+RESET\r\n");
    rt(&mut c, &["GET", "x"], "$-1\r\n");
    rt(&mut publ, &["PUBSUB", "NUMPAT"], &i(0));
    rt(&mut publ, &["PUBLISH", "s1", "yo"], &i(0));
}

/// 50 subscribers spread over both cores, two publishers on both cores: every PUBLISH counts
/// all 50, and each subscriber sees each publisher's messages in publish order.
#[test]
fn fifty_subscribers_across_cores_keep_publish_order() {
    let s = server();
    let mut subs: Vec<Raw> = (0..50).map(|_| s.raw()).collect();
    for (n, sub) in subs.iter_mut().enumerate() {
        // Half on a pattern: they count as receivers too.
        if n % 2 == 0 {
            rt(
                sub,
                &["SUBSCRIBE", "news"],
                &confirm("subscribe", "news", 1),
            );
        } else {
            rt(
                sub,
                &["PSUBSCRIBE", "n*s"],
                &confirm("psubscribe", "n*s", 1),
            );
        }
    }
    let per_publisher = 300;
    let publishers: Vec<_> = (0..2)
        .map(|p| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut raw = Raw::connect(port);
                let mut pipe = Vec::new();
                for m in 0..per_publisher {
                    pipe.extend(cmd(&[b"PUBLISH", b"news", format!("{p}:{m}").as_bytes()]));
                }
                raw.send(&pipe);
                for _ in 0..per_publisher {
                    assert_eq!(raw.reply(), b":50\r\n");
                }
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    for (n, sub) in subs.iter_mut().enumerate() {
        let mut next = [0usize; 2];
        for _ in 0..2 * per_publisher {
            let r = sub.reply();
            let text = String::from_utf8_lossy(&r);
            let payload = text.trim_end().rsplit("\r\n").next().unwrap().to_string();
            let (p, m) = payload.split_once(':').unwrap();
            let (p, m): (usize, usize) = (p.parse().unwrap(), m.parse().unwrap());
            assert_eq!(
                m, next[p],
                "subscriber {n}: publisher {p}'s messages out of order"
            );
            next[p] += 1;
        }
    }
}

/// A subscriber that never reads is dropped once its waiting output passes the limit, and the
/// server's memory does not grow with what is published to it.
#[test]
fn slow_subscriber_dropped_at_output_limit() {
    let s = Server::start(
        STRATA,
        &[
            "--proactor_threads",
            "2",
            "--pubsub_client_output_limit",
            "1mb",
        ],
    );
    let pid = s.pid();
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", s.port).parse().unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut slow = Raw::from_stream(sock.into());
    rt(
        &mut slow,
        &["SUBSCRIBE", "firehose"],
        &confirm("subscribe", "firehose", 1),
    );
    let mut publ = s.raw();
    let rss_before = owned_rss(pid).unwrap();
    let sampler = rss_sampler(pid);
    let payload = vec![b'x'; 64 * 1024];
    // 64 MiB published in all, far past the 1 MiB limit.
    let mut receivers = Vec::new();
    for _ in 0..1024 {
        publ.send(&cmd(&[b"PUBLISH", b"firehose", &payload]));
        receivers.push(int_of(&publ.reply()));
    }
    let (stop, handle) = sampler;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = handle.join().unwrap();
    assert_eq!(receivers[0], 1);
    assert_eq!(
        *receivers.last().unwrap(),
        0,
        "the slow subscriber was never dropped"
    );
    // Dropped near the limit: 1 MiB waiting, the chunk being written, and what the kernel's
    // socket buffers took (Linux grows a loopback send buffer up to 4 MiB).
    let delivered = receivers.iter().filter(|&&n| n == 1).count();
    assert!(
        delivered < 112,
        "{delivered} messages of 64 KiB went to a client that never reads"
    );
    assert!(
        peak < rss_before + (24 << 20),
        "RSS grew from {rss_before} to {peak} for a subscriber that never reads"
    );
    let (_, err) = slow.read_until_close(Duration::from_secs(10));
    assert!(
        err.is_none(),
        "the slow subscriber's connection stayed open: {err:?}"
    );
    wait_numsub(&mut publ, "firehose", 0);
}

/// CLIENT REPLY OFF and SKIP silence replies but never pushes; RESET brings back a fresh
/// connection's state; INFO counts channels and patterns.
#[test]
fn client_reply_modes_reset_and_info() {
    let s = server();
    let mut c = s.raw();
    let mut publ = s.raw();
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]));
    c.send(&cmd(&[b"SET", b"k", b"v"]));
    // Confirmations and messages are pushes: they still come.
    rt(&mut c, &["SUBSCRIBE", "ch"], &confirm("subscribe", "ch", 1));
    rt(&mut publ, &["PUBLISH", "ch", "hi"], &i(1));
    assert_eq!(String::from_utf8_lossy(&c.reply()), msg("ch", "hi"));
    rt(&mut c, &["UNSUBSCRIBE"], &confirm("unsubscribe", "ch", 0));
    rt(&mut c, &["CLIENT", "REPLY", "ON"], "+OK\r\n");
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"SKIP"]));
    c.send(&cmd(&[b"GET", b"k"]));
    rt(&mut c, &["GET", "k"], "$1\r\nv\r\n");
    rt(
        &mut c,
        &["CLIENT", "REPLY", "MAYBE"],
        &e("ERR syntax error"),
    );
    // RESET: RESP2 again, no name, db 0, no subscriptions.
    c.send(&cmd(&[b"HELLO", b"3"]));
    c.reply();
    rt(&mut c, &["CLIENT", "SETNAME", "me"], "+OK\r\n");
    rt(&mut c, &["SELECT", "3"], "+OK\r\n");
    rt(
        &mut c,
        &["PSUBSCRIBE", "p*"],
        ">3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:1\r\n",
    );
    let info = publ.call_text(&[b"INFO", b"stats"]);
    assert!(
        info.contains("pubsub_channels:0\r\npubsub_patterns:1\r\npubsubshard_channels:0\r\n"),
        "{info}"
    );
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]));
    rt(&mut c, &["RESET"], "+RESET\r\n");
    rt(&mut c, &["CLIENT", "GETNAME"], "$-1\r\n");
    rt(&mut c, &["GET", "k"], "$1\r\nv\r\n");
    rt(&mut c, &["HGETALL", "nohash"], "*0\r\n");
    rt(&mut publ, &["PUBSUB", "NUMPAT"], &i(0));
}

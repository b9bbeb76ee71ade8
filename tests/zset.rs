//! Sorted sets over TCP: byte-exact replies (score formatting, RESP3 doubles and pairs),
//! errors, WRONGTYPE, missing keys, inf and exclusive bounds, lex ranges, both encodings,
//! keys on two shards, the key commands (TYPE, OBJECT ENCODING, COPY, RENAME, MOVE, EXPIRE,
//! SCAN TYPE, MEMORY USAGE), DUMP/RESTORE against redis-server, and SAVE + restart.

mod common;

use common::*;

/// A DUMP payload with its footer rewritten for RDB version 10, what redis-server 7.0 reads.
fn as_rdb_10(payload: &[u8]) -> Vec<u8> {
    let mut v = payload[..payload.len() - 10].to_vec();
    v.extend_from_slice(&10u16.to_le_bytes());
    let crc = ondisk::rdb::Crc64::checksum(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

fn z(raw: &mut Raw, args: &[&str], want: &str) {
    rt(raw, args, want);
}

#[test]
fn zadd_and_reads_reply_like_redis() {
    let s = server();
    let mut c = s.raw();
    z(
        &mut c,
        &["ZADD", "z", "1", "a", "1.5", "b", "inf", "c"],
        ":3\r\n",
    );
    z(&mut c, &["ZSCORE", "z", "b"], "$3\r\n1.5\r\n");
    z(&mut c, &["ZSCORE", "z", "c"], "$3\r\ninf\r\n");
    z(&mut c, &["ZADD", "z", "1.1", "d"], ":1\r\n");
    z(
        &mut c,
        &["ZSCORE", "z", "d"],
        "$18\r\n1.1000000000000001\r\n",
    );
    z(&mut c, &["ZSCORE", "z", "nope"], "$-1\r\n");
    z(&mut c, &["ZSCORE", "missing", "a"], "$-1\r\n");
    z(&mut c, &["ZCARD", "z"], ":4\r\n");
    z(&mut c, &["ZCARD", "missing"], ":0\r\n");
    z(&mut c, &["ZRANK", "z", "b"], ":2\r\n");
    z(&mut c, &["ZREVRANK", "z", "b"], ":1\r\n");
    z(&mut c, &["ZRANK", "z", "x"], "$-1\r\n");
    z(
        &mut c,
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nd\r\n$18\r\n1.1000000000000001\r\n$1\r\nb\r\n$3\r\n1.5\r\n$1\r\nc\r\n$3\r\ninf\r\n",
    );
    z(
        &mut c,
        &["ZRANGEBYSCORE", "z", "(1", "+inf"],
        "*3\r\n$1\r\nd\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    z(
        &mut c,
        &["ZREVRANGEBYSCORE", "z", "(inf", "-inf", "LIMIT", "1", "1"],
        "*1\r\n$1\r\nd\r\n",
    );
    z(&mut c, &["ZCOUNT", "z", "-inf", "(1.5"], ":2\r\n");
    z(
        &mut c,
        &["ZMSCORE", "z", "a", "x"],
        "*2\r\n$1\r\n1\r\n$-1\r\n",
    );
    z(&mut c, &["ZINCRBY", "z", "2", "a"], "$1\r\n3\r\n");
    z(
        &mut c,
        &["ZADD", "z", "INCR", "-inf", "c"],
        "-ERR resulting score is not a number (NaN)\r\n",
    );
    z(
        &mut c,
        &["ZADD", "z", "NX", "XX", "1", "a"],
        "-ERR XX and NX options at the same time are not compatible\r\n",
    );
    z(
        &mut c,
        &["ZADD", "z", "GT", "LT", "1", "a"],
        "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
    );
    z(
        &mut c,
        &["ZADD", "z", "INCR", "1", "a", "2", "b"],
        "-ERR INCR option supports a single increment-element pair\r\n",
    );
    z(
        &mut c,
        &["ZADD", "z", "abc", "a"],
        "-ERR value is not a valid float\r\n",
    );
    z(
        &mut c,
        &["ZADD", "z", "nan", "a"],
        "-ERR value is not a valid float\r\n",
    );
    z(
        &mut c,
        &["ZADD", "z", "1", "a", "b"],
        "-ERR syntax error\r\n",
    );
    z(
        &mut c,
        &["ZADD", "z", "CH", "GT", "5", "a", "0", "b", "1", "new"],
        ":2\r\n",
    );
    z(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"], "$-1\r\n");
    z(
        &mut c,
        &["ZRANGEBYSCORE", "z", "x", "1"],
        "-ERR min or max is not a float\r\n",
    );
    z(
        &mut c,
        &["ZRANGEBYLEX", "z", "a", "+"],
        "-ERR min or max not valid string range item\r\n",
    );
    z(&mut c, &["ZRANGE", "z", "0", "1", "LIMIT", "0", "1"], "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n");
    z(
        &mut c,
        &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"],
        "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n",
    );
    z(
        &mut c,
        &["ZPOPMIN", "z", "-1"],
        "-ERR value is out of range, must be positive\r\n",
    );
    z(&mut c, &["ZRANGE", "missing", "0", "-1"], "*0\r\n");
    // WRONGTYPE for a string, and a string command on a sorted set.
    z(&mut c, &["SET", "s", "v"], "+OK\r\n");
    let wrong = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    z(&mut c, &["ZADD", "s", "1", "a"], wrong);
    z(&mut c, &["ZRANGE", "s", "0", "1"], wrong);
    z(&mut c, &["ZUNION", "1", "s"], wrong);
    z(&mut c, &["GET", "z"], wrong);
}

#[test]
fn resp3_doubles_and_pairs() {
    let s = server();
    let mut c = s.raw();
    c.call(&[b"HELLO", b"3"]);
    z(&mut c, &["ZADD", "z", "1", "a", "2.5", "b"], ":2\r\n");
    z(&mut c, &["ZSCORE", "z", "b"], ",2.5\r\n");
    z(
        &mut c,
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n",
    );
    z(&mut c, &["ZPOPMIN", "z"], "*2\r\n$1\r\na\r\n,1\r\n");
    z(
        &mut c,
        &["ZPOPMAX", "z", "1"],
        "*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n",
    );
    z(&mut c, &["EXISTS", "z"], ":0\r\n");
    z(&mut c, &["ZSCORE", "z", "b"], "_\r\n");
}

#[test]
fn lex_ranges_and_removals() {
    let s = server();
    let mut c = s.raw();
    z(
        &mut c,
        &["ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d"],
        ":4\r\n",
    );
    z(
        &mut c,
        &["ZRANGEBYLEX", "l", "(a", "[c"],
        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n",
    );
    z(
        &mut c,
        &["ZREVRANGEBYLEX", "l", "+", "(b"],
        "*2\r\n$1\r\nd\r\n$1\r\nc\r\n",
    );
    z(&mut c, &["ZLEXCOUNT", "l", "-", "+"], ":4\r\n");
    z(&mut c, &["ZREMRANGEBYLEX", "l", "[a", "(c"], ":2\r\n");
    z(&mut c, &["ZREMRANGEBYRANK", "l", "0", "0"], ":1\r\n");
    z(&mut c, &["ZREMRANGEBYSCORE", "l", "-inf", "+inf"], ":1\r\n");
    z(&mut c, &["EXISTS", "l"], ":0\r\n");
}

#[test]
fn encodings_cross_the_limits_and_config_changes_them() {
    let s = server();
    let mut c = s.raw();
    for i in 0..128 {
        c.call(&[
            b"ZADD",
            b"big",
            i.to_string().as_bytes(),
            format!("m{i}").as_bytes(),
        ]);
    }
    z(&mut c, &["OBJECT", "ENCODING", "big"], "$8\r\nlistpack\r\n");
    z(&mut c, &["ZADD", "big", "500", "one-more"], ":1\r\n");
    z(&mut c, &["OBJECT", "ENCODING", "big"], "$8\r\nskiplist\r\n");
    z(&mut c, &["ZCARD", "big"], ":129\r\n");
    z(&mut c, &["ZRANK", "big", "m100"], ":100\r\n");
    z(&mut c, &["ZREVRANK", "big", "one-more"], ":0\r\n");
    z(
        &mut c,
        &["ZRANGE", "big", "99", "101", "BYSCORE", "LIMIT", "1", "5"],
        "*2\r\n$4\r\nm100\r\n$4\r\nm101\r\n",
    );
    let long = "x".repeat(65);
    z(&mut c, &["ZADD", "long", "1", &long], ":1\r\n");
    z(
        &mut c,
        &["OBJECT", "ENCODING", "long"],
        "$8\r\nskiplist\r\n",
    );
    z(
        &mut c,
        &["CONFIG", "SET", "zset-max-ziplist-entries", "2"],
        "+OK\r\n",
    );
    z(
        &mut c,
        &["CONFIG", "GET", "zset-max-listpack-entries"],
        "*2\r\n$25\r\nzset-max-listpack-entries\r\n$1\r\n2\r\n",
    );
    z(
        &mut c,
        &["ZADD", "small", "1", "a", "2", "b", "3", "c"],
        ":3\r\n",
    );
    z(
        &mut c,
        &["OBJECT", "ENCODING", "small"],
        "$8\r\nskiplist\r\n",
    );
    // A store result packs when it fits.
    z(&mut c, &["ZRANGESTORE", "dst", "small", "0", "1"], ":2\r\n");
    z(&mut c, &["OBJECT", "ENCODING", "dst"], "$8\r\nlistpack\r\n");
    z(&mut c, &["TYPE", "big"], "+zset\r\n");
}

#[test]
fn multi_key_commands_across_two_shards() {
    let s = server();
    let mut c = s.raw();
    let (a, b) = keys_on_different_shards("za", 2);
    let (d, _) = keys_on_different_shards("zd", 2);
    z(&mut c, &["ZADD", &a, "1", "x", "2", "y"], ":2\r\n");
    z(&mut c, &["ZADD", &b, "10", "y", "20", "w"], ":2\r\n");
    z(
        &mut c,
        &["ZUNION", "2", &a, &b, "WITHSCORES"],
        "*6\r\n$1\r\nx\r\n$1\r\n1\r\n$1\r\ny\r\n$2\r\n12\r\n$1\r\nw\r\n$2\r\n20\r\n",
    );
    z(
        &mut c,
        &[
            "ZINTERSTORE",
            &d,
            "2",
            &a,
            &b,
            "WEIGHTS",
            "2",
            "1",
            "AGGREGATE",
            "MAX",
        ],
        ":1\r\n",
    );
    z(
        &mut c,
        &["ZRANGE", &d, "0", "-1", "WITHSCORES"],
        "*2\r\n$1\r\ny\r\n$2\r\n10\r\n",
    );
    z(&mut c, &["ZDIFFSTORE", &d, "2", &a, &b], ":1\r\n");
    z(&mut c, &["ZINTERCARD", "2", &a, &b, "LIMIT", "5"], ":1\r\n");
    z(&mut c, &["ZRANGESTORE", &b, &a, "0", "0"], ":1\r\n");
    z(&mut c, &["ZRANGE", &b, "0", "-1"], "*1\r\n$1\r\nx\r\n");
    let want = format!(
        "*2\r\n${}\r\n{b}\r\n*1\r\n*2\r\n$1\r\nx\r\n$1\r\n1\r\n",
        b.len()
    );
    z(
        &mut c,
        &["ZMPOP", "3", "nothing", &b, &a, "MAX", "COUNT", "5"],
        &want,
    );
    z(
        &mut c,
        &["ZMPOP", "2", "nothing", "nothing2", "MIN"],
        "*-1\r\n",
    );
    z(
        &mut c,
        &["ZUNIONSTORE", &d, "0", &a],
        "-ERR at least 1 input key is needed for 'zunionstore' command\r\n",
    );
    z(&mut c, &["COPY", &a, &b, "REPLACE"], ":1\r\n");
    z(&mut c, &["RENAME", &a, &d], "+OK\r\n");
    z(
        &mut c,
        &["ZRANGE", &d, "0", "-1"],
        "*2\r\n$1\r\nx\r\n$1\r\ny\r\n",
    );
}

#[test]
fn key_commands_cover_sorted_sets() {
    let s = server();
    let mut c = s.raw();
    for i in 0..300 {
        c.call(&[
            b"ZADD",
            b"big",
            i.to_string().as_bytes(),
            format!("member:{i}").as_bytes(),
        ]);
    }
    z(&mut c, &["ZADD", "small", "1", "a"], ":1\r\n");
    z(&mut c, &["EXPIRE", "big", "100"], ":1\r\n");
    z(&mut c, &["TTL", "big"], ":100\r\n");
    z(&mut c, &["MOVE", "small", "1"], ":1\r\n");
    z(&mut c, &["EXISTS", "small"], ":0\r\n");
    z(
        &mut c,
        &["SCAN", "0", "TYPE", "zset"],
        "*2\r\n$1\r\n0\r\n*1\r\n$3\r\nbig\r\n",
    );
    let usage = c.call(&[b"MEMORY", b"USAGE", b"big"]);
    let n: i64 = String::from_utf8_lossy(&usage[1..usage.len() - 2])
        .parse()
        .unwrap_or(0);
    assert!(n > 300 * 20 && n < 300 * 120, "MEMORY USAGE {n}");
    z(&mut c, &["COPY", "big", "big2"], ":1\r\n");
    z(&mut c, &["ZREM", "big2", "member:0"], ":1\r\n");
    z(&mut c, &["ZCARD", "big"], ":300\r\n");
    z(&mut c, &["ZCARD", "big2"], ":299\r\n");
    // A full ZSCAN of the large set returns every member once.
    let mut cursor = "0".to_string();
    let mut seen = std::collections::HashSet::new();
    loop {
        let r = c
            .request(&[b"ZSCAN", b"big", cursor.as_bytes()])
            .expect("zscan");
        let Resp::Array(Some(parts)) = r else {
            panic!("ZSCAN: {r:?}")
        };
        let Resp::Bulk(Some(next)) = &parts[0] else {
            panic!("cursor")
        };
        if let Resp::Array(Some(items)) = &parts[1] {
            for p in items.chunks(2) {
                if let Resp::Bulk(Some(m)) = &p[0] {
                    seen.insert(m.clone());
                }
            }
        }
        cursor = String::from_utf8_lossy(next).into_owned();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 300);
    z(&mut c, &["DEL", "big", "big2"], ":2\r\n");
}

#[test]
fn dump_and_restore_against_redis_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(mut redis) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let mut c = s.raw();
    let long = "y".repeat(70);
    let sets = [
        ("small", 5, "m"),
        ("packed", 40, "member:"),
        ("big", 200, "member:"),
        ("long", 3, &long[..]),
    ];
    for (key, n, prefix) in sets {
        for i in 0..n {
            let score = format!("{}.5", i * 7 % 13);
            let m = format!("{prefix}{i}");
            redis.ok(&[b"ZADD", key.as_bytes(), score.as_bytes(), m.as_bytes()]);
            c.call(&[b"ZADD", key.as_bytes(), score.as_bytes(), m.as_bytes()]);
        }
        let ours = c.request(&[b"DUMP", key.as_bytes()]).expect("dump");
        let theirs = redis.cmd(&[b"DUMP", key.as_bytes()]);
        let (Resp::Bulk(Some(ours)), Resp::Bulk(Some(payload))) = (ours, theirs) else {
            panic!("DUMP {key}")
        };
        // The value's bytes are Redis' own; the footer names Strata's RDB version (11, Redis
        // 7.2's), where 7.0.15 writes 10.
        assert_eq!(
            ours[..ours.len() - 10],
            payload[..payload.len() - 10],
            "DUMP {key} byte for byte"
        );
        let copy = format!("{key}:copy");
        let restored = c.call(&[b"RESTORE", copy.as_bytes(), b"0", &payload]);
        assert_eq!(restored, b"+OK\r\n", "RESTORE {key} from redis-server");
        let (a, b) = (
            c.call(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"]),
            c.call(&[b"ZRANGE", copy.as_bytes(), b"0", b"-1", b"WITHSCORES"]),
        );
        assert_eq!(a, b, "RESTORE {key}");
        redis.ok(&[b"DEL", key.as_bytes()]);
        redis.ok(&[b"RESTORE", key.as_bytes(), b"0", &as_rdb_10(&ours)]);
        assert_eq!(
            redis.cmd(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"]),
            c.request(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"])
                .expect("zrange")
        );
    }
}

#[test]
fn sorted_sets_survive_save_and_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_string_lossy().into_owned();
    let args = [
        "--proactor_threads",
        "2",
        "--dir",
        &d,
        "--dbfilename",
        "zs.rdb",
    ];
    let want;
    {
        let s = Server::start(STRATA, &args);
        let mut c = s.raw();
        for i in 0..500 {
            c.call(&[
                b"ZADD",
                b"big",
                format!("{}.25", i % 37).as_bytes(),
                format!("m{i}").as_bytes(),
            ]);
        }
        c.call(&[b"ZADD", b"small", b"-inf", b"a", b"2", b"b"]);
        want = (
            c.call(&[b"ZRANGE", b"big", b"0", b"-1", b"WITHSCORES"]),
            c.call(&[b"ZRANGE", b"small", b"0", b"-1", b"WITHSCORES"]),
        );
        z(&mut c, &["SAVE"], "+OK\r\n");
    }
    let s = Server::start(STRATA, &args);
    let mut c = s.raw();
    assert_eq!(
        c.call(&[b"ZRANGE", b"big", b"0", b"-1", b"WITHSCORES"]),
        want.0
    );
    assert_eq!(
        c.call(&[b"ZRANGE", b"small", b"0", b"-1", b"WITHSCORES"]),
        want.1
    );
    z(&mut c, &["OBJECT", "ENCODING", "big"], "$8\r\nskiplist\r\n");
    z(
        &mut c,
        &["OBJECT", "ENCODING", "small"],
        "$8\r\nlistpack\r\n",
    );
}

#[test]
fn sorted_sets_count_against_maxmemory_and_lose_nothing() {
    let s = Server::start(STRATA, &["--proactor_threads", "2", "--maxmemory", "20mb"]);
    let mut c = s.raw();
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    let mut added = 0usize;
    let mut hit_oom = false;
    'fill: for k in 0..200 {
        let key = format!("z:{k}");
        for batch in 0..20 {
            let mut args: Vec<Vec<u8>> = vec![b"ZADD".to_vec(), key.clone().into_bytes()];
            for m in 0..500 {
                args.push(format!("{}", batch * 500 + m).into_bytes());
                args.push(format!("member-{batch}-{m}-{}", "x".repeat(20)).into_bytes());
            }
            let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            let r = c.call(&refs);
            if r == b":500\r\n" {
                added += 500;
            } else {
                assert_eq!(String::from_utf8_lossy(&r), oom, "ZADD past maxmemory");
                hit_oom = true;
                break 'fill;
            }
        }
    }
    assert!(hit_oom, "sorted sets never reached a 20 MB maxmemory");
    // Everything acknowledged is there.
    let mut total = 0usize;
    for k in 0..200 {
        let r = c.call(&[b"ZCARD", format!("z:{k}").as_bytes()]);
        let n: usize = String::from_utf8_lossy(&r[1..r.len() - 2])
            .parse()
            .unwrap_or(0);
        total += n;
    }
    assert_eq!(total, added);
    // Reads and removals still work.
    z(
        &mut c,
        &["ZSCORE", "z:0", "member-0-7-xxxxxxxxxxxxxxxxxxxx"],
        "$1\r\n7\r\n",
    );
    z(&mut c, &["DEL", "z:0"], ":1\r\n");
}

#[test]
fn command_table_declares_counted_keys() {
    let s = server();
    let mut c = s.raw();
    let info = c.call(&[b"COMMAND", b"INFO", b"zunionstore"]);
    let want: &[u8] = b"*1\r\n*10\r\n$11\r\nzunionstore\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n";
    assert!(info.starts_with(want), "{}", String::from_utf8_lossy(&info));
    z(
        &mut c,
        &[
            "COMMAND",
            "GETKEYS",
            "ZUNIONSTORE",
            "d",
            "2",
            "a",
            "b",
            "WEIGHTS",
            "1",
            "2",
        ],
        "*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    z(
        &mut c,
        &["COMMAND", "GETKEYS", "ZMPOP", "2", "a", "b", "MIN"],
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    z(
        &mut c,
        &["ZINTERCARD", "x", "a"],
        "-ERR value is not an integer or out of range\r\n",
    );
    z(
        &mut c,
        &["ZMPOP", "0", "a", "MIN"],
        "-ERR numkeys should be greater than 0\r\n",
    );
    z(&mut c, &["ZUNION", "3", "a", "b"], "-ERR syntax error\r\n");
}

/// Sets are sorted sets of score 1 to ZUNION*/ZINTER*/ZDIFF*, in every set encoding: an intset,
/// and a hashtable set past set-max-intset-entries.
#[test]
fn sets_of_every_encoding_are_inputs_with_score_one() {
    let s = server();
    let mut c = s.raw();
    z(&mut c, &["SADD", "{t}small", "1", "2", "3"], ":3\r\n");
    z(
        &mut c,
        &["OBJECT", "ENCODING", "{t}small"],
        "$6\r\nintset\r\n",
    );
    let mut big = vec!["SADD".to_string(), "{t}big".to_string()];
    big.extend((0..600).map(|i| format!("m{i}")));
    big.push("2".into());
    let refs: Vec<&str> = big.iter().map(String::as_str).collect();
    z(&mut c, &refs, ":601\r\n");
    z(
        &mut c,
        &["OBJECT", "ENCODING", "{t}big"],
        "$9\r\nhashtable\r\n",
    );
    z(&mut c, &["ZADD", "{t}z", "5", "2", "7", "m3"], ":2\r\n");
    z(
        &mut c,
        &["ZINTER", "3", "{t}small", "{t}big", "{t}z", "WITHSCORES"],
        "*2\r\n$1\r\n2\r\n$1\r\n7\r\n",
    );
    z(
        &mut c,
        &["ZINTER", "2", "{t}big", "{t}z", "WITHSCORES"],
        "*4\r\n$1\r\n2\r\n$1\r\n6\r\n$2\r\nm3\r\n$1\r\n8\r\n",
    );
    z(
        &mut c,
        &["ZUNIONSTORE", "{t}out", "2", "{t}small", "{t}big"],
        ":603\r\n",
    );
    z(&mut c, &["ZSCORE", "{t}out", "2"], "$1\r\n2\r\n");
    z(&mut c, &["ZSCORE", "{t}out", "m599"], "$1\r\n1\r\n");
    z(
        &mut c,
        &["ZDIFF", "2", "{t}small", "{t}big"],
        "*2\r\n$1\r\n1\r\n$1\r\n3\r\n",
    );
}

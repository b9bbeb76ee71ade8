//! Commands whose keys live on different shards (servers with 3 and 4 threads): multi-key
//! commands keep argument order, cross-shard RENAME/COPY/LCS/MSETNX behave as on one Redis,
//! hashtags keep keys together, keyspace-wide commands see every shard, and concurrent clients
//! never observe a half-done cross-shard write.
mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

/// `count` keys named `prefix:N`, asserting they cover every one of `shards` shards.
fn spread_keys(prefix: &str, count: usize, shards: usize) -> Vec<String> {
    let keys: Vec<String> = (0..count).map(|n| format!("{prefix}:{n}")).collect();
    let mut per_shard = vec![0; shards];
    for k in &keys {
        per_shard[shard_of(k.as_bytes(), shards)] += 1;
    }
    assert!(
        per_shard.iter().all(|&n| n > 0),
        "keys {prefix}:* do not cover all {shards} shards: {per_shard:?}"
    );
    keys
}

/// MGET of `keys`, in their order.
fn mget<T: redis::FromRedisValue>(c: &mut Connection, keys: &[String]) -> T {
    let mut mget = redis::cmd("MGET");
    for k in keys {
        mget.arg(k);
    }
    mget.query(c).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Hashtags
// ---------------------------------------------------------------------------------------------

#[test]
fn hashtags_put_keys_on_the_same_shard() {
    for shards in [3, 4] {
        for t in 0..200 {
            let tag = format!("user{t}");
            let base = shard_of(format!("{{{tag}}}").as_bytes(), shards);
            for k in [
                format!("{{{tag}}}:name"),
                format!("{{{tag}}}:mail"),
                format!("prefix{{{tag}}}"),
                format!("a{{{tag}}}b{{other}}"),
                format!("x{{{tag}}}}}"),
            ] {
                assert_eq!(
                    shard_of(k.as_bytes(), shards),
                    base,
                    "{k} with {shards} shards"
                );
            }
            // Only the tag counts, so it is the tag's own shard.
            assert_eq!(base, shard_of(tag.as_bytes(), shards));
        }
        // An empty tag is no tag: the whole key decides.
        let whole: Vec<usize> = (0..50)
            .map(|n| shard_of(format!("k{n}{{}}").as_bytes(), shards))
            .collect();
        assert!(
            whole.iter().any(|&s| s != whole[0]),
            "{{}} treated as a tag"
        );
        // Untagged keys spread over all shards.
        spread_keys("untagged", 200, shards);
    }
}

#[test]
fn hashtagged_multi_key_commands() {
    let s = server_with_threads(4);
    let mut raw = s.raw();
    rt(
        &mut raw,
        &["MSET", "{u1}:a", "1", "{u1}:b", "2", "{u1}:c", "3"],
        OK,
    );
    rt(
        &mut raw,
        &["MGET", "{u1}:c", "{u1}:a", "{u1}:x", "{u1}:b"],
        &arr(&[&b("3"), &b("1"), NIL, &b("2")]),
    );
    rt(&mut raw, &["MSETNX", "{u1}:a", "9", "{u1}:z", "9"], &i(0));
    rt(&mut raw, &["MSETNX", "{u1}:y", "9", "{u1}:z", "9"], &i(1));
    rt(&mut raw, &["RENAME", "{u1}:a", "{u1}:renamed"], OK);
    rt(&mut raw, &["RENAMENX", "{u1}:b", "{u1}:renamed"], &i(0));
    rt(&mut raw, &["COPY", "{u1}:renamed", "{u1}:copy"], &i(1));
    rt(
        &mut raw,
        &["MSET", "{u1}:l1", "ohmytext", "{u1}:l2", "mynewtext"],
        OK,
    );
    rt(&mut raw, &["LCS", "{u1}:l1", "{u1}:l2"], &b("mytext"));
    rt(
        &mut raw,
        &["EXISTS", "{u1}:renamed", "{u1}:copy", "{u1}:a"],
        &i(2),
    );
    rt(
        &mut raw,
        &["DEL", "{u1}:renamed", "{u1}:copy", "{u1}:a"],
        &i(2),
    );
    rt(&mut raw, &["DBSIZE"], &i(6));
}

// ---------------------------------------------------------------------------------------------
// Multi-key commands across shards
// ---------------------------------------------------------------------------------------------

#[test]
fn multi_key_commands_keep_argument_order() {
    for shards in [3, 4] {
        let s = server_with_threads(shards);
        let mut c = s.client();
        let keys = spread_keys("mk", 40, shards);
        let mut mset = redis::cmd("MSET");
        for k in &keys {
            mset.arg(k).arg(format!("v-{k}"));
        }
        let _: () = mset.query(&mut c).unwrap();

        // MGET in a scrambled order, with duplicates and missing keys in between.
        let mut order: Vec<String> = Vec::new();
        for (n, k) in keys.iter().enumerate().rev() {
            order.push(k.clone());
            if n % 5 == 0 {
                order.push(format!("missing:{n}"));
            }
            if n % 7 == 0 {
                order.push(keys[0].clone());
            }
        }
        let got: Vec<Option<String>> = mget(&mut c, &order);
        let want: Vec<Option<String>> = order
            .iter()
            .map(|k| (!k.starts_with("missing")).then(|| format!("v-{k}")))
            .collect();
        assert_eq!(got, want, "MGET order with {shards} shards");

        // Byte-exact replies for a small mix.
        let mut raw = s.raw();
        let (a, bk) = keys_on_different_shards("mk", shards);
        rt(
            &mut raw,
            &["MGET", &bk, "nokey", &a, &bk],
            &arr(&[
                &b(&format!("v-{bk}")),
                NIL,
                &b(&format!("v-{a}")),
                &b(&format!("v-{bk}")),
            ]),
        );
        rt(&mut raw, &["EXISTS", &a, "nokey", &bk, &a, &a], &i(4));
        rt(&mut raw, &["TOUCH", &a, "nokey", &bk, &bk], &i(3));

        let mut exists = redis::cmd("EXISTS");
        for k in &order {
            exists.arg(k);
        }
        let n: i64 = exists.query(&mut c).unwrap();
        assert_eq!(
            n as usize,
            order.iter().filter(|k| !k.starts_with("missing")).count()
        );
        let mut touch = redis::cmd("TOUCH");
        for k in &keys {
            touch.arg(k);
        }
        touch.arg("nokey");
        let n: i64 = touch.query(&mut c).unwrap();
        assert_eq!(n, 40);

        // DEL the even keys (named twice), UNLINK the rest.
        let mut del = redis::cmd("DEL");
        for k in keys.iter().step_by(2) {
            del.arg(k).arg(k);
        }
        del.arg("nokey");
        let n: i64 = del.query(&mut c).unwrap();
        assert_eq!(n, 20);
        let dbsize: i64 = q(&mut c, &["DBSIZE"]);
        assert_eq!(dbsize, 20);
        let got: Vec<Option<String>> = mget(&mut c, &keys);
        for (n, (k, v)) in keys.iter().zip(&got).enumerate() {
            let want = (n % 2 == 1).then(|| format!("v-{k}"));
            assert_eq!(v, &want, "{k} after DEL");
        }
        let mut unlink = redis::cmd("UNLINK");
        for k in keys.iter().rev() {
            unlink.arg(k);
        }
        let n: i64 = unlink.query(&mut c).unwrap();
        assert_eq!(n, 20);
        let dbsize: i64 = q(&mut c, &["DBSIZE"]);
        assert_eq!(dbsize, 0);
    }
}

#[test]
fn mset_across_shards_checks_arity_and_overwrites() {
    let s = server_with_threads(3);
    let mut raw = s.raw();
    let (a, bk) = keys_on_different_shards("ms", 3);
    let wrong = wrong_args("mset");
    rt(&mut raw, &["MSET", &a, "1", &bk], &wrong);
    rt(&mut raw, &["EXISTS", &a, &bk], &i(0));
    rt(&mut raw, &["SET", &a, "old", "EX", "100"], OK);
    rt(&mut raw, &["MSET", &a, "1", &bk, "2", &a, "3"], OK);
    rt(&mut raw, &["MGET", &a, &bk], &arr(&[&b("3"), &b("2")]));
    rt(&mut raw, &["TTL", &a], &i(-1));
}

#[test]
fn pipelined_commands_on_many_shards_answer_in_order() {
    let s = server_with_threads(4);
    let mut raw = s.raw();
    let keys = spread_keys("pl", 16, 4);
    for k in &keys {
        rt(&mut raw, &["SET", k, "start"], OK);
    }
    let mut req = Vec::new();
    let mut want: Vec<(String, String)> = Vec::new();
    for round in 0..20 {
        for (n, k) in keys.iter().enumerate() {
            let v = format!("{round}-{n}");
            req.extend(cmd(&[b"SET", k.as_bytes(), v.as_bytes()]));
            want.push((format!("SET {k} {v}"), OK.to_string()));
            req.extend(cmd(&[b"GET", k.as_bytes()]));
            want.push((format!("GET {k}"), b(&v)));
            if n % 4 == 0 {
                // A multi-shard command in the middle of the batch.
                req.extend(cmd(&[
                    b"EXISTS",
                    keys[0].as_bytes(),
                    keys[1].as_bytes(),
                    b"none",
                ]));
                want.push(("EXISTS".to_string(), i(2)));
            }
            req.extend(cmd(&[b"APPEND", k.as_bytes(), b"!"]));
            want.push((format!("APPEND {k}"), i(v.len() as i64 + 1)));
        }
    }
    raw.send(&req);
    for (n, (what, expect)) in want.iter().enumerate() {
        let got = raw.reply();
        assert_eq!(
            String::from_utf8_lossy(&got),
            *expect,
            "reply {n} of the pipeline ({what})"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// RENAME / RENAMENX / COPY / LCS / MSETNX across shards
// ---------------------------------------------------------------------------------------------

#[test]
fn rename_and_renamenx_across_shards() {
    for shards in [3, 4] {
        let s = server_with_threads(shards);
        let mut raw = s.raw();
        let (a, bk) = keys_on_different_shards("rn", shards);
        assert_ne!(
            shard_of(a.as_bytes(), shards),
            shard_of(bk.as_bytes(), shards)
        );
        rt(&mut raw, &["RENAME", &a, &bk], NO_KEY);
        rt(&mut raw, &["RENAMENX", &a, &bk], NO_KEY);
        rt(&mut raw, &["SET", &a, "va", "PX", "100000"], OK);
        rt(&mut raw, &["RENAME", &a, &bk], OK);
        rt(&mut raw, &["EXISTS", &a], &i(0));
        rt(&mut raw, &["GET", &bk], &b("va"));
        let mut c = s.client();
        let pttl: i64 = q(&mut c, &["PTTL", &bk]);
        assert!(
            (99_000..=100_000).contains(&pttl),
            "TTL moved with the key: {pttl}"
        );
        // RENAME overwrites the destination and its TTL.
        rt(&mut raw, &["SET", &a, "new"], OK);
        rt(&mut raw, &["RENAME", &a, &bk], OK);
        rt(&mut raw, &["GET", &bk], &b("new"));
        rt(&mut raw, &["TTL", &bk], &i(-1));
        rt(&mut raw, &["EXISTS", &a], &i(0));
        // RENAMENX.
        rt(&mut raw, &["SET", &a, "other"], OK);
        rt(&mut raw, &["RENAMENX", &a, &bk], &i(0));
        rt(
            &mut raw,
            &["MGET", &a, &bk],
            &arr(&[&b("other"), &b("new")]),
        );
        rt(&mut raw, &["DEL", &bk], &i(1));
        rt(&mut raw, &["RENAMENX", &a, &bk], &i(1));
        rt(&mut raw, &["MGET", &a, &bk], &arr(&[NIL, &b("other")]));
        rt(&mut raw, &["DBSIZE"], &i(1));
        // Other dbs are not involved.
        rt(&mut raw, &["SELECT", "1"], OK);
        rt(&mut raw, &["RENAME", &bk, &a], NO_KEY);
        rt(&mut raw, &["SET", &bk, "db1"], OK);
        rt(&mut raw, &["RENAME", &bk, &a], OK);
        rt(&mut raw, &["SELECT", "0"], OK);
        rt(&mut raw, &["MGET", &a, &bk], &arr(&[NIL, &b("other")]));
    }
}

#[test]
fn copy_across_shards() {
    for shards in [3, 4] {
        let s = server_with_threads(shards);
        let mut raw = s.raw();
        let (a, bk) = keys_on_different_shards("cp", shards);
        rt(&mut raw, &["COPY", &a, &bk], &i(0));
        rt(&mut raw, &["SET", &a, "va", "EX", "100"], OK);
        rt(&mut raw, &["COPY", &a, &bk], &i(1));
        rt(&mut raw, &["MGET", &a, &bk], &arr(&[&b("va"), &b("va")]));
        rt(&mut raw, &["TTL", &bk], &i(100));
        rt(&mut raw, &["SET", &a, "vb"], OK);
        rt(&mut raw, &["COPY", &a, &bk], &i(0));
        rt(&mut raw, &["GET", &bk], &b("va"));
        rt(&mut raw, &["COPY", &a, &bk, "REPLACE"], &i(1));
        rt(&mut raw, &["GET", &bk], &b("vb"));
        rt(&mut raw, &["TTL", &bk], &i(-1));
        rt(&mut raw, &["COPY", &a, &bk, "DB", "2"], &i(1));
        rt(&mut raw, &["COPY", &a, &bk, "DB", "2"], &i(0));
        rt(&mut raw, &["COPY", &a, &bk, "DB", "16"], DB_RANGE);
        rt(&mut raw, &["COPY", &a, &bk, "DB", "x"], NOT_INT);
        rt(&mut raw, &["COPY", &a, &bk, "foo"], SYNTAX);
        rt(&mut raw, &["SELECT", "2"], OK);
        rt(&mut raw, &["GET", &bk], &b("vb"));
        rt(&mut raw, &["DBSIZE"], &i(1));
        rt(&mut raw, &["SELECT", "0"], OK);
        rt(&mut raw, &["DBSIZE"], &i(2));
    }
}

#[test]
fn lcs_across_shards() {
    let s = server_with_threads(3);
    let mut raw = s.raw();
    let (a, bk) = keys_on_different_shards("lcs", 3);
    rt(&mut raw, &["MSET", &a, "ohmytext", &bk, "mynewtext"], OK);
    rt(&mut raw, &["LCS", &a, &bk], &b("mytext"));
    rt(&mut raw, &["LCS", &a, &bk, "LEN"], &i(6));
    rt(
        &mut raw,
        &["LCS", &a, &bk, "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
        "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n",
    );
    rt(
        &mut raw,
        &["LCS", &a, &bk, "IDX"],
        "*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n",
    );
    rt(&mut raw, &["LCS", &bk, &a], &b("mytext"));
    rt(&mut raw, &["LCS", &a, "nokey:elsewhere"], &b(""));
    rt(
        &mut raw,
        &["LCS", &a, &bk, "LEN", "IDX"],
        &e("ERR If you want both the length and indexes, please just use IDX."),
    );
    rt(&mut raw, &["LCS", &a, &bk, "foo"], SYNTAX);
}

#[test]
fn msetnx_across_shards_is_all_or_nothing() {
    for shards in [3, 4] {
        let s = server_with_threads(shards);
        let mut raw = s.raw();
        let keys = spread_keys("nx", 12, shards);
        let pairs = |vals: &str| -> Vec<String> {
            keys.iter()
                .flat_map(|k| [k.clone(), format!("{vals}-{k}")])
                .collect()
        };
        let mut args: Vec<String> = vec!["MSETNX".into()];
        args.extend(pairs("first"));
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        rt(&mut raw, &a, &i(1));
        // One existing key (on some shard) blocks all the others.
        rt(
            &mut raw,
            &["DEL", &keys[0], &keys[1], &keys[2], &keys[3]],
            &i(4),
        );
        rt(&mut raw, &["DBSIZE"], &i(8));
        let mut args: Vec<String> = vec!["MSETNX".into()];
        args.extend(pairs("second"));
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        rt(&mut raw, &a, &i(0));
        rt(&mut raw, &["DBSIZE"], &i(8));
        let mut c = s.client();
        let got: Vec<Option<String>> = mget(&mut c, &keys);
        for (n, (k, v)) in keys.iter().zip(&got).enumerate() {
            let want = (n >= 4).then(|| format!("first-{k}"));
            assert_eq!(v, &want, "{k}");
        }
    }
}

#[test]
fn msetnx_across_shards_rejects_odd_arguments() {
    let s = server_with_threads(3);
    let mut raw = s.raw();
    let (a, bk) = keys_on_different_shards("odd", 3);
    let wrong = wrong_args("msetnx");
    rt(&mut raw, &["MSETNX", &a, "1", &bk], &wrong);
    rt(&mut raw, &["EXISTS", &a, &bk], &i(0));
    rt(&mut raw, &["SET", &a, "x"], OK);
    rt(&mut raw, &["MSETNX", &a, "1", &bk], &wrong);
    rt(&mut raw, &["DBSIZE"], &i(1));
}

// ---------------------------------------------------------------------------------------------
// Keyspace-wide commands
// ---------------------------------------------------------------------------------------------

#[test]
fn dbsize_keys_flush_see_all_shards() {
    let s = server_with_threads(3);
    let mut c = s.client();
    let keys = spread_keys("all", 300, 3);
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("SET").arg(k).arg(1).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 300);
    let got: Vec<String> = q(&mut c, &["KEYS", "*"]);
    assert_eq!(sorted(got), sorted(keys.clone()));
    let got: Vec<String> = q(&mut c, &["KEYS", "all:1?"]);
    let want: Vec<String> = (10..20).map(|n| format!("all:{n}")).collect();
    assert_eq!(sorted(got), want);
    // Every shard answers RANDOMKEY sooner or later.
    let mut shards_seen = [false; 3];
    for _ in 0..300 {
        let k: String = q(&mut c, &["RANDOMKEY"]);
        assert!(k.starts_with("all:"));
        shards_seen[shard_of(k.as_bytes(), 3)] = true;
        if shards_seen.iter().all(|&s| s) {
            break;
        }
    }
    assert_eq!(shards_seen, [true; 3], "RANDOMKEY never picked some shard");

    let mut raw = s.raw();
    rt(&mut raw, &["SELECT", "1"], OK);
    rt(
        &mut raw,
        &["MSET", "all:0", "x", "all:1", "y", "all:2", "z"],
        OK,
    );
    rt(&mut raw, &["DBSIZE"], &i(3));
    rt(&mut raw, &["FLUSHDB"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 300, "FLUSHDB of db 1 touched db 0");
    rt(
        &mut raw,
        &["MSET", "all:0", "x", "all:1", "y", "all:2", "z"],
        OK,
    );
    rt(&mut raw, &["FLUSHALL"], OK);
    rt(&mut raw, &["DBSIZE"], &i(0));
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 0);
    let got: Vec<String> = q(&mut c, &["KEYS", "*"]);
    assert!(got.is_empty());
    let r: Option<String> = q(&mut c, &["RANDOMKEY"]);
    assert_eq!(r, None);
}

#[test]
fn debug_populate_fills_every_shard() {
    let s = server_with_threads(4);
    let mut c = s.client();
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "10000"]);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 10000);
    let got: Vec<Option<String>> = q(
        &mut c,
        &["MGET", "key:0", "key:9999", "key:5000", "key:10000"],
    );
    assert_eq!(
        got,
        vec![
            Some("value:0".into()),
            Some("value:9999".into()),
            Some("value:5000".into()),
            None
        ]
    );
    // Existing keys are left alone.
    let _: () = q(&mut c, &["SET", "key:1", "mine"]);
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "10005"]);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 10005);
    let v: String = q(&mut c, &["GET", "key:1"]);
    assert_eq!(v, "mine");
    // Prefix and size (padded with zero bytes, or cut).
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "3", "p", "10"]);
    let v: Vec<u8> = q(&mut c, &["GET", "p:2"]);
    assert_eq!(v, b"value:2\0\0\0");
    let _: () = q(&mut c, &["DEBUG", "POPULATE", "3", "t", "3"]);
    let v: String = q(&mut c, &["GET", "t:1"]);
    assert_eq!(v, "val");
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 10011);
    // Every shard got its share.
    let keys = scan_all(&mut c, &["MATCH", "key:*", "COUNT", "1000"]);
    assert_eq!(keys.len(), 10005);
    let mut per_shard = [0usize; 4];
    for k in &keys {
        per_shard[shard_of(k.as_bytes(), 4)] += 1;
    }
    assert!(per_shard.iter().all(|&n| n > 2000), "{per_shard:?}");
}

#[test]
fn debug_populate_argument_errors() {
    let s = server_with_threads(3);
    let mut raw = s.raw();
    for count in ["-1", "abc"] {
        rt(
            &mut raw,
            &["DEBUG", "POPULATE", count],
            &e("ERR value is out of range, must be positive"),
        );
    }
    rt(&mut raw, &["DBSIZE"], &i(0));
}

#[test]
fn scan_across_shards_returns_each_key_once_during_inserts() {
    let s = server_with_threads(4);
    let mut c = s.client();
    let keys = spread_keys("scan", 5000, 4);
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("SET").arg(k).arg("v").ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let inserted = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (done, inserted) = (done.clone(), inserted.clone());
        let mut wc = s.client();
        thread::spawn(move || {
            let mut n = 0;
            while !done.load(Ordering::Relaxed) && n < 40_000 {
                let mut pipe = redis::pipe();
                for _ in 0..200 {
                    pipe.cmd("SET").arg(format!("new:{n}")).arg("v").ignore();
                    n += 1;
                }
                let _: () = pipe.query(&mut wc).unwrap();
                inserted.store(n, Ordering::Relaxed);
            }
        })
    };
    // Let the inserts get going, then scan in small steps.
    while inserted.load(Ordering::Relaxed) < 1000 {
        thread::sleep(Duration::from_millis(5));
    }
    let at_start = inserted.load(Ordering::Relaxed);
    let got = scan_all(&mut c, &["COUNT", "40"]);
    let at_end = inserted.load(Ordering::Relaxed);
    done.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(at_end > at_start, "no inserts happened during the scan");

    let mut counts: HashMap<&str, usize> = HashMap::new();
    for k in &got {
        *counts.entry(k.as_str()).or_default() += 1;
    }
    for k in &keys {
        assert_eq!(
            counts.get(k.as_str()).copied().unwrap_or(0),
            1,
            "{k} returned a wrong number of times by a SCAN during {} inserts",
            at_end - at_start
        );
    }
    // Keys present for the whole scan (inserted before it began) are returned too.
    for n in 0..at_start {
        let k = format!("new:{n}");
        assert_eq!(counts.get(k.as_str()).copied().unwrap_or(0), 1, "{k}");
    }
    assert!(got
        .iter()
        .all(|k| k.starts_with("scan:") || k.starts_with("new:")));
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

/// What a reader thread saw: how many reads, how many broke the invariant, and the first one.
#[derive(Default)]
struct ReaderReport {
    reads: u64,
    violations: u64,
    first: Option<String>,
    /// The slowest read (a read held back behind many writes shows up here).
    slowest: Duration,
}

impl ReaderReport {
    /// Spawns a reader that calls `read` on its own connection until `done`; `read` answers
    /// `Some(what it saw)` when the invariant is broken.
    fn spawn(
        done: &Arc<AtomicBool>,
        mut rc: Connection,
        mut read: impl FnMut(&mut Connection) -> Option<String> + Send + 'static,
    ) -> JoinHandle<ReaderReport> {
        let done = done.clone();
        thread::spawn(move || {
            let mut rep = ReaderReport::default();
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                if let Some(seen) = read(&mut rc) {
                    rep.violations += 1;
                    rep.first.get_or_insert(seen);
                }
                rep.slowest = rep.slowest.max(t.elapsed());
                rep.reads += 1;
            }
            rep
        })
    }

    /// Waits for the writers, then stops the readers and collects their reports.
    fn finish(
        writers: Vec<JoinHandle<()>>,
        done: &AtomicBool,
        readers: Vec<JoinHandle<ReaderReport>>,
    ) -> Vec<ReaderReport> {
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        readers.into_iter().map(|r| r.join().unwrap()).collect()
    }

    fn check(reports: &[ReaderReport], what: &str) {
        for r in reports {
            assert!(r.reads > 0, "a reader never got to read");
        }
        let violations: u64 = reports.iter().map(|r| r.violations).sum();
        let reads: u64 = reports.iter().map(|r| r.reads).sum();
        let slowest = reports.iter().map(|r| r.slowest).max().unwrap_or_default();
        assert_eq!(
            violations,
            0,
            "{violations} of {reads} reads saw {what}; slowest read {slowest:?}; first: {}",
            reports
                .iter()
                .find_map(|r| r.first.clone())
                .unwrap_or_default()
        );
    }
}

/// MSET of two keys on different shards is atomic: a reader's MGET never sees one key from
/// before a write and the other from after it.
#[test]
fn concurrent_cross_shard_mset_is_atomic_for_readers() {
    let s = server_with_threads(3);
    let (x, y) = keys_on_different_shards("pair", 3);
    let (x2, y2) = keys_on_different_shards("pair2", 3);
    let mut c = s.client();
    let _: () = q(
        &mut c,
        &["MSET", &x, "init", &y, "init", &x2, "init", &y2, "init"],
    );

    let done = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for r in 0..2 {
        let keys = if r == 0 {
            [x.clone(), y.clone()]
        } else {
            [y2.clone(), x2.clone()]
        };
        readers.push(ReaderReport::spawn(&done, s.client(), move |rc| {
            let got: (String, String) = q(rc, &["MGET", &keys[0], &keys[1]]);
            (got.0 != got.1).then(|| format!("MGET {keys:?} = {got:?}"))
        }));
    }
    let mut writers = Vec::new();
    for w in 0..4 {
        let mut wc = s.client();
        let (x, y, x2, y2) = (x.clone(), y.clone(), x2.clone(), y2.clone());
        writers.push(thread::spawn(move || {
            for n in 0..300 {
                let v = format!("w{w}-{n}");
                if w % 2 == 0 {
                    let _: () = q(&mut wc, &["MSET", &x, &v, &y, &v]);
                } else {
                    let _: () = q(&mut wc, &["MSET", &y2, &v, &x2, &v, &y, &v, &x, &v]);
                }
            }
        }));
    }
    let reports = ReaderReport::finish(writers, &done, readers);
    // The writers' MSETs did not interleave: each pair ends up equal.
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 4);
    let got: Vec<String> = q(&mut c, &["MGET", &x, &y, &x2, &y2]);
    assert_eq!(got[0], got[1], "final {x} {y}");
    assert_eq!(got[2], got[3], "final {x2} {y2}");
    // And no reader ever saw half of one.
    ReaderReport::check(&reports, "a half-done cross-shard MSET");
}

/// Cross-shard RENAMEs racing each other: the single value is always in exactly one of the two
/// keys, as on a single-threaded Redis.
#[test]
fn concurrent_cross_shard_renames_keep_exactly_one_key() {
    let s = server_with_threads(4);
    let (a, bk) = keys_on_different_shards("swap", 4);
    let mut c = s.client();
    let _: () = q(&mut c, &["SET", &a, "token"]);
    let _: () = q(&mut c, &["SET", "bystander", "here"]);

    let done = Arc::new(AtomicBool::new(false));
    let renamed = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for r in 0..2 {
        let (a, bk) = (a.clone(), bk.clone());
        readers.push(ReaderReport::spawn(&done, s.client(), move |rc| {
            if r == 0 {
                let got: Vec<Option<String>> = q(rc, &["MGET", &a, &bk]);
                let present: Vec<&String> = got.iter().flatten().collect();
                (present != vec!["token"]).then(|| format!("MGET {a} {bk} = {got:?}"))
            } else {
                let n: i64 = q(rc, &["EXISTS", &a, &bk]);
                (n != 1).then(|| format!("EXISTS {a} {bk} = {n}"))
            }
        }));
    }
    let mut writers = Vec::new();
    for w in 0..4 {
        let mut wc = s.client();
        let (a, bk) = (a.clone(), bk.clone());
        let renamed = renamed.clone();
        writers.push(thread::spawn(move || {
            for n in 0..300 {
                let (src, dst) = if (w + n) % 2 == 0 {
                    (&a, &bk)
                } else {
                    (&bk, &a)
                };
                let r: redis::RedisResult<()> =
                    redis::cmd("RENAME").arg(src).arg(dst).query(&mut wc);
                match r {
                    Ok(()) => {
                        renamed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(err) => assert!(
                        err.to_string().contains("no such key"),
                        "RENAME {src} {dst}: {err}"
                    ),
                }
                if n % 10 == 0 {
                    // RENAMENX onto an existing key, or from a missing one: both no-ops.
                    let r: redis::RedisResult<i64> =
                        redis::cmd("RENAMENX").arg(dst).arg(src).query(&mut wc);
                    if let Ok(v) = r {
                        renamed.fetch_add(v as usize, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    let reports = ReaderReport::finish(writers, &done, readers);
    assert!(renamed.load(Ordering::Relaxed) > 0);
    // The key count invariant: the token (under one name) and the bystander.
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 2, "the token and the bystander");
    let got: Vec<Option<String>> = q(&mut c, &["MGET", &a, &bk, "bystander"]);
    let present: Vec<&String> = got.iter().flatten().collect();
    assert_eq!(present.len(), 2, "{got:?}");
    assert!(present.contains(&&"token".to_string()));
    ReaderReport::check(&reports, "the token in neither or both keys");
}

#[test]
fn concurrent_incr_on_keys_over_all_shards() {
    let s = server_with_threads(4);
    let keys = spread_keys("ctr", 20, 4);
    let mut workers = Vec::new();
    for _ in 0..8 {
        let mut wc = s.client();
        let keys = keys.clone();
        workers.push(thread::spawn(move || {
            for round in 0..500 {
                if round % 2 == 0 {
                    let mut pipe = redis::pipe();
                    for k in &keys {
                        pipe.cmd("INCR").arg(k);
                    }
                    let got: Vec<i64> = pipe.query(&mut wc).unwrap();
                    assert!(got.iter().all(|&v| v >= 1));
                } else {
                    for k in &keys {
                        let v: i64 = q(&mut wc, &["INCR", k]);
                        assert!(v >= 1);
                    }
                }
            }
        }));
    }
    for w in workers {
        w.join().unwrap();
    }
    let mut c = s.client();
    let got: Vec<i64> = mget(&mut c, &keys);
    assert_eq!(got, vec![4000; 20], "each key INCRed 8 x 500 times");
    assert_eq!(got.iter().sum::<i64>(), 80_000);
    let n: i64 = q(&mut c, &["DBSIZE"]);
    assert_eq!(n, 20);
}

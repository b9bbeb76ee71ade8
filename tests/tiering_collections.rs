//! Collections on SSD end to end: hashes, lists, sets and sorted sets several times maxmemory
//! offloaded as blobs and read back element for element, written to while offloaded, answered
//! by TYPE, EXISTS, TTL and SCAN TYPE without a disk read, seen by MULTI/EXEC and cross-shard
//! set operations, saved and restored across a restart, and a flipped byte in the tier file
//! answered as a counted miss (never wrong elements).
mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

/// Keys per type. Hashes and sorted sets have short elements (packed, listpack), lists and
/// sets 100-byte ones (a set past `set-max-listpack-value` is a hashtable): about 5 KB for the
/// four keys of one number, so four types at 8 MB make about 4x maxmemory.
const PER_TYPE: usize = 6_000;
const FIELDS: usize = 20;

fn elem(kind: &str, i: usize, j: usize) -> String {
    // Distinct per key and element, not an integer (no intset).
    let base = format!(
        "{kind}{i:07}-{j:02}-{:09x}",
        (i * 31 + j * 7919) % 0xfff_ffff
    );
    if matches!(kind, "le" | "sm" | "nl" | "ns") {
        format!("{base}{}", &"abcdefghij".repeat(8)[..76])
    } else {
        base
    }
}

fn fill_collections(c: &mut Connection, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        let mut p = redis::pipe();
        for &i in chunk {
            let mut h = redis::cmd("HSET");
            h.arg(format!("h:{i}"));
            let mut l = redis::cmd("RPUSH");
            l.arg(format!("l:{i}"));
            let mut s = redis::cmd("SADD");
            s.arg(format!("s:{i}"));
            let mut z = redis::cmd("ZADD");
            z.arg(format!("z:{i}"));
            for j in 0..FIELDS {
                h.arg(format!("f{j}")).arg(elem("hv", i, j));
                l.arg(elem("le", i, j));
                s.arg(elem("sm", i, j));
                z.arg(j as f64 + 0.5).arg(elem("zm", i, j));
            }
            p.add_command(h).ignore();
            p.add_command(l).ignore();
            p.add_command(s).ignore();
            p.add_command(z).ignore();
        }
        p.query::<()>(c).expect("pipelined collection writes");
    }
}

/// Reads every element of keys `range` back and compares it exactly; `extra` elements were
/// pushed onto some of them (see the test).
fn check_collections(c: &mut Connection, keys: &[usize], extra: &HashMap<usize, usize>) {
    for chunk in keys.chunks(100) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("HGETALL").arg(format!("h:{i}"));
            p.cmd("LRANGE").arg(format!("l:{i}")).arg(0).arg(-1);
            p.cmd("SMEMBERS").arg(format!("s:{i}"));
            p.cmd("ZRANGE")
                .arg(format!("z:{i}"))
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES");
        }
        type Got = (
            HashMap<String, String>,
            Vec<String>,
            BTreeSet<String>,
            Vec<(String, f64)>,
        );
        let got: Vec<Got> = {
            let flat: Vec<redis::Value> = p.query(c).expect("pipelined reads");
            flat.chunks(4)
                .map(|v| {
                    (
                        redis::from_redis_value(&v[0]).unwrap(),
                        redis::from_redis_value(&v[1]).unwrap(),
                        redis::from_redis_value(&v[2]).unwrap(),
                        redis::from_redis_value(&v[3]).unwrap(),
                    )
                })
                .collect()
        };
        for (&i, (h, l, s, z)) in chunk.iter().zip(got) {
            let more = extra.get(&i).copied().unwrap_or(0);
            let mut want_h: HashMap<String, String> = (0..FIELDS)
                .map(|j| (format!("f{j}"), elem("hv", i, j)))
                .collect();
            let mut want_l: Vec<String> = (0..FIELDS).map(|j| elem("le", i, j)).collect();
            let mut want_s: BTreeSet<String> = (0..FIELDS).map(|j| elem("sm", i, j)).collect();
            let mut want_z: Vec<(String, f64)> = (0..FIELDS)
                .map(|j| (elem("zm", i, j), j as f64 + 0.5))
                .collect();
            for m in 0..more {
                want_h.insert(format!("new{m}"), elem("nh", i, m));
                want_l.insert(0, elem("nl", i, m));
                want_s.insert(elem("ns", i, m));
                want_z.push((elem("nz", i, m), 1000.0 + m as f64));
            }
            assert_eq!(h, want_h, "h:{i}");
            assert_eq!(l, want_l, "l:{i}");
            assert_eq!(s, want_s, "s:{i}");
            assert_eq!(z, want_z, "z:{i}");
        }
    }
}

fn wait_for_disk_keys(c: &mut Connection, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let disk = info_u64(c, "tiered", "tiered_disk_keys");
        if disk >= at_least {
            return disk;
        }
        assert!(
            Instant::now() < deadline,
            "only {disk} keys offloaded, wanted {at_least}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn collections_at_four_times_ram_read_back_exactly_and_take_writes_while_offloaded() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server_with(&dir, "8mb", "2", &["--log_level", "error"]);
    let mut c = s.client();
    fill_collections(&mut c, PER_TYPE);
    let total = 4 * PER_TYPE as u64;
    let disk = wait_for_disk_keys(&mut c, total / 2);
    let offloads = info_u64(&mut c, "tiered", "tiered_collection_offloads");
    assert!(
        offloads >= disk,
        "{offloads} collection offloads, {disk} keys on disk"
    );

    // TYPE, EXISTS, TTL, EXPIRE and SCAN ... TYPE answer from RAM: no disk read.
    let reads = info_u64(&mut c, "tiered", "tiered_reads");
    let mut p = redis::pipe();
    for i in 0..PER_TYPE {
        for (k, t) in [("h", "hash"), ("l", "list"), ("s", "set"), ("z", "zset")] {
            p.cmd("TYPE").arg(format!("{k}:{i}"));
            let _ = t;
        }
    }
    let types: Vec<String> = p.query(&mut c).unwrap();
    for (n, t) in types.iter().enumerate() {
        assert_eq!(
            t,
            ["hash", "list", "set", "zset"][n % 4],
            "TYPE of key #{n}"
        );
    }
    let keys: Vec<String> = (0..PER_TYPE)
        .flat_map(|i| ["h", "l", "s", "z"].map(|k| format!("{k}:{i}")))
        .collect();
    let exists: i64 = redis::cmd("EXISTS").arg(&keys[..]).query(&mut c).unwrap();
    assert_eq!(exists, total as i64);
    let ttl: i64 = redis::cmd("TTL").arg("h:7").query(&mut c).unwrap();
    assert_eq!(ttl, -1);
    let _: i64 = redis::cmd("EXPIRE")
        .arg("z:9")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    let ttl: i64 = redis::cmd("TTL").arg("z:9").query(&mut c).unwrap();
    assert!((990..=1000).contains(&ttl), "TTL {ttl}");
    let mut sets = 0;
    let mut cursor = 0u64;
    loop {
        let (next, found): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .arg("TYPE")
            .arg("set")
            .query(&mut c)
            .unwrap();
        assert!(found.iter().all(|k| k.starts_with("s:")), "{found:?}");
        sets += found.len();
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(sets, PER_TYPE);
    assert_eq!(
        info_u64(&mut c, "tiered", "tiered_reads"),
        reads,
        "TYPE, EXISTS, TTL, EXPIRE or SCAN read the disk"
    );

    // Writes onto offloaded collections: they come back, take the write, and read back.
    let mut extra = HashMap::new();
    for i in (0..PER_TYPE).step_by(97) {
        let mut p = redis::pipe();
        for m in 0..3 {
            p.cmd("HSET")
                .arg(format!("h:{i}"))
                .arg(format!("new{m}"))
                .arg(elem("nh", i, m))
                .ignore();
            p.cmd("LPUSH")
                .arg(format!("l:{i}"))
                .arg(elem("nl", i, m))
                .ignore();
            p.cmd("SADD")
                .arg(format!("s:{i}"))
                .arg(elem("ns", i, m))
                .ignore();
            p.cmd("ZADD")
                .arg(format!("z:{i}"))
                .arg(1000.0 + m as f64)
                .arg(elem("nz", i, m))
                .ignore();
        }
        p.query::<()>(&mut c).unwrap();
        extra.insert(i, 3);
    }
    assert!(info_u64(&mut c, "tiered", "tiered_collection_loads") > 0);

    // Inside MULTI/EXEC and across shards (SUNION of sets on both shards), offloaded
    // collections are seen whole.
    let (a, b) = {
        let mut a = None;
        let mut b = None;
        for i in 1..PER_TYPE {
            match shard_of(format!("s:{i}").as_bytes(), 2) {
                0 if a.is_none() && !extra.contains_key(&i) => a = Some(i),
                1 if b.is_none() && !extra.contains_key(&i) => b = Some(i),
                _ => {}
            }
        }
        (a.unwrap(), b.unwrap())
    };
    let union: BTreeSet<String> = redis::cmd("SUNION")
        .arg(format!("s:{a}"))
        .arg(format!("s:{b}"))
        .query(&mut c)
        .unwrap();
    let want: BTreeSet<String> = (0..FIELDS)
        .flat_map(|j| [elem("sm", a, j), elem("sm", b, j)])
        .collect();
    assert_eq!(union, want);
    let (len, all): (i64, HashMap<String, String>) = redis::pipe()
        .atomic()
        .cmd("LLEN")
        .arg(format!("l:{b}"))
        .cmd("HGETALL")
        .arg(format!("h:{a}"))
        .query(&mut c)
        .unwrap();
    assert_eq!(len, FIELDS as i64);
    assert_eq!(all.len(), FIELDS);
    assert_eq!(all["f3"], elem("hv", a, 3));

    // Every element of every key, in RAM or on disk.
    let all: Vec<usize> = (0..PER_TYPE).collect();
    check_collections(&mut c, &all, &extra);
    assert_eq!(
        info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
        0
    );
    // Wrong types on offloaded collections answer as Redis does.
    wait_for_disk_keys(&mut c, total / 2);
    let e = redis::cmd("GET")
        .arg("h:5")
        .query::<String>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    let e = redis::cmd("STRLEN")
        .arg("l:5")
        .query::<i64>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("z:6")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "listpack");
    // DEL of offloaded collections frees their disk copies without reading them.
    let reads = info_u64(&mut c, "tiered", "tiered_reads");
    let gone: i64 = redis::cmd("DEL").arg(&keys[..]).query(&mut c).unwrap();
    assert_eq!(gone, total as i64);
    assert_eq!(info_u64(&mut c, "tiered", "tiered_reads"), reads);
    assert_eq!(info_u64(&mut c, "tiered", "tiered_disk_keys"), 0);
}

#[test]
fn flipped_byte_in_a_collection_blob_is_a_counted_miss_never_wrong_elements() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server_with(&dir, "8mb", "1", &["--log_level", "error"]);
    let mut c = s.client();
    let n = 2_000;
    fill_collections(&mut c, n);
    wait_for_disk_keys(&mut c, n as u64);
    flip_tier_file_bytes(&dir, 1..40, 1500);
    let mut misses = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("HGETALL").arg(format!("h:{i}"));
            p.cmd("LRANGE").arg(format!("l:{i}")).arg(0).arg(-1);
        }
        let got: Vec<redis::Value> = p.query(&mut c).unwrap();
        for (&i, v) in chunk.iter().zip(got.chunks(2)) {
            let h: HashMap<String, String> = redis::from_redis_value(&v[0]).unwrap();
            let l: Vec<String> = redis::from_redis_value(&v[1]).unwrap();
            if h.is_empty() {
                misses += 1;
            } else {
                let want: HashMap<String, String> = (0..FIELDS)
                    .map(|j| (format!("f{j}"), elem("hv", i, j)))
                    .collect();
                assert_eq!(h, want, "h:{i} came back altered");
            }
            if l.is_empty() {
                misses += 1;
            } else {
                let want: Vec<String> = (0..FIELDS).map(|j| elem("le", i, j)).collect();
                assert_eq!(l, want, "l:{i} came back altered");
            }
        }
    }
    assert!(misses > 0, "no collection read from the corrupted pages");
    let dropped = info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped");
    assert_eq!(dropped, misses, "misses not counted");
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn offloaded_collections_survive_save_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2_500;
    // Loading a snapshot waits for room under maxmemory: a debug binary's own pages at 8 MB
    // leave too little for the loader's buffers.
    let start = |dir: &tempfile::TempDir| {
        let d = dir.path().to_str().unwrap().to_string();
        tiered_server_with(
            dir,
            "16mb",
            "2",
            &["--dir", &d, "--dbfilename", "coll", "--log_level", "error"],
        )
    };
    {
        let s = start(&dir);
        let mut c = s.client();
        fill_collections(&mut c, n);
        let _: i64 = redis::cmd("EXPIRE")
            .arg("h:11")
            .arg(5000)
            .query(&mut c)
            .unwrap();
        wait_for_disk_keys(&mut c, n as u64);
        let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
        assert_eq!(
            info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
            0
        );
    }
    let s = start(&dir);
    let mut c = s.client();
    let keys: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(keys, 4 * n as i64);
    let ttl: i64 = redis::cmd("TTL").arg("h:11").query(&mut c).unwrap();
    assert!((4900..=5000).contains(&ttl), "TTL {ttl}");
    let all: Vec<usize> = (0..n).collect();
    check_collections(&mut c, &all, &HashMap::new());
}

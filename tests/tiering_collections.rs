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
    // Per-command latency histograms (a few KB per command on each core) count in used
    // memory; at this tiny maxmemory they would crowd the room the writes below need.
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]);
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
        // An OOM here says what memory and the tier looked like (a flake's only witness).
        if let Err(e) = p.query::<()>(&mut c) {
            let mut lines = |section: &str, prefixes: &[&str]| -> String {
                let text: String = redis::cmd("INFO").arg(section).query(&mut c).unwrap();
                text.lines()
                    .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let memory = lines(
                "memory",
                &["used_memory:", "used_memory_rss:", "allocator_"],
            );
            let tiered = lines("tiered", &["tiered_"]);
            panic!("write to offloaded collections {i}: {e}\n{memory}\n{tiered}");
        }
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

/// Waits until no key is pinned (`tiered_pinned_keys`): pins never outlive their commands.
fn wait_for_no_pins(c: &mut Connection, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pinned = info_u64(c, "tiered", "tiered_pinned_keys");
        if pinned == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{pinned} pins left after {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Cross-shard commands load their keys' collections from SSD before they take their locks;
/// the offloader, running at full pace (several times maxmemory of cold collections), must
/// not move one back to disk in between. Four clients run SUNIONSTORE, ZUNIONSTORE, SMOVE,
/// LMOVE, SORT ... STORE and SINTERCARD over random keys (half the pairs on two shards): no
/// reply may be an error. Then pins are gone however a command ended: its client vanished with
/// replies unread, or it blocked (a blocked command holds none), or it was killed while blocked.
#[test]
fn cross_shard_commands_over_cold_collections_never_find_one_on_ssd() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server_with(&dir, "8mb", "2", &["--log_level", "error"]);
    let mut c = s.client();
    let n = 4_000;
    fill_collections(&mut c, n);
    wait_for_disk_keys(&mut c, 2 * n as u64);
    let loads = info_u64(&mut c, "tiered", "tiered_collection_loads");
    let offloads = info_u64(&mut c, "tiered", "tiered_collection_offloads");
    let rounds = 600;
    let errors: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4u64)
            .map(|t| {
                let mut c = s.client();
                scope.spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                    let mut rnd = move |m: usize| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        (x % m as u64) as usize
                    };
                    let mut errors = Vec::new();
                    for r in 0..rounds {
                        let (i, j, d) = (rnd(n), rnd(n), format!("{t}:{}", r % 16));
                        let mut cmds = Vec::with_capacity(6);
                        let mut cmd = |name: &'static str, args: Vec<String>| {
                            let mut c = redis::cmd(name);
                            for a in args {
                                c.arg(a);
                            }
                            cmds.push((name, c));
                        };
                        let (si, sj) = (format!("s:{i}"), format!("s:{j}"));
                        let (zi, zj) = (format!("z:{i}"), format!("z:{j}"));
                        let (li, lj) = (format!("l:{i}"), format!("l:{j}"));
                        cmd(
                            "SUNIONSTORE",
                            vec![format!("ds:{d}"), si.clone(), sj.clone()],
                        );
                        cmd("ZUNIONSTORE", vec![format!("dz:{d}"), "2".into(), zi, zj]);
                        cmd(
                            "SMOVE",
                            vec![si.clone(), sj.clone(), elem("sm", i, rnd(FIELDS))],
                        );
                        cmd("LMOVE", vec![li, lj.clone(), "LEFT".into(), "RIGHT".into()]);
                        let sort = ["ALPHA", "LIMIT", "0", "3", "STORE"].map(String::from);
                        let mut args = vec![lj];
                        args.extend(sort);
                        args.push(format!("dl:{d}"));
                        cmd("SORT", args);
                        cmd("SINTERCARD", vec!["2".into(), si, sj]);
                        for (name, k) in cmds {
                            match k.query::<redis::Value>(&mut c) {
                                Ok(_) => {}
                                Err(e) if e.is_io_error() => panic!("connection lost: {e}"),
                                Err(e) => errors.push(format!("{name}: {e}")),
                            }
                        }
                    }
                    errors
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect()
    });
    let loaded = info_u64(&mut c, "tiered", "tiered_collection_loads") - loads;
    let offloaded = info_u64(&mut c, "tiered", "tiered_collection_offloads") - offloads;
    assert!(
        errors.is_empty(),
        "{} of {} replies were errors ({loaded} loads, {offloaded} offloads meanwhile), first: {:?}",
        errors.len(),
        4 * rounds * 6,
        {
            let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
            for e in &errors {
                *by.entry(e.split(':').next().unwrap_or("")).or_default() += 1;
            }
            (by, &errors[..errors.len().min(2)])
        }
    );
    assert!(
        loaded > 100 && offloaded > 100,
        "{loaded} loads, {offloaded} offloads: not cold"
    );
    wait_for_no_pins(&mut c, "the stress");

    // A client gone with its replies unread: its commands' pins go with them.
    {
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        let mut out = Vec::new();
        for i in 0..300 {
            let args = [
                "SUNIONSTORE".to_string(),
                format!("dgone:{i}"),
                format!("s:{}", (i * 7) % n),
                format!("s:{}", (i * 13 + 1) % n),
            ];
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in &args {
                out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
        }
        std::io::Write::write_all(&mut raw, &out).unwrap();
    }
    // Its commands already read run on; the server then finds it gone.
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_u64(&mut c, "clients", "connected_clients") > 1 {
        assert!(
            Instant::now() < deadline,
            "the client that left is still connected"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for_no_pins(&mut c, "a client that left");

    // A blocked BLMOVE holds no pin while it waits; served, it leaves none either.
    let (src, dst) = keys_on_different_shards("bsrc", 2);
    let blocked = {
        let mut b = s.client();
        let (src, dst) = (src.clone(), dst.clone());
        std::thread::spawn(move || -> Option<String> {
            redis::cmd("BLMOVE")
                .arg(&src)
                .arg(&dst)
                .arg("LEFT")
                .arg("RIGHT")
                .arg(0)
                .query(&mut b)
                .unwrap()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_u64(&mut c, "clients", "blocked_clients") == 0 {
        assert!(Instant::now() < deadline, "BLMOVE did not block");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_u64(&mut c, "tiered", "tiered_pinned_keys"), 0);
    let _: i64 = redis::cmd("RPUSH")
        .arg(&src)
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert_eq!(blocked.join().unwrap().as_deref(), Some("x"));
    wait_for_no_pins(&mut c, "a served BLMOVE");

    // A blocked command killed.
    let mut b = s.client();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut b).unwrap();
    let waiter = std::thread::spawn(move || {
        let _ = redis::cmd("BLMPOP")
            .arg(0)
            .arg(2)
            .arg("nolist:a")
            .arg("nolist:b")
            .arg("LEFT")
            .query::<redis::Value>(&mut b);
    });
    std::thread::sleep(Duration::from_millis(300));
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut c)
        .unwrap();
    waiter.join().unwrap();
    wait_for_no_pins(&mut c, "a killed client");
}

/// OBJECT ENCODING of an offloaded collection is answered from RAM (the encoding is kept beside
/// its disk pointer): the same name as before it left, no disk read, nothing loaded. And the
/// offloader encodes each collection once (`tiered_collection_encodes`), not a second time to
/// check it did not change while being written.
#[test]
fn object_encoding_of_offloaded_collections_reads_no_disk() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server_with(&dir, "8mb", "1", &["--log_level", "error"]);
    let mut c = s.client();
    let n = 400;
    // (key prefix, encoding, command, elements)
    let kinds: [(&str, &str, &str, usize); 7] = [
        ("si", "intset", "SADD", 40),
        ("sh", "hashtable", "SADD", 100),
        ("hl", "listpack", "HSET", 20),
        ("hh", "hashtable", "HSET", 200),
        ("zl", "listpack", "ZADD", 20),
        ("zs", "skiplist", "ZADD", 200),
        ("li", "quicklist", "RPUSH", 40),
    ];
    for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
        let mut p = redis::pipe();
        for &i in chunk {
            for (prefix, _, cmd, len) in kinds {
                let mut k = redis::cmd(cmd);
                k.arg(format!("{prefix}:{i}"));
                for j in 0..len {
                    match (prefix, cmd) {
                        ("si", _) => k.arg(i * 1000 + j),
                        (_, "HSET") => k.arg(format!("f{j}")).arg(format!("v{i}-{j}")),
                        (_, "ZADD") => k.arg(j).arg(format!("m{i}-{j}")),
                        _ => k.arg(format!("e{i}-{j}")),
                    };
                }
                p.add_command(k).ignore();
            }
        }
        p.query::<()>(&mut c).expect("pipelined collection writes");
    }
    let check = |c: &mut Connection| {
        for chunk in (0..n).collect::<Vec<_>>().chunks(50) {
            let mut p = redis::pipe();
            for &i in chunk {
                for (prefix, _, _, _) in kinds {
                    p.cmd("OBJECT").arg("ENCODING").arg(format!("{prefix}:{i}"));
                }
            }
            let got: Vec<String> = p.query(c).unwrap();
            for (m, enc) in got.iter().enumerate() {
                let (prefix, want, _, _) = kinds[m % kinds.len()];
                assert_eq!(enc, want, "{prefix}:{}", chunk[m / kinds.len()]);
            }
        }
    };
    check(&mut c);
    wait_for_disk_keys(&mut c, (n * kinds.len() / 2) as u64);
    let fields = [
        "tiered_reads",
        "tiered_collection_loads",
        "tiered_collection_offloads",
        "tiered_collection_encodes",
    ];
    // The offloader stopped (and its batch in flight installed): the counts settle.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1gb")
        .query(&mut c)
        .unwrap();
    let mut last = info_u64s(&mut c, "tiered", fields);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = info_u64s(&mut c, "tiered", fields);
        if now == last {
            break;
        }
        last = now;
    }
    let [reads, loads, offloads, encodes] = last;
    assert_eq!(encodes, offloads, "encodes for the collections offloaded");
    check(&mut c);
    let [reads_after, loads_after, ..] = info_u64s(&mut c, "tiered", fields);
    assert_eq!(
        (reads_after, loads_after),
        (reads, loads),
        "OBJECT ENCODING read the disk"
    );
    // Read back, every collection says the same.
    let _: Vec<redis::Value> = (0..n)
        .map(|i| {
            redis::cmd("SCARD")
                .arg(format!("sh:{i}"))
                .query(&mut c)
                .unwrap()
        })
        .collect();
    check(&mut c);
}

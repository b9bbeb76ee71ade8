//! Hashes with field expiries (HEXPIRE family) on SSD: they go to the tier file like any cold
//! collection and read back field for field with their expiries; fields that expire while
//! their hash is on disk are removed by the field sweep (which reads the hash back when the
//! first field is due) with the same `hexpired`/`del` events as in RAM, or on the load a
//! command causes, and are never returned; a hash whose last field expires is deleted; SAVE and
//! a restart, DUMP/RESTORE and HPERSIST keep the expiries exact.
mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

/// Field-TTL hashes per test: about 1.3 KB each (one in ten of 200 fields, a hashtable), so
/// several times the 8 MB maxmemory.
const N: usize = 6_000;

/// Fields of hash `i`: 200 for one in ten (past `hash-max-listpack-entries`), else 20.
fn fields(i: usize) -> usize {
    if i.is_multiple_of(10) {
        200
    } else {
        20
    }
}

/// Field `j`'s value in hash `i`: 40 bytes, distinct.
fn val(i: usize, j: usize) -> String {
    let x = ((i as u64) << 20 | j as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    format!("v{i:06}-{j:03}-{x:016x}-{:09}", x % 1_000_000_000)
}

/// HSETs `h:i` for `keys`; fields f0 and f1 expire at `soon`, f2 at `late`. With `gone`,
/// `g:i` holds three fields that all expire at `soon` (one in ten keys).
fn fill(c: &mut Connection, keys: std::ops::Range<usize>, soon: u64, late: u64, gone: bool) {
    for chunk in keys.collect::<Vec<_>>().chunks(100) {
        let mut p = redis::pipe();
        for &i in chunk {
            let mut h = redis::cmd("HSET");
            h.arg(format!("h:{i}"));
            for j in 0..fields(i) {
                h.arg(format!("f{j}")).arg(val(i, j));
            }
            p.add_command(h).ignore();
            p.cmd("HPEXPIREAT")
                .arg(format!("h:{i}"))
                .arg(soon)
                .arg("FIELDS")
                .arg(2)
                .arg("f0")
                .arg("f1")
                .ignore();
            p.cmd("HPEXPIREAT")
                .arg(format!("h:{i}"))
                .arg(late)
                .arg("FIELDS")
                .arg(1)
                .arg("f2")
                .ignore();
            if gone && i.is_multiple_of(10) {
                p.cmd("HSET")
                    .arg(format!("g:{i}"))
                    .arg("a")
                    .arg(val(i, 1000))
                    .arg("b")
                    .arg(val(i, 1001))
                    .arg("c")
                    .arg(val(i, 1002))
                    .ignore();
                p.cmd("HPEXPIREAT")
                    .arg(format!("g:{i}"))
                    .arg(soon)
                    .arg("FIELDS")
                    .arg(3)
                    .arg("a")
                    .arg("b")
                    .arg("c")
                    .ignore();
            }
        }
        p.query::<()>(c).expect("pipelined hash writes");
    }
}

/// Reads `h:i` for `keys` back: every field exactly, f0/f1 gone when `expired` (else expiring
/// at `soon`), f2 at `late`, the rest without expiry.
fn check(c: &mut Connection, keys: &[usize], soon: u64, late: u64, expired: bool) {
    for chunk in keys.chunks(100) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("HGETALL").arg(format!("h:{i}"));
            p.cmd("HPEXPIRETIME")
                .arg(format!("h:{i}"))
                .arg("FIELDS")
                .arg(4)
                .arg("f0")
                .arg("f1")
                .arg("f2")
                .arg("f3");
        }
        let got: Vec<redis::Value> = p.query(c).expect("pipelined reads");
        for (&i, pair) in chunk.iter().zip(got.chunks(2)) {
            let h: HashMap<String, String> = redis::from_redis_value(&pair[0]).unwrap();
            let ttl: Vec<i64> = redis::from_redis_value(&pair[1]).unwrap();
            let first = if expired { 2 } else { 0 };
            let want: HashMap<String, String> = (first..fields(i))
                .map(|j| (format!("f{j}"), val(i, j)))
                .collect();
            assert_eq!(h, want, "h:{i}");
            let s = if expired { -2 } else { soon as i64 };
            assert_eq!(ttl, vec![s, s, late as i64, -1], "h:{i}");
        }
    }
}

fn wait_for_disk_keys(c: &mut Connection, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
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

/// Waits (up to 60 s) until `want` fields have expired; returns how many did.
fn wait_for_expired_fields(c: &mut Connection, want: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = info_u64(c, "stats", "expired_subkeys");
        assert!(n <= want, "{n} fields expired, more than the {want} set to");
        if n == want || Instant::now() >= deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A connection subscribed to the `hexpired` and `del` events of db 0 and the end marker.
fn listener(port: u16) -> Raw {
    let mut l = Raw::connect(port);
    l.send(&cmd(&[
        b"PSUBSCRIBE",
        b"__keyevent@0__:hexpired",
        b"__keyevent@0__:del",
        KEYSPACE_END.as_bytes(),
    ]));
    for _ in 0..3 {
        l.reply();
    }
    l
}

/// (event, key) -> how many times, for the field-expiry events (`hexpired`, `del`).
fn expiry_events(listener: &mut Raw, port: u16) -> BTreeMap<(String, String), usize> {
    let mut publisher = Raw::connect(port);
    let mut out = BTreeMap::new();
    for (channel, key) in keyspace_messages(listener, &mut publisher) {
        let event = channel.trim_start_matches("__keyevent@0__:").to_string();
        if event == "hexpired" || event == "del" {
            *out.entry((event, key)).or_insert(0) += 1;
        }
    }
    out
}

/// Fills `n` field-TTL hashes (and the `g:` ones whose every field expires), lets the short
/// expiries pass with no command on those keys, and returns the expiry events seen. On a tiered
/// server most hashes are on SSD when their fields come due.
fn expire_untouched(s: &Server, tiered: bool, n: usize) -> BTreeMap<(String, String), usize> {
    let mut c = s.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Ehg")
        .query(&mut c)
        .unwrap();
    let mut l = listener(s.port);
    // Time to fill and offload, on a loaded machine (a write waits for the offloader near
    // maxmemory). That most hashes were on SSD when their fields came due is checked below, by
    // the sweep's loads.
    let soon = now_ms() + 45_000;
    let late = soon + 3_600_000;
    fill(&mut c, 0..n, soon, late, true);
    // An HPEXPIREAT in the past would delete its fields at once (not an expiry).
    assert!(
        now_ms() + 1_000 < soon,
        "filling took too long for the test"
    );
    if tiered {
        wait_for_disk_keys(&mut c, n as u64 / 2);
        // TYPE, EXISTS, TTL and OBJECT ENCODING read no disk.
        let loads = info_u64(&mut c, "tiered", "tiered_collection_loads");
        for i in 0..200usize {
            let k = format!("h:{i}");
            let t: String = redis::cmd("TYPE").arg(&k).query(&mut c).unwrap();
            let e: i64 = redis::cmd("EXISTS").arg(&k).query(&mut c).unwrap();
            let ttl: i64 = redis::cmd("TTL").arg(&k).query(&mut c).unwrap();
            let enc: String = redis::cmd("OBJECT")
                .arg("ENCODING")
                .arg(&k)
                .query(&mut c)
                .unwrap();
            assert_eq!((t.as_str(), e, ttl), ("hash", 1, -1), "{k}");
            let want = if i.is_multiple_of(10) {
                "hashtable"
            } else {
                "listpackex"
            };
            assert_eq!(enc, want, "{k}");
        }
        // (Once fields are due, the sweep's loads count too.)
        if now_ms() < soon {
            assert_eq!(
                info_u64(&mut c, "tiered", "tiered_collection_loads"),
                loads,
                "TYPE/EXISTS/TTL/OBJECT read the disk"
            );
        }
    }
    let expiring = 2 * n as u64 + 3 * (n as u64).div_ceil(10);
    std::thread::sleep(Duration::from_millis(soon.saturating_sub(now_ms())));
    let swept = wait_for_expired_fields(&mut c, expiring);
    assert_eq!(swept, expiring, "the sweep left fields");
    if tiered {
        let loads = info_u64(&mut c, "tiered", "tiered_field_expiry_loads");
        assert!(
            loads >= n as u64 / 4,
            "only {loads} hashes loaded by the sweep"
        );
    }
    let keys: Vec<usize> = (0..n).collect();
    check(&mut c, &keys, soon, late, true);
    for i in (0..n).step_by(10) {
        let all: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(format!("g:{i}"))
            .query(&mut c)
            .unwrap();
        assert!(all.is_empty(), "g:{i}: {all:?}");
        let e: i64 = redis::cmd("EXISTS")
            .arg(format!("g:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(e, 0, "g:{i} outlived its last field");
    }
    let events = expiry_events(&mut l, s.port);
    assert_eq!(info_u64(&mut c, "stats", "expired_subkeys"), expiring);
    events
}

/// The events of hashes whose fields expire on SSD, untouched, are those of the same hashes
/// in RAM: one `hexpired` per hash, and a `del` after it for one left with no field.
#[test]
fn fields_expiring_on_ssd_fire_the_events_fields_in_ram_do_and_are_never_returned() {
    let dir = tempfile::tempdir().unwrap();
    let tiered = tiered_server_with(&dir, "8mb", "1", &["--log_level", "error"]);
    let on_ssd = expire_untouched(&tiered, true, N);
    drop(tiered);
    let ram = Server::start(STRATA, &["--proactor_threads", "1"]);
    let in_ram = expire_untouched(&ram, false, N);
    let mut want = BTreeMap::new();
    for i in 0..N {
        want.insert(("hexpired".to_string(), format!("h:{i}")), 1);
        if i.is_multiple_of(10) {
            want.insert(("hexpired".to_string(), format!("g:{i}")), 1);
            want.insert(("del".to_string(), format!("g:{i}")), 1);
        }
    }
    assert!(in_ram == want, "RAM events differ from the expected ones");
    assert!(on_ssd == in_ram, "SSD events differ from RAM's");
}

/// With the active sweep off, fields that expired while their hash was on SSD go when a command
/// loads it: never in a reply, events fired on the load, the key gone with its last field.
#[test]
fn fields_expired_on_ssd_go_when_a_command_loads_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server_with(&dir, "8mb", "2", &["--log_level", "error"]);
    let mut c = s.client();
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(0)
        .query(&mut c)
        .unwrap();
    // Time to fill and offload on a loaded machine (that the reads below found most hashes on
    // SSD is checked by the loads they caused).
    let soon = now_ms() + 30_000;
    let late = soon + 3_600_000;
    fill(&mut c, 0..N, soon, late, true);
    // An HPEXPIREAT in the past would delete its fields at once (not an expiry).
    assert!(
        now_ms() + 1_000 < soon,
        "filling took too long for the test"
    );
    wait_for_disk_keys(&mut c, N as u64 / 2);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Ehg")
        .query(&mut c)
        .unwrap();
    let mut l = listener(s.port);
    std::thread::sleep(Duration::from_millis(soon.saturating_sub(now_ms()) + 50));
    let loads = info_u64(&mut c, "tiered", "tiered_collection_loads");
    let keys: Vec<usize> = (0..N).collect();
    check(&mut c, &keys, soon, late, true);
    let read = info_u64(&mut c, "tiered", "tiered_collection_loads") - loads;
    assert!(read >= N as u64 / 4, "only {read} hashes read from disk");
    assert_eq!(info_u64(&mut c, "tiered", "tiered_field_expiry_loads"), 0);
    for i in (0..N).step_by(10) {
        let all: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(format!("g:{i}"))
            .query(&mut c)
            .unwrap();
        assert!(all.is_empty(), "g:{i}: {all:?}");
        let e: i64 = redis::cmd("EXISTS")
            .arg(format!("g:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(e, 0, "g:{i}");
    }
    let events = expiry_events(&mut l, s.port);
    for i in 0..N {
        let n = events.get(&("hexpired".to_string(), format!("h:{i}")));
        assert_eq!(n, Some(&1), "h:{i}");
    }
    for i in (0..N).step_by(10) {
        for ev in ["hexpired", "del"] {
            let n = events.get(&(ev.to_string(), format!("g:{i}")));
            assert_eq!(n, Some(&1), "{ev} g:{i}");
        }
    }
    assert_eq!(
        info_u64(&mut c, "stats", "expired_subkeys"),
        2 * N as u64 + 3 * N as u64 / 10
    );
}

/// Offloaded field-TTL hashes go into a snapshot with their expiries, and come back exact after
/// a restart; DUMP of one restores with them; HPERSIST brings one back, it leaves again
/// without that expiry and reads back so.
#[test]
fn field_ttls_on_ssd_survive_save_restart_dump_and_hpersist() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3_000;
    let soon = now_ms() + 3_600_000;
    let late = soon + 3_600_000;
    let start = |dir: &tempfile::TempDir| {
        let d = dir.path().to_str().unwrap().to_string();
        tiered_server_with(
            dir,
            "16mb",
            "2",
            &["--dir", &d, "--dbfilename", "hfe", "--log_level", "error"],
        )
    };
    let keys: Vec<usize> = (0..n).collect();
    {
        let s = start(&dir);
        let mut c = s.client();
        fill(&mut c, 0..n, soon, late, false);
        fill(&mut c, n..3 * n, soon, late, false);
        wait_for_disk_keys(&mut c, n as u64);
        let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
        assert_eq!(
            info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
            0
        );
    }
    let s = start(&dir);
    let mut c = s.client();
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(size, 3 * n as i64);
    wait_for_disk_keys(&mut c, n as u64);
    check(&mut c, &keys, soon, late, false);
    // DUMP of hashes that may be on SSD again, restored under new names.
    for i in (0..n).step_by(97) {
        let payload = dump(&mut c, &format!("h:{i}"));
        restore(&mut c, &format!("copy:{i}"), 0, &payload, &[]).expect("RESTORE");
        let ttl: Vec<i64> = redis::cmd("HPEXPIRETIME")
            .arg(format!("copy:{i}"))
            .arg("FIELDS")
            .arg(3)
            .arg("f0")
            .arg("f2")
            .arg("f3")
            .query(&mut c)
            .unwrap();
        assert_eq!(ttl, vec![soon as i64, late as i64, -1], "copy:{i}");
    }
    // HPERSIST f0 everywhere (each hash loaded, changed, kept in RAM), then push them out again.
    for chunk in keys.chunks(200) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("HPERSIST")
                .arg(format!("h:{i}"))
                .arg("FIELDS")
                .arg(1)
                .arg("f0")
                .ignore();
        }
        p.query::<()>(&mut c).unwrap();
    }
    let offloads = info_u64(&mut c, "tiered", "tiered_collection_offloads");
    fill(&mut c, 3 * n..5 * n, soon, late, false);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_u64(&mut c, "tiered", "tiered_collection_offloads") < offloads + n as u64 {
        assert!(Instant::now() < deadline, "the hashes did not leave again");
        std::thread::sleep(Duration::from_millis(50));
    }
    let loads = info_u64(&mut c, "tiered", "tiered_collection_loads");
    for chunk in keys.chunks(100) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("HPEXPIRETIME")
                .arg(format!("h:{i}"))
                .arg("FIELDS")
                .arg(3)
                .arg("f0")
                .arg("f1")
                .arg("f2");
            p.cmd("HLEN").arg(format!("h:{i}"));
        }
        let got: Vec<redis::Value> = p.query(&mut c).unwrap();
        for (&i, pair) in chunk.iter().zip(got.chunks(2)) {
            let ttl: Vec<i64> = redis::from_redis_value(&pair[0]).unwrap();
            let len: usize = redis::from_redis_value(&pair[1]).unwrap();
            assert_eq!(ttl, vec![-1, soon as i64, late as i64], "h:{i}");
            assert_eq!(len, fields(i), "h:{i}");
        }
    }
    let read = info_u64(&mut c, "tiered", "tiered_collection_loads") - loads;
    assert!(read > 0, "none of the hashes was read back from disk");
}

/// SWAPDBs while the field sweep reads due hashes back from SSD: a hash moved to the other db
/// during its read is loaded there, so every due field still expires actively (none is left
/// to expire lazily, which untouched hashes never do).
#[test]
fn swapdb_while_the_sweep_reads_hashes_back_loses_no_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server(&dir, "8mb", "1");
    let mut c = s.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]);
    let n = N / 2;
    let soon = now_ms() + 30_000;
    let late = soon + 3_600_000;
    fill(&mut c, 0..n, soon, late, false);
    assert!(
        now_ms() + 1_000 < soon,
        "filling took too long for the test"
    );
    wait_for_disk_keys(&mut c, n as u64 / 2);
    std::thread::sleep(Duration::from_millis(soon.saturating_sub(now_ms())));
    // SWAPDB as fast as it goes while the sweep works (an odd count leaves the hashes in db 1).
    let expiring = 2 * n as u64;
    let mut swaps = 0u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_u64(&mut c, "stats", "expired_subkeys") < expiring && Instant::now() < deadline {
        for _ in 0..50 {
            let _: () = redis::cmd("SWAPDB").arg(0).arg(1).query(&mut c).unwrap();
            swaps += 1;
        }
    }
    let swept = wait_for_expired_fields(&mut c, expiring);
    let loads = info_u64(&mut c, "tiered", "tiered_field_expiry_loads");
    assert_eq!(
        swept, expiring,
        "the sweep left fields ({swaps} swaps, {loads} loads)"
    );
    assert!(
        loads >= n as u64 / 4,
        "only {loads} hashes loaded by the sweep"
    );
    if swaps % 2 == 1 {
        let _: () = redis::cmd("SWAPDB").arg(0).arg(1).query(&mut c).unwrap();
    }
    let keys: Vec<usize> = (0..n).collect();
    check(&mut c, &keys, soon, late, true);
}

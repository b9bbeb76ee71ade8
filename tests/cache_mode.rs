//! Cache mode end to end: eviction instead of -OOM, RSS within bound, hot keys surviving a scan,
//! RAM → SSD → gone with tiering, eviction racing SSD reads and expiry, live maxmemory changes;
//! and store mode's -OOM that loses nothing.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

/// A value that names its key, so any version read back can be checked.
fn value_of(key: &str, len: usize) -> Vec<u8> {
    key.as_bytes().iter().copied().cycle().take(len).collect()
}

/// A cache-mode server on `threads` cores with `maxmemory`, plus `extra` flags.
fn cache(threads: &str, maxmemory: &str, extra: &[&str]) -> Server {
    let mut args = vec![
        "--proactor_threads",
        threads,
        "--cache_mode",
        "--maxmemory",
        maxmemory,
    ];
    args.extend_from_slice(extra);
    Server::start(STRATA, &args)
}

/// A cache-mode server with tiering (files under `dir`).
fn tiered_cache(dir: &tempfile::TempDir, threads: &str, maxmemory: &str, tier: &str) -> Server {
    tiered_cache_with(dir, threads, maxmemory, tier, &[])
}

/// [`tiered_cache`] plus `extra` flags.
fn tiered_cache_with(
    dir: &tempfile::TempDir,
    threads: &str,
    maxmemory: &str,
    tier: &str,
    extra: &[&str],
) -> Server {
    let prefix = dir.path().join("t");
    let mut args = vec![
        "--tiered_prefix",
        prefix.to_str().unwrap(),
        "--tiered_max_file_size",
        tier,
    ];
    args.extend_from_slice(extra);
    cache(threads, maxmemory, &args)
}

/// Writes keys `prefix:{from..to}` with `len`-byte values in pipelines; panics on any error.
fn write(c: &mut Connection, prefix: &str, from: usize, to: usize, len: usize) {
    let mut p = redis::pipe();
    for i in from..to {
        let k = format!("{prefix}:{i}");
        p.cmd("SET").arg(&k).arg(value_of(&k, len)).ignore();
        if i % 200 == 199 || i + 1 == to {
            let r: redis::RedisResult<()> = p.query(c);
            if let Err(e) = r {
                panic!("write of {k} failed: {e}");
            }
            p = redis::pipe();
        }
    }
}

#[test]
fn cache_mode_never_refuses_writes_and_keeps_rss_within_bound() {
    let s = cache("1", "48mb", &[]);
    let max = 48u64 << 20;
    let mut c = s.client();
    assert_eq!(
        info_str(&mut c, "memory", "maxmemory_policy"),
        "allkeys-lfu"
    );
    let rss = rss_sampler(s.pid());
    // Ten times maxmemory.
    write(&mut c, "w", 0, 120_000, 4096);
    assert_peak_rss_within(rss, max);
    // Both counters from one reply: eviction may still be going on in the background.
    let [evicted, evicted_ram] = info_u64s(&mut c, "stats", ["evicted_keys", "evicted_keys_ram"]);
    assert!(evicted > 100_000, "evicted {evicted}");
    assert_eq!(evicted_ram, evicted);
    assert!(info_u64(&mut c, "memory", "used_memory") <= max);
    // What is left reads back intact, and nearly all the newest keys are there (among keys
    // of equal frequency, eviction prefers the longest idle, at one-second resolution).
    let size: usize = q(&mut c, &["DBSIZE"]);
    assert!(size > 5_000, "only {size} keys left");
    let mut present = 0;
    for i in 119_900..120_000 {
        let k = format!("w:{i}");
        let v: Option<Vec<u8>> = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
        if let Some(v) = v {
            assert_eq!(v, value_of(&k, 4096), "{k}");
            present += 1;
        }
    }
    assert!(
        present >= 80,
        "only {present} of the 100 newest keys are there"
    );
}

#[test]
fn store_mode_answers_oom_and_loses_nothing() {
    // The owned RSS beyond what is allocated (stacks, rings, allocator slack; not the debug
    // binary's file pages) must stay under a third of maxmemory for RSS to stay within it.
    let s = Server::start(STRATA, &["--proactor_threads", "1", "--maxmemory", "48mb"]);
    let mut c = s.client();
    let rss = rss_sampler(s.pid());
    let mut stored = 0;
    loop {
        let k = format!("s:{stored}");
        let r: redis::RedisResult<()> = redis::cmd("SET")
            .arg(&k)
            .arg(value_of(&k, 4096))
            .query(&mut c);
        match r {
            Ok(()) => stored += 1,
            Err(e) => {
                assert!(e.to_string().contains("OOM"), "{e}");
                break;
            }
        }
        assert!(
            stored < 20_000,
            "no OOM after {stored} writes of 4 KiB into 48 MB"
        );
    }
    assert!(stored > 1000);
    // RAM is bounded by RSS, not only by the allocator's count.
    let max = 48u64 << 20;
    assert_peak_rss_within(rss, max);
    let mut raw = s.raw();
    rt(
        &mut raw,
        &["SET", "one-more", "x"],
        &e("OOM command not allowed when used memory > 'maxmemory'."),
    );
    // Reads and deletes still work, and every stored key is intact.
    assert_eq!(q::<usize>(&mut c, &["DBSIZE"]), stored);
    for i in 0..stored {
        let k = format!("s:{i}");
        let v: Vec<u8> = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
        assert_eq!(v, value_of(&k, 4096));
    }
    assert_eq!(info_u64(&mut c, "stats", "evicted_keys"), 0);
}

#[test]
fn hot_keys_survive_a_scan() {
    let s = cache("1", "32mb", &[]);
    let mut c = s.client();
    write(&mut c, "hot", 0, 5_000, 1024);
    for _ in 0..3 {
        let mut p = redis::pipe();
        for i in 0..5_000 {
            p.cmd("GET").arg(format!("hot:{i}"));
        }
        let got: Vec<Option<Vec<u8>>> = p.query(&mut c).unwrap();
        assert!(got.iter().all(|v| v.is_some()));
    }
    // A one-off sweep of five times the memory, never read again.
    write(&mut c, "scan", 0, 150_000, 1024);
    assert!(info_u64(&mut c, "stats", "evicted_keys") > 100_000);
    let mut p = redis::pipe();
    for i in 0..5_000 {
        p.cmd("EXISTS").arg(format!("hot:{i}"));
    }
    let left: Vec<u32> = p.query(&mut c).unwrap();
    let left: u32 = left.iter().sum();
    assert!(
        left >= 4_900,
        "only {left} of 5000 hot keys survived the scan"
    );
}

#[test]
fn an_evicted_key_that_comes_back_resumes_its_access_count() {
    let s = cache("1", "8mb", &[]);
    let mut c = s.client();
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let _: Option<String> = redis::cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "FREQ", "k"]), 6);
    // Keys read three times each push it out: it is the least read.
    let mut i = 0;
    while q::<u32>(&mut c, &["EXISTS", "k"]) == 1 {
        let mut p = redis::pipe();
        for _ in 0..200 {
            let key = format!("f:{i}");
            p.cmd("SET").arg(&key).arg(value_of(&key, 1000)).ignore();
            for _ in 0..3 {
                p.cmd("GET").arg(&key).ignore();
            }
            i += 1;
        }
        let () = p.query(&mut c).unwrap();
        assert!(i < 200_000, "k was never evicted");
    }
    // Back, it starts from the one read it had (a new key starts at 5). SET and OBJECT FREQ in
    // one pipeline, which one core runs as one batch: the cache is full of keys read more
    // often, so the heartbeat could evict the key again between two round trips.
    let freq_after_set = |c: &mut Connection, key: &str| -> i64 {
        let (freq,): (i64,) = redis::pipe()
            .cmd("SET")
            .arg(key)
            .arg("v")
            .ignore()
            .cmd("OBJECT")
            .arg("FREQ")
            .arg(key)
            .query(c)
            .unwrap();
        freq
    };
    assert_eq!(freq_after_set(&mut c, "k"), 6);
    assert_eq!(freq_after_set(&mut c, "new"), 5);
}

#[test]
fn with_tiering_entries_go_ram_then_ssd_then_gone() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_cache(&dir, "1", "48mb", "64mb");
    let mut c = s.client();
    // 60 MB: more than RAM, less than RAM + SSD: values move to SSD, nothing is dropped.
    write(&mut c, "t", 0, 60_000, 1000);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_u64(&mut c, "tiered", "tiered_disk_keys") < 10_000 {
        assert!(Instant::now() < deadline, "values did not move to SSD");
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_u64(&mut c, "stats", "evicted_keys"), 0);
    assert_eq!(q::<usize>(&mut c, &["DBSIZE"]), 60_000);
    // 160 MB more: the SSD budget fills and the coldest entries are dropped, from SSD. RAM
    // stays within bound while the file churns: space freed on SSD is written again at once
    // (it used to wait for a hole punch per page, which let freed pages and the tasks waiting
    // on them pile up past maxmemory).
    let rss = rss_sampler(s.pid());
    write(&mut c, "t", 60_000, 220_000, 1000);
    let max = 48u64 << 20;
    assert_peak_rss_within(rss, max);
    assert!(info_u64(&mut c, "memory", "used_memory") <= max);
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_u64(&mut c, "stats", "evicted_keys_ssd") == 0 {
        assert!(Instant::now() < deadline, "nothing was dropped from SSD");
        thread::sleep(Duration::from_millis(50));
    }
    let ssd = info_u64(&mut c, "stats", "evicted_keys_ssd");
    let ram = info_u64(&mut c, "stats", "evicted_keys_ram");
    assert!(ssd > ram, "dropped {ram} from RAM but only {ssd} from SSD");
    let cap = 64u64 << 20;
    assert!(info_u64(&mut c, "tiered", "tiered_file_used") <= cap);
    // The newest keys are there and intact; the oldest are gone.
    for i in 219_900..220_000 {
        let k = format!("t:{i}");
        let v: Option<Vec<u8>> = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
        assert_eq!(v, Some(value_of(&k, 1000)), "{k}");
    }
    let oldest: u32 = (0..1000)
        .map(|i| q::<u32>(&mut c, &["EXISTS", &format!("t:{i}")]))
        .sum();
    assert!(
        oldest < 500,
        "{oldest} of the 1000 oldest keys are still there"
    );
}

#[test]
fn compression_lets_the_ssd_tier_hold_more_of_the_data() {
    // The same writes into the same RAM and tier budget, values stored as they are and with
    // zstd: compressed, the tier keeps several times the keys, and every one reads back whole.
    let mut held = Vec::new();
    for codec in ["none", "zstd"] {
        let dir = tempfile::tempdir().unwrap();
        let s = tiered_cache_with(&dir, "1", "48mb", "32mb", &["--tiered_compression", codec]);
        let mut c = s.client();
        let rss = rss_sampler(s.pid());
        write(&mut c, "t", 0, 150_000, 1000);
        assert_peak_rss_within(rss, 48 << 20);
        assert!(info_u64(&mut c, "tiered", "tiered_file_used") <= 32 << 20);
        let keys = q::<u64>(&mut c, &["DBSIZE"]);
        let newest: Vec<String> = (149_000..150_000).map(|i| format!("t:{i}")).collect();
        read_all(&mut c, &newest);
        held.push((keys, info_u64(&mut c, "tiered", "tiered_disk_keys")));
    }
    let ((all_raw, disk_raw), (all_z, disk_z)) = (held[0], held[1]);
    assert!(
        disk_z > 2 * disk_raw,
        "SSD keys: {disk_z} compressed, {disk_raw} raw"
    );
    assert!(
        all_z > all_raw + disk_raw,
        "keys held: {all_z} compressed, {all_raw} raw"
    );
}

/// Reads of `keys` (pipelined); every value found must be the one written.
fn read_all(c: &mut Connection, keys: &[String]) {
    let mut p = redis::pipe();
    for k in keys {
        p.cmd("GET").arg(k);
    }
    let got: Vec<Option<Vec<u8>>> = p.query(c).unwrap();
    for (k, v) in keys.iter().zip(got) {
        if let Some(v) = v {
            assert_eq!(v, value_of(k, 1000), "{k}");
        }
    }
}

#[test]
fn a_full_ssd_tier_is_reclaimed_by_page_keeping_the_most_read_values() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_cache(&dir, "1", "24mb", "32mb");
    let mut c = s.client();
    let keys = |p: &str| -> Vec<String> { (0..2000).map(|i| format!("{p}:{i}")).collect() };
    // Hot keys are read all along; warm keys four times at the start, then never again.
    let (hot, warm) = (keys("h"), keys("w"));
    write(&mut c, "h", 0, 2000, 1000);
    write(&mut c, "w", 0, 2000, 1000);
    for _ in 0..4 {
        read_all(&mut c, &warm);
    }
    // Ten times the SSD budget of one-off keys.
    for round in 0..40 {
        write(&mut c, "cold", round * 8000, (round + 1) * 8000, 1000);
        read_all(&mut c, &hot);
    }
    // An LFU over the file: keys read more than the one-off ones stay, read lately or not.
    for (name, set) in [("hot", &hot), ("warm", &warm)] {
        let kept: u32 = set.iter().map(|k| q::<u32>(&mut c, &["EXISTS", k])).sum();
        assert!(kept >= 1900, "only {kept} of 2000 {name} keys survived");
    }
    read_all(&mut c, &warm);
    assert!(info_u64(&mut c, "stats", "evicted_keys_ssd") > 100_000);
    // Whole pages come back, so the file stays dense: 1000-byte values run on across page
    // boundaries, about four to a page. Reclaim runs in the background: give it a moment
    // after the last write.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let entries = info_u64(&mut c, "tiered", "tiered_entries");
        let pages = info_u64(&mut c, "tiered", "tiered_small_pages");
        if entries * 10 >= pages * 32 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{entries} values in {pages} pages"
        );
        thread::sleep(Duration::from_millis(100));
    }
    assert!(info_u64(&mut c, "tiered", "tiered_file_used") <= 32 << 20);
    assert_eq!(info_u64(&mut c, "tiered", "tiered_read_errors"), 0);
}

#[test]
fn eviction_races_ssd_reads_and_expiry_without_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_cache(&dir, "2", "24mb", "16mb");
    let stop = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for w in 0..4u64 {
        let (stop, bad, reads) = (stop.clone(), bad.clone(), reads.clone());
        let mut c = s.client();
        workers.push(thread::spawn(move || {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ (w + 1);
            while !stop.load(Ordering::Relaxed) {
                let mut p = redis::pipe();
                let mut keys = Vec::with_capacity(64);
                for j in 0..64u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let n = x % 80_000;
                    let k = format!("r:{n}");
                    match (j + w) % 4 {
                        0 => p
                            .cmd("SET")
                            .arg(&k)
                            .arg(value_of(&k, 900))
                            .arg("PX")
                            .arg(50 + n % 400),
                        1 => p.cmd("SET").arg(&k).arg(value_of(&k, 900)),
                        _ => p.cmd("GET").arg(&k),
                    };
                    keys.push(k);
                }
                let replies: Vec<redis::Value> = p.query(&mut c).expect("pipeline");
                for (r, k) in replies.into_iter().zip(keys) {
                    match r {
                        redis::Value::BulkString(v) => {
                            reads.fetch_add(1, Ordering::Relaxed);
                            if v != value_of(&k, 900) {
                                bad.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        redis::Value::Nil | redis::Value::Okay => {}
                        other => panic!("unexpected reply {other:?}"),
                    }
                }
            }
        }));
    }
    // Run until eviction, SSD reads and expiry have all happened for a while (a slow machine
    // takes longer), then stop.
    let mut c = s.client();
    let started = Instant::now();
    let mut all_seen_at = None;
    loop {
        thread::sleep(Duration::from_millis(200));
        let seen = info_u64(&mut c, "stats", "evicted_keys") > 0
            && info_u64(&mut c, "tiered", "tiered_reads") > 0
            && info_u64(&mut c, "stats", "expired_keys") > 0;
        if seen && all_seen_at.is_none() {
            all_seen_at = Some(Instant::now());
        }
        if all_seen_at.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no eviction, SSD read and expiry within a minute"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(bad.load(Ordering::Relaxed), 0, "wrong values read");
    assert!(
        reads.load(Ordering::Relaxed) > 1000,
        "only {} hits",
        reads.load(Ordering::Relaxed)
    );
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn config_set_maxmemory_shrinks_the_cache_live() {
    let s = cache("2", "64mb", &[]);
    let mut c = s.client();
    write(&mut c, "m", 0, 50_000, 1024);
    assert!(info_u64(&mut c, "memory", "used_memory") > 40 << 20);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("16mb")
        .query(&mut c)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_u64(&mut c, "memory", "used_memory") > 16 << 20 {
        assert!(Instant::now() < deadline, "the cache did not shrink");
        thread::sleep(Duration::from_millis(50));
    }
    let left: usize = q(&mut c, &["DBSIZE"]);
    assert!(left < 16_000 && left > 3_000, "{left} keys left");
    // And grows again: writes are taken without eviction while there is room.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("64mb")
        .query(&mut c)
        .unwrap();
    let before = info_u64(&mut c, "stats", "evicted_keys");
    write(&mut c, "g", 0, 10_000, 1024);
    assert_eq!(info_u64(&mut c, "stats", "evicted_keys"), before);
}

#[test]
fn a_save_under_a_write_burst_keeps_the_cache_and_rss_within_bound() {
    let dir = tempfile::tempdir().unwrap();
    let s = cache(
        "1",
        "48mb",
        &[
            "--dir",
            dir.path().to_str().unwrap(),
            "--snapshot_compression",
            "none",
            // ~40 MB of values at 5 MB/s: the save runs for seconds, under the writes below.
            "--snapshot_throttle_mb",
            "5",
        ],
    );
    let max = 48u64 << 20;
    let mut c = s.client();
    // A full cache.
    write(&mut c, "a", 0, 60_000, 1000);
    let before: usize = q(&mut c, &["DBSIZE"]);
    assert!(before > 20_000, "only {before} keys before the save");
    let rss = rss_sampler(s.pid());
    let _: String = q(&mut c, &["BGSAVE"]);
    // As much again of new keys while the save runs (the writers wait for it at times, so
    // they may end with it: what matters is that they ran under it).
    write(&mut c, "b", 0, 200, 1000);
    assert_eq!(
        info_u64(&mut c, "persistence", "rdb_bgsave_in_progress"),
        1,
        "the save ended before the writes: it did not run under them"
    );
    write(&mut c, "b", 200, 30_000, 1000);
    // Evicting what the snapshot has not reached frees nothing until it is written: eviction
    // used to go on until the table was nearly empty (40 keys of 40,000 were left).
    let during: usize = q(&mut c, &["DBSIZE"]);
    assert!(
        during * 2 >= before,
        "{during} keys left of {before} after writes during the save"
    );
    write(&mut c, "b", 30_000, 60_000, 1000);
    assert_peak_rss_within(rss, max);
    // The save completes with the keys as they were when it began.
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_u64(&mut c, "persistence", "rdb_bgsave_in_progress") == 1 {
        assert!(Instant::now() < deadline, "the save did not finish");
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        info_str(&mut c, "persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    // Point in time: the keys of when it began, not those written or evicted since (the
    // background eviction may still take a few between DBSIZE and BGSAVE).
    let saved = info_u64(&mut c, "persistence", "rdb_last_save_keys") as usize;
    assert!(
        saved <= before && saved * 100 >= before * 98,
        "saved {saved} keys; {before} were there when the save began"
    );
    // What is there is intact, and most of the newest keys are (during the save, eviction
    // chooses among the entries the snapshot already has, new keys among them).
    let mut present = 0;
    for i in 59_000..60_000 {
        let k = format!("b:{i}");
        let v: Option<Vec<u8>> = redis::cmd("GET").arg(&k).query(&mut c).unwrap();
        if let Some(v) = v {
            assert_eq!(v, value_of(&k, 1000), "{k}");
            present += 1;
        }
    }
    assert!(present >= 800, "only {present} of the 1000 newest keys");
}

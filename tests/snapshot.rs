//! Snapshots end to end: SAVE/BGSAVE/SHUTDOWN/SIGTERM, restart from the snapshot (also on another
//! thread count), point-in-time under writes, crash safety, refusal of damaged files, and
//! Redis RDB both ways against the real redis-server.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

/// A server saving to and loading from `dir`.
fn server_in(dir: &Path, threads: usize, extra: &[&str]) -> Server {
    let t = threads.to_string();
    let mut args = vec!["--dir", dir.to_str().unwrap(), "--proactor_threads", &t];
    args.extend_from_slice(extra);
    Server::start(STRATA, &args)
}

/// A 2-thread server whose saves are capped at `mb` MB/s, uncompressed: saves take seconds.
fn slow_saver(dir: &Path, mb: u32) -> Server {
    let mb = mb.to_string();
    server_in(
        dir,
        2,
        &[
            "--snapshot_throttle_mb",
            &mb,
            "--snapshot_compression",
            "none",
        ],
    )
}

/// Waits (up to 90 s) until no save is in progress.
fn wait_for_save(c: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while info_u64(c, "persistence", "rdb_bgsave_in_progress") == 1 {
        assert!(Instant::now() < deadline, "the save did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Binary-safe value for key `i`: every byte value appears, some values are 100 KB.
fn value(i: usize) -> Vec<u8> {
    let len = match i % 50 {
        0 => 100_000,
        1 => 0,
        _ => 1 + (i * 37) % 700,
    };
    (0..len).map(|j| ((i * 131 + j * 7) % 256) as u8).collect()
}

/// (db, key) -> (value, has a TTL): what the server should hold.
type Model = BTreeMap<(u32, Vec<u8>), (Vec<u8>, bool)>;

/// Fills dbs 0 and 3 with `n` keys each (binary values, some with TTLs); returns the model.
fn populate(c: &mut Connection, n: usize) -> Model {
    let mut model = BTreeMap::new();
    for db in [0u32, 3] {
        let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
        let mut pipe = redis::pipe();
        for i in 0..n {
            let key = format!("k:{db}:{i}").into_bytes();
            let v = value(i + db as usize);
            let ttl = i % 7 == 0;
            if ttl {
                pipe.cmd("SET")
                    .arg(&key)
                    .arg(&v)
                    .arg("PX")
                    .arg(3_600_000)
                    .ignore();
            } else {
                pipe.cmd("SET").arg(&key).arg(&v).ignore();
            }
            model.insert((db, key), (v, ttl));
        }
        let _: () = pipe.query(c).unwrap();
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).unwrap();
    model
}

/// Asserts the server holds exactly `model` (values byte for byte, TTL present or not).
fn check(c: &mut Connection, model: &Model) {
    for db in [0u32, 3] {
        let _: () = redis::cmd("SELECT").arg(db).query(c).unwrap();
        let want = model.keys().filter(|(d, _)| *d == db).count();
        let size: usize = q(c, &["DBSIZE"]);
        assert_eq!(size, want, "DBSIZE of db {db}");
        for ((d, k), (v, ttl)) in model.iter().filter(|((d, _), _)| *d == db) {
            let got: Option<Vec<u8>> = redis::cmd("GET").arg(k).query(c).unwrap();
            assert_eq!(
                got.as_ref(),
                Some(v),
                "db {d} key {}",
                String::from_utf8_lossy(k)
            );
            let pttl: i64 = redis::cmd("PTTL").arg(k).query(c).unwrap();
            if *ttl {
                assert!(pttl > 3_000_000 && pttl <= 3_600_000, "PTTL {pttl}");
            } else {
                assert_eq!(pttl, -1);
            }
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(c).unwrap();
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

fn shard_files(dir: &Path) -> Vec<PathBuf> {
    files(dir)
        .into_iter()
        .filter(|n| n.ends_with(".strata") && !n.contains("summary"))
        .map(|n| dir.join(n))
        .collect()
}

#[test]
fn save_and_restart_keep_every_key_on_1_and_3_threads_and_across_thread_counts() {
    for (save_threads, load_threads) in [(1, 1), (3, 3), (3, 1), (1, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let model = {
            let s = server_in(dir.path(), save_threads, &[]);
            let mut c = s.client();
            let model = populate(&mut c, 600);
            assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
            assert_eq!(info_u64(&mut c, "persistence", "rdb_last_save_keys"), 1200);
            assert_eq!(
                info_str(&mut c, "persistence", "rdb_last_bgsave_status"),
                "ok"
            );
            assert_eq!(
                info_u64(&mut c, "persistence", "rdb_changes_since_last_save"),
                0
            );
            model
        };
        let names = files(dir.path());
        assert!(
            names.contains(&"dump-summary.strata".to_string()),
            "{names:?}"
        );
        assert_eq!(shard_files(dir.path()).len(), save_threads, "{names:?}");
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
        let s = server_in(dir.path(), load_threads, &[]);
        let mut c = s.client();
        check(&mut c, &model);
        assert_eq!(
            info_u64(&mut c, "persistence", "rdb_last_load_keys_loaded"),
            1200
        );
    }
}

#[test]
fn bgsave_runs_in_the_background_and_refuses_a_second_one() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MB/s: the save of ~6 MB takes seconds.
    let s = slow_saver(dir.path(), 1);
    let mut c = s.client();
    let model = populate(&mut c, 3000);
    let before: u64 = q(&mut c, &["LASTSAVE"]);
    let mut raw = s.raw();
    rt(&mut raw, &["BGSAVE"], "+Background saving started\r\n");
    rt(
        &mut raw,
        &["BGSAVE"],
        "-ERR Background save already in progress\r\n",
    );
    rt(
        &mut raw,
        &["SAVE"],
        "-ERR Background save already in progress\r\n",
    );
    rt(
        &mut raw,
        &["BGSAVE", "SCHEDULE"],
        "+Background saving scheduled\r\n",
    );
    assert_eq!(info_u64(&mut c, "persistence", "rdb_bgsave_in_progress"), 1);
    // The server keeps serving while it saves.
    rt(&mut raw, &["SET", "during", "x"], OK);
    let got: Vec<u8> = redis::cmd("GET").arg("k:0:5").query(&mut c).unwrap();
    assert_eq!(got, value(5));
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_u64(&mut c, "persistence", "rdb_saves") < 2 {
        assert!(Instant::now() < deadline, "saves did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(info_u64(&mut c, "persistence", "rdb_bgsave_in_progress"), 0);
    let after: u64 = q(&mut c, &["LASTSAVE"]);
    assert!(after >= before);
    drop(s);
    let s = server_in(dir.path(), 1, &[]);
    let mut c = s.client();
    let got: Option<String> = redis::cmd("GET").arg("during").query(&mut c).unwrap();
    assert_eq!(
        got.as_deref(),
        Some("x"),
        "the scheduled save ran after the write"
    );
    let _: () = redis::cmd("DEL").arg("during").query(&mut c).unwrap();
    check(&mut c, &model);
}

#[test]
fn a_save_is_point_in_time_under_concurrent_writes() {
    let dir = tempfile::tempdir().unwrap();
    let s = slow_saver(dir.path(), 2);
    let mut c = s.client();
    let model = populate(&mut c, 3000);
    let mut raw = s.raw();
    rt(&mut raw, &["BGSAVE"], "+Background saving started\r\n");
    // Change everything while the save runs: overwrite, delete, expire, add, flush db 3.
    let mut pipe = redis::pipe();
    for i in 0..3000 {
        let k = format!("k:0:{i}");
        match i % 4 {
            0 => pipe.cmd("SET").arg(&k).arg("changed").ignore(),
            1 => pipe.cmd("DEL").arg(&k).ignore(),
            2 => pipe.cmd("APPEND").arg(&k).arg("more").ignore(),
            _ => pipe.cmd("SET").arg(format!("new:{i}")).arg("n").ignore(),
        };
    }
    let _: () = pipe.query(&mut c).unwrap();
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHDB").query(&mut c).unwrap();
    let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
    assert_eq!(
        info_u64(&mut c, "persistence", "rdb_bgsave_in_progress"),
        1,
        "the save ended too early to test anything"
    );
    wait_for_save(&mut c);
    assert_eq!(
        info_str(&mut c, "persistence", "rdb_last_bgsave_status"),
        "ok"
    );
    assert_eq!(
        info_u64(&mut c, "persistence", "rdb_last_save_keys"),
        model.len() as u64,
        "keys saved"
    );
    drop(s);
    let s = server_in(dir.path(), 2, &[]);
    check(&mut s.client(), &model);
}

#[test]
fn crash_during_bgsave_leaves_the_previous_snapshot_loadable() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = slow_saver(dir.path(), 1);
    let mut c = s.client();
    let model = populate(&mut c, 2000);
    assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    for i in 0..2000 {
        let _: () = redis::cmd("SET")
            .arg(format!("k:0:{i}"))
            .arg("v2")
            .query(&mut c)
            .unwrap();
    }
    let mut raw = s.raw();
    rt(&mut raw, &["BGSAVE"], "+Background saving started\r\n");
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(info_u64(&mut c, "persistence", "rdb_bgsave_in_progress"), 1);
    s.crash();
    assert!(files(dir.path()).iter().any(|n| n.ends_with(".tmp")));
    let s = server_in(dir.path(), 2, &[]);
    check(&mut s.client(), &model);
    let left = files(dir.path());
    assert!(!left.iter().any(|n| n.ends_with(".tmp")), "{left:?}");
}

/// Starts strata on `dir` expecting it to refuse; returns its stderr.
fn refused(dir: &Path, extra: &[&str]) -> String {
    let mut args = vec!["--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    startup_error(STRATA, &args)
}

#[test]
fn truncated_or_flipped_snapshot_files_are_refused_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), 1, &["--snapshot_compression", "none"]);
        let mut c = s.client();
        populate(&mut c, 500);
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    let file = shard_files(dir.path()).pop().unwrap();
    let good = std::fs::read(&file).unwrap();
    let name = file.file_name().unwrap().to_string_lossy().to_string();

    // A flipped bit in the middle of the data.
    let mut bad = good.clone();
    let at = bad.len() / 2;
    bad[at] ^= 0x10;
    std::fs::write(&file, &bad).unwrap();
    let err = refused(dir.path(), &[]);
    assert!(err.contains(&name) && err.contains("offset"), "{err}");

    // Cut short.
    std::fs::write(&file, &good[..good.len() * 2 / 3]).unwrap();
    let err = refused(dir.path(), &[]);
    assert!(err.contains(&name) && err.contains("offset"), "{err}");

    // --load_partial starts with what could be read.
    let s = server_in(dir.path(), 1, &["--load_partial"]);
    let mut c = s.client();
    let n: u64 = q(&mut c, &["DBSIZE"]);
    assert!(n > 0, "no keys from the readable part");

    // The intact file loads again.
    drop(s);
    std::fs::write(&file, &good).unwrap();
    let s = server_in(dir.path(), 1, &[]);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), 500);
}

#[test]
fn keys_that_expire_while_offline_are_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), 1, &[]);
        let mut raw = s.raw();
        rt(&mut raw, &["SET", "short", "v", "PX", "600"], OK);
        rt(&mut raw, &["SET", "long", "v", "EX", "1000"], OK);
        rt(&mut raw, &["SAVE"], OK);
    }
    std::thread::sleep(Duration::from_millis(800));
    let s = server_in(dir.path(), 1, &[]);
    let mut raw = s.raw();
    rt(&mut raw, &["EXISTS", "short", "long"], &i(1));
    let mut c = s.client();
    assert_eq!(
        info_u64(&mut c, "persistence", "rdb_last_load_keys_expired"),
        1
    );
}

#[test]
fn shutdown_and_sigterm_save_nosave_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = server_in(dir.path(), 2, &[]);
    let mut raw = s.raw();
    rt(&mut raw, &["SET", "a", "1"], OK);
    raw.send(&cmd(&[b"SHUTDOWN"]));
    assert!(s.wait_exit(Duration::from_secs(20)));
    let mut s = server_in(dir.path(), 2, &[]);
    let mut raw = s.raw();
    rt(&mut raw, &["GET", "a"], &b("1"));
    rt(&mut raw, &["SET", "b", "2"], OK);
    s.terminate();
    assert!(s.wait_exit(Duration::from_secs(20)));
    let mut s = server_in(dir.path(), 2, &[]);
    let mut raw = s.raw();
    rt(&mut raw, &["GET", "b"], &b("2"));
    rt(&mut raw, &["SET", "c", "3"], OK);
    raw.send(&cmd(&[b"SHUTDOWN", b"NOSAVE"]));
    assert!(s.wait_exit(Duration::from_secs(20)));
    let s = server_in(dir.path(), 2, &[]);
    let mut raw = s.raw();
    rt(&mut raw, &["EXISTS", "a", "b", "c"], &i(2));
}

#[test]
fn timestamped_names_keep_history_and_the_newest_loads() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--dbfilename", "snap-{timestamp}"];
    {
        let s = server_in(dir.path(), 1, &flags);
        let mut raw = s.raw();
        rt(&mut raw, &["SET", "v", "1"], OK);
        rt(&mut raw, &["SAVE"], OK);
        std::thread::sleep(Duration::from_millis(1100));
        rt(&mut raw, &["SET", "v", "2"], OK);
        rt(&mut raw, &["SAVE"], OK);
    }
    let summaries = files(dir.path())
        .into_iter()
        .filter(|n| n.starts_with("snap-") && n.ends_with("-summary.strata"))
        .count();
    assert_eq!(summaries, 2);
    let s = server_in(dir.path(), 1, &flags);
    let mut raw = s.raw();
    rt(&mut raw, &["GET", "v"], &b("2"));
    let mut c = s.client();
    let cfg: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dbfilename")
        .query(&mut c)
        .unwrap();
    assert_eq!(cfg, vec!["dbfilename", "snap-{timestamp}"]);
}

#[test]
fn a_snapshot_larger_than_maxmemory_needs_tiering() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), 1, &[]);
        let mut c = s.client();
        let _: () = redis::cmd("DEBUG")
            .arg("POPULATE")
            .arg(120_000)
            .arg("big")
            .arg(1024)
            .query(&mut c)
            .unwrap();
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    // 125 MB of values: 2.5 times maxmemory.
    let err = refused(dir.path(), &["--maxmemory", "48mb"]);
    assert!(
        err.contains("does not fit") && err.contains("--tiered_prefix"),
        "{err}"
    );
    let tier = tempfile::tempdir().unwrap();
    let prefix = tier.path().join("t");
    let mut s = Server::spawn(
        STRATA,
        &[
            "--dir",
            dir.path().to_str().unwrap(),
            "--proactor_threads",
            "1",
            "--maxmemory",
            "48mb",
            "--tiered_prefix",
            prefix.to_str().unwrap(),
        ],
    );
    // The memory maxmemory bounds (owned RSS) stayed within it all through the load, sampled
    // from the spawn on (values loaded, then offloaded, leave the heap fragmented: RSS, not
    // only the allocator's count, must set the pace).
    let sampler = rss_sampler(s.pid());
    s.wait_ready();
    assert_peak_rss_within(sampler, 48 << 20);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), 120_000);
    assert!(info_u64(&mut c, "tiered", "tiered_entries") > 40_000);
    let v: Vec<u8> = redis::cmd("GET").arg("big:123").query(&mut c).unwrap();
    assert_eq!(v.len(), 1024);
}

#[test]
fn compressed_tier_values_are_saved_and_loaded_whole() {
    // Values stored compressed on SSD are saved as the client wrote them, and a load larger
    // than RAM streams them back into a compressing tier.
    let dir = tempfile::tempdir().unwrap();
    let tier = tempfile::tempdir().unwrap();
    let prefix = tier.path().join("t");
    let flags = [
        "--maxmemory",
        "48mb",
        "--tiered_prefix",
        prefix.to_str().unwrap(),
        "--tiered_compression",
        "zstd",
    ];
    // Key i's value: its name, then letters drawn from i (zstd takes them to ~0.65).
    let value = |i: u64| -> Vec<u8> {
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut v = format!("v{i}:").into_bytes();
        while v.len() < 1000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.push(b'a' + (x % 26) as u8);
        }
        v
    };
    let n = 70_000u64;
    {
        let s = server_in(dir.path(), 2, &flags);
        let mut c = s.client();
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let mut p = redis::pipe();
            for &i in chunk {
                p.cmd("SET").arg(format!("z:{i}")).arg(value(i)).ignore();
            }
            p.query::<()>(&mut c).unwrap();
        }
        assert!(info_u64(&mut c, "tiered", "tiered_compressed_entries") > n / 4);
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    let s = server_in(dir.path(), 2, &flags);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), n);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_u64(&mut c, "tiered", "tiered_compressed_entries") < n / 4 {
        assert!(
            Instant::now() < deadline,
            "the load did not go to the tier compressed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("GET").arg(format!("z:{i}"));
        }
        let got: Vec<Option<Vec<u8>>> = p.query(&mut c).unwrap();
        for (&i, g) in chunk.iter().zip(got) {
            assert_eq!(g, Some(value(i)), "z:{i}");
        }
    }
    assert_eq!(info_u64(&mut c, "tiered", "tiered_read_errors"), 0);
}

// ---------------------------------------------------------------------------------------------
// Redis RDB, against the real redis-server
// ---------------------------------------------------------------------------------------------

#[test]
fn rdb_written_by_redis_loads_into_strata() {
    let dir = tempfile::tempdir().unwrap();
    let model = {
        let Some(r) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
            return;
        };
        let mut c = r.client();
        let model = populate(&mut c, 400);
        // Collections come along (a hash, a one-node list).
        let _: () = redis::cmd("RPUSH")
            .arg("list")
            .arg("a")
            .arg("b")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("HSET")
            .arg("hash")
            .arg("f")
            .arg("v")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("int")
            .arg("12345")
            .query(&mut c)
            .unwrap();
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
        model
    };
    let s = server_in(dir.path(), 2, &["--dbfilename", "dump.rdb"]);
    let mut c = s.client();
    assert_eq!(q::<String>(&mut c, &["HGET", "hash", "f"]), "v");
    assert_eq!(q::<String>(&mut c, &["TYPE", "list"]), "list");
    assert_eq!(q::<i64>(&mut c, &["DEL", "hash", "list"]), 2);
    let mut with_int = model.clone();
    with_int.insert((0, b"int".to_vec()), (b"12345".to_vec(), false));
    check(&mut c, &with_int);
    assert_eq!(
        info_u64(&mut c, "persistence", "rdb_last_load_keys_skipped"),
        0
    );
}

#[test]
fn rdb_exported_by_strata_loads_into_redis() {
    let dir = tempfile::tempdir().unwrap();
    let model = {
        let s = server_in(dir.path(), 3, &[]);
        let mut c = s.client();
        let model = populate(&mut c, 400);
        assert_eq!(q::<String>(&mut c, &["SAVE", "RDB", "export.rdb"]), "OK");
        model
    };
    assert!(dir.path().join("export.rdb").exists());
    let Some(r) = RedisServer::start(dir.path(), "export.rdb", &[]) else {
        return;
    };
    check(&mut r.client(), &model);
    // And back: Strata loads its own export.
    drop(r);
    let s = server_in(dir.path(), 1, &["--dbfilename", "export.rdb"]);
    check(&mut s.client(), &model);
}

#[test]
fn bad_snapshot_flags_are_start_up_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = refused(dir.path(), &["--snapshot_cron", "*/0 * * * *"]);
    assert!(
        err.contains("--snapshot_cron") || err.contains("snapshot_cron"),
        "{err}"
    );
    let err = refused(dir.path(), &["--snapshot_compression", "gzip"]);
    assert!(err.contains("gzip"), "{err}");
}

#[test]
fn offloaded_values_are_saved_as_they_were_when_the_save_started() {
    let dir = tempfile::tempdir().unwrap();
    let tier = tempfile::tempdir().unwrap();
    let prefix = tier.path().join("t");
    let flags = [
        "--maxmemory",
        "24mb",
        "--tiered_prefix",
        prefix.to_str().unwrap(),
        "--snapshot_throttle_mb",
        "4",
        "--snapshot_compression",
        "none",
    ];
    let s = server_in(dir.path(), 2, &flags);
    let mut c = s.client();
    let n = 30_000;
    let val =
        |i: usize, round: u8| -> Vec<u8> { (0..1000).map(|j| (i + j) as u8 ^ round).collect() };
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            pipe.cmd("SET")
                .arg(format!("t:{i}"))
                .arg(val(i, 0))
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_u64(&mut c, "tiered", "tiered_entries") < 10_000 {
        assert!(Instant::now() < deadline, "values did not move to SSD");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut raw = s.raw();
    rt(&mut raw, &["BGSAVE"], "+Background saving started\r\n");
    for (round, chunk) in (0..n).collect::<Vec<_>>().chunks(500).enumerate() {
        let mut pipe = redis::pipe();
        for &i in chunk {
            if i % 3 == 0 {
                pipe.cmd("DEL").arg(format!("t:{i}")).ignore();
            } else {
                pipe.cmd("SET")
                    .arg(format!("t:{i}"))
                    .arg(val(i, 1))
                    .ignore();
            }
        }
        if let Err(e) = pipe.query::<()>(&mut c) {
            let text: String = redis::cmd("INFO").query(&mut c).unwrap();
            panic!("{e}\n{text}");
        }
        // The writes wait for the throttled save at times, so they may end with it: what
        // matters is that they ran under it.
        if round == 0 {
            assert_eq!(
                info_u64(&mut c, "persistence", "rdb_bgsave_in_progress"),
                1,
                "the save ended too early to test anything"
            );
        }
    }
    wait_for_save(&mut c);
    assert_eq!(
        info_u64(&mut c, "persistence", "rdb_last_save_keys"),
        n as u64
    );
    drop(s);
    let s = server_in(dir.path(), 1, &flags);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), n as u64);
    for i in (0..n).step_by(7) {
        let got: Vec<u8> = redis::cmd("GET")
            .arg(format!("t:{i}"))
            .query(&mut c)
            .unwrap();
        assert!(
            got == val(i, 0),
            "t:{i} is not the value at the start of the save"
        );
    }
}

#[test]
fn shard_files_no_summary_names_are_removed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), 1, &[]);
        let mut raw = s.raw();
        rt(&mut raw, &["SET", "k", "v"], OK);
        rt(&mut raw, &["SAVE"], OK);
    }
    // What a save stopped before its summary (or before its clean-up) leaves behind.
    std::fs::write(dir.path().join("dump-deadbeef-0000.strata"), b"junk").unwrap();
    std::fs::write(dir.path().join("other-deadbeef-0000.strata"), b"not ours").unwrap();
    let s = server_in(dir.path(), 1, &[]);
    let mut raw = s.raw();
    rt(&mut raw, &["GET", "k"], &b("v"));
    let left = files(dir.path());
    assert!(
        !left.contains(&"dump-deadbeef-0000.strata".to_string()),
        "{left:?}"
    );
    assert!(
        left.contains(&"other-deadbeef-0000.strata".to_string()),
        "{left:?}"
    );
    assert_eq!(shard_files(dir.path()).len(), 2, "{left:?}");
}

// ---------------------------------------------------------------------------------------------
// Hashes
// ---------------------------------------------------------------------------------------------

/// Sorted `HGETALL` pairs of `key`.
fn hash_pairs(c: &mut Connection, key: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = redis::cmd("HGETALL").arg(key).query(c).unwrap();
    v.sort();
    v
}

#[test]
fn hashes_of_every_encoding_survive_saves_point_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = slow_saver(dir.path(), 2);
    let mut c = s.client();
    let mut raw = s.raw();
    let mut want: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    // 300 hashes of 20 fields (listpack), 30 of 2000 (hashtable), one listpackex and one
    // hashtable with field expiries; some padding so the save takes a while.
    let mut pipe = redis::pipe();
    for k in 0..300 {
        let key = format!("small:{k}");
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&key);
        for f in 0..20 {
            cmd.arg(format!("f{f}")).arg(format!("v{k}:{f}"));
        }
        pipe.add_command(cmd).ignore();
    }
    for k in 0..30 {
        let key = format!("large:{k}");
        let mut cmd = redis::cmd("HSET");
        cmd.arg(&key);
        for f in 0..2000 {
            cmd.arg(format!("f{f}"))
                .arg(format!("{}{k}", "x".repeat(f % 300)));
        }
        pipe.add_command(cmd).ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(3000)
        .arg("pad")
        .arg(1000)
        .query(&mut c)
        .unwrap();
    rt(
        &mut raw,
        &["HSET", "ttl:small", "a", "1", "b", "2"],
        ":2\r\n",
    );
    rt(
        &mut raw,
        &["HEXPIRE", "ttl:small", "5000", "FIELDS", "1", "a"],
        "*1\r\n:1\r\n",
    );
    let _: i64 = q(&mut c, &["COPY", "large:0", "ttl:large"]);
    rt(
        &mut raw,
        &["HEXPIRE", "ttl:large", "5000", "FIELDS", "1", "f9"],
        "*1\r\n:1\r\n",
    );
    for k in ["ttl:small", "ttl:large"] {
        want.insert(k.into(), hash_pairs(&mut c, k));
    }
    for k in 0..300 {
        let key = format!("small:{k}");
        want.insert(key.clone(), hash_pairs(&mut c, &key));
    }
    for k in 0..30 {
        let key = format!("large:{k}");
        want.insert(key.clone(), hash_pairs(&mut c, &key));
    }
    rt(&mut raw, &["BGSAVE"], "+Background saving started\r\n");
    // Writes during the save: none may reach the snapshot.
    for k in 0..30 {
        let key = format!("large:{k}");
        let _: i64 = q(&mut c, &["HSET", &key, "f1", "changed", "new", "n"]);
        let _: i64 = q(&mut c, &["HDEL", &key, "f2"]);
    }
    for k in 0..300 {
        let _: i64 = q(&mut c, &["HSET", &format!("small:{k}"), "f0", "changed"]);
    }
    let _: i64 = q(&mut c, &["DEL", "small:7"]);
    assert_eq!(
        info_u64(&mut c, "persistence", "rdb_bgsave_in_progress"),
        1,
        "the save ended too early to test anything"
    );
    wait_for_save(&mut c);
    drop(s);
    let s = server_in(dir.path(), 3, &[]);
    let mut c = s.client();
    for (k, pairs) in &want {
        assert_eq!(&hash_pairs(&mut c, k), pairs, "{k}");
    }
    let enc = |c: &mut Connection, k: &str| q::<String>(c, &["OBJECT", "ENCODING", k]);
    assert_eq!(enc(&mut c, "small:1"), "listpack");
    assert_eq!(enc(&mut c, "large:1"), "hashtable");
    assert_eq!(enc(&mut c, "ttl:small"), "listpackex");
    let ttl: Vec<i64> = redis::cmd("HTTL")
        .arg("ttl:large")
        .arg("FIELDS")
        .arg(2)
        .arg("f9")
        .arg("f8")
        .query(&mut c)
        .unwrap();
    assert!(ttl[0] > 4000 && ttl[1] == -1, "{ttl:?}");
    // Exported as RDB, redis-server 7.0 reads the hashes without field expiries.
    for k in ["ttl:small", "ttl:large"] {
        let _: i64 = q(&mut c, &["DEL", k]);
    }
    assert_eq!(q::<String>(&mut c, &["SAVE", "RDB", "export.rdb"]), "OK");
    drop(s);
    let Some(r) = RedisServer::start(dir.path(), "export.rdb", &[]) else {
        return;
    };
    let mut rc = r.client();
    for k in ["small:1", "large:3"] {
        assert_eq!(&hash_pairs(&mut rc, k), &want[k], "{k} in redis-server");
    }
}

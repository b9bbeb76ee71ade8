//! Large collections in snapshots: a hash, list, set and sorted set of many elements (with and
//! without TTLs, and a hash with per-field TTLs) go through SAVE and a restart element for
//! element, written as pieces (format version 2) with a bounded buffer; a BGSAVE under writes
//! to those collections keeps them as they were at its start; a snapshot cut or damaged inside
//! a collection's pieces is refused with the file and offset named; a version-1 file still
//! loads; an RDB save of them loads into redis-server, and DUMP payloads move between the two
//! both ways.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

/// Elements per collection: enough that every collection's encoding spans dozens of 64 KiB
/// pieces, small enough for a debug build on two cores.
const N: usize = 100_000;
/// Elements sent per command while filling.
const BATCH: usize = 2000;

fn server_in(dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["--dir", dir.to_str().unwrap(), "--proactor_threads", "2"];
    args.extend_from_slice(extra);
    Server::start(STRATA, &args)
}

fn element(i: usize) -> String {
    format!("element:{i}:{}", "x".repeat(i % 13))
}

/// Fills `key` of type `ty` ("hash", "list", "set", "zset") with `n` elements.
fn fill(c: &mut Connection, ty: &str, key: &str, n: usize) {
    let mut pipe = redis::pipe();
    for start in (0..n).step_by(BATCH) {
        let end = (start + BATCH).min(n);
        let mut cmd = match ty {
            "hash" => redis::cmd("HSET"),
            "list" => redis::cmd("RPUSH"),
            "set" => redis::cmd("SADD"),
            _ => redis::cmd("ZADD"),
        };
        cmd.arg(key);
        for i in start..end {
            match ty {
                "hash" => cmd.arg(element(i)).arg(format!("value-{i}")),
                "zset" => cmd.arg((i % 1009) as f64 * 0.25).arg(element(i)),
                _ => cmd.arg(element(i)),
            };
        }
        pipe.add_command(cmd).ignore();
    }
    let _: () = pipe.query(c).unwrap();
}

/// Everything `key` holds, in a form to compare: hash field=value, list in order, set and
/// zset members (zset with scores) sorted.
fn contents(c: &mut Connection, ty: &str, key: &str) -> Vec<String> {
    match ty {
        "hash" => {
            let m: BTreeMap<String, String> = q(c, &["HGETALL", key]);
            m.into_iter().map(|(f, v)| format!("{f}={v}")).collect()
        }
        "list" => q(c, &["LRANGE", key, "0", "-1"]),
        "set" => sorted(q(c, &["SMEMBERS", key])),
        _ => {
            let v: Vec<(String, String)> = q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]);
            v.into_iter().map(|(m, s)| format!("{m}@{s}")).collect()
        }
    }
}

const TYPES: [&str; 4] = ["hash", "list", "set", "zset"];

fn shard_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.ends_with(".strata") && !n.ends_with("-summary.strata")
        })
        .collect();
    v.sort();
    v
}

/// Records of each kind in a snapshot's shard files.
fn record_kinds(dir: &Path) -> BTreeMap<&'static str, u64> {
    let mut kinds = BTreeMap::new();
    for f in shard_files(dir) {
        let bytes = std::fs::read(&f).unwrap();
        assert_eq!(&bytes[..8], b"STRATASN");
        assert_eq!(
            u16::from_le_bytes([bytes[8], bytes[9]]),
            2,
            "format version"
        );
        let mut dec = ondisk::SnapshotDecoder::new();
        dec.feed(&bytes);
        while let Some(item) = dec.next().unwrap() {
            let k = match item {
                ondisk::Item::Object(o) if o.value.len() >= ondisk::snapshot::PIECE_LEN => {
                    "large object"
                }
                ondisk::Item::Object(_) => "object",
                ondisk::Item::End(stats) => {
                    *kinds.entry("records").or_default() += stats.records;
                    continue;
                }
                _ => "other",
            };
            *kinds.entry(k).or_default() += 1;
        }
    }
    kinds
}

#[test]
fn large_collections_of_every_type_come_back_element_for_element() {
    let dir = tempfile::tempdir().unwrap();
    let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
    {
        let s = server_in(dir.path(), &[]);
        let mut c = s.client();
        for ty in TYPES {
            for ttl in [false, true] {
                let key = format!("{ty}:{}", if ttl { "ttl" } else { "plain" });
                fill(&mut c, ty, &key, N);
                if ttl {
                    let _: i64 = q(&mut c, &["EXPIRE", &key, "3600"]);
                }
                want.insert(key.clone(), contents(&mut c, ty, &key));
            }
        }
        // A hash whose every third field has its own TTL.
        fill(&mut c, "hash", "hash:fields", N);
        let mut pipe = redis::pipe();
        for start in (0..N).step_by(3 * BATCH) {
            let fields: Vec<String> = (start..(start + 3 * BATCH).min(N))
                .step_by(3)
                .map(element)
                .collect();
            pipe.cmd("HPEXPIRE")
                .arg("hash:fields")
                .arg(7_200_000 + start)
                .arg("FIELDS")
                .arg(fields.len())
                .arg(&fields)
                .ignore();
        }
        let _: () = pipe.query(&mut c).unwrap();
        want.insert(
            "hash:fields".into(),
            contents(&mut c, "hash", "hash:fields"),
        );
        let _: () = q(&mut c, &["SET", "small", "string"]);
        let _: i64 = q(&mut c, &["SADD", "small:set", "a", "b"]);

        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
        let peak = info_u64(&mut c, "persistence", "rdb_last_save_peak_buffered_bytes");
        // Two shards, each at most its write batch plus one piece: never a collection's
        // whole encoding (each is megabytes).
        assert!(peak > 0 && peak < 1_600_000, "peak buffered {peak}");
    }
    let kinds = record_kinds(dir.path());
    assert_eq!(kinds.get("large object"), Some(&9), "{kinds:?}");
    // Each large one is a head, dozens of pieces and an end.
    assert!(kinds["records"] > 9 * 20, "{kinds:?}");

    let s = server_in(dir.path(), &[]);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), 11);
    for (key, elements) in &want {
        let ty = key.split(':').next().unwrap();
        assert_eq!(q::<String>(&mut c, &["TYPE", key]), ty, "{key}");
        let got = contents(&mut c, ty, key);
        assert_eq!(got.len(), elements.len(), "{key}");
        assert!(&got == elements, "{key} differs after the restart");
        let ttl: i64 = q(&mut c, &["TTL", key]);
        if key.ends_with(":ttl") {
            assert!(ttl > 3000 && ttl <= 3600, "{key}: TTL {ttl}");
        } else {
            assert_eq!(ttl, -1, "{key}");
        }
    }
    // Per-field TTLs: every third field, each its own.
    for i in [0usize, 1, 3, 5998, 6000, 6003, N - 2, N - 1] {
        let f = element(i);
        let got: Vec<i64> = q(&mut c, &["HPTTL", "hash:fields", "FIELDS", "1", &f]);
        if i % 3 == 0 {
            let set = 7_200_000 + (i / (3 * BATCH)) as i64 * (3 * BATCH) as i64;
            assert!(
                got[0] > set - 600_000 && got[0] <= set,
                "field {i}: {got:?}"
            );
        } else {
            assert_eq!(got, vec![-1], "field {i}");
        }
    }
    assert_eq!(q::<String>(&mut c, &["GET", "small"]), "string");
}

#[test]
fn a_bgsave_under_writes_keeps_large_collections_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let n = N / 2;
    let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
    {
        // Throttled: the save takes seconds, so the writes below land while it runs.
        let s = server_in(
            dir.path(),
            &[
                "--snapshot_throttle_mb",
                "2",
                "--snapshot_compression",
                "none",
            ],
        );
        let mut c = s.client();
        for ty in TYPES {
            for k in ["a", "b"] {
                let key = format!("{ty}:{k}");
                fill(&mut c, ty, &key, n);
                want.insert(key.clone(), contents(&mut c, ty, &key));
            }
        }
        let _: String = q(&mut c, &["BGSAVE"]);
        let mut w = s.client();
        let mut writes = 0;
        let started = Instant::now();
        // Changes all over every collection: new values, removals, additions, a whole
        // collection deleted and one replaced.
        for round in 0..20usize {
            let mut pipe = redis::pipe();
            for j in 0..200usize {
                let i = (round * 7919 + j * 499) % n;
                let e = element(i);
                pipe.cmd("HSET")
                    .arg("hash:a")
                    .arg(&e)
                    .arg("changed")
                    .ignore();
                pipe.cmd("HDEL")
                    .arg("hash:b")
                    .arg(element((i + 1) % n))
                    .ignore();
                pipe.cmd("LSET")
                    .arg("list:a")
                    .arg(i)
                    .arg("changed")
                    .ignore();
                pipe.cmd("LPOP").arg("list:b").ignore();
                pipe.cmd("SREM").arg("set:a").arg(&e).ignore();
                pipe.cmd("SADD")
                    .arg("set:b")
                    .arg(format!("new:{round}:{j}"))
                    .ignore();
                pipe.cmd("ZADD").arg("zset:a").arg(-1.0).arg(&e).ignore();
                pipe.cmd("ZREM").arg("zset:b").arg(&e).ignore();
                writes += 8;
            }
            let _: () = pipe.query(&mut w).unwrap();
            if round == 0 {
                let _: i64 = q(&mut w, &["DEL", "set:a"]);
                let _: i64 = q(&mut w, &["RPUSH", "brand:new", "x"]);
                let _: i64 = q(&mut w, &["DEL", "hash:b"]);
                let _: i64 = q(&mut w, &["HSET", "hash:b", "only", "field"]);
            }
            // Writes after the save ended would test nothing; on a loaded machine a round
            // takes a second or more, so the rounds stop with the save.
            if info_u64(&mut c, "persistence", "rdb_bgsave_in_progress") == 0 {
                assert!(
                    round > 0,
                    "the save ended before the first {writes} writes ({:?}): nothing was tested",
                    started.elapsed()
                );
                break;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(180);
        while info_u64(&mut c, "persistence", "rdb_bgsave_in_progress") == 1 {
            assert!(Instant::now() < deadline, "the save did not finish");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            info_str(&mut c, "persistence", "rdb_last_bgsave_status"),
            "ok"
        );
    }
    let s = server_in(dir.path(), &[]);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), want.len() as u64);
    for (key, elements) in &want {
        let ty = key.split(':').next().unwrap();
        let got = contents(&mut c, ty, key);
        assert_eq!(got.len(), elements.len(), "{key}");
        assert!(&got == elements, "{key} is not as it was when BGSAVE began");
    }
}

#[test]
fn a_snapshot_cut_or_damaged_inside_pieces_is_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), &["--snapshot_compression", "none"]);
        let mut c = s.client();
        fill(&mut c, "set", "big", N);
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    let file = shard_files(dir.path())
        .into_iter()
        .max_by_key(|f| std::fs::metadata(f).unwrap().len())
        .unwrap();
    let good = std::fs::read(&file).unwrap();
    assert!(good.len() > 15 * 65_536, "{} bytes", good.len());
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    let start_err = || {
        let d = dir.path().to_str().unwrap();
        startup_error(STRATA, &["--dir", d, "--proactor_threads", "2"])
    };
    // Cut in the middle of the pieces.
    std::fs::write(&file, &good[..good.len() / 2]).unwrap();
    let err = start_err();
    assert!(
        err.contains(&name) && err.contains("offset") && !err.contains("panicked"),
        "{err}"
    );
    // A byte flipped inside a piece.
    let mut bad = good.clone();
    let at = bad.len() / 3;
    bad[at] ^= 0x20;
    std::fs::write(&file, &bad).unwrap();
    let err = start_err();
    assert!(
        err.contains(&name) && err.contains("offset") && !err.contains("panicked"),
        "{err}"
    );
    // Intact, it loads.
    std::fs::write(&file, &good).unwrap();
    let s = server_in(dir.path(), &[]);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["SCARD", "big"]), N as u64);
}

#[test]
fn large_collections_move_to_redis_server_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let n = N / 4;
    let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
    {
        let s = server_in(dir.path(), &["--dbfilename", "dump.rdb"]);
        let mut c = s.client();
        for ty in TYPES {
            fill(&mut c, ty, ty, n);
            want.insert(ty.to_string(), contents(&mut c, ty, ty));
        }
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let mut rc = real.client();
    for (key, elements) in &want {
        let got = contents(&mut rc, key, key);
        assert!(&got == elements, "redis-server loaded {key} differently");
    }
    // DUMP both ways, large and small collections.
    let s = server_in(dir.path(), &["--dbfilename", ""]);
    let mut c = s.client();
    let _: i64 = q(&mut rc, &["SADD", "smallset", "a", "1"]);
    let _: i64 = q(&mut rc, &["HSET", "smallhash", "f", "v"]);
    for key in ["hash", "list", "set", "zset", "smallset", "smallhash"] {
        let ty: String = q(&mut rc, &["TYPE", key]);
        let p = dump(&mut rc, key);
        restore(&mut c, key, 0, &p, &[]).unwrap_or_else(|e| panic!("RESTORE of {key}: {e}"));
        let theirs = contents(&mut rc, &ty, key);
        assert!(
            contents(&mut c, &ty, key) == theirs,
            "{key} from redis-server"
        );
        let back = dump(&mut c, key);
        let ver = u16::from_le_bytes([back[back.len() - 10], back[back.len() - 9]]);
        assert_eq!(ver, 10, "{key}: Strata's DUMP says RDB version {ver}");
        let dst = format!("back:{key}");
        restore(&mut rc, &dst, 0, &back, &[])
            .unwrap_or_else(|e| panic!("redis-server refused Strata's DUMP of {key}: {e}"));
        assert!(
            contents(&mut rc, &ty, &dst) == theirs,
            "{key} back in redis-server"
        );
    }
}

/// `file` (a whole shard file) restamped as format version 1, every checksum that covers the
/// header made again.
fn as_version_1(file: &[u8]) -> Vec<u8> {
    use ondisk::snapshot::{END_PAYLOAD_LEN, FRAME_HEADER_LEN};
    let mut f = file.to_vec();
    f[8..10].copy_from_slice(&1u16.to_le_bytes());
    let crc = crc32(&f[..36]);
    f[36..40].copy_from_slice(&crc.to_le_bytes());
    let end = f.len() - FRAME_HEADER_LEN - END_PAYLOAD_LEN;
    let before_end = crc32(&f[..end]);
    let at = end + FRAME_HEADER_LEN + 24;
    f[at..at + 4].copy_from_slice(&before_end.to_le_bytes());
    let payload = crc32(&f[end + FRAME_HEADER_LEN..]);
    f[end + 16..end + 20].copy_from_slice(&payload.to_le_bytes());
    let header = crc32(&f[end..end + 20]);
    f[end + 20..end + 24].copy_from_slice(&header.to_le_bytes());
    f
}

fn crc32(b: &[u8]) -> u32 {
    crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(b)
}

#[test]
fn a_version_1_snapshot_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), &[]);
        let mut c = s.client();
        let _: () = q(&mut c, &["SET", "s", "v"]);
        fill(&mut c, "hash", "h", 50);
        fill(&mut c, "zset", "z", 300);
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    // Small collections only: the records a version-1 writer wrote.
    let summary_path = dir.path().join("dump-summary.strata");
    let mut summary = ondisk::Summary::decode(&std::fs::read(&summary_path).unwrap()).unwrap();
    for f in &mut summary.files {
        let old = as_version_1(&std::fs::read(dir.path().join(&f.name)).unwrap());
        f.crc32 = crc32(&old);
        std::fs::write(dir.path().join(&f.name), &old).unwrap();
    }
    std::fs::write(&summary_path, summary.encode()).unwrap();
    let s = server_in(dir.path(), &[]);
    let mut c = s.client();
    assert_eq!(q::<String>(&mut c, &["GET", "s"]), "v");
    assert_eq!(q::<u64>(&mut c, &["HLEN", "h"]), 50);
    assert_eq!(q::<u64>(&mut c, &["ZCARD", "z"]), 300);
}

/// Loading a large collection builds it from its pieces as they come: the load's peak RSS
/// stays within a fraction of the collection's encoding above what the collection itself
/// takes (joining the pieces first held the whole encoding beside the collection).
#[test]
fn loading_a_million_member_set_never_joins_its_pieces() {
    const MEMBERS: usize = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--proactor_threads", "1", "--snapshot_compression", "none"];
    let want;
    {
        let s = server_in(dir.path(), &args);
        let mut c = s.client();
        fill(&mut c, "set", "big", MEMBERS);
        want = contents(&mut c, "set", "big");
        assert_eq!(want.len(), MEMBERS);
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    let encoded: u64 = shard_files(dir.path())
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(encoded > 20_000_000, "{encoded} bytes");
    let s = server_in(dir.path(), &args);
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["SCARD", "big"]), MEMBERS as u64);
    let hwm = proc_status_kb(s.pid(), "VmHWM").unwrap();
    let rss = proc_status_kb(s.pid(), "VmRSS").unwrap();
    eprintln!("set of {encoded} encoded bytes: load peak {hwm} KiB, after it {rss} KiB");
    assert!(
        (hwm - rss) * 1024 < encoded / 4,
        "load peak {hwm} KiB vs {rss} KiB after, for {encoded} encoded bytes"
    );
    assert!(contents(&mut c, "set", "big") == want);
}

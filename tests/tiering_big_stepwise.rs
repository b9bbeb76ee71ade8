//! Large collections (about 30 MiB of blob) go to SSD and come back in steps: while one is
//! encoded and written, and while it is read back and built, another client's PINGs and GETs
//! on the same core are answered within a small fraction of the one-go stall; RSS meanwhile
//! stays near the collection's own size; a write to the key during the encoding is never lost;
//! a damaged page anywhere in the extent is a counted miss; a save copies an offloaded one into
//! the snapshot a part at a time.
//!
//! `STEPWISE_STRATA_BIN` runs the same checks against another build (the figures in
//! benches/RESULTS.md compare the one-go build this way; its asserts then fail, as they must).
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

/// Elements per collection: 240,000 of ~120 bytes make a blob of about 29 MiB (a sorted
/// set takes half as many: its RAM form must stay under the 64 MiB cap).
const N: usize = 240_000;

fn count(kind: &str) -> usize {
    if kind == "zset" {
        N / 2
    } else {
        N
    }
}

fn bin() -> String {
    std::env::var("STEPWISE_STRATA_BIN").unwrap_or_else(|_| STRATA.to_string())
}

fn elem(kind: &str, j: usize) -> String {
    hex_elem(kind, j, 7, 120)
}

/// Fills `key` with N elements of `kind`, 2,000 to a command, pipelined.
fn fill_big(c: &mut Connection, kind: &str, key: &str) {
    let mut pipe = redis::pipe();
    let n = count(kind);
    for start in (0..n).step_by(2000) {
        let mut cmd = redis::cmd(adding_command(kind));
        cmd.arg(key);
        for j in start..(start + 2000).min(n) {
            match kind {
                "hash" => cmd.arg(j).arg(elem("hv", j)),
                "list" => cmd.arg(elem("le", j)),
                "set" => cmd.arg(elem("sm", j)),
                _ => cmd.arg((j % 1000) as f64).arg(elem("zm", j)),
            };
        }
        pipe.add_command(cmd).ignore();
    }
    let () = pipe.query(c).expect("big collection write");
}

/// Its element count (a command that loads it back; a small reply).
fn card(c: &mut Connection, kind: &str, key: &str) -> i64 {
    let cmd = match kind {
        "hash" => "HLEN",
        "list" => "LLEN",
        "set" => "SCARD",
        _ => "ZCARD",
    };
    q(c, &[cmd, key])
}

/// Waits until `field` of INFO tiered satisfies `ok`; its last value.
fn wait_info(c: &mut Connection, field: &str, ok: impl Fn(u64) -> bool, what: &str) -> u64 {
    let timing = (Duration::from_secs(120), Duration::from_millis(20));
    wait_tiered(c, field, ok, what, timing)
}

/// One shard; 512 MB of RAM and an offload threshold of 0.02, so every cold collection goes.
fn server(dir: &tempfile::TempDir) -> Server {
    server_with(dir, &[])
}

fn server_with(dir: &tempfile::TempDir, extra: &[&str]) -> Server {
    let prefix = dir.path().join("strata");
    let mut args = vec![
        "--proactor_threads",
        "1",
        "--maxmemory",
        "512mb",
        "--tiered_prefix",
        prefix.to_str().unwrap(),
        "--log_level",
        "error",
        "--tiered_offload_threshold",
        "0.02",
    ];
    args.extend_from_slice(extra);
    Server::start(bin(), &args)
}

/// Another client PINGing (and GETting a small key) back to back until stopped: the longest
/// wait for a reply, in ms.
struct Pinger {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<f64>,
}

impl Pinger {
    fn start(s: &Server) -> Pinger {
        let mut c = s.client();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut worst = 0f64;
            let mut i = 0u64;
            while !st.load(Ordering::Relaxed) {
                let t = Instant::now();
                if i.is_multiple_of(2) {
                    let _: String = q(&mut c, &["PING"]);
                } else {
                    let v: String = q(&mut c, &["GET", "small"]);
                    assert_eq!(v, "still here");
                }
                worst = worst.max(t.elapsed().as_secs_f64() * 1000.0);
                i += 1;
            }
            worst
        });
        Pinger { stop, handle }
    }

    fn worst_ms(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("pinger")
    }
}

fn stop_peak((stop, h): RssSampler) -> u64 {
    stop.store(true, Ordering::Relaxed);
    h.join().expect("sampler")
}

const MB: f64 = 1048576.0;

#[test]
fn the_shard_serves_others_and_rss_stays_near_the_size_while_big_collections_move() {
    let (mut report, mut failed) = (Vec::new(), Vec::new());
    // The control: an idle server the same pinger runs against, to measure the machine's delays.
    let idle = Server::start(STRATA, &["--proactor_threads", "1"]);
    let _: () = q(&mut idle.client(), &["SET", "small", "still here"]);
    for (kind, key) in [("set", "s"), ("hash", "h"), ("list", "l"), ("zset", "z")] {
        // A server of its own: what one type left in the allocator does not hide the next.
        let dir = tempfile::tempdir().unwrap();
        let s = server(&dir);
        let mut c = s.client();
        // Under the tier's smallest value: it stays in RAM.
        let _: () = q(&mut c, &["SET", "small", "still here"]);
        let used = info_u64(&mut c, "memory", "used_memory");
        // Filled while the offloader waits: it takes nothing before the whole is in.
        fill_big(&mut c, kind, key);
        let size = info_u64(&mut c, "memory", "used_memory").saturating_sub(used);
        let filled = owned_rss(s.pid()).unwrap();
        let pinger = Pinger::start(&s);
        let control = Pinger::start(&idle);
        let sampler = rss_sampler_every(s.pid(), Duration::from_millis(2));
        let t = Instant::now();
        wait_info(&mut c, "tiered_disk_keys", |v| v == 1, "offloaded");
        let offload_s = t.elapsed().as_secs_f64();
        let out_peak = stop_peak(sampler);
        let out_wait = pinger.worst_ms();
        let out_noise = control.worst_ms();
        let blob = info_u64(&mut c, "tiered", "tiered_bytes");
        // Back: a command that reads it (the reply is one number).
        std::thread::sleep(Duration::from_millis(200));
        let low = owned_rss(s.pid()).unwrap();
        let pinger = Pinger::start(&s);
        let control = Pinger::start(&idle);
        let sampler = rss_sampler_every(s.pid(), Duration::from_millis(2));
        let t = Instant::now();
        assert_eq!(card(&mut c, kind, key), count(kind) as i64, "{kind}");
        let back_s = t.elapsed().as_secs_f64();
        let back_peak = stop_peak(sampler);
        let back_wait = pinger.worst_ms();
        let back_noise = control.worst_ms();
        let out_extra = out_peak.saturating_sub(filled) as f64 / size as f64;
        let back_extra = back_peak.saturating_sub(filled) as f64 / size as f64;
        report.push(format!(
            "{kind}: RAM {:.1} MB, blob {:.1} MB, RSS filled {:.1} MB; offload {offload_s:.2} s, \
             longest PING/GET {out_wait:.1} ms, peak RSS {:.1} MB (+{out_extra:.2} x RAM); \
             RSS after {:.1} MB; read-back {back_s:.2} s, longest PING/GET {back_wait:.1} ms, \
             peak RSS {:.1} MB (+{back_extra:.2} x RAM over filled)",
            size as f64 / MB,
            blob as f64 / MB,
            filled as f64 / MB,
            out_peak as f64 / MB,
            low as f64 / MB,
            back_peak as f64 / MB,
        ));
        eprintln!("{}", report.last().unwrap());
        assert_eq!(
            info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
            0
        );
        // Each step is a quarter MiB of encoding or a 64 KiB piece of decoding: the one-go
        // build stalled the core for the whole collection (0.4 to 4 s in a debug build). It
        // also held the blob beside the collection on the way out, and the read buffer and
        // the blob beside the collection on the way back (a set +1.7 and +0.65 x its RAM, a
        // list +2.4 and +1.6). Failures are gathered, so a run against another build reports
        // every type. A loaded machine (CI runs tests side by side) delays every process: the
        // same pinger on an idle server meanwhile measures that, and is allowed for twice.
        if out_wait >= 400.0 + 2.0 * out_noise {
            failed.push(format!(
                "{kind}: a PING waited {out_wait:.1} ms during the offload \
                 ({out_noise:.1} ms on an idle server meanwhile)"
            ));
        }
        if back_wait >= 400.0 + 2.0 * back_noise {
            failed.push(format!(
                "{kind}: a PING waited {back_wait:.1} ms during the read-back \
                 ({back_noise:.1} ms on an idle server meanwhile)"
            ));
        }
        // The steps hold a quarter MiB of encoding and the writer's MiB or two, and the
        // allocator keeps some of what they freed: a list (whose nodes are decompressed to be
        // encoded) reached +0.26.
        if out_extra >= 0.4 {
            failed.push(format!("{kind}: offload peak +{out_extra:.2} x RAM"));
        }
        if back_extra >= 0.25 {
            failed.push(format!("{kind}: read-back peak +{back_extra:.2} x RAM"));
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn a_write_during_the_stepwise_encoding_is_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(&dir);
    let mut c = s.client();
    fill_big(&mut c, "set", "s");
    // Caught in the middle of its encoding (INFO is served between steps), it is written.
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_u64(&mut c, "tiered", "tiered_collection_encoding_in_steps") == 0 {
        assert!(
            Instant::now() < deadline,
            "the encoding in steps never began"
        );
    }
    let added: i64 = q(&mut c, &["SADD", "s", "written-during"]);
    assert_eq!(added, 1);
    let removed: i64 = q(&mut c, &["SREM", "s", &elem("sm", 5)]);
    assert_eq!(removed, 1);
    wait_info(
        &mut c,
        "tiered_collection_steps_dropped",
        |v| v >= 1,
        "the stale encoding given up",
    );
    // It goes later, with the writes in it.
    wait_info(&mut c, "tiered_disk_keys", |v| v == 1, "offloaded");
    assert_eq!(card(&mut c, "set", "s"), N as i64);
    let m: i64 = q(&mut c, &["SISMEMBER", "s", "written-during"]);
    assert_eq!(m, 1);
    let m: i64 = q(&mut c, &["SISMEMBER", "s", &elem("sm", 5)]);
    assert_eq!(m, 0);
    let m: i64 = q(&mut c, &["SISMEMBER", "s", &elem("sm", 6)]);
    assert_eq!(m, 1);
    // A write while it is read back waits for the read, then lands: nothing lost either.
    wait_info(&mut c, "tiered_disk_keys", |v| v == 1, "offloaded again");
    let mut w = s.client();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        let added: i64 = q(&mut w, &["SADD", "s", "written-while-read"]);
        added
    });
    // Clients are not ordered against each other: the read sees the set before or after.
    let n = card(&mut c, "set", "s");
    assert!(n == N as i64 || n == N as i64 + 1, "{n}");
    assert_eq!(t.join().unwrap(), 1);
    assert_eq!(card(&mut c, "set", "s"), N as i64 + 1);
    assert_eq!(
        info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
        0
    );
}

#[test]
fn a_damaged_page_early_or_late_in_a_big_extent_is_a_counted_miss() {
    for page in [2u64, 7000] {
        let dir = tempfile::tempdir().unwrap();
        let s = server(&dir);
        let mut c = s.client();
        fill_big(&mut c, "hash", "h");
        wait_info(&mut c, "tiered_disk_keys", |v| v == 1, "offloaded");
        // The extent follows the file's header page; page 7000 is near its end.
        flip_tier_file_bytes(&dir, page..page + 1, 777);
        let n: i64 = q(&mut c, &["HLEN", "h"]);
        assert_eq!(n, 0, "a damaged extent (page {page}) answered {n} fields");
        assert_eq!(
            info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
            1
        );
        let exists: i64 = q(&mut c, &["EXISTS", "h"]);
        assert_eq!(exists, 0);
        let pong: String = q(&mut c, &["PING"]);
        assert_eq!(pong, "PONG");
    }
}

#[test]
fn a_save_copies_an_offloaded_big_collection_a_part_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let mut want: Vec<String> = (0..N).map(|j| elem("sm", j)).collect();
    want.sort();
    {
        let s = server_with(&dir, &["--dir", &d, "--dbfilename", "unused"]);
        let mut c = s.client();
        fill_big(&mut c, "set", "s");
        wait_info(&mut c, "tiered_disk_keys", |v| v == 1, "offloaded");
        for save in [["SAVE", "DF", "good"], ["SAVE", "RDB", "good.rdb"]] {
            let ok: String = q(&mut c, &save);
            assert_eq!(ok, "OK", "{save:?}");
            // The blob is about 28 MiB; the save held a part of it and a piece of encoding.
            let peak = info_u64(&mut c, "persistence", "rdb_last_save_peak_buffered_bytes");
            eprintln!("{save:?}: peak buffered {peak} bytes");
            assert!(
                peak < 4 << 20,
                "{save:?} buffered {peak} bytes of an offloaded collection"
            );
            assert_eq!(
                info_u64(&mut c, "tiered", "tiered_disk_keys"),
                1,
                "{save:?}"
            );
        }
        // A damaged extent is left out of the save (counted), the save itself succeeds.
        flip_tier_file_bytes(&dir, 3000..3001, 99);
        let ok: String = q(&mut c, &["SAVE", "DF", "damaged"]);
        assert_eq!(ok, "OK");
        assert_eq!(
            info_u64(&mut c, "persistence", "rdb_last_save_keys"),
            0,
            "a damaged collection was saved"
        );
    }
    for name in ["good", "good.rdb"] {
        let s = Server::start(
            STRATA,
            &["--dir", &d, "--dbfilename", name, "--proactor_threads", "1"],
        );
        let mut c = s.client();
        let mut got: Vec<String> = q(&mut c, &["SMEMBERS", "s"]);
        got.sort();
        assert!(got == want, "{name}: {} members back of {N}", got.len());
    }
    let s = Server::start(
        STRATA,
        &[
            "--dir",
            &d,
            "--dbfilename",
            "damaged",
            "--proactor_threads",
            "1",
        ],
    );
    let mut c = s.client();
    assert_eq!(q::<u64>(&mut c, &["DBSIZE"]), 0);
}

/// Three clients read one offloaded big collection at once: each gets it whole, and it is built
/// one at a time (the one before may still be in the background thread's hands as the next
/// builds, but never three together).
#[test]
fn clients_reading_one_big_collection_at_once_build_it_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(&dir);
    let mut c = s.client();
    let used = info_u64(&mut c, "memory", "used_memory");
    fill_big(&mut c, "set", "s");
    let size = info_u64(&mut c, "memory", "used_memory").saturating_sub(used);
    let filled = owned_rss(s.pid()).unwrap();
    wait_info(&mut c, "tiered_disk_keys", |v| v == 1, "offloaded");
    std::thread::sleep(Duration::from_millis(200));
    let sampler = rss_sampler_every(s.pid(), Duration::from_millis(2));
    let start = Arc::new(std::sync::Barrier::new(3));
    let readers: Vec<JoinHandle<i64>> = (0..3)
        .map(|_| {
            let mut r = s.client();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                card(&mut r, "set", "s")
            })
        })
        .collect();
    for r in readers {
        assert_eq!(r.join().unwrap(), N as i64);
    }
    let extra = stop_peak(sampler).saturating_sub(filled) as f64 / size as f64;
    eprintln!(
        "three readers at once: RAM {:.1} MB, peak +{extra:.2} x RAM over filled",
        size as f64 / MB
    );
    // Built together, the three reached +1.4 x RAM over the filled level; one at a time
    // +0.7.
    assert!(extra < 1.0, "peak +{extra:.2} x RAM");
    assert_eq!(
        info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
        0
    );
}

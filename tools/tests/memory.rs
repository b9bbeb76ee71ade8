//! Memory stays bounded whatever the snapshot's size: compacting ~150 MB (re-sharded and
//! recompressed, with tombstones so the two-pass path runs) must peak well below the data.

mod common;

use common::*;
use ondisk::{shard_file_name, Compression, SnapshotHeader, SnapshotWriter, Summary, SummaryFile};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;
use test_support::proc_status_kb;

const KEYS: u32 = 150_000;
const VALUE: usize = 1024;
const LIMIT_KB: u64 = 60 * 1024;

/// Writes the summary of a one-shard snapshot whose only file is `name`; returns its path.
fn write_summary(dir: &Path, name: String, stats: &ondisk::FileStats) -> PathBuf {
    let summary = Summary {
        snapshot_id: 1,
        created_ms: NOW,
        shard_count: 1,
        db_count: 16,
        compression: Compression::None,
        files: vec![SummaryFile {
            name,
            bytes: stats.bytes,
            crc32: stats.crc32,
            records: stats.records,
        }],
    };
    let path = dir.join("dump-summary.strata");
    std::fs::write(&path, summary.encode()).unwrap();
    path
}

/// Writes one uncompressed 150+ MB shard file plus its summary, quickly: the values share one
/// buffer with the key's number stamped in front.
fn big_snapshot(dir: &Path) -> std::path::PathBuf {
    let stem = "dump-1";
    let name = shard_file_name(stem, 0);
    let header = SnapshotHeader {
        shard_index: 0,
        shard_count: 1,
        snapshot_id: 1,
        created_ms: NOW,
        compression: Compression::None,
    };
    let mut w = SnapshotWriter::new(File::create(dir.join(&name)).unwrap(), header);
    let mut value = Rng(5).bytes(VALUE);
    for i in 0..KEYS {
        value[..4].copy_from_slice(&i.to_le_bytes());
        let key = format!("key:{i:08}");
        let expire = (i % 10 == 0).then_some(NOW - 1);
        w.write_string((i % 4) as u16, key.as_bytes(), &value, expire, 0)
            .unwrap();
        if i % 1000 == 999 {
            w.write_tombstone((i % 4) as u16, key.as_bytes()).unwrap();
        }
    }
    let stats = w.finish().unwrap();
    write_summary(dir, name, &stats)
}

/// Runs `compact` of `summary` into `out` on `shards` shards, sampling the child's peak RSS
/// (VmHWM, KiB) every 5 ms: its exit status, output, peak and how many samples were taken.
fn compact_measured(
    summary: &Path,
    out: &Path,
    shards: u32,
) -> (std::process::ExitStatus, std::process::Output, u64, u32) {
    let mut child = bin()
        .args(["compact"])
        .arg(summary)
        .arg("--out-dir")
        .arg(out)
        .args([
            "--shards",
            &shards.to_string(),
            "--compression",
            "lz4",
            "--now-ms",
        ])
        .arg(NOW.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak = 0u64;
    let mut samples = 0u32;
    let status = loop {
        if let Some(kb) = proc_status_kb(pid, "VmHWM") {
            peak = peak.max(kb);
            samples += 1;
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status, child.wait_with_output().unwrap(), peak, samples)
}

#[test]
fn compacting_150_mb_peaks_under_60_mb() {
    let dir = tempfile::tempdir().unwrap();
    let summary = big_snapshot(dir.path());
    let input_bytes = std::fs::metadata(dir.path().join("dump-1-0000.strata"))
        .unwrap()
        .len();
    assert!(input_bytes > 150_000_000, "{input_bytes}");
    let out = dir.path().join("out");

    let (status, output, peak, samples) = compact_measured(&summary, &out, 4);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        samples > 3,
        "the child ran too briefly to be measured ({samples} samples)"
    );
    // The tombstoned keys (i % 1000 == 999) are never among the expired ones (i % 10 == 0).
    let tombstoned = u64::from(KEYS / 1000);
    let expired = u64::from(KEYS / 10);
    let kept = u64::from(KEYS) - expired - tombstoned;
    assert!(stdout.contains(&format!("\nkept: {kept}\n")), "{stdout}");
    assert!(
        stdout.contains(&format!("\nexpired dropped: {expired}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("\ntombstoned dropped: {tombstoned}\n")),
        "{stdout}"
    );
    eprintln!("compacting {input_bytes} bytes peaked at {peak} KiB ({samples} samples)");
    assert!(
        peak < LIMIT_KB,
        "peak RSS {peak} KiB over {LIMIT_KB} KiB for a {input_bytes}-byte snapshot"
    );
}

/// A one-object snapshot: a set of `members` members of about 110 bytes, written a piece at a
/// time (never whole in this process). Returns the summary and the CRC32 of the set's value.
fn big_object_snapshot(dir: &Path, members: u32) -> (std::path::PathBuf, u32) {
    use ondisk::rdb::codec::{write_len, write_plain_string};
    let stem = "dump-1";
    let name = shard_file_name(stem, 0);
    let header = SnapshotHeader {
        shard_index: 0,
        shard_count: 1,
        snapshot_id: 1,
        created_ms: NOW,
        compression: Compression::None,
    };
    let mut w = SnapshotWriter::new(File::create(dir.join(&name)).unwrap(), header);
    let head = ondisk::KeyHead {
        db: 0,
        key: b"bigset",
        expire_at_ms: None,
        client_flags: 0,
    };
    w.begin_pieces(&head, ondisk::rdb::types::SET).unwrap();
    let mut crc = crc32fast::Hasher::new();
    let mut buf = Vec::new();
    write_len(&mut buf, u64::from(members));
    let pad = "x".repeat(100);
    for i in 0..members {
        write_plain_string(&mut buf, format!("{i:08}{pad}").as_bytes());
        if buf.len() >= 1 << 20 || i + 1 == members {
            crc.update(&buf);
            w.write_piece(&buf).unwrap();
            buf.clear();
        }
    }
    w.end_pieces().unwrap();
    let stats = w.finish().unwrap();
    (write_summary(dir, name, &stats), crc.finalize())
}

#[test]
fn compacting_a_120_mb_set_keeps_its_pieces_and_never_holds_it() {
    let dir = tempfile::tempdir().unwrap();
    let (summary, crc) = big_object_snapshot(dir.path(), 1_100_000);
    let input_bytes = std::fs::metadata(dir.path().join("dump-1-0000.strata"))
        .unwrap()
        .len();
    assert!(input_bytes > 120_000_000, "{input_bytes}");
    let out = dir.path().join("out");
    let (status, output, peak, _) = compact_measured(&summary, &out, 2);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(status.success(), "{stdout}");
    assert!(stdout.contains("\nobjects kept: 1\n"), "{stdout}");
    eprintln!("compacting a {input_bytes}-byte set peaked at {peak} KiB");
    assert!(
        peak < LIMIT_KB,
        "peak RSS {peak} KiB for a {input_bytes}-byte set"
    );

    // The output holds the same value, in pieces no longer than PIECE_LEN.
    let out_summary = out.join("dump-summary.strata");
    let r = bin().arg("verify").arg(&out_summary).output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stdout));
    let mut seen = None;
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with(".strata") || path == out_summary {
            continue;
        }
        let mut reader = ondisk::SnapshotReader::new(File::open(&path).unwrap()).unwrap();
        reader.stream_pieces(true);
        let mut h = crc32fast::Hasher::new();
        while let Some(item) = reader.next_item().unwrap() {
            match item {
                ondisk::Item::ObjectHead(o) => assert_eq!(&o.key[..], b"bigset"),
                ondisk::Item::Piece(p) => {
                    assert!(p.len() <= ondisk::snapshot::PIECE_LEN);
                    h.update(&p);
                }
                ondisk::Item::ObjectEnd => seen = Some(h.clone().finalize()),
                other => panic!("only the set: {other:?}"),
            }
        }
    }
    assert_eq!(seen, Some(crc));
}

//! `stats`: exact counts on a small crafted snapshot.

mod common;

use common::*;
use ondisk::{Compression, Item, SnapshotReader};
use std::path::Path;

const MIN: u64 = 60_000;

/// Raw (decompressed) bytes of every file, as the files themselves say.
fn raw_bytes(summary: &Path) -> u64 {
    let back = read_back(summary);
    let dir = summary.parent().unwrap();
    back.summary
        .files
        .iter()
        .map(|f| {
            let mut r =
                SnapshotReader::new(std::fs::File::open(dir.join(&f.name)).unwrap()).unwrap();
            while r.next_record().unwrap().is_some() {}
            r.stats().unwrap().raw_bytes
        })
        .sum()
}

#[test]
fn exact_counts_histograms_ttls_and_largest_values() {
    let dir = tempfile::tempdir().unwrap();
    let files = vec![
        vec![
            string(0, b"a", b"", None, 0),
            string(0, b"bb", b"x", Some(NOW - 5), 0),
            string(1, b"ccc", b"xyz", Some(NOW + 30_000), 0),
            string(1, b"dddd", &[b'd'; 1000], Some(NOW + 30 * MIN), 0),
            tombstone(0, b"zz"),
        ],
        vec![
            string(0, b"e", &[b'e'; 5000], Some(NOW + 120 * MIN), 0),
            string(7, b"key-f", b"ff", Some(NOW + 3 * 24 * 60 * MIN), 0),
            string(0, b"g", &[b'g'; 70_000], Some(NOW + 30 * 24 * 60 * MIN), 0),
            string(0, b"h\n\"", b"hhhh", None, 5),
        ],
    ];
    let summary = write_files(dir.path(), "dump", 0x5a, &files, Compression::Lz4);
    let back = read_back(&summary);
    let disk: u64 = back.summary.files.iter().map(|f| f.bytes).sum();
    let kv: u64 = 1 + 2 + 1 + 3 + 3 + 4 + 1000 + 1 + 5000 + 5 + 2 + 1 + 70_000 + 3 + 4;
    let r = run_ok([
        Path::new("stats"),
        &summary,
        Path::new("--now-ms"),
        Path::new(&NOW.to_string()),
    ]);
    let want = format!(
        "snapshot: {}
id: 5a  created_ms: {}  files: 2  compression: lz4
records: 9
keys: 8
objects: 0
tombstones: 1
keys per db:
  db 0: 5
  db 1: 2
  db 7: 1
keys per type:
  string: 8
value sizes (bytes):
  0: 1
  1: 1
  2-3: 2
  4-7: 1
  8-15: 0
  16-31: 0
  32-63: 0
  64-127: 0
  128-255: 0
  256-511: 0
  512-1023: 1
  1024-2047: 0
  2048-4095: 0
  4096-8191: 1
  8192-16383: 0
  16384-32767: 0
  32768-65535: 0
  65536-131071: 1
key sizes (bytes):
  1: 3
  2-3: 3
  4-7: 2
ttl:
  none: 2
  expired: 1
  <1m: 1
  <1h: 1
  <1d: 1
  <7d: 1
  more: 1
largest values:
  1. db 0 \"g\": 70000
  2. db 0 \"e\": 5000
  3. db 1 \"dddd\": 1000
  4. db 0 \"h\\x0a\\\"\": 4
  5. db 1 \"ccc\": 3
  6. db 7 \"key-f\": 2
  7. db 0 \"bb\": 1
  8. db 0 \"a\": 0
bytes keys+values: {kv}
bytes raw: {}
bytes on disk: {disk}
",
        summary.display(),
        NOW - 1000,
        raw_bytes(&summary),
    );
    assert_eq!(r.stdout, want);
    assert_eq!(r.stderr, "");
}

#[test]
fn only_the_ten_largest_values_are_listed_and_long_keys_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut recs = Vec::new();
    // 25 keys with distinct sizes, in an order that makes the heap work.
    for i in [
        3u32, 17, 9, 24, 0, 12, 20, 5, 1, 22, 14, 7, 19, 2, 11, 23, 16, 6, 21, 10, 4, 18, 8, 15, 13,
    ] {
        recs.push(string(
            0,
            format!("k{i}").as_bytes(),
            &vec![b'v'; i as usize * 10],
            None,
            0,
        ));
    }
    let long_key = vec![b'L'; 100];
    recs.push(string(2, &long_key, &[b'v'; 1000], None, 0));
    let summary = write_sharded(dir.path(), "dump", 1, 3, &recs, Compression::None);
    let r = run_ok([Path::new("stats"), &summary]);
    let listed: Vec<&str> = r
        .stdout
        .lines()
        .skip_while(|l| *l != "largest values:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let mut want = vec![format!(
        "  1. db 2 \"{}\"... (100 bytes): 1000",
        "L".repeat(64)
    )];
    for (n, i) in (15..=24).rev().take(9).enumerate() {
        want.push(format!("  {}. db 0 \"k{i}\": {}", n + 2, i * 10));
    }
    assert_eq!(listed, want);
    assert_eq!(r.field("keys"), "26");
}

/// The indented lines under `heading`.
fn section<'a>(r: &'a Run, heading: &str) -> Vec<&'a str> {
    r.stdout
        .lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect()
}

#[test]
fn objects_are_keys_counted_per_type_at_their_encoded_size() {
    use ondisk::rdb::types;
    let dir = tempfile::tempdir().unwrap();
    let list = rdb_elements(&[b"a", b"b"]);
    let hash = rdb_hash(&[(b"field", &[b'h'; 300])]);
    let set = rdb_elements(&[b"m"]);
    let files = vec![
        vec![
            Item::Record(string(0, b"s", b"abc", None, 0)),
            object(0, b"l", types::LIST, &list, None, 0),
            object(1, b"hh", types::HASH, &hash, Some(NOW - 1), 0),
            Item::Record(tombstone(0, b"z")),
        ],
        vec![
            object(0, b"st", types::SET, &set, Some(NOW + 30_000), 3),
            object(1, b"l2", types::LIST, &list, None, 0),
        ],
    ];
    let summary = write_items(dir.path(), "dump", 0x5b, &files, Compression::Lz4);
    let r = run_ok([
        Path::new("stats"),
        &summary,
        Path::new("--now-ms"),
        Path::new(&NOW.to_string()),
    ]);
    assert_eq!(r.field("records"), "6");
    assert_eq!(r.field("keys"), "5");
    assert_eq!(r.field("objects"), "4");
    assert_eq!(r.field("tombstones"), "1");
    assert!(!r.stdout.contains("unknown kinds"), "{r:?}");
    assert_eq!(section(&r, "keys per db:"), ["  db 0: 3", "  db 1: 2"]);
    assert_eq!(
        section(&r, "keys per type:"),
        ["  string: 1", "  hash: 1", "  list: 2", "  set: 1"]
    );
    let ttl = section(&r, "ttl:");
    assert_eq!(ttl[..3], ["  none: 3", "  expired: 1", "  <1m: 1"]);
    assert_eq!(
        section(&r, "largest values:"),
        [
            format!("  1. db 1 \"hh\": {}", hash.len()),
            format!("  2. db 0 \"l\": {}", list.len()),
            format!("  3. db 1 \"l2\": {}", list.len()),
            "  4. db 0 \"s\": 3".to_string(),
            format!("  5. db 0 \"st\": {}", set.len()),
        ]
    );
    let kv = 1 + 3 + 1 + list.len() + 2 + hash.len() + 2 + set.len() + 2 + list.len();
    assert_eq!(r.field("bytes keys+values"), kv.to_string());
    assert_eq!(r.stderr, "");
}

#[test]
fn a_damaged_snapshot_gives_no_stats() {
    let dir = tempfile::tempdir().unwrap();
    let summary = write_files(
        dir.path(),
        "dump",
        2,
        &[vec![string(0, b"a", b"b", None, 0)]],
        Compression::None,
    );
    let file = dir.path().join("dump-2-0000.strata");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 10]).unwrap();
    let r = run([Path::new("stats"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("dump-2-0000.strata: truncated"), "{r:?}");
}

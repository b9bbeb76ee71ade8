//! `verify`: the report, and every kind of damage found with its file and offset.

mod common;

use common::*;
use ondisk::{summary_file_name, Compression, Item, Summary};
use std::path::{Path, PathBuf};

/// A 2-file lz4 snapshot called `dump`, id 0xabc: 3 keys in file 0, 2 keys and a tombstone
/// in file 1.
fn sample(dir: &Path) -> PathBuf {
    let files = vec![
        vec![
            string(0, b"a", b"alpha", None, 0),
            string(0, b"b", &[b'b'; 5000], Some(NOW + 1), 0),
            string(2, b"c", b"", None, 9),
        ],
        vec![
            string(0, b"d", b"delta", None, 0),
            tombstone(0, b"gone"),
            string(1, b"e", b"echo", None, 0),
        ],
    ];
    write_files(dir, "dump", 0xabc, &files, Compression::Lz4)
}

fn summary_of(path: &Path) -> Summary {
    Summary::decode(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_good_snapshot_verifies_with_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    let s = summary_of(&summary);
    let r = run_ok([Path::new("verify"), &summary]);
    let want = format!(
        "snapshot {}: id abc, created_ms {}, 2 file(s), lz4\n\
         \x20 dump-abc-0000.strata  records 3  keys 3  bytes {}  OK\n\
         \x20 dump-abc-0001.strata  records 3  keys 2  bytes {}  OK\n\
         OK: 2 files, 5 keys\n",
        summary.display(),
        NOW - 1000,
        s.files[0].bytes,
        s.files[1].bytes
    );
    assert_eq!(r.stdout, want);
    assert_eq!(r.stderr, "");

    // The directory form, with the default name and with --name.
    let r = run_ok([Path::new("verify"), dir.path()]);
    assert_eq!(r.last_line(), "OK: 2 files, 5 keys");
    std::fs::rename(&summary, dir.path().join(summary_file_name("other"))).unwrap();
    let r = run([Path::new("verify"), dir.path()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("no snapshot summary there"), "{r:?}");
    let r = run_ok([
        Path::new("verify"),
        dir.path(),
        Path::new("--name"),
        Path::new("other"),
    ]);
    assert_eq!(r.last_line(), "OK: 2 files, 5 keys");
}

#[test]
fn objects_are_keys_with_their_own_count() {
    use ondisk::rdb::types;
    let dir = tempfile::tempdir().unwrap();
    let files = vec![
        vec![
            Item::Record(string(0, b"a", b"alpha", None, 0)),
            object(0, b"l", types::LIST, &rdb_elements(&[b"x", b"y"]), None, 0),
            object(
                2,
                b"h",
                types::HASH,
                &rdb_hash(&[(b"f", b"v")]),
                Some(NOW + 1),
                9,
            ),
        ],
        vec![
            Item::Record(string(0, b"d", b"delta", None, 0)),
            Item::Record(tombstone(0, b"gone")),
        ],
    ];
    let summary = write_items(dir.path(), "dump", 0xabd, &files, Compression::Lz4);
    let s = summary_of(&summary);
    let r = run_ok([Path::new("verify"), &summary]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", r.stdout);
    assert_eq!(
        lines[1],
        format!(
            "  dump-abd-0000.strata  records 3  keys 3  objects 2  bytes {}  OK",
            s.files[0].bytes
        )
    );
    // A file without objects keeps the line it always had.
    assert_eq!(
        lines[2],
        format!(
            "  dump-abd-0001.strata  records 2  keys 1  bytes {}  OK",
            s.files[1].bytes
        )
    );
    assert_eq!(lines[3], "OK: 2 files, 4 keys (2 objects)");
    assert_eq!(r.stderr, "");
}

#[test]
fn a_flipped_byte_in_a_block_names_the_file_and_the_frame_offset() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    let file = dir.path().join("dump-abc-0001.strata");
    let mut bytes = std::fs::read(&file).unwrap();
    // The first block's frame starts right after the 40-byte file header; its payload after
    // the 24-byte frame header.
    bytes[40 + 24 + 3] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();

    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[1].ends_with("OK"), "{}", r.stdout);
    assert_eq!(
        lines[2],
        "  dump-abc-0001.strata  ERROR: checksum mismatch in block at offset 40"
    );
    assert_eq!(
        r.last_line(),
        "CORRUPT: 1 of 2 files bad; dump-abc-0001.strata: checksum mismatch in block at offset 40"
    );
    assert_eq!(
        r.stderr,
        format!(
            "strata-compact: {}: checksum mismatch in block at offset 40\n",
            file.display()
        )
    );
}

#[test]
fn every_single_flipped_byte_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    let file = dir.path().join("dump-abc-0000.strata");
    let good = std::fs::read(&file).unwrap();
    // Every byte of the file (lz4 shrinks its 5000-byte value to a few bytes), one bit each.
    assert!(good.len() < 1000, "{}", good.len());
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 1 << (at % 8);
        std::fs::write(&file, &bad).unwrap();
        let r = run([Path::new("verify"), &summary]);
        assert_eq!(r.code, 1, "flip at {at}: {r:?}");
        assert!(
            r.last_line().starts_with("CORRUPT: "),
            "flip at {at}: {r:?}"
        );
        assert!(r.stderr.contains("dump-abc-0000.strata: "), "{r:?}");
        assert!(r.stderr.contains(" at offset "), "flip at {at}: {r:?}");
    }
}

#[test]
fn a_truncated_file_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    let file = dir.path().join("dump-abc-0000.strata");
    let bytes = std::fs::read(&file).unwrap();
    for cut in [0, 20, 40, 100, bytes.len() - 52, bytes.len() - 1] {
        std::fs::write(&file, &bytes[..cut]).unwrap();
        let r = run([Path::new("verify"), &summary]);
        assert_eq!(r.code, 1, "cut at {cut}: {r:?}");
        assert!(r.stderr.contains("dump-abc-0000.strata"), "{r:?}");
        assert!(r.stderr.contains("truncated"), "cut at {cut}: {r:?}");
        assert!(r.stderr.contains(&format!("at offset {cut}")), "{r:?}");
    }
}

#[test]
fn a_missing_file_is_corrupt_and_the_others_are_still_checked() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    std::fs::remove_file(dir.path().join("dump-abc-0000.strata")).unwrap();
    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[1].starts_with("  dump-abc-0000.strata  ERROR: missing"),
        "{}",
        r.stdout
    );
    assert!(lines[2].ends_with("OK"), "{}", r.stdout);
    assert!(
        r.last_line()
            .starts_with("CORRUPT: 1 of 2 files bad; dump-abc-0000.strata: missing"),
        "{r:?}"
    );
}

#[test]
fn a_summary_that_disagrees_with_a_file_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    let good = summary_of(&summary);
    let file_len = good.files[1].bytes;

    let mut s = good.clone();
    s.files[1].crc32 ^= 1;
    std::fs::write(&summary, s.encode()).unwrap();
    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.last_line(),
        format!(
            "CORRUPT: 1 of 2 files bad; dump-abc-0001.strata: crc32 of bytes 0..{file_len} is \
             {:08x}, the summary says {:08x}",
            good.files[1].crc32, s.files[1].crc32
        )
    );

    let mut s = good.clone();
    s.files[1].records = 7;
    std::fs::write(&summary, s.encode()).unwrap();
    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.last_line()
            .ends_with("dump-abc-0001.strata: file holds 3 records, the summary says 7"),
        "{r:?}"
    );

    let mut s = good.clone();
    s.files[0].bytes += 10;
    std::fs::write(&summary, s.encode()).unwrap();
    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.last_line().contains(&format!(
            "dump-abc-0000.strata: file is {} bytes, the summary says {}",
            good.files[0].bytes, s.files[0].bytes
        )),
        "{r:?}"
    );

    // A file of another snapshot under the expected name.
    let other = tempfile::tempdir().unwrap();
    write_files(
        other.path(),
        "dump",
        0xdef,
        &[vec![string(0, b"a", b"alpha", None, 0)], vec![]],
        Compression::Lz4,
    );
    std::fs::write(&summary, good.encode()).unwrap();
    std::fs::copy(
        other.path().join("dump-def-0000.strata"),
        dir.path().join("dump-abc-0000.strata"),
    )
    .unwrap();
    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.last_line().contains(
            "dump-abc-0000.strata: header says snapshot def at offset 20, the summary says abc"
        ),
        "{r:?}"
    );
}

#[test]
fn a_bad_or_absent_summary_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    let mut bytes = std::fs::read(&summary).unwrap();
    bytes[30] ^= 1;
    std::fs::write(&summary, &bytes).unwrap();
    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.last_line(),
        format!(
            "CORRUPT: {}: checksum mismatch in snapshot summary at offset 0",
            summary.display()
        )
    );
    assert!(r.stderr.starts_with("strata-compact: "), "{r:?}");

    let r = run([Path::new("verify"), &dir.path().join("nope-summary.strata")]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r
        .stderr
        .contains("nope-summary.strata: no snapshot summary there"));
}

#[test]
fn an_unreadable_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let summary = sample(dir.path());
    // A directory where a shard file should be: it opens, but reading it fails (EISDIR), which
    // no permission trick can do for root.
    let file = dir.path().join("dump-abc-0001.strata");
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    let r = run([Path::new("verify"), &summary]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.last_line()
            .starts_with("FAILED: 1 of 2 files bad; dump-abc-0001.strata: I/O error"),
        "{r:?}"
    );
}

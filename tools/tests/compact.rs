//! `compact`: what is dropped, what is kept byte for byte, re-sharding, recompression, and
//! the crash-safe replacement of a snapshot in place.

mod common;

use common::*;
use ondisk::{shard_of, Compression, Item, Record};
use std::path::{Path, PathBuf};

fn compact(summary: &Path, out_dir: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<std::ffi::OsString> = vec![
        "compact".into(),
        summary.into(),
        "--out-dir".into(),
        out_dir.into(),
        "--now-ms".into(),
        NOW.to_string().into(),
    ];
    args.extend(extra.iter().map(Into::into));
    run(args)
}

fn verify_ok(summary: &Path) {
    let r = run_ok([Path::new("verify"), summary]);
    assert!(r.last_line().starts_with("OK: "), "{r:?}");
}

/// Two files with every case the compactor distinguishes.
fn tricky_files() -> Vec<Vec<Record>> {
    let mut f0 = vec![
        string(0, b"plain", b"v", None, 0),
        string(0, b"ttl-future", b"v", Some(NOW + 1), 0),
        string(0, b"ttl-now", b"v", Some(NOW), 0),
        string(0, b"ttl-past", b"v", Some(1), 0),
        string(0, b"ttl-zero", b"v", Some(0), 0),
        string(
            3,
            b"flags",
            b"with flags",
            Some(NOW + 86_400_000),
            0xDEAD_BEEF,
        ),
        string(0, b"deleted", b"old", None, 0),
        string(1, b"deleted", b"other db survives", None, 0),
        string(0, b"reset", b"old", None, 0),
        tombstone(0, b"deleted"),
        tombstone(0, b"reset"),
        string(0, b"reset", b"new", Some(NOW + 5), 7),
        tombstone(0, b"never-existed"),
        string(0, b"", b"empty key", None, 0),
        string(0, b"empty-value", b"", None, 0),
        string(65535, b"\x00\xff binary \r\n", &[0u8, 255, 10, 13], None, 1),
    ];
    f0.push(string(
        2,
        b"huge",
        &Rng(3).bytes(300_000),
        Some(NOW + 10),
        0,
    ));
    let f1 = vec![
        // A tombstone in another file does not delete file 0's key.
        tombstone(0, b"plain"),
        string(0, b"file1", b"x", None, 0),
        tombstone(0, b"file1"),
        tombstone(0, b"file1"),
        string(0, b"file1-kept", b"y", None, 0),
    ];
    vec![f0, f1]
}

#[test]
fn drops_expired_and_tombstoned_keys_and_keeps_the_rest_exactly() {
    let input = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let files = tricky_files();
    let summary = write_files(input.path(), "dump", 0x10, &files, Compression::Lz4);
    let r = compact(&summary, out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.field("kept"), "10");
    assert_eq!(r.field("expired dropped"), "3");
    assert_eq!(r.field("tombstoned dropped"), "3");
    assert_eq!(r.field("tombstones removed"), "6");
    assert_eq!(r.stderr, "");

    let out_summary = out.path().join("dump-summary.strata");
    let back = read_back(&out_summary);
    let model = live_model(&files);
    assert_eq!(model.len(), 10);
    assert_eq!(back.model(), model);
    assert!(model.contains_key(&(0, b"reset".to_vec())));
    assert!(model.contains_key(&(0, b"plain".to_vec())));
    assert!(!model.contains_key(&(0, b"deleted".to_vec())));
    // Input defaults: shard count, compression, created time, db count.
    assert_eq!(back.summary.shard_count, 2);
    assert_eq!(back.summary.compression, Compression::Lz4);
    assert_eq!(back.summary.created_ms, NOW - 1000);
    assert_eq!(back.summary.db_count, 16);
    assert_ne!(back.summary.snapshot_id, 0x10);
    for (i, recs) in back.files.iter().enumerate() {
        for rec in recs {
            assert_eq!(shard_of(&rec.key, 2), i, "{rec:?}");
        }
    }
    let before: u64 = read_back(&summary)
        .summary
        .files
        .iter()
        .map(|f| f.bytes)
        .sum();
    let after: u64 = back.summary.files.iter().map(|f| f.bytes).sum();
    assert_eq!(r.field("bytes before"), before.to_string());
    assert_eq!(r.field("bytes after"), after.to_string());
    verify_ok(&out_summary);
    // The input is untouched.
    verify_ok(&summary);
    assert_eq!(list(input.path()).len(), 3);
}

#[test]
fn without_now_ms_the_clock_decides() {
    let input = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let far = 4_000_000_000_000; // year 2096
    let recs = vec![
        string(0, b"past", b"v", Some(NOW), 0),
        string(0, b"future", b"v", Some(far), 0),
    ];
    let summary = write_files(input.path(), "dump", 1, &[recs], Compression::None);
    let r = run_ok([
        Path::new("compact"),
        &summary,
        Path::new("--out-dir"),
        out.path(),
    ]);
    assert_eq!(r.field("kept"), "1");
    assert_eq!(r.field("expired dropped"), "1");
}

#[test]
fn reshards_one_file_into_three_by_shard_of() {
    let input = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recs = varied_records(3000);
    let summary = write_files(
        input.path(),
        "dump",
        0x20,
        std::slice::from_ref(&recs),
        Compression::Zstd,
    );
    let r = compact(&summary, out.path(), &["--shards", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    let back = read_back(&out.path().join("dump-summary.strata"));
    assert_eq!(back.summary.shard_count, 3);
    assert_eq!(back.files.len(), 3);
    for (i, recs) in back.files.iter().enumerate() {
        assert!(!recs.is_empty());
        for rec in recs {
            assert_eq!(shard_of(&rec.key, 3), i, "{rec:?}");
        }
    }
    assert_eq!(back.model(), live_model(&[recs]));
    verify_ok(&out.path().join("dump-summary.strata"));
}

#[test]
fn reshards_four_files_into_one() {
    let input = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recs = varied_records(2000);
    let summary = write_sharded(input.path(), "snap", 0x30, 4, &recs, Compression::Lz4);
    let r = compact(&summary, out.path(), &["--shards", "1", "--name", "one"]);
    assert_eq!(r.code, 0, "{r:?}");
    let out_summary = out.path().join("one-summary.strata");
    let back = read_back(&out_summary);
    assert_eq!(back.files.len(), 1);
    assert_eq!(back.model(), live_model(&[recs]));
    let names = list(out.path());
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names[0].starts_with("one-") && names[0].ends_with("-0000.strata"));
    assert_eq!(names[1], "one-summary.strata");
    verify_ok(&out_summary);
}

#[test]
fn changes_compression() {
    let input = tempfile::tempdir().unwrap();
    let recs = varied_records(2000);
    let summary = write_sharded(input.path(), "dump", 0x40, 2, &recs, Compression::None);
    let before: u64 = read_back(&summary)
        .summary
        .files
        .iter()
        .map(|f| f.bytes)
        .sum();
    let mut sizes = Vec::new();
    for codec in [Compression::Lz4, Compression::Zstd, Compression::None] {
        let out = tempfile::tempdir().unwrap();
        let r = compact(&summary, out.path(), &["--compression", codec.as_str()]);
        assert_eq!(r.code, 0, "{r:?}");
        let out_summary = out.path().join("dump-summary.strata");
        let back = read_back(&out_summary);
        assert_eq!(back.summary.compression, codec);
        assert_eq!(back.model(), live_model(std::slice::from_ref(&recs)));
        verify_ok(&out_summary);
        sizes.push(back.summary.files.iter().map(|f| f.bytes).sum::<u64>());
    }
    // The values repeat themselves: both codecs shrink them, and none does not.
    assert!(sizes[0] < sizes[2] && sizes[1] < sizes[2], "{sizes:?}");
    assert!(
        sizes[2] < before,
        "expired keys are gone: {sizes:?} vs {before}"
    );
}

#[test]
fn compacting_in_place_replaces_the_snapshot_and_leaves_no_stray_files() {
    let dir = tempfile::tempdir().unwrap();
    let files = tricky_files();
    let summary = write_files(dir.path(), "dump", 0x50, &files, Compression::Lz4);
    let old_names = list(dir.path());
    assert_eq!(old_names.len(), 3);

    let r = compact(&summary, dir.path(), &["--shards", "3"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.field("output").ends_with(", in place"), "{r:?}");
    assert_eq!(r.field("replaced snapshot files deleted"), "2");
    let back = read_back(&summary);
    assert_eq!(back.model(), live_model(&files));
    let mut want: Vec<String> = back.summary.files.iter().map(|f| f.name.clone()).collect();
    want.push("dump-summary.strata".into());
    want.sort();
    assert_eq!(list(dir.path()), want);
    assert!(!want
        .iter()
        .any(|n| old_names.contains(n) && n != "dump-summary.strata"));
    verify_ok(&summary);

    // Again, now from the compacted snapshot: same keys, fresh file names.
    let first_id = back.summary.snapshot_id;
    let r = compact(&summary, dir.path(), &["--compression", "zstd"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.field("tombstones removed"), "0");
    let again = read_back(&summary);
    assert!(again.summary.snapshot_id > first_id);
    assert_eq!(again.model(), live_model(&files));
    assert_eq!(list(dir.path()).len(), 4);
    verify_ok(&summary);
}

#[test]
fn a_new_name_next_to_the_input_keeps_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let recs = varied_records(500);
    let summary = write_sharded(dir.path(), "dump", 0x60, 2, &recs, Compression::Lz4);
    // A second summary under the new name that points at the input's files: replacing it
    // must not delete them.
    std::fs::copy(&summary, dir.path().join("copy-summary.strata")).unwrap();
    let r = compact(&summary, dir.path(), &["--name", "copy"]);
    assert_eq!(r.code, 0, "{r:?}");
    verify_ok(&summary);
    let copy = dir.path().join("copy-summary.strata");
    verify_ok(&copy);
    assert_eq!(read_back(&copy).model(), live_model(&[recs]));
    assert_eq!(list(dir.path()).len(), 6);
}

#[test]
fn a_damaged_input_writes_nothing() {
    let input = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recs = varied_records(500);
    let summary = write_sharded(input.path(), "dump", 0x70, 2, &recs, Compression::Lz4);
    let file = input.path().join("dump-70-0001.strata");
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let r = compact(&summary, out.path(), &["--shards", "3"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.starts_with("strata-compact: "), "{r:?}");
    assert!(r.stderr.contains("dump-70-0001.strata: "), "{r:?}");
    assert!(r.stderr.contains(" at offset "), "{r:?}");
    assert_eq!(list(out.path()), Vec::<String>::new());

    // In place: the damaged snapshot stays exactly as it was.
    let before = list(input.path());
    let r = compact(&summary, input.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(list(input.path()), before);
}

#[test]
fn an_unknown_record_kind_is_refused_not_dropped() {
    let input = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let summary = write_files(
        input.path(),
        "dump",
        0x80,
        &[vec![string(0, b"a", b"1", None, 0)]],
        Compression::None,
    );
    // Rewrite the only block with a record of kind 3 (a planned list) appended: the body is
    // opaque to this build, which must refuse to drop it silently.
    let file = input.path().join("dump-80-0000.strata");
    let bytes = std::fs::read(&file).unwrap();
    let header = &bytes[..40];
    let frame = &bytes[40..64];
    let stored = u32::from_le_bytes(frame[8..12].try_into().unwrap()) as usize;
    let mut raw = bytes[64..64 + stored].to_vec();
    raw.extend_from_slice(&[3, 2, 0xAA, 0xBB]);
    let mut file_bytes = header.to_vec();
    let mut fh = vec![0u8; 24];
    fh[0..4].copy_from_slice(b"SBLK");
    fh[8..12].copy_from_slice(&(raw.len() as u32).to_le_bytes());
    fh[12..16].copy_from_slice(&(raw.len() as u32).to_le_bytes());
    fh[16..20].copy_from_slice(&crc32fast::hash(&raw).to_le_bytes());
    let c = crc32fast::hash(&fh[..20]);
    fh[20..24].copy_from_slice(&c.to_le_bytes());
    file_bytes.extend_from_slice(&fh);
    file_bytes.extend_from_slice(&raw);
    let mut end = vec![0u8; 28];
    end[0..8].copy_from_slice(&2u64.to_le_bytes());
    end[8..16].copy_from_slice(&1u64.to_le_bytes());
    end[16..24].copy_from_slice(&(raw.len() as u64).to_le_bytes());
    end[24..28].copy_from_slice(&crc32fast::hash(&file_bytes).to_le_bytes());
    let mut eh = vec![0u8; 24];
    eh[0..4].copy_from_slice(b"SEND");
    eh[8..12].copy_from_slice(&28u32.to_le_bytes());
    eh[12..16].copy_from_slice(&28u32.to_le_bytes());
    eh[16..20].copy_from_slice(&crc32fast::hash(&end).to_le_bytes());
    let c = crc32fast::hash(&eh[..20]);
    eh[20..24].copy_from_slice(&c.to_le_bytes());
    file_bytes.extend_from_slice(&eh);
    file_bytes.extend_from_slice(&end);
    std::fs::write(&file, &file_bytes).unwrap();
    let mut s = read_back_summary(&summary);
    s.files[0].bytes = file_bytes.len() as u64;
    s.files[0].crc32 = crc32fast::hash(&file_bytes);
    s.files[0].records = 2;
    std::fs::write(&summary, s.encode()).unwrap();

    let r = run_ok([Path::new("verify"), &summary]);
    assert!(
        r.stdout.contains("OK (1 record(s) of unknown kinds)"),
        "{r:?}"
    );
    let r = compact(&summary, out.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("1 record(s) of kinds this build does not know"),
        "{r:?}"
    );
    assert_eq!(list(out.path()), Vec::<String>::new());
}

fn read_back_summary(path: &Path) -> ondisk::Summary {
    ondisk::Summary::decode(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn an_output_directory_that_cannot_be_created_is_an_io_error() {
    let input = tempfile::tempdir().unwrap();
    let summary = write_files(
        input.path(),
        "dump",
        0x90,
        &[vec![string(0, b"a", b"1", None, 0)]],
        Compression::None,
    );
    let blocker: PathBuf = input.path().join("a-file");
    std::fs::write(&blocker, b"x").unwrap();
    let r = compact(&summary, &blocker.join("sub"), &[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("cannot create output directory"), "{r:?}");
    let r = compact(&summary, &blocker, &[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert_eq!(list(input.path()).len(), 3);
}

// ---- objects (keys of types other than string) ----

/// Strings and objects interleaved over two files, each key in the file `shard_of(key, 2)`
/// names, with tombstones deleting some of each and one tombstone in the wrong file.
fn files_with_objects() -> Vec<Vec<Item>> {
    let strings = varied_records(600).into_iter().map(Item::Record);
    let objects = varied_objects(300);
    let mut files = vec![Vec::new(), Vec::new()];
    let mut objects = objects.into_iter();
    for s in strings {
        for item in [Some(s), objects.next()].into_iter().flatten() {
            files[shard_of(item_key(&item).1, 2)].push(item);
        }
    }
    for item in objects {
        files[shard_of(item_key(&item).1, 2)].push(item);
    }
    for file in &mut files {
        let doomed: Vec<Item> = file
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 10 == 3)
            .map(|(_, item)| {
                let (db, key) = item_key(item);
                Item::Record(tombstone(db, key))
            })
            .collect();
        file.extend(doomed);
    }
    // A tombstone in another file than its key's deletes nothing, for objects as for strings.
    let (db, key) = item_key(&files[0][1]);
    let stray = Item::Record(tombstone(db, key));
    files[1].push(stray);
    files
}

/// The objects of a read-back snapshot sit in the files `shard_of(key, N)` names.
fn assert_objects_on_their_shards(back: &ReadBack) {
    let n = back.items.len();
    for (i, items) in back.items.iter().enumerate() {
        for item in items {
            assert_eq!(shard_of(item_key(item).1, n), i, "{item:?}");
        }
    }
}

#[test]
fn objects_are_kept_byte_for_byte_on_their_shard_and_expired_ones_dropped() {
    let input = tempfile::tempdir().unwrap();
    let files = files_with_objects();
    let summary = write_items(input.path(), "dump", 0xa0, &files, Compression::Lz4);
    let (strings, objects) = live_models(&files);
    let keyed = files
        .iter()
        .flatten()
        .filter(|i| !matches!(i, Item::Record(r) if r.value == ondisk::RecordValue::Tombstone))
        .count();
    // Every case the rule knows is here: live, expired and tombstoned objects.
    assert!(
        objects.len() > 100 && objects.len() < 301,
        "{}",
        objects.len()
    );
    let unexpired = files
        .iter()
        .flatten()
        .filter(|i| matches!(i, Item::Object(o) if o.expire_at_ms.is_none_or(|t| t > NOW)))
        .count();
    assert!(unexpired > objects.len(), "no object was tombstoned");
    assert!(objects.contains_key(&(1, b"big-list".to_vec())));
    assert!(objects.values().any(|o| o.2.is_some() && o.3 != 0));

    for shards in ["2", "3", "1"] {
        let out = tempfile::tempdir().unwrap();
        let r = compact(&summary, out.path(), &["--shards", shards]);
        assert_eq!(r.code, 0, "{r:?}");
        assert_eq!(r.stderr, "");
        assert_eq!(r.field("kept"), (strings.len() + objects.len()).to_string());
        assert_eq!(r.field("objects kept"), objects.len().to_string());
        let dropped: usize = ["expired dropped", "tombstoned dropped"]
            .iter()
            .map(|f| r.field(f).parse::<usize>().unwrap())
            .sum();
        assert_eq!(strings.len() + objects.len() + dropped, keyed);

        let out_summary = out.path().join("dump-summary.strata");
        let back = read_back(&out_summary);
        assert_eq!(back.summary.shard_count.to_string(), shards);
        assert_eq!(back.model(), strings);
        assert_eq!(back.objects(), objects);
        assert_objects_on_their_shards(&back);
        let r = run_ok([Path::new("verify"), &out_summary]);
        assert!(
            r.last_line()
                .ends_with(&format!(" keys ({} objects)", objects.len())),
            "{r:?}"
        );
    }
}

#[test]
fn compacting_objects_in_place_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let files = files_with_objects();
    let summary = write_items(dir.path(), "dump", 0xb0, &files, Compression::Zstd);
    let (strings, objects) = live_models(&files);
    for extra in [&["--shards", "4"][..], &["--compression", "none"][..]] {
        let r = compact(&summary, dir.path(), extra);
        assert_eq!(r.code, 0, "{r:?}");
        assert!(r.field("output").ends_with(", in place"), "{r:?}");
        let back = read_back(&summary);
        assert_eq!(back.model(), strings);
        assert_eq!(back.objects(), objects);
        assert_objects_on_their_shards(&back);
    }
}

/// One key's records in one file: `S` a string, `O` an object, `T` a tombstone. Position `p`'s
/// value names `p`, so a survivor tells where it came from.
fn key_history(case: &str, objects: bool) -> Vec<Item> {
    let key = format!("case:{case}");
    case.chars()
        .enumerate()
        .map(|(p, c)| {
            let value = format!("p{p}");
            match c {
                'O' if objects => object(
                    0,
                    key.as_bytes(),
                    ondisk::rdb::types::LIST,
                    &rdb_elements(&[value.as_bytes()]),
                    None,
                    0,
                ),
                'T' => Item::Record(tombstone(0, key.as_bytes())),
                _ => Item::Record(string(0, key.as_bytes(), value.as_bytes(), None, 0)),
            }
        })
        .collect()
}

/// Compacts one file holding every case's history (one shard out, so file order is kept) and
/// returns, per case, the positions that survived, in output order.
fn survivors(dir: &Path, cases: &[String], objects: bool) -> Vec<(String, Vec<usize>)> {
    let file: Vec<Item> = cases.iter().flat_map(|c| key_history(c, objects)).collect();
    let input = dir.join(if objects { "mixed" } else { "strings" });
    std::fs::create_dir(&input).unwrap();
    let summary = write_items(&input, "dump", 0xc0, &[file], Compression::None);
    let r = compact(&summary, &input.join("out"), &["--shards", "1"]);
    assert_eq!(r.code, 0, "{r:?}");
    let back = read_back(&input.join("out").join("dump-summary.strata"));
    cases
        .iter()
        .map(|case| {
            let history = key_history(case, objects);
            let kept = back.items[0]
                .iter()
                .filter(|item| item_key(item).1 == format!("case:{case}").as_bytes())
                .map(|item| history.iter().position(|h| h == item).unwrap())
                .collect();
            (case.clone(), kept)
        })
        .collect()
}

#[test]
fn a_string_and_an_object_of_one_key_resolve_as_two_strings_do() {
    // Every history of one key up to three records long.
    let mut cases: Vec<String> = vec![String::new()];
    for _ in 0..3 {
        cases = cases
            .iter()
            .flat_map(|c| ["S", "O", "T"].map(|k| format!("{c}{k}")))
            .chain(cases.iter().cloned())
            .collect();
    }
    cases.retain(|c| !c.is_empty());
    cases.sort();
    cases.dedup();
    assert_eq!(cases.len(), 3 + 9 + 27);

    let dir = tempfile::tempdir().unwrap();
    let as_strings = survivors(dir.path(), &cases, false);
    let mixed = survivors(dir.path(), &cases, true);
    assert_eq!(mixed, as_strings);

    // What that rule is: a tombstone deletes every earlier record of its key in its file,
    // whatever the record's type; records with no tombstone after them all stay (the server
    // writes a key twice in one file only with a tombstone between).
    let of = |case: &str| &mixed.iter().find(|(c, _)| c == case).unwrap().1;
    assert_eq!(of("OT"), &Vec::<usize>::new());
    assert_eq!(of("OTS"), &vec![2]);
    assert_eq!(of("STO"), &vec![2]);
    assert_eq!(of("OTO"), &vec![2]);
    assert_eq!(of("TO"), &vec![1]);
    assert_eq!(of("OST"), &Vec::<usize>::new());
    assert_eq!(of("OS"), &vec![0, 1]);
    assert_eq!(of("SO"), &vec![0, 1]);
    assert_eq!(of("SS"), &vec![0, 1]);
}

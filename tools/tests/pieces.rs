//! Large objects (written in pieces, snapshot format version 2) and function libraries through
//! every subcommand: `verify` checks them, `stats` counts their elements, `compact` keeps them
//! (the libraries first), `to-rdb` and `from-rdb` carry both.

mod common;

use common::*;
use ondisk::rdb::types;
use ondisk::{Compression, Item, RdbItem, RdbReader};
use std::path::Path;

const LIBRARY: &[u8] = b"#!lua name=mylib\nredis.register_function('f', function() return 1 end)";

/// A snapshot of two files: a library, a 30,000-member set (six pieces), a small hash
/// and a string.
fn snapshot(dir: &Path) -> std::path::PathBuf {
    let members: Vec<Vec<u8>> = (0..30_000)
        .map(|i| format!("member:{i}").into_bytes())
        .collect();
    let refs: Vec<&[u8]> = members.iter().map(|m| &m[..]).collect();
    let big = rdb_elements(&refs);
    assert!(big.len() > 5 * ondisk::snapshot::PIECE_LEN);
    let files = vec![
        vec![
            Item::Function(bytes::Bytes::from_static(LIBRARY)),
            object(0, b"big", types::SET, &big, Some(NOW + 60_000), 0),
            Item::Record(string(0, b"s", b"v", None, 0)),
        ],
        vec![object(
            1,
            b"h",
            types::HASH,
            &rdb_hash(&[(b"f", b"v"), (b"g", b"w")]),
            None,
            0,
        )],
    ];
    write_items(dir, "dump", 0x21, &files, Compression::Lz4)
}

fn functions_of_rdb(path: &Path) -> (Vec<bytes::Bytes>, Vec<(Vec<u8>, u8)>) {
    let mut r = RdbReader::new(std::fs::File::open(path).unwrap()).unwrap();
    r.keep_functions();
    r.keep_objects(1 << 30);
    let (mut libs, mut objects) = (Vec::new(), Vec::new());
    while let Some(item) = r.next().unwrap() {
        match item {
            RdbItem::Function(code) => libs.push(code),
            RdbItem::Object { key, rdb_type, .. } => objects.push((key.to_vec(), rdb_type)),
            _ => {}
        }
    }
    (libs, objects)
}

#[test]
fn large_objects_and_libraries_go_through_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let summary = snapshot(dir.path());
    let before = read_back(&summary);
    assert!(before.summary.files[0].records > 7, "the set is in pieces");

    let r = run_ok([Path::new("verify"), &summary]);
    assert!(r.last_line().starts_with("OK: "), "{r:?}");

    let r = run_ok([Path::new("stats"), &summary]);
    assert!(
        r.stdout
            .contains("elements per type:\n  hash: 2\n  set: 30000\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("keys per type:\n  string: 1\n  hash: 1\n  set: 1\n"),
        "{}",
        r.stdout
    );

    let out = dir.path().join("compacted");
    let r = run_ok([
        "compact".as_ref(),
        summary.as_os_str(),
        "--out-dir".as_ref(),
        out.as_os_str(),
        "--now-ms".as_ref(),
        NOW.to_string().as_ref(),
        "--shards".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(r.field("function libraries kept"), "1");
    let after = read_back(&out.join("dump-summary.strata"));
    assert_eq!(after.objects(), before.objects());
    assert_eq!(after.model(), before.model());
    assert!(
        matches!(&after.items[0][0], Item::Function(code) if &code[..] == LIBRARY),
        "the library is not the first record"
    );
    assert!(
        after.summary.files[0].records > 7,
        "the set is in pieces again"
    );

    let rdb = dir.path().join("out.rdb");
    let r = run_ok([
        "to-rdb".as_ref(),
        summary.as_os_str(),
        "--out".as_ref(),
        rdb.as_os_str(),
        "--now-ms".as_ref(),
        NOW.to_string().as_ref(),
    ]);
    assert_eq!(r.field("function libraries kept"), "1");
    let (libs, mut objects) = functions_of_rdb(&rdb);
    assert_eq!(libs, vec![bytes::Bytes::from_static(LIBRARY)]);
    objects.sort();
    assert_eq!(
        objects,
        vec![(b"big".to_vec(), types::SET), (b"h".to_vec(), types::HASH)]
    );

    let back = dir.path().join("back");
    let r = run_ok([
        "from-rdb".as_ref(),
        rdb.as_os_str(),
        "--out-dir".as_ref(),
        back.as_os_str(),
        "--now-ms".as_ref(),
        NOW.to_string().as_ref(),
        "--shards".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(r.field("objects kept"), "2");
    assert_eq!(r.field("function libraries kept"), "1");
    let imported = read_back(&back.join("dump-summary.strata"));
    assert_eq!(imported.objects(), before.objects());
    assert!(matches!(&imported.items[0][0], Item::Function(code) if &code[..] == LIBRARY));
    let r = run_ok([Path::new("verify"), &back.join("dump-summary.strata")]);
    assert!(r.last_line().starts_with("OK: "), "{r:?}");
}

//! `to-rdb` and `from-rdb`: the round trip, what each side cannot hold, and a real
//! redis-server loading the export (see test-support for when it is not installed).

mod common;

use common::*;
use ondisk::rdb::{rdb_header, rdb_trailer, types, Crc64};
use ondisk::{Compression, Item, RdbItem, RdbReader};
use std::collections::BTreeMap;
use std::path::Path;
use test_support::{now_ms, redis_server_binary, RedisServer, Resp};

/// (db, key) -> (value, expire): what an RDB file can hold.
type RdbModel = BTreeMap<(u16, Vec<u8>), (Vec<u8>, Option<u64>)>;

/// The live model without client flags (RDB has none).
fn without_flags(files: &[Vec<ondisk::Record>]) -> RdbModel {
    live_model(files)
        .into_iter()
        .map(|(k, (v, e, _))| (k, (v, e)))
        .collect()
}

fn to_rdb(summary: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<std::ffi::OsString> = vec![
        "to-rdb".into(),
        summary.into(),
        "--out".into(),
        out.into(),
        "--now-ms".into(),
        NOW.to_string().into(),
    ];
    args.extend(extra.iter().map(Into::into));
    run(args)
}

fn from_rdb(rdb: &Path, out_dir: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<std::ffi::OsString> = vec![
        "from-rdb".into(),
        rdb.into(),
        "--out-dir".into(),
        out_dir.into(),
        "--now-ms".into(),
        NOW.to_string().into(),
    ];
    args.extend(extra.iter().map(Into::into));
    run(args)
}

fn rdb_strings(path: &Path) -> RdbModel {
    let mut r = RdbReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut m = RdbModel::new();
    while let Some(item) = r.next().unwrap() {
        if let RdbItem::String {
            db,
            key,
            value,
            expire_at_ms,
        } = item
        {
            let old = m.insert((db as u16, key.to_vec()), (value.to_vec(), expire_at_ms));
            assert!(old.is_none());
        }
    }
    m
}

#[test]
fn snapshot_to_rdb_to_snapshot_keeps_keys_values_and_ttls() {
    let dir = tempfile::tempdir().unwrap();
    let mut recs = varied_records(3000);
    recs.push(tombstone(0, b"key:3"));
    let files = vec![recs];
    let summary = write_files(dir.path(), "dump", 0x11, &files, Compression::Lz4);
    let model = without_flags(&files);
    let flagged = live_model(&files).values().filter(|v| v.2 != 0).count();
    assert!(flagged > 0);

    let rdb = dir.path().join("out.rdb");
    let r = to_rdb(&summary, &rdb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.field("kept"), model.len().to_string());
    assert_eq!(r.field("expired dropped"), "600");
    assert_eq!(r.field("tombstoned dropped"), "1");
    assert_eq!(
        r.stderr,
        format!(
            "strata-compact: warning: {flagged} key(s) had client flags, which RDB cannot hold; \
             they were exported without\n"
        )
    );
    assert!(!dir.path().join("out.rdb.tmp").exists());
    assert_eq!(rdb_strings(&rdb), model);
    assert_eq!(&std::fs::read(&rdb).unwrap()[..9], b"REDIS0010");

    let back = dir.path().join("back");
    let r = from_rdb(&rdb, &back, &["--shards", "4", "--compression", "zstd"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.field("kept"), model.len().to_string());
    assert_eq!(r.field("expired dropped"), "0");
    assert_eq!(r.field("skipped"), "0");
    assert_eq!(r.stderr, "");
    let out = back.join("dump-summary.strata");
    let rb = read_back(&out);
    assert_eq!(rb.summary.compression, Compression::Zstd);
    assert_eq!(rb.files.len(), 4);
    for (i, recs) in rb.files.iter().enumerate() {
        for rec in recs {
            assert_eq!(ondisk::shard_of(&rec.key, 4), i);
        }
    }
    let got: RdbModel = rb
        .model()
        .into_iter()
        .map(|(k, (v, e, f))| {
            assert_eq!(f, 0);
            (k, (v, e))
        })
        .collect();
    assert_eq!(got, model);
    let r = run_ok([Path::new("verify"), &out]);
    assert_eq!(r.last_line(), format!("OK: 4 files, {} keys", model.len()));
}

#[test]
fn older_rdb_versions_and_bad_versions() {
    let dir = tempfile::tempdir().unwrap();
    let files = vec![vec![string(0, b"k", b"v", None, 0)]];
    let summary = write_files(dir.path(), "dump", 1, &files, Compression::None);
    let rdb = dir.path().join("v7.rdb");
    let r = to_rdb(&summary, &rdb, &["--rdb-version", "7"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(&std::fs::read(&rdb).unwrap()[..9], b"REDIS0007");
    for bad in ["6", "13", "x"] {
        let r = to_rdb(&summary, &rdb, &["--rdb-version", bad]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.starts_with("strata-compact: error: "), "{r:?}");
    }
    // The directory form of the input.
    let r = run_ok([
        Path::new("to-rdb"),
        dir.path(),
        Path::new("--out"),
        &dir.path().join("dir.rdb"),
    ]);
    assert_eq!(r.field("kept"), "1");
    // An output directory that does not exist is an I/O error.
    let r = to_rdb(&summary, &dir.path().join("no/such/dir.rdb"), &[]);
    assert_eq!(r.code, 3, "{r:?}");
}

/// Every item of an RDB file but its AUX fields, in file order.
fn rdb_keys(path: &Path) -> Vec<RdbItem> {
    let mut r = RdbReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut items = Vec::new();
    while let Some(item) = r.next().unwrap() {
        if !matches!(item, RdbItem::Aux { .. }) {
            items.push(item);
        }
    }
    items
}

#[test]
fn to_rdb_writes_objects_as_keys_of_their_rdb_type() {
    let dir = tempfile::tempdir().unwrap();
    let list = rdb_elements(&[b"a", b"b"]);
    let set = rdb_elements(&[b"m"]);
    let hash = rdb_hash(&[(b"f", b"v")]);
    // A set as one listpack: RDB type 20, which RDB version 11 brought.
    let mut packed = Vec::new();
    ondisk::rdb::write_plain_string(&mut packed, b"listpack bytes, opaque here");
    let files = vec![
        vec![
            Item::Record(string(0, b"s", b"v", None, 0)),
            object(0, b"l", types::LIST, &list, Some(NOW + 5000), 0),
            object(3, b"h", types::HASH, &hash, None, 7),
            object(0, b"old", types::SET, &set, Some(NOW - 1), 0),
            object(0, b"gone", types::LIST, &list, None, 0),
            Item::Record(tombstone(0, b"gone")),
        ],
        vec![object(1, b"packed", types::SET_LISTPACK, &packed, None, 0)],
    ];
    let summary = write_items(dir.path(), "dump", 0x12, &files, Compression::Lz4);
    let rdb = dir.path().join("out.rdb");
    let r = to_rdb(&summary, &rdb, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.field("kept"), "4");
    assert_eq!(r.field("objects kept"), "3");
    assert_eq!(r.field("expired dropped"), "1");
    assert_eq!(r.field("tombstoned dropped"), "1");
    assert_eq!(
        r.stderr,
        "strata-compact: warning: 1 object(s) of RDB types that version 10 predates (set 1): \
         only a redis-server that reads RDB version 11 or newer loads them \
         (`--rdb-version 11` labels the file so)\n\
         strata-compact: warning: 1 key(s) had client flags, which RDB cannot hold; they were \
         exported without\n"
    );
    let skipped = |db: u32, key: &[u8], type_code: u8| RdbItem::Skipped {
        db,
        key: bytes::Bytes::copy_from_slice(key),
        type_code,
    };
    let want = vec![
        RdbItem::String {
            db: 0,
            key: bytes::Bytes::from_static(b"s"),
            value: bytes::Bytes::from_static(b"v"),
            expire_at_ms: None,
        },
        skipped(0, b"l", types::LIST),
        skipped(3, b"h", types::HASH),
        skipped(1, b"packed", types::SET_LISTPACK),
    ];
    assert_eq!(rdb_keys(&rdb), want);

    // Asked for a version that has every type, the export says nothing about them.
    let r = to_rdb(&summary, &rdb, &["--rdb-version", "11"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("predates"), "{r:?}");
    assert_eq!(&std::fs::read(&rdb).unwrap()[..9], b"REDIS0011");
    assert_eq!(rdb_keys(&rdb), want);
}

/// An RDB with strings, an expired string, two lists and a set, made by hand.
fn mixed_rdb(path: &Path) {
    let mut b = rdb_header(10);
    b.extend_from_slice(&[0xFE, 0x00]); // SELECTDB 0
    b.extend_from_slice(&[0x00, 1, b's', 2, b'h', b'i']); // string s = "hi"
    b.extend_from_slice(&[0x01, 2, b'l', b'1', 2, 1, b'a', 1, b'b']); // list l1 [a, b]
    b.push(0xFC); // EXPIRETIME_MS, in the past
    b.extend_from_slice(&((NOW - 1) as i64).to_le_bytes());
    b.extend_from_slice(&[0x00, 3, b'o', b'l', b'd', 1, b'x']);
    b.extend_from_slice(&[0xFE, 0x03]); // SELECTDB 3
    b.extend_from_slice(&[0x02, 2, b's', b'1', 1, 1, b'm']); // set s1 {m}
    b.push(0xFC); // EXPIRETIME_MS, in the future
    b.extend_from_slice(&((NOW + 5000) as i64).to_le_bytes());
    b.extend_from_slice(&[0x00, 1, b't', 0xC0, 42]); // string t = 42 (int-encoded)
    b.extend_from_slice(&[0x01, 2, b'l', b'2', 1, 1, b'z']); // list l2 [z]
    let mut crc = Crc64::new();
    crc.update(&b);
    b.extend_from_slice(&rdb_trailer(crc));
    std::fs::write(path, b).unwrap();
}

#[test]
fn from_rdb_imports_collections_as_objects() {
    let dir = tempfile::tempdir().unwrap();
    let rdb = dir.path().join("mixed.rdb");
    mixed_rdb(&rdb);
    let out = dir.path().join("snap");
    let r = from_rdb(&rdb, &out, &["--name", "imported"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.field("kept"), "5");
    assert_eq!(r.field("objects kept"), "3");
    assert_eq!(r.field("expired dropped"), "1");
    assert_eq!(r.field("skipped"), "0");
    assert_eq!(r.stderr, "");
    let rb = read_back(&out.join("imported-summary.strata"));
    assert_eq!(rb.summary.compression, Compression::Lz4);
    assert_eq!(rb.files.len(), 1);
    let want: BTreeMap<_, _> = [
        ((0u16, b"s".to_vec()), (b"hi".to_vec(), None, 0u32)),
        (
            (3u16, b"t".to_vec()),
            (b"42".to_vec(), Some(NOW + 5000), 0u32),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(rb.model(), want);
    // The collections, their RDB encodings as the file held them.
    let objects = rb.objects();
    let want_objects: BTreeMap<_, _> = [
        (
            (0u16, b"l1".to_vec()),
            (types::LIST, vec![2, 1, b'a', 1, b'b'], None, 0u32),
        ),
        (
            (3u16, b"s1".to_vec()),
            (types::SET, vec![1, 1, b'm'], None, 0u32),
        ),
        (
            (3u16, b"l2".to_vec()),
            (types::LIST, vec![1, 1, b'z'], None, 0u32),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(objects, want_objects);
}

#[test]
fn from_rdb_refuses_a_damaged_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rdb = dir.path().join("mixed.rdb");
    mixed_rdb(&rdb);
    let mut bytes = std::fs::read(&rdb).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 1; // inside the CRC-64
    std::fs::write(&rdb, &bytes).unwrap();
    let out = dir.path().join("snap");
    let r = from_rdb(&rdb, &out, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("mixed.rdb: "), "{r:?}");
    assert!(r.stderr.contains("offset"), "{r:?}");
    assert_eq!(list(&out), Vec::<String>::new());

    std::fs::write(&rdb, b"not an rdb at all").unwrap();
    let r = from_rdb(&rdb, &out, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let r = from_rdb(&dir.path().join("absent.rdb"), &out, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("absent.rdb: missing"), "{r:?}");
}

// ---- a real redis-server ----

#[test]
fn redis_server_loads_the_export() {
    let Some(bin) = redis_server_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let now = now_ms();
    let big = Rng(9).bytes(100_000);
    let files = vec![
        vec![
            string(0, b"greeting", b"hello", None, 0),
            string(0, b"counter", b"12345", None, 0),
            string(0, b"ttl", b"soon", Some(now + 3_600_000), 0),
            string(0, b"gone", b"expired", Some(now - 1000), 0),
            string(5, b"greeting", b"db five", None, 0),
        ],
        vec![
            string(0, b"big", &big, None, 0),
            string(0, b"repeat", &b"abc".repeat(1000), None, 0),
            string(0, b"bin\x00key", b"\x00\xff", None, 0),
        ],
    ];
    let summary = write_files(dir.path(), "dump", 0x99, &files, Compression::Lz4);
    let r = run_ok([
        Path::new("to-rdb"),
        &summary,
        Path::new("--out"),
        &dir.path().join("export.rdb"),
    ]);
    assert_eq!(r.field("kept"), "7");

    let mut redis = RedisServer::start_with(&bin, dir.path(), "export.rdb", &[]);
    assert_eq!(redis.cmd(&[b"DBSIZE"]), Resp::Int(6));
    let get = |redis: &mut RedisServer, k: &[u8]| redis.cmd(&[b"GET", k]);
    assert_eq!(
        get(&mut redis, b"greeting"),
        Resp::Bulk(Some(b"hello".to_vec()))
    );
    assert_eq!(
        get(&mut redis, b"counter"),
        Resp::Bulk(Some(b"12345".to_vec()))
    );
    assert_eq!(get(&mut redis, b"big"), Resp::Bulk(Some(big.clone())));
    assert_eq!(
        get(&mut redis, b"repeat"),
        Resp::Bulk(Some(b"abc".repeat(1000)))
    );
    assert_eq!(
        get(&mut redis, b"bin\x00key"),
        Resp::Bulk(Some(b"\x00\xff".to_vec()))
    );
    assert_eq!(get(&mut redis, b"gone"), Resp::Bulk(None));
    match redis.cmd(&[b"PTTL", b"ttl"]) {
        Resp::Int(ms) => assert!(ms > 3_500_000 && ms <= 3_600_000, "{ms}"),
        other => panic!("PTTL: {other:?}"),
    }
    assert_eq!(redis.cmd(&[b"PTTL", b"greeting"]), Resp::Int(-1));
    assert_eq!(redis.cmd(&[b"SELECT", b"5"]), Resp::Simple("OK".into()));
    assert_eq!(
        get(&mut redis, b"greeting"),
        Resp::Bulk(Some(b"db five".to_vec()))
    );
    assert!(!matches!(redis.cmd(&[b"PING"]), Resp::Error(_)));
}

#[test]
fn redis_server_loads_exported_objects() {
    let Some(bin) = redis_server_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let now = now_ms();
    let files = vec![vec![
        Item::Record(string(0, b"greeting", b"hello", None, 0)),
        object(
            0,
            b"list",
            types::LIST,
            &rdb_elements(&[b"a", b"", b"c"]),
            None,
            0,
        ),
        object(
            0,
            b"hash",
            types::HASH,
            &rdb_hash(&[(b"f1", b"v1"), (b"f2", b"v2")]),
            Some(now + 3_600_000),
            0,
        ),
        object(2, b"set", types::SET, &rdb_elements(&[b"x", b"y"]), None, 0),
        object(
            0,
            b"gone",
            types::SET,
            &rdb_elements(&[b"z"]),
            Some(now - 1000),
            0,
        ),
    ]];
    let summary = write_items(dir.path(), "dump", 0x9a, &files, Compression::Lz4);
    let r = run_ok([
        Path::new("to-rdb"),
        &summary,
        Path::new("--out"),
        &dir.path().join("objects.rdb"),
    ]);
    assert_eq!(r.field("objects kept"), "3");

    let mut redis = RedisServer::start_with(&bin, dir.path(), "objects.rdb", &[]);
    assert_eq!(redis.cmd(&[b"DBSIZE"]), Resp::Int(3));
    assert_eq!(redis.cmd(&[b"TYPE", b"list"]), Resp::Simple("list".into()));
    assert_eq!(redis.cmd(&[b"LLEN", b"list"]), Resp::Int(3));
    assert_eq!(
        redis.cmd(&[b"LINDEX", b"list", b"2"]),
        Resp::Bulk(Some(b"c".to_vec()))
    );
    assert_eq!(redis.cmd(&[b"TYPE", b"hash"]), Resp::Simple("hash".into()));
    assert_eq!(
        redis.cmd(&[b"HGET", b"hash", b"f2"]),
        Resp::Bulk(Some(b"v2".to_vec()))
    );
    match redis.cmd(&[b"PTTL", b"hash"]) {
        Resp::Int(ms) => assert!(ms > 3_500_000 && ms <= 3_600_000, "{ms}"),
        other => panic!("PTTL: {other:?}"),
    }
    assert_eq!(redis.cmd(&[b"PTTL", b"list"]), Resp::Int(-1));
    assert_eq!(redis.cmd(&[b"EXISTS", b"gone"]), Resp::Int(0));
    assert_eq!(redis.cmd(&[b"SELECT", b"2"]), Resp::Simple("OK".into()));
    assert_eq!(redis.cmd(&[b"SCARD", b"set"]), Resp::Int(2));
    assert_eq!(redis.cmd(&[b"SISMEMBER", b"set", b"y"]), Resp::Int(1));
}

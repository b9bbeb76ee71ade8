//! Shared by the integration tests: building snapshots with `ondisk`'s writers (strings,
//! tombstones and objects), reading them back, and running the real `strata-compact` binary.

#![allow(dead_code)]

use bytes::Bytes;
use ondisk::rdb::{write_len, write_plain_string};
use ondisk::{
    shard_file_name, shard_of, summary_file_name, Compression, Item, ObjectRecord, Record,
    RecordValue, SnapshotHeader, SnapshotReader, SnapshotWriter, Summary, SummaryFile,
};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (db, key) -> (value, expire, client flags): what a snapshot holds, order aside.
pub type Model = BTreeMap<(u16, Vec<u8>), (Vec<u8>, Option<u64>, u32)>;

/// (db, key) -> (RDB type, encoded value, expire, client flags): a snapshot's objects.
pub type ObjectModel = BTreeMap<(u16, Vec<u8>), (u8, Vec<u8>, Option<u64>, u32)>;

/// A fixed "now" for every test, so expiry is deterministic.
pub const NOW: u64 = 1_700_000_000_000;

pub fn string(db: u16, key: &[u8], value: &[u8], expire: Option<u64>, flags: u32) -> Record {
    Record {
        db,
        key: Bytes::copy_from_slice(key),
        expire_at_ms: expire,
        client_flags: flags,
        value: RecordValue::String(Bytes::copy_from_slice(value)),
    }
}

pub fn tombstone(db: u16, key: &[u8]) -> Record {
    Record {
        db,
        key: Bytes::copy_from_slice(key),
        expire_at_ms: None,
        client_flags: 0,
        value: RecordValue::Tombstone,
    }
}

/// An object record: a key of type `rdb_type`, `value` its RDB encoding.
pub fn object(
    db: u16,
    key: &[u8],
    rdb_type: u8,
    value: &[u8],
    expire: Option<u64>,
    flags: u32,
) -> Item {
    Item::Object(ObjectRecord {
        db,
        key: Bytes::copy_from_slice(key),
        expire_at_ms: expire,
        client_flags: flags,
        rdb_type,
        value: Bytes::copy_from_slice(value),
    })
}

/// The RDB encoding of a plain list or set (types 1 and 2): a count, then the elements.
pub fn rdb_elements(elements: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    write_len(&mut out, elements.len() as u64);
    for e in elements {
        write_plain_string(&mut out, e);
    }
    out
}

/// The RDB encoding of a plain hash (type 4): a count of pairs, then field, value, ...
pub fn rdb_hash(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    write_len(&mut out, pairs.len() as u64);
    for (field, value) in pairs {
        write_plain_string(&mut out, field);
        write_plain_string(&mut out, value);
    }
    out
}

/// Writes a snapshot whose file i holds exactly `files[i]`, named as the server names them.
/// Returns the summary's path.
pub fn write_files(
    dir: &Path,
    name: &str,
    id: u64,
    files: &[Vec<Record>],
    compression: Compression,
) -> PathBuf {
    let items: Vec<Vec<Item>> = files
        .iter()
        .map(|recs| recs.iter().cloned().map(Item::Record).collect())
        .collect();
    write_items(dir, name, id, &items, compression)
}

/// [`write_files`] with objects among the records.
pub fn write_items(
    dir: &Path,
    name: &str,
    id: u64,
    files: &[Vec<Item>],
    compression: Compression,
) -> PathBuf {
    let stem = format!("{name}-{id:x}");
    let mut entries = Vec::new();
    for (i, recs) in files.iter().enumerate() {
        let file_name = shard_file_name(&stem, i as u32);
        let f = File::create(dir.join(&file_name)).unwrap();
        let header = SnapshotHeader {
            shard_index: i as u32,
            shard_count: files.len() as u32,
            snapshot_id: id,
            created_ms: NOW - 1000,
            compression,
        };
        // Small blocks, so even small test snapshots have several.
        let mut w = SnapshotWriter::with_block_size(f, header, 4096);
        for item in recs {
            match item {
                Item::Record(r) => match &r.value {
                    RecordValue::String(v) => w
                        .write_string(r.db, &r.key, v, r.expire_at_ms, r.client_flags)
                        .unwrap(),
                    RecordValue::Tombstone => w.write_tombstone(r.db, &r.key).unwrap(),
                },
                Item::Object(o) => w.write_object(&o.head(), o.rdb_type, &o.value).unwrap(),
                Item::Function(code) => w.write_function(code).unwrap(),
                Item::End(_) | Item::ObjectHead(_) | Item::Piece(_) | Item::ObjectEnd => {
                    panic!("not a whole record")
                }
            }
        }
        let (f, stats) = w.finish_into_inner().unwrap();
        f.sync_all().unwrap();
        entries.push(SummaryFile {
            name: file_name,
            bytes: stats.bytes,
            crc32: stats.crc32,
            records: stats.records,
        });
    }
    let summary = Summary {
        snapshot_id: id,
        created_ms: NOW - 1000,
        shard_count: files.len() as u32,
        db_count: 16,
        compression,
        files: entries,
    };
    let path = dir.join(summary_file_name(name));
    std::fs::write(&path, summary.encode()).unwrap();
    path
}

/// Writes `recs` as a snapshot of `shards` files, each record in the file `shard_of` names.
pub fn write_sharded(
    dir: &Path,
    name: &str,
    id: u64,
    shards: usize,
    recs: &[Record],
    compression: Compression,
) -> PathBuf {
    let mut files = vec![Vec::new(); shards];
    for r in recs {
        files[shard_of(&r.key, shards)].push(r.clone());
    }
    write_files(dir, name, id, &files, compression)
}

/// The db and key of a record or object.
pub fn item_key(item: &Item) -> (u16, &[u8]) {
    match item {
        Item::Record(r) => (r.db, &r.key),
        Item::Object(o) => (o.db, &o.key),
        _ => panic!("a function library, end frame or piece has no key"),
    }
}

/// A snapshot read back with `ondisk` alone, every check made.
pub struct ReadBack {
    pub summary: Summary,
    /// String and tombstone records per file, in file order.
    pub files: Vec<Vec<Record>>,
    /// Every record per file, objects included, in file order.
    pub items: Vec<Vec<Item>>,
}

impl ReadBack {
    /// (db, key) -> (value, expire, flags) of every string record; panics on a duplicate.
    pub fn model(&self) -> Model {
        let mut m = BTreeMap::new();
        for r in self.files.iter().flatten() {
            let RecordValue::String(v) = &r.value else {
                panic!("tombstone in an output snapshot: {r:?}");
            };
            let old = m.insert(
                (r.db, r.key.to_vec()),
                (v.to_vec(), r.expire_at_ms, r.client_flags),
            );
            assert!(old.is_none(), "duplicate key {r:?}");
        }
        m
    }

    /// (db, key) -> (type, value, expire, flags) of every object; panics on a key that is also
    /// a string or another object.
    pub fn objects(&self) -> ObjectModel {
        let strings = self.model();
        let mut m = BTreeMap::new();
        for item in self.items.iter().flatten() {
            let Item::Object(o) = item else {
                continue;
            };
            let key = (o.db, o.key.to_vec());
            assert!(!strings.contains_key(&key), "object and string {o:?}");
            let old = m.insert(
                key,
                (o.rdb_type, o.value.to_vec(), o.expire_at_ms, o.client_flags),
            );
            assert!(old.is_none(), "duplicate key {o:?}");
        }
        m
    }
}

pub fn read_back(summary_path: &Path) -> ReadBack {
    let summary = Summary::decode(&std::fs::read(summary_path).unwrap()).unwrap();
    let dir = summary_path.parent().unwrap();
    let mut files = Vec::new();
    let mut items = Vec::new();
    for (i, f) in summary.files.iter().enumerate() {
        let mut r = SnapshotReader::new(File::open(dir.join(&f.name)).unwrap()).unwrap();
        assert_eq!(r.header().shard_index, i as u32);
        assert_eq!(r.header().shard_count, summary.shard_count);
        assert_eq!(r.header().snapshot_id, summary.snapshot_id);
        assert_eq!(r.header().compression, summary.compression);
        let mut recs = Vec::new();
        let mut all = Vec::new();
        while let Some(item) = r.next_item().unwrap() {
            if let Item::Record(rec) = &item {
                recs.push(rec.clone());
            }
            all.push(item);
        }
        assert_eq!(r.skipped_unknown(), 0, "{} holds unknown kinds", f.name);
        let stats = r.stats().unwrap();
        assert_eq!(
            (stats.bytes, stats.crc32, stats.records),
            (f.bytes, f.crc32, f.records),
            "{} disagrees with its summary",
            f.name
        );
        files.push(recs);
        items.push(all);
    }
    ReadBack {
        summary,
        files,
        items,
    }
}

/// The model of what should survive compaction of `recs` at [`NOW`]: strings not expired and
/// not followed by a tombstone of the same db+key (within one input file).
pub fn live_model(files: &[Vec<Record>]) -> Model {
    let items: Vec<Vec<Item>> = files
        .iter()
        .map(|recs| recs.iter().cloned().map(Item::Record).collect())
        .collect();
    live_models(&items).0
}

/// [`live_model`] of a snapshot with objects: the strings and the objects that survive, by the
/// same rule.
pub fn live_models(files: &[Vec<Item>]) -> (Model, ObjectModel) {
    let (mut strings, mut objects) = (BTreeMap::new(), BTreeMap::new());
    for items in files {
        for (i, item) in items.iter().enumerate() {
            let deleted = items[i + 1..].iter().any(|t| {
                matches!(t, Item::Record(r) if r.value == RecordValue::Tombstone)
                    && item_key(t) == item_key(item)
            });
            let expire = match item {
                Item::Record(r) => r.expire_at_ms,
                Item::Object(o) => o.expire_at_ms,
                _ => None,
            };
            if deleted || expire.is_some_and(|t| t <= NOW) {
                continue;
            }
            match item {
                Item::Record(r) => {
                    if let RecordValue::String(v) = &r.value {
                        strings
                            .insert((r.db, r.key.to_vec()), (v.to_vec(), expire, r.client_flags));
                    }
                }
                Item::Object(o) => {
                    objects.insert(
                        (o.db, o.key.to_vec()),
                        (o.rdb_type, o.value.to_vec(), expire, o.client_flags),
                    );
                }
                _ => {}
            }
        }
    }
    (strings, objects)
}

/// What a run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }

    /// The value of the first stdout line `label: value`.
    pub fn field(&self, label: &str) -> &str {
        let prefix = format!("{label}: ");
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no '{label}:' line in:\n{}", self.stdout))
    }
}

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strata-compact"))
}

pub fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = bin().args(args).output().unwrap();
    Run {
        code: out.status.code().expect("killed by a signal"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs and asserts the exit status, showing both streams when it differs.
pub fn run_ok<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let r = run(args);
    assert_eq!(r.code, 0, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// Sorted file names in `dir`.
pub fn list(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// Deterministic xorshift.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A varied set of live-looking keys: several dbs, TTLs (past and future), client flags,
/// empty, binary and multi-block values.
pub fn varied_records(n: u32) -> Vec<Record> {
    let mut rng = Rng(7);
    let mut recs = Vec::new();
    for i in 0..n {
        let key = format!("key:{i}");
        let db = (i % 3) as u16 * 2;
        let value = match i % 11 {
            0 => Vec::new(),
            1 => rng.bytes(300),
            2 => format!("{i}").into_bytes(),
            _ => format!("value-{i}-")
                .repeat((i % 9) as usize + 1)
                .into_bytes(),
        };
        let expire = match i % 5 {
            0 => Some(NOW - 1 - u64::from(i)),
            1 => Some(NOW + 3_600_000 + u64::from(i)),
            _ => None,
        };
        let flags = if i % 7 == 0 { 0xF00D_0000 + i } else { 0 };
        recs.push(string(db, key.as_bytes(), &value, expire, flags));
    }
    recs.push(string(1, b"big", &vec![b'x'; 200_000], None, 3));
    recs.push(string(0, b"bin\x00\xff{tag}", b"\x00\x01\x02", None, 0));
    recs
}

/// Objects of several types among `varied_records`-like keys: lists, sets and hashes in
/// several dbs, TTLs (past and future), client flags, hashtag keys, and a multi-block value.
pub fn varied_objects(n: u32) -> Vec<Item> {
    use ondisk::rdb::types;
    let mut items = Vec::new();
    for i in 0..n {
        let key = if i % 4 == 0 {
            format!("obj:{{tag{}}}:{i}", i % 3)
        } else {
            format!("obj:{i}")
        };
        let db = (i % 3) as u16;
        let member = format!("m{i}");
        let (rdb_type, value) = match i % 3 {
            0 => (types::LIST, rdb_elements(&[b"a", member.as_bytes(), b""])),
            1 => (types::SET, rdb_elements(&[member.as_bytes()])),
            _ => (types::HASH, rdb_hash(&[(b"field", member.as_bytes())])),
        };
        let expire = match i % 5 {
            0 => Some(NOW - 1 - u64::from(i)),
            1 => Some(NOW + 3_600_000 + u64::from(i)),
            _ => None,
        };
        let flags = if i % 7 == 0 { 0xB0B0_0000 + i } else { 0 };
        items.push(object(db, key.as_bytes(), rdb_type, &value, expire, flags));
    }
    let big = vec![b'o'; 150_000];
    items.push(object(
        1,
        b"big-list",
        types::LIST,
        &rdb_elements(&[&big, b"tail"]),
        None,
        4,
    ));
    items
}

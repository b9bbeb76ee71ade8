//! `to-rdb` and `from-rdb`: moving data between Strata snapshots and Redis RDB files.
//!
//! Both directions stream: one key at a time through `ondisk`'s RDB reader and writer, and
//! both leave out keys already expired. Objects (a snapshot's keys of types other than string)
//! are exported as they are stored: their RDB type and encoding are already RDB's. What one
//! side can hold and the other cannot is reported, never silently lost: client flags (RDB has
//! none) and object types newer than the chosen RDB version on export, keys of types Strata
//! does not hold on import (streams, modules; counted per type, a warning, not an error).
//! Hashes, lists, sets and sorted sets are imported as objects, their RDB encoding as it is (a
//! large one written in pieces); function libraries go both ways, ahead of the keys.

use crate::error::{Failure, EXIT_OK};
use crate::input::{for_each_live, is_expired, Entry, SnapshotInput};
use crate::output::{check_name, now_ms, AtomicFile, SnapshotOutput, SnapshotSpec};
use crate::progress::Progress;
use ondisk::rdb::{types, RDB_MIN_EXPORT_VERSION};
use ondisk::{Compression, RdbItem, RdbReader, RdbWriter, Record, RecordValue};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

/// Redis' default `databases`: keys in higher dbs need it raised.
const REDIS_DEFAULT_DATABASES: u32 = 16;

pub fn to_rdb(summary: &Path, out: &Path, version: u32, now: u64) -> Result<u8, Failure> {
    let input = SnapshotInput::open(summary)?;
    let (guard, file) = AtomicFile::create(out)?;
    let mut w = RdbWriter::new(file, version);
    let progress = Progress::new("to-rdb", input.total_bytes());
    let mut with_flags = 0u64;
    let mut max_db = 0u32;
    // Objects whose RDB type `version` predates, by type name.
    let mut too_new: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut needs_version = version;
    let write_err = |e: std::io::Error| Failure::io("cannot write", guard.tmp_path(), &e);
    let libraries = crate::input::functions(&input)?;
    w.write_functions(libraries.iter().map(|c| &c[..]))
        .map_err(write_err)?;
    let counts = for_each_live(&input, now, &progress, |entry| {
        if entry.client_flags() != 0 {
            with_flags += 1;
        }
        max_db = max_db.max(u32::from(entry.db()));
        w.select_db(u32::from(entry.db())).map_err(write_err)?;
        match entry {
            Entry::Record(Record {
                key,
                expire_at_ms,
                value: RecordValue::String(value),
                ..
            }) => w.write_string(key, value, *expire_at_ms),
            Entry::Record(_) => Ok(()),
            Entry::ObjectHead(_) => Err(std::io::Error::other("an object in pieces, not joined")),
            Entry::Object(o) => {
                let first = first_rdb_version(o.rdb_type);
                if first > version {
                    *too_new.entry(types::name(o.rdb_type)).or_default() += 1;
                    needs_version = needs_version.max(first);
                }
                w.write_object(&o.key, o.rdb_type, &o.value, o.expire_at_ms)
            }
        }
        .map_err(write_err)
    })?;
    let file = w.finish().map_err(write_err)?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    guard.commit(file)?;
    progress.finish();

    report!(
        "output: {} (RDB version {version}, {} keys, {bytes} bytes)",
        out.display(),
        counts.kept
    );
    report!("kept: {}", counts.kept);
    report!("objects kept: {}", counts.objects);
    report!("function libraries kept: {}", libraries.len());
    report!("expired dropped: {}", counts.expired);
    report!("tombstoned dropped: {}", counts.tombstoned);
    if !too_new.is_empty() {
        crate::warn(&format!(
            "{} object(s) of RDB types that version {version} predates ({}): only a redis-server \
             that reads RDB version {needs_version} or newer loads them \
             (`--rdb-version {needs_version}` labels the file so)",
            too_new.values().sum::<u64>(),
            per_type(&too_new)
        ));
    }
    if with_flags > 0 {
        crate::warn(&format!(
            "{with_flags} key(s) had client flags, which RDB cannot hold; they were exported without"
        ));
    }
    if max_db >= REDIS_DEFAULT_DATABASES {
        crate::warn(&format!(
            "keys in db {max_db}: redis-server needs `databases {}` or more to load this file",
            max_db + 1
        ));
    }
    Ok(EXIT_OK)
}

pub struct FromRdbOptions<'a> {
    pub rdb: &'a Path,
    pub out_dir: &'a Path,
    pub name: &'a str,
    pub shards: u32,
    pub compression: Compression,
    pub now_ms: u64,
}

pub fn from_rdb(opts: &FromRdbOptions<'_>) -> Result<u8, Failure> {
    check_name(opts.name)?;
    let path = opts.rdb;
    let file = File::open(path).map_err(|e| Failure::open_input(path, &e))?;
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let progress = Progress::new("from-rdb", total);
    let bad = |e: ondisk::FormatError| Failure::format(&e).context(path.display());
    let mut reader = RdbReader::new(progress.reader(file)).map_err(bad)?;
    reader.keep_objects(OBJECT_LIMIT);
    reader.keep_functions();
    let mut out = SnapshotOutput::create(&SnapshotSpec {
        dir: opts.out_dir,
        name: opts.name,
        shards: opts.shards,
        compression: opts.compression,
        created_ms: now_ms(),
        min_id: 0,
        keep: &[],
    })?;
    let (mut kept, mut expired, mut max_db) = (0u64, 0u64, 0u16);
    let (mut objects, mut libraries) = (0u64, 0u64);
    let mut skipped: BTreeMap<&'static str, u64> = BTreeMap::new();
    while let Some(item) = reader.next().map_err(bad)? {
        let (db, key, expire_at_ms) = match &item {
            RdbItem::String {
                db,
                key,
                expire_at_ms,
                ..
            }
            | RdbItem::Object {
                db,
                key,
                expire_at_ms,
                ..
            } => (*db, key, *expire_at_ms),
            RdbItem::Skipped { type_code, .. } => {
                *skipped.entry(types::name(*type_code)).or_default() += 1;
                continue;
            }
            RdbItem::Function(code) => {
                out.write_function(code)?;
                libraries += 1;
                continue;
            }
            RdbItem::Aux { .. } => continue,
        };
        let Ok(db) = u16::try_from(db) else {
            return Err(Failure::Corrupt(format!(
                "{}: key in db {db} before offset {}; Strata holds dbs 0 to {}",
                path.display(),
                reader.offset(),
                u16::MAX
            )));
        };
        if let RdbItem::Object { rdb_type, .. } = &item {
            if !held_type(*rdb_type) {
                *skipped.entry(types::name(*rdb_type)).or_default() += 1;
                continue;
            }
        }
        if is_expired(expire_at_ms, opts.now_ms) {
            expired += 1;
            continue;
        }
        match &item {
            RdbItem::String { value, .. } => out.write_string(db, key, value, expire_at_ms, 0)?,
            RdbItem::Object {
                rdb_type, value, ..
            } => {
                let head = ondisk::KeyHead {
                    db,
                    key,
                    expire_at_ms,
                    client_flags: 0,
                };
                out.write_object(&head, *rdb_type, value)?;
                objects += 1;
            }
            _ => continue,
        }
        kept += 1;
        max_db = max_db.max(db);
    }
    let db_count = (u32::from(max_db) + 1).max(REDIS_DEFAULT_DATABASES);
    let done = out.commit(db_count)?;
    progress.finish();

    let bytes: u64 = done.summary.files.iter().map(|f| f.bytes).sum();
    let skipped_total: u64 = skipped.values().sum();
    let per_type = per_type(&skipped);
    report!(
        "output: {} ({} files, {}, {bytes} bytes)",
        done.summary_path.display(),
        done.summary.files.len(),
        opts.compression
    );
    report!("kept: {kept}");
    report!("objects kept: {objects}");
    report!("function libraries kept: {libraries}");
    report!("expired dropped: {expired}");
    if skipped_total > 0 {
        report!("skipped: {skipped_total} ({per_type})");
        crate::warn(&format!(
            "skipped {skipped_total} key(s) of types Strata does not hold yet: {per_type}"
        ));
    } else {
        report!("skipped: 0");
    }
    if reader.module_aux_skipped() > 0 {
        crate::warn(&format!(
            "skipped {} module AUX section(s)",
            reader.module_aux_skipped()
        ));
    }
    Ok(EXIT_OK)
}

/// Largest value of one key `from-rdb` takes (it holds one value at a time).
const OBJECT_LIMIT: usize = 1 << 30;

/// The RDB types the server loads (hashes, lists, sets and sorted sets in every encoding Redis
/// 7 writes); others (streams, modules, pre-release hash layouts) are skipped and counted.
fn held_type(t: u8) -> bool {
    use types::*;
    matches!(
        t,
        LIST | SET
            | ZSET
            | HASH
            | ZSET_2
            | LIST_ZIPLIST
            | SET_INTSET
            | ZSET_ZIPLIST
            | HASH_ZIPLIST
            | LIST_QUICKLIST
            | HASH_LISTPACK
            | ZSET_LISTPACK
            | LIST_QUICKLIST_2
            | SET_LISTPACK
            | HASH_METADATA
            | HASH_LISTPACK_EX
    )
}

/// `list 2, set 1`: counts per type name.
fn per_type(counts: &BTreeMap<&'static str, u64>) -> String {
    counts
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first RDB version that has `rdb_type` (Redis' `rdb.h`): a redis-server that writes an
/// older version refuses the type when it loads a file. Types not listed are older than the
/// oldest version exported (7).
fn first_rdb_version(rdb_type: u8) -> u32 {
    match rdb_type {
        types::ZSET_2 | types::MODULE_PRE_GA | types::MODULE_2 => 8,
        types::STREAM_LISTPACKS => 9,
        types::HASH_LISTPACK
        | types::ZSET_LISTPACK
        | types::LIST_QUICKLIST_2
        | types::STREAM_LISTPACKS_2 => 10,
        types::SET_LISTPACK | types::STREAM_LISTPACKS_3 => 11,
        types::HASH_METADATA_PRE_GA
        | types::HASH_LISTPACK_EX_PRE_GA
        | types::HASH_METADATA
        | types::HASH_LISTPACK_EX => 12,
        _ => RDB_MIN_EXPORT_VERSION,
    }
}

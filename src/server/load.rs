//! Loading the newest snapshot at start-up, before any client is served.
//!
//! [`find`] picks the snapshot (run once, before the cores start): the newest
//! `NAME-summary.strata` in `--dir` matching `--dbfilename` (`{timestamp}` matches anything),
//! or for a name ending in `.rdb` the newest matching RDB file. Then every core reads its share
//! of the files (file i goes to core i mod cores; an RDB file to core 0) and routes each record
//! to the shard that owns its key now, so a snapshot taken with 4 threads loads on 2. Keys that
//! expired while the server was down are skipped. A snapshot larger than maxmemory streams into
//! the SSD tier when tiering is on (the loader waits for the offloader), is cut down by eviction
//! in cache mode, and fails otherwise.
//!
//! A corrupt or truncated file stops the start with a message naming the file and the offset,
//! unless `--load_partial` (then the records before the damage stay).
//!
//! Reads use plain blocking file I/O: this runs before the listener accepts anyone.
//!
//! Never: loads a record wrongly: damage stops the start (or, with `--load_partial`, the file), a
//! type not kept yet is skipped and counted.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ondisk::rdb::{RdbItem, RdbReader};
use ondisk::snapshot::{Item, ObjectRecord, RecordValue, SnapshotReader};
use ondisk::summary::{summary_file_name, Summary};
use tracing::{info, warn};

use super::core::Core;
use super::error::{ErrorKind, Result, ServerError};
use crate::shard::object::{value_from_rdb, PackLimits};
use crate::shard::rdb_stream::PieceBuilder;
use crate::shard::{now_ms, shard_of, KeyMeta, Shard, Value};

/// The snapshot chosen at start-up.
#[derive(Debug)]
pub enum Plan {
    Strata {
        dir: PathBuf,
        summary_path: PathBuf,
        summary: Summary,
    },
    Rdb {
        path: PathBuf,
    },
}

impl Plan {
    fn files(&self) -> Vec<(PathBuf, Option<(u64, u32)>)> {
        match self {
            Plan::Strata { dir, summary, .. } => summary
                .files
                .iter()
                .map(|f| (dir.join(&f.name), Some((f.bytes, f.crc32))))
                .collect(),
            Plan::Rdb { path } => vec![(path.clone(), None)],
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Plan::Strata { summary_path, .. } => summary_path.display().to_string(),
            Plan::Rdb { path } => path.display().to_string(),
        }
    }
}

/// Does `name` match `pattern`, where `{timestamp}` in the pattern matches any text?
fn matches_pattern(pattern: &str, name: &str) -> bool {
    match pattern.split_once("{timestamp}") {
        None => pattern == name,
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
    }
}

/// Finds the snapshot to load; Ok(None) when there is none. A summary that cannot be read is
/// an error naming it.
pub fn find(dir: &str, dbfilename: &str) -> Result<Option<Plan>> {
    if dbfilename.is_empty() {
        return Ok(None);
    }
    let dir = PathBuf::from(dir);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(None);
    };
    let names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    remove_leftovers(&dir, dbfilename, &names);
    if dbfilename.ends_with(".rdb") {
        let newest = names
            .iter()
            .filter(|n| matches_pattern(dbfilename, n))
            .filter_map(|n| {
                let m = std::fs::metadata(dir.join(n)).ok()?;
                Some((m.modified().ok()?, n.clone()))
            })
            .max();
        return Ok(newest.map(|(_, n)| Plan::Rdb { path: dir.join(n) }));
    }
    remove_orphans(&dir, dbfilename, &names);
    let summary_pattern = summary_file_name(dbfilename);
    let mut best: Option<(u64, PathBuf, Summary)> = None;
    for n in names
        .iter()
        .filter(|n| matches_pattern(&summary_pattern, n))
    {
        let path = dir.join(n);
        let bytes = std::fs::read(&path).map_err(|e| ServerError::io("read", &path, &e))?;
        let summary = Summary::decode(&bytes).map_err(|e| {
            ServerError::new(
                ErrorKind::Corrupt,
                format!("snapshot summary {}: {e}", path.display()),
            )
        })?;
        if best
            .as_ref()
            .is_none_or(|(t, _, _)| summary.created_ms > *t)
        {
            best = Some((summary.created_ms, path, summary));
        }
    }
    Ok(best.map(|(_, summary_path, summary)| Plan::Strata {
        dir,
        summary_path,
        summary,
    }))
}

/// Removes the `*.tmp` files of saves that a crash interrupted (never anything a summary
/// names: those are renamed before the summary is written).
fn remove_leftovers(dir: &Path, dbfilename: &str, names: &[String]) {
    let prefix = dbfilename.split("{timestamp}").next().unwrap_or(dbfilename);
    for n in names {
        let ours = n.starts_with(prefix)
            && n.ends_with(".tmp")
            && (n.contains(".strata") || n.contains(".rdb"));
        if ours {
            match std::fs::remove_file(dir.join(n)) {
                Ok(()) => info!("removed {n}, left by an interrupted save"),
                Err(e) => warn!("cannot remove {n}, left by an interrupted save: {e}"),
            }
        }
    }
}

/// Removes shard files of this snapshot name that no summary in the directory names: a save
/// stopped between renaming its shard files and committing its summary, or before deleting
/// the files of the snapshot it replaced. Does nothing if any summary cannot be read.
fn remove_orphans(dir: &Path, dbfilename: &str, names: &[String]) {
    let prefix = dbfilename.split("{timestamp}").next().unwrap_or(dbfilename);
    let mut named = std::collections::HashSet::new();
    for n in names.iter().filter(|n| n.ends_with("-summary.strata")) {
        let Ok(bytes) = std::fs::read(dir.join(n)) else {
            return;
        };
        let Ok(summary) = Summary::decode(&bytes) else {
            return;
        };
        named.extend(summary.files.into_iter().map(|f| f.name));
    }
    for n in names {
        let shard_file = n.ends_with(".strata")
            && !n.ends_with("-summary.strata")
            && n.starts_with(&format!("{prefix}-"))
            && n.len() > 12
            && n[n.len() - 12..n.len() - 7].starts_with('-')
            && n[n.len() - 11..n.len() - 7]
                .bytes()
                .all(|b| b.is_ascii_digit());
        if shard_file && !named.contains(n) {
            match std::fs::remove_file(dir.join(n)) {
                Ok(()) => info!("removed {n}, which no snapshot summary names"),
                Err(e) => warn!("cannot remove {n}, which no snapshot summary names: {e}"),
            }
        }
    }
}

/// Shared by the cores while they load.
pub struct Progress {
    total: u64,
    done: AtomicU64,
    decile: AtomicU64,
    finished: AtomicUsize,
    started: Instant,
    keys: AtomicU64,
    expired: AtomicU64,
    skipped: AtomicU64,
    failed: std::sync::Mutex<Option<ServerError>>,
}

impl Progress {
    pub fn new(plan: &Plan) -> Progress {
        let total = plan
            .files()
            .iter()
            .map(|(p, _)| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum();
        Progress {
            total,
            done: AtomicU64::new(0),
            decile: AtomicU64::new(0),
            finished: AtomicUsize::new(0),
            started: Instant::now(),
            keys: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            failed: std::sync::Mutex::new(None),
        }
    }

    /// Counts bytes read; logs each 10% passed with the rate so far.
    fn advance(&self, bytes: u64) {
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.total == 0 {
            return;
        }
        let decile = (done * 10 / self.total).min(10);
        let prev = self.decile.load(Ordering::Relaxed);
        if decile > prev
            && self
                .decile
                .compare_exchange(prev, decile, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let secs = self.started.elapsed().as_secs_f64().max(1e-6);
            info!(
                "loading snapshot: {}% ({} keys, {:.1} MB/s)",
                decile * 10,
                self.keys.load(Ordering::Relaxed),
                done as f64 / 1e6 / secs
            );
        }
    }
}

/// Loads this core's share of `plan`, then waits until every core has finished (serving the
/// other cores' inserts meanwhile). Exits the process on a fatal error.
pub async fn run(core: &Rc<Core>, plan: &Plan, progress: &Progress) {
    let threads = core.global.shards();
    let mine: Vec<(PathBuf, Option<(u64, u32)>)> = plan
        .files()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % threads == core.id)
        .map(|(_, f)| f)
        .collect();
    for (path, expect) in mine {
        let r = match plan {
            Plan::Strata { .. } => load_strata(core, &path, expect, progress).await,
            Plan::Rdb { .. } => load_rdb(core, &path, progress).await,
        };
        if let Err(e) = r {
            if let Ok(mut f) = progress.failed.lock() {
                f.get_or_insert(e);
            }
        }
    }
    progress.finished.fetch_add(1, Ordering::SeqCst);
    while progress.finished.load(Ordering::SeqCst) < threads {
        glommio::timer::sleep(Duration::from_millis(2)).await;
    }
    let failed = progress.failed.lock().ok().and_then(|f| f.clone());
    if core.id != 0 {
        if failed.is_some() {
            // Core 0 reports and exits.
            futures::future::pending::<()>().await;
        }
        return;
    }
    let settings = &core.global.settings;
    if let Some(e) = failed {
        if settings.snapshot.load_partial {
            warn!("{e}; starting with the keys read before the damage (--load_partial)");
        } else {
            tracing::error!(
                "{e}; refusing to start on part of the data (--load_partial overrides)"
            );
            core.global.remove_tier_files();
            std::process::exit(1);
        }
    }
    let secs = progress.started.elapsed().as_secs_f64();
    let report = super::snapshot::LoadReport {
        file: plan.describe(),
        keys: progress.keys.load(Ordering::Relaxed),
        expired: progress.expired.load(Ordering::Relaxed),
        skipped: progress.skipped.load(Ordering::Relaxed),
        bytes: progress.done.load(Ordering::Relaxed),
        duration_ms: (secs * 1000.0) as u64,
    };
    info!(
        "loaded {} keys from {} in {:.2}s ({:.1} MB/s); {} expired while offline, {} skipped",
        report.keys,
        report.file,
        secs,
        report.bytes as f64 / 1e6 / secs.max(1e-6),
        report.expired,
        report.skipped
    );
    if let Ok(mut p) = core.global.persist.lock() {
        p.load = report;
    }
}

/// A record on its way to the shard that owns it.
struct Rec {
    db: usize,
    key: Bytes,
    value: RecValue,
    expire_at: u64,
    /// Memcached's client flags (0 = none).
    client_flags: u32,
}

impl Rec {
    /// A record from its (db, key, expiry, client flags) and value.
    fn new(
        (db, key, expire, client_flags): (u16, Bytes, Option<u64>, u32),
        value: RecValue,
    ) -> Rec {
        Rec {
            db: db as usize,
            key,
            value,
            expire_at: expire.unwrap_or(0),
            client_flags,
        }
    }
}

/// A record's value: a string's bytes, or a collection already decoded.
enum RecValue {
    Str(Bytes),
    /// A collection and the bytes of the RDB encoding it came from.
    Coll(Value, usize),
}

impl RecValue {
    fn len(&self) -> usize {
        match self {
            RecValue::Str(b) => b.len(),
            RecValue::Coll(_, n) => *n,
        }
    }
}

/// Records grouped by owning shard, sent when a group grows large.
struct Router<'a> {
    core: &'a Rc<Core>,
    groups: Vec<(Vec<Rec>, usize)>,
    progress: &'a Progress,
    now: u64,
}

const GROUP_RECORDS: usize = 512;
const GROUP_BYTES: usize = 1 << 20;

impl<'a> Router<'a> {
    fn new(core: &'a Rc<Core>, progress: &'a Progress) -> Router<'a> {
        let n = core.global.shards();
        Router {
            core,
            groups: (0..n).map(|_| (Vec::new(), 0)).collect(),
            progress,
            now: now_ms(),
        }
    }

    async fn push(&mut self, rec: Rec) -> Result<()> {
        if rec.expire_at != 0 && rec.expire_at <= self.now {
            self.progress.expired.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        if rec.db >= self.core.global.settings.dbnum as usize {
            self.progress.skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        // Past what any client could have stored (proto-max-bulk-len): not Strata's data.
        if rec.value.len() > crate::protocol::MAX_BULK_LEN
            || rec.key.len() > crate::protocol::MAX_BULK_LEN
        {
            tracing::warn!(
                "snapshot: skipping a key of {} bytes with a value of {} bytes (over 512 MB)",
                rec.key.len(),
                rec.value.len()
            );
            self.progress.skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let s = shard_of(&rec.key, self.groups.len());
        let g = &mut self.groups[s];
        g.1 += rec.key.len() + rec.value.len();
        g.0.push(rec);
        if g.0.len() >= GROUP_RECORDS || g.1 >= GROUP_BYTES {
            self.send(s).await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        for s in 0..self.groups.len() {
            self.send(s).await?;
        }
        Ok(())
    }

    async fn send(&mut self, s: usize) -> Result<()> {
        let (recs, _) = std::mem::take(&mut self.groups[s]);
        if recs.is_empty() {
            return Ok(());
        }
        let n = recs.len() as u64;
        let max = self.core.global.settings.maxmemory();
        let goal = if max == 0 {
            0
        } else {
            super::eviction::ram_goal(&self.core.global, max)
        };
        self.core
            .on_shard(s, move |sh| insert(sh, recs, goal))
            .await
            .ok_or_else(ServerError::shutting_down)?;
        self.progress.keys.fetch_add(n, Ordering::Relaxed);
        wait_for_memory(self.core).await
    }
}

fn insert(sh: &mut Shard, recs: Vec<Rec>, goal: u64) {
    let evict = sh.settings.cache_mode && goal > 0;
    for r in recs {
        if evict && crate::memory::used_memory() > goal {
            sh.evict(
                crate::shard::evict::Candidates::Any,
                Duration::from_millis(5),
                |_| crate::memory::used_memory() <= goal,
            );
        }
        let value = match r.value {
            RecValue::Str(b) => Value::str(&b),
            RecValue::Coll(v, _) => v,
        };
        sh.store(r.db, &r.key, value, r.expire_at);
        if r.client_flags != 0 {
            let meta = KeyMeta {
                client_flags: r.client_flags,
                ..KeyMeta::default()
            };
            sh.set_meta(r.db, &r.key, meta);
        }
    }
}

/// Keeps the load within maxmemory: with tiering, waits while the offloader moves values to
/// SSD; without, a snapshot that does not fit is an error.
async fn wait_for_memory(core: &Rc<Core>) -> Result<()> {
    let settings = &core.global.settings;
    let max = settings.maxmemory();
    if max == 0 {
        return Ok(());
    }
    let used = || crate::memory::used_memory();
    // Cache mode makes room by evicting as records arrive (see `insert`).
    if settings.cache_mode && settings.tiered.is_none() {
        return Ok(());
    }
    if settings.tiered.is_none() {
        if used() > max {
            return Err(ServerError::new(ErrorKind::OutOfMemory, format!(
                "the snapshot does not fit in --maxmemory {} ({} used); start with a larger --maxmemory or with SSD tiering (--tiered_prefix)",
                super::human_bytes(max),
                super::human_bytes(used())
            )));
        }
        return Ok(());
    }
    // What RSS allows, as for writers: values loaded and then offloaded leave the heap
    // fragmented (a 385 MB snapshot loaded into 64 MB left RSS at 1.09x maxmemory with 90% of
    // maxmemory as the room).
    let room = super::eviction::write_room(&core.global, max);
    let mut waited = Duration::ZERO;
    while used() > room {
        let full = core.shard.borrow().tier_full();
        // In cache mode a full tier is relieved by eviction (the heartbeat), so it waits too.
        if (full && !settings.cache_mode) || waited > Duration::from_secs(60) {
            return Err(ServerError::new(ErrorKind::OutOfMemory, format!(
                "the snapshot does not fit in --maxmemory {} plus the SSD tier (--tiered_max_file_size)",
                super::human_bytes(max)
            )));
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
        waited += Duration::from_millis(1);
    }
    Ok(())
}

/// The longest typed value an RDB file may hold for us (its raw encoding is read whole).
const MAX_OBJECT_BYTES: usize = 1 << 30;

/// Bytes read from a file at a time.
const READ_CHUNK: usize = 1 << 20;

async fn load_strata(
    core: &Rc<Core>,
    path: &Path,
    expect: Option<(u64, u32)>,
    progress: &Progress,
) -> Result<()> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| ServerError::io("open", path, &e))?;
    let damaged = |e: ondisk::FormatError| {
        ServerError::new(ErrorKind::Corrupt, format!("snapshot file {name}: {e}"))
    };
    let counted = Counting {
        inner: std::io::BufReader::with_capacity(READ_CHUNK, file),
        progress,
    };
    let mut reader = SnapshotReader::new(counted).map_err(damaged)?;
    // A large collection is built from its pieces as they come, never joined first.
    reader.stream_pieces(true);
    let mut router = Router::new(core, progress);
    let limits = PackLimits::from_settings(&core.global.settings);
    let mut n = 0u64;
    let mut open: Option<(ObjectRecord, PieceBuilder, usize)> = None;
    let result = async {
        while let Some(item) = reader.next_item().map_err(damaged)? {
            let r = match item {
                Item::Record(r) => r,
                Item::ObjectHead(o) => {
                    let b = PieceBuilder::new(o.rdb_type, &limits);
                    open = Some((o, b, 0));
                    continue;
                }
                Item::Piece(p) => {
                    if let Some((_, b, len)) = open.as_mut() {
                        b.feed(&p);
                        *len += p.len();
                    }
                    n += 1;
                    if n.is_multiple_of(16) {
                        futures_lite::future::yield_now().await;
                    }
                    continue;
                }
                Item::ObjectEnd => {
                    let Some((o, b, len)) = open.take() else {
                        continue;
                    };
                    match b.finish() {
                        Ok(v) => {
                            let head = (o.db, o.key, o.expire_at_ms, o.client_flags);
                            router.push(Rec::new(head, RecValue::Coll(v, len))).await?
                        }
                        Err(e) => {
                            warn!("snapshot file {name}: skipping key {:?}: {e}", o.key);
                            progress.skipped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    continue;
                }
                Item::Object(o) => {
                    match value_from_rdb(o.rdb_type, &o.value, &limits) {
                        Ok(v) => {
                            let head = (o.db, o.key, o.expire_at_ms, o.client_flags);
                            let v = RecValue::Coll(v, o.value.len());
                            router.push(Rec::new(head, v)).await?
                        }
                        Err(e) => {
                            warn!("snapshot file {name}: skipping key {:?}: {e}", o.key);
                            progress.skipped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    continue;
                }
                Item::Function(code) => {
                    load_function(code).map_err(|e| {
                        ServerError::new(ErrorKind::Corrupt, format!("snapshot file {name}: {e}"))
                    })?;
                    continue;
                }
                Item::End(_) => continue,
            };
            match r.value {
                RecordValue::String(v) => {
                    let head = (r.db, r.key, r.expire_at_ms, r.client_flags);
                    router.push(Rec::new(head, RecValue::Str(v))).await?
                }
                RecordValue::Tombstone => {
                    router.flush().await?;
                    let (db, key) = (r.db as usize, r.key);
                    let s = shard_of(&key, core.global.shards());
                    if db < core.global.settings.dbnum as usize {
                        core.on_shard(s, move |sh| {
                            sh.remove(db, &key);
                        })
                        .await;
                    }
                }
            }
            n += 1;
            if n.is_multiple_of(1024) {
                futures_lite::future::yield_now().await;
            }
        }
        router.flush().await?;
        if reader.skipped_unknown() > 0 {
            warn!(
                "snapshot file {name}: skipped {} record(s) of kinds this version does not know",
                reader.skipped_unknown()
            );
            progress
                .skipped
                .fetch_add(reader.skipped_unknown(), Ordering::Relaxed);
        }
        if let (Some(stats), Some((bytes, crc))) = (reader.stats(), expect) {
            if stats.bytes != bytes || stats.crc32 != crc {
                return Err(ServerError::new(ErrorKind::Corrupt, format!(
                    "snapshot file {name} does not match its summary (size {} vs {bytes}, crc {:08x} vs {crc:08x})",
                    stats.bytes, stats.crc32
                )));
            }
        }
        Ok(())
    }
    .await;
    // Keys read before an error are kept (they matter with --load_partial).
    if result.is_err() {
        let _ = router.flush().await;
    }
    result
}

async fn load_rdb(core: &Rc<Core>, path: &Path, progress: &Progress) -> Result<()> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| ServerError::io("open", path, &e))?;
    let damaged = |e: ondisk::FormatError| {
        ServerError::new(ErrorKind::Corrupt, format!("RDB file {name}: {e}"))
    };
    let counted = Counting {
        inner: std::io::BufReader::with_capacity(READ_CHUNK, file),
        progress,
    };
    let mut reader = RdbReader::new(counted).map_err(damaged)?;
    reader.keep_objects(MAX_OBJECT_BYTES);
    reader.keep_functions();
    let mut router = Router::new(core, progress);
    let limits = PackLimits::from_settings(&core.global.settings);
    let mut skipped_types: std::collections::BTreeMap<u8, u64> = Default::default();
    let mut n = 0u64;
    let result = async {
        while let Some(item) = reader.next().map_err(damaged)? {
            match item {
                RdbItem::String {
                    db,
                    key,
                    value,
                    expire_at_ms,
                } => {
                    router
                        .push(Rec {
                            db: db as usize,
                            key,
                            value: RecValue::Str(value),
                            expire_at: expire_at_ms.unwrap_or(0),
                            client_flags: 0,
                        })
                        .await?
                }
                RdbItem::Object {
                    db,
                    key,
                    rdb_type,
                    value,
                    expire_at_ms,
                } => match value_from_rdb(rdb_type, &value, &limits) {
                    Ok(v) => {
                        let db = u16::try_from(db).unwrap_or(u16::MAX);
                        let head = (db, key, expire_at_ms, 0);
                        let v = RecValue::Coll(v, value.len());
                        router.push(Rec::new(head, v)).await?
                    }
                    Err(_) => {
                        *skipped_types.entry(rdb_type).or_default() += 1;
                        progress.skipped.fetch_add(1, Ordering::Relaxed);
                    }
                },
                RdbItem::Skipped { type_code, .. } => {
                    *skipped_types.entry(type_code).or_default() += 1;
                    progress.skipped.fetch_add(1, Ordering::Relaxed);
                }
                RdbItem::Aux { .. } => {}
                RdbItem::Function(code) => load_function(code).map_err(|e| {
                    ServerError::new(ErrorKind::Corrupt, format!("RDB file {name}: {e}"))
                })?,
            }
            n += 1;
            if n.is_multiple_of(1024) {
                futures_lite::future::yield_now().await;
            }
        }
        router.flush().await
    }
    .await;
    if result.is_err() {
        let _ = router.flush().await;
    }
    for (t, count) in skipped_types {
        warn!("RDB file {name}: skipped {count} key(s) of RDB type {t}, which Strata does not hold yet");
    }
    result
}

/// Loads a function library from a file, as Redis does when it loads one: any error is the
/// file's.
fn load_function(code: Bytes) -> std::result::Result<(), String> {
    crate::server::script::function::load_saved(code)
        .map(|name| info!("loaded function library '{name}'"))
        .map_err(|e| format!("failed loading a function library: {e}"))
}

/// Counts bytes read for the progress log.
struct Counting<'a, R> {
    inner: R,
    progress: &'a Progress,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// Shared between the start-up code and the cores.
pub type Shared = Arc<(Plan, Progress)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_patterns() {
        assert!(matches_pattern("dump", "dump"));
        assert!(!matches_pattern("dump", "dump2"));
        assert!(matches_pattern(
            "dump-{timestamp}-summary.strata",
            "dump-2026-11-30T06-34-30-summary.strata"
        ));
        assert!(!matches_pattern(
            "dump-{timestamp}-summary.strata",
            "other-2026-summary.strata"
        ));
        assert!(matches_pattern("x{timestamp}.rdb", "x1.rdb"));
        assert!(!matches_pattern("x{timestamp}.rdb", "x1.rdbz"));
    }
}

//! Saving snapshots: SAVE, BGSAVE, `--snapshot_cron` and the save at shutdown. This file is the
//! orchestration (one save at a time, the point in time, committing the files, INFO's state);
//! [`serializer`] is one shard's walk and encoding, [`sink`] the file writes.
//!
//! A save is point-in-time and forkless. Under the cross-shard lock every shard starts a
//! snapshot of its tables (see `shard::dashtable`): from then on a write to a bucket not yet
//! serialized copies that bucket aside first. Each shard's serializer then walks its tables on
//! its own core, a few buckets per step between client commands, and streams records to its file.
//! Offloaded values are read from the tier file, whose frees are held until the save ends, so a
//! value overwritten meanwhile can still be read as it was. Writers wait while the copies a
//! save has not written yet pass `shard::snapshot_backlog_limit`, so memory stays flat under a write load.
//!
//! Files, in `--dir`: `NAME-<id>-NNNN.strata` per shard and `NAME-summary.strata`, each written
//! as `*.tmp`, fsynced and renamed; the summary's rename commits the snapshot, and the files of
//! the snapshot it replaces are deleted only after that. A crash at any point leaves the previous
//! summary and the files it names. A name ending in `.rdb` writes one Redis RDB file instead,
//! stitched from per-shard fragments.
//!
//! Never: blocks a core for more than one step; holds more than one step's entries (plus the
//! writers' copies) in memory.

mod serializer;
mod sink;

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::FutureExt;
use glommio::io::BufferedFile;
use ondisk::rdb::{rdb_functions, rdb_header, rdb_trailer, Crc64};
use ondisk::snapshot::SnapshotHeader;
use ondisk::summary::{shard_file_name, summary_file_name, Summary, SummaryFile};
use tracing::{info, warn};

use self::serializer::{serialize_shard, ShardJob, ShardOutput, CHUNK};
use self::sink::{rename, sync_dir, write_file, FileWriter};
use super::core::Core;
use super::error::{ErrorKind, Result, ServerError};
use super::txn::Txn;
use crate::shard::now_ms;

/// RDB version written (redis-server 7.0 reads up to 10).
const RDB_VERSION: u32 = 10;

/// File format of a save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Strata,
    Rdb,
}

/// What INFO persistence and LASTSAVE report; one per process.
#[derive(Clone, Debug)]
pub struct PersistState {
    pub in_progress: bool,
    /// A BGSAVE SCHEDULE waiting for the running save to end.
    pub scheduled: bool,
    pub current_started_ms: u64,
    pub saves: u64,
    pub last_save_unix: u64,
    pub last_ok: bool,
    pub last_duration_ms: u64,
    pub last_bytes: u64,
    pub last_keys: u64,
    pub last_file: String,
    /// Most encoded bytes the last successful save held at once, all shards together (its
    /// encoder output not yet written plus a large collection's current piece).
    pub last_peak_buffered: u64,
    /// Writes counted by the shards when the last successful save started.
    pub dirty_at_last_save: u64,
    pub load: LoadReport,
}

/// The start-up load, for INFO.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    pub file: String,
    pub keys: u64,
    pub expired: u64,
    pub skipped: u64,
    pub bytes: u64,
    pub duration_ms: u64,
}

impl PersistState {
    pub fn new(started_unix: u64) -> PersistState {
        PersistState {
            in_progress: false,
            scheduled: false,
            current_started_ms: 0,
            saves: 0,
            last_save_unix: started_unix,
            last_ok: true,
            last_duration_ms: 0,
            last_bytes: 0,
            last_keys: 0,
            last_file: String::new(),
            last_peak_buffered: 0,
            dirty_at_last_save: 0,
            load: LoadReport::default(),
        }
    }
}

/// Outcome of a successful save.
#[derive(Clone, Debug)]
pub struct SaveReport {
    pub keys: u64,
    pub bytes: u64,
    pub file: String,
    pub duration: Duration,
    /// See [`PersistState::last_peak_buffered`].
    pub peak_buffered: u64,
}

/// The error of a save refused because another runs.
pub fn in_progress_error() -> ServerError {
    ServerError::new(ErrorKind::Busy, "Background save already in progress")
}

fn state(core: &Core) -> std::sync::MutexGuard<'_, PersistState> {
    match core.global.persist.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// `{timestamp}` in a file name becomes the UTC save time, e.g. 2026-11-30T06-34-30.
pub fn expand_name(name: &str, now_ms: u64) -> String {
    if !name.contains("{timestamp}") {
        return name.to_string();
    }
    let secs = now_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = crate::cron::civil_from_days(days as i64);
    let ts = format!(
        "{y:04}-{m:02}-{d:02}T{:02}-{:02}-{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    name.replace("{timestamp}", &ts)
}

/// Tells the BGSAVE that started a save when its point in time is set (or why it failed first).
type Begun = Option<futures::channel::oneshot::Sender<Result<()>>>;

/// Runs one save to completion. Err when one is already running or the save failed; the
/// outcome is recorded for INFO either way.
pub async fn save(
    core: &Rc<Core>,
    format: Option<Format>,
    name: Option<String>,
) -> Result<SaveReport> {
    save_signalling(core, format, name, None).await
}

/// [`save`], telling `begun` once every shard's snapshot has begun.
async fn save_signalling(
    core: &Rc<Core>,
    format: Option<Format>,
    name: Option<String>,
    mut begun: Begun,
) -> Result<SaveReport> {
    {
        let mut st = state(core);
        if st.in_progress {
            if let Some(tx) = begun.take() {
                let _ = tx.send(Err(in_progress_error()));
            }
            return Err(in_progress_error());
        }
        st.in_progress = true;
        st.current_started_ms = now_ms();
    }
    let started = Instant::now();
    let dirty = total_dirty(core).await;
    let result = save_now(core, format, name, &mut begun).await;
    if let (Some(tx), Err(e)) = (begun.take(), &result) {
        let _ = tx.send(Err(e.clone()));
    }
    let again = {
        let mut st = state(core);
        st.in_progress = false;
        st.last_duration_ms = started.elapsed().as_millis() as u64;
        match &result {
            Ok(r) => {
                st.saves += 1;
                st.last_ok = true;
                st.last_save_unix = now_ms() / 1000;
                st.last_bytes = r.bytes;
                st.last_keys = r.keys;
                st.last_file = r.file.clone();
                st.last_peak_buffered = r.peak_buffered;
                st.dirty_at_last_save = dirty;
            }
            Err(_) => st.last_ok = false,
        }
        std::mem::take(&mut st.scheduled)
    };
    match &result {
        Ok(r) => info!(
            keys = r.keys,
            bytes = r.bytes,
            "snapshot saved to {} in {:.2}s ({} keys, {}, {:.1} MB/s)",
            r.file,
            r.duration.as_secs_f64(),
            r.keys,
            super::human_bytes(r.bytes),
            r.bytes as f64 / 1e6 / r.duration.as_secs_f64().max(1e-6)
        ),
        Err(e) => warn!("snapshot failed: {e}"),
    }
    if again {
        // Nobody waits for this one's point in time.
        drop(bgsave(core));
    }
    result
}

/// Starts a save in the background; its outcome goes to the log and INFO. The receiver
/// answers once the save's point in time is set (every shard's snapshot has begun), so a
/// write sent after BGSAVE's reply is never in the snapshot, as with Redis' fork.
pub fn bgsave(core: &Rc<Core>) -> futures::channel::oneshot::Receiver<Result<()>> {
    let (tx, rx) = futures::channel::oneshot::channel();
    let c = core.clone();
    crate::runtime::spawn(async move {
        let _ = save_signalling(&c, None, None, Some(tx)).await;
    })
    .detach();
    rx
}

/// True while a save runs; with `schedule`, a save is queued to follow it (BGSAVE SCHEDULE).
pub fn in_progress(core: &Core, schedule: bool) -> bool {
    let mut st = state(core);
    if st.in_progress && schedule {
        st.scheduled = true;
    }
    st.in_progress
}

/// Writes counted by all shards (for rdb_changes_since_last_save).
pub async fn total_dirty(core: &Rc<Core>) -> u64 {
    core.on_all(|s| s.dirty).await.iter().sum()
}

async fn save_now(
    core: &Rc<Core>,
    format: Option<Format>,
    name: Option<String>,
    begun: &mut Begun,
) -> Result<SaveReport> {
    // Files are written, renamed and synced through glommio, which submits from its loop.
    let _io = crate::runtime::io_wait();
    let settings = core.global.settings.clone();
    let name = name.unwrap_or_else(|| settings.dbfilename());
    if name.is_empty() {
        return Err(ServerError::new(
            ErrorKind::Config,
            "saving is off (--dbfilename is empty)",
        ));
    }
    let dir = PathBuf::from(settings.dir());
    if !dir.is_dir() {
        return Err(ServerError::new(
            ErrorKind::Config,
            format!("--dir '{}' is not a directory", dir.display()),
        ));
    }
    let started = Instant::now();
    let id = now_ms();
    let name = expand_name(&name, id);
    let format = format.unwrap_or(if name.ends_with(".rdb") {
        Format::Rdb
    } else {
        Format::Strata
    });
    let n = core.global.shards();
    let stem = match format {
        Format::Rdb => name.clone(),
        Format::Strata => format!("{name}-{id:x}"),
    };
    let mut jobs: Vec<ShardJob> = (0..n)
        .map(|s| ShardJob {
            tmp: dir.join(match format {
                Format::Strata => format!("{}.tmp", shard_file_name(&stem, s as u32)),
                Format::Rdb => format!("{stem}.{s:04}.tmp"),
            }),
            format,
            header: SnapshotHeader {
                shard_index: s as u32,
                shard_count: n as u32,
                snapshot_id: id,
                created_ms: id,
                compression: settings.snapshot.compression,
            },
            throttle: settings.snapshot.throttle_bytes / n as u64,
            started_ms: id,
            functions: Vec::new(),
        })
        .collect();

    // The point in time: every shard starts its snapshot while all are locked, so no
    // cross-shard command is half in it.
    let functions;
    {
        let txn = Txn::begin(core, (0..n).collect())
            .await
            .ok_or_else(ServerError::shutting_down)?;
        for s in 0..n {
            txn.run(s, |sh| sh.snapshot_begin())
                .await
                .ok_or_else(ServerError::shutting_down)?;
        }
        // Function libraries as they are at the same point in time.
        functions = crate::server::script::function::codes();
    }
    if format == Format::Strata {
        if let Some(first) = jobs.first_mut() {
            first.functions = functions.clone();
        }
    }
    if let Some(tx) = begun.take() {
        let _ = tx.send(Ok(()));
    }
    info!(
        "saving snapshot '{name}' ({n} shard(s)) to {}",
        dir.display()
    );
    let parts = futures::future::join_all(jobs.iter().cloned().enumerate().map(|(s, job)| {
        core.on_shard_async(
            s,
            Box::new(move |c: Rc<Core>| async move { serialize_shard(c, job).await }.boxed_local()),
        )
    }))
    .await;
    let mut outputs = Vec::with_capacity(n);
    let mut failure = None;
    for p in parts {
        match p {
            Some(Ok(o)) => outputs.push(o),
            Some(Err(e)) => failure = Some(e),
            None => failure = Some(ServerError::shutting_down()),
        }
    }
    if let Some(e) = failure {
        for j in &jobs {
            let _ = std::fs::remove_file(&j.tmp);
        }
        return Err(e);
    }
    let unreadable: u64 = outputs.iter().map(|o| o.unreadable).sum();
    if unreadable > 0 {
        warn!("{unreadable} offloaded value(s) could not be read from the tier file and are missing from the snapshot");
    }
    let keys = outputs.iter().map(|o| o.keys).sum();
    let peak_buffered = outputs.iter().map(|o| o.peak_buffered).sum();
    let (file, bytes) = match format {
        Format::Strata => commit_strata(core, &dir, &name, &stem, id, &jobs, &outputs).await?,
        Format::Rdb => commit_rdb(&dir, &name, &jobs, &functions).await?,
    };
    Ok(SaveReport {
        keys,
        bytes,
        file,
        duration: started.elapsed(),
        peak_buffered,
    })
}

/// Renames the shard files, then writes and renames the summary (the commit), then removes the
/// files of the snapshot this one replaces. Returns the summary path and total bytes.
async fn commit_strata(
    core: &Core,
    dir: &Path,
    name: &str,
    stem: &str,
    id: u64,
    jobs: &[ShardJob],
    outputs: &[ShardOutput],
) -> Result<(String, u64)> {
    let settings = &core.global.settings;
    let summary_path = dir.join(summary_file_name(name));
    let previous = std::fs::read(&summary_path)
        .ok()
        .and_then(|b| Summary::decode(&b).ok());
    let mut files = Vec::with_capacity(jobs.len());
    for (s, (job, out)) in jobs.iter().zip(outputs).enumerate() {
        let file_name = shard_file_name(stem, s as u32);
        rename(&job.tmp, &dir.join(&file_name)).await?;
        files.push(SummaryFile {
            name: file_name,
            bytes: out.bytes,
            crc32: out.crc32,
            records: out.records,
        });
    }
    let total = files.iter().map(|f| f.bytes).sum();
    let summary = Summary {
        snapshot_id: id,
        created_ms: id,
        shard_count: jobs.len() as u32,
        db_count: settings.dbnum,
        compression: settings.snapshot.compression,
        files,
    };
    let tmp = dir.join(format!("{}.tmp", summary_file_name(name)));
    write_file(&tmp, &summary.encode()).await?;
    rename(&tmp, &summary_path).await?;
    sync_dir(dir).await?;
    if let Some(old) = previous {
        for f in old.files {
            if !summary.files.iter().any(|n| n.name == f.name) {
                let _ = std::fs::remove_file(dir.join(&f.name));
            }
        }
    }
    Ok((summary_path.display().to_string(), total))
}

/// Stitches the shards' RDB fragments into one file: header, function libraries, fragments,
/// EOF and CRC-64.
async fn commit_rdb(
    dir: &Path,
    name: &str,
    jobs: &[ShardJob],
    functions: &[bytes::Bytes],
) -> Result<(String, u64)> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let result = async {
        let mut w = FileWriter::create(&tmp).await?;
        let mut crc = Crc64::new();
        let mut header = rdb_header(RDB_VERSION);
        // Redis writes the libraries after the AUX fields, before any key.
        header.extend_from_slice(&rdb_functions(functions.iter().map(|c| &c[..])));
        crc.update(&header);
        w.write(&header).await?;
        let mut total = header.len() as u64;
        for job in jobs {
            let f = BufferedFile::open(&job.tmp)
                .await
                .map_err(|e| ServerError::glommio("open", &job.tmp, e))?;
            let mut pos = 0u64;
            loop {
                let got = f
                    .read_at(pos, CHUNK)
                    .await
                    .map_err(|e| ServerError::glommio("read", &job.tmp, e))?;
                if got.is_empty() {
                    break;
                }
                crc.update(&got);
                w.write(&got).await?;
                pos += got.len() as u64;
            }
            total += pos;
            let _ = f.close().await;
        }
        let trailer = rdb_trailer(crc);
        w.write(&trailer).await?;
        total += trailer.len() as u64;
        w.close().await?;
        rename(&tmp, &path).await?;
        sync_dir(dir).await?;
        Ok::<u64, ServerError>(total)
    }
    .await;
    for job in jobs {
        let _ = std::fs::remove_file(&job.tmp);
    }
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok((path.display().to_string(), result?))
}

/// Runs `--snapshot_cron` on core 0: a save at every scheduled minute.
pub async fn cron(core: Rc<Core>, schedule: crate::cron::CronSchedule) {
    loop {
        let now = now_ms() / 1000;
        let Some(next) = schedule.next_after(now) else {
            warn!("--snapshot_cron '{schedule}' never fires; no scheduled saves");
            return;
        };
        glommio::timer::sleep(Duration::from_secs(next.saturating_sub(now))).await;
        // The timer may fire a little early; wait out the rest of the second.
        while now_ms() / 1000 < next {
            glommio::timer::sleep(Duration::from_millis(50)).await;
        }
        if in_progress(&core, false) {
            continue;
        }
        let _ = save(&core, None, None).await;
    }
}

/// Saves (when saving is on) and exits the process: SHUTDOWN and SIGTERM. A failed save keeps
/// the server running when `must_save` (SHUTDOWN SAVE), like Redis.
pub async fn shutdown(core: &Rc<Core>, must_save: bool) -> Result<()> {
    let enabled = !core.global.settings.dbfilename().is_empty();
    if enabled || must_save {
        // A save already running is waited for, then this one runs.
        while in_progress(core, false) {
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        if let Err(e) = save(core, None, None).await {
            if must_save {
                return Err(e);
            }
            warn!("exiting without a snapshot: {e}");
        }
    }
    info!("shutting down");
    core.global.remove_tier_files();
    std::process::exit(0);
}

/// Mutex type used by [`crate::server::Global`].
pub type PersistLock = Mutex<PersistState>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_names() {
        // 2026-11-30 06:34:30 UTC
        assert_eq!(
            expand_name("dump-{timestamp}", 1_796_020_470_000),
            "dump-2026-11-30T06-34-30"
        );
        assert_eq!(expand_name("dump.rdb", 1), "dump.rdb");
    }
}

//! Writing outputs crash-safely: a new Strata snapshot ([`SnapshotOutput`]) or one plain file
//! ([`AtomicFile`], for RDB exports).
//!
//! The rule for every file: write `*.tmp`, fsync it, rename it, fsync the directory. For a
//! snapshot the shard files go first and the summary last, so the summary's rename is the
//! commit: a crash at any point leaves either the old snapshot or the new one, never a mix.
//! New shard files always get a snapshot id no existing file uses, so writing over the input
//! snapshot (same directory and name) never touches a file the input still needs; the files of
//! the snapshot being replaced are deleted only after the commit.
//!
//! Never: overwrites an existing shard file; leaves `*.tmp` files behind on an error.

use crate::error::Failure;
use crate::input::Entry;
use ondisk::{
    shard_file_name, shard_of, summary_file_name, Compression, Record, RecordValue, SnapshotHeader,
    SnapshotWriter, Summary, SummaryFile,
};
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where and how a new snapshot is written.
pub struct SnapshotSpec<'a> {
    pub dir: &'a Path,
    pub name: &'a str,
    pub shards: u32,
    pub compression: Compression,
    /// Recorded in the headers and the summary: when the data was captured.
    pub created_ms: u64,
    /// A lower bound for the new snapshot id (the id is also kept clear of every file name in
    /// use).
    pub min_id: u64,
    /// Files that must survive the replacement of the snapshot at `dir`/`name` even if its
    /// summary names them (the input's files, when they live in the same directory).
    pub keep: &'a [PathBuf],
}

/// A snapshot being written: one open shard file per output shard, keys routed by
/// [`shard_of`]. Dropped without [`commit`](Self::commit), it removes everything it wrote.
pub struct SnapshotOutput {
    dir: PathBuf,
    name: String,
    stem: String,
    id: u64,
    created_ms: u64,
    compression: Compression,
    writers: Vec<SnapshotWriter<File>>,
    /// `*.tmp` paths of the shard files, then (after renaming) their final paths.
    written: Vec<PathBuf>,
    /// The snapshot this one replaces, if the target summary exists and decodes.
    previous: Option<Summary>,
    keep: HashSet<PathBuf>,
    committed: bool,
    /// The shard file of the object whose pieces are being written.
    open_object: Option<usize>,
}

/// What a commit produced.
pub struct Committed {
    pub summary_path: PathBuf,
    pub summary: Summary,
    /// Files of the replaced snapshot that were deleted.
    pub removed: usize,
}

impl SnapshotOutput {
    /// Creates the directory if needed and opens the `*.tmp` shard files.
    pub fn create(spec: &SnapshotSpec<'_>) -> Result<SnapshotOutput, Failure> {
        std::fs::create_dir_all(spec.dir)
            .map_err(|e| Failure::io("cannot create output directory", spec.dir, &e))?;
        if !spec.dir.is_dir() {
            return Err(Failure::Io(format!(
                "{}: output directory is not a directory",
                spec.dir.display()
            )));
        }
        let summary_path = spec.dir.join(summary_file_name(spec.name));
        let previous = std::fs::read(&summary_path)
            .ok()
            .and_then(|b| Summary::decode(&b).ok());
        let (id, stem) = free_id(spec, previous.as_ref())?;
        let mut out = SnapshotOutput {
            dir: spec.dir.to_path_buf(),
            name: spec.name.to_string(),
            stem,
            id,
            created_ms: spec.created_ms,
            compression: spec.compression,
            writers: Vec::with_capacity(spec.shards as usize),
            written: Vec::with_capacity(spec.shards as usize),
            previous,
            keep: spec.keep.iter().map(|p| canonical(p)).collect(),
            committed: false,
            open_object: None,
        };
        for i in 0..spec.shards {
            let tmp = out
                .dir
                .join(format!("{}.tmp", shard_file_name(&out.stem, i)));
            let file = File::options()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| Failure::io("cannot create", &tmp, &e))?;
            out.written.push(tmp);
            let header = SnapshotHeader {
                shard_index: i,
                shard_count: spec.shards,
                snapshot_id: id,
                created_ms: spec.created_ms,
                compression: spec.compression,
            };
            out.writers.push(SnapshotWriter::new(file, header));
        }
        Ok(out)
    }

    /// The summary path this output will commit.
    pub fn summary_path(&self) -> PathBuf {
        self.dir.join(summary_file_name(&self.name))
    }

    /// Writes a string or object record, exactly as it is (value, expiry, client flags; an
    /// object's RDB type and encoding), to the shard that owns its key. Tombstones are never
    /// written: an output snapshot is always a full one.
    pub fn write(&mut self, entry: &Entry) -> Result<(), Failure> {
        match entry {
            Entry::Record(Record {
                db,
                key,
                expire_at_ms,
                client_flags,
                value: RecordValue::String(value),
            }) => self.write_string(*db, key, value, *expire_at_ms, *client_flags),
            Entry::Record(_) => Ok(()),
            Entry::Object(o) => {
                self.write_to_owner(&o.key, |w| w.write_object(&o.head(), o.rdb_type, &o.value))
            }
            Entry::ObjectHead(o) => {
                self.open_object = Some(shard_of(&o.key, self.writers.len()));
                self.write_to_owner(&o.key, |w| w.begin_pieces(&o.head(), o.rdb_type))
            }
        }
    }

    /// The next piece of the object an [`Entry::ObjectHead`] opened (`Some`), or its end
    /// (`None`): written as it comes, in records no longer than a piece.
    pub fn write_part(&mut self, part: Option<&[u8]>) -> Result<(), Failure> {
        let Some(shard) = self.open_object else {
            return Err(Failure::Corrupt(
                "an object's piece without its head".into(),
            ));
        };
        let Some(w) = self.writers.get_mut(shard) else {
            return Err(Failure::Io("no output shard file open".into()));
        };
        let r = match part {
            Some(b) => w.write_piece(b),
            None => {
                self.open_object = None;
                w.end_pieces()
            }
        };
        r.map_err(|e| Failure::io("cannot write", &self.written[shard], &e))
    }

    /// Writes an object (a key of a type other than string, its value in RDB encoding) to the
    /// shard that owns its key; a large one in pieces.
    pub fn write_object(
        &mut self,
        head: &ondisk::KeyHead<'_>,
        rdb_type: u8,
        value: &[u8],
    ) -> Result<(), Failure> {
        self.write_to_owner(head.key, |w| w.write_object(head, rdb_type, value))
    }

    /// Writes a function library's code into the first shard file (write them before any key:
    /// a loader meets the libraries first there).
    pub fn write_function(&mut self, code: &[u8]) -> Result<(), Failure> {
        let Some(w) = self.writers.first_mut() else {
            return Err(Failure::Io("no output shard file open".into()));
        };
        w.write_function(code)
            .map_err(|e| Failure::io("cannot write", &self.written[0], &e))
    }

    pub fn write_string(
        &mut self,
        db: u16,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
        client_flags: u32,
    ) -> Result<(), Failure> {
        self.write_to_owner(key, |w| {
            w.write_string(db, key, value, expire_at_ms, client_flags)
        })
    }

    /// Runs `write` on the shard file that owns `key` (by [`shard_of`]).
    fn write_to_owner(
        &mut self,
        key: &[u8],
        write: impl FnOnce(&mut SnapshotWriter<File>) -> io::Result<()>,
    ) -> Result<(), Failure> {
        let shard = shard_of(key, self.writers.len());
        let Some(w) = self.writers.get_mut(shard) else {
            return Err(Failure::Io("no output shard file open".into()));
        };
        write(w).map_err(|e| Failure::io("cannot write", &self.written[shard], &e))
    }

    /// Finishes and fsyncs every shard file, renames them, writes the summary (the commit),
    /// then deletes the files of the snapshot it replaced.
    pub fn commit(mut self, db_count: u32) -> Result<Committed, Failure> {
        let mut files = Vec::with_capacity(self.writers.len());
        let writers = std::mem::take(&mut self.writers);
        for (i, w) in writers.into_iter().enumerate() {
            let tmp = self.written[i].clone();
            let (file, stats) = w
                .finish_into_inner()
                .map_err(|e| Failure::io("cannot write", &tmp, &e))?;
            file.sync_all()
                .map_err(|e| Failure::io("cannot fsync", &tmp, &e))?;
            drop(file);
            let name = shard_file_name(&self.stem, i as u32);
            let path = self.dir.join(&name);
            std::fs::rename(&tmp, &path).map_err(|e| Failure::io("cannot rename", &tmp, &e))?;
            self.written[i] = path;
            files.push(SummaryFile {
                name,
                bytes: stats.bytes,
                crc32: stats.crc32,
                records: stats.records,
            });
        }
        sync_dir(&self.dir)?;
        let summary = Summary {
            snapshot_id: self.id,
            created_ms: self.created_ms,
            shard_count: files.len() as u32,
            db_count,
            compression: self.compression,
            files,
        };
        let summary_path = self.summary_path();
        write_atomically(&summary_path, &summary.encode())?;
        self.committed = true;

        let mut removed = 0;
        if let Some(old) = self.previous.take() {
            for f in &old.files {
                let path = self.dir.join(&f.name);
                if summary.files.iter().any(|n| n.name == f.name)
                    || self.keep.contains(&canonical(&path))
                {
                    continue;
                }
                if std::fs::remove_file(&path).is_ok() {
                    removed += 1;
                }
            }
            if removed > 0 {
                sync_dir(&self.dir)?;
            }
        }
        Ok(Committed {
            summary_path,
            summary,
            removed,
        })
    }
}

impl Drop for SnapshotOutput {
    fn drop(&mut self) {
        if !self.committed {
            // Renamed files are not named by any summary yet: they are as stray as the tmps.
            for p in &self.written {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// A snapshot id (and the stem `NAME-{id:x}` of its file names) whose shard files, and their
/// `*.tmp`s, neither exist nor are named by the summary being replaced.
fn free_id(spec: &SnapshotSpec<'_>, previous: Option<&Summary>) -> Result<(u64, String), Failure> {
    let mut id = spec.min_id.max(now_ms());
    for _ in 0..10_000 {
        let stem = format!("{}-{id:x}", spec.name);
        let taken = (0..spec.shards).any(|i| {
            let name = shard_file_name(&stem, i);
            spec.dir.join(&name).exists()
                || spec.dir.join(format!("{name}.tmp")).exists()
                || previous.is_some_and(|p| p.files.iter().any(|f| f.name == name))
        });
        if !taken {
            return Ok((id, stem));
        }
        id += 1;
    }
    Err(Failure::Io(format!(
        "{}: no free snapshot id for '{}' near {id:x}",
        spec.dir.display(),
        spec.name
    )))
}

/// A file written as `*.tmp` and renamed into place on [`commit`](Self::commit); removed if
/// dropped before.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

impl AtomicFile {
    /// Creates (or truncates) `path.tmp`; the parent directory must exist.
    pub fn create(path: &Path) -> Result<(AtomicFile, File), Failure> {
        let mut tmp = path.as_os_str().to_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(|e| Failure::io("cannot create", &tmp, &e))?;
        Ok((
            AtomicFile {
                path: path.to_path_buf(),
                tmp,
                committed: false,
            },
            file,
        ))
    }

    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// Fsyncs `file` (the one [`create`](Self::create) returned), renames it into place and
    /// fsyncs the directory.
    pub fn commit(mut self, file: File) -> Result<(), Failure> {
        file.sync_all()
            .map_err(|e| Failure::io("cannot fsync", &self.tmp, &e))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| Failure::io("cannot rename", &self.tmp, &e))?;
        self.committed = true;
        sync_dir(&parent_dir(&self.path))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `path` by the rule: tmp, fsync, rename, fsync the directory.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    let (out, mut file) = AtomicFile::create(path)?;
    file.write_all(bytes)
        .map_err(|e| Failure::io("cannot write", out.tmp_path(), &e))?;
    out.commit(file)
}

fn sync_dir(dir: &Path) -> Result<(), Failure> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Failure::io("cannot fsync directory", dir, &e))
}

/// Refuses snapshot names that cannot be part of a file name.
pub fn check_name(name: &str) -> Result<(), Failure> {
    if name.is_empty() || name.contains('/') || name.contains('\0') {
        return Err(Failure::Usage(format!(
            "bad snapshot name '{name}': it must be non-empty and hold no '/'"
        )));
    }
    Ok(())
}

/// The directory holding `path` (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `path` with symlinks and `..` resolved when it exists; as given otherwise.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

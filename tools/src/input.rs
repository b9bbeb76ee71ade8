//! Reading a Strata snapshot: its summary, then each shard file in full, one record at a time.
//!
//! Every subcommand that reads a snapshot goes through [`ShardScan`], so every one of them checks
//! the same things `verify` does (header, every block CRC, the end frame, and agreement with the
//! summary) and refuses to build output from a damaged input. [`for_each_live`] adds the
//! compactor's view: expired keys and tombstoned keys left out. Strings and objects (keys of
//! any other type) are keys alike here: expiry and tombstones treat them the same way.
//!
//! Never holds more than one record plus the decoder's block buffer, except the tombstones of
//! the file being read (a `HashMap` of their keys), which incremental snapshots keep few.

use crate::error::Failure;
use crate::progress::{Counted, Progress};
use bytes::Bytes;
use ondisk::snapshot::{END_PAYLOAD_LEN, FRAME_HEADER_LEN};
use ondisk::{
    FileStats, Item, ObjectRecord, Record, RecordValue, SnapshotReader, Summary, SummaryFile,
};
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// What ends a summary file's name: `NAME-summary.strata`.
pub const SUMMARY_SUFFIX: &str = "-summary.strata";

/// An opened snapshot: the decoded summary and where its shard files are.
pub struct SnapshotInput {
    pub summary_path: PathBuf,
    /// The directory holding the summary, and so every shard file it names.
    pub dir: PathBuf,
    /// `NAME` when the summary is called `NAME-summary.strata`.
    pub name: Option<String>,
    pub summary: Summary,
}

impl SnapshotInput {
    /// The summary file meant by a command-line argument: `path` itself, or
    /// `path/{name}-summary.strata` when `path` is a directory.
    pub fn locate(path: &Path, name: &str) -> PathBuf {
        if path.is_dir() {
            path.join(ondisk::summary_file_name(name))
        } else {
            path.to_path_buf()
        }
    }

    /// Reads and checks the summary (not the shard files: [`ShardScan`] does those).
    pub fn open(summary_path: &Path) -> Result<SnapshotInput, Failure> {
        let bytes = std::fs::read(summary_path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Failure::Corrupt(format!(
                    "{}: no snapshot summary there ({e})",
                    summary_path.display()
                ))
            } else {
                Failure::io("cannot read", summary_path, &e)
            }
        })?;
        let summary = Summary::decode(&bytes)
            .map_err(|e| Failure::format(&e).context(summary_path.display()))?;
        if summary.shard_count as usize != summary.files.len() {
            return Err(Failure::Corrupt(format!(
                "{}: summary says {} shards but lists {} files",
                summary_path.display(),
                summary.shard_count,
                summary.files.len()
            )));
        }
        let dir = match summary_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = summary_path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(SUMMARY_SUFFIX))
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        Ok(SnapshotInput {
            summary_path: summary_path.to_path_buf(),
            dir,
            name,
            summary,
        })
    }

    pub fn file_path(&self, index: usize) -> PathBuf {
        self.dir.join(&self.summary.files[index].name)
    }

    /// Bytes of all shard files, as the summary records them.
    pub fn total_bytes(&self) -> u64 {
        self.summary.files.iter().map(|f| f.bytes).sum()
    }
}

/// One record of a shard file's stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A string key or a tombstone.
    Record(Record),
    /// A key of any other data type, its value in RDB encoding.
    Object(ObjectRecord),
    /// A large object's head (value empty) from a scan that streams pieces
    /// ([`ShardScan::stream_pieces`]): its value follows through [`ShardScan::next_part`].
    ObjectHead(ObjectRecord),
}

impl Entry {
    pub fn db(&self) -> u16 {
        match self {
            Entry::Record(r) => r.db,
            Entry::Object(o) | Entry::ObjectHead(o) => o.db,
        }
    }

    pub fn key(&self) -> &Bytes {
        match self {
            Entry::Record(r) => &r.key,
            Entry::Object(o) | Entry::ObjectHead(o) => &o.key,
        }
    }

    pub fn expire_at_ms(&self) -> Option<u64> {
        match self {
            Entry::Record(r) => r.expire_at_ms,
            Entry::Object(o) | Entry::ObjectHead(o) => o.expire_at_ms,
        }
    }

    pub fn client_flags(&self) -> u32 {
        match self {
            Entry::Record(r) => r.client_flags,
            Entry::Object(o) | Entry::ObjectHead(o) => o.client_flags,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        matches!(self, Entry::Record(r) if r.value == RecordValue::Tombstone)
    }
}

/// One shard file read from start to end, checked against the summary at the end.
///
/// Errors carry no file name: the caller adds it (`verify` prints it in its own column).
pub struct ShardScan<'a> {
    expect: &'a SummaryFile,
    reader: SnapshotReader<Counted<File>>,
    stats: Option<FileStats>,
}

impl<'a> ShardScan<'a> {
    /// Opens file `index` of `input` and checks its header against the summary.
    pub fn open(
        input: &'a SnapshotInput,
        index: usize,
        progress: &Progress,
    ) -> Result<ShardScan<'a>, Failure> {
        let path = input.file_path(index);
        let file = File::open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Failure::Corrupt(format!("missing ({e})"))
            } else {
                Failure::Io(format!("cannot open ({e})"))
            }
        })?;
        let reader = SnapshotReader::new(progress.reader(file)).map_err(|e| Failure::format(&e))?;
        let h = reader.header();
        let s = &input.summary;
        if h.shard_index as usize != index {
            return Err(Failure::Corrupt(format!(
                "header says shard {} at offset 12, the summary lists the file as shard {index}",
                h.shard_index
            )));
        }
        if h.shard_count != s.shard_count {
            return Err(Failure::Corrupt(format!(
                "header says {} shards at offset 16, the summary says {}",
                h.shard_count, s.shard_count
            )));
        }
        if h.snapshot_id != s.snapshot_id {
            return Err(Failure::Corrupt(format!(
                "header says snapshot {:x} at offset 20, the summary says {:x} \
                 (a file of another snapshot)",
                h.snapshot_id, s.snapshot_id
            )));
        }
        Ok(ShardScan {
            expect: &input.summary.files[index],
            reader,
            stats: None,
        })
    }

    /// The next record of a known kind (tombstones and objects included); `Ok(None)` once the
    /// end frame was checked and the file's size, CRC and record count matched the summary.
    pub fn next(&mut self) -> Result<Option<Entry>, Failure> {
        if self.stats.is_some() {
            return Ok(None);
        }
        match self.reader.next_item() {
            Ok(Some(Item::Record(r))) => Ok(Some(Entry::Record(r))),
            Ok(Some(Item::Object(o))) => Ok(Some(Entry::Object(o))),
            Ok(Some(Item::ObjectHead(o))) => Ok(Some(Entry::ObjectHead(o))),
            Ok(Some(Item::Piece(_) | Item::ObjectEnd)) => Err(Failure::Corrupt(
                "a piece of an object read as a record (a reader bug)".into(),
            )),
            // `next_item` keeps the end frame to itself; its totals come with `Ok(None)`.
            Ok(Some(Item::End(_))) => self.next(),
            // Function libraries are not keys; [`functions`] reads them for the tools that
            // carry them.
            Ok(Some(Item::Function(_))) => self.next(),
            Ok(None) => {
                let Some(stats) = self.reader.stats().copied() else {
                    return Err(Failure::Corrupt("ended without an end frame".into()));
                };
                self.check_against_summary(&stats)?;
                self.stats = Some(stats);
                Ok(None)
            }
            Err(e) => Err(Failure::format(&e)),
        }
    }

    /// Large objects come as [`Entry::ObjectHead`] and their pieces, never joined: read the
    /// pieces with [`next_part`](Self::next_part) before the next [`next`](Self::next).
    pub fn stream_pieces(&mut self) {
        self.reader.stream_pieces(true);
    }

    /// The open object's next piece; `Ok(None)` at its end, whose length, piece count and
    /// CRC32 checked out.
    pub fn next_part(&mut self) -> Result<Option<Bytes>, Failure> {
        match self.reader.next_item() {
            Ok(Some(Item::Piece(b))) => Ok(Some(b)),
            Ok(Some(Item::ObjectEnd)) => Ok(None),
            Ok(_) => Err(Failure::Corrupt(
                "an object's pieces end without its end".into(),
            )),
            Err(e) => Err(Failure::format(&e)),
        }
    }

    /// The file's verified totals, once [`next`](Self::next) returned `Ok(None)`.
    pub fn stats(&self) -> Option<&FileStats> {
        self.stats.as_ref()
    }

    /// Records of kinds this build does not know, skipped so far (objects are known).
    pub fn skipped_unknown(&self) -> u64 {
        self.reader.skipped_unknown()
    }

    fn check_against_summary(&self, stats: &FileStats) -> Result<(), Failure> {
        let want = self.expect;
        if stats.bytes != want.bytes {
            return Err(Failure::Corrupt(format!(
                "file is {} bytes, the summary says {} (the end frame is at offset {})",
                stats.bytes,
                want.bytes,
                stats
                    .bytes
                    .saturating_sub((FRAME_HEADER_LEN + END_PAYLOAD_LEN) as u64)
            )));
        }
        if stats.crc32 != want.crc32 {
            return Err(Failure::Corrupt(format!(
                "crc32 of bytes 0..{} is {:08x}, the summary says {:08x}",
                stats.bytes, stats.crc32, want.crc32
            )));
        }
        if stats.records != want.records {
            return Err(Failure::Corrupt(format!(
                "file holds {} records, the summary says {}",
                stats.records, want.records
            )));
        }
        Ok(())
    }
}

/// The function libraries a snapshot holds (their code): the records at the start of its
/// first shard file, where the server writes them.
pub fn functions(input: &SnapshotInput) -> Result<Vec<Bytes>, Failure> {
    let path = input.file_path(0);
    let ctx = |e: Failure| e.context(path.display());
    let file = File::open(&path).map_err(|e| ctx(Failure::Io(format!("cannot open ({e})"))))?;
    let mut reader = SnapshotReader::new(file).map_err(|e| ctx(Failure::format(&e)))?;
    // The first key ends the libraries: a large object there need not be joined.
    reader.stream_pieces(true);
    let mut codes = Vec::new();
    while let Some(Item::Function(code)) =
        reader.next_item().map_err(|e| ctx(Failure::format(&e)))?
    {
        codes.push(code);
    }
    Ok(codes)
}

/// What [`for_each_live`] left out and kept.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LiveCounts {
    /// Keys handed on, objects included.
    pub kept: u64,
    /// Objects among the keys handed on.
    pub objects: u64,
    /// Keys whose expiry time had passed.
    pub expired: u64,
    /// Keys deleted by a later tombstone in the same file.
    pub tombstoned: u64,
    /// Tombstone records (never handed on).
    pub tombstones: u64,
}

/// Calls `keep` with every key of `input`, string or object, that is neither expired at `now_ms`
/// nor deleted by a tombstone later in the same file, file after file in summary order, each
/// file in its own order. Never hands on a tombstone.
///
/// A file whose end frame counts no records besides strings is read once; any other (one with
/// tombstones or objects) is read twice, the first pass collecting its tombstones. Any damage,
/// or a record of a kind this build does not know (which it could not carry over), stops the
/// walk with an error naming the file.
pub fn for_each_live(
    input: &SnapshotInput,
    now_ms: u64,
    progress: &Progress,
    keep: impl FnMut(&Entry) -> Result<(), Failure>,
) -> Result<LiveCounts, Failure> {
    for_each_live_in_pieces(input, now_ms, progress, keep, None)
}

/// A piece of a live large object's value (`Some`), or its end (`None`).
pub type PartSink<'a> = &'a mut dyn FnMut(Option<&[u8]>) -> Result<(), Failure>;

/// As [`for_each_live`]; with `parts`, a large object is never joined: `keep` gets its
/// [`Entry::ObjectHead`], then `parts` each piece of its value and its end.
pub fn for_each_live_in_pieces(
    input: &SnapshotInput,
    now_ms: u64,
    progress: &Progress,
    mut keep: impl FnMut(&Entry) -> Result<(), Failure>,
    mut parts: Option<PartSink<'_>>,
) -> Result<LiveCounts, Failure> {
    let mut counts = LiveCounts::default();
    for index in 0..input.summary.files.len() {
        let path = input.file_path(index);
        let deleted = tombstones(input, index, progress).map_err(|e| e.context(path.display()))?;
        let mut scan =
            ShardScan::open(input, index, progress).map_err(|e| e.context(path.display()))?;
        if parts.is_some() {
            scan.stream_pieces();
        }
        let mut at = 0u64;
        while let Some(entry) = scan.next().map_err(|e| e.context(path.display()))? {
            at += 1;
            let mut live = false;
            let r = live_entry(
                &entry,
                at,
                &deleted,
                now_ms,
                &mut counts,
                &mut keep,
                &mut live,
            );
            r.map_err(|e| e.context(path.display()))?;
            if let (Entry::ObjectHead(_), Some(sink)) = (&entry, parts.as_mut()) {
                while let Some(b) = scan.next_part().map_err(|e| e.context(path.display()))? {
                    if live {
                        sink(Some(&b))?;
                    }
                }
                if live {
                    sink(None)?;
                }
            }
        }
        let unknown = scan.skipped_unknown();
        if unknown > 0 {
            return Err(Failure::Corrupt(format!(
                "{}: {unknown} record(s) of kinds this build does not know; refusing to drop \
                 them (a newer strata-compact is needed)",
                path.display()
            )));
        }
    }
    Ok(counts)
}

/// Counts `entry` (the `at`th of its file) and hands it to `keep` unless it is a tombstone,
/// deleted by a later one, or expired; `live` says whether it was handed on.
fn live_entry(
    entry: &Entry,
    at: u64,
    deleted: &HashMap<(u16, Bytes), u64>,
    now_ms: u64,
    counts: &mut LiveCounts,
    keep: &mut impl FnMut(&Entry) -> Result<(), Failure>,
    live: &mut bool,
) -> Result<(), Failure> {
    if entry.is_tombstone() {
        counts.tombstones += 1;
        return Ok(());
    }
    if deleted
        .get(&(entry.db(), entry.key().clone()))
        .is_some_and(|&t| t > at)
    {
        counts.tombstoned += 1;
        return Ok(());
    }
    if is_expired(entry.expire_at_ms(), now_ms) {
        counts.expired += 1;
        return Ok(());
    }
    keep(entry)?;
    *live = true;
    counts.kept += 1;
    if matches!(entry, Entry::Object(_) | Entry::ObjectHead(_)) {
        counts.objects += 1;
    }
    Ok(())
}

/// Has a key with this expiry time expired at `now_ms`? (The server's rule: at or before now.)
pub fn is_expired(expire_at_ms: Option<u64>, now_ms: u64) -> bool {
    expire_at_ms.is_some_and(|t| t <= now_ms)
}

/// The tombstones of file `index`: (db, key) → position of the last one (1-based count of
/// [`ShardScan::next`]'s records, objects included), so a record is deleted when a tombstone
/// comes after it.
fn tombstones(
    input: &SnapshotInput,
    index: usize,
    progress: &Progress,
) -> Result<HashMap<(u16, Bytes), u64>, Failure> {
    let mut map = HashMap::new();
    if non_string_records(&input.file_path(index)) == Some(0) {
        return Ok(map);
    }
    progress.add_total(input.summary.files[index].bytes);
    let mut scan = ShardScan::open(input, index, progress)?;
    // Objects are passed over, so their pieces need not be joined.
    scan.stream_pieces();
    let mut at = 0u64;
    while let Some(entry) = scan.next()? {
        at += 1;
        if let Entry::ObjectHead(_) = entry {
            while scan.next_part()?.is_some() {}
        }
        if let Entry::Record(r) = entry {
            if r.value == RecordValue::Tombstone {
                map.insert((r.db, r.key), at);
            }
        }
    }
    Ok(map)
}

/// Records other than strings (tombstones, objects, unknown kinds: the end frame has no count
/// of tombstones alone) that the file's end frame counts, when the end frame's own checksums
/// hold; `None` when that cannot be told cheaply (the full read then finds out, and reports any
/// damage).
///
/// Trusting it is safe: the full read checks the end frame's counts against the records it
/// actually finds, so a file that lied would fail before its output is committed.
fn non_string_records(path: &Path) -> Option<u64> {
    const TAIL: usize = FRAME_HEADER_LEN + END_PAYLOAD_LEN;
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.checked_sub(TAIL as u64)?))
        .ok()?;
    let mut b = [0u8; TAIL];
    f.read_exact(&mut b).ok()?;
    let (head, payload) = b.split_at(FRAME_HEADER_LEN);
    let le32 = |s: &[u8]| s.try_into().ok().map(u32::from_le_bytes);
    let le64 = |s: &[u8]| s.try_into().ok().map(u64::from_le_bytes);
    let sound = &head[0..4] == b"SEND"
        && le32(&head[8..12])? as usize == END_PAYLOAD_LEN
        && le32(&head[16..20])? == crc32fast::hash(payload)
        && le32(&head[20..24])? == crc32fast::hash(&head[..20]);
    if !sound {
        return None;
    }
    le64(&payload[0..8])?.checked_sub(le64(&payload[8..16])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ondisk::{Compression, SnapshotHeader, SnapshotWriter};

    fn file_with(dir: &Path, tombstones: u32) -> PathBuf {
        let path = dir.join(format!("f{tombstones}"));
        let header = SnapshotHeader {
            shard_index: 0,
            shard_count: 1,
            snapshot_id: 1,
            created_ms: 1,
            compression: Compression::Lz4,
        };
        let mut w = SnapshotWriter::new(File::create(&path).unwrap(), header);
        for i in 0..100u32 {
            w.write_string(0, format!("k{i}").as_bytes(), b"v", None, 0)
                .unwrap();
        }
        for i in 0..tombstones {
            w.write_tombstone(0, format!("k{i}").as_bytes()).unwrap();
        }
        w.finish().unwrap();
        path
    }

    #[test]
    fn the_end_frame_tells_whether_a_file_has_tombstones() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(non_string_records(&file_with(dir.path(), 0)), Some(0));
        let with = file_with(dir.path(), 3);
        assert_eq!(non_string_records(&with), Some(3));

        // Any doubt about the end frame means "read the file to find out".
        let good = std::fs::read(&with).unwrap();
        for at in good.len() - 52..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            std::fs::write(&with, &bad).unwrap();
            assert_eq!(non_string_records(&with), None, "flip at {at}");
        }
        std::fs::write(&with, &good[..good.len() - 1]).unwrap();
        assert_eq!(non_string_records(&with), None);
        std::fs::write(&with, b"short").unwrap();
        assert_eq!(non_string_records(&with), None);
        assert_eq!(non_string_records(&dir.path().join("absent")), None);
    }
}

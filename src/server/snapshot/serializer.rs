//! One shard's part of a save, on the shard's own core: walks its tables a few buckets per
//! step between client commands, takes the entries writes copied aside, reads offloaded values
//! back from the tier file (a large collection's extent a part at a time, straight into the
//! file), and encodes everything (Strata records or an RDB fragment) into its file as it goes.
//!
//! A large collection (one whose RDB encoding reaches a piece, 64 KiB) is encoded a piece at a
//! time from the entry the walk handed out, the core serving clients between pieces: that
//! entry is the collection as it was at the save's start, sharing its nodes with the live one
//! (a write to the live one copies the node it changes, see [`TypedObject::capture`]), so a
//! collection half-saved stays as it was whatever writes come meanwhile. Strata files get a
//! head, pieces and an end record (`ondisk::snapshot`), RDB files the same bytes as one key.
//!
//! Never: blocks the core for more than one step or one piece, or holds more than one step's
//! entries (plus the writers' copies) and one piece of encoding in memory; a large value is
//! encoded in chunks with writes between.

use std::path::PathBuf;
use std::rc::Rc;

use bytes::Bytes;
use ondisk::rdb::RdbEncoder;
use ondisk::snapshot::{KeyHead, SnapshotEncoder, SnapshotHeader, PIECE_LEN};
use tiering::{DiskPtr, TierError, TierStore};
use tracing::{info, warn};

use super::sink::{FileWriter, Throttle};
use super::Format;
use crate::server::core::Core;
use crate::server::error::{ErrorKind, Result, ServerError};
use crate::server::offload::BlobCheck;
use crate::shard::object::RdbPartPos;
use crate::shard::{Element, Entry, TypedObject, ValueRef};

/// Buckets one serializer step walks per db.
const STEP_BUCKETS: usize = 8;
/// Encoded bytes a serializer lets pile up before it writes them out.
const ENCODED_IN_MEMORY: usize = 512 << 10;
/// Offloaded values read at once by a serializer.
const READS_IN_FLIGHT: usize = 64;
/// Bytes of offloaded values read at once by a serializer (a group holds one value at least):
/// a collection on SSD may take many MiB.
const READ_BYTES_IN_FLIGHT: u64 = 8 << 20;
/// Values at least this long are encoded in chunks, the file written between chunks.
pub(super) const CHUNK: usize = 1 << 20;

/// What a shard's serializer writes, and where.
#[derive(Clone)]
pub(super) struct ShardJob {
    pub(super) tmp: PathBuf,
    pub(super) format: Format,
    pub(super) header: SnapshotHeader,
    /// Bytes per second for this shard; 0 = no cap.
    pub(super) throttle: u64,
    pub(super) started_ms: u64,
    /// Function libraries' code to write before any key (shard 0's Strata file only).
    pub(super) functions: Vec<Bytes>,
}

/// What a shard's serializer wrote.
pub(super) struct ShardOutput {
    pub(super) keys: u64,
    pub(super) bytes: u64,
    pub(super) crc32: u32,
    pub(super) records: u64,
    pub(super) unreadable: u64,
    /// Most encoded bytes held at once (encoder output not yet written plus a piece).
    pub(super) peak_buffered: u64,
}

/// The encoder of one shard's file.
enum Encoder {
    Strata(Box<SnapshotEncoder>),
    Rdb(Box<RdbEncoder>),
}

impl Encoder {
    fn pending(&self) -> usize {
        match self {
            Encoder::Strata(e) => e.pending_bytes(),
            Encoder::Rdb(e) => e.pending_bytes(),
        }
    }

    fn take(&mut self) -> Option<Bytes> {
        match self {
            Encoder::Strata(e) => e.take_output(),
            Encoder::Rdb(e) => e.take_output(),
        }
    }
}

/// Writes a shard's file while walking its tables; always ends the shard's snapshot.
pub(super) async fn serialize_shard(core: Rc<Core>, job: ShardJob) -> Result<ShardOutput> {
    let result = write_shard(&core, &job).await;
    core.shard.borrow_mut().snapshot_end();
    if result.is_err() {
        let _ = std::fs::remove_file(&job.tmp);
    }
    result
}

async fn write_shard(core: &Rc<Core>, job: &ShardJob) -> Result<ShardOutput> {
    let mut w = FileWriter::create(&job.tmp).await?;
    let mut enc = match job.format {
        Format::Strata => {
            let mut enc = SnapshotEncoder::new(job.header.clone());
            for code in &job.functions {
                enc.write_function(code);
            }
            Encoder::Strata(Box::new(enc))
        }
        Format::Rdb => Encoder::Rdb(Box::new(RdbEncoder::fragment())),
    };
    let throttle = Throttle::new(job.throttle);
    let mut out = ShardOutput {
        keys: 0,
        bytes: 0,
        crc32: 0,
        records: 0,
        unreadable: 0,
        peak_buffered: 0,
    };
    let mut batch: Vec<(usize, Element<Entry>)> = Vec::new();
    let total = core.shard.borrow().key_count().max(1);
    let mut handed = 0usize;
    let mut next_log = 10;
    loop {
        let done = core
            .shard
            .borrow_mut()
            .snapshot_step(STEP_BUCKETS, &mut batch);
        handed += batch.len();
        let mut reads = Vec::new();
        for (db, el) in batch.drain(..) {
            let (key, e, at, flags) = (el.key, el.value, el.expire_at, el.meta.client_flags);
            if at != 0 && at <= job.started_ms {
                continue;
            }
            let expire = (at != 0).then_some(at);
            match e.value() {
                ValueRef::Str(v) => {
                    put_value(
                        &mut enc,
                        &mut w,
                        &throttle,
                        &mut out,
                        db,
                        key.as_bytes(),
                        v,
                        expire,
                        flags,
                    )
                    .await?;
                }
                // An offloaded string or collection: read back below, through the same path.
                ValueRef::External(_) | ValueRef::Offloaded(..) => {
                    if let Some(p) = e.external(key.len()) {
                        reads.push((db, key, p, expire, flags, e.offloaded_type().is_some()));
                    }
                }
                ValueRef::Object(o) => {
                    let head = (db, key.as_bytes(), expire, flags);
                    put_large(&mut enc, &mut w, &throttle, &mut out, head, o).await?;
                }
                ValueRef::Packed(..) => {
                    let mut body = Vec::new();
                    if let Some(rdb_type) = e.encode_rdb(&mut body) {
                        let head = (db, key.as_bytes(), expire, flags);
                        put_object(&mut enc, &mut out, head, rdb_type, &body);
                    }
                }
            }
            out.peak_buffered = out.peak_buffered.max(enc.pending() as u64);
            // Written as it goes: a large batch (a write burst's copies) never sits in the
            // encoder whole.
            if enc.pending() >= ENCODED_IN_MEMORY {
                drain(&mut enc, &mut w, &throttle, &mut out).await?;
            }
        }
        if !reads.is_empty() {
            let tier = core.shard.borrow().tier.clone();
            let Some(tier) = tier else {
                return Err(ServerError::new(
                    ErrorKind::Corrupt,
                    "offloaded values without a tier file",
                ));
            };
            // A large collection's extent is copied a part at a time, never read whole.
            let (large, reads): (Vec<_>, Vec<_>) = reads
                .into_iter()
                .partition(|r| r.5 && crate::server::offload::read_in_steps(&r.2));
            for (db, key, p, expire, flags, _) in &large {
                let head = (*db, key.as_bytes(), *expire, *flags);
                put_offloaded_large(&mut enc, &mut w, &throttle, &mut out, &tier, head, *p).await?;
            }
            // A bounded number of reads at a time: a write burst can capture thousands of
            // offloaded entries, and their values must not all come to RAM at once.
            for range in read_groups(reads.iter().map(|r| r.2.len as u64)) {
                let group = &reads[range];
                let values = futures::future::join_all(
                    group
                        .iter()
                        .map(|(_, k, p, _, _, _)| tier.read(*p, k.as_bytes())),
                )
                .await;
                for ((db, key, _, expire, flags, coll), v) in group.iter().zip(values) {
                    match v {
                        // A collection's blob is its DUMP payload: its RDB body goes into the
                        // record as it is, once its CRC-64 checks.
                        Ok(v) if *coll => match crate::server::offload::blob_parts(&v) {
                            Ok((rdb_type, body)) => {
                                let head = (*db, key.as_bytes(), *expire, *flags);
                                put_object(&mut enc, &mut out, head, rdb_type, body);
                                out.peak_buffered = out.peak_buffered.max(enc.pending() as u64);
                            }
                            Err(e) => {
                                warn!("snapshot: the collection of {key:?} on the tier file is corrupt: {e}");
                                out.unreadable += 1;
                            }
                        },
                        Ok(v) => {
                            put_value(
                                &mut enc,
                                &mut w,
                                &throttle,
                                &mut out,
                                *db,
                                key.as_bytes(),
                                &v,
                                *expire,
                                *flags,
                            )
                            .await?;
                        }
                        Err(e) => {
                            warn!("snapshot: cannot read the value of {key:?} from the tier file: {e}");
                            out.unreadable += 1;
                        }
                    }
                }
                drain(&mut enc, &mut w, &throttle, &mut out).await?;
            }
        }
        drain(&mut enc, &mut w, &throttle, &mut out).await?;
        let pct = out.keys * 100 / total as u64;
        if pct >= next_log && total > 100_000 {
            info!(
                shard = job.header.shard_index,
                "snapshot {pct}% ({} keys)", out.keys
            );
            next_log = pct / 10 * 10 + 10;
        }
        if done {
            break;
        }
        futures_lite::future::yield_now().await;
    }
    let expected = core.shard.borrow().snap_keys_at_begin;
    if handed != expected {
        warn!(
            shard = job.header.shard_index,
            "snapshot walked {handed} entries but the shard held {expected} when the save began"
        );
    }
    let tail = match enc {
        Encoder::Strata(e) => {
            let (tail, stats) = e.finish();
            out.crc32 = stats.crc32;
            out.records = stats.records;
            tail
        }
        Encoder::Rdb(e) => e.finish(),
    };
    w.write(&tail).await?;
    out.bytes += tail.len() as u64;
    w.close().await?;
    Ok(out)
}

/// Encodes one string value, in chunks for long ones so the file is written as it goes. RDB
/// has no place for memcached's client flags; Strata snapshots keep them.
#[allow(clippy::too_many_arguments)]
async fn put_value(
    enc: &mut Encoder,
    w: &mut FileWriter,
    throttle: &Throttle,
    out: &mut ShardOutput,
    db: usize,
    key: &[u8],
    value: &[u8],
    expire: Option<u64>,
    client_flags: u32,
) -> Result<()> {
    match enc {
        Encoder::Strata(e) if value.len() > CHUNK => {
            e.begin_string(db as u16, key, value.len() as u64, expire, client_flags);
            for chunk in value.chunks(CHUNK) {
                if let Encoder::Strata(e) = enc {
                    e.value_chunk(chunk);
                }
                drain(enc, w, throttle, out).await?;
            }
        }
        Encoder::Strata(e) => e.write_string(db as u16, key, value, expire, client_flags),
        Encoder::Rdb(e) => {
            e.select_db(db as u32);
            e.write_string(key, value, expire);
        }
    }
    out.keys += 1;
    Ok(())
}

/// Writes what the encoder has ready.
async fn drain(
    enc: &mut Encoder,
    w: &mut FileWriter,
    throttle: &Throttle,
    out: &mut ShardOutput,
) -> Result<()> {
    while let Some(b) = enc.take() {
        w.write(&b).await?;
        out.bytes += b.len() as u64;
        throttle.account(b.len() as u64).await;
    }
    Ok(())
}

/// Encodes a large collection a piece at a time from `o`, the entry as the save's start saw
/// it: the file is written and the core serves clients between pieces. A collection whose
/// encoding fits in one piece is one record, as [`put_object`] writes it.
async fn put_large(
    enc: &mut Encoder,
    w: &mut FileWriter,
    throttle: &Throttle,
    out: &mut ShardOutput,
    (db, key, expire, client_flags): (usize, &[u8], Option<u64>, u32),
    o: &dyn TypedObject,
) -> Result<()> {
    let mut pos = RdbPartPos::default();
    let mut buf = Vec::with_capacity(PIECE_LEN + 4096);
    let (rdb_type, mut done) = o.encode_rdb_part(&mut pos, &mut buf, PIECE_LEN);
    if done && buf.len() < PIECE_LEN {
        put_object(enc, out, (db, key, expire, client_flags), rdb_type, &buf);
        return Ok(());
    }
    begin_pieces(enc, (db, key, expire, client_flags), rdb_type);
    loop {
        write_piece(enc, &buf);
        let held = enc.pending() + buf.capacity();
        out.peak_buffered = out.peak_buffered.max(held as u64);
        if done {
            break;
        }
        drain(enc, w, throttle, out).await?;
        // Clients between pieces; `o` shares nodes with the live collection, never changes.
        futures_lite::future::yield_now().await;
        buf.clear();
        done = o.encode_rdb_part(&mut pos, &mut buf, PIECE_LEN).1;
    }
    end_pieces(enc);
    out.keys += 1;
    Ok(())
}

/// Copies a large collection's blob from its raw extent into the file a part at a time (about
/// 1 MiB), its RDB body as pieces, so the save never holds the blob whole. The extent is read
/// twice: first to check its CRCs, so a damaged one is a counted miss (as a value read whole)
/// rather than a record cut short; then to copy. Frees wait for the save, so both reads meet
/// the same bytes; a second read that disagrees is a disk failing under the save, and fails it.
async fn put_offloaded_large(
    enc: &mut Encoder,
    w: &mut FileWriter,
    throttle: &Throttle,
    out: &mut ShardOutput,
    tier: &TierStore,
    (db, key, expire, client_flags): (usize, &[u8], Option<u64>, u32),
    ptr: DiskPtr,
) -> Result<()> {
    let blob_len = ptr.len as usize;
    let mut part = Vec::new();
    let checked: std::result::Result<u8, TierError> = async {
        let mut reader = tier
            .extent_reader(ptr, key)
            .ok_or_else(|| TierError::Io("not a raw extent".into()))?;
        let mut check = BlobCheck::new(blob_len);
        while reader.next(&mut part).await? {
            check.feed(&part);
            futures_lite::future::yield_now().await;
        }
        check.finish().map_err(TierError::Io)
    }
    .await;
    let rdb_type = match checked {
        Ok(t) => t,
        Err(e) => {
            warn!("snapshot: the collection of {key:?} on the tier file is unreadable: {e}");
            out.unreadable += 1;
            return Ok(());
        }
    };
    let failed = |e: String| {
        ServerError::new(
            ErrorKind::Io,
            format!("the collection of {key:?} changed on the tier file during the save: {e}"),
        )
    };
    let mut reader = tier
        .extent_reader(ptr, key)
        .ok_or_else(|| failed("not a raw extent".into()))?;
    begin_pieces(enc, (db, key, expire, client_flags), rdb_type);
    let mut check = BlobCheck::new(blob_len);
    while reader
        .next(&mut part)
        .await
        .map_err(|e| failed(e.to_string()))?
    {
        let body = check.feed(&part);
        write_piece(enc, body);
        let held = enc.pending() + part.capacity();
        out.peak_buffered = out.peak_buffered.max(held as u64);
        drain(enc, w, throttle, out).await?;
        futures_lite::future::yield_now().await;
    }
    if check.finish().map_err(failed)? != rdb_type {
        return Err(failed("another RDB type".into()));
    }
    end_pieces(enc);
    out.keys += 1;
    Ok(())
}

/// Opens a collection written a piece at a time: a head record (Strata) or the key's RDB
/// object start, its value's bytes to follow in [`write_piece`]s.
fn begin_pieces(
    enc: &mut Encoder,
    (db, key, expire, client_flags): (usize, &[u8], Option<u64>, u32),
    rdb_type: u8,
) {
    match enc {
        Encoder::Strata(e) => {
            e.begin_pieces(&key_head(db, key, expire, client_flags), rdb_type);
        }
        Encoder::Rdb(e) => {
            e.select_db(db as u32);
            e.begin_object(key, rdb_type, expire);
        }
    }
}

/// Closes what [`begin_pieces`] opened (an end record in a Strata file; an RDB object needs
/// none).
fn end_pieces(enc: &mut Encoder) {
    if let Encoder::Strata(e) = enc {
        e.end_pieces();
    }
}

/// A Strata record's key head.
fn key_head(db: usize, key: &[u8], expire: Option<u64>, client_flags: u32) -> KeyHead<'_> {
    KeyHead {
        db: db as u16,
        key,
        expire_at_ms: expire,
        client_flags,
    }
}

/// The next bytes of the collection [`begin_pieces`] opened.
fn write_piece(enc: &mut Encoder, bytes: &[u8]) {
    match enc {
        Encoder::Strata(e) => e.write_piece(bytes),
        Encoder::Rdb(e) => e.object_bytes(bytes),
    }
}

/// Consecutive groups of reads of values `lens` long: at most [`READS_IN_FLIGHT`] values and
/// [`READ_BYTES_IN_FLIGHT`] bytes each, or one value alone when it is longer.
fn read_groups(lens: impl Iterator<Item = u64>) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut end, mut bytes) = (0, 0, 0u64);
    for (i, len) in lens.enumerate() {
        if i > start && (i - start >= READS_IN_FLIGHT || bytes + len > READ_BYTES_IN_FLIGHT) {
            groups.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += len;
        end = i + 1;
    }
    if end > start {
        groups.push(start..end);
    }
    groups
}

/// Encodes one typed value (a collection) as a Strata object record or an RDB object.
fn put_object(
    enc: &mut Encoder,
    out: &mut ShardOutput,
    (db, key, expire, client_flags): (usize, &[u8], Option<u64>, u32),
    rdb_type: u8,
    body: &[u8],
) {
    match enc {
        Encoder::Strata(e) => {
            e.write_object(&key_head(db, key, expire, client_flags), rdb_type, body);
        }
        Encoder::Rdb(e) => {
            e.select_db(db as u32);
            e.write_object(key, rdb_type, body, expire);
        }
    }
    out.keys += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_groups_are_bounded_by_count_and_bytes() {
        assert!(read_groups(std::iter::empty()).is_empty());
        let small = read_groups(std::iter::repeat_n(100, 130));
        assert_eq!(small, [0..64, 64..128, 128..130]);
        let mib = 1 << 20;
        // A value over the byte bound is read alone; the others share up to the bound.
        let big = read_groups([mib, 20 * mib, 3 * mib, 3 * mib, 3 * mib].into_iter());
        assert_eq!(big, [0..1, 1..2, 2..4, 4..5]);
    }
}

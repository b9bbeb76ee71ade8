//! The offloader: one task per core that moves cold string values and cold collections to the
//! tier file while used memory is above `--tiered_offload_threshold` of maxmemory.
//!
//! A collection goes as one blob: its DUMP payload (RDB type, RDB encoding, version, CRC-64;
//! see [`collection_blob`]), written like a string value (small ones in shared pages, larger
//! ones, up to many MiB, as one multi-page extent). Its entry keeps the type, so TYPE, EXISTS,
//! TTL and SCAN need no read; any other command brings it back to RAM first
//! (`server::exec`). Collections whose RAM form passes [`MAX_COLLECTION_HEAP`] and those with
//! no free extent of their size in the tier file (counted) stay in RAM. A hash with field
//! expiries goes too: its blob carries them (Redis 7.4's RDB forms), and the shard's field
//! sweep keeps when the first may be due in RAM, loading the hash then. A large one (over
//! [`LARGE_COLLECTION_HEAP`]) is encoded and written in steps, clients served between them
//! ([`offload_large`]), and read back and built in pieces ([`collection_in_steps`]).
//!
//! Coldness is CLOCK: a lookup sets an entry's referenced bit; the sweep clears it and takes
//! only entries found without it (second chance). Two paces:
//! - *soft* (above the offload threshold): one pass over the table takes [`SOFT_PASS`], so a
//!   value leaves RAM only after a whole pass without an access. Values read again come back
//!   (see `exec::upload_allowed`) while memory is under the upload threshold, so the hot set
//!   lives in RAM up to that level, and only what is really cold goes to SSD.
//! - *hard* (above [`hard_limit`], just under where writers start to wait): rounds follow
//!   each other as fast as the disk takes them, and the second chance is the only protection.
//!
//! Work is bounded per round (buckets visited, bytes in one batch), one batch is in flight at
//! a time, and the task yields between rounds, so foreground commands keep their latency. A
//! value changed while its batch was being written is left in RAM and its fresh disk copy
//! freed.
//!
//! Never: offloads more than one batch at a time, or a value changed while it was being written
//! or encoded, or a collection while a transaction holds the shard (its steps read collections
//! in RAM); never installs a collection read back in pieces before its checksums passed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use ondisk::rdb::codec::{Crc64, DUMP_RDB_VERSION};
use ondisk::rdb::{append_dump_payload, DumpPayload};
use tiering::alloc::PAGE;
use tiering::TierStore;

use super::core::Core;
use crate::config::TierSettings;
use crate::shard::entry::ValueRef;
use crate::shard::object::{value_from_rdb, PackLimits, RdbPartPos, TypedObject};
use crate::shard::rdb_stream::PieceBuilder;
use crate::shard::{hash, Entry, ObjectType, Value};

/// Collections taking more RAM than this stay there. A large one is encoded and decoded in
/// steps, so the cap no longer bounds a stall; it bounds the tier space and the time one
/// offload or read-back takes.
pub const MAX_COLLECTION_HEAP: usize = 64 << 20;

/// Collections taking more RAM than this are large: one goes to SSD only when the tier file
/// has a free extent for it (see [`pick`]), and the batch's buffer grows to its size at once.
const LARGE_COLLECTION_HEAP: usize = 1 << 20;

/// Blobs at least this long stay in RAM: an offloaded collection's pointer keeps its encoding
/// in bits a longer value's length would take (see `Entry`).
const MAX_COLLECTION_BLOB: usize = tiering::store::MAX_TAGGED_VALUE;

/// A collection's blob: its DUMP payload, so the RDB codec every type already has (and its
/// CRC-64) serves here too. None for a string or a value not in RAM.
pub fn collection_blob(e: &Entry) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    append_collection_blob(e, &mut out).then_some(out)
}

/// [`collection_blob`] appended to `out` (encoded in place, no copy); false, `out` unchanged,
/// for a string or a value not in RAM.
fn append_collection_blob(e: &Entry, out: &mut Vec<u8>) -> bool {
    append_dump_payload(out, |out| e.encode_rdb(out))
}

/// The RDB type and body a blob holds, once its footer (version, CRC-64) checks.
pub fn blob_parts(blob: &[u8]) -> Result<(u8, &[u8]), String> {
    let parsed = DumpPayload::parse(blob).map_err(|e| format!("collection blob: {e:?}"))?;
    Ok((parsed.rdb_type, parsed.value.remaining()))
}

/// The collection a blob read back holds; an error when its checksum fails, it does not parse
/// or it holds another type than the entry says (never a wrong value).
pub fn collection_from_blob(
    t: ObjectType,
    blob: &[u8],
    limits: &PackLimits,
) -> Result<Value, String> {
    let (rdb_type, body) = blob_parts(blob)?;
    of_type(t, value_from_rdb(rdb_type, body, limits)?)
}

/// `v` when it holds type `t`; an error otherwise.
fn of_type(t: ObjectType, v: Value) -> Result<Value, String> {
    let got = match &v {
        Value::Packed(p) => Some(p.kind.ty),
        Value::Object(o) => Some(o.object_type()),
        _ => None,
    };
    if got != Some(t) {
        return Err(format!("collection blob holds {got:?}, the key a {t:?}"));
    }
    Ok(v)
}

/// Blobs longer than this, stored raw in an extent, are read back and decoded in steps
/// ([`collection_in_steps`]).
pub const STEPWISE_BLOB: usize = LARGE_COLLECTION_HEAP;

/// Blob bytes decoded between two yields of a read-back in steps.
const DECODE_PIECE: usize = 64 << 10;

/// Whether the blob at `ptr` is read back in steps ([`collection_in_steps`]).
pub fn read_in_steps(ptr: &tiering::DiskPtr) -> bool {
    !ptr.small() && !ptr.compressed() && ptr.len as usize > STEPWISE_BLOB
}

/// Reads back the large collection of type `t` whose blob is the raw extent at `ptr` and
/// builds it as its pieces come ([`PieceBuilder`]), the shard serving others between pieces:
/// at no time are the whole blob and the collection held together, nor two builds of one
/// extent on this core ([`ReadTurn`]). It is built aside, and returned only once the tier's
/// CRC32 and the blob's CRC-64 checked over all of it, so a damaged page is an error (a
/// counted miss for the caller), never a wrong collection.
pub async fn collection_in_steps(
    tier: &TierStore,
    key: &[u8],
    ptr: tiering::DiskPtr,
    t: ObjectType,
    limits: &PackLimits,
) -> Result<Value, tiering::TierError> {
    let _turn = ReadTurn::take(ptr).await;
    let Some(mut reader) = tier.extent_reader(ptr, key) else {
        return Err(tiering::TierError::Io("not a raw extent".into()));
    };
    let mut blob = BlobPieces::new(ptr.len as usize, limits);
    let mut part = Vec::new();
    while reader.next(&mut part).await? {
        for piece in part.chunks(DECODE_PIECE) {
            blob.feed(piece);
            futures_lite::future::yield_now().await;
        }
    }
    blob.finish(t).map_err(tiering::TierError::Io)
}

thread_local! {
    /// Extents of large collections being read back on this core, with the tasks waiting
    /// for their turn at each.
    static READING: RefCell<HashMap<tiering::DiskPtr, Vec<Waker>>> = RefCell::new(HashMap::new());
}

/// A task's turn at reading back the large collection at an extent: one at a time per extent
/// on a core, so commands that want the same collection at once build it one after the other
/// (the first's is in RAM or back on disk by the next's turn) rather than each its own copy
/// together.
struct ReadTurn(tiering::DiskPtr);

impl ReadTurn {
    async fn take(ptr: tiering::DiskPtr) -> ReadTurn {
        std::future::poll_fn(|cx| {
            READING.with(|r| {
                let mut r = r.borrow_mut();
                match r.get_mut(&ptr) {
                    Some(waiting) => {
                        waiting.push(cx.waker().clone());
                        Poll::Pending
                    }
                    None => {
                        r.insert(ptr, Vec::new());
                        Poll::Ready(())
                    }
                }
            })
        })
        .await;
        ReadTurn(ptr)
    }
}

impl Drop for ReadTurn {
    fn drop(&mut self) {
        let waiting = READING.with(|r| r.borrow_mut().remove(&self.0));
        for w in waiting.into_iter().flatten() {
            w.wake();
        }
    }
}

/// A collection's blob (a DUMP payload) taken in parts: where its RDB type, body and footer
/// lie, its CRC-64 built up as the bytes pass. What reads an extent a part at a time (the
/// read-back in steps, a snapshot) feeds it every part and may use what it got only once
/// [`BlobCheck::finish`] said the footer checks.
pub struct BlobCheck {
    len: usize,
    at: usize,
    crc: Crc64,
    rdb_type: Option<u8>,
    footer: Vec<u8>,
}

/// RDB version (2 bytes) and CRC-64 (8) end a DUMP payload.
const DUMP_FOOTER: usize = 10;

impl BlobCheck {
    /// For a blob `len` bytes long.
    pub fn new(len: usize) -> BlobCheck {
        BlobCheck {
            len,
            at: 0,
            crc: Crc64::new(),
            rdb_type: None,
            footer: Vec::with_capacity(DUMP_FOOTER),
        }
    }

    /// Takes the blob's next bytes; returns those of them that are RDB body (the type byte
    /// and the footer are kept here).
    pub fn feed<'a>(&mut self, bytes: &'a [u8]) -> &'a [u8] {
        let (start, end) = (self.at, self.at + bytes.len());
        self.at = end;
        let body_end = self.len.saturating_sub(DUMP_FOOTER);
        // Byte `i` of the blob is bytes[i - start].
        let span = |from: usize, to: usize| {
            let (a, b) = (from.max(start), to.min(end));
            (a < b).then(|| &bytes[a - start..b - start])
        };
        if let Some(b) = span(0, self.len.saturating_sub(8)) {
            self.crc.update(b);
        }
        if start == 0 && !bytes.is_empty() {
            self.rdb_type = Some(bytes[0]);
        }
        if let Some(b) = span(body_end, self.len) {
            self.footer.extend_from_slice(b);
        }
        span(1, body_end).unwrap_or(&[])
    }

    /// The blob's RDB type, once its first byte came.
    pub fn rdb_type(&self) -> Option<u8> {
        self.rdb_type
    }

    /// Its RDB type when every byte came and the footer (version, CRC-64) checks.
    pub fn finish(&self) -> Result<u8, String> {
        if self.len <= DUMP_FOOTER || self.at != self.len || self.footer.len() != DUMP_FOOTER {
            return Err(format!(
                "collection blob: {} of {} bytes",
                self.at, self.len
            ));
        }
        let version = u16::from_le_bytes([self.footer[0], self.footer[1]]);
        let mut stored = [0u8; 8];
        stored.copy_from_slice(&self.footer[2..]);
        if version > DUMP_RDB_VERSION || self.crc.value() != u64::from_le_bytes(stored) {
            return Err("collection blob: bad version or CRC-64".into());
        }
        self.rdb_type
            .ok_or_else(|| "collection blob: empty".to_string())
    }
}

/// A collection's blob taken in pieces: its RDB body goes to a [`PieceBuilder`].
struct BlobPieces {
    check: BlobCheck,
    limits: PackLimits,
    builder: Option<PieceBuilder>,
}

impl BlobPieces {
    fn new(len: usize, limits: &PackLimits) -> BlobPieces {
        BlobPieces {
            check: BlobCheck::new(len),
            limits: *limits,
            builder: None,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let body = self.check.feed(bytes);
        if self.builder.is_none() {
            if let Some(t) = self.check.rdb_type() {
                self.builder = Some(PieceBuilder::new(t, &self.limits));
            }
        }
        if let (false, Some(builder)) = (body.is_empty(), self.builder.as_mut()) {
            builder.feed(body);
        }
    }

    fn finish(self, t: ObjectType) -> Result<Value, String> {
        self.check.finish()?;
        let Some(builder) = self.builder else {
            return Err("collection blob: empty".into());
        };
        of_type(t, builder.finish()?)
    }
}

/// Most value bytes written per round.
const BATCH_BYTES: usize = 256 * 1024;
/// Most buckets one round may visit.
const ROUND_BUCKETS: usize = 512;
/// How long one CLOCK pass over the table takes at the soft pace: a value must go that long
/// unread to leave. With one second, the hot keys of `benches/tiering_bench.sh` (90% of ~150k
/// GETs/s over 52k keys: ~2.5 reads a second each) went unread for a pass one time in eleven,
/// left, and came back at their next reads; the hot set never settled in RAM. Three runs of
/// its hot phase: 141k, 188k, 99k GETs/s with one second, 227k, 180k, 196k with four.
const SOFT_PASS: Duration = Duration::from_secs(4);
/// Rounds at the soft pace come this often.
const SOFT_TICK: Duration = Duration::from_millis(10);

/// Used memory above which the offloader runs at full pace (whatever the offload threshold):
/// under the level where writers start waiting for room (`connection::wait_for_room`: 0.95 of
/// the RSS-derived goal, at most 0.9 of maxmemory) and, when the upload threshold is lower,
/// under that too.
pub fn hard_limit(global: &crate::server::Global, max: u64, ts: &TierSettings) -> u64 {
    let by_threshold = (max as f64 * ts.upload_threshold.min(0.9) * 0.9) as u64;
    by_threshold.min(super::eviction::ram_goal(global, max) / 100 * 90)
}

/// Used memory under which a value read twice comes back to RAM (`exec::upload_allowed`):
/// 5% under [`hard_limit`], so uploads stop before the offloader turns to its full pace.
pub fn upload_limit(global: &crate::server::Global, max: u64, ts: &TierSettings) -> u64 {
    hard_limit(global, max, ts) / 100 * 95
}

/// Runs forever on this core.
pub async fn run(core: Rc<Core>, tier: Rc<TierStore>, ts: TierSettings) {
    let mut cursor: (usize, (usize, usize)) = (0, (0, 0));
    let mut last_compact = std::time::Instant::now();
    let mut keep = KeepLevel::new();
    let mut draining = false;
    let mut rest = Rest::default();
    loop {
        let busy = over_threshold(&core, &ts, &mut draining) && !tier.is_full();
        let hard = over_hard(&core, &ts);
        rest.check(&core);
        let period = if rest.resting() {
            // Nothing to offload until something changes: wake only to look for a change.
            if hard {
                SOFT_TICK
            } else {
                core.global.settings.tick_period()
            }
        } else if hard {
            Duration::from_micros(200)
        } else if busy {
            SOFT_TICK
        } else {
            core.global.settings.tick_period()
        };
        // At full pace the timer must fire on time: an idle moment of the core would otherwise
        // nap until glommio's loop is due, and writers outrun the offloader.
        let _short_naps = hard.then(crate::runtime::io_wait);
        glommio::timer::sleep(period).await;
        // Compaction runs when idle, and also under pressure once the file is badly
        // fragmented (a full cache churns pages forever); not during a save, which holds
        // every freed page until it ends.
        let pressed = fragmented(&tier);
        let reclaim = needs_reclaim(&core, &tier);
        let ready =
            last_compact.elapsed() >= COMPACT_EVERY && !core.gate.is_locked() && !tier.frees_held();
        if reclaim && ready {
            last_compact = std::time::Instant::now();
            let (kept, dropped) =
                compact(&core, &tier, u64::MAX, RECLAIM_PAGES, Some(keep.freq)).await;
            keep.adjust(kept, dropped);
        } else if (!busy || pressed) && ready {
            last_compact = std::time::Instant::now();
            // Under pressure, pages down to three quarters live are worth rewriting: with
            // 1 KiB values a page holds three, and one dead value is a quarter wasted.
            let below = if pressed { PAGE * 3 / 4 } else { PAGE / 2 };
            let pages = if pressed {
                COMPACT_PAGES * 16
            } else {
                COMPACT_PAGES
            };
            compact(&core, &tier, below, pages, None).await;
        }
        // At the soft pace one round covers its share of a pass; at the hard pace rounds go on
        // while memory stays that high.
        let mut soft_rounds = 1;
        while over_threshold(&core, &ts, &mut draining) && !tier.is_full() {
            if core.gate.is_locked() || rest.resting() {
                break;
            }
            let hard = over_hard(&core, &ts);
            if !hard {
                if soft_rounds == 0 {
                    break;
                }
                soft_rounds -= 1;
            }
            let budget = if hard {
                ROUND_BUCKETS
            } else {
                soft_buckets(&core)
            };
            let (batch, large, swept) = pick(&core, &tier, &ts, &mut cursor, budget);
            rest.swept(&core, swept);
            if batch.is_empty() && large.is_none() {
                break;
            }
            if !batch.is_empty() {
                let items: Vec<(&[u8], &[u8])> =
                    batch.iter().map(|(_, k, v, _)| (&k[..], &v[..])).collect();
                let results = {
                    let _io = crate::runtime::io_wait();
                    tier.write_batch(&items).await
                };
                install(&core, &tier, &batch, results);
            }
            if let Some(large) = large {
                offload_large(&core, &tier, large).await;
            }
            glommio::yield_if_needed().await;
        }
    }
}

/// What one CLOCK round saw: buckets visited, and whether it met an entry the sweep may take
/// now or later (a candidate, or one spared by its referenced bit), or changed any bit.
#[derive(Clone, Copy, Default)]
struct Swept {
    buckets: usize,
    live: bool,
}

/// Rounds stop once a whole pass over the table met nothing it could ever take (every value
/// too small, on disk already, or too large) and cleared no referenced bit: another pass would
/// see the same. An idle server above the offload threshold would otherwise sweep its table
/// forever, waking a hundred times a second. Rounds resume when this core ran a command, the
/// shard changed, or a value came back to RAM (read by another core's command); and after
/// [`REST_MAX`] whatever happened, for what none of those shows (a setting changed elsewhere).
/// Used memory is no sign: it moves by a few hundred bytes while nothing happens.
#[derive(Default)]
struct Rest {
    /// Buckets visited since the last round that met something.
    barren: usize,
    /// While resting: the shard's (dirty count, commands run, values uploaded) when it began,
    /// and when.
    mark: Option<((u64, u64, u64), std::time::Instant)>,
}

/// The longest rest.
const REST_MAX: Duration = Duration::from_secs(30);

impl Rest {
    fn resting(&self) -> bool {
        self.mark.is_some()
    }

    fn now(core: &Core) -> (u64, u64, u64) {
        let shard = core.shard.borrow();
        (shard.dirty, shard.stats.commands, shard.stats.uploaded)
    }

    /// Ends the rest when anything changed since it began.
    fn check(&mut self, core: &Core) {
        if self
            .mark
            .is_some_and(|(m, at)| m != Rest::now(core) || at.elapsed() >= REST_MAX)
        {
            *self = Rest::default();
        }
    }

    fn swept(&mut self, core: &Core, round: Swept) {
        if round.live {
            self.barren = 0;
            return;
        }
        self.barren += round.buckets;
        let buckets: usize = core
            .shard
            .borrow()
            .dbs
            .iter()
            .map(|d| d.table.buckets())
            .sum();
        // A round that visited nothing found every table empty.
        if round.buckets == 0 || self.barren >= buckets {
            self.mark = Some((Rest::now(core), std::time::Instant::now()));
        }
    }
}

/// True when the file holds half again as many bytes as its live values, and is more than a
/// quarter full: compaction then pays off even while offloading is busy.
fn fragmented(tier: &TierStore) -> bool {
    let (live, allocated, cap) = tier.space();
    allocated > live + live / 2 && allocated > cap / 4
}

/// Compaction runs at most this often (finding candidates walks the page table).
const COMPACT_EVERY: Duration = Duration::from_millis(10);

/// Pages compacted per tick at most.
const COMPACT_PAGES: usize = 8;

/// Rewrites the live entries of small pages that fell under `below` live bytes into fresh
/// pages, so the old pages empty and their space returns. An entry is live when its key still
/// points at exactly that spot (same page and offset).
///
/// With `reclaim` (a cache whose tier file is nearly full) the pages are reclaimed whole
/// instead, in file order: entries whose access counter reached the given level are rewritten,
/// the others are evicted (see [`KeepLevel`]). Evicting an entry at a time would leave holes in
/// pages that only compaction could close; reclaiming pages keeps the file dense. Returns the
/// entries (rewritten, evicted).
async fn compact(
    core: &Rc<Core>,
    tier: &Rc<TierStore>,
    below: u64,
    limit: usize,
    reclaim: Option<u32>,
) -> (usize, usize) {
    // Pages are read and written through glommio, which submits from its loop.
    let _io = crate::runtime::io_wait();
    let pages = tier.sparse_pages(limit, below);
    // Live entries of one sparse page alone would only make another sparse page.
    if pages.len() < 2 && reclaim.is_none() {
        return (0, 0);
    }
    let mut dropped = 0;
    // (db, key, value as stored, old pointer) of the live entries of all those pages, packed
    // together. Values move as they lie on disk: compressed ones are not recompressed.
    let mut live: Vec<(usize, Vec<u8>, tiering::page::StoredValue, tiering::DiskPtr)> = Vec::new();
    // All pages read at once: many reads in flight, as for client reads.
    let read = futures::future::join_all(pages.iter().map(|&p| tier.read_page(p))).await;
    for (page, entries) in pages.into_iter().zip(read) {
        let Ok(entries) = entries else {
            continue;
        };
        let mut shard = core.shard.borrow_mut();
        for (offset, key, stored) in entries {
            let h = hash(&key);
            // The db whose key still points here, the pointer, and whether it earned a stay.
            let found = (0..shard.dbs.len()).find_map(|db| {
                let e = shard.dbs[db].table.get(&key, h)?;
                let p = e.external(key.len())?;
                let keep = reclaim.is_none_or(|level| e.freq() >= level);
                (p.page == page && p.offset == offset).then_some((db, p, keep))
            });
            let Some((db, p, keep)) = found else {
                continue;
            };
            if !keep {
                if let Some(e) = shard.remove(db, &key) {
                    shard.remember_evicted(&key, &e);
                    shard.stats.evicted_ssd += 1;
                    dropped += 1;
                }
                continue;
            }
            live.push((db, key, stored, p));
        }
    }
    if live.is_empty() {
        return (0, dropped);
    }
    let items: Vec<tiering::StoredItem<'_>> = live
        .iter()
        .map(|(_, k, (bytes, codec), p)| tiering::StoredItem {
            key: k,
            bytes: std::borrow::Cow::Borrowed(bytes),
            codec: *codec,
            len: p.len,
            scale: 0,
        })
        .collect();
    let results = tier.write_batch_compacting(&items).await;
    let mut shard = core.shard.borrow_mut();
    for ((db, key, _, old), r) in live.iter().zip(results) {
        let Ok(new) = r else {
            continue;
        };
        if shard.peek_external(*db, key) == Some(*old) && shard.set_external(*db, key, new) {
            tier.free(*old);
            shard.stats.compacted += 1;
        } else {
            tier.free(new);
        }
    }
    (live.len(), dropped)
}

/// The access counter (`Entry::freq`, one step per hit for the first hits) an entry needs to
/// be kept when its page is reclaimed: an LFU over the SSD tier, approximated a page at a time.
/// One level for the whole file, moved by what reclaim finds: while most entries of the
/// reclaimed pages reach it, too little space comes back for the rewriting, so it rises; when
/// few do, it falls, down to "read once since it entered the cache". The entries under it are
/// the least read the file holds, as an LFU would evict (an exact LFU that forgets evicted
/// keys' counts reaches 0.936 on the benchmark below, one that remembers them 0.938).
///
/// Measured with `benches/hit_ratio.sh` (Zipf 0.99, SSD 50% of the data, ~505k keys held):
/// the previous rule (kept when read from SSD since written there, or a log counter at 7)
/// 0.928, the level with a 0.2-0.5 kept band 0.929 (it climbed until only keys read five to
/// seven times stayed, so moderately popular keys churned), 0.5-0.8 0.933, 0.7-0.9 (below)
/// 0.934; reclaim from 97% allocated instead of 94% then holds ~519k keys: 0.937. The price is
/// write amplification: about 2.3 entries rewritten per entry evicted (the 0.5-0.8 band at 97%:
/// 1.7 per eviction for 0.936).
struct KeepLevel {
    freq: u32,
}

/// Share of the entries of reclaimed pages kept, above which the level rises...
const KEEP_HIGH: f64 = 0.9;
/// ...and under which it falls.
const KEEP_LOW: f64 = 0.7;

impl KeepLevel {
    fn new() -> Self {
        KeepLevel {
            freq: crate::shard::entry::LFU_INIT + 1,
        }
    }

    fn adjust(&mut self, kept: usize, dropped: usize) {
        let seen = kept + dropped;
        if seen == 0 {
            return;
        }
        let share = kept as f64 / seen as f64;
        if share > KEEP_HIGH && self.freq < 255 {
            self.freq += 1;
        } else if share < KEEP_LOW && self.freq > crate::shard::entry::LFU_INIT + 1 {
            self.freq -= 1;
        }
    }
}

/// A cache reclaims tier pages (see [`compact`]) once this share of the file is allocated.
const RECLAIM_AT: f64 = 0.97;

/// Pages reclaimed per round at most.
const RECLAIM_PAGES: usize = 128;

fn needs_reclaim(core: &Core, tier: &TierStore) -> bool {
    let (_, allocated, cap) = tier.space();
    core.global.settings.cache_mode && allocated as f64 > RECLAIM_AT * cap as f64
}

/// Points each written value's key at its disk copy, unless the value changed meanwhile (then
/// the fresh copy is freed). A string is compared with what was written; a collection (changed
/// in place, it keeps its address) is unchanged when the watch [`pick`] set on its key was not
/// touched: every change of a key bumps it, as for WATCH. A collection stays in RAM while a
/// transaction holds the shard, or a command pinned it.
fn install(
    core: &Core,
    tier: &TierStore,
    batch: &[Candidate],
    results: Vec<Result<tiering::DiskPtr, tiering::TierError>>,
) {
    let locked = core.gate.is_locked();
    let mut shard = core.shard.borrow_mut();
    for ((db, key, value, coll), r) in batch.iter().zip(results) {
        let unchanged = coll.is_some_and(|(_, v)| shard.watches.version(*db, key) == Some(v));
        if coll.is_some() {
            shard.watches.remove(*db, key);
        }
        let ptr = match r {
            Ok(ptr) => ptr,
            Err(tiering::TierError::NoSpace) if coll.is_some() => {
                shard.stats.collections_no_space += 1;
                continue;
            }
            Err(_) => continue,
        };
        let e = shard.dbs[*db].table.get(key, hash(key));
        let same = match coll {
            None => e.is_some_and(|e| e.str() == Some(&value[..])),
            Some((t, _)) => {
                !locked
                    && unchanged
                    && !shard.pins.contains(*db, key)
                    && e.is_some_and(|e| {
                        let same = e.object_type() == Some(*t) && !e.is_external();
                        // The watch stands in for comparing the blob again: checked in tests
                        // (a large one's blob, written in steps, is not kept to compare).
                        debug_assert!(
                            !same
                                || value.is_empty()
                                || collection_blob(e).is_some_and(|b| b[..] == value[..]),
                            "a collection changed under an untouched watch"
                        );
                        same
                    })
            }
        };
        let installed = same
            && match coll {
                None => shard.set_external(*db, key, ptr),
                Some((t, _)) => shard.set_offloaded(*db, key, *t, ptr),
            };
        if installed {
            shard.stats.offloaded += 1;
            shard.stats.external_values += 1;
            if coll.is_some() {
                shard.stats.offloaded_collections += 1;
            }
        } else {
            tier.free(ptr);
        }
    }
}

/// A value picked to leave RAM: (db, key, value or blob, and for a collection its type and
/// the version of the watch set on its key).
type Candidate = (usize, Bytes, Bytes, Option<(ObjectType, u64)>);

/// Above the offload threshold, or above the upload limit when the threshold is set higher:
/// between the two neither would run, and values read often but left on disk would never come
/// back (`--tiered_offload_threshold 0.8` on the 90/10 hot load: RAM settled just under the
/// hard limit, uploads stopped, and GETs ran at a fifth of the default's rate).
///
/// Once past the upload limit (`draining`), the offloader goes on until used memory is
/// [`upload_room`] under it. Stopping right at the limit left as room only what its last batch
/// overshot, less what the reads in flight hold for a moment: values read in pipelines of 300
/// GETs came back only part of a pass at a time, and in one CI run 86 of 191 in 40 s.
fn over_threshold(core: &Core, ts: &TierSettings, draining: &mut bool) -> bool {
    let max = core.global.settings.maxmemory();
    if max == 0 {
        return false;
    }
    let used = crate::memory::used_memory();
    let limit = upload_limit(&core.global, max, ts);
    if used > limit {
        *draining = true;
    } else if used + upload_room(max) <= limit {
        *draining = false;
    }
    used as f64 > ts.offload_threshold * max as f64 || *draining
}

/// Room under the upload limit that the offloader makes once it passed it: 1% of maxmemory.
fn upload_room(max: u64) -> u64 {
    max / 100
}

fn over_hard(core: &Core, ts: &TierSettings) -> bool {
    let max = core.global.settings.maxmemory();
    max > 0 && crate::memory::used_memory() > hard_limit(&core.global, max, ts)
}

/// Buckets one soft round visits: the whole table (all dbs) once per [`SOFT_PASS`].
fn soft_buckets(core: &Core) -> usize {
    let shard = core.shard.borrow();
    let buckets: usize = shard.dbs.iter().map(|d| d.table.buckets()).sum();
    let share = SOFT_TICK.as_secs_f64() / SOFT_PASS.as_secs_f64();
    ((buckets as f64 * share).ceil() as usize).max(16)
}

/// One round of the CLOCK sweep: candidates (db, key, value) up to [`BATCH_BYTES`]. A
/// collection is encoded once, straight into the batch's buffer; a watch on its key tells
/// [`install`] whether it changed while its blob was being written.
fn pick(
    core: &Core,
    tier: &TierStore,
    ts: &TierSettings,
    cursor: &mut (usize, (usize, usize)),
    max_buckets: usize,
) -> (Vec<Candidate>, Option<Large>, Swept) {
    let mut guard = core.shard.borrow_mut();
    let shard = &mut *guard;
    let dbs = shard.dbs.len();
    // Keys and values are copied into one buffer (released whole once written), not one heap
    // block each: thousands of short-lived blocks between the long-lived ones would leave the
    // heap fragmented, and RSS far above what is allocated.
    let mut arena: Vec<u8> = Vec::with_capacity(BATCH_BYTES + (64 << 10));
    type Span = (
        usize,
        std::ops::Range<usize>,
        std::ops::Range<usize>,
        Option<ObjectType>,
    );
    let mut spans: Vec<Span> = Vec::new();
    let mut bytes = 0usize;
    let mut visited = 0;
    let mut empty_dbs = 0;
    let mut encodes = 0;
    let mut no_space = 0;
    let mut live = false;
    let mut stepwise: Option<Large> = None;
    let now = crate::shard::now_ms();
    // A round ends where it began at the latest: a small table is not swept twice, and no key
    // picked twice.
    let (first_db, mut wrapped) = (cursor.0 % dbs, false);
    while visited < max_buckets && bytes < BATCH_BYTES && empty_dbs <= dbs {
        let db = cursor.0 % dbs;
        if wrapped && db == first_db {
            break;
        }
        let pins = &shard.pins;
        let table = &mut shard.dbs[db].table;
        if table.is_empty() {
            cursor.0 = (db + 1) % dbs;
            empty_dbs += 1;
            continue;
        }
        let before = cursor.1;
        visited += table.sweep(
            &mut cursor.1,
            16,
            |k, e: &mut Entry, _| {
                if e.is_external() {
                    // An offloaded value read again before the sweep comes back is read twice
                    // within one pass: it returns to RAM (see `exec::restore_pointers`).
                    live |= e.has(Entry::REFERENCED);
                    e.clear_flags(Entry::REFERENCED);
                    return false;
                }
                if let Some(s) = e.str() {
                    let fits = s.len() >= ts.min_value_size
                        && s.len() < tiering::store::MAX_VALUE
                        && k.len() <= u16::MAX as usize;
                    live |= fits;
                    if fits && bytes < BATCH_BYTES {
                        if e.has(Entry::REFERENCED) {
                            e.clear_flags(Entry::REFERENCED);
                        } else {
                            bytes += s.len();
                            let at = arena.len();
                            arena.extend_from_slice(k.as_bytes());
                            arena.extend_from_slice(s);
                            spans.push((db, at..at + k.len(), at + k.len()..arena.len(), None));
                        }
                    }
                } else if let Some(t) = e.object_type() {
                    let heap = e.heap_bytes();
                    let fits = heap >= ts.min_value_size
                        && heap <= MAX_COLLECTION_HEAP
                        && k.len() <= u16::MAX as usize;
                    live |= fits;
                    if fits
                        && bytes < BATCH_BYTES
                        && !pins.contains(db, k.as_bytes())
                        // Fields already due go first (the field sweep would load it at once).
                        && crate::shard::hashform::field_expiry_bound(e).is_none_or(|t| t > now)
                    {
                        if e.has(Entry::REFERENCED) {
                            e.clear_flags(Entry::REFERENCED);
                            return false;
                        }
                        // A large one with no extent near its size free is not even encoded:
                        // at the hard pace the sweep passes it many times a second. Its blob
                        // is about its RAM form's size, or less (hashtables, skiplists).
                        let large = heap > LARGE_COLLECTION_HEAP;
                        if large {
                            if let ValueRef::Object(o) = e.value() {
                                // Encoded in steps by `offload_large`, from a copy that shares
                                // its nodes; one a round (the next round takes the next).
                                if stepwise.is_some() {
                                    return false;
                                }
                                if !tier.fits_extent(k.len(), blob_reserve(heap)) {
                                    no_space += 1;
                                    return false;
                                }
                                stepwise = Some(Large {
                                    db,
                                    key: Bytes::copy_from_slice(k.as_bytes()),
                                    t,
                                    object: o.capture(),
                                    heap,
                                    version: 0,
                                });
                                return false;
                            }
                        }
                        if large && !tier.fits_extent(k.len(), heap / 2) {
                            no_space += 1;
                            return false;
                        }
                        let at = arena.len();
                        arena.extend_from_slice(k.as_bytes());
                        if large {
                            // Grown once to its size, not by doubling from the batch's.
                            arena.reserve(heap + 1024);
                        }
                        if !append_collection_blob(e, &mut arena) {
                            arena.truncate(at);
                            return false;
                        }
                        encodes += 1;
                        let len = arena.len() - at - k.len();
                        if large && !tier.fits_extent(k.len(), len) {
                            no_space += 1;
                            arena.truncate(at);
                            return false;
                        }
                        if len >= ts.min_value_size && len < MAX_COLLECTION_BLOB {
                            bytes += len;
                            spans.push((db, at..at + k.len(), at + k.len()..arena.len(), Some(t)));
                        } else {
                            arena.truncate(at);
                        }
                    }
                }
                false
            },
            |_, _, _| {},
        );
        if cursor.1 == (0, 0) || cursor.1 < before {
            // This db's sweep wrapped around: go on with the next one.
            cursor.0 = (db + 1) % dbs;
            wrapped = true;
        }
    }
    shard.stats.offload_rounds += 1;
    shard.stats.collection_encodes += encodes;
    shard.stats.collections_no_space += no_space;
    let arena = Bytes::from(arena);
    let batch = spans
        .into_iter()
        .map(|(db, k, v, t)| {
            let key = arena.slice(k);
            // Watched from here, with nothing run since the encoding.
            let coll = t.map(|t| (t, shard.watches.add(db, &key)));
            (db, key, arena.slice(v), coll)
        })
        .collect();
    // Watched from the copy on: a change of the key during the steps is seen.
    if let Some(l) = &mut stepwise {
        l.version = shard.watches.add(l.db, &l.key);
    }
    let swept = Swept {
        buckets: visited,
        live,
    };
    (batch, stepwise, swept)
}

/// A large collection picked to leave RAM, encoded and written in steps by
/// [`offload_large`]: a copy of it sharing its nodes (a write to the key copies the node it
/// changes, never the elements), and the version of the watch set on its key at the copy.
pub struct Large {
    db: usize,
    key: Bytes,
    t: ObjectType,
    object: Box<dyn TypedObject>,
    heap: usize,
    version: u64,
}

/// RDB bytes a step of [`offload_large`] encodes (its writer gathers a MiB before it
/// writes): a quarter of a MiB keeps the core's pause per step short in a debug build too.
const ENCODE_STEP: usize = 256 << 10;

/// Pages taken for a large collection's blob before its length is known: its RAM form is
/// a bound for most (a hashtable or skiplist encodes smaller), doubled for lists whose nodes
/// are kept compressed in RAM. One that comes out longer stays in RAM (counted as no space).
fn blob_reserve(heap: usize) -> usize {
    (heap.saturating_mul(2) + (1 << 20)).min(MAX_COLLECTION_BLOB - 1)
}

/// Offloads a large collection without stalling the shard: its DUMP payload is encoded
/// [`ENCODE_STEP`] bytes at a time (its CRC-64 built up step by step), each step written to
/// its extent as it is ready, the shard serving clients between steps. Memory held is a step
/// and the writer's buffers, not the blob. A change of the key (its watch moved) stops it at
/// the next step, and [`install`] checks again at the end, so a stale blob is never pointed
/// at; the extent's pages go back.
async fn offload_large(core: &Core, tier: &TierStore, job: Large) {
    let Large {
        db,
        key,
        t,
        object,
        heap,
        version,
    } = job;
    let _io = crate::runtime::io_wait();
    core.shard.borrow_mut().stats.collection_steps += 1;
    let result = async {
        let mut w = tier.extent_writer(&key, blob_reserve(heap))?;
        let (mut pos, mut crc) = (RdbPartPos::default(), Crc64::new());
        let mut buf = Vec::with_capacity(ENCODE_STEP + (64 << 10));
        loop {
            buf.clear();
            if !pos.started {
                buf.push(0);
            }
            let first = !pos.started;
            let (rdb_type, done) = object.encode_rdb_part(&mut pos, &mut buf, ENCODE_STEP);
            if first {
                buf[0] = rdb_type;
            }
            if done {
                buf.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
                crc.update(&buf);
                buf.extend_from_slice(&crc.value().to_le_bytes());
            } else {
                crc.update(&buf);
            }
            w.write(&buf).await?;
            if done {
                break;
            }
            let changed = core.shard.borrow().watches.version(db, &key) != Some(version);
            if changed {
                core.shard.borrow_mut().stats.collection_steps_dropped += 1;
                return Err(tiering::TierError::Io("changed while encoded".into()));
            }
            // Clients between steps; `object` shares nodes with the live one, never changes.
            futures_lite::future::yield_now().await;
        }
        drop(buf);
        w.finish().await
    }
    .await;
    {
        let mut shard = core.shard.borrow_mut();
        shard.stats.collection_encodes += 1;
        shard.stats.collection_steps = shard.stats.collection_steps.saturating_sub(1);
    }
    install(
        core,
        tier,
        &[(db, key, Bytes::new(), Some((t, version)))],
        vec![result],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::entry::LFU_INIT;

    #[test]
    fn the_keep_level_follows_the_share_reclaim_keeps() {
        let mut k = KeepLevel::new();
        assert_eq!(k.freq, LFU_INIT + 1);
        // Few kept: already at the floor.
        k.adjust(10, 90);
        assert_eq!(k.freq, LFU_INIT + 1);
        // Nearly all kept: too little space comes back, the level rises.
        k.adjust(95, 5);
        k.adjust(99, 1);
        assert_eq!(k.freq, LFU_INIT + 3);
        // Inside the band: stays.
        k.adjust(80, 20);
        k.adjust(0, 0);
        assert_eq!(k.freq, LFU_INIT + 3);
        // Few kept: falls back.
        k.adjust(50, 50);
        assert_eq!(k.freq, LFU_INIT + 2);
    }
}

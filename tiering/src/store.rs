//! [`TierStore`]: one shard's file on local SSD, written and read with O_DIRECT through glommio's
//! io_uring DMA files. It never blocks the shard: every I/O is awaited, and the bookkeeping in
//! between is plain single-threaded code.
//!
//! - Writes come in batches: small values are packed into bins of up to 8 fresh 4 KiB pages,
//!   running on across page boundaries; large ones get extents; every page or extent carries a
//!   CRC32 (see [`crate::page`]). A page goes back once no live entry starts in or runs into it.
//! - With a codec set ([`TierStore::set_codec`]), values that shrink enough are stored
//!   compressed (see [`crate::codec`]); the pointer keeps both lengths.
//! - Reads in flight are bounded in bytes ([`TierStore::set_read_budget`]).
//! - Reads of the same page share one I/O (coalescing) and are checked for CRC and owner before
//!   any byte is returned: a mismatch is an error the caller turns into a miss, never data.
//! - Freed space goes back to the allocator, to be written again at once, but only once no
//!   read of it is in flight. The file keeps its blocks (no hole punching): it is the tier's
//!   own, bounded by `--tiered_max_file_size`, and removed at exit.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use futures::future::{FutureExt, LocalBoxFuture};
use glommio::io::DmaFile;

use crate::alloc::{ExtentAllocator, PAGE};
use crate::codec::{Codec, Coder};
use crate::page::{self, BinBuilder, Corrupt, StoredValue};
use crate::uring::DirectReader;

/// Where a value lives on disk. In RAM it is kept packed in 64 bits ([`DiskPtr::pack`]); the
/// key's length comes from the key itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DiskPtr {
    /// First page (4 KiB units).
    pub page: u32,
    /// Value length in bytes, as the client sees it (STRLEN needs no I/O).
    pub len: u32,
    /// Length of the key stored with the value (sizes extents and page accounting).
    pub key_len: u16,
    /// Entry offset inside a shared page; 0 for an extent (page entries start past the header).
    pub offset: u16,
    /// 0 for a value stored as is. A compressed small value: its length on disk. A compressed
    /// extent: its pages in 32nds of what the raw value would take (1..=32, rounded up).
    pub packed: u16,
}

/// Values at least this long are never offloaded: a packed pointer has 29 bits for the length
/// of an extent's value.
pub const MAX_VALUE: usize = (1 << 29) - 1;

/// Compressed values are written only below this page (28 bits of page number in their packed
/// pointers: 1 TiB per shard file); a larger file stores its values as they are.
pub const COMPRESSED_PAGES: u64 = 1 << 28;

/// A compressed small value's length, and its stored length, fit in 11 bits each.
const SMALL_LEN: u32 = 1 << 11;

const TAG_SHIFT: u32 = 62;
const TAG_EXTENT: u64 = 0;
const TAG_SMALL: u64 = 1;
const TAG_SMALL_PACKED: u64 = 2;
const TAG_EXTENT_PACKED: u64 = 3;

impl DiskPtr {
    pub fn small(&self) -> bool {
        self.offset != 0
    }

    /// True when the value is stored compressed.
    pub fn compressed(&self) -> bool {
        self.packed != 0
    }

    /// Bytes the value takes in its small entry (its compressed length when compressed).
    pub fn stored_len(&self) -> usize {
        if self.small() && self.packed != 0 {
            self.packed as usize
        } else {
            self.len as usize
        }
    }

    /// The pointer in 64 bits, a 2-bit tag on top:
    /// - 0 extent: page 32 | length 29;
    /// - 1 small: page 32 | offset 12 | length 12;
    /// - 2 compressed small: page 28 | offset 12 | length 11 | stored length 11;
    /// - 3 compressed extent: page 28 | 32nds - 1 5 | length 29.
    ///
    /// The writer keeps compressed values within those bounds (see [`COMPRESSED_PAGES`]).
    pub fn pack(&self) -> u64 {
        let page = self.page as u64;
        let len = self.len as u64;
        match (self.small(), self.compressed()) {
            (false, false) => (TAG_EXTENT << TAG_SHIFT) | (page << 29) | (len & MAX_VALUE as u64),
            (true, false) => {
                (TAG_SMALL << TAG_SHIFT)
                    | (page << 29)
                    | ((self.offset as u64 & 0xfff) << 12)
                    | (len & 0xfff)
            }
            (true, true) => {
                (TAG_SMALL_PACKED << TAG_SHIFT)
                    | ((page & 0xfff_ffff) << 34)
                    | ((self.offset as u64 & 0xfff) << 22)
                    | ((len & 0x7ff) << 11)
                    | (self.packed as u64 & 0x7ff)
            }
            (false, true) => {
                (TAG_EXTENT_PACKED << TAG_SHIFT)
                    | ((page & 0xfff_ffff) << 34)
                    | (((self.packed as u64 - 1) & 0x1f) << 29)
                    | (len & MAX_VALUE as u64)
            }
        }
    }

    /// The inverse of [`DiskPtr::pack`], given the key's length.
    pub fn unpack(bits: u64, key_len: usize) -> DiskPtr {
        let key_len = key_len as u16;
        match bits >> TAG_SHIFT {
            TAG_SMALL => DiskPtr {
                page: (bits >> 29) as u32,
                len: (bits & 0xfff) as u32,
                key_len,
                offset: ((bits >> 12) & 0xfff) as u16,
                packed: 0,
            },
            TAG_SMALL_PACKED => DiskPtr {
                page: ((bits >> 34) & 0xfff_ffff) as u32,
                len: ((bits >> 11) & 0x7ff) as u32,
                key_len,
                offset: ((bits >> 22) & 0xfff) as u16,
                packed: (bits & 0x7ff) as u16,
            },
            TAG_EXTENT_PACKED => DiskPtr {
                page: ((bits >> 34) & 0xfff_ffff) as u32,
                len: (bits & MAX_VALUE as u64) as u32,
                key_len,
                offset: 0,
                packed: ((bits >> 29) & 0x1f) as u16 + 1,
            },
            _ => DiskPtr {
                page: ((bits >> 29) & 0xffff_ffff) as u32,
                len: (bits & MAX_VALUE as u64) as u32,
                key_len,
                offset: 0,
                packed: 0,
            },
        }
    }

    /// Pages a read of the value covers: one or two for a small entry (two when it runs on
    /// into the next page), the whole extent for a large one.
    fn pages(&self) -> u64 {
        if !self.small() {
            let raw = page::extent_pages(self.key_len as usize, self.len as usize);
            if self.packed == 0 {
                raw
            } else {
                scaled_pages(raw, self.packed)
            }
        } else if page::spans(self.offset, self.key_len as usize, self.stored_len()) {
            2
        } else {
            1
        }
    }
}

/// Pages of a compressed extent: `32nds` of the `raw` extent's pages, rounded up.
fn scaled_pages(raw: u64, thirty_seconds: u16) -> u64 {
    (raw * thirty_seconds as u64).div_ceil(32)
}

/// For a compressed extent needing `need` pages where the raw value takes `raw`: the smallest
/// scale (in 32nds) that covers it, when that saves a page.
fn extent_scale(raw: u64, need: u64) -> Option<u16> {
    let s = (1..=32u16).find(|&s| scaled_pages(raw, s) >= need)?;
    (scaled_pages(raw, s) < raw).then_some(s)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TierError {
    Io(String),
    Corrupt(Corrupt),
    /// The file reached its size limit or the disk is full.
    NoSpace,
}

impl std::fmt::Display for TierError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TierError::Io(e) => write!(f, "I/O error: {e}"),
            TierError::Corrupt(c) => write!(f, "corrupt data on disk: {c:?}"),
            TierError::NoSpace => write!(f, "no space left in the tier file"),
        }
    }
}

fn io_err(e: impl std::fmt::Display) -> TierError {
    let text = e.to_string();
    if text.contains("No space left") || text.contains("ENOSPC") {
        TierError::NoSpace
    } else {
        TierError::Io(text)
    }
}

/// Counters for INFO's TIERED section.
#[derive(Clone, Debug, Default)]
pub struct TierStats {
    pub entries: u64,
    /// Length of the values on disk as clients see them...
    pub value_bytes: u64,
    /// ...and what they take in the file (compressed; extents in whole pages).
    pub stored_bytes: u64,
    /// Entries stored compressed.
    pub compressed: u64,
    /// The codec new values are written with.
    pub codec: Codec,
    /// Value reads that waited for the read budget ([`TierStore::set_read_budget`])...
    pub budget_waits: u64,
    /// ...and the most bytes of reads that were in flight together.
    pub peak_read_bytes: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub pending_reads: u64,
    pub pending_writes: u64,
    pub coalesced_reads: u64,
    pub small_pages: u64,
    pub file_bytes: u64,
    pub used_bytes: u64,
    pub hole_bytes: u64,
    pub capacity_bytes: u64,
    pub full_events: u64,
    pub read_p50_us: u64,
    pub read_p99_us: u64,
}

impl TierStats {
    /// Counts the value just written at `ptr`; [`TierStats::count_out`] takes the same back
    /// when it is freed.
    fn count_in(&mut self, ptr: &DiskPtr) {
        self.entries += 1;
        self.value_bytes += ptr.len as u64;
        self.stored_bytes += held_bytes(ptr);
        self.compressed += u64::from(ptr.compressed());
    }

    fn count_out(&mut self, ptr: &DiskPtr) {
        self.entries = self.entries.saturating_sub(1);
        self.value_bytes = self.value_bytes.saturating_sub(ptr.len as u64);
        self.stored_bytes = self.stored_bytes.saturating_sub(held_bytes(ptr));
        self.compressed = self.compressed.saturating_sub(u64::from(ptr.compressed()));
    }
}

/// Live entries starting in one small page and their bytes, and whether a live entry of the
/// previous page runs on into it (the page stays until both are gone). Two bytes per page of
/// the file, indexed by page number: bit 15 the tail, bits 8..15 the entries (a page holds at
/// most [`page::MAX_PAGE_ENTRIES`]), bits 0..8 their bytes in 32-byte units, each entry rounded
/// up (at most 255: only compaction's choice of sparse pages reads them).
#[derive(Clone, Copy, Default)]
struct PageLive(u16);

const TAIL: u16 = 0x8000;
const COUNT_SHIFT: u32 = 8;
const UNITS: u16 = 0xff;

/// An entry's weight in [`PageLive`]'s byte units.
fn units(size: usize) -> u16 {
    size.div_ceil(32).min(UNITS as usize) as u16
}

impl PageLive {
    fn count(&self) -> u16 {
        (self.0 & !TAIL) >> COUNT_SHIFT
    }

    /// Live bytes starting here (approximate: whole 32-byte units).
    fn bytes(&self) -> u64 {
        u64::from(self.0 & UNITS) * 32
    }

    fn in_use(&self) -> bool {
        self.0 & !UNITS != 0
    }

    fn add(&mut self, size: usize) {
        let count = (self.count() + 1).min(page::MAX_PAGE_ENTRIES as u16);
        let units = (self.0 & UNITS).saturating_add(units(size)).min(UNITS);
        self.0 = (self.0 & TAIL) | (count << COUNT_SHIFT) | units;
    }

    fn remove(&mut self, size: usize) {
        let count = self.count().saturating_sub(1);
        let units = if count == 0 {
            0
        } else {
            (self.0 & UNITS).saturating_sub(units(size))
        };
        self.0 = (self.0 & TAIL) | (count << COUNT_SHIFT) | units;
    }

    fn set_tail(&mut self, on: bool) {
        if on {
            self.0 |= TAIL;
        } else {
            self.0 &= !TAIL;
        }
    }
}

/// Bytes of value reads in flight per shard until [`TierStore::set_read_budget`].
const DEFAULT_READ_BUDGET: u64 = 16 << 20;

/// "Tier file full" is logged at most this often.
const FULL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Pages a bin of small values spans at most: entries run on across its pages.
const BIN_PAGES: usize = 8;

/// One entry of a page read back for compaction: (offset, key, value as stored).
pub type PageEntry = (u16, Vec<u8>, StoredValue);

/// A value on its way to the file: its key, its bytes as they go to disk, and how to read them
/// back. [`TierStore::write_batch`] makes these from plain values (compressing them when that
/// pays); compaction passes on entries as it read them, without decompressing.
#[derive(Clone, Debug)]
pub struct StoredItem<'a> {
    pub key: &'a [u8],
    pub bytes: Cow<'a, [u8]>,
    pub codec: Codec,
    /// The value's length once decompressed.
    pub len: u32,
    /// A compressed extent's pages in 32nds of the raw extent's; 0 otherwise.
    pub scale: u16,
}

impl<'a> StoredItem<'a> {
    /// A value stored as it is.
    pub fn raw(key: &'a [u8], value: &'a [u8]) -> StoredItem<'a> {
        StoredItem {
            key,
            bytes: Cow::Borrowed(value),
            codec: Codec::None,
            len: value.len() as u32,
            scale: 0,
        }
    }

    /// Whether it goes to a shared page (else to an extent of its own).
    fn small(&self) -> bool {
        self.scale == 0 && page::entry_size(self.key.len(), self.bytes.len()) <= page::SMALL_LIMIT
    }

    /// Pages an extent for it takes: what its pointer will say.
    fn extent_pages(&self) -> u64 {
        self.ptr(0, 0).pages()
    }

    /// Its pointer once written at `page` (and `offset` in it, for a small entry).
    fn ptr(&self, page: u32, offset: u16) -> DiskPtr {
        let packed = match (self.codec, offset) {
            (Codec::None, _) => 0,
            (_, 0) => self.scale,
            _ => self.bytes.len() as u16,
        };
        DiskPtr {
            page,
            len: self.len,
            key_len: self.key.len() as u16,
            offset,
            packed,
        }
    }
}

/// How [`TierStore::write_batch`] stores one value: as is, or compressed into `at` of the
/// batch's buffer (with the extent scale, for a large one).
enum Plan {
    Raw,
    Packed {
        at: std::ops::Range<usize>,
        scale: u16,
    },
}

/// Bytes a value at `ptr` holds in the file, for the stored-bytes count: a small entry's value
/// bytes, an extent's pages whole.
fn held_bytes(ptr: &DiskPtr) -> u64 {
    if ptr.small() {
        ptr.stored_len() as u64
    } else {
        ptr.pages() * PAGE
    }
}

/// A small entry placed in a bin being written: (item index, page in the bin, offset, entry
/// bytes).
type Member = (usize, usize, u16, u32);

/// Packs the small items `idx` into bins of up to `max_pages` pages.
fn pack(items: &[StoredItem<'_>], idx: &[usize], max_pages: usize) -> Vec<(Vec<u8>, Vec<Member>)> {
    let mut bins = Vec::new();
    let mut builder = BinBuilder::new(max_pages);
    let mut members = Vec::new();
    for &i in idx {
        let it = &items[i];
        let (k, v) = (it.key, &it.bytes[..]);
        let size = page::entry_size(k.len(), v.len()) as u32;
        let placed = match builder.push(k, v, it.codec) {
            Some(p) => Some(p),
            None => {
                let full = std::mem::replace(&mut builder, BinBuilder::new(max_pages));
                bins.push((full.finish(), std::mem::take(&mut members)));
                builder.push(k, v, it.codec)
            }
        };
        if let Some((pg, off)) = placed {
            members.push((i, pg, off, size));
        }
    }
    if !builder.is_empty() {
        bins.push((builder.finish(), members));
    }
    bins
}

type PageResult = Result<Rc<Pages>, TierError>;

/// One page read that every reader of the page awaits: a single-threaded
/// `futures::future::Shared` (which costs a mutex, a waker slab and atomics per read). Whoever
/// polls it drives the I/O, which wakes only the task that polled it last; the one that sees
/// it finish keeps the result for the others and wakes them. A reader that goes away while
/// the I/O is under way wakes the others, so one of them takes over driving it.
struct Joint {
    io: RefCell<Option<LocalBoxFuture<'static, PageResult>>>,
    done: RefCell<Option<PageResult>>,
    wakers: RefCell<Vec<std::task::Waker>>,
}

impl Joint {
    fn new(io: LocalBoxFuture<'static, PageResult>) -> Rc<Joint> {
        Rc::new(Joint {
            io: RefCell::new(Some(io)),
            done: RefCell::new(None),
            wakers: RefCell::new(Vec::new()),
        })
    }

    fn is_done(&self) -> bool {
        self.done.borrow().is_some()
    }

    fn wake_all(&self) {
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for w in wakers {
            w.wake();
        }
    }

    fn poll_read(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<PageResult> {
        use std::task::Poll;
        if let Some(r) = self.done.borrow().as_ref() {
            return Poll::Ready(r.clone());
        }
        let polled = match self.io.borrow_mut().as_mut() {
            Some(io) => io.as_mut().poll(cx),
            // Taken only when `done` is set.
            None => Poll::Ready(Err(TierError::Io("page read lost".into()))),
        };
        match polled {
            Poll::Ready(r) => {
                self.io.borrow_mut().take();
                *self.done.borrow_mut() = Some(r.clone());
                self.wake_all();
                Poll::Ready(r)
            }
            Poll::Pending => {
                let mut wakers = self.wakers.borrow_mut();
                if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// A read's hold on what it uses, given back however the read ends (even when its future is
/// dropped midway): the pages' readers count (frees wait for it) and its share of the page
/// read, which goes from the in-flight map once nobody awaits it.
struct Reading<'a> {
    store: &'a TierStore,
    page: u32,
    watched: u32,
    joint: Rc<Joint>,
    counted: bool,
}

impl Reading<'_> {
    /// True when the in-flight map holds this read's joint for its page (only a read of one
    /// small page is ever put there).
    fn mapped(&self) -> bool {
        self.store
            .inflight
            .borrow()
            .get(&self.page)
            .is_some_and(|j| Rc::ptr_eq(j, &self.joint))
    }

    /// The I/O is over for good (finished, or left by its last reader): out of the in-flight
    /// map (when `mapped`) and of the pending count.
    fn retire(&self, mapped: bool) {
        if mapped {
            self.store.inflight.borrow_mut().remove(&self.page);
        }
        let mut st = self.store.stats.borrow_mut();
        st.pending_reads = st.pending_reads.saturating_sub(1);
    }

    /// Counts the page read as done, once per I/O: by the first of its readers to finish (a
    /// shared read another reader took out of the map is counted already).
    fn count_done(&mut self, pages: u64, coalesce: bool) {
        self.counted = true;
        let mapped = self.mapped();
        if coalesce && !mapped {
            return;
        }
        self.retire(mapped);
        let mut st = self.store.stats.borrow_mut();
        st.reads += 1;
        st.bytes_read += pages * PAGE;
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if !self.counted && !self.joint.is_done() {
            // Dropped midway: the others (if any) take over; with none left (this one and
            // the in-flight map hold the last references), the read is abandoned.
            let mapped = self.mapped();
            if Rc::strong_count(&self.joint) == 1 + usize::from(mapped) {
                self.retire(mapped);
            } else {
                self.joint.wake_all();
            }
        }
        self.store.done_reading(self.page, self.watched);
    }
}

/// The bytes of one page read: the tier ring's buffer, handed over without a copy, or
/// glommio's when the file has no ring of its own.
enum Pages {
    Direct(crate::uring::PageBuf),
    Dma(glommio::io::ReadResult),
}

impl std::ops::Deref for Pages {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Pages::Direct(b) => b,
            Pages::Dma(r) => r,
        }
    }
}

/// See [`TierStore::hold`].
pub struct SpaceHold {
    store: Rc<TierStore>,
    first: u32,
    n: u32,
}

impl Drop for SpaceHold {
    fn drop(&mut self) {
        self.store.done_reading(self.first, self.n);
    }
}

pub struct TierStore {
    file: Rc<DmaFile>,
    /// Value reads go through a ring of their own when one could be set up (see `uring`);
    /// glommio's DMA reads otherwise.
    direct: Option<Rc<DirectReader>>,
    path: PathBuf,
    alloc: RefCell<ExtentAllocator>,
    /// Bytes the file has been grown to.
    file_len: Cell<u64>,
    grow_step: u64,
    pages: RefCell<Vec<PageLive>>,
    /// Where the next search for sparse pages starts (they are found in turn, not always the
    /// lowest first).
    sparse_cursor: Cell<usize>,
    inflight: RefCell<HashMap<u32, Rc<Joint>>>,
    /// Reads in flight per first page, and frees waiting for them.
    readers: RefCell<HashMap<u32, usize>>,
    deferred: RefCell<Vec<(u64, u64)>>,
    /// While a snapshot may still read values, frees wait here (see [`TierStore::hold_frees`]).
    held: RefCell<Option<Vec<DiskPtr>>>,
    stats: RefCell<TierStats>,
    latency: RefCell<hdrhistogram::Histogram<u64>>,
    full: Cell<bool>,
    /// When "file full" was last logged, and the count of full events then.
    full_logged: Cell<Option<(std::time::Instant, u64)>>,
    /// Value reads in flight take pages from here (see [`TierStore::set_read_budget`]).
    read_gate: RefCell<Rc<glommio::sync::Semaphore>>,
    read_gate_pages: Cell<u64>,
    /// Compresses values on their way to disk (none until [`TierStore::set_codec`]) and
    /// decompresses them on the way back.
    coder: RefCell<Rc<Coder>>,
}

impl TierStore {
    /// Creates (replacing any old one) the file at `path`, allowed to grow to `max_bytes`.
    pub async fn create(path: &Path, max_bytes: u64) -> Result<Rc<TierStore>, TierError> {
        let _ = std::fs::remove_file(path);
        // Page 0 is a header written with plain I/O first. Besides naming the file, it makes the
        // device probe glommio runs at open read real blocks: on an empty file the probe read
        // "succeeds" without touching the device and glommio then wrongly uses polled I/O.
        {
            use std::io::Write;
            let mut f = std::fs::File::create(path)
                .map_err(|e| TierError::Io(format!("cannot create {}: {e}", path.display())))?;
            f.write_all(&page::file_header())
                .and_then(|()| f.sync_all())
                .map_err(|e| TierError::Io(format!("cannot write {}: {e}", path.display())))?;
        }
        let file = glommio::io::OpenOptions::new()
            .read(true)
            .write(true)
            .dma_open(path)
            .await
            .map_err(|e| {
                TierError::Io(format!(
                    "cannot open {} with O_DIRECT (the filesystem must support direct I/O): {e}",
                    path.display()
                ))
            })?;
        let capacity = (max_bytes / PAGE).max(1);
        let latency = hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 2)
            .map_err(|e| TierError::Io(e.to_string()))?;
        let mut alloc = ExtentAllocator::new(capacity);
        alloc.alloc(1); // the header page
        let direct = match DirectReader::new(std::os::fd::AsRawFd::as_raw_fd(&file)) {
            Ok(d) => Some(Rc::new(d)),
            Err(e) => {
                tracing::warn!(
                    "tier reads go through glommio's rings: cannot set up a ring for them: {e}"
                );
                None
            }
        };
        let store = Rc::new(TierStore {
            file: Rc::new(file),
            direct,
            path: path.to_path_buf(),
            alloc: RefCell::new(alloc),
            file_len: Cell::new(PAGE),
            grow_step: (max_bytes / 16).clamp(PAGE * 256, 256 << 20),
            pages: RefCell::new(Vec::new()),
            sparse_cursor: Cell::new(0),
            inflight: RefCell::new(HashMap::new()),
            readers: RefCell::new(HashMap::new()),
            deferred: RefCell::new(Vec::new()),
            held: RefCell::new(None),
            stats: RefCell::new(TierStats::default()),
            latency: RefCell::new(latency),
            full: Cell::new(false),
            full_logged: Cell::new(None),
            coder: RefCell::new(Rc::new(Coder::new(Codec::None))),
            read_gate: RefCell::new(Rc::new(glommio::sync::Semaphore::new(
                DEFAULT_READ_BUDGET / PAGE,
            ))),
            read_gate_pages: Cell::new(DEFAULT_READ_BUDGET / PAGE),
        });
        if let Some(d) = &store.direct {
            glommio::spawn_local(crate::uring::reap_on_signal(Rc::downgrade(d))).detach();
        }
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Compresses values written from now on with `codec` (values already on disk keep theirs:
    /// each entry records its own). A file too large for compressed pointers (see
    /// [`COMPRESSED_PAGES`]) keeps writing values as they are, and says so.
    pub fn set_codec(&self, codec: Codec) {
        let codec = if codec != Codec::None
            && self.alloc.borrow().capacity_pages() > COMPRESSED_PAGES
        {
            tracing::warn!(
                file = %self.path.display(),
                "tier values are stored uncompressed: compression covers files up to 1 TiB per shard"
            );
            Codec::None
        } else {
            codec
        };
        *self.coder.borrow_mut() = Rc::new(Coder::new(codec));
    }

    /// Value reads in flight cover at most `bytes` of the file together (one read at a time
    /// when a single one is larger); later reads wait their turn. Each byte read is held two
    /// or three times over until its value is out (the I/O buffer, the page, the value), and
    /// clients can ask for any number of values at once: a pipeline of 200 GETs of 20 KB
    /// offloaded values took RSS 12% past maxmemory, and larger values would have taken it
    /// anywhere. Set before the first read.
    pub fn set_read_budget(&self, bytes: u64) {
        let pages = (bytes / PAGE).max(2);
        *self.read_gate.borrow_mut() = Rc::new(glommio::sync::Semaphore::new(pages));
        self.read_gate_pages.set(pages);
    }

    /// The codec new values are written with.
    pub fn codec(&self) -> Codec {
        self.coder.borrow().codec()
    }

    /// Hands the delivery of value reads to the caller: it must call [`TierStore::reap`] on
    /// every pass of its loop and when the returned fd (readable when a read completes) fires.
    /// Until then the store delivers them itself, through glommio (a wait on that fd per
    /// wake-up: fine for tools and tests, too many syscalls for a busy server). None when
    /// reads use glommio's rings.
    pub fn reap_externally(&self) -> Option<std::os::fd::RawFd> {
        self.direct.as_ref().map(|d| {
            d.reap_externally();
            d.completion_fd()
        })
    }

    /// Delivers completed value reads to their waiters; cheap when there are none. `signalled`
    /// when the fd of [`TierStore::reap_externally`] fired (it is drained then). True when it
    /// woke a waiter.
    pub fn reap(&self, signalled: bool) -> bool {
        let Some(d) = &self.direct else {
            return false;
        };
        if signalled {
            d.drain_eventfd();
        }
        d.reap()
    }

    /// Queues value reads until the next [`TierStore::reap`] instead of submitting each at
    /// once (see [`DirectReader::set_batching`]): for a caller that reaps again soon.
    pub fn set_batching(&self, on: bool) {
        if let Some(d) = &self.direct {
            d.set_batching(on);
        }
    }

    /// True after a write failed for lack of space, until something is freed.
    pub fn is_full(&self) -> bool {
        self.full.get()
    }

    /// Makes sure the file covers `end` bytes, growing it in large steps.
    async fn ensure_len(&self, end: u64) -> Result<(), TierError> {
        if end <= self.file_len.get() {
            return Ok(());
        }
        let cap = self.alloc.borrow().capacity_pages() * PAGE;
        let target = (self.file_len.get() + self.grow_step)
            .max(end)
            .min(cap.max(end));
        self.file
            .pre_allocate(target, false)
            .await
            .map_err(io_err)?;
        self.file_len.set(target);
        // The page map grows with the file, to its exact size: growing it by doubling would
        // leave up to half its bytes unused (2 bytes per page of the file; RAM per offloaded
        // key is what tiering is judged on).
        let pages = (target / PAGE) as usize + 1;
        let mut map = self.pages.borrow_mut();
        if map.capacity() < pages {
            let more = pages - map.len();
            map.reserve_exact(more);
        }
        Ok(())
    }

    async fn write_at(&self, bytes: &[u8], pos: u64) -> Result<(), TierError> {
        self.ensure_len(pos + bytes.len() as u64).await?;
        let mut buf = self.file.alloc_dma_buffer(bytes.len());
        buf.as_bytes_mut().copy_from_slice(bytes);
        self.stats.borrow_mut().pending_writes += 1;
        let r = self.file.write_at(buf, pos).await;
        self.stats.borrow_mut().pending_writes -= 1;
        let n = r.map_err(io_err)?;
        if n != bytes.len() {
            return Err(TierError::Io(format!(
                "short write: {n} of {} bytes",
                bytes.len()
            )));
        }
        let mut st = self.stats.borrow_mut();
        st.writes += 1;
        st.bytes_written += n as u64;
        Ok(())
    }

    /// Writes a batch of (key, value); each gets a pointer or the error that stopped it. Small
    /// values are packed into as few pages as they fit; all pages and extents go out together.
    /// Keys longer than 64 KiB and values of [`MAX_VALUE`] bytes or more cannot be stored and get
    /// an error.
    pub async fn write_batch(&self, items: &[(&[u8], &[u8])]) -> Vec<Result<DiskPtr, TierError>> {
        let coder = self.coder.borrow().clone();
        if coder.codec() == Codec::None {
            let raw: Vec<StoredItem<'_>> =
                items.iter().map(|&(k, v)| StoredItem::raw(k, v)).collect();
            return self.write_batch_in(&raw, false).await;
        }
        // Compressed values go into one buffer for the batch (never larger than the values
        // themselves, so it does not grow), released whole once written.
        let total = items.iter().map(|(_, v)| v.len()).sum();
        let mut arena = Vec::with_capacity(total);
        let plans: Vec<Plan> = items
            .iter()
            .map(|&(k, v)| Self::plan(&coder, k, v, &mut arena))
            .collect();
        let prepared: Vec<StoredItem<'_>> = items
            .iter()
            .zip(plans)
            .map(|(&(key, value), plan)| match plan {
                Plan::Raw => StoredItem::raw(key, value),
                Plan::Packed { at, scale } => StoredItem {
                    bytes: Cow::Borrowed(&arena[at]),
                    codec: coder.codec(),
                    scale,
                    ..StoredItem::raw(key, value)
                },
            })
            .collect();
        self.write_batch_in(&prepared, false).await
    }

    /// How `value` will be stored: compressed (appended to `arena`) when that saves an eighth
    /// of a small value, or a page of an extent, and fits a compressed pointer; as is
    /// otherwise.
    fn plan(coder: &Coder, key: &[u8], value: &[u8], arena: &mut Vec<u8>) -> Plan {
        if value.len() >= MAX_VALUE {
            return Plan::Raw;
        }
        let start = arena.len();
        if StoredItem::raw(key, value).small() {
            let fits = (value.len() as u32) < SMALL_LEN
                && coder.compress_into(value, value.len() - value.len() / 8, arena);
            return if fits {
                Plan::Packed {
                    at: start..arena.len(),
                    scale: 0,
                }
            } else {
                Plan::Raw
            };
        }
        let pages = page::extent_pages(key.len(), value.len());
        let room = ((pages.saturating_sub(1) * PAGE) as usize)
            .saturating_sub(page::EXTENT_HEADER + key.len());
        if !coder.compress_into(value, room, arena) {
            return Plan::Raw;
        }
        let stored = arena.len() - start;
        match extent_scale(pages, page::extent_pages(key.len(), stored)) {
            Some(scale) => Plan::Packed {
                at: start..arena.len(),
                scale,
            },
            None => {
                arena.truncate(start);
                Plan::Raw
            }
        }
    }

    /// [`TierStore::write_batch`] for compaction, which may use the reserve: the last pages
    /// of the file are kept for it, so that a file filled with half-empty pages can still be
    /// compacted (moving live values needs somewhere to move them to).
    /// Entries are written as they were read ([`TierStore::read_page`]), compressed or not.
    pub async fn write_batch_compacting(
        &self,
        items: &[StoredItem<'_>],
    ) -> Vec<Result<DiskPtr, TierError>> {
        self.write_batch_in(items, true).await
    }

    /// Pages a write may take: all for compaction, all but the reserve otherwise.
    fn take_pages(&self, pages: u64, compacting: bool) -> Option<u64> {
        let mut a = self.alloc.borrow_mut();
        let reserve = if compacting {
            0
        } else {
            (a.capacity_pages() / 50).min(4096)
        };
        if a.used_pages() + pages + reserve > a.capacity_pages() {
            return None;
        }
        a.alloc(pages)
    }

    async fn write_batch_in(
        &self,
        items: &[StoredItem<'_>],
        compacting: bool,
    ) -> Vec<Result<DiskPtr, TierError>> {
        let mut out: Vec<Option<Result<DiskPtr, TierError>>> = vec![None; items.len()];
        // Pack small entries into bins.
        let mut small = Vec::new();
        let mut large = Vec::new();
        for (i, it) in items.iter().enumerate() {
            if it.key.len() > u16::MAX as usize || it.len as usize >= MAX_VALUE {
                out[i] = Some(Err(TierError::Io(
                    "key or value too large for the tier".into(),
                )));
                continue;
            }
            if it.small() {
                small.push(i);
            } else {
                large.push(i);
            }
        }
        // Each bin needs its pages in one run; a bin that finds no run that long (a file
        // riddled with single free pages) is packed again page by page.
        let mut placed_bins: Vec<(u64, Vec<u8>, Vec<Member>)> = Vec::new();
        let mut no_run: Vec<usize> = Vec::new();
        for (bytes, members) in pack(items, &small, BIN_PAGES) {
            let pages = (bytes.len() as u64) / PAGE;
            match self.take_pages(pages, compacting) {
                Some(start) => placed_bins.push((start, bytes, members)),
                None if pages > 1 => no_run.extend(members.iter().map(|m| m.0)),
                None => {
                    self.note_full();
                    for m in members {
                        out[m.0] = Some(Err(TierError::NoSpace));
                    }
                }
            }
        }
        for (bytes, members) in pack(items, &no_run, 1) {
            match self.take_pages(1, compacting) {
                Some(start) => placed_bins.push((start, bytes, members)),
                None => {
                    self.note_full();
                    for m in members {
                        out[m.0] = Some(Err(TierError::NoSpace));
                    }
                }
            }
        }
        type Placed = Vec<(usize, Result<DiskPtr, TierError>)>;
        let mut writes: Vec<LocalBoxFuture<'_, Placed>> = Vec::new();
        for (start, bytes, members) in placed_bins {
            let pages = bytes.len() as u64 / PAGE;
            writes.push(
                async move {
                    match self.write_at(&bytes, start * PAGE).await {
                        Ok(()) => {
                            let mut map = self.pages.borrow_mut();
                            let end = (start + pages) as usize + 1;
                            if map.len() < end {
                                map.resize(end, PageLive::default());
                            }
                            let mut st = self.stats.borrow_mut();
                            st.small_pages += pages;
                            members
                                .into_iter()
                                .map(|(i, pg, off, size)| {
                                    let it = &items[i];
                                    let at = start as usize + pg;
                                    map[at].add(size as usize);
                                    if page::spans(off, it.key.len(), it.bytes.len()) {
                                        map[at + 1].set_tail(true);
                                    }
                                    let ptr = it.ptr(at as u32, off);
                                    st.count_in(&ptr);
                                    (i, Ok(ptr))
                                })
                                .collect()
                        }
                        Err(e) => {
                            self.write_failed(&e, start, pages);
                            members
                                .into_iter()
                                .map(|(i, _, _, _)| (i, Err(e.clone())))
                                .collect()
                        }
                    }
                }
                .boxed_local(),
            );
        }
        for i in large {
            let it = &items[i];
            let pages = it.extent_pages();
            let Some(start) = self.take_pages(pages, compacting) else {
                self.note_full();
                out[i] = Some(Err(TierError::NoSpace));
                continue;
            };
            writes.push(
                async move {
                    let bytes = page::build_extent(it.key, &it.bytes, it.codec, it.len, pages);
                    let res = match self.write_at(&bytes, start * PAGE).await {
                        Ok(()) => {
                            let ptr = it.ptr(start as u32, 0);
                            self.stats.borrow_mut().count_in(&ptr);
                            Ok(ptr)
                        }
                        Err(e) => {
                            self.write_failed(&e, start, pages);
                            Err(e)
                        }
                    };
                    vec![(i, res)]
                }
                .boxed_local(),
            );
        }
        for placed in futures::future::join_all(writes).await {
            for (i, r) in placed {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or(Err(TierError::Io("write not attempted".into()))))
            .collect()
    }

    /// Counts the file becoming full; logs it the first time and then at most once a minute
    /// (a full cache's file fills again after each free, thousands of times a second).
    fn note_full(&self) {
        if !self.full.replace(true) {
            let events = {
                let mut st = self.stats.borrow_mut();
                st.full_events += 1;
                st.full_events
            };
            let now = std::time::Instant::now();
            let due = self
                .full_logged
                .get()
                .is_none_or(|(at, _)| now.duration_since(at) >= FULL_LOG_EVERY);
            if due {
                let since = events - self.full_logged.get().map_or(0, |(_, n)| n);
                self.full_logged.set(Some((now, events)));
                tracing::warn!(
                    file = %self.path.display(),
                    times = since,
                    "tier file full: offloading waits for space to be freed"
                );
            }
        }
    }

    fn write_failed(&self, e: &TierError, start: u64, pages: u64) {
        self.alloc.borrow_mut().free(start, pages);
        self.stats.borrow_mut().write_errors += 1;
        if *e == TierError::NoSpace {
            self.note_full();
        } else {
            tracing::error!(file = %self.path.display(), "tier write failed: {e}");
        }
    }

    /// Keeps the space of the value at `ptr` from being freed (and so handed out again) until
    /// the returned hold is dropped: a free of it waits, as for a read in flight. For a caller
    /// that keeps a value read from `ptr` beside the pointer and must know that whatever points
    /// at `ptr` later is still that value.
    pub fn hold(self: &Rc<Self>, ptr: DiskPtr) -> SpaceHold {
        let (first, n) = Self::watched(ptr);
        self.start_reading(first, n);
        SpaceHold {
            store: self.clone(),
            first,
            n,
        }
    }

    /// The pages whose frees wait for a read of `ptr`: every page of a small value's entry;
    /// the first page of an extent (freed whole, by its first page).
    fn watched(ptr: DiskPtr) -> (u32, u32) {
        (ptr.page, if ptr.small() { ptr.pages() as u32 } else { 1 })
    }

    /// Reads the value of `key` at `ptr`, sharing the I/O with concurrent reads of the same
    /// page. Bytes stored for another key are an error ([`Corrupt::Owner`]), never returned.
    pub async fn read(&self, ptr: DiskPtr, key: &[u8]) -> Result<Vec<u8>, TierError> {
        let started = Instant::now();
        let pages = ptr.pages();
        // A read joining one in flight adds no bytes; any other waits for room in the budget
        // (a read larger than all of it, for all of it). A closed gate cannot happen (it is
        // never closed); reading on without a permit would be the fallback.
        let joins = ptr.small() && pages == 1 && self.inflight.borrow().contains_key(&ptr.page);
        let _permit = if joins {
            None
        } else {
            let gate = self.read_gate.borrow().clone();
            let units = pages.min(self.read_gate_pages.get());
            if gate.available() < units {
                self.stats.borrow_mut().budget_waits += 1;
            }
            let permit = gate.acquire_static_permit(units).await.ok();
            let in_use = self.read_gate_pages.get() - gate.available();
            let mut st = self.stats.borrow_mut();
            st.peak_read_bytes = st.peak_read_bytes.max(in_use * PAGE);
            permit
        };
        // Reads of one small page share one I/O; an entry running on into the next page, or an
        // extent, is read on its own.
        let coalesce = ptr.small() && pages == 1;
        // Frees of these pages wait for the read.
        let (_, watched) = Self::watched(ptr);
        self.start_reading(ptr.page, watched);
        let joint = {
            let mut inflight = self.inflight.borrow_mut();
            match inflight.get(&ptr.page) {
                Some(j) if coalesce => {
                    self.stats.borrow_mut().coalesced_reads += 1;
                    j.clone()
                }
                _ => {
                    let file = self.file.clone();
                    let (pos, len) = (ptr.page as u64 * PAGE, (pages * PAGE) as usize);
                    // Submitted now, not at the first await (see `uring`).
                    let direct = self.direct.as_ref().map(|d| d.read(pos, len));
                    let io = async move {
                        let r = match direct {
                            Some(read) => Pages::Direct(read.await.map_err(io_err)?),
                            None => {
                                Pages::Dma(file.read_at_aligned(pos, len).await.map_err(io_err)?)
                            }
                        };
                        if r.len() != len {
                            return Err(TierError::Io(format!(
                                "short read: {} of {len} bytes",
                                r.len()
                            )));
                        }
                        Ok(Rc::new(r))
                    }
                    .boxed_local();
                    let j = Joint::new(io);
                    if coalesce {
                        inflight.insert(ptr.page, j.clone());
                    }
                    self.stats.borrow_mut().pending_reads += 1;
                    j
                }
            }
        };
        let mut reading = Reading {
            store: self,
            page: ptr.page,
            watched,
            joint,
            counted: false,
        };
        let res = std::future::poll_fn(|cx| reading.joint.poll_read(cx)).await;
        reading.count_done(pages, coalesce);
        drop(reading);
        let value = res.and_then(|buf| {
            let coder = self.coder.borrow().clone();
            let v = if ptr.small() {
                page::page_entry(&buf, ptr.offset, key).and_then(|(stored, codec)| {
                    if codec == Codec::None {
                        Ok(stored)
                    } else {
                        coder.decompress(codec, &stored, ptr.len as usize)
                    }
                })
            } else {
                page::extent_value(&buf, key)
                    .and_then(|(stored, codec)| coder.decompress(codec, stored, ptr.len as usize))
            };
            v.map_err(TierError::Corrupt)
        });
        match &value {
            Ok(v) if v.len() == ptr.len as usize => {
                let us = started.elapsed().as_micros() as u64;
                let _ = self.latency.borrow_mut().record(us.max(1));
            }
            Ok(_) => {
                self.stats.borrow_mut().read_errors += 1;
                return Err(TierError::Corrupt(Corrupt::Layout));
            }
            Err(e) => {
                self.stats.borrow_mut().read_errors += 1;
                tracing::warn!(file = %self.path.display(), page = ptr.page, "tier read failed: {e}");
            }
        }
        value
    }

    /// Frees of pages `first..first + n` wait until [`TierStore::done_reading`].
    fn start_reading(&self, first: u32, n: u32) {
        let mut readers = self.readers.borrow_mut();
        for p in first..first + n {
            *readers.entry(p).or_insert(0) += 1;
        }
    }

    fn done_reading(&self, first: u32, n: u32) {
        for p in first..first + n {
            self.done_reading_page(p);
        }
    }

    fn done_reading_page(&self, page: u32) {
        let mut readers = self.readers.borrow_mut();
        let idle = match readers.get_mut(&page) {
            Some(n) => {
                *n -= 1;
                *n == 0
            }
            None => true,
        };
        if idle {
            readers.remove(&page);
            drop(readers);
            // Frees that waited for this page's readers can go through now.
            let ready: Vec<(u64, u64)> = {
                let readers = self.readers.borrow();
                let mut deferred = self.deferred.borrow_mut();
                let (go, stay): (Vec<_>, Vec<_>) = deferred
                    .drain(..)
                    .partition(|&(s, n)| !(s..s + n).any(|p| readers.contains_key(&(p as u32))));
                *deferred = stay;
                go
            };
            for (s, n) in ready {
                self.release(s, n);
            }
        }
    }

    /// From now until [`TierStore::release_frees`], freed values keep their space: a snapshot
    /// that captured a pointer before its key changed can still read the value it points at.
    pub fn hold_frees(&self) {
        let mut held = self.held.borrow_mut();
        if held.is_none() {
            *held = Some(Vec::new());
        }
    }

    /// Ends [`TierStore::hold_frees`] and carries out the frees that waited.
    pub fn release_frees(&self) {
        let waiting = self.held.borrow_mut().take();
        for p in waiting.into_iter().flatten() {
            self.free(p);
        }
    }

    /// True between [`TierStore::hold_frees`] and [`TierStore::release_frees`].
    pub fn frees_held(&self) -> bool {
        self.held.borrow().is_some()
    }

    /// Frees the space of the value at `ptr`.
    pub fn free(&self, ptr: DiskPtr) {
        if let Some(waiting) = self.held.borrow_mut().as_mut() {
            waiting.push(ptr);
            return;
        }
        self.stats.borrow_mut().count_out(&ptr);
        let runs: Vec<(u64, u64)> = if ptr.small() {
            let mut map = self.pages.borrow_mut();
            let p = ptr.page as usize;
            let Some(live) = map.get_mut(p).filter(|l| l.count() > 0) else {
                return;
            };
            live.remove(page::entry_size(ptr.key_len as usize, ptr.stored_len()));
            // A page goes once no entry starts in it and no entry of the page before runs on
            // into it.
            let mut gone = Vec::new();
            if !live.in_use() {
                gone.push((p as u64, 1));
            }
            if page::spans(ptr.offset, ptr.key_len as usize, ptr.stored_len()) {
                if let Some(next) = map.get_mut(p + 1) {
                    next.set_tail(false);
                    if !next.in_use() {
                        gone.push((p as u64 + 1, 1));
                    }
                }
            }
            let mut st = self.stats.borrow_mut();
            st.small_pages = st.small_pages.saturating_sub(gone.len() as u64);
            gone
        } else {
            vec![(ptr.page as u64, ptr.pages())]
        };
        for (start, pages) in runs {
            let busy = {
                let readers = self.readers.borrow();
                (start..start + pages).any(|p| readers.contains_key(&(p as u32)))
            };
            if busy {
                self.deferred.borrow_mut().push((start, pages));
            } else {
                self.release(start, pages);
            }
        }
    }

    /// Returns pages to the allocator, to be written again at once. Their blocks stay with the
    /// file (no hole is punched): the file is the tier's own, bounded by its budget, and a full
    /// cache frees and rewrites pages thousands of times a second. A punch per free (an
    /// `fallocate` each, ~1.6 ms apiece on a virtio disk, one task each while it waited) let
    /// freed pages pile up allocated: the file filled at 94% with a tenth of its keys live, and
    /// the waiting tasks took 60 MB of RAM past maxmemory.
    fn release(&self, start: u64, pages: u64) {
        self.alloc.borrow_mut().free(start, pages);
        self.full.set(false);
    }

    /// Small pages whose live bytes fell under `below` (compaction candidates), `limit` at most.
    pub fn sparse_pages(&self, limit: usize, below: u64) -> Vec<u32> {
        let map = self.pages.borrow();
        let n = map.len();
        let from = self.sparse_cursor.get().min(n);
        let mut out = Vec::new();
        let mut last = from;
        for p in (from..n).chain(0..from) {
            let l = map[p];
            if l.count() > 0 && l.bytes() < below {
                out.push(p as u32);
                last = p + 1;
                if out.len() == limit {
                    break;
                }
            }
        }
        self.sparse_cursor.set(last);
        out
    }

    /// Reads a whole small page (verified) for compaction: every (offset, key, value).
    pub async fn read_page(&self, page_no: u32) -> Result<Vec<PageEntry>, TierError> {
        let buf = self.read_pages(page_no, 1).await?;
        let (mut entries, runs_on) = page::page_entries(&buf).map_err(TierError::Corrupt)?;
        if let Some(at) = runs_on {
            // The last entry runs on into the next page: read both for it (verified again).
            let two = self.read_pages(page_no, 2).await?;
            if let Ok((k, v)) = page::entry_at(&two, at) {
                entries.push((at, k, v));
            }
        }
        Ok(entries)
    }

    /// Reads `n` pages from `first`, holding frees of them meanwhile.
    async fn read_pages(&self, first: u32, n: u32) -> Result<Vec<u8>, TierError> {
        self.start_reading(first, n);
        let r = self
            .file
            .read_at_aligned(first as u64 * PAGE, (n as u64 * PAGE) as usize)
            .await
            .map_err(io_err);
        self.done_reading(first, n);
        let buf = r?;
        if buf.len() != (n as u64 * PAGE) as usize {
            return Err(TierError::Io(format!("short read: {} bytes", buf.len())));
        }
        Ok(buf.to_vec())
    }

    /// Live values sharing the pages of `ptr` (1 for a large value): evicting a value alone on
    /// its page frees the page.
    pub fn page_entries(&self, ptr: DiskPtr) -> u16 {
        if !ptr.small() {
            return 1;
        }
        self.pages
            .borrow()
            .get(ptr.page as usize)
            .map_or(1, |l| l.count().max(1))
    }

    /// (bytes live values take in the file, bytes allocated in the file, the file's size
    /// limit): cheap, for decisions on the hot path.
    pub fn space(&self) -> (u64, u64, u64) {
        let a = self.alloc.borrow();
        (
            self.stats.borrow().stored_bytes,
            a.used_pages() * PAGE,
            a.capacity_pages() * PAGE,
        )
    }

    /// CONFIG RESETSTAT: the activity counters (reads, writes, errors, full events...) and the
    /// read latency histogram start again; what describes the file and the reads in flight now
    /// stays.
    pub fn reset_stats(&self) {
        let mut st = self.stats.borrow_mut();
        *st = TierStats {
            entries: st.entries,
            value_bytes: st.value_bytes,
            stored_bytes: st.stored_bytes,
            compressed: st.compressed,
            codec: st.codec,
            pending_reads: st.pending_reads,
            pending_writes: st.pending_writes,
            small_pages: st.small_pages,
            ..TierStats::default()
        };
        self.latency.borrow_mut().reset();
    }

    pub fn stats(&self) -> TierStats {
        let mut st = self.stats.borrow().clone();
        let a = self.alloc.borrow();
        st.file_bytes = self.file_len.get();
        st.used_bytes = a.used_pages() * PAGE;
        st.hole_bytes = a.hole_pages() * PAGE;
        st.capacity_bytes = a.capacity_pages() * PAGE;
        st.codec = self.codec();
        let h = self.latency.borrow();
        st.read_p50_us = h.value_at_quantile(0.5);
        st.read_p99_us = h.value_at_quantile(0.99);
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::{letters, noise};
    use glommio::LocalExecutorBuilder;

    fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        LocalExecutorBuilder::default()
            .io_memory(4 << 20)
            .spawn(move || async move { f().await })
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn page_accounting_counts_entries_bytes_and_tails_in_two_bytes() {
        assert_eq!(std::mem::size_of::<PageLive>(), 2);
        let mut l = PageLive::default();
        assert!(!l.in_use());
        l.add(1034);
        l.add(40);
        l.set_tail(true);
        assert_eq!((l.count(), l.bytes()), (2, 33 * 32 + 2 * 32));
        l.remove(1034);
        assert_eq!((l.count(), l.bytes()), (1, 64));
        l.remove(40);
        assert_eq!((l.count(), l.bytes()), (0, 0));
        assert!(l.in_use(), "the tail of the previous page's entry keeps it");
        l.set_tail(false);
        assert!(!l.in_use());
        // Byte units saturate; emptying the page clears them whatever they were.
        for _ in 0..page::MAX_PAGE_ENTRIES {
            l.add(2000);
        }
        assert_eq!(
            (l.count() as usize, l.bytes()),
            (page::MAX_PAGE_ENTRIES, 255 * 32)
        );
        for _ in 0..page::MAX_PAGE_ENTRIES {
            l.remove(2000);
        }
        assert_eq!((l.count(), l.bytes(), l.in_use()), (0, 0, false));
    }

    /// Writes every (key, value) in one batch; returns the items and their pointers.
    async fn write_all<'a>(
        st: &TierStore,
        keys: &'a [Vec<u8>],
        vals: &'a [Vec<u8>],
    ) -> (Vec<(&'a [u8], &'a [u8])>, Vec<DiskPtr>) {
        let items: Vec<(&[u8], &[u8])> = keys
            .iter()
            .zip(vals)
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let ptrs = st
            .write_batch(&items)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        (items, ptrs)
    }

    fn value(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j) as u8).collect()
    }

    #[test]
    fn write_read_free_reuse() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0000.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("key:{i}").into_bytes()).collect();
            let vals: Vec<Vec<u8>> = (0..200)
                .map(|i| value(i, if i % 10 == 0 { 9000 } else { 100 + i }))
                .collect();
            let (items, ptrs) = write_all(&st, &keys, &vals).await;
            assert_eq!(st.stats().entries, 200);
            // Small values share pages.
            assert!(st.stats().small_pages < 40, "{}", st.stats().small_pages);
            // Concurrent reads, many on the same pages.
            let reads = ptrs.iter().zip(&keys).map(|(p, k)| st.read(*p, k));
            let got = futures::future::join_all(reads).await;
            for (i, g) in got.into_iter().enumerate() {
                assert_eq!(g.unwrap(), vals[i], "value {i}");
            }
            assert!(st.stats().coalesced_reads > 0);
            // Another key's pointer is refused: the key on disk is the owner's mark.
            assert_eq!(
                st.read(ptrs[1], &keys[2]).await,
                Err(TierError::Corrupt(Corrupt::Owner))
            );
            // Packed and unpacked, a pointer is the same.
            for (p, k) in ptrs.iter().zip(&keys) {
                assert_eq!(DiskPtr::unpack(p.pack(), k.len()), *p);
            }
            let used = st.stats().used_bytes;
            for p in &ptrs {
                st.free(*p);
            }
            let s = st.stats();
            assert_eq!(s.entries, 0);
            assert_eq!(
                s.used_bytes, PAGE,
                "only the header page stays (was {used})"
            );
            // Freed space is reused.
            let again = st.write_batch(&items).await;
            assert!(again.iter().all(|r| r.is_ok()));
            assert_eq!(st.stats().used_bytes, used);
        });
    }

    #[test]
    fn a_read_dropped_midway_hands_its_io_over_or_gives_back_what_it_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0000.ssd");
        run(move || async move {
            use futures::FutureExt;
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            let keys: Vec<Vec<u8>> = (0..9).map(|i| format!("key:{i}").into_bytes()).collect();
            let vals: Vec<Vec<u8>> = (0..9)
                .map(|i| value(i, if i == 8 { 9000 } else { 100 }))
                .collect();
            let (_, ptrs) = write_all(&st, &keys, &vals).await;
            assert!(ptrs[..8].iter().all(|p| p.page == ptrs[0].page));
            // Three readers of one page; the one whose poll started the I/O goes first.
            let mut first = Box::pin(st.read(ptrs[0], &keys[0]));
            assert!(futures::poll!(first.as_mut()).is_pending());
            let mut a = Box::pin(st.read(ptrs[1], &keys[1]));
            let mut b = Box::pin(st.read(ptrs[2], &keys[2]));
            assert!(futures::poll!(a.as_mut()).is_pending());
            assert!(futures::poll!(b.as_mut()).is_pending());
            drop(first);
            assert_eq!(a.await.unwrap(), vals[1]);
            assert_eq!(b.await.unwrap(), vals[2]);
            let s = st.stats();
            assert_eq!((s.reads, s.coalesced_reads, s.pending_reads), (1, 2, 0));
            // Alone, a small read and an extent read dropped midway leave nothing behind.
            assert!(st.read(ptrs[3], &keys[3]).now_or_never().is_none());
            assert!(st.read(ptrs[8], &keys[8]).now_or_never().is_none());
            assert!(st.inflight.borrow().is_empty());
            assert_eq!(st.stats().pending_reads, 0);
            // ...and hold no frees back: every page comes free at once.
            for p in &ptrs {
                st.free(*p);
            }
            let s = st.stats();
            assert_eq!(
                (s.entries, s.used_bytes),
                (0, PAGE),
                "only the header page stays"
            );
            // The reads still go on.
            let (_, ptrs) = write_all(&st, &keys, &vals).await;
            for (i, p) in ptrs.iter().enumerate() {
                assert_eq!(st.read(*p, &keys[i]).await.unwrap(), vals[i]);
            }
        });
    }

    #[test]
    fn a_held_value_keeps_its_space_until_the_hold_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0009.ssd");
        run(move || async move {
            let st = Rc::new(TierStore::create(&path, 64 << 20).await.unwrap());
            let keys: Vec<Vec<u8>> = (0..3).map(|i| format!("key:{i}").into_bytes()).collect();
            let vals: Vec<Vec<u8>> = (0..3)
                .map(|i| value(i, if i == 2 { 9000 } else { 3000 }))
                .collect();
            let (_, ptrs) = write_all(&st, &keys, &vals).await;
            let used = st.stats().used_bytes;
            // One small value (its page) and one extent held; everything freed.
            let holds = [st.hold(ptrs[0]), st.hold(ptrs[2])];
            for p in &ptrs {
                st.free(*p);
            }
            glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
            assert_eq!(st.stats().entries, 0);
            let held = st.stats().used_bytes;
            assert!(
                held > PAGE,
                "the held pages stay allocated ({held} of {used})"
            );
            // New writes go elsewhere: the held values are still there to read.
            let (_, again) = write_all(&st, &keys, &vals).await;
            for p in [ptrs[0], ptrs[2]] {
                assert!(again.iter().all(|a| a.page != p.page), "{p:?} reused");
            }
            assert_eq!(st.read(ptrs[0], &keys[0]).await.unwrap(), vals[0]);
            assert_eq!(st.read(ptrs[2], &keys[2]).await.unwrap(), vals[2]);
            // The hold gone, the frees that waited go through.
            drop(holds);
            for p in &again {
                st.free(*p);
            }
            glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
            assert_eq!(st.stats().used_bytes, PAGE, "only the header page stays");
        });
    }

    #[test]
    fn one_kib_values_fill_pages_across_boundaries_and_all_space_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0007.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            let keys: Vec<Vec<u8>> = (0..400)
                .map(|i| format!("key:{i:06}").into_bytes())
                .collect();
            let vals: Vec<Vec<u8>> = (0..400).map(|i| value(i, 1024)).collect();
            let (_, ptrs) = write_all(&st, &keys, &vals).await;
            // 3 per page without running on; close to 4 with it.
            let pages = st.stats().used_bytes / PAGE - 1;
            assert!(pages <= 400 * 10 / 38, "{pages} pages for 400 values");
            assert!(ptrs.iter().any(|p| page::spans(p.offset, 10, 1024)));
            let got =
                futures::future::join_all(ptrs.iter().zip(&keys).map(|(p, k)| st.read(*p, k)))
                    .await;
            for (i, g) in got.into_iter().enumerate() {
                assert_eq!(g.as_ref(), Ok(&vals[i]), "value {i}");
            }
            // Compaction reads each entry once, from the page it starts in.
            let mut seen = 0;
            for p in ptrs
                .iter()
                .map(|p| p.page)
                .collect::<std::collections::BTreeSet<_>>()
            {
                seen += st.read_page(p).await.unwrap().len();
            }
            assert_eq!(seen, 400);
            // Freed in an order that leaves tails behind heads and heads behind tails.
            for p in ptrs.iter().step_by(2).chain(ptrs.iter().skip(1).step_by(2)) {
                st.free(*p);
            }
            glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
            let s = st.stats();
            assert_eq!(s.entries, 0);
            assert_eq!(s.small_pages, 0);
            assert_eq!(s.used_bytes, PAGE, "only the header page stays");
        });
    }

    /// A model check of bins, tails and frees: random sizes around the page-spanning range,
    /// random batches, random frees (some while the space is being reused), every live value
    /// read back after each round, compaction's view of each page matching the live set, and
    /// all space back at the end.
    #[test]
    fn random_writes_and_frees_match_a_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0008.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 32 << 20).await.unwrap();
            let mut x: u64 = 0x2545_F491_4F6C_DD1D;
            let mut rnd = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut live: Vec<(Vec<u8>, Vec<u8>, DiskPtr)> = Vec::new();
            let mut serial = 0usize;
            for round in 0..60 {
                let n = 1 + rnd(40) as usize;
                let keys: Vec<Vec<u8>> = (0..n)
                    .map(|i| {
                        format!("k{}:{}", serial + i, "x".repeat(rnd(30) as usize)).into_bytes()
                    })
                    .collect();
                let vals: Vec<Vec<u8>> = (0..n)
                    .map(|i| {
                        let len = match rnd(4) {
                            0 => rnd(200),
                            1 => 900 + rnd(300),
                            2 => 1800 + rnd(240),
                            _ => 3000 + rnd(9000),
                        };
                        value(serial + i, len as usize)
                    })
                    .collect();
                serial += n;
                let (_, ptrs) = write_all(&st, &keys, &vals).await;
                for ((k, v), p) in keys.into_iter().zip(vals).zip(ptrs) {
                    live.push((k, v, p));
                }
                // Free about a third, in random order.
                for _ in 0..live.len() / 3 {
                    let i = rnd(live.len() as u64) as usize;
                    let (_, _, p) = live.swap_remove(i);
                    st.free(p);
                }
                for (k, v, p) in &live {
                    assert_eq!(st.read(*p, k).await.as_ref(), Ok(v), "round {round}");
                }
                // Compaction finds each live small entry in the page where it starts.
                let mut by_page: HashMap<u32, usize> = HashMap::new();
                for (_, _, p) in live.iter().filter(|(_, _, p)| p.small()) {
                    *by_page.entry(p.page).or_default() += 1;
                }
                for (&page, &want) in &by_page {
                    let entries = st.read_page(page).await.unwrap();
                    let found = entries
                        .iter()
                        .filter(|(off, k, _)| {
                            live.iter()
                                .any(|(lk, _, lp)| lp.page == page && lp.offset == *off && lk == k)
                        })
                        .count();
                    assert_eq!(found, want, "page {page} in round {round}");
                }
            }
            for (_, _, p) in live.drain(..) {
                st.free(p);
            }
            glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
            let s = st.stats();
            assert_eq!((s.entries, s.small_pages), (0, 0));
            assert_eq!(s.used_bytes, PAGE, "only the header page stays");
        });
    }

    #[test]
    fn space_freed_and_reused_at_once_never_loses_fresh_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0003.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 16 << 20).await.unwrap();
            for round in 0..50 {
                let vals: Vec<Vec<u8>> = (0..64).map(|i| value(round * 64 + i, 1000)).collect();
                let items: Vec<(&[u8], &[u8])> =
                    vals.iter().map(|v| (&b"k"[..], v.as_slice())).collect();
                let ptrs: Vec<DiskPtr> = st
                    .write_batch(&items)
                    .await
                    .into_iter()
                    .map(|r| r.unwrap())
                    .collect();
                for (p, v) in ptrs.iter().zip(&vals) {
                    assert_eq!(st.read(*p, b"k").await.as_ref(), Ok(v), "round {round}");
                }
                for p in &ptrs {
                    st.free(*p);
                }
            }
        });
    }

    #[test]
    fn held_frees_keep_values_readable_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0004.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 16 << 20).await.unwrap();
            let v = value(7, 3000);
            let p = st.write_batch(&[(b"k", &v)]).await[0].clone().unwrap();
            st.hold_frees();
            st.free(p);
            // Space freed while held is not reused: a new write lands elsewhere.
            let q = st.write_batch(&[(b"q", &value(8, 3000))]).await[0]
                .clone()
                .unwrap();
            assert_ne!(q.page, p.page);
            glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
            assert_eq!(st.read(p, b"k").await.as_ref(), Ok(&v));
            st.release_frees();
            assert!(!st.frees_held());
            glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
            assert_eq!(st.stats().entries, 1);
        });
    }

    #[test]
    fn page_entries_counts_the_neighbours_of_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0006.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 16 << 20).await.unwrap();
            let (a, b, c) = (value(1, 1000), value(2, 1000), value(3, 9000));
            let r = st.write_batch(&[(b"a", &a), (b"b", &b), (b"c", &c)]).await;
            let (pa, pb, pc) = (
                r[0].clone().unwrap(),
                r[1].clone().unwrap(),
                r[2].clone().unwrap(),
            );
            assert_eq!(pa.page, pb.page);
            assert_eq!(st.page_entries(pa), 2);
            assert_eq!(st.page_entries(pc), 1);
            st.free(pb);
            assert_eq!(st.page_entries(pa), 1);
        });
    }

    #[test]
    fn the_last_pages_are_kept_for_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0005.ssd");
        run(move || async move {
            // 256 pages: 5 of them are the reserve.
            let st = TierStore::create(&path, 1 << 20).await.unwrap();
            let v = value(3, 3000);
            let mut n = 0;
            while st.write_batch(&[(b"k", &v)]).await[0].is_ok() {
                n += 1;
                assert!(n < 300);
            }
            let (_, used, cap) = st.space();
            assert_eq!(cap, 256 * PAGE);
            assert_eq!(used, cap - 5 * PAGE, "offloading stops at the reserve");
            assert!(st.is_full());
            let r = st
                .write_batch_compacting(&[StoredItem::raw(b"k", &v)])
                .await;
            assert!(r[0].is_ok(), "compaction may use the reserve");
        });
    }

    #[test]
    fn packed_pointers_round_trip_at_their_bounds() {
        let ptrs = [
            DiskPtr {
                page: u32::MAX,
                len: MAX_VALUE as u32 - 1,
                key_len: 9,
                offset: 0,
                packed: 0,
            },
            DiskPtr {
                page: u32::MAX,
                len: 4095,
                key_len: 9,
                offset: 4095,
                packed: 0,
            },
            DiskPtr {
                page: COMPRESSED_PAGES as u32 - 1,
                len: SMALL_LEN - 1,
                key_len: 9,
                offset: 4095,
                packed: SMALL_LEN as u16 - 1,
            },
            DiskPtr {
                page: COMPRESSED_PAGES as u32 - 1,
                len: MAX_VALUE as u32 - 1,
                key_len: 9,
                offset: 0,
                packed: 32,
            },
            DiskPtr {
                page: 1,
                len: 5000,
                key_len: 0,
                offset: 0,
                packed: 1,
            },
        ];
        for p in ptrs {
            assert_eq!(DiskPtr::unpack(p.pack(), 9), DiskPtr { key_len: 9, ..p });
        }
        // Scales: the fewest 32nds covering what is needed, only when a page is saved.
        assert_eq!(extent_scale(10, 4), Some(10));
        assert_eq!(scaled_pages(10, 10), 4);
        assert_eq!(extent_scale(10, 10), None);
        assert_eq!(extent_scale(2, 1), Some(1));
    }

    #[test]
    fn compressed_values_round_trip_take_less_room_and_compact_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0003.ssd");
        let p2 = path.clone();
        run(move || async move {
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            st.set_codec(Codec::Zstd);
            assert_eq!(st.codec(), Codec::Zstd);
            // (value, stored compressed?)
            let cases: Vec<(Vec<u8>, bool)> = vec![
                (letters(1, 1000), true),
                (noise(2, 1000), false),
                (letters(3, 100), false), // under MIN_COMPRESS
                (letters(4, 20_000), true),
                (noise(5, 20_000), false),
                // 3 KB: its extent is one page either way, so nothing to save.
                (letters(6, 3000), false),
                (b"{\"id\":17,\"name\":\"x\"}".repeat(60), true),
            ];
            let keys: Vec<Vec<u8>> = (0..cases.len())
                .map(|i| format!("z:{i}").into_bytes())
                .collect();
            let items: Vec<(&[u8], &[u8])> = keys
                .iter()
                .zip(&cases)
                .map(|(k, (v, _))| (k.as_slice(), v.as_slice()))
                .collect();
            let ptrs: Vec<DiskPtr> = st
                .write_batch(&items)
                .await
                .into_iter()
                .map(|r| r.unwrap())
                .collect();
            for ((p, k), (v, packed)) in ptrs.iter().zip(&keys).zip(&cases) {
                assert_eq!(p.compressed(), *packed, "{} bytes", v.len());
                assert_eq!(
                    p.len as usize,
                    v.len(),
                    "the pointer keeps the client's length"
                );
                assert_eq!(DiskPtr::unpack(p.pack(), k.len()), *p);
                assert_eq!(&st.read(*p, k).await.unwrap(), v);
            }
            let s = st.stats();
            assert_eq!(s.compressed, 3);
            assert!(
                s.stored_bytes < s.value_bytes,
                "{} of {}",
                s.stored_bytes,
                s.value_bytes
            );
            // The 20 KB text value takes 3 pages, not 5 (~0.6 of them, rounded up).
            assert_eq!(ptrs[3].pages(), 3);
            assert_eq!(ptrs[4].pages(), 5);
            // Compaction moves a compressed entry as it lies on disk, without recompressing.
            let entries = st.read_page(ptrs[0].page).await.unwrap();
            let (_, k, (stored, codec)) = entries
                .iter()
                .find(|(off, _, _)| *off == ptrs[0].offset)
                .expect("the entry is on its page");
            assert_eq!((k.as_slice(), *codec), (&keys[0][..], Codec::Zstd));
            assert_eq!(stored.len(), ptrs[0].stored_len());
            let moved = st
                .write_batch_compacting(&[StoredItem {
                    key: k,
                    bytes: Cow::Borrowed(stored),
                    codec: *codec,
                    len: ptrs[0].len,
                    scale: 0,
                }])
                .await
                .remove(0)
                .unwrap();
            assert_ne!(moved.page, ptrs[0].page);
            assert_eq!(moved.packed, ptrs[0].packed);
            assert_eq!(st.read(moved, &keys[0]).await.unwrap(), cases[0].0);
            // A flipped byte in a compressed entry is a checksum error, never other bytes.
            {
                use std::os::unix::fs::FileExt;
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p2)
                    .unwrap();
                let pos = moved.page as u64 * PAGE + moved.offset as u64 + 20;
                let mut b = [0u8; 1];
                f.read_exact_at(&mut b, pos).unwrap();
                b[0] ^= 0x10;
                f.write_all_at(&b, pos).unwrap();
                f.sync_all().unwrap();
            }
            assert_eq!(
                st.read(moved, &keys[0]).await,
                Err(TierError::Corrupt(Corrupt::Checksum))
            );
            // Freeing everything gives every page and byte back.
            for p in ptrs.iter().chain([&moved]) {
                st.free(*p);
            }
            let s = st.stats();
            assert_eq!(
                (s.entries, s.value_bytes, s.stored_bytes, s.compressed),
                (0, 0, 0, 0)
            );
            assert_eq!(s.used_bytes, PAGE, "only the header page stays");
        });
    }

    #[test]
    fn reads_in_flight_stay_within_the_read_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0004.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            st.set_read_budget(16 * PAGE);
            // 5-page extents: three fit the budget at a time.
            let keys: Vec<Vec<u8>> = (0..20).map(|i| format!("big:{i}").into_bytes()).collect();
            let vals: Vec<Vec<u8>> = (0..20).map(|i| noise(i as u64 + 1, 20_000)).collect();
            let (_, ptrs) = write_all(&st, &keys, &vals).await;
            assert!(ptrs.iter().all(|p| p.pages() == 5));
            let got =
                futures::future::join_all(ptrs.iter().zip(&keys).map(|(p, k)| st.read(*p, k)))
                    .await;
            for (g, v) in got.into_iter().zip(&vals) {
                assert_eq!(&g.unwrap(), v);
            }
            let s = st.stats();
            assert!(s.budget_waits >= 15, "{} reads waited", s.budget_waits);
            assert_eq!(s.peak_read_bytes, 15 * PAGE);
            // A read larger than the whole budget still goes, alone.
            let huge = noise(99, 100_000);
            let p = st.write_batch(&[(b"huge", &huge)]).await[0]
                .clone()
                .unwrap();
            assert_eq!(st.read(p, b"huge").await.unwrap(), huge);
            assert_eq!(st.stats().peak_read_bytes, 16 * PAGE);
        });
    }

    #[test]
    fn flipped_byte_is_an_error_not_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0001.ssd");
        let p2 = path.clone();
        run(move || async move {
            let st = TierStore::create(&path, 16 << 20).await.unwrap();
            let v = value(1, 500);
            let big = value(2, 20_000);
            let r = st.write_batch(&[(b"a", &v), (b"b", &big)]).await;
            let (pa, pb) = (r[0].clone().unwrap(), r[1].clone().unwrap());
            // Flip one byte of each value through a normal file handle.
            {
                use std::os::unix::fs::FileExt;
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p2)
                    .unwrap();
                for (ptr, at) in [(pa, pa.offset as u64 + 10), (pb, 5000)] {
                    let pos = ptr.page as u64 * PAGE + at;
                    let mut b = [0u8; 1];
                    f.read_exact_at(&mut b, pos).unwrap();
                    b[0] ^= 0x40;
                    f.write_all_at(&b, pos).unwrap();
                }
                f.sync_all().unwrap();
            }
            assert_eq!(
                st.read(pa, b"a").await,
                Err(TierError::Corrupt(Corrupt::Checksum))
            );
            assert_eq!(
                st.read(pb, b"b").await,
                Err(TierError::Corrupt(Corrupt::Checksum))
            );
            assert_eq!(st.stats().read_errors, 2);
        });
    }

    #[test]
    fn full_file_reports_no_space() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0002.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 8 * PAGE).await.unwrap();
            let big = value(3, 6 * PAGE as usize);
            let r = st.write_batch(&[(b"x", &big), (b"y", &big)]).await;
            assert!(r[0].is_ok());
            assert_eq!(r[1], Err(TierError::NoSpace));
            assert!(st.is_full());
            // The space is there again at once, with nothing else run in between: a full cache
            // frees and rewrites pages back to back.
            st.free(r[0].clone().unwrap());
            assert!(!st.is_full());
            assert_eq!(
                st.stats().used_bytes,
                PAGE,
                "only the header page stays allocated"
            );
            // Many times over: each round's freed space takes the next round's value.
            let mut held = st.write_batch(&[(b"y", &big)]).await.remove(0).unwrap();
            for round in 0..100 {
                assert_eq!(
                    st.write_batch(&[(b"z", &big)]).await[0],
                    Err(TierError::NoSpace),
                    "round {round}"
                );
                st.free(held);
                held = st.write_batch(&[(b"z", &big)]).await.remove(0).unwrap();
                assert_eq!(st.read(held, b"z").await, Ok(big.clone()), "round {round}");
            }
            assert_eq!(st.stats().full_events, 101);
        });
    }
}

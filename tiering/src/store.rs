//! [`TierStore`]: one shard's file on local SSD, written and read with O_DIRECT (glommio's DMA
//! file for writes, a ring of the tier's own for reads). It never blocks the shard: every I/O is
//! awaited, and the bookkeeping in between is plain single-threaded code.
//!
//! This module ties the store's parts together and keeps its counters ([`TierStats`]); each
//! part is a module of its own, with its share of `TierStore`'s methods:
//! - `pointer`: [`DiskPtr`], where a value lives, kept packed in 64 bits in RAM;
//! - `space`: which pages hold what, frees that wait for reads, holds and snapshots;
//! - `write`: batches packed into bins and extents, compressed when that pays;
//! - `read`: value reads, one I/O shared per page, within a byte budget, checked for CRC and
//!   owner;
//! - `error`: [`TierError`].
//!
//! It never decides what goes to disk or when to compact: that is the server's policy. The
//! file keeps its blocks (no hole punching): it is the tier's own, bounded by
//! `--tiered_max_file_size`, and removed at exit.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::DmaFile;

use crate::alloc::PAGE;
use crate::codec::{Codec, Coder};
use crate::page;
use crate::read::Reads;
use crate::space::Space;

// The parts' public types, where the server has always found them.
pub use crate::error::TierError;
pub use crate::pointer::{DiskPtr, COMPRESSED_PAGES, MAX_TAGGED_VALUE, MAX_VALUE};
pub use crate::read::PageEntry;
pub use crate::space::SpaceHold;
pub use crate::write::StoredItem;

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
    pub(crate) fn count_in(&mut self, ptr: &DiskPtr) {
        self.entries += 1;
        self.value_bytes += ptr.len as u64;
        self.stored_bytes += held_bytes(ptr);
        self.compressed += u64::from(ptr.compressed());
    }

    pub(crate) fn count_out(&mut self, ptr: &DiskPtr) {
        self.entries = self.entries.saturating_sub(1);
        self.value_bytes = self.value_bytes.saturating_sub(ptr.len as u64);
        self.stored_bytes = self.stored_bytes.saturating_sub(held_bytes(ptr));
        self.compressed = self.compressed.saturating_sub(u64::from(ptr.compressed()));
    }
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

/// One shard's tier file (see the module's comment).
pub struct TierStore {
    pub(crate) file: Rc<DmaFile>,
    pub(crate) path: PathBuf,
    /// Where values go in the file (see `space`).
    pub(crate) space: Space,
    /// Reads in flight (see `read`).
    pub(crate) reads: Reads,
    /// Bytes the file has been grown to.
    pub(crate) file_len: Cell<u64>,
    pub(crate) grow_step: u64,
    pub(crate) stats: RefCell<TierStats>,
    pub(crate) latency: RefCell<hdrhistogram::Histogram<u64>>,
    /// Compresses values on their way to disk (none until [`TierStore::set_codec`]) and
    /// decompresses them on the way back.
    pub(crate) coder: RefCell<Rc<Coder>>,
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
        let reads = Reads::new(&file);
        Ok(Rc::new(TierStore {
            file: Rc::new(file),
            path: path.to_path_buf(),
            space: Space::new(capacity),
            reads,
            file_len: Cell::new(PAGE),
            grow_step: (max_bytes / 16).clamp(PAGE * 256, 256 << 20),
            stats: RefCell::new(TierStats::default()),
            latency: RefCell::new(latency),
            coder: RefCell::new(Rc::new(Coder::new(Codec::None))),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Compresses values written from now on with `codec` (values already on disk keep theirs:
    /// each entry records its own). A file too large for compressed pointers (see
    /// [`COMPRESSED_PAGES`]) keeps writing values as they are, and says so.
    pub fn set_codec(&self, codec: Codec) {
        let codec = if codec != Codec::None
            && self.space.allocator().capacity_pages() > COMPRESSED_PAGES
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

    /// The codec new values are written with.
    pub fn codec(&self) -> Codec {
        self.coder.borrow().codec()
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

    /// True while a batch of writes is on its way to the disk.
    pub fn writes_in_flight(&self) -> bool {
        self.stats.borrow().pending_writes > 0
    }

    pub fn stats(&self) -> TierStats {
        let mut st = self.stats.borrow().clone();
        let a = self.space.allocator();
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
pub(crate) mod tests {
    use super::*;
    use crate::page::Corrupt;
    use glommio::LocalExecutorBuilder;

    pub(crate) fn run<F: std::future::Future<Output = ()> + 'static>(
        f: impl FnOnce() -> F + Send + 'static,
    ) {
        LocalExecutorBuilder::default()
            .io_memory(4 << 20)
            .spawn(move || async move { f().await })
            .expect("executor")
            .join()
            .expect("join");
    }

    /// Writes every (key, value) in one batch; returns the items and their pointers.
    pub(crate) async fn write_all<'a>(
        st: &TierStore,
        keys: &'a [Vec<u8>],
        vals: &'a [Vec<u8>],
    ) -> (Vec<(&'a [u8], &'a [u8])>, Vec<DiskPtr>) {
        let items: Vec<(&[u8], &[u8])> = keys
            .iter()
            .zip(vals)
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let ptrs = write_ok(st, &items).await;
        (items, ptrs)
    }

    /// Writes `items` in one batch; returns their pointers (every write must succeed).
    pub(crate) async fn write_ok(st: &TierStore, items: &[(&[u8], &[u8])]) -> Vec<DiskPtr> {
        st.write_batch(items)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect()
    }

    pub(crate) fn value(i: usize, len: usize) -> Vec<u8> {
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
}

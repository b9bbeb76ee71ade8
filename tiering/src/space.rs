//! Where values go in the tier file: the pages handed out and given back, the live entries of
//! each small page, and the frees that must wait.
//!
//! It owns the allocator ([`crate::alloc`]), the account of live entries per small page (a page
//! goes back once no live entry starts in or runs into it), the count of reads and
//! [`SpaceHold`]s on each page, the frees deferred until those end, the frees held while a
//! snapshot may still read ([`TierStore::hold_frees`]), the reserve kept for compaction and the
//! file-full state. Freed space goes back to the allocator, to be written again at once.
//!
//! Plain single-threaded bookkeeping: it never does I/O or awaits, and it never hands out space
//! that a read in flight, a hold or a held snapshot may still read.

use std::cell::{Cell, Ref, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::alloc::{ExtentAllocator, PAGE};
use crate::page;
use crate::pointer::DiskPtr;
use crate::store::TierStore;

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

/// "Tier file full" is logged at most this often.
const FULL_LOG_EVERY: Duration = Duration::from_secs(60);

/// The space of one tier file (see the module's comment).
pub(crate) struct Space {
    alloc: RefCell<ExtentAllocator>,
    /// Live small entries per page of the file, indexed by page number.
    pages: RefCell<Vec<PageLive>>,
    /// Where the next search for sparse pages starts (they are found in turn, not always the
    /// lowest first).
    sparse_cursor: Cell<usize>,
    /// Bumped whenever a page's live bytes change (an entry written or freed).
    page_changes: Cell<u64>,
    /// The last search that went over the whole map: its `below`, the change count then, and
    /// what it found. Until a page changes, the same search finds the same, and an idle
    /// server would walk a large file's map every tick for it.
    sparse_seen: RefCell<Option<(u64, u64, Vec<u32>)>>,
    /// Reads in flight per first page, and frees waiting for them.
    readers: RefCell<HashMap<u32, usize>>,
    deferred: RefCell<Vec<(u64, u64)>>,
    /// While a snapshot may still read values, frees wait here (see [`TierStore::hold_frees`]).
    held: RefCell<Option<Vec<DiskPtr>>>,
    full: Cell<bool>,
    /// When "file full" was last logged, and the count of full events then.
    full_logged: Cell<Option<(Instant, u64)>>,
}

impl Space {
    /// The space of a file of at most `capacity_pages`, its first page (the header) taken.
    pub(crate) fn new(capacity_pages: u64) -> Space {
        let mut alloc = ExtentAllocator::new(capacity_pages);
        alloc.alloc(1); // the header page
        Space {
            alloc: RefCell::new(alloc),
            pages: RefCell::new(Vec::new()),
            sparse_cursor: Cell::new(0),
            page_changes: Cell::new(0),
            sparse_seen: RefCell::new(None),
            readers: RefCell::new(HashMap::new()),
            deferred: RefCell::new(Vec::new()),
            held: RefCell::new(None),
            full: Cell::new(false),
            full_logged: Cell::new(None),
        }
    }

    /// The allocator, to look at (pages used, holes, capacity).
    pub(crate) fn allocator(&self) -> Ref<'_, ExtentAllocator> {
        self.alloc.borrow()
    }

    /// Pages a write may take: all for compaction, all but the reserve otherwise.
    pub(crate) fn take_pages(&self, pages: u64, compacting: bool) -> Option<u64> {
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

    /// The most pages [`take_pages`](Self::take_pages) would give one extent now (outside
    /// compaction): the longest free run, less the reserve kept for compaction.
    pub(crate) fn largest_run(&self) -> u64 {
        let a = self.alloc.borrow();
        let reserve = (a.capacity_pages() / 50).min(4096);
        let room = a.capacity_pages().saturating_sub(a.used_pages() + reserve);
        a.largest_free().min(room)
    }

    /// Gives back the pages a write took and failed to fill: nothing points at them.
    pub(crate) fn untake_pages(&self, start: u64, pages: u64) {
        self.alloc.borrow_mut().free(start, pages);
    }

    /// The file now covers `file_bytes`. The page map grows with the file, to its exact size:
    /// growing it by doubling would leave up to half its bytes unused (2 bytes per page of the
    /// file; RAM per offloaded key is what tiering is judged on).
    pub(crate) fn file_grew(&self, file_bytes: u64) {
        let pages = (file_bytes / PAGE) as usize + 1;
        let mut map = self.pages.borrow_mut();
        if map.capacity() < pages {
            let more = pages - map.len();
            map.reserve_exact(more);
        }
    }

    /// A bin of small entries was written to `pages` pages from `start`; its entries follow
    /// ([`Space::entry_written`]).
    pub(crate) fn bin_written(&self, start: u64, pages: u64) {
        let mut map = self.pages.borrow_mut();
        let end = (start + pages) as usize + 1;
        if map.len() < end {
            map.resize(end, PageLive::default());
        }
    }

    /// A live entry of `size` bytes starts in page `at`, running on into the next page when
    /// `runs_on`.
    pub(crate) fn entry_written(&self, at: usize, size: usize, runs_on: bool) {
        let mut map = self.pages.borrow_mut();
        self.page_changes.set(self.page_changes.get() + 1);
        map[at].add(size);
        if runs_on {
            map[at + 1].set_tail(true);
        }
    }

    /// Frees of pages `first..first + n` wait until [`Space::done_reading`].
    pub(crate) fn start_reading(&self, first: u32, n: u32) {
        let mut readers = self.readers.borrow_mut();
        for p in first..first + n {
            *readers.entry(p).or_insert(0) += 1;
        }
    }

    pub(crate) fn done_reading(&self, first: u32, n: u32) {
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

    /// Returns pages to the allocator now, or once no read is on any of them.
    fn release_unread(&self, start: u64, pages: u64) {
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

    /// Returns pages to the allocator, to be written again at once. Their blocks stay with the
    /// file (no hole is punched): the file is the tier's own, bounded by its budget, and a full
    /// cache frees and rewrites pages thousands of times a second. A punch per free (a slow
    /// `fallocate` each, a task waiting on each) let freed pages pile up allocated and the
    /// waiting tasks' memory grow past maxmemory.
    fn release(&self, start: u64, pages: u64) {
        self.alloc.borrow_mut().free(start, pages);
        self.full.set(false);
    }
}

/// The pages whose frees wait for a read of `ptr`: every page of a small value's entry; the
/// first page of an extent (freed whole, by its first page).
pub(crate) fn watched(ptr: DiskPtr) -> (u32, u32) {
    (ptr.page, if ptr.small() { ptr.pages() as u32 } else { 1 })
}

/// See [`TierStore::hold`].
pub struct SpaceHold {
    store: Rc<TierStore>,
    first: u32,
    n: u32,
}

impl Drop for SpaceHold {
    fn drop(&mut self) {
        self.store.space.done_reading(self.first, self.n);
    }
}

impl TierStore {
    /// True after a write failed for lack of space, until something is freed.
    pub fn is_full(&self) -> bool {
        self.space.full.get()
    }

    /// Counts the file becoming full; logs it the first time and then at most once a minute
    /// (a full cache's file fills again after each free, thousands of times a second).
    pub(crate) fn note_full(&self) {
        if !self.space.full.replace(true) {
            let events = {
                let mut st = self.stats.borrow_mut();
                st.full_events += 1;
                st.full_events
            };
            let now = Instant::now();
            let due = self
                .space
                .full_logged
                .get()
                .is_none_or(|(at, _)| now.duration_since(at) >= FULL_LOG_EVERY);
            if due {
                let since = events - self.space.full_logged.get().map_or(0, |(_, n)| n);
                self.space.full_logged.set(Some((now, events)));
                tracing::warn!(
                    file = %self.path.display(),
                    times = since,
                    "tier file full: offloading waits for space to be freed"
                );
            }
        }
    }

    /// Keeps the space of the value at `ptr` from being freed (and so handed out again) until
    /// the returned hold is dropped: a free of it waits, as for a read in flight. For a caller
    /// that keeps a value read from `ptr` beside the pointer and must know that whatever points
    /// at `ptr` later is still that value.
    pub fn hold(self: &Rc<Self>, ptr: DiskPtr) -> SpaceHold {
        let (first, n) = watched(ptr);
        self.space.start_reading(first, n);
        SpaceHold {
            store: self.clone(),
            first,
            n,
        }
    }

    /// From now until [`TierStore::release_frees`], freed values keep their space: a snapshot
    /// that captured a pointer before its key changed can still read the value it points at.
    pub fn hold_frees(&self) {
        let mut held = self.space.held.borrow_mut();
        if held.is_none() {
            *held = Some(Vec::new());
        }
    }

    /// Ends [`TierStore::hold_frees`] and carries out the frees that waited.
    pub fn release_frees(&self) {
        let waiting = self.space.held.borrow_mut().take();
        for p in waiting.into_iter().flatten() {
            self.free(p);
        }
    }

    /// True between [`TierStore::hold_frees`] and [`TierStore::release_frees`].
    pub fn frees_held(&self) -> bool {
        self.space.held.borrow().is_some()
    }

    /// Frees the space of the value at `ptr`.
    pub fn free(&self, ptr: DiskPtr) {
        if let Some(waiting) = self.space.held.borrow_mut().as_mut() {
            waiting.push(ptr);
            return;
        }
        self.stats.borrow_mut().count_out(&ptr);
        let runs: Vec<(u64, u64)> = if ptr.small() {
            let mut map = self.space.pages.borrow_mut();
            let changes = &self.space.page_changes;
            changes.set(changes.get() + 1);
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
            self.space.release_unread(start, pages);
        }
    }

    /// Small pages whose live bytes fell under `below` (compaction candidates), `limit` at most.
    pub fn sparse_pages(&self, limit: usize, below: u64) -> Vec<u32> {
        let changes = self.space.page_changes.get();
        if let Some((b, c, found)) = &*self.space.sparse_seen.borrow() {
            if (*b, *c) == (below, changes) && found.len() <= limit {
                return found.clone();
            }
        }
        let map = self.space.pages.borrow();
        let n = map.len();
        let from = self.space.sparse_cursor.get().min(n);
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
        self.space.sparse_cursor.set(last);
        let whole = out.len() < limit;
        *self.space.sparse_seen.borrow_mut() = whole.then(|| (below, changes, out.clone()));
        out
    }

    /// Live values sharing the pages of `ptr` (1 for a large value): evicting a value alone on
    /// its page frees the page.
    pub fn page_entries(&self, ptr: DiskPtr) -> u16 {
        if !ptr.small() {
            return 1;
        }
        self.space
            .pages
            .borrow()
            .get(ptr.page as usize)
            .map_or(1, |l| l.count().max(1))
    }

    /// Whether a value of `len` bytes under `key` would find an extent now: cheap (O(log n)),
    /// so a caller can leave a large value in RAM without encoding or writing it. A batch's
    /// own earlier items are not counted: its write may still answer `NoSpace`.
    pub fn fits_extent(&self, key_len: usize, len: usize) -> bool {
        self.space.largest_run() >= page::extent_pages(key_len, len)
    }

    /// (bytes live values take in the file, bytes allocated in the file, the file's size
    /// limit): cheap, for decisions on the hot path.
    pub fn space(&self) -> (u64, u64, u64) {
        let a = self.space.alloc.borrow();
        (
            self.stats.borrow().stored_bytes,
            a.used_pages() * PAGE,
            a.capacity_pages() * PAGE,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TierError;
    use crate::store::tests::{run, value, write_all, write_ok};
    use crate::write::StoredItem;

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
                let ptrs = write_ok(&st, &items).await;
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
    fn sparse_pages_sees_every_free_though_it_remembers_its_last_search() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0009.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 16 << 20).await.unwrap();
            // Three 1000-byte values fill about three quarters of a page each; 12 of them
            // take four pages.
            let vals: Vec<Vec<u8>> = (0..12).map(|i| value(i, 1000)).collect();
            let items: Vec<(&[u8], &[u8])> =
                vals.iter().map(|v| (&b"k"[..], v.as_slice())).collect();
            let ptrs = write_ok(&st, &items).await;
            let half = PAGE / 2;
            let before = st.sparse_pages(64, half);
            assert_eq!(st.sparse_pages(64, half), before, "nothing changed");
            // Emptying most of one page makes it sparse; the remembered search must not hide it.
            let page = ptrs[0].page;
            let on_page: Vec<_> = ptrs.iter().filter(|p| p.page == page).collect();
            assert!(on_page.len() >= 2, "{on_page:?}");
            for p in &on_page[1..] {
                st.free(**p);
            }
            let after = st.sparse_pages(64, half);
            assert!(after.contains(&page), "{after:?} lacks page {page}");
            assert_eq!(st.sparse_pages(64, half), after);
            // Another threshold is another search.
            assert!(st.sparse_pages(64, 1).is_empty());
            // A write changes pages too.
            let more = value(99, 1000);
            write_ok(&st, &[(b"m", more.as_slice())]).await;
            st.free(*on_page[0]);
            assert!(!st.sparse_pages(64, half).contains(&page));
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

//! Value reads from the tier file: [`TierStore::read`], and compaction's
//! [`TierStore::read_page`].
//!
//! It owns the reads in flight: the tier's own io_uring reader (see [`crate::uring`]), the joint
//! through which the readers of one small page share a single I/O, the guard ([`Reading`]) that
//! gives back what a read holds however it ends, and the budget that bounds the bytes of reads
//! in flight ([`TierStore::set_read_budget`]).
//!
//! It never blocks the shard (a read waits only by awaiting), and never returns bytes that
//! failed their CRC or belong to another key: those are errors the caller turns into misses.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Instant;

use futures::future::{FutureExt, LocalBoxFuture};
use glommio::io::DmaFile;
use glommio::sync::Semaphore;

use crate::alloc::PAGE;
use crate::codec::Codec;
use crate::error::{io_err, TierError};
use crate::page::{self, Corrupt, StoredValue};
use crate::pointer::DiskPtr;
use crate::space::watched;
use crate::store::TierStore;
use crate::uring::DirectReader;

/// Bytes of value reads in flight per shard until [`TierStore::set_read_budget`].
const DEFAULT_READ_BUDGET: u64 = 16 << 20;

/// One entry of a page read back for compaction: (offset, key, value as stored).
pub type PageEntry = (u16, Vec<u8>, StoredValue);

/// The reads of one tier file in flight (see the module's comment).
pub(crate) struct Reads {
    /// Value reads go through a ring of their own when one could be set up (see `uring`);
    /// glommio's DMA reads otherwise.
    direct: Option<Rc<DirectReader>>,
    /// The read of each small page in flight, shared by all its readers.
    inflight: RefCell<HashMap<u32, Rc<Joint>>>,
    /// Value reads in flight take pages from here (see [`TierStore::set_read_budget`]).
    gate: RefCell<Rc<Semaphore>>,
    gate_pages: Cell<u64>,
}

impl Reads {
    /// Reads of `file`: through a ring of their own, delivered by a task of their own until
    /// [`TierStore::reap_externally`]; through glommio's rings when no ring can be set up.
    pub(crate) fn new(file: &DmaFile) -> Reads {
        let direct = match DirectReader::new(file.as_raw_fd()) {
            Ok(d) => Some(Rc::new(d)),
            Err(e) => {
                tracing::warn!(
                    "tier reads go through glommio's rings: cannot set up a ring for them: {e}"
                );
                None
            }
        };
        if let Some(d) = &direct {
            glommio::spawn_local(crate::uring::reap_on_signal(Rc::downgrade(d))).detach();
        }
        Reads {
            direct,
            inflight: RefCell::new(HashMap::new()),
            gate: RefCell::new(Rc::new(Semaphore::new(DEFAULT_READ_BUDGET / PAGE))),
            gate_pages: Cell::new(DEFAULT_READ_BUDGET / PAGE),
        }
    }
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
            .reads
            .inflight
            .borrow()
            .get(&self.page)
            .is_some_and(|j| Rc::ptr_eq(j, &self.joint))
    }

    /// The I/O is over for good (finished, or left by its last reader): out of the in-flight
    /// map (when `mapped`) and of the pending count.
    fn retire(&self, mapped: bool) {
        if mapped {
            self.store.reads.inflight.borrow_mut().remove(&self.page);
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
        self.store.space.done_reading(self.page, self.watched);
    }
}

/// The bytes of one page read: the tier ring's buffer, handed over without a copy, or
/// glommio's when the file has no ring of its own.
pub(crate) enum Pages {
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

impl TierStore {
    /// Value reads in flight cover at most `bytes` of the file together (one read at a time
    /// when a single one is larger); later reads wait their turn. Each byte read is held two
    /// or three times over until its value is out (the I/O buffer, the page, the value), and
    /// clients can ask for any number of values at once: without a bound, one pipeline of
    /// GETs of large offloaded values takes the process past maxmemory. Set before the first
    /// read.
    pub fn set_read_budget(&self, bytes: u64) {
        let pages = (bytes / PAGE).max(2);
        *self.reads.gate.borrow_mut() = Rc::new(Semaphore::new(pages));
        self.reads.gate_pages.set(pages);
    }

    /// Hands the delivery of value reads to the caller: it must call [`TierStore::reap`] on
    /// every pass of its loop and when the returned fd (readable when a read completes) fires.
    /// Until then the store delivers them itself, through glommio (a wait on that fd per
    /// wake-up: fine for tools and tests, too many syscalls for a busy server). None when
    /// reads use glommio's rings.
    pub fn reap_externally(&self) -> Option<std::os::fd::RawFd> {
        self.reads.direct.as_ref().map(|d| {
            d.reap_externally();
            d.completion_fd()
        })
    }

    /// Delivers completed value reads to their waiters; cheap when there are none. `signalled`
    /// when the fd of [`TierStore::reap_externally`] fired (it is drained then). True when it
    /// woke a waiter.
    pub fn reap(&self, signalled: bool) -> bool {
        let Some(d) = &self.reads.direct else {
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
        if let Some(d) = &self.reads.direct {
            d.set_batching(on);
        }
    }

    /// Reads the value of `key` at `ptr`, sharing the I/O with concurrent reads of the same
    /// page. Bytes stored for another key are an error ([`Corrupt::Owner`]), never returned.
    pub async fn read(&self, ptr: DiskPtr, key: &[u8]) -> Result<Vec<u8>, TierError> {
        let started = Instant::now();
        let pages = ptr.pages();
        // A read joining one in flight adds no bytes; any other waits for room in the budget
        // (a read larger than all of it, for all of it). A closed gate cannot happen (it is
        // never closed); reading on without a permit would be the fallback.
        let joins =
            ptr.small() && pages == 1 && self.reads.inflight.borrow().contains_key(&ptr.page);
        let _permit = if joins {
            None
        } else {
            let gate = self.reads.gate.borrow().clone();
            let units = pages.min(self.reads.gate_pages.get());
            if gate.available() < units {
                self.stats.borrow_mut().budget_waits += 1;
            }
            let permit = gate.acquire_static_permit(units).await.ok();
            let in_use = self.reads.gate_pages.get() - gate.available();
            let mut st = self.stats.borrow_mut();
            st.peak_read_bytes = st.peak_read_bytes.max(in_use * PAGE);
            permit
        };
        // Reads of one small page share one I/O; an entry running on into the next page, or an
        // extent, is read on its own.
        let coalesce = ptr.small() && pages == 1;
        // Frees of these pages wait for the read.
        let (_, watched) = watched(ptr);
        self.space.start_reading(ptr.page, watched);
        let joint = {
            let mut inflight = self.reads.inflight.borrow_mut();
            match inflight.get(&ptr.page) {
                Some(j) if coalesce => {
                    self.stats.borrow_mut().coalesced_reads += 1;
                    j.clone()
                }
                _ => {
                    let file = self.file.clone();
                    let (pos, len) = (ptr.page as u64 * PAGE, (pages * PAGE) as usize);
                    // Submitted now, not at the first await (see `uring`).
                    let direct = self.reads.direct.as_ref().map(|d| d.read(pos, len));
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

    /// Reads `len` bytes at `pos` (both whole pages), unverified, through the tier's ring when
    /// it has one; the caller holds frees of those pages (a stream of one extent's parts, see
    /// `stream`), and counts what it read.
    pub(crate) async fn read_span(&self, pos: u64, len: usize) -> Result<Pages, TierError> {
        let pages = len as u64 / PAGE;
        let gate = self.reads.gate.borrow().clone();
        let units = pages.min(self.reads.gate_pages.get());
        if gate.available() < units {
            self.stats.borrow_mut().budget_waits += 1;
        }
        let _permit = gate.acquire_static_permit(units).await.ok();
        let r = match self.reads.direct.as_ref().map(|d| d.read(pos, len)) {
            Some(read) => Pages::Direct(read.await.map_err(io_err)?),
            None => Pages::Dma(self.file.read_at_aligned(pos, len).await.map_err(io_err)?),
        };
        if r.len() != len {
            return Err(TierError::Io(format!(
                "short read: {} of {len} bytes",
                r.len()
            )));
        }
        let mut st = self.stats.borrow_mut();
        st.reads += 1;
        st.bytes_read += pages * PAGE;
        Ok(r)
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
        self.space.start_reading(first, n);
        let r = self
            .file
            .read_at_aligned(first as u64 * PAGE, (n as u64 * PAGE) as usize)
            .await
            .map_err(io_err);
        self.space.done_reading(first, n);
        let buf = r?;
        if buf.len() != (n as u64 * PAGE) as usize {
            return Err(TierError::Io(format!("short read: {} bytes", buf.len())));
        }
        Ok(buf.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::{run, value, write_all};
    use crate::testdata::noise;

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
            // Three readers of one page; the one whose poll started the I/O goes first. The
            // reads stay queued until all three have polled: a read the disk served before its
            // first poll would leave nothing to drop midway.
            st.set_batching(true);
            let mut first = Box::pin(st.read(ptrs[0], &keys[0]));
            assert!(futures::poll!(first.as_mut()).is_pending());
            let mut a = Box::pin(st.read(ptrs[1], &keys[1]));
            let mut b = Box::pin(st.read(ptrs[2], &keys[2]));
            assert!(futures::poll!(a.as_mut()).is_pending());
            assert!(futures::poll!(b.as_mut()).is_pending());
            st.set_batching(false);
            drop(first);
            assert_eq!(a.await.unwrap(), vals[1]);
            assert_eq!(b.await.unwrap(), vals[2]);
            let s = st.stats();
            assert_eq!((s.reads, s.coalesced_reads, s.pending_reads), (1, 2, 0));
            // Alone, a small read and an extent read dropped midway leave nothing behind.
            st.set_batching(true);
            assert!(st.read(ptrs[3], &keys[3]).now_or_never().is_none());
            assert!(st.read(ptrs[8], &keys[8]).now_or_never().is_none());
            st.set_batching(false);
            assert!(st.reads.inflight.borrow().is_empty());
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
            // Every read asks for its share before any reaches the disk (batching holds them
            // queued): one served before the next asked would leave that one room.
            st.set_batching(true);
            let mut reads = std::pin::pin!(futures::future::join_all(
                ptrs.iter().zip(&keys).map(|(p, k)| st.read(*p, k))
            ));
            let _ = futures::poll!(reads.as_mut());
            st.set_batching(false);
            let got = reads.await;
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
}

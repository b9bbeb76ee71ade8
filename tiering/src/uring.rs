//! Tier reads on an io_uring of the tier's own, submitted the moment they are asked for and
//! reaped whenever the shard looks (see [`DirectReader::reap`]).
//!
//! Why not glommio's DMA reads: glommio queues a read until its run loop next polls its rings
//! (after the tasks already runnable have run) and notices the completion only at a later poll;
//! on a busy core that added ~60 us before submission and ~70 us after the device finished, on
//! reads the device serves in ~230 us, and every pipelined reply queued behind a read waited
//! for all of it. Here a read enters the kernel at once, or — while the server's socket driver
//! is busy and will look again after the tasks it woke ([`DirectReader::set_batching`]) — with
//! every read asked for in that round, in one `io_uring_enter`: on a virtual disk each enter
//! that carries reads costs a doorbell (a VM exit) of several microseconds, and batching them
//! was worth +14% GET/s on the 32 x 4 hot run. A completion is seen by the next
//! [`DirectReader::reap`] — called by the driver on every pass — or, on an idle core, through
//! an eventfd the driver waits on. Writes stay with glommio: nothing waits on them.
//!
//! While a read is in flight its buffer is owned by the reader's slot table, never by the
//! future awaiting it: a future dropped before its read completes leaves the buffer with the
//! kernel until the completion arrives, and dropping the reader waits for every read still in
//! flight. A completed read hands the buffer itself to its caller (a [`PageBuf`], no copy),
//! which returns it to the reader's spares when dropped.

use std::alloc::Layout;
use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::rc::Rc;
use std::task::{Poll, Waker};

use io_uring::{opcode, types, IoUring};

/// Reads in flight at most; more wait for a free slot.
const DEPTH: u32 = 128;
/// Alignment of O_DIRECT buffers.
const ALIGN: usize = 4096;
/// A slot keeps its buffer for the next read up to this size (small values' two pages).
const KEEP_BUF: usize = 8192;

/// A heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> io::Result<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(ALIGN).next_multiple_of(ALIGN), ALIGN)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout has a non-zero size (at least ALIGN).
        let ptr = unsafe { std::alloc::alloc(layout) };
        NonNull::new(ptr)
            .map(|ptr| AlignedBuf { ptr, layout })
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "no memory for a read"))
    }

    fn capacity(&self) -> usize {
        self.layout.size()
    }

    /// The first `len` bytes (at most the capacity).
    fn bytes(&self, len: usize) -> &[u8] {
        // SAFETY: the allocation holds `capacity` bytes; the kernel wrote the `len` read ones
        // before the completion this is called after, and nothing writes them meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len.min(self.capacity())) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Spare page buffers of a reader, for its slots to take instead of allocating: a completed
/// read hands its slot's buffer to the caller (a [`PageBuf`]), which gives it back here when
/// dropped. Copying the page out and letting the slot keep its buffer cost a 4 KiB copy and a
/// 4 KiB allocation per read; glibc serves that size from its bins, not its per-thread cache.
type Spares = Rc<RefCell<Vec<AlignedBuf>>>;

/// Spare buffers kept at most: one per slot (more are freed).
const SPARES: usize = DEPTH as usize;

/// The bytes of one completed read: the buffer the kernel wrote, owned by the caller, which
/// goes back to the reader's spares when dropped.
pub struct PageBuf {
    buf: Option<AlignedBuf>,
    len: usize,
    spares: Spares,
}

impl std::ops::Deref for PageBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |b| b.bytes(self.len))
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        let Some(b) = self.buf.take() else {
            return;
        };
        if b.capacity() <= KEEP_BUF {
            if let Ok(mut spares) = self.spares.try_borrow_mut() {
                if spares.len() < SPARES {
                    spares.push(b);
                }
            }
        }
    }
}

enum State {
    Free,
    /// Submitted; the waker of the future awaiting it.
    Pending(Option<Waker>),
    /// Completed with this result (bytes read or -errno), not yet taken.
    Done(i32),
    /// Its future went away: the slot frees itself when the completion arrives.
    Abandoned,
}

struct Slot {
    state: State,
    /// Kept across reads (reallocated when too small); the kernel writes into it while the
    /// state is `Pending` or `Abandoned`.
    buf: Option<AlignedBuf>,
}

struct Inner {
    ring: IoUring,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Futures waiting for a free slot. All are woken when one frees (a waker may be stale:
    /// its future got a slot another way or went away), and those still without one wait
    /// again.
    waiting: Vec<Waker>,
    in_flight: usize,
}

/// Reads of one O_DIRECT file on a ring of their own. Single-threaded (one per shard).
pub struct DirectReader {
    fd: RawFd,
    inner: RefCell<Inner>,
    eventfd: OwnedFd,
    /// Someone else watches the eventfd and reaps (the server's socket driver):
    /// [`reap_on_signal`] stops.
    external: std::cell::Cell<bool>,
    /// Reads are queued and go to the kernel together at the next [`DirectReader::reap`]
    /// (see [`DirectReader::set_batching`]).
    batching: std::cell::Cell<bool>,
    spares: Spares,
}

impl DirectReader {
    /// A reader for `fd` (an O_DIRECT file that outlives the reader).
    pub fn new(fd: RawFd) -> io::Result<DirectReader> {
        // Completions run as task work when this thread next leaves the kernel (it does so
        // all the time: socket calls) instead of through an interrupt to it; a kernel without
        // that option gets a plain ring.
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_single_issuer()
            .build(DEPTH)
            .or_else(|_| IoUring::new(DEPTH))?;
        // SAFETY: eventfd takes no pointers; a non-negative result is a new fd we own.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `efd` was just created and is owned by nobody else.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        let slots = (0..DEPTH)
            .map(|_| Slot {
                state: State::Free,
                buf: None,
            })
            .collect();
        Ok(DirectReader {
            fd,
            inner: RefCell::new(Inner {
                ring,
                slots,
                free: (0..DEPTH).rev().collect(),
                waiting: Vec::new(),
                in_flight: 0,
            }),
            eventfd,
            external: std::cell::Cell::new(false),
            batching: std::cell::Cell::new(false),
            spares: Rc::new(RefCell::new(Vec::new())),
        })
    }

    /// Readable whenever a completion has been posted since it was last drained: for an idle
    /// core to wait on (then call [`DirectReader::reap`]).
    pub fn completion_fd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }

    /// Reads `len` bytes at `pos` (both multiples of 4 KiB). Submitted when called, before the
    /// first await; fewer bytes come back at the end of the file.
    pub fn read(
        self: &Rc<Self>,
        pos: u64,
        len: usize,
    ) -> impl std::future::Future<Output = io::Result<PageBuf>> + 'static {
        let mut ticket = Ticket {
            reader: self.clone(),
            id: None,
            done: false,
        };
        let mut failed = match self.submit(pos, len) {
            Ok(id) => {
                ticket.id = id;
                None
            }
            Err(e) => Some(e),
        };
        poll_fn(move |cx| {
            // The whole ticket lives in the future (not copies of its fields): its drop is
            // what abandons a read that did not finish.
            let ticket = &mut ticket;
            let this = ticket.reader.clone();
            if let Some(e) = failed.take() {
                return Poll::Ready(Err(e));
            }
            // Collects completions; queued reads stay queued while batching.
            this.collect(!this.batching.get());
            if ticket.id.is_none() {
                // No free slot when it was asked for: try again.
                match this.submit(pos, len) {
                    Ok(id) => ticket.id = id,
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            let Some(id) = ticket.id else {
                // Still none: wait until one frees.
                this.inner.borrow_mut().waiting.push(cx.waker().clone());
                return Poll::Pending;
            };
            let mut inner = this.inner.borrow_mut();
            let slot = &mut inner.slots[id as usize];
            match slot.state {
                State::Done(res) => {
                    let out = if res < 0 {
                        Err(io::Error::from_raw_os_error(-res))
                    } else {
                        // The read is over: its buffer is the caller's now (the slot takes a
                        // spare at its next read).
                        Ok(PageBuf {
                            buf: slot.buf.take(),
                            len: res as usize,
                            spares: this.spares.clone(),
                        })
                    };
                    inner.release(id);
                    ticket.done = true;
                    Poll::Ready(out)
                }
                State::Pending(ref mut w) => {
                    *w = Some(cx.waker().clone());
                    Poll::Pending
                }
                State::Free | State::Abandoned => {
                    ticket.done = true;
                    Poll::Ready(Err(io::Error::other("tier read slot lost its request")))
                }
            }
        })
    }

    /// Puts a read on the ring and enters the kernel; None when every slot is busy.
    fn submit(&self, pos: u64, len: usize) -> io::Result<Option<u32>> {
        let mut inner = self.inner.borrow_mut();
        let Some(id) = inner.free.pop() else {
            return Ok(None);
        };
        let len32 = u32::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "read too long"))?;
        let slot = &mut inner.slots[id as usize];
        if slot.buf.is_none() && len <= KEEP_BUF {
            slot.buf = self.spares.borrow_mut().pop();
        }
        if slot.buf.as_ref().is_none_or(|b| b.capacity() < len) {
            slot.buf = None;
            match AlignedBuf::new(len) {
                Ok(b) => slot.buf = Some(b),
                Err(e) => {
                    inner.free.push(id);
                    return Err(e);
                }
            }
        }
        let Some(ptr) = slot.buf.as_ref().map(|b| b.ptr.as_ptr()) else {
            inner.free.push(id);
            return Err(io::Error::other("no buffer"));
        };
        let sqe = opcode::Read::new(types::Fd(self.fd), ptr, len32)
            .offset(pos)
            .build()
            .user_data(u64::from(id));
        slot.state = State::Pending(None);
        // SAFETY: the buffer is `len` bytes or more and stays allocated, untouched, until the
        // completion for `id` is reaped: the slot owns it, a dropped future only marks the
        // slot abandoned, and `Drop` waits for every read in flight.
        let pushed = unsafe { inner.ring.submission().push(&sqe) };
        if pushed.is_err() {
            // The submission queue is as deep as the slot table, so this cannot happen while
            // slots are accounted for; refuse the read rather than lose track of it.
            let slot = &mut inner.slots[id as usize];
            slot.state = State::Free;
            inner.free.push(id);
            return Err(io::Error::other("tier read queue full"));
        }
        inner.in_flight += 1;
        if !self.batching.get() {
            inner.enter();
        }
        Ok(Some(id))
    }

    /// While on, reads are queued and submitted together by the next [`DirectReader::reap`]:
    /// one `io_uring_enter` (and one doorbell to the device) for all the reads asked for in
    /// between, instead of one each. Only for a caller that reaps again soon (the socket
    /// driver, between rounds of the tasks it woke); turning it off submits what is queued.
    pub fn set_batching(&self, on: bool) {
        self.batching.set(on);
        if !on {
            let mut inner = self.inner.borrow_mut();
            if !inner.ring.submission().is_empty() {
                inner.enter();
            }
        }
    }

    /// Submits the queued reads and takes every posted completion, waking the futures waiting
    /// for them; true when it woke one. Cheap when nothing is in flight (two loads from shared
    /// memory); called on every pass of the socket driver.
    pub fn reap(&self) -> bool {
        self.collect(true)
    }

    /// [`DirectReader::reap`], submitting queued reads only when `submit`.
    fn collect(&self, submit: bool) -> bool {
        let mut inner = self.inner.borrow_mut();
        if inner.in_flight == 0 {
            return false;
        }
        let Inner {
            ring,
            slots,
            in_flight,
            ..
        } = &mut *inner;
        // Queued reads (batching, or an enter that failed) go in now.
        if submit && !ring.submission().is_empty() {
            let _ = ring.submit();
        }
        let mut woke = Vec::new();
        let mut abandoned = Vec::new();
        for cqe in ring.completion() {
            let id = cqe.user_data() as u32;
            let Some(slot) = slots.get_mut(id as usize) else {
                continue;
            };
            *in_flight = in_flight.saturating_sub(1);
            match std::mem::replace(&mut slot.state, State::Done(cqe.result())) {
                State::Pending(w) => woke.extend(w),
                State::Abandoned => abandoned.push(id),
                // A completion for a slot not in flight: keep what it was.
                other => slot.state = other,
            }
        }
        for id in abandoned {
            inner.release(id);
        }
        drop(inner);
        let any = !woke.is_empty();
        for w in woke {
            w.wake();
        }
        any
    }

    /// Empties the eventfd after it signalled (the driver calls this before [`reap`]).
    ///
    /// [`reap`]: DirectReader::reap
    pub fn drain_eventfd(&self) {
        drain_eventfd(self.eventfd.as_raw_fd());
    }

    /// From now on the caller watches [`DirectReader::completion_fd`] and calls
    /// [`DirectReader::reap`] (on every pass of its loop, and when the fd is readable): the
    /// task of [`reap_on_signal`] ends at its next wake-up.
    pub fn reap_externally(&self) {
        self.external.set(true);
    }

    /// Reads in flight (submitted, not yet reaped).
    pub fn in_flight(&self) -> usize {
        self.inner.borrow().in_flight
    }
}

/// Empties the non-blocking eventfd `fd` (resets its count; nothing happens when it is 0).
pub fn drain_eventfd(fd: RawFd) {
    let mut n = 0u64;
    // SAFETY: reads 8 bytes into `n`, which has room for them; a non-blocking eventfd.
    unsafe { libc::read(fd, (&mut n as *mut u64).cast(), std::mem::size_of::<u64>()) };
}

/// Parks the calling task until `fd` is readable, through glommio (so an idle core sleeps
/// until then). glommio arms a readiness poll for a stream it adopts and completes the first
/// read only once that poll fires, so a fresh stream over a duplicate of `fd` gives exactly
/// that wait (the read itself may fail: only the wait matters). If that ever returns without
/// waiting, it falls back to a short sleep rather than let a caller spin.
pub async fn wait_readable(fd: RawFd) {
    use futures::AsyncReadExt;
    // SAFETY: F_DUPFD_CLOEXEC takes no pointers; a non-negative result is a new fd we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
        return;
    }
    // SAFETY: `dup` is a fresh fd owned by nobody else; the stream closes it on drop.
    let mut waiter = unsafe { glommio::net::UnixStream::from_raw_fd(dup) };
    let mut byte = [0u8; 1];
    let mut read = std::pin::pin!(waiter.read(&mut byte));
    let mut first = true;
    let waited = poll_fn(|cx| {
        let r = read.as_mut().poll(cx);
        let was_first = first;
        first = false;
        match r {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(!was_first),
        }
    })
    .await;
    if !waited {
        glommio::timer::sleep(std::time::Duration::from_micros(200)).await;
    }
}

/// Reaps `reader`'s completions whenever its eventfd signals, for as long as it lives: what
/// delivers reads on a core where nothing else calls [`DirectReader::reap`]. Spawn once per
/// reader, on its core.
pub async fn reap_on_signal(reader: std::rc::Weak<DirectReader>) {
    loop {
        let Some(fd) = reader
            .upgrade()
            .filter(|r| !r.external.get())
            .map(|r| r.completion_fd())
        else {
            return;
        };
        wait_readable(fd).await;
        let Some(r) = reader.upgrade() else {
            return;
        };
        r.drain_eventfd();
        r.reap();
    }
}

impl Inner {
    /// Hands the queued reads to the kernel.
    fn enter(&mut self) {
        if let Err(e) = self.ring.submit() {
            // EAGAIN/EBUSY: the kernel takes them at the next enter (the next read or reap).
            if !matches!(
                e.raw_os_error(),
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::EINTR)
            ) {
                tracing::warn!("tier read submission failed: {e}");
            }
        }
    }

    /// Frees slot `id` (its read is over and taken) and wakes every read waiting for one. A
    /// buffer grown for a large value is let go rather than kept for the next read.
    fn release(&mut self, id: u32) {
        let slot = &mut self.slots[id as usize];
        slot.state = State::Free;
        if slot.buf.as_ref().is_some_and(|b| b.capacity() > KEEP_BUF) {
            slot.buf = None;
        }
        self.free.push(id);
        for w in self.waiting.drain(..) {
            w.wake();
        }
    }
}

/// A read's claim on its slot: if its future is dropped before the read completed, the slot
/// is left to the completion (abandoned) rather than reused while the kernel writes into it.
struct Ticket {
    reader: Rc<DirectReader>,
    id: Option<u32>,
    done: bool,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(id) = self.id.filter(|_| !self.done) else {
            return;
        };
        let mut inner = self.reader.inner.borrow_mut();
        match inner.slots[id as usize].state {
            // Completed but not taken: the slot is free again.
            State::Done(_) => inner.release(id),
            State::Pending(_) => inner.slots[id as usize].state = State::Abandoned,
            State::Free | State::Abandoned => {}
        }
    }
}

impl Drop for DirectReader {
    fn drop(&mut self) {
        // The kernel may still write into buffers of reads in flight: wait for all of them
        // before the slot table (and its buffers) goes.
        let inner = self.inner.get_mut();
        while inner.in_flight > 0 {
            if inner.ring.submit_and_wait(1).is_err() {
                break;
            }
            let n = inner.ring.completion().count();
            inner.in_flight = inner.in_flight.saturating_sub(n);
        }
        if inner.in_flight > 0 {
            // Could not wait: leak the buffers rather than free memory the kernel may write.
            for slot in &mut inner.slots {
                if let Some(b) = slot.buf.take() {
                    std::mem::forget(b);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    /// Runs `f` to completion, reaping between polls (what the server's socket driver does).
    fn block_on<F: std::future::Future>(r: &DirectReader, f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            r.reap();
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    #[test]
    fn reads_what_was_written_and_reports_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..64 * 4096u32)
            .map(|i| (i * 7 + i / 4096) as u8)
            .collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path);
        // Some filesystems (tmpfs) refuse O_DIRECT: read through the page cache then.
        let file = file.or_else(|_| std::fs::File::open(&path)).unwrap();
        let r = Rc::new(DirectReader::new(file.as_raw_fd()).unwrap());
        // Many at once, more than the slot table holds.
        let futs: Vec<_> = (0..300u64)
            .map(|i| {
                let page = (i * 13) % 63;
                let r = r.clone();
                async move { (page, r.read(page * 4096, 8192).await) }
            })
            .collect();
        for (page, got) in block_on(&r, futures::future::join_all(futs)) {
            let p = page as usize * 4096;
            assert_eq!(&got.unwrap()[..], &data[p..p + 8192]);
        }
        assert_eq!(r.in_flight(), 0);
        // Past the end: a short read, not an error.
        let got = block_on(&r, r.read(64 * 4096, 4096)).unwrap();
        assert!(got.is_empty());
        drop(got);
        // A large read (an extent) gets a buffer of its own size, not kept afterwards.
        let got = block_on(&r, r.read(0, 16 * 4096)).unwrap();
        assert_eq!(&got[..], &data[..16 * 4096]);
        drop(got);
        assert!(r
            .inner
            .borrow()
            .slots
            .iter()
            .all(|s| s.buf.as_ref().is_none_or(|b| b.capacity() <= KEEP_BUF)));
        // Batching: reads wait in the queue until a reap hands them over together.
        r.set_batching(true);
        let futs: Vec<_> = (0..8u64).map(|i| r.read(i * 4096, 4096)).collect();
        assert_eq!(r.inner.borrow_mut().ring.submission().len(), 8);
        for (i, got) in block_on(&r, futures::future::join_all(futs))
            .into_iter()
            .enumerate()
        {
            assert_eq!(&got.unwrap()[..], &data[i * 4096..(i + 1) * 4096]);
        }
        // Turning it off hands over what is queued.
        let f = r.read(0, 4096);
        r.set_batching(false);
        assert!(r.inner.borrow_mut().ring.submission().is_empty());
        assert_eq!(&block_on(&r, f).unwrap()[..], &data[..4096]);
        // A dropped read leaves its slot to the completion; the reader goes on.
        drop(r.read(0, 4096));
        let got = block_on(&r, r.read(4096, 4096)).unwrap();
        assert_eq!(&got[..], &data[4096..8192]);
        // A buffer handed over stays the caller's while later reads reuse the spares (and a
        // large one is never kept).
        let spares = r.spares.borrow().len();
        assert!(spares > 0 && spares <= SPARES);
        assert!(r.spares.borrow().iter().all(|b| b.capacity() <= KEEP_BUF));
        let later: Vec<_> = (0..8u64)
            .map(|i| block_on(&r, r.read((8 + i) * 4096, 4096)).unwrap())
            .collect();
        assert_eq!(&got[..], &data[4096..8192]);
        for (i, b) in later.iter().enumerate() {
            assert_eq!(&b[..], &data[(8 + i) * 4096..(9 + i) * 4096]);
        }
        drop(later);
        // Buffers outliving their reader are simply freed.
        drop(r);
        drop(got);
    }
}

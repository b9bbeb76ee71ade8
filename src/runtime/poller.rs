//! Per-core socket readiness through one epoll instance, driven from a glommio task.
//!
//! Why not glommio's own sockets: they arm one io_uring poll per read, and every completion
//! that lands while the core is busy interrupts it (a task-work IPI). At one request per read
//! that doubled the CPU per request against redis-server's epoll loop. Here the sockets are
//! edge-triggered in one epoll set; the driver drains it with `epoll_wait(0)` while there is
//! work, and only when nothing is ready does it ask glommio to wake it once the epoll fd
//! itself becomes readable — one io_uring poll per idle period instead of one per request.
//!
//! An idle moment costs more than it looks: glommio's park re-arms and cancels its timers,
//! links its rings and issues a membarrier, ~30 us of CPU on a VM, and an all-in-RAM core
//! under a pipelined load idled ~10,000 times a second (a fifth of its CPU), a core serving
//! one request at a time once per request. So when nothing else is runnable, the driver
//! first sleeps in `epoll` itself until glommio's loop is due (it runs at least every
//! [`LOOP_EVERY`], for its timers; every [`NAP`] while a task awaits glommio's own file I/O,
//! which glommio submits only from its loop), and only when that passes with nothing (or the
//! sleep was interrupted by a completion on one of the thread's rings) does it park in
//! glommio. A client that pauses between requests thus costs a park per loop period, not
//! one per request.
//!
//! Another thread's wake reaches a glommio task through glommio, which tells the core only
//! when glommio itself sleeps. So a thread that sends this core work rings its [`Bell`],
//! which cuts a nap short (an eventfd in the epoll set) and makes the driver park in glommio
//! at its next idle moment, where glommio takes the wake; and while a task here waits for
//! another core's reply ([`remote_wait`]), the driver parks in glommio instead of napping.
//!
//! Everything here runs on one core: flags and wakers live in a `RefCell` slab.
//!
//! Never: blocks the core except in its own idle nap; knows about commands or shards.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// Longest sleep of the driver in `epoll` while a task awaits glommio's own file I/O (see
/// [`io_wait`]); otherwise a nap lasts until glommio's loop is due ([`LOOP_EVERY`]).
pub const NAP: Duration = Duration::from_micros(200);
/// Glommio runs its loop (timers, its rings' completions) at least this often while the
/// driver naps.
pub const LOOP_EVERY: Duration = Duration::from_millis(2);

thread_local! {
    /// Turns taken by the tasks started with [`spawn`] on this thread.
    static TURNS: Cell<u64> = const { Cell::new(0) };
}

fn turns() -> u64 {
    TURNS.with(|t| t.get())
}

thread_local! {
    /// Tasks of this thread waiting for another core's reply (see [`remote_wait`]).
    static REMOTE_WAITS: Cell<usize> = const { Cell::new(0) };
}

/// Held by a task while it waits for another core's reply: meanwhile the driver parks in
/// glommio rather than napping, so the reply's wake is taken at once.
pub struct RemoteWait(());

/// Marks a wait for another core's reply until the guard is dropped.
pub fn remote_wait() -> RemoteWait {
    REMOTE_WAITS.with(|c| c.set(c.get() + 1));
    RemoteWait(())
}

impl Drop for RemoteWait {
    fn drop(&mut self) {
        REMOTE_WAITS.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

thread_local! {
    /// Tasks of this thread that may await glommio's own file I/O (see [`io_wait`]).
    static IO_WAITS: Cell<usize> = const { Cell::new(0) };
}

/// Held by a task while it may await glommio's own file I/O (snapshot files, the tier's
/// writes): glommio hands queued requests to the kernel only when it runs its loop, so
/// meanwhile the driver's naps last at most [`NAP`].
pub struct IoWait(());

/// Marks a stretch of glommio file I/O until the guard is dropped.
pub fn io_wait() -> IoWait {
    IO_WAITS.with(|c| c.set(c.get() + 1));
    IoWait(())
}

impl Drop for IoWait {
    fn drop(&mut self) {
        IO_WAITS.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Rung by another thread once it has sent a core work (a mesh message): cuts that core's nap
/// short and has it run glommio's loop, which delivers the message.
pub struct Bell {
    /// The driver is (about to be) asleep in `epoll`.
    napping: AtomicBool,
    /// Rings so far.
    rung: AtomicU64,
    efd: OwnedFd,
}

impl Bell {
    pub fn new() -> io::Result<Arc<Bell>> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new fd we own.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        Ok(Arc::new(Bell {
            napping: AtomicBool::new(false),
            rung: AtomicU64::new(0),
            // SAFETY: `fd` was just created and is owned by nobody else.
            efd: unsafe { OwnedFd::from_raw_fd(fd) },
        }))
    }

    /// Called (from any thread) after sending the core work. The count and the flag pair up
    /// with the driver's (flag, then count) in sequentially consistent order: either the
    /// driver sees this ring before it naps, or this sees the nap and writes the eventfd.
    pub fn ring(&self) {
        self.rung.fetch_add(1, Ordering::SeqCst);
        if self.napping.load(Ordering::SeqCst) {
            let one = 1u64;
            // SAFETY: writes the 8 bytes of `one`; a non-blocking eventfd (a full counter
            // only means it is signalled already).
            unsafe { libc::write(self.efd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }

    fn drain(&self) {
        tiering::uring::drain_eventfd(self.efd.as_raw_fd());
    }
}

/// Starts `fut` as a task on this core, counting its turns: the driver naps only when no
/// other task ran or started since it last looked (a task that ran may have woken another,
/// queued after the driver). Every task of the server but the driver starts here.
pub fn spawn<T: 'static>(fut: impl Future<Output = T> + 'static) -> glommio::Task<T> {
    // A new task is runnable: that counts as a turn too.
    TURNS.with(|t| t.set(t.get().wrapping_add(1)));
    let mut fut = Box::pin(fut);
    glommio::spawn_local(poll_fn(move |cx| {
        TURNS.with(|t| t.set(t.get().wrapping_add(1)));
        fut.as_mut().poll(cx)
    }))
}

#[derive(Clone, Copy)]
enum Dir {
    Read,
    Write,
}

#[derive(Default)]
struct Slot {
    in_use: bool,
    readable: bool,
    writable: bool,
    /// The peer hung up or the socket failed: sticky, since no later edge will say so again.
    closed: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

/// Called on each pass of the driver with `true`, and with `false` when it is about to sleep
/// (see [`Poller::on_pass`]); returns whether it woke a task.
type PassHook = Box<dyn Fn(bool) -> bool>;

/// A watched fd's token and what to do when it is readable.
type Watch = (usize, Box<dyn Fn()>);

/// One epoll set and the readiness state of every socket in it.
pub struct Poller {
    epoll: OwnedFd,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    /// Called on every pass of the driver (the tier's read reaping).
    on_pass: RefCell<Vec<PassHook>>,
    /// Called when a watched fd becomes readable, by token.
    watched: RefCell<Vec<Watch>>,
    /// The driver may nap in `epoll` (see the module doc): set with the core's bell, cleared
    /// if the kernel refuses.
    nap: Cell<bool>,
    /// Naps may last until glommio's loop is due; false when glommio serves this core's
    /// requests of its own accord (see [`Poller::short_naps`]).
    long_naps: Cell<bool>,
    /// The kernel has `epoll_pwait2` (microsecond naps); cleared on ENOSYS.
    pwait2: Cell<bool>,
    bell: RefCell<Option<Arc<Bell>>>,
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl Poller {
    pub fn new() -> io::Result<Rc<Poller>> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a new fd we own.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Rc::new(Poller {
            // SAFETY: `fd` was just created and is owned by nobody else.
            epoll: unsafe { OwnedFd::from_raw_fd(fd) },
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            on_pass: RefCell::new(Vec::new()),
            watched: RefCell::new(Vec::new()),
            nap: Cell::new(false),
            long_naps: Cell::new(true),
            pwait2: Cell::new(true),
            bell: RefCell::new(None),
        }))
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: usize) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events,
            u64: token as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call; the kernel copies it.
        cvt(unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut ev) })?;
        Ok(())
    }

    fn alloc_slot(&self) -> usize {
        let mut slots = self.slots.borrow_mut();
        let token = self.free.borrow_mut().pop().unwrap_or_else(|| {
            slots.push(Slot::default());
            slots.len() - 1
        });
        slots[token] = Slot {
            in_use: true,
            ..Slot::default()
        };
        token
    }

    /// Runs `f(true)` on every pass of the driver: between the connections' turns while the
    /// core is busy, so work completed elsewhere (tier reads) is picked up without waiting for
    /// glommio; after such a call the driver comes back once the tasks now runnable have run.
    /// `f(false)` when the driver is about to sleep until a socket or a watched fd is ready.
    /// `f` returns whether it woke a task (then the driver does not sleep).
    pub fn on_pass(&self, f: PassHook) {
        self.on_pass.borrow_mut().push(f);
    }

    /// Calls `f` whenever `fd` (which outlives the poller) becomes readable, edge-triggered: an
    /// idle core wakes for it. `f` must consume what made it readable.
    pub fn watch(&self, fd: RawFd, f: Box<dyn Fn()>) -> io::Result<()> {
        let token = self.alloc_slot();
        let events = (libc::EPOLLIN | libc::EPOLLET) as u32;
        if let Err(e) = self.ctl(libc::EPOLL_CTL_ADD, fd, events, token) {
            self.release(token);
            return Err(e);
        }
        self.watched.borrow_mut().push((token, f));
        Ok(())
    }

    /// Adds a non-blocking stream socket (edge-triggered, read and write); returns its token.
    pub fn register(&self, fd: RawFd) -> io::Result<usize> {
        let token = self.alloc_slot();
        let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
        if let Err(e) = self.ctl(libc::EPOLL_CTL_ADD, fd, events, token) {
            self.release(token);
            return Err(e);
        }
        Ok(token)
    }

    /// Adds a listening socket shared by every core: level-triggered and exclusive, so one
    /// incoming connection wakes one core.
    pub fn register_listener(&self, fd: RawFd) -> io::Result<usize> {
        let token = self.alloc_slot();
        let events = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        if let Err(e) = self.ctl(libc::EPOLL_CTL_ADD, fd, events, token) {
            self.release(token);
            return Err(e);
        }
        Ok(token)
    }

    /// Removes a socket before it is closed.
    pub fn deregister(&self, token: usize, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, token);
        self.release(token);
    }

    fn release(&self, token: usize) {
        if let Some(s) = self.slots.borrow_mut().get_mut(token) {
            *s = Slot::default();
            self.free.borrow_mut().push(token);
        }
    }

    /// Resolves once the socket has been reported readable (consuming that report).
    pub async fn readable(&self, token: usize) {
        self.ready(token, Dir::Read).await
    }

    /// True once the peer hung up or the socket failed (reported at any time since it was
    /// registered): reads must go on until they see it, whatever the readiness reports.
    pub fn peer_closed(&self, token: usize) -> bool {
        self.slots
            .borrow()
            .get(token)
            .is_none_or(|s| !s.in_use || s.closed)
    }

    /// Resolves once the socket has been reported writable (consuming that report).
    pub async fn writable(&self, token: usize) {
        self.ready(token, Dir::Write).await
    }

    async fn ready(&self, token: usize, dir: Dir) {
        poll_fn(|cx| {
            let mut slots = self.slots.borrow_mut();
            let Some(s) = slots.get_mut(token) else {
                return Poll::Ready(());
            };
            let in_use = s.in_use;
            let (flag, waker) = match dir {
                Dir::Read => (&mut s.readable, &mut s.read_waker),
                Dir::Write => (&mut s.writable, &mut s.write_waker),
            };
            if *flag || !in_use {
                *flag = false;
                Poll::Ready(())
            } else {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    /// Lets the driver nap in `epoll` when idle (see the module doc); every thread that sends
    /// this core work rings `bell` after sending.
    pub fn allow_nap(&self, bell: Arc<Bell>) -> io::Result<()> {
        let b = bell.clone();
        self.watch(bell.efd.as_raw_fd(), Box::new(move || b.drain()))?;
        *self.bell.borrow_mut() = Some(bell);
        self.nap.set(true);
        Ok(())
    }

    /// Keeps naps at most [`NAP`] long for good: glommio itself does I/O for this core's
    /// clients (the tier's reads, where it has no ring of its own).
    pub fn short_naps(&self) {
        self.long_naps.set(false);
    }

    /// Naps for up to `left` unless another thread sent work since glommio last ran its loop
    /// (`seen` rings): glommio must deliver that first.
    fn nap_unless_rung(
        &self,
        events: &mut [libc::epoll_event],
        seen: u64,
        left: Duration,
    ) -> Result<usize, ()> {
        let Some(bell) = self.bell.borrow().clone() else {
            return Ok(0);
        };
        let left = if self.long_naps.get() && IO_WAITS.with(|c| c.get()) == 0 {
            left
        } else {
            left.min(NAP)
        };
        bell.napping.store(true, Ordering::SeqCst);
        let napped = if bell.rung.load(Ordering::SeqCst) == seen {
            self.nap(events, left)
        } else {
            Ok(0)
        };
        bell.napping.store(false, Ordering::SeqCst);
        napped
    }

    fn rings(&self) -> u64 {
        self.bell
            .borrow()
            .as_ref()
            .map_or(0, |b| b.rung.load(Ordering::SeqCst))
    }

    /// Runs the pass hooks; true when one woke a task.
    fn run_hooks(&self, busy: bool) -> bool {
        self.on_pass
            .borrow()
            .iter()
            .fold(false, |woke, f| f(busy) | woke)
    }

    /// Sleeps in `epoll` for up to `left` (under a second); the events ready (0 when none
    /// came, or when the sleep was interrupted: a completion on one of the thread's rings,
    /// `Err`).
    fn nap(&self, events: &mut [libc::epoll_event], left: Duration) -> Result<usize, ()> {
        let n = if self.pwait2.get() {
            let timeout = libc::timespec {
                tv_sec: 0,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `events` has room for `events.len()` entries, which is what we pass;
            // the timespec outlives the call; a null signal mask is allowed (the size is
            // then unused).
            unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as libc::c_int,
                    &timeout as *const libc::timespec,
                    std::ptr::null::<libc::sigset_t>(),
                    std::mem::size_of::<libc::sigset_t>(),
                )
            }
        } else {
            // Whole milliseconds, rounded up: a nap may last up to a millisecond longer.
            let ms = left.as_micros().div_ceil(1000).max(1) as libc::c_int;
            // SAFETY: `events` has room for `events.len()` entries, which is what we pass.
            unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as libc::c_int,
                    ms,
                ) as libc::c_long
            }
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOSYS) && self.pwait2.get() {
            // A kernel before 5.11 (or valgrind): nap in `epoll_wait`'s milliseconds.
            tracing::debug!("epoll_pwait2 unavailable; idle cores nap in epoll_wait");
            self.pwait2.set(false);
            return self.nap(events, left);
        }
        if e.kind() != io::ErrorKind::Interrupted {
            tracing::debug!("epoll nap failed ({e}); idle cores park in glommio");
            self.nap.set(false);
        }
        Err(())
    }

    /// The driver: delivers readiness to waiting tasks, forever. Spawn once per core.
    ///
    /// Each pass either looks at the epoll set or lets tasks run, and looks at most every
    /// other pass: right after a look woke tasks (and they ran), it yields without looking
    /// again, and when nothing ran since the last pass the nap itself is the look. So a core
    /// serving one request at a time makes one epoll call per request, as an epoll loop does.
    pub async fn drive(self: Rc<Self>) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        // Other tasks' turns when the driver last looked; when glommio last ran its loop, and
        // the bell's rings it has surely delivered.
        let mut seen = turns();
        let mut looped = Instant::now();
        let mut rung = 0;
        let mut interrupted = false;
        // The last pass looked and woke tasks: the next one lets them (and what they wake) run.
        let mut looked = false;
        loop {
            let woke = self.run_hooks(true);
            let now = turns();
            let quiet = now == seen && !woke;
            seen = now;
            // Time left before glommio's loop is due, when the driver may nap.
            let nap_for =
                (quiet && self.nap.get() && !interrupted && REMOTE_WAITS.with(|c| c.get()) == 0)
                    .then(|| LOOP_EVERY.checked_sub(looped.elapsed()))
                    .flatten()
                    .filter(|left| !left.is_zero());
            let n = if let Some(left) = nap_for {
                // Nothing ran since the last pass: sleep in epoll (which also looks).
                if self.run_hooks(false) {
                    futures_lite::future::yield_now().await;
                    continue;
                }
                match self.nap_unless_rung(&mut events, rung, left) {
                    Ok(0) => {
                        // Glommio's loop delivers every wake sent before this.
                        rung = self.rings();
                        self.wait_ready().await;
                        looped = Instant::now();
                        continue;
                    }
                    Ok(ready) => ready,
                    Err(()) => {
                        // A completion ran as task work: the tier's shows up as its eventfd
                        // at the next look; if nothing does, it was glommio's, and the next
                        // idle moment parks there.
                        interrupted = true;
                        continue;
                    }
                }
            } else if !quiet && std::mem::take(&mut looked) {
                // The tasks the last look woke have run: what they woke runs before the next
                // look (a socket ready meanwhile stays ready for it).
                futures_lite::future::yield_now().await;
                continue;
            } else {
                // SAFETY: `events` has room for `events.len()` entries, which is what we pass.
                let n = unsafe {
                    libc::epoll_wait(
                        self.epoll.as_raw_fd(),
                        events.as_mut_ptr(),
                        events.len() as libc::c_int,
                        0,
                    )
                };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        tracing::error!("epoll_wait failed: {e}");
                        glommio::timer::sleep(Duration::from_millis(10)).await;
                    }
                    continue;
                }
                if n == 0 {
                    let woke = self.run_hooks(false);
                    if self.nap.get() && (!quiet || woke) {
                        // Tasks ran since the last look, or were just woken: they go first
                        // (and may wake more); the next look decides.
                        futures_lite::future::yield_now().await;
                        continue;
                    }
                    // Idle, and not to nap (glommio's loop is due, a task waits for another
                    // core or for glommio, or a nap was interrupted): park in glommio.
                    interrupted = false;
                    rung = self.rings();
                    self.wait_ready().await;
                    looped = Instant::now();
                    continue;
                }
                // Whatever interrupted a nap showed up here (the tier's reads, through their
                // eventfd).
                interrupted = false;
                n as usize
            };
            for ev in &events[..n] {
                if let Some((_, f)) = self
                    .watched
                    .borrow()
                    .iter()
                    .find(|(t, _)| *t as u64 == ev.u64)
                {
                    f();
                }
            }
            {
                let mut slots = self.slots.borrow_mut();
                for ev in &events[..n] {
                    let Some(s) = slots.get_mut(ev.u64 as usize) else {
                        continue;
                    };
                    let bits = ev.events as libc::c_int;
                    let broken = libc::EPOLLHUP | libc::EPOLLERR;
                    if bits & (libc::EPOLLRDHUP | broken) != 0 {
                        s.closed = true;
                    }
                    if bits & (libc::EPOLLIN | libc::EPOLLRDHUP | broken) != 0 {
                        s.readable = true;
                        if let Some(w) = s.read_waker.take() {
                            w.wake();
                        }
                    }
                    if bits & (libc::EPOLLOUT | broken) != 0 {
                        s.writable = true;
                        if let Some(w) = s.write_waker.take() {
                            w.wake();
                        }
                    }
                }
            }
            // Let the woken connections run before looking again.
            looked = true;
            futures_lite::future::yield_now().await;
        }
    }

    /// Parks this task until the epoll fd is readable (see [`tiering::uring::wait_readable`]).
    async fn wait_ready(&self) {
        tiering::uring::wait_readable(self.epoll.as_raw_fd()).await;
    }
}

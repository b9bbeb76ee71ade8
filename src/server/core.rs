//! Per-core state ([`Core`]) and process-wide state ([`Global`]): the shard mesh, the client
//! registry, and the gate that cross-shard transactions close while they run.
//!
//! Never: blocks a core waiting for another (jobs for a locked shard are deferred, not waited
//! on) or lets a job from another core see a shard a transaction holds.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::channel::{mpsc, oneshot};
use futures::future::LocalBoxFuture;
use std::rc::Rc;

use crate::config::Settings;
use crate::runtime::{remote_wait, Bell};
use crate::shard::Shard;

/// Work for a shard, run on its own core; it may spawn local tasks there for work that waits
/// on disk.
pub type Job = Box<dyn FnOnce(&Rc<Core>) + Send>;

/// Work that waits on this core (e.g. loads offloaded values), built on the target core by a
/// closure that can travel between threads.
pub type AsyncWork<R> = Box<dyn FnOnce(Rc<Core>) -> LocalBoxFuture<'static, R> + Send>;

/// What travels over the mesh to a core.
pub enum Msg {
    /// Run a job (deferred while a transaction holds the shard).
    Run(Job),
    /// Run a job of transaction `tx`, which holds the shard.
    RunTx(u64, Job),
    /// Lock the shard for transaction `tx`; ack when granted.
    Lock(u64, oneshot::Sender<()>),
    /// Release the shard held by `tx`.
    Unlock(u64),
}

/// A job's message: as transaction `held`'s when it holds the target shard.
fn job_msg(held: Option<u64>, job: Job) -> Msg {
    match held {
        Some(tx) => Msg::RunTx(tx, job),
        None => Msg::Run(job),
    }
}

/// A job that runs `f` on the shard of the core it runs on, then sends that core's tracking
/// invalidations; the receiver gets the result.
pub fn shard_job<R, F>(f: F) -> (Job, oneshot::Receiver<R>)
where
    R: Send + 'static,
    F: FnOnce(&mut Shard) -> R + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move |core| {
        let r = f(&mut core.shard.borrow_mut());
        core.flush_invalidations();
        let _ = tx.send(r);
    });
    (job, rx)
}

/// A job that starts `work` as a task on the core it runs on; the receiver gets the result.
pub fn spawning_job<R: Send + 'static>(work: AsyncWork<R>) -> (Job, oneshot::Receiver<R>) {
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move |core| {
        let fut = work(core.clone());
        let core = core.clone();
        crate::runtime::spawn(async move {
            let r = fut.await;
            core.flush_invalidations();
            let _ = tx.send(r);
        })
        .detach();
    });
    (job, rx)
}

/// State shared by every core.
pub struct Global {
    pub settings: Arc<Settings>,
    senders: Vec<mpsc::UnboundedSender<Msg>>,
    /// Each core's bell, rung after sending it a message (see `runtime::poller`).
    bells: Vec<Arc<Bell>>,
    /// Every connected client (CLIENT LIST, KILL; posting to a session's mailbox).
    pub clients: super::session::Registry,
    /// Every pub/sub subscription, by channel and pattern.
    pub pubsub: super::pubsub::Channels,
    /// CLIENT TRACKING's BCAST prefixes and tracking clients.
    pub tracking: super::tracking::Registry,
    next_client: AtomicU64,
    next_tx: AtomicU64,
    pub started: Instant,
    pub started_unix: u64,
    pub total_connections: AtomicU64,
    pub peak_memory: AtomicU64,
    active_expire: AtomicBool,
    tier_files: Mutex<Vec<std::path::PathBuf>>,
    /// Save state and history (INFO persistence, LASTSAVE, one save at a time).
    pub persist: super::snapshot::PersistLock,
    /// Set once core 0 serves clients (start-up load done): a signal then saves before exiting.
    pub serving: AtomicBool,
    /// Owned RSS (`memory::owned_rss_bytes`) beyond what the allocator counts (stacks, rings,
    /// allocator slack), refreshed each second: the limits leave room for it so that owned RSS
    /// stays near maxmemory.
    pub rss_overhead: AtomicU64,
}

impl Global {
    pub fn new(
        settings: Arc<Settings>,
        senders: Vec<mpsc::UnboundedSender<Msg>>,
        bells: Vec<Arc<Bell>>,
    ) -> Global {
        let started_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Global {
            settings,
            senders,
            bells,
            clients: super::session::Registry::default(),
            pubsub: super::pubsub::Channels::default(),
            tracking: Default::default(),
            next_client: AtomicU64::new(1),
            next_tx: AtomicU64::new(1),
            started: Instant::now(),
            started_unix,
            total_connections: AtomicU64::new(0),
            peak_memory: AtomicU64::new(0),
            active_expire: AtomicBool::new(true),
            tier_files: Mutex::new(Vec::new()),
            persist: Mutex::new(super::snapshot::PersistState::new(started_unix)),
            serving: AtomicBool::new(false),
            rss_overhead: AtomicU64::new(0),
        }
    }

    pub fn shards(&self) -> usize {
        self.senders.len()
    }

    pub fn next_client_id(&self) -> u64 {
        self.next_client.fetch_add(1, Ordering::Relaxed)
    }

    pub fn next_tx_id(&self) -> u64 {
        self.next_tx.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `msg` to core `shard` (and rings its bell); false if that core is gone.
    pub fn send(&self, shard: usize, msg: Msg) -> bool {
        let sent = self
            .senders
            .get(shard)
            .is_some_and(|s| s.unbounded_send(msg).is_ok());
        if let Some(b) = self.bells.get(shard).filter(|_| sent) {
            b.ring();
        }
        sent
    }

    /// Rings core `id`'s bell after something was sent its way from another thread.
    pub fn ring(&self, id: usize) {
        if let Some(b) = self.bells.get(id) {
            b.ring();
        }
    }

    /// Core `id`'s bell.
    pub fn bell(&self, id: usize) -> Arc<Bell> {
        self.bells[id].clone()
    }

    /// Refreshes the recorded memory peak; returns current use.
    pub fn note_memory(&self) -> u64 {
        let used = crate::memory::used_memory();
        self.peak_memory.fetch_max(used, Ordering::Relaxed);
        used
    }

    pub fn add_tier_file(&self, path: std::path::PathBuf) {
        if let Ok(mut v) = self.tier_files.lock() {
            v.push(path);
        }
    }

    /// Deletes every shard's tier file (at exit).
    pub fn remove_tier_files(&self) {
        if let Ok(v) = self.tier_files.lock() {
            for p in v.iter() {
                let _ = std::fs::remove_file(p);
            }
        }
    }

    pub fn active_expire_enabled(&self) -> bool {
        self.active_expire.load(Ordering::Relaxed)
    }

    pub fn set_active_expire(&self, on: bool) {
        self.active_expire.store(on, Ordering::Relaxed);
    }

    /// Milliseconds since start (for client idle/age).
    pub fn uptime_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// Closed while a cross-shard transaction holds this core's shard. Inline commands wait on it;
/// jobs from other cores are deferred and replayed in arrival order when it opens.
#[derive(Default)]
pub struct Gate {
    holder: Cell<u64>,
    deferred: RefCell<VecDeque<Msg>>,
    waiters: RefCell<Vec<Waker>>,
}

impl Gate {
    pub fn is_locked(&self) -> bool {
        self.holder.get() != 0
    }

    /// True when a transaction other than `tx` (0 = none) holds the shard.
    pub fn closed_to(&self, tx: u64) -> bool {
        let h = self.holder.get();
        h != 0 && h != tx
    }

    /// Takes the gate for `tx` here and now when it is open and nothing waits on it: what
    /// handling `Msg::Lock(tx)` on this core would do, without the trip through its queue.
    pub fn take_open(&self, tx: u64) -> bool {
        if self.is_locked() || !self.deferred.borrow().is_empty() {
            return false;
        }
        self.holder.set(tx);
        true
    }

    /// Opens the gate `tx` holds here and now when nothing was deferred meanwhile (so that
    /// `Msg::Unlock` would have nothing to replay); false leaves it to the message.
    pub fn release_quiet(&self, tx: u64) -> bool {
        if self.holder.get() != tx || !self.deferred.borrow().is_empty() {
            return false;
        }
        self.holder.set(0);
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
        true
    }

    /// Resolves once no transaction holds the shard.
    pub fn opened(&self) -> GateOpen<'_> {
        GateOpen { gate: self }
    }
}

pub struct GateOpen<'a> {
    gate: &'a Gate,
}

impl Future for GateOpen<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.gate.is_locked() {
            return Poll::Ready(());
        }
        self.gate.waiters.borrow_mut().push(cx.waker().clone());
        Poll::Pending
    }
}

/// One core: its shard, the shared state, and its gate.
pub struct Core {
    pub id: usize,
    pub shard: RefCell<Shard>,
    pub global: Arc<Global>,
    pub gate: Gate,
    /// Clients blocked on this shard's keys (`server::blocking`).
    pub waiters: super::blocking::Waiters,
}

impl Core {
    pub fn new(id: usize, shard: Shard, global: Arc<Global>) -> Core {
        Core {
            id,
            shard: RefCell::new(shard),
            global,
            gate: Gate::default(),
            waiters: Default::default(),
        }
    }

    /// Handles one mesh message on this core.
    pub fn handle(self: &Rc<Self>, msg: Msg) {
        match msg {
            Msg::Run(job) => {
                if self.gate.is_locked() {
                    self.gate.deferred.borrow_mut().push_back(Msg::Run(job));
                } else {
                    job(self);
                    super::blocking::serve(self);
                }
            }
            Msg::RunTx(_, job) => job(self),
            Msg::Lock(tx, ack) => {
                if self.gate.is_locked() {
                    self.gate
                        .deferred
                        .borrow_mut()
                        .push_back(Msg::Lock(tx, ack));
                } else {
                    self.gate.holder.set(tx);
                    let _ = ack.send(());
                }
            }
            Msg::Unlock(tx) => {
                if self.gate.holder.get() != tx {
                    return;
                }
                self.gate.holder.set(0);
                for w in self.gate.waiters.borrow_mut().drain(..) {
                    w.wake();
                }
                // What the transaction made ready is served before anything else runs.
                super::blocking::serve(self);
                // Replay what waited, in order, until another transaction takes the lock.
                while !self.gate.is_locked() {
                    let next = self.gate.deferred.borrow_mut().pop_front();
                    match next {
                        Some(m) => self.handle(m),
                        None => break,
                    }
                }
            }
        }
    }

    /// Sends the CLIENT TRACKING BCAST invalidations this shard's work gathered: called when a
    /// piece of work ends, before its reply leaves, as Redis sends them before it writes
    /// replies.
    pub fn flush_invalidations(&self) {
        // Inside work that holds the shard, the work's own end sends them (or the fallback).
        let Ok(shard) = self.shard.try_borrow() else {
            return;
        };
        let sink = shard.watches.tracking.sink.clone();
        drop(shard);
        if let Some(s) = sink {
            s.flush();
        }
    }

    /// Keeps this core's BCAST invalidations until the guard drops, then sends them: work
    /// that spans shards sends its changes on all of them together, as Redis sends once per
    /// event-loop turn.
    pub fn hold_invalidations(&self) -> HeldInvalidations {
        let sink = self
            .shard
            .try_borrow()
            .ok()
            .and_then(|s| s.watches.tracking.sink.clone());
        if let Some(s) = &sink {
            s.hold(true);
        }
        HeldInvalidations(sink)
    }

    /// Runs `f` on shard `shard` and returns its result; inline when the shard is local.
    /// None only if the target core is gone (shutdown). Inside a transaction that holds the
    /// shard (`txn::Scoped`), runs as that transaction's job.
    pub async fn on_shard<R, F>(self: &Rc<Self>, shard: usize, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Shard) -> R + Send + 'static,
    {
        let held = super::txn::held_tx(shard);
        if shard == self.id {
            if held.is_none() {
                self.gate.opened().await;
            }
            let r = f(&mut self.shard.borrow_mut());
            super::blocking::serve(self);
            self.flush_invalidations();
            return Some(r);
        }
        let (job, rx) = shard_job(f);
        let _waiting = remote_wait();
        if !self.global.send(shard, job_msg(held, job)) {
            return None;
        }
        rx.await.ok()
    }

    /// Sends `work` to another core, as [`Core::on_shard_async`] does, without waiting: the
    /// receiver of its result, or None when that core is gone. The job is on its way once this
    /// returns, ahead of anything sent there after it.
    pub fn send_work<R: Send + 'static>(
        &self,
        shard: usize,
        work: AsyncWork<R>,
    ) -> Option<oneshot::Receiver<R>> {
        let (job, rx) = spawning_job(work);
        self.global
            .send(shard, job_msg(super::txn::held_tx(shard), job))
            .then_some(rx)
    }

    /// Like [`Core::on_shard`] for work that may wait (on disk) on the target core.
    pub async fn on_shard_async<R: Send + 'static>(
        self: &Rc<Self>,
        shard: usize,
        work: AsyncWork<R>,
    ) -> Option<R> {
        if shard == self.id {
            return Some(work(self.clone()).await);
        }
        let (job, rx) = spawning_job(work);
        let _waiting = remote_wait();
        if !self
            .global
            .send(shard, job_msg(super::txn::held_tx(shard), job))
        {
            return None;
        }
        rx.await.ok()
    }

    /// Runs `f` on every shard concurrently; results in shard order.
    pub async fn on_all<R, F>(self: &Rc<Self>, f: F) -> Vec<R>
    where
        R: Send + 'static,
        F: Fn(&mut Shard) -> R + Send + Sync + Clone + 'static,
    {
        let n = self.global.shards();
        let mut pending = Vec::with_capacity(n);
        for s in 0..n {
            let f = f.clone();
            pending.push(self.on_shard(s, move |sh| f(sh)));
        }
        futures::future::join_all(pending)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

/// See [`Core::hold_invalidations`].
pub struct HeldInvalidations(Option<crate::shard::tracking::Sink>);

impl Drop for HeldInvalidations {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            s.hold(false);
        }
    }
}

//! Cross-shard atomicity, designed once here: a transaction takes an exclusive lock on every
//! shard it touches, in ascending shard order (so two transactions can never wait on each other
//! in a cycle), runs its steps on those shards, then unlocks. While a shard is locked, other
//! cores' jobs for it are deferred (not blocked on) and its own connections wait at its gate,
//! so nobody observes a half-done RENAME or MSET.
//!
//! The commands that need it today: MSET/MSETNX across shards, RENAME/RENAMENX/COPY whose two
//! keys live on different shards, and BITOP, PFCOUNT and PFMERGE whose keys span shards (their
//! `Exec::Cross` functions are here: lock, read the sources, compute here, write the
//! destination), and LCS (which reads its two values at one moment). MULTI/EXEC and scripts
//! take the same locks through `server::locked`, and run commands inside them.
//!
//! Nesting: a task that runs under held locks (EXEC, a script) polls its commands inside a
//! [`Scoped`] future that names the shards held. [`Txn::begin`] there locks nothing it already
//! holds (a cross-shard command inside EXEC reuses the EXEC's locks instead of waiting on them
//! for ever), and [`Core::on_shard`] sends its jobs as the holder's instead of deferring them.
//! The scope is task-local: other connections on the same core never see it.
//!
//! WATCH: the steps of a cross-shard command report each key they change on its shard, as a
//! one-shard command does (`cmd::Ctx::changed`), while the transaction still holds it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::channel::oneshot;

use futures::FutureExt;

use super::core::{spawning_job, AsyncWork, Core, Job, Msg};
use super::exec;
use super::table::Spec;
use crate::cmd::args::{err, ERR_NO_KEY};
use crate::cmd::bitops::{self, Bitop};
use crate::cmd::hyperloglog::{self, Union};
use crate::cmd::{keys, string, Ctx, ShardFn};
use crate::notify;
use crate::protocol::Reply;
use crate::runtime::remote_wait;
use crate::shard::tracking::Caller;
use crate::shard::{now_ms, shard_of, Entry, Shard};

/// What the task being polled runs inside: the shards a transaction holds for it (and its
/// id), and the keys a read-only command reads for a tracking client.
#[derive(Clone, Default)]
pub(super) struct Ambient {
    held: Option<(u64, Rc<[usize]>)>,
    reads: Option<Reads>,
    /// Reads are not remembered for tracking clients here (a script's commands).
    untracked: bool,
    /// The client whose command this is (id 0: none): what its transactions change on any
    /// shard is that client's change (CLIENT TRACKING NOLOOP).
    writer: Caller,
}

/// Keys that tracking client `id` reads (CLIENT TRACKING, default mode; any db, as Redis).
#[derive(Clone)]
struct Reads {
    id: u64,
    keys: Rc<[Bytes]>,
}

thread_local! {
    static AMBIENT: RefCell<Ambient> = RefCell::new(Ambient::default());
}

fn ambient() -> Ambient {
    AMBIENT.with(|a| a.borrow().clone())
}

/// Whether the running task runs a script's commands (their reads are not remembered).
pub(super) fn in_script() -> bool {
    AMBIENT.with(|a| a.borrow().untracked)
}

/// The transaction id under which the running task holds `shard`, if it does.
pub(super) fn held_tx(shard: usize) -> Option<u64> {
    AMBIENT.with(|a| {
        a.borrow()
            .held
            .as_ref()
            .filter(|(_, s)| s.contains(&shard))
            .map(|(id, _)| *id)
    })
}

/// A future polled with an [`Ambient`] in place (restored after each poll, so it is
/// task-local).
pub(super) struct Scoped<'a, T> {
    fut: futures::future::LocalBoxFuture<'a, T>,
    ambient: Ambient,
}

impl<'a, T> Scoped<'a, T> {
    /// `fut` run as the holder of `txn`'s shards (and those of the scope around it).
    pub(super) fn holding(txn: &Txn, fut: futures::future::LocalBoxFuture<'a, T>) -> Self {
        let ambient = Ambient {
            held: Some((txn.id, txn.held.clone())),
            reads: None,
            untracked: false,
            writer: txn.writer,
        };
        Scoped { fut, ambient }
    }

    /// This scope with its commands' reads not remembered for tracking clients.
    pub(super) fn untracked(mut self) -> Self {
        self.ambient.untracked = true;
        self
    }
}

/// Restores the outer ambient when a poll ends (panics included).
struct Restore(Option<Ambient>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(prev) = self.0.take() {
            AMBIENT.with(|a| *a.borrow_mut() = prev);
        }
    }
}

impl<T> Future for Scoped<'_, T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = self.get_mut();
        let prev = AMBIENT.with(|a| std::mem::replace(&mut *a.borrow_mut(), this.ambient.clone()));
        let _restore = Restore(Some(prev));
        this.fut.as_mut().poll(cx)
    }
}

/// Runs a cross-shard command (`spec`, `args`) for `caller`: what its transaction changes is
/// the caller's change on every shard (NOLOOP), and, when the caller tracks keys and the
/// command reads, the transaction remembers them on their shards while it holds them: no
/// write falls between the read and the remembering, as when one shard runs a command
/// (`exec::call`).
pub(super) async fn reading<'a>(
    caller: Caller,
    spec: &'static Spec,
    args: &[Bytes],
    fut: futures::future::LocalBoxFuture<'a, Reply>,
) -> Reply {
    let mut ambient = ambient();
    let reads = caller.track && spec.has(super::table::READONLY) && !ambient.untracked;
    let writer = Caller {
        track: false,
        ..caller
    };
    if caller.id == 0 || (!reads && ambient.writer == writer) {
        return fut.await;
    }
    ambient.writer = writer;
    if reads {
        let keys: Rc<[Bytes]> = spec
            .keys_of(args)
            .into_iter()
            .map(|i| args[i].clone())
            .collect();
        ambient.reads = Some(Reads {
            id: caller.id,
            keys,
        });
    }
    Scoped { fut, ambient }.await
}

/// Runs `f` with `writer` as the shard's current client when none is set, so that the changes
/// it makes are that client's (0: leaves it as it is).
fn as_writer<R>(core: &Core, writer: Caller, f: impl FnOnce() -> R) -> R {
    let set = writer.id != 0
        && core.shard.try_borrow_mut().is_ok_and(|mut sh| {
            let c = &mut sh.watches.tracking.caller;
            let none = *c == Caller::NONE;
            if none {
                *c = writer;
            }
            none
        });
    let r = f();
    if set {
        if let Ok(mut sh) = core.shard.try_borrow_mut() {
            sh.watches.tracking.caller = Caller::NONE;
        }
    }
    r
}

/// A future polled with its transaction's client as the shard's writer (`as_writer`).
struct AsWriter<R> {
    core: Rc<Core>,
    writer: Caller,
    fut: futures::future::LocalBoxFuture<'static, R>,
}

impl<R> Future for AsWriter<R> {
    type Output = R;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        let (core, writer, fut) = (&this.core, this.writer, &mut this.fut);
        as_writer(core, writer, || fut.as_mut().poll(cx))
    }
}

/// A held set of shard locks; dropping it unlocks them.
pub struct Txn {
    core: Rc<Core>,
    id: u64,
    /// The client whose command took it (id 0: none), its jobs' writer.
    writer: Caller,
    /// The shards this value locked (and unlocks when dropped).
    shards: Vec<usize>,
    /// Every shard it may use: its own and those of the transaction it runs inside.
    held: Rc<[usize]>,
    /// Jobs of it are queued on its shards: each unlock goes after them.
    queued: bool,
}

impl Txn {
    /// Locks `shards` (any order, duplicates allowed) in ascending order. Inside a
    /// [`Scoped`] transaction, shards it already holds are used as they are; others are
    /// locked only past every held one (so locks are still taken in ascending order and no
    /// two transactions can wait on each other): None otherwise, and when shutting down.
    pub async fn begin(core: &Rc<Core>, mut shards: Vec<usize>) -> Option<Txn> {
        shards.sort_unstable();
        shards.dedup();
        let outer = ambient();
        let (id, outer_held) = match &outer.held {
            Some((id, held)) => {
                shards.retain(|s| !held.contains(s));
                let top = held.iter().copied().max().unwrap_or(0);
                if shards.first().is_some_and(|&s| s < top) {
                    tracing::warn!(
                        ?shards,
                        "a command inside a transaction needs shards it did not lock"
                    );
                    return None;
                }
                (*id, held.to_vec())
            }
            None => (core.global.next_tx_id(), Vec::new()),
        };
        let mut txn = Txn {
            core: core.clone(),
            id,
            writer: outer.writer,
            shards: Vec::new(),
            held: Rc::from(Vec::new()),
            queued: false,
        };
        let _waiting = remote_wait();
        for s in &shards {
            if *s == core.id && core.gate.take_open(id) {
                txn.shards.push(*s);
                continue;
            }
            let (ack, granted) = oneshot::channel();
            if !core.global.send(*s, Msg::Lock(id, ack)) {
                return None;
            }
            granted.await.ok()?;
            txn.shards.push(*s);
        }
        let mut held = outer_held;
        held.extend(shards);
        txn.held = held.into();
        if let Some(reads) = &outer.reads {
            txn.remember(reads);
        }
        Some(txn)
    }

    /// Remembers `reads` for their tracking client, as jobs of this transaction on the keys'
    /// shards (which it holds).
    fn remember(&mut self, reads: &Reads) {
        let n = self.core.global.shards();
        for k in reads.keys.iter() {
            let s = shard_of(k, n);
            if !self.held.contains(&s) {
                continue;
            }
            let (key, id) = (k.clone(), reads.id);
            let job: Job = Box::new(move |core| {
                core.shard.borrow_mut().watches.tracking.remember(&key, id);
            });
            self.core.global.send(s, Msg::RunTx(self.id, job));
            self.queued = true;
        }
    }

    /// The transaction's id (the gate's holder on its shards).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// True when `shard` may be used through this transaction.
    pub fn holds(&self, shard: usize) -> bool {
        self.held.contains(&shard)
    }

    /// Runs `f` on `shard`, which this transaction holds.
    pub async fn run<R, F>(&self, shard: usize, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Shard) -> R + Send + 'static,
    {
        // A script drives this without this core's executor: its own shard runs inline.
        let writer = self.writer;
        if shard == self.core.id && super::script::driving() {
            return Some(as_writer(&self.core, writer, || {
                f(&mut self.core.shard.borrow_mut())
            }));
        }
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |core| {
            let r = as_writer(core, writer, || f(&mut core.shard.borrow_mut()));
            let _ = tx.send(r);
        });
        let _waiting = remote_wait();
        if !self.core.global.send(shard, Msg::RunTx(self.id, job)) {
            return None;
        }
        rx.await.ok()
    }

    /// Runs work that may wait on disk on `shard`, which this transaction holds.
    pub async fn run_async<R: Send + 'static>(
        &self,
        shard: usize,
        work: AsyncWork<R>,
    ) -> Option<R> {
        let writer = self.writer;
        let work: AsyncWork<R> = if writer.id == 0 {
            work
        } else {
            Box::new(move |core: Rc<Core>| {
                let fut = work(core.clone());
                Box::pin(AsWriter { core, writer, fut })
            })
        };
        if shard == self.core.id && super::script::driving() {
            return Some(work(self.core.clone()).await);
        }
        let (job, rx) = spawning_job(work);
        let _waiting = remote_wait();
        if !self.core.global.send(shard, Msg::RunTx(self.id, job)) {
            return None;
        }
        rx.await.ok()
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        for &s in &self.shards {
            // This core's own gate opens in place when that is all Msg::Unlock would do (no
            // job of it queued to run before it; the shard not borrowed: serving blocked
            // clients needs it).
            if !self.queued
                && s == self.core.id
                && self.core.shard.try_borrow_mut().is_ok()
                && self.core.gate.release_quiet(self.id)
            {
                super::blocking::serve(&self.core);
                continue;
            }
            self.core.global.send(s, Msg::Unlock(self.id));
        }
    }
}

fn shutting_down() -> Reply {
    err("ERR server is shutting down")
}

/// Runs one keyed command on a held shard (loading offloaded values it reads).
pub(super) async fn run_fn(
    txn: &Txn,
    shard: usize,
    db: usize,
    spec: &'static Spec,
    f: ShardFn,
    args: Vec<Bytes>,
    caller: Caller,
) -> Option<Reply> {
    let tx = txn.id;
    txn.run_async(
        shard,
        Box::new(move |core: Rc<Core>| {
            async move {
                exec::run_keyed(&core, db, spec, f, &args, now_ms(), tx, None, caller).await
            }
            .boxed_local()
        }),
    )
    .await
}

/// Groups key/value arguments of MSET-like commands by shard: `[name, k, v, ...]` per shard.
pub fn split_pairs(args: &[Bytes], group: usize, shards: usize) -> Vec<(usize, Vec<Bytes>)> {
    let mut parts: Vec<(usize, Vec<Bytes>)> = Vec::new();
    for chunk in args[1..].chunks(group) {
        let s = shard_of(&chunk[0], shards);
        match parts.iter_mut().find(|(id, _)| *id == s) {
            Some((_, v)) => v.extend(chunk.iter().cloned()),
            None => {
                let mut v = Vec::with_capacity(1 + chunk.len());
                v.push(args[0].clone());
                v.extend(chunk.iter().cloned());
                parts.push((s, v));
            }
        }
    }
    parts
}

/// Runs `f` on every part (shard, args) under one transaction for `caller`; replies in part
/// order.
pub async fn run_parts(
    core: &Rc<Core>,
    db: usize,
    spec: &'static Spec,
    f: ShardFn,
    parts: &[(usize, Vec<Bytes>)],
    caller: Caller,
) -> Option<Vec<Reply>> {
    let txn = Txn::begin(core, parts.iter().map(|p| p.0).collect()).await?;
    let runs = parts
        .iter()
        .map(|(s, part)| run_fn(&txn, *s, db, spec, f, part.clone(), caller));
    futures::future::join_all(runs).await.into_iter().collect()
}

/// MSETNX across shards: all or nothing.
pub async fn msetnx(core: &Rc<Core>, spec: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let parts = split_pairs(args, 2, core.global.shards());
    let Some(txn) = Txn::begin(core, parts.iter().map(|p| p.0).collect()).await else {
        return shutting_down();
    };
    for (s, part) in &parts {
        let keys: Vec<Bytes> = part[1..].chunks(2).map(|c| c[0].clone()).collect();
        let any = txn
            .run(*s, move |sh| {
                let now = now_ms();
                keys.iter().any(|k| sh.contains(db, k, now))
            })
            .await;
        match any {
            Some(true) => return Reply::Int(0),
            Some(false) => {}
            None => return shutting_down(),
        }
    }
    for (s, part) in parts {
        // MSETNX's parts are MSETs (same keys, same flags: nothing read).
        if run_fn(&txn, s, db, spec, string::mset, part, Caller::NONE)
            .await
            .is_none()
        {
            return shutting_down();
        }
    }
    Reply::Int(1)
}

/// RENAME with source and destination on different shards.
pub async fn rename(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    rename_across(core, db, args, false).await
}

/// RENAMENX with source and destination on different shards.
pub async fn renamenx(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    rename_across(core, db, args, true).await
}

async fn rename_across(core: &Rc<Core>, db: usize, args: &[Bytes], nx: bool) -> Reply {
    let n = core.global.shards();
    let (src, dst) = (args[1].clone(), args[2].clone());
    let args_src = src.clone();
    let (ss, ds) = (shard_of(&src, n), shard_of(&dst, n));
    let Some(txn) = Txn::begin(core, vec![ss, ds]).await else {
        return shutting_down();
    };
    let k = src.clone();
    let exists = txn.run(ss, move |s| s.contains(db, &k, now_ms())).await;
    match exists {
        Some(true) => {}
        Some(false) => return err(ERR_NO_KEY),
        None => return shutting_down(),
    }
    if nx {
        let k = dst.clone();
        match txn.run(ds, move |s| s.contains(db, &k, now_ms())).await {
            Some(true) => return Reply::Int(0),
            Some(false) => {}
            None => return shutting_down(),
        }
    }
    // An offloaded value is loaded first: its disk pointer means nothing on another shard.
    let taken = txn
        .run_async(
            ss,
            Box::new(move |core: Rc<Core>| {
                async move {
                    exec::load_entry(&core, db, &src, now_ms()).await?;
                    core.shard.borrow_mut().take(db, &src)
                }
                .boxed_local()
            }),
        )
        .await;
    let taken = match taken {
        Some(Some(e)) => e,
        // Its value could not be read back from disk: the key is gone.
        Some(None) => return err(ERR_NO_KEY),
        None => return shutting_down(),
    };
    if txn
        .run(ds, move |s| {
            // As the one-shard RENAME: the old destination first, one change in all.
            if s.remove(db, &dst).is_some() {
                s.dirty = s.dirty.saturating_sub(1);
            }
            s.put_taken(db, &dst, taken);
            s.notify(notify::GENERIC, "rename_from", db, &args_src);
            s.notify(notify::GENERIC, "rename_to", db, &dst);
        })
        .await
        .is_none()
    {
        return shutting_down();
    }
    if nx {
        Reply::Int(1)
    } else {
        Reply::Ok
    }
}

/// COPY with source and destination on different shards.
pub async fn copy(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let n = core.global.shards();
    let (src, dst) = (args[1].clone(), args[2].clone());
    let (ss, ds) = (shard_of(&src, n), shard_of(&dst, n));
    let opts_args = args.to_vec();
    // Options are validated on the destination shard, which knows the db count.
    let opts = core
        .on_shard(ds, move |s| {
            let ctx = Ctx {
                shard: s,
                db,
                now: 0,
            };
            keys::copy_opts(&ctx, &opts_args)
        })
        .await;
    let (dst_db, replace) = match opts {
        Some(Ok(o)) => o,
        Some(Err(e)) => return e,
        None => return shutting_down(),
    };
    let Some(txn) = Txn::begin(core, vec![ss, ds]).await else {
        return shutting_down();
    };
    let entry: Option<Option<(Entry, u64)>> = txn
        .run_async(
            ss,
            Box::new(move |core: Rc<Core>| {
                async move { exec::load_entry(&core, db, &src, now_ms()).await }.boxed_local()
            }),
        )
        .await;
    let entry = match entry {
        Some(Some(e)) => e,
        Some(None) => return Reply::Int(0),
        None => return shutting_down(),
    };
    let done = txn
        .run(ds, move |s| {
            let now = now_ms();
            if s.contains(dst_db, &dst, now) {
                if !replace {
                    return false;
                }
                s.remove(dst_db, &dst);
            }
            s.store(dst_db, &dst, entry.0.to_value(0), entry.1);
            s.notify(notify::GENERIC, "copy_to", dst_db, &dst);
            true
        })
        .await;
    match done {
        Some(ok) => Reply::Int(ok as i64),
        None => shutting_down(),
    }
}

/// LCS with the two keys on different shards: read both values, compute here.
pub async fn lcs(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let opts = match string::lcs_opts(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let n = core.global.shards();
    // Both values read as of one moment (and remembered for a tracking client with them).
    let Some(txn) = Txn::begin(core, vec![shard_of(&args[1], n), shard_of(&args[2], n)]).await
    else {
        return shutting_down();
    };
    let mut vals = Vec::with_capacity(2);
    for k in [args[1].clone(), args[2].clone()] {
        let v = txn
            .run_async(
                shard_of(&k, n),
                Box::new(move |core: Rc<Core>| {
                    async move {
                        let now = now_ms();
                        exec::load_entry(&core, db, &k, now).await;
                        match core.shard.borrow_mut().lookup(db, &k, now) {
                            None => Ok(Bytes::new()),
                            Some(e) => string::as_str(e).map(Bytes::copy_from_slice),
                        }
                    }
                    .boxed_local()
                }),
            )
            .await;
        match v {
            Some(Ok(v)) => vals.push(v),
            Some(Err(_)) => return err("ERR The specified keys must contain string values"),
            None => return shutting_down(),
        }
    }
    string::lcs_compute(&vals[0], &vals[1], opts)
}

/// A string value read under a transaction: None for a missing key, WRONGTYPE for another type.
type ReadValue = Result<Option<Bytes>, Reply>;

/// Reads the values of `keys` (offloaded ones loaded first) on the shards `txn` holds: one job
/// per shard, all in flight together; answers in key order. None when shutting down.
async fn read_strings(txn: &Txn, db: usize, keys: &[Bytes]) -> Option<Vec<ReadValue>> {
    let n = txn.core.global.shards();
    let mut by_shard: Vec<(usize, Vec<(usize, Bytes)>)> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let s = shard_of(k, n);
        match by_shard.iter_mut().find(|(id, _)| *id == s) {
            Some((_, ks)) => ks.push((i, k.clone())),
            None => by_shard.push((s, vec![(i, k.clone())])),
        }
    }
    let reads = by_shard.into_iter().map(|(s, ks)| {
        txn.run_async(
            s,
            Box::new(move |core: Rc<Core>| {
                async move {
                    let mut out = Vec::with_capacity(ks.len());
                    for (i, k) in ks {
                        let now = now_ms();
                        exec::load_entry(&core, db, &k, now).await;
                        let v = match core.shard.borrow_mut().lookup(db, &k, now) {
                            None => Ok(None),
                            Some(e) => string::as_str(e).map(|s| Some(Bytes::copy_from_slice(s))),
                        };
                        out.push((i, v));
                    }
                    out
                }
                .boxed_local()
            }),
        )
    });
    let mut found: Vec<(usize, ReadValue)> = Vec::with_capacity(keys.len());
    for part in futures::future::join_all(reads).await {
        found.extend(part?);
    }
    found.sort_unstable_by_key(|(i, _)| *i);
    Some(found.into_iter().map(|(_, v)| v).collect())
}

/// Locks the shards of `keys` and reads `sources` (a suffix of them) in key order.
async fn lock_and_read(
    core: &Rc<Core>,
    db: usize,
    keys: &[Bytes],
    sources: &[Bytes],
) -> Option<(Txn, Vec<ReadValue>)> {
    let n = core.global.shards();
    let txn = Txn::begin(core, keys.iter().map(|k| shard_of(k, n)).collect()).await?;
    let vals = read_strings(&txn, db, sources).await?;
    Some((txn, vals))
}

/// BITOP with keys on several shards: the sources folded here in key order, the result stored
/// on the destination's shard, all under the shards' locks.
pub async fn bitop(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let mut acc = match bitops::bitop_op(args) {
        Ok(op) => Bitop::new(op),
        Err(e) => return e,
    };
    let Some((txn, vals)) = lock_and_read(core, db, &args[2..], &args[3..]).await else {
        return shutting_down();
    };
    for v in vals {
        match v {
            Ok(v) => acc.feed(v.as_deref().unwrap_or_default()),
            Err(e) => return e,
        }
    }
    let (dest, result) = (args[2].clone(), acc.finish());
    let shard = shard_of(&dest, core.global.shards());
    txn.run(shard, move |s| {
        let mut ctx = Ctx {
            shard: s,
            db,
            now: now_ms(),
        };
        bitops::bitop_store(&mut ctx, &dest, result)
    })
    .await
    .unwrap_or_else(shutting_down)
}

/// The union of the HLLs at `args[1..]`, read under the shards' locks (held by the returned
/// transaction), or the reply that ends the command.
async fn hll_union(core: &Rc<Core>, db: usize, args: &[Bytes]) -> Result<(Txn, Union), Reply> {
    let Some((txn, vals)) = lock_and_read(core, db, &args[1..], &args[1..]).await else {
        return Err(shutting_down());
    };
    let mut union = Union::default();
    for v in vals {
        v.and_then(|v| union.feed(v.as_deref()))?;
    }
    Ok((txn, union))
}

/// PFCOUNT of keys on several shards: the count of their union.
pub async fn pfcount(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    match hll_union(core, db, args).await {
        Ok((_txn, union)) => union.count(),
        Err(e) => e,
    }
}

/// PFMERGE with keys on several shards: the union computed here, raised into the destination
/// on its shard.
pub async fn pfmerge(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let (txn, union) = match hll_union(core, db, args).await {
        Ok(u) => u,
        Err(e) => return e,
    };
    let dest = args[1].clone();
    let shard = shard_of(&dest, core.global.shards());
    txn.run(shard, move |s| {
        let mut ctx = Ctx {
            shard: s,
            db,
            now: now_ms(),
        };
        hyperloglog::pfmerge_store(&mut ctx, &dest, &union)
    })
    .await
    .unwrap_or_else(shutting_down)
}

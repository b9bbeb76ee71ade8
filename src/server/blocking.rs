//! Blocking pops: BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP BZPOPMIN BZPOPMAX BZMPOP, as Redis 7.0
//! runs them.
//!
//! A blocking command first runs its non-blocking form ([`Blocking::form`]: LMPOP, LMOVE,
//! ZMPOP), wherever its keys live. Finding nothing, it registers a [`Waiter`] with the shard of
//! each of its keys (first come, first served per key) and waits on its session's mailbox for
//! `Delivery::Wake(token)`, its timeout, CLIENT UNBLOCK or the end of its connection.
//!
//! A shard notes the keys with waiters that a write stores (`shard::blocked`, whatever the
//! write: LPUSH, ZADD, RENAME, RESTORE, a store command, LMOVE's push). After the command, or
//! after the transaction, that stored them, [`serve`] hands each such key's data to its
//! waiters in the order they blocked, popping on their behalf as Redis'
//! `handleClientsBlockedOnKeys` does: a push of several elements serves several waiters, and a
//! key pushed then popped inside one transaction wakes nobody. A waiter's state sits behind a
//! mutex that exactly one party claims (a shard serving it, or its own timeout or end), so an
//! element is never popped for a client that has gone, and a client blocked on keys of several
//! shards is served once. BLMOVE whose destination lives on another shard is not popped by the
//! shard: its waiter is woken to run LMOVE under a cross-shard transaction (atomic, as
//! `txn_collections::lmove`), and keeps its place when it finds nothing.
//!
//! Inside MULTI/EXEC and scripts, blocking commands do not block: [`Blocking::form`] is what
//! they run instead, and [`Blocking::finish`] shapes its reply (see [`try_once`]).
//!
//! Never: blocks a core (waiting is the session's task awaiting its mailbox), serves a key
//! while a transaction holds its shard, or leaves a waiter registered once its command ended.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use futures::future::{select, Either};

use super::core::{Core, Global, Job, Msg};
use super::session::{ClientInfo, Delivery};
use super::table::{self, Call, Exec, Spec};
use crate::cmd::args::{err, is, parse_f64};
use crate::cmd::list::{self, End};
use crate::cmd::{zset, Ctx};
use crate::protocol::Reply;
use crate::runtime::remote_wait;
use crate::shard::{now_ms, shard_of};

/// CLIENT UNBLOCK ... TIMEOUT: the command answers as on its timeout.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK ... ERROR: the command answers `-UNBLOCKED`.
pub const UNBLOCK_ERROR: u8 = 2;

/// What a blocking pop does once one of its keys holds data.
#[derive(Clone, Debug)]
pub enum Op {
    /// BLPOP/BRPOP (`count` None: `[key, element]`) and BLMPOP (`[key, [elements]]`).
    List { end: End, count: Option<usize> },
    /// BLMOVE and BRPOPLPUSH into `dst`.
    Move { from: End, to: End, dst: Bytes },
    /// BZPOPMIN/BZPOPMAX (`count` None: `[key, member, score]`) and BZMPOP
    /// (`[key, [[member, score], ...]]`).
    Zset { max: bool, count: Option<usize> },
}

/// A parsed blocking command.
pub struct Blocking {
    /// The keys it waits on, in argument order.
    pub keys: Vec<Bytes>,
    pub op: Op,
    /// Milliseconds to wait; 0 waits for ever.
    pub timeout_ms: u64,
    /// Its non-blocking form: the arguments of LMPOP, LMOVE/RPOPLPUSH or ZMPOP, run as that
    /// command runs (the form answers the nil reply when there is nothing to pop).
    pub form: Vec<Bytes>,
    pub form_spec: &'static Spec,
}

impl Blocking {
    /// The blocking command's reply from its non-blocking form's reply.
    pub fn finish(&self, r: Reply) -> Reply {
        finish(&self.op, r)
    }
}

/// A blocking pop's reply from the reply of its non-blocking step.
fn finish(op: &Op, r: Reply) -> Reply {
    match (op, r) {
        // LMPOP's `[key, [element]]` becomes `[key, element]`.
        (Op::List { count: None, .. }, Reply::Array(mut v)) if v.len() == 2 => match v.pop() {
            Some(Reply::Array(mut elems)) if elems.len() == 1 => {
                v.extend(elems.pop());
                Reply::Array(v)
            }
            other => {
                v.extend(other);
                Reply::Array(v)
            }
        },
        // ZMPOP's `[key, [[member, score]]]` becomes `[key, member, score]`.
        (Op::Zset { count: None, .. }, Reply::Array(mut v)) if v.len() == 2 => match v.pop() {
            Some(Reply::Array(mut pairs)) if pairs.len() == 1 => {
                if let Some(Reply::Array(pair)) = pairs.pop() {
                    v.extend(pair);
                }
                Reply::Array(v)
            }
            other => {
                v.extend(other);
                Reply::Array(v)
            }
        },
        (_, r) => r,
    }
}

/// Parses a blocking command's arguments (an [`Exec::Blocking`] in the command table).
pub type ParseFn = fn(&[Bytes]) -> Result<Blocking, Reply>;

/// Redis' getTimeoutFromObjectOrReply in seconds: decimals allowed, rounded up to the
/// millisecond.
fn timeout(arg: &[u8]) -> Result<u64, Reply> {
    let v = parse_f64(arg).ok_or_else(|| err("ERR timeout is not a float or out of range"))?;
    let ms = (v * 1000.0).ceil();
    // Redis casts to a long long: past its range (infinity included) that gives a negative.
    if !(0.0..9.2e18).contains(&ms) {
        return Err(err("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

fn form_spec(name: &[u8]) -> &'static Spec {
    // The forms are in the table: a missing one is a build mistake the table tests catch.
    table::lookup(name).unwrap_or(&table::TABLE[0])
}

/// LEFT or RIGHT, as LMPOP and LMOVE take it.
fn end_word(e: End) -> Bytes {
    Bytes::from_static(match e {
        End::Left => b"LEFT",
        End::Right => b"RIGHT",
    })
}

/// `NAME key [key ...] timeout` (BLPOP, BRPOP, BZPOPMIN, BZPOPMAX): its form is `form_name
/// numkeys key... end`.
fn keys_then_timeout(
    args: &[Bytes],
    form_name: &'static [u8],
    end: Bytes,
    op: Op,
) -> Result<Blocking, Reply> {
    let timeout_ms = timeout(&args[args.len() - 1])?;
    let keys = args[1..args.len() - 1].to_vec();
    let mut form = Vec::with_capacity(keys.len() + 3);
    form.push(Bytes::from_static(form_name));
    form.push(Bytes::from(keys.len().to_string()));
    form.extend(keys.iter().cloned());
    form.push(end);
    Ok(Blocking {
        keys,
        op,
        timeout_ms,
        form,
        form_spec: form_spec(form_name),
    })
}

fn bpop(args: &[Bytes], end: End) -> Result<Blocking, Reply> {
    let op = Op::List { end, count: None };
    keys_then_timeout(args, b"lmpop", end_word(end), op)
}

/// BLPOP key [key ...] timeout
pub fn blpop(args: &[Bytes]) -> Result<Blocking, Reply> {
    bpop(args, End::Left)
}

/// BRPOP key [key ...] timeout
pub fn brpop(args: &[Bytes]) -> Result<Blocking, Reply> {
    bpop(args, End::Right)
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
pub fn blmove(args: &[Bytes]) -> Result<Blocking, Reply> {
    let from = list::parse_end(&args[3])?;
    let to = list::parse_end(&args[4])?;
    let timeout_ms = timeout(&args[5])?;
    let mut form = args[..5].to_vec();
    form[0] = Bytes::from_static(b"lmove");
    Ok(Blocking {
        keys: vec![args[1].clone()],
        op: Op::Move {
            from,
            to,
            dst: args[2].clone(),
        },
        timeout_ms,
        form,
        form_spec: form_spec(b"lmove"),
    })
}

/// BRPOPLPUSH source destination timeout
pub fn brpoplpush(args: &[Bytes]) -> Result<Blocking, Reply> {
    let timeout_ms = timeout(&args[3])?;
    let mut form = args[..3].to_vec();
    form[0] = Bytes::from_static(b"rpoplpush");
    Ok(Blocking {
        keys: vec![args[1].clone()],
        op: Op::Move {
            from: End::Right,
            to: End::Left,
            dst: args[2].clone(),
        },
        timeout_ms,
        form,
        form_spec: form_spec(b"rpoplpush"),
    })
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
pub fn blmpop(args: &[Bytes]) -> Result<Blocking, Reply> {
    // Redis checks numkeys, the end and the count before the timeout.
    let (keys, end, count) = list::lmpop_args(&args[1..])?;
    let timeout_ms = timeout(&args[1])?;
    let mut form = args[1..].to_vec();
    form[0] = Bytes::from_static(b"lmpop");
    Ok(Blocking {
        keys,
        op: Op::List {
            end,
            count: Some(count),
        },
        timeout_ms,
        form,
        form_spec: form_spec(b"lmpop"),
    })
}

fn bzpop(args: &[Bytes], max: bool) -> Result<Blocking, Reply> {
    let end = Bytes::from_static(if max { b"MAX" } else { b"MIN" });
    keys_then_timeout(args, b"zmpop", end, Op::Zset { max, count: None })
}

/// BZPOPMIN key [key ...] timeout
pub fn bzpopmin(args: &[Bytes]) -> Result<Blocking, Reply> {
    bzpop(args, false)
}

/// BZPOPMAX key [key ...] timeout
pub fn bzpopmax(args: &[Bytes]) -> Result<Blocking, Reply> {
    bzpop(args, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(args: &[Bytes]) -> Result<Blocking, Reply> {
    let (range, max, count) = zset::parse_zmpop(&args[1..])?;
    let timeout_ms = timeout(&args[1])?;
    let keys = args[1..][range].to_vec();
    let mut form = args[1..].to_vec();
    form[0] = Bytes::from_static(b"zmpop");
    Ok(Blocking {
        keys,
        op: Op::Zset {
            max,
            count: Some(count),
        },
        timeout_ms,
        form,
        form_spec: form_spec(b"zmpop"),
    })
}

/// The key positions of BLMPOP and BZMPOP (`timeout numkeys key...`), for the table's
/// `keys_of`; the others' keys are in the table's first/last/step.
pub fn counted_keys(spec: &Spec, args: &[Bytes]) -> Vec<usize> {
    if !spec.has(table::MOVABLE_KEYS) {
        return Vec::new();
    }
    let Some(n) = args.get(2).and_then(|a| crate::cmd::args::parse_i64(a)) else {
        return Vec::new();
    };
    let n = n.clamp(0, args.len() as i64) as usize;
    (3..(3 + n).min(args.len())).collect()
}

/// The one party that gets to answer a waiter.
enum State {
    Waiting,
    /// A shard asked the waiter to run its move itself (BLMOVE to another shard).
    Woken,
    /// A shard popped for it: the reply waits for its session to take it.
    Served(Reply),
    /// Answered (timed out, unblocked, connection gone, or its reply taken).
    Gone,
}

/// A client blocked on keys, as every shard holding one of its keys sees it.
pub struct Waiter {
    token: u64,
    client: Arc<ClientInfo>,
    db: usize,
    op: Op,
    state: Mutex<State>,
}

impl Waiter {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The lock is never held across a panic-prone call: poisoning is not expected; if it
        // happened, the state is still meaningful.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims the waiter for its own ending: the reply a shard served it, if any.
    fn end(&self) -> Option<Reply> {
        match std::mem::replace(&mut *self.state(), State::Gone) {
            State::Served(r) => Some(r),
            _ => None,
        }
    }
}

/// One key's line of waiters, first blocked first.
type Line = VecDeque<Arc<Waiter>>;

/// This core's shard's waiters, per (db, key).
#[derive(Default)]
pub struct Waiters {
    queues: std::cell::RefCell<HashMap<(usize, Bytes), Line>>,
}

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Clients blocked right now (INFO's `blocked_clients`).
pub fn blocked_clients(global: &Global) -> usize {
    let mut n = 0;
    global.clients.for_each(|c| {
        if c.blocked.load(Ordering::Relaxed) != 0 {
            n += 1;
        }
    });
    n
}

/// Runs `f` on core `shard`'s [`Core`] (its shard free of transactions) and serves what it
/// made ready. None when that core is gone.
async fn on_core<R, F>(core: &Rc<Core>, shard: usize, f: F) -> Option<R>
where
    R: Send + 'static,
    F: FnOnce(&Rc<Core>) -> R + Send + 'static,
{
    if shard == core.id {
        core.gate.opened().await;
        let r = f(core);
        serve(core);
        return Some(r);
    }
    let (tx, rx) = oneshot::channel();
    // `Core::handle` serves after the job.
    let job: Job = Box::new(move |c| {
        let _ = tx.send(f(c));
    });
    let _waiting = remote_wait();
    if !core.global.send(shard, Msg::Run(job)) {
        return None;
    }
    rx.await.ok()
}

/// Runs a blocking command's non-blocking form as its own command runs: on its keys' shard,
/// or under a cross-shard transaction when they span shards.
async fn run_form(core: &Rc<Core>, db: usize, b: &Blocking) -> Reply {
    let n = core.global.shards();
    let mut shards = b.keys.iter().map(|k| shard_of(k, n));
    let first = shards.next().unwrap_or(core.id);
    let dst_apart = match &b.op {
        Op::Move { dst, .. } => shard_of(dst, n) != first,
        _ => false,
    };
    let spec = b.form_spec;
    let (f, cross) = match spec.exec {
        Exec::Keyed(f) => (f, None),
        Exec::Cross(f, c) | Exec::Movable(f, _, c) => (f, Some(c)),
        _ => return err("ERR internal error: no non-blocking form"),
    };
    // Its lists or sorted sets kept on SSD come back first, pinned in RAM until the form has
    // run (never while the command waits: it tries again when woken).
    let mut keys = b.keys.clone();
    if let Op::Move { dst, .. } = &b.op {
        keys.push(dst.clone());
    }
    let _pinned = super::exec::load_collections(core, db, keys).await;
    if shards.all(|s| s == first) && !dst_apart {
        let args = b.form.clone();
        return on_core(core, first, move |c| {
            f(
                &mut Ctx {
                    shard: &mut c.shard.borrow_mut(),
                    db,
                    now: now_ms(),
                },
                &args,
            )
        })
        .await
        .unwrap_or_else(|| err("ERR server is shutting down"));
    }
    match cross {
        Some(cross) => cross(core, spec, db, &b.form).await,
        None => err("ERR keys in request don't hash to the same shard"),
    }
}

/// What a blocking command answers where it may not block, outside any transaction: its
/// data when a key has some, else what Redis answers there (the nil array; BLMOVE and
/// BRPOPLPUSH a nil bulk, as LMOVE — their nil array is only for a real timeout). Runs its
/// form with jobs of its own, so it must not be called while holding shard locks: an EXEC or
/// script runner that holds them runs [`Blocking::form`] as [`Blocking::form_spec`] like any
/// queued command, under its locks, and passes the reply through [`Blocking::finish`]; the
/// shards to lock are the spec's `keys_of(args)`.
pub async fn try_once(core: &Rc<Core>, db: usize, parse: ParseFn, args: &[Bytes]) -> Reply {
    match parse(args) {
        Ok(b) => b.finish(run_form(core, db, &b).await),
        Err(e) => e,
    }
}

fn is_nothing(r: &Reply) -> bool {
    matches!(r, Reply::Nil | Reply::NilArray)
}

/// Runs a blocking command for a session (the table's [`Exec::Blocking`]).
pub async fn run(call: Call<'_>, parse: ParseFn) -> Reply {
    let (core, session, args) = call.parts();
    let b = match parse(&args) {
        Ok(b) => b,
        Err(e) => return e,
    };
    let db = session.db;
    let r = run_form(core, db, &b).await;
    if !is_nothing(&r) {
        return b.finish(r);
    }
    let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    let waiter = Arc::new(Waiter {
        token,
        client: session.client.clone(),
        db,
        op: b.op.clone(),
        state: Mutex::new(State::Waiting),
    });
    session.client.unblock.store(0, Ordering::Relaxed);
    let n = core.global.shards();
    let mut per_shard: Vec<(usize, Vec<Bytes>)> = Vec::new();
    for k in &b.keys {
        let s = shard_of(k, n);
        match per_shard.iter_mut().find(|(id, _)| *id == s) {
            Some((_, v)) if !v.contains(k) => v.push(k.clone()),
            Some(_) => {}
            None => per_shard.push((s, vec![k.clone()])),
        }
    }
    futures::future::join_all(per_shard.iter().map(|(s, keys)| {
        let (w, keys) = (waiter.clone(), keys.clone());
        on_core(core, *s, move |c| register(c, w, keys))
    }))
    .await;
    // Counted blocked once in line everywhere: a client seen blocked in INFO or CLIENT LIST
    // is served before anyone who blocks after it.
    session.client.blocked.store(token, Ordering::Relaxed);
    // Time blocked is not the command's own in INFO commandstats (Redis counts the call
    // before it blocks and the reply after).
    let blocked_at = crate::server::cmdstats::now();
    let deadline = (b.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(b.timeout_ms));
    let reply = loop {
        let wake = {
            let woke = std::pin::pin!(session.next_wake());
            match deadline {
                None => woke.await,
                Some(at) => {
                    let left = at.saturating_duration_since(Instant::now());
                    let sleep = std::pin::pin!(glommio::timer::sleep(left));
                    match select(woke, sleep).await {
                        Either::Left((w, _)) => w,
                        // Timed out: unless a shard served it meanwhile.
                        Either::Right(_) => break waiter.end().unwrap_or(Reply::NilArray),
                    }
                }
            }
        };
        match wake {
            // The connection is gone (or killed): whatever was served is lost with it, as in
            // Redis, where the reply would be written to a closed socket.
            None => break waiter.end().unwrap_or(Reply::NilArray),
            Some(t) if t != token => continue,
            Some(_) => {}
        }
        let woken = {
            let mut st = waiter.state();
            match std::mem::replace(&mut *st, State::Gone) {
                State::Served(r) => break r,
                other => {
                    let woken = matches!(other, State::Woken);
                    // Woken stays so while the move runs: the key's line waits for it.
                    *st = other;
                    woken
                }
            }
        };
        if woken {
            // BLMOVE into another shard: the move runs here, under a transaction.
            let r = run_form(core, db, &b).await;
            if !is_nothing(&r) {
                *waiter.state() = State::Gone;
                break r;
            }
            // Someone took the element first: back to waiting, in place.
            *waiter.state() = State::Waiting;
            let (src, w) = (b.keys[0].clone(), waiter.clone());
            let s = shard_of(&src, n);
            let _ = on_core(core, s, move |c| recheck(c, w.db, &src)).await;
            continue;
        }
        match session.client.unblock.swap(0, Ordering::Relaxed) {
            UNBLOCK_TIMEOUT => break waiter.end().unwrap_or(Reply::NilArray),
            UNBLOCK_ERROR => {
                break waiter
                    .end()
                    .unwrap_or_else(|| err("UNBLOCKED client unblocked via CLIENT UNBLOCK"))
            }
            _ => {}
        }
    };
    session.client.blocked.store(0, Ordering::Relaxed);
    session.blocked_ticks += crate::server::cmdstats::now().saturating_sub(blocked_at);
    // Leave no trace on any shard; the next waiter in line gets its turn.
    for (s, keys) in per_shard {
        let w = waiter.clone();
        // Sent even to this core: the job waits there while a transaction holds the shard.
        let job: Job = Box::new(move |c| unregister(c, &w, &keys));
        core.global.send(s, Msg::Run(job));
    }
    reply
}

/// Puts `w` in line on `keys` of this core's shard; a key that already holds data (pushed
/// while the command looked elsewhere) is noted ready, so it is served at once.
fn register(core: &Rc<Core>, w: Arc<Waiter>, keys: Vec<Bytes>) {
    let mut queues = core.waiters.queues.borrow_mut();
    let mut shard = core.shard.borrow_mut();
    for k in keys {
        let q = queues.entry((w.db, k.clone())).or_default();
        if q.is_empty() {
            shard.blocked.watch(w.db, &k);
        }
        q.push_back(w.clone());
        if shard.lookup_mut(w.db, &k, now_ms()).is_some() {
            shard.blocked.mark(w.db, &k);
        }
    }
}

/// Takes `w` out of line on `keys`, and lets the next in line look at them.
fn unregister(core: &Rc<Core>, w: &Arc<Waiter>, keys: &[Bytes]) {
    for k in keys {
        remove(core, w.db, k, |x| Arc::ptr_eq(x, w));
        recheck(core, w.db, k);
    }
}

/// Notes `key` ready if it holds data, for [`serve`] to look at.
fn recheck(core: &Rc<Core>, db: usize, key: &[u8]) {
    let mut shard = core.shard.borrow_mut();
    if core
        .waiters
        .queues
        .borrow()
        .contains_key(&(db, Bytes::copy_from_slice(key)))
        && shard.lookup_mut(db, key, now_ms()).is_some()
    {
        shard.blocked.mark(db, key);
    }
}

/// Removes the waiters `which` picks from `key`'s line.
fn remove(core: &Rc<Core>, db: usize, key: &[u8], which: impl Fn(&Arc<Waiter>) -> bool) {
    let mut queues = core.waiters.queues.borrow_mut();
    let id = (db, Bytes::copy_from_slice(key));
    let Some(q) = queues.get_mut(&id) else {
        return;
    };
    q.retain(|x| !which(x));
    if q.is_empty() {
        queues.remove(&id);
        core.shard.borrow_mut().blocked.unwatch(db, key);
    }
}

/// Serves the keys of this core's shard that writes made ready: each one's waiters, first
/// blocked first, while it holds data of the type they wait for. Called after every command
/// or job on the shard; costs one check when nothing is ready. A transaction holding the
/// shard defers it to its unlock.
pub fn serve(core: &Rc<Core>) {
    if core.gate.is_locked() {
        return;
    }
    loop {
        let ready = {
            let mut shard = core.shard.borrow_mut();
            if !shard.blocked.has_ready() {
                return;
            }
            shard.blocked.take_ready()
        };
        for (db, key) in ready {
            serve_key(core, db, &key);
        }
    }
}

/// What a key holds, as far as waiters care.
#[derive(PartialEq)]
enum Holds {
    Nothing,
    List,
    Zset,
    Other,
}

fn holds(core: &Core, db: usize, key: &[u8]) -> Holds {
    match core.shard.borrow_mut().lookup_mut(db, key, now_ms()) {
        None => Holds::Nothing,
        Some(e) => match e.type_name() {
            "list" => Holds::List,
            "zset" => Holds::Zset,
            _ => Holds::Other,
        },
    }
}

fn serve_key(core: &Rc<Core>, db: usize, key: &Bytes) {
    let id = (db, key.clone());
    let mut i = 0;
    loop {
        let Some(w) = core
            .waiters
            .queues
            .borrow()
            .get(&id)
            .and_then(|q| q.get(i).cloned())
        else {
            return;
        };
        let mut st = w.state();
        // A killed client is not served: what would be popped for it would be lost.
        if matches!(*st, State::Waiting) && w.client.killed.load(Ordering::Relaxed) {
            *st = State::Gone;
        }
        match *st {
            State::Waiting => {}
            // Its own move is under way: the line waits for it (it rechecks when done).
            State::Woken => return,
            State::Served(_) | State::Gone => {
                drop(st);
                remove(core, db, key, |x| Arc::ptr_eq(x, &w));
                continue;
            }
        }
        match (holds(core, db, key), &w.op) {
            (Holds::Nothing | Holds::Other, _) => return,
            // Redis 7.0 leaves a client waiting for another type blocked.
            (Holds::List, Op::Zset { .. }) | (Holds::Zset, Op::List { .. } | Op::Move { .. }) => {
                i += 1;
                continue;
            }
            _ => {}
        }
        if let Op::Move { dst, .. } = &w.op {
            // A destination on another shard, or a list of this one kept on SSD (it must be
            // read back first): the client runs its own move.
            let on_ssd = || core.shard.borrow().peek_offloaded(db, dst).is_some();
            if shard_of(dst, core.global.shards()) != core.id || on_ssd() {
                *st = State::Woken;
                drop(st);
                w.client.post(&core.global, Delivery::Wake(w.token));
                return;
            }
        }
        let reply = pop_for(core, db, key, &w.op, w.client.id);
        *st = State::Served(reply);
        drop(st);
        w.client.post(&core.global, Delivery::Wake(w.token));
        remove(core, db, key, |x| Arc::ptr_eq(x, &w));
    }
}

/// The pop a waiter (client `id`) asked for, on `key` of this core's shard (which holds its
/// type).
fn pop_for(core: &Core, db: usize, key: &Bytes, op: &Op, id: u64) -> Reply {
    let mut shard = core.shard.borrow_mut();
    shard.watches.tracking.caller = crate::shard::tracking::Caller {
        id,
        track: false,
        script: false,
        core: None,
    };
    let r = pop_with(&mut shard, db, key, op);
    if !matches!(r, Reply::NilArray | Reply::Nil | Reply::Error(_)) {
        // Popped in place: the keys changed for WATCH and CLIENT TRACKING, as a command's
        // write marks them in `exec::call`.
        shard.watches.touch(db, key);
        if let Op::Move { dst, .. } = op {
            shard.watches.touch(db, dst);
        }
    }
    shard.watches.tracking.caller = crate::shard::tracking::Caller::NONE;
    r
}

fn pop_with(shard: &mut crate::shard::Shard, db: usize, key: &Bytes, op: &Op) -> Reply {
    let ctx = &mut Ctx {
        shard,
        db,
        now: now_ms(),
    };
    let r = match op {
        Op::List { end, count } => list::mpop_one(ctx, key, *end, count.unwrap_or(1)),
        Op::Zset { max, count } => zset::zmpop_key(ctx, key, *max, count.unwrap_or(1)),
        Op::Move { from, to, dst } => {
            let args = [
                Bytes::from_static(b"lmove"),
                key.clone(),
                dst.clone(),
                end_word(*from),
                end_word(*to),
            ];
            return list::lmove(ctx, &args);
        }
    };
    let r = match r {
        Ok(Some(r)) => r,
        Ok(None) => Reply::NilArray,
        Err(e) => e,
    };
    finish(op, r)
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 when the client was blocked (it then answers as on
/// timeout, or `-UNBLOCKED`), else 0.
pub fn client_unblock(global: &Global, args: &[Bytes]) -> Reply {
    let how = match args.get(3) {
        None => UNBLOCK_TIMEOUT,
        Some(a) if is(a, "TIMEOUT") => UNBLOCK_TIMEOUT,
        Some(a) if is(a, "ERROR") => UNBLOCK_ERROR,
        Some(_) => return err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let Some(id) = crate::cmd::args::parse_i64(&args[2]) else {
        return err("ERR value is not an integer or out of range");
    };
    let Some(c) = u64::try_from(id).ok().and_then(|id| global.clients.get(id)) else {
        return Reply::Int(0);
    };
    let token = c.blocked.load(Ordering::Relaxed);
    if token == 0 {
        return Reply::Int(0);
    }
    c.unblock.store(how, Ordering::Relaxed);
    c.post(global, Delivery::Wake(token));
    Reply::Int(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line split at spaces.
    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    #[test]
    fn timeouts_as_redis_reads_them() {
        assert_eq!(timeout(b"0").ok(), Some(0));
        assert_eq!(timeout(b"0.001").ok(), Some(1));
        assert_eq!(timeout(b"0.0001").ok(), Some(1));
        assert_eq!(timeout(b"1.5").ok(), Some(1500));
        assert_eq!(timeout(b"-1").err(), Some(err("ERR timeout is negative")));
        assert_eq!(
            timeout(b"abc").err(),
            Some(err("ERR timeout is not a float or out of range"))
        );
    }

    #[test]
    fn forms_and_their_replies() {
        let b = blpop(&args("blpop a b 0")).unwrap();
        assert_eq!(b.form, args("lmpop 2 a b LEFT"));
        let r = Reply::Array(vec![
            Reply::bulk(Bytes::from_static(b"a")),
            Reply::Array(vec![Reply::bulk(Bytes::from_static(b"x"))]),
        ]);
        assert_eq!(
            b.finish(r),
            Reply::Array(vec![
                Reply::bulk(Bytes::from_static(b"a")),
                Reply::bulk(Bytes::from_static(b"x"))
            ])
        );
        let b = bzmpop(&args("bzmpop 1 2 a b MAX COUNT 3")).unwrap();
        assert_eq!(b.keys, args("a b"));
        assert_eq!(b.form, args("zmpop 2 a b MAX COUNT 3"));
        let spec = table::lookup(b"bzmpop").unwrap();
        assert_eq!(spec.keys_of(&args("bzmpop 1 2 a b MAX")), vec![3, 4]);
        assert!(blmove(&args("blmove a b UP LEFT 0")).is_err());
    }

    #[test]
    fn try_once_never_blocks() {
        super::super::tests::with_server(|core| async move {
            let once = |parse: ParseFn, line: &'static str| {
                let core = core.clone();
                async move { try_once(&core, 0, parse, &args(line)).await }
            };
            assert_eq!(once(blpop, "blpop k j 0").await, Reply::NilArray);
            assert_eq!(once(bzpopmax, "bzpopmax z 0").await, Reply::NilArray);
            // Redis answers BLMOVE with a nil bulk where it may not block.
            assert_eq!(once(blmove, "blmove k d LEFT LEFT 0").await, Reply::Nil);
            assert_eq!(
                once(brpop, "brpop k -1").await,
                err("ERR timeout is negative")
            );
            {
                let mut shard = core.shard.borrow_mut();
                let ctx = &mut Ctx {
                    shard: &mut shard,
                    db: 0,
                    now: now_ms(),
                };
                list::rpush(ctx, &args("rpush j a b c"));
                zset::zadd(ctx, &args("zadd z 1 m 2 n"));
            }
            let bulk = |s: &'static str| Reply::bulk(Bytes::from_static(s.as_bytes()));
            assert_eq!(
                once(blpop, "blpop k j 0").await,
                Reply::Array(vec![bulk("j"), bulk("a")])
            );
            assert_eq!(once(brpoplpush, "brpoplpush j d 0").await, bulk("c"));
            assert_eq!(
                once(bzpopmax, "bzpopmax z 0").await,
                Reply::Array(vec![bulk("z"), bulk("n"), Reply::Double(2.0)])
            );
            assert_eq!(
                once(blmpop, "blmpop 0 1 j RIGHT COUNT 5").await,
                Reply::Array(vec![bulk("j"), Reply::Array(vec![bulk("b")])])
            );
        });
    }
}

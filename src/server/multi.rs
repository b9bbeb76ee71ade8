//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, as Redis 7.0 runs them, over shards.
//!
//! MULTI makes the session queue what follows (`+QUEUED`); a command refused while queueing
//! (unknown, wrong arity, not allowed in MULTI, out of memory) answers its error and makes EXEC
//! abort with `-EXECABORT`. EXEC locks every shard the queued commands (and the watched keys)
//! live on, checks the watched keys, runs the commands in order through `server::locked`, and
//! unlocks: no client sees part of a transaction. When everything is on the connection's own
//! shard and nothing waits on disk, EXEC runs the queue inline without locking (one core runs
//! it without a pause, which is atomic already).
//!
//! WATCH registers each key on its shard (`shard::watch`), noting the version there and
//! whether the key was live; EXEC fails (null array) when a version moved, or a key live at
//! WATCH time has expired since. A key already expired at WATCH is deleted then (no logical
//! change), so it is simply a missing key.
//!
//! Never: runs a queued command outside the locks of its shards, or leaves a watcher
//! registered once its session ends (EXEC, DISCARD, UNWATCH and disconnect drop them).

use crate::shard::tracking::Caller;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::cmdstats;
use super::core::{Core, Global, Job, Msg};
use super::dispatch;
use super::exec;
use super::locked::{Locked, ShardSet};
use super::script::busy;
use super::session::Session;
use super::table::{Call, Exec, Spec, DENYOOM, NO_MULTI, NO_QUEUE};
use crate::cmd::args::{err, ERR_OOM};
use crate::cmd::ShardFn;
use crate::protocol::Reply;
use crate::shard::{hash, is_expired, now_ms, shard_of, Shard};

/// One session's transaction state.
#[derive(Default)]
pub struct MultiState {
    /// Commands queued since MULTI; None outside MULTI.
    queue: Option<Vec<Queued>>,
    /// A command was refused while queueing: EXEC aborts.
    refused: bool,
    watched: Vec<WatchedKey>,
    /// Set while commands run inside EXEC (or a script): a blocking command must answer at
    /// once, as when its timeout passes, instead of waiting (Redis' CLIENT_DENY_BLOCKING).
    pub deny_blocking: bool,
}

struct Queued {
    spec: &'static Spec,
    args: Vec<Bytes>,
}

/// A key a session watches, with what EXEC checks.
#[derive(Clone)]
pub struct WatchedKey {
    db: usize,
    key: Bytes,
    shard: usize,
    version: u64,
    /// The key existed (not expired) when watched.
    live: bool,
}

impl MultiState {
    /// True between MULTI and EXEC/DISCARD.
    pub fn queuing(&self) -> bool {
        self.queue.is_some()
    }

    /// Marks the transaction refused: its EXEC aborts (Redis' flagTransaction).
    pub(crate) fn refuse(&mut self) {
        self.refused = true;
    }

    /// Whether a command was refused since MULTI.
    pub(crate) fn refused(&self) -> bool {
        self.refused
    }

    /// Unregisters every watched key: on this core's shard at once (`local`, when the caller
    /// is on its core), elsewhere by a message (those keep their order with later ones).
    pub fn forget_watches(&mut self, global: &Global, local: Option<&Core>) {
        if self.watched.is_empty() {
            return;
        }
        let mut by_shard: Vec<(usize, Vec<(usize, Bytes)>)> = Vec::new();
        for w in self.watched.drain(..) {
            match by_shard.iter_mut().find(|(s, _)| *s == w.shard) {
                Some((_, v)) => v.push((w.db, w.key)),
                None => by_shard.push((w.shard, vec![(w.db, w.key)])),
            }
        }
        for (s, keys) in by_shard {
            if let Some(core) = local.filter(|c| c.id == s) {
                let watches = &mut core.shard.borrow_mut().watches;
                for (db, k) in keys {
                    watches.remove(db, &k);
                }
                continue;
            }
            let job: Job = Box::new(move |core| {
                let watches = &mut core.shard.borrow_mut().watches;
                for (db, k) in keys {
                    watches.remove(db, &k);
                }
            });
            global.send(s, Msg::Run(job));
        }
    }
}

fn set_queued(session: &Session, n: i64) {
    session.client.multi.store(n, Ordering::Relaxed);
}

/// Inside MULTI: queues a request (`+QUEUED`) or refuses it, marking the transaction
/// refused. None for the commands that run at once even in MULTI (EXEC, DISCARD, MULTI,
/// WATCH, QUIT: table flag NO_QUEUE).
pub fn queue(
    core: &Core,
    session: &mut Session,
    req: &dispatch::Request,
    oom: &mut Option<bool>,
) -> Option<Reply> {
    let refusal = match dispatch::admit(session, req) {
        Ok(spec) if spec.has(NO_QUEUE) => return None,
        Ok(spec) if spec.has(NO_MULTI) => Err(err("ERR Command not allowed inside a transaction")),
        // A busy script refuses it (and so the transaction) before it is queued.
        Ok(spec) if super::script::busy::past_threshold(&core.global.settings) => {
            match super::script::busy::busy_reply(core, session, spec, &req.args) {
                Some(busy) => Err(busy),
                None => Ok(spec),
            }
        }
        // Queueing could take memory without bound: refused when over, as Redis does.
        Ok(_) if dispatch::over_memory(core, oom) => Err(err(ERR_OOM)),
        other => other,
    };
    let spec = match refusal {
        Ok(spec) => spec,
        Err(e) => {
            session.multi.refused = true;
            return Some(e);
        }
    };
    let st = &mut session.multi;
    // A refused transaction only waits for its EXEC: nothing more is kept.
    if !st.refused {
        if let Some(q) = st.queue.as_mut() {
            q.push(Queued {
                spec,
                args: req.args.clone(),
            });
            let n = q.len() as i64;
            set_queued(session, n);
        }
    }
    Some(Reply::Status("QUEUED"))
}

/// Leaves MULTI and forgets the watched keys (DISCARD, an aborted EXEC).
pub(crate) fn discard_state(core: &Core, session: &mut Session) {
    session.multi.queue = None;
    session.multi.refused = false;
    set_queued(session, -1);
    let global = core.global.clone();
    session.multi.forget_watches(&global, Some(core));
}

/// Registers `keys` of `db`, all on `shard` (this `sh`), for WATCH in one step of that shard:
/// each key's version there and whether it is live.
fn register(sh: &mut Shard, shard: usize, db: usize, keys: Vec<Bytes>) -> Vec<WatchedKey> {
    let now = now_ms();
    keys.into_iter()
        .map(|key| {
            // Looking first deletes a key already expired: watching it is watching a missing
            // key.
            let live = sh.contains(db, &key, now);
            let version = sh.watches.add(db, &key);
            WatchedKey {
                db,
                key,
                shard,
                version,
                live,
            }
        })
        .collect()
}

/// WATCH of `keys` in `db` answered by a busy script's hook: registered at once, as Redis
/// does, so a write the script makes after the reply fails the EXEC. A key on this core's
/// shard is registered in place; one on another shard by a job sent under the script's
/// transaction `locked` (which holds every shard), driven to its reply here. None when
/// shutting down.
pub(crate) fn watch_from_hook(
    core: &Rc<Core>,
    locked: &Locked,
    db: usize,
    keys: &[Bytes],
) -> Option<Vec<WatchedKey>> {
    let n = core.global.shards();
    let mut by_shard: Vec<(usize, Vec<Bytes>)> = Vec::new();
    for k in keys {
        let s = shard_of(k, n);
        match by_shard.iter_mut().find(|(id, _)| *id == s) {
            Some((_, ks)) => ks.push(k.clone()),
            None => by_shard.push((s, vec![k.clone()])),
        }
    }
    let mut watched = Vec::new();
    for (s, keys) in by_shard {
        if s == core.id {
            // The script holds this shard and is not inside a command of its own now.
            let mut sh = core.shard.try_borrow_mut().ok()?;
            watched.extend(register(&mut sh, s, db, keys));
        } else {
            let job = locked.on_shard(core, s, move |sh| register(sh, s, db, keys));
            watched.extend(super::script::call::drive(job)?);
        }
    }
    Some(watched)
}

/// Gives `session` keys watched for it (`watch_from_hook`).
pub(crate) fn adopt_watches(session: &mut Session, keys: Vec<WatchedKey>) {
    session.multi.watched.extend(keys);
}

/// Enters MULTI (the session is not in it).
pub(crate) fn begin(session: &mut Session) {
    session.multi.queue = Some(Vec::new());
    session.multi.refused = false;
    set_queued(session, 0);
}

/// MULTI
pub fn multi(call: Call<'_>) -> Reply {
    let st = &mut call.session.multi;
    if st.queue.is_some() {
        return err("ERR MULTI calls can not be nested");
    }
    st.queue = Some(Vec::new());
    st.refused = false;
    set_queued(call.session, 0);
    Reply::Ok
}

/// DISCARD
pub fn discard(call: Call<'_>) -> Reply {
    if !call.session.multi.queuing() {
        return err("ERR DISCARD without MULTI");
    }
    discard_state(call.core, call.session);
    Reply::Ok
}

/// UNWATCH
pub fn unwatch(call: Call<'_>) -> Reply {
    let global: Arc<Global> = call.core.global.clone();
    call.session.multi.forget_watches(&global, Some(call.core));
    Reply::Ok
}

/// WATCH key [key ...]
pub async fn watch(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    if session.multi.queuing() {
        return err("ERR WATCH inside MULTI is not allowed");
    }
    let (db, n) = (session.db, core.global.shards());
    let mut by_shard: Vec<(usize, Vec<Bytes>)> = Vec::new();
    for k in &args[1..] {
        let known = session
            .multi
            .watched
            .iter()
            .any(|w| w.db == db && w.key == *k)
            || by_shard.iter().any(|(_, ks)| ks.contains(k));
        if known {
            continue;
        }
        let s = shard_of(k, n);
        match by_shard.iter_mut().find(|(id, _)| *id == s) {
            Some((_, ks)) => ks.push(k.clone()),
            None => by_shard.push((s, vec![k.clone()])),
        }
    }
    // During a busy script (which holds every shard) registered at once, as Redis does.
    let script_core = busy::busy_core(&core.global.settings);
    let registering = by_shard.into_iter().map(|(s, keys)| {
        let f = move |sh: &mut Shard| register(sh, s, db, keys);
        async move {
            match script_core {
                Some(sc) => busy::on_shard_beside_script(core, s, sc, f).await,
                None => core.on_shard(s, f).await,
            }
        }
    });
    for part in futures::future::join_all(registering).await {
        match part {
            Some(ws) => session.multi.watched.extend(ws),
            None => return err("ERR server is shutting down"),
        }
    }
    Reply::Ok
}

/// On its shard: true when none of `keys` changed since WATCH; unregisters them.
fn check_watched(sh: &mut Shard, keys: &[WatchedKey], now: u64) -> bool {
    let mut unchanged = true;
    for w in keys {
        if sh.watches.version(w.db, &w.key) != Some(w.version) {
            unchanged = false;
        } else if w.live {
            // Expired since WATCH, even if nobody deleted it yet.
            let table = &sh.dbs[w.db].table;
            if table
                .find(&w.key, hash(&w.key))
                .is_some_and(|pos| is_expired(table.expire_at(pos), now))
            {
                unchanged = false;
            }
        }
        sh.watches.remove(w.db, &w.key);
    }
    unchanged
}

/// EXEC
pub async fn exec(call: Call<'_>) -> Reply {
    let core = call.core;
    let reply = exec_queue(call).await;
    if let Reply::Array(ran) = &reply {
        // Each command it ran is processed now (queueing did not count it), as Redis counts.
        core.shard.borrow_mut().stats.commands += ran.len() as u64;
    }
    reply
}

/// EXEC's work: the queued commands' replies (an array), or why they did not run.
async fn exec_queue(call: Call<'_>) -> Reply {
    let (core, session, _) = call.parts();
    let Some(queue) = session.multi.queue.take() else {
        return err("ERR EXEC without MULTI");
    };
    set_queued(session, -1);
    let refused = std::mem::take(&mut session.multi.refused);
    let watched = std::mem::take(&mut session.multi.watched);
    let abort = |session: &mut Session, watched: Vec<WatchedKey>, reply: Reply| {
        session.multi.watched = watched;
        session.multi.forget_watches(&core.global, Some(core));
        reply
    };
    if refused {
        return abort(
            session,
            watched,
            err("EXECABORT Transaction discarded because of previous errors."),
        );
    }
    if queue.iter().any(|q| q.spec.has(DENYOOM)) && dispatch::over_memory(core, &mut None) {
        let reason = format!("EXECABORT Transaction discarded because of: {ERR_OOM}");
        return abort(session, watched, Reply::Error(reason));
    }
    let mut need = ShardSet::default();
    for q in &queue {
        need.add_command(core, q.spec, &q.args);
    }
    for w in &watched {
        need.add_shard(w.shard);
    }
    let tiered = core.global.settings.tiered.is_some();
    if !tiered && need.only(core.id) && all_inline(core, &queue) {
        return exec_inline(core, session, queue, &watched).await;
    }
    if let Some(s) = need.single().filter(|&s| !tiered && s != core.id) {
        if let Some(cmds) = keyed_on(core, s, &queue) {
            let caller = super::tracking::caller(session);
            let track = core.global.settings.latency_tracking();
            return exec_remote(core, s, session.db, cmds, watched, caller, track).await;
        }
    }
    let Some(locked) = Locked::lock(core, need).await else {
        return err("ERR server is shutting down");
    };
    let mut by_shard: Vec<(usize, Vec<WatchedKey>)> = Vec::new();
    for w in watched {
        match by_shard.iter_mut().find(|(s, _)| *s == w.shard) {
            Some((_, v)) => v.push(w),
            None => by_shard.push((w.shard, vec![w])),
        }
    }
    let checks = by_shard
        .into_iter()
        .map(|(s, keys)| locked.on_shard(core, s, move |sh| check_watched(sh, &keys, now_ms())));
    let unchanged = futures::future::join_all(checks)
        .await
        .into_iter()
        .all(|ok| ok == Some(true));
    if !unchanged {
        return Reply::NilArray;
    }
    let mut replies = Vec::with_capacity(queue.len());
    let n = core.global.shards();
    let track = core.global.settings.latency_tracking();
    let mut rest = queue.into_iter().peekable();
    while let Some(q) = rest.next() {
        // Keyed commands in a row for the same other shard travel as one job.
        let remote = dispatch::one_shard(n, core.id, q.spec, &q.args)
            .filter(|&(s, _)| !tiered && s != core.id && locked.holds(s));
        let Some((s, f)) = remote else {
            let target = cmdstats::target(q.spec, &q.args);
            let start = cmdstats::now();
            let reply = locked.run(core, session, q.spec, q.args).await;
            cmdstats::ran_for(session, target, &reply, start, track);
            replies.push(reply);
            if session.close_after_reply {
                break;
            }
            continue;
        };
        let mut run = vec![(q.spec, f, q.args)];
        while let Some(next) = rest.peek() {
            match dispatch::one_shard(n, core.id, next.spec, &next.args) {
                Some((s2, f)) if s2 == s => {
                    let next = rest.next().expect("peeked");
                    run.push((next.spec, f, next.args));
                }
                _ => break,
            }
        }
        let db = session.db;
        let count = run.len();
        let caller = super::tracking::caller(session);
        match locked
            .on_shard(core, s, move |sh| run_all(sh, db, run, caller, track))
            .await
        {
            Some(rs) => replies.extend(rs),
            None => replies.extend((0..count).map(|_| err("ERR server is shutting down"))),
        }
    }
    Reply::Array(replies)
}

/// A keyed command ready to run on its shard: (command, function, arguments).
type KeyedCmd = (&'static Spec, ShardFn, Vec<Bytes>);

/// Runs `cmds` on their shard `sh`, counted in this core's INFO commandstats (`track`:
/// latency tracking).
fn run_all(
    sh: &mut Shard,
    db: usize,
    cmds: Vec<KeyedCmd>,
    caller: Caller,
    track: bool,
) -> Vec<Reply> {
    let now = now_ms();
    cmds.into_iter()
        .map(|(spec, f, args)| {
            let target = cmdstats::target(spec, &args);
            let start = cmdstats::now();
            let reply = exec::call(sh, db, now, spec, f, &args, caller);
            cmdstats::ran(target, &reply, start, track);
            reply
        })
        .collect()
}

/// The queue as keyed commands of shard `s`, when every one of them is.
fn keyed_on(core: &Core, s: usize, queue: &[Queued]) -> Option<Vec<KeyedCmd>> {
    let n = core.global.shards();
    queue
        .iter()
        .map(|q| match dispatch::one_shard(n, core.id, q.spec, &q.args) {
            Some((shard, f)) if shard == s => Some((q.spec, f, q.args.clone())),
            _ => None,
        })
        .collect()
}

/// EXEC of keyed commands that all live on one other shard: one job there checks the watched
/// keys and runs them all, with nothing else running on that core meanwhile.
async fn exec_remote(
    core: &Rc<Core>,
    s: usize,
    db: usize,
    cmds: Vec<KeyedCmd>,
    watched: Vec<WatchedKey>,
    caller: Caller,
    track: bool,
) -> Reply {
    let done = core
        .on_shard(s, move |sh| {
            check_watched(sh, &watched, now_ms()).then(|| run_all(sh, db, cmds, caller, track))
        })
        .await;
    match done {
        Some(Some(replies)) => Reply::Array(replies),
        Some(None) => Reply::NilArray,
        None => err("ERR server is shutting down"),
    }
}

/// True when every queued command runs on this core without waiting: keyed commands of this
/// shard and connection commands.
fn all_inline(core: &Core, queue: &[Queued]) -> bool {
    let n = core.global.shards();
    queue.iter().all(|q| match q.spec.exec {
        Exec::Session(_) => true,
        _ => dispatch::one_shard(n, core.id, q.spec, &q.args).is_some_and(|(s, _)| s == core.id),
    })
}

/// EXEC of a queue that only touches this core's shard: once no transaction holds the shard,
/// checked and run with no await in between, so nothing else runs meanwhile.
async fn exec_inline(
    core: &Rc<Core>,
    session: &mut Session,
    queue: Vec<Queued>,
    watched: &[WatchedKey],
) -> Reply {
    while core.gate.is_locked() {
        core.gate.opened().await;
    }
    let now = now_ms();
    if !check_watched(&mut core.shard.borrow_mut(), watched, now) {
        return Reply::NilArray;
    }
    let deny = std::mem::replace(&mut session.multi.deny_blocking, true);
    let n = core.global.shards();
    let track = core.global.settings.latency_tracking();
    let mut replies = Vec::with_capacity(queue.len());
    for q in queue {
        let target = cmdstats::target(q.spec, &q.args);
        let start = cmdstats::now();
        let reply = match q.spec.exec {
            Exec::Session(f) => f(Call {
                core,
                session,
                args: q.args,
            }),
            _ => match dispatch::one_shard(n, core.id, q.spec, &q.args) {
                Some((_, f)) => {
                    let db = session.db;
                    let caller = super::tracking::caller(session);
                    let mut shard = core.shard.borrow_mut();
                    exec::call(&mut shard, db, now, q.spec, f, &q.args, caller)
                }
                None => err("ERR internal error: not a local command"),
            },
        };
        cmdstats::ran_for(session, target, &reply, start, track);
        replies.push(reply);
        if session.close_after_reply {
            break;
        }
    }
    session.multi.deny_blocking = deny;
    // Clients blocked on keys the transaction pushed are served once it is whole.
    super::blocking::serve(core);
    Reply::Array(replies)
}

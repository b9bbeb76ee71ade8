//! The one dispatcher: a batch of requests from one session in, their replies out, in request
//! order. It knows no wire format: the RESP front end (`net::connection`) parses bytes into
//! [`Request`]s and encodes the [`Replies`]; the memcached one will do the same with its own
//! codec; a test drives it with neither.
//!
//! Commands for the local shard run inline at once; commands for other shards are grouped per
//! shard and each group travels as one message (Dragonfly's "squashing"), all groups in flight
//! together. Per key, order is kept (a key always maps to one group); commands that are not
//! single-shard (connection and server commands, split keys, keys on several shards) are
//! barriers: everything before them completes first.
//!
//! Each request is counted for INFO commandstats/errorstats (`cmdstats`) on the core that
//! runs it: refused ones here, keyed ones where their shard runs them.
//!
//! Never: looks a command up by name (the request carries its table entry), touches a socket,
//! or lets a request past the auth, arity and memory checks it fails.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures::FutureExt;
use smallvec::SmallVec;

use super::core::Core;
use super::session::{ReplyMode, Session};
use super::table::{
    self, Call, Exec, Merge, Spec, BLOCKING, DENYOOM, MOVABLE_KEYS, NOAUTH, PUBSUB_OK, WRITE,
};
use super::{blocking, cmdstats, eviction, exec, multi, tracking, txn};
use crate::cmd::args::{err, ERR_NOAUTH, ERR_OOM};
use crate::cmd::{wrong_args, ShardFn};
use crate::protocol::Reply;
use crate::shard::tracking::Caller;
use crate::shard::{now_ms, shard_of, snapshot_backlog_limit};

/// One parsed request: its table entry (looked up once, where it was parsed) and arguments.
pub struct Request {
    /// None when the name is not in the table (the reply is Redis' unknown-command error).
    pub spec: Option<&'static Spec>,
    /// The arguments, the command's name first.
    pub args: Vec<Bytes>,
}

impl Request {
    /// A request for `args` (the name first, at least one argument).
    pub fn new(args: Vec<Bytes>) -> Request {
        let spec = args.first().and_then(|name| table::lookup(name));
        Request { spec, args }
    }

    /// Whether it may add data (cache mode makes room, writers wait for the offloader).
    fn denyoom(&self) -> bool {
        self.spec.is_some_and(|s| s.has(DENYOOM))
    }

    fn writes(&self) -> bool {
        self.spec.is_some_and(|s| s.has(WRITE))
    }
}

/// A batch's replies in request order, with the protocol version each is encoded in (HELLO
/// switches it mid-batch: its own reply and those after it use the new version).
pub struct Replies {
    list: Vec<Reply>,
    resp3: bool,
    /// (first reply index, RESP3 from there on), in order.
    switches: SmallVec<[(usize, bool); 1]>,
}

impl Replies {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Each reply with whether it is encoded as RESP3.
    pub fn iter(&self) -> impl Iterator<Item = (&Reply, bool)> {
        let mut switches = self.switches.iter().peekable();
        let mut resp3 = self.resp3;
        self.list.iter().enumerate().map(move |(i, r)| {
            while let Some(&&(at, v)) = switches.peek() {
                if at > i {
                    break;
                }
                resp3 = v;
                switches.next();
            }
            (r, resp3)
        })
    }

    /// The replies alone.
    pub fn into_vec(self) -> Vec<Reply> {
        self.list
    }
}

/// How one request will run.
enum Route {
    /// Answer known without running anything (errors).
    Reply(Reply),
    /// Single-shard command for `shard`.
    Keyed(usize, &'static Spec, ShardFn),
    /// Anything else: runs on this core after all earlier requests completed.
    Barrier(&'static Spec),
}

/// The checks every request passes before it runs or is queued (MULTI): a known command, its
/// arity (whole key/value groups included), authentication. Notes it as the session's last
/// command.
pub(super) fn admit(session: &Session, req: &Request) -> Result<&'static Spec, Reply> {
    let args = &req.args;
    let Some(spec) = req.spec else {
        return Err(table::unknown_command(args));
    };
    if !spec.arity_ok(args.len()) {
        return Err(wrong_args(spec.name));
    }
    if !session.authed && !spec.has(NOAUTH) {
        return Err(err(ERR_NOAUTH));
    }
    if session.subs.active() && !session.resp3 && !spec.has(PUBSUB_OK) {
        return Err(Reply::Error(format!("ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", spec.name)));
    }
    session
        .client
        .last_cmd
        .store(spec.index(), Ordering::Relaxed);
    // Key/value lists (MSET, MSETNX) must come in whole groups.
    if spec.step > 1 && spec.last_key < 0 && !(args.len() - 1).is_multiple_of(spec.step as usize) {
        return Err(wrong_args(spec.name));
    }
    if let Exec::Split(_, group, _) = spec.exec {
        if !(args.len() - 1).is_multiple_of(group) {
            return Err(wrong_args(spec.name));
        }
    }
    Ok(spec)
}

/// True when store mode refuses commands that add data (`oom` caches the answer for a batch).
/// Cache mode evicts instead of refusing (see `eviction`). Store mode refuses once used memory
/// passes what keeps RSS itself under maxmemory: with the tier file full, used memory at
/// maxmemory had RSS 13% past it.
pub(super) fn over_memory(core: &Core, oom: &mut Option<bool>) -> bool {
    *oom.get_or_insert_with(|| {
        let max = core.global.settings.maxmemory();
        max > 0
            && !core.global.settings.cache_mode
            && crate::memory::used_memory() > eviction::rss_limit(&core.global, max)
    })
}

/// The shard that runs keyed command `spec` with `args` and its function, when all its keys
/// live on one shard (`here`, the calling core, for one without keys); None when it must run
/// as a barrier (keys on several shards, connection and server commands).
pub(super) fn one_shard(
    n: usize,
    here: usize,
    spec: &'static Spec,
    args: &[Bytes],
) -> Option<(usize, ShardFn)> {
    fn same(mut shards: impl Iterator<Item = usize>, here: usize) -> Option<usize> {
        let first = shards.next().unwrap_or(here);
        shards.all(|s| s == first).then_some(first)
    }
    match spec.exec {
        Exec::Keyed(f) | Exec::Cross(f, _) | Exec::Split(f, _, _) => {
            let keys = spec.key_indices(args.len()).map(|i| shard_of(&args[i], n));
            Some((same(keys, here)?, f))
        }
        Exec::Movable(f, _, _) => {
            let keys = spec.keys_of(args);
            Some((same(keys.iter().map(|&i| shard_of(&args[i], n)), here)?, f))
        }
        Exec::Session(_) | Exec::Await(_) | Exec::AwaitKeyed(..) | Exec::Blocking(_) => None,
    }
}

fn route(core: &Core, session: &mut Session, req: &Request, oom: &mut Option<bool>) -> Route {
    let spec = match admit(session, req) {
        Ok(spec) => spec,
        Err(e) => return Route::Reply(e),
    };
    if let Some(busy) = super::script::busy::busy_reply(core, session, spec, &req.args) {
        return Route::Reply(busy);
    }
    if spec.has(DENYOOM) && over_memory(core, oom) {
        return Route::Reply(err(ERR_OOM));
    }
    match one_shard(core.global.shards(), core.id, spec, &req.args) {
        Some((shard, f)) => Route::Keyed(shard, spec, f),
        None => Route::Barrier(spec),
    }
}

/// Runs a batch of requests for `session` and returns their replies, in order. A request that
/// closes the session (QUIT, CLIENT KILL of itself) ends the batch: later ones get no reply.
pub async fn dispatch(core: &Rc<Core>, session: &mut Session, reqs: Vec<Request>) -> Replies {
    let n = reqs.len();
    session
        .client
        .last_cmd_ms
        .store(core.global.uptime_ms(), Ordering::Relaxed);
    core.shard.borrow_mut().stats.commands += n as u64;
    // Refused or queued in MULTI: not processed (Redis counts refusals in rejected_calls
    // only).
    let mut rejected = 0u64;
    let track = core.global.settings.latency_tracking();
    let mut replies: Vec<Option<Reply>> = vec![None; n];
    let resp3_at_start = session.resp3;
    let mut switches = SmallVec::new();
    // Remote groups: shard -> (request index, function, args).
    let mut groups: Vec<Vec<Pending>> = Vec::new();
    let tiered = core.global.settings.tiered.is_some();
    let mut oom = None;
    // Requests whose replies CLIENT REPLY OFF/SKIP silences.
    let mut silent: SmallVec<[usize; 1]> = SmallVec::new();
    if n >= 4 {
        prefetch_local(core, session.db, &reqs);
    }
    if tiered {
        wait_for_room(core, &reqs, session.multi.queuing()).await;
        // Decided now, beside the room it waited for: the RSS overhead both limits follow
        // moves at every heartbeat, and a later look could refuse what the wait let through.
        over_memory(core, &mut oom);
    }
    if core.global.settings.cache_mode {
        let incoming: usize = reqs
            .iter()
            .filter(|r| r.denyoom())
            .map(|r| r.args.iter().map(|x| x.len()).sum::<usize>())
            .sum();
        if incoming > 0 {
            eviction::make_room(core, incoming as u64).await;
        }
    }
    let backlog_limit =
        snapshot_backlog_limit(core.global.settings.maxmemory(), core.global.shards());
    if core.shard.borrow().snapshot_backlog() > backlog_limit {
        wait_for_snapshot(core, &reqs, backlog_limit).await;
    }
    // Values the batch's local commands read from disk are fetched together (without a tier
    // there is nothing to fetch, and nothing to build or drop per batch).
    let pre = if !tiered {
        None
    } else if n > 1 {
        let local: Vec<(&'static Spec, &[Bytes])> = reqs
            .iter()
            .filter_map(|r| {
                let spec = r.spec?;
                let key = spec.key_indices(r.args.len()).next()?;
                (shard_of(&r.args[key], core.global.shards()) == core.id)
                    .then_some((spec, &r.args[..]))
            })
            .collect();
        let pre = exec::preload(core, session.db, &local).await;
        if pre.read_any() && n >= 4 {
            // Other connections ran while the reads were out.
            prefetch_local(core, session.db, &reqs);
        }
        Some(pre)
    } else {
        Some(exec::Preloaded::default())
    };
    // One clock read per batch: commands of one batch see the same time, like Redis' per-call
    // snapshot.
    let now = now_ms();
    for (i, req) in reqs.into_iter().enumerate() {
        let skip = session.reply_mode == ReplyMode::SkipNext;
        if skip {
            session.reply_mode = ReplyMode::On;
        }
        if session.multi.queuing() {
            // Inside MULTI: queued (or refused) here, unless it is one that runs at once.
            if let Some(r) = multi::queue(core, session, &req, &mut oom) {
                // Not processed now: a queued command counts when EXEC runs it, as in Redis.
                rejected += 1;
                if r.is_error() {
                    cmdstats::rejected(cmdstats::target_of(req.spec, &req.args), &r);
                }
                replies[i] = Some(r);
                if skip || session.reply_mode == ReplyMode::Off {
                    silent.push(i);
                }
                continue;
            }
        }
        let spec_name = req.spec.map(|s| s.name);
        match route(core, session, &req, &mut oom) {
            Route::Reply(r) => {
                rejected += 1;
                cmdstats::rejected(cmdstats::target_of(req.spec, &req.args), &r);
                replies[i] = Some(r);
            }
            Route::Keyed(s, spec, f) if s == core.id => {
                if core.gate.is_locked() {
                    flush_groups(core, session.db, &mut groups, &mut replies).await;
                    core.gate.opened().await;
                }
                let db = session.db;
                let caller = tracking::caller(session);
                let target = cmdstats::target(spec, &req.args);
                let start = cmdstats::now();
                let reply = if tiered {
                    exec::run_keyed(core, db, spec, f, &req.args, now, 0, pre.as_ref(), caller)
                        .await
                } else {
                    exec::call_own(
                        &mut core.shard.borrow_mut(),
                        db,
                        now,
                        spec,
                        f,
                        &req.args,
                        caller,
                    )
                };
                cmdstats::ran(target, &reply, start, track);
                replies[i] = Some(reply);
                // Clients blocked on what it pushed are served before the next command.
                blocking::serve(core);
            }
            Route::Keyed(s, spec, f) => {
                if groups.len() <= s {
                    groups.resize_with(s + 1, Vec::new);
                }
                groups[s].push((i, spec, f, req.args, tracking::caller(session)));
            }
            Route::Barrier(spec) => {
                flush_groups(core, session.db, &mut groups, &mut replies).await;
                let before = session.resp3;
                let client = session.client.clone();
                let split = matches!(spec.exec, Exec::Split(..));
                let keys = (split && client.tracking.load(Ordering::Relaxed) != 0)
                    .then(|| req.args.clone());
                let target = cmdstats::target(spec, &req.args);
                let start = cmdstats::now();
                // Its BCAST invalidations go out together when it ends (before its own are
                // put after its reply); never across a blocking wait, which would hold other
                // clients' too.
                let held = (!spec.has(BLOCKING)).then(|| core.hold_invalidations());
                let run = async {
                    let reply = run_barrier(core, session, spec, req.args).await;
                    drop(held);
                    reply
                };
                let reply = tracking::with_own_pushes(&client, keys, run).await;
                cmdstats::ran_for(session, target, &reply, start, track);
                replies[i] = Some(reply);
                if session.resp3 != before {
                    switches.push((i, session.resp3));
                }
            }
        }
        tracking::after_command(session, spec_name == Some("client"));
        if skip || session.reply_mode == ReplyMode::Off {
            silent.push(i);
        }
        if session.close_after_reply {
            replies.truncate(i + 1);
            break;
        }
    }
    if !groups.is_empty() {
        flush_groups(core, session.db, &mut groups, &mut replies).await;
    }
    core.shard.borrow_mut().stats.commands -= rejected;
    core.flush_invalidations();
    for i in silent {
        if let Some(r) = replies.get_mut(i).and_then(Option::take) {
            replies[i] = Some(r.pushes_only());
        }
    }
    Replies {
        // Every request routed to a group got its reply when the groups were flushed.
        list: replies
            .into_iter()
            .map(|r| r.unwrap_or_else(|| err("ERR internal error: no reply")))
            .collect(),
        resp3: resp3_at_start,
        switches,
    }
}

/// Pipelined batch: touches the local keys first so that their cache misses overlap.
fn prefetch_local(core: &Core, db: usize, reqs: &[Request]) {
    let shards = core.global.shards();
    let local = reqs
        .iter()
        .map(|r| &r.args)
        .filter(|a| a.len() >= 2 && (shards == 1 || shard_of(&a[1], shards) == core.id))
        .map(|a| &a[1][..]);
    core.shard.borrow().prefetch(db, local);
}

/// With tiering, writes wait while used memory is past 90% of maxmemory, for the offloader to
/// make room: back-pressure instead of an OOM error for a burst the SSD can absorb, and headroom
/// so that RSS (which also holds allocator slack) stays near maxmemory. They wait as long as the
/// offloader makes progress (used memory falls, this core moves values out, has writes on
/// their way to the disk, or sweeps rounds: it rests only once a whole pass met nothing it
/// could take), so a slow disk or a starved core slows writers down rather than failing them;
/// after [`ROOM_STALL_MS`] without progress, or [`ROOM_WAIT_MS`] in all, the write goes on and
/// may meet OOM. A batch that queues commands
/// in MULTI (the session is `in_multi`, or the batch opens one) waits too: queued commands are
/// refused past maxmemory whatever they are, as Redis refuses them.
async fn wait_for_room(core: &Core, reqs: &[Request], in_multi: bool) {
    let maxmemory = core.global.settings.maxmemory();
    if maxmemory == 0 {
        return;
    }
    // Room is what RSS allows, not only the allocator's count: freed value buffers that the
    // allocator keeps count in RSS too (see `eviction::ram_goal`). Looked at afresh each time:
    // the RSS overhead it follows moves.
    let room = || eviction::write_room(&core.global, maxmemory);
    if crate::memory::used_memory() <= room() {
        return;
    }
    let queues = in_multi
        || reqs
            .iter()
            .any(|r| r.spec.is_some_and(|s| s.name == "multi"));
    let writes = queues || reqs.iter().any(Request::denyoom);
    // A full tier file cannot take more: then waiting would only slow the writer down.
    let full = core.shard.borrow().tier_full();
    if !writes || full {
        return;
    }
    // Short naps while waiting: the 1 ms timer below fires from glommio's loop.
    let _short_naps = crate::runtime::io_wait();
    // (values moved out, sweep rounds) of this core's offloader.
    let offloader = || {
        let st = &core.shard.borrow().stats;
        (st.offloaded, st.offload_rounds)
    };
    let mut lowest = crate::memory::used_memory();
    let (mut moved, mut rounds) = offloader();
    let mut stalled = 0;
    for _ in 0..ROOM_WAIT_MS {
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        let used = crate::memory::used_memory();
        if used <= room() {
            return;
        }
        let (now_moved, now_rounds) = offloader();
        if used < lowest || now_moved > moved {
            (lowest, moved, rounds, stalled) = (lowest.min(used), now_moved, now_rounds, 0);
        } else if core.shard.borrow().tier_writing() || now_rounds > rounds {
            // A batch on its way to a slow disk is progress still to come, and so is a sweep
            // still clearing the referenced bits of what it will take next.
            rounds = now_rounds;
            stalled = 0;
        } else {
            stalled += 1;
            if stalled >= ROOM_STALL_MS {
                return;
            }
        }
    }
}

/// How long a write waits for room without the offloader making progress...
const ROOM_STALL_MS: u32 = 1000;
/// ...and at most in all.
const ROOM_WAIT_MS: u32 = 10_000;

/// Holds a batch with writes while the running save has more copies of written buckets to
/// write out than `limit` (`shard::snapshot_backlog_limit`): memory stays flat during a save.
async fn wait_for_snapshot(core: &Core, reqs: &[Request], limit: usize) {
    if !reqs.iter().any(Request::writes) {
        return;
    }
    for _ in 0..2000 {
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        if core.shard.borrow().snapshot_backlog() <= limit / 2 {
            return;
        }
    }
}

/// A keyed command waiting to travel to its shard: (request index, command, function, args,
/// the client it runs for).
type Pending = (usize, &'static Spec, ShardFn, Vec<Bytes>, Caller);

/// Sends every pending group to its shard as one message and waits for all the replies.
async fn flush_groups(
    core: &Rc<Core>,
    db: usize,
    groups: &mut [Vec<Pending>],
    replies: &mut [Option<Reply>],
) {
    let tiered = core.global.settings.tiered.is_some();
    let track = core.global.settings.latency_tracking();
    let mut pending = Vec::new();
    for (s, group) in groups.iter_mut().enumerate() {
        if group.is_empty() {
            continue;
        }
        let batch = std::mem::take(group);
        let idx: Vec<usize> = batch.iter().map(|p| p.0).collect();
        let fut = if tiered {
            // Values may have to be loaded from disk on the way: run as a task over there.
            core.on_shard_async(
                s,
                Box::new(move |c: Rc<Core>| {
                    async move {
                        let now = now_ms();
                        let cmds: Vec<(&'static Spec, &[Bytes])> = batch
                            .iter()
                            .map(|(_, spec, _, args, _)| (*spec, &args[..]))
                            .collect();
                        let pre = exec::preload(&c, db, &cmds).await;
                        let mut out = Vec::with_capacity(batch.len());
                        for (_, spec, f, args, caller) in &batch {
                            let target = cmdstats::target(spec, args);
                            let start = cmdstats::now();
                            let reply = exec::run_keyed(
                                &c,
                                db,
                                spec,
                                *f,
                                args,
                                now,
                                0,
                                Some(&pre),
                                *caller,
                            )
                            .await;
                            cmdstats::ran(target, &reply, start, track);
                            out.push(reply);
                            blocking::serve(&c);
                        }
                        out
                    }
                    .boxed_local()
                }),
            )
            .boxed_local()
        } else {
            core.on_shard(s, move |shard| {
                let now = now_ms();
                batch
                    .into_iter()
                    .map(|(_, spec, f, args, caller)| {
                        let target = cmdstats::target(spec, &args);
                        let start = cmdstats::now();
                        let reply = exec::call_own(shard, db, now, spec, f, &args, caller);
                        cmdstats::ran(target, &reply, start, track);
                        reply
                    })
                    .collect::<Vec<Reply>>()
            })
            .boxed_local()
        };
        pending.push(async move { (idx, fut.await) });
    }
    if pending.is_empty() {
        return;
    }
    for (idx, res) in futures::future::join_all(pending).await {
        match res {
            Some(rs) => {
                for (i, r) in idx.into_iter().zip(rs) {
                    replies[i] = Some(r);
                }
            }
            None => {
                for i in idx {
                    replies[i] = Some(err("ERR server is shutting down"));
                }
            }
        }
    }
}

/// Commands that are not one shard's: split keys, cross-shard keyed commands, connection and
/// server commands.
pub(super) async fn run_barrier(
    core: &Rc<Core>,
    session: &mut Session,
    spec: &'static Spec,
    args: Vec<Bytes>,
) -> Reply {
    // Their steps read collections in RAM on each shard: offloaded ones come back first, and
    // stay until the command has run (blocking commands load theirs each time they try).
    let mut _pinned = None;
    if let Exec::Cross(..) | Exec::Movable(..) | Exec::AwaitKeyed(..) = spec.exec {
        if !exec::needs_no_collection(spec, &args) {
            let keys = spec.keys_of(&args).into_iter().map(|i| args[i].clone());
            _pinned = Some(exec::load_collections(core, session.db, keys.collect()).await);
        }
    }
    match spec.exec {
        Exec::Split(f, group, merge) => {
            let caller = tracking::caller(session);
            run_split(core, session.db, spec, f, group, merge, &args, caller).await
        }
        Exec::Cross(_, cross) | Exec::Movable(_, _, cross) => {
            let (db, caller) = (session.db, tracking::caller(session));
            txn::reading(caller, spec, &args, cross(core, spec, db, &args)).await
        }
        // Every keyed command with more than one key has a cross-shard form.
        Exec::Keyed(_) => err("ERR keys in request don't hash to the same shard"),
        Exec::Session(f) => f(Call {
            core,
            session,
            args,
        }),
        Exec::Await(f) if spec.has(MOVABLE_KEYS) => {
            f(Call {
                core,
                session,
                args,
            })
            .await
        }
        Exec::Await(f) => {
            // SORT_RO's key is remembered for a tracking client (scripts' keys are not, as in
            // Redis: the commands they run are).
            let caller = tracking::caller(session);
            let named = args.clone();
            let fut = f(Call {
                core,
                session,
                args,
            });
            txn::reading(caller, spec, &named, fut).await
        }
        Exec::AwaitKeyed(f, _) => {
            f(Call {
                core,
                session,
                args,
            })
            .await
        }
        Exec::Blocking(parse) => {
            blocking::run(
                Call {
                    core,
                    session,
                    args,
                },
                parse,
            )
            .await
        }
    }
}

/// A split command (MGET, DEL, EXISTS, MSET, ...) whose keys span shards: every part runs
/// under one cross-shard transaction, so the command is atomic like in Redis.
#[allow(clippy::too_many_arguments)]
async fn run_split(
    core: &Rc<Core>,
    db: usize,
    spec: &'static Spec,
    f: ShardFn,
    group: usize,
    merge: Merge,
    args: &[Bytes],
    caller: Caller,
) -> Reply {
    let n = core.global.shards();
    let parts = txn::split_pairs(args, group, n);
    let Some(results) = txn::run_parts(core, db, spec, f, &parts, caller).await else {
        return err("ERR server is shutting down");
    };
    match merge {
        Merge::AtomicOk => results
            .into_iter()
            .find(Reply::is_error)
            .unwrap_or(Reply::Ok),
        Merge::Sum => {
            let mut total = 0;
            for r in results {
                match r {
                    Reply::Int(v) => total += v,
                    other => return other,
                }
            }
            Reply::Int(total)
        }
        Merge::Concat => {
            // Put each shard's answers back at their keys' positions.
            let mut per_part: Vec<std::vec::IntoIter<Reply>> = Vec::with_capacity(parts.len());
            for r in results {
                match r {
                    Reply::Array(v) => per_part.push(v.into_iter()),
                    other => return other,
                }
            }
            let out = args[1..]
                .chunks(group)
                .map(|c| {
                    let s = shard_of(&c[0], n);
                    parts
                        .iter()
                        .position(|(id, _)| *id == s)
                        .and_then(|p| per_part[p].next())
                        .unwrap_or(Reply::Nil)
                })
                .collect();
            Reply::Array(out)
        }
    }
}

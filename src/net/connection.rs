//! One client connection, for its whole life on one core.
//!
//! Each read is parsed into as many requests as it holds. Commands for the local shard run
//! inline at once; commands for other shards are grouped per shard and each group travels as one
//! message (Dragonfly's "squashing"), all groups in flight together. Per key, order is kept
//! (a key always maps to one group); commands that are not single-shard (SELECT, multi-key,
//! fan-out) are barriers: everything before them completes first. Replies are written in
//! request order in one write.
//!
//! A protocol error gets `-ERR Protocol error: ...` and the connection closes; nothing a client
//! sends can panic the server.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tracing::debug;

use super::poller::Socket;

use crate::cmd::args::{err, ERR_NOAUTH, ERR_OOM};
use crate::cmd::{self, Ctx, Exec, Merge, ShardFn, Spec};
use crate::protocol::{Parsed, Reply, RequestParser};
use crate::server::{exec, txn, ClientInfo, Core};
use crate::shard::{now_ms, shard_of};
use futures::FutureExt;

/// Requests parsed from one read before they are executed (bounds memory per connection).
const MAX_BATCH: usize = 1024;
/// Free room kept in the input buffer for each read.
const READ_CHUNK: usize = 16 * 1024;

/// Per-connection protocol state, read and changed by connection commands.
pub struct ConnState {
    pub id: u64,
    pub db: usize,
    pub resp3: bool,
    pub authed: bool,
    pub close_after_reply: bool,
    pub info: Arc<ClientInfo>,
}

/// Serves a connection until the client leaves or breaks the protocol.
pub async fn serve(core: Rc<Core>, stream: Socket) {
    let sock = socket2::SockRef::from(&stream);
    let _ = sock.set_nodelay(true);
    let addr_of = |a: std::io::Result<socket2::SockAddr>| {
        a.ok()
            .and_then(|a| a.as_socket())
            .map(|a| a.to_string())
            .unwrap_or_default()
    };
    let addr = addr_of(sock.peer_addr());
    let laddr = addr_of(sock.local_addr());
    let global = core.global.clone();
    let id = global.next_client_id();
    let info = Arc::new(ClientInfo {
        id,
        addr,
        laddr,
        fd: stream.raw_fd(),
        created_ms: global.uptime_ms(),
        last_cmd_ms: global.uptime_ms().into(),
        db: 0.into(),
        resp: 2.into(),
        name: Mutex::new(String::new()),
        lib_name: Mutex::new(String::new()),
        lib_ver: Mutex::new(String::new()),
        last_cmd: u32::MAX.into(),
        killed: false.into(),
    });
    global.register(info.clone());
    global.total_connections.fetch_add(1, Ordering::Relaxed);
    let mut conn = ConnState {
        id,
        db: 0,
        resp3: false,
        authed: global.settings.requirepass().is_empty(),
        close_after_reply: false,
        info: info.clone(),
    };
    if let Err(e) = conn_loop(&core, &mut conn, &stream).await {
        debug!(client = id, "connection closed: {e}");
    }
    // Unregister before the socket closes (when `stream` drops), so a concurrent CLIENT KILL
    // can never shut down a reused descriptor.
    global.unregister(id);
}

async fn conn_loop(core: &Rc<Core>, conn: &mut ConnState, stream: &Socket) -> std::io::Result<()> {
    let mut inbuf = BytesMut::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut parser = RequestParser::new();
    loop {
        let n = stream.read_into(&mut inbuf, READ_CHUNK).await?;
        if n == 0 || conn.info.killed.load(Ordering::Relaxed) {
            return Ok(());
        }
        loop {
            let mut reqs = Vec::new();
            let mut proto_err = None;
            // Unauthenticated clients are parsed one request at a time, so a pipelined AUTH
            // lifts the stricter limits for what follows it.
            parser.set_unauthenticated(!conn.authed);
            let max_batch = if conn.authed { MAX_BATCH } else { 1 };
            while reqs.len() < max_batch {
                match parser.parse(&inbuf) {
                    Ok(Parsed::Request(frame, used)) => {
                        let bytes: Bytes = inbuf.split_to(used).freeze();
                        if !frame.is_empty() {
                            reqs.push(frame.into_args(&bytes));
                        }
                    }
                    Ok(Parsed::Incomplete) => break,
                    Err(e) => {
                        proto_err = Some(e);
                        break;
                    }
                }
            }
            let more = reqs.len() == max_batch;
            if !reqs.is_empty() {
                execute_batch(core, conn, reqs, &mut out).await;
            }
            if let Some(e) = &proto_err {
                Reply::Error(format!("ERR {e}")).encode(conn.resp3, &mut out);
                conn.close_after_reply = true;
            }
            if !out.is_empty() {
                stream.write_all(&out).await?;
                out.clear();
                if out.capacity() > 1 << 20 {
                    out.shrink_to(16 * 1024);
                }
            }
            if conn.close_after_reply {
                return Ok(());
            }
            if !more {
                break;
            }
        }
        if inbuf.capacity() > 1 << 20 && inbuf.len() < 16 * 1024 && !parser.in_progress() {
            // A big request passed; give its memory back.
            inbuf = BytesMut::from(&inbuf[..]);
        }
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

fn route(core: &Core, conn: &ConnState, args: &[Bytes], oom: &mut Option<bool>) -> Route {
    let Some((idx, spec)) = cmd::lookup_indexed(&args[0]) else {
        return Route::Reply(cmd::unknown_command(args));
    };
    if !spec.arity_ok(args.len()) {
        return Route::Reply(cmd::wrong_args(spec.name));
    }
    if !conn.authed && !spec.has(cmd::NOAUTH) {
        return Route::Reply(err(ERR_NOAUTH));
    }
    if spec.has(cmd::DENYOOM) {
        // Cache mode evicts instead of refusing (see `server::eviction`). Store mode refuses
        // once used memory passes what keeps RSS itself under maxmemory: with the tier file
        // full, used memory at maxmemory had RSS 13% past it.
        let over = *oom.get_or_insert_with(|| {
            let max = core.global.settings.maxmemory();
            max > 0
                && !core.global.settings.cache_mode
                && crate::memory::used_memory()
                    > crate::server::eviction::rss_limit(&core.global, max)
        });
        if over {
            return Route::Reply(err(ERR_OOM));
        }
    }
    conn.info.last_cmd.store(idx, Ordering::Relaxed);
    // Key/value lists (MSET, MSETNX) must come in whole groups.
    if spec.step > 1 && spec.last_key < 0 && !(args.len() - 1).is_multiple_of(spec.step as usize) {
        return Route::Reply(cmd::wrong_args(spec.name));
    }
    match spec.exec {
        Exec::Shard(f) => {
            let n = core.global.shards();
            let mut keys = spec.key_indices(args.len()).map(|i| shard_of(&args[i], n));
            let first = keys.next().unwrap_or(core.id);
            if keys.all(|s| s == first) {
                Route::Keyed(first, spec, f)
            } else {
                Route::Barrier(spec)
            }
        }
        Exec::Split(f, group, _) => {
            if !(args.len() - 1).is_multiple_of(group) {
                return Route::Reply(cmd::wrong_args(spec.name));
            }
            let n = core.global.shards();
            let first = shard_of(&args[1], n);
            if spec
                .key_indices(args.len())
                .all(|i| shard_of(&args[i], n) == first)
            {
                Route::Keyed(first, spec, f)
            } else {
                Route::Barrier(spec)
            }
        }
        Exec::Conn => Route::Barrier(spec),
    }
}

/// Runs a batch of requests and appends their replies, in order, to `out`.
async fn execute_batch(
    core: &Rc<Core>,
    conn: &mut ConnState,
    reqs: Vec<Vec<Bytes>>,
    out: &mut Vec<u8>,
) {
    let n = reqs.len();
    conn.info
        .last_cmd_ms
        .store(core.global.uptime_ms(), Ordering::Relaxed);
    core.shard.borrow_mut().stats.commands += n as u64;
    let mut replies: Vec<Option<Reply>> = vec![None; n];
    // The protocol each reply is encoded in: HELLO switches it mid-batch.
    let mut resp3 = vec![conn.resp3; n];
    // Remote groups: shard -> (request index, function, args).
    let mut groups: Vec<Vec<Pending>> = Vec::new();
    let tiered = core.global.settings.tiered.is_some();
    let mut oom = None;
    if n >= 4 {
        prefetch_local(core, conn.db, &reqs);
    }
    if tiered {
        wait_for_room(core, &reqs).await;
    }
    if core.global.settings.cache_mode {
        let incoming: usize = reqs
            .iter()
            .filter(|a| cmd::lookup(&a[0]).is_some_and(|s| s.has(cmd::DENYOOM)))
            .map(|a| a.iter().map(|x| x.len()).sum::<usize>())
            .sum();
        if incoming > 0 {
            crate::server::eviction::make_room(core, incoming as u64).await;
        }
    }
    let backlog_limit = crate::server::snapshot::backlog_limit(
        core.global.settings.maxmemory(),
        core.global.shards(),
    );
    if core.shard.borrow().snapshot_backlog() > backlog_limit {
        wait_for_snapshot(core, &reqs, backlog_limit).await;
    }
    // Values the batch's local commands read from disk are fetched together.
    let pre = if tiered && n > 1 {
        let local: Vec<(&'static Spec, &[Bytes])> = reqs
            .iter()
            .filter_map(|a| {
                let spec = cmd::lookup(&a[0])?;
                let key = spec.key_indices(a.len()).next()?;
                (shard_of(&a[key], core.global.shards()) == core.id).then_some((spec, &a[..]))
            })
            .collect();
        let pre = exec::preload(core, conn.db, &local).await;
        if pre.read_any() && n >= 4 {
            // Other connections ran while the reads were out.
            prefetch_local(core, conn.db, &reqs);
        }
        pre
    } else {
        exec::Preloaded::default()
    };
    // One clock read per batch: commands of one batch see the same time, like Redis' per-call
    // snapshot.
    let now = now_ms();
    for (i, args) in reqs.into_iter().enumerate() {
        match route(core, conn, &args, &mut oom) {
            Route::Reply(r) => replies[i] = Some(r),
            Route::Keyed(s, spec, f) if s == core.id => {
                if core.gate.is_locked() {
                    flush_groups(core, conn.db, &mut groups, &mut replies).await;
                    core.gate.opened().await;
                }
                replies[i] = Some(if tiered {
                    exec::run_keyed(core, conn.db, spec, f, &args, now, 0, Some(&pre)).await
                } else {
                    let mut shard = core.shard.borrow_mut();
                    f(
                        &mut Ctx {
                            shard: &mut shard,
                            db: conn.db,
                            now,
                        },
                        &args,
                    )
                });
            }
            Route::Keyed(s, spec, f) => {
                if groups.len() <= s {
                    groups.resize_with(s + 1, Vec::new);
                }
                groups[s].push((i, spec, f, args));
            }
            Route::Barrier(spec) => {
                flush_groups(core, conn.db, &mut groups, &mut replies).await;
                replies[i] = Some(run_barrier(core, conn, spec, args).await);
            }
        }
        resp3[i] = conn.resp3;
        if conn.close_after_reply {
            replies.truncate(i + 1);
            break;
        }
    }
    flush_groups(core, conn.db, &mut groups, &mut replies).await;
    for (r, v3) in replies.into_iter().zip(resp3) {
        if let Some(r) = r {
            r.encode(v3, out);
        }
    }
}

/// Pipelined batch: touches the local keys first so that their cache misses overlap.
fn prefetch_local(core: &Core, db: usize, reqs: &[Vec<Bytes>]) {
    let shards = core.global.shards();
    let local = reqs
        .iter()
        .filter(|a| a.len() >= 2 && (shards == 1 || shard_of(&a[1], shards) == core.id))
        .map(|a| &a[1][..]);
    core.shard.borrow().prefetch(db, local);
}

/// With tiering, writes wait (up to 200 ms) while used memory is past 90% of maxmemory, for the
/// offloader to make room: back-pressure instead of an OOM error for a burst the SSD can absorb,
/// and headroom so that RSS (which also holds allocator slack) stays near maxmemory.
async fn wait_for_room(core: &Core, reqs: &[Vec<Bytes>]) {
    let maxmemory = core.global.settings.maxmemory();
    if maxmemory == 0 {
        return;
    }
    // Room is what RSS allows, not only the allocator's count: freed value buffers that the
    // allocator keeps count in RSS too (see `server::eviction::ram_goal`).
    let max = crate::server::eviction::write_room(&core.global, maxmemory);
    if crate::memory::used_memory() <= max {
        return;
    }
    let writes = reqs
        .iter()
        .any(|a| cmd::lookup(&a[0]).is_some_and(|s| s.has(cmd::DENYOOM)));
    // A full tier file cannot take more: then waiting would only slow the writer down.
    let full = core
        .shard
        .borrow()
        .tier
        .as_ref()
        .is_some_and(|t| t.is_full());
    if !writes || full {
        return;
    }
    for _ in 0..200 {
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        if crate::memory::used_memory() <= max {
            return;
        }
    }
}

/// Holds a batch with writes while the running save has more copies of written buckets to
/// write out than `limit` ([`crate::server::snapshot::backlog_limit`]): memory stays flat
/// during a save.
async fn wait_for_snapshot(core: &Core, reqs: &[Vec<Bytes>], limit: usize) {
    let writes = reqs
        .iter()
        .any(|a| cmd::lookup(&a[0]).is_some_and(|s| s.has(cmd::WRITE)));
    if !writes {
        return;
    }
    for _ in 0..2000 {
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        if core.shard.borrow().snapshot_backlog() <= limit / 2 {
            return;
        }
    }
}

/// A keyed command waiting to travel to its shard: (request index, command, function, args).
type Pending = (usize, &'static Spec, ShardFn, Vec<Bytes>);

/// Sends every pending group to its shard as one message and waits for all the replies.
async fn flush_groups(
    core: &Rc<Core>,
    db: usize,
    groups: &mut [Vec<Pending>],
    replies: &mut [Option<Reply>],
) {
    let tiered = core.global.settings.tiered.is_some();
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
                            .map(|(_, spec, _, args)| (*spec, &args[..]))
                            .collect();
                        let pre = exec::preload(&c, db, &cmds).await;
                        let mut out = Vec::with_capacity(batch.len());
                        for (_, spec, f, args) in &batch {
                            out.push(
                                exec::run_keyed(&c, db, spec, *f, args, now, 0, Some(&pre)).await,
                            );
                        }
                        out
                    }
                    .boxed_local()
                }),
            )
            .boxed_local()
        } else {
            core.on_shard(s, move |shard| {
                let mut ctx = Ctx {
                    shard,
                    db,
                    now: now_ms(),
                };
                batch
                    .into_iter()
                    .map(|(_, _, f, args)| f(&mut ctx, &args))
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
async fn run_barrier(
    core: &Rc<Core>,
    conn: &mut ConnState,
    spec: &'static Spec,
    args: Vec<Bytes>,
) -> Reply {
    match spec.exec {
        Exec::Split(f, group, merge) => {
            run_split(core, conn.db, spec, f, group, merge, &args).await
        }
        Exec::Shard(_) => match txn::cross_shard(core, conn.db, spec.name, &args).await {
            Some(r) => r,
            None => err("ERR keys in request don't hash to the same shard"),
        },
        Exec::Conn => cmd::server::run(core, conn, spec, args).await,
    }
}

/// A split command (MGET, DEL, EXISTS, MSET, ...) whose keys span shards: every part runs
/// under one cross-shard transaction, so the command is atomic like in Redis.
async fn run_split(
    core: &Rc<Core>,
    db: usize,
    spec: &'static Spec,
    f: ShardFn,
    group: usize,
    merge: Merge,
    args: &[Bytes],
) -> Reply {
    let n = core.global.shards();
    let parts = txn::split_pairs(args, group, n);
    let Some(results) = txn::run_parts(core, db, spec, f, &parts).await else {
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

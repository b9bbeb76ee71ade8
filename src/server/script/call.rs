//! `redis.call` / `redis.pcall`: one command from a running script, checked as Redis checks
//! it (unknown command, arity, commands scripts may not run, writes in read-only scripts,
//! OOM before the first write) and then run by `server::locked` exactly as a client's command
//! would run, under the shards the script holds. The script's Lua code is synchronous, so the
//! command's future is driven here on this thread ([`drive`]): work for other shards runs on
//! their cores as the script's transaction jobs and wakes this thread with the reply; work for
//! this core's shard runs inline (see `txn::Txn::run`).
//!
//! Never: runs a command Redis refuses in scripts (blocking, MULTI, SUBSCRIBE, admin), or one
//! that would wait on this core's executor (a value kept on SSD by this core's shard).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use bytes::Bytes;

use super::RunCtx;
use crate::cmd::args::{err, is, ERR_OOM};
use crate::protocol::Reply;
use crate::server::cmdstats;
use crate::server::table::{self, DENYOOM, READONLY, WRITE};
use crate::shard::shard_of;

/// Commands (and container subcommands, `name|sub`) Redis 7.0 marks `noscript`.
const NOSCRIPT: &[&str] = &[
    "acl|cat",
    "acl|deluser",
    "acl|dryrun",
    "acl|genpass",
    "acl|getuser",
    "acl|list",
    "acl|load",
    "acl|log",
    "acl|save",
    "acl|setuser",
    "acl|users",
    "acl|whoami",
    "auth",
    "bgrewriteaof",
    "bgsave",
    "blmove",
    "blpop",
    "brpop",
    "brpoplpush",
    "bzpopmax",
    "bzpopmin",
    "client|caching",
    "client|getname",
    "client|getredir",
    "client|id",
    "client|info",
    "client|kill",
    "client|list",
    "client|no-evict",
    "client|pause",
    "client|reply",
    "client|setname",
    "client|tracking",
    "client|trackinginfo",
    "client|unblock",
    "client|unpause",
    "cluster|reset",
    "config|get",
    "config|resetstat",
    "config|rewrite",
    "config|set",
    "debug",
    "discard",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "exec",
    "failover",
    "fcall",
    "fcall_ro",
    "function|delete",
    "function|dump",
    "function|flush",
    "function|kill",
    "function|list",
    "function|load",
    "function|restore",
    "function|stats",
    "hello",
    "latency|doctor",
    "latency|graph",
    "latency|histogram",
    "latency|history",
    "latency|latest",
    "latency|reset",
    "module|list",
    "module|load",
    "module|loadex",
    "module|unload",
    "monitor",
    "multi",
    "psubscribe",
    "psync",
    "punsubscribe",
    "quit",
    "replconf",
    "replicaof",
    "reset",
    "role",
    "save",
    "script|debug",
    "script|exists",
    "script|flush",
    "script|kill",
    "script|load",
    "shutdown",
    "slaveof",
    "ssubscribe",
    "subscribe",
    "sunsubscribe",
    "sync",
    "unsubscribe",
    "unwatch",
    "wait",
    "watch",
    // Strata's own: waits for a save or for time on this core.
    "bgsave",
    "lastsave",
];

/// NOSCRIPT's commands by name, and its `container|sub` entries by container.
type NoscriptSets = (
    HashSet<&'static str>,
    HashMap<&'static str, Vec<&'static str>>,
);

fn noscript(name: &str, args: &[Bytes]) -> bool {
    // Built once.
    static SETS: OnceLock<NoscriptSets> = OnceLock::new();
    let (whole, subs) = SETS.get_or_init(|| {
        let mut whole = HashSet::new();
        let mut subs: HashMap<&str, Vec<&str>> = HashMap::new();
        for n in NOSCRIPT {
            match n.split_once('|') {
                None => {
                    whole.insert(*n);
                }
                Some((container, sub)) => subs.entry(container).or_default().push(sub),
            }
        }
        (whole, subs)
    });
    whole.contains(name)
        || subs
            .get(name)
            .is_some_and(|s| args.get(1).is_some_and(|a| s.iter().any(|sub| is(a, sub))))
}

/// Runs `args` (the name first) for the script; the reply is what the script gets. The
/// command counts in INFO commandstats as a client's would (refused ones as rejected).
pub fn run(ctx: &mut RunCtx<'_>, args: Vec<Bytes>) -> Reply {
    let Some(spec) = table::lookup(&args[0]) else {
        let e = err("ERR Unknown Redis command called from script");
        cmdstats::rejected(cmdstats::Target::Unknown, &e);
        return e;
    };
    let target = cmdstats::target(spec, &args);
    let refuse = |e: Reply| {
        cmdstats::rejected(target, &e);
        e
    };
    if !spec.arity_ok(args.len()) {
        return refuse(err(
            "ERR Wrong number of args calling Redis command from script",
        ));
    }
    if noscript(spec.name, &args) {
        return refuse(err("ERR This Redis command is not allowed from script"));
    }
    if ctx.read_only && spec.has(WRITE) {
        return refuse(err(
            "ERR Write commands are not allowed from read-only scripts.",
        ));
    }
    let dirty = ctx.state.dirty.load(Ordering::Relaxed);
    if !ctx.allow_oom && !dirty && ctx.oom_at_start && spec.has(DENYOOM) {
        return refuse(err(ERR_OOM));
    }
    if spec.has(WRITE) {
        ctx.state.dirty.store(true, Ordering::Relaxed);
    }
    if spec.has(READONLY) {
        ctx.read_any = true;
    }
    if let Some(e) = on_ssd_here(ctx, spec, &args) {
        return refuse(e);
    }
    let Some(locked) = ctx.locked else {
        return refuse(err("ERR server is shutting down"));
    };
    let core = ctx.core;
    let track = core.global.settings.latency_tracking();
    let start = cmdstats::now();
    let reply = drive(locked.run(core, ctx.session, spec, args));
    cmdstats::ran(target, &reply, start, track);
    reply
}

/// A value this core's shard keeps on SSD that the command would read: reading it needs this
/// core's executor, which the script occupies.
fn on_ssd_here(ctx: &RunCtx<'_>, spec: &'static table::Spec, args: &[Bytes]) -> Option<Reply> {
    let shard = ctx.core.shard.borrow();
    shard.tier.as_ref()?;
    let (strings, collections) = (
        spec.reads_value(args),
        !crate::server::exec::needs_no_collection(spec, args),
    );
    if !strings && !collections {
        return None;
    }
    let n = ctx.core.global.shards();
    let db = ctx.session.db;
    spec.keys_of(args)
        .iter()
        .filter(|&&i| shard_of(&args[i], n) == ctx.core.id)
        .filter_map(|&i| shard.peek_offloaded(db, &args[i]))
        .any(|(_, t)| if t.is_some() { collections } else { strings })
        .then(|| err("ERR the script reads a value kept on SSD by its own core's shard; run it from a connection on another core or read the key before the script"))
}

/// Drives `fut` to its end on this thread (the script is not a task this core's executor can
/// switch away from); this core's own shard work runs inline meanwhile.
pub fn drive<T>(fut: impl std::future::Future<Output = T>) -> T {
    let _inline = super::Driving::enter();
    futures::executor::block_on(fut)
}

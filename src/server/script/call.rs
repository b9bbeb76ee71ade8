//! `redis.call` / `redis.pcall`: one command from a running script, checked as Redis checks
//! it (unknown command, arity, commands scripts may not run, writes in read-only scripts,
//! OOM before the first write) and run through the same command table as any client's, on
//! the shards the script's transaction holds: the local shard inline, another shard by a
//! transaction job whose reply this core waits for (the script holds every shard, so no other
//! work can be waiting on this core meanwhile).
//!
//! Never: runs a command that fans out or blocks (it would wait for shards the script
//! holds): those are refused as Redis refuses commands not allowed from scripts.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::RunCtx;
use crate::cmd::args::{err, ERR_OOM};
use crate::cmd::{wrong_args, Ctx, ShardFn};
use crate::protocol::Reply;
use crate::server::dispatch::merge_split;
use crate::server::table::{self, Call, Exec, Spec, DENYOOM, WRITE};
use crate::server::txn;
use crate::shard::shard_of;

/// Connection commands a script may run (the rest of them, and the commands that wait on
/// several shards, are refused).
const SESSION_ALLOWED: [&str; 4] = ["ping", "echo", "select", "time"];

/// Runs `args` (the name first) for the script; the reply is what the script gets.
pub fn run(ctx: &mut RunCtx<'_>, args: Vec<Bytes>) -> Reply {
    let Some(spec) = table::lookup(&args[0]) else {
        return err("ERR Unknown Redis command called from script");
    };
    if !spec.arity_ok(args.len()) {
        return err("ERR Wrong number of args calling Redis command from script");
    }
    let allowed = match spec.exec {
        Exec::Session(_) => SESSION_ALLOWED.contains(&spec.name),
        Exec::Await(_) => false,
        _ => true,
    };
    if !allowed {
        return err("ERR This Redis command is not allowed from script");
    }
    if ctx.read_only && spec.has(WRITE) {
        return err("ERR Write commands are not allowed from read-only scripts.");
    }
    let dirty = ctx.state.dirty.load(Ordering::Relaxed);
    if !ctx.allow_oom && !dirty && ctx.oom_at_start && spec.has(DENYOOM) {
        return err(ERR_OOM);
    }
    if spec.has(WRITE) {
        ctx.state.dirty.store(true, Ordering::Relaxed);
    }
    execute(ctx, spec, args)
}

fn execute(ctx: &mut RunCtx<'_>, spec: &'static Spec, args: Vec<Bytes>) -> Reply {
    let n = ctx.core.global.shards();
    let same_shard = |keys: &[usize]| {
        let mut it = keys.iter().map(|&i| shard_of(&args[i], n));
        let first = it.next().unwrap_or(ctx.core.id);
        it.all(|s| s == first).then_some(first)
    };
    match spec.exec {
        Exec::Keyed(f) | Exec::Cross(f, _) | Exec::Movable(f, _, _) => {
            match same_shard(&spec.keys_of(&args)) {
                Some(s) => on_shard(ctx, s, spec, f, args),
                None => err("ERR keys in request don't hash to the same shard"),
            }
        }
        Exec::Split(f, group, merge) => {
            if !(args.len() - 1).is_multiple_of(group) {
                return wrong_args(spec.name);
            }
            let keys: Vec<usize> = spec.key_indices(args.len()).collect();
            if let Some(s) = same_shard(&keys) {
                return on_shard(ctx, s, spec, f, args);
            }
            let parts = txn::split_pairs(&args, group, n);
            let results = parts
                .iter()
                .map(|(s, part)| on_shard(ctx, *s, spec, f, part.clone()))
                .collect();
            merge_split(&args, group, merge, n, &parts, results)
        }
        Exec::Session(f) => f(Call {
            core: ctx.core,
            session: ctx.session,
            args,
        }),
        Exec::Await(_) => err("ERR This Redis command is not allowed from script"),
    }
}

/// Runs `f` for `args` on shard `s`, which the script holds.
fn on_shard(
    ctx: &mut RunCtx<'_>,
    s: usize,
    spec: &'static Spec,
    f: ShardFn,
    args: Vec<Bytes>,
) -> Reply {
    let db = ctx.session.db;
    if s == ctx.core.id {
        let mut shard = ctx.core.shard.borrow_mut();
        // A value on SSD is read by an await this core cannot take mid-script.
        if shard.tier.is_some()
            && spec.reads_value(&args)
            && spec
                .keys_of(&args)
                .iter()
                .any(|&i| shard.peek_external(db, &args[i]).is_some())
        {
            return err(
                "ERR the script read a value kept on SSD on its own shard; declare the key in KEYS",
            );
        }
        return f(
            &mut Ctx {
                shard: &mut shard,
                db,
                now: ctx.now,
            },
            &args,
        );
    }
    let Some(held) = ctx.txn else {
        return err("ERR server is shutting down");
    };
    // The other core runs it under our transaction and wakes this thread with the reply.
    futures::executor::block_on(txn::run_fn(held, s, db, spec, f, args))
        .unwrap_or_else(|| err("ERR server is shutting down"))
}

//! Multi-key list and set commands whose keys span shards (LMOVE, RPOPLPUSH, LMPOP, SMOVE,
//! SINTER, SINTERCARD, SUNION, SDIFF and their STORE forms): each runs under one cross-shard
//! transaction (`server::txn`) that holds every shard its keys live on, taking on each shard
//! the same steps the one-shard command takes (`cmd::list`, `cmd::set`), so nobody sees a
//! half-moved element or a half-stored result.
//!
//! Never: touches a shard it does not hold, or reads a set on one shard while changing
//! another outside the transaction.

use std::rc::Rc;

use bytes::Bytes;

use super::core::Core;
use super::table::Spec;
use super::txn::Txn;
use crate::cmd::list::{self, End};
use crate::cmd::set::{self, SetOp, SetValue};
use crate::cmd::Ctx;
use crate::protocol::Reply;
use crate::shard::{now_ms, shard_of};

fn shutting_down() -> Reply {
    Reply::Error("ERR server is shutting down".into())
}

/// Runs `f` with a context on `shard`, which `txn` holds.
async fn on<R, F>(txn: &Txn, shard: usize, db: usize, f: F) -> Option<R>
where
    R: Send + 'static,
    F: FnOnce(&mut Ctx) -> R + Send + 'static,
{
    txn.run(shard, move |sh| {
        let mut ctx = Ctx {
            shard: sh,
            db,
            now: now_ms(),
        };
        f(&mut ctx)
    })
    .await
}

/// LMOVE and RPOPLPUSH with source and destination on different shards.
pub async fn lmove(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let (from, to) = match list::lmove_ends(args) {
        Ok(e) => e,
        Err(e) => return e,
    };
    let n = core.global.shards();
    let (src, dst) = (args[1].clone(), args[2].clone());
    let (ss, ds) = (shard_of(&src, n), shard_of(&dst, n));
    let Some(txn) = Txn::begin(core, vec![ss, ds]).await else {
        return shutting_down();
    };
    let k = src.clone();
    match on(&txn, ss, db, move |ctx| list::list_exists(ctx, &k)).await {
        Some(Ok(true)) => {}
        Some(Ok(false)) => return Reply::Nil,
        Some(Err(e)) => return e,
        None => return shutting_down(),
    }
    let k = dst.clone();
    match on(&txn, ds, db, move |ctx| list::check_list(ctx, &k)).await {
        Some(Ok(())) => {}
        Some(Err(e)) => return e,
        None => return shutting_down(),
    }
    let popped = on(&txn, ss, db, move |ctx| {
        let r = list::pop_n(ctx, &src, from, 1);
        if matches!(&r, Ok(Some(v)) if !v.is_empty()) {
            list::popped(ctx, &src, from);
        }
        r
    })
    .await;
    let v = match popped {
        Some(Ok(Some(mut v))) => match v.pop() {
            Some(v) => v,
            None => return Reply::Nil,
        },
        Some(Ok(None)) => return Reply::Nil,
        Some(Err(e)) => return e,
        None => return shutting_down(),
    };
    let pushed = v.clone();
    match on(&txn, ds, db, move |ctx| {
        list::push_one(ctx, &dst, to, &pushed)
    })
    .await
    {
        Some(Ok(())) => Reply::Bulk(v),
        Some(Err(e)) => e,
        None => shutting_down(),
    }
}

/// LMPOP with keys on several shards: the first key (in argument order) holding a list
/// answers.
pub async fn lmpop(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let (keys, end, count): (Vec<Bytes>, End, usize) = match list::lmpop_args(args) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let n = core.global.shards();
    let Some(txn) = Txn::begin(core, keys.iter().map(|k| shard_of(k, n)).collect()).await else {
        return shutting_down();
    };
    for k in keys {
        let s = shard_of(&k, n);
        match on(&txn, s, db, move |ctx| list::mpop_one(ctx, &k, end, count)).await {
            Some(Ok(Some(r))) => return r,
            Some(Ok(None)) => {}
            Some(Err(e)) => return e,
            None => return shutting_down(),
        }
    }
    Reply::NilArray
}

/// SMOVE with source and destination on different shards.
pub async fn smove(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let n = core.global.shards();
    let (src, dst, m) = (args[1].clone(), args[2].clone(), args[3].clone());
    let (ss, ds) = (shard_of(&src, n), shard_of(&dst, n));
    let Some(txn) = Txn::begin(core, vec![ss, ds]).await else {
        return shutting_down();
    };
    let k = src.clone();
    match on(&txn, ss, db, move |ctx| set::set_exists(ctx, &k)).await {
        Some(Ok(true)) => {}
        Some(Ok(false)) => return Reply::Int(0),
        Some(Err(e)) => return e,
        None => return shutting_down(),
    }
    let k = dst.clone();
    match on(&txn, ds, db, move |ctx| set::set_exists(ctx, &k)).await {
        Some(Ok(_)) => {}
        Some(Err(e)) => return e,
        None => return shutting_down(),
    }
    let member = m.clone();
    match on(&txn, ss, db, move |ctx| {
        set::remove_member(ctx, &src, &member)
    })
    .await
    {
        Some(Ok(true)) => {}
        Some(Ok(false)) => return Reply::Int(0),
        Some(Err(e)) => return e,
        None => return shutting_down(),
    }
    match on(&txn, ds, db, move |ctx| set::add_member(ctx, &dst, &m)).await {
        Some(Ok(_)) => Reply::Int(1),
        Some(Err(e)) => e,
        None => shutting_down(),
    }
}

/// Copies of the sets at `keys`, read in key order under `txn` (None for a missing key).
async fn gather(
    txn: &Txn,
    n: usize,
    db: usize,
    keys: &[Bytes],
) -> Option<Result<Vec<Option<SetValue>>, Reply>> {
    let mut sets = Vec::with_capacity(keys.len());
    for k in keys {
        let k = k.clone();
        match on(txn, shard_of(&k, n), db, move |ctx| set::copy_set(ctx, &k)).await? {
            Ok(s) => sets.push(s),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(sets))
}

/// A set operation over keys on several shards, its result stored at `dst` when given.
async fn set_op(
    core: &Rc<Core>,
    db: usize,
    keys: &[Bytes],
    dst: Option<Bytes>,
    op: SetOp,
    limit: Option<usize>,
) -> Reply {
    let n = core.global.shards();
    let mut shards: Vec<usize> = keys.iter().map(|k| shard_of(k, n)).collect();
    if let Some(d) = &dst {
        shards.push(shard_of(d, n));
    }
    let Some(txn) = Txn::begin(core, shards).await else {
        return shutting_down();
    };
    let sets = match gather(&txn, n, db, keys).await {
        Some(Ok(s)) => s,
        Some(Err(e)) => return e,
        None => return shutting_down(),
    };
    let members = set::compute(op, &sets, limit.unwrap_or(0));
    drop(sets);
    if limit.is_some() {
        return Reply::Int(members.len() as i64);
    }
    let Some(dst) = dst else {
        return set::members_reply(members);
    };
    let d = shard_of(&dst, n);
    on(&txn, d, db, move |ctx| {
        set::store_result(ctx, op, &dst, &members)
    })
    .await
    .unwrap_or_else(shutting_down)
}

pub async fn sinter(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    set_op(core, db, &args[1..], None, SetOp::Inter, None).await
}

pub async fn sunion(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    set_op(core, db, &args[1..], None, SetOp::Union, None).await
}

pub async fn sdiff(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    set_op(core, db, &args[1..], None, SetOp::Diff, None).await
}

pub async fn sinterstore(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let dst = Some(args[1].clone());
    set_op(core, db, &args[2..], dst, SetOp::Inter, None).await
}

pub async fn sunionstore(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let dst = Some(args[1].clone());
    set_op(core, db, &args[2..], dst, SetOp::Union, None).await
}

pub async fn sdiffstore(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let dst = Some(args[1].clone());
    set_op(core, db, &args[2..], dst, SetOp::Diff, None).await
}

pub async fn sintercard(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let (keys, limit) = match set::sintercard_args(args) {
        Ok(a) => a,
        Err(e) => return e,
    };
    set_op(core, db, &keys, None, SetOp::Inter, Some(limit)).await
}

//! Sorted-set commands whose keys live on several shards (ZUNIONSTORE, ZINTER, ZRANGESTORE,
//! ZMPOP, ...), run under one cross-shard transaction (`server::txn`): every shard they touch
//! is locked, each input is read on its own shard by the same steps the single-shard form
//! runs (`cmd::zset`), the result is computed here and stored on the destination's shard.
//! Nobody sees a half-done store, and errors come in Redis' order (the key count, then
//! WRONGTYPE while reading, then the options).
//!
//! Never: reads or writes a shard it has not locked, or holds its locks past the reply.

use std::rc::Rc;

use bytes::Bytes;

use super::core::Core;
use super::table::Spec;
use super::txn::Txn;
use crate::cmd::args::err;
use crate::cmd::zset::{self, SetOpCmd};
use crate::cmd::Ctx;
use crate::protocol::Reply;
use crate::shard::{now_ms, shard_of, Shard};

fn shutting_down() -> Reply {
    err("ERR server is shutting down")
}

/// Runs `f` with a [`Ctx`] on `shard`, which `txn` holds.
async fn on<R, F>(txn: &Txn, shard: usize, db: usize, f: F) -> Option<R>
where
    R: Send + 'static,
    F: FnOnce(&mut Ctx) -> R + Send + 'static,
{
    txn.run(shard, move |s: &mut Shard| {
        f(&mut Ctx {
            shard: s,
            db,
            now: now_ms(),
        })
    })
    .await
}

async fn setop_across(core: &Rc<Core>, db: usize, args: &[Bytes], cmd: SetOpCmd) -> Reply {
    let keys = match zset::setop_keys(args, &cmd) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let n = core.global.shards();
    let mut shards: Vec<usize> = keys.clone().map(|i| shard_of(&args[i], n)).collect();
    if cmd.store {
        shards.push(shard_of(&args[1], n));
    }
    let Some(txn) = Txn::begin(core, shards).await else {
        return shutting_down();
    };
    let mut inputs = Vec::with_capacity(keys.len());
    for i in keys.clone() {
        let key = args[i].clone();
        match on(&txn, shard_of(&key, n), db, move |ctx| {
            zset::read_input(ctx, &key)
        })
        .await
        {
            Some(Ok(input)) => inputs.push(input),
            Some(Err(e)) => return e,
            None => return shutting_down(),
        }
    }
    let opts = match zset::setop_opts(args, &cmd, keys.len()) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let result = zset::compute(&cmd, &opts, inputs);
    if !cmd.store {
        return zset::setop_finish(&cmd, &opts, result);
    }
    let dst = args[1].clone();
    on(&txn, shard_of(&dst, n), db, move |ctx| {
        zset::store_result(ctx, cmd.name, &dst, result)
    })
    .await
    .unwrap_or_else(shutting_down)
}

pub async fn zunionstore(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    setop_across(core, db, args, zset::ZUNIONSTORE).await
}

pub async fn zinterstore(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    setop_across(core, db, args, zset::ZINTERSTORE).await
}

pub async fn zdiffstore(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    setop_across(core, db, args, zset::ZDIFFSTORE).await
}

pub async fn zunion(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    setop_across(core, db, args, zset::ZUNION).await
}

pub async fn zinter(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    setop_across(core, db, args, zset::ZINTER).await
}

pub async fn zdiff(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    setop_across(core, db, args, zset::ZDIFF).await
}

pub async fn zintercard(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    setop_across(core, db, args, zset::ZINTERCARD).await
}

/// ZRANGESTORE with source and destination on different shards.
pub async fn zrangestore(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let req = match zset::parse_rangestore(args) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let n = core.global.shards();
    let (dst, src) = (args[1].clone(), args[2].clone());
    let Some(txn) = Txn::begin(core, vec![shard_of(&dst, n), shard_of(&src, n)]).await else {
        return shutting_down();
    };
    let all = args.to_vec();
    let read_req = req.clone();
    let read = on(&txn, shard_of(&src, n), db, move |ctx| {
        zset::range_entries(ctx, &all, &read_req)
    })
    .await;
    let entries = match read {
        Some(Ok(v)) => v.unwrap_or_default(),
        Some(Err(e)) => return e,
        None => return shutting_down(),
    };
    on(&txn, shard_of(&dst, n), db, move |ctx| {
        zset::store_range(ctx, &dst, entries, &req)
    })
    .await
    .unwrap_or_else(shutting_down)
}

/// ZMPOP with its keys on several shards: the first key holding a sorted set is popped.
pub async fn zmpop(core: &Rc<Core>, _: &'static Spec, db: usize, args: &[Bytes]) -> Reply {
    let (keys, max, count) = match zset::parse_zmpop(args) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let n = core.global.shards();
    let shards = keys.clone().map(|i| shard_of(&args[i], n)).collect();
    let Some(txn) = Txn::begin(core, shards).await else {
        return shutting_down();
    };
    for i in keys {
        let key = args[i].clone();
        let popped = on(&txn, shard_of(&key, n), db, move |ctx| {
            zset::zmpop_key(ctx, &key, max, count)
        })
        .await;
        match popped {
            Some(Ok(Some(r))) => return r,
            Some(Ok(None)) => {}
            Some(Err(e)) => return e,
            None => return shutting_down(),
        }
    }
    Reply::NilArray
}

//! SORT and SORT_RO over the shards: a BY or GET pattern can name a key on any shard, so the
//! command runs as one cross-shard transaction (`server::txn`). It holds the sorted key's
//! shard and the STORE destination's, or every shard when a pattern reads other keys; reads
//! the elements on their shard, looks up what the patterns name where those keys live
//! (strings through MGET's path, so values on SSD are read too), orders here, and answers or
//! stores. Nobody sees the weights change halfway or a half-stored result.
//!
//! Never: reads a key on a shard the transaction does not hold.

use bytes::Bytes;
use futures::FutureExt;

use super::table::{self, Call, Spec};
use super::txn::{run_fn, Txn};
use crate::cmd::sort::{self, SortOpts, Target};
use crate::cmd::{string, Ctx};
use crate::protocol::Reply;
use crate::shard::{now_ms, shard_of};

fn shutting_down() -> Reply {
    Reply::Error("ERR server is shutting down".into())
}

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst]
pub async fn sort(call: Call<'_>) -> Reply {
    run(call, false).await
}

/// SORT_RO: SORT without STORE.
pub async fn sort_ro(call: Call<'_>) -> Reply {
    run(call, true).await
}

async fn run(call: Call<'_>, readonly: bool) -> Reply {
    let (core, session, args) = call.parts();
    let mut opts = match sort::parse(&args, readonly) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let db = session.db;
    let n = core.global.shards();
    let key = args[1].clone();
    let src = shard_of(&key, n);
    let shards: Vec<usize> = if opts.reads_other_keys() {
        (0..n).collect()
    } else {
        std::iter::once(src)
            .chain(opts.store.iter().map(|d| shard_of(d, n)))
            .collect()
    };
    let Some(txn) = Txn::begin(core, shards).await else {
        return shutting_down();
    };
    let read = txn
        .run(src, move |sh| {
            sort::read_source(
                &mut Ctx {
                    shard: sh,
                    db,
                    now: now_ms(),
                },
                &key,
            )
        })
        .await;
    let (source, mut elements) = match read {
        Some(Ok(r)) => r,
        Some(Err(e)) => return e,
        None => return shutting_down(),
    };
    sort::prepare(&mut opts, source, &mut elements, super::script::driving());
    let weights = match (&opts.by, opts.dontsort) {
        (Some(by), false) => {
            let targets: Vec<Target> = elements.iter().map(|e| sort::target(by, e)).collect();
            match resolve(&txn, db, n, &targets, &elements).await {
                Some(w) => Some(w),
                None => return shutting_down(),
            }
        }
        _ => None,
    };
    let sorted = match sort::order(&opts, elements, weights) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (start, end) = sort::limit_range(&opts, sorted.len());
    let picked: Vec<Bytes> = if end < start {
        Vec::new()
    } else {
        sorted[start as usize..=end as usize].to_vec()
    };
    let out = match output(&txn, db, n, &opts, &picked).await {
        Some(o) => o,
        None => return shutting_down(),
    };
    match &opts.store {
        None => Reply::Array(
            out.into_iter()
                .map(|v| v.map_or(Reply::Nil, Reply::Bulk))
                .collect(),
        ),
        Some(dst) => {
            let values: Vec<Bytes> = out.into_iter().map(Option::unwrap_or_default).collect();
            let dst = dst.clone();
            txn.run(shard_of(&dst, n), move |sh| {
                sort::store(
                    &mut Ctx {
                        shard: sh,
                        db,
                        now: now_ms(),
                    },
                    &dst,
                    &values,
                )
            })
            .await
            .unwrap_or_else(shutting_down)
        }
    }
}

/// The reply's (or stored list's) items: each picked element, or what each GET pattern names
/// for it.
async fn output(
    txn: &Txn,
    db: usize,
    n: usize,
    opts: &SortOpts,
    picked: &[Bytes],
) -> Option<Vec<Option<Bytes>>> {
    if opts.gets.is_empty() {
        return Some(picked.iter().cloned().map(Some).collect());
    }
    let mut targets = Vec::with_capacity(picked.len() * opts.gets.len());
    let mut elements = Vec::with_capacity(targets.capacity());
    for e in picked {
        for g in &opts.gets {
            targets.push(sort::target(g, e));
            elements.push(e.clone());
        }
    }
    resolve(txn, db, n, &targets, &elements).await
}

/// What each target names (`elements[i]` is the element target i was made from), read on
/// the shards that hold the keys, all shards at once.
async fn resolve(
    txn: &Txn,
    db: usize,
    n: usize,
    targets: &[Target],
    elements: &[Bytes],
) -> Option<Vec<Option<Bytes>>> {
    let mut out: Vec<Option<Bytes>> = vec![None; targets.len()];
    // Per shard: (target index, key) for strings and (index, key, field) for hash fields.
    let mut strings: Vec<Vec<(usize, Bytes)>> = vec![Vec::new(); n];
    let mut fields: Vec<Vec<(usize, Bytes, Bytes)>> = vec![Vec::new(); n];
    for (i, t) in targets.iter().enumerate() {
        match t {
            Target::Element => out[i] = Some(elements[i].clone()),
            Target::Nothing => {}
            Target::Key(k, None) => strings[shard_of(k, n)].push((i, k.clone())),
            Target::Key(k, Some(f)) => fields[shard_of(k, n)].push((i, k.clone(), f.clone())),
        }
    }
    let mget = table::lookup(b"MGET")?;
    let string_reads = strings
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(s, wanted)| async move {
            let mut args = Vec::with_capacity(wanted.len() + 1);
            args.push(Bytes::from_static(b"MGET"));
            args.extend(wanted.iter().map(|(_, k)| k.clone()));
            let reply = run_fn(
                txn,
                s,
                db,
                mget as &'static Spec,
                string::mget,
                args,
                crate::shard::tracking::Caller::NONE,
            )
            .await?;
            let values = match reply {
                Reply::Array(v) => v,
                _ => Vec::new(),
            };
            let found: Vec<(usize, Option<Bytes>)> = wanted
                .into_iter()
                .zip(values.into_iter().map(Some).chain(std::iter::repeat(None)))
                .map(|((i, _), v)| match v {
                    Some(Reply::Bulk(b)) => (i, Some(b)),
                    _ => (i, None),
                })
                .collect();
            Some(found)
        });
    let field_reads = fields
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(s, wanted)| async move {
            // Hashes kept on SSD come back first (the transaction holds the shard, so they
            // stay in RAM until it ends).
            let keys: Vec<Bytes> = wanted.iter().map(|(_, k, _)| k.clone()).collect();
            txn.run_async(
                s,
                Box::new(move |core: std::rc::Rc<super::core::Core>| {
                    async move { super::exec::load_local_collections(&core, db, &keys).await }
                        .boxed_local()
                }),
            )
            .await?;
            txn.run(s, move |sh| {
                let mut ctx = Ctx {
                    shard: sh,
                    db,
                    now: now_ms(),
                };
                wanted
                    .iter()
                    .map(|(i, k, f)| (*i, sort::read_field(&mut ctx, k, f)))
                    .collect::<Vec<_>>()
            })
            .await
        });
    let (strings, fields) = futures::future::join(
        futures::future::join_all(string_reads),
        futures::future::join_all(field_reads),
    )
    .await;
    for part in strings.into_iter().chain(fields) {
        for (i, v) in part? {
            out[i] = v;
        }
    }
    Some(out)
}

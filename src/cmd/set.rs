//! Set commands: SADD SREM SISMEMBER SMISMEMBER SMEMBERS SCARD SPOP SRANDMEMBER SMOVE SINTER
//! SINTERCARD SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE SSCAN, as Redis 7.0 answers
//! them. A set is an intset (a packed block) while its members are integers within
//! `set-max-intset-entries`, else a [`LargeSet`] (`shard::set`). The algebra works on copies
//! of the sets it reads ([`SetValue`]: a packed block copied, a large set captured, sharing its
//! nodes), so the same code runs when the keys live on other shards (`server::txn_collections`
//! gathers the copies there).
//!
//! Never: leaves an empty set stored, or builds a reply larger than the sets it reads (a
//! negative SRANDMEMBER count is bounded by [`RANDOM_REPLY_BYTES`]).

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::args::*;
use super::collection::{self, Coll};
use super::Ctx;
use crate::notify;
use crate::protocol::Reply;
use crate::shard::set::{LargeSet, SetBuilder};
use crate::shard::{intset, ObjectType, PackedEncoding, Value, ValueRef};

/// The most bytes (members plus their reply overhead) SRANDMEMBER with a negative count may
/// answer; past it the count is refused rather than the reply built.
pub const RANDOM_REPLY_BYTES: usize = 256 << 20;

/// A set read for the algebra: an intset's bytes or a large set.
#[derive(Clone, Copy)]
pub enum SetRef<'a> {
    Intset(&'a [u8]),
    Large(&'a LargeSet),
}

impl<'a> SetRef<'a> {
    fn from_coll(c: Coll<'a>) -> Result<SetRef<'a>, Reply> {
        match c {
            Coll::Packed(b) => Ok(SetRef::Intset(b)),
            Coll::Object(o) => collection::object_as::<LargeSet>(o)
                .map(SetRef::Large)
                .ok_or_else(collection::unknown_layout),
        }
    }

    pub fn len(self) -> usize {
        match self {
            SetRef::Intset(b) => intset::len(b),
            SetRef::Large(l) => l.len(),
        }
    }

    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    pub fn contains(self, m: &[u8]) -> bool {
        match self {
            SetRef::Intset(b) => parse_i64(m).is_some_and(|v| intset::contains(b, v)),
            SetRef::Large(l) => l.contains(m),
        }
    }

    /// Every member (integers as their decimal text).
    pub fn members(self) -> Vec<Bytes> {
        match self {
            SetRef::Intset(b) => intset::iter(b)
                .map(|v| Bytes::from(v.to_string()))
                .collect(),
            SetRef::Large(l) => l.iter().map(Bytes::copy_from_slice).collect(),
        }
    }

    /// A uniformly random member.
    fn random(self, rng: &mut SmallRng) -> Option<Bytes> {
        match self {
            SetRef::Intset(b) => {
                let n = intset::len(b);
                (n > 0)
                    .then(|| intset::get(b, rng.gen_range(0..n)))
                    .flatten()
                    .map(|v| Bytes::from(v.to_string()))
            }
            SetRef::Large(l) => l
                .random(&mut |n| rng.gen_range(0..n.max(1)))
                .map(Bytes::copy_from_slice),
        }
    }
}

/// A set copied out of its shard (an intset's bytes, or a capture of a large set).
pub struct SetValue(Value);

impl SetValue {
    pub fn view(&self) -> SetRef<'_> {
        match &self.0 {
            Value::Packed(p) => SetRef::Intset(&p.bytes),
            Value::Object(o) => match collection::object_as::<LargeSet>(&**o) {
                Some(l) => SetRef::Large(l),
                None => SetRef::Intset(&[]),
            },
            _ => SetRef::Intset(&[]),
        }
    }
}

/// The set at `key`, copied for the algebra (None when missing; WRONGTYPE otherwise).
pub fn copy_set(ctx: &mut Ctx, key: &[u8]) -> Result<Option<SetValue>, Reply> {
    match ctx.shard.lookup(ctx.db, key, ctx.now) {
        None => Ok(None),
        Some(e) => {
            collection::check_type(e, ObjectType::Set)?;
            Ok(Some(SetValue(e.to_value(key.len()))))
        }
    }
}

fn intset_max(ctx: &Ctx) -> usize {
    ctx.shard.settings.set_max_intset_entries()
}

fn rng(ctx: &mut Ctx) -> SmallRng {
    let seed = u64::from(ctx.shard.rand_u32()) << 32 | u64::from(ctx.shard.rand_u32());
    SmallRng::seed_from_u64(seed)
}

/// A set being changed in place: an intset's bytes (put back afterwards) or the large set.
enum SetMut<'a> {
    Intset(SetBuilder),
    Large(&'a mut LargeSet),
}

/// Runs `f` on the set at `key` for changing it; a missing key gets a new set when `create`
/// (stored if `f` leaves members in it). A set `f` empties is deleted.
fn modify<R>(
    ctx: &mut Ctx,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut SetBuilderOrLarge) -> R,
) -> Result<Option<R>, Reply> {
    let max = intset_max(ctx);
    let (r, empty) = match collection::write(ctx, key, ObjectType::Set)? {
        Some(e) => match e.value() {
            ValueRef::Packed(k, b) if k.encoding == PackedEncoding::Intset => {
                let mut s = SetBuilderOrLarge(SetMut::Intset(SetBuilder::Intset(
                    b.to_vec(),
                    max.min(1 << 30),
                )));
                let r = f(&mut s);
                let empty = s.len() == 0;
                if let (false, SetMut::Intset(b)) = (empty, s.0) {
                    collection::put_back(e, b.into_value());
                }
                (r, empty)
            }
            _ => {
                let Some(l) = collection::object_mut::<LargeSet>(e) else {
                    return Err(collection::unknown_layout());
                };
                let mut s = SetBuilderOrLarge(SetMut::Large(l));
                let r = f(&mut s);
                (r, s.len() == 0)
            }
        },
        None if create => {
            let mut s = SetBuilderOrLarge(SetMut::Intset(SetBuilder::new(max)));
            let r = f(&mut s);
            if let SetMut::Intset(b) = s.0 {
                if !b.is_empty() {
                    ctx.shard.store(ctx.db, key, b.into_value(), 0);
                }
            }
            return Ok(Some(r));
        }
        None => return Ok(None),
    };
    collection::remove_if_empty(ctx, key, empty);
    Ok(Some(r))
}

/// A set open for changes (see [`modify`]).
pub struct SetBuilderOrLarge<'a>(SetMut<'a>);

impl SetBuilderOrLarge<'_> {
    fn len(&self) -> usize {
        match &self.0 {
            SetMut::Intset(b) => b.len(),
            SetMut::Large(l) => l.len(),
        }
    }

    fn add(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            SetMut::Intset(b) => b.add(m),
            SetMut::Large(l) => l.insert(m),
        }
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            SetMut::Intset(SetBuilder::Intset(is, _)) => {
                parse_i64(m).is_some_and(|v| intset::remove(is, v))
            }
            SetMut::Intset(SetBuilder::Large(l)) => l.remove(m),
            SetMut::Large(l) => l.remove(m),
        }
    }

    fn view(&self) -> SetRef<'_> {
        match &self.0 {
            SetMut::Intset(SetBuilder::Intset(is, _)) => SetRef::Intset(is),
            SetMut::Intset(SetBuilder::Large(l)) => SetRef::Large(l),
            SetMut::Large(l) => SetRef::Large(l),
        }
    }
}

pub fn sadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let r = modify(ctx, &args[1], true, |s| {
        args[2..].iter().filter(|m| s.add(m)).count()
    });
    if matches!(r, Ok(Some(n)) if n > 0) {
        ctx.notify(notify::SET, "sadd", &args[1]);
    }
    match r {
        Ok(n) => Reply::Int(n.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

pub fn srem(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let r = modify(ctx, &args[1], false, |s| {
        let mut n = 0;
        for m in &args[2..] {
            if s.remove(m) {
                n += 1;
                if s.len() == 0 {
                    break;
                }
            }
        }
        n
    });
    if matches!(r, Ok(Some(n)) if n > 0) {
        collection::notify_change(ctx, notify::SET, "srem", &args[1]);
    }
    match r {
        Ok(n) => Reply::Int(n.unwrap_or(0)),
        Err(e) => e,
    }
}

/// Runs `f` on the set at `key` for reading (None: no such key).
fn read<R>(ctx: &mut Ctx, key: &[u8], f: impl FnOnce(SetRef<'_>) -> R) -> Result<Option<R>, Reply> {
    match collection::read(ctx, key, ObjectType::Set)? {
        None => Ok(None),
        Some(c) => Ok(Some(f(SetRef::from_coll(c)?))),
    }
}

pub fn sismember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1], |s| s.contains(&args[2])) {
        Ok(hit) => Reply::Int(i64::from(hit.unwrap_or(false))),
        Err(e) => e,
    }
}

pub fn smismember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let hits = read(ctx, &args[1], |s| {
        args[2..]
            .iter()
            .map(|m| Reply::Int(i64::from(s.contains(m))))
            .collect::<Vec<_>>()
    });
    match hits {
        Ok(Some(v)) => Reply::Array(v),
        Ok(None) => Reply::Array(args[2..].iter().map(|_| Reply::Int(0)).collect()),
        Err(e) => e,
    }
}

pub fn scard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1], |s| s.len()) {
        Ok(n) => Reply::Int(n.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

fn bulks(members: Vec<Bytes>) -> Vec<Reply> {
    members.into_iter().map(Reply::Bulk).collect()
}

pub fn smembers(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1], |s| s.members()) {
        Ok(Some(m)) => Reply::Set(bulks(m)),
        Ok(None) => Reply::Set(vec![]),
        Err(e) => e,
    }
}

/// `count` distinct random members of `s` (fewer than its size).
fn distinct_random(s: SetRef<'_>, count: usize, rng: &mut SmallRng) -> Vec<Bytes> {
    let size = s.len();
    if count.saturating_mul(3) > size {
        // Many of them: shuffle them all and take a prefix.
        let mut all = s.members();
        for i in 0..count.min(all.len()) {
            let j = rng.gen_range(i..all.len());
            all.swap(i, j);
        }
        all.truncate(count);
        return all;
    }
    let mut seen = std::collections::HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        match s.random(rng) {
            Some(m) => {
                if seen.insert(m.clone()) {
                    out.push(m);
                }
            }
            None => break,
        }
    }
    out
}

pub fn spop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return err(ERR_SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(c) if c >= 0 => Some(c as usize),
            _ => return err("ERR value is out of range, must be positive"),
        },
    };
    let mut rng = rng(ctx);
    let r = modify(ctx, &args[1], false, |s| {
        let size = s.len();
        let want = count.unwrap_or(1);
        let popped = if want >= size {
            s.view().members()
        } else {
            distinct_random(s.view(), want, &mut rng)
        };
        for m in &popped {
            s.remove(m);
        }
        popped
    });
    if matches!(&r, Ok(Some(m)) if !m.is_empty()) {
        collection::notify_change(ctx, notify::SET, "spop", &args[1]);
    }
    match (r, count) {
        (Err(e), _) => e,
        (Ok(None), None) => Reply::Nil,
        (Ok(None), Some(_)) => Reply::Set(vec![]),
        (Ok(Some(mut m)), None) => m.pop().map_or(Reply::Nil, Reply::Bulk),
        (Ok(Some(m)), Some(_)) => Reply::Set(bulks(m)),
    }
}

pub fn srandmember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 3 {
        return err(ERR_SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match parse_i64(a) {
            Some(c) if c != i64::MIN => Some(c),
            Some(_) => return err("ERR value is out of range, must be between -9223372036854775807 and 9223372036854775807"),
            None => return err(ERR_NOT_INT),
        },
    };
    let mut rng = rng(ctx);
    let r = read(ctx, &args[1], |s| -> Result<Reply, Reply> {
        let Some(c) = count else {
            return Ok(s.random(&mut rng).map_or(Reply::Nil, Reply::Bulk));
        };
        if c == 0 {
            return Ok(Reply::Array(vec![]));
        }
        let size = s.len();
        if c < 0 || c == 1 {
            let n = c.unsigned_abs();
            let avg = s.members_bytes_estimate();
            if n.saturating_mul(avg as u64 + 24) > RANDOM_REPLY_BYTES as u64 {
                return Err(err(
                    "ERR SRANDMEMBER count is too large: the reply would exceed 256 MB",
                ));
            }
            let out = (0..n).filter_map(|_| s.random(&mut rng)).map(Reply::Bulk);
            return Ok(Reply::Array(out.collect()));
        }
        let c = c as usize;
        let members = if c >= size {
            s.members()
        } else {
            distinct_random(s, c, &mut rng)
        };
        Ok(Reply::Array(bulks(members)))
    });
    match r {
        Ok(Some(Ok(r))) | Ok(Some(Err(r))) => r,
        Ok(None) if count.is_some() => Reply::Array(vec![]),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

impl SetRef<'_> {
    /// About how long a member is (for bounding replies).
    fn members_bytes_estimate(self) -> usize {
        match self {
            SetRef::Intset(b) => b.first().map_or(8, |_| 20),
            SetRef::Large(l) => {
                let sample: Vec<usize> = l.iter().take(16).map(|m| m.len()).collect();
                sample.iter().sum::<usize>() / sample.len().max(1)
            }
        }
    }
}

/// SMOVE's step on the source: removes `m` (Ok(true)) or finds it missing (Ok(false)).
pub fn remove_member(ctx: &mut Ctx, key: &[u8], m: &[u8]) -> Result<bool, Reply> {
    let gone = modify(ctx, key, false, |s| s.remove(m))?.unwrap_or(false);
    if gone {
        collection::notify_change(ctx, notify::SET, "srem", key);
    }
    Ok(gone)
}

/// SMOVE's step on the destination: adds `m`, creating the set.
pub fn add_member(ctx: &mut Ctx, key: &[u8], m: &[u8]) -> Result<bool, Reply> {
    let added = modify(ctx, key, true, |s| s.add(m))?.unwrap_or(false);
    if added {
        ctx.notify(notify::SET, "sadd", key);
    }
    Ok(added)
}

/// WRONGTYPE when `key` holds something other than a set; whether it exists.
pub fn set_exists(ctx: &mut Ctx, key: &[u8]) -> Result<bool, Reply> {
    collection::write(ctx, key, ObjectType::Set).map(|e| e.is_some())
}

/// SMOVE with both keys on this shard.
pub fn smove(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (src, dst, m) = (&args[1], &args[2], &args[3]);
    match set_exists(ctx, src) {
        Ok(true) => {}
        Ok(false) => return Reply::Int(0),
        Err(e) => return e,
    }
    if let Err(e) = set_exists(ctx, dst) {
        return e;
    }
    if src == dst {
        return match read(ctx, src, |s| s.contains(m)) {
            Ok(hit) => Reply::Int(i64::from(hit.unwrap_or(false))),
            Err(e) => e,
        };
    }
    match remove_member(ctx, src, m) {
        Ok(true) => {}
        Ok(false) => return Reply::Int(0),
        Err(e) => return e,
    }
    match add_member(ctx, dst, m) {
        Ok(_) => Reply::Int(1),
        Err(e) => e,
    }
}

/// What a set operation makes of its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Inter,
    Union,
    Diff,
}

/// The members of `op` over `sets` (a missing key is an empty set), with `limit` (0: none)
/// stopping an intersection early (SINTERCARD).
pub fn compute(op: SetOp, sets: &[Option<SetValue>], limit: usize) -> Vec<Bytes> {
    let views: Vec<Option<SetRef<'_>>> =
        sets.iter().map(|s| s.as_ref().map(|v| v.view())).collect();
    match op {
        SetOp::Inter => {
            if views.iter().any(|v| v.is_none_or(|s| s.is_empty())) {
                return Vec::new();
            }
            let mut all: Vec<SetRef<'_>> = views.into_iter().flatten().collect();
            all.sort_by_key(|s| s.len());
            let mut out = Vec::new();
            for m in all[0].members() {
                if all[1..].iter().all(|s| s.contains(&m)) {
                    out.push(m);
                    if limit != 0 && out.len() >= limit {
                        break;
                    }
                }
            }
            out
        }
        SetOp::Union => {
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            for s in views.into_iter().flatten() {
                for m in s.members() {
                    if seen.insert(m.clone()) {
                        out.push(m);
                    }
                }
            }
            out
        }
        SetOp::Diff => {
            let Some(Some(first)) = views.first().copied() else {
                return Vec::new();
            };
            let rest: Vec<SetRef<'_>> = views[1..].iter().flatten().copied().collect();
            first
                .members()
                .into_iter()
                .filter(|m| !rest.iter().any(|s| s.contains(m)))
                .collect()
        }
    }
}

/// A STORE command's result as the value to store (None when empty: the key is deleted).
pub fn result_value(members: &[Bytes], intset_max: usize) -> Option<Value> {
    if members.is_empty() {
        return None;
    }
    let mut b = SetBuilder::new(intset_max);
    for m in members {
        b.add(m);
    }
    Some(b.into_value())
}

/// Stores a STORE command's result at `dst` (deleting it when empty); the reply.
pub fn store_result(ctx: &mut Ctx, op: SetOp, dst: &[u8], members: &[Bytes]) -> Reply {
    match result_value(members, intset_max(ctx)) {
        Some(v) => {
            ctx.shard.store(ctx.db, dst, v, 0);
            let event = match op {
                SetOp::Inter => "sinterstore",
                SetOp::Union => "sunionstore",
                SetOp::Diff => "sdiffstore",
            };
            ctx.notify(notify::SET, event, dst);
        }
        None => {
            if ctx.shard.remove(ctx.db, dst).is_some() {
                ctx.notify(notify::GENERIC, "del", dst);
            }
        }
    }
    Reply::Int(members.len() as i64)
}

/// The sets at `keys` copied (None for a missing one), or the first WRONGTYPE.
pub fn copy_sets(ctx: &mut Ctx, keys: &[Bytes]) -> Result<Vec<Option<SetValue>>, Reply> {
    keys.iter().map(|k| copy_set(ctx, k)).collect()
}

/// The reply of a set operation that answers its members.
pub fn members_reply(members: Vec<Bytes>) -> Reply {
    Reply::Set(bulks(members))
}

fn op_reply(ctx: &mut Ctx, keys: &[Bytes], op: SetOp) -> Reply {
    match copy_sets(ctx, keys) {
        Ok(sets) => members_reply(compute(op, &sets, 0)),
        Err(e) => e,
    }
}

fn op_store(ctx: &mut Ctx, args: &[Bytes], op: SetOp) -> Reply {
    match copy_sets(ctx, &args[2..]) {
        Ok(sets) => {
            let members = compute(op, &sets, 0);
            store_result(ctx, op, &args[1], &members)
        }
        Err(e) => e,
    }
}

pub fn sinter(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    op_reply(ctx, &args[1..], SetOp::Inter)
}

pub fn sunion(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    op_reply(ctx, &args[1..], SetOp::Union)
}

pub fn sdiff(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    op_reply(ctx, &args[1..], SetOp::Diff)
}

pub fn sinterstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    op_store(ctx, args, SetOp::Inter)
}

pub fn sunionstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    op_store(ctx, args, SetOp::Union)
}

pub fn sdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    op_store(ctx, args, SetOp::Diff)
}

/// SINTERCARD's arguments: (keys, limit).
pub fn sintercard_args(args: &[Bytes]) -> Result<(Vec<Bytes>, usize), Reply> {
    let numkeys = match parse_i64(&args[1]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(err("ERR numkeys should be greater than 0")),
    };
    if numkeys > (args.len() - 2) as u64 {
        return Err(err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let last = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut j = last;
    while j < args.len() {
        if is(&args[j], "LIMIT") && j + 1 < args.len() {
            j += 1;
            limit = match parse_i64(&args[j]) {
                Some(l) if l >= 0 => l as usize,
                _ => return Err(err("ERR LIMIT can't be negative")),
            };
        } else {
            return Err(err(ERR_SYNTAX));
        }
        j += 1;
    }
    Ok((args[2..last].to_vec(), limit))
}

pub fn sintercard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (keys, limit) = match sintercard_args(args) {
        Ok(a) => a,
        Err(e) => return e,
    };
    match copy_sets(ctx, &keys) {
        Ok(sets) => Reply::Int(compute(SetOp::Inter, &sets, limit).len() as i64),
        Err(e) => e,
    }
}

/// SSCAN key cursor [MATCH pattern] [COUNT count].
pub fn sscan(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let cursor = match super::args::parse_cursor(&args[2]) {
        Some(c) => c,
        None => return err("ERR invalid cursor"),
    };
    // Redis looks the key up before it reads the options: a missing key answers an empty
    // scan whatever they say.
    let found = read(ctx, &args[1], |s| match s {
        SetRef::Intset(_) => (None, s.members()),
        SetRef::Large(_) => (Some(()), Vec::new()),
    });
    let (large, small) = match found {
        Ok(Some(x)) => x,
        Ok(None) => (None, Vec::new()),
        Err(e) => return e,
    };
    let exists = large.is_some() || !small.is_empty();
    if !exists {
        return Reply::Array(vec![
            Reply::Bulk(Bytes::from_static(b"0")),
            Reply::Array(vec![]),
        ]);
    }
    let mut pattern: Option<&Bytes> = None;
    let mut count = 10usize;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(&args[j], "COUNT") && more {
            count = match parse_i64(&args[j + 1]) {
                Some(c) if c >= 1 => c as usize,
                Some(_) => return err(ERR_SYNTAX),
                None => return err(ERR_NOT_INT),
            };
        } else if is(&args[j], "MATCH") && more {
            pattern = Some(&args[j + 1]);
        } else {
            return err(ERR_SYNTAX);
        }
        j += 2;
    }
    let (next, members) = if large.is_some() {
        let r = read(ctx, &args[1], |s| match s {
            SetRef::Large(l) => {
                let mut out = Vec::new();
                let next = l.scan(cursor, count, &mut out);
                (next, out.into_iter().map(Bytes::copy_from_slice).collect())
            }
            SetRef::Intset(_) => (0, s.members()),
        });
        match r {
            Ok(Some(x)) => x,
            Ok(None) => (0, Vec::new()),
            Err(e) => return e,
        }
    } else {
        (0, small)
    };
    let members = members
        .into_iter()
        .filter(|m| pattern.is_none_or(|p| crate::glob::matches(p, m, false)))
        .map(Reply::Bulk)
        .collect();
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(members),
    ])
}

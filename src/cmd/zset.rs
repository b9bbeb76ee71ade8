//! Sorted-set commands (Redis' `t_zset.c`): ZADD and friends over one shard, with Redis 7.0's
//! replies and error texts. A sorted set is a zset listpack while it is small
//! (`zset-max-listpack-*`) and a [`LargeZSet`] past that; both are read through [`Z`] and
//! changed through [`ZEdit`]. Multi-key commands are written as steps (read an input, compute,
//! store a result) that the cross-shard forms in `server::zset_cross` run on several shards.
//!
//! Never: stores a NaN score or an empty sorted set, or answers for a key on another shard
//! (the dispatcher routes; `keys_*` name a command's keys for it).

use bytes::Bytes;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};

use super::args::{
    err, int_arg, is, parse_cursor, parse_i64, ERR_NOT_FLOAT, ERR_NOT_INT, ERR_SYNTAX,
};
use super::collection::{self, object_as, object_mut, take_packed, unknown_layout, Coll};
use super::Ctx;
use crate::notify;
use crate::protocol::Reply;
use crate::shard::listpack;
use crate::shard::object::PackLimits;
use crate::shard::set::LargeSet;
use crate::shard::zset::{
    self as zs, cmp_entry, lp_delete, lp_entries, lp_find, lp_from_sorted, lp_insert, LargeZSet,
};
use crate::shard::{intset, ObjectType, PackedEncoding, Value};

const ERR_MINMAX: &str = "ERR min or max is not a float";
const ERR_LEX: &str = "ERR min or max not valid string range item";
const ERR_NAN: &str = "ERR resulting score is not a number (NaN)";

/// (member, score) pairs, the shape every read returns.
pub type Entries = Vec<(Vec<u8>, f64)>;

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// A stored sorted set, for reading.
#[derive(Clone, Copy)]
pub enum Z<'a> {
    Packed(&'a [u8]),
    Large(&'a LargeZSet),
}

impl<'a> Z<'a> {
    fn from_coll(c: Coll<'a>) -> Result<Z<'a>, Reply> {
        match c {
            Coll::Packed(b) => Ok(Z::Packed(b)),
            Coll::Object(o) => object_as::<LargeZSet>(o)
                .map(Z::Large)
                .ok_or_else(unknown_layout),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Z::Packed(lp) => listpack::len(lp) / 2,
            Z::Large(z) => z.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Z::Packed(lp) => lp_find(lp, m).map(|x| x.1),
            Z::Large(z) => z.score(m),
        }
    }

    fn rank(&self, m: &[u8]) -> Option<usize> {
        match self {
            Z::Packed(lp) => lp_entries(lp).iter().position(|(x, _)| x == m),
            Z::Large(z) => z.rank(m),
        }
    }

    /// Ranks `start..end` (clamped), ascending or, `rev`, descending from `end - 1`.
    pub fn range(&self, start: usize, end: usize, rev: bool) -> Entries {
        match self {
            Z::Packed(lp) => {
                let all = lp_entries(lp);
                let end = end.min(all.len());
                let start = start.min(end);
                let mut v: Entries = all[start..end].to_vec();
                if rev {
                    v.reverse();
                }
                v
            }
            Z::Large(z) => z.range(start, end, rev),
        }
    }

    /// Every member in order.
    pub fn entries(&self) -> Entries {
        self.range(0, usize::MAX, false)
    }

    /// The ranks `lo..hi` of the members from the first for which `ge_min` holds on, while
    /// `le_max` holds (as Redis walks a range from its first member in it).
    fn span(
        &self,
        ge_min: &dyn Fn(f64, &[u8]) -> bool,
        le_max: &dyn Fn(f64, &[u8]) -> bool,
    ) -> (usize, usize) {
        match self {
            Z::Packed(lp) => {
                let all = lp_entries(lp);
                let lo = all
                    .iter()
                    .position(|(m, s)| ge_min(*s, m))
                    .unwrap_or(all.len());
                let n = all[lo..].iter().take_while(|(m, s)| le_max(*s, m)).count();
                (lo, lo + n)
            }
            Z::Large(z) => {
                let lo = z.count_while(&|s, m| !ge_min(s, m));
                let hi = z.count_while(le_max).max(lo);
                (lo, hi)
            }
        }
    }

    fn score_span(&self, r: &ScoreRange) -> (usize, usize) {
        if r.is_empty() {
            return (0, 0);
        }
        self.span(&|s, _| r.ge_min(s), &|s, _| r.le_max(s))
    }

    fn lex_span(&self, r: &LexRange) -> (usize, usize) {
        if r.is_empty() {
            return (0, 0);
        }
        self.span(&|_, m| r.ge_min(m), &|_, m| r.le_max(m))
    }
}

/// The sorted set at `key` for reading: None when missing, WRONGTYPE for another type.
fn read<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Result<Option<Z<'a>>, Reply> {
    match collection::read(ctx, key, ObjectType::ZSet)? {
        None => Ok(None),
        Some(c) => Z::from_coll(c).map(Some),
    }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// A sorted set being changed: a listpack copied out, or the large set in place.
pub enum ZEdit<'a> {
    Packed(Vec<u8>),
    Large(&'a mut LargeZSet),
    /// A listpack that outgrew its limits during this command (or a new large set).
    Grown(Box<LargeZSet>),
}

impl ZEdit<'_> {
    pub fn view(&self) -> Z<'_> {
        match self {
            ZEdit::Packed(lp) => Z::Packed(lp),
            ZEdit::Large(z) => Z::Large(z),
            ZEdit::Grown(z) => Z::Large(z),
        }
    }

    fn large(&mut self) -> Option<&mut LargeZSet> {
        match self {
            ZEdit::Packed(_) => None,
            ZEdit::Large(z) => Some(z),
            ZEdit::Grown(z) => Some(z),
        }
    }

    /// Adds a member that is not there, converting first when it would pass `limits`.
    fn add_new(&mut self, m: &[u8], s: f64, limits: &PackLimits) {
        if let ZEdit::Packed(lp) = self {
            if listpack::len(lp) / 2 + 1 > limits.zset_entries || m.len() > limits.zset_value {
                *self = ZEdit::Grown(Box::new(LargeZSet::from_listpack(lp)));
            }
        }
        match self {
            ZEdit::Packed(lp) => lp_insert(lp, m, s),
            other => {
                if let Some(z) = other.large() {
                    z.insert(m, s);
                }
            }
        }
    }

    /// Moves an existing member to score `s`.
    fn set_score(&mut self, m: &[u8], s: f64) {
        match self {
            ZEdit::Packed(lp) => {
                if let Some((pos, _)) = lp_find(lp, m) {
                    lp_delete(lp, pos);
                    lp_insert(lp, m, s);
                }
            }
            other => {
                if let Some(z) = other.large() {
                    z.insert(m, s);
                }
            }
        }
    }

    fn remove(&mut self, m: &[u8]) -> Option<f64> {
        match self {
            ZEdit::Packed(lp) => {
                let (pos, s) = lp_find(lp, m)?;
                lp_delete(lp, pos);
                Some(s)
            }
            other => other.large()?.remove(m),
        }
    }

    /// Removes up to `count` members from the low end (or, `max`, the high end); returns them
    /// in the order taken (highest first for `max`).
    fn pop(&mut self, max: bool, count: usize) -> Entries {
        let lp = match self {
            ZEdit::Packed(lp) => lp,
            other => return other.large().map_or_else(Vec::new, |z| z.pop(max, count)),
        };
        // The listpack: one walk to the first rank taken, one cut of the entries taken.
        let n = listpack::len(lp) / 2;
        let take = count.min(n);
        let lo = if max { n - take } else { 0 };
        let mut cut = None;
        let mut v = Vec::with_capacity(take);
        {
            let mut it = listpack::iter(lp).skip(2 * lo);
            while v.len() < take {
                let (Some((pos, m)), Some((_, s))) = (it.next(), it.next()) else {
                    break;
                };
                cut.get_or_insert(pos);
                v.push((m.to_vec(), zs::element_score(s)));
            }
        }
        if let Some(pos) = cut {
            listpack::delete(lp, pos, 2 * v.len());
        }
        if max {
            v.reverse();
        }
        v
    }

    /// Removes ranks `lo..hi`; returns what was removed, in order.
    fn remove_ranks(&mut self, lo: usize, hi: usize) -> Entries {
        let gone = self.view().range(lo, hi, false);
        match self {
            ZEdit::Packed(lp) => {
                let all = lp_entries(lp);
                let kept = all
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i < lo || *i >= hi)
                    .map(|(_, (m, s))| (&m[..], *s));
                *lp = lp_from_sorted(kept);
            }
            other => {
                if let Some(z) = other.large() {
                    for (m, _) in &gone {
                        z.remove(m);
                    }
                }
            }
        }
        gone
    }
}

/// What to do with the entry once an edit is over.
enum Outcome {
    Keep,
    Put(Value),
    Delete,
}

fn finish(edit: ZEdit<'_>) -> Outcome {
    let empty = edit.view().is_empty();
    if empty {
        return Outcome::Delete;
    }
    match edit {
        ZEdit::Packed(lp) => Outcome::Put(Value::Packed(zs::packed(lp))),
        ZEdit::Large(_) => Outcome::Keep,
        ZEdit::Grown(z) => Outcome::Put(Value::Object(z)),
    }
}

fn limits(ctx: &Ctx) -> PackLimits {
    PackLimits::from_settings(&ctx.shard.settings)
}

/// Runs `f` on the sorted set at `key` and stores what it leaves (deleting the key when it is
/// left empty). A missing key is created when `create` names the first member's length (and
/// stored only when `f` leaves members in it); otherwise Ok(None). An error from `f` leaves
/// the key as it was.
fn modify<R>(
    ctx: &mut Ctx,
    key: &[u8],
    create: Option<usize>,
    f: impl FnOnce(&mut ZEdit<'_>, &PackLimits) -> Result<R, Reply>,
) -> Result<Option<R>, Reply> {
    let lim = limits(ctx);
    let db = ctx.db;
    match collection::write(ctx, key, ObjectType::ZSet)? {
        Some(e) => {
            let mut edit = match take_packed(e) {
                Some(p) => ZEdit::Packed(p.bytes.into_vec()),
                None => ZEdit::Large(object_mut::<LargeZSet>(e).ok_or_else(unknown_layout)?),
            };
            let r = f(&mut edit, &lim)?;
            match finish(edit) {
                Outcome::Keep => {}
                Outcome::Put(v) => collection::put_back(e, v),
                Outcome::Delete => {
                    ctx.shard.remove(db, key);
                }
            }
            Ok(Some(r))
        }
        None => {
            let Some(first_len) = create else {
                return Ok(None);
            };
            let mut edit = if lim.zset_entries == 0 || first_len > lim.zset_value {
                ZEdit::Grown(Box::default())
            } else {
                ZEdit::Packed(listpack::new())
            };
            let r = f(&mut edit, &lim)?;
            if let Outcome::Put(v) = finish(edit) {
                ctx.shard.store(db, key, v, 0);
            }
            Ok(Some(r))
        }
    }
}

/// Stores `entries` (distinct members) at `key` as a new sorted set, replacing whatever was
/// there (its expiry too); deletes `key` when there are none. Replies with the count.
pub fn store_result(ctx: &mut Ctx, event: &str, key: &[u8], entries: Entries) -> Reply {
    let n = entries.len();
    if n == 0 {
        if ctx.shard.remove(ctx.db, key).is_some() {
            ctx.notify(notify::GENERIC, "del", key);
        }
        return Reply::Int(0);
    }
    let v = zs::value_from_entries(entries, &limits(ctx));
    ctx.shard.store(ctx.db, key, v, 0);
    ctx.notify(notify::ZSET, event, key);
    Reply::Int(n as i64)
}

/// ZRANGESTORE's store: `entries` in the order the range gave them, added one by one as Redis
/// does (a listpack first unless a rank range is known to be too long, converted when a member
/// passes the limits). The order matters for one thing: a -0 added while the result is still
/// a listpack is kept there, and read back, as 0.
pub fn store_range(ctx: &mut Ctx, key: &[u8], mut entries: Entries, req: &RangeReq) -> Reply {
    let lim = limits(ctx);
    let n = entries.len();
    if n == 0 {
        if ctx.shard.remove(ctx.db, key).is_some() {
            ctx.notify(notify::GENERIC, "del", key);
        }
        return Reply::Int(0);
    }
    let mut packed = !(req.by == RangeBy::Rank && n > lim.zset_entries);
    for (i, (m, s)) in entries.iter_mut().enumerate() {
        if packed && (i + 1 > lim.zset_entries || m.len() > lim.zset_value) {
            packed = false;
        }
        if packed && *s == 0.0 {
            *s = 0.0;
        }
    }
    let v = if packed {
        entries.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
        Value::Packed(zs::packed(lp_from_sorted(
            entries.iter().map(|(m, s)| (&m[..], *s)),
        )))
    } else {
        let mut z = LargeZSet::new();
        for (m, s) in &entries {
            z.insert(m, *s);
        }
        Value::Object(Box::new(z))
    };
    ctx.shard.store(ctx.db, key, v, 0);
    ctx.notify(notify::ZSET, "zrangestore", key);
    Reply::Int(n as i64)
}

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

fn member_reply(m: Vec<u8>) -> Reply {
    Reply::Bulk(Bytes::from(m))
}

/// Members, with their scores when asked (flat in RESP2, pairs in RESP3).
pub fn entries_reply(v: Entries, withscores: bool) -> Reply {
    if withscores {
        Reply::Pairs(
            v.into_iter()
                .map(|(m, s)| (member_reply(m), Reply::Double(s)))
                .collect(),
        )
    } else {
        Reply::Array(v.into_iter().map(|(m, _)| member_reply(m)).collect())
    }
}

fn empty_array() -> Reply {
    Reply::Array(Vec::new())
}

// ---------------------------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------------------------

/// A score interval, each end open or closed.
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

impl ScoreRange {
    /// Redis' `zslParseRange`: `(` opens an end; strtod otherwise; NaN refused.
    pub fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let end = |b: &[u8]| -> Option<(f64, bool)> {
            let (text, ex) = match b.first() {
                Some(b'(') => (&b[1..], true),
                _ => (b, false),
            };
            let (v, _) = zs::strtod(text)?;
            (!v.is_nan()).then_some((v, ex))
        };
        let (min, minex) = end(min)?;
        let (max, maxex) = end(max)?;
        Some(ScoreRange {
            min,
            minex,
            max,
            maxex,
        })
    }

    fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }

    fn ge_min(&self, s: f64) -> bool {
        if self.minex {
            s > self.min
        } else {
            s >= self.min
        }
    }

    fn le_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }
}

#[derive(Clone, Debug)]
enum LexEnd {
    /// `-`
    Least,
    /// `+`
    Most,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

/// A member interval (`[a`, `(a`, `-`, `+`).
#[derive(Clone, Debug)]
pub struct LexRange {
    min: LexEnd,
    max: LexEnd,
}

impl LexRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        let end = |b: &[u8]| -> Option<LexEnd> {
            match b.first()? {
                b'+' if b.len() == 1 => Some(LexEnd::Most),
                b'-' if b.len() == 1 => Some(LexEnd::Least),
                b'(' => Some(LexEnd::Excl(b[1..].to_vec())),
                b'[' => Some(LexEnd::Incl(b[1..].to_vec())),
                _ => None,
            }
        };
        Some(LexRange {
            min: end(min)?,
            max: end(max)?,
        })
    }

    /// Redis' `sdscmplex`: `-` below and `+` above every string.
    fn cmp(a: &LexEnd, b: &LexEnd) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let key = |e: &LexEnd| match e {
            LexEnd::Least => 0,
            LexEnd::Most => 2,
            _ => 1,
        };
        match (a, b) {
            (LexEnd::Incl(x) | LexEnd::Excl(x), LexEnd::Incl(y) | LexEnd::Excl(y)) => x.cmp(y),
            _ if key(a) == key(b) => Equal,
            _ => key(a).cmp(&key(b)),
        }
    }

    fn is_empty(&self) -> bool {
        let c = LexRange::cmp(&self.min, &self.max);
        let ex = |e: &LexEnd| !matches!(e, LexEnd::Incl(_));
        c == std::cmp::Ordering::Greater
            || (c == std::cmp::Ordering::Equal && (ex(&self.min) || ex(&self.max)))
    }

    fn ge_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexEnd::Least => true,
            LexEnd::Most => false,
            LexEnd::Incl(x) => m >= &x[..],
            LexEnd::Excl(x) => m > &x[..],
        }
    }

    fn le_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexEnd::Least => false,
            LexEnd::Most => true,
            LexEnd::Incl(x) => m <= &x[..],
            LexEnd::Excl(x) => m < &x[..],
        }
    }
}

/// A rank range as Redis clips it, as `start..end` (end exclusive); None when empty.
fn rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    super::args::clip(start, end, len).map(|(a, b)| (a, b + 1))
}

/// The ranks a score or lex span `lo..hi` gives after LIMIT, in reply order.
fn limit_span(lo: usize, hi: usize, offset: i64, limit: i64, rev: bool) -> Option<(usize, usize)> {
    if offset < 0 {
        return None;
    }
    let n = hi - lo;
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    if offset >= n {
        return None;
    }
    let take = if limit < 0 {
        n - offset
    } else {
        (n - offset).min(usize::try_from(limit).unwrap_or(usize::MAX))
    };
    Some(if rev {
        (hi - offset - take, hi - offset)
    } else {
        (lo + offset, lo + offset + take)
    })
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RangeBy {
    Rank,
    Score,
    Lex,
}

/// A parsed ZRANGE-family request.
#[derive(Clone, Debug)]
pub struct RangeReq {
    key: usize,
    by: RangeBy,
    rev: bool,
    withscores: bool,
    offset: i64,
    limit: i64,
    start: i64,
    end: i64,
    score: Option<ScoreRange>,
    lex: Option<LexRange>,
}

/// Parses `args[key] min max [options]` as Redis' `zrangeGenericCommand` does. `by`/`rev`
/// fixed by the command name (ZRANGEBYSCORE, ZREVRANGE, ...) or None for ZRANGE's own options.
fn parse_range(
    args: &[Bytes],
    key: usize,
    store: bool,
    by: Option<RangeBy>,
    rev: Option<bool>,
) -> Result<RangeReq, Reply> {
    let (mut by_opt, mut rev_opt) = (by, rev);
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = key + 3;
    while j < args.len() {
        let a = &args[j];
        let left = args.len() - j - 1;
        if !store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = int_arg(&args[j + 1])?;
            limit = int_arg(&args[j + 2])?;
            j += 2;
        } else if rev.is_none() && rev_opt.is_none() && is(a, "rev") {
            rev_opt = Some(true);
        } else if by.is_none() && by_opt.is_none() && is(a, "bylex") {
            by_opt = Some(RangeBy::Lex);
        } else if by.is_none() && by_opt.is_none() && is(a, "byscore") {
            by_opt = Some(RangeBy::Score);
        } else {
            return Err(err(ERR_SYNTAX));
        }
        j += 1;
    }
    let rev = rev_opt.unwrap_or(false);
    let by = by_opt.unwrap_or(RangeBy::Rank);
    if limit != -1 && by == RangeBy::Rank {
        return Err(err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == RangeBy::Lex {
        return Err(err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo_arg, mut hi_arg) = (&args[key + 1], &args[key + 2]);
    if rev && by != RangeBy::Rank {
        std::mem::swap(&mut lo_arg, &mut hi_arg);
    }
    let mut req = RangeReq {
        key,
        by,
        rev,
        withscores,
        offset,
        limit,
        start: 0,
        end: 0,
        score: None,
        lex: None,
    };
    match by {
        RangeBy::Rank => {
            req.start = int_arg(lo_arg)?;
            req.end = int_arg(hi_arg)?;
        }
        RangeBy::Score => {
            req.score = Some(ScoreRange::parse(lo_arg, hi_arg).ok_or_else(|| err(ERR_MINMAX))?);
        }
        RangeBy::Lex => {
            req.lex = Some(LexRange::parse(lo_arg, hi_arg).ok_or_else(|| err(ERR_LEX))?);
        }
    }
    Ok(req)
}

/// The members a range request selects, in reply order.
fn select(z: Z<'_>, req: &RangeReq) -> Entries {
    let span = match req.by {
        RangeBy::Rank => {
            let Some((a, b)) = rank_range(req.start, req.end, z.len()) else {
                return Vec::new();
            };
            if req.rev {
                let n = z.len();
                return z.range(n - b, n - a, true);
            }
            return z.range(a, b, false);
        }
        // `parse_range` sets the bounds its kind needs; without them the range is empty.
        RangeBy::Score => req.score.as_ref().map_or((0, 0), |r| z.score_span(r)),
        RangeBy::Lex => req.lex.as_ref().map_or((0, 0), |r| z.lex_span(r)),
    };
    match limit_span(span.0, span.1, req.offset, req.limit, req.rev) {
        Some((a, b)) => z.range(a, b, req.rev),
        None => Vec::new(),
    }
}

/// Reads the selection of a parsed range request (None when the key is missing).
pub fn range_entries(
    ctx: &mut Ctx,
    args: &[Bytes],
    req: &RangeReq,
) -> Result<Option<Entries>, Reply> {
    Ok(read(ctx, &args[req.key])?.map(|z| select(z, req)))
}

fn range_cmd(ctx: &mut Ctx, args: &[Bytes], by: Option<RangeBy>, rev: Option<bool>) -> Reply {
    let req = match parse_range(args, 1, false, by, rev) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match range_entries(ctx, args, &req) {
        Ok(Some(v)) => entries_reply(v, req.withscores),
        Ok(None) => empty_array(),
        Err(e) => e,
    }
}

pub fn zrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range_cmd(ctx, args, None, None)
}

pub fn zrevrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range_cmd(ctx, args, Some(RangeBy::Rank), Some(true))
}

pub fn zrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range_cmd(ctx, args, Some(RangeBy::Score), Some(false))
}

pub fn zrevrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range_cmd(ctx, args, Some(RangeBy::Score), Some(true))
}

pub fn zrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range_cmd(ctx, args, Some(RangeBy::Lex), Some(false))
}

pub fn zrevrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    range_cmd(ctx, args, Some(RangeBy::Lex), Some(true))
}

/// ZRANGESTORE's parse (dst at 1, the source's request from 2).
pub fn parse_rangestore(args: &[Bytes]) -> Result<RangeReq, Reply> {
    parse_range(args, 2, true, None, None)
}

pub fn zrangestore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let req = match parse_rangestore(args) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match range_entries(ctx, args, &req) {
        Ok(v) => store_range(ctx, &args[1], v.unwrap_or_default(), &req),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------
// Single-key commands
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

fn zadd_generic(ctx: &mut Ctx, args: &[Bytes], incr_cmd: bool) -> Reply {
    let mut f = AddFlags {
        incr: incr_cmd,
        ..AddFlags::default()
    };
    let mut at = 2;
    if !incr_cmd {
        while at < args.len() {
            let o = &args[at];
            if is(o, "nx") {
                f.nx = true;
            } else if is(o, "xx") {
                f.xx = true;
            } else if is(o, "ch") {
                f.ch = true;
            } else if is(o, "incr") {
                f.incr = true;
            } else if is(o, "gt") {
                f.gt = true;
            } else if is(o, "lt") {
                f.lt = true;
            } else {
                break;
            }
            at += 1;
        }
    }
    let rest = &args[at..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return err(ERR_SYNTAX);
    }
    if f.nx && f.xx {
        return err("ERR XX and NX options at the same time are not compatible");
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return err("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if f.incr && rest.len() > 2 {
        return err("ERR INCR option supports a single increment-element pair");
    }
    // Inline for the usual one to four pairs: no allocation per request.
    let mut pairs: smallvec::SmallVec<[(f64, &[u8]); 4]> =
        smallvec::SmallVec::with_capacity(rest.len() / 2);
    for p in rest.chunks(2) {
        match zs::parse_score(&p[0]) {
            Some(s) => pairs.push((s, &p[1][..])),
            None => return err(ERR_NOT_FLOAT),
        }
    }
    let create = (!f.xx).then(|| pairs[0].1.len());
    let done = modify(ctx, &args[1], create, |z, lim| {
        let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
        let mut last = 0.0;
        for &(score, m) in &pairs {
            // The score to give `m`, given its current one (None: leave it as it is).
            let decide = |cur: Option<f64>| -> Result<Option<f64>, Reply> {
                let Some(cur) = cur else {
                    return Ok((!f.xx).then_some(score));
                };
                if f.nx {
                    return Ok(None);
                }
                let mut score = score;
                if f.incr {
                    score += cur;
                    if score.is_nan() {
                        return Err(err(ERR_NAN));
                    }
                }
                if (f.lt && score >= cur) || (f.gt && score <= cur) {
                    return Ok(None);
                }
                Ok(Some(score))
            };
            let mut had = None;
            let new = match z.large() {
                // One hash and one lookup for the read and the write.
                Some(large) => large.update(m, |cur| {
                    had = cur;
                    decide(cur)
                })?,
                None => {
                    had = z.view().score(m);
                    let new = decide(had)?;
                    match (new, had) {
                        (Some(s), Some(cur)) if s != cur => z.set_score(m, s),
                        (Some(s), None) => z.add_new(m, s, lim),
                        _ => {}
                    }
                    new
                }
            };
            let Some(new) = new else {
                continue;
            };
            match had {
                Some(cur) if new != cur => updated += 1,
                Some(_) => {}
                None => added += 1,
            }
            processed += 1;
            last = new;
        }
        Ok((added, updated, processed, last))
    });
    let (added, updated, processed, last) = match done {
        Ok(Some(r)) => r,
        Ok(None) => (0, 0, 0, 0.0),
        Err(e) => return e,
    };
    if added + updated > 0 {
        ctx.notify(
            notify::ZSET,
            if f.incr { "zincr" } else { "zadd" },
            &args[1],
        );
    }
    if f.incr {
        if processed > 0 {
            Reply::Double(last)
        } else {
            Reply::Nil
        }
    } else {
        Reply::Int(if f.ch { added + updated } else { added })
    }
}

pub fn zadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    zadd_generic(ctx, args, false)
}

/// ZINCRBY key increment member: ZADD INCR with its arguments in ZADD's order.
pub fn zincrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let as_zadd = [
        args[0].clone(),
        args[1].clone(),
        args[2].clone(),
        args[3].clone(),
    ];
    zadd_generic(ctx, &as_zadd, true)
}

pub fn zrem(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let r = modify(ctx, &args[1], None, |z, _| {
        Ok(args[2..].iter().filter(|m| z.remove(m).is_some()).count() as i64)
    });
    if matches!(r, Ok(Some(n)) if n > 0) {
        collection::notify_change(ctx, notify::ZSET, "zrem", &args[1]);
    }
    match r {
        Ok(n) => Reply::Int(n.unwrap_or(0)),
        Err(e) => e,
    }
}

pub fn zcard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1]) {
        Ok(z) => Reply::Int(z.map_or(0, |z| z.len() as i64)),
        Err(e) => e,
    }
}

pub fn zscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1]) {
        Ok(z) => z
            .and_then(|z| z.score(&args[2]))
            .map_or(Reply::Nil, Reply::Double),
        Err(e) => e,
    }
}

pub fn zmscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1]) {
        Ok(z) => Reply::Array(
            args[2..]
                .iter()
                .map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, Reply::Double))
                .collect(),
        ),
        Err(e) => e,
    }
}

fn rank_cmd(ctx: &mut Ctx, args: &[Bytes], rev: bool) -> Reply {
    match read(ctx, &args[1]) {
        Ok(Some(z)) => match z.rank(&args[2]) {
            Some(r) if rev => Reply::Int((z.len() - 1 - r) as i64),
            Some(r) => Reply::Int(r as i64),
            None => Reply::Nil,
        },
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

pub fn zrank(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rank_cmd(ctx, args, false)
}

pub fn zrevrank(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rank_cmd(ctx, args, true)
}

pub fn zcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(r) = ScoreRange::parse(&args[2], &args[3]) else {
        return err(ERR_MINMAX);
    };
    match read(ctx, &args[1]) {
        Ok(Some(z)) => {
            let (a, b) = z.score_span(&r);
            Reply::Int((b - a) as i64)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

pub fn zlexcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(r) = LexRange::parse(&args[2], &args[3]) else {
        return err(ERR_LEX);
    };
    match read(ctx, &args[1]) {
        Ok(Some(z)) => {
            let (a, b) = z.lex_span(&r);
            Reply::Int((b - a) as i64)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

fn remrange(
    ctx: &mut Ctx,
    args: &[Bytes],
    event: &str,
    span: &dyn Fn(Z<'_>) -> Option<(usize, usize)>,
) -> Reply {
    let r = modify(ctx, &args[1], None, |z, _| {
        Ok(match span(z.view()) {
            Some((a, b)) if a < b => z.remove_ranks(a, b).len() as i64,
            _ => 0,
        })
    });
    if matches!(r, Ok(Some(n)) if n > 0) {
        collection::notify_change(ctx, notify::ZSET, event, &args[1]);
    }
    match r {
        Ok(n) => Reply::Int(n.unwrap_or(0)),
        Err(e) => e,
    }
}

pub fn zremrangebyrank(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (start, end) = match (int_arg(&args[2]), int_arg(&args[3])) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    remrange(ctx, args, "zremrangebyrank", &|z| {
        rank_range(start, end, z.len())
    })
}

pub fn zremrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(r) = ScoreRange::parse(&args[2], &args[3]) else {
        return err(ERR_MINMAX);
    };
    remrange(ctx, args, "zremrangebyscore", &|z| Some(z.score_span(&r)))
}

pub fn zremrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(r) = LexRange::parse(&args[2], &args[3]) else {
        return err(ERR_LEX);
    };
    remrange(ctx, args, "zremrangebylex", &|z| Some(z.lex_span(&r)))
}

/// Pops up to `count` members from the low (`max` false) or high end of the set at `key`.
/// None when the key is missing.
pub fn pop(ctx: &mut Ctx, key: &[u8], max: bool, count: usize) -> Result<Option<Entries>, Reply> {
    let popped = modify(ctx, key, None, |z, _| Ok(z.pop(max, count)))?;
    if popped.as_ref().is_some_and(|v| !v.is_empty()) {
        let event = if max { "zpopmax" } else { "zpopmin" };
        collection::notify_change(ctx, notify::ZSET, event, key);
    }
    Ok(popped)
}

fn pop_cmd(ctx: &mut Ctx, args: &[Bytes], max: bool) -> Reply {
    if args.len() > 3 {
        return err(ERR_SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        // Redis words a count that does not parse as one out of range too.
        Some(a) => match parse_i64(a) {
            Some(c) if c >= 0 => Some(c as usize),
            _ => return err("ERR value is out of range, must be positive"),
        },
    };
    if count == Some(0) {
        // Still WRONGTYPE for another type.
        return match read(ctx, &args[1]) {
            Err(e) => e,
            Ok(_) => empty_array(),
        };
    }
    match pop(ctx, &args[1], max, count.unwrap_or(1)) {
        Ok(Some(v)) if count.is_some() => entries_reply(v, true),
        Ok(Some(v)) => {
            // Sized up front: a flat_map's collect starts small and grows.
            let mut flat = Vec::with_capacity(2 * v.len());
            for (m, s) in v {
                flat.push(member_reply(m));
                flat.push(Reply::Double(s));
            }
            Reply::Array(flat)
        }
        Ok(None) => empty_array(),
        Err(e) => e,
    }
}

pub fn zpopmin(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    pop_cmd(ctx, args, false)
}

pub fn zpopmax(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    pop_cmd(ctx, args, true)
}

/// Most members a ZRANDMEMBER with a negative count returns (Redis has no bound; one here
/// keeps a request from building an unbounded reply).
const RANDMEMBER_MAX: u64 = 1 << 24;

pub fn zrandmember(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() == 2 {
        let seed = ctx.shard.rand_u32();
        return match read(ctx, &args[1]) {
            Ok(Some(z)) => {
                let i = seed as usize % z.len().max(1);
                z.range(i, i + 1, false)
                    .pop()
                    .map_or(Reply::Nil, |(m, _)| member_reply(m))
            }
            Ok(None) => Reply::Nil,
            Err(e) => e,
        };
    }
    let l = match parse_i64(&args[2]) {
        None => return err(ERR_NOT_INT),
        Some(i64::MIN) => {
            return err(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            )
        }
        Some(l) => l,
    };
    let withscores = match args.len() {
        3 => false,
        4 if is(&args[3], "withscores") => {
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
                return err("ERR value is out of range");
            }
            true
        }
        _ => return err(ERR_SYNTAX),
    };
    let seed = u64::from(ctx.shard.rand_u32()) << 32 | u64::from(ctx.shard.rand_u32());
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let z = match read(ctx, &args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return empty_array(),
        Err(e) => return e,
    };
    if l == 0 {
        return empty_array();
    }
    let size = z.len();
    let picked: Entries = if l < 0 {
        let n = l.unsigned_abs();
        if n > RANDMEMBER_MAX {
            return err("ERR value is out of range");
        }
        // A listpack is decoded once, not once a pick.
        let all = matches!(z, Z::Packed(_)).then(|| z.entries());
        (0..n)
            .map(|_| {
                let i = rng.gen_range(0..size);
                match &all {
                    Some(all) => all[i].clone(),
                    None => z.range(i, i + 1, false).pop().unwrap_or_default(),
                }
            })
            .collect()
    } else if l as u64 >= size as u64 {
        z.entries()
    } else {
        let mut ranks: Vec<usize> = sample(&mut rng, size, l as usize).into_vec();
        ranks.sort_unstable();
        if let Z::Packed(_) = z {
            let all = z.entries();
            ranks.iter().map(|&i| all[i].clone()).collect()
        } else {
            ranks
                .iter()
                .filter_map(|&i| z.range(i, i + 1, false).pop())
                .collect()
        }
    };
    entries_reply(picked, withscores)
}

pub fn zscan(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(cursor) = parse_cursor(&args[2]) else {
        return err("ERR invalid cursor");
    };
    let z = match read(ctx, &args[1]) {
        Ok(Some(z)) => z,
        Ok(None) => {
            return Reply::Array(vec![Reply::bulk_str("0"), empty_array()]);
        }
        Err(e) => return e,
    };
    let (mut pattern, mut count) = (None, 10usize);
    let mut i = 3;
    while i < args.len() {
        let left = args.len() - i;
        if is(&args[i], "count") && left >= 2 {
            match parse_i64(&args[i + 1]) {
                None => return err(ERR_NOT_INT),
                Some(c) if c < 1 => return err(ERR_SYNTAX),
                Some(c) => count = c as usize,
            }
            i += 2;
        } else if is(&args[i], "match") && left >= 2 {
            pattern = Some(args[i + 1].clone());
            i += 2;
        } else {
            return err(ERR_SYNTAX);
        }
    }
    // (member, score text) pairs.
    let (next, found): (u64, Vec<ScanPair>) = match z {
        Z::Packed(lp) => {
            let items: Vec<Vec<u8>> = listpack::iter(lp).map(|(_, e)| e.to_vec()).collect();
            let pairs = items
                .chunks(2)
                .map(|c| (c[0].clone(), c[1].clone()))
                .collect();
            (0, pairs)
        }
        Z::Large(big) => {
            let (next, v) = big.scan(cursor, count);
            let pairs = v
                .into_iter()
                .map(|(m, s)| (m, zs::fmt_g17(s).into_bytes()))
                .collect();
            (next, pairs)
        }
    };
    let mut out = Vec::with_capacity(found.len() * 2);
    for (m, s) in found {
        let keep = pattern
            .as_ref()
            .is_none_or(|p| crate::glob::matches(p, &m, false));
        if keep {
            out.push(member_reply(m));
            out.push(Reply::Bulk(Bytes::from(s)));
        }
    }
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(out),
    ])
}

/// A member and its score as ZSCAN's text.
type ScanPair = (Vec<u8>, Vec<u8>);

// ---------------------------------------------------------------------------------------------
// Several keys: ZUNION, ZINTER, ZDIFF (+STORE), ZINTERCARD, ZMPOP
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// The shape of a set-operation command: where its count of keys is, whether it stores,
/// whether it only counts (ZINTERCARD).
#[derive(Clone, Copy, Debug)]
pub struct SetOpCmd {
    pub op: SetOp,
    pub numkeys_at: usize,
    pub store: bool,
    pub card: bool,
    pub name: &'static str,
}

/// Options after the keys.
#[derive(Clone, Debug)]
pub struct SetOpOpts {
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    limit: usize,
}

/// The key positions of a set operation: Err is the command's own error for a bad count.
pub fn setop_keys(args: &[Bytes], cmd: &SetOpCmd) -> Result<std::ops::Range<usize>, Reply> {
    let n = int_arg(&args[cmd.numkeys_at])?;
    if n < 1 {
        return Err(Reply::Error(format!(
            "ERR at least 1 input key is needed for '{}' command",
            cmd.name
        )));
    }
    let first = cmd.numkeys_at + 1;
    if n as u64 > (args.len() - first) as u64 {
        return Err(err(ERR_SYNTAX));
    }
    Ok(first..first + n as usize)
}

/// The options after the keys (parsed once every input was read, as Redis orders its errors).
pub fn setop_opts(args: &[Bytes], cmd: &SetOpCmd, keys: usize) -> Result<SetOpOpts, Reply> {
    let mut o = SetOpOpts {
        weights: vec![1.0; keys],
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = cmd.numkeys_at + 1 + keys;
    let free = cmd.op != SetOp::Diff && !cmd.card;
    while j < args.len() {
        let remaining = args.len() - j;
        if free && remaining > keys && is(&args[j], "weights") {
            j += 1;
            for w in o.weights.iter_mut() {
                *w = zs::parse_score(&args[j])
                    .ok_or_else(|| err("ERR weight value is not a float"))?;
                j += 1;
            }
        } else if free && remaining >= 2 && is(&args[j], "aggregate") {
            let a = &args[j + 1];
            o.aggregate = if is(a, "sum") {
                Aggregate::Sum
            } else if is(a, "min") {
                Aggregate::Min
            } else if is(a, "max") {
                Aggregate::Max
            } else {
                return Err(err(ERR_SYNTAX));
            };
            j += 2;
        } else if !cmd.store && !cmd.card && is(&args[j], "withscores") {
            o.withscores = true;
            j += 1;
        } else if cmd.card && remaining >= 2 && is(&args[j], "limit") {
            o.limit = match parse_i64(&args[j + 1]) {
                Some(l) if l >= 0 => l as usize,
                _ => return Err(err("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(err(ERR_SYNTAX));
        }
    }
    Ok(o)
}

/// One input of a set operation: a sorted set's members, or a set's with score 1.
pub type Input = Option<Entries>;

/// Reads one input: None when missing, WRONGTYPE unless a sorted set or a set.
pub fn read_input(ctx: &mut Ctx, key: &[u8]) -> Result<Input, Reply> {
    let Some(e) = ctx.shard.lookup(ctx.db, key, ctx.now) else {
        return Ok(None);
    };
    match e.object_type() {
        Some(ObjectType::ZSet) => {}
        Some(ObjectType::Set) => {
            return set_members(e).map(|v| Some(v.into_iter().map(|m| (m, 1.0)).collect()));
        }
        _ => return Err(err(super::args::ERR_WRONGTYPE)),
    }
    match read(ctx, key)? {
        Some(z) => Ok(Some(z.entries())),
        None => Ok(None),
    }
}

/// A set's members. Packed sets (intset, listpack) are read here; the large set type lives
/// on the sets branch and is read once it lands (until then its layout is unknown here).
fn set_members(e: &crate::shard::Entry) -> Result<Vec<Vec<u8>>, Reply> {
    match e.value() {
        crate::shard::ValueRef::Packed(k, b) => Ok(match k.encoding {
            PackedEncoding::Intset => intset::iter(b)
                .map(|v| v.to_string().into_bytes())
                .collect(),
            _ => listpack::iter(b).map(|(_, e)| e.to_vec()).collect(),
        }),
        crate::shard::ValueRef::Object(o) => match object_as::<LargeSet>(o) {
            Some(set) => Ok(set.iter().map(<[u8]>::to_vec).collect()),
            None => Err(unknown_layout()),
        },
        _ => Err(unknown_layout()),
    }
}

fn aggregate(acc: &mut f64, v: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *acc += v;
            if acc.is_nan() {
                *acc = 0.0;
            }
        }
        // As Redis compares (f64::min/max may pick either zero of -0 and 0).
        Aggregate::Min => {
            if v < *acc {
                *acc = v;
            }
        }
        Aggregate::Max => {
            if v > *acc {
                *acc = v;
            }
        }
    }
}

/// The result of a set operation over its inputs (in key order), sorted; for ZINTERCARD only
/// its length matters (and stops at the limit).
pub fn compute(cmd: &SetOpCmd, o: &SetOpOpts, inputs: Vec<Input>) -> Entries {
    use std::collections::HashMap;
    let mut srcs: Vec<(Entries, f64)> = inputs
        .into_iter()
        .zip(o.weights.iter().copied())
        .map(|(i, w)| (i.unwrap_or_default(), w))
        .collect();
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut out: Entries = match cmd.op {
        SetOp::Inter => {
            srcs.sort_by_key(|(e, _)| e.len());
            let maps: Vec<HashMap<&[u8], f64>> = srcs[1..]
                .iter()
                .map(|(e, _)| e.iter().map(|(m, s)| (&m[..], *s)).collect())
                .collect();
            let mut out = Vec::new();
            'member: for (m, s) in &srcs[0].0 {
                let mut score = weigh(*s, srcs[0].1);
                for (map, (_, w)) in maps.iter().zip(&srcs[1..]) {
                    match map.get(&m[..]) {
                        Some(v) => aggregate(&mut score, *v * w, o.aggregate),
                        None => continue 'member,
                    }
                }
                out.push((m.clone(), score));
                if cmd.card && o.limit > 0 && out.len() >= o.limit {
                    break;
                }
            }
            out
        }
        SetOp::Union => {
            srcs.sort_by_key(|(e, _)| e.len());
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            let mut order = Vec::new();
            for (e, w) in &srcs {
                for (m, s) in e {
                    let v = weigh(*s, *w);
                    match acc.get_mut(&m[..]) {
                        Some(a) => aggregate(a, v, o.aggregate),
                        None => {
                            acc.insert(m.clone(), v);
                            order.push(m.clone());
                        }
                    }
                }
            }
            order
                .into_iter()
                .map(|m| {
                    let s = acc.get(&m).copied().unwrap_or(0.0);
                    (m, s)
                })
                .collect()
        }
        SetOp::Diff => {
            let others: std::collections::HashSet<&[u8]> = srcs[1..]
                .iter()
                .flat_map(|(e, _)| e.iter().map(|(m, _)| &m[..]))
                .collect();
            srcs[0]
                .0
                .iter()
                .filter(|(m, _)| !others.contains(&m[..]))
                .cloned()
                .collect()
        }
    };
    out.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
    out
}

/// The reply (or the stored result) of a set operation, once its inputs are read.
pub fn setop_finish(cmd: &SetOpCmd, o: &SetOpOpts, result: Entries) -> Reply {
    if cmd.card {
        Reply::Int(result.len() as i64)
    } else {
        entries_reply(result, o.withscores)
    }
}

fn setop(ctx: &mut Ctx, args: &[Bytes], cmd: SetOpCmd) -> Reply {
    let keys = match setop_keys(args, &cmd) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let mut inputs = Vec::with_capacity(keys.len());
    for k in keys.clone() {
        match read_input(ctx, &args[k]) {
            Ok(i) => inputs.push(i),
            Err(e) => return e,
        }
    }
    let o = match setop_opts(args, &cmd, keys.len()) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let result = compute(&cmd, &o, inputs);
    if cmd.store {
        return store_result(ctx, cmd.name, &args[1], result);
    }
    setop_finish(&cmd, &o, result)
}

pub const ZUNIONSTORE: SetOpCmd = SetOpCmd {
    op: SetOp::Union,
    numkeys_at: 2,
    store: true,
    card: false,
    name: "zunionstore",
};
pub const ZINTERSTORE: SetOpCmd = SetOpCmd {
    op: SetOp::Inter,
    numkeys_at: 2,
    store: true,
    card: false,
    name: "zinterstore",
};
pub const ZDIFFSTORE: SetOpCmd = SetOpCmd {
    op: SetOp::Diff,
    numkeys_at: 2,
    store: true,
    card: false,
    name: "zdiffstore",
};
pub const ZUNION: SetOpCmd = SetOpCmd {
    op: SetOp::Union,
    numkeys_at: 1,
    store: false,
    card: false,
    name: "zunion",
};
pub const ZINTER: SetOpCmd = SetOpCmd {
    op: SetOp::Inter,
    numkeys_at: 1,
    store: false,
    card: false,
    name: "zinter",
};
pub const ZDIFF: SetOpCmd = SetOpCmd {
    op: SetOp::Diff,
    numkeys_at: 1,
    store: false,
    card: false,
    name: "zdiff",
};
pub const ZINTERCARD: SetOpCmd = SetOpCmd {
    op: SetOp::Inter,
    numkeys_at: 1,
    store: false,
    card: true,
    name: "zintercard",
};

pub fn zunionstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop(ctx, args, ZUNIONSTORE)
}

pub fn zinterstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop(ctx, args, ZINTERSTORE)
}

pub fn zdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop(ctx, args, ZDIFFSTORE)
}

pub fn zunion(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop(ctx, args, ZUNION)
}

pub fn zinter(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop(ctx, args, ZINTER)
}

pub fn zdiff(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop(ctx, args, ZDIFF)
}

pub fn zintercard(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    setop(ctx, args, ZINTERCARD)
}

/// ZMPOP's parse: (key positions, pop from the high end, count).
pub fn parse_zmpop(args: &[Bytes]) -> Result<(std::ops::Range<usize>, bool, usize), Reply> {
    let bad_n = || err("ERR numkeys should be greater than 0");
    let n = parse_i64(&args[1]).ok_or_else(bad_n)?;
    if n < 1 {
        return Err(bad_n());
    }
    let where_at = (n as u64).checked_add(2).ok_or_else(|| err(ERR_SYNTAX))?;
    if where_at >= args.len() as u64 {
        return Err(err(ERR_SYNTAX));
    }
    let where_at = where_at as usize;
    let max = if is(&args[where_at], "min") {
        false
    } else if is(&args[where_at], "max") {
        true
    } else {
        return Err(err(ERR_SYNTAX));
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "count") && j + 1 < args.len() {
            let bad = || err("ERR count should be greater than 0");
            let c = parse_i64(&args[j + 1]).ok_or_else(bad)?;
            if c < 1 {
                return Err(bad());
            }
            count = Some(c as usize);
            j += 2;
        } else {
            return Err(err(ERR_SYNTAX));
        }
    }
    Ok((2..where_at, max, count.unwrap_or(1)))
}

/// ZMPOP's step on one key: Some(reply) when the key held a sorted set (popped), None when
/// missing.
pub fn zmpop_key(
    ctx: &mut Ctx,
    key: &Bytes,
    max: bool,
    count: usize,
) -> Result<Option<Reply>, Reply> {
    Ok(pop(ctx, key, max, count)?.map(|v| {
        Reply::Array(vec![
            Reply::Bulk(key.clone()),
            Reply::Array(
                v.into_iter()
                    .map(|(m, s)| Reply::Array(vec![member_reply(m), Reply::Double(s)]))
                    .collect(),
            ),
        ])
    }))
}

pub fn zmpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (keys, max, count) = match parse_zmpop(args) {
        Ok(p) => p,
        Err(e) => return e,
    };
    for k in keys {
        match zmpop_key(ctx, &args[k], max, count) {
            Ok(Some(r)) => return r,
            Ok(None) => {}
            Err(e) => return e,
        }
    }
    Reply::NilArray
}

// ---------------------------------------------------------------------------------------------
// Key positions of the commands whose keys follow a count
// ---------------------------------------------------------------------------------------------

/// ZUNION/ZINTER/ZDIFF/ZINTERCARD: the keys after the count at 1 (none when the count is bad:
/// the command then answers its error wherever it runs).
pub fn keys_after_count(args: &[Bytes]) -> Vec<usize> {
    counted_keys(args, 1)
}

/// ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE: the destination, then the keys after the count at 2.
pub fn keys_store_after_count(args: &[Bytes]) -> Vec<usize> {
    let mut v = vec![1];
    v.extend(counted_keys(args, 2));
    v
}

/// ZMPOP: the keys after the count at 1.
pub fn keys_zmpop(args: &[Bytes]) -> Vec<usize> {
    match parse_zmpop(args) {
        Ok((keys, _, _)) => keys.collect(),
        Err(_) => Vec::new(),
    }
}

fn counted_keys(args: &[Bytes], at: usize) -> Vec<usize> {
    match args.get(at).and_then(|a| parse_i64(a)) {
        Some(n) if n >= 1 && (n as u64) <= (args.len() - at - 1) as u64 => {
            (at + 1..at + 1 + n as usize).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::listpack::Element;

    fn b(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn ranges_parse_as_redis() {
        let r = ScoreRange::parse(b"(1", b"+inf").expect("range");
        assert!(!r.ge_min(1.0) && r.ge_min(1.5) && r.le_max(f64::INFINITY));
        assert!(ScoreRange::parse(b"nan", b"1").is_none());
        assert!(ScoreRange::parse(b"x", b"1").is_none());
        assert!(ScoreRange::parse(b"(", b"1").is_some());
        assert!(ScoreRange::parse(b"2", b"(2").expect("range").is_empty());
        let l = LexRange::parse(b"[a", b"(c").expect("lex");
        assert!(l.ge_min(b"a") && l.le_max(b"bz") && !l.le_max(b"c"));
        assert!(LexRange::parse(b"a", b"+").is_none());
        assert!(LexRange::parse(b"+", b"-").expect("lex").is_empty());
        assert!(!LexRange::parse(b"-", b"+").expect("lex").is_empty());
        assert_eq!(rank_range(0, -1, 3), Some((0, 3)));
        assert_eq!(rank_range(-100, 1, 3), Some((0, 2)));
        assert_eq!(rank_range(2, 1, 3), None);
        assert_eq!(limit_span(2, 10, 1, 3, false), Some((3, 6)));
        assert_eq!(limit_span(2, 10, 1, 3, true), Some((6, 9)));
        assert_eq!(limit_span(2, 10, -1, 3, false), None);
        assert_eq!(limit_span(2, 10, 0, -1, true), Some((2, 10)));
    }

    #[test]
    fn counted_key_positions() {
        assert_eq!(
            keys_after_count(&b(&["zunion", "2", "a", "b", "weights"])),
            vec![2, 3]
        );
        assert!(keys_after_count(&b(&["zunion", "3", "a", "b"])).is_empty());
        assert_eq!(
            keys_store_after_count(&b(&["zunionstore", "d", "1", "a"])),
            vec![1, 3]
        );
        assert_eq!(keys_zmpop(&b(&["zmpop", "2", "a", "b", "min"])), vec![2, 3]);
        assert!(keys_zmpop(&b(&["zmpop", "2", "a", "b"])).is_empty());
    }

    #[test]
    fn element_text_of_a_listpack_score() {
        let mut lp = listpack::new();
        lp_insert(&mut lp, b"a", 1.5);
        let items: Vec<Vec<u8>> = listpack::iter(&lp).map(|(_, e)| e.to_vec()).collect();
        assert_eq!(items, vec![b"a".to_vec(), b"1.5".to_vec()]);
        assert!(matches!(
            listpack::get(&lp, listpack::first(&lp)).map(|x| x.0),
            Some(Element::Str(_))
        ));
    }
}

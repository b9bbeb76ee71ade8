//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LINSERT LREM
//! LTRIM LPOS LMOVE RPOPLPUSH LMPOP, as Redis 7.0 answers them (argument checks in Redis'
//! order, RESP2/RESP3 nil shapes, an emptied list deleted). A list is a packed block while it
//! has one node and a [`QuickList`] past that (`shard::list`). The steps that multi-key
//! commands take on one key (pop, push, type check) are public so that a cross-shard run
//! (`server::txn_collections`) takes the same steps on each key's shard.
//!
//! Never: leaves an empty list stored, or builds a reply larger than the list it reads.

use bytes::Bytes;

use super::args::*;
use super::collection::{self, Coll};
use super::Ctx;
use crate::notify;
use crate::protocol::Reply;
use crate::shard::list::{clamp_fill, list_value, QuickList};
use crate::shard::listpack::Element;
use crate::shard::{ObjectType, Value, ValueRef};

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// LEFT or RIGHT, or a syntax error.
pub fn parse_end(arg: &[u8]) -> Result<End, Reply> {
    if is(arg, "LEFT") {
        Ok(End::Left)
    } else if is(arg, "RIGHT") {
        Ok(End::Right)
    } else {
        Err(err(ERR_SYNTAX))
    }
}

/// Bulk replies of elements that `visit` hands over: their bytes go into one buffer that
/// every reply string shares (one allocation for the lot, not one per element).
fn shared_bulks(n: usize, visit: impl FnOnce(&mut dyn FnMut(Element<'_>))) -> Reply {
    use std::io::Write;
    let mut buf = Vec::with_capacity(n * 16);
    let mut ends = Vec::with_capacity(n);
    visit(&mut |e| {
        match e {
            // Writing to a Vec cannot fail.
            Element::Int(v) => {
                let _ = write!(buf, "{v}");
            }
            Element::Str(s) => buf.extend_from_slice(s),
        }
        ends.push(buf.len());
    });
    let buf = Bytes::from(buf);
    let mut from = 0;
    Reply::Array(
        ends.into_iter()
            .map(|to| {
                let b = buf.slice(from..to);
                from = to;
                Reply::Bulk(b)
            })
            .collect(),
    )
}

fn fill(ctx: &Ctx) -> i32 {
    clamp_fill(ctx.shard.settings.list_max_listpack_size())
}

/// Redis' getPositiveLongFromObjectOrReply: `msg` (or its own words) for a bad value.
fn positive(arg: &[u8], msg: Option<&str>) -> Result<i64, Reply> {
    let bad = || err(msg.unwrap_or("ERR value is out of range, must be positive"));
    match parse_i64(arg) {
        Some(v) if v >= 0 => Ok(v),
        _ => Err(bad()),
    }
}

/// Redis' getLongFromObjectOrReply.
fn long(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(|| err(ERR_NOT_INT))
}

/// Runs `f` on the list at `key` for reading; None when the key is missing.
fn read<R>(ctx: &mut Ctx, key: &[u8], f: impl FnOnce(&QuickList) -> R) -> Result<Option<R>, Reply> {
    let fill = fill(ctx);
    match collection::read(ctx, key, ObjectType::List)? {
        None => Ok(None),
        Some(Coll::Packed(b)) => {
            let ql = QuickList::from_listpacks(fill, std::iter::once(b.to_vec()));
            Ok(Some(f(&ql)))
        }
        Some(Coll::Object(o)) => match collection::object_as::<QuickList>(o) {
            Some(ql) => Ok(Some(f(ql))),
            None => Err(collection::unknown_layout()),
        },
    }
}

/// Runs `f` on the list at `key` for changing it; a missing key gets a new empty list when
/// `create` (stored only if `f` leaves elements in it), else None. A list `f` empties is
/// deleted.
fn modify<R>(
    ctx: &mut Ctx,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut QuickList) -> R,
) -> Result<Option<R>, Reply> {
    let fill = fill(ctx);
    let (r, empty) = match collection::write(ctx, key, ObjectType::List)? {
        Some(e) => match e.value() {
            ValueRef::Packed(_, b) => {
                let mut ql = QuickList::from_listpacks(fill, std::iter::once(b.to_vec()));
                let r = f(&mut ql);
                let empty = ql.is_empty();
                if !empty {
                    ql.settle();
                    collection::put_back(e, list_value(ql));
                }
                (r, empty)
            }
            _ => {
                let Some(ql) = collection::object_mut::<QuickList>(e) else {
                    return Err(collection::unknown_layout());
                };
                let r = f(ql);
                ql.settle();
                let empty = ql.is_empty();
                if !empty && ql.node_count() == 1 {
                    let one = std::mem::replace(ql, QuickList::new(fill));
                    collection::put_back(e, list_value(one));
                }
                (r, empty)
            }
        },
        None if create => {
            let mut ql = QuickList::new(fill);
            let r = f(&mut ql);
            ql.settle();
            if !ql.is_empty() {
                ctx.shard.store(ctx.db, key, list_value(ql), 0);
            }
            return Ok(Some(r));
        }
        None => return Ok(None),
    };
    collection::remove_if_empty(ctx, key, empty);
    Ok(Some(r))
}

fn push_generic(ctx: &mut Ctx, args: &[Bytes], end: End, create: bool) -> Reply {
    let r = modify(ctx, &args[1], create, |ql| {
        for v in &args[2..] {
            match end {
                End::Left => ql.push_front(v),
                End::Right => ql.push_back(v),
            }
        }
        ql.len()
    });
    match r {
        Ok(Some(n)) => {
            ctx.notify(notify::LIST, push_event(end), &args[1]);
            Reply::Int(n as i64)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

/// The keyspace event of a push onto `end`.
pub fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

/// Reports a pop from `end` of the list at `key` (and `del` if it emptied the list).
pub fn popped(ctx: &mut Ctx, key: &[u8], end: End) {
    let event = match end {
        End::Left => "lpop",
        End::Right => "rpop",
    };
    collection::notify_change(ctx, notify::LIST, event, key);
}

pub fn lpush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push_generic(ctx, args, End::Left, true)
}

pub fn rpush(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push_generic(ctx, args, End::Right, true)
}

pub fn lpushx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push_generic(ctx, args, End::Left, false)
}

pub fn rpushx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    push_generic(ctx, args, End::Right, false)
}

/// Pops up to `count` elements from `end` of the list at `key` (None: no such key).
pub fn pop_n(
    ctx: &mut Ctx,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Vec<Bytes>>, Reply> {
    modify(ctx, key, false, |ql| {
        let n = count.min(ql.len());
        let mut out: Vec<Bytes> = Vec::with_capacity(n);
        match end {
            End::Left => ql.iter_from(0, true),
            End::Right => ql.iter_from(ql.len().saturating_sub(1), false),
        }
        .visit(n, |_, e| {
            out.push(Bytes::from(e.to_vec()));
            true
        });
        match end {
            End::Left => ql.trim(n, 0),
            End::Right => ql.trim(0, n),
        }
        out
    })
}

fn pop_generic(ctx: &mut Ctx, args: &[Bytes], end: End, name: &str) -> Reply {
    if args.len() > 3 {
        return super::wrong_args(name);
    }
    let count = match args.get(2) {
        None => None,
        Some(a) => match positive(a, None) {
            Ok(c) => Some(c as usize),
            Err(e) => return e,
        },
    };
    if count == Some(0) {
        // Redis answers an empty array for an existing list, the nil array for a missing key.
        return match collection::write(ctx, &args[1], ObjectType::List) {
            Ok(Some(_)) => Reply::Array(vec![]),
            Ok(None) => Reply::NilArray,
            Err(e) => e,
        };
    }
    match pop_n(ctx, &args[1], end, count.unwrap_or(1)) {
        Err(e) => e,
        Ok(None) if count.is_some() => Reply::NilArray,
        Ok(None) => Reply::Nil,
        Ok(Some(mut v)) => {
            if !v.is_empty() {
                popped(ctx, &args[1], end);
            }
            match count {
                Some(_) => Reply::Array(v.into_iter().map(Reply::Bulk).collect()),
                None => v.pop().map_or(Reply::Nil, Reply::Bulk),
            }
        }
    }
}

pub fn lpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    pop_generic(ctx, args, End::Left, "lpop")
}

pub fn rpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    pop_generic(ctx, args, End::Right, "rpop")
}

pub fn llen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let n = match collection::read(ctx, &args[1], ObjectType::List) {
        Err(e) => return e,
        Ok(None) => 0,
        Ok(Some(Coll::Packed(b))) => crate::shard::listpack::len(b),
        Ok(Some(Coll::Object(o))) => match collection::object_as::<QuickList>(o) {
            Some(ql) => ql.len(),
            None => return collection::unknown_layout(),
        },
    };
    Reply::Int(n as i64)
}

/// A list index (negative from the end) as a position, None when outside the list.
fn position(index: i64, len: usize) -> Option<usize> {
    let i = if index < 0 {
        (len as i64).checked_add(index)?
    } else {
        index
    };
    (i >= 0 && (i as usize) < len).then_some(i as usize)
}

pub fn lindex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let index = parse_i64(&args[2]);
    let r = read(ctx, &args[1], |ql| {
        let index = index.ok_or_else(|| err(ERR_NOT_INT))?;
        Ok(position(index, ql.len())
            .and_then(|i| ql.get(i))
            .map_or(Reply::Nil, |v| Reply::Bulk(Bytes::from(v))))
    });
    match r {
        Ok(Some(Ok(r))) | Ok(Some(Err(r))) => r,
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

pub fn lset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let index = parse_i64(&args[2]);
    let r = modify(ctx, &args[1], false, |ql| {
        let index = index.ok_or_else(|| err(ERR_NOT_INT))?;
        match position(index, ql.len()) {
            Some(i) if ql.set(i, &args[3]) => Ok(Reply::Ok),
            _ => Err(err("ERR index out of range")),
        }
    });
    if let Ok(Some(Ok(_))) = r {
        ctx.notify(notify::LIST, "lset", &args[1]);
    }
    match r {
        Ok(Some(Ok(r))) | Ok(Some(Err(r))) => r,
        Ok(None) => err(ERR_NO_KEY),
        Err(e) => e,
    }
}

pub fn lrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (start, end) = match (long(&args[2]), long(&args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let r = read(ctx, &args[1], |ql| match clip(start, end, ql.len()) {
        None => Reply::Array(vec![]),
        Some((s, e)) => shared_bulks(e + 1 - s, |f| {
            ql.iter_from(s, true).visit(e + 1 - s, |_, el| {
                f(el);
                true
            })
        }),
    });
    match r {
        Ok(Some(r)) => r,
        Ok(None) => Reply::Array(vec![]),
        Err(e) => e,
    }
}

pub fn ltrim(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (start, end) = match (long(&args[2]), long(&args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let r = modify(ctx, &args[1], false, |ql| {
        let len = ql.len();
        match clip(start, end, len) {
            None => ql.trim(len, 0),
            Some((s, e)) => ql.trim(s, len - e - 1),
        }
        len != ql.len()
    });
    match r {
        Ok(Some(trimmed)) => {
            // Redis signals an LTRIM that trimmed nothing, and counts no change for it.
            let dirty = ctx.shard.dirty;
            collection::notify_change(ctx, notify::LIST, "ltrim", &args[1]);
            if !trimmed {
                ctx.shard.dirty = dirty;
            }
            Reply::Ok
        }
        Ok(None) => Reply::Ok,
        Err(e) => e,
    }
}

pub fn linsert(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let after = if is(&args[2], "AFTER") {
        true
    } else if is(&args[2], "BEFORE") {
        false
    } else {
        return err(ERR_SYNTAX);
    };
    let (pivot, v) = (&args[3], &args[4]);
    let r = modify(ctx, &args[1], false, |ql| {
        let mut at = None;
        ql.iter_from(0, true).visit(ql.len(), |i, e| {
            if e.eq_bytes(pivot) {
                at = Some(i);
            }
            at.is_none()
        });
        match at {
            Some(i) => {
                ql.insert(i, v, after);
                ql.len() as i64
            }
            None => -1,
        }
    });
    match r {
        Ok(Some(n)) => {
            if n > 0 {
                ctx.notify(notify::LIST, "linsert", &args[1]);
            }
            Reply::Int(n)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

pub fn lrem(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let count = match long(&args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let forward = count >= 0;
    let limit = count.unsigned_abs().min(usize::MAX as u64) as usize;
    let r = modify(ctx, &args[1], false, |ql| {
        ql.remove_matching(&args[3], limit, forward)
    });
    match r {
        Ok(Some(n)) => {
            if n > 0 {
                collection::notify_change(ctx, notify::LIST, "lrem", &args[1]);
            }
            Reply::Int(n as i64)
        }
        Ok(None) => Reply::Int(0),
        Err(e) => e,
    }
}

pub fn lpos(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if is(&args[j], "RANK") && more {
            j += 1;
            rank = match long(&args[j]) {
                Ok(r) => r,
                Err(e) => return e,
            };
            if rank == 0 {
                return err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list");
            }
        } else if is(&args[j], "COUNT") && more {
            j += 1;
            count = match positive(&args[j], Some("ERR COUNT can't be negative")) {
                Ok(c) => Some(c),
                Err(e) => return e,
            };
        } else if is(&args[j], "MAXLEN") && more {
            j += 1;
            maxlen = match positive(&args[j], Some("ERR MAXLEN can't be negative")) {
                Ok(m) => m,
                Err(e) => return e,
            };
        } else {
            return err(ERR_SYNTAX);
        }
        j += 1;
    }
    let forward = rank > 0;
    // Redis negates a negative rank; the most negative one stays as large as it gets.
    let rank = rank.checked_abs().unwrap_or(i64::MAX) as u64;
    let ele = &args[2];
    let r = read(ctx, &args[1], |ql| {
        let len = ql.len();
        let start = if forward { 0 } else { len.saturating_sub(1) };
        let scan = if maxlen == 0 {
            len
        } else {
            (maxlen as usize).min(len)
        };
        let mut matches = 0u64;
        let mut found = Vec::new();
        ql.iter_from(start, forward).visit(scan, |index, e| {
            if !e.eq_bytes(ele) {
                return true;
            }
            matches += 1;
            if matches >= rank {
                let at = if forward { index } else { len - index - 1 };
                found.push(at as i64);
                match count {
                    None => return false,
                    Some(c) if c != 0 && matches - rank + 1 >= c as u64 => return false,
                    Some(_) => {}
                }
            }
            true
        });
        found
    });
    let found = match r {
        Ok(Some(f)) => f,
        Ok(None) => Vec::new(),
        Err(e) => return e,
    };
    match count {
        Some(_) => Reply::Array(found.into_iter().map(Reply::Int).collect()),
        None => found.first().map_or(Reply::Nil, |&i| Reply::Int(i)),
    }
}

/// WRONGTYPE when `key` holds something other than a list (a missing key is fine).
pub fn check_list(ctx: &mut Ctx, key: &[u8]) -> Result<(), Reply> {
    collection::write(ctx, key, ObjectType::List).map(|_| ())
}

/// LMOVE's source step: the list at `key` exists (Ok(true)), is missing (Ok(false)), or
/// holds another type.
pub fn list_exists(ctx: &mut Ctx, key: &[u8]) -> Result<bool, Reply> {
    collection::write(ctx, key, ObjectType::List).map(|e| e.is_some())
}

/// Pushes one element onto `end` of the list at `key`, creating it.
pub fn push_one(ctx: &mut Ctx, key: &[u8], end: End, v: &[u8]) -> Result<(), Reply> {
    modify(ctx, key, true, |ql| match end {
        End::Left => ql.push_front(v),
        End::Right => ql.push_back(v),
    })?;
    ctx.notify(notify::LIST, push_event(end), key);
    Ok(())
}

/// LMOVE's and RPOPLPUSH's arguments: (source end, destination end).
pub fn lmove_ends(args: &[Bytes]) -> Result<(End, End), Reply> {
    if args.len() == 3 {
        return Ok((End::Right, End::Left));
    }
    Ok((parse_end(&args[3])?, parse_end(&args[4])?))
}

/// LMOVE and RPOPLPUSH with both keys on this shard.
pub fn lmove(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (from, to) = match lmove_ends(args) {
        Ok(e) => e,
        Err(e) => return e,
    };
    let (src, dst) = (&args[1], &args[2]);
    match list_exists(ctx, src) {
        Ok(true) => {}
        Ok(false) => return Reply::Nil,
        Err(e) => return e,
    }
    if let Err(e) = check_list(ctx, dst) {
        return e;
    }
    if src == dst {
        // Popped and pushed on one list: it is never empty in between.
        let r = modify(ctx, src, false, |ql| {
            let v = match from {
                End::Left => ql.pop_front(),
                End::Right => ql.pop_back(),
            }?;
            match to {
                End::Left => ql.push_front(&v),
                End::Right => ql.push_back(&v),
            }
            Some(v)
        });
        return match r {
            Ok(Some(Some(v))) => {
                ctx.notify(notify::LIST, push_event(to), dst);
                popped(ctx, src, from);
                Reply::Bulk(Bytes::from(v))
            }
            Ok(_) => Reply::Nil,
            Err(e) => e,
        };
    }
    let v = match pop_n(ctx, src, from, 1) {
        Ok(Some(mut v)) => match v.pop() {
            Some(v) => v,
            None => return Reply::Nil,
        },
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    match push_one(ctx, dst, to, &v) {
        Ok(()) => {
            popped(ctx, src, from);
            Reply::Bulk(v)
        }
        Err(e) => e,
    }
}

/// LMPOP's arguments: (keys, end, count).
pub fn lmpop_args(args: &[Bytes]) -> Result<(Vec<Bytes>, End, usize), Reply> {
    let numkeys = match parse_i64(&args[1]) {
        Some(n) if n >= 1 => n as u64,
        _ => return Err(err("ERR numkeys should be greater than 0")),
    };
    let where_idx = 2u64.saturating_add(numkeys);
    if where_idx >= args.len() as u64 {
        return Err(err(ERR_SYNTAX));
    }
    let where_idx = where_idx as usize;
    let end = parse_end(&args[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "COUNT") && j + 1 < args.len() {
            j += 1;
            count = match parse_i64(&args[j]) {
                Some(c) if c >= 1 => Some(c as usize),
                _ => return Err(err("ERR count should be greater than 0")),
            };
        } else {
            return Err(err(ERR_SYNTAX));
        }
        j += 1;
    }
    Ok((args[2..where_idx].to_vec(), end, count.unwrap_or(1)))
}

/// LMPOP's step on one key: `[key, [elements]]` when the key holds a list, None when it is
/// missing.
pub fn mpop_one(
    ctx: &mut Ctx,
    key: &Bytes,
    end: End,
    count: usize,
) -> Result<Option<Reply>, Reply> {
    let v = pop_n(ctx, key, end, count)?;
    if v.as_ref().is_some_and(|v| !v.is_empty()) {
        popped(ctx, key, end);
    }
    Ok(v.map(|v| {
        Reply::Array(vec![
            Reply::Bulk(key.clone()),
            Reply::Array(v.into_iter().map(Reply::Bulk).collect()),
        ])
    }))
}

/// LMPOP with every key on this shard.
pub fn lmpop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (keys, end, count) = match lmpop_args(args) {
        Ok(a) => a,
        Err(e) => return e,
    };
    for k in &keys {
        match mpop_one(ctx, k, end, count) {
            Ok(Some(r)) => return r,
            Ok(None) => {}
            Err(e) => return e,
        }
    }
    Reply::NilArray
}

/// A list value built from elements (tests and tools).
pub fn list_of(fill: i32, elements: &[&[u8]]) -> Value {
    let mut ql = QuickList::new(fill);
    for e in elements {
        ql.push_back(e);
    }
    list_value(ql)
}

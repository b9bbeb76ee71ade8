//! The hash family: HSET HSETNX HGET HMGET HMSET HDEL HEXISTS HLEN HSTRLEN HKEYS HVALS HGETALL
//! HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN, and per-field expiry as Redis 7.4 has it (HEXPIRE
//! HPEXPIRE HEXPIREAT HPEXPIREAT HTTL HPTTL HEXPIRETIME HPEXPIRETIME HPERSIST). Replies, errors
//! and encoding conversions follow Redis byte for byte; the forms themselves live in
//! `shard::hashform`.
//!
//! Before any command touches a hash, its expired fields are removed (and the key when none is
//! left), so no reply ever shows an expired field.
//!
//! Never: leaves an empty hash stored, or builds a reply larger than the hash or a bounded
//! count asks for.

use bytes::Bytes;

use super::args::{err, int_arg, is, parse_cursor, parse_i64, ERR_NOT_INT, ERR_SYNTAX};
use super::collection::check_type;
use super::Ctx;
use crate::notify;
use crate::protocol::Reply;
use crate::shard::hashform::{HashForm, HashRef, OwnedField};
use crate::shard::object::{packed_bytes, PackLimits};
use crate::shard::{ObjectType, ValueRef};

/// Most elements HRANDFIELD with a negative count answers (Redis would try to build any
/// size; a bound keeps one request from growing memory without limit).
const RANDFIELD_MAX: u64 = 1 << 24;
/// Field expiries must stay below this (ms): Redis 7.4's `HFE_MAX_ABS_TIME_MSEC`.
const MAX_FIELD_EXPIRE_MS: i64 = (1 << 46) - 1;

fn limits(ctx: &Ctx) -> PackLimits {
    PackLimits::from_settings(&ctx.shard.settings)
}

/// Removes the expired fields of the hash at `key` (and the key when none is left), firing
/// Redis 7.4's `hexpired` (and `del`) events.
fn sweep(ctx: &mut Ctx, key: &[u8]) {
    if ctx.shard.has_field_expiries() && ctx.shard.field_expiry_due(ctx.db, key, ctx.now) {
        ctx.shard.expire_fields(ctx.db, key, ctx.now);
    }
}

/// Runs `f` on the hash at `key` for reading: None when the key is missing, WRONGTYPE when
/// it holds another type.
fn read<R>(
    ctx: &mut Ctx,
    key: &[u8],
    f: impl FnOnce(HashRef<'_>) -> R,
) -> Result<Option<R>, Reply> {
    sweep(ctx, key);
    let Some(e) = ctx.shard.lookup(ctx.db, key, ctx.now) else {
        return Ok(None);
    };
    check_type(e, ObjectType::Hash)?;
    let plain;
    let h = match e.value() {
        ValueRef::Packed(kind, b) => {
            plain = packed_bytes(kind, b);
            HashRef::from_packed(kind.plain(), &plain)
        }
        ValueRef::Object(o) => HashRef::from_object(o),
        _ => None,
    };
    match h {
        Some(h) => Ok(Some(f(h))),
        None => Err(super::collection::unknown_layout()),
    }
}

/// Runs `f` on the hash at `key` for changing it: a missing key is an empty hash when
/// `create` (stored if `f` leaves a field), None otherwise. A hash left empty is deleted.
fn write<R>(
    ctx: &mut Ctx,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut HashForm) -> Result<R, Reply>,
) -> Result<Option<R>, Reply> {
    sweep(ctx, key);
    let (db, now) = (ctx.db, ctx.now);
    let Some(e) = ctx.shard.lookup_mut(db, key, now) else {
        if !create {
            return Ok(None);
        }
        let mut h = HashForm::new();
        let r = f(&mut h)?;
        if !h.is_empty() {
            // Storing it notes a field expiry for the sweep.
            ctx.shard.store(db, key, h.into_value(), 0);
        }
        return Ok(Some(r));
    };
    check_type(e, ObjectType::Hash)?;
    let Some(mut h) = HashForm::take(e) else {
        return Err(super::collection::unknown_layout());
    };
    let r = f(&mut h);
    let (empty, expiring) = (h.is_empty(), h.as_ref().min_expire_bound());
    h.put(e);
    if empty {
        ctx.shard.remove(db, key);
    } else if let Some(at) = expiring {
        ctx.shard.note_field_expiry(db, key, at);
    }
    r.map(Some)
}

fn bulk(v: Vec<u8>) -> Reply {
    Reply::Bulk(Bytes::from(v))
}

fn arity(name: &str) -> Reply {
    super::wrong_args(name)
}

/// HSET key field value [field value ...]
pub fn hset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    hset_generic(ctx, args, "hset").map_or_else(|e| e, Reply::Int)
}

/// HMSET key field value [field value ...]
pub fn hmset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    hset_generic(ctx, args, "hmset").map_or_else(|e| e, |_| Reply::Ok)
}

fn hset_generic(ctx: &mut Ctx, args: &[Bytes], name: &str) -> Result<i64, Reply> {
    if args.len() % 2 == 1 {
        return Err(arity(name));
    }
    let l = limits(ctx);
    let pairs = &args[2..];
    let r = write(ctx, &args[1], true, |h| {
        h.convert_for(pairs.iter().map(|a| a.len()), &l);
        let mut added = 0;
        for p in pairs.chunks_exact(2) {
            added += i64::from(h.set(&p[0], &p[1], false, &l));
        }
        Ok(added)
    })?;
    ctx.notify(notify::HASH, "hset", &args[1]);
    Ok(r.unwrap_or(0))
}

/// HSETNX key field value
pub fn hsetnx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let l = limits(ctx);
    let r = write(ctx, &args[1], true, |h| {
        if h.as_ref().get(&args[2]).is_some() {
            return Ok(0);
        }
        h.convert_for([args[2].len(), args[3].len()], &l);
        h.set(&args[2], &args[3], false, &l);
        Ok(1)
    });
    if matches!(r, Ok(Some(1))) {
        ctx.notify(notify::HASH, "hset", &args[1]);
    }
    match r {
        Ok(v) => Reply::Int(v.unwrap_or(0)),
        Err(e) => e,
    }
}

/// HGET key field
pub fn hget(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1], |h| h.get(&args[2])) {
        Ok(Some(Some((v, _)))) => bulk(v),
        Ok(_) => Reply::Nil,
        Err(e) => e,
    }
}

/// HMGET key field [field ...]
pub fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let fields = &args[2..];
    match read(ctx, &args[1], |h| {
        fields
            .iter()
            .map(|f| h.get(f).map_or(Reply::Nil, |(v, _)| bulk(v)))
            .collect::<Vec<_>>()
    }) {
        Ok(Some(v)) => Reply::Array(v),
        Ok(None) => Reply::Array(fields.iter().map(|_| Reply::Nil).collect()),
        Err(e) => e,
    }
}

/// HDEL key field [field ...]
pub fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let r = write(ctx, &args[1], false, |h| {
        Ok(args[2..].iter().filter(|f| h.remove(f)).count() as i64)
    });
    if matches!(r, Ok(Some(n)) if n > 0) {
        super::collection::notify_change(ctx, notify::HASH, "hdel", &args[1]);
    }
    match r {
        Ok(v) => Reply::Int(v.unwrap_or(0)),
        Err(e) => e,
    }
}

/// HEXISTS key field
pub fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1], |h| h.value_len(&args[2]).is_some()) {
        Ok(Some(true)) => Reply::Int(1),
        Ok(_) => Reply::Int(0),
        Err(e) => e,
    }
}

/// HLEN key
pub fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1], |h| h.len()) {
        Ok(n) => Reply::Int(n.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

/// HSTRLEN key field
pub fn hstrlen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1], |h| h.value_len(&args[2])) {
        Ok(n) => Reply::Int(n.flatten().unwrap_or(0) as i64),
        Err(e) => e,
    }
}

fn all_fields(ctx: &mut Ctx, key: &[u8]) -> Result<Vec<OwnedField>, Reply> {
    Ok(read(ctx, key, |h| h.fields())?.unwrap_or_default())
}

/// HKEYS key
pub fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match all_fields(ctx, &args[1]) {
        Ok(f) => Reply::Array(f.into_iter().map(|f| bulk(f.name)).collect()),
        Err(e) => e,
    }
}

/// HVALS key
pub fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match all_fields(ctx, &args[1]) {
        Ok(f) => Reply::Array(f.into_iter().map(|f| bulk(f.value)).collect()),
        Err(e) => e,
    }
}

/// HGETALL key
pub fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match all_fields(ctx, &args[1]) {
        Ok(f) => Reply::Map(
            f.into_iter()
                .map(|f| (bulk(f.name), bulk(f.value)))
                .collect(),
        ),
        Err(e) => e,
    }
}

/// HINCRBY key field increment
pub fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let by = match int_arg(&args[3]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let l = limits(ctx);
    let r = write(ctx, &args[1], true, |h| {
        let cur = match h.as_ref().get(&args[2]) {
            Some((v, _)) => parse_i64(&v).ok_or_else(|| err("ERR hash value is not an integer"))?,
            None => 0,
        };
        let new = cur
            .checked_add(by)
            .ok_or_else(|| err("ERR increment or decrement would overflow"))?;
        h.set(&args[2], new.to_string().as_bytes(), true, &l);
        Ok(new)
    });
    if r.is_ok() {
        ctx.notify(notify::HASH, "hincrby", &args[1]);
    }
    match r {
        Ok(v) => Reply::Int(v.unwrap_or(0)),
        Err(e) => e,
    }
}

/// HINCRBYFLOAT key field increment
pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match super::string::add_long_double(None, &args[3]) {
        Ok(_) => {}
        Err(Reply::Error(e)) if e.contains("NaN or Infinity") => {
            return err("ERR value is NaN or Infinity")
        }
        Err(e) => return e,
    }
    let l = limits(ctx);
    let r = write(ctx, &args[1], true, |h| {
        let cur = h.as_ref().get(&args[2]).map(|(v, _)| v);
        // Redis reads the value as a C string: a NUL inside makes it no float.
        if cur.as_ref().is_some_and(|v| v.contains(&0)) {
            return Err(err("ERR hash value is not a float"));
        }
        let new =
            match super::string::add_long_double(Some(cur.as_deref().unwrap_or(b"0")), &args[3]) {
                Ok(v) => v,
                Err(Reply::Error(e)) if e.contains("not a valid float") => {
                    return Err(err("ERR hash value is not a float"))
                }
                Err(e) => return Err(e),
            };
        h.set(&args[2], &new, true, &l);
        Ok(new)
    });
    if r.is_ok() {
        ctx.notify(notify::HASH, "hincrbyfloat", &args[1]);
    }
    match r {
        Ok(Some(v)) => bulk(v),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

/// HRANDFIELD key [count [WITHVALUES]]
pub fn hrandfield(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() == 2 {
        let fields = match read(ctx, &args[1], |h| h.fields()) {
            Ok(Some(f)) => f,
            Ok(None) => return Reply::Nil,
            Err(e) => return e,
        };
        let i = ctx.shard.rand_below(fields.len());
        return fields
            .into_iter()
            .nth(i)
            .map_or(Reply::Nil, |f| bulk(f.name));
    }
    let count = match parse_i64(&args[2]) {
        Some(i64::MIN) => {
            return err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
        }
        Some(v) => v,
        None => return err(ERR_NOT_INT),
    };
    let withvalues = match args.len() {
        3 => false,
        4 if is(&args[3], "withvalues") => true,
        _ => return err(ERR_SYNTAX),
    };
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return err("ERR value is out of range");
    }
    if count < 0 && count.unsigned_abs() > RANDFIELD_MAX {
        return err("ERR value is out of range");
    }
    let mut fields = match read(ctx, &args[1], |h| h.fields()) {
        Ok(Some(f)) => f,
        Ok(None) => return Reply::Array(Vec::new()),
        Err(e) => return e,
    };
    if count == 0 || fields.is_empty() {
        return Reply::Array(Vec::new());
    }
    let picked: Vec<OwnedField> = if count < 0 {
        (0..count.unsigned_abs())
            .map(|_| fields[ctx.shard.rand_below(fields.len())].clone())
            .collect()
    } else {
        let n = (count as u64).min(fields.len() as u64) as usize;
        // A partial Fisher-Yates shuffle: n distinct fields in random order.
        for i in 0..n {
            let j = i + ctx.shard.rand_below(fields.len() - i);
            fields.swap(i, j);
        }
        fields.truncate(n);
        fields
    };
    if withvalues {
        Reply::Pairs(
            picked
                .into_iter()
                .map(|f| (bulk(f.name), bulk(f.value)))
                .collect(),
        )
    } else {
        Reply::Array(picked.into_iter().map(|f| bulk(f.name)).collect())
    }
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]
pub fn hscan(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(cursor) = parse_cursor(&args[2]) else {
        return err("ERR invalid cursor");
    };
    let (mut pattern, mut count, mut novalues) = (None, 10usize, false);
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - i - 1;
        if is(&args[i], "count") && more >= 1 {
            match parse_i64(&args[i + 1]) {
                Some(c) if c >= 1 => count = c as usize,
                Some(_) => return err(ERR_SYNTAX),
                None => return err(ERR_NOT_INT),
            }
            i += 2;
        } else if is(&args[i], "match") && more >= 1 {
            pattern = Some(args[i + 1].clone());
            i += 2;
        } else if is(&args[i], "novalues") {
            novalues = true;
            i += 1;
        } else {
            return err(ERR_SYNTAX);
        }
    }
    let r = read(ctx, &args[1], |h| match h {
        HashRef::Small(..) => (0, h.fields()),
        HashRef::Large(l) => {
            let mut out = Vec::new();
            let next = l.scan(cursor, count, &mut out);
            let fields = out
                .into_iter()
                .map(|f| OwnedField {
                    name: f.name.to_vec(),
                    value: f.value.to_vec(),
                    expire_at: f.expire_at,
                })
                .collect();
            (next, fields)
        }
    });
    let (next, fields) = match r {
        Ok(Some(v)) => v,
        Ok(None) => (0, Vec::new()),
        Err(e) => return e,
    };
    let mut items = Vec::new();
    for f in fields {
        if let Some(p) = &pattern {
            // "*" matches everything: Redis skips the match then.
            if &p[..] != b"*" && !crate::glob::matches(p, &f.name, false) {
                continue;
            }
        }
        items.push(bulk(f.name));
        if !novalues {
            items.push(bulk(f.value));
        }
    }
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(next.to_string())),
        Reply::Array(items),
    ])
}

/// Where `FIELDS numfields field...` starts and the fields, or Redis 7.4's errors.
fn fields_arg<'a>(args: &'a [Bytes], at: usize, count_msg: &str) -> Result<&'a [Bytes], Reply> {
    if args.get(at).is_none_or(|a| !is(a, "fields")) {
        return Err(err(
            "ERR Mandatory argument FIELDS is missing or not at the right position",
        ));
    }
    let n = args
        .get(at + 1)
        .and_then(|a| parse_i64(a))
        .filter(|&n| n >= 1)
        .ok_or_else(|| err(&format!("ERR {count_msg}")))?;
    let fields = &args[(at + 2).min(args.len())..];
    if n as u64 != fields.len() as u64 {
        return Err(err(
            "ERR The `numfields` parameter must match the number of arguments",
        ));
    }
    Ok(fields)
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT key time [NX|XX|GT|LT] FIELDS numfields field...
fn hexpire_generic(
    ctx: &mut Ctx,
    args: &[Bytes],
    unit_ms: i64,
    absolute: bool,
    name: &str,
) -> Reply {
    // The key's type first, as Redis looks it up before parsing.
    if let Err(e) = read(ctx, &args[1], |_| ()) {
        return e;
    }
    let Some(mut t) = parse_i64(&args[2]) else {
        return err(ERR_NOT_INT);
    };
    if t < 0 {
        return err("ERR invalid expire time, must be >= 0");
    }
    let bad_time = || err(&format!("ERR invalid expire time in '{name}' command"));
    if unit_ms == 1000 {
        if t > MAX_FIELD_EXPIRE_MS / 1000 {
            return bad_time();
        }
        t *= 1000;
    }
    let base = if absolute { 0 } else { ctx.now as i64 };
    if t > MAX_FIELD_EXPIRE_MS - base {
        return bad_time();
    }
    let at = (t + base) as u64;
    let cond = args
        .get(3)
        .and_then(|a| ["nx", "xx", "gt", "lt"].into_iter().find(|c| is(a, c)));
    let fields_at = if cond.is_some() { 4 } else { 3 };
    let fields = match fields_arg(
        args,
        fields_at,
        "Parameter `numFields` should be greater than 0",
    ) {
        Ok(f) => f,
        Err(e) => return e,
    };
    let now = ctx.now;
    let r = write(ctx, &args[1], false, |h| {
        let mut out = Vec::with_capacity(fields.len());
        for f in fields {
            let Some((_, prev)) = h.as_ref().get(f) else {
                out.push(Reply::Int(-2));
                continue;
            };
            let met = match (cond, prev) {
                (Some("xx") | Some("gt"), None) => false,
                (_, None) => true,
                (Some("nx"), Some(_)) => false,
                (Some("gt"), Some(p)) => at > p,
                (Some("lt"), Some(p)) => at < p,
                (_, Some(_)) => true,
            };
            if !met {
                out.push(Reply::Int(0));
            } else if at <= now {
                h.remove(f);
                out.push(Reply::Int(2));
            } else {
                h.set_expire(f, Some(at));
                out.push(Reply::Int(1));
            }
        }
        Ok(out)
    });
    // Redis 7.4's events: `hdel` when a field went, else `hexpire`; none when nothing changed.
    if let Ok(Some(v)) = &r {
        let event = if v.contains(&Reply::Int(2)) {
            Some("hdel")
        } else if v.contains(&Reply::Int(1)) {
            Some("hexpire")
        } else {
            None
        };
        if let Some(event) = event {
            super::collection::notify_change(ctx, notify::HASH, event, &args[1]);
        }
    }
    match r {
        Ok(Some(v)) => Reply::Array(v),
        Ok(None) => Reply::Array(fields.iter().map(|_| Reply::Int(-2)).collect()),
        Err(e) => e,
    }
}

pub fn hexpire(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    hexpire_generic(ctx, args, 1000, false, "hexpire")
}

pub fn hpexpire(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    hexpire_generic(ctx, args, 1, false, "hpexpire")
}

pub fn hexpireat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    hexpire_generic(ctx, args, 1000, true, "hexpireat")
}

pub fn hpexpireat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    hexpire_generic(ctx, args, 1, true, "hpexpireat")
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME key FIELDS numfields field...
fn httl_generic(ctx: &mut Ctx, args: &[Bytes], in_seconds: bool, absolute: bool) -> Reply {
    let fields = match read(ctx, &args[1], |_| ()) {
        Err(e) => return e,
        Ok(_) => match fields_arg(args, 2, "Number of fields must be a positive integer") {
            Ok(f) => f,
            Err(e) => return e,
        },
    };
    let base = if absolute { 0 } else { ctx.now };
    let r = read(ctx, &args[1], |h| {
        fields
            .iter()
            .map(|f| match h.get(f) {
                None => Reply::Int(-2),
                Some((_, None)) => Reply::Int(-1),
                Some((_, Some(at))) => {
                    let left = at.saturating_sub(base) as i64;
                    Reply::Int(if in_seconds {
                        (left + 999) / 1000
                    } else {
                        left
                    })
                }
            })
            .collect::<Vec<_>>()
    });
    match r {
        Ok(Some(v)) => Reply::Array(v),
        Ok(None) => Reply::Array(fields.iter().map(|_| Reply::Int(-2)).collect()),
        Err(e) => e,
    }
}

pub fn httl(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    httl_generic(ctx, args, true, false)
}

pub fn hpttl(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    httl_generic(ctx, args, false, false)
}

pub fn hexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    httl_generic(ctx, args, true, true)
}

pub fn hpexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    httl_generic(ctx, args, false, true)
}

/// HPERSIST key FIELDS numfields field...
pub fn hpersist(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if let Err(e) = read(ctx, &args[1], |_| ()) {
        return e;
    }
    let fields = match fields_arg(args, 2, "Number of fields must be a positive integer") {
        Ok(f) => f,
        Err(e) => return e,
    };
    let r = write(ctx, &args[1], false, |h| {
        Ok(fields
            .iter()
            .map(|f| match h.as_ref().get(f) {
                None => Reply::Int(-2),
                Some((_, None)) => Reply::Int(-1),
                Some((_, Some(_))) => {
                    h.set_expire(f, None);
                    Reply::Int(1)
                }
            })
            .collect::<Vec<_>>())
    });
    if matches!(&r, Ok(Some(v)) if v.contains(&Reply::Int(1))) {
        ctx.notify(notify::HASH, "hpersist", &args[1]);
    }
    match r {
        Ok(Some(v)) => Reply::Array(v),
        Ok(None) => Reply::Array(fields.iter().map(|_| Reply::Int(-2)).collect()),
        Err(e) => e,
    }
}

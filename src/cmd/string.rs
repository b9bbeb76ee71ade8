//! String commands: GET, SET and its variants, MGET/MSET, counters, ranges and LCS.
//!
//! Every function runs on the shard that owns its keys and returns a [`Reply`]. Values are
//! binary-safe; lengths are capped at proto-max-bulk-len so no command can build a string the
//! protocol could not send back.
//!
//! Never: reads an offloaded value itself (the dispatcher loads it first, `server::exec`).

use bytes::Bytes;

use super::args::*;
use super::Ctx;
use crate::notify;
use crate::protocol::{Reply, MAX_BULK_LEN};
use crate::shard::{CompactBytes, Entry, Value, ValueRef};

/// The string held by an entry, or WRONGTYPE.
pub fn as_str(e: &Entry) -> Result<&[u8], Reply> {
    match e.value() {
        ValueRef::Str(s) => Ok(s),
        // Commands that read values get them loaded before they run (server::exec); reaching
        // this means a command's table entry lacks READS_VALUE.
        ValueRef::External(_) => Err(err("ERR internal error: value on SSD was not loaded")),
        ValueRef::Packed(..) | ValueRef::Object(_) | ValueRef::Offloaded(..) => {
            Err(err(ERR_WRONGTYPE))
        }
    }
}

/// The string at `key` for a command that reads it (counting a hit or miss): None when
/// missing, WRONGTYPE when the key holds another type.
pub fn lookup_str<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Result<Option<&'c [u8]>, Reply> {
    ctx.shard
        .lookup(ctx.db, key, ctx.now)
        .map(as_str)
        .transpose()
}

/// Reads a string key (counting a hit or miss); None when missing.
fn read(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Bytes>, Reply> {
    Ok(lookup_str(ctx, key)?.map(Bytes::copy_from_slice))
}

pub fn get(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1]) {
        Ok(Some(v)) => Reply::Bulk(v),
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

/// Options of SET and GETEX, parsed as Redis does: an option may repeat, conflicting ones are
/// a syntax error, and the expiry value is checked only after every option parsed.
#[derive(Default)]
struct ExtOpts<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// (unit in ms, absolute, raw value) of EX/PX/EXAT/PXAT.
    expire: Option<(i64, bool, &'a Bytes)>,
}

fn parse_ext<'a>(args: &'a [Bytes], start: usize, is_set: bool) -> Result<ExtOpts<'a>, Reply> {
    let mut o = ExtOpts::default();
    let mut kind: Option<&str> = None;
    let mut c = ArgCursor::new(args, start);
    while let Some(a) = c.peek() {
        let exp_kind = ["EX", "PX", "EXAT", "PXAT"].into_iter().find(|k| is(a, k));
        if is_set && !o.xx && c.eat("NX") {
            o.nx = true;
        } else if is_set && !o.nx && c.eat("XX") {
            o.xx = true;
        } else if is_set && c.eat("GET") {
            o.get = true;
        } else if is_set && kind.is_none() && c.eat("KEEPTTL") {
            o.keepttl = true;
        } else if !is_set && kind.is_none() && c.eat("PERSIST") {
            o.persist = true;
        } else if let Some((k, v)) = exp_kind.and_then(|k| Some((k, c.eat_with_value(k)?))) {
            if o.keepttl || o.persist || kind.is_some_and(|prev| prev != k) {
                return Err(err(ERR_SYNTAX));
            }
            kind = Some(k);
            let unit = if k == "EX" || k == "EXAT" { 1000 } else { 1 };
            o.expire = Some((unit, k.ends_with("AT"), v));
        } else {
            break;
        }
    }
    c.finish()?;
    Ok(o)
}

/// The absolute expiry (ms) an EX/PX/EXAT/PXAT value asks for, with Redis' checks.
fn expire_at(
    ctx: &Ctx,
    (unit_ms, absolute, arg): (i64, bool, &Bytes),
    cmd: &str,
) -> Result<u64, Reply> {
    let invalid = || Reply::Error(format!("ERR invalid expire time in '{cmd}' command"));
    let v = int_arg(arg)?;
    if v <= 0 {
        return Err(invalid());
    }
    let ms = v.checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(ctx.now as i64).ok_or_else(invalid)?
    };
    Ok(at as u64)
}

pub fn set(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (key, val) = (&args[1], &args[2]);
    let o = match parse_ext(args, 3, true) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let at = match o.expire.map(|e| expire_at(ctx, e, "set")).transpose() {
        Ok(at) => at,
        Err(e) => return e,
    };
    if val.len() > MAX_BULK_LEN {
        return err(ERR_TOO_BIG);
    }
    // Look at the current value once: for NX/XX, GET and KEEPTTL.
    let (old, old_ttl) = match ctx.shard.lookup_mut_ttl(ctx.db, key, ctx.now) {
        None => (None, 0),
        Some((e, ttl)) => {
            if o.get {
                match as_str(e) {
                    Ok(s) => (Some(Some(Bytes::copy_from_slice(s))), ttl),
                    Err(e) => return e,
                }
            } else {
                (Some(None), ttl)
            }
        }
    };
    let exists = old.is_some();
    let ok = !(o.nx && exists || o.xx && !exists);
    if ok {
        let at = match at {
            Some(at) => at,
            None if o.keepttl => old_ttl,
            None => 0,
        };
        if at != 0 && at <= ctx.now {
            // Already expired: Redis deletes instead of storing.
            ctx.shard.remove(ctx.db, key);
        } else {
            ctx.shard.store(ctx.db, key, Value::str(val), at);
        }
        ctx.notify(notify::STRING, "set", key);
        if o.expire.is_some() {
            ctx.notify(notify::GENERIC, "expire", key);
        }
    }
    if o.get {
        return match old {
            Some(Some(v)) => Reply::Bulk(v),
            _ => Reply::Nil,
        };
    }
    if ok {
        Reply::Ok
    } else {
        Reply::Nil
    }
}

pub fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if ctx.shard.contains(ctx.db, &args[1], ctx.now) {
        return Reply::Int(0);
    }
    ctx.shard.store(ctx.db, &args[1], Value::str(&args[2]), 0);
    ctx.notify(notify::STRING, "set", &args[1]);
    Reply::Int(1)
}

fn set_with_ttl(ctx: &mut Ctx, args: &[Bytes], unit_ms: i64, cmd: &str) -> Reply {
    let at = match expire_at(ctx, (unit_ms, false, &args[2]), cmd) {
        Ok(at) => at,
        Err(e) => return e,
    };
    ctx.shard.store(ctx.db, &args[1], Value::str(&args[3]), at);
    ctx.notify(notify::STRING, "set", &args[1]);
    ctx.notify(notify::GENERIC, "expire", &args[1]);
    Reply::Ok
}

pub fn setex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    set_with_ttl(ctx, args, 1000, "setex")
}

pub fn psetex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    set_with_ttl(ctx, args, 1, "psetex")
}

pub fn getset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let old = match read(ctx, &args[1]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    ctx.shard.store(ctx.db, &args[1], Value::str(&args[2]), 0);
    ctx.notify(notify::STRING, "set", &args[1]);
    old.map(Reply::Bulk).unwrap_or(Reply::Nil)
}

pub fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match read(ctx, &args[1]) {
        Ok(Some(v)) => {
            ctx.shard.remove(ctx.db, &args[1]);
            ctx.notify(notify::GENERIC, "del", &args[1]);
            Reply::Bulk(v)
        }
        Ok(None) => Reply::Nil,
        Err(e) => e,
    }
}

pub fn getex(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let o = match parse_ext(args, 2, false) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let v = match read(ctx, key) {
        Ok(Some(v)) => v,
        Ok(None) => return Reply::Nil,
        Err(e) => return e,
    };
    // Redis checks the expiry value only once the key is known to exist.
    let at = match o.expire.map(|e| expire_at(ctx, e, "getex")).transpose() {
        Ok(at) => at,
        Err(e) => return e,
    };
    match at {
        Some(at) if at <= ctx.now => {
            ctx.shard.remove(ctx.db, key);
            ctx.notify(notify::GENERIC, "del", key);
        }
        Some(at) => {
            ctx.shard.set_expire(ctx.db, key, at, ctx.now);
            ctx.notify(notify::GENERIC, "expire", key);
        }
        None if o.persist => {
            let had_ttl = ctx
                .shard
                .lookup_mut_ttl(ctx.db, key, ctx.now)
                .is_some_and(|(_, at)| at != 0);
            if had_ttl {
                ctx.shard.set_expire(ctx.db, key, 0, ctx.now);
                ctx.notify(notify::GENERIC, "persist", key);
            }
        }
        None => {}
    }
    Reply::Bulk(v)
}

/// MGET part: `[mget, keys...]`; missing keys and non-strings are nil.
pub fn mget(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let out = args[1..]
        .iter()
        .map(|k| match ctx.shard.lookup(ctx.db, k, ctx.now) {
            Some(e) => match e.value() {
                ValueRef::Str(s) => Reply::Bulk(Bytes::copy_from_slice(s)),
                // As Redis: a key of another type reads as missing.
                _ => Reply::Nil,
            },
            None => Reply::Nil,
        })
        .collect();
    Reply::Array(out)
}

/// MSET part: `[mset, k, v, k, v...]`.
pub fn mset(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return super::wrong_args("mset");
    }
    for pair in args[1..].chunks_exact(2) {
        ctx.shard.store(ctx.db, &pair[0], Value::str(&pair[1]), 0);
        ctx.notify(notify::STRING, "set", &pair[0]);
    }
    Reply::Ok
}

/// MSETNX when all keys live on this shard (the cross-shard form runs in `server::txn`).
pub fn msetnx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len().is_multiple_of(2) {
        return super::wrong_args("msetnx");
    }
    let now = ctx.now;
    if args[1..]
        .chunks_exact(2)
        .any(|p| ctx.shard.contains(ctx.db, &p[0], now))
    {
        return Reply::Int(0);
    }
    mset(ctx, args);
    Reply::Int(1)
}

pub fn append(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (key, tail) = (&args[1], &args[2]);
    match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => {
            ctx.shard.store(ctx.db, key, Value::str(tail), 0);
            ctx.notify(notify::STRING, "append", key);
            Reply::Int(tail.len() as i64)
        }
        Some(e) => {
            let cur = match as_str(e) {
                Ok(s) => s,
                Err(r) => return r,
            };
            let len = cur.len() + tail.len();
            if len > MAX_BULK_LEN {
                return err(ERR_TOO_BIG);
            }
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(cur);
            v.extend_from_slice(tail);
            e.set_value(Value::Str(CompactBytes::from_vec(v)));
            e.add_flags(Entry::RAW);
            ctx.shard.dirty += 1;
            ctx.notify(notify::STRING, "append", key);
            Reply::Int(len as i64)
        }
    }
}

pub fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match ctx.shard.lookup(ctx.db, &args[1], ctx.now) {
        None => Reply::Int(0),
        // An offloaded value's length is in its pointer: no disk read.
        Some(e) if e.is_external() && e.offloaded_type().is_none() => {
            Reply::Int(e.value_len() as i64)
        }
        Some(e) => match as_str(e) {
            Ok(s) => Reply::Int(s.len() as i64),
            Err(r) => r,
        },
    }
}

/// Adds `by` to the integer at `key` (0 when missing), keeping its TTL.
fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) -> Reply {
    let cur = match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => None,
        Some(e) => match as_str(e) {
            Ok(s) => match parse_i64(s) {
                Some(n) => Some(n),
                None => return err(ERR_NOT_INT),
            },
            Err(r) => return r,
        },
    };
    let Some(n) = cur.unwrap_or(0).checked_add(by) else {
        return err(ERR_OVERFLOW);
    };
    let text = n.to_string();
    match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        Some(e) => {
            e.set_value(Value::str(text.as_bytes()));
            ctx.shard.dirty += 1;
        }
        None => {
            ctx.shard.store(ctx.db, key, Value::str(text.as_bytes()), 0);
        }
    }
    ctx.notify(notify::STRING, "incrby", key);
    Reply::Int(n)
}

pub fn incr(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    incr_by(ctx, &args[1], 1)
}

pub fn decr(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    incr_by(ctx, &args[1], -1)
}

pub fn incrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match int_arg(&args[2]) {
        Ok(by) => incr_by(ctx, &args[1], by),
        Err(e) => e,
    }
}

pub fn decrby(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match int_arg(&args[2]) {
        Ok(i64::MIN) => err("ERR decrement would overflow"),
        Ok(by) => incr_by(ctx, &args[1], -by),
        Err(e) => e,
    }
}

extern "C" {
    fn strata_incrbyfloat(
        cur: *const u8,
        cur_len: usize,
        incr: *const u8,
        incr_len: usize,
        out: *mut u8,
        out_cap: usize,
        out_len: *mut usize,
    ) -> i32;
}

/// `cur + incr` in `long double`, formatted as Redis does; Err is the reply to give.
pub fn add_long_double(cur: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, Reply> {
    let mut out = vec![0u8; 5 * 1024 + 64];
    let mut len = 0usize;
    let (cp, cl) = match cur {
        Some(c) => (c.as_ptr(), c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: every pointer is valid for the length passed with it (`cur` may be null, which
    // the C side checks), `out` has `out.len()` writable bytes, and the function keeps none of
    // them after returning.
    let rc = unsafe {
        strata_incrbyfloat(
            cp,
            cl,
            incr.as_ptr(),
            incr.len(),
            out.as_mut_ptr(),
            out.len(),
            &mut len,
        )
    };
    match rc {
        0 => {
            out.truncate(len.min(out.len()));
            Ok(out)
        }
        1 | 2 => Err(err(ERR_NOT_FLOAT)),
        3 => Err(err("ERR increment would produce NaN or Infinity")),
        _ => Err(err(ERR_TOO_BIG)),
    }
}

pub fn incrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let cur: Option<Vec<u8>> = match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => None,
        Some(e) => match as_str(e) {
            Ok(s) => Some(s.to_vec()),
            Err(r) => return r,
        },
    };
    let text = match add_long_double(cur.as_deref(), &args[2]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        Some(e) => {
            e.set_value(Value::str(&text));
            ctx.shard.dirty += 1;
        }
        None => {
            ctx.shard.store(ctx.db, key, Value::str(&text), 0);
        }
    }
    ctx.notify(notify::STRING, "incrbyfloat", key);
    Reply::Bulk(Bytes::from(text))
}

/// GETRANGE / SUBSTR with Redis 7's index rules.
pub fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (start, end) = match (int_arg(&args[2]), int_arg(&args[3])) {
        (Ok(s), Ok(e)) => (s, e),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let v = match read(ctx, &args[1]) {
        Ok(Some(v)) => v,
        Ok(None) => return Reply::bulk(Bytes::new()),
        Err(e) => return e,
    };
    Reply::Bulk(slice_range(&v, start, end))
}

/// The bytes between inclusive indices `start` and `end` (negative from the end).
pub fn slice_range(v: &Bytes, mut start: i64, mut end: i64) -> Bytes {
    let len = v.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Bytes::new();
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if len == 0 || start > end {
        return Bytes::new();
    }
    v.slice(start as usize..=end as usize)
}

pub fn setrange(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (key, val) = (&args[1], &args[3]);
    let offset = match int_arg(&args[2]) {
        Ok(o) if o < 0 => return err("ERR offset is out of range"),
        Ok(o) => o as usize,
        Err(e) => return e,
    };
    let cur: Option<Vec<u8>> = match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => None,
        Some(e) => match as_str(e) {
            Ok(s) => Some(s.to_vec()),
            Err(r) => return r,
        },
    };
    if val.is_empty() {
        return Reply::Int(cur.map(|c| c.len()).unwrap_or(0) as i64);
    }
    if offset.saturating_add(val.len()) > MAX_BULK_LEN {
        return err(ERR_TOO_BIG);
    }
    let exists = cur.is_some();
    let mut buf = cur.unwrap_or_default();
    if buf.len() < offset + val.len() {
        buf.resize(offset + val.len(), 0);
    }
    buf[offset..offset + val.len()].copy_from_slice(val);
    let len = buf.len();
    store_edited(ctx, key, buf, exists);
    ctx.notify(notify::STRING, "setrange", key);
    Reply::Int(len as i64)
}

/// Stores a string a command edited (SETRANGE, SETBIT, BITFIELD, PFADD, ...): over the old
/// value, its TTL kept, when the key `existed`; as a new key otherwise. Either way it counts
/// one write (rdb_changes_since_last_save) and OBJECT ENCODING says "raw", as Redis says of a
/// string it edited in place.
pub fn store_edited(ctx: &mut Ctx, key: &[u8], v: Vec<u8>, existed: bool) {
    let value = Value::Str(CompactBytes::from_vec(v));
    match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        Some(e) if existed => {
            e.set_value(value);
            ctx.shard.dirty += 1;
        }
        _ => {
            ctx.shard.store(ctx.db, key, value, 0);
        }
    }
    mark_raw(ctx, key);
}

/// Marks `key`'s string "raw" for OBJECT ENCODING without changing it: Redis unshares a
/// string (making it raw) when a writing command looks at it, even if it then changes nothing.
pub fn mark_raw(ctx: &mut Ctx, key: &[u8]) {
    if let Some(e) = ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        e.add_flags(Entry::RAW);
    }
}

/// LCS options.
#[derive(Default, Clone, Copy, Debug)]
pub struct LcsOpts {
    pub len: bool,
    pub idx: bool,
    pub minmatchlen: u64,
    pub withmatchlen: bool,
}

/// Parses LCS options (everything after the two keys).
pub fn lcs_opts(args: &[Bytes]) -> Result<LcsOpts, Reply> {
    let mut o = LcsOpts::default();
    let mut c = ArgCursor::new(args, 3);
    loop {
        if c.eat("LEN") {
            o.len = true;
        } else if c.eat("IDX") {
            o.idx = true;
        } else if c.eat("WITHMATCHLEN") {
            o.withmatchlen = true;
        } else if let Some(v) = c.eat_with_value("MINMATCHLEN") {
            o.minmatchlen = int_arg(v)?.max(0) as u64;
        } else {
            break;
        }
    }
    c.finish()?;
    if o.len && o.idx {
        return Err(err(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

/// LCS when both keys live on this shard.
pub fn lcs(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let opts = match lcs_opts(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let mut vals = Vec::with_capacity(2);
    for k in &args[1..3] {
        match ctx.shard.lookup(ctx.db, k, ctx.now) {
            None => vals.push(Bytes::new()),
            Some(e) => match as_str(e) {
                Ok(s) => vals.push(Bytes::copy_from_slice(s)),
                Err(_) => return err("ERR The specified keys must contain string values"),
            },
        }
    }
    lcs_compute(&vals[0], &vals[1], opts)
}

/// The longest common subsequence of `a` and `b`, answered as LCS's options ask.
pub fn lcs_compute(a: &[u8], b: &[u8], o: LcsOpts) -> Reply {
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u128 + 1) * (blen as u128 + 1);
    if cells * 4 > MAX_BULK_LEN as u128 {
        return err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let w = blen + 1;
    let mut dp = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[alen * w + blen] as usize;
    if o.len {
        return Reply::Int(total as i64);
    }
    // Walk back from the end, collecting the subsequence and the matching ranges.
    let mut out = vec![0u8; total];
    let mut matches = Vec::new();
    let (mut i, mut j, mut idx) = (alen, blen, total);
    let unset = alen;
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (unset, 0usize, 0usize, 0usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            out[idx - 1] = a[i - 1];
            if a_start == unset {
                a_start = i - 1;
                a_end = i - 1;
                b_start = j - 1;
                b_end = j - 1;
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != unset {
                emit = true;
            }
        }
        if emit {
            let mlen = (a_end - a_start + 1) as u64;
            if o.minmatchlen == 0 || mlen >= o.minmatchlen {
                let mut m = vec![
                    Reply::Array(vec![Reply::Int(a_start as i64), Reply::Int(a_end as i64)]),
                    Reply::Array(vec![Reply::Int(b_start as i64), Reply::Int(b_end as i64)]),
                ];
                if o.withmatchlen {
                    m.push(Reply::Int(mlen as i64));
                }
                matches.push(Reply::Array(m));
            }
            a_start = unset;
        }
    }
    if o.idx {
        return Reply::Map(vec![
            (Reply::bulk_str("matches"), Reply::Array(matches)),
            (Reply::bulk_str("len"), Reply::Int(total as i64)),
        ]);
    }
    Reply::Bulk(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lcs_like_redis() {
        let r = lcs_compute(b"ohmytext", b"mynewtext", LcsOpts::default());
        assert_eq!(r, Reply::bulk_str("mytext"));
        let r = lcs_compute(
            b"ohmytext",
            b"mynewtext",
            LcsOpts {
                len: true,
                ..Default::default()
            },
        );
        assert_eq!(r, Reply::Int(6));
        let r = lcs_compute(
            b"ohmytext",
            b"mynewtext",
            LcsOpts {
                idx: true,
                minmatchlen: 4,
                withmatchlen: true,
                ..Default::default()
            },
        );
        let expect = Reply::Map(vec![
            (
                Reply::bulk_str("matches"),
                Reply::Array(vec![Reply::Array(vec![
                    Reply::Array(vec![Reply::Int(4), Reply::Int(7)]),
                    Reply::Array(vec![Reply::Int(5), Reply::Int(8)]),
                    Reply::Int(4),
                ])]),
            ),
            (Reply::bulk_str("len"), Reply::Int(6)),
        ]);
        assert_eq!(r, expect);
        let r = lcs_compute(b"", b"abc", LcsOpts::default());
        assert_eq!(r, Reply::bulk(Bytes::new()));
    }

    #[test]
    fn long_double_sums_like_redis() {
        let add = |a: Option<&str>, b: &str| {
            add_long_double(a.map(str::as_bytes), b.as_bytes())
                .map(|v| String::from_utf8(v).unwrap())
        };
        assert_eq!(add(Some("0.1"), "0.2").unwrap(), "0.3");
        assert_eq!(add(Some("10.50"), "0.1").unwrap(), "10.6");
        assert_eq!(add(Some("5.0e3"), "2.0e2").unwrap(), "5200");
        assert_eq!(add(None, "-0").unwrap(), "0");
        assert_eq!(add(Some("1e308"), "1e308").unwrap().len(), 309);
        assert_eq!(add(Some("abc"), "1").unwrap_err(), err(ERR_NOT_FLOAT));
        assert_eq!(add(Some("1"), " 1").unwrap_err(), err(ERR_NOT_FLOAT));
        assert_eq!(add(Some("1"), "nan").unwrap_err(), err(ERR_NOT_FLOAT));
        assert_eq!(
            add(Some("inf"), "-inf").unwrap_err(),
            err("ERR increment would produce NaN or Infinity")
        );
    }

    #[test]
    fn ranges() {
        let v = Bytes::from_static(b"This is a string");
        assert_eq!(&slice_range(&v, 0, 3)[..], b"This");
        assert_eq!(&slice_range(&v, -3, -1)[..], b"ing");
        assert_eq!(&slice_range(&v, 0, -1)[..], b"This is a string");
        assert_eq!(&slice_range(&v, 10, 100)[..], b"string");
        assert_eq!(&slice_range(&v, 5, 3)[..], b"");
        assert_eq!(&slice_range(&v, -1, -5)[..], b"");
        assert_eq!(&slice_range(&Bytes::new(), 0, -1)[..], b"");
    }
}

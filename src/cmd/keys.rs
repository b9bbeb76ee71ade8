//! Generic key commands: DEL, EXISTS, TYPE, the EXPIRE family, TTLs, RENAME, COPY, MOVE, OBJECT.
//! Keyspace-wide ones (KEYS, SCAN, DBSIZE, FLUSHDB, ...) fan out from `server::admin::keyspace`.
//!
//! Never: does I/O or waits; a key on another shard is the dispatcher's (`Exec::Cross`).

use bytes::Bytes;

use super::args::*;
use super::Ctx;
use crate::notify;
use crate::protocol::Reply;

/// DEL / UNLINK part: keys removed.
pub fn del(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let mut n = 0;
    for k in &args[1..] {
        if ctx.shard.contains(ctx.db, k, ctx.now) {
            ctx.shard.remove(ctx.db, k);
            ctx.notify(notify::GENERIC, "del", k);
            n += 1;
        }
    }
    Reply::Int(n)
}

/// EXISTS part: a key named twice counts twice.
pub fn exists(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    let mut n = 0;
    for k in &args[1..] {
        if ctx.shard.contains(ctx.db, k, now) {
            n += 1;
        } else {
            ctx.notify(notify::KEY_MISS, "keymiss", k);
        }
    }
    Reply::Int(n)
}

pub fn touch(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let now = ctx.now;
    let mut n = 0;
    for k in &args[1..] {
        let (clock, r) = (ctx.shard.clock(), ctx.shard.rand_u32());
        if let Some(e) = ctx.shard.lookup_mut(ctx.db, k, now) {
            e.touch(clock, r);
            n += 1;
        }
    }
    Reply::Int(n)
}

pub fn type_(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    match ctx.shard.lookup_mut(ctx.db, &args[1], ctx.now) {
        None => {
            ctx.notify(notify::KEY_MISS, "keymiss", &args[1]);
            Reply::Status("none")
        }
        Some(e) => Reply::Status(e.type_name()),
    }
}

/// NX / XX / GT / LT of the EXPIRE family.
#[derive(Default)]
struct ExpireCond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn expire_cond(args: &[Bytes]) -> Result<ExpireCond, Reply> {
    let mut c = ExpireCond::default();
    let mut opts = ArgCursor::new(args, 3);
    while let Some(a) = opts.next_arg() {
        if is(a, "NX") {
            c.nx = true;
        } else if is(a, "XX") {
            c.xx = true;
        } else if is(a, "GT") {
            c.gt = true;
        } else if is(a, "LT") {
            c.lt = true;
        } else {
            return Err(Reply::Error(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(a)
            )));
        }
    }
    opts.finish()?;
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if c.gt && c.lt {
        return Err(err(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(c)
}

/// Shared body of EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
fn expire_generic(ctx: &mut Ctx, args: &[Bytes], unit_ms: i64, absolute: bool, cmd: &str) -> Reply {
    // Options first, then the time, as Redis checks them.
    let cond = match expire_cond(args) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let v = match int_arg(&args[2]) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let invalid = || Reply::Error(format!("ERR invalid expire time in '{cmd}' command"));
    let Some(ms) = v.checked_mul(unit_ms) else {
        return invalid();
    };
    let at = if absolute {
        ms
    } else {
        match ms.checked_add(ctx.now as i64) {
            Some(a) => a,
            None => return invalid(),
        }
    };
    let key = &args[1];
    let Some((_, cur)) = ctx.shard.lookup_mut_ttl(ctx.db, key, ctx.now) else {
        return Reply::Int(0);
    };
    // A key without TTL has an infinite one for GT/LT.
    let cur_ttl = if cur == 0 { i64::MAX } else { cur as i64 };
    let allowed = !(cond.nx && cur != 0
        || cond.xx && cur == 0
        || cond.gt && at <= cur_ttl
        || cond.lt && at >= cur_ttl);
    if !allowed {
        return Reply::Int(0);
    }
    if at <= ctx.now as i64 {
        ctx.shard.remove(ctx.db, key);
        ctx.notify(notify::GENERIC, "del", key);
    } else {
        ctx.shard.set_expire(ctx.db, key, at as u64, ctx.now);
        ctx.notify(notify::GENERIC, "expire", key);
    }
    Reply::Int(1)
}

pub fn expire(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expire_generic(ctx, args, 1000, false, "expire")
}

pub fn pexpire(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expire_generic(ctx, args, 1, false, "pexpire")
}

pub fn expireat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expire_generic(ctx, args, 1000, true, "expireat")
}

pub fn pexpireat(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    expire_generic(ctx, args, 1, true, "pexpireat")
}

/// TTL family: -2 missing, -1 no TTL; `absolute` gives the expiry time instead of what is left.
fn ttl_generic(ctx: &mut Ctx, key: &[u8], in_ms: bool, absolute: bool) -> Reply {
    let Some((_, at)) = ctx.shard.lookup_mut_ttl(ctx.db, key, ctx.now) else {
        ctx.notify(notify::KEY_MISS, "keymiss", key);
        return Reply::Int(-2);
    };
    if at == 0 {
        return Reply::Int(-1);
    }
    let t = if absolute {
        at as i64
    } else {
        (at as i64 - ctx.now as i64).max(0)
    };
    Reply::Int(if in_ms { t } else { (t + 500) / 1000 })
}

pub fn ttl(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, &args[1], false, false)
}

pub fn pttl(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, &args[1], true, false)
}

pub fn expiretime(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, &args[1], false, true)
}

pub fn pexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    ttl_generic(ctx, &args[1], true, true)
}

pub fn persist(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let has_ttl = ctx
        .shard
        .lookup_mut_ttl(ctx.db, &args[1], ctx.now)
        .is_some_and(|(_, at)| at != 0);
    if has_ttl {
        ctx.shard.set_expire(ctx.db, &args[1], 0, ctx.now);
        ctx.notify(notify::GENERIC, "persist", &args[1]);
    }
    Reply::Int(has_ttl as i64)
}

/// RENAME / RENAMENX when both keys live on this shard.
fn rename_generic(ctx: &mut Ctx, args: &[Bytes], nx: bool) -> Reply {
    let (src, dst) = (&args[1], &args[2]);
    if !ctx.shard.contains(ctx.db, src, ctx.now) {
        return err(ERR_NO_KEY);
    }
    if src == dst {
        return if nx { Reply::Int(0) } else { Reply::Ok };
    }
    if nx && ctx.shard.contains(ctx.db, dst, ctx.now) {
        return Reply::Int(0);
    }
    if let Some(taken) = ctx.shard.take(ctx.db, src) {
        // The old destination goes first, so the key is new again (Redis' `new` event); the
        // rename stays one change.
        if ctx.shard.remove(ctx.db, dst).is_some() {
            ctx.shard.dirty = ctx.shard.dirty.saturating_sub(1);
        }
        ctx.shard.put_taken(ctx.db, dst, taken);
    }
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    if nx {
        Reply::Int(1)
    } else {
        Reply::Ok
    }
}

pub fn rename(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rename_generic(ctx, args, false)
}

pub fn renamenx(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    rename_generic(ctx, args, true)
}

/// Parses a db index argument against the configured db count.
pub fn db_arg(ctx: &Ctx, arg: &Bytes) -> Result<usize, Reply> {
    let n = int_arg(arg)?;
    if n < 0 || n as usize >= ctx.shard.dbs.len() {
        return Err(err(ERR_DB_RANGE));
    }
    Ok(n as usize)
}

/// COPY options: (destination db, replace).
pub fn copy_opts(ctx: &Ctx, args: &[Bytes]) -> Result<(usize, bool), Reply> {
    let (mut db, mut replace) = (ctx.db, false);
    let mut c = ArgCursor::new(args, 3);
    loop {
        if c.eat("REPLACE") {
            replace = true;
        } else if let Some(v) = c.eat_with_value("DB") {
            db = db_arg(ctx, v)?;
        } else {
            break;
        }
    }
    c.finish()?;
    if db == ctx.db && args[1] == args[2] {
        return Err(err("ERR source and destination objects are the same"));
    }
    Ok((db, replace))
}

/// COPY when both keys live on this shard.
pub fn copy(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let (db, replace) = match copy_opts(ctx, args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let Some((e, at)) = ctx
        .shard
        .lookup_mut_ttl(ctx.db, &args[1], ctx.now)
        .map(|(e, at)| (e.clone(), at))
    else {
        return Reply::Int(0);
    };
    if ctx.shard.contains(db, &args[2], ctx.now) {
        if !replace {
            return Reply::Int(0);
        }
        ctx.shard.remove(db, &args[2]);
    }
    ctx.shard.store(db, &args[2], e.to_value(args[1].len()), at);
    ctx.shard.notify(notify::GENERIC, "copy_to", db, &args[2]);
    Reply::Int(1)
}

pub fn move_(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let db = match db_arg(ctx, &args[2]) {
        Ok(db) => db,
        Err(e) => return e,
    };
    if db == ctx.db {
        return err("ERR source and destination objects are the same");
    }
    let key = &args[1];
    if !ctx.shard.contains(ctx.db, key, ctx.now) || ctx.shard.contains(db, key, ctx.now) {
        return Reply::Int(0);
    }
    if let Some(taken) = ctx.shard.take(ctx.db, key) {
        ctx.shard.put_taken(db, key, taken);
    }
    ctx.notify(notify::GENERIC, "move_from", key);
    ctx.shard.notify(notify::GENERIC, "move_to", db, key);
    Reply::Int(1)
}

pub fn object(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    if sub == "help" {
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Print this help.",
        ];
        return super::help_reply(&lines);
    }
    if !matches!(sub.as_str(), "encoding" | "freq" | "idletime" | "refcount") {
        return super::unknown_subcommand("OBJECT", &args[1], false);
    }
    if args.len() != 3 {
        return Reply::Error(format!(
            "ERR wrong number of arguments for 'object|{sub}' command"
        ));
    }
    let clock = ctx.shard.clock();
    let lfu = ctx.shard.settings.lfu_policy();
    let Some(e) = ctx.shard.lookup_mut(ctx.db, &args[2], ctx.now) else {
        return Reply::Nil;
    };
    match sub.as_str() {
        "encoding" => Reply::bulk_str(e.encoding()),
        "freq" if !lfu => err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        "freq" => Reply::Int(e.freq() as i64),
        "idletime" if lfu => err("ERR An LRU maxmemory policy is not selected, no idle time is tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."),
        "idletime" => Reply::Int(e.idle_seconds(clock) as i64),
        _ => Reply::Int(1),
    }
}

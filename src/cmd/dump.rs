//! DUMP and RESTORE: the commands' glue around `ondisk`'s RDB object codec.
//!
//! This file owns argument parsing, the shard lookups and the error replies; the payload format
//! (RDB type byte, value encoding, RDB version, CRC-64) is `ondisk::rdb::codec`'s alone, so
//! payloads move between Strata and Redis 7 in both directions and RDB files, DUMP and
//! snapshots share one encoding. Never decodes a payload by itself.

use bytes::Bytes;
use ondisk::rdb::{
    decode_dump_string, dump_payload, encode_dump_string, types, DumpError, DumpPayload,
};

use super::args::{err, int_arg, ArgCursor};
use super::Ctx;
use crate::protocol::Reply;
use crate::shard::entry::MAX_IDLE;
use crate::shard::object::{value_from_rdb, PackLimits};
use crate::shard::{CompactBytes, Entry, Value, ValueRef};

const ERR_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
const ERR_BAD_FORMAT: &str = "ERR Bad data format";
const ERR_BUSYKEY: &str = "BUSYKEY Target key name already exists.";
const ERR_TTL: &str = "ERR Invalid TTL value, must be >= 0";
const ERR_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
const ERR_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";

/// DUMP key
pub fn dump(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() != 2 {
        return super::wrong_args("dump");
    }
    // A read like GET: counts a hit or miss and refreshes the access time, as Redis does.
    let Some(entry) = ctx.shard.lookup(ctx.db, &args[1], ctx.now) else {
        return Reply::Nil;
    };
    let payload = match entry.value() {
        ValueRef::Str(s) => encode_dump_string(s),
        // A typed value: its RDB encoding, as Redis DUMPs it.
        _ => {
            let mut body = Vec::new();
            match entry.encode_rdb(&mut body) {
                Some(rdb_type) => {
                    dump_payload(rdb_type, body.len(), |out| out.extend_from_slice(&body))
                }
                // An offloaded string (loaded before DUMP runs, see READS_VALUE).
                None => return err("ERR internal error: value on SSD was not loaded"),
            }
        }
    };
    Reply::Bulk(Bytes::from(payload))
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
pub fn restore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() < 4 {
        return super::wrong_args("restore");
    }
    let key = &args[1];
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut opts = ArgCursor::new(args, 4);
    loop {
        if opts.eat("replace") {
            replace = true;
        } else if opts.eat("absttl") {
            absttl = true;
        } else if let Some(v) = freq
            .is_none()
            .then(|| opts.eat_with_value("idletime"))
            .flatten()
        {
            // IDLETIME and FREQ exclude each other; the second one is left over, a syntax
            // error, as in Redis.
            let v = match int_arg(v) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if v < 0 {
                return err(ERR_IDLETIME);
            }
            idle = Some(v);
        } else if let Some(v) = idle
            .is_none()
            .then(|| opts.eat_with_value("freq"))
            .flatten()
        {
            let v = match int_arg(v) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if !(0..=255).contains(&v) {
                return err(ERR_FREQ);
            }
            freq = Some(v);
        } else {
            break;
        }
    }
    if let Err(e) = opts.finish() {
        return e;
    }

    // Redis' order of checks: options, existing key, TTL, then the payload.
    if !replace && ctx.shard.contains(ctx.db, key, ctx.now) {
        return err(ERR_BUSYKEY);
    }
    let ttl = match int_arg(&args[2]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if ttl < 0 {
        return err(ERR_TTL);
    }
    let value = match restored_value(&args[3], &PackLimits::from_settings(&ctx.shard.settings)) {
        Ok(v) => v,
        Err(e) => return e,
    };

    if replace {
        ctx.shard.remove(ctx.db, key);
    }
    let expire_at = match (ttl as u64, absttl) {
        (0, _) => 0,
        (t, true) => t,
        (t, false) => ctx.now.saturating_add(t),
    };
    if expire_at != 0 && expire_at <= ctx.now {
        // Already expired: Redis drops the key (the old one too, under REPLACE) and says OK.
        return Reply::Ok;
    }

    let clock = ctx.shard.clock();
    let mut entry = Entry::new(value, clock);
    if let Some(idle) = idle {
        // The clock wraps; longer idle times saturate at the ageing pass's ceiling instead of
        // wrapping to "fresh" (see `Shard::age_step`).
        let idle = idle.min(MAX_IDLE.into()) as u32;
        entry.set_clock(clock.wrapping_sub(idle));
    }
    if let Some(f) = freq {
        entry.set_freq(f as u32);
    }
    ctx.shard.store_entry(ctx.db, key, entry, expire_at);
    ctx.notify(crate::notify::GENERIC, "restore", key);
    Reply::Ok
}

/// The value a DUMP payload holds: a string, or a collection whose packed block passes a
/// whole-block check. Redis' two errors: a bad footer (version, CRC) or a bad value.
fn restored_value(payload: &[u8], limits: &PackLimits) -> Result<Value, Reply> {
    let parsed = match DumpPayload::parse(payload) {
        Ok(p) => p,
        Err(DumpError::Footer(_)) => return Err(err(ERR_PAYLOAD)),
        Err(DumpError::Object(_)) => return Err(err(ERR_BAD_FORMAT)),
    };
    if parsed.rdb_type == types::STRING {
        return match decode_dump_string(payload) {
            Ok(v) => Ok(Value::Str(CompactBytes::from_vec(v))),
            Err(DumpError::Footer(_)) => Err(err(ERR_PAYLOAD)),
            Err(DumpError::Object(_)) => Err(err(ERR_BAD_FORMAT)),
        };
    }
    value_from_rdb(parsed.rdb_type, parsed.value.remaining(), limits)
        .map_err(|_| err(ERR_BAD_FORMAT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::args::ERR_SYNTAX;
    use crate::config::{Flags, Settings};
    use crate::shard::Shard;
    use clap::Parser;
    use ondisk::rdb::{dump_payload, types};
    use std::sync::Arc;

    fn shard() -> Shard {
        let f = Flags::try_parse_from(["strata"]).unwrap();
        Shard::new(0, Arc::new(Settings::from_flags(&f)))
    }

    fn run(shard: &mut Shard, now: u64, f: super::super::ShardFn, args: &[&[u8]]) -> Reply {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let mut ctx = Ctx { shard, db: 0, now };
        f(&mut ctx, &args)
    }

    #[test]
    fn dump_and_restore_commands() {
        let mut s = shard();
        let now = 1_700_000_000_000;
        assert_eq!(run(&mut s, now, dump, &[b"dump", b"k"]), Reply::Nil);
        s.store(0, b"k", Value::str(b"bar"), 0);
        let Reply::Bulk(p) = run(&mut s, now, dump, &[b"dump", b"k"]) else {
            panic!("dump gave no bulk");
        };
        assert_eq!(&p[..], &encode_dump_string(b"bar")[..]);

        let e = |m: &str| Reply::Error(m.to_string());
        let r = |s: &mut Shard, a: &[&[u8]]| run(s, now, restore, a);
        assert_eq!(r(&mut s, &[b"restore", b"k", b"0", &p]), e(ERR_BUSYKEY));
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"x", &p]),
            e(super::super::args::ERR_NOT_INT)
        );
        assert_eq!(r(&mut s, &[b"restore", b"n", b"-1", &p]), e(ERR_TTL));
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", b"junkjunkjunk"]),
            e(ERR_PAYLOAD)
        );
        assert_eq!(
            r(
                &mut s,
                &[b"restore", b"n", b"0", &dump_payload(types::SET, 0, |_| {})]
            ),
            e(ERR_BAD_FORMAT)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"bogus"]),
            e(ERR_SYNTAX)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"idletime"]),
            e(ERR_SYNTAX)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"idletime", b"-1"]),
            e(ERR_IDLETIME)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"freq", b"256"]),
            e(ERR_FREQ)
        );
        assert_eq!(
            r(
                &mut s,
                &[b"restore", b"n", b"0", &p, b"idletime", b"1", b"freq", b"1"]
            ),
            e(ERR_SYNTAX)
        );
        assert!(!s.contains(0, b"n", now));

        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"5000", &p, b"FREQ", b"200"]),
            Reply::Ok
        );
        let (n, at) = s.lookup_mut_ttl(0, b"n", now).unwrap();
        assert_eq!(n.str(), Some(&b"bar"[..]));
        assert_eq!(at, now + 5000);
        assert_eq!(n.freq(), 200);

        let q = encode_dump_string(b"12345");
        assert_eq!(
            r(
                &mut s,
                &[b"restore", b"k", b"0", &q, b"replace", b"idletime", b"100"]
            ),
            Reply::Ok
        );
        let clock = s.clock();
        let (k, at) = s.lookup_mut_ttl(0, b"k", now).unwrap();
        assert_eq!(k.str(), Some(&b"12345"[..]));
        assert_eq!(at, 0);
        assert_eq!(k.idle_seconds(clock), 100);

        let abs = (now + 10).to_string();
        assert_eq!(
            r(&mut s, &[b"restore", b"a", abs.as_bytes(), &p, b"absttl"]),
            Reply::Ok
        );
        assert_eq!(s.lookup_mut_ttl(0, b"a", now).unwrap().1, now + 10);

        // A time already past deletes rather than stores, and still says OK.
        let past = (now - 1).to_string();
        assert_eq!(
            r(
                &mut s,
                &[b"restore", b"k", past.as_bytes(), &p, b"ABSTTL", b"REPLACE"]
            ),
            Reply::Ok
        );
        assert!(!s.contains(0, b"k", now));
    }
}

//! Connection and server commands: they run on the connection's core, may change the
//! connection's state (SELECT, AUTH, HELLO, CLIENT) and may fan out to every shard (DBSIZE,
//! KEYS, SCAN, FLUSHALL, INFO, DEBUG POPULATE).

use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::args::*;
use super::{Spec, TABLE};
use crate::net::connection::ConnState;
use crate::protocol::Reply;
use crate::server::{human_bytes, Core};
use crate::shard::{is_expired, now_ms, shard_of, Shard, ShardStats, Value};

/// Runs a connection/server command.
pub async fn run(
    core: &Rc<Core>,
    conn: &mut ConnState,
    spec: &'static Spec,
    args: Vec<Bytes>,
) -> Reply {
    let db = conn.db;
    match spec.name {
        "ping" => ping(conn, &args),
        "echo" => Reply::Bulk(args[1].clone()),
        "quit" => {
            conn.close_after_reply = true;
            Reply::Ok
        }
        "select" => select(core, conn, &args),
        "auth" => auth(core, conn, &args),
        "hello" => hello(core, conn, &args),
        "client" => client(core, conn, &args),
        "time" => {
            let d = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            Reply::Array(vec![
                Reply::bulk(Bytes::from(d.as_secs().to_string())),
                Reply::bulk(Bytes::from(d.subsec_micros().to_string())),
            ])
        }
        "lastsave" => Reply::Int(
            core.global
                .persist
                .lock()
                .map(|p| p.last_save_unix)
                .unwrap_or(core.global.started_unix) as i64,
        ),
        "save" => save(core, &args).await,
        "bgsave" => bgsave(core, &args).await,
        "dbsize" => {
            let counts = core.on_all(move |s| s.dbs[db].table.len()).await;
            Reply::Int(counts.iter().sum::<usize>() as i64)
        }
        "flushdb" | "flushall" => flush(core, spec.name, db, &args).await,
        "swapdb" => swapdb(core, &args).await,
        "keys" => keys(core, db, &args).await,
        "scan" => scan(core, db, &args).await,
        "randomkey" => randomkey(core, db).await,
        "info" => info(core, &args).await,
        "config" => config(core, &args).await,
        "command" => command(&args),
        "debug" => debug(core, conn, &args).await,
        "memory" => memory(core, db, &args).await,
        "shutdown" => shutdown(core, &args).await,
        _ => Reply::Error(format!("ERR unknown command '{}'", spec.name)),
    }
}

fn ping(conn: &ConnState, args: &[Bytes]) -> Reply {
    match args.len() {
        1 if conn.resp3 => Reply::Status("PONG"),
        1 => Reply::Status("PONG"),
        2 => Reply::Bulk(args[1].clone()),
        _ => super::wrong_args("ping"),
    }
}

fn select(core: &Core, conn: &mut ConnState, args: &[Bytes]) -> Reply {
    let Some(n) = parse_i64(&args[1]) else {
        return err(ERR_NOT_INT);
    };
    if n < 0 || n >= core.global.settings.dbnum as i64 {
        return err(ERR_DB_RANGE);
    }
    conn.db = n as usize;
    conn.info.db.store(n as u32, Ordering::Relaxed);
    Reply::Ok
}

/// Checks credentials; the only user is "default".
fn check_password(core: &Core, user: &[u8], pass: &[u8]) -> Result<(), Reply> {
    let required = core.global.settings.requirepass();
    if user == b"default" && (required.is_empty() || required.as_bytes() == pass) {
        Ok(())
    } else {
        Err(err(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

fn auth(core: &Core, conn: &mut ConnState, args: &[Bytes]) -> Reply {
    let (user, pass): (&[u8], &[u8]) = match args.len() {
        2 => {
            if core.global.settings.requirepass().is_empty() {
                return err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            }
            (b"default", &args[1])
        }
        3 => (&args[1], &args[2]),
        _ => return err(ERR_SYNTAX),
    };
    match check_password(core, user, pass) {
        Ok(()) => {
            conn.authed = true;
            Reply::Ok
        }
        Err(e) => e,
    }
}

fn hello(core: &Core, conn: &mut ConnState, args: &[Bytes]) -> Reply {
    let mut proto = if conn.resp3 { 3 } else { 2 };
    let mut i = 1;
    if args.len() > 1 {
        match parse_i64(&args[1]) {
            Some(v @ 2..=3) => proto = v,
            Some(_) => return err("NOPROTO unsupported protocol version"),
            None => return err("ERR Protocol version is not an integer or out of range"),
        }
        i = 2;
    }
    let mut name = None;
    while i < args.len() {
        if is(&args[i], "AUTH") && i + 2 < args.len() {
            if let Err(e) = check_password(core, &args[i + 1], &args[i + 2]) {
                return e;
            }
            conn.authed = true;
            i += 3;
        } else if is(&args[i], "SETNAME") && i + 1 < args.len() {
            if let Err(e) = valid_name(&args[i + 1]) {
                return e;
            }
            name = Some(String::from_utf8_lossy(&args[i + 1]).into_owned());
            i += 2;
        } else {
            return Reply::Error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            ));
        }
    }
    if !conn.authed {
        return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(n) = name {
        if let Ok(mut m) = conn.info.name.lock() {
            *m = n;
        }
    }
    conn.resp3 = proto == 3;
    conn.info.resp.store(proto as u8, Ordering::Relaxed);
    Reply::Map(vec![
        (Reply::bulk_str("server"), Reply::bulk_str("redis")),
        (Reply::bulk_str("version"), Reply::bulk_str(REDIS_VERSION)),
        (Reply::bulk_str("proto"), Reply::Int(proto)),
        (Reply::bulk_str("id"), Reply::Int(conn.id as i64)),
        (Reply::bulk_str("mode"), Reply::bulk_str("standalone")),
        (Reply::bulk_str("role"), Reply::bulk_str("master")),
        (Reply::bulk_str("modules"), Reply::Array(vec![])),
    ])
}

/// A HELP subcommand's reply: one simple string per line.
pub fn help_reply(lines: &[&str]) -> Reply {
    Reply::Array(
        lines
            .iter()
            .map(|l| Reply::StatusOwned(l.to_string()))
            .collect(),
    )
}

/// The Redis version Strata's replies are compatible with (clients check it for features).
pub const REDIS_VERSION: &str = "7.2.0";

fn valid_name(n: &[u8]) -> Result<(), Reply> {
    if n.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(err(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn client(core: &Core, conn: &mut ConnState, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity = |n: usize| {
        if args.len() != n {
            Err(Reply::Error(format!(
                "ERR wrong number of arguments for 'client|{sub}' command"
            )))
        } else {
            Ok(())
        }
    };
    let now = core.global.uptime_ms();
    match sub.as_str() {
        "id" => match arity(2) {
            Ok(()) => Reply::Int(conn.id as i64),
            Err(e) => e,
        },
        "getname" => {
            if let Err(e) = arity(2) {
                return e;
            }
            let n = conn.info.name.lock().map(|s| s.clone()).unwrap_or_default();
            if n.is_empty() {
                Reply::Nil
            } else {
                Reply::bulk(Bytes::from(n))
            }
        }
        "setname" => {
            if let Err(e) = arity(3) {
                return e;
            }
            if let Err(e) = valid_name(&args[2]) {
                return e;
            }
            if let Ok(mut m) = conn.info.name.lock() {
                *m = String::from_utf8_lossy(&args[2]).into_owned();
            }
            Reply::Ok
        }
        "setinfo" => {
            if let Err(e) = arity(4) {
                return e;
            }
            let field = if is(&args[2], "LIB-NAME") {
                &conn.info.lib_name
            } else if is(&args[2], "LIB-VER") {
                &conn.info.lib_ver
            } else {
                return Reply::Error(format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(&args[2])
                ));
            };
            if let Err(e) = valid_name(&args[3]) {
                return e;
            }
            if let Ok(mut m) = field.lock() {
                *m = String::from_utf8_lossy(&args[3]).into_owned();
            }
            Reply::Ok
        }
        "info" => match arity(2) {
            Ok(()) => Reply::Verbatim(format!("{}\n", conn.info.describe(now))),
            Err(e) => e,
        },
        "list" => {
            let ids: Option<Vec<u64>> = if args.len() > 2 {
                if args.len() >= 4 && is(&args[2], "ID") {
                    let mut v = Vec::new();
                    for a in &args[3..] {
                        match parse_i64(a) {
                            Some(id) if id > 0 => v.push(id as u64),
                            _ => return err("ERR Invalid client ID"),
                        }
                    }
                    Some(v)
                } else if args.len() == 4 && is(&args[2], "TYPE") {
                    if !is(&args[3], "normal") {
                        return Reply::Verbatim(String::new());
                    }
                    None
                } else {
                    return err(ERR_SYNTAX);
                }
            } else {
                None
            };
            let mut text = String::new();
            if let Ok(m) = core.global.clients.lock() {
                for c in m.values() {
                    if ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
                        continue;
                    }
                    text.push_str(&c.describe(now));
                    text.push('\n');
                }
            }
            Reply::Verbatim(text)
        }
        "kill" => client_kill(core, conn, args),
        "no-evict" | "no-touch" if args.len() == 3 => {
            if is(&args[2], "on") || is(&args[2], "off") {
                Reply::Ok
            } else {
                err(ERR_SYNTAX)
            }
        }
        "help" => help_reply(&[
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are: ID <client-id>, ADDR <ip:port>, LADDR <ip:port>,",
            "    USER <username>, SKIPME (YES|NO).",
            "LIST [options ...]",
            "    Return information about client connections. Options: TYPE normal, ID <id> [...].",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "HELP",
            "    Print this help.",
        ]),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

fn client_kill(core: &Core, conn: &mut ConnState, args: &[Bytes]) -> Reply {
    // Old form: CLIENT KILL ip:port -> OK or error.
    if args.len() == 3 {
        let target = String::from_utf8_lossy(&args[2]).into_owned();
        let killed = kill_where(core, conn, |c| c.addr == target, false);
        return if killed > 0 {
            Reply::Ok
        } else {
            err("ERR No such client")
        };
    }
    if args.len() < 4 || !(args.len() - 2).is_multiple_of(2) {
        return err(ERR_SYNTAX);
    }
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, true);
    let mut user_ok = true;
    for pair in args[2..].chunks(2) {
        let v = String::from_utf8_lossy(&pair[1]).into_owned();
        if is(&pair[0], "ID") {
            match parse_i64(&pair[1]) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return err("ERR client-id should be greater than 0"),
            }
        } else if is(&pair[0], "ADDR") {
            addr = Some(v);
        } else if is(&pair[0], "LADDR") {
            laddr = Some(v);
        } else if is(&pair[0], "USER") {
            user_ok = v == "default";
        } else if is(&pair[0], "SKIPME") {
            if v.eq_ignore_ascii_case("yes") {
                skipme = true;
            } else if v.eq_ignore_ascii_case("no") {
                skipme = false;
            } else {
                return err(ERR_SYNTAX);
            }
        } else if is(&pair[0], "TYPE") {
            if !v.eq_ignore_ascii_case("normal") {
                return Reply::Int(0);
            }
        } else {
            return err(ERR_SYNTAX);
        }
    }
    if !user_ok {
        return Reply::Int(0);
    }
    let n = kill_where(
        core,
        conn,
        |c| {
            id.is_none_or(|i| c.id == i)
                && addr.as_ref().is_none_or(|a| &c.addr == a)
                && laddr.as_ref().is_none_or(|a| &c.laddr == a)
        },
        skipme,
    );
    Reply::Int(n as i64)
}

/// Kills matching clients; the calling connection closes after its reply instead.
fn kill_where(
    core: &Core,
    conn: &mut ConnState,
    pred: impl Fn(&crate::server::ClientInfo) -> bool,
    skipme: bool,
) -> usize {
    let mut n = 0;
    if let Ok(mut m) = core.global.clients.lock() {
        // Killed clients leave the registry at once (as Redis frees them at once), so they no
        // longer show in CLIENT LIST and a second KILL finds nothing.
        m.retain(|_, c| {
            if !pred(c) || (c.id == conn.id && skipme) {
                return true;
            }
            n += 1;
            if c.id == conn.id {
                conn.close_after_reply = true;
                true
            } else {
                c.kill();
                false
            }
        });
    }
    n
}

async fn flush(core: &Rc<Core>, name: &str, db: usize, args: &[Bytes]) -> Reply {
    if args.len() > 2 || (args.len() == 2 && !is(&args[1], "ASYNC") && !is(&args[1], "SYNC")) {
        return err(ERR_SYNTAX);
    }
    let all = name == "flushall";
    core.on_all(move |s| {
        if all {
            for d in 0..s.dbs.len() {
                s.flush_db(d);
            }
        } else {
            s.flush_db(db);
        }
    })
    .await;
    Reply::Ok
}

async fn swapdb(core: &Rc<Core>, args: &[Bytes]) -> Reply {
    let a = match parse_i64(&args[1]) {
        Some(v) => v,
        None => return err("ERR invalid first DB index"),
    };
    let b = match parse_i64(&args[2]) {
        Some(v) => v,
        None => return err("ERR invalid second DB index"),
    };
    let n = core.global.settings.dbnum as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return err(ERR_DB_RANGE);
    }
    // A running save maps each table to its db as it was at the start.
    if crate::server::snapshot::in_progress(core, false) {
        return err("ERR SWAPDB is not allowed while a save is in progress");
    }
    core.on_all(move |s| s.swap_dbs(a as usize, b as usize))
        .await;
    Reply::Ok
}

async fn keys(core: &Rc<Core>, db: usize, args: &[Bytes]) -> Reply {
    let pattern = args[1].clone();
    let limit = core
        .global
        .settings
        .keys_output_limit
        .load(Ordering::Relaxed) as usize;
    let parts = core
        .on_all(move |s| {
            let now = now_ms();
            let all = pattern.as_ref() == b"*";
            s.dbs[db]
                .table
                .iter()
                .filter(|(k, _, at)| {
                    !is_expired(*at, now)
                        && (all || crate::glob::matches(&pattern, k.as_bytes(), false))
                })
                .take(limit)
                .map(|(k, _, _)| k.to_bytes())
                .collect::<Vec<Bytes>>()
        })
        .await;
    let mut out = Vec::new();
    for p in parts {
        out.extend(p.into_iter().map(Reply::Bulk));
    }
    if out.len() > limit {
        tracing::warn!(limit, "KEYS output truncated to --keys_output_limit");
        out.truncate(limit);
    }
    Reply::Array(out)
}

/// Parses a cursor as Redis does with strtoul: digits with an optional sign (a negative value
/// wraps around), nothing else, no overflow.
fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Bits of a SCAN cursor below the shard index.
const SCAN_SHARD_SHIFT: u32 = 38;

async fn scan(core: &Rc<Core>, db: usize, args: &[Bytes]) -> Reply {
    let Some(mut cursor) = parse_cursor(&args[1]) else {
        return err("ERR invalid cursor");
    };
    let (mut pattern, mut count, mut type_) = (None, 10usize, None);
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return err(ERR_SYNTAX);
        }
        if is(&args[i], "MATCH") {
            pattern = Some(args[i + 1].clone());
        } else if is(&args[i], "COUNT") {
            match parse_i64(&args[i + 1]) {
                Some(c) if c >= 1 => count = c as usize,
                Some(_) => return err(ERR_SYNTAX),
                None => return err(ERR_NOT_INT),
            }
        } else if is(&args[i], "TYPE") {
            type_ = Some(String::from_utf8_lossy(&args[i + 1]).to_ascii_lowercase());
        } else {
            return err(ERR_SYNTAX);
        }
        i += 2;
    }
    let shards = core.global.shards() as u64;
    let mut out: Vec<Reply> = Vec::new();
    loop {
        let shard = cursor >> SCAN_SHARD_SHIFT;
        if shard >= shards {
            cursor = 0;
            break;
        }
        let local = cursor & ((1 << SCAN_SHARD_SHIFT) - 1);
        let (pattern, type_) = (pattern.clone(), type_.clone());
        let want = count.saturating_sub(out.len()).max(1);
        let res = core
            .on_shard(shard as usize, move |s| {
                let now = now_ms();
                let mut found = Vec::new();
                let mut expired = Vec::new();
                let mut visited = 0;
                let mut c = local;
                loop {
                    c = s.dbs[db].table.scan_step(c, |k, e, at| {
                        visited += 1;
                        if is_expired(at, now) {
                            expired.push(k.to_bytes());
                            return;
                        }
                        if let Some(p) = &pattern {
                            if !crate::glob::matches(p, k.as_bytes(), false) {
                                return;
                            }
                        }
                        if let Some(t) = &type_ {
                            if e.type_name() != t {
                                return;
                            }
                        }
                        found.push(k.to_bytes());
                    });
                    if c == 0 || visited >= want {
                        break;
                    }
                }
                // Like Redis, SCAN deletes the expired keys it walks past.
                for k in expired {
                    let _ = s.lookup_mut(db, &k, now);
                }
                (c, found)
            })
            .await;
        let Some((next, found)) = res else {
            return err("ERR server is shutting down");
        };
        out.extend(found.into_iter().map(Reply::Bulk));
        cursor = if next == 0 {
            (shard + 1) << SCAN_SHARD_SHIFT
        } else {
            (shard << SCAN_SHARD_SHIFT) | next
        };
        if next == 0 && shard + 1 >= shards {
            cursor = 0;
            break;
        }
        if out.len() >= count {
            break;
        }
    }
    Reply::Array(vec![
        Reply::bulk(Bytes::from(cursor.to_string())),
        Reply::Array(out),
    ])
}

async fn randomkey(core: &Rc<Core>, db: usize) -> Reply {
    let n = core.global.shards();
    let start = (now_ms() as usize) % n.max(1);
    for k in 0..n {
        let s = (start + k) % n;
        let got = core
            .on_shard(s, move |sh| {
                for _ in 0..16 {
                    let r: Option<(Bytes, bool)> = {
                        let mut seed = sh.rand_u32() as usize;
                        let now = now_ms();
                        sh.dbs[db]
                            .table
                            .random(|m| {
                                seed = seed
                                    .wrapping_mul(6364136223846793005)
                                    .wrapping_add(1442695040888963407);
                                (seed >> 17) % m.max(1)
                            })
                            .map(|(k, _, at)| (k.to_bytes(), is_expired(at, now)))
                    };
                    match r {
                        None => return None,
                        Some((k, false)) => return Some(k),
                        Some((k, true)) => {
                            sh.remove(db, &k);
                        }
                    }
                }
                None
            })
            .await
            .flatten();
        if let Some(k) = got {
            return Reply::Bulk(k);
        }
    }
    Reply::Nil
}

/// Per-shard numbers INFO needs.
#[derive(Clone, Default)]
struct ShardReport {
    stats: ShardStats,
    /// Per db: keys, keys with a TTL, estimated average TTL (ms).
    keys: Vec<(usize, usize, u64)>,
    table_bytes: usize,
    tier: Option<tiering::TierStats>,
}

async fn info(core: &Rc<Core>, args: &[Bytes]) -> Reply {
    let reports = core
        .on_all(|s: &mut Shard| ShardReport {
            stats: s.stats.clone(),
            keys: s
                .dbs
                .iter()
                .map(|d| (d.table.len(), d.volatile, d.avg_ttl))
                .collect(),
            table_bytes: s.dataset_bytes(),
            tier: s.tier.as_ref().map(|t| t.stats()),
        })
        .await;
    let sections: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let everything = sections.is_empty()
        || sections
            .iter()
            .any(|s| s == "all" || s == "everything" || s == "default");
    let want = |name: &str| everything || sections.iter().any(|s| s == name);
    let g = &core.global;
    let mut total = ShardStats::default();
    let mut table_bytes = 0;
    let dbnum = g.settings.dbnum as usize;
    // Per db: keys, keys with a TTL, the shards' average TTLs weighted by those, and the keys
    // with a TTL of the shards that have an estimate yet: a shard whose expiry sweep has not
    // sampled its keys yet (estimate 0) must not pull the average down (right after a write
    // burst one shard's 1000 s keys read as ~500 s beside another's not yet sampled).
    let mut keys = vec![(0usize, 0usize, 0u128, 0usize); dbnum];
    for r in &reports {
        total.keyspace_hits += r.stats.keyspace_hits;
        total.keyspace_misses += r.stats.keyspace_misses;
        total.expired_keys += r.stats.expired_keys;
        total.commands += r.stats.commands;
        total.evicted_ram += r.stats.evicted_ram;
        total.evicted_ssd += r.stats.evicted_ssd;
        table_bytes += r.table_bytes;
        for (i, &(k, v, ttl)) in r.keys.iter().enumerate() {
            if let Some(slot) = keys.get_mut(i) {
                slot.0 += k;
                slot.1 += v;
                if ttl > 0 {
                    slot.2 += u128::from(ttl) * v as u128;
                    slot.3 += v;
                }
            }
        }
    }
    let mut out = String::new();
    let mut section = |title: &str, body: String| {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n{body}");
    };
    let uptime = g.started.elapsed().as_secs();
    if want("server") {
        section(
            "Server",
            format!(
                "redis_version:{REDIS_VERSION}\r\nstrata_version:{}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmultiplexing_api:io_uring\r\nprocess_id:{}\r\nthread_count:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:{}\r\nexecutable:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::process::id(),
                g.shards(),
                g.settings.port,
                uptime / 86400,
                g.settings.hz.load(Ordering::Relaxed),
                std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            ),
        );
    }
    if want("clients") {
        let n = g.clients.lock().map(|m| m.len()).unwrap_or(0);
        section(
            "Clients",
            format!("connected_clients:{n}\r\nblocked_clients:0\r\n"),
        );
    }
    if want("memory") {
        let used = g.note_memory();
        let rss = crate::memory::rss_bytes();
        let peak = g.peak_memory.load(Ordering::Relaxed);
        let max = g.settings.maxmemory();
        section(
            "Memory",
            format!(
                "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_table:{table_bytes}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\ncache_mode:{}\r\nmem_fragmentation_ratio:{:.2}\r\n",
                human_bytes(used),
                human_bytes(rss),
                human_bytes(peak),
                human_bytes(max),
                g.settings.policy_name(),
                u8::from(g.settings.cache_mode),
                if used > 0 { rss as f64 / used as f64 } else { 0.0 },
            ),
        );
    }
    if want("persistence") {
        let dirty = crate::server::snapshot::total_dirty(core).await;
        let backlog: usize = core.on_all(|s| s.snapshot_backlog()).await.iter().sum();
        let p = g.persist.lock().map(|p| p.clone()).ok();
        if let Some(p) = p {
            let now = now_ms();
            let current = if p.in_progress {
                (now.saturating_sub(p.current_started_ms) / 1000) as i64
            } else {
                -1
            };
            section(
                "Persistence",
                format!(
                    "loading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{current}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_save_size:{}\r\nrdb_last_save_keys:{}\r\nrdb_last_save_file:{}\r\nrdb_last_load_keys_loaded:{}\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_skipped:{}\r\nrdb_last_load_time_ms:{}\r\nrdb_save_backlog_bytes:{backlog}\r\naof_enabled:0\r\n",
                    dirty.saturating_sub(p.dirty_at_last_save),
                    u8::from(p.in_progress),
                    p.last_save_unix,
                    if p.last_ok { "ok" } else { "err" },
                    if p.saves > 0 || !p.last_ok { (p.last_duration_ms / 1000) as i64 } else { -1 },
                    p.saves,
                    p.last_bytes,
                    p.last_keys,
                    p.last_file,
                    p.load.keys,
                    p.load.expired,
                    p.load.skipped,
                    p.load.duration_ms,
                ),
            );
        }
    }
    if want("stats") {
        section(
            "Stats",
            format!(
                "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:0\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nevicted_keys_ram:{}\r\nevicted_keys_ssd:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\n",
                g.total_connections.load(Ordering::Relaxed),
                total.commands,
                total.expired_keys,
                total.evicted_ram + total.evicted_ssd,
                total.evicted_ram,
                total.evicted_ssd,
                total.keyspace_hits,
                total.keyspace_misses,
            ),
        );
    }
    if want("replication") {
        section(
            "Replication",
            "role:master\r\nconnected_slaves:0\r\n".to_string(),
        );
    }
    if want("cpu") {
        let (user, sys) = cpu_times();
        section(
            "CPU",
            format!("used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\n"),
        );
    }
    if want("tiered") && g.settings.tiered.is_some() {
        section("TIERED", tiered_section(&reports));
    }
    if want("keyspace") {
        let mut body = String::new();
        for (i, &(k, v, weighted, sampled)) in keys.iter().enumerate() {
            if k > 0 {
                let avg_ttl = if sampled > 0 {
                    weighted / sampled as u128
                } else {
                    0
                };
                let _ = write!(body, "db{i}:keys={k},expires={v},avg_ttl={avg_ttl}\r\n");
            }
        }
        section("Keyspace", body);
    }
    Reply::Verbatim(out)
}

/// INFO's TIERED section: the tier files of all shards together.
fn tiered_section(reports: &[ShardReport]) -> String {
    let mut t = tiering::TierStats::default();
    let (mut keys, mut external, mut offloaded, mut uploaded, mut dropped, mut compacted) =
        (0, 0, 0, 0, 0, 0);
    for r in reports {
        keys += r.keys.iter().map(|k| k.0 as u64).sum::<u64>();
        external += r.stats.external_values;
        offloaded += r.stats.offloaded;
        uploaded += r.stats.uploaded;
        dropped += r.stats.tiered_read_errors;
        compacted += r.stats.compacted;
        if let Some(s) = &r.tier {
            t.entries += s.entries;
            t.value_bytes += s.value_bytes;
            t.stored_bytes += s.stored_bytes;
            t.compressed += s.compressed;
            t.budget_waits += s.budget_waits;
            t.codec = s.codec;
            t.reads += s.reads;
            t.writes += s.writes;
            t.bytes_read += s.bytes_read;
            t.bytes_written += s.bytes_written;
            t.read_errors += s.read_errors;
            t.write_errors += s.write_errors;
            t.pending_reads += s.pending_reads;
            t.pending_writes += s.pending_writes;
            t.coalesced_reads += s.coalesced_reads;
            t.small_pages += s.small_pages;
            t.file_bytes += s.file_bytes;
            t.used_bytes += s.used_bytes;
            t.hole_bytes += s.hole_bytes;
            t.capacity_bytes += s.capacity_bytes;
            t.full_events += s.full_events;
            t.read_p50_us = t.read_p50_us.max(s.read_p50_us);
            t.read_p99_us = t.read_p99_us.max(s.read_p99_us);
        }
    }
    // What the file holds beyond its live values' stored bytes (compressed, they may well
    // be fewer than the values' own).
    let frag = if t.used_bytes > 0 {
        1.0 - (t.stored_bytes as f64 / t.used_bytes as f64).min(1.0)
    } else {
        0.0
    };
    let ratio = if t.value_bytes > 0 {
        t.stored_bytes as f64 / t.value_bytes as f64
    } else {
        1.0
    };
    format!(
        "tiered_entries:{}\r\ntiered_bytes:{}\r\ntiered_stored_bytes:{}\r\n\
         tiered_compression:{}\r\ntiered_compressed_entries:{}\r\ntiered_compression_ratio:{ratio:.3}\r\n\
         tiered_ram_keys:{}\r\ntiered_disk_keys:{external}\r\n\
         tiered_file_size:{}\r\ntiered_file_used:{}\r\ntiered_file_free:{}\r\ntiered_file_capacity:{}\r\n\
         tiered_small_pages:{}\r\ntiered_fragmentation:{frag:.3}\r\n\
         tiered_reads:{}\r\ntiered_writes:{}\r\ntiered_read_bytes:{}\r\ntiered_write_bytes:{}\r\n\
         tiered_pending_reads:{}\r\ntiered_pending_writes:{}\r\ntiered_coalesced_reads:{}\r\n\
         tiered_offloaded:{offloaded}\r\ntiered_uploaded:{uploaded}\r\ntiered_compacted:{compacted}\r\n\
         tiered_read_errors:{}\r\ntiered_write_errors:{}\r\ntiered_unreadable_keys_dropped:{dropped}\r\ntiered_full_events:{}\r\n\
         tiered_read_latency_p50_us:{}\r\ntiered_read_latency_p99_us:{}\r\n\
         tiered_read_budget_waits:{}\r\n",
        t.entries,
        t.value_bytes,
        t.stored_bytes,
        t.codec,
        t.compressed,
        keys.saturating_sub(external),
        t.file_bytes,
        t.used_bytes,
        t.capacity_bytes.saturating_sub(t.used_bytes),
        t.capacity_bytes,
        t.small_pages,
        t.reads,
        t.writes,
        t.bytes_read,
        t.bytes_written,
        t.pending_reads,
        t.pending_writes,
        t.coalesced_reads,
        t.read_errors,
        t.write_errors,
        t.full_events,
        t.read_p50_us,
        t.read_p99_us,
        t.budget_waits,
    )
}

/// Process user and system CPU seconds.
fn cpu_times() -> (f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the ")" of the command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = 100.0;
    let user = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / tick;
    let sys = f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / tick;
    (user, sys)
}

async fn config(core: &Rc<Core>, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let settings = &core.global.settings;
    match sub.as_str() {
        "get" if args.len() >= 3 => {
            let mut pairs = Vec::new();
            for p in &args[2..] {
                for (k, v) in settings.get(p) {
                    if !pairs.iter().any(|(a, _): &(String, String)| a == &k) {
                        pairs.push((k, v));
                    }
                }
            }
            Reply::Map(
                pairs
                    .into_iter()
                    .map(|(k, v)| (Reply::bulk(Bytes::from(k)), Reply::bulk(Bytes::from(v))))
                    .collect(),
            )
        }
        "set" if args.len() >= 4 && args.len().is_multiple_of(2) => {
            for pair in args[2..].chunks(2) {
                let (k, v) = (
                    String::from_utf8_lossy(&pair[0]),
                    String::from_utf8_lossy(&pair[1]),
                );
                if let Err(e) = settings.set(&k, &v) {
                    return Reply::Error(e);
                }
            }
            Reply::Ok
        }
        "resetstat" if args.len() == 2 => {
            core.on_all(|s| {
                s.stats.reset();
                if let Some(t) = &s.tier {
                    t.reset_stats();
                }
            })
            .await;
            core.global.total_connections.store(0, Ordering::Relaxed);
            Reply::Ok
        }
        "rewrite" if args.len() == 2 => err("ERR The server is running without a config file"),
        "help" => help_reply(&[
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "HELP",
            "    Print this help.",
        ]),
        "get" | "set" | "resetstat" | "rewrite" => Reply::Error(format!(
            "ERR wrong number of arguments for 'config|{sub}' command"
        )),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

fn command_info(s: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::bulk_str(s.name),
        Reply::Int(s.arity as i64),
        Reply::Set(s.flag_names().into_iter().map(Reply::Status).collect()),
        Reply::Int(s.first_key.max(0) as i64),
        Reply::Int(if s.first_key > 0 {
            s.last_key as i64
        } else {
            0
        }),
        Reply::Int(if s.first_key > 0 { s.step as i64 } else { 0 }),
        Reply::Set(vec![]),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
}

fn command_docs(s: &Spec) -> Reply {
    Reply::Map(vec![
        (Reply::bulk_str("summary"), Reply::bulk_str(s.summary)),
        (Reply::bulk_str("since"), Reply::bulk_str(s.since)),
        (Reply::bulk_str("group"), Reply::bulk_str(s.group)),
    ])
}

fn command(args: &[Bytes]) -> Reply {
    if args.len() == 1 {
        return Reply::Array(TABLE.iter().map(command_info).collect());
    }
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "count" if args.len() == 2 => Reply::Int(TABLE.len() as i64),
        "info" => {
            if args.len() == 2 {
                return Reply::Array(TABLE.iter().map(command_info).collect());
            }
            Reply::Array(
                args[2..]
                    .iter()
                    .map(|n| super::lookup(n).map(command_info).unwrap_or(Reply::Nil))
                    .collect(),
            )
        }
        "docs" => {
            let specs: Vec<&Spec> = if args.len() == 2 {
                TABLE.iter().collect()
            } else {
                args[2..].iter().filter_map(|n| super::lookup(n)).collect()
            };
            Reply::Map(
                specs
                    .into_iter()
                    .map(|s| (Reply::bulk_str(s.name), command_docs(s)))
                    .collect(),
            )
        }
        "list" => {
            let mut names: Vec<&Spec> = TABLE.iter().collect();
            if args.len() > 2 {
                if args.len() != 5 || !is(&args[2], "FILTERBY") {
                    return err(ERR_SYNTAX);
                }
                let v = args[4].clone();
                if is(&args[3], "PATTERN") {
                    names.retain(|s| crate::glob::matches(&v, s.name.as_bytes(), true));
                } else if is(&args[3], "ACLCAT") || is(&args[3], "MODULE") {
                    if is(&args[3], "MODULE") {
                        names.clear();
                    }
                } else {
                    return err(ERR_SYNTAX);
                }
            }
            Reply::Array(names.into_iter().map(|s| Reply::bulk_str(s.name)).collect())
        }
        "getkeys" if args.len() >= 3 => {
            let Some(spec) = super::lookup(&args[2]) else {
                return err("ERR Invalid command specified");
            };
            let cmd_args = &args[2..];
            if !spec.arity_ok(cmd_args.len()) {
                return err("ERR Invalid number of arguments specified for command");
            }
            let keys: Vec<Reply> = spec
                .key_indices(cmd_args.len())
                .map(|i| Reply::Bulk(cmd_args[i].clone()))
                .collect();
            if keys.is_empty() {
                return err("ERR The command has no key arguments");
            }
            Reply::Array(keys)
        }
        "help" => help_reply(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
            "HELP",
            "    Print this help.",
        ]),
        _ => Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

async fn debug(core: &Rc<Core>, conn: &ConnState, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "populate" if (3..=5).contains(&args.len()) => {
            let Some(count) = parse_i64(&args[2]).filter(|&c| c >= 0) else {
                return err("ERR value is out of range, must be positive");
            };
            let prefix = args
                .get(3)
                .cloned()
                .unwrap_or_else(|| Bytes::from_static(b"key"));
            let size = match args.get(4).map(|a| parse_i64(a)) {
                None => None,
                Some(Some(s)) if s >= 0 => Some(s as usize),
                Some(_) => return err(ERR_NOT_INT),
            };
            let db = conn.db;
            let shards = core.global.shards();
            core.on_all(move |s| {
                let now = now_ms();
                for i in 0..count as u64 {
                    let mut key = Vec::with_capacity(prefix.len() + 21);
                    key.extend_from_slice(&prefix);
                    key.push(b':');
                    key.extend_from_slice(i.to_string().as_bytes());
                    if shard_of(&key, shards) != s.id || s.contains(db, &key, now) {
                        continue;
                    }
                    let mut val = format!("value:{i}").into_bytes();
                    if let Some(sz) = size {
                        val.resize(sz, 0);
                    }
                    s.store(db, &key, Value::str(&val), 0);
                }
            })
            .await;
            Reply::Ok
        }
        "sleep" if args.len() == 3 => {
            let Some(secs) =
                crate::cmd::args::parse_f64(&args[2]).filter(|s| *s >= 0.0 && s.is_finite())
            else {
                return err(ERR_NOT_FLOAT);
            };
            glommio::timer::sleep(std::time::Duration::from_secs_f64(secs)).await;
            Reply::Ok
        }
        "set-active-expire" if args.len() == 3 => {
            core.global.set_active_expire(args[2].as_ref() != b"0");
            Reply::Ok
        }
        "object" if args.len() == 3 => {
            let key = args[2].clone();
            let db = conn.db;
            let n = core.global.shards();
            let r = core
                .on_shard(shard_of(&key, n), move |s| {
                    let clock = s.clock();
                    s.lookup_mut(db, &key, now_ms()).map(|e| {
                        let len = e.value_len();
                        format!(
                            "Value at:0x0 refcount:1 encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
                            super::keys::encoding_of(e),
                            len,
                            e.meta & crate::shard::entry::CLOCK_MASK,
                            e.idle_seconds(clock)
                        )
                    })
                })
                .await
                .flatten();
            match r {
                Some(s) => Reply::StatusOwned(s),
                None => err(ERR_NO_KEY),
            }
        }
        "help" => help_reply(&[
            "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "OBJECT <key>",
            "    Show low level info about the key and associated value.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "HELP",
            "    Print this help.",
        ]),
        _ => Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

async fn memory(core: &Rc<Core>, db: usize, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "usage" if args.len() == 3 || (args.len() == 5 && is(&args[3], "SAMPLES")) => {
            if args.len() == 5 && parse_i64(&args[4]).is_none() {
                return err(ERR_NOT_INT);
            }
            let key = args[2].clone();
            let n = core.global.shards();
            let r = core
                .on_shard(shard_of(&key, n), move |s| {
                    s.lookup_mut(db, &key, now_ms()).map(|e| {
                        // The slab element (key and entry handles), its slot (id and
                        // fingerprint), plus whatever the key and value hold on the heap.
                        let slot = 32 + 5;
                        let key_heap = if key.len() > crate::shard::entry::KEY_INLINE { key.len() + 4 } else { 0 };
                        slot + key_heap + e.heap_bytes()
                    })
                })
                .await
                .flatten();
            match r {
                Some(b) => Reply::Int(b as i64),
                None => Reply::Nil,
            }
        }
        "stats" if args.len() == 2 => {
            let used = core.global.note_memory();
            let keys: usize = core.on_all(|s| s.key_count()).await.iter().sum();
            let table: usize = core.on_all(|s| s.dataset_bytes()).await.iter().sum();
            Reply::Map(vec![
                (Reply::bulk_str("peak.allocated"), Reply::Int(core.global.peak_memory.load(Ordering::Relaxed) as i64)),
                (Reply::bulk_str("total.allocated"), Reply::Int(used as i64)),
                (Reply::bulk_str("keys.count"), Reply::Int(keys as i64)),
                (
                    Reply::bulk_str("keys.bytes-per-key"),
                    Reply::Int(if keys > 0 { (used / keys as u64) as i64 } else { 0 }),
                ),
                (Reply::bulk_str("dataset.table"), Reply::Int(table as i64)),
                (Reply::bulk_str("rss"), Reply::Int(crate::memory::rss_bytes() as i64)),
            ])
        }
        "doctor" if args.len() == 2 => Reply::Verbatim("Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.".into()),
        "help" => help_reply(&[
                "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return memory problems reports.",
                "STATS",
                "    Return information about the memory usage of the server.",
                "USAGE <key> [SAMPLES <count>]",
                "    Return memory in bytes used by <key> and its value. Nested values are",
                "    sampled up to <count> times (default: 5, 0 means sample all).",
                "HELP",
                "    Print this help.",
            ]),
        _ => Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

/// SAVE [RDB|DF] [NAME]: a snapshot in the foreground of this connection (the server keeps
/// serving everyone else). RDB/DF pick the format (Dragonfly's words), NAME the file name.
async fn save(core: &Rc<Core>, args: &[Bytes]) -> Reply {
    use crate::server::snapshot::{self, Format};
    let mut format = None;
    let mut name = None;
    for a in &args[1..] {
        if format.is_none() && name.is_none() && is(a, "RDB") {
            format = Some(Format::Rdb);
        } else if format.is_none() && name.is_none() && is(a, "DF") {
            format = Some(Format::Strata);
        } else if name.is_none() {
            let n = String::from_utf8_lossy(a).to_string();
            if n.is_empty() || n.contains('/') {
                return err("ERR invalid snapshot name: a file name without '/' is expected");
            }
            name = Some(n);
        } else {
            return err(ERR_SYNTAX);
        }
    }
    match snapshot::save(core, format, name).await {
        Ok(_) => Reply::Ok,
        Err(e) => Reply::Error(e),
    }
}

/// BGSAVE [SCHEDULE]: starts a save and answers at once.
async fn bgsave(core: &Rc<Core>, args: &[Bytes]) -> Reply {
    use crate::server::snapshot;
    let schedule = match args.len() {
        1 => false,
        2 if is(&args[1], "SCHEDULE") => true,
        _ => return err(ERR_SYNTAX),
    };
    if snapshot::in_progress(core, schedule) {
        if schedule {
            return Reply::Status("Background saving scheduled");
        }
        return err(snapshot::IN_PROGRESS);
    }
    // Answered once the point in time is set: later writes are not in the snapshot.
    match snapshot::bgsave(core).await {
        Ok(Ok(())) => Reply::Status("Background saving started"),
        Ok(Err(e)) => Reply::Error(e),
        Err(_) => err("ERR server is shutting down"),
    }
}

async fn shutdown(core: &Rc<Core>, args: &[Bytes]) -> Reply {
    let mut save = None;
    for a in &args[1..] {
        if is(a, "NOSAVE") {
            save = Some(false);
        } else if is(a, "SAVE") {
            save = Some(true);
        } else if is(a, "NOW") || is(a, "FORCE") {
        } else if is(a, "ABORT") {
            return err("ERR No shutdown in progress.");
        } else {
            return err(ERR_SYNTAX);
        }
    }
    tracing::info!("SHUTDOWN requested by a client");
    if save == Some(false) {
        core.global.remove_tier_files();
        std::process::exit(0);
    }
    match crate::server::snapshot::shutdown(core, save == Some(true)).await {
        Ok(()) => Reply::Ok,
        Err(e) => {
            tracing::warn!("SHUTDOWN SAVE failed, not exiting: {e}");
            err("ERR Errors trying to SHUTDOWN. Check logs.")
        }
    }
}

//! Keyspace-wide commands that fan out to every shard: DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, KEYS,
//! SCAN, RANDOMKEY.
//!
//! Never: holds a shard for more than one step of a walk (SCAN, KEYS).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::args::*;
use crate::protocol::Reply;
use crate::server::table::Call;
use crate::shard::{is_expired, now_ms};

pub async fn dbsize(Call { core, session, .. }: Call<'_>) -> Reply {
    let db = session.db;
    let counts = core.on_all(move |s| s.dbs[db].table.len()).await;
    Reply::Int(counts.iter().sum::<usize>() as i64)
}

pub async fn flushdb(call: Call<'_>) -> Reply {
    flush(call, false).await
}

pub async fn flushall(call: Call<'_>) -> Reply {
    flush(call, true).await
}

async fn flush(call: Call<'_>, all: bool) -> Reply {
    let (core, session, args) = call.parts();
    let mut opts = ArgCursor::new(&args, 1);
    let _ = opts.eat("ASYNC") || opts.eat("SYNC");
    if let Err(e) = opts.finish() {
        return e;
    }
    let db = session.db;
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
    crate::server::tracking::flushed(&core.global, session.id);
    Reply::Ok
}

pub async fn swapdb(Call { core, args, .. }: Call<'_>) -> Reply {
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

pub async fn keys(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    let db = session.db;
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

/// Bits of a SCAN cursor below the shard index.
const SCAN_SHARD_SHIFT: u32 = 38;

pub async fn scan(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    let db = session.db;
    let Some(mut cursor) = parse_cursor(&args[1]) else {
        return err("ERR invalid cursor");
    };
    let (mut pattern, mut count, mut type_) = (None, 10usize, None);
    let mut opts = ArgCursor::new(&args, 2);
    loop {
        if let Some(p) = opts.eat_with_value("MATCH") {
            pattern = Some(p.clone());
        } else if let Some(c) = opts.eat_with_value("COUNT") {
            match parse_i64(c) {
                Some(c) if c >= 1 => count = c as usize,
                Some(_) => return err(ERR_SYNTAX),
                None => return err(ERR_NOT_INT),
            }
        } else if let Some(t) = opts.eat_with_value("TYPE") {
            type_ = Some(String::from_utf8_lossy(t).to_ascii_lowercase());
        } else {
            break;
        }
    }
    if let Err(e) = opts.finish() {
        return e;
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

pub async fn randomkey(Call { core, session, .. }: Call<'_>) -> Reply {
    let db = session.db;
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

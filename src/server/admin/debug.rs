//! DEBUG, MEMORY and TIME: diagnostics.
//!
//! Never: changes data except DEBUG POPULATE's new keys.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::cmd::args::*;
use crate::cmd::help_reply;
use crate::protocol::Reply;
use crate::server::table::Call;
use crate::shard::{now_ms, shard_of, Value};

pub fn time(_: Call<'_>) -> Reply {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Reply::Array(vec![
        Reply::bulk(Bytes::from(d.as_secs().to_string())),
        Reply::bulk(Bytes::from(d.subsec_micros().to_string())),
    ])
}

pub async fn debug(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
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
            let db = session.db;
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
            let db = session.db;
            let n = core.global.shards();
            let r = core
                .on_shard(shard_of(&key, n), move |s| {
                    let clock = s.clock();
                    s.lookup_mut(db, &key, now_ms()).map(|e| {
                        let len = e.value_len();
                        format!(
                            "Value at:0x0 refcount:1 encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
                            e.encoding(),
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
        _ => crate::cmd::unknown_subcommand("DEBUG", &args[1], true),
    }
}

pub async fn memory(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    let db = session.db;
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
        _ => crate::cmd::unknown_subcommand("MEMORY", &args[1], true),
    }
}

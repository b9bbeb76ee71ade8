//! The memcached side of the dispatcher: the specs of memcached's operations (all run
//! `cmd::memcache::run` on the key's shard) and the counters `stats` and INFO report
//! (process-wide, and per key prefix for `stats detail`).
//!
//! The specs are not in the command table: RESP clients can neither see them (COMMAND) nor
//! call them (name lookup). Everything else about them is as for any keyed command, so
//! tiering, OOM checks, cache-mode eviction, shard grouping and pipelining apply unchanged.
//!
//! Never: parses or encodes memcached's wire formats (`protocol::memcache`), or touches a
//! socket (`net::memcache`).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;

use super::core::Core;
use super::dispatch::Request;
use super::table::{Exec, Spec, DENYOOM, FAST, READONLY, READS_VALUE, WRITE};
use crate::cmd::memcache::{request_args, run, Op};

const fn spec(name: &'static str, flags: u32) -> Spec {
    Spec {
        name,
        arity: -3,
        flags,
        first_key: 1,
        last_key: 1,
        step: 1,
        exec: Exec::Keyed(run),
        group: "memcached",
        since: "",
        summary: "",
        numkeys: None,
    }
}

/// A read that returns the value (get, gets, mg v, binary get).
pub static GET: Spec = spec("mc_get", READONLY | FAST | READS_VALUE);
/// A read that also changes the expiry or may create the item (gat, mg T/N with v).
pub static GET_WRITE: Spec = spec("mc_gat", WRITE | FAST | READS_VALUE);
/// A read of metadata only: an offloaded value stays on disk (mg without v).
pub static PEEK: Spec = spec("mc_peek", READONLY | FAST);
/// [`PEEK`] that changes the expiry or may create the item.
pub static PEEK_WRITE: Spec = spec("mc_peek_write", WRITE | FAST);
pub static STORE: Spec = spec("mc_set", WRITE | DENYOOM);
/// append / prepend: the old value is read.
pub static CONCAT: Spec = spec("mc_append", WRITE | DENYOOM | READS_VALUE);
pub static DELETE: Spec = spec("mc_delete", WRITE | FAST);
pub static ARITH: Spec = spec("mc_incr", WRITE | DENYOOM | FAST | READS_VALUE);
pub static TOUCH: Spec = spec("mc_touch", WRITE | FAST);

/// A dispatcher request running `op` on `key` under `spec`.
pub fn request(spec: &'static Spec, key: Bytes, op: &Op, value: Option<Bytes>) -> Request {
    Request {
        spec: Some(spec),
        args: request_args(spec.name, key, op, value),
    }
}

/// flush_all: empties db 0 on every shard now, or after `delay` seconds (memcached then
/// drops every item last written before that moment: the same as emptying it then).
pub async fn flush(core: &Rc<Core>, delay: u64) {
    if delay == 0 {
        core.on_all(|s| s.flush_db(0)).await;
        return;
    }
    let c = core.clone();
    crate::runtime::spawn(async move {
        glommio::timer::sleep(Duration::from_secs(delay)).await;
        c.on_all(|s| s.flush_db(0)).await;
    })
    .detach();
}

/// What `stats` reports of the keyspace: items (keys of db 0), the bytes memcached would use
/// for them ([`item_bytes`]), and the keys evicted since the start or the last `stats reset`.
pub struct ItemCounts {
    pub items: u64,
    pub bytes: u64,
    pub evictions: u64,
}

pub async fn item_counts(core: &Rc<Core>) -> ItemCounts {
    let per = core
        .on_all(|s| {
            (
                s.dbs[0].table.len() as u64,
                s.dbs[0].table.sum_with_meta(|k, e, meta| {
                    item_bytes(k.as_bytes().len(), e.value_len(), meta.client_flags)
                }),
                s.stats.evicted_ram + s.stats.evicted_ssd,
            )
        })
        .await;
    let (items, bytes, evicted) = per
        .iter()
        .fold((0, 0, 0), |(a, b, c), (x, y, z)| (a + x, b + y, c + z));
    let base = STATS.evictions_at_reset.load(Ordering::Relaxed);
    ItemCounts {
        items,
        bytes,
        evictions: evicted.saturating_sub(base),
    }
}

/// memcached's ITEM_ntotal, what its `bytes` counts per item: a 48-byte header, the 8-byte
/// CAS, the key and its NUL, the value and its CRLF, and 4 bytes of client flags when they are
/// not 0.
pub fn item_bytes(key_len: usize, value_len: usize, client_flags: u32) -> u64 {
    let flags = if client_flags != 0 { 4 } else { 0 };
    48 + 8 + key_len as u64 + 1 + value_len as u64 + 2 + flags
}

/// `stats reset`: the counters start again, and evictions count from here.
pub async fn reset(core: &Rc<Core>) {
    STATS.reset();
    DETAIL.clear();
    let evicted: u64 = core
        .on_all(|s| s.stats.evicted_ram + s.stats.evicted_ssd)
        .await
        .iter()
        .sum();
    STATS.evictions_at_reset.store(evicted, Ordering::Relaxed);
}

/// Counters of the memcached port, for `stats` and INFO (process-wide, all cores).
#[derive(Default)]
pub struct McStats {
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub commands: AtomicU64,
    pub cmd_get: AtomicU64,
    pub cmd_set: AtomicU64,
    pub cmd_flush: AtomicU64,
    pub cmd_touch: AtomicU64,
    pub cmd_meta: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
    pub get_expired: AtomicU64,
    pub delete_hits: AtomicU64,
    pub delete_misses: AtomicU64,
    pub incr_hits: AtomicU64,
    pub incr_misses: AtomicU64,
    pub decr_hits: AtomicU64,
    pub decr_misses: AtomicU64,
    pub cas_hits: AtomicU64,
    pub cas_misses: AtomicU64,
    pub cas_badval: AtomicU64,
    pub touch_hits: AtomicU64,
    pub touch_misses: AtomicU64,
    pub auth_cmds: AtomicU64,
    pub auth_errors: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    pub total_items: AtomicU64,
    pub store_too_large: AtomicU64,
    pub store_no_memory: AtomicU64,
    /// Keys evicted (all shards) at the last `stats reset`.
    evictions_at_reset: AtomicU64,
}

macro_rules! counters {
    ($($f:ident),* $(,)?) => {
        impl McStats {
            /// (name, value) of the command counters, in memcached's `stats` order.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($f), self.$f.load(Ordering::Relaxed))),*]
            }

            /// `stats reset`: the counters start again (current connections stay).
            fn reset(&self) {
                $(self.$f.store(0, Ordering::Relaxed);)*
                self.total_items.store(0, Ordering::Relaxed);
                self.total_connections.store(0, Ordering::Relaxed);
            }
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    get_expired,
    delete_misses,
    delete_hits,
    incr_misses,
    incr_hits,
    decr_misses,
    decr_hits,
    cas_misses,
    cas_hits,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
    auth_cmds,
    auth_errors,
    bytes_read,
    bytes_written,
);

impl McStats {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// The memcached port's counters.
pub static STATS: std::sync::LazyLock<McStats> = std::sync::LazyLock::new(McStats::default);

/// memcached's `stats detail`: per key prefix (up to the first ':'), the gets, hits, sets and
/// deletes seen while it is on. Off by default; when off the hot path pays one relaxed load.
#[derive(Default)]
pub struct PrefixStats {
    on: AtomicBool,
    counts: Mutex<BTreeMap<Vec<u8>, [u64; 4]>>,
}

/// What [`PrefixStats::count`] counts.
#[derive(Clone, Copy)]
pub enum PrefixOp {
    Get = 0,
    Hit = 1,
    Set = 2,
    Delete = 3,
}

/// memcached's stat_key_prefix.
pub const PREFIX_DELIMITER: u8 = b':';

impl PrefixStats {
    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    /// Counts `op` on `key` when detail is on and the key has a prefix.
    pub fn count(&self, key: &[u8], op: PrefixOp) {
        if !self.enabled() {
            return;
        }
        let Some(end) = key.iter().position(|&b| b == PREFIX_DELIMITER) else {
            return;
        };
        if let Ok(mut m) = self.counts.lock() {
            let c = m.entry(key[..end].to_vec()).or_default();
            c[op as usize] += 1;
        }
    }

    /// `stats detail dump`: one PREFIX line per prefix (in byte order), then END.
    pub fn dump(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Ok(m) = self.counts.lock() {
            for (p, c) in m.iter() {
                out.extend_from_slice(b"PREFIX ");
                out.extend_from_slice(p);
                out.extend_from_slice(
                    format!(" get {} hit {} set {} del {}\r\n", c[0], c[1], c[2], c[3]).as_bytes(),
                );
            }
        }
        out.extend_from_slice(b"END\r\n");
        out
    }

    fn clear(&self) {
        if let Ok(mut m) = self.counts.lock() {
            m.clear();
        }
    }
}

/// The `stats detail` counters.
pub static DETAIL: std::sync::LazyLock<PrefixStats> =
    std::sync::LazyLock::new(PrefixStats::default);

/// INFO's memcached section.
pub fn info_section(port: u16) -> String {
    let s = &*STATS;
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    format!(
        "memcached_port:{port}\r\nmemcached_connected_clients:{}\r\nmemcached_total_connections:{}\r\nmemcached_commands_processed:{}\r\nmemcached_get_hits:{}\r\nmemcached_get_misses:{}\r\nmemcached_cmd_set:{}\r\n",
        load(&s.curr_connections),
        load(&s.total_connections),
        load(&s.commands),
        load(&s.get_hits),
        load(&s.get_misses),
        load(&s.cmd_set),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::table;

    #[test]
    fn resp_clients_cannot_name_the_memcached_specs() {
        for s in [
            &GET,
            &GET_WRITE,
            &PEEK,
            &PEEK_WRITE,
            &STORE,
            &CONCAT,
            &DELETE,
            &ARITH,
            &TOUCH,
        ] {
            assert!(table::lookup(s.name.as_bytes()).is_none(), "{}", s.name);
            assert_eq!(s.index(), u32::MAX, "{} is outside the table", s.name);
        }
    }
}

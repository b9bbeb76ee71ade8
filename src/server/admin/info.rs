//! INFO: the server's sections, summed over every shard.
//!
//! Never: changes anything it reports.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::connection::REDIS_VERSION;
use crate::protocol::Reply;
use crate::server::cmdstats;
use crate::server::human_bytes;
use crate::server::table::Call;
use crate::shard::{now_ms, Shard, ShardStats};

/// Per-shard numbers INFO needs.
#[derive(Clone, Default)]
struct ShardReport {
    stats: ShardStats,
    /// Per db: keys, keys with a TTL, estimated average TTL (ms).
    keys: Vec<(usize, usize, u64)>,
    table_bytes: usize,
    tier: Option<tiering::TierStats>,
    /// Pins commands in flight hold on keys (`shard::pins`).
    pinned: u64,
    /// The core's command and error counts (`server::cmdstats`).
    commands: cmdstats::Report,
}

/// The sections plain INFO (and INFO default) shows: Redis' defaults, and Strata's own.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "errorstats",
    "tiered",
    "memcached",
    "keyspace",
];

pub async fn info(Call { core, args, .. }: Call<'_>) -> Reply {
    let mut sections: Vec<String> = Vec::new();
    let mut all = false;
    for a in &args[1..] {
        let name = String::from_utf8_lossy(a).to_ascii_lowercase();
        match name.as_str() {
            "all" | "everything" => all = true,
            "default" => sections.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string())),
            _ => sections.push(name),
        }
    }
    if args.len() == 1 {
        sections.extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }
    let want = |name: &str| all || sections.iter().any(|s| s == name);
    let histograms = want("latencystats");
    let reports = core
        .on_all(move |s: &mut Shard| ShardReport {
            stats: s.stats.clone(),
            keys: s
                .dbs
                .iter()
                .map(|d| (d.table.len(), d.volatile, d.avg_ttl))
                .collect(),
            table_bytes: s.dataset_bytes(),
            tier: s.tier.as_ref().map(|t| t.stats()),
            pinned: s.pins.held(),
            commands: cmdstats::snapshot(histograms),
        })
        .await;
    let g = &core.global;
    let mut total = ShardStats::default();
    let mut table_bytes = 0;
    let dbnum = g.settings.dbnum as usize;
    // Per db: keys, keys with a TTL, the shards' average TTLs weighted by those, and the keys
    // with a TTL of the shards that have an estimate yet: a shard whose expiry sweep has not
    // sampled its keys yet (estimate 0) must not pull the average down (right after a write
    // burst one shard's 1000 s keys read as ~500 s beside another's not yet sampled).
    let mut keys = vec![(0usize, 0usize, 0u128, 0usize); dbnum];
    // What busy scripts' hooks ran for their cores' clients.
    total.commands += crate::server::script::busy::commands_ran();
    let commands = cmdstats::Report::sum(reports.iter().map(|r| &r.commands));
    for r in &reports {
        total.keyspace_hits += r.stats.keyspace_hits;
        total.keyspace_misses += r.stats.keyspace_misses;
        total.expired_keys += r.stats.expired_keys;
        total.expired_fields += r.stats.expired_fields;
        total.commands += r.stats.commands;
        total.evicted_ram += r.stats.evicted_ram;
        total.evicted_ssd += r.stats.evicted_ssd;
        total.active_defrag_hits += r.stats.active_defrag_hits;
        total.active_defrag_misses += r.stats.active_defrag_misses;
        total.active_defrag_running = total
            .active_defrag_running
            .max(r.stats.active_defrag_running);
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
        let n = g.clients.len();
        section(
            "Clients",
            format!(
                "connected_clients:{n}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\n",
                crate::server::blocking::blocked_clients(g),
                g.tracking.clients()
            ),
        );
    }
    if want("memory") {
        let used = g.note_memory();
        let rss = crate::memory::rss_bytes();
        let peak = g.peak_memory.load(Ordering::Relaxed);
        let max = g.settings.maxmemory();
        // Zeros where jemalloc does not serve the heap, as Redis shows them built with libc.
        let alloc = crate::memory::allocator_stats().unwrap_or_default();
        section(
            "Memory",
            format!(
                "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_table:{table_bytes}\r\nallocator_allocated:{}\r\nallocator_active:{}\r\nallocator_resident:{}\r\nmaxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{}\r\ncache_mode:{}\r\nallocator_frag_ratio:{:.2}\r\nallocator_frag_bytes:{}\r\nmem_fragmentation_ratio:{:.2}\r\nused_memory_scripts:{}\r\nnumber_of_cached_scripts:{}\r\nmem_allocator:{}\r\nactive_defrag_running:{}\r\nlazyfree_pending_objects:{}\r\n",
                human_bytes(used),
                human_bytes(rss),
                human_bytes(peak),
                alloc.allocated,
                alloc.active,
                alloc.resident,
                human_bytes(max),
                g.settings.policy_name(),
                u8::from(g.settings.cache_mode),
                alloc.frag_ratio(),
                alloc.frag_bytes(),
                if used > 0 { rss as f64 / used as f64 } else { 0.0 },
                crate::server::script::cached_scripts().1,
                crate::server::script::cached_scripts().0,
                crate::memory::allocator_name(),
                total.active_defrag_running,
                crate::shard::lazyfree::pending(),
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
                    "loading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{current}\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_save_size:{}\r\nrdb_last_save_keys:{}\r\nrdb_last_save_file:{}\r\nrdb_last_load_keys_loaded:{}\r\nrdb_last_load_keys_expired:{}\r\nrdb_last_load_keys_skipped:{}\r\nrdb_last_load_time_ms:{}\r\nrdb_save_backlog_bytes:{backlog}\r\nrdb_last_save_peak_buffered_bytes:{}\r\naof_enabled:0\r\n",
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
                    p.last_peak_buffered,
                ),
            );
        }
    }
    if want("stats") {
        section(
            "Stats",
            format!(
                "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:0\r\nexpired_keys:{}\r\nexpired_subkeys:{}\r\nevicted_keys:{}\r\nevicted_keys_ram:{}\r\nevicted_keys_ssd:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\nactive_defrag_hits:{}\r\nactive_defrag_misses:{}\r\nlazyfreed_objects:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\nunexpected_error_replies:0\r\ntotal_error_replies:{}\r\n",
                g.total_connections.load(Ordering::Relaxed),
                total.commands,
                total.expired_keys,
                total.expired_fields,
                total.evicted_ram + total.evicted_ssd,
                total.evicted_ram,
                total.evicted_ssd,
                total.keyspace_hits,
                total.keyspace_misses,
                g.pubsub.channels(false),
                g.pubsub.patterns(),
                g.pubsub.channels(true),
                total.active_defrag_hits,
                total.active_defrag_misses,
                crate::shard::lazyfree::freed(),
                crate::shard::tracking::total_keys(),
                crate::shard::tracking::total_items(),
                g.tracking.prefixes(),
                commands.total_error_replies(),
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
    if want("commandstats") {
        section("Commandstats", commands.commandstats());
    }
    if want("errorstats") {
        section("Errorstats", commands.errorstats());
    }
    if want("latencystats") {
        let body = if g.settings.latency_tracking() {
            commands.latencystats(&g.settings.latency_percentiles())
        } else {
            String::new()
        };
        section("Latencystats", body);
    }
    if want("tiered") && g.settings.tiered.is_some() {
        section("TIERED", tiered_section(&reports));
    }
    if want("memcached") && g.settings.memcached_port != 0 {
        section(
            "Memcached",
            crate::server::memcache::info_section(g.settings.memcached_port),
        );
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
    let (mut coll_out, mut coll_in, mut encodes, mut pinned) = (0, 0, 0, 0);
    let (mut no_space, mut field_loads, mut steps, mut steps_dropped) = (0, 0, 0, 0);
    let mut rounds = 0;
    for r in reports {
        rounds += r.stats.offload_rounds;
        steps += r.stats.collection_steps;
        steps_dropped += r.stats.collection_steps_dropped;
        no_space += r.stats.collections_no_space;
        field_loads += r.stats.field_expiry_loads;
        encodes += r.stats.collection_encodes;
        pinned += r.pinned;
        coll_out += r.stats.offloaded_collections;
        coll_in += r.stats.loaded_collections;
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
         tiered_collection_offloads:{coll_out}\r\ntiered_collection_loads:{coll_in}\r\n\
         tiered_collection_encodes:{encodes}\r\ntiered_collection_no_space:{no_space}\r\n\
         tiered_collection_encoding_in_steps:{steps}\r\ntiered_collection_steps_dropped:{steps_dropped}\r\n\
         tiered_field_expiry_loads:{field_loads}\r\ntiered_pinned_keys:{pinned}\r\n\
         tiered_offload_rounds:{rounds}\r\n\
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
pub fn cpu_times() -> (f64, f64) {
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

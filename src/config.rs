//! Command-line flags (Dragonfly's names) and the settings CONFIG GET/SET can change at run time.
//!
//! Flags are parsed once at start; `--flagfile FILE` splices the file's `--flag=value` lines in
//! front of the command line, so the command line wins. Settings that CONFIG SET may change live
//! in [`Settings`], shared by every core through atomics (read on the hot path without locks).
//!
//! Never: depends on anything above it; a setting read on the hot path never takes a lock.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::RwLock;

use clap::Parser;

use crate::memory::parse_memory;

/// Strata: a Redis-compatible cache server that keeps hot data in RAM.
#[derive(Parser, Debug, Clone)]
#[command(name = "strata", version, args_override_self = true)]
pub struct Flags {
    /// TCP port for RESP clients.
    #[arg(long, default_value_t = 6379)]
    pub port: u16,

    /// Address to listen on (default: loopback only; use 0.0.0.0 to listen everywhere).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,

    /// Password clients must give with AUTH or HELLO before any other command (empty = none).
    #[arg(long, default_value = "")]
    pub requirepass: String,

    /// Memory limit in bytes, or with a unit (e.g. 512mb, 4gb); 0 = no limit.
    #[arg(long, default_value = "0", value_parser = parse_mem_flag)]
    pub maxmemory: u64,

    /// Number of logical databases (SELECT 0..dbnum-1).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub dbnum: u32,

    /// Background task frequency (active expiry ticks per second).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=500))]
    pub hz: u32,

    /// Maximum number of keys KEYS may return before it fails.
    #[arg(
        long = "keys_output_limit",
        alias = "keys-output-limit",
        default_value_t = 8192
    )]
    pub keys_output_limit: u64,

    /// Worker threads, one shard each, pinned one per core; 0 = one per available core.
    #[arg(
        long = "proactor_threads",
        alias = "proactor-threads",
        default_value_t = 0
    )]
    pub proactor_threads: usize,

    /// Read more flags from FILE (lines of `--name=value`; `#` starts a comment).
    #[arg(long)]
    pub flagfile: Option<String>,

    /// Turns on SSD tiering: each shard keeps cold values in the file PATH-NNNN.ssd
    /// (O_DIRECT, created at start, removed at exit). The directory must exist.
    #[arg(long = "tiered_prefix", alias = "tiered-prefix")]
    pub tiered_prefix: Option<String>,

    /// Size limit of all tier files together (split between shards), bytes or 10gb-style;
    /// 0 = 80% of the free space of the filesystem holding them.
    #[arg(long = "tiered_max_file_size", alias = "tiered-max-file-size", default_value = "0", value_parser = parse_mem_flag)]
    pub tiered_max_file_size: u64,

    /// Offload cold values once used memory passes this fraction of maxmemory.
    #[arg(long = "tiered_offload_threshold", alias = "tiered-offload-threshold", default_value_t = 0.5, value_parser = parse_fraction)]
    pub tiered_offload_threshold: f64,

    /// A value read twice within a short window returns to RAM while used memory is under this
    /// fraction of maxmemory.
    #[arg(long = "tiered_upload_threshold", alias = "tiered-upload-threshold", default_value_t = 0.9, value_parser = parse_fraction)]
    pub tiered_upload_threshold: f64,

    /// Values shorter than this never leave RAM.
    #[arg(
        long = "tiered_min_value_size",
        alias = "tiered-min-value-size",
        default_value_t = 64
    )]
    pub tiered_min_value_size: u64,

    /// Compression of values in the tier file: none, lz4 or zstd. Each value is compressed on
    /// its own and stored compressed only when that saves an eighth of it (a page, for values
    /// over 2 KiB), so more of them fit in `--tiered_max_file_size`.
    #[arg(long = "tiered_compression", alias = "tiered-compression", default_value = "none", value_parser = parse_tier_codec)]
    pub tiered_compression: tiering::Codec,

    /// Cache mode: when memory is full, evict the entries least likely to be read again instead
    /// of refusing writes with -OOM (with tiering, RAM entries move to SSD first and only a full
    /// SSD budget drops entries).
    #[arg(long = "cache_mode", alias = "cache-mode")]
    pub cache_mode: bool,

    /// Directory snapshots are saved to and loaded from.
    #[arg(long, default_value = ".")]
    pub dir: String,

    /// Snapshot base name: `{timestamp}` is replaced by the save time (UTC). A name ending in
    /// `.rdb` saves and loads Redis RDB files; any other gives Strata snapshots
    /// (NAME-summary.strata plus one file per shard). Empty turns saving off.
    #[arg(long, default_value = "dump")]
    pub dbfilename: String,

    /// Save a snapshot on this schedule (5-field cron, UTC), e.g. "*/5 * * * *".
    #[arg(long = "snapshot_cron", alias = "snapshot-cron", value_parser = parse_cron)]
    pub snapshot_cron: Option<crate::cron::CronSchedule>,

    /// Block compression of Strata snapshots: none, lz4 or zstd.
    #[arg(long = "snapshot_compression", alias = "snapshot-compression", default_value = "lz4", value_parser = parse_compression)]
    pub snapshot_compression: ondisk::snapshot::Compression,

    /// Cap on snapshot write bandwidth in MB/s, all shards together; 0 = no cap.
    #[arg(
        long = "snapshot_throttle_mb",
        alias = "snapshot-throttle-mb",
        default_value_t = 0
    )]
    pub snapshot_throttle_mb: u64,

    /// Start even when a snapshot file is corrupt, with the keys read before the damage.
    #[arg(long = "load_partial", alias = "load-partial")]
    pub load_partial: bool,

    /// Most bytes of pushed messages (pub/sub, invalidations) a client may have waiting to be
    /// written; a client past it is disconnected and logged. 0 = no limit.
    #[arg(long = "pubsub_client_output_limit", alias = "pubsub-client-output-limit", default_value = "32mb", value_parser = parse_mem_flag)]
    pub pubsub_client_output_limit: u64,

    /// Keyspace notification classes, as Redis' `notify-keyspace-events` (e.g. `KEA`, `Ex`);
    /// empty = off.
    #[arg(long = "notify_keyspace_events", alias = "notify-keyspace-events", default_value = "", value_parser = parse_notify_flag)]
    pub notify_keyspace_events: u32,

    /// TCP port for memcached clients (text, meta and binary protocols), bound like `--port`
    /// on `--bind`; 0 = off.
    #[arg(long = "memcached_port", alias = "memcached-port", default_value_t = 0)]
    pub memcached_port: u16,

    /// Largest item a memcached client may store (bytes or 1mb-style).
    #[arg(long = "max_item_size", alias = "max-item-size", default_value = "1mb", value_parser = parse_mem_flag)]
    pub max_item_size: u64,

    /// Log level: error, warn, info, debug or trace.
    #[arg(long = "log_level", alias = "log-level", default_value = "info")]
    pub log_level: String,
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a fraction between 0 and 1")),
    }
}

fn parse_cron(s: &str) -> Result<crate::cron::CronSchedule, String> {
    s.parse().map_err(|e: crate::cron::CronError| e.to_string())
}

fn parse_compression(s: &str) -> Result<ondisk::snapshot::Compression, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not one of none, lz4, zstd"))
}

fn parse_tier_codec(s: &str) -> Result<tiering::Codec, String> {
    s.parse()
}

fn parse_notify_flag(s: &str) -> Result<u32, String> {
    crate::notify::parse(s).ok_or_else(|| format!("invalid keyspace notification classes '{s}'"))
}

fn parse_mem_flag(s: &str) -> Result<u64, String> {
    parse_memory(s).ok_or_else(|| format!("invalid memory size '{s}' (use e.g. 512mb, 4gb)"))
}

impl Flags {
    /// Parses the process arguments, splicing in `--flagfile` contents first.
    pub fn load() -> Result<Flags, String> {
        let args: Vec<String> = std::env::args().collect();
        let expanded = expand_flagfile(&args)?;
        Flags::try_parse_from(expanded).map_err(|e| e.to_string())
    }

    /// Number of worker threads after resolving 0 to the core count.
    pub fn threads(&self) -> usize {
        if self.proactor_threads > 0 {
            return self.proactor_threads;
        }
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

/// Inserts the lines of every `--flagfile` right after the program name.
pub fn expand_flagfile(args: &[String]) -> Result<Vec<String>, String> {
    let mut file = None;
    for (i, a) in args.iter().enumerate() {
        if let Some(v) = a.strip_prefix("--flagfile=") {
            file = Some(v.to_string());
        } else if a == "--flagfile" {
            file = args.get(i + 1).cloned();
        }
    }
    let Some(path) = file else {
        return Ok(args.to_vec());
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("--flagfile: cannot read '{path}': {e}"))?;
    let mut out = vec![args.first().cloned().unwrap_or_else(|| "strata".into())];
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = if line.starts_with("--") {
            line.to_string()
        } else {
            format!("--{line}")
        };
        out.push(line);
    }
    out.extend(args.iter().skip(1).cloned());
    Ok(out)
}

/// Redis' default `hll-sparse-max-bytes`.
pub const HLL_SPARSE_MAX_BYTES: u64 = 3000;

/// Settings shared by all cores that CONFIG SET can change while running.
pub struct Settings {
    pub maxmemory: AtomicU64,
    pub hz: AtomicU32,
    pub keys_output_limit: AtomicU64,
    /// Milliseconds a script runs before other clients get -BUSY (`busy-reply-threshold`,
    /// alias `lua-time-limit`; 0 = never); CONFIG SET only, default 5000 as in Redis.
    pub busy_reply_threshold: AtomicU64,
    pub pubsub_client_output_limit: AtomicU64,
    /// `notify-keyspace-events` as bits of `crate::notify`.
    pub notify_keyspace_events: AtomicU32,
    /// Most keys CLIENT TRACKING remembers over all shards (`tracking-table-max-keys`, 0 = no
    /// limit); CONFIG SET only, default 1000000 as in Redis.
    pub tracking_table_max_keys: AtomicU64,
    /// Largest sparse HyperLogLog (header included) before it turns dense.
    pub hll_sparse_max_bytes: AtomicU64,
    /// Most fields of a hash kept as a listpack (`hash-max-listpack-entries`).
    pub hash_max_listpack_entries: AtomicU64,
    /// Longest field or value of a hash kept as a listpack (`hash-max-listpack-value`).
    pub hash_max_listpack_value: AtomicU64,
    /// Node size of lists (`list-max-listpack-size`): negative picks a byte limit (-2 = 8 KiB),
    /// positive an element count.
    pub list_max_listpack_size: AtomicI64,
    /// `list-compress-depth`: accepted and reported; nodes are kept uncompressed.
    pub list_compress_depth: AtomicI64,
    /// Most members of a set kept as an intset (`set-max-intset-entries`).
    pub set_max_intset_entries: AtomicU64,
    /// Most members of a sorted set kept as a listpack (`zset-max-listpack-entries`).
    pub zset_max_listpack_entries: AtomicU64,
    /// Longest member of a sorted set kept as a listpack (`zset-max-listpack-value`).
    pub zset_max_listpack_value: AtomicU64,
    /// `latency-tracking`: per-command latency histograms for INFO latencystats (default yes,
    /// as in Redis).
    pub latency_tracking: AtomicBool,
    /// `latency-tracking-info-percentiles`: the percentiles INFO latencystats shows (default
    /// 50 99 99.9).
    pub latency_percentiles: RwLock<Vec<f64>>,
    /// Active defrag (`activedefrag`, `active-defrag-*`, as Redis names them). On by default,
    /// unlike Redis: maxmemory here bounds the process's owned RSS, so the free room left inside
    /// half-empty slabs takes room from the data or pushes RSS past the bound.
    pub active_defrag: AtomicBool,
    /// Fragmentation (allocator active past allocated, in bytes) below which defrag does not start.
    pub active_defrag_ignore_bytes: AtomicU64,
    /// Percent of fragmentation at which defrag starts / runs at its most effort.
    pub active_defrag_threshold_lower: AtomicU64,
    pub active_defrag_threshold_upper: AtomicU64,
    /// Least / most share of each tick, in percent, a running defrag takes.
    pub active_defrag_cycle_min: AtomicU64,
    pub active_defrag_cycle_max: AtomicU64,
    pub requirepass: RwLock<String>,
    pub port: u16,
    pub bind: String,
    pub dbnum: u32,
    pub threads: usize,
    pub tiered: Option<TierSettings>,
    pub dir: RwLock<String>,
    pub dbfilename: RwLock<String>,
    pub snapshot: SnapshotSettings,
    pub cache_mode: bool,
    /// `--memcached_port` (0 = off) and `--max_item_size`.
    pub memcached_port: u16,
    pub max_item_size: u64,
}

/// Snapshot settings fixed at start.
#[derive(Clone, Debug)]
pub struct SnapshotSettings {
    pub cron: Option<crate::cron::CronSchedule>,
    pub compression: ondisk::snapshot::Compression,
    /// Bytes per second for all shards together; 0 = no cap.
    pub throttle_bytes: u64,
    pub load_partial: bool,
}

/// Tiering settings (present only with `--tiered_prefix`).
#[derive(Clone, Debug)]
pub struct TierSettings {
    pub prefix: String,
    /// Bytes each shard's file may grow to.
    pub file_bytes_per_shard: u64,
    pub offload_threshold: f64,
    pub upload_threshold: f64,
    pub min_value_size: usize,
    pub codec: tiering::Codec,
}

impl TierSettings {
    /// Checks the flags and the directory; errors name the flag, for a clear start-up message.
    pub fn from_flags(f: &Flags) -> Result<Option<TierSettings>, String> {
        let Some(prefix) = f.tiered_prefix.clone() else {
            return Ok(None);
        };
        let path = std::path::Path::new(&prefix);
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(format!(
                "--tiered_prefix: directory '{}' does not exist",
                dir.display()
            ));
        }
        let total = if f.tiered_max_file_size > 0 {
            f.tiered_max_file_size
        } else {
            free_space(&dir).map(|b| b / 10 * 8).ok_or_else(|| {
                format!(
                    "--tiered_prefix: cannot read the free space of '{}'",
                    dir.display()
                )
            })?
        };
        let threads = f.threads() as u64;
        let per_shard = total / threads;
        if per_shard < 1 << 20 {
            return Err(format!(
                "--tiered_max_file_size: {total} bytes leave under 1 MiB per shard"
            ));
        }
        Ok(Some(TierSettings {
            prefix,
            file_bytes_per_shard: per_shard,
            offload_threshold: f.tiered_offload_threshold,
            upload_threshold: f.tiered_upload_threshold,
            min_value_size: f.tiered_min_value_size as usize,
            codec: f.tiered_compression,
        }))
    }

    pub fn file_path(&self, shard: usize) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("{}-{shard:04}.ssd", self.prefix))
    }
}

/// Free bytes of the filesystem holding `dir`.
fn free_space(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data, for which all-zero bytes are a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` is writable for the call.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

impl Settings {
    pub fn from_flags(f: &Flags) -> Settings {
        Self::with_tiering(f, None)
    }

    pub fn with_tiering(f: &Flags, tiered: Option<TierSettings>) -> Settings {
        Settings {
            maxmemory: AtomicU64::new(f.maxmemory),
            hz: AtomicU32::new(f.hz),
            keys_output_limit: AtomicU64::new(f.keys_output_limit),
            busy_reply_threshold: AtomicU64::new(5000),
            pubsub_client_output_limit: AtomicU64::new(f.pubsub_client_output_limit),
            notify_keyspace_events: AtomicU32::new(f.notify_keyspace_events),
            tracking_table_max_keys: AtomicU64::new(1_000_000),
            hll_sparse_max_bytes: AtomicU64::new(HLL_SPARSE_MAX_BYTES),
            hash_max_listpack_entries: AtomicU64::new(128),
            hash_max_listpack_value: AtomicU64::new(64),
            list_max_listpack_size: AtomicI64::new(-2),
            list_compress_depth: AtomicI64::new(0),
            set_max_intset_entries: AtomicU64::new(512),
            zset_max_listpack_entries: AtomicU64::new(128),
            zset_max_listpack_value: AtomicU64::new(64),
            latency_tracking: AtomicBool::new(true),
            latency_percentiles: RwLock::new(vec![50.0, 99.0, 99.9]),
            active_defrag: AtomicBool::new(true),
            // Redis' 100mb would never start at the maxmemory sizes where tiering's
            // fragmentation matters (tens of MB); a few MB is not worth a walk.
            active_defrag_ignore_bytes: AtomicU64::new(4 << 20),
            active_defrag_threshold_lower: AtomicU64::new(10),
            active_defrag_threshold_upper: AtomicU64::new(100),
            active_defrag_cycle_min: AtomicU64::new(1),
            active_defrag_cycle_max: AtomicU64::new(25),
            requirepass: RwLock::new(f.requirepass.clone()),
            port: f.port,
            bind: f.bind.clone(),
            dbnum: f.dbnum,
            threads: f.threads(),
            tiered,
            cache_mode: f.cache_mode,
            memcached_port: f.memcached_port,
            max_item_size: f.max_item_size,
            dir: RwLock::new(f.dir.clone()),
            dbfilename: RwLock::new(f.dbfilename.clone()),
            snapshot: SnapshotSettings {
                cron: f.snapshot_cron.clone(),
                compression: f.snapshot_compression,
                throttle_bytes: f.snapshot_throttle_mb.saturating_mul(1 << 20),
                load_partial: f.load_partial,
            },
        }
    }

    /// Time between background ticks, from `hz`.
    pub fn tick_period(&self) -> std::time::Duration {
        let hz = self.hz.load(Ordering::Relaxed).max(1);
        std::time::Duration::from_micros(1_000_000 / hz as u64)
    }

    /// Bytes of pushed messages a client may have waiting (0 = no limit).
    pub fn pubsub_client_output_limit(&self) -> u64 {
        self.pubsub_client_output_limit.load(Ordering::Relaxed)
    }

    pub fn notify_flags(&self) -> u32 {
        self.notify_keyspace_events.load(Ordering::Relaxed)
    }

    pub fn hll_sparse_max_bytes(&self) -> u64 {
        self.hll_sparse_max_bytes.load(Ordering::Relaxed)
    }

    pub fn hash_max_listpack_entries(&self) -> usize {
        self.hash_max_listpack_entries.load(Ordering::Relaxed) as usize
    }

    pub fn hash_max_listpack_value(&self) -> usize {
        self.hash_max_listpack_value.load(Ordering::Relaxed) as usize
    }

    pub fn list_max_listpack_size(&self) -> i64 {
        self.list_max_listpack_size.load(Ordering::Relaxed)
    }

    pub fn list_compress_depth(&self) -> i64 {
        self.list_compress_depth.load(Ordering::Relaxed)
    }

    pub fn set_max_intset_entries(&self) -> usize {
        self.set_max_intset_entries.load(Ordering::Relaxed) as usize
    }

    pub fn zset_max_listpack_entries(&self) -> usize {
        self.zset_max_listpack_entries.load(Ordering::Relaxed) as usize
    }

    pub fn zset_max_listpack_value(&self) -> usize {
        self.zset_max_listpack_value.load(Ordering::Relaxed) as usize
    }

    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// Whether the eviction policy tracks access frequency (OBJECT FREQ): cache mode's does.
    pub fn lfu_policy(&self) -> bool {
        self.cache_mode
    }

    /// The Redis policy name closest to what Strata does (CONFIG GET maxmemory-policy).
    pub fn policy_name(&self) -> &'static str {
        if self.cache_mode {
            "allkeys-lfu"
        } else {
            "noeviction"
        }
    }

    /// The snapshot directory.
    pub fn dir(&self) -> String {
        self.dir.read().map(|d| d.clone()).unwrap_or_default()
    }

    /// The snapshot base name (may hold `{timestamp}`).
    pub fn dbfilename(&self) -> String {
        self.dbfilename
            .read()
            .map(|d| d.clone())
            .unwrap_or_default()
    }

    /// `tracking-table-max-keys` (0 = no limit).
    pub fn tracking_table_max_keys(&self) -> usize {
        self.tracking_table_max_keys.load(Ordering::Relaxed) as usize
    }

    pub fn latency_tracking(&self) -> bool {
        self.latency_tracking.load(Ordering::Relaxed)
    }

    pub fn latency_percentiles(&self) -> Vec<f64> {
        self.latency_percentiles
            .read()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    pub fn requirepass(&self) -> String {
        self.requirepass
            .read()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// CONFIG GET: every parameter whose name matches `pattern`, as (name, value) pairs.
    pub fn get(&self, pattern: &[u8]) -> Vec<(String, String)> {
        let all: Vec<(&str, String)> = vec![
            ("maxmemory", self.maxmemory().to_string()),
            ("hz", self.hz.load(Ordering::Relaxed).to_string()),
            (
                "keys_output_limit",
                self.keys_output_limit.load(Ordering::Relaxed).to_string(),
            ),
            (
                "busy-reply-threshold",
                self.busy_reply_threshold
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "lua-time-limit",
                self.busy_reply_threshold
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "pubsub_client_output_limit",
                self.pubsub_client_output_limit().to_string(),
            ),
            (
                "hll-sparse-max-bytes",
                self.hll_sparse_max_bytes().to_string(),
            ),
            (
                "notify-keyspace-events",
                crate::notify::format(self.notify_flags()),
            ),
            ("requirepass", self.requirepass()),
            (
                "latency-tracking",
                yes_no(self.latency_tracking()).to_string(),
            ),
            (
                "latency-tracking-info-percentiles",
                self.latency_percentiles()
                    .iter()
                    .map(|&p| trim_double(p))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            (
                "tracking-table-max-keys",
                self.tracking_table_max_keys().to_string(),
            ),
            (
                "activedefrag",
                yes_no(self.active_defrag.load(Ordering::Relaxed)).to_string(),
            ),
            (
                "active-defrag-ignore-bytes",
                self.active_defrag_ignore_bytes
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "active-defrag-threshold-lower",
                self.active_defrag_threshold_lower
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "active-defrag-threshold-upper",
                self.active_defrag_threshold_upper
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "active-defrag-cycle-min",
                self.active_defrag_cycle_min
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "active-defrag-cycle-max",
                self.active_defrag_cycle_max
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            // Redis 7's names, and the pre-7 names it keeps as aliases.
            (
                "hash-max-listpack-entries",
                self.hash_max_listpack_entries().to_string(),
            ),
            (
                "hash-max-ziplist-entries",
                self.hash_max_listpack_entries().to_string(),
            ),
            (
                "hash-max-listpack-value",
                self.hash_max_listpack_value().to_string(),
            ),
            (
                "hash-max-ziplist-value",
                self.hash_max_listpack_value().to_string(),
            ),
            (
                "list-max-listpack-size",
                self.list_max_listpack_size().to_string(),
            ),
            (
                "list-max-ziplist-size",
                self.list_max_listpack_size().to_string(),
            ),
            (
                "list-compress-depth",
                self.list_compress_depth().to_string(),
            ),
            (
                "set-max-intset-entries",
                self.set_max_intset_entries().to_string(),
            ),
            (
                "zset-max-listpack-entries",
                self.zset_max_listpack_entries().to_string(),
            ),
            (
                "zset-max-ziplist-entries",
                self.zset_max_listpack_entries().to_string(),
            ),
            (
                "zset-max-listpack-value",
                self.zset_max_listpack_value().to_string(),
            ),
            (
                "zset-max-ziplist-value",
                self.zset_max_listpack_value().to_string(),
            ),
            ("port", self.port.to_string()),
            ("bind", self.bind.clone()),
            ("databases", self.dbnum.to_string()),
            ("dbnum", self.dbnum.to_string()),
            ("proactor_threads", self.threads.to_string()),
            ("maxmemory-policy", self.policy_name().to_string()),
            ("cache_mode", self.cache_mode.to_string()),
            (
                "proto-max-bulk-len",
                crate::protocol::MAX_BULK_LEN.to_string(),
            ),
            (
                "save",
                self.snapshot
                    .cron
                    .as_ref()
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
            ),
            ("dir", self.dir()),
            ("dbfilename", self.dbfilename()),
            ("appendonly", "no".to_string()),
        ];
        all.into_iter()
            .filter(|(k, _)| crate::glob::matches(pattern, k.as_bytes(), true))
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    /// CONFIG SET for one parameter; Err carries Redis' error text.
    pub fn set(&self, name: &str, value: &str) -> Result<(), String> {
        let bad = |why: &str| {
            format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
        };
        // Redis' numeric settings: an integer within bounds, or a memory value up to i64::MAX.
        let int_in = |lo: i64, hi: i64| -> Result<i64, String> {
            let v: i64 = value
                .parse()
                .map_err(|_| bad("argument couldn't be parsed into an integer"))?;
            if v < lo || v > hi {
                return Err(bad(&format!(
                    "argument must be between {lo} and {hi} inclusive"
                )));
            }
            Ok(v)
        };
        let memory_to_i64_max = || -> Result<u64, String> {
            let v = parse_memory(value).ok_or_else(|| bad("argument must be a memory value"))?;
            if v > i64::MAX as u64 {
                return Err(bad(&format!(
                    "argument must be between 0 and {} inclusive",
                    i64::MAX
                )));
            }
            Ok(v)
        };
        match name.to_ascii_lowercase().as_str() {
            "maxmemory" => {
                let v =
                    parse_memory(value).ok_or_else(|| bad("argument must be a memory value"))?;
                self.maxmemory.store(v, Ordering::Relaxed);
            }
            "hz" => {
                let v: u32 = value
                    .parse()
                    .map_err(|_| bad("argument couldn't be parsed into an integer"))?;
                self.hz.store(v.clamp(1, 500), Ordering::Relaxed);
            }
            "busy-reply-threshold" | "lua-time-limit" => {
                let v = int_in(0, i64::MAX)?;
                self.busy_reply_threshold.store(v as u64, Ordering::Relaxed);
            }
            "keys_output_limit" => {
                let v: u64 = value
                    .parse()
                    .map_err(|_| bad("argument couldn't be parsed into an integer"))?;
                self.keys_output_limit.store(v, Ordering::Relaxed);
            }
            "pubsub_client_output_limit" => {
                let v =
                    parse_memory(value).ok_or_else(|| bad("argument must be a memory value"))?;
                self.pubsub_client_output_limit.store(v, Ordering::Relaxed);
            }
            "notify-keyspace-events" => {
                let v = crate::notify::parse(value)
                    .ok_or_else(|| bad("Invalid event class character. Use 'Ag$lshzxeKEtmdn'."))?;
                self.notify_keyspace_events.store(v, Ordering::Relaxed);
            }
            "tracking-table-max-keys" => {
                let v = int_in(0, i64::MAX)?;
                self.tracking_table_max_keys
                    .store(v as u64, Ordering::Relaxed);
            }
            "hll-sparse-max-bytes" => {
                self.hll_sparse_max_bytes
                    .store(memory_to_i64_max()?, Ordering::Relaxed);
            }
            "hash-max-listpack-entries" | "hash-max-ziplist-entries" => {
                let v = int_in(0, i64::MAX)?;
                self.hash_max_listpack_entries
                    .store(v as u64, Ordering::Relaxed);
            }
            "hash-max-listpack-value" | "hash-max-ziplist-value" => {
                self.hash_max_listpack_value
                    .store(memory_to_i64_max()?, Ordering::Relaxed);
            }
            "list-max-listpack-size" | "list-max-ziplist-size" => {
                let v = int_in(i32::MIN.into(), i32::MAX.into())?;
                self.list_max_listpack_size.store(v, Ordering::Relaxed);
            }
            "list-compress-depth" => {
                let v = int_in(0, i32::MAX.into())?;
                self.list_compress_depth.store(v, Ordering::Relaxed);
            }
            "set-max-intset-entries" => {
                let v = int_in(0, i64::MAX)?;
                self.set_max_intset_entries
                    .store(v as u64, Ordering::Relaxed);
            }
            "zset-max-listpack-entries" | "zset-max-ziplist-entries" => {
                let v = int_in(0, i64::MAX)?;
                self.zset_max_listpack_entries
                    .store(v as u64, Ordering::Relaxed);
            }
            "zset-max-listpack-value" | "zset-max-ziplist-value" => {
                self.zset_max_listpack_value
                    .store(memory_to_i64_max()?, Ordering::Relaxed);
            }
            "activedefrag" => {
                let on =
                    parse_yes_no(value).ok_or_else(|| bad("argument must be 'yes' or 'no'"))?;
                self.active_defrag.store(on, Ordering::Relaxed);
            }
            "active-defrag-ignore-bytes" => {
                let v = memory_to_i64_max()?;
                if v == 0 {
                    return Err(bad(&format!(
                        "argument must be between 1 and {} inclusive",
                        i64::MAX
                    )));
                }
                self.active_defrag_ignore_bytes.store(v, Ordering::Relaxed);
            }
            "active-defrag-threshold-lower" => {
                let v = int_in(0, 1000)?;
                self.active_defrag_threshold_lower
                    .store(v as u64, Ordering::Relaxed);
            }
            "active-defrag-threshold-upper" => {
                let v = int_in(0, 1000)?;
                self.active_defrag_threshold_upper
                    .store(v as u64, Ordering::Relaxed);
            }
            "active-defrag-cycle-min" => {
                let v = int_in(1, 99)?;
                self.active_defrag_cycle_min
                    .store(v as u64, Ordering::Relaxed);
            }
            "active-defrag-cycle-max" => {
                let v = int_in(1, 99)?;
                self.active_defrag_cycle_max
                    .store(v as u64, Ordering::Relaxed);
            }
            "latency-tracking" => {
                let on =
                    parse_yes_no(value).ok_or_else(|| bad("argument must be 'yes' or 'no'"))?;
                self.latency_tracking.store(on, Ordering::Relaxed);
            }
            "latency-tracking-info-percentiles" => {
                let mut list = Vec::new();
                for word in value.split_ascii_whitespace() {
                    let p = parse_double(word).ok_or_else(|| {
                        bad("Invalid latency-tracking-info-percentiles parameters")
                    })?;
                    if !(0.0..=100.0).contains(&p) {
                        return Err(bad(
                            "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
                        ));
                    }
                    list.push(p);
                }
                if let Ok(mut l) = self.latency_percentiles.write() {
                    *l = list;
                }
            }
            "requirepass" => {
                if let Ok(mut p) = self.requirepass.write() {
                    *p = value.to_string();
                }
            }
            "dir" => {
                if !std::path::Path::new(value).is_dir() {
                    return Err(bad("No such file or directory"));
                }
                if let Ok(mut d) = self.dir.write() {
                    *d = value.to_string();
                }
            }
            "dbfilename" => {
                if value.contains('/') {
                    return Err(bad("dbfilename can't be a path, just a filename"));
                }
                if let Ok(mut d) = self.dbfilename.write() {
                    *d = value.to_string();
                }
            }
            "maxmemory-policy" if value.eq_ignore_ascii_case(self.policy_name()) => {}
            "save" | "appendonly" if value.is_empty() || value == "no" => {}
            _ => {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ))
            }
        }
        Ok(())
    }
}

fn yes_no(on: bool) -> &'static str {
    if on {
        "yes"
    } else {
        "no"
    }
}

/// A Redis boolean setting's value.
fn parse_yes_no(v: &str) -> Option<bool> {
    if v.eq_ignore_ascii_case("yes") {
        Some(true)
    } else if v.eq_ignore_ascii_case("no") {
        Some(false)
    } else {
        None
    }
}

/// Redis' string2d: a whole number in strtod's syntax, not NaN.
fn parse_double(s: &str) -> Option<f64> {
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| !v.is_nan())
}

/// Redis' `%f` with trailing zeros (and point) trimmed (trimDoubleString).
pub fn trim_double(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flagfile_lines_come_before_cli() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flags");
        std::fs::write(&path, "# comment\n--port=7000\nhz=50\n\n").unwrap();
        let args = vec![
            "strata".to_string(),
            format!("--flagfile={}", path.display()),
            "--port=7001".to_string(),
        ];
        let out = expand_flagfile(&args).unwrap();
        let f = Flags::try_parse_from(out).unwrap();
        assert_eq!(f.port, 7001);
        assert_eq!(f.hz, 50);
    }

    #[test]
    fn maxmemory_units() {
        let f = Flags::try_parse_from(["strata", "--maxmemory", "2mb"]).unwrap();
        assert_eq!(f.maxmemory, 2 << 20);
        assert!(Flags::try_parse_from(["strata", "--maxmemory", "lots"]).is_err());
    }
}

//! Command-line flags (Dragonfly's names) and the settings CONFIG GET/SET can change at run time.
//!
//! Flags are parsed once at start; `--flagfile FILE` splices the file's `--flag=value` lines in
//! front of the command line, so the command line wins. Settings that CONFIG SET may change live
//! in [`Settings`], shared by every core through atomics (read on the hot path without locks).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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

    /// Log level: error, warn, info, debug or trace.
    #[arg(long = "log_level", alias = "log-level", default_value = "info")]
    pub log_level: String,
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

/// Settings shared by all cores that CONFIG SET can change while running.
pub struct Settings {
    pub maxmemory: AtomicU64,
    pub hz: AtomicU32,
    pub keys_output_limit: AtomicU64,
    pub requirepass: RwLock<String>,
    pub port: u16,
    pub bind: String,
    pub dbnum: u32,
    pub threads: usize,
}

impl Settings {
    pub fn from_flags(f: &Flags) -> Settings {
        Settings {
            maxmemory: AtomicU64::new(f.maxmemory),
            hz: AtomicU32::new(f.hz),
            keys_output_limit: AtomicU64::new(f.keys_output_limit),
            requirepass: RwLock::new(f.requirepass.clone()),
            port: f.port,
            bind: f.bind.clone(),
            dbnum: f.dbnum,
            threads: f.threads(),
        }
    }

    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    /// Whether the eviction policy tracks access frequency (OBJECT FREQ) rather than idle time.
    /// Only `noeviction` exists until cache mode lands, so this is false.
    pub fn lfu_policy(&self) -> bool {
        false
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
            ("requirepass", self.requirepass()),
            ("port", self.port.to_string()),
            ("bind", self.bind.clone()),
            ("databases", self.dbnum.to_string()),
            ("dbnum", self.dbnum.to_string()),
            ("proactor_threads", self.threads.to_string()),
            ("maxmemory-policy", "noeviction".to_string()),
            (
                "proto-max-bulk-len",
                crate::protocol::MAX_BULK_LEN.to_string(),
            ),
            ("save", String::new()),
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
            "keys_output_limit" => {
                let v: u64 = value
                    .parse()
                    .map_err(|_| bad("argument couldn't be parsed into an integer"))?;
                self.keys_output_limit.store(v, Ordering::Relaxed);
            }
            "requirepass" => {
                if let Ok(mut p) = self.requirepass.write() {
                    *p = value.to_string();
                }
            }
            "maxmemory-policy" if value.eq_ignore_ascii_case("noeviction") => {}
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

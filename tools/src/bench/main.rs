//! strata-bench: an open-loop load generator for Strata, Redis and memcached.
//!
//! This file owns the command line (clap), the setup shared by the subcommands (resolving the
//! server, the preload) and the exit codes. The work lives in modules:
//!
//! ```text
//! codec.rs     RESP, memcached text and binary: requests out, replies recognised
//! workload.rs  which op, key and value size comes next (ratio, key distribution)
//! engine.rs    connections over threads, the timetable, epoll loops, HDR histograms
//! summary.rs   percentiles, the printed summary, JSON
//! sweep.rs     `sweep`: one run per rate, the NS rule, the table and the SVG chart
//! pubsub.rs    `pubsub`: publishers on a timetable, subscribers timing each delivery
//!              (`chart`, several sweeps on one chart, is `sweep::draw` over their JSON)
//! ```
//!
//! Reports go to stdout; progress lines and errors to stderr, errors prefixed `strata-bench: `.
//!
//! Never: hides a failed run behind a report (a lost connection or a malformed reply ends the
//! run with exit status 1); uses `unwrap` on anything the network or the command line decides.

mod codec;
mod engine;
mod pubsub;
mod summary;
mod sweep;
mod workload;

use clap::{Args, Parser, Subcommand};
use codec::Protocol;
use engine::{Clock, Plan, Progress};
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use summary::RunReport;
use workload::{Generator, KeyDist, Range, Ratio, Workload};

const EXIT_CODES: &str = "\
Exit codes:
  0  the run finished (error replies and misses are counted in the report, not failures)
  1  the run failed: no connection, a connection lost, a malformed reply, a file not written
  2  usage error (bad arguments)";

/// Load generator for Strata, Redis and memcached. With --rate it runs open loop: requests
/// leave on a timetable and latency counts from each one's scheduled time, so a server stall
/// shows as latency (no coordinated omission). Without --rate it runs closed loop, as fast as
/// replies come.
#[derive(Parser, Debug)]
#[command(name = "strata-bench", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One run: a SET:GET mix, open loop at --rate or closed loop without it.
    #[command(after_help = EXIT_CODES)]
    Run(RunArgs),
    /// One open-loop run per rate in --rates; marks levels not sustained (NS: achieved under
    /// 97% of requested), prints a table and writes a latency-vs-rate SVG chart.
    #[command(after_help = EXIT_CODES)]
    Sweep(SweepArgs),
    /// Publishers at a fixed rate, subscribers on their own connections: publish-to-delivery
    /// latency from a timestamp in each message (RESP only).
    #[command(after_help = EXIT_CODES)]
    Pubsub(pubsub::PubsubArgs),
    /// Draws several servers' sweeps (`sweep --json` files) on one latency-vs-rate chart.
    #[command(after_help = EXIT_CODES)]
    Chart(ChartArgs),
}

#[derive(Args, Debug)]
struct ChartArgs {
    /// The chart to write (SVG).
    #[arg(long)]
    svg: PathBuf,
    /// A line under the title (e.g. the load the sweeps ran).
    #[arg(long, default_value = "")]
    title: String,
    /// NAME=FILE: the legend's name for a server, and its `sweep --json` file.
    #[arg(required = true, value_parser = named_file)]
    sweeps: Vec<(String, PathBuf)>,
}

fn named_file(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), PathBuf::from(file)))
        }
        _ => Err(format!(
            "expected NAME=FILE (like strata=sweep.json), not {s:?}"
        )),
    }
}

/// Where the server is.
#[derive(Args, Debug, Clone)]
struct Target {
    /// Server host name or address.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server port [default: 6379, or 11211 for the memcache protocols].
    #[arg(long, short = 'p')]
    port: Option<u16>,
}

/// Several servers sharing the key space (`run` and `sweep`).
#[derive(Args, Debug, Clone)]
struct Servers {
    /// HOST:PORT,HOST:PORT,...: split the keys over these servers by hash slot, as a cluster
    /// client does (CRC16 of the key mod 16384, slots dealt out in equal ranges); connection i
    /// talks to server i mod N. Replaces --host and --port.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["host", "port"])]
    servers: Vec<String>,
}

impl Target {
    fn resolve(&self, protocol: Protocol) -> Result<SocketAddr, String> {
        let port = self.port.unwrap_or(match protocol {
            Protocol::Resp => 6379,
            Protocol::Memcache | Protocol::MemcacheBinary => 11211,
        });
        (self.host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("{} has no address", self.host))
    }
}

/// What the load looks like (shared by `run` and `sweep`).
#[derive(Args, Debug, Clone)]
struct Load {
    /// Wire protocol.
    #[arg(long, value_enum, default_value_t = Protocol::Resp)]
    protocol: Protocol,
    /// Connections, spread over the threads.
    #[arg(long, short = 'c', default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    connections: u32,
    /// Threads (one epoll loop each); at most --connections.
    #[arg(long, short = 't', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Requests per batch: closed loop keeps this many in flight per connection; open loop
    /// sends this many together at each of the connection's due times.
    #[arg(long, short = 'P', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pipeline: u32,
    /// SET:GET ratio, e.g. 1:10 (one SET for every ten GETs), 1:0 (SETs only).
    #[arg(long, default_value = "1:10", value_parser = clap::value_parser!(Ratio))]
    ratio: Ratio,
    /// Size of the key space: keys are <key-prefix>0 .. <key-prefix>K-1.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// uniform, zipf:S (rank-frequency exponent S, key 0 hottest) or sequential.
    #[arg(long, default_value = "uniform", value_parser = clap::value_parser!(KeyDist))]
    key_dist: KeyDist,
    /// Key name prefix.
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// Zero-pad key numbers to this many digits (12 gives redis-benchmark's `-r` key names).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=20))]
    key_width: u8,
    /// Value size in bytes, B or B1-B2 (uniform between them).
    #[arg(long, default_value = "32", value_parser = clap::value_parser!(Range))]
    value_size: Range,
    /// SETs expire after this many seconds, S or S1-S2 (SET EX / the memcached expiry).
    #[arg(long, value_parser = clap::value_parser!(Range))]
    expiry: Option<Range>,
    /// Before the run, SET every key once (pipelined, closed loop).
    #[arg(long)]
    preload: bool,
    /// Seconds the run issues requests for (fractions allowed).
    #[arg(long, short = 'd', default_value = "10", value_parser = positive_seconds)]
    duration: f64,
    /// Open loop: a connection with this many requests unanswered waits before sending more
    /// (the late requests still count from their due time).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    max_outstanding: u32,
    /// Closed loop: poll for replies without ever sleeping (the client's CPU reads 100%). A
    /// client on the server's machine that sleeps between replies is woken by the server's
    /// send, and that wakeup is charged to the server; this measures the server without it.
    #[arg(long)]
    busy_poll: bool,
    /// Seed of the key and value draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    servers: Servers,
    #[command(flatten)]
    load: Load,
    /// Requests per second over all connections (open loop); without it, closed loop.
    #[arg(long, short = 'r', value_parser = positive_rate)]
    rate: Option<f64>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct SweepArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    servers: Servers,
    #[command(flatten)]
    load: Load,
    /// Requests per second of each level, comma-separated (e.g. 10000,30000,50000).
    #[arg(long, required = true, value_delimiter = ',', value_parser = positive_rate)]
    rates: Vec<f64>,
    /// Write the latency-vs-rate chart here (SVG).
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Also write every level's report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub(crate) fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "expected seconds above 0 (at most a day), like 10 or 0.5, not {s:?}"
        )),
    }
}

pub(crate) fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() && v <= 1e9 => Ok(v),
        _ => Err(format!(
            "expected requests per second above 0, like 10000, not {s:?}"
        )),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = engine::stop_on_interrupt() {
        eprintln!("strata-bench: {e}");
    }
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Sweep(args) => sweep::sweep(args),
        Command::Pubsub(args) => pubsub::pubsub(args),
        Command::Chart(args) => chart(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => {
            eprintln!("strata-bench: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Run(e)) => {
            eprintln!("strata-bench: {e}");
            ExitCode::from(1)
        }
    }
}

/// Why a subcommand stopped: exit 2 or exit 1.
pub(crate) enum Failure {
    Usage(String),
    Run(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Run(e)
    }
}

/// Prints a report line on stdout; a closed stdout (`| head`) is not an error.
macro_rules! report {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
pub(crate) use report;

/// The setup of a `run` or `sweep`: checked flags, the server's address, the workload.
struct Setup {
    /// The server, or the servers the keys are split over (`--servers`).
    addrs: Vec<SocketAddr>,
    load: Load,
    work: Arc<Workload>,
    values: Arc<Vec<u8>>,
}

impl Setup {
    fn new(target: &Target, servers: &Servers, load: &Load) -> Result<Setup, Failure> {
        if load.threads > load.connections {
            return Err(Failure::Usage(format!(
                "--threads {} is more than --connections {}: each thread needs a connection",
                load.threads, load.connections
            )));
        }
        if load.pipeline > load.max_outstanding {
            return Err(Failure::Usage(format!(
                "--pipeline {} is more than --max-outstanding {}",
                load.pipeline, load.max_outstanding
            )));
        }
        if servers.servers.len() > load.connections as usize {
            return Err(Failure::Usage(format!(
                "--connections {} is less than the {} --servers: each server needs a connection",
                load.connections,
                servers.servers.len()
            )));
        }
        let addrs = if servers.servers.is_empty() {
            vec![target.resolve(load.protocol)?]
        } else {
            servers
                .servers
                .iter()
                .map(|s| resolve_server(s))
                .collect::<Result<Vec<_>, _>>()?
        };

        let work = Arc::new(Workload {
            protocol: load.protocol,
            ratio: load.ratio,
            keys: load.keys,
            key_dist: load.key_dist,
            key_prefix: load.key_prefix.clone(),
            key_width: usize::from(load.key_width),
            value_size: load.value_size,
            expiry: load.expiry,
            seed: load.seed,
            shards: addrs.len() as u32,
        });
        let values = workload::value_block(&work);
        Ok(Setup {
            addrs,
            load: load.clone(),
            work,
            values,
        })
    }

    /// The server's address, or the servers' joined by commas.
    fn server(&self) -> String {
        let all: Vec<String> = self.addrs.iter().map(|a| a.to_string()).collect();
        all.join(",")
    }

    /// One line saying what is about to run.
    fn describe(&self, rate: Option<f64>) -> String {
        let l = &self.load;
        let mode = match rate {
            Some(r) => format!("open loop at {r:.0}/s"),
            None => "closed loop".to_string(),
        };
        format!(
            "{} at {}, {mode} for {} s: {} connections on {} thread(s), pipeline {}, \
             SET:GET {}, {} keys {}, values {} B{}",
            l.protocol.name(),
            self.server(),
            l.duration,
            l.connections,
            l.threads,
            l.pipeline,
            l.ratio,
            l.keys,
            l.key_dist,
            l.value_size,
            l.expiry
                .map_or(String::new(), |e| format!(", expiry {e} s"))
        )
    }

    /// SETs every key once, pipelined over the run's connections.
    fn preload(&self, clock: Clock) -> Result<(), Failure> {
        let conns = (self.load.connections.min(64) as usize).max(self.addrs.len());
        let plan = Plan {
            protocol: self.load.protocol,
            connections: conns,
            threads: (self.load.threads as usize).min(conns),
            pipeline: 64,
            rate: None,
            duration: None,
            max_outstanding: 64,
            busy_poll: false,
        };
        let gens = (0..conns)
            .map(|c| Generator::preload(&self.work, &self.values, c, conns))
            .collect();
        let progress = if self.load.quiet {
            Progress::Quiet
        } else {
            Progress::Count {
                what: "preload",
                total: self.load.keys,
            }
        };
        let totals = engine::run(&self.addrs, &plan, gens, progress, clock)?;
        if totals.interrupted {
            return Err(Failure::Run(format!(
                "interrupted during the preload, after {} keys",
                totals.sets
            )));
        }
        eprintln!(
            "preloaded {} keys in {:.2} s ({:.0}/s), {} errors",
            totals.sets,
            totals.elapsed.as_secs_f64(),
            totals.achieved_rate(),
            totals.errors
        );
        if totals.errors > 0 || totals.unanswered > 0 {
            return Err(Failure::Run(format!(
                "preload: {} error replies, {} unanswered",
                totals.errors, totals.unanswered
            )));
        }
        Ok(())
    }

    /// One run of the mix at `rate` (None: closed loop).
    fn run(&self, rate: Option<f64>, clock: Clock) -> Result<RunReport, Failure> {
        let l = &self.load;
        let plan = Plan {
            protocol: l.protocol,
            connections: l.connections as usize,
            threads: l.threads as usize,
            pipeline: l.pipeline as usize,
            rate,
            duration: Some(Duration::from_secs_f64(l.duration)),
            max_outstanding: l.max_outstanding as usize,
            busy_poll: l.busy_poll && rate.is_none(),
        };
        let conns = l.connections as usize;
        let gens = (0..conns)
            .map(|c| Generator::mix(&self.work, &self.values, c, conns))
            .collect();
        let progress = if l.quiet {
            Progress::Quiet
        } else {
            Progress::PerSecond
        };
        let totals = engine::run(&self.addrs, &plan, gens, progress, clock)?;
        Ok(RunReport::new(&totals, rate))
    }
}

/// The setup part of the JSON reports: what ran against what.
#[derive(serde::Serialize)]
struct SetupJson {
    tool: &'static str,
    version: &'static str,
    command: &'static str,
    server: String,
    protocol: Protocol,
    connections: u32,
    threads: u32,
    pipeline: u32,
    ratio: String,
    keys: u64,
    key_dist: String,
    value_size: String,
    expiry: Option<String>,
    preload: bool,
    duration: f64,
}

impl Setup {
    fn json(&self, command: &'static str) -> SetupJson {
        let l = &self.load;
        SetupJson {
            tool: "strata-bench",
            version: env!("CARGO_PKG_VERSION"),
            command,
            server: self.server(),
            protocol: l.protocol,
            connections: l.connections,
            threads: l.threads,
            pipeline: l.pipeline,
            ratio: l.ratio.to_string(),
            keys: l.keys,
            key_dist: l.key_dist.to_string(),
            value_size: l.value_size.to_string(),
            expiry: l.expiry.map(|e| e.to_string()),
            preload: l.preload,
            duration: l.duration,
        }
    }
}

fn run(args: RunArgs) -> Result<(), Failure> {
    let setup = Setup::new(&args.target, &args.servers, &args.load)?;
    let clock = Clock::new();
    if args.load.preload {
        setup.preload(clock)?;
    }
    report!("strata-bench run: {}", setup.describe(args.rate));
    let report = setup.run(args.rate, clock)?;
    let _ = report.print(&mut std::io::stdout());
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct RunJson<'a> {
            #[serde(flatten)]
            setup: SetupJson,
            #[serde(flatten)]
            report: &'a RunReport,
        }
        let json = RunJson {
            setup: setup.json("run"),
            report: &report,
        };
        summary::write_json(path, &json)?;
    }
    Ok(())
}

fn chart(args: ChartArgs) -> Result<(), Failure> {
    let series = args
        .sweeps
        .iter()
        .map(|(name, file)| sweep::Series::from_json(name, file))
        .collect::<Result<Vec<_>, _>>()?;
    sweep::draw(&args.svg, &series, &args.title)?;
    report!("chart: {}", args.svg.display());
    Ok(())
}

/// HOST:PORT of one of `--servers`.
fn resolve_server(s: &str) -> Result<SocketAddr, Failure> {
    let (host, port) = s
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
        .ok_or_else(|| Failure::Usage(format!("--servers: expected HOST:PORT, not {s:?}")))?;
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Failure::Run(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| Failure::Run(format!("{host} has no address")))
}

//! strata-compact: offline verification, compaction and conversion of Strata snapshots.
//!
//! This file owns the command line (clap) and the mapping from outcomes to exit codes; each
//! subcommand lives in its own module:
//!
//! ```text
//! verify    verify.rs    read every shard file, check it against the summary, report
//! compact   rewrite.rs   drop expired and tombstoned keys, re-shard, recompress
//! to-rdb    rdb.rs       snapshot -> one Redis RDB file
//! from-rdb  rdb.rs       Redis RDB file -> snapshot
//! stats     stats.rs     counts and histograms of what a snapshot holds
//! ```
//!
//! Shared plumbing: `input.rs` reads snapshots (with every check `verify` makes), `output.rs`
//! writes them crash-safely, `progress.rs` draws the bar, `error.rs` holds the exit codes.
//!
//! Everything streams: memory is one record plus block buffers plus one writer per output
//! shard, whatever the snapshot's size. Reports go to stdout, errors and warnings to stderr
//! prefixed `strata-compact: `.

/// Prints a report line on stdout. A closed stdout (`| head`) is not an error: the work is
/// done, and its outcome is in the exit status.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod error;
mod input;
mod output;
mod progress;
mod rdb;
mod rewrite;
mod stats;
mod verify;

use clap::{Parser, Subcommand};
use error::{Failure, EXIT_USAGE};
use input::SnapshotInput;
use ondisk::rdb::{RDB_MAX_VERSION, RDB_MIN_EXPORT_VERSION};
use ondisk::{Compression, RDB_EXPORT_VERSION};
use std::path::PathBuf;
use std::process::ExitCode;

const EXIT_CODES: &str = "\
Exit codes:
  0  success (verify: every file is intact and matches the summary)
  1  bad input data: corrupt, truncated, missing a file, or disagreeing with its summary
     (the message names the file and, where it can, the byte offset)
  2  usage error (bad arguments)
  3  I/O error: a file or directory could not be read, created, written or synced";

/// Offline tool for Strata snapshots: verify, compact, re-shard, and convert to and from
/// Redis RDB.
///
/// A snapshot is a summary file DIR/NAME-summary.strata plus the shard files it lists. Every
/// command streams, so memory stays small whatever the snapshot's size; every command that
/// writes does so crash-safely (temporary files, fsync, rename; a snapshot's summary last).
#[derive(Parser, Debug)]
#[command(name = "strata-compact", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check every shard file of a snapshot against its summary and print a report.
    ///
    /// Reads each file in full: header, every block's checksums, every record, the end frame,
    /// then size, CRC32 and record count against the summary. Prints one line per file and
    /// a last line "OK: N files, K keys" or "CORRUPT: ..." naming the file and offset.
    #[command(after_help = EXIT_CODES)]
    Verify {
        #[command(flatten)]
        input: InputArgs,
    },

    /// Rewrite a snapshot without expired keys and tombstones, optionally re-sharded.
    ///
    /// Live keys, strings and other types alike, are copied exactly (value, TTL, client flags)
    /// into the file shard_of(key, N) names. Writing to the input's own directory and name
    /// replaces the snapshot atomically: new shard files first, the summary last, then the old
    /// files go.
    #[command(after_help = EXIT_CODES)]
    Compact {
        /// The input's summary file (DIR/NAME-summary.strata).
        summary: PathBuf,
        /// Directory for the new snapshot (created if missing; may be the input's).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// Name of the new snapshot [default: the input's name].
        #[arg(long)]
        name: Option<String>,
        /// Number of shard files to write [default: the input's].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
        shards: Option<u32>,
        /// Block compression of the new files: none, lz4 or zstd [default: the input's].
        #[arg(long, value_name = "CODEC", value_parser = parse_compression)]
        compression: Option<Compression>,
        /// Treat this unix time in milliseconds as now when dropping expired keys
        /// [default: the current time].
        #[arg(long, value_name = "MS")]
        now_ms: Option<u64>,
    },

    /// Export a snapshot as one Redis RDB file (expired and tombstoned keys left out).
    ///
    /// The default RDB version, 10, loads in redis-server 7.0 and newer. Keys of types other
    /// than string keep their stored RDB encoding; one whose type is newer than the version is
    /// reported with a warning. Client flags have no place in RDB and are dropped with a
    /// warning.
    #[command(after_help = EXIT_CODES)]
    ToRdb {
        #[command(flatten)]
        input: InputArgs,
        /// The RDB file to write (replaced atomically if it exists).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// RDB format version to write.
        #[arg(long, value_name = "V", default_value_t = RDB_EXPORT_VERSION,
              value_parser = clap::value_parser!(u32)
                  .range(i64::from(RDB_MIN_EXPORT_VERSION)..=i64::from(RDB_MAX_VERSION)))]
        rdb_version: u32,
        /// Treat this unix time in milliseconds as now when dropping expired keys
        /// [default: the current time].
        #[arg(long, value_name = "MS")]
        now_ms: Option<u64>,
    },

    /// Import a Redis RDB file (versions 1 to 12) as a Strata snapshot.
    ///
    /// Strings are imported with their TTLs; keys of other types are skipped, counted per
    /// type and reported as a warning (exit status 0). Expired keys are left out.
    #[command(after_help = EXIT_CODES)]
    FromRdb {
        /// The RDB file to read.
        rdb: PathBuf,
        /// Directory for the new snapshot (created if missing).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// Name of the new snapshot: writes DIR/NAME-summary.strata.
        #[arg(long, default_value = "dump")]
        name: String,
        /// Number of shard files to write.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=65536))]
        shards: u32,
        /// Block compression: none, lz4 or zstd.
        #[arg(long, value_name = "CODEC", default_value = "lz4", value_parser = parse_compression)]
        compression: Compression,
        /// Treat this unix time in milliseconds as now when dropping expired keys
        /// [default: the current time].
        #[arg(long, value_name = "MS")]
        now_ms: Option<u64>,
    },

    /// Print what a snapshot holds: keys per db and type, size histograms, TTLs, largest values.
    ///
    /// Counts records as stored: expired keys appear under "ttl: expired" and tombstones on
    /// their own line (compact removes both).
    #[command(after_help = EXIT_CODES)]
    Stats {
        #[command(flatten)]
        input: InputArgs,
        /// Treat this unix time in milliseconds as now for the TTL classes
        /// [default: the current time].
        #[arg(long, value_name = "MS")]
        now_ms: Option<u64>,
    },
}

/// A snapshot to read: its summary file, or its directory plus its name.
#[derive(clap::Args, Debug)]
struct InputArgs {
    /// The snapshot's summary file (DIR/NAME-summary.strata), or its directory (then --name
    /// picks the snapshot).
    summary: PathBuf,
    /// Snapshot name when SUMMARY is a directory: reads DIR/NAME-summary.strata.
    #[arg(long, default_value = "dump")]
    name: String,
}

impl InputArgs {
    fn summary_path(&self) -> PathBuf {
        SnapshotInput::locate(&self.summary, &self.name)
    }
}

fn parse_compression(s: &str) -> Result<Compression, String> {
    s.parse()
}

/// Prints a warning line on stderr.
pub fn warn(msg: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "strata-compact: warning: {msg}");
}

fn run(cli: Cli) -> Result<u8, Failure> {
    let now = |ms: Option<u64>| ms.unwrap_or_else(output::now_ms);
    match cli.command {
        Command::Verify { input } => verify::run(&input.summary_path()),
        Command::Compact {
            summary,
            out_dir,
            name,
            shards,
            compression,
            now_ms,
        } => rewrite::run(&rewrite::CompactOptions {
            summary: &summary,
            out_dir: &out_dir,
            name: name.as_deref(),
            shards,
            compression,
            now_ms: now(now_ms),
        }),
        Command::ToRdb {
            input,
            out,
            rdb_version,
            now_ms,
        } => rdb::to_rdb(&input.summary_path(), &out, rdb_version, now(now_ms)),
        Command::FromRdb {
            rdb,
            out_dir,
            name,
            shards,
            compression,
            now_ms,
        } => rdb::from_rdb(&rdb::FromRdbOptions {
            rdb: &rdb,
            out_dir: &out_dir,
            name: &name,
            shards,
            compression,
            now_ms: now(now_ms),
        }),
        Command::Stats { input, now_ms } => stats::run(&input.summary_path(), now(now_ms)),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors: clap prints them to stdout, status 0.
            if !e.use_stderr() {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            eprint!("strata-compact: {}", e.render());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "strata-compact: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

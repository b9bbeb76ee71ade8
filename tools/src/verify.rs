//! `verify`: reads every shard file of a snapshot in full and reports what is wrong, where.
//!
//! Each file is checked on its own (header, every block's CRCs, the record stream, the end
//! frame, then size, CRC32 and record count against the summary), so one damaged file does not
//! hide the state of the others. Keys are strings and objects (keys of other types, which get
//! their own count); tombstones and unknown kinds are records but not keys. Reads only; never
//! writes a byte.

use crate::error::{Failure, EXIT_CORRUPT, EXIT_IO, EXIT_OK};
use crate::input::{ShardScan, SnapshotInput};
use crate::progress::Progress;
use ondisk::FileStats;
use std::path::Path;

/// Runs the check and prints the report; returns the exit status.
pub fn run(summary_path: &Path) -> Result<u8, Failure> {
    let input = match SnapshotInput::open(summary_path) {
        Ok(i) => i,
        Err(e) => {
            report!("{}: {e}", final_word(&e));
            return Err(e);
        }
    };
    let s = &input.summary;
    report!(
        "snapshot {}: id {:x}, created_ms {}, {} file(s), {}",
        input.summary_path.display(),
        s.snapshot_id,
        s.created_ms,
        s.files.len(),
        s.compression
    );
    let progress = Progress::new("verify", input.total_bytes());
    let mut lines = Vec::with_capacity(s.files.len());
    let (mut keys, mut objects) = (0u64, 0u64);
    let mut first_problem: Option<(String, Failure)> = None;
    let mut bad = 0usize;
    for (index, f) in s.files.iter().enumerate() {
        match check_file(&input, index, &progress) {
            Ok((stats, unknown)) => {
                let file_keys = stats.keys + stats.objects;
                keys += file_keys;
                objects += stats.objects;
                // Shown only when there are some, so older snapshots' lines keep their shape.
                let object_column = if stats.objects > 0 {
                    format!("  objects {}", stats.objects)
                } else {
                    String::new()
                };
                let note = if unknown > 0 {
                    format!(" ({unknown} record(s) of unknown kinds)")
                } else {
                    String::new()
                };
                lines.push(format!(
                    "  {}  records {}  keys {file_keys}{object_column}  bytes {}  OK{note}",
                    f.name, stats.records, stats.bytes
                ));
            }
            Err(e) => {
                bad += 1;
                lines.push(format!("  {}  ERROR: {e}", f.name));
                // Damaged data outranks a read failure as the headline.
                let replace = match &first_problem {
                    None => true,
                    Some((_, prev)) => prev.exit_code() == EXIT_IO && e.exit_code() == EXIT_CORRUPT,
                };
                if replace {
                    first_problem = Some((f.name.clone(), e));
                }
            }
        }
    }
    progress.finish();
    for l in &lines {
        report!("{l}");
    }
    let Some((name, e)) = first_problem else {
        let of_which = if objects > 0 {
            format!(" ({objects} objects)")
        } else {
            String::new()
        };
        report!("OK: {} files, {keys} keys{of_which}", s.files.len());
        return Ok(EXIT_OK);
    };
    report!(
        "{}: {bad} of {} files bad; {name}: {e}",
        final_word(&e),
        s.files.len()
    );
    Err(e.context(input.dir.join(&name).display()))
}

/// `CORRUPT` for bad data, `FAILED` when the files could not be read at all.
fn final_word(e: &Failure) -> &'static str {
    if e.exit_code() == EXIT_IO {
        "FAILED"
    } else {
        "CORRUPT"
    }
}

/// Reads file `index` to its end: its verified totals and its records of unknown kinds.
fn check_file(
    input: &SnapshotInput,
    index: usize,
    progress: &Progress,
) -> Result<(FileStats, u64), Failure> {
    let mut scan = ShardScan::open(input, index, progress)?;
    while scan.next()?.is_some() {}
    let Some(stats) = scan.stats() else {
        return Err(Failure::Corrupt("ended without an end frame".into()));
    };
    Ok((*stats, scan.skipped_unknown()))
}

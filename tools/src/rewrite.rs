//! `compact`: rewrites a snapshot without its dead records, optionally re-sharded and
//! recompressed.
//!
//! Live keys, strings and objects alike, are copied exactly (db, key, value, expiry, client
//! flags; an object's RDB type and encoded value byte for byte); expired keys, tombstones and
//! the keys they delete are left out. Keys go to the output file `ondisk::shard_of(key, N)`
//! names, so the server can load the result with N threads without moving a key. Output
//! follows [`crate::output`]'s commit rule, so compacting in place swaps the snapshot
//! atomically.

use crate::error::{Failure, EXIT_OK};
use crate::input::{for_each_live_in_pieces, SnapshotInput};
use crate::output::{canonical, check_name, SnapshotOutput, SnapshotSpec};
use crate::progress::Progress;
use ondisk::Compression;
use std::path::{Path, PathBuf};

pub struct CompactOptions<'a> {
    pub summary: &'a Path,
    pub out_dir: &'a Path,
    /// Output name; the input's when `None`.
    pub name: Option<&'a str>,
    /// Output shard count; the input's when `None`.
    pub shards: Option<u32>,
    /// Output compression; the input's when `None`.
    pub compression: Option<Compression>,
    pub now_ms: u64,
}

pub fn run(opts: &CompactOptions<'_>) -> Result<u8, Failure> {
    if opts.summary.is_dir() {
        return Err(Failure::Usage(format!(
            "{} is a directory; compact needs the summary file itself, e.g. {}",
            opts.summary.display(),
            opts.summary.join("dump-summary.strata").display()
        )));
    }
    let input = SnapshotInput::open(opts.summary)?;
    let name = match (opts.name, input.name.as_deref()) {
        (Some(n), _) | (None, Some(n)) => n.to_string(),
        (None, None) => {
            return Err(Failure::Usage(format!(
                "cannot tell the snapshot's name from {} (not NAME-summary.strata); pass --name",
                opts.summary.display()
            )))
        }
    };
    check_name(&name)?;
    let s = &input.summary;
    let shards = opts.shards.unwrap_or(s.shard_count).max(1);
    let compression = opts.compression.unwrap_or(s.compression);

    let target = canonical(opts.out_dir).join(ondisk::summary_file_name(&name));
    let in_place = target == canonical(&input.summary_path);
    // Replacing a snapshot in the input's directory must not delete the input's own files;
    // replacing the input itself must (after the commit).
    let keep: Vec<PathBuf> = if in_place {
        Vec::new()
    } else {
        (0..s.files.len()).map(|i| input.file_path(i)).collect()
    };
    let mut out = SnapshotOutput::create(&SnapshotSpec {
        dir: opts.out_dir,
        name: &name,
        shards,
        compression,
        created_ms: s.created_ms,
        min_id: s.snapshot_id.saturating_add(1),
        keep: &keep,
    })?;
    let progress = Progress::new("compact", input.total_bytes());
    // Libraries first, as the server writes them.
    let libraries = crate::input::functions(&input)?;
    for code in &libraries {
        out.write_function(code)?;
    }
    // A large object goes through a piece at a time, never joined.
    let out = std::cell::RefCell::new(out);
    let mut part = |p: Option<&[u8]>| out.borrow_mut().write_part(p);
    let counts = for_each_live_in_pieces(
        &input,
        opts.now_ms,
        &progress,
        |rec| out.borrow_mut().write(rec),
        Some(&mut part),
    )?;
    let out = out.into_inner();
    let done = out.commit(s.db_count)?;
    progress.finish();

    let before = input.total_bytes();
    let after: u64 = done.summary.files.iter().map(|f| f.bytes).sum();
    report!(
        "input: {} ({} files, {}, {before} bytes)",
        input.summary_path.display(),
        s.files.len(),
        s.compression
    );
    report!(
        "output: {} ({} files, {compression}, {after} bytes){}",
        done.summary_path.display(),
        done.summary.files.len(),
        if in_place { ", in place" } else { "" }
    );
    report!("kept: {}", counts.kept);
    report!("objects kept: {}", counts.objects);
    report!("function libraries kept: {}", libraries.len());
    report!("expired dropped: {}", counts.expired);
    report!("tombstoned dropped: {}", counts.tombstoned);
    report!("tombstones removed: {}", counts.tombstones);
    report!("bytes before: {before}");
    report!("bytes after: {after}");
    if done.removed > 0 {
        report!("replaced snapshot files deleted: {}", done.removed);
    }
    Ok(EXIT_OK)
}

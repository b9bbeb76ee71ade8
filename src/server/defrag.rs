//! Active defrag on each core's heartbeat, as Redis' `activedefrag` does it: while jemalloc's
//! pages in use (`allocator_active`) run past the bytes in blocks (`allocator_allocated`) by
//! more than `active-defrag-threshold-lower` percent and `active-defrag-ignore-bytes`, the
//! shard's tables are walked a bounded step per tick and the heap blocks of values sitting in
//! emptier-than-average slabs are moved to fuller ones (`Shard::defrag_step`), so the emptied
//! slabs go back to the OS. The effort (share of the tick) grows with the fragmentation between
//! the lower and upper thresholds, from `active-defrag-cycle-min` to `-cycle-max` percent.
//!
//! Never: changes a value's bytes, or runs when jemalloc does not serve the heap.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::server::Core;

/// A whole walk that moved nothing means what is left is not in blocks defrag can move: the
/// next walk waits this long.
const IDLE_AFTER_FRUITLESS_PASS: Duration = Duration::from_secs(10);

/// How often jemalloc's stats are read to decide whether to run and how hard (as Redis does):
/// refreshing them merges every arena's, a few hundred thousand instructions.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Per-core state between ticks.
#[derive(Default)]
pub struct Defrag {
    /// Hits when the current walk started.
    hits_at_pass_start: u64,
    resume_at: Option<Instant>,
    /// When the stats were last read, and the effort they called for.
    checked_at: Option<Instant>,
    effort: u64,
}

/// The share of the tick, in percent, defrag should take at these allocator figures; 0 when
/// fragmentation is under the thresholds.
pub fn effort(stats: &crate::memory::AllocatorStats, settings: &crate::config::Settings) -> u64 {
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let (lower, upper) = (
        load(&settings.active_defrag_threshold_lower),
        load(&settings.active_defrag_threshold_upper),
    );
    let (cmin, cmax) = (
        load(&settings.active_defrag_cycle_min),
        load(&settings.active_defrag_cycle_max).max(load(&settings.active_defrag_cycle_min)),
    );
    if stats.allocated == 0 || stats.frag_bytes() < load(&settings.active_defrag_ignore_bytes) {
        return 0;
    }
    let pct = stats.frag_bytes().saturating_mul(100) / stats.allocated;
    if pct < lower.max(1) {
        return 0;
    }
    if pct >= upper || upper <= lower {
        return cmax;
    }
    cmin + (cmax - cmin) * (pct - lower) / (upper - lower)
}

/// One tick of active defrag on `core`'s shard; `period` is the tick's length.
pub fn heartbeat(core: &Core, state: &mut Defrag, period: Duration) {
    let settings = &core.global.settings;
    let stop = |core: &Core| core.shard.borrow_mut().stats.active_defrag_running = 0;
    if !settings.active_defrag.load(Ordering::Relaxed) || !crate::memory::jemalloc_heap() {
        return stop(core);
    }
    let now = Instant::now();
    if state.resume_at.is_some_and(|t| now < t) {
        return stop(core);
    }
    if state
        .checked_at
        .is_none_or(|t| now.duration_since(t) >= CHECK_EVERY)
    {
        state.checked_at = Some(now);
        state.effort = crate::memory::allocator_stats().map_or(0, |s| effort(&s, settings));
    }
    let pct = state.effort;
    if pct == 0 {
        return stop(core);
    }
    let mut shard = core.shard.borrow_mut();
    shard.stats.active_defrag_running = pct;
    if shard.stats.active_defrag_hits < state.hits_at_pass_start {
        // CONFIG RESETSTAT zeroed the counters mid-walk.
        state.hits_at_pass_start = 0;
    }
    let finished = shard.defrag_step(period * pct as u32 / 100);
    if finished {
        let hits = shard.stats.active_defrag_hits;
        state.resume_at =
            (hits == state.hits_at_pass_start).then(|| Instant::now() + IDLE_AFTER_FRUITLESS_PASS);
        state.hits_at_pass_start = hits;
    }
}

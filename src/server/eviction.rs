//! Cache mode's driver: when eviction runs and how much (the policy is `shard::evict`).
//!
//! - The heartbeat, at `--hz` on every core, evicts toward [`ram_goal`] when used memory passed
//!   it, and, with tiering, drops offloaded entries while the tier file is near its budget.
//! - A batch with writes that finds used memory above maxmemory evicts on the spot before it
//!   runs (a burst larger than the heartbeat keeps up with), so writes never get -OOM.
//! - With tiering, RAM pressure is first the offloader's: values move to SSD, writers wait for
//!   it briefly (`connection::wait_for_room`), and entries are dropped only when RAM still
//!   passes maxmemory or the SSD budget is full. So entries go RAM → SSD → gone.
//!
//! Never: evicts when not in cache mode; spends more than its budget per call.

use std::time::Duration;

use super::core::Core;
use crate::shard::evict::{Candidates, Evicted};
use crate::shard::Shard;

/// Maxmemory less what the process's own RSS holds beyond the allocator's count (stacks, rings,
/// allocator slack; not the binary's file pages; at most a third of maxmemory, so a small
/// maxmemory still leaves room to work): what used memory may reach for that RSS to stay near
/// maxmemory. Store mode refuses writes
/// past it (`connection::route`).
pub fn rss_limit(global: &super::Global, max: u64) -> u64 {
    let overhead = global
        .rss_overhead
        .load(std::sync::atomic::Ordering::Relaxed)
        .min(max / 3);
    max - overhead
}

/// Used memory the heartbeat keeps under: [`rss_limit`] less 2%, headroom for writes between
/// ticks.
pub fn ram_goal(global: &super::Global, max: u64) -> u64 {
    rss_limit(global, max) / 100 * 98
}

/// Used memory past which, with tiering, writers (and a snapshot being loaded) wait for the
/// offloader: 5% under [`ram_goal`] (RSS runs a little past its measured overhead under
/// churn), and 90% of maxmemory at most.
pub fn write_room(global: &super::Global, max: u64) -> u64 {
    (ram_goal(global, max) / 100 * 95).min(max / 10 * 9)
}

/// The tier file counts as full past this share of its budget: the offloader reclaims whole
/// pages from 0.97 on (`offload::compact`), so entry-by-entry eviction from SSD is the fallback
/// for when that does not keep up (not while a save holds freed pages: then it frees nothing)...
const TIER_HIGH: f64 = 0.985;
/// ...and runs until the allocated pages are under this share (it prefers values alone on
/// their page, so pages do come free).
const TIER_LOW: f64 = 0.975;

fn used() -> u64 {
    crate::memory::used_memory()
}

/// True when the shard's tier file is (nearly) out of room.
fn tier_pressed(sh: &Shard) -> bool {
    sh.tier.as_ref().is_some_and(|t| {
        let (_, allocated, cap) = t.space();
        t.is_full() || allocated as f64 > TIER_HIGH * cap as f64
    })
}

fn tier_relieved(sh: &Shard) -> bool {
    sh.tier.as_ref().is_none_or(|t| {
        let (_, allocated, cap) = t.space();
        (allocated as f64) < TIER_LOW * cap as f64
    })
}

/// True while a save holds the shard's tier frees (see `Shard::snapshot_begin`).
fn frees_held(sh: &Shard) -> bool {
    sh.tier.as_ref().is_some_and(|t| t.frees_held())
}

/// What may go when RAM is the constraint: any entry (an offloaded one gives SSD space back,
/// which the offloader uses to move a RAM value out), but only RAM entries while a save holds
/// the tier's frees. Then dropping an offloaded entry frees nothing on SSD and only its index
/// in RAM: a write burst during a save dropped nine tenths of the SSD tier that way.
fn ram_candidates(sh: &Shard) -> Candidates {
    if frees_held(sh) {
        Candidates::InRam
    } else {
        Candidates::Any
    }
}

/// One heartbeat: at most `budget` of eviction on this core.
pub fn heartbeat(core: &Core, budget: Duration) -> Evicted {
    let settings = &core.global.settings;
    let max = settings.maxmemory();
    if !settings.cache_mode || max == 0 {
        return Evicted::default();
    }
    let mut sh = core.shard.borrow_mut();
    let mut out = Evicted::default();
    // While a save holds the tier's frees, evicting from SSD gives no space back.
    if tier_pressed(&sh) && !frees_held(&sh) {
        let e = sh.evict(Candidates::OnDisk, budget / 2, tier_relieved);
        out.ram += e.ram;
        out.ssd += e.ssd;
    }
    // With tiering the offloader handles RAM until what RSS allows is passed.
    let goal = if sh.tier.is_some() && !tier_pressed(&sh) {
        rss_limit(&core.global, max)
    } else {
        ram_goal(&core.global, max)
    };
    if used() > goal {
        let which = ram_candidates(&sh);
        let e = sh.evict(which, budget, |_| used() <= goal);
        out.ram += e.ram;
        out.ssd += e.ssd;
    }
    out
}

/// Before a batch with writes of about `incoming` bytes: evicts on this core until they fit
/// under the memory goal, for at most a millisecond at a time. During a save, entries the
/// snapshot has not reached go only while the copies they leave stay under the backlog limit
/// (see `shard::evict`); past it the batch waits for the serializer, which writes those copies
/// and walks on, up to 200 ms in 1 ms steps.
pub async fn make_room(core: &Core, incoming: u64) {
    let max = core.global.settings.maxmemory();
    if max == 0 {
        return;
    }
    // RSS, not only the allocator's count, stays under maxmemory: with tiering too (the limit
    // used to be maxmemory itself there, and a debug build's RSS went 9% past it).
    let limit = rss_limit(&core.global, max);
    let goal = limit.saturating_sub(incoming);
    for _ in 0..200 {
        if used() + incoming <= limit {
            return;
        }
        let saving = {
            let mut sh = core.shard.borrow_mut();
            let which = ram_candidates(&sh);
            sh.evict(which, Duration::from_millis(1), |_| used() <= goal);
            sh.saving()
        };
        if used() <= goal || !saving {
            return;
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

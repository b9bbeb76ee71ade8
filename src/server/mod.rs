//! The server: everything between a parsed request and a shard. The command table and the one
//! protocol-neutral dispatcher, sessions and their mailboxes, connection and server commands,
//! the mesh between cores, cross-shard transactions, loads from the SSD tier, the offloader,
//! cache-mode eviction, snapshots and loading them.
//!
//! ```text
//!   core 0                          core 1
//!  ┌──────────────────────┐        ┌──────────────────────┐
//!  │ sessions ──┐         │  Msg   │         ┌── sessions │
//!  │            ├─inline──▶ shard 0│         │            │
//!  │            └─────────┼────────▶ mesh rx ─▶ shard 1    │
//!  │ mesh rx ◀────────────┼────────┘         │            │
//!  │ mailboxes ◀── posts from any core ──────┘            │
//!  └──────────────────────┘        └──────────────────────┘
//! ```
//! A command for the local shard runs inline; one for another shard is boxed into a job and
//! sent over that core's channel, and the reply comes back on a oneshot. Jobs never block: the
//! only waiting is for a cross-shard transaction's lock ([`core::Gate`]), and then jobs are
//! deferred, not blocked on. Executors park when idle (no spinning).
//!
//! Never: touches a socket or a wire format (that is `net/` and `protocol/`).

pub mod admin;
pub mod blocking;
pub mod cmdstats;
pub mod core;
pub mod defrag;
pub mod dispatch;
pub mod error;
pub mod eviction;
pub mod exec;
pub mod load;
pub mod locked;
pub mod memcache;
pub mod multi;
pub mod offload;
pub mod pubsub;
pub mod script;
pub mod session;
pub mod snapshot;
pub mod sort;
pub mod table;
pub mod tracking;
pub mod txn;
pub mod txn_collections;
pub mod zset_cross;

#[cfg(test)]
mod tests;

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::StreamExt;
use tracing::error;

pub use self::core::{Core, Global, Msg};
use crate::runtime::spawn;
use crate::shard::Shard;

/// Sets up core `id`: its shard with its tier file, and the tasks that keep it (the mesh
/// receiver, the offloader, the background tick). A tier file that cannot be created ends the
/// process: nothing has been served yet.
pub async fn start_core(
    id: usize,
    global: Arc<Global>,
    rx: mpsc::UnboundedReceiver<Msg>,
) -> Rc<Core> {
    let mut shard = Shard::new(id, global.settings.clone());
    shard.events = Some(Arc::new(pubsub::KeyspaceEvents::new(global.clone())));
    shard.watches.tracking.sink = Some(tracking::CoreSink::new(global.clone(), id));
    let tier = match &global.settings.tiered {
        Some(ts) => {
            let path = ts.file_path(id);
            match tiering::TierStore::create(&path, ts.file_bytes_per_shard).await {
                Ok(t) => {
                    t.set_codec(ts.codec);
                    t.set_read_budget(read_budget(
                        global.settings.maxmemory(),
                        global.settings.threads as u64,
                    ));
                    global.add_tier_file(path);
                    Some((t, ts.clone()))
                }
                Err(e) => {
                    error!("--tiered_prefix: {e}");
                    global.remove_tier_files();
                    std::process::exit(1);
                }
            }
        }
        None => None,
    };
    shard.tier = tier.as_ref().map(|(t, _)| t.clone());
    let core = Rc::new(Core::new(id, shard, global));
    if let Some((t, ts)) = tier {
        let c = core.clone();
        spawn(async move { offload::run(c, t, ts).await }).detach();
    }
    let c = core.clone();
    spawn(async move {
        let mut rx = rx;
        while let Some(msg) = rx.next().await {
            c.handle(msg);
        }
    })
    .detach();
    let c = core.clone();
    spawn(async move { background(c).await }).detach();
    core
}

/// Loads this core's share of the start-up snapshot; on core 0, then marks the server as
/// serving and starts the snapshot schedule.
pub async fn before_serving(core: &Rc<Core>, snapshot: Option<&load::Shared>) {
    if let Some(shared) = snapshot {
        load::run(core, &shared.0, &shared.1).await;
    }
    if core.id == 0 {
        core.global
            .serving
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(schedule) = core.global.settings.snapshot.cron.clone() {
            let c = core.clone();
            spawn(async move { snapshot::cron(c, schedule).await }).detach();
        }
    }
}

/// Periodic per-core work at `--hz`: active expiry with a CPU budget, active defrag, memory peak
/// tracking.
async fn background(core: Rc<Core>) {
    let mut last_trim = (std::time::Instant::now(), std::time::Instant::now());
    let tracking_over = std::cell::Cell::new(0);
    // Offloaded hashes with fields due are being read back (one batch at a time).
    let loading_fields = Rc::new(std::cell::Cell::new(false));
    let mut defrag = defrag::Defrag::default();
    loop {
        let settings = &core.global.settings;
        let (period, hz) = (
            settings.tick_period(),
            settings
                .hz
                .load(std::sync::atomic::Ordering::Relaxed)
                .max(1),
        );
        glommio::timer::sleep(period).await;
        let used = core.global.note_memory();
        core.shard.borrow_mut().tick_clock();
        tracking::limit_table(
            &mut core.shard.borrow_mut(),
            settings.tracking_table_max_keys(),
            &tracking_over,
        );
        if core.id == 0 {
            trim_heap(&core.global, used, &mut last_trim);
        }
        if core.gate.is_locked() {
            continue;
        }
        // Cache mode: eviction toward the memory goal, a quarter of the tick at most.
        if settings.cache_mode {
            eviction::heartbeat(&core, period / 4);
        }
        defrag::heartbeat(&core, &mut defrag, period);
        // Idle times kept from wrapping: every table covered about every ten minutes.
        core.shard.borrow_mut().age_step(600 * hz as usize);
        if !core.global.active_expire_enabled() {
            continue;
        }
        // A quarter of the tick at most, like Redis' slow expire cycle.
        let budget = period / 4;
        let reaped = core.shard.borrow_mut().active_expire(budget, hz);
        if reaped > 0 {
            tracing::trace!(core = core.id, reaped, "active expiry");
        }
        if !loading_fields.get() {
            let due = core.shard.borrow_mut().take_field_loads();
            if !due.is_empty() {
                loading_fields.set(true);
                let (c, flag) = (core.clone(), loading_fields.clone());
                spawn(async move {
                    exec::load_due_hashes(&c, due).await;
                    flag.set(false);
                })
                .detach();
            }
        }
    }
}

/// Ten times a second notes how far the process's own RSS (`memory::owned_rss_bytes`: not the
/// binary's file pages) runs past what is allocated, and hands freed heap memory back to the OS
/// when that is a lot, or when RSS nears maxmemory (jemalloc returns emptied pages only after
/// their decay time, glibc keeps freed blocks, e.g. after values moved to SSD): once a second at
/// most, ten times a second near the bound.
fn trim_heap(
    global: &Global,
    used: u64,
    (measured, trimmed): &mut (std::time::Instant, std::time::Instant),
) {
    if measured.elapsed() < Duration::from_millis(100) {
        return;
    }
    *measured = std::time::Instant::now();
    let mut rss = crate::memory::owned_rss_bytes();
    let max = global.settings.maxmemory();
    let near_bound = max > 0 && rss > max / 100 * 90 && rss > used + (4 << 20);
    let every = if near_bound {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    };
    if (near_bound || rss > used + (16 << 20)) && trimmed.elapsed() >= every {
        *trimmed = std::time::Instant::now();
        // The heap is jemalloc's; C libraries' blocks are glibc's.
        crate::memory::purge();
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim has no preconditions; it only returns free heap pages to the OS.
        unsafe {
            libc::malloc_trim(0);
        }
        rss = crate::memory::owned_rss_bytes();
    }
    // Measured after any trim: what RSS keeps beyond the count even when freed memory went
    // back, which is what the limits derived from it must leave room for. Peaks fade slowly
    // (1% of maxmemory per measurement): churn brings them back between trims.
    let measured_now = rss.saturating_sub(used);
    let before = global
        .rss_overhead
        .load(std::sync::atomic::Ordering::Relaxed);
    global.rss_overhead.store(
        measured_now.max(before.saturating_sub((max / 100).max(1 << 20))),
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// 1.50G-style rendering used by INFO and logs.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n}B")
    } else {
        format!("{v:.2}{}", UNITS[u])
    }
}

/// Bytes of tier reads one shard keeps in flight: its share of maxmemory / 64, between 512 KiB
/// (128 single-page reads, more than the disk needs to run at full rate) and 16 MiB (no
/// maxmemory).
fn read_budget(maxmemory: u64, shards: u64) -> u64 {
    if maxmemory == 0 {
        return 16 << 20;
    }
    (maxmemory / 64 / shards.max(1)).clamp(512 << 10, 16 << 20)
}

//! Freeing large collections off the shard's core, as Redis' lazyfree does: dropping a set of a
//! million members frees a million blocks, which would stall every client of the shard. An
//! object past [`LAZYFREE_BYTES`] is handed, whatever removed it (DEL, UNLINK, an overwrite,
//! expiry, eviction, FLUSHALL), to one background thread that drops it. The memory is counted
//! as used until that thread frees it; INFO shows the objects still waiting.
//!
//! Never: blocks the caller (the queue is unbounded and the thread only drops), or frees
//! anything the caller still refers to (it gets the object's only box).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};

use super::object::TypedObject;

/// Objects holding at least this many heap bytes are freed in the background.
pub const LAZYFREE_BYTES: usize = 64 * 1024;

/// The way to the background thread (None when it could not start).
type Queue = Option<Mutex<Sender<Box<dyn TypedObject>>>>;

static QUEUE: OnceLock<Queue> = OnceLock::new();
static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

fn queue() -> Option<&'static Mutex<Sender<Box<dyn TypedObject>>>> {
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Box<dyn TypedObject>>();
            let spawned = std::thread::Builder::new()
                .name("strata-lazyfree".into())
                .spawn(move || {
                    for obj in rx {
                        drop(obj);
                        PENDING.fetch_sub(1, Ordering::Relaxed);
                        FREED.fetch_add(1, Ordering::Relaxed);
                    }
                });
            match spawned {
                Ok(_) => Some(Mutex::new(tx)),
                Err(e) => {
                    tracing::warn!(
                        "no background thread to free large objects ({e}): freeing them inline"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// Drops `obj`: in the background when it is large, here otherwise (or when the background
/// thread could not start).
pub fn free(obj: Box<dyn TypedObject>) {
    if obj.heap_bytes() < LAZYFREE_BYTES {
        return;
    }
    let Some(q) = queue() else {
        return;
    };
    let Ok(tx) = q.lock() else {
        return;
    };
    PENDING.fetch_add(1, Ordering::Relaxed);
    if let Err(back) = tx.send(obj) {
        PENDING.fetch_sub(1, Ordering::Relaxed);
        drop(back);
    }
}

/// Objects handed to the background thread and not yet freed (INFO `lazyfree_pending_objects`).
pub fn pending() -> u64 {
    PENDING.load(Ordering::Relaxed)
}

/// Objects the background thread has freed (INFO `lazyfreed_objects`).
pub fn freed() -> u64 {
    FREED.load(Ordering::Relaxed)
}

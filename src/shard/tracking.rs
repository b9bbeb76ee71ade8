//! Client-side caching's table for this shard (Redis' CLIENT TRACKING, default mode): for each
//! key of this shard that a tracking client read, the ids of those clients. A change of the key
//! (reported through [`super::watch::Watches::touch`], the one hook every modification takes:
//! writes, deletions, lazy and active expiry, eviction) hands its ids to the [`Invalidations`]
//! sink once and forgets the key; BCAST mode's prefixes are matched by the sink, which hears of
//! every change while some client has one. FLUSHDB / FLUSHALL drop the whole table (the server
//! sends the null invalidation). The table is bounded by `tracking-table-max-keys` over all
//! shards: [`Tracking::evict_over`] invalidates keys until the total is back under it.
//!
//! Never: knows sessions or sends anything itself (the sink, installed by the server, does), or
//! costs more than a load and a branch per change while nobody tracks.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Keys in every shard's table (INFO `tracking_total_keys`).
static TOTAL_KEYS: AtomicUsize = AtomicUsize::new(0);
/// Client ids in every shard's table (INFO `tracking_total_items`).
static TOTAL_ITEMS: AtomicUsize = AtomicUsize::new(0);
/// BCAST prefixes registered by clients (kept by the server): while it is not zero every change
/// is reported to the sink.
static BCAST_PREFIXES: AtomicUsize = AtomicUsize::new(0);

/// Keys tracked over all shards.
pub fn total_keys() -> usize {
    TOTAL_KEYS.load(Ordering::Relaxed)
}

/// Client ids tracked over all shards.
pub fn total_items() -> usize {
    TOTAL_ITEMS.load(Ordering::Relaxed)
}

/// The server notes how many BCAST prefixes clients have registered.
pub fn set_bcast_prefixes(n: usize) {
    BCAST_PREFIXES.store(n, Ordering::Relaxed);
}

/// True when some change anywhere may have to be reported (a key tracked or a prefix held):
/// cross-shard writes mark their keys then.
pub fn active_anywhere() -> bool {
    TOTAL_KEYS.load(Ordering::Relaxed) > 0 || BCAST_PREFIXES.load(Ordering::Relaxed) > 0
}

/// Where invalidations go: the server's sessions.
pub trait Invalidations {
    /// `key` changed: tell the clients `ids` (default mode). `writer` is the client whose
    /// command changed it (0 for none: expiry, eviction, the table's own limit), for NOLOOP.
    fn invalidate(&self, ids: &[u64], key: &[u8], writer: u64);
    /// `key` changed while BCAST prefixes exist (the sink matches and batches them), by work
    /// core `origin` started (None: this core's own), whose end sends the batch.
    fn changed(&self, key: &[u8], writer: u64, origin: Option<u16>);
    /// Sends what [`Invalidations::changed`] gathered (the work that changed the keys is done).
    fn flush(&self);
    /// Work spanning shards starts (`true`) or ends: until the last that started ends,
    /// [`Invalidations::flush`] keeps what was gathered, so that its changes on every shard
    /// go out together.
    fn hold(&self, _on: bool) {}
}

/// The sink a shard holds (per core: it never leaves its core).
pub type Sink = Rc<dyn Invalidations>;

/// Who runs the command the shard is executing: its changes are that client's (NOLOOP), and
/// when `track` is set the keys a read-only command names are remembered for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    pub id: u64,
    pub track: bool,
    /// A script's command: BCAST counts its changes as the script's, not the client's (Redis
    /// records the script's own client), so NOLOOP does not skip them there.
    pub script: bool,
    /// The core whose client runs the command (None: this core's own work): BCAST gathers
    /// a command's changes on all shards there, one message per prefix as Redis sends.
    pub core: Option<u16>,
}

impl Caller {
    /// No client: the server's own work, the memcached port.
    pub const NONE: Caller = Caller {
        id: 0,
        track: false,
        script: false,
        core: None,
    };
}

/// Tracked keys of this shard: key -> ids of the clients that read it.
#[derive(Default)]
pub struct Tracking {
    keys: HashMap<Box<[u8]>, Vec<u64>>,
    items: usize,
    /// The client whose command runs now (set around each command by the server).
    pub caller: Caller,
    pub sink: Option<Sink>,
}

impl Tracking {
    /// True when a change needs no work here: no tracked key on this shard, no prefix anywhere.
    #[inline]
    pub fn idle(&self) -> bool {
        self.keys.is_empty() && BCAST_PREFIXES.load(Ordering::Relaxed) == 0
    }

    /// Keys tracked on this shard.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Remembers that client `id` read `key`.
    pub fn remember(&mut self, key: &[u8], id: u64) {
        let ids = match self.keys.get_mut(key) {
            Some(ids) => ids,
            None => {
                TOTAL_KEYS.fetch_add(1, Ordering::Relaxed);
                self.keys.entry(key.into()).or_default()
            }
        };
        if !ids.contains(&id) {
            ids.push(id);
            self.items += 1;
            TOTAL_ITEMS.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `key` changed, by the current caller.
    #[inline]
    pub fn touch(&mut self, key: &[u8]) {
        let c = self.caller;
        self.touch_as(key, c.id, if c.script { 0 } else { c.id }, c.core);
    }

    /// `key` changed, by client `writer` (0: nobody's command).
    pub fn touch_by(&mut self, key: &[u8], writer: u64) {
        self.touch_as(key, writer, writer, None);
    }

    /// `key` changed, by client `writer` for default mode and `bcast_writer` for BCAST, in
    /// work core `origin` started.
    fn touch_as(&mut self, key: &[u8], writer: u64, bcast_writer: u64, origin: Option<u16>) {
        if BCAST_PREFIXES.load(Ordering::Relaxed) > 0 {
            if let Some(s) = &self.sink {
                s.changed(key, bcast_writer, origin);
            }
        }
        if self.keys.is_empty() {
            return;
        }
        if let Some(ids) = self.forget(key) {
            if let Some(s) = &self.sink {
                s.invalidate(&ids, key, writer);
            }
        }
    }

    fn forget(&mut self, key: &[u8]) -> Option<Vec<u64>> {
        let ids = self.keys.remove(key)?;
        TOTAL_KEYS.fetch_sub(1, Ordering::Relaxed);
        self.items -= ids.len();
        TOTAL_ITEMS.fetch_sub(ids.len(), Ordering::Relaxed);
        Some(ids)
    }

    /// FLUSHDB / FLUSHALL: every tracked key is dropped without a message of its own.
    pub fn clear(&mut self) {
        TOTAL_KEYS.fetch_sub(self.keys.len(), Ordering::Relaxed);
        TOTAL_ITEMS.fetch_sub(self.items, Ordering::Relaxed);
        self.keys.clear();
        self.items = 0;
    }

    /// While more than `max` keys are tracked over all shards (0 = no limit), invalidates keys
    /// of this shard, up to `effort` of them; returns how many it invalidated.
    pub fn evict_over(&mut self, max: usize, effort: usize) -> usize {
        if max == 0 || total_keys() <= max {
            return 0;
        }
        let mut done = 0;
        while done < effort && total_keys() > max {
            // HashMap order is arbitrary: as good as Redis' random walk.
            let Some(key) = self.keys.keys().next().cloned() else {
                break;
            };
            if let Some(ids) = self.forget(&key) {
                if let Some(s) = &self.sink {
                    s.invalidate(&ids, &key, 0);
                }
            }
            done += 1;
        }
        done
    }
}

impl Drop for Tracking {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// An invalidation as the sink got it: (ids, key, writer).
    type Sent = (Vec<u64>, Vec<u8>, u64);

    #[derive(Default)]
    struct Seen(RefCell<Vec<Sent>>);

    impl Invalidations for Seen {
        fn invalidate(&self, ids: &[u64], key: &[u8], writer: u64) {
            self.0
                .borrow_mut()
                .push((ids.to_vec(), key.to_vec(), writer));
        }
        fn changed(&self, _: &[u8], _: u64, _: Option<u16>) {}
        fn flush(&self) {}
    }

    #[test]
    fn a_change_invalidates_once_and_forgets() {
        let seen = Rc::new(Seen::default());
        let mut t = Tracking::default();
        t.sink = Some(seen.clone());
        assert!(t.idle());
        t.remember(b"k", 7);
        t.remember(b"k", 7);
        t.remember(b"k", 9);
        assert_eq!((t.len(), t.items), (1, 2));
        t.caller = Caller {
            id: 9,
            track: false,
            script: false,
            core: None,
        };
        t.touch(b"other");
        t.touch(b"k");
        t.touch(b"k");
        assert_eq!(*seen.0.borrow(), vec![(vec![7, 9], b"k".to_vec(), 9)]);
        assert!(t.is_empty());
        t.remember(b"a", 1);
        t.remember(b"b", 1);
        t.clear();
        assert_eq!((t.len(), t.items), (0, 0));
        assert_eq!(seen.0.borrow().len(), 1);
    }
}

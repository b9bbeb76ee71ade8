//! The keys of this shard that some client WATCHes, each with a version that every change of
//! the key bumps: a write command, a deletion, a lazy or active expiry, an eviction, FLUSHDB /
//! FLUSHALL and SWAPDB. A watcher notes the version when it WATCHes; EXEC (holding the shard)
//! compares it. The shard's mutation paths call [`Watches::touch`] only when the registry is
//! not empty, so nobody pays for WATCH while nobody watches.
//!
//! The same hook tells client-side caching ([`Tracking`]) of each change, so WATCH and CLIENT
//! TRACKING see exactly the same modifications.
//!
//! Never: knows clients or sessions (a watcher is a version it remembers, held in its session),
//! or does anything when nothing is watched or tracked.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::tracking::Tracking;

/// Watchers registered on every shard of the process: work that would touch keys on another
/// shard (a cross-shard write) is skipped while it is zero. Registration runs on the key's
/// shard, so a transaction that locked that shard after it sees the count.
static WATCHERS: AtomicUsize = AtomicUsize::new(0);

/// True when some client of the process watches some key.
pub fn anyone_watching() -> bool {
    WATCHERS.load(Ordering::Relaxed) > 0
}

/// Watched keys: key bytes -> (db, how many watchers, version) per db watched.
#[derive(Default)]
pub struct Watches {
    keys: HashMap<Box<[u8]>, Vec<Watched>>,
    /// Versions come from one counter, so a version never repeats for a key.
    clock: u64,
    /// Client-side caching's tracked keys, told of every change [`Watches::touch`] hears of.
    pub tracking: Tracking,
}

struct Watched {
    db: usize,
    watchers: u32,
    version: u64,
}

impl Watches {
    /// True when no key of this shard is watched or tracked (the fast path of every write).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.tracking.idle()
    }

    /// Registers one watcher of (db, key); returns the key's current version.
    pub fn add(&mut self, db: usize, key: &[u8]) -> u64 {
        WATCHERS.fetch_add(1, Ordering::Relaxed);
        let list = self.keys.entry(key.into()).or_default();
        if let Some(w) = list.iter_mut().find(|w| w.db == db) {
            w.watchers += 1;
            return w.version;
        }
        self.clock += 1;
        list.push(Watched {
            db,
            watchers: 1,
            version: self.clock,
        });
        self.clock
    }

    /// Drops one watcher of (db, key).
    pub fn remove(&mut self, db: usize, key: &[u8]) {
        let Some(list) = self.keys.get_mut(key) else {
            return;
        };
        if let Some(i) = list.iter().position(|w| w.db == db) {
            WATCHERS.fetch_sub(1, Ordering::Relaxed);
            list[i].watchers -= 1;
            if list[i].watchers == 0 {
                list.swap_remove(i);
            }
        }
        if list.is_empty() {
            self.keys.remove(key);
        }
    }

    /// The version of a watched (db, key); None when nobody watches it.
    pub fn version(&self, db: usize, key: &[u8]) -> Option<u64> {
        self.keys
            .get(key)?
            .iter()
            .find(|w| w.db == db)
            .map(|w| w.version)
    }

    /// Notes a change of (db, key): its watchers' EXEC will fail, its trackers are told.
    #[inline]
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if !self.keys.is_empty() {
            self.touch_slow(db, key);
        }
        if !self.tracking.idle() {
            self.tracking.touch(key);
        }
    }

    /// A change by nobody's command (expiry): NOLOOP clients hear of it too.
    pub fn touch_unattributed(&mut self, db: usize, key: &[u8]) {
        if !self.keys.is_empty() {
            self.touch_slow(db, key);
        }
        if !self.tracking.idle() {
            self.tracking.touch_by(key, 0);
        }
    }

    /// A change WATCH sees and tracking does not (SWAPDB, and FLUSHDB, whose trackers get one
    /// null invalidation instead), as in Redis.
    pub fn touch_version(&mut self, db: usize, key: &[u8]) {
        if !self.keys.is_empty() {
            self.touch_slow(db, key);
        }
    }

    fn touch_slow(&mut self, db: usize, key: &[u8]) {
        let Some(list) = self.keys.get_mut(key) else {
            return;
        };
        if let Some(w) = list.iter_mut().find(|w| w.db == db) {
            self.clock += 1;
            w.version = self.clock;
        }
    }

    /// The watched keys of `db`, for FLUSHDB and SWAPDB (which decide which of them changed).
    pub fn keys_in(&self, db: usize) -> Vec<Box<[u8]>> {
        self.keys
            .iter()
            .filter(|(_, l)| l.iter().any(|w| w.db == db))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_change_on_touch_only_for_that_db_and_key() {
        let mut w = Watches::default();
        assert!(w.is_empty());
        let v = w.add(0, b"k");
        assert_eq!(w.add(0, b"k"), v);
        let other_db = w.add(1, b"k");
        w.touch(0, b"other");
        w.touch(2, b"k");
        assert_eq!(w.version(0, b"k"), Some(v));
        w.touch(0, b"k");
        assert_ne!(w.version(0, b"k"), Some(v));
        assert_eq!(w.version(1, b"k"), Some(other_db));
        w.remove(0, b"k");
        assert!(w.version(0, b"k").is_some());
        w.remove(0, b"k");
        assert_eq!(w.version(0, b"k"), None);
        w.remove(1, b"k");
        assert!(w.is_empty());
        assert_eq!(w.keys_in(0).len(), 0);
    }
}

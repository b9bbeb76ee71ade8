//! The keys of this shard that blocked clients wait on (BLPOP, BZPOPMIN, ...), and those of
//! them a write has since created: the server's blocking registry (`server::blocking`) keeps
//! the waiters themselves and serves the ready keys after the command that made them ready.
//!
//! Never: knows about clients or wakes anyone; it only notes keys. With no waiter, costs one
//! emptiness check per key stored.

use std::collections::HashMap;

use bytes::Bytes;
use smallvec::SmallVec;

#[derive(Default)]
pub struct BlockedKeys {
    /// Key -> the dbs in which someone waits on it.
    watched: HashMap<Box<[u8]>, SmallVec<[usize; 1]>>,
    /// Watched keys stored since they were last served, in the order they were stored.
    ready: Vec<(usize, Bytes)>,
}

impl BlockedKeys {
    /// True when nobody waits on any key of this shard.
    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// Someone waits on `key` in `db`.
    pub fn watch(&mut self, db: usize, key: &[u8]) {
        let dbs = self.watched.entry(key.into()).or_default();
        if !dbs.contains(&db) {
            dbs.push(db);
        }
    }

    /// Nobody waits on `key` in `db` any more.
    pub fn unwatch(&mut self, db: usize, key: &[u8]) {
        if let Some(dbs) = self.watched.get_mut(key) {
            dbs.retain(|d| *d != db);
            if dbs.is_empty() {
                self.watched.remove(key);
            }
        }
    }

    /// `key` in `db` was stored (created or overwritten): noted when someone waits on it.
    pub fn stored(&mut self, db: usize, key: &[u8]) {
        if self.watched.get(key).is_some_and(|dbs| dbs.contains(&db)) {
            self.mark(db, key);
        }
    }

    /// Notes `key` in `db` for the waiters to look at, whatever wrote it.
    pub fn mark(&mut self, db: usize, key: &[u8]) {
        if !self.ready.iter().any(|(d, k)| *d == db && k == key) {
            self.ready.push((db, Bytes::copy_from_slice(key)));
        }
    }

    /// Dbs `a` and `b` swapped (SWAPDB): every watched key in them may now hold data.
    pub fn swapped(&mut self, a: usize, b: usize) {
        let keys: Vec<(usize, Bytes)> = self
            .watched
            .iter()
            .flat_map(|(k, dbs)| {
                dbs.iter()
                    .filter(|d| **d == a || **d == b)
                    .map(|d| (*d, Bytes::copy_from_slice(k)))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (d, k) in keys {
            self.mark(d, &k);
        }
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The keys noted ready, oldest first; the list starts again empty.
    pub fn take_ready(&mut self) -> Vec<(usize, Bytes)> {
        std::mem::take(&mut self.ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watched_keys_become_ready() {
        let mut b = BlockedKeys::default();
        assert!(b.is_empty());
        b.stored(0, b"k");
        assert!(!b.has_ready());
        b.watch(0, b"k");
        b.stored(1, b"k");
        assert!(!b.has_ready());
        b.stored(0, b"k");
        b.stored(0, b"k");
        assert_eq!(b.take_ready(), vec![(0, Bytes::from_static(b"k"))]);
        b.swapped(0, 3);
        assert_eq!(b.take_ready().len(), 1);
        b.unwatch(0, b"k");
        assert!(b.is_empty());
    }
}

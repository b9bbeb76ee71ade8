//! Keys that a command in flight needs in RAM: a command that is not one shard's (cross-shard
//! set and sorted-set operations, SORT, blocking pops) loads its keys' collections before it
//! takes its locks, and pins them until it has run, so the offloader cannot move one back to
//! disk in between (`server::exec::load_collections`, `server::offload`).
//!
//! Counted per (db, key): several commands may pin one key. A pin is taken on the key's shard
//! when the loading job runs there, and dropped by a later message of the same sender, so the
//! count never goes below zero.
//!
//! Never: pins anything the offloader would otherwise keep, or outlives the command that took
//! it (the command's guard drops it however the command ends).

use std::collections::HashMap;

use bytes::Bytes;

/// Pinned keys of one shard: db -> key -> how many commands pin it.
#[derive(Default)]
pub struct Pins {
    by_db: HashMap<usize, HashMap<Bytes, u32>>,
    /// Pins held, all keys together (INFO `tiered_pinned_keys`).
    held: u64,
}

impl Pins {
    /// True when no key is pinned (the offloader's fast path).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// Pins held now (a key pinned by two commands counts twice).
    pub fn held(&self) -> u64 {
        self.held
    }

    pub fn pin(&mut self, db: usize, key: &Bytes) {
        *self
            .by_db
            .entry(db)
            .or_default()
            .entry(key.clone())
            .or_default() += 1;
        self.held += 1;
    }

    /// Drops one pin of (db, key); a key not pinned is left as it is.
    pub fn unpin(&mut self, db: usize, key: &[u8]) {
        let Some(keys) = self.by_db.get_mut(&db) else {
            return;
        };
        let Some(n) = keys.get_mut(key) else {
            return;
        };
        *n -= 1;
        self.held -= 1;
        if *n == 0 {
            keys.remove(key);
            if keys.is_empty() {
                self.by_db.remove(&db);
            }
        }
    }

    #[inline]
    pub fn contains(&self, db: usize, key: &[u8]) -> bool {
        self.held != 0
            && self
                .by_db
                .get(&db)
                .is_some_and(|keys| keys.contains_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_count_per_db_and_key() {
        let mut p = Pins::default();
        let k = Bytes::from_static(b"k");
        assert!(p.is_empty() && !p.contains(0, b"k"));
        p.pin(0, &k);
        p.pin(0, &k);
        p.pin(1, &k);
        assert_eq!(p.held(), 3);
        assert!(p.contains(0, b"k") && p.contains(1, b"k") && !p.contains(2, b"k"));
        p.unpin(0, b"k");
        assert!(p.contains(0, b"k"));
        p.unpin(0, b"k");
        assert!(!p.contains(0, b"k"));
        // An unpin of a key not pinned changes nothing.
        p.unpin(0, b"k");
        p.unpin(3, b"x");
        assert_eq!(p.held(), 1);
        p.unpin(1, b"k");
        assert!(p.is_empty());
    }
}

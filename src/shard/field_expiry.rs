//! Which hashes hold a field with an expiry, and when the first of them may be due: what the
//! shard's active sweep of hash fields visits, in the order they come due. Each hash has one
//! record, a time no field of it expires before (a lower bound: a write that sets a later
//! expiry or drops the soonest one leaves it early, and the sweep that finds nothing due
//! records the exact time). The record needs nothing of the hash itself, so it serves a hash
//! whose blob is in the tier file as well as one in RAM: the sweep brings such a hash back only
//! when its time comes.
//!
//! Never: records a time later than a field's expiry (the sweep would miss that field), or
//! holds two records for one key.

use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

#[derive(Default)]
pub struct FieldExpiries {
    /// Per db: key -> its record.
    by_key: Vec<HashMap<Rc<[u8]>, u64>>,
    /// The same records, soonest first.
    order: BTreeSet<(u64, usize, Rc<[u8]>)>,
}

impl FieldExpiries {
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// The record of `key`, if any.
    pub fn get(&self, db: usize, key: &[u8]) -> Option<u64> {
        self.by_key.get(db)?.get(key).copied()
    }

    /// Notes that no field of `key`'s hash expires before `at`: the record becomes `at` when
    /// there was none or it was later (an earlier one stays: still a lower bound).
    pub fn note(&mut self, db: usize, key: &[u8], at: u64) {
        if self.get(db, key).is_some_and(|was| was <= at) {
            return;
        }
        self.set(db, key, at);
    }

    /// Sets `key`'s record to exactly `at` (the caller knows its soonest field expiry).
    pub fn set(&mut self, db: usize, key: &[u8], at: u64) {
        if self.by_key.len() <= db {
            self.by_key.resize_with(db + 1, HashMap::new);
        }
        let map = &mut self.by_key[db];
        match map.get_key_value(key) {
            Some((k, &was)) => {
                if was == at {
                    return;
                }
                let k = k.clone();
                self.order.remove(&(was, db, k.clone()));
                self.order.insert((at, db, k.clone()));
                map.insert(k, at);
            }
            None => {
                let k: Rc<[u8]> = Rc::from(key);
                self.order.insert((at, db, k.clone()));
                map.insert(k, at);
            }
        }
    }

    /// Drops `key`'s record; returns it.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<u64> {
        let (k, at) = self.by_key.get_mut(db)?.remove_entry(key)?;
        self.order.remove(&(at, db, k));
        Some(at)
    }

    /// Takes out the soonest record when it is due at `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(usize, Rc<[u8]>)> {
        let first = self.order.first()?;
        if first.0 > now {
            return None;
        }
        let (_, db, key) = self.order.pop_first()?;
        if let Some(map) = self.by_key.get_mut(db) {
            map.remove(&key[..]);
        }
        Some((db, key))
    }

    /// Drops every record of `db` (FLUSHDB).
    pub fn clear_db(&mut self, db: usize) {
        if let Some(map) = self.by_key.get_mut(db) {
            if map.is_empty() {
                return;
            }
            map.clear();
            self.order.retain(|(_, d, _)| *d != db);
        }
    }

    /// SWAPDB: the records of `a` and `b` change places.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        if a == b || self.is_empty() {
            return;
        }
        let n = a.max(b) + 1;
        if self.by_key.len() < n {
            self.by_key.resize_with(n, HashMap::new);
        }
        self.by_key.swap(a, b);
        let swap = |d: usize| match d {
            d if d == a => b,
            d if d == b => a,
            d => d,
        };
        self.order = std::mem::take(&mut self.order)
            .into_iter()
            .map(|(at, d, k)| (at, swap(d), k))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_due_in_order_and_stay_lower_bounds() {
        let mut f = FieldExpiries::default();
        f.note(0, b"a", 300);
        f.note(0, b"b", 100);
        f.note(1, b"a", 200);
        // A later time keeps the earlier record; an earlier one replaces it.
        f.note(0, b"a", 400);
        assert_eq!(f.get(0, b"a"), Some(300));
        f.note(0, b"a", 250);
        assert_eq!(f.get(0, b"a"), Some(250));
        assert_eq!(f.len(), 3);
        assert_eq!(f.pop_due(99), None);
        assert_eq!(
            f.pop_due(1000).map(|(d, k)| (d, k.to_vec())),
            Some((0, b"b".to_vec()))
        );
        // Set moves a record either way.
        f.set(1, b"a", 500);
        assert_eq!(
            f.pop_due(1000).map(|(d, k)| (d, k.to_vec())),
            Some((0, b"a".to_vec()))
        );
        f.swap_dbs(0, 1);
        assert_eq!(f.get(0, b"a"), Some(500));
        assert_eq!(f.get(1, b"a"), None);
        assert_eq!(f.remove(0, b"a"), Some(500));
        assert!(f.is_empty());
        f.note(2, b"x", 1);
        f.note(3, b"y", 1);
        f.clear_db(2);
        assert_eq!(f.len(), 1);
        assert_eq!(f.pop_due(1).map(|(d, _)| d), Some(3));
        assert_eq!(f.pop_due(u64::MAX), None);
    }
}

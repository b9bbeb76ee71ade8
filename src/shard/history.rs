//! What a cache remembers of the keys it evicted: their access counters, so that a key that
//! comes back (a miss, then the client's SET) resumes the count it had instead of starting
//! over as a new key. Without it, every return starts at the counter's initial value and is
//! the first candidate to go again, however often it was read before; an LFU that remembers
//! every key's count is measurably better (`hit_ratio trace` prints both bounds).
//!
//! A direct-mapped table of two-byte slots: an 8-bit tag from the key's hash and the counter
//! at eviction (less its idle decay). A new eviction overwrites whatever shared its slot, so
//! the table holds the most recent evictions, about one per slot; a key found is taken out.
//! Its size follows maxmemory (one slot per [`BYTES_PER_SLOT`] bytes rounded up to a power of
//! two: 1/128 to 1/64 of maxmemory), since the keys a cache keeps, and so the ones it evicts,
//! scale with it. Expired keys are not remembered: their time was up, not their popularity.
//!
//! Never: grows past its size.

/// Maxmemory bytes per slot.
const BYTES_PER_SLOT: u64 = 256;
const MIN_SLOTS: u64 = 1 << 10;
const MAX_SLOTS: u64 = 1 << 24;

pub struct History {
    slots: Vec<u16>,
    mask: usize,
}

impl History {
    /// A table sized for `maxmemory` bytes of cache.
    pub fn for_maxmemory(maxmemory: u64) -> History {
        let n = (maxmemory / BYTES_PER_SLOT)
            .clamp(MIN_SLOTS, MAX_SLOTS)
            .next_power_of_two() as usize;
        History {
            slots: vec![0; n],
            mask: n - 1,
        }
    }

    /// Slot index and tag of a key's table hash (bits the table's fingerprint and home bucket
    /// do not use).
    #[inline]
    fn place(&self, h: u64) -> (usize, u8) {
        (((h >> 32) as usize) & self.mask, (h >> 24) as u8)
    }

    /// Remembers an evicted key's counter (0 is never stored: it marks an empty slot).
    pub fn remember(&mut self, h: u64, freq: u32) {
        let (i, tag) = self.place(h);
        self.slots[i] = u16::from(tag) << 8 | freq.clamp(1, 255) as u16;
    }

    /// The counter a key had when it was evicted, if its slot still holds it (taken out).
    pub fn take(&mut self, h: u64) -> Option<u32> {
        let (i, tag) = self.place(h);
        let s = self.slots[i];
        if s != 0 && (s >> 8) as u8 == tag {
            self.slots[i] = 0;
            Some(u32::from(s & 0xff))
        } else {
            None
        }
    }

    pub fn bytes(&self) -> usize {
        self.slots.len() * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::hash;

    #[test]
    fn a_key_gets_back_its_counter_once() {
        let mut h = History::for_maxmemory(1 << 20);
        assert_eq!(h.bytes(), 8192);
        let (a, b) = (hash(b"a"), hash(b"b"));
        assert_eq!(h.take(a), None);
        h.remember(a, 9);
        h.remember(b, 300);
        assert_eq!(h.take(a), Some(9));
        assert_eq!(h.take(a), None);
        assert_eq!(h.take(b), Some(255));
        // A key sharing the slot with another tag is not taken for it.
        let (slot, tag) = h.place(a);
        let c = (slot as u64) << 32 | u64::from(tag ^ 1) << 24;
        assert_eq!(h.place(c), (slot, tag ^ 1));
        h.remember(a, 7);
        assert_eq!(h.take(c), None);
        // The latest eviction in a slot wins.
        h.remember(c, 6);
        assert_eq!(h.take(a), None);
        assert_eq!(h.take(c), Some(6));
    }

    #[test]
    fn size_follows_maxmemory_within_bounds() {
        assert_eq!(History::for_maxmemory(0).bytes(), 2048);
        assert_eq!(History::for_maxmemory(100 << 20).bytes(), 1 << 20);
        assert_eq!(History::for_maxmemory(1 << 40).bytes(), 2 << 24);
    }
}

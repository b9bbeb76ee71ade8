//! Space allocator for the tier file, in 4 KiB pages.
//!
//! Free space is kept as coalesced extents, indexed by position and by length; an allocation
//! takes the best (smallest sufficient) free extent and splits it, else grows the file's
//! high-water mark. Exact page counts with best fit waste less than power-of-two size classes
//! (which lose up to half an extent) while staying O(log n) per operation; freeing merges with
//! both neighbours, and space freed at the end lowers the high-water mark.

use std::collections::{BTreeMap, BTreeSet};

/// Bytes per page: the unit of O_DIRECT I/O and allocation.
pub const PAGE: u64 = 4096;

#[derive(Debug, Default)]
pub struct ExtentAllocator {
    /// Free extents: first page -> length in pages.
    by_start: BTreeMap<u64, u64>,
    /// The same extents as (length, first page), for best fit.
    by_len: BTreeSet<(u64, u64)>,
    /// Pages below this have been handed out at least once.
    end: u64,
    /// Most pages the file may hold.
    capacity: u64,
    /// Pages currently allocated.
    used: u64,
}

impl ExtentAllocator {
    pub fn new(capacity_pages: u64) -> Self {
        ExtentAllocator {
            capacity: capacity_pages,
            ..Default::default()
        }
    }

    /// First page of `pages` contiguous free pages, or None when the file is full.
    pub fn alloc(&mut self, pages: u64) -> Option<u64> {
        if pages == 0 {
            return None;
        }
        if let Some(&(len, start)) = self.by_len.range((pages, 0)..).next() {
            self.remove_free(start, len);
            if len > pages {
                self.insert_free(start + pages, len - pages);
            }
            self.used += pages;
            return Some(start);
        }
        if self.end + pages > self.capacity {
            return None;
        }
        let start = self.end;
        self.end += pages;
        self.used += pages;
        Some(start)
    }

    /// Returns `pages` pages starting at `start`.
    pub fn free(&mut self, start: u64, pages: u64) {
        if pages == 0 {
            return;
        }
        self.used = self.used.saturating_sub(pages);
        let (mut start, mut len) = (start, pages);
        if let Some((&ps, &pl)) = self.by_start.range(..start).next_back() {
            if ps + pl == start {
                self.remove_free(ps, pl);
                start = ps;
                len += pl;
            }
        }
        if let Some(&nl) = self.by_start.get(&(start + len)) {
            self.remove_free(start + len, nl);
            len += nl;
        }
        if start + len == self.end {
            self.end = start;
        } else {
            self.insert_free(start, len);
        }
    }

    fn insert_free(&mut self, start: u64, len: u64) {
        self.by_start.insert(start, len);
        self.by_len.insert((len, start));
    }

    fn remove_free(&mut self, start: u64, len: u64) {
        self.by_start.remove(&start);
        self.by_len.remove(&(len, start));
    }

    pub fn used_pages(&self) -> u64 {
        self.used
    }

    /// Pages below the high-water mark (what the file must be at least as large as).
    pub fn end_pages(&self) -> u64 {
        self.end
    }

    pub fn capacity_pages(&self) -> u64 {
        self.capacity
    }

    /// The longest run of pages one allocation could get now: the longest free extent, or
    /// the room past the high-water mark.
    pub fn largest_free(&self) -> u64 {
        let hole = self.by_len.iter().next_back().map_or(0, |&(len, _)| len);
        hole.max(self.capacity.saturating_sub(self.end))
    }

    /// Free pages below the high-water mark (holes).
    pub fn hole_pages(&self) -> u64 {
        self.by_start.values().sum()
    }

    /// Drops every allocation.
    pub fn reset(&mut self) {
        *self = ExtentAllocator::new(self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_free_is_the_longest_hole_or_the_room_past_the_end() {
        let mut a = ExtentAllocator::new(100);
        assert_eq!(a.largest_free(), 100);
        let x = a.alloc(30).unwrap();
        let _y = a.alloc(60).unwrap();
        assert_eq!(a.largest_free(), 10);
        a.free(x, 30);
        assert_eq!(a.largest_free(), 30);
        assert_eq!(a.alloc(31), None);
        assert_eq!(a.alloc(30), Some(0));
        assert_eq!(a.largest_free(), 10);
    }

    #[test]
    fn bump_then_reuse_best_fit() {
        let mut a = ExtentAllocator::new(100);
        let x = a.alloc(4).unwrap();
        let y = a.alloc(10).unwrap();
        let z = a.alloc(2).unwrap();
        assert_eq!((x, y, z), (0, 4, 14));
        a.free(y, 10);
        assert_eq!(a.hole_pages(), 10);
        // Best fit: a 3-page request takes from the 10-page hole.
        assert_eq!(a.alloc(3), Some(4));
        assert_eq!(a.hole_pages(), 7);
        assert_eq!(a.used_pages(), 9);
    }

    #[test]
    fn coalesces_and_lowers_end() {
        let mut a = ExtentAllocator::new(10);
        let p: Vec<u64> = (0..5).map(|_| a.alloc(2).unwrap()).collect();
        assert_eq!(a.alloc(1), None, "full");
        a.free(p[1], 2);
        a.free(p[3], 2);
        a.free(p[2], 2);
        assert_eq!(a.hole_pages(), 6);
        assert_eq!(a.alloc(6), Some(2));
        a.free(2, 6);
        a.free(p[4], 2);
        assert_eq!(
            a.end_pages(),
            2,
            "freeing the tail lowers the high-water mark"
        );
        assert_eq!(a.hole_pages(), 0);
        a.free(p[0], 2);
        assert_eq!(a.end_pages(), 0);
        assert_eq!(a.used_pages(), 0);
    }

    #[test]
    fn random_model() {
        // Allocations never overlap and accounting matches a model.
        let mut a = ExtentAllocator::new(1000);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut seed = 42u64;
        let mut rnd = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..5000 {
            if live.is_empty() || rnd(3) > 0 {
                let n = 1 + rnd(16);
                if let Some(s) = a.alloc(n) {
                    for &(ls, ln) in &live {
                        assert!(s + n <= ls || ls + ln <= s, "overlap");
                    }
                    assert!(s + n <= 1000);
                    live.push((s, n));
                }
            } else {
                let i = rnd(live.len() as u64) as usize;
                let (s, n) = live.swap_remove(i);
                a.free(s, n);
            }
            let used: u64 = live.iter().map(|x| x.1).sum();
            assert_eq!(a.used_pages(), used);
            assert_eq!(a.used_pages() + a.hole_pages(), a.end_pages());
        }
    }
}

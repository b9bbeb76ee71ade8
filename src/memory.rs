//! Process-wide memory accounting: a counting global allocator.
//!
//! `--maxmemory` is enforced against the bytes the allocator has handed out, so index, keys,
//! values and connection buffers all count, plus what the process's own memory holds beyond that
//! count ([`owned_rss_bytes`]: stacks, rings, allocator slack; not the binary's file pages). Each thread adds to its own cache-line-padded counter
//! (no contention on the hot path); the total is the sum of all counters. A block freed on another
//! thread than the one that allocated it just makes one counter go down and another up.
//! This module must never allocate itself.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

const SLOTS: usize = 256;

#[repr(align(64))]
struct Slot(AtomicI64);

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Slot = Slot(AtomicI64::new(0));
static COUNTERS: [Slot; SLOTS] = [ZERO; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

#[inline]
fn slot() -> usize {
    MY_SLOT
        .try_with(|s| {
            let v = s.get();
            if v != usize::MAX {
                return v;
            }
            // Threads past SLOTS share the last counter; it is atomic, so sharing is only slower.
            let n = NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(SLOTS - 1);
            s.set(n);
            n
        })
        .unwrap_or(SLOTS - 1)
}

#[inline]
fn add(delta: i64) {
    COUNTERS[slot()].0.fetch_add(delta, Ordering::Relaxed);
}

/// The global allocator of the server binary: `System` plus byte counting.
pub struct CountingAlloc;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s
// guarantees hold; the only extra work is an atomic add that neither allocates nor panics.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        add(-(layout.size() as i64));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            add(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Bytes currently allocated by the whole process (0 when the counting allocator is not installed).
pub fn used_memory() -> u64 {
    // Only counters some thread has claimed can be non-zero.
    let used = NEXT_SLOT.load(Ordering::Relaxed).min(SLOTS);
    let total: i64 = COUNTERS[..used.max(1)]
        .iter()
        .map(|c| c.0.load(Ordering::Relaxed))
        .sum();
    total.max(0) as u64
}

/// Resident set size of the process, from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(4096) as u64
}

/// Resident memory the process owns: anonymous and shared-memory pages, from /proc/self/status
/// (RssAnon + RssShmem). File-backed pages (the binary's code and read-only data, about 7 MB of
/// a release build and 17 MB of a debug one) are left out: they are the kernel's page cache, it
/// drops them under pressure and reads them back, and they do not grow with the data, so they
/// are not what maxmemory bounds. The whole RSS where the kernel gives no such split.
pub fn owned_rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return rss_bytes();
    };
    let kb = |field: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    match (kb("RssAnon"), kb("RssShmem")) {
        (Some(anon), shmem) => (anon + shmem.unwrap_or(0)) * 1024,
        (None, _) => rss_bytes(),
    }
}

/// Parses "4gb", "100mb", "512k", "1024" into bytes, as Redis' config does (k = 1000, kb = 1024).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("4gb"), Some(4 << 30));
        assert_eq!(parse_memory("100MB"), Some(100 << 20));
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("123"), Some(123));
        assert_eq!(parse_memory("12xb"), None);
        assert_eq!(parse_memory(""), None);
    }

    #[test]
    fn owned_rss_leaves_out_file_pages() {
        let owned = owned_rss_bytes();
        let rss = rss_bytes();
        assert!(owned > 0 && owned <= rss, "owned {owned} rss {rss}");
    }
}

//! Process-wide memory accounting: a counting global allocator over jemalloc, and what the
//! allocator itself can tell (its stats, purging, where a block sits for active defrag).
//!
//! `--maxmemory` is enforced against the bytes the allocator has handed out, so index, keys,
//! values and connection buffers all count, plus what the process's own memory holds beyond that
//! count ([`owned_rss_bytes`]: stacks, rings, allocator slack; not the binary's file pages). Each thread adds to its own cache-line-padded counter
//! (no contention on the hot path); the total is the sum of all counters. A block freed on another
//! thread than the one that allocated it just makes one counter go down and another up.
//!
//! The heap is jemalloc's (as Redis builds it): glibc malloc keeps the pages of half-empty
//! regions resident after values move to SSD, and jemalloc's slabs let active defrag
//! ([`defrag_hint`], [`move_block`]) pack the survivors. When the counting allocator is not the
//! global one (the library's own tests), nothing here touches jemalloc's heap.
//! This module must never allocate itself.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use tikv_jemalloc_sys as jemalloc;
use tikv_jemallocator::Jemalloc;

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

/// jemalloc's options, read before main: freed pages go back to the OS a second after they
/// empty (dirty_decay_ms) and are never kept lazily freed (muzzy_decay_ms:0, so RSS follows what
/// is in use); no background thread, the heartbeat's [`purge`] does that work on a core.
/// Exported under the `_rjem_` prefix of the prefixed jemalloc build, overriding its weak
/// default.
#[export_name = "_rjem_malloc_conf"]
pub static MALLOC_CONF: MallocConf =
    MallocConf(c"dirty_decay_ms:1000,muzzy_decay_ms:0,background_thread:false".as_ptr());

/// A C string pointer, laid out as jemalloc's `const char *malloc_conf`.
#[repr(transparent)]
pub struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a static, immutable, NUL-terminated string that nothing writes;
// sharing it between threads is sharing a read-only `&'static [u8]`.
unsafe impl Sync for MallocConf {}

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

/// The global allocator of the server binary: jemalloc plus byte counting.
pub struct CountingAlloc;

// SAFETY: every method forwards to jemalloc's `GlobalAlloc` with the caller's arguments
// unchanged, so its guarantees hold; the only extra work is an atomic add that neither
// allocates nor panics.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = Jemalloc.alloc(layout);
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = Jemalloc.alloc_zeroed(layout);
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Jemalloc.dealloc(ptr, layout);
        add(-(layout.size() as i64));
    }
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = Jemalloc.realloc(ptr, layout, new_size);
        if !p.is_null() {
            add(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// True when [`CountingAlloc`] serves the process's heap: only it claims counter slots, so a
/// claimed slot means jemalloc made the blocks Rust code owns.
pub fn jemalloc_heap() -> bool {
    NEXT_SLOT.load(Ordering::Relaxed) > 0
}

/// What jemalloc reports, in bytes (Redis' INFO memory `allocator_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes in blocks handed out (size classes, so a little above used_memory).
    pub allocated: u64,
    /// Bytes in pages of slabs and large blocks in use: allocated plus the free room inside
    /// them, i.e. fragmentation.
    pub active: u64,
    /// Bytes of pages jemalloc holds resident, metadata included.
    pub resident: u64,
}

impl AllocatorStats {
    /// active / allocated (Redis' `allocator_frag_ratio`).
    pub fn frag_ratio(&self) -> f64 {
        if self.allocated == 0 {
            0.0
        } else {
            self.active as f64 / self.allocated as f64
        }
    }

    /// active - allocated (Redis' `allocator_frag_bytes`).
    pub fn frag_bytes(&self) -> u64 {
        self.active.saturating_sub(self.allocated)
    }
}

/// jemalloc's stats, refreshed; None when it does not serve the heap or cannot say.
pub fn allocator_stats() -> Option<AllocatorStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    if !jemalloc_heap() {
        return None;
    }
    epoch::advance().ok()?;
    Some(AllocatorStats {
        allocated: stats::allocated::read().ok()? as u64,
        active: stats::active::read().ok()? as u64,
        resident: stats::resident::read().ok()? as u64,
    })
}

/// INFO memory's `mem_allocator`: `jemalloc-5.3.0`, or `libc` when jemalloc does not serve the
/// heap.
pub fn allocator_name() -> String {
    if !jemalloc_heap() {
        return "libc".to_string();
    }
    match tikv_jemalloc_ctl::version::read() {
        // jemalloc's version string carries the git description after the release.
        Ok(v) => format!("jemalloc-{}", v.split('-').next().unwrap_or(v)),
        Err(_) => "jemalloc".to_string(),
    }
}

/// Hands the free pages of every jemalloc arena back to the OS now (`arena.<ALL>.purge`),
/// rather than after their decay time. Nothing when jemalloc does not serve the heap.
pub fn purge() {
    if !jemalloc_heap() {
        return;
    }
    // MALLCTL_ARENAS_ALL in jemalloc's headers: the index that names every arena at once.
    const NAME: &std::ffi::CStr = c"arena.4096.purge";
    // SAFETY: the name is NUL-terminated; a purge takes and returns nothing, so all four value
    // pointers are null as mallctl requires for it.
    unsafe {
        jemalloc::mallctl(
            NAME.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// jemalloc's `inspect_extent_util_stats_verbose_t`: what `experimental.utilization.query`
/// writes for one pointer.
#[repr(C)]
#[derive(Default)]
struct UtilStats {
    slabcur_addr: usize,
    nfree: usize,
    nregs: usize,
    size: usize,
    bin_nfree: usize,
    bin_nregs: usize,
}

thread_local! {
    static UTIL_MIB: Cell<Option<[usize; 3]>> = const { Cell::new(None) };
}

fn util_mib() -> Option<[usize; 3]> {
    UTIL_MIB
        .try_with(|m| {
            if m.get().is_none() {
                let mut mib = [0usize; 3];
                if tikv_jemalloc_ctl::raw::name_to_mib(
                    b"experimental.utilization.query\0",
                    &mut mib,
                )
                .is_ok()
                {
                    m.set(Some(mib));
                }
            }
            m.get()
        })
        .ok()
        .flatten()
}

/// Whether the block at `ptr` is worth moving: it sits in a slab used less than its size class
/// is on average, and that slab is not the one new blocks of the class go to (moving into the
/// same slab gains nothing). Large blocks (their own pages) never are. The same test Redis'
/// active defrag asks of its jemalloc, made from jemalloc 5.3's utilization query.
///
/// # Safety
/// `ptr` is a live block jemalloc handed out ([`jemalloc_heap`] is true and the block was made
/// by the global allocator or [`move_block`]).
pub unsafe fn defrag_hint(ptr: *const u8) -> bool {
    let Some(mib) = util_mib() else {
        return false;
    };
    let mut out = UtilStats::default();
    let mut out_len = std::mem::size_of::<UtilStats>();
    let input = ptr;
    // SAFETY: the output is the `#[repr(C)]` twin of jemalloc's struct and its exact size is
    // passed (jemalloc refuses any other); the input is a pointer value read by jemalloc, and
    // the caller guarantees it is a live jemalloc block, which the query requires.
    let rc = unsafe {
        jemalloc::mallctlbymib(
            mib.as_ptr(),
            mib.len(),
            (&mut out as *mut UtilStats).cast(),
            &mut out_len,
            (&input as *const *const u8).cast_mut().cast(),
            std::mem::size_of::<*const u8>(),
        )
    };
    if rc != 0 || out.nfree == 0 || out.bin_nregs == 0 {
        // Failed, a large block, or a full slab: nothing to gain.
        return false;
    }
    let addr = ptr as usize;
    if out.slabcur_addr != 0 && (out.slabcur_addr..out.slabcur_addr + out.size).contains(&addr) {
        return false;
    }
    // Used share of this slab below the class's: used/nregs < bin_used/bin_nregs.
    let used = (out.nregs - out.nfree) as u128;
    let bin_used = out.bin_nregs.saturating_sub(out.bin_nfree) as u128;
    used * (out.bin_nregs as u128) < bin_used * (out.nregs as u128)
}

/// Moves the `size`-byte block at `ptr` to a new one (bypassing the thread cache, so the copy
/// lands in the slab the class fills now, its current or lowest-addressed non-full one, and the
/// old room goes straight back to its slab) and returns the new address; null when no memory was available (the block stays).
/// The byte count does not change, so the counters are left alone.
///
/// # Safety
/// As for [`defrag_hint`]; `size` is the size the block was allocated with, its alignment is at
/// most 16 and no larger than `size` (so jemalloc needs no alignment flag for it, as
/// `Jemalloc` asks none), and on success the caller replaces every use of `ptr` with the
/// returned address: the old block is freed.
pub unsafe fn move_block(ptr: *mut u8, size: usize) -> *mut u8 {
    let flags = jemalloc::MALLOCX_TCACHE_NONE;
    // SAFETY: size is non-zero (a live block's); the new block is `size` bytes, the old one is
    // live and `size` bytes by the caller's guarantee, so the copy stays inside both and they do
    // not overlap; sdallocx gets the size the old block was made with and no alignment flag,
    // matching how it was allocated.
    unsafe {
        let new = jemalloc::mallocx(size, flags).cast::<u8>();
        if new.is_null() {
            return new;
        }
        std::ptr::copy_nonoverlapping(ptr, new, size);
        jemalloc::sdallocx(ptr.cast(), size, flags);
        new
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
    fn jemalloc_reads_our_options() {
        use tikv_jemalloc_ctl::raw;
        // SAFETY: both options are `ssize_t` in jemalloc, read into an isize of the same size.
        let (dirty, muzzy) = unsafe {
            (
                raw::read::<isize>(b"opt.dirty_decay_ms\0"),
                raw::read::<isize>(b"opt.muzzy_decay_ms\0"),
            )
        };
        assert_eq!((dirty.ok(), muzzy.ok()), (Some(1000), Some(0)));
        // SAFETY: `opt.background_thread` is a `bool`.
        let bg = unsafe { raw::read::<bool>(b"opt.background_thread\0") };
        assert_eq!(bg.ok(), Some(false));
    }

    #[test]
    fn owned_rss_leaves_out_file_pages() {
        let owned = owned_rss_bytes();
        let rss = rss_bytes();
        assert!(owned > 0 && owned <= rss, "owned {owned} rss {rss}");
    }
}

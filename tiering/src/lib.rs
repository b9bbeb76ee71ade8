//! Strata's RAM to SSD tier: cold string values move from a shard's memory to a per-shard file
//! on local SSD, and come back when read.
//!
//! - [`alloc`]: page-granular space allocation in the file.
//! - [`codec`]: optional compression of each value on its way to disk (zstd, lz4).
//! - [`page`]: on-disk layouts (shared small-value pages, extents), each checksummed.
//! - [`store`]: the per-shard file ([`TierStore`]) and its counters, made of:
//!   - `pointer`: [`DiskPtr`], where a value lives, packed in 64 bits in RAM;
//!   - `space`: which pages hold what, deferred and held frees, [`SpaceHold`];
//!   - `write`: batched writes, small values packed into bins of pages;
//!   - `read`: value reads, one I/O shared per page, within a byte budget;
//!   - `stream`: one large extent written or read a part at a time ([`ExtentWriter`],
//!     [`ExtentReader`]);
//!   - `error`: [`TierError`], ENOSPC told by its code.
//! - [`uring`]: the tier's own io_uring for reads.
//!
//! The engine is single-threaded per shard (glommio, thread per core) and never blocks: every
//! disk access is an awaited io_uring operation on an O_DIRECT file.

pub mod alloc;
pub mod codec;
mod error;
pub mod page;
mod pointer;
mod read;
mod space;
pub mod store;
mod stream;
pub mod uring;
mod write;

pub use codec::Codec;
pub use store::{DiskPtr, SpaceHold, StoredItem, TierError, TierStats, TierStore};
pub use stream::{ExtentReader, ExtentWriter};

/// Value bytes for the unit tests.
#[cfg(test)]
mod testdata {
    /// Bytes that no codec shrinks (xorshift).
    pub fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Lowercase letters: zstd's entropy coding takes them to ~0.6 of their size.
    pub fn letters(seed: u64, len: usize) -> Vec<u8> {
        noise(seed, len).iter().map(|b| b'a' + b % 26).collect()
    }
}

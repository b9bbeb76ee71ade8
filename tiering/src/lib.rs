//! Strata's RAM to SSD tier: cold string values move from a shard's memory to a per-shard file
//! on local SSD, and come back when read.
//!
//! - [`alloc`]: page-granular space allocation in the file.
//! - [`page`]: on-disk layouts (shared small-value pages, extents), each checksummed.
//! - [`store`]: the per-shard file, batched writes, coalesced reads, deferred frees.
//!
//! The engine is single-threaded per shard (glommio, thread per core) and never blocks: every
//! disk access is an awaited io_uring operation on an O_DIRECT file.

pub mod alloc;
pub mod codec;
pub mod page;
pub mod store;
pub mod uring;

pub use codec::Codec;
pub use store::{DiskPtr, SpaceHold, StoredItem, TierError, TierStats, TierStore};

//! Strata's on-disk formats, shared by the server and the offline tools.
//!
//! - [`snapshot`]: the native per-shard snapshot file (blocks, records, trailer).
//! - [`summary`]: the small file that lists one snapshot's shard files and their checksums.
//! - [`rdb`]: Redis RDB import (strings; other types skipped) and export, and the RDB object
//!   codec ([`rdb::codec`]) that DUMP/RESTORE and the snapshot's Object records share.
//! - [`error`]: the one error type, which always names a byte offset.
//!
//! The codecs are sans-I/O: encoders hand out byte chunks and decoders are fed byte chunks, so
//! the server can drive them with glommio's async files and the tools with `std::fs`. The thin
//! `std::io` wrappers (`SnapshotWriter`, `SnapshotReader`, `RdbWriter`, `RdbReader`) are for the
//! tools and tests. No codec ever holds a whole file: memory stays at about one block plus one
//! record.
//!
//! This crate also owns [`shard_of`], because a snapshot file holds exactly one shard's keys and
//! the offline compactor must route keys exactly as the server does.

pub mod error;
pub mod rdb;
pub mod snapshot;
pub mod summary;

pub use error::{ErrorKind, FormatError};
pub use rdb::{
    rdb_header, rdb_trailer, Crc64, RdbEncoder, RdbItem, RdbReader, RdbWriter, RDB_EXPORT_VERSION,
};
pub use snapshot::{
    Compression, FileStats, Item, KeyHead, ObjectRecord, Record, RecordValue, SnapshotDecoder,
    SnapshotEncoder, SnapshotHeader, SnapshotReader, SnapshotWriter,
};
pub use summary::{shard_file_name, summary_file_name, Summary, SummaryFile};

/// Which shard owns `key`: only the `{hashtag}` part counts when present, so related keys can be
/// kept together for multi-key commands. Must stay byte-for-byte the server's routing function:
/// snapshot files are per shard.
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    let tag = hashtag(key);
    (xxhash_rust::xxh3::xxh3_64_with_seed(tag, 0x57A7_A5EE) % shards as u64) as usize
}

/// The part of a key that decides its shard: the text inside the first non-empty `{...}`.
pub fn hashtag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashtag_takes_the_first_non_empty_braces() {
        assert_eq!(hashtag(b"user:{42}:name"), b"42");
        assert_eq!(hashtag(b"{a}{b}"), b"a");
        assert_eq!(hashtag(b"{}x{y}"), b"{}x{y}");
        assert_eq!(hashtag(b"no-tag"), b"no-tag");
        assert_eq!(hashtag(b"open{only"), b"open{only");
    }

    #[test]
    fn shard_of_routes_by_hashtag_and_is_stable() {
        assert_eq!(shard_of(b"anything", 1), 0);
        assert_eq!(shard_of(b"anything", 0), 0);
        assert_eq!(shard_of(b"{user}:a", 16), shard_of(b"{user}:b", 16));
        // Pinned values: changing the routing function breaks every existing snapshot.
        assert_eq!(shard_of(b"x{user}y", 7), 4);
        assert_eq!(shard_of(b"anything", 16), 12);
        assert_eq!(shard_of(b"key:1", 16), 5);
        assert_eq!(shard_of(b"", 3), 2);
        let spread: std::collections::HashSet<usize> = (0..1000)
            .map(|i| shard_of(format!("k{i}").as_bytes(), 8))
            .collect();
        assert_eq!(spread.len(), 8);
    }
}

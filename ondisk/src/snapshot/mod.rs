//! Strata's native snapshot file: one file per shard, written while the shard keeps serving.
//!
//! This module owns the byte layout and the codecs ([`SnapshotEncoder`], [`SnapshotDecoder`]);
//! they never touch a file themselves, so the server can drive them with glommio and the tools
//! with `std::fs` ([`SnapshotWriter`], [`SnapshotReader`]). Neither side ever holds more than
//! about one block plus one record: a 100 MB value streams through many small blocks.
//!
//! # Layout (all integers little-endian)
//!
//! ```text
//! file        = file_header frame* end_frame
//!
//! file_header (40 bytes)
//!   0  magic        [8]  b"STRATASN"
//!   8  version      u16  2 (1: files without kinds 9..=11, still read)
//!  10  compression  u8   codec the writer asked for (0 none, 1 lz4, 2 zstd); informational,
//!                        every frame names its own codec
//!  11  reserved     u8   0
//!  12  shard_index  u32
//!  16  shard_count  u32
//!  20  snapshot_id  u64
//!  28  created_ms   u64  unix milliseconds
//!  36  header_crc   u32  CRC32 of bytes 0..36
//!
//! frame_header (24 bytes), followed by `stored_len` payload bytes
//!   0  tag          [4]  b"SBLK" data block, b"SEND" end frame
//!   4  codec        u8   0 none, 1 lz4 (raw LZ4 block), 2 zstd (one zstd frame)
//!   5  reserved     [3]  0
//!   8  stored_len   u32  payload bytes on disk (at most 16 MiB)
//!  12  raw_len      u32  payload bytes after decompression (at most 16 MiB)
//!  16  payload_crc  u32  CRC32 of the stored payload
//!  20  header_crc   u32  CRC32 of frame header bytes 0..20
//!
//! end_frame = frame_header with tag b"SEND", codec 0, stored_len = raw_len = 28, and payload
//!   0  records      u64  records in the file, unknown kinds included
//!   8  keys         u64  String records (not Object ones, so that readers that predate
//!                        kind 8 and skip it still find the count they expect)
//!  16  raw_bytes    u64  length of the record stream (all block payloads, decompressed)
//!  24  file_crc     u32  CRC32 of every file byte before the end frame
//! ```
//!
//! A block whose compressed form is not smaller than its raw form is stored raw (codec 0).
//! A file without an end frame is truncated: the decoder reports where the data ended.
//!
//! # Record stream
//!
//! The decompressed block payloads concatenate into one stream of records; a record may start
//! in one block and end several blocks later.
//!
//! ```text
//! record  = kind u8, body_len varint (LEB128, at most 10 bytes), body[body_len]
//!
//! kind 1  String     key_head, value = rest of body
//! kind 2  Tombstone  db varint, key = rest of body ("this key was deleted"; written by
//!                    incremental snapshots, dropped by the compactor)
//! kind 8  Object     key_head, rdb_type u8, value = rest of body: the value in Redis' RDB
//!                    encoding for rdb_type (`rdb::codec`), the same bytes DUMP and RDB files
//!                    carry, so every data type uses this one kind
//! kind 9  ObjectHead   key_head, rdb_type u8: a collection whose RDB value is at least
//!                    PIECE_LEN bytes; its value follows in Piece records, then an ObjectEnd
//! kind 10 Piece      a run of the value's bytes (PIECE_LEN at most), in order
//! kind 11 ObjectEnd  value_len u64, pieces u32, value_crc u32 (CRC32 of the joined value)
//! kind 128 Function  code = whole body: one function library's code as FUNCTION LOAD got it
//!                    (metadata line included), the string Redis' RDB_OPCODE_FUNCTION2 holds;
//!                    written first in shard 0's file only, so a loader meets every library
//!                    before any key
//!
//! key_head = db varint (<= 65535), flags u8 (bit 0: has expire, bit 1: has client flags,
//!            other bits 0), [expire_at_ms u64 if bit 0: absolute unix ms],
//!            [client_flags u32 if bit 1], key_len varint, key
//! ```
//!
//! A head's pieces follow it with no other record between, and its end follows them: anything
//! else (another record, the end frame) is a `Corrupt` error naming the key, as is an end whose
//! length, piece count or CRC disagrees with the pieces. The server writes a large collection
//! this way so that it encodes the value a piece at a time, serving clients between pieces,
//! and never holds more than a piece of it encoded; a reader joins the pieces and hands out
//! one [`Item::Object`], or, asked to ([`SnapshotDecoder::stream_pieces`]), hands them out as
//! they come so that a loader builds the collection without a joined copy. Kinds 9..=11 appeared with version 2: a version-1 file never holds
//! them (a reader skips them there as unknown).
//!
//! Flag bit 2 is reserved for a memcached CAS value (a u64 after client flags, in both kinds);
//! until `Record` carries one, a reader refuses it. Kinds 3..=7 were once planned per data type
//! and are never written: kind 8 carries every type. 12..=127 are free for further records of
//! keys, 128..=255 for metadata records. Kind 0 is never valid, so zeroed bytes are caught.
//! `body_len` lets an older reader skip kinds it does not know; it counts them
//! ([`SnapshotDecoder::skipped_unknown`]), which is why kind 8 needed no new file version. An
//! Object record's value must span the rest of its body exactly as its RDB type says; one that
//! does not is a `Corrupt` error at its frame.

mod decoder;
mod encoder;
mod io;

pub use decoder::SnapshotDecoder;
pub use encoder::SnapshotEncoder;
pub use io::{SnapshotReader, SnapshotWriter};

use bytes::Bytes;
use std::fmt;
use std::str::FromStr;

/// Magic bytes at the start of every snapshot file.
pub const MAGIC: &[u8; 8] = b"STRATASN";
/// The snapshot format version this code writes.
pub const VERSION: u16 = 2;
/// The oldest version this code reads.
pub const MIN_VERSION: u16 = 1;
/// Longest Piece record value; an object whose RDB value is at least this long is written in
/// pieces (kinds 9..=11).
pub const PIECE_LEN: usize = 64 * 1024;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 40;
/// Length of every frame header.
pub const FRAME_HEADER_LEN: usize = 24;
/// Length of the end frame's payload.
pub const END_PAYLOAD_LEN: usize = 28;
/// Default raw block size.
pub const DEFAULT_BLOCK_SIZE: usize = 64 * 1024;
/// Largest raw or stored block; a decoder refuses bigger ones so a damaged length cannot make it
/// buffer without limit.
pub const MAX_BLOCK_LEN: usize = 16 * 1024 * 1024;

pub(crate) const TAG_BLOCK: &[u8; 4] = b"SBLK";
pub(crate) const TAG_END: &[u8; 4] = b"SEND";

/// Record kinds in the record stream.
pub mod kind {
    pub const STRING: u8 = 1;
    pub const TOMBSTONE: u8 = 2;
    // Once planned per data type, never written (OBJECT carries every type); a reader skips
    // them as unknown.
    pub const LIST: u8 = 3;
    pub const HASH: u8 = 4;
    pub const SET: u8 = 5;
    pub const ZSET: u8 = 6;
    pub const STREAM: u8 = 7;
    /// A key of any data type, its value in RDB encoding.
    pub const OBJECT: u8 = 8;
    /// A large object's key head and RDB type; its value follows in pieces (version 2).
    pub const OBJECT_HEAD: u8 = 9;
    /// A run of a large object's value bytes.
    pub const PIECE: u8 = 10;
    /// The end of a large object: value length, piece count and CRC32 of the value.
    pub const OBJECT_END: u8 = 11;
    /// A function library's code (a metadata record).
    pub const FUNCTION: u8 = 128;
}

pub(crate) const FLAG_EXPIRE: u8 = 1;
pub(crate) const FLAG_CLIENT_FLAGS: u8 = 2;

/// How blocks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    /// LZ4 block format: fast, modest ratio. The usual choice for snapshots.
    Lz4,
    /// Zstandard at level 3: slower, better ratio.
    Zstd,
}

impl Compression {
    /// The codec byte stored in headers.
    pub fn as_u8(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Compression {
    type Err = String;

    /// Accepts `none`, `lz4` or `zstd`, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(format!(
                "unknown compression '{s}' (expected none, lz4 or zstd)"
            )),
        }
    }
}

/// What the file header says about the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHeader {
    pub shard_index: u32,
    pub shard_count: u32,
    pub snapshot_id: u64,
    /// When the snapshot started, unix milliseconds.
    pub created_ms: u64,
    pub compression: Compression,
}

/// Totals of one snapshot file, as the encoder wrote them and the decoder verified them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileStats {
    /// Records in the file, tombstones and unknown kinds included.
    pub records: u64,
    /// String records (the end frame's `keys`).
    pub keys: u64,
    /// Object records. Not stored in the end frame: counted by the encoder and the decoder.
    pub objects: u64,
    /// Length of the decompressed record stream.
    pub raw_bytes: u64,
    /// Data blocks (the end frame not included).
    pub blocks: u64,
    /// Whole file length, end frame included.
    pub bytes: u64,
    /// CRC32 of the whole file, end frame included; the summary stores it.
    pub crc32: u32,
}

/// One decoded record. `key` and `value` share one allocation: the record's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub db: u16,
    pub key: Bytes,
    /// Absolute unix milliseconds; `None` for keys without a TTL and for tombstones.
    pub expire_at_ms: Option<u64>,
    /// Opaque per-key flags set by clients (memcached-style); 0 when unset.
    pub client_flags: u32,
    pub value: RecordValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordValue {
    String(Bytes),
    /// The key was deleted since the snapshot this one is based on.
    Tombstone,
}

/// What an encoder needs to know of a key besides its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHead<'a> {
    pub db: u16,
    pub key: &'a [u8],
    /// Absolute unix milliseconds; `None` for keys without a TTL.
    pub expire_at_ms: Option<u64>,
    /// Opaque per-key flags set by clients (memcached-style); 0 when unset.
    pub client_flags: u32,
}

/// One decoded Object record: a key of any data type. `key` and `value` share one allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    pub db: u16,
    pub key: Bytes,
    /// Absolute unix milliseconds; `None` for keys without a TTL.
    pub expire_at_ms: Option<u64>,
    /// Opaque per-key flags set by clients (memcached-style); 0 when unset.
    pub client_flags: u32,
    /// The RDB type of the value ([`rdb::types`](crate::rdb::types)).
    pub rdb_type: u8,
    /// The value in RDB encoding for `rdb_type`: read it with [`rdb::codec`](crate::rdb::codec)
    /// through an [`RdbCursor`](crate::rdb::RdbCursor). The decoder has checked that it spans
    /// exactly these bytes.
    pub value: Bytes,
}

impl ObjectRecord {
    /// Its key head, to write it again as it is ([`SnapshotEncoder::write_object`]).
    pub fn head(&self) -> KeyHead<'_> {
        KeyHead {
            db: self.db,
            key: &self.key,
            expire_at_ms: self.expire_at_ms,
            client_flags: self.client_flags,
        }
    }
}

/// What [`SnapshotDecoder::next`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Record(Record),
    /// A key of a data type other than string (kind 8).
    Object(ObjectRecord),
    /// A large object's head, its value empty: its [`Item::Piece`]s and an
    /// [`Item::ObjectEnd`] follow (only with [`SnapshotDecoder::stream_pieces`]).
    ObjectHead(ObjectRecord),
    /// The next run of the open object's RDB value (at most [`PIECE_LEN`] bytes).
    Piece(Bytes),
    /// The open object is complete: its length, piece count and CRC32 checked out.
    ObjectEnd,
    /// A function library's code (kind 128).
    Function(Bytes),
    /// The end frame was read and every check passed.
    End(FileStats),
}

/// Appends `v` as LEB128.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Reads a LEB128 value from the front of `data`: `Ok(Some((value, used)))`, `Ok(None)` when
/// `data` ends inside it, `Err(())` when it is longer than 10 bytes or overflows 64 bits.
pub(crate) fn get_varint(data: &[u8]) -> Result<Option<(u64, usize)>, ()> {
    let mut v: u64 = 0;
    for (i, &b) in data.iter().enumerate() {
        if i == 9 && b > 1 {
            return Err(());
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some((v, i + 1)));
        }
        if i == 9 {
            return Err(());
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests;

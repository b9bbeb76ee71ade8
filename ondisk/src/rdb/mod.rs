//! Redis RDB files: import (strings; every other type is skipped and reported) and export
//! (strings only).
//!
//! This module owns Strata's knowledge of the RDB format as written by Redis 1.0 to 7.4 (RDB
//! versions 1 to 12). The reader streams a file item by item and never allocates more than the
//! data it has actually read; the encoder is sans-I/O so the server can write an export from
//! many shards as fragments and stitch them ([`RdbEncoder::fragment`], [`rdb_header`],
//! [`rdb_trailer`]).
//!
//! # What an RDB file looks like
//!
//! ```text
//! "REDIS" + 4 ASCII digits (version)
//! then opcodes / typed key-value pairs:
//!   0xFA AUX            string key, string value
//!   0xFE SELECTDB       length db
//!   0xFB RESIZEDB       length keys, length expires
//!   0xF4 SLOT_INFO      length slot, length size, length expires size        (7.4+, cluster)
//!   0xFC EXPIRETIME_MS  i64 LE unix ms        (applies to the next key)
//!   0xFD EXPIRETIME     i32 LE unix seconds   (old files)
//!   0xF9 FREQ           u8 LFU counter        (applies to the next key)
//!   0xF8 IDLE           length LRU idle seconds
//!   0xF7 MODULE_AUX     length module id, length when-opcode, length when, module value
//!   0xF5 FUNCTION2      string library code   (7.0+)
//!   0xF6 FUNCTION       pre-GA function format (7.0 release candidates only; refused)
//!   type (0..=25)       string key, value in that type's encoding
//!   0xFF EOF            then, from version 5, CRC-64 (Jones, little-endian) of every
//!                       byte before it, the EOF opcode included; 0 means "not computed"
//! ```
//!
//! Lengths, strings and every type's value encoding are [`codec`]'s: the same code reads and
//! writes them for files, DUMP payloads and Strata's own snapshot records.

pub mod codec;
mod lzf;
mod reader;
mod writer;

pub use codec::{
    append_dump_payload, decode_dump_string, dump_payload, encode_dump_string, read_value_bytes,
    write_len, write_plain_string, Crc64, DumpError, DumpPayload, RdbCursor, RdbInput,
    StringCompression, DUMP_RDB_VERSION,
};
pub use lzf::{lzf_compress, lzf_decompress, LzfError};
pub use reader::RdbReader;
pub use writer::{rdb_functions, rdb_header, rdb_trailer, RdbEncoder, RdbWriter};

use bytes::Bytes;

/// The RDB version exports use by default: 10, which Redis 7.0 and newer load.
pub const RDB_EXPORT_VERSION: u32 = 10;
/// Newest RDB version the reader accepts (Redis 7.4).
pub const RDB_MAX_VERSION: u32 = 12;
/// Oldest version the encoder writes (the first with AUX fields).
pub const RDB_MIN_EXPORT_VERSION: u32 = 7;

/// One thing read from an RDB file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RdbItem {
    String {
        db: u32,
        key: Bytes,
        value: Bytes,
        /// Absolute unix milliseconds.
        expire_at_ms: Option<u64>,
    },
    /// A key of a type Strata does not import yet; its bytes were consumed.
    Skipped { db: u32, key: Bytes, type_code: u8 },
    /// A key of another type, with its value's raw RDB encoding (only from a reader asked to
    /// keep them, [`RdbReader::keep_objects`]).
    Object {
        db: u32,
        key: Bytes,
        rdb_type: u8,
        value: Bytes,
        /// Absolute unix milliseconds.
        expire_at_ms: Option<u64>,
    },
    /// A header field such as `redis-ver`.
    Aux { key: Bytes, value: Bytes },
    /// A function library's code (RDB_OPCODE_FUNCTION2; only from a reader asked to keep
    /// them, [`RdbReader::keep_functions`]).
    Function(Bytes),
}

/// RDB value types.
pub mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    pub const HASH_METADATA: u8 = 24;
    pub const HASH_LISTPACK_EX: u8 = 25;

    /// A short name for warnings ("list", "hash", ...).
    pub fn name(t: u8) -> &'static str {
        match t {
            STRING => "string",
            LIST | LIST_ZIPLIST | LIST_QUICKLIST | LIST_QUICKLIST_2 => "list",
            SET | SET_INTSET | SET_LISTPACK => "set",
            ZSET | ZSET_2 | ZSET_ZIPLIST | ZSET_LISTPACK => "zset",
            HASH
            | HASH_ZIPMAP
            | HASH_ZIPLIST
            | HASH_LISTPACK
            | HASH_METADATA_PRE_GA
            | HASH_LISTPACK_EX_PRE_GA
            | HASH_METADATA
            | HASH_LISTPACK_EX => "hash",
            STREAM_LISTPACKS | STREAM_LISTPACKS_2 | STREAM_LISTPACKS_3 => "stream",
            MODULE_PRE_GA | MODULE_2 => "module",
            _ => "unknown",
        }
    }
}

/// RDB opcodes.
pub(crate) mod opcode {
    pub const SLOT_INFO: u8 = 244;
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

#[cfg(test)]
mod tests;

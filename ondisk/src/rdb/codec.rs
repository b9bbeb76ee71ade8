//! The RDB object codec: how Redis encodes one value, shared by DUMP/RESTORE, RDB files and the
//! typed-object records of Strata's snapshots.
//!
//! Owns the RDB length and string encodings, skipping a value of any RDB type, CRC-64 (Jones,
//! as Redis) and the DUMP payload frame. Decoding reads from an [`RdbInput`]: [`RdbCursor`]
//! over bytes in memory (a DUMP payload, a snapshot record) or the RDB file stream inside
//! [`RdbReader`](super::RdbReader), so each value type is written once, as functions over
//! `RdbInput`, and serves all three.
//!
//! Input comes from clients and from disk: decoding never panics, never trusts a declared
//! length before the bytes are there, and never allocates more than the input can justify.
//! No I/O here: a stream source brings its own.
//!
//! ```text
//! length  = 00xxxxxx | 01xxxxxx xxxxxxxx | 0x80 + u32 BE | 0x81 + u64 BE
//!         | 11xxxxxx: not a length but a special string encoding, xxxxxx below
//! string  = length + bytes | 0xC0 i8 | 0xC1 i16 LE | 0xC2 i32 LE
//!         | 0xC3 LZF: length compressed, length raw, compressed bytes
//! DUMP    = rdb type u8, value encoding, RDB version u16 LE, CRC-64 LE of everything before
//! ```

use super::lzf::{lzf_compress_within, lzf_decompress};
use super::types;
use crate::error::FormatError;
use bytes::BufMut;

/// The RDB version DUMP writes: Redis 7.0's (10), so a payload from Strata restores into
/// redis-server 7.0, which refuses newer ones. RESTORE refuses payloads of newer versions, as
/// Redis 7.0 does, and accepts every older one.
pub const DUMP_RDB_VERSION: u16 = 10;
/// RDB version (2 bytes) plus CRC-64 (8 bytes) at the end of a DUMP payload.
const DUMP_FOOTER_LEN: usize = 10;

/// Special string encodings: the low 6 bits of a length byte whose top bits are 11.
const ENC_INT8: u64 = 0;
const ENC_INT16: u64 = 1;
const ENC_INT32: u64 = 2;
const ENC_LZF: u64 = 3;
/// Strings this long or shorter are never compressed (Redis: LZF cannot win below that).
const LZF_MIN_LEN: usize = 20;
/// Redis keeps a compressed string only when it saves at least this many bytes.
const LZF_MIN_SAVING: usize = 4;

/// Field opcodes of a module value as written for `redis-check-rdb`.
const MODULE_OPCODE_EOF: u64 = 0;
const MODULE_OPCODE_SINT: u64 = 1;
pub(crate) const MODULE_OPCODE_UINT: u64 = 2;
const MODULE_OPCODE_FLOAT: u64 = 3;
const MODULE_OPCODE_DOUBLE: u64 = 4;
const MODULE_OPCODE_STRING: u64 = 5;

static CRC64_REDIS: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// Running CRC-64 (Jones polynomial, reflected, as Redis computes it over RDB files and DUMP
/// payloads).
#[derive(Clone)]
pub struct Crc64 {
    digest: crc::Digest<'static, u64, crc::Table<16>>,
}

impl Crc64 {
    pub fn new() -> Self {
        Crc64 {
            digest: CRC64_REDIS.digest(),
        }
    }

    /// The checksum of `data` in one go.
    pub fn checksum(data: &[u8]) -> u64 {
        CRC64_REDIS.checksum(data)
    }

    pub fn update(&mut self, data: &[u8]) {
        self.digest.update(data);
    }

    /// The checksum of everything passed to `update` so far.
    pub fn value(&self) -> u64 {
        self.digest.clone().finalize()
    }
}

impl Default for Crc64 {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Crc64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Crc64({:#018x})", self.value())
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Whether [`write_string`] may LZF-compress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StringCompression {
    /// Never: plain or integer-encoded only.
    Off,
    /// As Redis with `rdbcompression yes`: strings over 20 bytes whose compressed form saves
    /// at least 4 bytes.
    Lzf,
}

/// Appends `len` in the shortest of the 6-bit, 14-bit (big-endian), 32-bit and 64-bit forms.
pub fn write_len(out: &mut impl BufMut, len: u64) {
    if len < 1 << 6 {
        out.put_u8(len as u8);
    } else if len < 1 << 14 {
        out.put_u8(0x40 | (len >> 8) as u8);
        out.put_u8(len as u8);
    } else if let Ok(l) = u32::try_from(len) {
        out.put_u8(0x80);
        out.put_u32(l);
    } else {
        out.put_u8(0x81);
        out.put_u64(len);
    }
}

/// Appends `s` as length + bytes, never integer-encoded or compressed.
pub fn write_plain_string(out: &mut impl BufMut, s: &[u8]) {
    write_len(out, s.len() as u64);
    out.put_slice(s);
}

/// Appends `value` as Redis' `rdbSaveRawString` does: canonical 32-bit integers as INT8/16/32,
/// then LZF when `compression` allows and it pays, else length + bytes.
pub fn write_string(out: &mut impl BufMut, value: &[u8], compression: StringCompression) {
    if let Some(v) = integer_encoding(value) {
        write_int(out, v);
        return;
    }
    if compression == StringCompression::Lzf {
        if let Some(c) = lzf_form(value) {
            out.put_u8(0xC0 | ENC_LZF as u8);
            write_len(out, c.len() as u64);
            write_len(out, value.len() as u64);
            out.put_slice(&c);
            return;
        }
    }
    write_plain_string(out, value);
}

/// `Some(v)` when `s` is exactly the decimal text of a 32-bit integer (no sign on 0, no
/// leading zeros or '+'), so that reading it back gives the same bytes.
pub(crate) fn integer_encoding(s: &[u8]) -> Option<i32> {
    // 11 bytes is the longest decimal i32 ("-2147483648"); Redis only tries up to there.
    if s.is_empty() || s.len() > 11 {
        return None;
    }
    let text = std::str::from_utf8(s).ok()?;
    let v: i32 = text.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

fn write_int(out: &mut impl BufMut, v: i32) {
    if let Ok(v) = i8::try_from(v) {
        out.put_u8(0xC0 | ENC_INT8 as u8);
        out.put_i8(v);
    } else if let Ok(v) = i16::try_from(v) {
        out.put_u8(0xC0 | ENC_INT16 as u8);
        out.put_i16_le(v);
    } else {
        out.put_u8(0xC0 | ENC_INT32 as u8);
        out.put_i32_le(v);
    }
}

/// The compressed bytes Redis would store for `value`, if it would compress it at all.
fn lzf_form(value: &[u8]) -> Option<Vec<u8>> {
    if value.len() <= LZF_MIN_LEN {
        return None;
    }
    // As Redis: compressed only when liblzf fits it in four bytes less than the value.
    lzf_compress_within(value, value.len() - LZF_MIN_SAVING)
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// A source of RDB bytes. Implementations check every read against the bytes they really have
/// and report running out as a `Truncated` error naming the offset.
pub trait RdbInput {
    /// Offset of the next byte, for errors.
    fn offset(&self) -> u64;

    fn read_u8(&mut self) -> Result<u8, FormatError>;

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), FormatError>;

    /// The next `len` bytes. Memory grows with the bytes actually there, never with `len`
    /// alone.
    fn read_vec(&mut self, len: u64) -> Result<Vec<u8>, FormatError>;

    fn skip(&mut self, len: u64) -> Result<(), FormatError>;

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let mut a = [0u8; N];
        self.read_exact(&mut a)?;
        Ok(a)
    }
}

/// An [`RdbInput`] over bytes in memory: a DUMP payload, a snapshot record's value.
#[derive(Debug, Clone)]
pub struct RdbCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Offset of `bytes[0]` in whatever errors should point into.
    base: u64,
}

impl<'a> RdbCursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self::at_offset(bytes, 0)
    }

    /// A cursor whose errors count offsets from `base` (where `bytes` starts in a payload).
    pub fn at_offset(bytes: &'a [u8], base: u64) -> Self {
        RdbCursor {
            bytes,
            pos: 0,
            base,
        }
    }

    /// The bytes not consumed yet.
    pub fn remaining(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    /// `Ok` when every byte was consumed: an encoding must fill its space exactly, and bytes
    /// left over mean it is not what it claims to be.
    pub fn finish(&self) -> Result<(), FormatError> {
        match self.bytes.len() - self.pos {
            0 => Ok(()),
            n => Err(FormatError::corrupt(
                self.offset(),
                format!("RDB value: {n} bytes after its end"),
            )),
        }
    }

    /// The next `len` bytes, checked against what is there before anything is copied.
    fn take(&mut self, len: u64) -> Result<&'a [u8], FormatError> {
        let end = usize::try_from(len)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| {
                FormatError::truncated(
                    self.offset(),
                    format!(
                        "RDB value: data ends ({len} bytes wanted, {} left)",
                        self.bytes.len() - self.pos
                    ),
                )
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

impl RdbInput for RdbCursor<'_> {
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn read_u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), FormatError> {
        out.copy_from_slice(self.take(out.len() as u64)?);
        Ok(())
    }

    fn read_vec(&mut self, len: u64) -> Result<Vec<u8>, FormatError> {
        self.take(len).map(<[u8]>::to_vec)
    }

    fn skip(&mut self, len: u64) -> Result<(), FormatError> {
        self.take(len).map(|_| ())
    }
}

/// An [`RdbInput`] that keeps a copy of every byte read through it: one value's raw encoding,
/// to be handed on whole (an RDB file's typed keys go to the server as they are). Refuses a
/// value longer than `limit` bytes.
pub struct Recording<'a, I: RdbInput> {
    inner: &'a mut I,
    bytes: Vec<u8>,
    limit: usize,
}

impl<'a, I: RdbInput> Recording<'a, I> {
    pub fn new(inner: &'a mut I, limit: usize) -> Self {
        Recording {
            inner,
            bytes: Vec::new(),
            limit,
        }
    }

    /// The bytes read so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    fn room(&self, n: u64) -> Result<(), FormatError> {
        if (self.bytes.len() as u64).saturating_add(n) > self.limit as u64 {
            return Err(FormatError::corrupt(
                self.inner.offset(),
                format!("RDB value longer than {} bytes", self.limit),
            ));
        }
        Ok(())
    }
}

impl<I: RdbInput> RdbInput for Recording<'_, I> {
    fn offset(&self) -> u64 {
        self.inner.offset()
    }

    fn read_u8(&mut self) -> Result<u8, FormatError> {
        self.room(1)?;
        let b = self.inner.read_u8()?;
        self.bytes.push(b);
        Ok(b)
    }

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), FormatError> {
        self.room(out.len() as u64)?;
        self.inner.read_exact(out)?;
        self.bytes.extend_from_slice(out);
        Ok(())
    }

    fn read_vec(&mut self, len: u64) -> Result<Vec<u8>, FormatError> {
        self.room(len)?;
        let v = self.inner.read_vec(len)?;
        self.bytes.extend_from_slice(&v);
        Ok(v)
    }

    fn skip(&mut self, len: u64) -> Result<(), FormatError> {
        self.read_vec(len).map(|_| ())
    }
}

/// One value of RDB type `rdb_type`, as its raw encoding (what [`skip_value`] would consume),
/// at most `limit` bytes.
pub fn read_value_bytes(
    input: &mut impl RdbInput,
    rdb_type: u8,
    limit: usize,
) -> Result<Vec<u8>, FormatError> {
    let mut rec = Recording::new(input, limit);
    skip_value(&mut rec, rdb_type)?;
    Ok(rec.into_bytes())
}

/// A length; a special-encoding marker yields its 6 bits, as Redis' `rdbLoadLen` does.
pub fn read_len(input: &mut impl RdbInput) -> Result<u64, FormatError> {
    read_len_field(input).map(|(len, _)| len)
}

/// A length and whether it is a special string encoding.
fn read_len_field(input: &mut impl RdbInput) -> Result<(u64, bool), FormatError> {
    let at = input.offset();
    let b = input.read_u8()?;
    match b >> 6 {
        0 => Ok((u64::from(b & 0x3f), false)),
        1 => {
            let lo = input.read_u8()?;
            Ok((u64::from(b & 0x3f) << 8 | u64::from(lo), false))
        }
        3 => Ok((u64::from(b & 0x3f), true)),
        _ if b == 0x80 => Ok((u64::from(u32::from_be_bytes(input.read_array()?)), false)),
        _ if b == 0x81 => Ok((u64::from_be_bytes(input.read_array()?), false)),
        _ => Err(FormatError::corrupt(
            at,
            format!("RDB: bad length encoding {b:#04x}"),
        )),
    }
}

/// A string in any encoding, as its bytes (integers as their decimal text).
pub fn read_string(input: &mut impl RdbInput) -> Result<Vec<u8>, FormatError> {
    let at = input.offset();
    let (len, encoded) = read_len_field(input)?;
    if !encoded {
        return input.read_vec(len);
    }
    let int = match len {
        ENC_INT8 => i64::from(input.read_u8()? as i8),
        ENC_INT16 => i64::from(i16::from_le_bytes(input.read_array()?)),
        ENC_INT32 => i64::from(i32::from_le_bytes(input.read_array()?)),
        ENC_LZF => {
            let clen = read_len(input)?;
            let raw_len = read_len(input)?;
            let raw_len = usize::try_from(raw_len)
                .map_err(|_| FormatError::corrupt(at, "RDB: LZF length too large"))?;
            // Redis never compresses an empty string and refuses to load one.
            if raw_len == 0 {
                return Err(FormatError::corrupt(at, "RDB string: LZF of 0 bytes"));
            }
            let data = input.read_vec(clen)?;
            // Refuses a raw length the data could never expand to before allocating it.
            return lzf_decompress(&data, raw_len)
                .map_err(|e| FormatError::corrupt(at, format!("RDB string: {e}")));
        }
        enc => return Err(unknown_string_encoding(at, enc)),
    };
    Ok(int.to_string().into_bytes())
}

/// Consumes a string in any encoding without decoding it.
pub fn skip_string(input: &mut impl RdbInput) -> Result<(), FormatError> {
    let at = input.offset();
    let (len, encoded) = read_len_field(input)?;
    if !encoded {
        return input.skip(len);
    }
    match len {
        ENC_INT8 => input.skip(1),
        ENC_INT16 => input.skip(2),
        ENC_INT32 => input.skip(4),
        ENC_LZF => {
            let clen = read_len(input)?;
            read_len(input)?;
            input.skip(clen)
        }
        enc => Err(unknown_string_encoding(at, enc)),
    }
}

fn unknown_string_encoding(at: u64, enc: u64) -> FormatError {
    FormatError::corrupt(at, format!("RDB: unknown string encoding {enc}"))
}

/// Consumes one value of RDB type `rdb_type`, exactly the bytes Redis writes for it: anything
/// else would make every key after it garbage.
pub fn skip_value(input: &mut impl RdbInput, rdb_type: u8) -> Result<(), FormatError> {
    match rdb_type {
        types::STRING => skip_string(input)?,
        types::LIST | types::SET | types::LIST_QUICKLIST => {
            let n = read_len(input)?;
            for _ in 0..n {
                skip_string(input)?;
            }
        }
        types::ZSET => {
            let n = read_len(input)?;
            for _ in 0..n {
                skip_string(input)?;
                // Score as text: a length byte, or 253/254/255 for nan/+inf/-inf.
                let len = input.read_u8()?;
                if len < 253 {
                    input.skip(u64::from(len))?;
                }
            }
        }
        types::ZSET_2 => {
            let n = read_len(input)?;
            for _ in 0..n {
                skip_string(input)?;
                input.skip(8)?;
            }
        }
        types::HASH => {
            let n = read_len(input)?;
            for _ in 0..n {
                skip_string(input)?;
                skip_string(input)?;
            }
        }
        types::HASH_METADATA | types::HASH_METADATA_PRE_GA => {
            if rdb_type == types::HASH_METADATA {
                input.skip(8)?; // smallest field expiry
            }
            let n = read_len(input)?;
            for _ in 0..n {
                read_len(input)?; // field TTL
                skip_string(input)?;
                skip_string(input)?;
            }
        }
        types::LIST_QUICKLIST_2 => {
            let n = read_len(input)?;
            for _ in 0..n {
                let at = input.offset();
                let container = read_len(input)?;
                if container != 1 && container != 2 {
                    return Err(FormatError::corrupt(
                        at,
                        format!("RDB quicklist: container type {container}"),
                    ));
                }
                skip_string(input)?;
            }
        }
        types::HASH_LISTPACK_EX => {
            input.skip(8)?; // smallest field expiry
            skip_string(input)?;
        }
        types::HASH_ZIPMAP
        | types::LIST_ZIPLIST
        | types::SET_INTSET
        | types::ZSET_ZIPLIST
        | types::HASH_ZIPLIST
        | types::HASH_LISTPACK
        | types::ZSET_LISTPACK
        | types::SET_LISTPACK
        | types::HASH_LISTPACK_EX_PRE_GA => skip_string(input)?,
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 | types::STREAM_LISTPACKS_3 => {
            skip_stream(input, rdb_type)?
        }
        types::MODULE_2 => {
            read_len(input)?; // module id
            skip_module_value(input)?;
        }
        _ => {
            return Err(FormatError::corrupt(
                input.offset(),
                format!("RDB: cannot skip type {rdb_type}"),
            ))
        }
    }
    Ok(())
}

fn skip_stream(input: &mut impl RdbInput, rdb_type: u8) -> Result<(), FormatError> {
    let listpacks = read_len(input)?;
    for _ in 0..listpacks {
        skip_string(input)?; // master entry id
        skip_string(input)?; // listpack
    }
    // length, last id (ms, seq); from v2 also first id, max deleted id, entries added.
    let lens = if rdb_type >= types::STREAM_LISTPACKS_2 {
        8
    } else {
        3
    };
    for _ in 0..lens {
        read_len(input)?;
    }
    let groups = read_len(input)?;
    for _ in 0..groups {
        skip_string(input)?; // name
        read_len(input)?; // last delivered id ms
        read_len(input)?; // and seq
        if rdb_type >= types::STREAM_LISTPACKS_2 {
            read_len(input)?; // entries read
        }
        let pel = read_len(input)?;
        for _ in 0..pel {
            input.skip(16)?; // entry id
            input.skip(8)?; // delivery time
            read_len(input)?; // delivery count
        }
        let consumers = read_len(input)?;
        for _ in 0..consumers {
            skip_string(input)?; // name
            input.skip(8)?; // seen time
            if rdb_type >= types::STREAM_LISTPACKS_3 {
                input.skip(8)?; // active time
            }
            let pel = read_len(input)?;
            for _ in 0..pel {
                input.skip(16)?;
            }
        }
    }
    Ok(())
}

/// A module value as written for `redis-check-rdb`: typed fields until an EOF marker.
pub(crate) fn skip_module_value(input: &mut impl RdbInput) -> Result<(), FormatError> {
    loop {
        let at = input.offset();
        match read_len(input)? {
            MODULE_OPCODE_EOF => return Ok(()),
            MODULE_OPCODE_SINT | MODULE_OPCODE_UINT => {
                read_len(input)?;
            }
            MODULE_OPCODE_FLOAT => input.skip(4)?,
            MODULE_OPCODE_DOUBLE => input.skip(8)?,
            MODULE_OPCODE_STRING => skip_string(input)?,
            op => {
                return Err(FormatError::corrupt(
                    at,
                    format!("RDB module value: unknown field opcode {op}"),
                ))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// DUMP payloads

/// A DUMP payload: `rdb type u8 + value encoding + RDB version u16 LE + CRC-64 LE`, with
/// `write_value` appending the value encoding. `value_len_hint` sizes the buffer up front.
pub fn dump_payload(
    rdb_type: u8,
    value_len_hint: usize,
    write_value: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + value_len_hint + DUMP_FOOTER_LEN);
    out.push(rdb_type);
    write_value(&mut out);
    out.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
    let crc = Crc64::checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// [`dump_payload`] appended to `out`, for an encoder that tells the RDB type once it has
/// written the value (`write_value` appends the encoding and returns the type). False, with
/// `out` as it was, when it returns None.
pub fn append_dump_payload(
    out: &mut Vec<u8>,
    write_value: impl FnOnce(&mut Vec<u8>) -> Option<u8>,
) -> bool {
    let start = out.len();
    out.push(0);
    let Some(rdb_type) = write_value(out) else {
        out.truncate(start);
        return false;
    };
    out[start] = rdb_type;
    out.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
    let crc = Crc64::checksum(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    true
}

/// The DUMP payload of a string value. Never LZF-compressed: byte for byte what Redis 7.2
/// produces for values it would not compress (Redis compresses only strings over 20 bytes that
/// shrink).
pub fn encode_dump_string(value: &[u8]) -> Vec<u8> {
    // Type byte and at most 9 bytes of length.
    dump_payload(types::STRING, value.len() + 9, |out| {
        write_string(out, value, StringCompression::Off)
    })
}

/// Why a DUMP payload was refused, in the two classes RESTORE tells apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpError {
    /// Shorter than its footer, of a newer RDB version, or failing its checksum (Redis: "DUMP
    /// payload version or checksum are wrong").
    Footer(FormatError),
    /// The footer holds but the object inside does not decode (Redis: "Bad data format").
    Object(FormatError),
}

/// A DUMP payload whose footer checked out: the RDB type and a cursor over the value encoding
/// (offsets in its errors count from the start of the payload).
#[derive(Debug, Clone)]
pub struct DumpPayload<'a> {
    pub rdb_type: u8,
    /// The RDB version that wrote it (at most [`DUMP_RDB_VERSION`]).
    pub rdb_version: u16,
    pub value: RdbCursor<'a>,
}

impl<'a> DumpPayload<'a> {
    /// Checks the footer (version, then CRC-64) as Redis 7.0's `verifyDumpPayload` does, then
    /// reads the type byte.
    pub fn parse(payload: &'a [u8]) -> Result<Self, DumpError> {
        let Some(object_len) = payload.len().checked_sub(DUMP_FOOTER_LEN) else {
            return Err(DumpError::Footer(FormatError::truncated(
                payload.len() as u64,
                "DUMP payload shorter than its footer",
            )));
        };
        let (object, footer) = payload.split_at(object_len);
        let rdb_version = u16::from_le_bytes([footer[0], footer[1]]);
        if rdb_version > DUMP_RDB_VERSION {
            return Err(DumpError::Footer(FormatError::unsupported_version(
                object_len as u64,
                format!("(DUMP payload of RDB version {rdb_version}, newest read is {DUMP_RDB_VERSION})"),
            )));
        }
        let mut stored = [0u8; 8];
        stored.copy_from_slice(&footer[2..]);
        if Crc64::checksum(&payload[..object_len + 2]) != u64::from_le_bytes(stored) {
            return Err(DumpError::Footer(FormatError::checksum(
                object_len as u64 + 2,
                "in DUMP payload",
            )));
        }
        let mut value = RdbCursor::new(object);
        let rdb_type = value.read_u8().map_err(DumpError::Object)?;
        Ok(DumpPayload {
            rdb_type,
            rdb_version,
            value,
        })
    }
}

/// The string value inside a DUMP payload. The string must fill the payload exactly.
pub fn decode_dump_string(payload: &[u8]) -> Result<Vec<u8>, DumpError> {
    let mut p = DumpPayload::parse(payload)?;
    if p.rdb_type != types::STRING {
        return Err(DumpError::Object(FormatError::corrupt(
            0,
            format!(
                "DUMP payload holds a {}, not a string",
                types::name(p.rdb_type)
            ),
        )));
    }
    let value = read_string(&mut p.value).map_err(DumpError::Object)?;
    p.value.finish().map_err(DumpError::Object)?;
    Ok(value)
}

#[cfg(test)]
mod tests;

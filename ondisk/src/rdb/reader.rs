//! Streaming RDB reader: yields strings and AUX fields, skips everything else correctly.
//!
//! Skipping must consume exactly the bytes Redis wrote for each type, or every key after it
//! would be garbage; the CRC-64 at EOF then confirms the whole walk. Declared lengths are never
//! trusted for allocation: buffers grow only as bytes actually arrive.

use super::lzf::lzf_decompress;
use super::{opcode, types, Crc64, RdbItem, RDB_MAX_VERSION};
use crate::error::FormatError;
use bytes::Bytes;
use std::io::{self, Read};

const BUF_LEN: usize = 64 * 1024;
/// Most bytes reserved up front for a string whose length the file declares.
const MAX_PREALLOC: usize = 1 << 20;

/// Reads an RDB file item by item.
pub struct RdbReader<R: Read> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// File offset of `buf[pos]`.
    offset: u64,
    /// CRC-64 of every consumed byte.
    crc: Crc64,
    version: u32,
    db: u32,
    done: bool,
    functions_skipped: u64,
    module_aux_skipped: u64,
}

impl<R: Read> RdbReader<R> {
    /// Reads and checks the `REDISnnnn` header; versions 1 to 12 are accepted.
    pub fn new(inner: R) -> Result<Self, FormatError> {
        let mut r = RdbReader {
            inner,
            buf: vec![0u8; BUF_LEN].into_boxed_slice(),
            pos: 0,
            end: 0,
            offset: 0,
            crc: Crc64::new(),
            version: 0,
            db: 0,
            done: false,
            functions_skipped: 0,
            module_aux_skipped: 0,
        };
        let mut head = [0u8; 9];
        r.read_exact(&mut head).map_err(|e| {
            if e.kind == crate::ErrorKind::Truncated {
                FormatError::bad_magic(0, "(not an RDB file: shorter than its header)")
            } else {
                e
            }
        })?;
        if &head[..5] != b"REDIS" || !head[5..].iter().all(u8::is_ascii_digit) {
            return Err(FormatError::bad_magic(0, "(not an RDB file)"));
        }
        let version = head[5..]
            .iter()
            .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        if !(1..=RDB_MAX_VERSION).contains(&version) {
            return Err(FormatError::unsupported_version(
                5,
                format!("(RDB version {version}, this build reads 1 to {RDB_MAX_VERSION})"),
            ));
        }
        r.version = version;
        Ok(r)
    }

    /// The file's RDB version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Function libraries (FUNCTION2 opcodes) skipped; Strata does not run Lua.
    pub fn functions_skipped(&self) -> u64 {
        self.functions_skipped
    }

    /// Module AUX sections skipped.
    pub fn module_aux_skipped(&self) -> u64 {
        self.module_aux_skipped
    }

    /// The next item; `Ok(None)` after EOF and a good (or absent) checksum.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<RdbItem>, FormatError> {
        if self.done {
            return Ok(None);
        }
        let mut expire_at_ms = None;
        loop {
            let at = self.offset;
            let t = self.read_u8()?;
            match t {
                opcode::EXPIRETIME_MS => {
                    let ms = i64::from_le_bytes(self.read_array()?);
                    expire_at_ms = Some(ms.max(0) as u64);
                }
                opcode::EXPIRETIME => {
                    let secs = i32::from_le_bytes(self.read_array()?);
                    expire_at_ms = Some(i64::from(secs).max(0) as u64 * 1000);
                }
                opcode::FREQ => {
                    self.read_u8()?;
                }
                opcode::IDLE => {
                    self.read_len()?;
                }
                opcode::SELECTDB => {
                    let db = self.read_len()?;
                    self.db = u32::try_from(db).map_err(|_| {
                        FormatError::corrupt(at, format!("RDB SELECTDB {db} out of range"))
                    })?;
                }
                opcode::RESIZEDB => {
                    self.read_len()?;
                    self.read_len()?;
                }
                opcode::SLOT_INFO => {
                    for _ in 0..3 {
                        self.read_len()?;
                    }
                }
                opcode::AUX => {
                    let key = self.read_string()?;
                    let value = self.read_string()?;
                    return Ok(Some(RdbItem::Aux { key, value }));
                }
                opcode::MODULE_AUX => {
                    self.read_len()?; // module id
                    let when_at = self.offset;
                    if self.read_len()? != MODULE_OPCODE_UINT {
                        return Err(FormatError::corrupt(
                            when_at,
                            "RDB module AUX: bad when-opcode",
                        ));
                    }
                    self.read_len()?; // when
                    self.skip_module_value()?;
                    self.module_aux_skipped += 1;
                }
                opcode::FUNCTION_PRE_GA => {
                    return Err(FormatError::unsupported_version(
                        at,
                        "(RDB function format of Redis 7.0 release candidates)",
                    ));
                }
                opcode::FUNCTION2 => {
                    self.skip_string()?;
                    self.functions_skipped += 1;
                }
                opcode::EOF => {
                    self.read_checksum()?;
                    self.done = true;
                    return Ok(None);
                }
                types::STRING => {
                    let key = self.read_string()?;
                    let value = self.read_string()?;
                    return Ok(Some(RdbItem::String {
                        db: self.db,
                        key,
                        value,
                        expire_at_ms,
                    }));
                }
                types::MODULE_PRE_GA => {
                    return Err(FormatError::unsupported_version(
                        at,
                        "(RDB module value of a pre-release Redis 4.0)",
                    ));
                }
                t if t <= types::HASH_LISTPACK_EX && t != 8 => {
                    let key = self.read_string()?;
                    self.skip_value(t)?;
                    return Ok(Some(RdbItem::Skipped {
                        db: self.db,
                        key,
                        type_code: t,
                    }));
                }
                t => {
                    return Err(FormatError::corrupt(
                        at,
                        format!("RDB: unknown type or opcode {t}"),
                    ));
                }
            }
        }
    }

    fn read_checksum(&mut self) -> Result<(), FormatError> {
        if self.version < 5 {
            return Ok(());
        }
        let expected = self.crc.value();
        let at = self.offset;
        let stored = u64::from_le_bytes(self.read_array()?);
        if stored != 0 && stored != expected {
            return Err(FormatError::checksum(
                at,
                format!("in RDB file (stored {stored:#018x}, computed {expected:#018x})"),
            ));
        }
        Ok(())
    }

    /// Consumes the value of a non-string type.
    fn skip_value(&mut self, t: u8) -> Result<(), FormatError> {
        match t {
            types::LIST | types::SET | types::LIST_QUICKLIST => {
                let n = self.read_len()?;
                for _ in 0..n {
                    self.skip_string()?;
                }
            }
            types::ZSET => {
                let n = self.read_len()?;
                for _ in 0..n {
                    self.skip_string()?;
                    // Score as text: a length byte, or 253/254/255 for nan/+inf/-inf.
                    let len = self.read_u8()?;
                    if len < 253 {
                        self.skip(u64::from(len))?;
                    }
                }
            }
            types::ZSET_2 => {
                let n = self.read_len()?;
                for _ in 0..n {
                    self.skip_string()?;
                    self.skip(8)?;
                }
            }
            types::HASH => {
                let n = self.read_len()?;
                for _ in 0..n {
                    self.skip_string()?;
                    self.skip_string()?;
                }
            }
            types::HASH_METADATA | types::HASH_METADATA_PRE_GA => {
                if t == types::HASH_METADATA {
                    self.skip(8)?; // smallest field expiry
                }
                let n = self.read_len()?;
                for _ in 0..n {
                    self.read_len()?; // field TTL
                    self.skip_string()?;
                    self.skip_string()?;
                }
            }
            types::LIST_QUICKLIST_2 => {
                let n = self.read_len()?;
                for _ in 0..n {
                    let at = self.offset;
                    let container = self.read_len()?;
                    if container != 1 && container != 2 {
                        return Err(FormatError::corrupt(
                            at,
                            format!("RDB quicklist: container type {container}"),
                        ));
                    }
                    self.skip_string()?;
                }
            }
            types::HASH_LISTPACK_EX => {
                self.skip(8)?; // smallest field expiry
                self.skip_string()?;
            }
            types::HASH_ZIPMAP
            | types::LIST_ZIPLIST
            | types::SET_INTSET
            | types::ZSET_ZIPLIST
            | types::HASH_ZIPLIST
            | types::HASH_LISTPACK
            | types::ZSET_LISTPACK
            | types::SET_LISTPACK
            | types::HASH_LISTPACK_EX_PRE_GA => self.skip_string()?,
            types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 | types::STREAM_LISTPACKS_3 => {
                self.skip_stream(t)?
            }
            types::MODULE_2 => {
                self.read_len()?; // module id
                self.skip_module_value()?;
            }
            _ => {
                return Err(FormatError::corrupt(
                    self.offset,
                    format!("RDB: cannot skip type {t}"),
                ))
            }
        }
        Ok(())
    }

    fn skip_stream(&mut self, t: u8) -> Result<(), FormatError> {
        let listpacks = self.read_len()?;
        for _ in 0..listpacks {
            self.skip_string()?; // master entry id
            self.skip_string()?; // listpack
        }
        // length, last id (ms, seq); from v2 also first id, max deleted id, entries added.
        let lens = if t >= types::STREAM_LISTPACKS_2 { 8 } else { 3 };
        for _ in 0..lens {
            self.read_len()?;
        }
        let groups = self.read_len()?;
        for _ in 0..groups {
            self.skip_string()?; // name
            self.read_len()?; // last delivered id ms
            self.read_len()?; // and seq
            if t >= types::STREAM_LISTPACKS_2 {
                self.read_len()?; // entries read
            }
            let pel = self.read_len()?;
            for _ in 0..pel {
                self.skip(16)?; // entry id
                self.skip(8)?; // delivery time
                self.read_len()?; // delivery count
            }
            let consumers = self.read_len()?;
            for _ in 0..consumers {
                self.skip_string()?; // name
                self.skip(8)?; // seen time
                if t >= types::STREAM_LISTPACKS_3 {
                    self.skip(8)?; // active time
                }
                let pel = self.read_len()?;
                for _ in 0..pel {
                    self.skip(16)?;
                }
            }
        }
        Ok(())
    }

    /// A module value as written for `redis-check-rdb`: typed fields until an EOF marker.
    fn skip_module_value(&mut self) -> Result<(), FormatError> {
        loop {
            let at = self.offset;
            match self.read_len()? {
                MODULE_OPCODE_EOF => return Ok(()),
                MODULE_OPCODE_SINT | MODULE_OPCODE_UINT => {
                    self.read_len()?;
                }
                MODULE_OPCODE_FLOAT => self.skip(4)?,
                MODULE_OPCODE_DOUBLE => self.skip(8)?,
                MODULE_OPCODE_STRING => self.skip_string()?,
                op => {
                    return Err(FormatError::corrupt(
                        at,
                        format!("RDB module value: unknown field opcode {op}"),
                    ))
                }
            }
        }
    }

    /// A length; a special-encoding marker yields its 6 bits, as Redis does.
    fn read_len(&mut self) -> Result<u64, FormatError> {
        self.read_len_enc().map(|(len, _)| len)
    }

    /// A length and whether it is a special string encoding.
    fn read_len_enc(&mut self) -> Result<(u64, bool), FormatError> {
        let at = self.offset;
        let b = self.read_u8()?;
        match b >> 6 {
            0 => Ok((u64::from(b & 0x3f), false)),
            1 => {
                let lo = self.read_u8()?;
                Ok((u64::from(b & 0x3f) << 8 | u64::from(lo), false))
            }
            3 => Ok((u64::from(b & 0x3f), true)),
            _ if b == 0x80 => Ok((u64::from(u32::from_be_bytes(self.read_array()?)), false)),
            _ if b == 0x81 => Ok((u64::from_be_bytes(self.read_array()?), false)),
            _ => Err(FormatError::corrupt(
                at,
                format!("RDB: bad length encoding {b:#04x}"),
            )),
        }
    }

    fn read_string(&mut self) -> Result<Bytes, FormatError> {
        let at = self.offset;
        let (len, encoded) = self.read_len_enc()?;
        if !encoded {
            return self.read_vec(len).map(Bytes::from);
        }
        match len {
            ENC_INT8 => Ok(int_text(i64::from(self.read_u8()? as i8))),
            ENC_INT16 => Ok(int_text(i64::from(i16::from_le_bytes(self.read_array()?)))),
            ENC_INT32 => Ok(int_text(i64::from(i32::from_le_bytes(self.read_array()?)))),
            ENC_LZF => {
                let clen = self.read_len()?;
                let raw_len = self.read_len()?;
                let data = self.read_vec(clen)?;
                let raw_len = usize::try_from(raw_len)
                    .map_err(|_| FormatError::corrupt(at, "RDB: LZF length too large"))?;
                lzf_decompress(&data, raw_len)
                    .map(Bytes::from)
                    .map_err(|e| FormatError::corrupt(at, format!("RDB string: {e}")))
            }
            enc => Err(FormatError::corrupt(
                at,
                format!("RDB: unknown string encoding {enc}"),
            )),
        }
    }

    fn skip_string(&mut self) -> Result<(), FormatError> {
        let at = self.offset;
        let (len, encoded) = self.read_len_enc()?;
        if !encoded {
            return self.skip(len);
        }
        match len {
            ENC_INT8 => self.skip(1),
            ENC_INT16 => self.skip(2),
            ENC_INT32 => self.skip(4),
            ENC_LZF => {
                let clen = self.read_len()?;
                self.read_len()?;
                self.skip(clen)
            }
            enc => Err(FormatError::corrupt(
                at,
                format!("RDB: unknown string encoding {enc}"),
            )),
        }
    }

    /// Ensures at least one unconsumed byte is buffered; `false` at end of input.
    fn fill(&mut self) -> Result<bool, FormatError> {
        if self.pos < self.end {
            return Ok(true);
        }
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.pos = 0;
                    self.end = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FormatError::io(self.offset, &e)),
            }
        }
    }

    /// Consumes between 1 and `max` buffered bytes (`max` > 0), hands them to `sink` and
    /// returns how many; at end of input, a `Truncated` error naming the offset.
    fn consume(&mut self, max: u64, sink: &mut impl FnMut(&[u8])) -> Result<usize, FormatError> {
        if !self.fill()? {
            return Err(FormatError::truncated(self.offset, "RDB file: data ends"));
        }
        let n = ((self.end - self.pos) as u64).min(max) as usize;
        let chunk = &self.buf[self.pos..self.pos + n];
        self.crc.update(chunk);
        sink(chunk);
        self.pos += n;
        self.offset += n as u64;
        Ok(n)
    }

    fn read_u8(&mut self) -> Result<u8, FormatError> {
        let mut b = 0u8;
        self.consume(1, &mut |c| b = c[0])?;
        Ok(b)
    }

    fn read_array<const N: usize>(&mut self) -> Result<[u8; N], FormatError> {
        let mut a = [0u8; N];
        self.read_exact(&mut a)?;
        Ok(a)
    }

    fn read_exact(&mut self, out: &mut [u8]) -> Result<(), FormatError> {
        let mut filled = 0;
        while filled < out.len() {
            let want = (out.len() - filled) as u64;
            let start = filled;
            let n = self.consume(want, &mut |c| {
                out[start..start + c.len()].copy_from_slice(c)
            })?;
            filled += n;
        }
        Ok(())
    }

    /// Reads `len` bytes, growing the buffer only as they arrive.
    fn read_vec(&mut self, len: u64) -> Result<Vec<u8>, FormatError> {
        let mut v = Vec::with_capacity(len.min(MAX_PREALLOC as u64) as usize);
        let mut left = len;
        while left > 0 {
            left -= self.consume(left, &mut |c| v.extend_from_slice(c))? as u64;
        }
        Ok(v)
    }

    fn skip(&mut self, len: u64) -> Result<(), FormatError> {
        let mut left = len;
        while left > 0 {
            left -= self.consume(left, &mut |_| {})? as u64;
        }
        Ok(())
    }
}

const ENC_INT8: u64 = 0;
const ENC_INT16: u64 = 1;
const ENC_INT32: u64 = 2;
const ENC_LZF: u64 = 3;

const MODULE_OPCODE_EOF: u64 = 0;
const MODULE_OPCODE_SINT: u64 = 1;
const MODULE_OPCODE_UINT: u64 = 2;
const MODULE_OPCODE_FLOAT: u64 = 3;
const MODULE_OPCODE_DOUBLE: u64 = 4;
const MODULE_OPCODE_STRING: u64 = 5;

fn int_text(v: i64) -> Bytes {
    Bytes::from(v.to_string())
}

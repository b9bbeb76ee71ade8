//! Streaming RDB reader: yields strings and AUX fields, skips everything else correctly.
//!
//! This file owns the file's grammar (header, opcodes, EOF checksum) and the buffered byte
//! stream under it; every value encoding is [`codec`](super::codec)'s, read through that
//! stream. Skipping must consume exactly the bytes Redis wrote for each type, or every key
//! after it would be garbage; the CRC-64 at EOF then confirms the whole walk. Declared lengths
//! are never trusted for allocation: buffers grow only as bytes actually arrive.

use super::codec::{
    read_len, read_string, read_value_bytes, skip_module_value, skip_string, skip_value, RdbInput,
    MODULE_OPCODE_UINT,
};
use super::{opcode, types, Crc64, RdbItem, RDB_MAX_VERSION};
use crate::error::FormatError;
use bytes::Bytes;
use std::io::{self, Read};

const BUF_LEN: usize = 64 * 1024;
/// Most bytes reserved up front for a string whose length the file declares.
const MAX_PREALLOC: usize = 1 << 20;

/// Reads an RDB file item by item.
pub struct RdbReader<R: Read> {
    stream: RdbStream<R>,
    version: u32,
    db: u32,
    done: bool,
    functions_skipped: u64,
    module_aux_skipped: u64,
    /// Keys of other types come out as [`RdbItem::Object`] (values up to this many bytes)
    /// instead of being skipped.
    keep_objects: Option<usize>,
    /// Function libraries come out as [`RdbItem::Function`] instead of being skipped.
    keep_functions: bool,
}

impl<R: Read> RdbReader<R> {
    /// Reads and checks the `REDISnnnn` header; versions 1 to 12 are accepted.
    pub fn new(inner: R) -> Result<Self, FormatError> {
        let mut r = RdbReader {
            stream: RdbStream {
                inner,
                buf: vec![0u8; BUF_LEN].into_boxed_slice(),
                pos: 0,
                end: 0,
                offset: 0,
                crc: Crc64::new(),
            },
            version: 0,
            db: 0,
            done: false,
            functions_skipped: 0,
            keep_objects: None,
            keep_functions: false,
            module_aux_skipped: 0,
        };
        let mut head = [0u8; 9];
        r.stream.read_exact(&mut head).map_err(|e| {
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
        self.stream.offset
    }

    /// Function libraries (FUNCTION2 opcodes) skipped; Strata does not run Lua.
    pub fn functions_skipped(&self) -> u64 {
        self.functions_skipped
    }

    /// Module AUX sections skipped.
    pub fn module_aux_skipped(&self) -> u64 {
        self.module_aux_skipped
    }

    /// From now on, keys of types other than string come out whole as [`RdbItem::Object`]
    /// (their value's raw encoding, at most `limit` bytes; a longer one is an error) instead of
    /// being skipped.
    pub fn keep_objects(&mut self, limit: usize) {
        self.keep_objects = Some(limit);
    }

    /// From now on, function libraries come out as [`RdbItem::Function`] (their code)
    /// instead of being skipped.
    pub fn keep_functions(&mut self) {
        self.keep_functions = true;
    }

    /// The next item; `Ok(None)` after EOF and a good (or absent) checksum.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<RdbItem>, FormatError> {
        if self.done {
            return Ok(None);
        }
        let mut expire_at_ms = None;
        loop {
            let at = self.stream.offset;
            let t = self.stream.read_u8()?;
            match t {
                opcode::EXPIRETIME_MS => {
                    let ms = i64::from_le_bytes(self.stream.read_array()?);
                    expire_at_ms = Some(ms.max(0) as u64);
                }
                opcode::EXPIRETIME => {
                    let secs = i32::from_le_bytes(self.stream.read_array()?);
                    expire_at_ms = Some(i64::from(secs).max(0) as u64 * 1000);
                }
                opcode::FREQ => {
                    self.stream.read_u8()?;
                }
                opcode::IDLE => {
                    read_len(&mut self.stream)?;
                }
                opcode::SELECTDB => {
                    let db = read_len(&mut self.stream)?;
                    self.db = u32::try_from(db).map_err(|_| {
                        FormatError::corrupt(at, format!("RDB SELECTDB {db} out of range"))
                    })?;
                }
                opcode::RESIZEDB => {
                    read_len(&mut self.stream)?;
                    read_len(&mut self.stream)?;
                }
                opcode::SLOT_INFO => {
                    for _ in 0..3 {
                        read_len(&mut self.stream)?;
                    }
                }
                opcode::AUX => {
                    let key = Bytes::from(read_string(&mut self.stream)?);
                    let value = Bytes::from(read_string(&mut self.stream)?);
                    return Ok(Some(RdbItem::Aux { key, value }));
                }
                opcode::MODULE_AUX => {
                    read_len(&mut self.stream)?; // module id
                    let when_at = self.stream.offset;
                    if read_len(&mut self.stream)? != MODULE_OPCODE_UINT {
                        return Err(FormatError::corrupt(
                            when_at,
                            "RDB module AUX: bad when-opcode",
                        ));
                    }
                    read_len(&mut self.stream)?; // when
                    skip_module_value(&mut self.stream)?;
                    self.module_aux_skipped += 1;
                }
                opcode::FUNCTION_PRE_GA => {
                    return Err(FormatError::unsupported_version(
                        at,
                        "(RDB function format of Redis 7.0 release candidates)",
                    ));
                }
                opcode::FUNCTION2 => {
                    if self.keep_functions {
                        let code = Bytes::from(read_string(&mut self.stream)?);
                        return Ok(Some(RdbItem::Function(code)));
                    }
                    skip_string(&mut self.stream)?;
                    self.functions_skipped += 1;
                }
                opcode::EOF => {
                    self.read_checksum()?;
                    self.done = true;
                    return Ok(None);
                }
                types::STRING => {
                    let key = Bytes::from(read_string(&mut self.stream)?);
                    let value = Bytes::from(read_string(&mut self.stream)?);
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
                    let key = Bytes::from(read_string(&mut self.stream)?);
                    if let Some(limit) = self.keep_objects {
                        let value = read_value_bytes(&mut self.stream, t, limit)?;
                        return Ok(Some(RdbItem::Object {
                            db: self.db,
                            key,
                            rdb_type: t,
                            value: Bytes::from(value),
                            expire_at_ms,
                        }));
                    }
                    skip_value(&mut self.stream, t)?;
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
        let expected = self.stream.crc.value();
        let at = self.stream.offset;
        let stored = u64::from_le_bytes(self.stream.read_array()?);
        if stored != 0 && stored != expected {
            return Err(FormatError::checksum(
                at,
                format!("in RDB file (stored {stored:#018x}, computed {expected:#018x})"),
            ));
        }
        Ok(())
    }
}

/// The file's bytes: a buffer over the reader, the file offset and the running CRC-64.
struct RdbStream<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// File offset of `buf[pos]`.
    offset: u64,
    /// CRC-64 of every consumed byte.
    crc: Crc64,
}

impl<R: Read> RdbStream<R> {
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
}

impl<R: Read> RdbInput for RdbStream<R> {
    fn offset(&self) -> u64 {
        self.offset
    }

    fn read_u8(&mut self) -> Result<u8, FormatError> {
        let mut b = 0u8;
        self.consume(1, &mut |c| b = c[0])?;
        Ok(b)
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

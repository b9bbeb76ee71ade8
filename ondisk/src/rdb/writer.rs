//! RDB export: a sans-I/O encoder plus a `std::io` wrapper.
//!
//! A whole file is header, keys, trailer. A server with many shards can instead have each shard
//! encode a body-only fragment ([`RdbEncoder::fragment`]) and write
//! `rdb_header() + fragments + rdb_trailer(crc)`, feeding every byte through one [`Crc64`].

use super::lzf::lzf_compress;
use super::{opcode, types, Crc64, RDB_MAX_VERSION, RDB_MIN_EXPORT_VERSION};
use bytes::{Bytes, BytesMut};
use std::io::{self, Write};

/// Values this long or shorter are never compressed (as in Redis).
const LZF_MIN_LEN: usize = 20;
/// `RdbWriter` writes once this much output is pending.
const WRITE_CHUNK: usize = 64 * 1024;

/// The file header: `REDIS` + version + AUX fields `redis-ver`, `redis-bits`, `ctime` (now) and
/// `used-mem` (0). `version` is clamped to 7..=12.
pub fn rdb_header(version: u32) -> Vec<u8> {
    let version = clamp_version(version);
    let ctime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(format!("REDIS{version:04}").as_bytes());
    for (key, value) in [
        ("redis-ver", redis_version_for(version).to_string()),
        ("redis-bits", "64".to_string()),
        ("ctime", ctime.to_string()),
        ("used-mem", "0".to_string()),
    ] {
        out.push(opcode::AUX);
        put_plain_string(&mut out, key.as_bytes());
        put_plain_string(&mut out, value.as_bytes());
    }
    out
}

/// The file trailer: EOF opcode and the CRC-64 of everything before it plus the EOF opcode.
pub fn rdb_trailer(crc_of_everything_before: Crc64) -> Vec<u8> {
    let mut crc = crc_of_everything_before;
    crc.update(&[opcode::EOF]);
    let mut out = Vec::with_capacity(9);
    out.push(opcode::EOF);
    out.extend_from_slice(&crc.value().to_le_bytes());
    out
}

/// Encodes string keys into RDB bytes. Drain [`take_output`](Self::take_output) as you go.
///
/// Keys must be unique across the whole file: Redis refuses to load duplicates.
///
/// # Panics
/// A value started with [`begin_string`](Self::begin_string) must get exactly the announced
/// bytes through [`value_chunk`](Self::value_chunk) before the next key or `finish`.
pub struct RdbEncoder {
    out: BytesMut,
    /// Running checksum for a whole file; `None` for a fragment.
    crc: Option<Crc64>,
    db: Option<u32>,
    compress: bool,
    value_left: u64,
    keys: u64,
}

impl RdbEncoder {
    /// A whole file of RDB version `version` (clamped to 7..=12; use
    /// [`RDB_EXPORT_VERSION`](super::RDB_EXPORT_VERSION) unless the target needs another).
    pub fn new(version: u32) -> Self {
        let mut enc = Self::fragment();
        enc.crc = Some(Crc64::new());
        enc.emit(&rdb_header(version));
        enc
    }

    /// A body-only fragment: no header, no trailer, and a SELECTDB before its first key.
    pub fn fragment() -> Self {
        RdbEncoder {
            out: BytesMut::new(),
            crc: None,
            db: None,
            compress: true,
            value_left: 0,
            keys: 0,
        }
    }

    /// LZF-compress values longer than 20 bytes when that makes them smaller (default: on,
    /// like Redis' `rdbcompression yes`).
    pub fn set_compression(&mut self, on: bool) {
        self.compress = on;
    }

    /// Makes the following keys belong to `db`; emits SELECTDB only when the db changes.
    pub fn select_db(&mut self, db: u32) {
        if self.db != Some(db) {
            self.assert_no_open_value();
            let mut b = vec![opcode::SELECTDB];
            put_len(&mut b, u64::from(db));
            self.emit(&b);
            self.db = Some(db);
        }
    }

    /// Writes one string key. Canonical integers in the 32-bit range are stored
    /// integer-encoded, long compressible values LZF-compressed, as Redis does.
    pub fn write_string(&mut self, key: &[u8], value: &[u8], expire_at_ms: Option<u64>) {
        self.key_head(key, expire_at_ms);
        let mut b = Vec::with_capacity(16);
        if let Some(v) = integer_encoding(value) {
            put_int(&mut b, v);
            self.emit(&b);
        } else if let Some(c) = self.compressed(value) {
            b.push(0xC0 | 3);
            put_len(&mut b, c.len() as u64);
            put_len(&mut b, value.len() as u64);
            self.emit(&b);
            self.emit(&c);
        } else {
            put_len(&mut b, value.len() as u64);
            self.emit(&b);
            self.emit(value);
        }
    }

    /// Starts a string key whose value follows through [`value_chunk`](Self::value_chunk)
    /// calls totalling `value_len` bytes (stored plain).
    pub fn begin_string(&mut self, key: &[u8], value_len: u64, expire_at_ms: Option<u64>) {
        self.key_head(key, expire_at_ms);
        let mut b = Vec::with_capacity(9);
        put_len(&mut b, value_len);
        self.emit(&b);
        self.value_left = value_len;
    }

    pub fn value_chunk(&mut self, chunk: &[u8]) {
        let len = chunk.len() as u64;
        assert!(
            len <= self.value_left,
            "RDB value_chunk: {len} bytes given but only {} announced",
            self.value_left
        );
        self.value_left -= len;
        self.emit(chunk);
    }

    /// Keys written so far.
    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// Encoded bytes waiting to be taken.
    pub fn pending_bytes(&self) -> usize {
        self.out.len()
    }

    /// The bytes encoded so far; `None` when there are none.
    pub fn take_output(&mut self) -> Option<Bytes> {
        if self.out.is_empty() {
            None
        } else {
            Some(self.out.split().freeze())
        }
    }

    /// Everything not yet taken; for a whole file, followed by the EOF opcode and checksum.
    pub fn finish(mut self) -> Bytes {
        self.assert_no_open_value();
        if let Some(crc) = self.crc.take() {
            let trailer = rdb_trailer(crc);
            self.out.extend_from_slice(&trailer);
        }
        self.out.freeze()
    }

    fn key_head(&mut self, key: &[u8], expire_at_ms: Option<u64>) {
        self.assert_no_open_value();
        if self.db.is_none() {
            self.select_db(0);
        }
        let mut b = Vec::with_capacity(key.len() + 16);
        if let Some(at) = expire_at_ms {
            b.push(opcode::EXPIRETIME_MS);
            let at = i64::try_from(at).unwrap_or(i64::MAX);
            b.extend_from_slice(&at.to_le_bytes());
        }
        b.push(types::STRING);
        put_plain_string(&mut b, key);
        self.emit(&b);
        self.keys += 1;
    }

    fn compressed(&self, value: &[u8]) -> Option<Vec<u8>> {
        if !self.compress || value.len() <= LZF_MIN_LEN {
            return None;
        }
        // Worth it only if the two extra length fields are paid for.
        lzf_compress(value).filter(|c| c.len() + 10 < value.len())
    }

    fn assert_no_open_value(&self) {
        assert!(
            self.value_left == 0,
            "RDB key started while {} bytes of the previous value are missing",
            self.value_left
        );
    }

    fn emit(&mut self, data: &[u8]) {
        if let Some(crc) = &mut self.crc {
            crc.update(data);
        }
        self.out.extend_from_slice(data);
    }
}

/// Writes an RDB file to any `Write`, in chunks of about 64 KiB.
pub struct RdbWriter<W: Write> {
    inner: W,
    enc: RdbEncoder,
}

impl<W: Write> RdbWriter<W> {
    /// A whole file of version `version` (see [`RdbEncoder::new`]).
    pub fn new(inner: W, version: u32) -> Self {
        RdbWriter {
            inner,
            enc: RdbEncoder::new(version),
        }
    }

    /// A body-only fragment (see [`RdbEncoder::fragment`]).
    pub fn fragment(inner: W) -> Self {
        RdbWriter {
            inner,
            enc: RdbEncoder::fragment(),
        }
    }

    pub fn set_compression(&mut self, on: bool) {
        self.enc.set_compression(on);
    }

    pub fn select_db(&mut self, db: u32) -> io::Result<()> {
        self.enc.select_db(db);
        self.drain(WRITE_CHUNK)
    }

    pub fn write_string(
        &mut self,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
    ) -> io::Result<()> {
        self.enc.write_string(key, value, expire_at_ms);
        self.drain(WRITE_CHUNK)
    }

    pub fn begin_string(
        &mut self,
        key: &[u8],
        value_len: u64,
        expire_at_ms: Option<u64>,
    ) -> io::Result<()> {
        self.enc.begin_string(key, value_len, expire_at_ms);
        self.drain(WRITE_CHUNK)
    }

    pub fn value_chunk(&mut self, chunk: &[u8]) -> io::Result<()> {
        self.enc.value_chunk(chunk);
        self.drain(WRITE_CHUNK)
    }

    pub fn keys(&self) -> u64 {
        self.enc.keys()
    }

    /// Writes the rest (and the trailer of a whole file), flushes, and returns the writer.
    /// Does not fsync.
    pub fn finish(mut self) -> io::Result<W> {
        self.drain(0)?;
        let tail = self.enc.finish();
        self.inner.write_all(&tail)?;
        self.inner.flush()?;
        Ok(self.inner)
    }

    fn drain(&mut self, at_least: usize) -> io::Result<()> {
        if self.enc.pending_bytes() >= at_least {
            while let Some(chunk) = self.enc.take_output() {
                self.inner.write_all(&chunk)?;
            }
        }
        Ok(())
    }
}

fn clamp_version(version: u32) -> u32 {
    version.clamp(RDB_MIN_EXPORT_VERSION, RDB_MAX_VERSION)
}

/// A Redis release that writes `version`, for the `redis-ver` AUX field.
fn redis_version_for(version: u32) -> &'static str {
    match version {
        ..=7 => "3.2.0",
        8 => "4.0.0",
        9 => "5.0.0",
        10 => "7.0.0",
        11 => "7.2.0",
        _ => "7.4.0",
    }
}

pub(crate) fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if let Ok(l) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&l.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

pub(crate) fn put_plain_string(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

fn put_int(out: &mut Vec<u8>, v: i32) {
    if let Ok(v) = i8::try_from(v) {
        out.push(0xC0);
        out.push(v as u8);
    } else if let Ok(v) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(0xC2);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// `Some(v)` when `s` is exactly the decimal text of a 32-bit integer (no sign on 0, no
/// leading zeros or '+'), so that reading it back gives the same bytes.
pub(crate) fn integer_encoding(s: &[u8]) -> Option<i32> {
    if s.is_empty() || s.len() > 11 {
        return None;
    }
    let text = std::str::from_utf8(s).ok()?;
    let v: i32 = text.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

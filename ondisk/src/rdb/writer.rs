//! RDB export: a sans-I/O encoder plus a `std::io` wrapper.
//!
//! A whole file is header, keys, trailer. A server with many shards can instead have each shard
//! encode a body-only fragment ([`RdbEncoder::fragment`]) and write
//! `rdb_header() + fragments + rdb_trailer(crc)`, feeding every byte through one [`Crc64`].

use super::codec::{write_len, write_plain_string, write_string, StringCompression};
use super::{opcode, types, Crc64, RDB_MAX_VERSION, RDB_MIN_EXPORT_VERSION};
use bytes::{Bytes, BytesMut};
use std::io::{self, Write};

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
        write_plain_string(&mut out, key.as_bytes());
        write_plain_string(&mut out, value.as_bytes());
    }
    out
}

/// Function libraries as Redis 7 writes them after the header's AUX fields: per library
/// RDB_OPCODE_FUNCTION2 and its code as an RDB string.
pub fn rdb_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(opcode::FUNCTION2);
        write_string(&mut out, code, StringCompression::Lzf);
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
    compression: StringCompression,
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
            compression: StringCompression::Lzf,
            value_left: 0,
            keys: 0,
        }
    }

    /// LZF-compress values as Redis does with `rdbcompression yes` (default: on).
    pub fn set_compression(&mut self, on: bool) {
        self.compression = if on {
            StringCompression::Lzf
        } else {
            StringCompression::Off
        };
    }

    /// Makes the following keys belong to `db`; emits SELECTDB only when the db changes.
    pub fn select_db(&mut self, db: u32) {
        if self.db != Some(db) {
            self.assert_no_open_value();
            let mut b = vec![opcode::SELECTDB];
            write_len(&mut b, u64::from(db));
            self.emit(&b);
            self.db = Some(db);
        }
    }

    /// Writes one string key. Canonical integers in the 32-bit range are stored
    /// integer-encoded, long compressible values LZF-compressed, as Redis does.
    pub fn write_string(&mut self, key: &[u8], value: &[u8], expire_at_ms: Option<u64>) {
        self.key_head(key, expire_at_ms);
        // Encoded straight into the output (no copy of the value), checksummed after.
        let start = self.out.len();
        write_string(&mut self.out, value, self.compression);
        self.checksum_from(start);
    }

    /// Starts a string key whose value follows through [`value_chunk`](Self::value_chunk)
    /// calls totalling `value_len` bytes (stored plain).
    pub fn begin_string(&mut self, key: &[u8], value_len: u64, expire_at_ms: Option<u64>) {
        self.key_head(key, expire_at_ms);
        let mut b = Vec::with_capacity(9);
        write_len(&mut b, value_len);
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

    /// Writes one key of any type: `value` is already its RDB encoding for `rdb_type` (the
    /// codec's writers make it), copied as it is.
    pub fn write_object(
        &mut self,
        key: &[u8],
        rdb_type: u8,
        value: &[u8],
        expire_at_ms: Option<u64>,
    ) {
        self.typed_head(key, rdb_type, expire_at_ms);
        self.emit(value);
    }

    /// Writes function libraries (their code, as FUNCTION LOAD got it); Redis puts them after
    /// the header, before any key.
    pub fn write_functions<'a>(&mut self, codes: impl IntoIterator<Item = &'a [u8]>) {
        self.assert_no_open_value();
        self.emit(&rdb_functions(codes));
    }

    /// Starts a key of any type whose RDB-encoded value follows in
    /// [`object_bytes`](Self::object_bytes) calls (a large collection encoded a part at a
    /// time); the value's end is where the next key or the end begins, as RDB has it.
    pub fn begin_object(&mut self, key: &[u8], rdb_type: u8, expire_at_ms: Option<u64>) {
        self.typed_head(key, rdb_type, expire_at_ms);
    }

    /// Appends the next bytes of the value [`begin_object`](Self::begin_object) started.
    pub fn object_bytes(&mut self, bytes: &[u8]) {
        self.emit(bytes);
    }

    fn key_head(&mut self, key: &[u8], expire_at_ms: Option<u64>) {
        self.typed_head(key, types::STRING, expire_at_ms);
    }

    fn typed_head(&mut self, key: &[u8], rdb_type: u8, expire_at_ms: Option<u64>) {
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
        b.push(rdb_type);
        write_plain_string(&mut b, key);
        self.emit(&b);
        self.keys += 1;
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

    /// Adds the output bytes from `start` on, written in place, to a whole file's checksum.
    fn checksum_from(&mut self, start: usize) {
        if let Some(crc) = &mut self.crc {
            crc.update(&self.out[start..]);
        }
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

    /// See [`RdbEncoder::write_functions`].
    pub fn write_functions<'a>(
        &mut self,
        codes: impl IntoIterator<Item = &'a [u8]>,
    ) -> io::Result<()> {
        self.enc.write_functions(codes);
        self.drain(WRITE_CHUNK)
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

    /// See [`RdbEncoder::write_object`].
    pub fn write_object(
        &mut self,
        key: &[u8],
        rdb_type: u8,
        value: &[u8],
        expire_at_ms: Option<u64>,
    ) -> io::Result<()> {
        self.enc.write_object(key, rdb_type, value, expire_at_ms);
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

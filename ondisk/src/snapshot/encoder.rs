//! Turns records into snapshot bytes without doing any I/O.
//!
//! Records are appended to a raw block; a full block is compressed, framed and moved to the
//! output buffer, which the caller drains with [`SnapshotEncoder::take_output`]. The encoder
//! holds one raw block plus whatever output the caller has not taken yet.

use super::{
    put_varint, varint_len, Compression, FileStats, KeyHead, SnapshotHeader, DEFAULT_BLOCK_SIZE,
    END_PAYLOAD_LEN, FILE_HEADER_LEN, FLAG_CLIENT_FLAGS, FLAG_EXPIRE, FRAME_HEADER_LEN, MAGIC,
    MAX_BLOCK_LEN, PIECE_LEN, TAG_BLOCK, TAG_END, VERSION,
};
use bytes::{Bytes, BytesMut};

const ZSTD_LEVEL: i32 = 3;

/// Encodes one shard's snapshot. Feed it records, drain [`take_output`](Self::take_output)
/// whenever convenient (e.g. when [`pending_bytes`](Self::pending_bytes) passes a write size),
/// and call [`finish`](Self::finish) once.
///
/// # Panics
/// Streaming a value with [`begin_string`](Self::begin_string) or
/// [`begin_object`](Self::begin_object) is a promise to deliver exactly
/// `value_len` bytes through [`value_chunk`](Self::value_chunk) before the next record or
/// `finish`; breaking it is a bug in the caller and panics rather than writing a corrupt file.
/// So is a record started between [`begin_pieces`](Self::begin_pieces) and
/// [`end_pieces`](Self::end_pieces), or a piece outside them.
pub struct SnapshotEncoder {
    compression: Compression,
    block_size: usize,
    /// Raw record bytes of the block being filled.
    block: Vec<u8>,
    /// Framed bytes waiting for `take_output`.
    out: BytesMut,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    /// CRC32 of every byte emitted so far.
    file_crc: crc32fast::Hasher,
    stats: FileStats,
    /// Bytes of a streamed value still owed through `value_chunk`.
    value_left: u64,
    /// The large object whose pieces are being written, if any.
    pieces: Option<OpenPieces>,
}

/// What an object written in pieces has had so far (for its end record).
struct OpenPieces {
    len: u64,
    count: u32,
    crc: crc32fast::Hasher,
}

impl SnapshotEncoder {
    /// An encoder with 64 KiB blocks.
    pub fn new(header: SnapshotHeader) -> Self {
        Self::with_block_size(header, DEFAULT_BLOCK_SIZE)
    }

    /// An encoder with `block_size` raw bytes per block (clamped to 1..=16 MiB).
    pub fn with_block_size(header: SnapshotHeader, block_size: usize) -> Self {
        let block_size = block_size.clamp(1, MAX_BLOCK_LEN);
        let zstd = match header.compression {
            // Without a context we store blocks raw: still a valid file.
            Compression::Zstd => zstd::bulk::Compressor::new(ZSTD_LEVEL).ok(),
            _ => None,
        };
        let mut enc = SnapshotEncoder {
            compression: header.compression,
            block_size,
            block: Vec::with_capacity(block_size.min(DEFAULT_BLOCK_SIZE)),
            out: BytesMut::with_capacity(FILE_HEADER_LEN),
            zstd,
            file_crc: crc32fast::Hasher::new(),
            stats: FileStats::default(),
            value_left: 0,
            pieces: None,
        };
        enc.emit(&encode_file_header(&header));
        enc
    }

    /// Writes a whole string record.
    pub fn write_string(
        &mut self,
        db: u16,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
        client_flags: u32,
    ) {
        self.begin_string(db, key, value.len() as u64, expire_at_ms, client_flags);
        self.value_chunk(value);
    }

    /// Starts a string record whose value follows in [`value_chunk`](Self::value_chunk) calls
    /// totalling `value_len` bytes, so a large value never needs one buffer.
    pub fn begin_string(
        &mut self,
        db: u16,
        key: &[u8],
        value_len: u64,
        expire_at_ms: Option<u64>,
        client_flags: u32,
    ) {
        let head = KeyHead {
            db,
            key,
            expire_at_ms,
            client_flags,
        };
        self.begin_keyed(super::kind::STRING, &head, &[], value_len);
        self.stats.keys += 1;
    }

    /// Writes a whole object: a key of any data type, `value` being its RDB encoding for
    /// `rdb_type` (as [`rdb::codec`](crate::rdb::codec) writes it). One Object record, or a
    /// head, pieces and an end when the value is [`PIECE_LEN`] bytes or more.
    pub fn write_object(&mut self, head: &KeyHead<'_>, rdb_type: u8, value: &[u8]) {
        if value.len() < PIECE_LEN {
            self.begin_object(head, rdb_type, value.len() as u64);
            self.value_chunk(value);
            return;
        }
        self.begin_pieces(head, rdb_type);
        for piece in value.chunks(PIECE_LEN) {
            self.write_piece(piece);
        }
        self.end_pieces();
    }

    /// Starts a large object written in pieces ([`write_piece`](Self::write_piece), then
    /// [`end_pieces`](Self::end_pieces)): its value's length need not be known up front, so
    /// the caller can encode it a piece at a time.
    pub fn begin_pieces(&mut self, head: &KeyHead<'_>, rdb_type: u8) {
        self.begin_keyed(super::kind::OBJECT_HEAD, head, &[rdb_type], 0);
        self.stats.objects += 1;
        self.pieces = Some(OpenPieces {
            len: 0,
            count: 0,
            crc: crc32fast::Hasher::new(),
        });
    }

    /// Appends the next bytes of the value begun by [`begin_pieces`](Self::begin_pieces), as
    /// one or more Piece records of at most [`PIECE_LEN`] bytes.
    pub fn write_piece(&mut self, bytes: &[u8]) {
        let Some(p) = self.pieces.as_mut() else {
            panic!("snapshot write_piece without begin_pieces");
        };
        p.len += bytes.len() as u64;
        p.crc.update(bytes);
        let mut n = 0u32;
        for piece in bytes.chunks(PIECE_LEN) {
            let mut head = Vec::with_capacity(4);
            head.push(super::kind::PIECE);
            put_varint(&mut head, piece.len() as u64);
            self.push_raw(&head);
            self.push_raw(piece);
            self.stats.records += 1;
            n += 1;
        }
        if let Some(p) = self.pieces.as_mut() {
            p.count += n;
        }
    }

    /// Ends the object begun by [`begin_pieces`](Self::begin_pieces).
    pub fn end_pieces(&mut self) {
        let Some(p) = self.pieces.take() else {
            panic!("snapshot end_pieces without begin_pieces");
        };
        let mut rec = Vec::with_capacity(18);
        rec.push(super::kind::OBJECT_END);
        put_varint(&mut rec, 16);
        rec.extend_from_slice(&p.len.to_le_bytes());
        rec.extend_from_slice(&p.count.to_le_bytes());
        rec.extend_from_slice(&p.crc.finalize().to_le_bytes());
        self.push_raw(&rec);
        self.stats.records += 1;
    }

    /// Starts an Object record whose RDB-encoded value follows in
    /// [`value_chunk`](Self::value_chunk) calls totalling `value_len` bytes.
    pub fn begin_object(&mut self, head: &KeyHead<'_>, rdb_type: u8, value_len: u64) {
        self.begin_keyed(super::kind::OBJECT, head, &[rdb_type], value_len);
        self.stats.objects += 1;
    }

    /// Starts a record whose body is a key head, `after_key`, then a value of `value_len`
    /// bytes that [`value_chunk`](Self::value_chunk) delivers.
    fn begin_keyed(&mut self, kind: u8, head: &KeyHead<'_>, after_key: &[u8], value_len: u64) {
        self.assert_no_open_value();
        let mut flags = 0u8;
        let mut fixed = 0u64;
        if head.expire_at_ms.is_some() {
            flags |= FLAG_EXPIRE;
            fixed += 8;
        }
        if head.client_flags != 0 {
            flags |= FLAG_CLIENT_FLAGS;
            fixed += 4;
        }
        let key_len = head.key.len() as u64;
        let body_len = varint_len(u64::from(head.db)) as u64
            + 1
            + fixed
            + varint_len(key_len) as u64
            + key_len
            + after_key.len() as u64
            + value_len;
        let mut prefix = Vec::with_capacity(40);
        prefix.push(kind);
        put_varint(&mut prefix, body_len);
        put_varint(&mut prefix, u64::from(head.db));
        prefix.push(flags);
        if let Some(at) = head.expire_at_ms {
            prefix.extend_from_slice(&at.to_le_bytes());
        }
        if head.client_flags != 0 {
            prefix.extend_from_slice(&head.client_flags.to_le_bytes());
        }
        put_varint(&mut prefix, key_len);
        self.push_raw(&prefix);
        self.push_raw(head.key);
        self.push_raw(after_key);
        self.stats.records += 1;
        self.value_left = value_len;
    }

    /// Appends part of the value announced by [`begin_string`](Self::begin_string) or
    /// [`begin_object`](Self::begin_object).
    pub fn value_chunk(&mut self, chunk: &[u8]) {
        let len = chunk.len() as u64;
        assert!(
            len <= self.value_left,
            "snapshot value_chunk: {len} bytes given but only {} announced",
            self.value_left
        );
        self.value_left -= len;
        self.push_raw(chunk);
    }

    /// Records that `key` was deleted (for incremental snapshots).
    pub fn write_tombstone(&mut self, db: u16, key: &[u8]) {
        self.assert_no_open_value();
        let body_len = varint_len(u64::from(db)) as u64 + key.len() as u64;
        let mut head = Vec::with_capacity(24);
        head.push(super::kind::TOMBSTONE);
        put_varint(&mut head, body_len);
        put_varint(&mut head, u64::from(db));
        self.push_raw(&head);
        self.push_raw(key);
        self.stats.records += 1;
    }

    /// Records a function library (its code as FUNCTION LOAD got it).
    pub fn write_function(&mut self, code: &[u8]) {
        self.assert_no_open_value();
        let mut head = Vec::with_capacity(12);
        head.push(super::kind::FUNCTION);
        put_varint(&mut head, code.len() as u64);
        self.push_raw(&head);
        self.push_raw(code);
        self.stats.records += 1;
    }

    /// Writes a record of any kind with a prebuilt body (tests of unknown kinds and bad bodies).
    #[cfg(test)]
    pub(crate) fn write_raw_record(&mut self, kind: u8, body: &[u8]) {
        self.assert_no_open_value();
        let mut head = vec![kind];
        put_varint(&mut head, body.len() as u64);
        self.push_raw(&head);
        self.push_raw(body);
        self.stats.records += 1;
    }

    /// Encoded bytes waiting to be taken.
    pub fn pending_bytes(&self) -> usize {
        self.out.len()
    }

    /// The encoded bytes completed so far (the file header first); `None` when there are none.
    pub fn take_output(&mut self) -> Option<Bytes> {
        if self.out.is_empty() {
            None
        } else {
            Some(self.out.split().freeze())
        }
    }

    /// Seals the last block, appends the end frame and returns every byte not yet taken, with
    /// the file's totals.
    pub fn finish(mut self) -> (Bytes, FileStats) {
        self.assert_no_open_value();
        self.seal_block();
        let mut payload = [0u8; END_PAYLOAD_LEN];
        payload[0..8].copy_from_slice(&self.stats.records.to_le_bytes());
        payload[8..16].copy_from_slice(&self.stats.keys.to_le_bytes());
        payload[16..24].copy_from_slice(&self.stats.raw_bytes.to_le_bytes());
        let before_end = self.file_crc.clone().finalize();
        payload[24..28].copy_from_slice(&before_end.to_le_bytes());
        let header = encode_frame_header(TAG_END, 0, &payload, END_PAYLOAD_LEN);
        self.emit(&header);
        self.emit(&payload);
        let mut stats = self.stats;
        stats.crc32 = self.file_crc.finalize();
        (self.out.freeze(), stats)
    }

    fn assert_no_open_value(&self) {
        assert!(
            self.value_left == 0,
            "snapshot record started while {} bytes of the previous value are missing",
            self.value_left
        );
        assert!(
            self.pieces.is_none(),
            "snapshot record started inside an object written in pieces"
        );
    }

    fn emit(&mut self, data: &[u8]) {
        self.out.extend_from_slice(data);
        self.file_crc.update(data);
        self.stats.bytes += data.len() as u64;
    }

    fn push_raw(&mut self, mut data: &[u8]) {
        self.stats.raw_bytes += data.len() as u64;
        while !data.is_empty() {
            let room = self.block_size - self.block.len();
            let take = room.min(data.len());
            self.block.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.block.len() == self.block_size {
                self.seal_block();
            }
        }
    }

    fn seal_block(&mut self) {
        if self.block.is_empty() {
            return;
        }
        let compressed = match self.compression {
            Compression::None => None,
            Compression::Lz4 => Some(lz4_flex::block::compress(&self.block)),
            Compression::Zstd => self
                .zstd
                .as_mut()
                .and_then(|c| c.compress(&self.block).ok()),
        };
        let block = std::mem::take(&mut self.block);
        match compressed {
            Some(c) if c.len() < block.len() => {
                let header =
                    encode_frame_header(TAG_BLOCK, self.compression.as_u8(), &c, block.len());
                self.emit(&header);
                self.emit(&c);
            }
            _ => {
                let header = encode_frame_header(TAG_BLOCK, 0, &block, block.len());
                self.emit(&header);
                self.emit(&block);
            }
        }
        self.stats.blocks += 1;
        self.block = block;
        self.block.clear();
    }
}

pub(crate) fn encode_file_header(h: &SnapshotHeader) -> [u8; FILE_HEADER_LEN] {
    let mut b = [0u8; FILE_HEADER_LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..10].copy_from_slice(&VERSION.to_le_bytes());
    b[10] = h.compression.as_u8();
    b[12..16].copy_from_slice(&h.shard_index.to_le_bytes());
    b[16..20].copy_from_slice(&h.shard_count.to_le_bytes());
    b[20..28].copy_from_slice(&h.snapshot_id.to_le_bytes());
    b[28..36].copy_from_slice(&h.created_ms.to_le_bytes());
    let crc = crc32fast::hash(&b[0..36]);
    b[36..40].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Block lengths are at most `MAX_BLOCK_LEN`, so they fit the u32 fields.
pub(crate) fn encode_frame_header(
    tag: &[u8; 4],
    codec: u8,
    stored: &[u8],
    raw_len: usize,
) -> [u8; FRAME_HEADER_LEN] {
    let mut b = [0u8; FRAME_HEADER_LEN];
    b[0..4].copy_from_slice(tag);
    b[4] = codec;
    b[8..12].copy_from_slice(&(stored.len() as u32).to_le_bytes());
    b[12..16].copy_from_slice(&(raw_len as u32).to_le_bytes());
    b[16..20].copy_from_slice(&crc32fast::hash(stored).to_le_bytes());
    let crc = crc32fast::hash(&b[0..20]);
    b[20..24].copy_from_slice(&crc.to_le_bytes());
    b
}

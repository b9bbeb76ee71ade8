//! Turns snapshot bytes back into records without doing any I/O.
//!
//! The caller feeds raw file bytes in any chunk sizes; the decoder verifies each frame's
//! checksums before it looks inside, so damaged bytes produce an error, never wrong records.
//! It holds the unconsumed input, one decompressed block and one partly assembled record.
//! The first error is sticky: every later call returns it again.

use super::{
    get_varint, kind, Compression, FileStats, Item, ObjectRecord, Record, RecordValue,
    SnapshotHeader, END_PAYLOAD_LEN, FILE_HEADER_LEN, FLAG_CLIENT_FLAGS, FLAG_EXPIRE,
    FRAME_HEADER_LEN, MAGIC, MAX_BLOCK_LEN, MIN_VERSION, PIECE_LEN, TAG_BLOCK, TAG_END, VERSION,
};
use crate::error::FormatError;
use crate::rdb::codec::{skip_value, RdbCursor};
use bytes::{Buf, Bytes, BytesMut};

/// Where the decoder is inside the record stream.
enum RecordState {
    /// Between records, or inside a record's kind byte and length varint.
    Head { buf: [u8; 11], len: usize },
    /// Collecting the body of a record of a known kind.
    Body { kind: u8, left: u64, buf: BytesMut },
    /// Skipping the body of a record of an unknown kind.
    Skip { left: u64 },
}

impl RecordState {
    fn between_records() -> Self {
        RecordState::Head {
            buf: [0; 11],
            len: 0,
        }
    }
}

/// Decodes one snapshot file fed in chunks. See the [module docs](super) for the layout.
pub struct SnapshotDecoder {
    /// Fed bytes not yet consumed.
    input: BytesMut,
    /// File offset of `input[0]`.
    offset: u64,
    /// Total bytes fed.
    fed: u64,
    header: Option<SnapshotHeader>,
    /// CRC32 of every consumed byte.
    file_crc: crc32fast::Hasher,
    /// Decompressed block bytes not yet turned into records.
    block: Bytes,
    /// File offset of the frame `block` came from (errors inside records point there).
    frame_offset: u64,
    record: RecordState,
    records: u64,
    keys: u64,
    objects: u64,
    raw_bytes: u64,
    blocks: u64,
    skipped_unknown: u64,
    end: Option<FileStats>,
    end_reported: bool,
    failed: Option<FormatError>,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    /// The file's format version (kinds 9..=11 exist from 2 on).
    version: u16,
    /// A large object whose pieces are being joined: its head (value empty so far), the
    /// value's bytes, pieces seen, their CRC32.
    joining: Option<Joining>,
    /// Hand a large object out as its head, pieces and end instead of joining it.
    stream_pieces: bool,
}

struct Joining {
    head: ObjectRecord,
    /// The value so far; stays empty when pieces are streamed.
    value: BytesMut,
    len: u64,
    pieces: u32,
    crc: crc32fast::Hasher,
}

impl Default for SnapshotDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapshotDecoder {
    pub fn new() -> Self {
        SnapshotDecoder {
            input: BytesMut::new(),
            offset: 0,
            fed: 0,
            header: None,
            file_crc: crc32fast::Hasher::new(),
            block: Bytes::new(),
            frame_offset: 0,
            record: RecordState::between_records(),
            records: 0,
            keys: 0,
            objects: 0,
            raw_bytes: 0,
            blocks: 0,
            skipped_unknown: 0,
            end: None,
            end_reported: false,
            failed: None,
            zstd: None,
            version: VERSION,
            joining: None,
            stream_pieces: false,
        }
    }

    /// With `on`, a large object (kinds 9..=11) comes out as [`Item::ObjectHead`], its
    /// [`Item::Piece`]s and [`Item::ObjectEnd`] rather than one joined [`Item::Object`], so
    /// the caller never holds its whole value. The end still checks length, piece count and
    /// CRC32, but not the value's RDB layout: the caller parses it as it comes.
    pub fn stream_pieces(&mut self, on: bool) {
        self.stream_pieces = on;
    }

    /// Appends more raw file bytes. Feeding about one block at a time keeps memory small.
    pub fn feed(&mut self, data: &[u8]) {
        self.input.extend_from_slice(data);
        self.fed += data.len() as u64;
    }

    /// The file header, once enough bytes were fed and [`next`](Self::next) or
    /// [`poll_header`](Self::poll_header) parsed it.
    pub fn header(&self) -> Option<&SnapshotHeader> {
        self.header.as_ref()
    }

    /// Parses the file header if enough bytes are there, without touching any record:
    /// `Ok(None)` means feed more.
    pub fn poll_header(&mut self) -> Result<Option<&SnapshotHeader>, FormatError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.header.is_none() {
            if let Err(e) = self.parse_header() {
                self.failed = Some(e.clone());
                return Err(e);
            }
        }
        Ok(self.header.as_ref())
    }

    /// The next record, or the end of the file once the end frame checked out.
    /// `Ok(None)` means more bytes are needed (or, after `End`, that there is nothing more).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Item>, FormatError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let res = self.next_inner();
        if let Err(e) = &res {
            self.failed = Some(e.clone());
        }
        res
    }

    /// Call at end of input, after [`next`](Self::next) returned `Ok(None)`: an error unless
    /// the end frame was read and nothing follows it.
    pub fn finish(&self) -> Result<(), FormatError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.end.is_some() {
            if !self.input.is_empty() {
                return Err(FormatError::corrupt(
                    self.offset,
                    "snapshot: bytes after the end frame",
                ));
            }
            return Ok(());
        }
        let what = if self.header.is_none() {
            "snapshot (no complete file header)".to_string()
        } else {
            format!(
                "snapshot (no end frame; the last complete frame ends at offset {}): data ends",
                self.offset
            )
        };
        Err(FormatError::truncated(self.fed, what))
    }

    /// File offset consumed so far: the end of the last complete frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Records of kinds this code does not know, skipped.
    pub fn skipped_unknown(&self) -> u64 {
        self.skipped_unknown
    }

    fn next_inner(&mut self) -> Result<Option<Item>, FormatError> {
        if self.header.is_none() {
            self.parse_header()?;
            if self.header.is_none() {
                return Ok(None);
            }
        }
        loop {
            if let Some(stats) = self.end {
                if !self.input.is_empty() {
                    return Err(FormatError::corrupt(
                        self.offset,
                        "snapshot: bytes after the end frame",
                    ));
                }
                if !self.end_reported {
                    self.end_reported = true;
                    return Ok(Some(Item::End(stats)));
                }
                return Ok(None);
            }
            if !self.block.is_empty() {
                if let Some(item) = self.parse_records()? {
                    return Ok(Some(item));
                }
                continue;
            }
            if !self.read_frame()? {
                return Ok(None);
            }
        }
    }

    fn parse_header(&mut self) -> Result<(), FormatError> {
        let have = self.input.len().min(MAGIC.len());
        if self.input[..have] != MAGIC[..have] {
            return Err(FormatError::bad_magic(0, "(not a Strata snapshot file)"));
        }
        if self.input.len() < FILE_HEADER_LEN {
            return Ok(());
        }
        let b = &self.input[..FILE_HEADER_LEN];
        let version = u16::from_le_bytes([b[8], b[9]]);
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(FormatError::unsupported_version(
                8,
                format!(
                    "(snapshot version {version}, this build reads {MIN_VERSION} to {VERSION})"
                ),
            ));
        }
        self.version = version;
        let stored_crc = le_u32(&b[36..40]);
        if crc32fast::hash(&b[..36]) != stored_crc {
            return Err(FormatError::checksum(0, "in snapshot file header"));
        }
        let compression = Compression::from_u8(b[10]).ok_or_else(|| {
            FormatError::corrupt(
                10,
                format!("snapshot header: unknown compression {}", b[10]),
            )
        })?;
        if b[11] != 0 {
            return Err(FormatError::corrupt(
                11,
                "snapshot header: reserved byte set",
            ));
        }
        let header = SnapshotHeader {
            shard_index: le_u32(&b[12..16]),
            shard_count: le_u32(&b[16..20]),
            snapshot_id: le_u64(&b[20..28]),
            created_ms: le_u64(&b[28..36]),
            compression,
        };
        self.file_crc.update(b);
        self.input.advance(FILE_HEADER_LEN);
        self.offset += FILE_HEADER_LEN as u64;
        self.header = Some(header);
        Ok(())
    }

    /// Consumes one whole frame if it has arrived: `Ok(false)` means feed more.
    fn read_frame(&mut self) -> Result<bool, FormatError> {
        if self.input.len() < FRAME_HEADER_LEN {
            return Ok(false);
        }
        let at = self.offset;
        let h = &self.input[..FRAME_HEADER_LEN];
        if crc32fast::hash(&h[..20]) != le_u32(&h[20..24]) {
            return Err(FormatError::checksum(at, "in block header"));
        }
        let tag: [u8; 4] = [h[0], h[1], h[2], h[3]];
        let codec = h[4];
        let stored_len = le_u32(&h[8..12]) as usize;
        let raw_len = le_u32(&h[12..16]) as usize;
        let payload_crc = le_u32(&h[16..20]);
        if h[5..8] != [0, 0, 0] {
            return Err(FormatError::corrupt(at, "block header: reserved bytes set"));
        }
        if &tag != TAG_BLOCK && &tag != TAG_END {
            return Err(FormatError::corrupt(
                at,
                format!(
                    "block header: unknown tag {:?}",
                    String::from_utf8_lossy(&tag)
                ),
            ));
        }
        if stored_len > MAX_BLOCK_LEN || raw_len > MAX_BLOCK_LEN {
            return Err(FormatError::corrupt(
                at,
                format!("block header: block of {stored_len}/{raw_len} bytes is too large"),
            ));
        }
        let frame_len = FRAME_HEADER_LEN + stored_len;
        if self.input.len() < frame_len {
            return Ok(false);
        }
        let payload = &self.input[FRAME_HEADER_LEN..frame_len];
        if crc32fast::hash(payload) != payload_crc {
            return Err(FormatError::checksum(at, "in block"));
        }
        if &tag == TAG_END {
            return self.read_end(at, codec, stored_len, raw_len).map(|()| true);
        }
        let raw = self.decompress(at, codec, raw_len)?;
        self.file_crc.update(&self.input[..frame_len]);
        self.input.advance(frame_len);
        self.offset += frame_len as u64;
        self.frame_offset = at;
        self.blocks += 1;
        self.raw_bytes += raw.len() as u64;
        self.block = raw;
        Ok(true)
    }

    /// Decompresses the payload of the frame at the front of `input`.
    fn decompress(&mut self, at: u64, codec: u8, raw_len: usize) -> Result<Bytes, FormatError> {
        let stored_len = le_u32(&self.input[8..12]) as usize;
        let payload = &self.input[FRAME_HEADER_LEN..FRAME_HEADER_LEN + stored_len];
        let raw = match Compression::from_u8(codec) {
            Some(Compression::None) => {
                if stored_len != raw_len {
                    return Err(FormatError::corrupt(
                        at,
                        "block header: raw block with differing lengths",
                    ));
                }
                return Ok(Bytes::copy_from_slice(payload));
            }
            Some(Compression::Lz4) => {
                lz4_flex::block::decompress(payload, raw_len).map_err(|e| {
                    FormatError::corrupt(at, format!("lz4 block does not decode ({e})"))
                })?
            }
            Some(Compression::Zstd) => {
                if self.zstd.is_none() {
                    let d = zstd::bulk::Decompressor::new().map_err(|e| FormatError::io(at, &e))?;
                    self.zstd = Some(d);
                }
                let Some(d) = self.zstd.as_mut() else {
                    return Err(FormatError::corrupt(at, "zstd context missing"));
                };
                d.decompress(payload, raw_len).map_err(|e| {
                    FormatError::corrupt(at, format!("zstd block does not decode ({e})"))
                })?
            }
            None => {
                return Err(FormatError::corrupt(
                    at,
                    format!("block header: unknown codec {codec}"),
                ))
            }
        };
        if raw.len() != raw_len {
            return Err(FormatError::corrupt(
                at,
                format!(
                    "block decompressed to {} bytes, header says {raw_len}",
                    raw.len()
                ),
            ));
        }
        Ok(Bytes::from(raw))
    }

    fn read_end(
        &mut self,
        at: u64,
        codec: u8,
        stored_len: usize,
        raw_len: usize,
    ) -> Result<(), FormatError> {
        if codec != 0 || stored_len != END_PAYLOAD_LEN || raw_len != END_PAYLOAD_LEN {
            return Err(FormatError::corrupt(at, "end frame: bad header"));
        }
        let p = &self.input[FRAME_HEADER_LEN..FRAME_HEADER_LEN + END_PAYLOAD_LEN];
        let records = le_u64(&p[0..8]);
        let keys = le_u64(&p[8..16]);
        let raw_bytes = le_u64(&p[16..24]);
        let stored_file_crc = le_u32(&p[24..28]);
        if self.file_crc.clone().finalize() != stored_file_crc {
            return Err(FormatError::checksum(
                at,
                "over the file contents (recorded in the end frame)",
            ));
        }
        if !matches!(self.record, RecordState::Head { len: 0, .. }) {
            return Err(FormatError::corrupt(at, "end frame: last record cut off"));
        }
        if let Some(j) = &self.joining {
            return Err(FormatError::corrupt(
                at,
                format!(
                    "end frame: the object {:?} has {} of its pieces and no end (cut off)",
                    String::from_utf8_lossy(&j.head.key),
                    j.pieces
                ),
            ));
        }
        if records != self.records || keys != self.keys || raw_bytes != self.raw_bytes {
            return Err(FormatError::corrupt(
                at,
                format!(
                    "end frame: says {records} records/{keys} keys/{raw_bytes} bytes, \
                     file has {}/{}/{}",
                    self.records, self.keys, self.raw_bytes
                ),
            ));
        }
        let frame_len = FRAME_HEADER_LEN + END_PAYLOAD_LEN;
        self.file_crc.update(&self.input[..frame_len]);
        self.input.advance(frame_len);
        self.offset += frame_len as u64;
        self.end = Some(FileStats {
            records,
            keys,
            objects: self.objects,
            raw_bytes,
            blocks: self.blocks,
            bytes: self.offset,
            crc32: self.file_crc.clone().finalize(),
        });
        Ok(())
    }

    /// Advances through `block`; returns a record once one is complete.
    fn parse_records(&mut self) -> Result<Option<Item>, FormatError> {
        while !self.block.is_empty() {
            match &mut self.record {
                RecordState::Head { buf, len } => {
                    let b = self.block.get_u8();
                    buf[*len] = b;
                    *len += 1;
                    if *len == 1 {
                        if b == 0 {
                            return Err(FormatError::corrupt(self.frame_offset, "record kind 0"));
                        }
                        continue;
                    }
                    let body_len = match get_varint(&buf[1..*len]) {
                        Ok(Some((v, _))) => v,
                        Ok(None) => continue,
                        Err(()) => {
                            return Err(FormatError::corrupt(
                                self.frame_offset,
                                "record length varint too long",
                            ))
                        }
                    };
                    let kind = buf[0];
                    let pieced = self.version >= 2
                        && matches!(kind, kind::OBJECT_HEAD | kind::PIECE | kind::OBJECT_END);
                    if pieced && kind == kind::PIECE && body_len > PIECE_LEN as u64 {
                        return Err(FormatError::corrupt(
                            self.frame_offset,
                            format!("piece of {body_len} bytes (at most {PIECE_LEN})"),
                        ));
                    }
                    if pieced
                        || matches!(
                            kind,
                            kind::STRING | kind::TOMBSTONE | kind::OBJECT | kind::FUNCTION
                        )
                    {
                        self.record = RecordState::Body {
                            kind,
                            left: body_len,
                            buf: BytesMut::new(),
                        };
                        if body_len == 0 {
                            if let Some(item) = self.complete_record(kind, Bytes::new())? {
                                return Ok(Some(item));
                            }
                        }
                    } else {
                        self.record = RecordState::Skip { left: body_len };
                        if body_len == 0 {
                            self.skip_done();
                        }
                    }
                }
                RecordState::Body { kind, left, buf } => {
                    let n = (*left).min(self.block.len() as u64) as usize;
                    let kind = *kind;
                    if buf.is_empty() && n as u64 == *left {
                        // The whole body is inside this block. Copy it anyway: a slice
                        // would pin the whole block for as long as the caller keeps the value.
                        if kind == kind::PIECE {
                            // Straight into the joined value, no copy of its own.
                            let piece = self.block.split_to(n);
                            if let Some(item) = self.complete_piece(piece)? {
                                return Ok(Some(item));
                            }
                            continue;
                        }
                        let body = Bytes::copy_from_slice(&self.block[..n]);
                        self.block.advance(n);
                        if let Some(item) = self.complete_record(kind, body)? {
                            return Ok(Some(item));
                        }
                        continue;
                    }
                    if buf.is_empty() {
                        buf.reserve((*left).min(1 << 20) as usize);
                    }
                    buf.extend_from_slice(&self.block[..n]);
                    self.block.advance(n);
                    *left -= n as u64;
                    if *left == 0 {
                        let body = buf.split().freeze();
                        if let Some(item) = self.complete_record(kind, body)? {
                            return Ok(Some(item));
                        }
                    }
                }
                RecordState::Skip { left } => {
                    let n = (*left).min(self.block.len() as u64) as usize;
                    self.block.advance(n);
                    *left -= n as u64;
                    if *left == 0 {
                        self.skip_done();
                    }
                }
            }
        }
        Ok(None)
    }

    fn skip_done(&mut self) {
        self.records += 1;
        self.skipped_unknown += 1;
        self.record = RecordState::between_records();
    }

    /// A piece's bytes, appended to the object being joined.
    fn complete_piece(&mut self, piece: Bytes) -> Result<Option<Item>, FormatError> {
        self.record = RecordState::between_records();
        self.records += 1;
        let Some(j) = self.joining.as_mut() else {
            return Err(FormatError::corrupt(
                self.frame_offset,
                "record in block: a piece without its object's head",
            ));
        };
        j.crc.update(&piece);
        j.pieces += 1;
        j.len += piece.len() as u64;
        if self.stream_pieces {
            return Ok(Some(Item::Piece(piece)));
        }
        j.value.extend_from_slice(&piece);
        Ok(None)
    }

    /// A whole record: the item it makes, if any (the parts of a large object make one item,
    /// at its end).
    fn complete_record(&mut self, kind: u8, body: Bytes) -> Result<Option<Item>, FormatError> {
        if kind == kind::PIECE {
            return self.complete_piece(body);
        }
        self.record = RecordState::between_records();
        self.records += 1;
        let at = self.frame_offset;
        if let Some(j) = &self.joining {
            if kind != kind::OBJECT_END {
                return Err(FormatError::corrupt(
                    at,
                    format!(
                        "record in block: the object {:?} is cut off after {} piece(s) \
                         (a record of kind {kind} follows them, not its end)",
                        String::from_utf8_lossy(&j.head.key),
                        j.pieces
                    ),
                ));
            }
        }
        if kind == kind::OBJECT_END {
            return self.end_object(&body).map(Some);
        }
        let item = parse_body(kind, body).map_err(|what| {
            FormatError::corrupt(self.frame_offset, format!("record in block: {what}"))
        })?;
        if kind == kind::OBJECT_HEAD {
            if let Item::Object(head) = item {
                let streamed = self.stream_pieces.then(|| head.clone());
                self.joining = Some(Joining {
                    head,
                    value: BytesMut::new(),
                    len: 0,
                    pieces: 0,
                    crc: crc32fast::Hasher::new(),
                });
                return Ok(streamed.map(Item::ObjectHead));
            }
            return Ok(None);
        }
        match &item {
            Item::Record(Record {
                value: RecordValue::String(_),
                ..
            }) => self.keys += 1,
            Item::Object(_) => self.objects += 1,
            _ => {}
        }
        Ok(Some(item))
    }

    /// An object's end: its pieces must be all there, then its value is checked as any
    /// Object record's.
    fn end_object(&mut self, body: &[u8]) -> Result<Item, FormatError> {
        let at = self.frame_offset;
        let Some(j) = self.joining.take() else {
            return Err(FormatError::corrupt(
                at,
                "record in block: an object's end without its head",
            ));
        };
        let name = String::from_utf8_lossy(&j.head.key).into_owned();
        if body.len() != 16 {
            return Err(FormatError::corrupt(
                at,
                format!(
                    "record in block: the end of object {name:?} is {} bytes, not 16",
                    body.len()
                ),
            ));
        }
        let (len, pieces, crc) = (
            le_u64(&body[0..8]),
            le_u32(&body[8..12]),
            le_u32(&body[12..16]),
        );
        let have = j.len;
        if len != have || pieces != j.pieces {
            return Err(FormatError::corrupt(
                at,
                format!(
                    "record in block: object {name:?} has {} piece(s) of {have} bytes, its end \
                     says {pieces} of {len} (pieces missing or extra)",
                    j.pieces
                ),
            ));
        }
        if j.crc.finalize() != crc {
            return Err(FormatError::checksum(
                at,
                format!("over the pieces of object {name:?}"),
            ));
        }
        if self.stream_pieces {
            self.objects += 1;
            return Ok(Item::ObjectEnd);
        }
        let mut object = j.head;
        object.value = j.value.freeze();
        check_rdb_value(object.rdb_type, &object.value).map_err(|what| {
            FormatError::corrupt(at, format!("object {name:?} in pieces: {what}"))
        })?;
        self.objects += 1;
        Ok(Item::Object(object))
    }
}

/// Parses a record body of a known kind; the error says what is wrong.
fn parse_body(kind: u8, body: Bytes) -> Result<Item, String> {
    if kind == kind::FUNCTION {
        return Ok(Item::Function(body));
    }
    let mut pos = 0usize;
    let db = take_varint(&body, &mut pos)?;
    let db = u16::try_from(db).map_err(|_| "db number out of range")?;
    if kind == kind::TOMBSTONE {
        return Ok(Item::Record(Record {
            db,
            key: body.slice(pos..),
            expire_at_ms: None,
            client_flags: 0,
            value: RecordValue::Tombstone,
        }));
    }
    let what = match kind {
        kind::OBJECT => "object",
        kind::OBJECT_HEAD => "object head",
        _ => "string",
    };
    let too_short = || format!("{what} record too short");
    let flags = *body.get(pos).ok_or_else(too_short)?;
    pos += 1;
    if flags & !(FLAG_EXPIRE | FLAG_CLIENT_FLAGS) != 0 {
        return Err(format!("unknown {what} record flags"));
    }
    let expire_at_ms = if flags & FLAG_EXPIRE != 0 {
        let b = body.get(pos..pos + 8).ok_or_else(too_short)?;
        pos += 8;
        Some(le_u64(b))
    } else {
        None
    };
    let client_flags = if flags & FLAG_CLIENT_FLAGS != 0 {
        let b = body.get(pos..pos + 4).ok_or_else(too_short)?;
        pos += 4;
        le_u32(b)
    } else {
        0
    };
    let key_len = take_varint(&body, &mut pos)?;
    let key_end = usize::try_from(key_len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .filter(|&end| end <= body.len())
        .ok_or("key longer than the record")?;
    let key = body.slice(pos..key_end);
    if kind == kind::STRING {
        return Ok(Item::Record(Record {
            db,
            key,
            expire_at_ms,
            client_flags,
            value: RecordValue::String(body.slice(key_end..)),
        }));
    }
    let rdb_type = *body
        .get(key_end)
        .ok_or("object record without its RDB type")?;
    let value = body.slice(key_end + 1..);
    if kind == kind::OBJECT_HEAD {
        if !value.is_empty() {
            return Err("object head with bytes after its RDB type".into());
        }
    } else {
        check_rdb_value(rdb_type, &value)?;
    }
    Ok(Item::Object(ObjectRecord {
        db,
        key,
        expire_at_ms,
        client_flags,
        rdb_type,
        value,
    }))
}

/// Walks an Object record's value as its RDB type says: it must span the value exactly.
fn check_rdb_value(rdb_type: u8, value: &[u8]) -> Result<(), String> {
    let mut cursor = RdbCursor::new(value);
    skip_value(&mut cursor, rdb_type)
        .and_then(|()| cursor.finish())
        .map_err(|e| {
            format!(
                "object of RDB type {rdb_type}: {} {} at byte {} of its value",
                e.kind, e.detail, e.offset
            )
        })
}

fn take_varint(body: &[u8], pos: &mut usize) -> Result<u64, &'static str> {
    match get_varint(&body[*pos..]) {
        Ok(Some((v, used))) => {
            *pos += used;
            Ok(v)
        }
        Ok(None) => Err("record too short"),
        Err(()) => Err("varint too long"),
    }
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

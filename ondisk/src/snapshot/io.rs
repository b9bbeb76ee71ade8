//! `std::io` wrappers around the snapshot codecs, for the offline tools and tests.
//!
//! The server does not use these: it drives the codecs with its own async files.

use super::{
    FileStats, Item, KeyHead, Record, SnapshotDecoder, SnapshotEncoder, SnapshotHeader,
    DEFAULT_BLOCK_SIZE,
};
use crate::error::FormatError;
use std::io::{self, Read, Write};

/// Writes a snapshot to any `Write`. Output goes out a block at a time; wrap files in a
/// `BufWriter` only if blocks are tiny.
pub struct SnapshotWriter<W: Write> {
    inner: W,
    enc: SnapshotEncoder,
}

impl<W: Write> SnapshotWriter<W> {
    pub fn new(inner: W, header: SnapshotHeader) -> Self {
        SnapshotWriter {
            inner,
            enc: SnapshotEncoder::new(header),
        }
    }

    pub fn with_block_size(inner: W, header: SnapshotHeader, block_size: usize) -> Self {
        SnapshotWriter {
            inner,
            enc: SnapshotEncoder::with_block_size(header, block_size),
        }
    }

    pub fn write_string(
        &mut self,
        db: u16,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
        client_flags: u32,
    ) -> io::Result<()> {
        self.enc
            .write_string(db, key, value, expire_at_ms, client_flags);
        self.drain()
    }

    /// See [`SnapshotEncoder::begin_string`].
    pub fn begin_string(
        &mut self,
        db: u16,
        key: &[u8],
        value_len: u64,
        expire_at_ms: Option<u64>,
        client_flags: u32,
    ) -> io::Result<()> {
        self.enc
            .begin_string(db, key, value_len, expire_at_ms, client_flags);
        self.drain()
    }

    /// See [`SnapshotEncoder::write_object`].
    pub fn write_object(
        &mut self,
        head: &KeyHead<'_>,
        rdb_type: u8,
        value: &[u8],
    ) -> io::Result<()> {
        self.enc.write_object(head, rdb_type, value);
        self.drain()
    }

    /// See [`SnapshotEncoder::begin_pieces`].
    pub fn begin_pieces(&mut self, head: &KeyHead<'_>, rdb_type: u8) -> io::Result<()> {
        self.enc.begin_pieces(head, rdb_type);
        self.drain()
    }

    /// See [`SnapshotEncoder::write_piece`].
    pub fn write_piece(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.enc.write_piece(bytes);
        self.drain()
    }

    /// See [`SnapshotEncoder::end_pieces`].
    pub fn end_pieces(&mut self) -> io::Result<()> {
        self.enc.end_pieces();
        self.drain()
    }

    /// See [`SnapshotEncoder::begin_object`].
    pub fn begin_object(
        &mut self,
        head: &KeyHead<'_>,
        rdb_type: u8,
        value_len: u64,
    ) -> io::Result<()> {
        self.enc.begin_object(head, rdb_type, value_len);
        self.drain()
    }

    pub fn value_chunk(&mut self, chunk: &[u8]) -> io::Result<()> {
        self.enc.value_chunk(chunk);
        self.drain()
    }

    pub fn write_tombstone(&mut self, db: u16, key: &[u8]) -> io::Result<()> {
        self.enc.write_tombstone(db, key);
        self.drain()
    }

    /// Records a function library's code.
    pub fn write_function(&mut self, code: &[u8]) -> io::Result<()> {
        self.enc.write_function(code);
        self.drain()
    }

    /// Writes the rest and flushes. Does not fsync: the caller owns durability.
    pub fn finish(self) -> io::Result<FileStats> {
        self.finish_into_inner().map(|(_, stats)| stats)
    }

    /// Like [`finish`](Self::finish), and hands the writer back (e.g. to fsync the file).
    pub fn finish_into_inner(mut self) -> io::Result<(W, FileStats)> {
        self.drain()?;
        let (tail, stats) = self.enc.finish();
        self.inner.write_all(&tail)?;
        self.inner.flush()?;
        Ok((self.inner, stats))
    }

    fn drain(&mut self) -> io::Result<()> {
        while let Some(chunk) = self.enc.take_output() {
            self.inner.write_all(&chunk)?;
        }
        Ok(())
    }
}

/// Reads a snapshot from any `Read`, a block-sized chunk at a time.
pub struct SnapshotReader<R: Read> {
    inner: R,
    dec: SnapshotDecoder,
    header: SnapshotHeader,
    buf: Vec<u8>,
    eof: bool,
    stats: Option<FileStats>,
    /// Object records that `next_record` passed over.
    objects_passed: u64,
}

impl<R: Read> SnapshotReader<R> {
    /// Reads and checks the file header.
    pub fn new(mut inner: R) -> Result<Self, FormatError> {
        let mut dec = SnapshotDecoder::new();
        let mut buf = vec![0u8; DEFAULT_BLOCK_SIZE];
        let mut eof = false;
        let header = loop {
            if let Some(h) = dec.poll_header()? {
                break h.clone();
            }
            if eof {
                dec.finish()?;
                return Err(FormatError::truncated(dec.offset(), "snapshot header"));
            }
            eof = fill(&mut inner, &mut dec, &mut buf)?;
        };
        Ok(SnapshotReader {
            inner,
            dec,
            header,
            buf,
            eof,
            stats: None,
            objects_passed: 0,
        })
    }

    pub fn header(&self) -> &SnapshotHeader {
        &self.header
    }

    /// See [`SnapshotDecoder::stream_pieces`].
    pub fn stream_pieces(&mut self, on: bool) {
        self.dec.stream_pieces(on);
    }

    /// The next String or Tombstone record; `Ok(None)` once the end frame was read and checked
    /// and the input ended right after it. A file that ends early is a `Truncated` error.
    ///
    /// Object records are passed over and counted in
    /// [`skipped_unknown`](Self::skipped_unknown), as records this caller cannot take: read
    /// them with [`next_item`](Self::next_item).
    pub fn next_record(&mut self) -> Result<Option<Record>, FormatError> {
        loop {
            match self.next_item()? {
                Some(Item::Record(r)) => return Ok(Some(r)),
                Some(Item::Piece(_) | Item::ObjectEnd) => {}
                Some(_) => self.objects_passed += 1,
                None => return Ok(None),
            }
        }
    }

    /// The next record of any known kind: `Item::Record` or `Item::Object`, never `Item::End`
    /// (the end frame is checked and its totals kept for [`stats`](Self::stats)). `Ok(None)`
    /// as for [`next_record`](Self::next_record).
    pub fn next_item(&mut self) -> Result<Option<Item>, FormatError> {
        loop {
            match self.dec.next()? {
                Some(Item::End(stats)) => self.stats = Some(stats),
                Some(item) => return Ok(Some(item)),
                None if self.eof => {
                    self.dec.finish()?;
                    return Ok(None);
                }
                None => self.eof = fill(&mut self.inner, &mut self.dec, &mut self.buf)?,
            }
        }
    }

    /// The file's verified totals, once [`next_record`](Self::next_record) returned `Ok(None)`.
    pub fn stats(&self) -> Option<&FileStats> {
        self.stats.as_ref()
    }

    /// Records skipped so far: of kinds this build does not know, and Object records that
    /// [`next_record`](Self::next_record) passed over.
    pub fn skipped_unknown(&self) -> u64 {
        self.dec.skipped_unknown() + self.objects_passed
    }
}

/// Reads one chunk into the decoder; `true` at end of input.
fn fill<R: Read>(
    r: &mut R,
    dec: &mut SnapshotDecoder,
    buf: &mut [u8],
) -> Result<bool, FormatError> {
    loop {
        match r.read(buf) {
            Ok(0) => return Ok(true),
            Ok(n) => {
                dec.feed(&buf[..n]);
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FormatError::io(dec.offset(), &e)),
        }
    }
}

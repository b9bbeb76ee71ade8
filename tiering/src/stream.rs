//! One large raw extent written or read a part at a time: [`ExtentWriter`] and
//! [`ExtentReader`]. A caller that produces or consumes a many-MiB value in steps (the server's
//! offload of a large collection, its read-back) holds one step's bytes at a time instead of
//! the whole value, and can serve others between steps.
//!
//! The extent is the one [`crate::page::build_extent`] lays out (raw values only), so
//! [`TierStore::read`] and compaction read it like any other. Never: hands out pages a write
//! still owns, or bytes of a value whose CRC has not been checked as final (a reader's caller
//! must not use what it built until the reader said the end checked).

use crate::alloc::PAGE;
use crate::error::TierError;
use crate::page::{self, Corrupt, EXTENT_HEADER};
use crate::pointer::{DiskPtr, MAX_VALUE};
use crate::store::TierStore;

/// Bytes gathered before a writer writes them out, and read per step by a reader.
const STEP: usize = 1 << 20;

/// A raw extent being written a part at a time: pages for at most the length it was opened
/// with are taken at once; the value's start (with the header, whose length and CRC are
/// known only at the end) is written last, by [`ExtentWriter::finish`], which gives back the
/// pages the value did not need. Dropped unfinished, it gives all of them back.
pub struct ExtentWriter<'a> {
    store: &'a TierStore,
    key_len: usize,
    start: u64,
    pages: u64,
    /// The extent's first pages: header (filled in at the end), key, the value's start.
    head: Vec<u8>,
    head_cap: usize,
    /// Value bytes past the head not yet written, from page `next` of the extent.
    buf: Vec<u8>,
    next: u64,
    /// CRC32 of key and value so far (the header's is combined in at the end).
    crc: crc32fast::Hasher,
    len: usize,
    open: bool,
}

impl TierStore {
    /// An extent for `key` whose value will be at most `max_len` bytes; `NoSpace` when the file
    /// has no free run of pages that long.
    pub fn extent_writer(&self, key: &[u8], max_len: usize) -> Result<ExtentWriter<'_>, TierError> {
        if key.len() > u16::MAX as usize || max_len >= MAX_VALUE {
            return Err(TierError::Io("key or value too large for the tier".into()));
        }
        let pages = page::extent_pages(key.len(), max_len);
        // No room for the bound is not a full file: smaller values may still fit.
        let Some(start) = self.space.take_pages(pages, false) else {
            return Err(TierError::NoSpace);
        };
        let head_cap = (page::extent_pages(key.len(), 0) * PAGE) as usize;
        let mut head = Vec::with_capacity(head_cap);
        head.resize(EXTENT_HEADER, 0);
        head.extend_from_slice(key);
        let mut crc = crc32fast::Hasher::new();
        crc.update(key);
        Ok(ExtentWriter {
            store: self,
            key_len: key.len(),
            start,
            pages,
            head,
            head_cap,
            buf: Vec::new(),
            next: head_cap as u64 / PAGE,
            crc,
            len: 0,
            open: true,
        })
    }

    /// The value of `key` in the raw extent at `ptr`, a step at a time; None for a small or
    /// compressed value (read those whole, with [`TierStore::read`]).
    pub fn extent_reader(&self, ptr: DiskPtr, key: &[u8]) -> Option<ExtentReader<'_>> {
        if ptr.small() || ptr.compressed() {
            return None;
        }
        // Frees of the extent wait for the reader (an extent is freed by its first page).
        self.space.start_reading(ptr.page, 1);
        Some(ExtentReader {
            store: self,
            ptr,
            key: key.to_vec(),
            next: 0,
            pages: ptr.pages(),
            crc: crc32fast::Hasher::new(),
            stored_crc: 0,
            left: ptr.len as usize,
            started: false,
            done: false,
        })
    }
}

impl ExtentWriter<'_> {
    /// The value's next bytes. `NoSpace` when they pass the length the writer was opened with
    /// (nothing of them kept: the caller drops the writer).
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), TierError> {
        if (page::extent_pages(self.key_len, self.len + bytes.len())) > self.pages {
            return Err(TierError::NoSpace);
        }
        self.crc.update(bytes);
        self.len += bytes.len();
        let into_head = (self.head_cap - self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        self.buf.extend_from_slice(&bytes[into_head..]);
        if self.buf.len() >= STEP {
            self.flush(false).await?;
        }
        Ok(())
    }

    /// Writes the whole pages gathered (the last partial one too, zero-filled, when `last`).
    async fn flush(&mut self, last: bool) -> Result<(), TierError> {
        if last {
            let whole = self.buf.len().next_multiple_of(PAGE as usize);
            self.buf.resize(whole, 0);
        }
        let n = self.buf.len() / PAGE as usize * PAGE as usize;
        if n == 0 {
            return Ok(());
        }
        self.store
            .write_at(&self.buf[..n], (self.start + self.next) * PAGE)
            .await?;
        self.next += n as u64 / PAGE;
        self.buf.drain(..n);
        Ok(())
    }

    /// Writes the rest and the header; the pointer to the value. Pages past what it needed go
    /// back.
    pub async fn finish(mut self) -> Result<DiskPtr, TierError> {
        self.flush(true).await?;
        let header = page::raw_extent_header(self.key_len, self.len as u32);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header[..8]);
        crc.update(&header[12..]);
        crc.combine(&self.crc);
        self.head[..EXTENT_HEADER].copy_from_slice(&header);
        self.head[8..12].copy_from_slice(&crc.finalize().to_le_bytes());
        let whole = self.head.len().next_multiple_of(PAGE as usize);
        self.head.resize(whole, 0);
        self.store.write_at(&self.head, self.start * PAGE).await?;
        let used = page::extent_pages(self.key_len, self.len);
        if self.pages > used {
            self.store
                .space
                .untake_pages(self.start + used, self.pages - used);
        }
        self.open = false;
        let ptr = DiskPtr {
            page: self.start as u32,
            len: self.len as u32,
            key_len: self.key_len as u16,
            offset: 0,
            packed: 0,
        };
        self.store.stats.borrow_mut().count_in(&ptr);
        Ok(ptr)
    }
}

impl Drop for ExtentWriter<'_> {
    fn drop(&mut self) {
        if self.open {
            // Every write was awaited: nothing is in flight to these pages.
            self.store.space.untake_pages(self.start, self.pages);
        }
    }
}

/// A raw extent's value read a step at a time (see [`TierStore::extent_reader`]).
pub struct ExtentReader<'a> {
    store: &'a TierStore,
    ptr: DiskPtr,
    key: Vec<u8>,
    next: u64,
    pages: u64,
    crc: crc32fast::Hasher,
    stored_crc: u32,
    left: usize,
    started: bool,
    done: bool,
}

impl ExtentReader<'_> {
    /// Replaces `out` with the value's next bytes (about 1 MiB); false once all came. The
    /// bytes are not verified until the call that hands out the last of them returns: an
    /// error then (or earlier: another key's extent, a damaged header) means nothing built
    /// from them may be used. Errors are counted (`read_errors`).
    pub async fn next(&mut self, out: &mut Vec<u8>) -> Result<bool, TierError> {
        out.clear();
        if self.done {
            return Ok(false);
        }
        let r = self.step(out).await;
        if let Err(e) = &r {
            self.done = true;
            self.store.stats.borrow_mut().read_errors += 1;
            tracing::warn!(file = %self.store.path.display(), page = self.ptr.page, "tier read failed: {e}");
        }
        r
    }

    async fn step(&mut self, out: &mut Vec<u8>) -> Result<bool, TierError> {
        let n = (STEP as u64 / PAGE).min(self.pages - self.next);
        let pos = (self.ptr.page as u64 + self.next) * PAGE;
        let buf = self.store.read_span(pos, (n * PAGE) as usize).await?;
        self.next += n;
        let mut b: &[u8] = &buf;
        if !self.started {
            self.started = true;
            let (stored_crc, codec, stored, klen, vlen) =
                page::parse_extent_header(b).map_err(TierError::Corrupt)?;
            let klen = klen as usize;
            if codec != 0 || stored != self.ptr.len || vlen != self.ptr.len {
                return Err(TierError::Corrupt(Corrupt::Layout));
            }
            if b.len() < EXTENT_HEADER + klen || b[EXTENT_HEADER..EXTENT_HEADER + klen] != self.key
            {
                return Err(TierError::Corrupt(Corrupt::Owner));
            }
            self.stored_crc = stored_crc;
            self.crc.update(&b[..8]);
            self.crc.update(&b[12..EXTENT_HEADER + klen]);
            b = &b[EXTENT_HEADER + klen..];
        }
        let take = self.left.min(b.len());
        self.crc.update(&b[..take]);
        out.extend_from_slice(&b[..take]);
        self.left -= take;
        if self.left == 0 {
            self.done = true;
            if self.crc.clone().finalize() != self.stored_crc {
                return Err(TierError::Corrupt(Corrupt::Checksum));
            }
        } else if self.next >= self.pages {
            return Err(TierError::Corrupt(Corrupt::Layout));
        }
        Ok(true)
    }
}

impl Drop for ExtentReader<'_> {
    fn drop(&mut self) {
        self.store.space.done_reading(self.ptr.page, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::run;
    use crate::testdata::noise;

    #[test]
    fn an_extent_written_and_read_in_parts_is_the_whole_value_and_a_flipped_byte_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0005.ssd");
        let p2 = path.clone();
        run(move || async move {
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            let v = noise(9, 3 * STEP + 12_345);
            let mut w = st.extent_writer(b"big", 5 * STEP).unwrap();
            for part in v.chunks(300_001) {
                w.write(part).await.unwrap();
            }
            let used = st.stats().used_bytes;
            let ptr = w.finish().await.unwrap();
            // The pages it did not need went back.
            assert_eq!(st.stats().used_bytes, PAGE + ptr.pages() * PAGE);
            assert!(used > st.stats().used_bytes);
            assert_eq!(st.read(ptr, b"big").await.unwrap(), v);
            let read_all = |key: &'static [u8]| {
                let st = &st;
                async move {
                    let mut r = st.extent_reader(ptr, key).unwrap();
                    let (mut got, mut part) = (Vec::new(), Vec::new());
                    loop {
                        match r.next(&mut part).await {
                            Ok(true) => got.extend_from_slice(&part),
                            Ok(false) => return Ok(got),
                            Err(e) => return Err(e),
                        }
                    }
                }
            };
            assert_eq!(read_all(b"big").await.unwrap(), v);
            assert_eq!(
                read_all(b"bog").await,
                Err(TierError::Corrupt(Corrupt::Owner))
            );
            // Too long for what the writer took: refused, and dropping it gives all back.
            let before = st.stats().used_bytes;
            let mut w = st.extent_writer(b"k", 10_000).unwrap();
            assert_eq!(w.write(&v[..20_000]).await, Err(TierError::NoSpace));
            drop(w);
            assert_eq!(st.stats().used_bytes, before);
            {
                use std::os::unix::fs::FileExt;
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p2)
                    .unwrap();
                let pos = (ptr.page as u64 + 500) * PAGE + 7;
                let mut b = [0u8; 1];
                f.read_exact_at(&mut b, pos).unwrap();
                b[0] ^= 0x04;
                f.write_all_at(&b, pos).unwrap();
                f.sync_all().unwrap();
            }
            assert_eq!(
                read_all(b"big").await,
                Err(TierError::Corrupt(Corrupt::Checksum))
            );
            st.free(ptr);
        });
    }
}

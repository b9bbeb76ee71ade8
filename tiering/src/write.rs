//! Writes to the tier file: [`TierStore::write_batch`], and compaction's
//! [`TierStore::write_batch_compacting`].
//!
//! Small values of a batch are packed into bins of up to 8 fresh 4 KiB pages, running on across
//! page boundaries; large ones get extents; every page or extent carries a CRC32 (see
//! [`crate::page`]). With a codec set ([`TierStore::set_codec`]), values that shrink enough are
//! stored compressed (see [`crate::codec`]); the pointer keeps both lengths. All the pages and
//! extents of a batch go out together, and the file grows ahead of them in large steps.
//!
//! It never blocks the shard (every write is awaited), and writes only pages the space has just
//! handed out, never one that a live pointer, a read or a hold may still see; a write that fails
//! gives its pages back.

use std::borrow::Cow;

use futures::future::{FutureExt, LocalBoxFuture};

use crate::alloc::PAGE;
use crate::codec::{Codec, Coder};
use crate::error::{io_err, TierError};
use crate::page::{self, BinBuilder};
use crate::pointer::{extent_scale, DiskPtr, MAX_VALUE, SMALL_LEN};
use crate::store::TierStore;

/// Pages a bin of small values spans at most: entries run on across its pages.
const BIN_PAGES: usize = 8;

/// A value on its way to the file: its key, its bytes as they go to disk, and how to read them
/// back. [`TierStore::write_batch`] makes these from plain values (compressing them when that
/// pays); compaction passes on entries as it read them, without decompressing.
#[derive(Clone, Debug)]
pub struct StoredItem<'a> {
    pub key: &'a [u8],
    pub bytes: Cow<'a, [u8]>,
    pub codec: Codec,
    /// The value's length once decompressed.
    pub len: u32,
    /// A compressed extent's pages in 32nds of the raw extent's; 0 otherwise.
    pub scale: u16,
}

impl<'a> StoredItem<'a> {
    /// A value stored as it is.
    pub fn raw(key: &'a [u8], value: &'a [u8]) -> StoredItem<'a> {
        StoredItem {
            key,
            bytes: Cow::Borrowed(value),
            codec: Codec::None,
            len: value.len() as u32,
            scale: 0,
        }
    }

    /// Whether it goes to a shared page (else to an extent of its own).
    fn small(&self) -> bool {
        self.scale == 0 && page::entry_size(self.key.len(), self.bytes.len()) <= page::SMALL_LIMIT
    }

    /// Pages an extent for it takes: what its pointer will say.
    fn extent_pages(&self) -> u64 {
        self.ptr(0, 0).pages()
    }

    /// Its pointer once written at `page` (and `offset` in it, for a small entry).
    fn ptr(&self, page: u32, offset: u16) -> DiskPtr {
        let packed = match (self.codec, offset) {
            (Codec::None, _) => 0,
            (_, 0) => self.scale,
            _ => self.bytes.len() as u16,
        };
        DiskPtr {
            page,
            len: self.len,
            key_len: self.key.len() as u16,
            offset,
            packed,
        }
    }
}

/// How [`TierStore::write_batch`] stores one value: as is, or compressed into `at` of the
/// batch's buffer (with the extent scale, for a large one).
enum Plan {
    Raw,
    Packed {
        at: std::ops::Range<usize>,
        scale: u16,
    },
}

/// A small entry placed in a bin being written: (item index, page in the bin, offset, entry
/// bytes).
type Member = (usize, usize, u16, u32);

/// Packs the small items `idx` into bins of up to `max_pages` pages.
fn pack(items: &[StoredItem<'_>], idx: &[usize], max_pages: usize) -> Vec<(Vec<u8>, Vec<Member>)> {
    let mut bins = Vec::new();
    let mut builder = BinBuilder::new(max_pages);
    let mut members = Vec::new();
    for &i in idx {
        let it = &items[i];
        let (k, v) = (it.key, &it.bytes[..]);
        let size = page::entry_size(k.len(), v.len()) as u32;
        let placed = match builder.push(k, v, it.codec) {
            Some(p) => Some(p),
            None => {
                let full = std::mem::replace(&mut builder, BinBuilder::new(max_pages));
                bins.push((full.finish(), std::mem::take(&mut members)));
                builder.push(k, v, it.codec)
            }
        };
        if let Some((pg, off)) = placed {
            members.push((i, pg, off, size));
        }
    }
    if !builder.is_empty() {
        bins.push((builder.finish(), members));
    }
    bins
}

impl TierStore {
    /// Makes sure the file covers `end` bytes, growing it in large steps.
    async fn ensure_len(&self, end: u64) -> Result<(), TierError> {
        if end <= self.file_len.get() {
            return Ok(());
        }
        let cap = self.space.allocator().capacity_pages() * PAGE;
        let target = (self.file_len.get() + self.grow_step)
            .max(end)
            .min(cap.max(end));
        self.file
            .pre_allocate(target, false)
            .await
            .map_err(io_err)?;
        self.file_len.set(target);
        self.space.file_grew(target);
        Ok(())
    }

    pub(crate) async fn write_at(&self, bytes: &[u8], pos: u64) -> Result<(), TierError> {
        self.ensure_len(pos + bytes.len() as u64).await?;
        let mut buf = self.file.alloc_dma_buffer(bytes.len());
        buf.as_bytes_mut().copy_from_slice(bytes);
        self.stats.borrow_mut().pending_writes += 1;
        let r = self.file.write_at(buf, pos).await;
        self.stats.borrow_mut().pending_writes -= 1;
        let n = r.map_err(io_err)?;
        if n != bytes.len() {
            return Err(TierError::Io(format!(
                "short write: {n} of {} bytes",
                bytes.len()
            )));
        }
        let mut st = self.stats.borrow_mut();
        st.writes += 1;
        st.bytes_written += n as u64;
        Ok(())
    }

    /// Writes a batch of (key, value); each gets a pointer or the error that stopped it. Small
    /// values are packed into as few pages as they fit; all pages and extents go out together.
    /// Keys longer than 64 KiB and values of [`MAX_VALUE`] bytes or more cannot be stored and get
    /// an error.
    pub async fn write_batch(&self, items: &[(&[u8], &[u8])]) -> Vec<Result<DiskPtr, TierError>> {
        let coder = self.coder.borrow().clone();
        if coder.codec() == Codec::None {
            let raw: Vec<StoredItem<'_>> =
                items.iter().map(|&(k, v)| StoredItem::raw(k, v)).collect();
            return self.write_batch_in(&raw, false).await;
        }
        // Compressed values go into one buffer for the batch (never larger than the values
        // themselves, so it does not grow), released whole once written.
        let total = items.iter().map(|(_, v)| v.len()).sum();
        let mut arena = Vec::with_capacity(total);
        let plans: Vec<Plan> = items
            .iter()
            .map(|&(k, v)| Self::plan(&coder, k, v, &mut arena))
            .collect();
        let prepared: Vec<StoredItem<'_>> = items
            .iter()
            .zip(plans)
            .map(|(&(key, value), plan)| match plan {
                Plan::Raw => StoredItem::raw(key, value),
                Plan::Packed { at, scale } => StoredItem {
                    bytes: Cow::Borrowed(&arena[at]),
                    codec: coder.codec(),
                    scale,
                    ..StoredItem::raw(key, value)
                },
            })
            .collect();
        self.write_batch_in(&prepared, false).await
    }

    /// How `value` will be stored: compressed (appended to `arena`) when that saves an eighth
    /// of a small value, or a page of an extent, and fits a compressed pointer; as is
    /// otherwise.
    fn plan(coder: &Coder, key: &[u8], value: &[u8], arena: &mut Vec<u8>) -> Plan {
        if value.len() >= MAX_VALUE {
            return Plan::Raw;
        }
        let start = arena.len();
        if StoredItem::raw(key, value).small() {
            let fits = (value.len() as u32) < SMALL_LEN
                && coder.compress_into(value, value.len() - value.len() / 8, arena);
            return if fits {
                Plan::Packed {
                    at: start..arena.len(),
                    scale: 0,
                }
            } else {
                Plan::Raw
            };
        }
        let pages = page::extent_pages(key.len(), value.len());
        let room = ((pages.saturating_sub(1) * PAGE) as usize)
            .saturating_sub(page::EXTENT_HEADER + key.len());
        if !coder.compress_into(value, room, arena) {
            return Plan::Raw;
        }
        let stored = arena.len() - start;
        match extent_scale(pages, page::extent_pages(key.len(), stored)) {
            Some(scale) => Plan::Packed {
                at: start..arena.len(),
                scale,
            },
            None => {
                arena.truncate(start);
                Plan::Raw
            }
        }
    }

    /// [`TierStore::write_batch`] for compaction, which may use the reserve: the last pages
    /// of the file are kept for it, so that a file filled with half-empty pages can still be
    /// compacted (moving live values needs somewhere to move them to).
    /// Entries are written as they were read ([`TierStore::read_page`]), compressed or not.
    pub async fn write_batch_compacting(
        &self,
        items: &[StoredItem<'_>],
    ) -> Vec<Result<DiskPtr, TierError>> {
        self.write_batch_in(items, true).await
    }

    async fn write_batch_in(
        &self,
        items: &[StoredItem<'_>],
        compacting: bool,
    ) -> Vec<Result<DiskPtr, TierError>> {
        let mut out: Vec<Option<Result<DiskPtr, TierError>>> = vec![None; items.len()];
        // Pack small entries into bins.
        let mut small = Vec::new();
        let mut large = Vec::new();
        for (i, it) in items.iter().enumerate() {
            if it.key.len() > u16::MAX as usize || it.len as usize >= MAX_VALUE {
                out[i] = Some(Err(TierError::Io(
                    "key or value too large for the tier".into(),
                )));
                continue;
            }
            if it.small() {
                small.push(i);
            } else {
                large.push(i);
            }
        }
        // Each bin needs its pages in one run; a bin that finds no run that long (a file
        // riddled with single free pages) is packed again page by page.
        let mut placed_bins: Vec<(u64, Vec<u8>, Vec<Member>)> = Vec::new();
        let mut no_run: Vec<usize> = Vec::new();
        for (bytes, members) in pack(items, &small, BIN_PAGES) {
            let pages = (bytes.len() as u64) / PAGE;
            match self.space.take_pages(pages, compacting) {
                Some(start) => placed_bins.push((start, bytes, members)),
                None if pages > 1 => no_run.extend(members.iter().map(|m| m.0)),
                None => {
                    self.note_full();
                    for m in members {
                        out[m.0] = Some(Err(TierError::NoSpace));
                    }
                }
            }
        }
        for (bytes, members) in pack(items, &no_run, 1) {
            match self.space.take_pages(1, compacting) {
                Some(start) => placed_bins.push((start, bytes, members)),
                None => {
                    self.note_full();
                    for m in members {
                        out[m.0] = Some(Err(TierError::NoSpace));
                    }
                }
            }
        }
        type Placed = Vec<(usize, Result<DiskPtr, TierError>)>;
        let mut writes: Vec<LocalBoxFuture<'_, Placed>> = Vec::new();
        for (start, bytes, members) in placed_bins {
            let pages = bytes.len() as u64 / PAGE;
            writes.push(
                async move {
                    match self.write_at(&bytes, start * PAGE).await {
                        Ok(()) => {
                            self.space.bin_written(start, pages);
                            let mut st = self.stats.borrow_mut();
                            st.small_pages += pages;
                            members
                                .into_iter()
                                .map(|(i, pg, off, size)| {
                                    let it = &items[i];
                                    let at = start as usize + pg;
                                    let runs_on = page::spans(off, it.key.len(), it.bytes.len());
                                    self.space.entry_written(at, size as usize, runs_on);
                                    let ptr = it.ptr(at as u32, off);
                                    st.count_in(&ptr);
                                    (i, Ok(ptr))
                                })
                                .collect()
                        }
                        Err(e) => {
                            self.write_failed(&e, start, pages);
                            members
                                .into_iter()
                                .map(|(i, _, _, _)| (i, Err(e.clone())))
                                .collect()
                        }
                    }
                }
                .boxed_local(),
            );
        }
        for i in large {
            let it = &items[i];
            let pages = it.extent_pages();
            let Some(start) = self.space.take_pages(pages, compacting) else {
                self.note_full();
                out[i] = Some(Err(TierError::NoSpace));
                continue;
            };
            writes.push(
                async move {
                    let bytes = page::build_extent(it.key, &it.bytes, it.codec, it.len, pages);
                    let res = match self.write_at(&bytes, start * PAGE).await {
                        Ok(()) => {
                            let ptr = it.ptr(start as u32, 0);
                            self.stats.borrow_mut().count_in(&ptr);
                            Ok(ptr)
                        }
                        Err(e) => {
                            self.write_failed(&e, start, pages);
                            Err(e)
                        }
                    };
                    vec![(i, res)]
                }
                .boxed_local(),
            );
        }
        for placed in futures::future::join_all(writes).await {
            for (i, r) in placed {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| r.unwrap_or(Err(TierError::Io("write not attempted".into()))))
            .collect()
    }

    /// The write of `pages` from `start` failed: they go back unwritten; a full disk counts as
    /// a full file.
    fn write_failed(&self, e: &TierError, start: u64, pages: u64) {
        self.space.untake_pages(start, pages);
        self.stats.borrow_mut().write_errors += 1;
        if *e == TierError::NoSpace {
            self.note_full();
        } else {
            tracing::error!(file = %self.path.display(), "tier write failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::Corrupt;
    use crate::store::tests::{run, value, write_all, write_ok};
    use crate::testdata::{letters, noise};

    #[test]
    fn one_kib_values_fill_pages_across_boundaries_and_all_space_comes_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0007.ssd");
        run(move || async move {
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            let keys: Vec<Vec<u8>> = (0..400)
                .map(|i| format!("key:{i:06}").into_bytes())
                .collect();
            let vals: Vec<Vec<u8>> = (0..400).map(|i| value(i, 1024)).collect();
            let (_, ptrs) = write_all(&st, &keys, &vals).await;
            // 3 per page without running on; close to 4 with it.
            let pages = st.stats().used_bytes / PAGE - 1;
            assert!(pages <= 400 * 10 / 38, "{pages} pages for 400 values");
            assert!(ptrs.iter().any(|p| page::spans(p.offset, 10, 1024)));
            let got =
                futures::future::join_all(ptrs.iter().zip(&keys).map(|(p, k)| st.read(*p, k)))
                    .await;
            for (i, g) in got.into_iter().enumerate() {
                assert_eq!(g.as_ref(), Ok(&vals[i]), "value {i}");
            }
            // Compaction reads each entry once, from the page it starts in.
            let mut seen = 0;
            for p in ptrs
                .iter()
                .map(|p| p.page)
                .collect::<std::collections::BTreeSet<_>>()
            {
                seen += st.read_page(p).await.unwrap().len();
            }
            assert_eq!(seen, 400);
            // Freed in an order that leaves tails behind heads and heads behind tails.
            for p in ptrs.iter().step_by(2).chain(ptrs.iter().skip(1).step_by(2)) {
                st.free(*p);
            }
            glommio::timer::sleep(std::time::Duration::from_millis(50)).await;
            let s = st.stats();
            assert_eq!(s.entries, 0);
            assert_eq!(s.small_pages, 0);
            assert_eq!(s.used_bytes, PAGE, "only the header page stays");
        });
    }

    #[test]
    fn compressed_values_round_trip_take_less_room_and_compact_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-0003.ssd");
        let p2 = path.clone();
        run(move || async move {
            let st = TierStore::create(&path, 64 << 20).await.unwrap();
            st.set_codec(Codec::Zstd);
            assert_eq!(st.codec(), Codec::Zstd);
            // (value, stored compressed?)
            let cases: Vec<(Vec<u8>, bool)> = vec![
                (letters(1, 1000), true),
                (noise(2, 1000), false),
                (letters(3, 100), false), // under MIN_COMPRESS
                (letters(4, 20_000), true),
                (noise(5, 20_000), false),
                // 3 KB: its extent is one page either way, so nothing to save.
                (letters(6, 3000), false),
                (b"{\"id\":17,\"name\":\"x\"}".repeat(60), true),
            ];
            let keys: Vec<Vec<u8>> = (0..cases.len())
                .map(|i| format!("z:{i}").into_bytes())
                .collect();
            let items: Vec<(&[u8], &[u8])> = keys
                .iter()
                .zip(&cases)
                .map(|(k, (v, _))| (k.as_slice(), v.as_slice()))
                .collect();
            let ptrs = write_ok(&st, &items).await;
            for ((p, k), (v, packed)) in ptrs.iter().zip(&keys).zip(&cases) {
                assert_eq!(p.compressed(), *packed, "{} bytes", v.len());
                assert_eq!(
                    p.len as usize,
                    v.len(),
                    "the pointer keeps the client's length"
                );
                assert_eq!(DiskPtr::unpack(p.pack(), k.len()), *p);
                assert_eq!(&st.read(*p, k).await.unwrap(), v);
            }
            let s = st.stats();
            assert_eq!(s.compressed, 3);
            assert!(
                s.stored_bytes < s.value_bytes,
                "{} of {}",
                s.stored_bytes,
                s.value_bytes
            );
            // The 20 KB text value takes 3 pages, not 5 (~0.6 of them, rounded up).
            assert_eq!(ptrs[3].pages(), 3);
            assert_eq!(ptrs[4].pages(), 5);
            // Compaction moves a compressed entry as it lies on disk, without recompressing.
            let entries = st.read_page(ptrs[0].page).await.unwrap();
            let (_, k, (stored, codec)) = entries
                .iter()
                .find(|(off, _, _)| *off == ptrs[0].offset)
                .expect("the entry is on its page");
            assert_eq!((k.as_slice(), *codec), (&keys[0][..], Codec::Zstd));
            assert_eq!(stored.len(), ptrs[0].stored_len());
            let moved = st
                .write_batch_compacting(&[StoredItem {
                    key: k,
                    bytes: Cow::Borrowed(stored),
                    codec: *codec,
                    len: ptrs[0].len,
                    scale: 0,
                }])
                .await
                .remove(0)
                .unwrap();
            assert_ne!(moved.page, ptrs[0].page);
            assert_eq!(moved.packed, ptrs[0].packed);
            assert_eq!(st.read(moved, &keys[0]).await.unwrap(), cases[0].0);
            // A flipped byte in a compressed entry is a checksum error, never other bytes.
            {
                use std::os::unix::fs::FileExt;
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p2)
                    .unwrap();
                let pos = moved.page as u64 * PAGE + moved.offset as u64 + 20;
                let mut b = [0u8; 1];
                f.read_exact_at(&mut b, pos).unwrap();
                b[0] ^= 0x10;
                f.write_all_at(&b, pos).unwrap();
                f.sync_all().unwrap();
            }
            assert_eq!(
                st.read(moved, &keys[0]).await,
                Err(TierError::Corrupt(Corrupt::Checksum))
            );
            // Freeing everything gives every page and byte back.
            for p in ptrs.iter().chain([&moved]) {
                st.free(*p);
            }
            let s = st.stats();
            assert_eq!(
                (s.entries, s.value_bytes, s.stored_bytes, s.compressed),
                (0, 0, 0, 0)
            );
            assert_eq!(s.used_bytes, PAGE, "only the header page stays");
        });
    }
}

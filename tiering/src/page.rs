//! On-disk layouts of the tier file, each with a magic, a version and a CRC32.
//!
//! Small values (entry under 2 KiB) share 4 KiB pages, written in runs ("bins") of a few
//! pages through which entries follow each other, an entry's key and value running on into
//! the next page past its header when they do not fit:
//! ```text
//! page:  "STPG" | ver u8 | kind u8 | count u16 | crc32 u32 | used u16 | first u16 | entries...
//! entry: key_len u16 | codec u4 : stored_len u12 | key | value as stored
//! ```
//! `count` is the number of entries starting in the page, `first` the offset of the first of
//! them (past the tail of an entry from the previous page), `used` where the page's bytes end.
//! Large values get their own run of pages:
//! ```text
//! extent: "STEX" | ver u8 | kind u8 | codec u8 | pad u8 | crc32 u32 | stored_len u32
//!         | key_len u16 | pad[2] | val_len u32 | pad[8]
//!         | key | value as stored | zero fill to the page boundary
//! ```
//! A value is stored as is (codec 0) or compressed (see [`crate::codec`]); `stored_len` is its
//! length on disk, and an extent also records the length it decompresses to.
//! The CRC covers every byte of the page (or of header + key + value for an extent) except the
//! CRC field itself. Every value is stored with its key: a read compares it with the key that
//! asked (a pointer that went stale can never hand one key another's bytes), and compaction finds
//! the owner of every entry by it. A key renamed while its value is on disk therefore takes its
//! value back to RAM first (RENAME reads the value).

use crate::alloc::PAGE;
use crate::codec::Codec;

pub const VERSION: u8 = 4;
const PAGE_MAGIC: &[u8; 4] = b"STPG";
const EXTENT_MAGIC: &[u8; 4] = b"STEX";
pub const PAGE_HEADER: usize = 16;
pub const ENTRY_HEADER: usize = 4;
pub const EXTENT_HEADER: usize = 32;
/// Entries (header + key + value) at most this big go to shared pages.
pub const SMALL_LIMIT: usize = 2048;
/// Entries starting in one page at most (tiny values start a new page past it): the store's
/// per-page accounting counts them in 7 bits.
pub const MAX_PAGE_ENTRIES: usize = 127;

const FILE_MAGIC: &[u8; 4] = b"STTF";

/// Page 0 of a tier file: "STTF" | version u8 | `pad[3]` | crc32 u32 of the rest of the page.
pub fn file_header() -> Vec<u8> {
    let mut buf = vec![0u8; PAGE as usize];
    buf[..4].copy_from_slice(FILE_MAGIC);
    buf[4] = VERSION;
    let crc = crc_skipping(&buf, 8);
    buf[8..12].copy_from_slice(&crc.to_le_bytes());
    buf
}

/// Why bytes read back cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corrupt {
    Magic,
    Version(u8),
    Checksum,
    Layout,
    /// The bytes are intact but belong to another key.
    Owner,
    /// A compressed value that does not decompress to the length its pointer holds, or an
    /// unknown codec.
    Compression,
}

/// An entry's value as it lies on disk: the bytes and how they were written.
pub type StoredValue = (Vec<u8>, Codec);

/// Bits of an entry's second header field that hold the stored length (the rest, the codec).
const LEN_BITS: u32 = 12;

fn crc_skipping(buf: &[u8], crc_at: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&buf[..crc_at]);
    h.update(&buf[crc_at + 4..]);
    h.finalize()
}

/// Small-value pages being filled in memory: a run ("bin") of up to `max_pages` pages written
/// together, whose entries follow each other across page boundaries, so that values just
/// under a quarter page (1 KiB values with their keys) fill pages instead of leaving a quarter
/// of each empty. An entry's header never straddles a boundary; its key and value may, into
/// the next page (just past that page's header). Each page keeps its own header and CRC.
pub struct BinBuilder {
    buf: Vec<u8>,
    max_pages: usize,
    /// Page being filled, and the offset of the next entry in it.
    cur: usize,
    at: usize,
}

impl BinBuilder {
    pub fn new(max_pages: usize) -> Self {
        let mut b = BinBuilder {
            buf: Vec::with_capacity(max_pages.max(1) * PAGE as usize),
            max_pages: max_pages.max(1),
            cur: 0,
            at: PAGE_HEADER,
        };
        b.open_page();
        b
    }

    fn open_page(&mut self) {
        let base = self.buf.len();
        self.buf.resize(base + PAGE as usize, 0);
        self.buf[base..base + 4].copy_from_slice(PAGE_MAGIC);
        self.buf[base + 4] = VERSION;
        self.buf[base + 5] = 1;
    }

    fn page_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.buf[i * PAGE as usize..(i + 1) * PAGE as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.cur == 0 && self.at == PAGE_HEADER
    }

    /// Entries starting in page `i` so far.
    fn entries_in(&self, i: usize) -> usize {
        let base = i * PAGE as usize;
        u16::from_le_bytes([self.buf[base + 6], self.buf[base + 7]]) as usize
    }

    /// Appends an entry whose value is stored as `value` (written with `codec`); returns (page
    /// index in the bin, offset in that page), or None when the bin has no room left for it
    /// (or the key is too long).
    pub fn push(&mut self, key: &[u8], value: &[u8], codec: Codec) -> Option<(usize, u16)> {
        let total = ENTRY_HEADER + key.len() + value.len();
        if key.len() > u16::MAX as usize || value.len() >= 1 << LEN_BITS || total > SMALL_LIMIT {
            return None;
        }
        let page = PAGE as usize;
        let last = self.cur + 1 == self.max_pages;
        if page - self.at < ENTRY_HEADER
            || self.entries_in(self.cur) >= MAX_PAGE_ENTRIES
            || (last && self.at + total > page)
            || (!last && self.at + total > 2 * page - PAGE_HEADER)
        {
            if last {
                return None;
            }
            self.close_page(self.at);
            self.cur += 1;
            self.at = PAGE_HEADER;
            self.open_page();
        }
        let (cur, at) = (self.cur, self.at);
        let mut entry = Vec::with_capacity(total);
        entry.extend_from_slice(&(key.len() as u16).to_le_bytes());
        let field = value.len() as u16 | (u16::from(codec.id()) << LEN_BITS);
        entry.extend_from_slice(&field.to_le_bytes());
        entry.extend_from_slice(key);
        entry.extend_from_slice(value);
        {
            let pg = self.page_mut(cur);
            if u16::from_le_bytes([pg[14], pg[15]]) == 0 {
                pg[14..16].copy_from_slice(&(at as u16).to_le_bytes());
            }
            let count = u16::from_le_bytes([pg[6], pg[7]]) + 1;
            pg[6..8].copy_from_slice(&count.to_le_bytes());
        }
        let here = (page - at).min(total);
        let base = cur * page;
        self.buf[base + at..base + at + here].copy_from_slice(&entry[..here]);
        if here == total {
            self.at = at + total;
        } else {
            // The rest goes to the next page, just past its header.
            self.close_page(page);
            self.cur += 1;
            self.open_page();
            let rest = total - here;
            let base = self.cur * page + PAGE_HEADER;
            self.buf[base..base + rest].copy_from_slice(&entry[here..]);
            self.at = PAGE_HEADER + rest;
        }
        Some((cur, at as u16))
    }

    /// Records how far page `cur` is used.
    fn close_page(&mut self, used: usize) {
        let cur = self.cur;
        self.page_mut(cur)[12..14].copy_from_slice(&(used as u16).to_le_bytes());
    }

    /// The finished pages, each with its header and CRC filled in.
    pub fn finish(mut self) -> Vec<u8> {
        self.close_page(self.at);
        for pg in self.buf.chunks_mut(PAGE as usize) {
            let crc = crc_skipping(pg, 8);
            pg[8..12].copy_from_slice(&crc.to_le_bytes());
        }
        self.buf
    }
}

/// Bytes an entry for `key_len` and a value stored in `len` bytes takes in a bin.
pub fn entry_size(key_len: usize, len: usize) -> usize {
    ENTRY_HEADER + key_len + len
}

/// Whether the entry at `offset` of a page runs into the next page.
pub fn spans(offset: u16, key_len: usize, len: usize) -> bool {
    offset as usize + entry_size(key_len, len) > PAGE as usize
}

/// Checks a whole small-value page (magic, version, CRC).
pub fn verify_page(page: &[u8]) -> Result<(), Corrupt> {
    if page.len() != PAGE as usize {
        return Err(Corrupt::Layout);
    }
    if &page[..4] != PAGE_MAGIC {
        return Err(Corrupt::Magic);
    }
    if page[4] != VERSION {
        return Err(Corrupt::Version(page[4]));
    }
    let stored = u32::from_le_bytes([page[8], page[9], page[10], page[11]]);
    if crc_skipping(page, 8) != stored {
        return Err(Corrupt::Checksum);
    }
    Ok(())
}

/// The key and stored value of the entry at `offset` of `pages` (its page, and the next one
/// when it runs on; each page it uses is verified). An entry that runs on past the pages given
/// is a layout error.
pub fn entry_at(pages: &[u8], offset: u16) -> Result<(Vec<u8>, StoredValue), Corrupt> {
    // Only the pages the entry uses are checked: the page after may belong to an entry that
    // is gone (freed, even reused) when this one ends in its own page.
    verify_page(pages.get(..PAGE as usize).ok_or(Corrupt::Layout)?)?;
    entry_in_verified(pages, offset)
}

/// [`entry_at`] for `pages` whose first page the caller has verified.
fn entry_in_verified(pages: &[u8], offset: u16) -> Result<(Vec<u8>, StoredValue), Corrupt> {
    let page = PAGE as usize;
    let at = offset as usize;
    let used = u16::from_le_bytes([pages[12], pages[13]]) as usize;
    if at < PAGE_HEADER || at + ENTRY_HEADER > used || used > page {
        return Err(Corrupt::Layout);
    }
    let klen = u16::from_le_bytes([pages[at], pages[at + 1]]) as usize;
    let (vlen, codec) = value_field([pages[at + 2], pages[at + 3]]);
    let codec = codec.ok_or(Corrupt::Compression)?;
    let total = ENTRY_HEADER + klen + vlen;
    let mut bytes = Vec::with_capacity(total);
    let here = (page - at).min(total);
    bytes.extend_from_slice(&pages[at..at + here]);
    if here < total {
        let rest = total - here;
        let next = pages.get(page..2 * page).ok_or(Corrupt::Layout)?;
        verify_page(next)?;
        let used_next = u16::from_le_bytes([next[12], next[13]]) as usize;
        if PAGE_HEADER + rest > used_next.max(PAGE_HEADER) {
            return Err(Corrupt::Layout);
        }
        bytes.extend_from_slice(&next[PAGE_HEADER..PAGE_HEADER + rest]);
    }
    let value = bytes.split_off(ENTRY_HEADER + klen);
    bytes.drain(..ENTRY_HEADER);
    Ok((bytes, (value, codec)))
}

/// An entry's stored length and codec from its second header field.
fn value_field(b: [u8; 2]) -> (usize, Option<Codec>) {
    let field = u16::from_le_bytes(b);
    let len = (field & ((1 << LEN_BITS) - 1)) as usize;
    (len, Codec::from_id((field >> LEN_BITS) as u8))
}

/// The stored value of the entry at `offset` of `pages` (one page, or two when the entry runs
/// on), after checking every page and that the entry belongs to `key`.
pub fn page_entry(pages: &[u8], offset: u16, key: &[u8]) -> Result<StoredValue, Corrupt> {
    let (k, v) = entry_at(pages, offset)?;
    if k != key {
        return Err(Corrupt::Owner);
    }
    Ok(v)
}

/// A page's entries as (offset, key, stored value), and the offset of one that runs on further.
pub type Scan = (Vec<(u16, Vec<u8>, StoredValue)>, Option<u16>);

/// Every entry that starts in the first page of `pages`, as (offset, key, value), for
/// compaction, in one walk. `pages` holds that page (verified here, once) and, when its last
/// entry runs on, possibly the next one; an entry that fails to parse ends the list. The second
/// result is the offset of an entry that runs on past the end of `pages`: read one more page
/// and take it with [`entry_at`].
pub fn page_entries(pages: &[u8]) -> Result<Scan, Corrupt> {
    let page = PAGE as usize;
    let mut out = Vec::new();
    verify_page(pages.get(..page).ok_or(Corrupt::Layout)?)?;
    let used = (u16::from_le_bytes([pages[12], pages[13]]) as usize).min(page);
    let first = u16::from_le_bytes([pages[14], pages[15]]) as usize;
    if first < PAGE_HEADER {
        return Ok((out, None));
    }
    let mut at = first;
    while at + ENTRY_HEADER <= used {
        let klen = u16::from_le_bytes([pages[at], pages[at + 1]]) as usize;
        let (vlen, _) = value_field([pages[at + 2], pages[at + 3]]);
        let end = at + ENTRY_HEADER + klen + vlen;
        if end > pages.len() {
            // Only the last entry of a full page runs on, and only into the next page.
            let runs_on = used == page && end <= 2 * page;
            return Ok((out, runs_on.then_some(at as u16)));
        }
        match entry_in_verified(pages, at as u16) {
            Ok((k, v)) => out.push((at as u16, k, v)),
            Err(_) => break,
        }
        at = end;
    }
    Ok((out, None))
}

/// Pages an extent for `key` and a value stored in `len` bytes takes.
pub fn extent_pages(key_len: usize, len: usize) -> u64 {
    ((EXTENT_HEADER + key_len + len) as u64).div_ceil(PAGE)
}

/// Lays out an extent of `pages` pages (at least what it needs): header, key, the value as
/// stored (written with `codec`, `len` bytes once decompressed), zero fill to the end.
pub fn build_extent(key: &[u8], value: &[u8], codec: Codec, len: u32, pages: u64) -> Vec<u8> {
    let pages = pages.max(extent_pages(key.len(), value.len()));
    let mut buf = vec![0u8; pages as usize * PAGE as usize];
    buf[..4].copy_from_slice(EXTENT_MAGIC);
    buf[4] = VERSION;
    buf[5] = 2;
    buf[6] = codec.id();
    buf[12..16].copy_from_slice(&(value.len() as u32).to_le_bytes());
    buf[16..18].copy_from_slice(&(key.len() as u16).to_le_bytes());
    buf[20..24].copy_from_slice(&len.to_le_bytes());
    buf[EXTENT_HEADER..EXTENT_HEADER + key.len()].copy_from_slice(key);
    let vstart = EXTENT_HEADER + key.len();
    buf[vstart..vstart + value.len()].copy_from_slice(value);
    let crc = crc_skipping(&buf[..vstart + value.len()], 8);
    buf[8..12].copy_from_slice(&crc.to_le_bytes());
    buf
}

/// The header of an extent of a raw value of `len` bytes under a key `key_len` long, with its
/// CRC field zero: what [`build_extent`] writes first.
pub(crate) fn raw_extent_header(key_len: usize, len: u32) -> [u8; EXTENT_HEADER] {
    let mut h = [0u8; EXTENT_HEADER];
    h[..4].copy_from_slice(EXTENT_MAGIC);
    h[4] = VERSION;
    h[5] = 2;
    h[6] = Codec::None.id();
    h[12..16].copy_from_slice(&len.to_le_bytes());
    h[16..18].copy_from_slice(&(key_len as u16).to_le_bytes());
    h[20..24].copy_from_slice(&len.to_le_bytes());
    h
}

/// An extent's header read back: (stored CRC, codec id, stored length, key length, value
/// length), after checking magic and version.
pub(crate) fn parse_extent_header(buf: &[u8]) -> Result<(u32, u8, u32, u16, u32), Corrupt> {
    if buf.len() < EXTENT_HEADER {
        return Err(Corrupt::Layout);
    }
    if &buf[..4] != EXTENT_MAGIC {
        return Err(Corrupt::Magic);
    }
    if buf[4] != VERSION {
        return Err(Corrupt::Version(buf[4]));
    }
    let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
    Ok((
        u32_at(8),
        buf[6],
        u32_at(12),
        u16::from_le_bytes([buf[16], buf[17]]),
        u32_at(20),
    ))
}

/// The value stored in an extent and its codec, after checking magic, version, CRC and owner
/// key.
pub fn extent_value<'a>(buf: &'a [u8], key: &[u8]) -> Result<(&'a [u8], Codec), Corrupt> {
    let (stored, codec, vlen, klen, _) = parse_extent_header(buf)?;
    let (vlen, klen) = (vlen as usize, klen as usize);
    let end = EXTENT_HEADER + klen + vlen;
    if end > buf.len() {
        return Err(Corrupt::Layout);
    }
    if crc_skipping(&buf[..end], 8) != stored {
        return Err(Corrupt::Checksum);
    }
    if &buf[EXTENT_HEADER..EXTENT_HEADER + klen] != key {
        return Err(Corrupt::Owner);
    }
    let codec = Codec::from_id(codec).ok_or(Corrupt::Compression)?;
    Ok((&buf[EXTENT_HEADER + klen..end], codec))
}

#[cfg(test)]
mod tests {
    use super::*;
    const RAW: Codec = Codec::None;

    #[test]
    fn page_round_trip_and_corruption() {
        let mut b = BinBuilder::new(1);
        let (_, a) = b.push(b"k1", b"hello", RAW).unwrap();
        let (_, c) = b.push(b"key2", &[7u8; 100], Codec::Zstd).unwrap();
        let page = b.finish();
        verify_page(&page).unwrap();
        assert_eq!(
            page_entry(&page, a, b"k1").unwrap(),
            (b"hello".to_vec(), RAW)
        );
        // The codec comes back with the bytes.
        assert_eq!(
            page_entry(&page, c, b"key2").unwrap(),
            (vec![7u8; 100], Codec::Zstd)
        );
        assert_eq!(page_entry(&page, a, b"key2"), Err(Corrupt::Owner));
        assert_eq!(page_entries(&page).unwrap().0.len(), 2);
        let mut bad = page.clone();
        bad[100] ^= 1;
        assert_eq!(verify_page(&bad), Err(Corrupt::Checksum));
        let mut bad = page;
        bad[0] = b'X';
        assert_eq!(verify_page(&bad), Err(Corrupt::Magic));
    }

    #[test]
    fn a_single_page_bin_fills_up() {
        let mut b = BinBuilder::new(1);
        let v = [1u8; 1000];
        let mut n = 0;
        while b.push(b"k", &v, RAW).is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
    }

    #[test]
    fn tiny_entries_stop_at_the_per_page_limit() {
        let mut b = BinBuilder::new(3);
        let mut pages = [0usize; 3];
        while let Some((pg, _)) = b.push(b"k", b"v", RAW) {
            pages[pg] += 1;
        }
        assert_eq!(pages, [MAX_PAGE_ENTRIES; 3]);
        let bin = b.finish();
        let (entries, _) = page_entries(&bin[..PAGE as usize]).unwrap();
        assert_eq!(entries.len(), MAX_PAGE_ENTRIES);
    }

    #[test]
    fn entries_run_across_pages_in_a_bin() {
        // 1 KiB values with 10-byte keys: three fit a page alone; in a bin of 8 pages, 31 fit.
        let mut b = BinBuilder::new(8);
        let mut at = Vec::new();
        let mut n = 0usize;
        loop {
            let key = format!("key:{n:06}");
            let v: Vec<u8> = (0..1024).map(|j| (n * 31 + j) as u8).collect();
            match b.push(key.as_bytes(), &v, RAW) {
                Some(p) => at.push((p, key, v)),
                None => break,
            }
            n += 1;
        }
        assert_eq!(n, 31);
        let bin = b.finish();
        assert_eq!(bin.len(), 8 * PAGE as usize);
        let page = PAGE as usize;
        let mut spanning = 0;
        for ((pg, off), key, v) in &at {
            let two = spans(*off, key.len(), v.len());
            spanning += two as usize;
            let end = if two { pg + 2 } else { pg + 1 };
            let pages = &bin[pg * page..end * page];
            assert_eq!(&page_entry(pages, *off, key.as_bytes()).unwrap().0, v);
        }
        assert!(spanning >= 6, "{spanning} entries span pages");
        // Compaction sees each entry once, in the page where it starts.
        let mut seen = 0;
        for pg in 0..8 {
            let end = (pg + 2).min(8);
            let (mut entries, runs_on) = page_entries(&bin[pg * page..(pg + 1) * page]).unwrap();
            let spanning = at
                .iter()
                .find(|((p, o), k, v)| *p == pg && spans(*o, k.len(), v.len()));
            assert_eq!(runs_on, spanning.map(|((_, o), _, _)| *o));
            // With the next page, the one that runs on is there too, and nothing runs on.
            let (two, none) = page_entries(&bin[pg * page..end * page]).unwrap();
            assert_eq!(none, None);
            if let Some(o) = runs_on {
                let (k, v) = entry_at(&bin[pg * page..end * page], o).unwrap();
                entries.push((o, k, v));
            }
            assert_eq!(entries, two);
            seen += entries.len();
        }
        assert_eq!(seen, 31);
        // A flipped byte in the continuation page makes the spanning entry unreadable.
        let ((pg, off), key, _) = at
            .iter()
            .find(|((_, o), k, v)| spans(*o, k.len(), v.len()))
            .unwrap();
        let mut bad = bin[pg * page..(pg + 2) * page].to_vec();
        bad[page + 100] ^= 4;
        assert_eq!(
            page_entry(&bad, *off, key.as_bytes()),
            Err(Corrupt::Checksum)
        );
    }

    #[test]
    fn extent_round_trip_and_corruption() {
        let v: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let e = build_extent(b"big", &v, RAW, v.len() as u32, 0);
        assert_eq!(e.len() as u64, extent_pages(3, v.len()) * PAGE);
        assert_eq!(extent_value(&e, b"big").unwrap(), (&v[..], RAW));
        // An extent may be given more pages than it needs (see `store`), and keeps its codec.
        let z = build_extent(b"big", &v[..5000], Codec::Lz4, 10_000, 5);
        assert_eq!(z.len() as u64, 5 * PAGE);
        assert_eq!(extent_value(&z, b"big").unwrap(), (&v[..5000], Codec::Lz4));
        assert_eq!(extent_value(&e, b"bog"), Err(Corrupt::Owner));
        let mut bad = e.clone();
        bad[5000] ^= 0x80;
        assert_eq!(extent_value(&bad, b"big"), Err(Corrupt::Checksum));
        let mut bad = e;
        bad[4] = 9;
        assert_eq!(extent_value(&bad, b"big"), Err(Corrupt::Version(9)));
    }
}

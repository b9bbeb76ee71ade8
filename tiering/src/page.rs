//! On-disk layouts of the tier file, each with a magic, a version and a CRC32.
//!
//! Small values (entry under 2 KiB) share 4 KiB pages:
//! ```text
//! page:  "STPG" | ver u8 | kind u8 | count u16 | crc32 u32 | used u16 | pad u16 | entries...
//! entry: key_len u16 | val_len u16 | key | value
//! ```
//! Large values get their own run of pages:
//! ```text
//! extent: "STEX" | ver u8 | kind u8 | pad u16 | crc32 u32 | val_len u32 | key_len u16
//!         | pad[14]
//!         | key | value | zero fill to the page boundary
//! ```
//! The CRC covers every byte of the page (or of header + key + value for an extent) except the
//! CRC field itself. Every value is stored with its key: a read compares it with the key that
//! asked (a pointer that went stale can never hand one key another's bytes), and compaction finds
//! the owner of every entry by it. A key renamed while its value is on disk therefore takes its
//! value back to RAM first (RENAME reads the value).

use crate::alloc::PAGE;

pub const VERSION: u8 = 2;
const PAGE_MAGIC: &[u8; 4] = b"STPG";
const EXTENT_MAGIC: &[u8; 4] = b"STEX";
pub const PAGE_HEADER: usize = 16;
pub const ENTRY_HEADER: usize = 4;
pub const EXTENT_HEADER: usize = 32;
/// Entries (header + key + value) at most this big go to shared pages.
pub const SMALL_LIMIT: usize = 2048;

const FILE_MAGIC: &[u8; 4] = b"STTF";

/// Page 0 of a tier file: "STTF" | version u8 | pad[3] | crc32 u32 of the rest of the page.
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
}

fn crc_skipping(buf: &[u8], crc_at: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&buf[..crc_at]);
    h.update(&buf[crc_at + 4..]);
    h.finalize()
}

/// A small-value page being filled in memory.
pub struct PageBuilder {
    buf: Vec<u8>,
    count: u16,
}

impl Default for PageBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PageBuilder {
    pub fn new() -> Self {
        let mut buf = vec![0u8; PAGE as usize];
        buf[..4].copy_from_slice(PAGE_MAGIC);
        buf[4] = VERSION;
        buf[5] = 1;
        PageBuilder { buf, count: 0 }
    }

    fn used(&self) -> usize {
        u16::from_le_bytes([self.buf[12], self.buf[13]]).max(PAGE_HEADER as u16) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Room left for one more entry's key + value.
    pub fn fits(&self, key: &[u8], value: &[u8]) -> bool {
        self.used() + ENTRY_HEADER + key.len() + value.len() <= PAGE as usize
    }

    /// Appends an entry; returns its offset in the page, or None when it does not fit.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Option<u16> {
        if !self.fits(key, value) || key.len() > u16::MAX as usize {
            return None;
        }
        let at = self.used();
        let end = at + ENTRY_HEADER + key.len() + value.len();
        self.buf[at..at + 2].copy_from_slice(&(key.len() as u16).to_le_bytes());
        self.buf[at + 2..at + 4].copy_from_slice(&(value.len() as u16).to_le_bytes());
        let k = at + ENTRY_HEADER;
        self.buf[k..k + key.len()].copy_from_slice(key);
        self.buf[k + key.len()..end].copy_from_slice(value);
        self.buf[12..14].copy_from_slice(&(end as u16).to_le_bytes());
        self.count += 1;
        Some(at as u16)
    }

    /// The finished page with its count and CRC filled in.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf[6..8].copy_from_slice(&self.count.to_le_bytes());
        let crc = crc_skipping(&self.buf, 8);
        self.buf[8..12].copy_from_slice(&crc.to_le_bytes());
        self.buf
    }
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

/// The value of the entry at `offset` of a verified page, if it belongs to `key`.
pub fn page_entry<'a>(page: &'a [u8], offset: u16, key: &[u8]) -> Result<&'a [u8], Corrupt> {
    let at = offset as usize;
    let used = u16::from_le_bytes([page[12], page[13]]) as usize;
    if at < PAGE_HEADER || at + ENTRY_HEADER > used || used > page.len() {
        return Err(Corrupt::Layout);
    }
    let klen = u16::from_le_bytes([page[at], page[at + 1]]) as usize;
    let vlen = u16::from_le_bytes([page[at + 2], page[at + 3]]) as usize;
    let kstart = at + ENTRY_HEADER;
    if kstart + klen + vlen > used {
        return Err(Corrupt::Layout);
    }
    if &page[kstart..kstart + klen] != key {
        return Err(Corrupt::Owner);
    }
    Ok(&page[kstart + klen..kstart + klen + vlen])
}

/// Every (offset, key, value) of a verified page, for compaction.
pub fn page_entries(page: &[u8]) -> Vec<(u16, &[u8], &[u8])> {
    let used = (u16::from_le_bytes([page[12], page[13]]) as usize).min(page.len());
    let mut out = Vec::new();
    let mut at = PAGE_HEADER;
    while at + ENTRY_HEADER <= used {
        let klen = u16::from_le_bytes([page[at], page[at + 1]]) as usize;
        let vlen = u16::from_le_bytes([page[at + 2], page[at + 3]]) as usize;
        let end = at + ENTRY_HEADER + klen + vlen;
        if end > used {
            break;
        }
        out.push((
            at as u16,
            &page[at + ENTRY_HEADER..at + ENTRY_HEADER + klen],
            &page[at + ENTRY_HEADER + klen..end],
        ));
        at = end;
    }
    out
}

/// Pages an extent for `key` and a value of `len` bytes takes.
pub fn extent_pages(key_len: usize, len: usize) -> u64 {
    ((EXTENT_HEADER + key_len + len) as u64).div_ceil(PAGE)
}

/// Lays out an extent (header, key, value, zero fill to whole pages).
pub fn build_extent(key: &[u8], value: &[u8]) -> Vec<u8> {
    let total = extent_pages(key.len(), value.len()) as usize * PAGE as usize;
    let mut buf = vec![0u8; total];
    buf[..4].copy_from_slice(EXTENT_MAGIC);
    buf[4] = VERSION;
    buf[5] = 2;
    buf[12..16].copy_from_slice(&(value.len() as u32).to_le_bytes());
    buf[16..18].copy_from_slice(&(key.len() as u16).to_le_bytes());
    buf[EXTENT_HEADER..EXTENT_HEADER + key.len()].copy_from_slice(key);
    let vstart = EXTENT_HEADER + key.len();
    buf[vstart..vstart + value.len()].copy_from_slice(value);
    let crc = crc_skipping(&buf[..vstart + value.len()], 8);
    buf[8..12].copy_from_slice(&crc.to_le_bytes());
    buf
}

/// The value stored in an extent, after checking magic, version, CRC and owner key.
pub fn extent_value<'a>(buf: &'a [u8], key: &[u8]) -> Result<&'a [u8], Corrupt> {
    if buf.len() < EXTENT_HEADER {
        return Err(Corrupt::Layout);
    }
    if &buf[..4] != EXTENT_MAGIC {
        return Err(Corrupt::Magic);
    }
    if buf[4] != VERSION {
        return Err(Corrupt::Version(buf[4]));
    }
    let vlen = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]) as usize;
    let klen = u16::from_le_bytes([buf[16], buf[17]]) as usize;
    let end = EXTENT_HEADER + klen + vlen;
    if end > buf.len() {
        return Err(Corrupt::Layout);
    }
    let stored = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
    if crc_skipping(&buf[..end], 8) != stored {
        return Err(Corrupt::Checksum);
    }
    if &buf[EXTENT_HEADER..EXTENT_HEADER + klen] != key {
        return Err(Corrupt::Owner);
    }
    Ok(&buf[EXTENT_HEADER + klen..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_round_trip_and_corruption() {
        let mut b = PageBuilder::new();
        let a = b.push(b"k1", b"hello").unwrap();
        let c = b.push(b"key2", &[7u8; 100]).unwrap();
        let page = b.finish();
        verify_page(&page).unwrap();
        assert_eq!(page_entry(&page, a, b"k1").unwrap(), b"hello");
        assert_eq!(page_entry(&page, c, b"key2").unwrap(), &[7u8; 100][..]);
        assert_eq!(page_entry(&page, a, b"key2"), Err(Corrupt::Owner));
        assert_eq!(page_entries(&page).len(), 2);
        let mut bad = page.clone();
        bad[100] ^= 1;
        assert_eq!(verify_page(&bad), Err(Corrupt::Checksum));
        let mut bad = page;
        bad[0] = b'X';
        assert_eq!(verify_page(&bad), Err(Corrupt::Magic));
    }

    #[test]
    fn page_fills_up() {
        let mut b = PageBuilder::new();
        let v = [1u8; 1000];
        let mut n = 0;
        while b.push(b"k", &v).is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
        assert!(!b.fits(b"k", &v));
    }

    #[test]
    fn extent_round_trip_and_corruption() {
        let v: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let e = build_extent(b"big", &v);
        assert_eq!(e.len() as u64, extent_pages(3, v.len()) * PAGE);
        assert_eq!(extent_value(&e, b"big").unwrap(), &v[..]);
        assert_eq!(extent_value(&e, b"bog"), Err(Corrupt::Owner));
        let mut bad = e.clone();
        bad[5000] ^= 0x80;
        assert_eq!(extent_value(&bad, b"big"), Err(Corrupt::Checksum));
        let mut bad = e;
        bad[4] = 9;
        assert_eq!(extent_value(&bad, b"big"), Err(Corrupt::Version(9)));
    }
}

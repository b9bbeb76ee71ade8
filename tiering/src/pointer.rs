//! [`DiskPtr`]: where a value lives in the tier file, and the 64 bits a shard keeps of it in RAM
//! in place of the value.
//!
//! Pure arithmetic on the pointer: it never touches the file or the store's bookkeeping. The
//! packed form is what every offloaded key costs in RAM, so it must round-trip exactly; a value
//! it cannot express (see [`MAX_VALUE`], [`COMPRESSED_PAGES`]) must never be written.

use crate::page;

/// Where a value lives on disk. In RAM it is kept packed in 64 bits ([`DiskPtr::pack`]); the
/// key's length comes from the key itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct DiskPtr {
    /// First page (4 KiB units).
    pub page: u32,
    /// Value length in bytes, as the client sees it (STRLEN needs no I/O).
    pub len: u32,
    /// Length of the key stored with the value (sizes extents and page accounting).
    pub key_len: u16,
    /// Entry offset inside a shared page; 0 for an extent (page entries start past the header).
    pub offset: u16,
    /// 0 for a value stored as is. A compressed small value: its length on disk. A compressed
    /// extent: its pages in 32nds of what the raw value would take (1..=32, rounded up).
    pub packed: u16,
}

/// Values at least this long are never offloaded: a packed pointer has 29 bits for the length
/// of an extent's value.
pub const MAX_VALUE: usize = (1 << 29) - 1;

/// Compressed values are written only below this page (28 bits of page number in their packed
/// pointers: 1 TiB per shard file); a larger file stores its values as they are.
pub const COMPRESSED_PAGES: u64 = 1 << 28;

/// A compressed small value's length, and its stored length, fit in 11 bits each.
pub(crate) const SMALL_LEN: u32 = 1 << 11;

/// Values shorter than this (and compressed values below [`TAGGED_COMPRESSED_PAGES`]) leave
/// two bits of their packed pointer to its owner ([`DiskPtr::pack_tagged`]).
pub const MAX_TAGGED_VALUE: usize = 1 << 28;

/// See [`MAX_TAGGED_VALUE`].
pub const TAGGED_COMPRESSED_PAGES: u64 = 1 << 26;

/// Where [`DiskPtr::pack_tagged`] puts its two bits (high, low): past the page of a plain
/// pointer and in an extent's length's top bit (free under [`MAX_TAGGED_VALUE`]; unused in a
/// small one); in the top bits of a compressed pointer's page.
const TAGGED_PLAIN: (u32, u32) = (61, 28);
const TAGGED_COMPRESSED: (u32, u32) = (61, 60);

const TAG_SHIFT: u32 = 62;
const TAG_EXTENT: u64 = 0;
const TAG_SMALL: u64 = 1;
const TAG_SMALL_PACKED: u64 = 2;
const TAG_EXTENT_PACKED: u64 = 3;

impl DiskPtr {
    pub fn small(&self) -> bool {
        self.offset != 0
    }

    /// True when the value is stored compressed.
    pub fn compressed(&self) -> bool {
        self.packed != 0
    }

    /// Bytes the value takes in its small entry (its compressed length when compressed).
    pub fn stored_len(&self) -> usize {
        if self.small() && self.packed != 0 {
            self.packed as usize
        } else {
            self.len as usize
        }
    }

    /// The pointer in 64 bits, a 2-bit tag on top:
    /// - 0 extent: page 32 | length 29;
    /// - 1 small: page 32 | offset 12 | length 12;
    /// - 2 compressed small: page 28 | offset 12 | length 11 | stored length 11;
    /// - 3 compressed extent: page 28 | 32nds - 1 5 | length 29.
    ///
    /// The writer keeps compressed values within those bounds (see [`COMPRESSED_PAGES`]).
    pub fn pack(&self) -> u64 {
        let page = self.page as u64;
        let len = self.len as u64;
        match (self.small(), self.compressed()) {
            (false, false) => (TAG_EXTENT << TAG_SHIFT) | (page << 29) | (len & MAX_VALUE as u64),
            (true, false) => {
                (TAG_SMALL << TAG_SHIFT)
                    | (page << 29)
                    | ((self.offset as u64 & 0xfff) << 12)
                    | (len & 0xfff)
            }
            (true, true) => {
                (TAG_SMALL_PACKED << TAG_SHIFT)
                    | ((page & 0xfff_ffff) << 34)
                    | ((self.offset as u64 & 0xfff) << 22)
                    | ((len & 0x7ff) << 11)
                    | (self.packed as u64 & 0x7ff)
            }
            (false, true) => {
                (TAG_EXTENT_PACKED << TAG_SHIFT)
                    | ((page & 0xfff_ffff) << 34)
                    | (((self.packed as u64 - 1) & 0x1f) << 29)
                    | (len & MAX_VALUE as u64)
            }
        }
    }

    /// [`DiskPtr::pack`] with two more bits, `tag` (0..=3), where this pointer leaves them
    /// free; None when it does not (a plain extent of [`MAX_TAGGED_VALUE`] bytes or more, a
    /// compressed value at or past [`TAGGED_COMPRESSED_PAGES`]). [`DiskPtr::split_tagged`]
    /// takes them out again.
    pub fn pack_tagged(&self, tag: u8) -> Option<u64> {
        let (hi, lo) = if self.compressed() {
            if self.page as u64 >= TAGGED_COMPRESSED_PAGES {
                return None;
            }
            TAGGED_COMPRESSED
        } else {
            if !self.small() && self.len as usize >= MAX_TAGGED_VALUE {
                return None;
            }
            TAGGED_PLAIN
        };
        let tag = tag as u64;
        Some(self.pack() | (((tag >> 1) & 1) << hi) | ((tag & 1) << lo))
    }

    /// What [`DiskPtr::pack_tagged`] made: the plain packed pointer ([`DiskPtr::unpack`] reads
    /// it) and the tag.
    pub fn split_tagged(bits: u64) -> (u64, u8) {
        let (hi, lo) = match bits >> TAG_SHIFT {
            TAG_SMALL_PACKED | TAG_EXTENT_PACKED => TAGGED_COMPRESSED,
            _ => TAGGED_PLAIN,
        };
        let tag = (((bits >> hi) & 1) << 1 | ((bits >> lo) & 1)) as u8;
        (bits & !(1 << hi) & !(1 << lo), tag)
    }

    /// The inverse of [`DiskPtr::pack`], given the key's length.
    pub fn unpack(bits: u64, key_len: usize) -> DiskPtr {
        let key_len = key_len as u16;
        match bits >> TAG_SHIFT {
            TAG_SMALL => DiskPtr {
                page: (bits >> 29) as u32,
                len: (bits & 0xfff) as u32,
                key_len,
                offset: ((bits >> 12) & 0xfff) as u16,
                packed: 0,
            },
            TAG_SMALL_PACKED => DiskPtr {
                page: ((bits >> 34) & 0xfff_ffff) as u32,
                len: ((bits >> 11) & 0x7ff) as u32,
                key_len,
                offset: ((bits >> 22) & 0xfff) as u16,
                packed: (bits & 0x7ff) as u16,
            },
            TAG_EXTENT_PACKED => DiskPtr {
                page: ((bits >> 34) & 0xfff_ffff) as u32,
                len: (bits & MAX_VALUE as u64) as u32,
                key_len,
                offset: 0,
                packed: ((bits >> 29) & 0x1f) as u16 + 1,
            },
            _ => DiskPtr {
                page: ((bits >> 29) & 0xffff_ffff) as u32,
                len: (bits & MAX_VALUE as u64) as u32,
                key_len,
                offset: 0,
                packed: 0,
            },
        }
    }

    /// Pages a read of the value covers: one or two for a small entry (two when it runs on
    /// into the next page), the whole extent for a large one.
    pub(crate) fn pages(&self) -> u64 {
        if !self.small() {
            let raw = page::extent_pages(self.key_len as usize, self.len as usize);
            if self.packed == 0 {
                raw
            } else {
                scaled_pages(raw, self.packed)
            }
        } else if page::spans(self.offset, self.key_len as usize, self.stored_len()) {
            2
        } else {
            1
        }
    }
}

/// Pages of a compressed extent: `32nds` of the `raw` extent's pages, rounded up.
pub(crate) fn scaled_pages(raw: u64, thirty_seconds: u16) -> u64 {
    (raw * thirty_seconds as u64).div_ceil(32)
}

/// For a compressed extent needing `need` pages where the raw value takes `raw`: the smallest
/// scale (in 32nds) that covers it, when that saves a page.
pub(crate) fn extent_scale(raw: u64, need: u64) -> Option<u16> {
    let s = (1..=32u16).find(|&s| scaled_pages(raw, s) >= need)?;
    (scaled_pages(raw, s) < raw).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_pointers_round_trip_at_their_bounds() {
        let ptrs = [
            DiskPtr {
                page: u32::MAX,
                len: MAX_VALUE as u32 - 1,
                key_len: 9,
                offset: 0,
                packed: 0,
            },
            DiskPtr {
                page: u32::MAX,
                len: 4095,
                key_len: 9,
                offset: 4095,
                packed: 0,
            },
            DiskPtr {
                page: COMPRESSED_PAGES as u32 - 1,
                len: SMALL_LEN - 1,
                key_len: 9,
                offset: 4095,
                packed: SMALL_LEN as u16 - 1,
            },
            DiskPtr {
                page: COMPRESSED_PAGES as u32 - 1,
                len: MAX_VALUE as u32 - 1,
                key_len: 9,
                offset: 0,
                packed: 32,
            },
            DiskPtr {
                page: 1,
                len: 5000,
                key_len: 0,
                offset: 0,
                packed: 1,
            },
        ];
        for p in ptrs {
            assert_eq!(DiskPtr::unpack(p.pack(), 9), DiskPtr { key_len: 9, ..p });
        }
        // Two bits beside each kind of pointer, where it leaves room for them.
        let tagged = [
            DiskPtr {
                page: u32::MAX,
                len: MAX_TAGGED_VALUE as u32 - 1,
                key_len: 9,
                offset: 0,
                packed: 0,
            },
            DiskPtr {
                page: u32::MAX,
                len: 4095,
                key_len: 9,
                offset: 4095,
                packed: 0,
            },
            DiskPtr {
                page: TAGGED_COMPRESSED_PAGES as u32 - 1,
                len: SMALL_LEN - 1,
                key_len: 9,
                offset: 4095,
                packed: SMALL_LEN as u16 - 1,
            },
            DiskPtr {
                page: TAGGED_COMPRESSED_PAGES as u32 - 1,
                len: MAX_VALUE as u32 - 1,
                key_len: 9,
                offset: 0,
                packed: 32,
            },
        ];
        for p in tagged {
            for tag in 0..4 {
                let bits = p.pack_tagged(tag).expect("room for the tag");
                let (plain, got) = DiskPtr::split_tagged(bits);
                assert_eq!(got, tag);
                assert_eq!(plain, p.pack());
                assert_eq!(DiskPtr::unpack(plain, 9), p);
            }
        }
        let long = DiskPtr {
            len: MAX_TAGGED_VALUE as u32,
            ..tagged[0]
        };
        let far = DiskPtr {
            page: TAGGED_COMPRESSED_PAGES as u32,
            ..tagged[2]
        };
        assert_eq!((long.pack_tagged(1), far.pack_tagged(1)), (None, None));
        // Scales: the fewest 32nds covering what is needed, only when a page is saved.
        assert_eq!(extent_scale(10, 4), Some(10));
        assert_eq!(scaled_pages(10, 10), 4);
        assert_eq!(extent_scale(10, 10), None);
        assert_eq!(extent_scale(2, 1), Some(1));
    }
}

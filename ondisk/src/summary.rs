//! The summary file: one per snapshot, naming its shard files and their checksums.
//!
//! A snapshot is complete only when its summary exists, so the server writes the summary last
//! (after every shard file is fsynced) and a loader trusts shard files only through it. This
//! module owns the summary's bytes and the snapshot file names; it does no I/O.
//!
//! # Layout (little-endian)
//!
//! ```text
//!  0  magic         [8]  b"STRATASM"
//!  8  version       u16  1
//! 10  reserved      u16  0
//! 12  total_len     u32  length of the whole summary, CRC included
//! 16  snapshot_id   u64
//! 24  created_ms    u64
//! 32  shard_count   u32
//! 36  db_count      u32
//! 40  compression   u8
//! 41  file_count    u32
//! 45  files, each:  name_len u16, name (UTF-8, no '/'), bytes u64, crc32 u32, records u64
//!  .  crc32         u32  CRC32 of every byte before it
//! ```

use crate::error::FormatError;
use crate::snapshot::Compression;

pub const MAGIC: &[u8; 8] = b"STRATASM";
pub const VERSION: u16 = 1;
const FIXED_LEN: usize = 45;
const FILE_FIXED_LEN: usize = 2 + 8 + 4 + 8;

/// One shard file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryFile {
    /// File name only, no directory.
    pub name: String,
    /// Whole file length.
    pub bytes: u64,
    /// CRC32 of the whole file ([`crate::FileStats::crc32`]).
    pub crc32: u32,
    pub records: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub snapshot_id: u64,
    pub created_ms: u64,
    pub shard_count: u32,
    pub db_count: u32,
    pub compression: Compression,
    pub files: Vec<SummaryFile>,
}

impl Summary {
    /// The summary's bytes. Names longer than 65535 bytes cannot be stored and are cut (file
    /// names are far shorter on every file system).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            FIXED_LEN
                + 4
                + self
                    .files
                    .iter()
                    .map(|f| FILE_FIXED_LEN + f.name.len())
                    .sum::<usize>(),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes()); // total_len, patched below
        out.extend_from_slice(&self.snapshot_id.to_le_bytes());
        out.extend_from_slice(&self.created_ms.to_le_bytes());
        out.extend_from_slice(&self.shard_count.to_le_bytes());
        out.extend_from_slice(&self.db_count.to_le_bytes());
        out.push(self.compression.as_u8());
        out.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        for f in &self.files {
            let name = &f.name.as_bytes()[..f.name.len().min(u16::MAX as usize)];
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&f.bytes.to_le_bytes());
            out.extend_from_slice(&f.crc32.to_le_bytes());
            out.extend_from_slice(&f.records.to_le_bytes());
        }
        let total = (out.len() + 4) as u32;
        out[12..16].copy_from_slice(&total.to_le_bytes());
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses and verifies a summary.
    pub fn decode(data: &[u8]) -> Result<Summary, FormatError> {
        let have = data.len().min(MAGIC.len());
        if data[..have] != MAGIC[..have] {
            return Err(FormatError::bad_magic(0, "(not a Strata snapshot summary)"));
        }
        if data.len() < 16 {
            return Err(FormatError::truncated(
                data.len() as u64,
                "snapshot summary: data ends",
            ));
        }
        let version = u16::from_le_bytes([data[8], data[9]]);
        if version != VERSION {
            return Err(FormatError::unsupported_version(
                8,
                format!("(summary version {version}, this build reads {VERSION})"),
            ));
        }
        let total = u32::from_le_bytes([data[12], data[13], data[14], data[15]]) as usize;
        if data.len() < total {
            return Err(FormatError::truncated(
                data.len() as u64,
                format!("snapshot summary (length {total}): data ends"),
            ));
        }
        if total < FIXED_LEN + 4 {
            return Err(FormatError::corrupt(
                12,
                "snapshot summary: length too small",
            ));
        }
        if data.len() > total {
            return Err(FormatError::corrupt(
                total as u64,
                "snapshot summary: bytes after the checksum",
            ));
        }
        let (body, crc) = data.split_at(total - 4);
        if crc32fast::hash(body) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            return Err(FormatError::checksum(0, "in snapshot summary"));
        }
        let mut c = Cursor {
            data: body,
            pos: 10,
        };
        if c.u16()? != 0 {
            return Err(FormatError::corrupt(
                10,
                "snapshot summary: reserved bytes set",
            ));
        }
        c.u32()?; // total_len, checked above
        let snapshot_id = c.u64()?;
        let created_ms = c.u64()?;
        let shard_count = c.u32()?;
        let db_count = c.u32()?;
        let codec_at = c.pos;
        let codec = c.u8()?;
        let compression = Compression::from_u8(codec).ok_or_else(|| {
            FormatError::corrupt(
                codec_at as u64,
                format!("snapshot summary: compression {codec}"),
            )
        })?;
        let count = c.u32()? as usize;
        // Every entry takes at least FILE_FIXED_LEN bytes: bound the allocation by the data.
        let mut files = Vec::with_capacity(count.min(body.len() / FILE_FIXED_LEN));
        for _ in 0..count {
            let name_at = c.pos;
            let name_len = c.u16()? as usize;
            let name = c.bytes(name_len)?;
            let name = std::str::from_utf8(name)
                .ok()
                .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
                .ok_or_else(|| {
                    FormatError::corrupt(name_at as u64, "snapshot summary: bad file name")
                })?
                .to_string();
            files.push(SummaryFile {
                name,
                bytes: c.u64()?,
                crc32: c.u32()?,
                records: c.u64()?,
            });
        }
        if c.pos != body.len() {
            return Err(FormatError::corrupt(
                c.pos as u64,
                "snapshot summary: unparsed bytes before the checksum",
            ));
        }
        Ok(Summary {
            snapshot_id,
            created_ms,
            shard_count,
            db_count,
            compression,
            files,
        })
    }
}

/// The summary file's name for a snapshot called `base`.
pub fn summary_file_name(base: &str) -> String {
    format!("{base}-summary.strata")
}

/// The name of shard `index`'s file in a snapshot called `base`.
pub fn shard_file_name(base: &str, index: u32) -> String {
    format!("{base}-{index:04}.strata")
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        let Some(end) = end else {
            return Err(FormatError::corrupt(
                self.pos as u64,
                "snapshot summary: field runs past the end",
            ));
        };
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.bytes(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, FormatError> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, FormatError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, FormatError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn sample() -> Summary {
        Summary {
            snapshot_id: 42,
            created_ms: 1_700_000_000_123,
            shard_count: 3,
            db_count: 16,
            compression: Compression::Zstd,
            files: (0..3)
                .map(|i| SummaryFile {
                    name: shard_file_name("snap-42", i),
                    bytes: 1000 + u64::from(i),
                    crc32: 0xDEAD_0000 + i,
                    records: 10 * u64::from(i),
                })
                .collect(),
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(summary_file_name("snap-7"), "snap-7-summary.strata");
        assert_eq!(shard_file_name("snap-7", 3), "snap-7-0003.strata");
        assert_eq!(shard_file_name("snap-7", 12345), "snap-7-12345.strata");
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let bytes = s.encode();
        assert_eq!(&bytes[..8], MAGIC);
        assert_eq!(Summary::decode(&bytes).unwrap(), s);
        let empty = Summary {
            files: vec![],
            ..sample()
        };
        assert_eq!(Summary::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn every_bit_flip_is_an_error() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let err = Summary::decode(&b).expect_err("flipped summary must not decode");
                if i >= 16 {
                    assert_eq!(err.kind, ErrorKind::ChecksumMismatch, "byte {i}: {err}");
                }
            }
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            let err = Summary::decode(&bytes[..cut]).expect_err("cut summary must not decode");
            if cut >= 16 {
                assert_eq!(err.kind, ErrorKind::Truncated, "cut {cut}: {err}");
                assert_eq!(err.offset, cut as u64);
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            Summary::decode(&longer).unwrap_err().kind,
            ErrorKind::Corrupt
        );
    }

    #[test]
    fn wrong_magic_and_version() {
        let mut b = sample().encode();
        b[0] = b'X';
        assert_eq!(Summary::decode(&b).unwrap_err().kind, ErrorKind::BadMagic);
        let mut b = sample().encode();
        b[8] = 9;
        assert_eq!(
            Summary::decode(&b).unwrap_err().kind,
            ErrorKind::UnsupportedVersion
        );
        assert_eq!(
            Summary::decode(b"STRATASN....").unwrap_err().kind,
            ErrorKind::BadMagic
        );
    }

    #[test]
    fn correctly_checksummed_nonsense_is_corrupt_not_a_panic() {
        // A huge file count with a valid CRC must fail cleanly, without a huge allocation.
        let mut b = sample().encode();
        b.truncate(b.len() - 4);
        b[41..45].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(Summary::decode(&b).unwrap_err().kind, ErrorKind::Corrupt);
        // A file name with a slash.
        let mut s = sample();
        s.files[0].name = "../etc/passwd".into();
        assert_eq!(
            Summary::decode(&s.encode()).unwrap_err().kind,
            ErrorKind::Corrupt
        );
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let good = sample().encode();
        for round in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 200) as usize;
            let mut b: Vec<u8> = if round % 2 == 0 {
                good[..len.min(good.len())].to_vec()
            } else {
                MAGIC.to_vec()
            };
            let mut s = seed;
            while b.len() < len {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                b.push((s >> 33) as u8);
            }
            let _ = Summary::decode(&b);
        }
    }

    #[test]
    fn rechecksummed_mutations_fail_cleanly_or_decode_canonically() {
        // Mutate the fields behind a valid CRC so the parser itself sees bad values.
        let good = sample().encode();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut b = good.clone();
            b.truncate(b.len() - 4);
            let at = 16 + (seed as usize % (b.len() - 16));
            b[at] = (seed >> 32) as u8;
            if seed & (1 << 20) != 0 {
                b.truncate(b.len() - (seed >> 40) as usize % 8);
                let total = (b.len() + 4) as u32;
                b[12..16].copy_from_slice(&total.to_le_bytes());
            }
            let crc = crc32fast::hash(&b);
            b.extend_from_slice(&crc.to_le_bytes());
            if let Ok(s) = Summary::decode(&b) {
                assert_eq!(s.encode(), b, "a decodable summary has one encoding");
            }
        }
    }
}

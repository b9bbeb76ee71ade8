//! Compression of values on their way to the tier file (`--tiered_compression`).
//!
//! Each value is compressed on its own (a read decompresses just the one value it wants), and
//! stored compressed only when that saves at least an eighth of it (small values) or a page
//! (extents, see `store`); otherwise it is stored as is and reads pay nothing for it. The
//! codec is recorded with each entry on disk, so a file may mix codecs and raw values.
//!
//! - `zstd` (level 1): entropy-codes the bytes as well as finding repeats, so text and JSON
//!   values shrink even when no string repeats inside one value; ~1-2 µs to decompress 1 KiB.
//! - `lz4`: finds repeats only, cheaper on both sides; values without repeats stay raw.
//!
//! What comes back is checked: the CRC of the stored bytes first (see `page`), then the
//! decompressed length against the one the pointer in RAM holds. A value that fails either is
//! an error the caller turns into a miss.

use std::cell::RefCell;

use crate::page::Corrupt;

/// How a value is stored on disk; the number is what entries record (4 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Codec {
    #[default]
    None = 0,
    Lz4 = 1,
    Zstd = 2,
}

impl Codec {
    pub fn from_id(id: u8) -> Option<Codec> {
        match id {
            0 => Some(Codec::None),
            1 => Some(Codec::Lz4),
            2 => Some(Codec::Zstd),
            _ => None,
        }
    }

    pub fn id(self) -> u8 {
        self as u8
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

impl std::str::FromStr for Codec {
    type Err = String;

    fn from_str(s: &str) -> Result<Codec, String> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "off" | "no" => Ok(Codec::None),
            "lz4" => Ok(Codec::Lz4),
            "zstd" => Ok(Codec::Zstd),
            _ => Err(format!("'{s}' is not one of none, lz4, zstd")),
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Values shorter than this are not worth a try: a frame's own bytes eat what they would save.
pub const MIN_COMPRESS: usize = 128;

/// Values longer than this are stored as they are: compressing one takes the shard's core for
/// ~2 ms per MiB, and it is the shard's own thread that writes to the tier.
pub const MAX_COMPRESS: usize = 1 << 20;

/// The scratch buffer is kept between calls up to this size (a large value's is dropped).
const KEEP_SCRATCH: usize = 64 << 10;

const ZSTD_LEVEL: i32 = 1;

/// One shard's compressor and decompressor, each made once (a zstd context costs far more to
/// set up than a small value takes to compress).
#[derive(Default)]
pub struct Coder {
    codec: Codec,
    zc: RefCell<Option<zstd::bulk::Compressor<'static>>>,
    zd: RefCell<Option<zstd::bulk::Decompressor<'static>>>,
    scratch: RefCell<Vec<u8>>,
}

impl Coder {
    pub fn new(codec: Codec) -> Coder {
        Coder {
            codec,
            ..Coder::default()
        }
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Appends `value` compressed with this coder's codec to `out` when it comes out at most
    /// `limit` bytes long, and says whether it did (not for the codec `none`, nor for values
    /// too short to try). The output goes through one scratch buffer kept for the next call, so
    /// compressing a batch leaves no short-lived heap blocks behind: scattered among long-lived
    /// ones, those had kept RSS ~8% above maxmemory.
    pub fn compress_into(&self, value: &[u8], limit: usize, out: &mut Vec<u8>) -> bool {
        if !(MIN_COMPRESS..=MAX_COMPRESS).contains(&value.len())
            || limit == 0
            || self.codec == Codec::None
        {
            return false;
        }
        let mut scratch = self.scratch.borrow_mut();
        scratch.clear();
        scratch.resize(limit, 0);
        let n = match self.codec {
            Codec::None => return false,
            Codec::Lz4 => {
                // lz4 wants room for its worst case, whatever the limit.
                let bound = lz4_flex::block::get_maximum_output_size(value.len());
                scratch.resize(bound.max(limit), 0);
                match lz4_flex::block::compress_into(value, &mut scratch[..]) {
                    Ok(n) => n,
                    Err(_) => return false,
                }
            }
            Codec::Zstd => {
                let mut zc = self.zc.borrow_mut();
                if zc.is_none() {
                    *zc = new_compressor();
                }
                // No context (out of memory at start): values stay raw.
                let Some(c) = zc.as_mut() else {
                    return false;
                };
                // Sized for this input: small tables, little work. An output that would pass
                // `limit` is an error: the value stays raw.
                if c.set_pledged_src_size(Some(value.len() as u64)).is_err() {
                    return false;
                }
                match c.compress_to_buffer(value, &mut scratch[..]) {
                    Ok(n) => n,
                    Err(_) => return false,
                }
            }
        };
        let fits = n <= limit;
        if fits {
            out.extend_from_slice(&scratch[..n]);
        }
        if scratch.capacity() > KEEP_SCRATCH {
            *scratch = Vec::new();
        }
        fits
    }

    /// The `len` bytes that `stored` (written with `codec`) decompresses to.
    pub fn decompress(&self, codec: Codec, stored: &[u8], len: usize) -> Result<Vec<u8>, Corrupt> {
        let out = match codec {
            Codec::None => return Ok(stored.to_vec()),
            Codec::Lz4 => {
                lz4_flex::block::decompress(stored, len).map_err(|_| Corrupt::Compression)?
            }
            Codec::Zstd => {
                let mut zd = self.zd.borrow_mut();
                if zd.is_none() {
                    *zd = zstd::bulk::Decompressor::new().ok();
                }
                let d = zd.as_mut().ok_or(Corrupt::Compression)?;
                d.decompress(stored, len)
                    .map_err(|_| Corrupt::Compression)?
            }
        };
        if out.len() != len {
            return Err(Corrupt::Compression);
        }
        Ok(out)
    }
}

/// A level-1 zstd context that writes no checksum (the page's CRC covers the bytes), no
/// content size (the pointer in RAM has it) and no dictionary id.
fn new_compressor() -> Option<zstd::bulk::Compressor<'static>> {
    use zstd::zstd_safe::CParameter;
    let mut c = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?;
    c.set_parameter(CParameter::ChecksumFlag(false)).ok()?;
    c.set_parameter(CParameter::ContentSizeFlag(false)).ok()?;
    c.set_parameter(CParameter::DictIdFlag(false)).ok()?;
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::letters;

    /// `value` compressed by `c` when it comes out at most `limit` bytes long.
    fn compress(c: &Coder, value: &[u8], limit: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        c.compress_into(value, limit, &mut out).then_some(out)
    }

    #[test]
    fn zstd_shrinks_text_and_round_trips() {
        let c = Coder::new(Codec::Zstd);
        let v = letters(7, 1024);
        let z = compress(&c, &v, v.len() - v.len() / 8).expect("text compresses");
        assert!(z.len() < 700, "{} bytes", z.len());
        assert_eq!(c.decompress(Codec::Zstd, &z, v.len()).unwrap(), v);
        // The wrong length, a damaged frame: errors, never other bytes.
        assert_eq!(
            c.decompress(Codec::Zstd, &z, v.len() - 1),
            Err(Corrupt::Compression)
        );
        let mut bad = z.clone();
        bad.truncate(z.len() / 2);
        assert_eq!(
            c.decompress(Codec::Zstd, &bad, v.len()),
            Err(Corrupt::Compression)
        );
    }

    #[test]
    fn lz4_keeps_what_has_no_repeats_raw() {
        let c = Coder::new(Codec::Lz4);
        let v = letters(9, 1024);
        assert_eq!(compress(&c, &v, v.len() - v.len() / 8), None);
        let rep = b"{\"user\":1234,\"name\":\"abc\"}".repeat(40);
        let z = compress(&c, &rep, rep.len() / 2).expect("repeats compress");
        assert_eq!(c.decompress(Codec::Lz4, &z, rep.len()).unwrap(), rep);
        assert_eq!(
            c.decompress(Codec::Lz4, &z, rep.len() + 5),
            Err(Corrupt::Compression)
        );
    }

    #[test]
    fn short_values_and_none_are_not_compressed() {
        assert_eq!(compress(&Coder::new(Codec::Zstd), &[b'a'; 100], 90), None);
        assert_eq!(
            compress(&Coder::new(Codec::None), &[b'a'; 4000], 3000),
            None
        );
        assert_eq!("ZSTD".parse::<Codec>(), Ok(Codec::Zstd));
        assert!("gzip".parse::<Codec>().is_err());
    }
}

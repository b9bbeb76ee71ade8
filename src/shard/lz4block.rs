//! LZ4 blocks for packed collections kept compressed in RAM (list nodes away from the ends,
//! small hashes): compressed through one scratch buffer per thread, so the stored block is
//! allocated once at its exact size (a block grown and cut back leaves holes in the heap).
//!
//! Never: stores a block that does not save an eighth of its input.

use std::cell::RefCell;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// `header` then `input` LZ4-compressed (lz4_flex's block format), when that is at most seven
/// eighths of `input`; None otherwise.
pub fn compress(input: &[u8], header: &[u8]) -> Option<Box<[u8]>> {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let max = lz4_flex::block::get_maximum_output_size(input.len());
        if s.len() < max {
            s.resize(max, 0);
        }
        let n = lz4_flex::block::compress_into(input, &mut s[..max]).ok()?;
        if header.len() + n > input.len() - input.len() / 8 {
            return None;
        }
        let mut block = Vec::with_capacity(header.len() + n);
        block.extend_from_slice(header);
        block.extend_from_slice(&s[..n]);
        Some(block.into_boxed_slice())
    })
}

/// The `raw` bytes a block from [`compress`] (without its header) holds.
pub fn decompress(block: &[u8], raw: usize) -> Vec<u8> {
    // Only `compress` makes these blocks, from exactly `raw` bytes, and they stay in RAM (or
    // come back from the tier checksummed): a block that does not decode is a bug here, never
    // a client's or a disk's doing.
    lz4_flex::block::decompress(block, raw).expect("a block compress made decodes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_does_not_shrink() {
        let text: Vec<u8> = (0..500)
            .flat_map(|i| format!("field{i}").into_bytes())
            .collect();
        let block = compress(&text, b"hd").expect("repetitive text shrinks");
        assert_eq!(&block[..2], b"hd");
        assert!(block.len() < text.len() * 3 / 4);
        assert_eq!(decompress(&block[2..], text.len()), text);
        let mut x = 1u64;
        let noise: Vec<u8> = (0..600)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        assert!(compress(&noise, b"").is_none());
    }
}

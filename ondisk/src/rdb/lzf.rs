//! LZF, the compression Redis uses for strings in RDB files.
//!
//! The stream is a sequence of runs. A control byte below 32 starts a literal run of
//! `ctrl + 1` bytes. Otherwise the top 3 bits are a match length minus 2 (7 means "add the next
//! byte"), and the low 5 bits with the following byte are a back-reference distance minus 1
//! (at most 8192). The decompressor checks every bound and reports malformed input as an error.

/// Longest match one back-reference can express.
const MAX_MATCH: usize = 7 + 255 + 2;
/// Farthest back a reference can point.
const MAX_OFFSET: usize = 1 << 13;
/// Most output one input byte can produce (a 3-byte reference making 264 bytes).
const MAX_EXPANSION: usize = MAX_MATCH.div_ceil(3);

/// Why an LZF stream does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LzfError {
    /// The input ends inside a run.
    InputTooShort,
    /// The output would exceed the declared length.
    OutputTooLong,
    /// The output came out shorter than declared.
    OutputTooShort,
    /// A back-reference points before the start of the output.
    BadReference,
    /// The declared length is more than the input could ever expand to.
    ImpossibleLength,
}

impl std::fmt::Display for LzfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LzfError::InputTooShort => "LZF input ends inside a run",
            LzfError::OutputTooLong => "LZF output longer than declared",
            LzfError::OutputTooShort => "LZF output shorter than declared",
            LzfError::BadReference => "LZF back-reference before the start",
            LzfError::ImpossibleLength => "LZF declared length impossible for its input",
        })
    }
}

/// Decompresses `input`, which must expand to exactly `raw_len` bytes. Allocates at most
/// `raw_len`, and refuses a `raw_len` the input could not possibly produce.
pub fn lzf_decompress(input: &[u8], raw_len: usize) -> Result<Vec<u8>, LzfError> {
    if raw_len > input.len().saturating_mul(MAX_EXPANSION) {
        return Err(LzfError::ImpossibleLength);
    }
    let mut out = Vec::with_capacity(raw_len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(ip..ip + n).ok_or(LzfError::InputTooShort)?;
            if out.len() + n > raw_len {
                return Err(LzfError::OutputTooLong);
            }
            out.extend_from_slice(lit);
            ip += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(ip).ok_or(LzfError::InputTooShort)?);
                ip += 1;
            }
            let low = usize::from(*input.get(ip).ok_or(LzfError::InputTooShort)?);
            ip += 1;
            let dist = ((ctrl & 0x1f) << 8) + low + 1;
            let len = len + 2;
            if dist > out.len() {
                return Err(LzfError::BadReference);
            }
            if out.len() + len > raw_len {
                return Err(LzfError::OutputTooLong);
            }
            let from = out.len() - dist;
            if dist >= len {
                out.extend_from_within(from..from + len);
            } else {
                // Overlapping copy: each byte may be one this run just wrote.
                for i in 0..len {
                    let b = out[from + i];
                    out.push(b);
                }
            }
        }
    }
    if out.len() != raw_len {
        return Err(LzfError::OutputTooShort);
    }
    Ok(out)
}

/// Compresses `input` with a greedy single-probe hash matcher. Returns `None` when the result
/// would not be smaller than the input (store it plain then).
pub fn lzf_compress(input: &[u8]) -> Option<Vec<u8>> {
    const HASH_BITS: u32 = 14;
    if input.len() < 4 {
        return None;
    }
    let mut out = Vec::with_capacity(input.len());
    // Position + 1 of the last occurrence of each 3-byte hash; 0 = none.
    let mut table = vec![0usize; 1 << HASH_BITS];
    let hash = |p: usize| {
        let v = u32::from(input[p]) << 16 | u32::from(input[p + 1]) << 8 | u32::from(input[p + 2]);
        (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
    };
    let mut lit_start = 0;
    let mut ip = 0;
    while ip + 2 < input.len() {
        let h = hash(ip);
        let cand = table[h];
        table[h] = ip + 1;
        if cand > 0 {
            let r = cand - 1;
            let dist = ip - r;
            if dist <= MAX_OFFSET && input[r..r + 3] == input[ip..ip + 3] {
                let max = MAX_MATCH.min(input.len() - ip);
                let mut len = 3;
                while len < max && input[r + len] == input[ip + len] {
                    len += 1;
                }
                push_literals(&mut out, &input[lit_start..ip]);
                let code = len - 2;
                let off = dist - 1;
                if code < 7 {
                    out.push(((code << 5) | (off >> 8)) as u8);
                } else {
                    out.push(((7 << 5) | (off >> 8)) as u8);
                    out.push((code - 7) as u8);
                }
                out.push((off & 0xff) as u8);
                ip += len;
                lit_start = ip;
                if out.len() >= input.len() {
                    return None;
                }
                continue;
            }
        }
        ip += 1;
    }
    push_literals(&mut out, &input[lit_start..]);
    (out.len() < input.len()).then_some(out)
}

fn push_literals(out: &mut Vec<u8>, mut lit: &[u8]) {
    while !lit.is_empty() {
        let n = lit.len().min(32);
        out.push((n - 1) as u8);
        out.extend_from_slice(&lit[..n]);
        lit = &lit[n..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_references_decode() {
        // "abc" literal, then a 6-byte match at distance 3: "abcabc".
        let data = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(lzf_decompress(&data, 9).unwrap(), b"abcabcabc");
        // Distance 1 repeats a single byte (overlapping copy); long form: 7 + 10 + 2 = 19.
        let data = [0, b'x', (7 << 5), 10, 0];
        assert_eq!(lzf_decompress(&data, 20).unwrap(), vec![b'x'; 20]);
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert_eq!(lzf_decompress(&[5, b'a'], 6), Err(LzfError::InputTooShort));
        assert_eq!(lzf_decompress(&[1 << 5], 3), Err(LzfError::InputTooShort));
        assert_eq!(lzf_decompress(&[(7 << 5)], 3), Err(LzfError::InputTooShort));
        assert_eq!(
            lzf_decompress(&[0, b'a', (1 << 5), 5], 4),
            Err(LzfError::BadReference)
        );
        assert_eq!(
            lzf_decompress(&[1, b'a', b'b'], 1),
            Err(LzfError::OutputTooLong)
        );
        assert_eq!(
            lzf_decompress(&[1, b'a', b'b'], 3),
            Err(LzfError::OutputTooShort)
        );
        assert_eq!(
            lzf_decompress(&[0, b'a', (1 << 5), 0], 5),
            Err(LzfError::OutputTooShort)
        );
        assert_eq!(
            lzf_decompress(&[0, b'a'], usize::MAX),
            Err(LzfError::ImpossibleLength)
        );
    }

    #[test]
    fn round_trip_of_compressible_and_random_data() {
        let mut seed = 99u64;
        let mut random = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u8
        };
        let mut samples: Vec<Vec<u8>> = vec![
            vec![b'a'; 1000],
            b"hello hello hello hello hello world".to_vec(),
            (0..100_000).map(|i| (i % 251) as u8).collect(),
        ];
        // Text-like data over a small alphabet: plenty of short matches.
        samples.push(
            (0..50_000)
                .map(|_| b"abcdefgh"[(random() % 8) as usize])
                .collect(),
        );
        for s in &samples {
            let c = lzf_compress(s).expect("compressible");
            assert!(c.len() < s.len());
            assert_eq!(&lzf_decompress(&c, s.len()).unwrap(), s);
        }
        let noise: Vec<u8> = (0..5000).map(|_| random()).collect();
        assert!(lzf_compress(&noise).is_none());
        assert!(lzf_compress(b"abc").is_none());
    }

    #[test]
    fn random_streams_never_panic() {
        let mut seed = 7u64;
        for _ in 0..50_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 40) as usize;
            let data: Vec<u8> = (0..len)
                .map(|i| (seed.rotate_left(i as u32 * 7) & 0xff) as u8)
                .collect();
            let raw_len = (seed >> 40) as usize % 300;
            if let Ok(out) = lzf_decompress(&data, raw_len) {
                assert_eq!(out.len(), raw_len);
            }
        }
    }
}

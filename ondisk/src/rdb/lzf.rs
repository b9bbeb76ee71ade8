//! LZF, the compression Redis uses for strings in RDB files.
//!
//! The stream is a sequence of runs. A control byte below 32 starts a literal run of
//! `ctrl + 1` bytes. Otherwise the top 3 bits are a match length minus 2 (7 means "add the next
//! byte"), and the low 5 bits with the following byte are a back-reference distance minus 1
//! (at most 8192). The decompressor checks every bound and reports malformed input as an error.

/// Longest match one back-reference can express.
const MAX_MATCH: usize = 7 + 255 + 2;
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

/// Compresses `input`; `None` when the result would not be smaller than the input (store it
/// plain then). See [`lzf_compress_within`].
pub fn lzf_compress(input: &[u8]) -> Option<Vec<u8>> {
    lzf_compress_within(input, input.len().saturating_sub(1))
}

/// Compresses `input` into at most `out_len` bytes, choosing the same matches as Redis'
/// liblzf (HLOG 16, VERY_FAST, a hash table that starts empty), so that a string Redis would
/// compress comes out byte for byte as Redis writes it; `None` when liblzf would give up
/// (the output does not fit in `out_len`, checked where liblzf checks it).
pub fn lzf_compress_within(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if input.len() < 3 || out_len == 0 {
        return None;
    }
    SLOTS.with(|slots| {
        let mut slots = slots.borrow_mut();
        slots.start(input.len());
        let out = compress_with(input, out_len, &mut slots);
        slots.finish(input.len());
        out
    })
}

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;

thread_local! {
    /// The compressor's hash table, kept between calls: most values are short, and clearing
    /// 64K slots for each would cost far more than compressing it.
    static SLOTS: std::cell::RefCell<Slots> =
        const { std::cell::RefCell::new(Slots { table: Vec::new(), base: 0 }) };
}

/// liblzf's table of where each hash slot was last seen. A call sees a slot as empty unless
/// the call itself wrote it: positions are stored as `base + position + 1`, and each call's
/// `base` is at or above all that calls before it stored, so the table starts empty for
/// every call without being cleared (but on wrap-around).
struct Slots {
    table: Vec<u32>,
    base: u32,
}

impl Slots {
    /// Readies the table for an input of `n` bytes.
    fn start(&mut self, n: usize) {
        if self.table.len() != HSIZE || self.base as u64 + n as u64 + 1 > u32::MAX as u64 {
            self.table.clear();
            self.table.resize(HSIZE, 0);
            self.base = 0;
        }
    }

    /// Position + 1 of the last place `slot` saw in this call; 0 = never.
    fn get(&self, slot: usize) -> usize {
        self.table[slot].saturating_sub(self.base) as usize
    }

    fn set(&mut self, slot: usize, pos: usize) {
        self.table[slot] = self.base + pos as u32 + 1;
    }

    /// Ends a call over `n` bytes: it stored at most `base + n`.
    fn finish(&mut self, n: usize) {
        self.base += n as u32;
    }
}

fn compress_with(input: &[u8], out_len: usize, table: &mut Slots) -> Option<Vec<u8>> {
    const MAX_LIT: usize = 1 << 5;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);
    let n = input.len();
    // liblzf's rolling hash of the last bytes (an unsigned int) and its slot function.
    let idx =
        |h: u32| (((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5))) as usize) & (HSIZE - 1);
    let next = |h: u32, p: usize| (h << 8) | u32::from(input[p + 2]);
    let mut out = vec![0u8; out_len + 1];
    let mut op = 1usize; // out[0] is the first run's control byte
    let mut lit = 0usize;
    let mut ip = 0usize;
    let mut hval = u32::from(input[0]) << 8 | u32::from(input[1]);
    while ip < n - 2 {
        hval = next(hval, ip);
        let slot = idx(hval);
        let cand = table.get(slot);
        table.set(slot, ip);
        let matched = cand > 1 && {
            let r = cand - 1;
            r < ip
                && ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        };
        if matched {
            let r = cand - 1;
            let off = ip - r - 1;
            let maxlen = (n - ip - 2).min(MAX_REF);
            if op + 4 >= out_len && op - usize::from(lit == 0) + 4 >= out_len {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            op -= usize::from(lit == 0);
            let mut len = 2;
            let mut done = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        done = true;
                        break;
                    }
                }
            }
            if !done {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1;
            ip += len + 1;
            if ip >= n - 2 {
                break;
            }
            ip -= 2;
            hval = u32::from(input[ip]) << 8 | u32::from(input[ip + 1]);
            hval = next(hval, ip);
            table.set(idx(hval), ip);
            ip += 1;
            hval = next(hval, ip);
            table.set(idx(hval), ip);
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < n {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
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
    fn a_call_sees_nothing_of_the_calls_before_it() {
        let text = b"strata strata strata keeps strata values strata".to_vec();
        // A fresh thread's first call: the table as liblzf starts it, empty.
        let t = text.clone();
        let first = std::thread::spawn(move || lzf_compress(&t)).join().unwrap();
        assert!(first.is_some());
        // After other inputs that fill the same slots, and across the table's wrap-around.
        for other in [&b"values strata keeps values"[..], &[b'x'; 3000][..]] {
            lzf_compress(other);
            assert_eq!(lzf_compress(&text), first);
        }
        SLOTS.with(|s| s.borrow_mut().base = u32::MAX - 20);
        lzf_compress(b"strata keeps values strata keeps");
        assert_eq!(lzf_compress(&text), first);
        assert_eq!(lzf_compress(&text), first);
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

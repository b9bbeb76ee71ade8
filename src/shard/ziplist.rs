//! Redis' old ziplist, read only: RDB files written before Redis 7 keep small hashes as ziplists
//! (RDB type 13), which are turned into listpacks on load, as Redis does.
//!
//! ```text
//! zlbytes u32 LE | zltail u32 LE | zllen u16 LE | entry* | 0xFF
//! entry = prevlen (1 byte, or 0xFE + u32 LE) | encoding [+ data]
//! encoding: 00pppppp            string of up to 63 bytes
//!           01pppppp qqqqqqqq   string of up to 16383 bytes (length big end first)
//!           10000000 + u32 BE   string of any length
//!           11000000 / 11010000 / 11100000   int16 / int32 / int64, little-endian
//!           11110000 / 11111110              int24 / int8
//!           1111xxxx            an immediate 0..=12 (xxxx - 1)
//! ```
//!
//! Never: reads outside the block, or takes a block whose header, lengths or back-links
//! disagree with its entries.

/// The elements of a ziplist as strings (integers as their decimal text); None when the block
/// is damaged.
pub fn elements(zl: &[u8]) -> Option<Vec<Vec<u8>>> {
    if zl.len() < 11 || *zl.last()? != 0xFF {
        return None;
    }
    let total = u32::from_le_bytes(zl[0..4].try_into().ok()?) as usize;
    let tail = u32::from_le_bytes(zl[4..8].try_into().ok()?) as usize;
    let count = u16::from_le_bytes(zl[8..10].try_into().ok()?);
    if total != zl.len() {
        return None;
    }
    let end = zl.len() - 1;
    let mut out = Vec::new();
    let (mut pos, mut prev_len, mut last) = (10usize, 0usize, 10usize);
    while pos < end {
        let start = pos;
        let (prevlen, n) = match *zl.get(pos)? {
            0xFE => (
                u32::from_le_bytes(zl.get(pos + 1..pos + 5)?.try_into().ok()?) as usize,
                5,
            ),
            0xFF => return None,
            b => (usize::from(b), 1),
        };
        if prevlen != prev_len {
            return None;
        }
        pos += n;
        let enc = *zl.get(pos)?;
        let int = |bytes: &[u8]| -> i64 {
            let mut b = [0u8; 8];
            b[..bytes.len()].copy_from_slice(bytes);
            if bytes.last().is_some_and(|&x| x & 0x80 != 0) {
                b[bytes.len()..].fill(0xFF);
            }
            i64::from_le_bytes(b)
        };
        let (value, next) = match enc >> 6 {
            0 => {
                let l = usize::from(enc & 0x3F);
                (zl.get(pos + 1..pos + 1 + l)?.to_vec(), pos + 1 + l)
            }
            1 => {
                let l = usize::from(enc & 0x3F) << 8 | usize::from(*zl.get(pos + 1)?);
                (zl.get(pos + 2..pos + 2 + l)?.to_vec(), pos + 2 + l)
            }
            2 => {
                if enc != 0x80 {
                    return None;
                }
                let l = u32::from_be_bytes(zl.get(pos + 1..pos + 5)?.try_into().ok()?) as usize;
                let data_end = (pos + 5).checked_add(l)?;
                (zl.get(pos + 5..data_end)?.to_vec(), data_end)
            }
            _ => {
                let (v, size) = match enc {
                    0xC0 => (int(zl.get(pos + 1..pos + 3)?), 2),
                    0xD0 => (int(zl.get(pos + 1..pos + 5)?), 4),
                    0xE0 => (int(zl.get(pos + 1..pos + 9)?), 8),
                    0xF0 => (int(zl.get(pos + 1..pos + 4)?), 3),
                    0xFE => (int(zl.get(pos + 1..pos + 2)?), 1),
                    0xF1..=0xFD => (i64::from(enc & 0x0F) - 1, 0),
                    _ => return None,
                };
                (v.to_string().into_bytes(), pos + 1 + size)
            }
        };
        if next > end {
            return None;
        }
        out.push(value);
        prev_len = next - start;
        last = start;
        pos = next;
    }
    let tail_ok = if out.is_empty() {
        tail == 10
    } else {
        tail == last
    };
    let count_ok = count == u16::MAX || usize::from(count) == out.len();
    (tail_ok && count_ok).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist built as Redis builds one (for tests).
    fn build(items: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut last = 10;
        for it in items {
            let start = 10 + body.len();
            last = start;
            let mut e = Vec::new();
            if prev < 254 {
                e.push(prev as u8);
            } else {
                e.push(0xFE);
                e.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            match std::str::from_utf8(it)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
            {
                Some(v) if (0..=12).contains(&v) => e.push(0xF1 + v as u8),
                Some(v) if i8::try_from(v).is_ok() => {
                    e.push(0xFE);
                    e.push(v as i8 as u8);
                }
                Some(v) => {
                    e.push(0xE0);
                    e.extend_from_slice(&v.to_le_bytes());
                }
                None if it.len() < 64 => {
                    e.push(it.len() as u8);
                    e.extend_from_slice(it);
                }
                None => {
                    e.push(0x40 | (it.len() >> 8) as u8);
                    e.push(it.len() as u8);
                    e.extend_from_slice(it);
                }
            }
            prev = e.len();
            body.extend_from_slice(&e);
        }
        let mut zl = Vec::new();
        zl.extend_from_slice(&((11 + body.len()) as u32).to_le_bytes());
        zl.extend_from_slice(&(last as u32).to_le_bytes());
        zl.extend_from_slice(&(items.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xFF);
        zl
    }

    #[test]
    fn reads_every_encoding_and_refuses_damage() {
        let long = vec![b'z'; 300];
        let items: Vec<&[u8]> = vec![b"a", b"5", b"-100", b"123456789012", b"hello", &long, b"12"];
        let zl = build(&items);
        let got = elements(&zl).expect("a sound ziplist");
        assert_eq!(got, items.iter().map(|i| i.to_vec()).collect::<Vec<_>>());
        assert_eq!(elements(&build(&[])), Some(vec![]));
        for i in 0..zl.len() {
            let mut bad = zl.clone();
            bad[i] ^= 0x41;
            let _ = elements(&bad);
        }
        assert_eq!(elements(&zl[..zl.len() - 1]), None);
    }
}

//! memcached's wire formats: the text protocol with its meta commands ([`text`], [`meta`]) and
//! the binary protocol ([`binary`]): bytes into requests, results into bytes, as memcached 1.6
//! writes them.
//!
//! Never: knows about storage, sessions or sockets; panics or allocates without bound on any
//! input.

pub mod binary;
pub mod meta;
pub mod text;

/// Bytes memcached counts per item beyond key and value (its header, CAS and the CRLF), so
/// that `--max_item_size` cuts where memcached's item size limit does.
pub const ITEM_OVERHEAD: u64 = 56;

/// Whether an item of this key and value length fits `--max_item_size`.
pub fn item_fits(key_len: usize, vlen: u64, max_item: u64) -> bool {
    (key_len as u64)
        .saturating_add(vlen)
        .saturating_add(ITEM_OVERHEAD)
        <= max_item
}

/// C's isspace.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// memcached's safe_strtoull over a stored value (incr/decr): leading spaces, an optional
/// sign, digits, then the end or a space; a negative number is refused.
pub fn parse_u64(v: &[u8]) -> Option<u64> {
    text::safe_strtoull(v)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (meta's `b` keys).
pub fn base64_encode(src: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(src.len().div_ceil(3) * 4);
    for c in src.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if c.len() > 1 {
            B64[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if c.len() > 2 {
            B64[n as usize & 63]
        } else {
            b'='
        });
    }
    out
}

/// Decodes base64 as memcached's base64_decode: characters outside the alphabet are skipped,
/// the rest must come in whole groups of four. None when nothing decodes.
pub fn base64_decode(src: &[u8]) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            b'=' => Some(0),
            _ => None,
        }
    };
    let chars: Vec<u8> = src.iter().copied().filter(|&c| val(c).is_some()).collect();
    if chars.is_empty() || !chars.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(chars.len() / 4 * 3);
    for g in chars.chunks(4) {
        let v: Vec<u8> = g.iter().map(|&c| val(c).unwrap_or(0)).collect();
        let pad = g.iter().filter(|&&c| c == b'=').count();
        let bytes = [
            (v[0] << 2) | (v[1] >> 4),
            (v[1] << 4) | (v[2] >> 2),
            (v[2] << 6) | v[3],
        ];
        out.extend_from_slice(&bytes[..3 - pad.min(2)]);
        if pad > 0 {
            break;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for s in [&b"a"[..], b"ab", b"abc", b"\x00\xff key"] {
            assert_eq!(base64_decode(&base64_encode(s)).as_deref(), Some(s));
        }
        assert_eq!(base64_encode(b"foo"), b"Zm9v");
        assert_eq!(base64_decode(b"abc"), None);
    }
}

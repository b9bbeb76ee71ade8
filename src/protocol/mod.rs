//! The RESP wire format: [`resp`] turns request bytes into argument vectors, [`reply`] turns
//! command results into RESP2 or RESP3 bytes. Nothing here knows about commands or storage.
//!
//! Never: knows about commands, sessions or storage; panics on any input.

pub mod memcache;
pub mod reply;
pub mod resp;

pub use reply::Reply;
pub use resp::{parse_request, Frame, ParseError, Parsed, Request, RequestParser};

/// Largest bulk string a client may send (Redis' proto-max-bulk-len default, 512 MB).
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Largest number of arguments in one multibulk request (Redis' limit).
pub const MAX_MULTIBULK_LEN: i64 = 1024 * 1024;
/// Longest inline request or length line accepted before the closing CRLF.
pub const MAX_INLINE_LEN: usize = 64 * 1024;

/// Parses an integer exactly as Redis' string2ll: optional '-', no '+', no spaces, no leading
/// zeros (except "0" itself), no overflow.
pub fn string2ll(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i128).wrapping_neg() as i64)
    } else {
        i64::try_from(v).ok()
    }
}

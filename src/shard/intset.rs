//! Redis' intset, kept narrower in RAM: the packed layout of a small set of integers, sorted,
//! each in the set's one width, widened for all when a larger value arrives.
//!
//! ```text
//! width u8 | redis width u8 (0: same as width) | 0 u16 | length u32 LE | values, LE, ascending
//! ```
//! Redis' own bytes (width 2, 4 or 8, then three zero bytes) are a block of this layout as they
//! are. In RAM a set takes the fewest bytes per value its values need (1 to 8: a set of
//! integers below 8M takes 3 bytes a value where Redis takes 4), and remembers in the second
//! byte the width Redis would have given it (Redis only ever widens), so that [`to_redis`]
//! gives back Redis' bytes exactly (DUMP, RDB, snapshots).
//!
//! A block from outside (RESTORE, an RDB file) is checked whole by [`validate`] first, and
//! narrowed by [`compact`].
//!
//! Never: panics on a block that passed [`validate`]; leaves values unsorted or repeated; lets
//! [`to_redis`] give other bytes than redis-server holds for the same commands.

use std::borrow::Cow;

const HEADER: usize = 8;

/// An empty intset (one byte a value; 16-bit for Redis, as it starts one).
pub fn new() -> Vec<u8> {
    let mut s = vec![0u8; HEADER];
    set_widths(&mut s, 1, 2);
    s
}

fn width(set: &[u8]) -> usize {
    set.first().map_or(2, |&w| usize::from(w).clamp(1, 8))
}

/// The width Redis keeps this set in (2, 4 or 8).
fn redis_width(set: &[u8]) -> usize {
    match set.get(1) {
        Some(&r) if r != 0 => usize::from(r),
        _ => redis_width_for(width(set)),
    }
}

/// Redis' width for values that need `w` bytes.
fn redis_width_for(w: usize) -> usize {
    match w {
        0..=2 => 2,
        3 | 4 => 4,
        _ => 8,
    }
}

fn set_widths(set: &mut [u8], w: usize, redis: usize) {
    set[0] = w as u8;
    set[1] = if redis == w { 0 } else { redis as u8 };
    set[2] = 0;
    set[3] = 0;
}

/// Number of values.
pub fn len(set: &[u8]) -> usize {
    set.get(4..8)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

#[inline]
fn read(b: &[u8], w: usize) -> i64 {
    match w {
        2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        8 => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        _ => {
            let mut buf = [0u8; 8];
            buf[..w].copy_from_slice(&b[..w]);
            // Sign-extend from the top bit of the last stored byte.
            let shift = 64 - 8 * w as u32;
            (i64::from_le_bytes(buf) << shift) >> shift
        }
    }
}

/// The value at index `i` (ascending order).
pub fn get(set: &[u8], i: usize) -> Option<i64> {
    let w = width(set);
    let b = set.get(HEADER + i * w..HEADER + (i + 1) * w)?;
    Some(read(b, w))
}

/// Every value, ascending.
pub fn iter(set: &[u8]) -> impl Iterator<Item = i64> + '_ {
    (0..len(set)).map_while(move |i| get(set, i))
}

/// Ok(index) when `v` is in the set, Err(where it would go) otherwise.
pub fn search(set: &[u8], v: i64) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, len(set));
    while lo < hi {
        let mid = (lo + hi) / 2;
        match get(set, mid) {
            Some(x) if x < v => lo = mid + 1,
            Some(x) if x > v => hi = mid,
            Some(_) => return Ok(mid),
            None => break,
        }
    }
    Err(lo)
}

pub fn contains(set: &[u8], v: i64) -> bool {
    search(set, v).is_ok()
}

/// The fewest bytes that hold `v` as a signed little-endian integer.
fn width_for(v: i64) -> usize {
    let bits = if v < 0 {
        64 - v.leading_ones()
    } else {
        64 - v.leading_zeros()
    };
    // One more bit for the sign, rounded up to whole bytes.
    (bits as usize + 1).div_ceil(8).max(1)
}

fn put(out: &mut Vec<u8>, v: i64, w: usize) {
    out.extend_from_slice(&v.to_le_bytes()[..w]);
}

/// The same values `w` bytes wide (`w` at least as wide as every value needs).
fn rewidth(set: &[u8], w: usize, redis: usize, extra: usize) -> Vec<u8> {
    let n = len(set);
    let mut wide = Vec::with_capacity(HEADER + (n + extra) * w);
    wide.extend_from_slice(&[0u8; 4]);
    set_widths(&mut wide, w, redis);
    wide.extend_from_slice(&(n as u32).to_le_bytes());
    for x in iter(set) {
        put(&mut wide, x, w);
    }
    wide
}

/// Adds `v`; false when it was there already. Widens every value when `v` needs more bytes.
pub fn insert(set: &mut Vec<u8>, v: i64) -> bool {
    let at = match search(set, v) {
        Ok(_) => return false,
        Err(at) => at,
    };
    let (w, need) = (width(set), width_for(v));
    if need > w {
        let redis = redis_width(set).max(redis_width_for(need));
        *set = rewidth(set, need, redis, 1);
        return insert(set, v);
    }
    let n = len(set);
    let pos = HEADER + at * w;
    // Grow to the exact size: the block is stored exactly as long as it is.
    set.reserve_exact(w);
    set.extend_from_slice(&[0u8; 8][..w]);
    set.copy_within(pos..pos + (n - at) * w, pos + w);
    set[pos..pos + w].copy_from_slice(&v.to_le_bytes()[..w]);
    set[4..8].copy_from_slice(&((n + 1) as u32).to_le_bytes());
    true
}

/// Removes `v`; false when it was not there.
pub fn remove(set: &mut Vec<u8>, v: i64) -> bool {
    let Ok(at) = search(set, v) else {
        return false;
    };
    let w = width(set);
    let n = len(set);
    set.drain(HEADER + at * w..HEADER + (at + 1) * w);
    set[4..8].copy_from_slice(&((n - 1) as u32).to_le_bytes());
    true
}

/// Redis' bytes for this set: the same block when it is kept at Redis' width already.
pub fn to_redis(set: &[u8]) -> Cow<'_, [u8]> {
    let (w, redis) = (width(set), redis_width(set));
    if set.len() < HEADER || w == redis && set.get(1..4).is_some_and(|b| b == [0, 0, 0]) {
        Cow::Borrowed(set)
    } else {
        Cow::Owned(rewidth(set, redis, redis, 0))
    }
}

/// A block that passed [`validate`] (Redis' bytes), narrowed to the width its values need; it
/// gives back the same bytes through [`to_redis`].
pub fn compact(set: Vec<u8>) -> Vec<u8> {
    let need = iter(&set).map(width_for).max().unwrap_or(1);
    let (w, redis) = (width(&set), redis_width(&set));
    if need >= w {
        return set;
    }
    rewidth(&set, need, redis, 0)
}

/// Checks an intset from outside whole: a known width, the length matching the bytes, the
/// values strictly ascending. (A set wider than its values need is accepted, as Redis does.)
pub fn validate(set: &[u8]) -> bool {
    if set.len() < HEADER {
        return false;
    }
    // Redis' widths only: the narrower ones are this server's own.
    if !matches!(set.get(..4), Some([2 | 4 | 8, 0, 0, 0])) {
        return false;
    }
    let w = width(set);
    let n = len(set);
    if n.checked_mul(w).and_then(|b| b.checked_add(HEADER)) != Some(set.len()) {
        return false;
    }
    let mut prev = None;
    for v in iter(set) {
        if prev.is_some_and(|p| p >= v) {
            return false;
        }
        prev = Some(v);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_and_widened_as_needed() {
        let mut s = new();
        for v in [5, -3, 100, 5, 7] {
            insert(&mut s, v);
        }
        assert_eq!(iter(&s).collect::<Vec<_>>(), vec![-3, 5, 7, 100]);
        assert_eq!((width(&s), redis_width(&s)), (1, 2));
        assert!(insert(&mut s, 70_000));
        assert_eq!((width(&s), redis_width(&s)), (3, 4));
        assert!(insert(&mut s, i64::MIN));
        assert_eq!((width(&s), redis_width(&s)), (8, 8));
        assert_eq!(
            iter(&s).collect::<Vec<_>>(),
            vec![i64::MIN, -3, 5, 7, 100, 70_000]
        );
        assert!(validate(&to_redis(&s)));
        assert!(remove(&mut s, 7) && !remove(&mut s, 7));
        assert!(contains(&s, 70_000) && !contains(&s, 8));
        assert_eq!(len(&s), 5);
        assert!(validate(&to_redis(&s)));
    }

    #[test]
    fn every_width_reads_back_its_values() {
        for w in 1..=8u32 {
            let hi = if w == 8 {
                i64::MAX
            } else {
                (1i64 << (8 * w - 1)) - 1
            };
            let lo = if w == 8 {
                i64::MIN
            } else {
                -(1i64 << (8 * w - 1))
            };
            assert_eq!(width_for(hi), w as usize, "{hi}");
            assert_eq!(width_for(lo), w as usize, "{lo}");
            let mut s = new();
            for v in [hi, lo, 0, -1, 1] {
                assert!(insert(&mut s, v));
            }
            assert_eq!(iter(&s).collect::<Vec<_>>(), vec![lo, -1, 0, 1, hi]);
            assert!(contains(&s, hi) && contains(&s, lo) && !contains(&s, 2));
        }
    }

    #[test]
    fn redis_width_is_kept_through_narrowing_and_removal() {
        // Redis never narrows: a set widened to 64 bits stays so after the wide value goes.
        let mut s = new();
        for v in [1, 2, 1 << 40] {
            insert(&mut s, v);
        }
        remove(&mut s, 1 << 40);
        let redis = to_redis(&s).into_owned();
        assert_eq!(&redis[..8], b"\x08\x00\x00\x00\x02\x00\x00\x00");
        assert!(validate(&redis));
        // Loaded back, it narrows in RAM and still gives Redis' bytes.
        let loaded = compact(redis.clone());
        assert_eq!(width(&loaded), 1);
        assert_eq!(to_redis(&loaded).as_ref(), &redis[..]);
        assert_eq!(iter(&loaded).collect::<Vec<_>>(), vec![1, 2]);
        // A block at Redis' width already is handed out as it is.
        assert!(matches!(to_redis(&redis), Cow::Borrowed(_)));
    }

    #[test]
    fn redis_bytes_for_a_small_set() {
        // SADD s 3 1 2 on redis-server 7 gives this intset.
        let mut s = new();
        for v in [3, 1, 2] {
            insert(&mut s, v);
        }
        assert_eq!(
            to_redis(&s).as_ref(),
            b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00"
        );
        // In RAM, a byte a value.
        assert_eq!(s.len(), 8 + 3);
    }

    #[test]
    fn damaged_sets_are_refused() {
        let mut s = new();
        for v in [1, 2, 3] {
            insert(&mut s, v);
        }
        assert!(!validate(&s), "the narrow form is not Redis'");
        let s = to_redis(&s).into_owned();
        assert!(validate(&s));
        assert!(!validate(&s[..s.len() - 1]));
        let mut unsorted = s.clone();
        unsorted.swap(8, 10);
        assert!(!validate(&unsorted));
        let mut bad_width = s.clone();
        bad_width[0] = 3;
        assert!(!validate(&bad_width));
        let mut bad_len = s.clone();
        bad_len[4] = 200;
        assert!(!validate(&bad_len));
        assert!(!validate(b"\x02\x00"));
    }
}

//! Redis' intset, byte for byte: the packed layout of a small set of integers, sorted, each in
//! the set's one width (2, 4 or 8 bytes, widened for all when a larger value arrives).
//!
//! ```text
//! encoding u32 LE (2, 4 or 8) | length u32 LE | values, little-endian, ascending, no repeats
//! ```
//! A block from outside (RESTORE, an RDB file) is checked whole by [`validate`] first.
//!
//! Never: panics on a block that passed [`validate`]; leaves values unsorted or repeated.

const HEADER: usize = 8;

/// An empty intset (16-bit).
pub fn new() -> Vec<u8> {
    let mut s = Vec::with_capacity(HEADER);
    s.extend_from_slice(&2u32.to_le_bytes());
    s.extend_from_slice(&0u32.to_le_bytes());
    s
}

fn width(set: &[u8]) -> usize {
    set.get(..4)
        .map_or(2, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Number of values.
pub fn len(set: &[u8]) -> usize {
    set.get(4..8)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// The value at index `i` (ascending order).
pub fn get(set: &[u8], i: usize) -> Option<i64> {
    let w = width(set);
    let b = set.get(HEADER + i * w..HEADER + (i + 1) * w)?;
    Some(match w {
        2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    })
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

fn width_for(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

fn put(out: &mut Vec<u8>, v: i64, w: usize) {
    match w {
        2 => out.extend_from_slice(&(v as i16).to_le_bytes()),
        4 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        _ => out.extend_from_slice(&v.to_le_bytes()),
    }
}

/// Adds `v`; false when it was there already. Widens every value when `v` needs more bytes.
pub fn insert(set: &mut Vec<u8>, v: i64) -> bool {
    let at = match search(set, v) {
        Ok(_) => return false,
        Err(at) => at,
    };
    let (w, need) = (width(set), width_for(v));
    let n = len(set);
    if need > w {
        let mut wide = Vec::with_capacity(HEADER + (n + 1) * need);
        wide.extend_from_slice(&(need as u32).to_le_bytes());
        wide.extend_from_slice(&((n + 1) as u32).to_le_bytes());
        for (i, x) in iter(set).enumerate() {
            if i == at {
                put(&mut wide, v, need);
            }
            put(&mut wide, x, need);
        }
        if at == n {
            put(&mut wide, v, need);
        }
        *set = wide;
        return true;
    }
    let mut bytes = Vec::with_capacity(w);
    put(&mut bytes, v, w);
    let pos = HEADER + at * w;
    set.splice(pos..pos, bytes);
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

/// Checks an intset from outside whole: a known width, the length matching the bytes, the
/// values strictly ascending. (A set wider than its values need is accepted, as Redis does.)
pub fn validate(set: &[u8]) -> bool {
    if set.len() < HEADER {
        return false;
    }
    let w = width(set);
    if !matches!(w, 2 | 4 | 8) {
        return false;
    }
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
        assert_eq!(width(&s), 2);
        assert!(insert(&mut s, 70_000));
        assert_eq!(width(&s), 4);
        assert!(insert(&mut s, i64::MIN));
        assert_eq!(width(&s), 8);
        assert_eq!(
            iter(&s).collect::<Vec<_>>(),
            vec![i64::MIN, -3, 5, 7, 100, 70_000]
        );
        assert!(validate(&s));
        assert!(remove(&mut s, 7) && !remove(&mut s, 7));
        assert!(contains(&s, 70_000) && !contains(&s, 8));
        assert_eq!(len(&s), 5);
        assert!(validate(&s));
    }

    #[test]
    fn redis_bytes_for_a_small_set() {
        // SADD s 3 1 2 on redis-server 7 gives this intset.
        let mut s = new();
        for v in [3, 1, 2] {
            insert(&mut s, v);
        }
        assert_eq!(
            s,
            b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00".to_vec()
        );
    }

    #[test]
    fn damaged_sets_are_refused() {
        let mut s = new();
        for v in [1, 2, 3] {
            insert(&mut s, v);
        }
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

//! Redis' listpack, byte for byte: the packed layout of small hashes, lists, sets and sorted
//! sets (`Value::Packed`), so RDB files and DUMP payloads carry it as it is, both ways.
//!
//! ```text
//! total_bytes u32 LE | count u16 LE (65535: count by walking) | entry* | 0xFF
//! entry = encoding+data | backlen (the length of encoding+data, 1-5 bytes, read backwards)
//! encoding: 0xxxxxxx           7-bit unsigned int
//!           10xxxxxx + data    string of up to 63 bytes
//!           110xxxxx yyyyyyyy  13-bit signed int
//!           1110xxxx yyyyyyyy  string of up to 4095 bytes (length big end first)
//!           11110000 + u32 LE  string of any length
//!           11110001/2/3/4     16/24/32/64-bit signed int, little-endian
//! ```
//! A string that reads as a canonical integer is stored as that integer, as Redis does.
//!
//! Entries are addressed by their byte offset. Everything here works on plain byte slices and
//! vectors; a block that came from outside (RESTORE, an RDB file) is checked whole by
//! [`validate`] before anything else reads it.
//!
//! Never: panics or reads out of bounds on a block that passed [`validate`]; changes a block
//! in a way that leaves its header wrong.

/// The header: total bytes (u32) and element count (u16).
pub const HEADER: usize = 6;
const EOF: u8 = 0xFF;
/// The count field's "too many to count here" value.
const COUNT_UNKNOWN: u16 = u16::MAX;

/// One element as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Element<'_> {
    /// The element as Redis would reply with it (an integer as its decimal text).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Element::Int(v) => v.to_string().into_bytes(),
            Element::Str(s) => s.to_vec(),
        }
    }

    /// Whether it equals the string `s` as a client would compare them.
    pub fn eq_bytes(self, s: &[u8]) -> bool {
        match self {
            Element::Str(v) => v == s,
            Element::Int(v) => crate::protocol::string2ll(s) == Some(v),
        }
    }
}

/// An empty listpack.
pub fn new() -> Vec<u8> {
    let mut lp = Vec::with_capacity(HEADER + 1);
    lp.extend_from_slice(&((HEADER + 1) as u32).to_le_bytes());
    lp.extend_from_slice(&0u16.to_le_bytes());
    lp.push(EOF);
    lp
}

/// How a value is encoded: as an integer when it is one's canonical text.
fn as_int(v: &[u8]) -> Option<i64> {
    if v.len() > 20 {
        return None;
    }
    crate::protocol::string2ll(v)
}

/// The encoding+data bytes of `v`.
fn encode(v: &[u8], out: &mut Vec<u8>) {
    if let Some(i) = as_int(v) {
        encode_int(i, out);
        return;
    }
    let n = v.len();
    if n < 64 {
        out.push(0x80 | n as u8);
    } else if n < 4096 {
        out.push(0xE0 | (n >> 8) as u8);
        out.push(n as u8);
    } else {
        out.push(0xF0);
        out.extend_from_slice(&(n as u32).to_le_bytes());
    }
    out.extend_from_slice(v);
}

fn encode_int(i: i64, out: &mut Vec<u8>) {
    if (0..=127).contains(&i) {
        out.push(i as u8);
    } else if (-4096..=4095).contains(&i) {
        let u = (i as u16) & 0x1FFF;
        out.push(0xC0 | (u >> 8) as u8);
        out.push(u as u8);
    } else if i16::try_from(i).is_ok() {
        out.push(0xF1);
        out.extend_from_slice(&(i as i16).to_le_bytes());
    } else if (-(1 << 23)..(1 << 23)).contains(&i) {
        out.push(0xF2);
        out.extend_from_slice(&(i as i32).to_le_bytes()[..3]);
    } else if i32::try_from(i).is_ok() {
        out.push(0xF3);
        out.extend_from_slice(&(i as i32).to_le_bytes());
    } else {
        out.push(0xF4);
        out.extend_from_slice(&i.to_le_bytes());
    }
}

/// The backlen bytes for an entry whose encoding+data is `l` bytes long.
fn encode_backlen(l: usize, out: &mut Vec<u8>) {
    let l = l as u64;
    let groups = match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    };
    for g in (0..groups).rev() {
        let byte = ((l >> (7 * g)) & 127) as u8;
        // Every byte but the first written (the most significant) carries the high bit.
        out.push(if g == groups - 1 { byte } else { byte | 128 });
    }
}

/// A whole entry (encoding, data, backlen) for `v`.
pub fn entry_bytes(v: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(v.len() + 11);
    push_entry(v, &mut e);
    e
}

/// Appends the whole entry for `v` to `out`.
fn push_entry(v: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    encode(v, out);
    let l = out.len() - start;
    encode_backlen(l, out);
}

/// The length of `v`'s encoding+data.
fn encoded_len(v: &[u8]) -> usize {
    if let Some(i) = as_int(v) {
        return match i {
            0..=127 => 1,
            -4096..=4095 => 2,
            _ if i16::try_from(i).is_ok() => 3,
            _ if (-(1 << 23)..(1 << 23)).contains(&i) => 4,
            _ if i32::try_from(i).is_ok() => 5,
            _ => 9,
        };
    }
    let n = v.len();
    n + if n < 64 {
        1
    } else if n < 4096 {
        2
    } else {
        5
    }
}

/// The size in bytes of the entry `v` would take.
pub fn entry_size(v: &[u8]) -> usize {
    let l = encoded_len(v);
    l + backlen_size(l)
}

/// Makes room for `add` more bytes: by about an eighth of the block at a time rather than
/// doubling, so that a block kept as a vector (a list node) carries little spare capacity.
fn reserve(lp: &mut Vec<u8>, add: usize) {
    if lp.capacity() - lp.len() < add {
        lp.reserve_exact(add.max(lp.len() / 8).max(16));
    }
}

/// Reads the entry at `pos`: (element, size of encoding+data). None when it runs past `lp`
/// or its encoding is unknown.
fn read_at(lp: &[u8], pos: usize) -> Option<(Element<'_>, usize)> {
    let b = *lp.get(pos)?;
    let rest = lp.get(pos..)?;
    let int_le = |n: usize| -> Option<i64> {
        let bytes = rest.get(1..1 + n)?;
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(bytes);
        // Sign-extend from the top bit of the last byte.
        if bytes[n - 1] & 0x80 != 0 {
            buf[n..].fill(0xFF);
        }
        Some(i64::from_le_bytes(buf))
    };
    Some(match b {
        0x00..=0x7F => (Element::Int(i64::from(b)), 1),
        0x80..=0xBF => {
            let n = (b & 0x3F) as usize;
            (Element::Str(rest.get(1..1 + n)?), 1 + n)
        }
        0xC0..=0xDF => {
            let u = (u16::from(b & 0x1F) << 8) | u16::from(*rest.get(1)?);
            // 13-bit two's complement.
            let v = if u & 0x1000 != 0 {
                i64::from(u) - 0x2000
            } else {
                i64::from(u)
            };
            (Element::Int(v), 2)
        }
        0xE0..=0xEF => {
            let n = ((usize::from(b & 0x0F)) << 8) | usize::from(*rest.get(1)?);
            (Element::Str(rest.get(2..2 + n)?), 2 + n)
        }
        0xF0 => {
            let len = rest.get(1..5)?;
            let n = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            (Element::Str(rest.get(5..5usize.checked_add(n)?)?), 5 + n)
        }
        0xF1 => (Element::Int(int_le(2)?), 3),
        0xF2 => (Element::Int(int_le(3)?), 4),
        0xF3 => (Element::Int(int_le(4)?), 5),
        0xF4 => (Element::Int(int_le(8)?), 9),
        _ => return None,
    })
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// The element at `pos` and the offset of the next entry (or of the end byte).
pub fn get(lp: &[u8], pos: usize) -> Option<(Element<'_>, usize)> {
    let (e, l) = read_at(lp, pos)?;
    Some((e, pos + l + backlen_size(l)))
}

/// The offset of the first entry (the end byte's when empty).
pub fn first(_lp: &[u8]) -> usize {
    HEADER
}

/// True when `pos` is the end byte.
pub fn at_end(lp: &[u8], pos: usize) -> bool {
    lp.get(pos).is_none_or(|&b| b == EOF)
}

/// Every element with its offset, front to back.
pub fn iter(lp: &[u8]) -> impl Iterator<Item = (usize, Element<'_>)> {
    let mut pos = first(lp);
    std::iter::from_fn(move || {
        if at_end(lp, pos) {
            return None;
        }
        let (e, next) = get(lp, pos)?;
        let at = pos;
        pos = next;
        Some((at, e))
    })
}

/// The offset of the entry before the one at `pos` (None at the first), read through the
/// backlen that ends right before `pos`.
pub fn prev(lp: &[u8], pos: usize) -> Option<usize> {
    if pos <= HEADER {
        return None;
    }
    let mut l: usize = 0;
    let mut shift = 0;
    let mut i = pos;
    loop {
        i -= 1;
        let b = *lp.get(i)?;
        l |= usize::from(b & 127) << shift;
        shift += 7;
        if b & 128 == 0 {
            break;
        }
        if shift > 28 || i <= HEADER {
            return None;
        }
    }
    i.checked_sub(l).filter(|&p| p >= HEADER)
}

/// The offset of the last entry (None when empty).
pub fn last(lp: &[u8]) -> Option<usize> {
    prev(lp, lp.len().checked_sub(1)?)
}

/// Number of elements.
pub fn len(lp: &[u8]) -> usize {
    match lp.get(4..6) {
        Some(c) if u16::from_le_bytes([c[0], c[1]]) != COUNT_UNKNOWN => {
            usize::from(u16::from_le_bytes([c[0], c[1]]))
        }
        _ => iter(lp).count(),
    }
}

fn set_header(lp: &mut [u8], count: usize) {
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let c = if count >= usize::from(COUNT_UNKNOWN) {
        COUNT_UNKNOWN
    } else {
        count as u16
    };
    lp[4..6].copy_from_slice(&c.to_le_bytes());
}

/// Inserts `values` (each one element) before the entry at `pos` (the end byte's offset
/// appends).
pub fn insert(lp: &mut Vec<u8>, pos: usize, values: &[&[u8]]) {
    let count = len(lp) + values.len();
    let add: usize = values.iter().map(|v| entry_size(v)).sum();
    reserve(lp, add);
    // Encoded at the end, then rotated into place: no buffer per entry.
    for v in values {
        push_entry(v, lp);
    }
    rotate_in(lp, pos, add);
    set_header(lp, count);
}

/// `lp[pos..].rotate_right(add)` as copies through a buffer: the slice method swaps in place
/// once `add` passes its 256-byte stack buffer, several times slower than moving the bytes
/// (an element of 256 bytes pushed at a node's front showed so).
fn rotate_in(lp: &mut [u8], pos: usize, add: usize) {
    let end = lp.len();
    let moved: smallvec::SmallVec<[u8; 1024]> = smallvec::SmallVec::from_slice(&lp[end - add..]);
    lp.copy_within(pos..end - add, pos + add);
    lp[pos..pos + add].copy_from_slice(&moved);
}

/// Appends `values` at the end.
pub fn push(lp: &mut Vec<u8>, values: &[&[u8]]) {
    let end = lp.len() - 1;
    insert(lp, end, values);
}

/// Deletes `n` elements from the one at `pos`.
pub fn delete(lp: &mut Vec<u8>, pos: usize, n: usize) {
    let mut end = pos;
    let mut gone = 0;
    while gone < n && !at_end(lp, end) {
        match get(lp, end) {
            Some((_, next)) => end = next,
            None => break,
        }
        gone += 1;
    }
    let count = len(lp) - gone;
    lp.drain(pos..end);
    set_header(lp, count);
}

/// Replaces the element at `pos` with `v`.
pub fn replace(lp: &mut Vec<u8>, pos: usize, v: &[u8]) {
    let Some((_, next)) = get(lp, pos) else {
        return;
    };
    let count = len(lp);
    let (old, new) = (next - pos, entry_size(v));
    if new > old {
        reserve(lp, new - old);
    }
    // The new entry is written past the end, then moved where the old one was.
    let end = lp.len();
    push_entry(v, lp);
    if new == old {
        lp.copy_within(end..end + new, pos);
        lp.truncate(end);
    } else {
        rotate_in(lp, pos, new);
        lp.drain(pos + new..pos + new + old);
    }
    set_header(lp, count);
}

/// The offset of the first element from `pos` on that equals `v`, looking at every `skip + 1`th
/// element (1: the fields of a field-value listpack).
pub fn find(lp: &[u8], mut pos: usize, v: &[u8], skip: usize) -> Option<usize> {
    let as_i = as_int(v);
    while !at_end(lp, pos) {
        let (e, mut next) = get(lp, pos)?;
        let hit = match (e, as_i) {
            (Element::Int(i), Some(j)) => i == j,
            (Element::Str(s), None) => s == v,
            _ => false,
        };
        if hit {
            return Some(pos);
        }
        for _ in 0..skip {
            if at_end(lp, next) {
                return None;
            }
            next = get(lp, next)?.1;
        }
        pos = next;
    }
    None
}

/// Checks a listpack from outside whole: header, every entry's encoding, data and backlen
/// inside the block, the end byte last, and the count (when known) right. `pairs`: the element
/// count must be even (hashes, sorted sets).
pub fn validate(lp: &[u8], pairs: bool) -> bool {
    if lp.len() < HEADER + 1 {
        return false;
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() || lp[lp.len() - 1] != EOF {
        return false;
    }
    let mut pos = HEADER;
    let mut count = 0usize;
    while pos < lp.len() - 1 {
        let Some((_, l)) = read_at(lp, pos) else {
            return false;
        };
        let bl = backlen_size(l);
        let end = pos + l + bl;
        if end > lp.len() - 1 {
            return false;
        }
        // The backlen must read back as the entry's length.
        if prev(lp, end) != Some(pos) {
            return false;
        }
        pos = end;
        count += 1;
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]);
    (declared == COUNT_UNKNOWN || usize::from(declared) == count)
        && (!pairs || count.is_multiple_of(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(lp: &[u8]) -> Vec<Vec<u8>> {
        iter(lp).map(|(_, e)| e.to_vec()).collect()
    }

    #[test]
    fn every_encoding_round_trips_and_walks_both_ways() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"128".to_vec(),
            b"-1".to_vec(),
            b"-4096".to_vec(),
            b"4095".to_vec(),
            b"-4097".to_vec(),
            b"32767".to_vec(),
            b"-8388608".to_vec(),
            b"8388607".to_vec(),
            b"2147483647".to_vec(),
            b"-2147483649".to_vec(),
            b"9223372036854775807".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"007".to_vec(),
            b"".to_vec(),
            b"hello".to_vec(),
            mid,
            long,
            b"99999999999999999999".to_vec(),
        ];
        let mut lp = new();
        let refs: Vec<&[u8]> = items.iter().map(|v| &v[..]).collect();
        push(&mut lp, &refs);
        assert!(validate(&lp, true));
        assert_eq!(len(&lp), items.len());
        assert_eq!(values(&lp), items);
        // Backwards from the end.
        let mut back = Vec::new();
        let mut at = last(&lp);
        while let Some(p) = at {
            back.push(get(&lp, p).unwrap().0.to_vec());
            at = prev(&lp, p);
        }
        back.reverse();
        assert_eq!(back, items);
        // Integers are stored as integers, in the smallest encoding.
        assert_eq!(entry_size(b"5"), 2);
        assert_eq!(entry_size(b"-100"), 3);
        assert_eq!(entry_size(b"32767"), 4);
        assert_eq!(entry_size(b"abc"), 5);
        assert_eq!(get(&lp, first(&lp)).unwrap().0, Element::Int(0));
        assert!(get(&lp, first(&lp)).unwrap().0.eq_bytes(b"0"));
        assert!(!get(&lp, first(&lp)).unwrap().0.eq_bytes(b"00"));
    }

    #[test]
    fn redis_bytes_for_a_small_hash() {
        // HSET h a 1 bb hello on redis-server 7 gives this listpack.
        let mut lp = new();
        push(&mut lp, &[b"a", b"1", b"bb", b"hello"]);
        assert_eq!(
            lp,
            b"\x17\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x82bb\x03\x85hello\x06\xff".to_vec()
        );
    }

    #[test]
    fn insert_delete_replace_and_find() {
        let mut lp = new();
        push(&mut lp, &[b"f1", b"v1", b"f2", b"v2"]);
        let at = find(&lp, first(&lp), b"f2", 1).unwrap();
        let (_, v) = get(&lp, at).unwrap();
        assert_eq!(get(&lp, v).unwrap().0, Element::Str(b"v2"));
        // A value equal to a field name is not a field.
        assert_eq!(find(&lp, first(&lp), b"v1", 1), None);
        replace(&mut lp, v, &[b'z'; 200]);
        assert!(validate(&lp, true));
        assert_eq!(values(&lp)[3], vec![b'z'; 200]);
        let f1 = find(&lp, first(&lp), b"f1", 1).unwrap();
        delete(&mut lp, f1, 2);
        assert_eq!(len(&lp), 2);
        assert!(validate(&lp, true));
        insert(&mut lp, HEADER, &[b"10", b"x"]);
        assert_eq!(values(&lp)[0], b"10".to_vec());
        assert_eq!(find(&lp, first(&lp), b"10", 1), Some(first(&lp)));
        delete(&mut lp, HEADER, 10);
        assert_eq!(lp, new());
    }

    #[test]
    fn damaged_blocks_are_refused_never_read_past() {
        let mut lp = new();
        push(&mut lp, &[b"a", b"bb", b"12345", b"hello world"]);
        assert!(validate(&lp, true));
        assert!(!validate(&lp[..lp.len() - 1], false));
        for i in 0..lp.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bad = lp.clone();
                bad[i] ^= flip;
                // Whatever it says, walking it never panics.
                let ok = validate(&bad, false);
                let _ = values(&bad);
                let _ = len(&bad);
                if i < 4 {
                    assert!(!ok, "a wrong total at byte {i}");
                }
            }
        }
        let mut odd = new();
        push(&mut odd, &[b"a"]);
        assert!(validate(&odd, false) && !validate(&odd, true));
        assert!(!validate(b"\x07\x00\x00\x00\x00\x00\x00", false));
    }
}

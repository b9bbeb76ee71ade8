//! The large sorted set (OBJECT ENCODING "skiplist"): what a sorted set becomes past
//! `zset-max-listpack-entries` members or a member longer than `zset-max-listpack-value`, and
//! the score text and listpack helpers both forms share.
//!
//! ```text
//! LargeZSet: tree   Arc<Node>           counted B+tree in (score, member) order
//!              Leaf: bytes [record]*    record = score f64 LE | varint len | member
//!              Inner: kids [Arc<Node>], sizes [usize], lows [f64]   (members under each kid,
//!                     the score of its first member)
//!            index  [Arc<Chunk>; 2^bits]  member -> score, chunk = top bits of hash(member)
//!              Chunk: hashes [u64] sorted, offs [u32], data [record]*
//! ```
//!
//! - Rank, score range and lex range all reduce to rank ranges found by one descent (the
//!   subtree sizes), so ZRANK, ZCOUNT, ZRANGE and friends are O(log n) plus what they return.
//! - Memory: a member costs its bytes twice (tree and index) plus about 21 bytes, where Redis'
//!   skiplist node, dict entry, sds and bucket pay about 110.
//! - Snapshots: [`TypedObject::capture`] clones the root pointer and the chunk pointers; a write
//!   copies only the nodes on its path (`Arc::make_mut`) and the one chunk it touches.
//! - ZSCAN walks the index in hash order; its cursor is the next hash, so splits of chunks
//!   never move a member in that order and a member present for the whole scan is returned.
//!
//! Never: stores a NaN score, holds a node a capture shares while changing it (every change
//! goes through `Arc::make_mut`), or lets the tree and the index disagree.

use std::any::Any;
use std::cmp::Ordering;
use std::sync::Arc;

use ondisk::rdb::codec::{write_len, write_string, StringCompression};

use super::entry::Value;
use super::hash::field_hash;
use super::listpack::{self, Element};
use super::object::{
    ObjectType, PackLimits, Packed, PackedEncoding, PackedKind, RdbPartPos, TypedObject,
};

/// Most members of a leaf, and most bytes (a leaf of long members splits sooner).
const LEAF_MAX: usize = 128;
const LEAF_BYTES: usize = 4096;
/// Most children of an inner node.
const INNER_MAX: usize = 64;
/// Average members per index chunk past which the chunks double.
const CHUNK_TARGET: usize = 256;

// ---------------------------------------------------------------------------------------------
// Score text
// ---------------------------------------------------------------------------------------------

/// C's `%.17g`: what Redis 7.0 replies with for a score.
pub use crate::protocol::reply::format_double as fmt_g17;

/// Redis' `d2string`: a score's text (an integral value as an integer, else `%.17g`; -0 as
/// "-0").
pub fn d2string(d: f64) -> String {
    if d.is_nan() {
        "nan".into()
    } else if d.is_infinite() {
        if d < 0.0 {
            "-inf".into()
        } else {
            "inf".into()
        }
    } else if d == 0.0 {
        if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        }
    } else if d >= -(i64::MAX / 2) as f64 && d <= (i64::MAX / 2) as f64 && d == d.trunc() {
        (d as i64).to_string()
    } else {
        fmt_g17(d)
    }
}

/// How a listpack holds a score (Redis' `zzlInsertAt`): an integral value in `double2ll`'s
/// range as an integer (so -0 is stored, and read back, as 0), else its `d2string` text.
pub fn lp_score_text(d: f64) -> String {
    if d >= -(i64::MAX / 2) as f64 && d <= (i64::MAX / 2) as f64 && d == d.trunc() {
        (d as i64).to_string()
    } else {
        d2string(d)
    }
}

/// C's `strtod` over the whole text: (value, whether it overflowed or underflowed to zero).
/// Leading white space is skipped as strtod does; None when the text is not all a number.
pub fn strtod(b: &[u8]) -> Option<(f64, bool)> {
    // Plain integers of up to 15 digits (what most scores are) convert exactly: no text
    // copy, no float parsing.
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let v = digits
            .iter()
            .fold(0i64, |acc, &c| acc * 10 + i64::from(c - b'0')) as f64;
        return Some((if digits.len() < b.len() { -v } else { v }, false));
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    if t.is_empty() {
        // No conversion: only the empty text ends where strtod stops.
        return s.is_empty().then_some((0.0, false));
    }
    let lower = t.to_ascii_lowercase();
    let (neg, body) = match lower.as_bytes()[0] {
        b'-' => (true, &lower[1..]),
        b'+' => (false, &lower[1..]),
        _ => (false, &lower[..]),
    };
    let v = match body {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ if body.starts_with("0x") => hex_float(&body[2..])?,
        _ => {
            let ok = body
                .bytes()
                .all(|c| c.is_ascii_digit() || b".e+-".contains(&c))
                && body
                    .bytes()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == b'.');
            if !ok {
                return None;
            }
            body.parse::<f64>().ok()?
        }
    };
    let v = if neg { -v } else { v };
    let finite_text = !matches!(body, "inf" | "infinity" | "nan");
    let range = finite_text
        && (v.is_infinite() || (v == 0.0 && body.bytes().any(|c| (b'1'..=b'9').contains(&c))))
        && !(v == 0.0 && mantissa_is_zero(body));
    Some((v, range))
}

fn mantissa_is_zero(body: &str) -> bool {
    let m = body.split('e').next().unwrap_or("");
    !m.bytes().any(|c| (b'1'..=b'9').contains(&c))
}

/// A hexadecimal float's digits after "0x" (`1.8p3`), as strtod reads them.
fn hex_float(s: &str) -> Option<f64> {
    let (m, e) = match s.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = m.split_once('.').unwrap_or((m, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    Some(v * 2f64.powi(e))
}

/// Redis' `string2d`: a score argument (ZADD, ZINCRBY). None for text that is not all a
/// number, starts with white space, overflows, underflows to zero, or is NaN.
pub fn parse_score(b: &[u8]) -> Option<f64> {
    if b.first()
        .is_none_or(|c| c.is_ascii_whitespace() || *c == 0x0b)
    {
        return None;
    }
    let (v, range) = strtod(b)?;
    if range || v.is_nan() {
        return None;
    }
    Some(v)
}

/// A score as a listpack holds it (an integer, or its `d2string` text).
pub fn element_score(e: Element<'_>) -> f64 {
    match e {
        Element::Int(i) => i as f64,
        Element::Str(s) => strtod(s).map_or(0.0, |(v, _)| v),
    }
}

/// Sorted-set order: by score, then by member bytes.
pub fn cmp_entry(s1: f64, m1: &[u8], s2: f64, m2: &[u8]) -> Ordering {
    s1.partial_cmp(&s2)
        .unwrap_or(Ordering::Equal)
        .then_with(|| m1.cmp(m2))
}

// ---------------------------------------------------------------------------------------------
// The listpack form: member, score pairs in score order
// ---------------------------------------------------------------------------------------------

/// Every (member, score) of a zset listpack, in order.
pub fn lp_entries(lp: &[u8]) -> Vec<(Vec<u8>, f64)> {
    let mut out = Vec::with_capacity(listpack::len(lp) / 2);
    let mut it = listpack::iter(lp);
    while let (Some((_, m)), Some((_, s))) = (it.next(), it.next()) {
        out.push((m.to_vec(), element_score(s)));
    }
    out
}

/// The offset of `member`'s entry and its score.
pub fn lp_find(lp: &[u8], member: &[u8]) -> Option<(usize, f64)> {
    let pos = listpack::find(lp, listpack::first(lp), member, 1)?;
    let (_, next) = listpack::get(lp, pos)?;
    let (s, _) = listpack::get(lp, next)?;
    Some((pos, element_score(s)))
}

/// Inserts `member` (not there yet) at its place in score order.
pub fn lp_insert(lp: &mut Vec<u8>, member: &[u8], score: f64) {
    let mut pos = listpack::first(lp);
    while !listpack::at_end(lp, pos) {
        let Some((m, next)) = listpack::get(lp, pos) else {
            break;
        };
        let Some((s, after)) = listpack::get(lp, next) else {
            break;
        };
        let s = element_score(s);
        let later = match m {
            Element::Str(b) => cmp_entry(s, b, score, member),
            Element::Int(_) => cmp_entry(s, &m.to_vec(), score, member),
        };
        if later == Ordering::Greater {
            break;
        }
        pos = after;
    }
    let text = lp_score_text(score);
    listpack::insert(lp, pos, &[member, text.as_bytes()]);
}

/// Deletes the member whose entry is at `pos` (with its score).
pub fn lp_delete(lp: &mut Vec<u8>, pos: usize) {
    listpack::delete(lp, pos, 2);
}

/// A zset listpack of `entries`, already in order.
pub fn lp_from_sorted<'a>(entries: impl IntoIterator<Item = (&'a [u8], f64)>) -> Vec<u8> {
    let mut lp = listpack::new();
    let mut body = Vec::new();
    let mut n = 0usize;
    for (m, s) in entries {
        body.extend_from_slice(&listpack::entry_bytes(m));
        body.extend_from_slice(&listpack::entry_bytes(lp_score_text(s).as_bytes()));
        n += 2;
    }
    // One splice, then the header fixed by an empty insert at the end.
    let end = lp.len() - 1;
    lp.splice(end..end, body);
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let c = if n >= 65535 { 65535u16 } else { n as u16 };
    lp[4..6].copy_from_slice(&c.to_le_bytes());
    lp
}

// ---------------------------------------------------------------------------------------------
// Records: score | varint len | member
// ---------------------------------------------------------------------------------------------

fn put_record(out: &mut Vec<u8>, score: f64, member: &[u8]) {
    out.extend_from_slice(&score.to_le_bytes());
    let mut n = member.len();
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(member);
}

fn record_size(member: &[u8]) -> usize {
    let mut n = member.len();
    let mut v = 1;
    while n >= 0x80 {
        n >>= 7;
        v += 1;
    }
    8 + v + member.len()
}

/// (score, member, offset of the next record) of the record at `at` (records are written
/// only by this module, so they are whole).
/// The record at `at` (as [`read_record`]), None past the last; a member under 128 bytes (one
/// length byte) is read inline, without the varint loop.
#[inline]
fn record_from(d: &[u8], at: usize) -> Option<(f64, &[u8], usize)> {
    let head = d.get(at..at + 9)?;
    if head[8] >= 0x80 {
        return Some(read_record(d, at));
    }
    let mut sb = [0u8; 8];
    sb.copy_from_slice(&head[..8]);
    let end = at + 9 + usize::from(head[8]);
    Some((f64::from_le_bytes(sb), &d[at + 9..end], end))
}

fn read_record(b: &[u8], at: usize) -> (f64, &[u8], usize) {
    let mut s = [0u8; 8];
    s.copy_from_slice(&b[at..at + 8]);
    let mut i = at + 8;
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let byte = b[i];
        i += 1;
        n |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (f64::from_le_bytes(s), &b[i..i + n], i + n)
}

/// Appends to a vector growing by about an eighth at a time (not doubling: these vectors
/// stay put for long and most of them are full).
fn grow_for(v: &mut Vec<u8>, extra: usize) {
    if v.capacity() - v.len() < extra {
        v.reserve_exact(extra.max(v.len() / 8).max(16));
    }
}

// ---------------------------------------------------------------------------------------------
// The tree
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Leaf {
    data: Vec<u8>,
    len: usize,
}

impl Leaf {
    fn records(&self) -> impl Iterator<Item = (usize, f64, &[u8])> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            if at >= self.data.len() {
                return None;
            }
            let (s, m, next) = read_record(&self.data, at);
            let here = at;
            at = next;
            Some((here, s, m))
        })
    }

    fn first(&self) -> Option<(f64, &[u8])> {
        self.records().next().map(|(_, s, m)| (s, m))
    }

    fn insert(&mut self, score: f64, member: &[u8]) {
        let at = self.after(score, member);
        // Written in place: the tail moves up once, no record is built on the side.
        let size = record_size(member);
        grow_for(&mut self.data, size);
        let old = self.data.len();
        self.data.resize(old + size, 0);
        self.data.copy_within(at..old, at + size);
        let mut w = at;
        for b in score.to_le_bytes() {
            self.data[w] = b;
            w += 1;
        }
        let mut n = member.len();
        while n >= 0x80 {
            self.data[w] = n as u8 | 0x80;
            n >>= 7;
            w += 1;
        }
        self.data[w] = n as u8;
        self.data[w + 1..at + size].copy_from_slice(member);
        self.len += 1;
    }

    fn remove(&mut self, score: f64, member: &[u8]) -> bool {
        match self.find(score, member) {
            Some((a, b)) => {
                self.data.drain(a..b);
                self.len -= 1;
                if self.data.capacity() > 2 * self.data.len() + 64 {
                    self.data.shrink_to(self.data.len() + self.data.len() / 8);
                }
                true
            }
            None => false,
        }
    }

    /// The offset of the first record scored `score` or more: the hot loop of an insert and
    /// a removal, which reads a score and a one-byte length inline and no member.
    fn skip_below(&self, score: f64) -> usize {
        let d = &self.data[..];
        let mut at = 0;
        while let Some(head) = d.get(at..at + 9) {
            let mut sb = [0u8; 8];
            sb.copy_from_slice(&head[..8]);
            if f64::from_le_bytes(sb) >= score {
                break;
            }
            at = if head[8] < 0x80 {
                at + 9 + usize::from(head[8])
            } else {
                read_record(d, at).2
            };
        }
        at
    }

    /// The offset of the first record after (score, member); members are compared only on
    /// equal scores.
    fn after(&self, score: f64, member: &[u8]) -> usize {
        let d = &self.data[..];
        let mut at = self.skip_below(score);
        while let Some((s, m, next)) = record_from(d, at) {
            if s > score {
                break;
            }
            if s == score && m > member {
                break;
            }
            at = next;
        }
        at
    }

    /// The byte range of the record (score, member), found with `after`'s inline scan.
    fn find(&self, score: f64, member: &[u8]) -> Option<(usize, usize)> {
        let d = &self.data[..];
        let mut at = self.skip_below(score);
        while let Some((s, m, next)) = record_from(d, at) {
            if s > score {
                return None;
            }
            if s == score {
                match m.cmp(member) {
                    Ordering::Equal => return Some((at, next)),
                    Ordering::Greater => return None,
                    Ordering::Less => {}
                }
            }
            at = next;
        }
        None
    }

    /// Takes out the first (or, `last`, the last) record.
    fn pop_edge(&mut self, last: bool) -> Option<(f64, Vec<u8>)> {
        if self.len == 0 {
            return None;
        }
        let at = if last {
            self.records().last().map_or(0, |(o, _, _)| o)
        } else {
            0
        };
        let (score, member, end) = read_record(&self.data, at);
        let member = member.to_vec();
        self.data.drain(at..end);
        self.len -= 1;
        if self.data.capacity() > 2 * self.data.len() + 64 {
            self.data.shrink_to(self.data.len() + self.data.len() / 8);
        }
        Some((score, member))
    }

    fn full(&self) -> bool {
        self.len > LEAF_MAX || (self.data.len() > LEAF_BYTES && self.len > 1)
    }

    /// Moves the upper half out.
    fn split(&mut self) -> Leaf {
        let half = self.len / 2;
        let cut = self.records().nth(half).map_or(self.data.len(), |r| r.0);
        let right = Leaf {
            data: self.data[cut..].to_vec(),
            len: self.len - half,
        };
        self.data.truncate(cut);
        self.data.shrink_to_fit();
        self.len = half;
        right
    }
}

#[derive(Clone, Default)]
struct Inner {
    kids: Vec<Arc<Node>>,
    sizes: Vec<usize>,
    /// The score of each kid's first member: a descent compares these and reads members only
    /// on equal scores.
    lows: Vec<f64>,
    total: usize,
}

#[derive(Clone)]
enum Node {
    Leaf(Leaf),
    Inner(Inner),
}

type Visit<'v> = dyn FnMut(f64, &[u8]) + 'v;

impl Node {
    fn len(&self) -> usize {
        match self {
            Node::Leaf(l) => l.len,
            Node::Inner(i) => i.total,
        }
    }

    fn first(&self) -> Option<(f64, &[u8])> {
        match self {
            Node::Leaf(l) => l.first(),
            Node::Inner(i) => i.kids.first()?.first(),
        }
    }

    /// The kid whose range holds (score, member): the last one whose first entry is not
    /// after it (the first kid when all are).
    fn kid_for(inner: &Inner, score: f64, member: &[u8]) -> usize {
        let below = inner.lows.partition_point(|&l| l < score);
        if inner.lows.get(below).is_none_or(|&l| l > score) {
            // No kid starts at this score: members need no comparing.
            return below.saturating_sub(1);
        }
        let equal = inner.lows[below..].partition_point(|&l| l <= score);
        let n = below
            + inner.kids[below..below + equal]
                .partition_point(|k| k.first().is_some_and(|(_, m)| m <= member));
        n.saturating_sub(1)
    }

    /// The score of the first member (kids are never empty; an empty node sorts last).
    fn low(&self) -> f64 {
        self.first().map_or(f64::INFINITY, |(s, _)| s)
    }

    /// Inserts; returns the node split off to the right when this one overflowed.
    fn insert(&mut self, score: f64, member: &[u8]) -> Option<Node> {
        match self {
            Node::Leaf(l) => {
                l.insert(score, member);
                l.full().then(|| Node::Leaf(l.split()))
            }
            Node::Inner(inner) => {
                let i = Node::kid_for(inner, score, member);
                let split = Arc::make_mut(&mut inner.kids[i]).insert(score, member);
                inner.total += 1;
                inner.sizes[i] += 1;
                if score <= inner.lows[i] {
                    // Only a new first member (of the first kid) moves a low.
                    inner.lows[i] = inner.kids[i].low();
                }
                if let Some(right) = split {
                    let rn = right.len();
                    inner.sizes[i] -= rn;
                    inner.lows.insert(i + 1, right.low());
                    inner.kids.insert(i + 1, Arc::new(right));
                    inner.sizes.insert(i + 1, rn);
                }
                if inner.kids.len() > INNER_MAX {
                    let half = inner.kids.len() / 2;
                    let kids = inner.kids.split_off(half);
                    let sizes = inner.sizes.split_off(half);
                    let lows = inner.lows.split_off(half);
                    let total: usize = sizes.iter().sum();
                    inner.total -= total;
                    return Some(Node::Inner(Inner {
                        kids,
                        sizes,
                        lows,
                        total,
                    }));
                }
                None
            }
        }
    }

    fn remove(&mut self, score: f64, member: &[u8]) -> bool {
        match self {
            Node::Leaf(l) => l.remove(score, member),
            Node::Inner(inner) => {
                let i = Node::kid_for(inner, score, member);
                if !Arc::make_mut(&mut inner.kids[i]).remove(score, member) {
                    return false;
                }
                inner.total -= 1;
                inner.sizes[i] -= 1;
                inner.after_removal(i);
                true
            }
        }
    }

    /// Takes out the lowest (or, `last`, the highest) member: the edge path only, with no
    /// search by score and member.
    fn pop_edge(&mut self, last: bool) -> Option<(f64, Vec<u8>)> {
        match self {
            Node::Leaf(l) => l.pop_edge(last),
            Node::Inner(inner) => {
                let i = if last {
                    inner.kids.len().checked_sub(1)?
                } else {
                    0
                };
                let got = Arc::make_mut(&mut inner.kids[i]).pop_edge(last)?;
                inner.total -= 1;
                inner.sizes[i] -= 1;
                inner.after_removal(i);
                Some(got)
            }
        }
    }

    /// Members for which `pred` holds, `pred` holding for a prefix of the order.
    fn count_while(&self, pred: &dyn Fn(f64, &[u8]) -> bool) -> usize {
        match self {
            Node::Leaf(l) => l.records().take_while(|&(_, s, m)| pred(s, m)).count(),
            Node::Inner(inner) => {
                let j = inner
                    .kids
                    .partition_point(|k| k.first().is_some_and(|(s, m)| pred(s, m)));
                if j == 0 {
                    return 0;
                }
                inner.sizes[..j - 1].iter().sum::<usize>() + inner.kids[j - 1].count_while(pred)
            }
        }
    }

    fn rank(&self, score: f64, member: &[u8]) -> Option<usize> {
        match self {
            Node::Leaf(l) => l.records().position(|(_, s, m)| s == score && m == member),
            Node::Inner(inner) => {
                let i = Node::kid_for(inner, score, member);
                let before: usize = inner.sizes[..i].iter().sum();
                Some(before + inner.kids[i].rank(score, member)?)
            }
        }
    }

    fn get(&self, mut rank: usize) -> Option<(f64, &[u8])> {
        match self {
            Node::Leaf(l) => l.records().nth(rank).map(|(_, s, m)| (s, m)),
            Node::Inner(inner) => {
                for (k, &n) in inner.kids.iter().zip(&inner.sizes) {
                    if rank < n {
                        return k.get(rank);
                    }
                    rank -= n;
                }
                None
            }
        }
    }

    /// Visits ranks `start..end` in order (`rev`: from `end - 1` down to `start`).
    fn visit(&self, start: usize, end: usize, rev: bool, f: &mut Visit<'_>) {
        if start >= end {
            return;
        }
        match self {
            Node::Leaf(l) => {
                let recs: Vec<(f64, &[u8])> = l
                    .records()
                    .skip(start)
                    .take(end - start)
                    .map(|(_, s, m)| (s, m))
                    .collect();
                if rev {
                    recs.iter().rev().for_each(|&(s, m)| f(s, m));
                } else {
                    recs.iter().for_each(|&(s, m)| f(s, m));
                }
            }
            Node::Inner(inner) => {
                let mut spans = Vec::new();
                let mut base = 0;
                for (k, &n) in inner.kids.iter().zip(&inner.sizes) {
                    let (a, b) = (start.max(base), end.min(base + n));
                    if a < b {
                        spans.push((k, a - base, b - base));
                    }
                    base += n;
                    if base >= end {
                        break;
                    }
                }
                if rev {
                    spans.reverse();
                }
                for (k, a, b) in spans {
                    k.visit(a, b, rev, f);
                }
            }
        }
    }

    fn heap(&self) -> usize {
        16 + std::mem::size_of::<Node>()
            + match self {
                Node::Leaf(l) => l.data.capacity(),
                Node::Inner(i) => {
                    i.kids.capacity() * 8
                        + i.sizes.capacity() * 8
                        + i.kids.iter().map(|k| k.heap()).sum::<usize>()
                }
            }
    }

    #[cfg(test)]
    fn nodes(&self) -> usize {
        match self {
            Node::Leaf(_) => 1,
            Node::Inner(i) => 1 + i.kids.iter().map(|k| k.nodes()).sum::<usize>(),
        }
    }
}

impl Inner {
    /// Kid `i` lost a member: it goes when empty, else its low is read again and it may
    /// merge with a neighbour.
    fn after_removal(&mut self, i: usize) {
        if self.sizes[i] == 0 {
            self.kids.remove(i);
            self.sizes.remove(i);
            self.lows.remove(i);
        } else {
            self.lows[i] = self.kids[i].low();
            self.merge_around(i);
        }
    }

    /// Merges kid `i` with a neighbour when it has shrunk and the two fit in one.
    fn merge_around(&mut self, i: usize) {
        let small = match &*self.kids[i] {
            Node::Leaf(l) => l.len < LEAF_MAX / 4,
            Node::Inner(x) => x.kids.len() < INNER_MAX / 4,
        };
        if !small || self.kids.len() < 2 {
            return;
        }
        let left = if i + 1 < self.kids.len() { i } else { i - 1 };
        let fits = match (&*self.kids[left], &*self.kids[left + 1]) {
            (Node::Leaf(a), Node::Leaf(b)) => {
                a.len + b.len <= LEAF_MAX * 3 / 4 && a.data.len() + b.data.len() <= LEAF_BYTES
            }
            (Node::Inner(a), Node::Inner(b)) => a.kids.len() + b.kids.len() <= INNER_MAX * 3 / 4,
            _ => false,
        };
        if !fits {
            return;
        }
        let right = self.kids.remove(left + 1);
        let rn = self.sizes.remove(left + 1);
        self.lows.remove(left + 1);
        self.sizes[left] += rn;
        let right = Arc::try_unwrap(right).unwrap_or_else(|shared| (*shared).clone());
        match (Arc::make_mut(&mut self.kids[left]), right) {
            (Node::Leaf(a), Node::Leaf(b)) => {
                a.data.extend_from_slice(&b.data);
                a.len += b.len;
            }
            (Node::Inner(a), Node::Inner(b)) => {
                a.kids.extend(b.kids);
                a.sizes.extend(b.sizes);
                a.lows.extend(b.lows);
                a.total += b.total;
            }
            // `fits` matched the two kinds.
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The index: member -> score
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Chunk {
    /// Member hashes, sorted; `offs[i]` is the record of `hashes[i]` in `data`.
    hashes: Vec<u64>,
    offs: Vec<u32>,
    data: Vec<u8>,
    /// Bytes of `data` no slot points at any more.
    dead: usize,
}

impl Chunk {
    fn find(&self, h: u64, member: &[u8]) -> Option<usize> {
        self.search(h, member).ok()
    }

    /// The slot of `member` (hash `h`), or where it would be inserted.
    fn search(&self, h: u64, member: &[u8]) -> Result<usize, usize> {
        let mut i = self.hashes.partition_point(|&x| x < h);
        while i < self.hashes.len() && self.hashes[i] == h {
            let (_, m, _) = read_record(&self.data, self.offs[i] as usize);
            if m == member {
                return Ok(i);
            }
            i += 1;
        }
        Err(i)
    }

    fn score(&self, slot: usize) -> f64 {
        read_record(&self.data, self.offs[slot] as usize).0
    }

    fn set_score(&mut self, slot: usize, score: f64) {
        let at = self.offs[slot] as usize;
        self.data[at..at + 8].copy_from_slice(&score.to_le_bytes());
    }

    fn insert(&mut self, h: u64, member: &[u8], score: f64) {
        let i = self.hashes.partition_point(|&x| x <= h);
        self.insert_at(i, h, member, score);
    }

    /// Inserts at slot `i`, which keeps the hashes sorted (see `search`).
    fn insert_at(&mut self, i: usize, h: u64, member: &[u8], score: f64) {
        grow_for(&mut self.data, record_size(member));
        let off = self.data.len() as u32;
        put_record(&mut self.data, score, member);
        if self.hashes.len() == self.hashes.capacity() {
            let more = (self.hashes.len() / 8).max(4);
            self.hashes.reserve_exact(more);
            self.offs.reserve_exact(more);
        }
        self.hashes.insert(i, h);
        self.offs.insert(i, off);
    }

    fn remove(&mut self, slot: usize) {
        let (_, m, _) = read_record(&self.data, self.offs[slot] as usize);
        self.dead += record_size(m);
        self.hashes.remove(slot);
        self.offs.remove(slot);
        if self.dead > 256 && self.dead * 2 > self.data.len() {
            self.compact();
        }
    }

    /// Rewrites `data` without its dead records.
    fn compact(&mut self) {
        let mut data = Vec::with_capacity(self.data.len() - self.dead);
        for off in self.offs.iter_mut() {
            let (s, m, _) = read_record(&self.data, *off as usize);
            *off = data.len() as u32;
            put_record(&mut data, s, m);
        }
        self.data = data;
        self.dead = 0;
        self.hashes
            .shrink_to(self.hashes.len() + self.hashes.len() / 8);
        self.offs.shrink_to(self.offs.len() + self.offs.len() / 8);
    }

    fn entries(&self) -> impl Iterator<Item = (u64, f64, &[u8])> + '_ {
        self.hashes.iter().zip(&self.offs).map(|(&h, &o)| {
            let (s, m, _) = read_record(&self.data, o as usize);
            (h, s, m)
        })
    }

    fn heap(&self) -> usize {
        16 + std::mem::size_of::<Chunk>()
            + self.hashes.capacity() * 8
            + self.offs.capacity() * 4
            + self.data.capacity()
    }
}

#[derive(Clone)]
struct Index {
    chunks: Vec<Arc<Chunk>>,
    bits: u32,
}

impl Index {
    fn new() -> Index {
        Index {
            chunks: vec![Arc::new(Chunk::default())],
            bits: 0,
        }
    }

    fn chunk_of(&self, h: u64) -> usize {
        if self.bits == 0 {
            0
        } else {
            (h >> (64 - self.bits)) as usize
        }
    }

    fn find(&self, member: &[u8]) -> Option<(usize, usize, u64)> {
        let h = field_hash(member);
        let c = self.chunk_of(h);
        self.chunks[c].find(h, member).map(|slot| (c, slot, h))
    }

    /// Doubles the chunks: each splits at its next hash bit, which keeps the hash order.
    fn double(&mut self) {
        let bit = 63 - self.bits;
        let mut chunks = Vec::with_capacity(self.chunks.len() * 2);
        for c in &self.chunks {
            let cut = c.hashes.partition_point(|&h| h >> bit & 1 == 0);
            for range in [0..cut, cut..c.hashes.len()] {
                let mut part = Chunk::default();
                for i in range {
                    let (s, m, _) = read_record(&c.data, c.offs[i] as usize);
                    part.offs.push(part.data.len() as u32);
                    part.hashes.push(c.hashes[i]);
                    put_record(&mut part.data, s, m);
                }
                chunks.push(Arc::new(part));
            }
        }
        self.chunks = chunks;
        self.bits += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// The large sorted set
// ---------------------------------------------------------------------------------------------

/// A sorted set past the listpack limits.
#[derive(Clone)]
pub struct LargeZSet {
    root: Arc<Node>,
    index: Index,
}

impl Default for LargeZSet {
    fn default() -> Self {
        LargeZSet::new()
    }
}

impl LargeZSet {
    pub fn new() -> LargeZSet {
        LargeZSet {
            root: Arc::new(Node::Leaf(Leaf::default())),
            index: Index::new(),
        }
    }

    /// The members of a zset listpack.
    pub fn from_listpack(lp: &[u8]) -> LargeZSet {
        let mut z = LargeZSet::new();
        for (m, s) in lp_entries(lp) {
            z.insert(&m, s);
        }
        z
    }

    pub fn len(&self) -> usize {
        self.root.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        let (c, slot, _) = self.index.find(member)?;
        Some(self.index.chunks[c].score(slot))
    }

    /// Adds `member` with `score`, or moves it to `score`. True when it was new.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        if let Some((c, slot, _)) = self.index.find(member) {
            let old = self.index.chunks[c].score(slot);
            if old != score {
                Arc::make_mut(&mut self.root).remove(old, member);
                self.tree_insert(score, member);
                Arc::make_mut(&mut self.index.chunks[c]).set_score(slot, score);
            }
            return false;
        }
        self.tree_insert(score, member);
        let h = field_hash(member);
        let c = self.index.chunk_of(h);
        Arc::make_mut(&mut self.index.chunks[c]).insert(h, member, score);
        if self.len() > self.index.chunks.len() * CHUNK_TARGET {
            self.index.double();
        }
        true
    }

    /// ZADD's step: `decide` gets the member's current score (None when absent) and returns
    /// the score to give it (None: leave it as it is). The member is hashed and looked up
    /// once. Returns what `decide` returned, or its error.
    pub fn update<E>(
        &mut self,
        member: &[u8],
        decide: impl FnOnce(Option<f64>) -> Result<Option<f64>, E>,
    ) -> Result<Option<f64>, E> {
        let h = field_hash(member);
        let c = self.index.chunk_of(h);
        let chunk = &self.index.chunks[c];
        let found = chunk
            .search(h, member)
            .map(|slot| (slot, chunk.score(slot)));
        let Some(score) = decide(found.ok().map(|(_, old)| old))? else {
            return Ok(None);
        };
        match found {
            Ok((slot, old)) => {
                if old != score {
                    Arc::make_mut(&mut self.root).remove(old, member);
                    self.tree_insert(score, member);
                    Arc::make_mut(&mut self.index.chunks[c]).set_score(slot, score);
                }
            }
            Err(slot) => {
                self.tree_insert(score, member);
                Arc::make_mut(&mut self.index.chunks[c]).insert_at(slot, h, member, score);
                if self.len() > self.index.chunks.len() * CHUNK_TARGET {
                    self.index.double();
                }
            }
        }
        Ok(Some(score))
    }

    fn tree_insert(&mut self, score: f64, member: &[u8]) {
        if let Some(right) = Arc::make_mut(&mut self.root).insert(score, member) {
            let left = std::mem::replace(&mut self.root, Arc::new(Node::Leaf(Leaf::default())));
            let (ln, rn) = (left.len(), right.len());
            self.root = Arc::new(Node::Inner(Inner {
                lows: vec![left.low(), right.low()],
                kids: vec![left, Arc::new(right)],
                sizes: vec![ln, rn],
                total: ln + rn,
            }));
        }
    }

    /// Removes `member`; its score when it was there.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (c, slot, _) = self.index.find(member)?;
        let score = self.index.chunks[c].score(slot);
        Arc::make_mut(&mut self.index.chunks[c]).remove(slot);
        Arc::make_mut(&mut self.root).remove(score, member);
        self.collapse_root();
        Some(score)
    }

    /// Removes and returns up to `count` members from the low end (or, `max`, the high end),
    /// in the order taken.
    pub fn pop(&mut self, max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
        let mut out = Vec::with_capacity(count.min(self.len()));
        while out.len() < count {
            let Some((score, member)) = Arc::make_mut(&mut self.root).pop_edge(max) else {
                break;
            };
            if let Some((c, slot, _)) = self.index.find(&member) {
                Arc::make_mut(&mut self.index.chunks[c]).remove(slot);
            }
            out.push((member, score));
        }
        self.collapse_root();
        out
    }

    /// A root left with one child gives way to it.
    fn collapse_root(&mut self) {
        loop {
            let only = match &*self.root {
                Node::Inner(i) if i.kids.len() == 1 => i.kids[0].clone(),
                Node::Inner(i) if i.kids.is_empty() => Arc::new(Node::Leaf(Leaf::default())),
                _ => break,
            };
            self.root = only;
        }
    }

    /// The 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        self.root.rank(score, member)
    }

    /// How many members satisfy `pred`, which must hold for a prefix of the order.
    pub fn count_while(&self, pred: &dyn Fn(f64, &[u8]) -> bool) -> usize {
        self.root.count_while(pred)
    }

    /// The member at `rank` (ascending).
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        self.root.get(rank).map(|(s, m)| (m, s))
    }

    /// Ranks `start..end`, ascending (or descending from `end - 1` when `rev`).
    pub fn range(&self, start: usize, end: usize, rev: bool) -> Vec<(Vec<u8>, f64)> {
        let end = end.min(self.len());
        let mut out = Vec::with_capacity(end.saturating_sub(start));
        self.root
            .visit(start, end, rev, &mut |s, m| out.push((m.to_vec(), s)));
        out
    }

    /// Visits ranks `start..end` without copying them.
    pub fn visit(&self, start: usize, end: usize, rev: bool, f: &mut dyn FnMut(f64, &[u8])) {
        self.root.visit(start, end.min(self.len()), rev, f);
    }

    /// ZSCAN: about `count` members from `cursor` on in hash order, and the next cursor (0 at
    /// the end). Members of one hash are never split between two calls.
    pub fn scan(&self, cursor: u64, count: usize) -> (u64, Vec<(Vec<u8>, f64)>) {
        let mut out = Vec::new();
        let mut c = self.index.chunk_of(cursor);
        let mut last = None;
        while c < self.index.chunks.len() {
            for (h, s, m) in self.index.chunks[c].entries() {
                if h < cursor {
                    continue;
                }
                if out.len() >= count && last != Some(h) {
                    return (h, out);
                }
                out.push((m.to_vec(), s));
                last = Some(h);
            }
            c += 1;
        }
        (0, out)
    }

    fn chunk_pointers(&self) -> usize {
        self.index.chunks.len() * 8
    }
}

/// A sorted set of `entries` (any order, members distinct) in the form Redis keeps such a
/// result in: a listpack when it has at most `zset_entries` members none longer than
/// `zset_value`, else a [`LargeZSet`].
pub fn value_from_entries(mut entries: Vec<(Vec<u8>, f64)>, limits: &PackLimits) -> Value {
    let fits = entries.len() <= limits.zset_entries
        && entries.iter().all(|(m, _)| m.len() <= limits.zset_value);
    if fits {
        entries.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
        let lp = lp_from_sorted(entries.iter().map(|(m, s)| (&m[..], *s)));
        return Value::Packed(packed(lp));
    }
    let mut z = LargeZSet::new();
    for (m, s) in &entries {
        z.insert(m, *s);
    }
    Value::Object(Box::new(z))
}

/// A zset listpack as a packed value.
pub fn packed(lp: Vec<u8>) -> Packed {
    Packed {
        kind: PackedKind {
            ty: ObjectType::ZSet,
            encoding: PackedEncoding::Listpack,
        },
        bytes: lp.into_boxed_slice(),
    }
}

/// A sorted set from its RDB encoding (types 3, 5, 12 and 17), in the form Redis 7.0 loads it
/// in. Err for a body that does not parse, a member named twice, a NaN score or no members.
pub fn from_rdb(rdb_type: u8, body: &[u8], limits: &PackLimits) -> Result<Value, String> {
    use ondisk::rdb::codec::{read_len, read_string, RdbInput};
    use ondisk::rdb::{types, RdbCursor};
    let mut input = RdbCursor::new(body);
    let bad = |e: ondisk::FormatError| format!("RDB zset: {e}");
    let entries: Vec<(Vec<u8>, f64)> = match rdb_type {
        types::ZSET | types::ZSET_2 => {
            let n = read_len(&mut input).map_err(bad)?;
            let mut v = Vec::new();
            for _ in 0..n {
                let m = read_string(&mut input).map_err(bad)?;
                let score = if rdb_type == types::ZSET_2 {
                    let mut b = [0u8; 8];
                    input.read_exact(&mut b).map_err(bad)?;
                    f64::from_le_bytes(b)
                } else {
                    match input.read_u8().map_err(bad)? {
                        253 => f64::NAN,
                        254 => f64::INFINITY,
                        255 => f64::NEG_INFINITY,
                        len => {
                            let mut b = vec![0u8; usize::from(len)];
                            input.read_exact(&mut b).map_err(bad)?;
                            strtod(&b).map_or(f64::NAN, |(v, _)| v)
                        }
                    }
                };
                if score.is_nan() {
                    return Err("RDB zset: a NaN score".into());
                }
                v.push((m, score));
            }
            v
        }
        types::ZSET_ZIPLIST | types::ZSET_LISTPACK => {
            let block = read_string(&mut input).map_err(bad)?;
            let items = if rdb_type == types::ZSET_ZIPLIST {
                super::ziplist::elements(&block).ok_or("RDB zset: a damaged ziplist")?
            } else {
                if !listpack::validate(&block, true) {
                    return Err("RDB zset: a damaged listpack".into());
                }
                listpack::iter(&block).map(|(_, e)| e.to_vec()).collect()
            };
            if items.len() % 2 != 0 {
                return Err("RDB zset: not member-score pairs".into());
            }
            let mut v = Vec::with_capacity(items.len() / 2);
            for pair in items.chunks(2) {
                match strtod(&pair[1]) {
                    Some((s, _)) if !s.is_nan() => v.push((pair[0].clone(), s)),
                    _ => return Err("RDB zset: a score that is not a number".into()),
                }
            }
            if rdb_type == types::ZSET_LISTPACK
                && v.len() <= limits.zset_entries
                && v.windows(2)
                    .all(|w| cmp_entry(w[0].1, &w[0].0, w[1].1, &w[1].0) == Ordering::Less)
            {
                // Redis keeps a listpack as it is while it has no more members than the
                // limit (ordered and free of duplicates, as its deep check wants).
                input.finish().map_err(bad)?;
                return Ok(Value::Packed(packed(block)));
            }
            v
        }
        other => return Err(format!("RDB type {other} is not a sorted set")),
    };
    input.finish().map_err(bad)?;
    if entries.is_empty() {
        return Err("RDB zset: no members".into());
    }
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    if !entries.iter().all(|(m, _)| seen.insert(&m[..])) {
        return Err("RDB zset: a member named twice".into());
    }
    if rdb_type == types::ZSET_LISTPACK || rdb_type == types::ZSET_ZIPLIST {
        // Past the entry limit only (as Redis converts a loaded listpack).
        if entries.len() <= limits.zset_entries {
            let mut sorted = entries;
            sorted.sort_by(|a, b| cmp_entry(a.1, &a.0, b.1, &b.0));
            let lp = lp_from_sorted(sorted.iter().map(|(m, s)| (&m[..], *s)));
            return Ok(Value::Packed(packed(lp)));
        }
        let mut z = LargeZSet::new();
        for (m, s) in &entries {
            z.insert(m, *s);
        }
        return Ok(Value::Object(Box::new(z)));
    }
    Ok(value_from_entries(entries, limits))
}

impl TypedObject for LargeZSet {
    fn object_type(&self) -> ObjectType {
        ObjectType::ZSet
    }

    fn encoding(&self) -> &'static str {
        "skiplist"
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.root.heap()
            + self.index.chunks.capacity() * 8
            + self.index.chunks.iter().map(|c| c.heap()).sum::<usize>()
    }

    fn capture(&self) -> Box<dyn TypedObject> {
        Box::new(self.clone())
    }

    fn capture_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.chunk_pointers()
    }

    /// RDB_TYPE_ZSET_2 as Redis 7.0 writes a skiplist: greatest member first, each as a
    /// string and its score as a binary double.
    /// `pos.at`: members written, greatest first.
    fn encode_rdb_part(
        &self,
        pos: &mut RdbPartPos,
        out: &mut Vec<u8>,
        budget: usize,
    ) -> (u8, bool) {
        /// Members visited per step (one descent of the tree).
        const STEP: usize = 256;
        let start = out.len();
        let n = self.len();
        if !pos.started {
            pos.started = true;
            write_len(out, n as u64);
        }
        while pos.at < n && out.len() - start < budget {
            let hi = n - pos.at;
            let lo = hi.saturating_sub(STEP);
            self.root.visit(lo, hi, true, &mut |s, m| {
                write_string(out, m, StringCompression::Lzf);
                out.extend_from_slice(&s.to_le_bytes());
            });
            pos.at += hi - lo;
        }
        (ondisk::rdb::types::ZSET_2, pos.at >= n)
    }

    fn encode_rdb(&self, out: &mut Vec<u8>) -> u8 {
        self.encode_rdb_part(&mut RdbPartPos::default(), out, usize::MAX)
            .0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
impl LargeZSet {
    /// Checks the tree's counts and order and that the index agrees with it.
    fn check(&self) {
        fn walk(n: &Node, out: &mut Vec<(f64, Vec<u8>)>) -> usize {
            match n {
                Node::Leaf(l) => {
                    let c = l.records().count();
                    assert_eq!(c, l.len);
                    out.extend(l.records().map(|(_, s, m)| (s, m.to_vec())));
                    c
                }
                Node::Inner(i) => {
                    assert_eq!(i.kids.len(), i.sizes.len());
                    assert_eq!(i.kids.len(), i.lows.len());
                    for (k, &low) in i.kids.iter().zip(&i.lows) {
                        assert_eq!(k.low().to_bits(), low.to_bits());
                    }
                    let mut t = 0;
                    for (k, &n) in i.kids.iter().zip(&i.sizes) {
                        assert_eq!(walk(k, out), n);
                        assert!(n > 0);
                        t += n;
                    }
                    assert_eq!(t, i.total);
                    t
                }
            }
        }
        let mut all = Vec::new();
        walk(&self.root, &mut all);
        for w in all.windows(2) {
            assert_eq!(cmp_entry(w[0].0, &w[0].1, w[1].0, &w[1].1), Ordering::Less);
        }
        let indexed: usize = self.index.chunks.iter().map(|c| c.hashes.len()).sum();
        assert_eq!(indexed, all.len());
        for (s, m) in &all {
            assert_eq!(self.score(m), Some(*s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn score_text_like_c() {
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(1.1), "1.1000000000000001");
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(3.0), "3");
        assert_eq!(fmt_g17(-0.0), "-0");
        assert_eq!(fmt_g17(1e17), "1e+17");
        assert_eq!(fmt_g17(1e16), "10000000000000000");
        assert_eq!(fmt_g17(1.5e-5), "1.5e-05");
        assert_eq!(fmt_g17(0.0001), "0.0001");
        assert_eq!(fmt_g17(f64::NEG_INFINITY), "-inf");
        assert_eq!(fmt_g17(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(d2string(10.0), "10");
        assert_eq!(d2string(-0.0), "-0");
        assert_eq!(d2string(2.5), "2.5");
        assert_eq!(d2string(1e300), "1.0000000000000001e+300");
    }

    #[test]
    fn score_parsing_like_string2d() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b"1e-400"), None);
        assert_eq!(parse_score(b"0e-400"), Some(0.0));
        assert_eq!(parse_score(b"nan"), None);
        assert_eq!(parse_score(b" 1"), None);
        assert_eq!(parse_score(b"1 "), None);
        assert_eq!(parse_score(b""), None);
        assert_eq!(parse_score(b"abc"), None);
        assert_eq!(parse_score(b".5"), Some(0.5));
        assert_eq!(parse_score(b"5."), Some(5.0));
        assert_eq!(strtod(b" 2"), Some((2.0, false)));
        assert_eq!(strtod(b""), Some((0.0, false)));
        assert_eq!(strtod(b" "), None);
        // The integer shortcut agrees with the general parse, -0 keeping its sign.
        for t in [
            "0",
            "-0",
            "7",
            "-12",
            "007",
            "123456789012345",
            "-999999999999999",
        ] {
            let want: f64 = t.parse().unwrap_or(f64::NAN);
            let got = parse_score(t.as_bytes());
            assert_eq!(got.map(f64::to_bits), Some(want.to_bits()), "{t}");
        }
        assert_eq!(parse_score(b"9007199254740993"), Some(9007199254740992.0));
        assert_eq!(parse_score(b"-"), None);
        assert_eq!(parse_score(b"--1"), None);
    }

    #[test]
    fn listpack_form_keeps_score_order() {
        let mut lp = listpack::new();
        lp_insert(&mut lp, b"b", 2.0);
        lp_insert(&mut lp, b"a", 2.0);
        lp_insert(&mut lp, b"c", 1.5);
        lp_insert(&mut lp, b"10", f64::INFINITY);
        let e = lp_entries(&lp);
        let names: Vec<&[u8]> = e.iter().map(|(m, _)| &m[..]).collect();
        assert_eq!(names, vec![&b"c"[..], b"a", b"b", b"10"]);
        assert_eq!(lp_find(&lp, b"a").map(|x| x.1), Some(2.0));
        assert_eq!(lp_find(&lp, b"10").map(|x| x.1), Some(f64::INFINITY));
        let pos = lp_find(&lp, b"a").map(|x| x.0).expect("a");
        lp_delete(&mut lp, pos);
        assert!(lp_find(&lp, b"a").is_none());
        assert!(listpack::validate(&lp, true));
        let rebuilt = lp_from_sorted(lp_entries(&lp).iter().map(|(m, s)| (&m[..], *s)));
        assert_eq!(rebuilt, lp);
    }

    #[test]
    fn the_tree_matches_a_model_under_random_changes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut z = LargeZSet::new();
        let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        for round in 0..40_000 {
            let mut m = format!("m{}", rng.gen_range(0..3000)).into_bytes();
            if rng.gen_bool(0.05) {
                // Past a one-byte length in the records.
                m.resize(200, b'x');
            }
            let s = f64::from(rng.gen_range(0..50)) / 2.0;
            let op = rng.gen_range(0..10);
            if op < 4 {
                let new = z.insert(&m, s);
                assert_eq!(new, model.insert(m, s).is_none());
            } else if op < 6 {
                // ZADD GT's decision through `update`: sees the current score, may refuse.
                let gt = |cur: Option<f64>| match cur {
                    Some(c) if c >= s => None,
                    _ => Some(s),
                };
                let mut seen = None;
                let got = z.update(&m, |cur| {
                    seen = cur;
                    Ok::<_, ()>(gt(cur))
                });
                let had = model.get(&m).copied();
                assert_eq!(seen, had);
                assert_eq!(got, Ok(gt(had)));
                if let Some(v) = gt(had) {
                    model.insert(m, v);
                }
            } else {
                assert_eq!(z.remove(&m), model.remove(&m));
            }
            if round % 5000 == 0 {
                z.check();
            }
        }
        z.check();
        let mut sorted: Vec<(f64, Vec<u8>)> = model.iter().map(|(m, s)| (*s, m.clone())).collect();
        sorted.sort_by(|a, b| cmp_entry(a.0, &a.1, b.0, &b.1));
        assert_eq!(z.len(), sorted.len());
        for (i, (s, m)) in sorted.iter().enumerate() {
            assert_eq!(z.rank(m), Some(i));
            assert_eq!(z.get(i), Some((&m[..], *s)));
        }
        let below = sorted.iter().filter(|(s, _)| *s < 10.0).count();
        assert_eq!(z.count_while(&|s, _| s < 10.0), below);
        let all = z.range(0, usize::MAX, false);
        assert_eq!(all.len(), sorted.len());
        let rev = z.range(3, 40, true);
        let want: Vec<(Vec<u8>, f64)> = sorted[3..40]
            .iter()
            .rev()
            .map(|(s, m)| (m.clone(), *s))
            .collect();
        assert_eq!(rev, want);
        // A scan returns every member once.
        let (mut cursor, mut seen) = (0u64, Vec::new());
        loop {
            let (next, got) = z.scan(cursor, 37);
            seen.extend(got.into_iter().map(|(m, _)| m));
            if next == 0 {
                break;
            }
            cursor = next;
        }
        seen.sort();
        let names: Vec<Vec<u8>> = model.keys().cloned().collect();
        assert_eq!(seen, names);
        // Emptied, it is one empty leaf again.
        for m in names {
            z.remove(&m);
        }
        assert!(z.is_empty());
        assert_eq!(z.root.nodes(), 1);
    }

    #[test]
    fn pops_take_the_edges_and_keep_tree_and_index_in_step() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut z = LargeZSet::new();
        let mut model: Vec<(f64, Vec<u8>)> = Vec::new();
        for i in 0..20_000 {
            let m = format!("m{i}").into_bytes();
            let s = f64::from(rng.gen_range(0..500));
            z.insert(&m, s);
            model.push((s, m));
        }
        model.sort_by(|a, b| cmp_entry(a.0, &a.1, b.0, &b.1));
        let snapshot = z.capture();
        let mut round = 0;
        while !model.is_empty() {
            let count = rng.gen_range(1..300);
            let max = rng.gen_bool(0.5);
            let got = z.pop(max, count);
            let take = count.min(model.len());
            let want: Vec<(Vec<u8>, f64)> = if max {
                model
                    .drain(model.len() - take..)
                    .rev()
                    .map(|(s, m)| (m, s))
                    .collect()
            } else {
                model.drain(..take).map(|(s, m)| (m, s)).collect()
            };
            assert_eq!(got, want);
            for (m, _) in &got {
                assert_eq!(z.score(m), None);
            }
            assert_eq!(z.len(), model.len());
            round += 1;
            if round % 10 == 0 {
                z.check();
            }
        }
        z.check();
        assert!(z.pop(false, 5).is_empty());
        assert_eq!(z.root.nodes(), 1);
        // The capture taken before kept every member.
        let kept = snapshot
            .as_any()
            .downcast_ref::<LargeZSet>()
            .map(LargeZSet::len);
        assert_eq!(kept, Some(20_000));
    }

    #[test]
    fn a_capture_shares_nodes_and_a_write_copies_only_its_path() {
        let mut z = LargeZSet::new();
        for i in 0..100_000 {
            z.insert(format!("member:{i}").as_bytes(), f64::from(i % 1000));
        }
        z.check();
        let captured = z.capture();
        assert!(captured.capture_bytes() * 50 < z.heap_bytes());
        z.insert(b"member:5", -1.0);
        z.remove(b"member:6");
        let old = captured
            .as_any()
            .downcast_ref::<LargeZSet>()
            .expect("a zset");
        assert_eq!(old.score(b"member:5"), Some(5.0));
        assert_eq!(old.score(b"member:6"), Some(6.0));
        assert_eq!(z.score(b"member:5"), Some(-1.0));
        assert_eq!(z.rank(b"member:5"), Some(0));
        let per_member = z.heap_bytes() / z.len();
        assert!(per_member < 70, "{per_member} bytes a member");
    }

    #[test]
    fn rdb_form_is_greatest_first() {
        let mut z = LargeZSet::new();
        z.insert(b"a", 1.0);
        z.insert(b"b", 2.0);
        let mut out = Vec::new();
        assert_eq!(z.encode_rdb(&mut out), 5);
        let mut want = vec![2, 1, b'b'];
        want.extend_from_slice(&2.0f64.to_le_bytes());
        want.extend_from_slice(&[1, b'a']);
        want.extend_from_slice(&1.0f64.to_le_bytes());
        assert_eq!(out, want);
    }
}

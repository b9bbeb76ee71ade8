//! HyperLogLog commands: PFADD, PFCOUNT and PFMERGE (and PFDEBUG and PFSELFTEST, which Redis'
//! own test suite reads), over Redis' own HLL string format, so a value moves between Redis
//! and Strata (DUMP/RESTORE, RDB files) and counts the same in both, and the same PFADDs leave
//! the same bytes:
//!
//! - a 16-byte header: `HYLL`, the encoding (0 dense, 1 sparse), three zero bytes and the
//!   cached cardinality (8 bytes, little endian; its top bit set means stale);
//! - 16384 registers of 6 bits, either dense (12288 bytes, packed from the low bits of each
//!   byte up) or sparse: runs of ZERO (`00xxxxxx`: 1-64 zero registers), XZERO (`01xxxxxx
//!   xxxxxxxx`: 1-16384) and VAL (`1vvvvvxx`: 1-4 registers holding 1-32) opcodes. A sparse
//!   value turns dense when a register passes 32 or it would grow past `hll-sparse-max-bytes`;
//! - an element is hashed with MurmurHash64A (seed `0xadc83b19`): the low 14 bits pick its
//!   register, one plus the run of zeros above them is the register's candidate value;
//! - the count is Ertl's improved estimator over the histogram of register values.
//!
//! PFCOUNT and PFMERGE over several keys are written as a [`Union`] fed one value at a time,
//! so the same code runs here and, when the keys span shards, in `server::txn`.
//!
//! Never: reads an offloaded value itself (the dispatcher loads it first, `server::exec`),
//! trusts a value's opcodes (a corrupted HLL is an error reply, never a panic, an access out
//! of bounds or an endless loop), or allocates more than one dense HLL per key it writes.

use bytes::Bytes;

use super::args::{err, is};
use super::bitops::c_str;
use super::string::{as_str, lookup_str, mark_raw, store_edited};
use super::Ctx;
use crate::notify;
use crate::protocol::Reply;

pub const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
pub const ERR_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

const HDR: usize = 16;
/// Bits of the hash that pick the register.
const P: u32 = 14;
/// Bits of the hash left for the run of zeros.
const Q: usize = 64 - P as usize;
const REGISTERS: usize = 1 << P;
const DENSE_BYTES: usize = (REGISTERS * 6).div_ceil(8);
/// Length of a dense HLL string.
pub const DENSE_SIZE: usize = HDR + DENSE_BYTES;
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const SPARSE_VAL_MAX: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
/// 0.5 / ln(2).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
const SEED: u32 = 0xadc8_3b19;

/// A sparse HLL's opcodes do not describe its registers.
#[derive(Debug, PartialEq, Eq)]
struct Corrupt;

fn corrupt() -> Reply {
    err(ERR_CORRUPT)
}

// ---------------------------------------------------------------------------------------------
// The hash
// ---------------------------------------------------------------------------------------------

/// MurmurHash64A as Redis has it (little-endian reads on every host).
fn murmur64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    // Redis passes the length as an int: values never exceed 512 MB, so it is exact.
    let mut h = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in words.by_ref() {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let mut k = u64::from_le_bytes(b).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in and the value it offers that register.
fn register_of(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The top bit set past the Q bits ends the run at Q + 1 at most.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------------------------

/// An empty HLL as Redis creates it: sparse, one XZERO opcode over every register.
fn new_hll() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    push_zeros(&mut v, REGISTERS);
    v
}

/// Whether a string is an HLL Redis would accept: the magic, a known encoding, and a dense
/// value's exact length (a sparse one's opcodes are checked as they are read).
fn check(v: &[u8]) -> Result<(), Reply> {
    let ok = v.len() >= HDR
        && &v[..4] == b"HYLL"
        && v[4] <= SPARSE
        && (v[4] != DENSE || v.len() == DENSE_SIZE);
    if ok {
        Ok(())
    } else {
        Err(err(ERR_NOT_HLL))
    }
}

/// The cached cardinality when it is valid.
fn cached_count(v: &[u8]) -> Option<u64> {
    let mut card = [0u8; 8];
    card.copy_from_slice(&v[8..HDR]);
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

fn set_cached_count(v: &mut [u8], count: u64) {
    v[8..HDR].copy_from_slice(&count.to_le_bytes());
}

fn invalidate_count(v: &mut [u8]) {
    v[HDR - 1] |= 0x80;
}

// ---------------------------------------------------------------------------------------------
// Dense registers
// ---------------------------------------------------------------------------------------------

/// Register `i` of the dense register bytes (a register's bits past the end read as zero).
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let shift = (i * 6) & 7;
    let b0 = u32::from(regs.get(byte).copied().unwrap_or(0));
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> shift) | (b1 << (8 - shift))) & 63) as u8
}

fn dense_put(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let shift = (i * 6) & 7;
    let v = u32::from(val);
    if let Some(b) = regs.get_mut(byte) {
        *b = (*b & !(63u32 << shift) as u8) | (v << shift) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b = (*b & !(63u32 >> (8 - shift)) as u8) | (v >> (8 - shift)) as u8;
    }
}

/// Raises register `i` to `val` if it holds less; true when it did.
fn dense_raise(regs: &mut [u8], i: usize, val: u8) -> bool {
    if val > dense_get(regs, i) {
        dense_put(regs, i, val);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse opcodes
// ---------------------------------------------------------------------------------------------

/// The sparse opcode at `p`: (registers it covers, their value (0 for ZERO and XZERO), its
/// length in bytes). An XZERO cut short by the end of the string reads its second byte as
/// zero, as Redis does (its strings end in a NUL).
fn opcode(s: &[u8], p: usize) -> (usize, u8, usize) {
    let b = s[p];
    match b & 0xc0 {
        0x00 => (usize::from(b & 0x3f) + 1, 0, 1),
        0x40 => {
            let low = usize::from(s.get(p + 1).copied().unwrap_or(0));
            (((usize::from(b & 0x3f) << 8) | low) + 1, 0, 2)
        }
        _ => (usize::from(b & 3) + 1, ((b >> 2) & 0x1f) + 1, 1),
    }
}

fn val_op(val: u8, len: usize) -> u8 {
    0x80 | ((val - 1) << 2) | (len - 1) as u8
}

/// Appends the shortest opcode for `len` zero registers.
fn push_zeros(v: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        let l = len - 1;
        v.push(0x40 | (l >> 8) as u8);
        v.push((l & 0xff) as u8);
    } else {
        v.push((len - 1) as u8);
    }
}

/// A sparse HLL made dense (header kept, encoding changed); Err when its opcodes do not cover
/// exactly the registers. A VAL run past the last register is an error at once, as in Redis
/// with its fix for CVE-2025-32023 (7.2.10, and the 7.0.15 that distributions ship); before
/// it, a VAL run starting exactly at the end was ignored.
fn sparse_to_dense(v: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    let regs = &mut d[HDR..];
    let (mut idx, mut p) = (0usize, HDR);
    while p < v.len() {
        let (run, val, len) = opcode(v, p);
        if val > 0 {
            if idx + run > REGISTERS {
                return Err(Corrupt);
            }
            (idx..idx + run).for_each(|i| dense_put(regs, i, val));
        }
        idx += run;
        p += len;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(d)
}

/// Raises register `index` of a sparse HLL to `count` if it holds less, rewriting the opcode
/// that covers it in place as Redis does (split, then adjacent VALs merged), so the bytes come
/// out the same. Turns the value dense when `count` needs it or the string would pass
/// `max_bytes`. Ok(true) when a register changed.
fn sparse_raise(v: &mut Vec<u8>, index: usize, count: u8, max_bytes: u64) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX {
        return promote(v, index, count);
    }
    // Find the opcode that covers `index`.
    let (mut p, mut first, mut span) = (HDR, 0usize, 0usize);
    let mut prev = None;
    while p < v.len() {
        let (run, _, len) = opcode(v, p);
        span = run;
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += len;
        first += span;
    }
    if span == 0 || p >= v.len() {
        return Err(Corrupt);
    }
    let (run, val, oplen) = opcode(v, p);
    if val > 0 {
        if val >= count {
            return Ok(false);
        }
        if run == 1 {
            v[p] = val_op(count, 1);
            merge_vals(v, prev);
            return Ok(true);
        }
    }
    if val == 0 && oplen == 1 && run == 1 {
        v[p] = val_op(count, 1);
        merge_vals(v, prev);
        return Ok(true);
    }
    // Split the opcode into up to three: before, the register, after.
    let last = first + span - 1;
    let mut seq = Vec::with_capacity(5);
    let around = |seq: &mut Vec<u8>, len: usize| {
        if val == 0 {
            push_zeros(seq, len);
        } else {
            seq.push(val_op(val, len));
        }
    };
    if index != first {
        around(&mut seq, index - first);
    }
    seq.push(val_op(count, 1));
    if index != last {
        around(&mut seq, last - index);
    }
    let new_len = v.len() + seq.len() - oplen;
    if seq.len() > oplen && new_len as u64 > max_bytes {
        return promote(v, index, count);
    }
    let cut = (p + oplen).min(v.len());
    v.splice(p..cut, seq);
    // An XZERO cut short at the end loses as much as it lacked, as in Redis.
    v.truncate(new_len);
    merge_vals(v, prev);
    Ok(true)
}

/// Redis' clean-up after a sparse write: from the opcode before the one written, up to five
/// opcodes on, two adjacent VALs of one value merge when their lengths fit one VAL. Then the
/// cached count is stale.
fn merge_vals(v: &mut Vec<u8>, prev: Option<usize>) {
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        match v[p] & 0xc0 {
            0x40 => {
                p += 2;
                continue;
            }
            0x00 => {
                p += 1;
                continue;
            }
            _ => {}
        }
        if p + 1 < v.len() && v[p + 1] & 0x80 != 0 {
            let (len1, val1, _) = opcode(v, p);
            let (len2, val2, _) = opcode(v, p + 1);
            if val1 == val2 && len1 + len2 <= SPARSE_VAL_MAX_LEN {
                v[p + 1] = val_op(val1, len1 + len2);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate_count(v);
}

/// Makes a sparse HLL dense, then raises the register there.
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    *v = sparse_to_dense(v)?;
    dense_raise(&mut v[HDR..], index, count);
    Ok(true)
}

/// Adds one element; Ok(true) when a register changed.
fn add(v: &mut Vec<u8>, ele: &[u8], max_bytes: u64) -> Result<bool, Corrupt> {
    let (index, count) = register_of(ele);
    match v[4] {
        DENSE => Ok(dense_raise(&mut v[HDR..], index, count)),
        SPARSE => sparse_raise(v, index, count, max_bytes),
        _ => Err(Corrupt),
    }
}

// ---------------------------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------------------------

/// How many registers hold each value (values past Q + 1 only come from crafted data; Redis
/// counts them and its estimator ignores them).
type Histogram = [u64; 64];

fn histogram(v: &[u8]) -> Result<Histogram, Corrupt> {
    let mut h = [0u64; 64];
    if v[4] == DENSE {
        let regs = &v[HDR..];
        (0..REGISTERS).for_each(|i| h[usize::from(dense_get(regs, i))] += 1);
        return Ok(h);
    }
    let (mut idx, mut p) = (0usize, HDR);
    while p < v.len() {
        let (run, val, len) = opcode(v, p);
        h[usize::from(val)] += run as u64;
        idx += run;
        p += len;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(h)
}

/// Ertl's sigma (arXiv:1702.01284). The loops stop where Redis' converge; the bound only
/// matters for histograms no HLL can have.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    for _ in 0..10_000 {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            break;
        }
    }
    z
}

/// Ertl's tau.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    for _ in 0..10_000 {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if before == z {
            break;
        }
    }
    z / 3.0
}

/// The estimate from a histogram, with Redis' operations in Redis' order.
fn estimate(h: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The union of several HLLs, as PFCOUNT of several keys and PFMERGE build it: the largest
/// value of each register, fed one value at a time in key order.
pub struct Union {
    max: Vec<u8>,
    any_dense: bool,
}

impl Default for Union {
    fn default() -> Self {
        Union {
            max: vec![0; REGISTERS],
            any_dense: false,
        }
    }
}

impl Union {
    /// Folds in the next key's value (None: missing, an empty HLL), answering the error Redis
    /// answers for it: not an HLL, or corrupted.
    pub fn feed(&mut self, v: Option<&[u8]>) -> Result<(), Reply> {
        let Some(v) = v else {
            return Ok(());
        };
        check(v)?;
        if v[4] == DENSE {
            self.any_dense = true;
            let regs = &v[HDR..];
            for (i, m) in self.max.iter_mut().enumerate() {
                *m = (*m).max(dense_get(regs, i));
            }
            return Ok(());
        }
        let (mut idx, mut p) = (0usize, HDR);
        while p < v.len() {
            let (run, val, len) = opcode(v, p);
            if val > 0 {
                // As in `sparse_to_dense`.
                if idx + run > REGISTERS {
                    return Err(corrupt());
                }
                for m in &mut self.max[idx..idx + run] {
                    *m = (*m).max(val);
                }
            }
            idx += run;
            p += len;
        }
        if idx != REGISTERS {
            return Err(corrupt());
        }
        Ok(())
    }

    /// PFCOUNT's answer for the union.
    pub fn count(&self) -> Reply {
        let mut h = [0u64; 64];
        self.max.iter().for_each(|&r| h[usize::from(r & 63)] += 1);
        Reply::Int(estimate(&h) as i64)
    }

    /// PFMERGE's write: the union raised into `dest`'s value (a new HLL when missing), made
    /// dense first when any source was, its cached count marked stale.
    fn merge_into(&self, dest: Option<&[u8]>, max_bytes: u64) -> Result<Vec<u8>, Reply> {
        let mut v = dest.map_or_else(new_hll, <[u8]>::to_vec);
        if self.any_dense && v[4] != DENSE {
            v = sparse_to_dense(&v).map_err(|_| corrupt())?;
        }
        for (i, &m) in self.max.iter().enumerate().filter(|(_, &m)| m > 0) {
            let raised = if v[4] == DENSE {
                Ok(dense_raise(&mut v[HDR..], i, m))
            } else {
                sparse_raise(&mut v, i, m, max_bytes)
            };
            // Redis ignores a failure here: `dest` was checked as a source already.
            let _ = raised;
        }
        invalidate_count(&mut v);
        Ok(v)
    }
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

fn sparse_max_bytes(ctx: &Ctx) -> u64 {
    ctx.shard.settings.hll_sparse_max_bytes()
}

/// PFADD key [element ...]
pub fn pfadd(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[1];
    let max_bytes = sparse_max_bytes(ctx);
    let (mut v, existed) = match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => (new_hll(), false),
        Some(e) => match as_str(e).and_then(|s| check(s).map(|_| s)) {
            Ok(s) => (s.to_vec(), true),
            Err(r) => return r,
        },
    };
    let mut updated = !existed;
    let mut failed = false;
    for ele in &args[2..] {
        match add(&mut v, ele, max_bytes) {
            Ok(changed) => updated |= changed,
            Err(Corrupt) => {
                failed = true;
                break;
            }
        }
    }
    // A corrupted HLL keeps what the elements before the failure changed, its cached count
    // untouched, as in Redis.
    if updated && !failed {
        invalidate_count(&mut v);
    }
    if updated {
        store_edited(ctx, key, v, existed);
        ctx.notify(notify::STRING, "pfadd", key);
    } else {
        mark_raw(ctx, key);
    }
    if failed {
        return corrupt();
    }
    Reply::Int(i64::from(updated))
}

/// PFCOUNT key [key ...]: one key answers (and caches) its own count; several, their union's
/// (the cross-shard form is `server::txn::pfcount`).
pub fn pfcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() > 2 {
        let mut union = Union::default();
        for key in &args[1..] {
            let fed = lookup_str(ctx, key).and_then(|v| union.feed(v));
            if let Err(e) = fed {
                return e;
            }
        }
        return union.count();
    }
    let key = &args[1];
    let v = match lookup_str(ctx, key) {
        Ok(Some(v)) => v,
        Ok(None) => return Reply::Int(0),
        Err(e) => return e,
    };
    if let Err(e) = check(v) {
        return e;
    }
    if let Some(n) = cached_count(v) {
        mark_raw(ctx, key);
        return Reply::Int(n as i64);
    }
    let Ok(h) = histogram(v) else {
        return corrupt();
    };
    let n = estimate(&h);
    let mut v = v.to_vec();
    set_cached_count(&mut v, n);
    store_edited(ctx, key, v, true);
    // The cached count is a change (Redis signals it; no event).
    ctx.changed(key);
    Reply::Int(n as i64)
}

/// PFMERGE destkey [sourcekey ...] (the cross-shard form is `server::txn::pfmerge`).
pub fn pfmerge(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    // The destination is a source too, and is checked first.
    let mut union = Union::default();
    for key in &args[1..] {
        let fed = lookup_str(ctx, key).and_then(|v| union.feed(v));
        if let Err(e) = fed {
            return e;
        }
    }
    pfmerge_store(ctx, &args[1], &union)
}

/// PFMERGE's write of `union` into `dest`, on `dest`'s shard.
pub fn pfmerge_store(ctx: &mut Ctx, dest: &[u8], union: &Union) -> Reply {
    let max_bytes = sparse_max_bytes(ctx);
    let (merged, existed) = match ctx.shard.lookup_mut(ctx.db, dest, ctx.now) {
        None => (union.merge_into(None, max_bytes), false),
        Some(e) => match as_str(e) {
            Ok(s) => (union.merge_into(Some(s), max_bytes), true),
            Err(r) => return r,
        },
    };
    match merged {
        Ok(v) => {
            store_edited(ctx, dest, v, existed);
            ctx.notify(notify::STRING, "pfadd", dest);
            Reply::Ok
        }
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------
// PFDEBUG / PFSELFTEST (Redis' own test suite uses them)
// ---------------------------------------------------------------------------------------------

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key. As in Redis, the key is looked up and checked
/// before the subcommand, and GETREG turns a sparse value dense for good.
pub fn pfdebug(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let key = &args[2];
    let v = match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => return err("ERR The specified key does not exist"),
        Some(e) => match as_str(e).and_then(|s| check(s).map(|_| s)) {
            Ok(s) => s.to_vec(),
            Err(r) => return r,
        },
    };
    // Redis unshares the string (making it raw) before it reads the subcommand.
    mark_raw(ctx, key);
    let sub = c_str(&args[1]);
    if is(sub, "getreg") {
        let dense = match v[4] {
            SPARSE => match sparse_to_dense(&v) {
                Ok(d) => {
                    store_edited(ctx, key, d.clone(), true);
                    d
                }
                Err(Corrupt) => return corrupt(),
            },
            _ => v,
        };
        let regs = &dense[HDR..];
        Reply::Array(
            (0..REGISTERS)
                .map(|i| Reply::Int(i64::from(dense_get(regs, i))))
                .collect(),
        )
    } else if is(sub, "decode") {
        if v[4] != SPARSE {
            return err("ERR HLL encoding is not sparse");
        }
        Reply::Bulk(Bytes::from(decode_sparse(&v)))
    } else if is(sub, "encoding") {
        Reply::Status(if v[4] == SPARSE { "sparse" } else { "dense" })
    } else if is(sub, "todense") {
        if v[4] != SPARSE {
            return Reply::Int(0);
        }
        match sparse_to_dense(&v) {
            Ok(d) => {
                store_edited(ctx, key, d, true);
                Reply::Int(1)
            }
            Err(Corrupt) => corrupt(),
        }
    } else {
        err(&format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        ))
    }
}

/// A sparse HLL's opcodes in PFDEBUG DECODE's words: `z:N` (ZERO), `Z:N` (XZERO), `v:VAL,N`.
fn decode_sparse(v: &[u8]) -> String {
    let mut words = Vec::new();
    let mut p = HDR;
    while p < v.len() {
        let (run, val, len) = opcode(v, p);
        words.push(match (v[p] & 0xc0, val) {
            (0x00, _) => format!("z:{run}"),
            (0x40, _) => format!("Z:{run}"),
            _ => format!("v:{val},{run}"),
        });
        p += len;
    }
    words.join(" ")
}

/// PFSELFTEST: Redis' self-check of the HLL code, run over this one: dense registers keep
/// what is written to them, and sparse and dense HLLs fed the same elements agree and stay
/// within six standard errors of the true count at each power of ten up to ten million.
/// Runs for about a second, as in Redis (an admin command).
pub fn pfselftest(ctx: &mut Ctx, _: &[Bytes]) -> Reply {
    let max_bytes = sparse_max_bytes(ctx);
    match selftest(1000, 10_000_000, max_bytes, &mut rand::thread_rng()) {
        Ok(()) => Reply::Ok,
        Err(why) => err(&format!("ERR TESTFAILED {why}")),
    }
}

/// The checks of PFSELFTEST: `cycles` rounds of random register values, then `elements`
/// elements added to a sparse and a dense HLL.
fn selftest(
    cycles: usize,
    elements: u64,
    max_bytes: u64,
    rng: &mut impl rand::Rng,
) -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_BYTES];
    let mut want = vec![0u8; REGISTERS];
    for _ in 0..cycles {
        for (i, w) in want.iter_mut().enumerate() {
            *w = rng.gen::<u8>() & 63;
            dense_put(&mut regs, i, *w);
        }
        for (i, &w) in want.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != w {
                return Err(format!("Register {i} should be {w} but is {got}"));
            }
        }
    }
    let mut dense = sparse_to_dense(&new_hll()).map_err(|_| "dense conversion failed")?;
    let mut sparse = new_hll();
    let rel_err = 1.04 / (REGISTERS as f64).sqrt();
    let seed: u64 = rng.gen();
    let mut checkpoint = 1u64;
    let count = |v: &[u8]| histogram(v).map(|h| estimate(&h)).map_err(|_| "corrupted");
    for j in 1..=elements {
        let ele = (j ^ seed).to_le_bytes();
        add(&mut dense, &ele, max_bytes).map_err(|_| "dense add failed")?;
        add(&mut sparse, &ele, max_bytes).map_err(|_| "sparse add failed")?;
        if j != checkpoint {
            continue;
        }
        if j < max_bytes / 2 && sparse[4] != SPARSE {
            return Err("sparse encoding not used".into());
        }
        let card = count(&dense)?;
        if card != count(&sparse)? {
            return Err("dense/sparse disagree".into());
        }
        // At 10, collisions make a larger error likely now and then (as Redis allows).
        let max_err = if j == 10 {
            1
        } else {
            (rel_err * 6.0 * checkpoint as f64).ceil() as u64
        };
        let abs_err = checkpoint.abs_diff(card);
        if abs_err > max_err {
            return Err(format!("Too big error. card:{checkpoint} abserr:{abs_err}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new HLL after `elements`, as `add` leaves it (PFADD then invalidates the count).
    fn hll_of(elements: &[&[u8]]) -> Vec<u8> {
        let mut v = new_hll();
        for e in elements {
            add(&mut v, e, 3000).unwrap();
        }
        v
    }

    #[test]
    fn same_bytes_as_redis() {
        // GET after PFADD on a missing key, from redis-server 7.0.15.
        let mut v = hll_of(&[b"a"]);
        invalidate_count(&mut v);
        assert_eq!(v, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80q\xa6\x84NW");
        let mut v = hll_of(&[b"hello", b"world", b"foo", b"bar"]);
        invalidate_count(&mut v);
        assert_eq!(
            v,
            b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80J\xb5\x88Q\xfc\x90GJ\x80C\x15\x80X\xe7"
        );
        assert_eq!(estimate(&histogram(&v).unwrap()), 4);
    }

    #[test]
    fn empty_hll_is_redis_layout() {
        let v = new_hll();
        assert_eq!(v, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert_eq!(histogram(&v).map(|h| h[0]), Ok(REGISTERS as u64));
        assert_eq!(estimate(&histogram(&v).unwrap()), 0);
    }

    #[test]
    fn dense_registers_round_trip() {
        let mut regs = vec![0u8; DENSE_BYTES];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = new_hll();
        let mut dense = sparse_to_dense(&sparse).unwrap();
        for n in 0..2000u32 {
            let e = n.to_string();
            let a = add(&mut sparse, e.as_bytes(), 1 << 20).unwrap();
            let b = add(&mut dense, e.as_bytes(), 1 << 20).unwrap();
            assert_eq!(a, b, "element {n}");
        }
        assert_eq!(sparse[4], SPARSE);
        let h1 = histogram(&sparse).unwrap();
        let h2 = histogram(&dense).unwrap();
        assert_eq!(h1, h2);
        let n = estimate(&h1);
        assert!((1900..2100).contains(&n), "estimate {n}");
        assert_eq!(sparse_to_dense(&sparse).unwrap()[HDR..], dense[HDR..]);
    }

    #[test]
    fn promotion_at_the_sparse_limit() {
        let mut v = new_hll();
        for n in 0..200u32 {
            add(&mut v, n.to_string().as_bytes(), 100).unwrap();
        }
        assert_eq!(v[4], DENSE);
        assert_eq!(v.len(), DENSE_SIZE);
    }

    #[test]
    fn corrupted_values_are_errors_not_panics() {
        let mut short = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
        assert_eq!(add(&mut short, b"x", 3000), Err(Corrupt));
        assert!(histogram(&short).is_err());
        // A truncated XZERO, and runs that cover too many registers.
        let mut cut = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f".to_vec();
        let _ = add(&mut cut, b"x", 3000);
        let mut over = new_hll();
        over.extend_from_slice(&[0x7f, 0xff, 0x80]);
        assert!(histogram(&over).is_err());
        assert!(sparse_to_dense(&over).is_err());
        let mut u = Union::default();
        assert_eq!(u.feed(Some(&over)), Err(corrupt()));
        assert_eq!(u.feed(Some(b"HYLL")), Err(err(ERR_NOT_HLL)));
        assert_eq!(
            u.feed(Some(b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0")),
            Err(err(ERR_NOT_HLL))
        );
    }
    #[test]
    fn selftest_passes_on_this_code() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        assert_eq!(selftest(3, 20_000, 3000, &mut rng), Ok(()));
    }

    #[test]
    fn decode_words_like_redis() {
        let mut v = hll_of(&[b"a"]);
        invalidate_count(&mut v);
        assert_eq!(decode_sparse(&v), "Z:12711 v:2,1 Z:3672");
        assert_eq!(decode_sparse(&new_hll()), "Z:16384");
    }
}

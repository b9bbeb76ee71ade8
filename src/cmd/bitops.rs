//! Bitmap commands over string values: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and
//! BITFIELD_RO, answering as Redis 7 does. Bit 0 is the most significant bit of the first
//! byte; a missing key reads as an empty string and bits past the end read as zero; writes pad
//! the string with zero bytes up to the bit they touch.
//!
//! Every function runs on the shard that owns its keys and returns a [`Reply`]. BITOP folds its
//! sources one at a time ([`Bitop`]), so the same code runs here and, when the keys span
//! shards, in `server::txn`.
//!
//! Never: reads an offloaded value itself (the dispatcher loads it first, `server::exec`),
//! grows a string past proto-max-bulk-len (512 MB), or allocates more than the values it reads
//! and the offsets it was given justify.

use bytes::Bytes;

use super::args::*;
use super::string::{as_str, lookup_str, mark_raw, store_edited};
use super::Ctx;
use crate::notify;
use crate::protocol::{Reply, MAX_BULK_LEN};
use crate::shard::{CompactBytes, Entry, Value};

const ERR_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const ERR_BIT_VALUE: &str = "ERR bit is not an integer or out of range";
const ERR_BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
const ERR_BITOP_NOT: &str = "ERR BITOP NOT must be called with a single source key.";
const ERR_FIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const ERR_OVERFLOW_TYPE: &str = "ERR Invalid OVERFLOW type specified";
const ERR_BITFIELD_RO: &str = "ERR BITFIELD_RO only supports the GET subcommand";

/// An argument as far as its first NUL byte: what Redis' C-string comparisons (`strcasecmp`,
/// `strlen`) see of a keyword or a bitfield type.
pub(super) fn c_str(arg: &[u8]) -> &[u8] {
    &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())]
}

/// A keyword compared as Redis compares it (case-insensitively, up to a NUL).
fn is_word(arg: &[u8], word: &str) -> bool {
    is(c_str(arg), word)
}

/// A bit offset argument: a non-negative integer whose byte lies within proto-max-bulk-len.
/// With `field_bits` > 0 (BITFIELD), `#N` means N fields of that width.
fn bit_offset(arg: &[u8], field_bits: u32) -> Result<u64, Reply> {
    let (digits, scale) = match arg.split_first() {
        Some((b'#', rest)) if field_bits > 0 => (rest, i64::from(field_bits)),
        _ => (arg, 1),
    };
    // Redis multiplies without an overflow check; a wrapped product is refused below or, if
    // it lands in range, used as Redis uses it.
    let offset = parse_i64(digits)
        .ok_or_else(|| err(ERR_BIT_OFFSET))?
        .wrapping_mul(scale);
    if offset < 0 || (offset >> 3) as u64 >= MAX_BULK_LEN as u64 {
        return Err(err(ERR_BIT_OFFSET));
    }
    Ok(offset as u64)
}

/// The bit at `offset` (zero past the end).
fn bit_at(s: &[u8], offset: u64) -> bool {
    s.get((offset >> 3) as usize)
        .is_some_and(|b| b & (0x80 >> (offset & 7)) != 0)
}

/// Set bits in `s`.
fn popcount(s: &[u8]) -> u64 {
    let mut words = s.chunks_exact(8);
    let mut n: u64 = words
        .by_ref()
        .map(|w| {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            u64::from(u64::from_ne_bytes(a).count_ones())
        })
        .sum();
    n += words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    n
}

/// Position of the first bit equal to `bit` in `s`. Not found: -1 when looking for a 1, the
/// bit just past the end when looking for a 0 (the string reads as padded with zeros).
fn first_bit(s: &[u8], bit: bool) -> i64 {
    let skip = if bit { 0 } else { 0xff };
    match s.iter().position(|&b| b != skip) {
        Some(i) => {
            let b = if bit { s[i] } else { !s[i] };
            i as i64 * 8 + i64::from(b.leading_zeros())
        }
        None if bit => -1,
        None => s.len() as i64 * 8,
    }
}

/// Turns a command body written with `?` into its reply.
fn answer(r: Result<Reply, Reply>) -> Reply {
    r.unwrap_or_else(|e| e)
}

// ---------------------------------------------------------------------------------------------
// SETBIT / GETBIT
// ---------------------------------------------------------------------------------------------

/// SETBIT key offset value
pub fn setbit(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    answer(run_setbit(ctx, args))
}

fn run_setbit(ctx: &mut Ctx, args: &[Bytes]) -> Result<Reply, Reply> {
    let key = &args[1];
    let offset = bit_offset(&args[2], 0)?;
    let on = match parse_i64(&args[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return Err(err(ERR_BIT_VALUE)),
    };
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    let (mut buf, existed) = match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => (vec![0u8; byte + 1], false),
        Some(e) => {
            let s = as_str(e)?;
            let was = bit_at(s, offset);
            if byte < s.len() && was == on {
                e.add_flags(Entry::RAW);
                return Ok(Reply::Int(i64::from(was)));
            }
            let len = s.len().max(byte + 1);
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(s);
            v.resize(len, 0);
            (v, true)
        }
    };
    let was = buf[byte] & mask != 0;
    if on {
        buf[byte] |= mask;
    } else {
        buf[byte] &= !mask;
    }
    store_edited(ctx, key, buf, existed);
    ctx.notify(notify::STRING, "setbit", key);
    Ok(Reply::Int(i64::from(was)))
}

/// GETBIT key offset
pub fn getbit(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    answer(run_getbit(ctx, args))
}

fn run_getbit(ctx: &mut Ctx, args: &[Bytes]) -> Result<Reply, Reply> {
    let offset = bit_offset(&args[2], 0)?;
    let s = lookup_str(ctx, &args[1])?.unwrap_or_default();
    Ok(Reply::Int(i64::from(bit_at(s, offset))))
}

// ---------------------------------------------------------------------------------------------
// BITCOUNT / BITPOS
// ---------------------------------------------------------------------------------------------

/// A range of whole bytes to look at, and the bits of its first and last byte that lie
/// outside it when the range was given in bits (Redis' "negative masks").
struct ByteRange {
    start: i64,
    end: i64,
    first_out: u8,
    last_out: u8,
}

/// Resolves a BITCOUNT/BITPOS range of a `len`-byte string as Redis does: negative indices
/// count from the end, both ends are clamped into the string, and a range in bits becomes the
/// bytes that hold it plus masks of the bits outside it. `start > end` means empty.
fn byte_range(len: i64, start: i64, end: i64, in_bits: bool) -> ByteRange {
    let total = if in_bits { len << 3 } else { len };
    let (mut start, mut end) = (start, end);
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if in_bits && start <= end {
        ByteRange {
            start: start >> 3,
            end: end >> 3,
            first_out: !((1u32 << (8 - (start & 7))) - 1) as u8,
            last_out: ((1u32 << (7 - (end & 7))) - 1) as u8,
        }
    } else {
        ByteRange {
            start,
            end,
            first_out: 0,
            last_out: 0,
        }
    }
}

/// BIT or BYTE, the unit of a range.
fn range_unit(arg: Option<&Bytes>) -> Result<bool, Reply> {
    match arg {
        None => Ok(false),
        Some(a) if is_word(a, "bit") => Ok(true),
        Some(a) if is_word(a, "byte") => Ok(false),
        Some(_) => Err(err(ERR_SYNTAX)),
    }
}

/// BITCOUNT key [start end [BYTE|BIT]]
pub fn bitcount(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    answer(run_bitcount(ctx, args))
}

fn run_bitcount(ctx: &mut Ctx, args: &[Bytes]) -> Result<Reply, Reply> {
    // As Redis: the key first (missing: 0, whatever the arguments), then the range.
    let Some(s) = lookup_str(ctx, &args[1])? else {
        return Ok(Reply::Int(0));
    };
    let len = s.len() as i64;
    let mut c = ArgCursor::new(args, 2);
    let r = match c.remaining() {
        0 => ByteRange {
            start: 0,
            end: len - 1,
            first_out: 0,
            last_out: 0,
        },
        2 | 3 => {
            let (start, end) = (c.int()?, c.int()?);
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let in_bits = range_unit(c.next_arg())?;
            byte_range(len, start, end, in_bits)
        }
        _ => return Err(err(ERR_SYNTAX)),
    };
    c.finish()?;
    if r.start > r.end {
        return Ok(Reply::Int(0));
    }
    let (start, end) = (r.start as usize, r.end as usize);
    let mut n = popcount(&s[start..=end]);
    // Bits of the edge bytes outside a range given in bits were counted: take them off.
    n -= u64::from((s[start] & r.first_out).count_ones());
    n -= u64::from((s[end] & r.last_out).count_ones());
    Ok(Reply::Int(n as i64))
}

/// BITPOS key bit [start [end [BYTE|BIT]]]
pub fn bitpos(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    answer(run_bitpos(ctx, args))
}

fn run_bitpos(ctx: &mut Ctx, args: &[Bytes]) -> Result<Reply, Reply> {
    let bit = match int_arg(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(err(ERR_BITPOS_BIT)),
    };
    // A missing key is an endless run of zeros.
    let Some(s) = lookup_str(ctx, &args[1])? else {
        return Ok(Reply::Int(if bit { -1 } else { 0 }));
    };
    let len = s.len() as i64;
    let mut c = ArgCursor::new(args, 3);
    let mut end_given = false;
    let r = match c.remaining() {
        0 => ByteRange {
            start: 0,
            end: len - 1,
            first_out: 0,
            last_out: 0,
        },
        1..=3 => {
            let start = c.int()?;
            let end = c.next_arg();
            // Redis reads the unit before the end.
            let in_bits = range_unit(c.next_arg())?;
            let end = match end {
                Some(a) => {
                    end_given = true;
                    int_arg(a)?
                }
                None => len - 1,
            };
            byte_range(len, start, end, in_bits)
        }
        _ => return Err(err(ERR_SYNTAX)),
    };
    c.finish()?;
    if r.start > r.end {
        return Ok(Reply::Int(-1));
    }
    let (found, from, bytes) = search_bits(s, &r, bit);
    // Looking for a 0 in an explicit range that holds none: not found (without an end, the
    // zero padding past the string counts).
    if end_given && !bit && found == (bytes as i64) << 3 {
        return Ok(Reply::Int(-1));
    }
    Ok(Reply::Int(if found == -1 {
        -1
    } else {
        found + ((from as i64) << 3)
    }))
}

/// Redis' search of a BITPOS range, step for step: the masked first byte, the whole bytes,
/// then the masked last byte. Returns (position relative to `from`, `from`, the bytes left
/// from `from` to the end of the range), what Redis' final checks read.
fn search_bits(s: &[u8], r: &ByteRange, bit: bool) -> (i64, usize, usize) {
    let end = r.end as usize;
    let mut start = r.start as usize;
    let mut bytes = end - start + 1;
    let outside = |b: u8, mask: u8| if bit { b & !mask } else { b | mask };
    if r.first_out != 0 {
        let mut b = outside(s[start], r.first_out);
        if r.last_out != 0 && bytes == 1 {
            b = outside(b, r.last_out);
        }
        let pos = first_bit(&[b], bit);
        if bytes == 1 || (pos != -1 && pos != 8) {
            return (pos, start, bytes);
        }
        start += 1;
        bytes -= 1;
    }
    let whole = bytes - usize::from(r.last_out != 0);
    if whole > 0 {
        let pos = first_bit(&s[start..start + whole], bit);
        if bytes == whole || (pos != -1 && pos != (whole as i64) << 3) {
            return (pos, start, bytes);
        }
        start += whole;
        bytes -= whole;
    }
    (first_bit(&[outside(s[end], r.last_out)], bit), start, bytes)
}

// ---------------------------------------------------------------------------------------------
// BITOP
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// BITOP's operation, checked as Redis checks it before looking at any key.
pub fn bitop_op(args: &[Bytes]) -> Result<BitOp, Reply> {
    let op = [
        ("and", BitOp::And),
        ("or", BitOp::Or),
        ("xor", BitOp::Xor),
        ("not", BitOp::Not),
    ]
    .into_iter()
    .find(|(w, _)| is_word(&args[1], w))
    .map(|(_, op)| op)
    .ok_or_else(|| err(ERR_SYNTAX))?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(err(ERR_BITOP_NOT));
    }
    Ok(op)
}

/// BITOP's result, built one source at a time in key order. A missing key is an empty string;
/// shorter sources read as padded with zero bytes; the result is as long as the longest.
pub struct Bitop {
    op: BitOp,
    out: Vec<u8>,
    fed: bool,
}

impl Bitop {
    pub fn new(op: BitOp) -> Bitop {
        Bitop {
            op,
            out: Vec::new(),
            fed: false,
        }
    }

    /// Folds in the next source (`b""` for a missing key).
    pub fn feed(&mut self, src: &[u8]) {
        if !self.fed {
            self.fed = true;
            self.out = src.to_vec();
            return;
        }
        if self.out.len() < src.len() {
            self.out.resize(src.len(), 0);
        }
        let (head, tail) = self.out.split_at_mut(src.len());
        let pairs = head.iter_mut().zip(src);
        match self.op {
            BitOp::And => {
                pairs.for_each(|(o, b)| *o &= b);
                tail.fill(0);
            }
            BitOp::Or => pairs.for_each(|(o, b)| *o |= b),
            BitOp::Xor => pairs.for_each(|(o, b)| *o ^= b),
            // NOT has a single source (checked by `bitop_op`).
            BitOp::Not => {}
        }
    }

    /// The result (empty when every source was).
    pub fn finish(mut self) -> Vec<u8> {
        if self.op == BitOp::Not {
            self.out.iter_mut().for_each(|b| *b = !*b);
        }
        self.out
    }
}

/// Stores BITOP's result at `dest` (any old value and TTL go; an empty result deletes the
/// key) and answers its length.
pub fn bitop_store(ctx: &mut Ctx, dest: &[u8], result: Vec<u8>) -> Reply {
    let len = result.len() as i64;
    if result.is_empty() {
        // Only a key that was there counts as a write.
        if ctx.shard.lookup_mut(ctx.db, dest, ctx.now).is_some() {
            ctx.shard.remove(ctx.db, dest);
            ctx.notify(notify::GENERIC, "del", dest);
        }
    } else {
        ctx.shard
            .store(ctx.db, dest, Value::Str(CompactBytes::from_vec(result)), 0);
        mark_raw(ctx, dest);
        ctx.notify(notify::STRING, "set", dest);
    }
    Reply::Int(len)
}

/// BITOP AND|OR|XOR|NOT destkey srckey [srckey ...], keys on this shard (the cross-shard form
/// is `server::txn::bitop`).
pub fn bitop(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    answer(run_bitop(ctx, args))
}

fn run_bitop(ctx: &mut Ctx, args: &[Bytes]) -> Result<Reply, Reply> {
    let mut acc = Bitop::new(bitop_op(args)?);
    for key in &args[3..] {
        acc.feed(lookup_str(ctx, key)?.unwrap_or_default());
    }
    Ok(bitop_store(ctx, &args[2], acc.finish()))
}

// ---------------------------------------------------------------------------------------------
// BITFIELD / BITFIELD_RO
// ---------------------------------------------------------------------------------------------

/// What BITFIELD does when a SET or INCRBY leaves the field's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldCmd {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD operation on a field of `bits` bits at bit `offset`.
#[derive(Clone, Copy, Debug)]
struct FieldOp {
    cmd: FieldCmd,
    offset: u64,
    bits: u32,
    signed: bool,
    overflow: Overflow,
}

impl FieldOp {
    fn writes(&self) -> bool {
        self.cmd != FieldCmd::Get
    }
}

/// A field type: `i1`..`i64` or `u1`..`u63` -> (signed, bits).
fn field_type(arg: &[u8]) -> Result<(bool, u32), Reply> {
    let t = c_str(arg);
    let signed = match t.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(err(ERR_FIELD_TYPE)),
    };
    let most = if signed { 64 } else { 63 };
    match parse_i64(&t[1..]) {
        Some(n) if (1..=most).contains(&n) => Ok((signed, n as u32)),
        _ => Err(err(ERR_FIELD_TYPE)),
    }
}

/// Parses BITFIELD's operations in order, with Redis' errors in the order Redis finds them.
fn field_ops(args: &[Bytes]) -> Result<Vec<FieldOp>, Reply> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut c = ArgCursor::new(args, 2);
    while let Some(sub) = c.next_arg() {
        let left = c.remaining();
        let cmd = if is_word(sub, "get") && left >= 2 {
            FieldCmd::Get
        } else if is_word(sub, "set") && left >= 3 {
            FieldCmd::Set(0)
        } else if is_word(sub, "incrby") && left >= 3 {
            FieldCmd::IncrBy(0)
        } else if is_word(sub, "overflow") && left >= 1 {
            let kind = c.value()?;
            overflow = [
                ("wrap", Overflow::Wrap),
                ("sat", Overflow::Sat),
                ("fail", Overflow::Fail),
            ]
            .into_iter()
            .find(|(w, _)| is_word(kind, w))
            .map(|(_, o)| o)
            .ok_or_else(|| err(ERR_OVERFLOW_TYPE))?;
            continue;
        } else {
            return Err(err(ERR_SYNTAX));
        };
        let (signed, bits) = field_type(c.value()?)?;
        let offset = bit_offset(c.value()?, bits)?;
        let cmd = match cmd {
            FieldCmd::Get => FieldCmd::Get,
            FieldCmd::Set(_) => FieldCmd::Set(c.int()?),
            FieldCmd::IncrBy(_) => FieldCmd::IncrBy(c.int()?),
        };
        ops.push(FieldOp {
            cmd,
            offset,
            bits,
            signed,
            overflow,
        });
    }
    c.finish()?;
    Ok(ops)
}

/// The `bits`-bit unsigned field at bit `offset` (bits past the end read as zero).
fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |v, i| (v << 1) | u64::from(bit_at(s, offset + i)))
}

/// The `bits`-bit two's complement field at bit `offset`.
fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Writes the low `bits` bits of `value` at bit `offset` (the buffer covers them).
fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        let on = (value >> (u64::from(bits) - 1 - i)) & 1 == 1;
        let at = offset + i;
        if let Some(b) = s.get_mut((at >> 3) as usize) {
            let mask = 0x80u8 >> (at & 7);
            if on {
                *b |= mask;
            } else {
                *b &= !mask;
            }
        }
    }
}

/// Redis' unsigned overflow check of `value + incr` in `bits` bits: None when it fits, else
/// the value to store under `ow` (wrapped or saturated; unused for FAIL).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrapped = || value.wrapping_add(incr as u64) & !u64::MAX.checked_shl(bits).unwrap_or(0);
    if value > max || (incr > 0 && incr > max_incr) {
        Some(if ow == Overflow::Sat { max } else { wrapped() })
    } else if incr < 0 && incr < min_incr {
        Some(if ow == Overflow::Sat { 0 } else { wrapped() })
    } else {
        None
    }
}

/// Redis' signed overflow check of `value + incr` in `bits` bits (its arithmetic wraps where
/// Redis' does).
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrapped = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let high = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= high;
            } else {
                c &= !high;
            }
        }
        c as i64
    };
    let wide = bits == 64;
    if value > max || (!wide && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr) {
        Some(if ow == Overflow::Sat { max } else { wrapped() })
    } else if value < min
        || (!wide && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(if ow == Overflow::Sat { min } else { wrapped() })
    } else {
        None
    }
}

/// The field an operation names, as GET answers it.
fn get_field(s: &[u8], op: &FieldOp) -> Reply {
    if op.signed {
        Reply::Int(get_signed(s, op.offset, op.bits))
    } else {
        Reply::Int(get_unsigned(s, op.offset, op.bits) as i64)
    }
}

/// Runs one operation on `s`; true in the second place when it changed the field.
fn apply_field(s: &mut [u8], op: &FieldOp) -> (Reply, bool) {
    let (set, by) = match op.cmd {
        FieldCmd::Get => return (get_field(s, op), false),
        FieldCmd::Set(v) => (true, v),
        FieldCmd::IncrBy(v) => (false, v),
    };
    // (old, new, answered, overflowed), in the field's own bits.
    let (old, new, answer, over) = if op.signed {
        let old = get_signed(s, op.offset, op.bits);
        if set {
            let over = signed_overflow(by, 0, op.bits, op.overflow);
            let new = over.unwrap_or(by);
            (old as u64, new as u64, old, over.is_some())
        } else {
            let over = signed_overflow(old, by, op.bits, op.overflow);
            let new = over.unwrap_or(old.wrapping_add(by));
            (old as u64, new as u64, new, over.is_some())
        }
    } else {
        let old = get_unsigned(s, op.offset, op.bits);
        if set {
            let over = unsigned_overflow(by as u64, 0, op.bits, op.overflow);
            let new = over.unwrap_or(by as u64);
            (old, new, old as i64, over.is_some())
        } else {
            let over = unsigned_overflow(old, by, op.bits, op.overflow);
            let new = over.unwrap_or(old.wrapping_add(by as u64));
            (old, new, new as i64, over.is_some())
        }
    };
    if over && op.overflow == Overflow::Fail {
        return (Reply::Nil, false);
    }
    set_field(s, op.offset, op.bits, new);
    (Reply::Int(answer), old != new)
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type offset increment |
/// OVERFLOW WRAP|SAT|FAIL] ...
pub fn bitfield(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    answer(run_bitfield(ctx, args, false))
}

/// BITFIELD_RO key [GET type offset] ...
pub fn bitfield_ro(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    answer(run_bitfield(ctx, args, true))
}

fn run_bitfield(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> Result<Reply, Reply> {
    let key = &args[1];
    let ops = field_ops(args)?;
    let Some(highest) = ops
        .iter()
        .filter(|o| o.writes())
        .map(|o| o.offset + u64::from(o.bits) - 1)
        .max()
    else {
        // Only GETs: a read, which a missing key answers with zeros.
        let s = lookup_str(ctx, key)?.unwrap_or_default();
        return Ok(Reply::Array(ops.iter().map(|o| get_field(s, o)).collect()));
    };
    if read_only {
        return Err(err(ERR_BITFIELD_RO));
    }
    let need = (highest >> 3) as usize + 1;
    let cur = match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => None,
        Some(e) => Some(as_str(e)?.len()),
    };
    let existed = cur.is_some();
    let grown = cur.is_none_or(|len| len < need);
    // Redis lets a field end up to 63 bits past the largest offset it accepts; Strata keeps
    // every string within proto-max-bulk-len.
    if grown && need > MAX_BULK_LEN {
        return Err(err(ERR_TOO_BIG));
    }
    let len = cur.unwrap_or(0).max(need);
    let mut buf = Vec::with_capacity(len);
    if let Some(e) = ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        buf.extend_from_slice(as_str(e)?);
    }
    buf.resize(len, 0);
    // As Redis counts writes: each SET or INCRBY that changed its field or ran on a string
    // this command created or grew.
    let mut changes = 0u64;
    let replies = ops
        .iter()
        .map(|o| {
            let (r, changed) = apply_field(&mut buf, o);
            if changed || (grown && o.writes() && r != Reply::Nil) {
                changes += 1;
            }
            r
        })
        .collect();
    if changes > 0 || grown {
        store_edited(ctx, key, buf, existed);
        // store_edited counted one write.
        ctx.shard.dirty = (ctx.shard.dirty + changes).saturating_sub(1);
        ctx.notify(notify::STRING, "setbit", key);
    } else {
        mark_raw(ctx, key);
    }
    Ok(Reply::Array(replies))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_like_redis() {
        assert_eq!(bit_offset(b"0", 0), Ok(0));
        assert_eq!(bit_offset(b"4294967295", 0), Ok(4294967295));
        assert_eq!(bit_offset(b"4294967296", 0), Err(err(ERR_BIT_OFFSET)));
        assert_eq!(bit_offset(b"-1", 0), Err(err(ERR_BIT_OFFSET)));
        assert_eq!(bit_offset(b"#3", 0), Err(err(ERR_BIT_OFFSET)));
        assert_eq!(bit_offset(b"#3", 8), Ok(24));
        assert_eq!(bit_offset(b"#-1", 8), Err(err(ERR_BIT_OFFSET)));
        // The product wraps as Redis' does.
        assert_eq!(
            bit_offset(b"#2305843009213693952", 8),
            Ok(0),
            "2^61 * 8 wraps to 0"
        );
    }

    #[test]
    fn first_bit_like_redis_bitpos() {
        assert_eq!(first_bit(&[0x00, 0x10], true), 11);
        assert_eq!(first_bit(&[0x00, 0x00], true), -1);
        assert_eq!(first_bit(&[0xff, 0xfe], false), 15);
        assert_eq!(first_bit(&[0xff, 0xff], false), 16);
        assert_eq!(first_bit(&[], false), 0);
    }

    #[test]
    fn fields_round_trip() {
        let mut s = vec![0u8; 3];
        set_field(&mut s, 7, 5, 23);
        assert_eq!(s, [0b0000_0001, 0b0111_0000, 0]);
        assert_eq!(get_unsigned(&s, 7, 5), 23);
        set_field(&mut s, 3, 8, (-2i64) as u64);
        assert_eq!(get_signed(&s, 3, 8), -2);
        assert_eq!(get_unsigned(&s, 100, 64), 0);
    }

    #[test]
    fn overflow_rules() {
        // u8 255 + 1: wraps to 0, saturates at 255.
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Wrap), Some(0));
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Wrap), Some(255));
        assert_eq!(unsigned_overflow(10, 5, 8, Overflow::Wrap), None);
        // i8 127 + 1 wraps to -128.
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Sat), Some(127));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Wrap), Some(127));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(
            signed_overflow(i64::MIN, -1, 64, Overflow::Sat),
            Some(i64::MIN)
        );
        assert_eq!(signed_overflow(5, -3, 64, Overflow::Fail), None);
    }

    #[test]
    fn bitop_folds_like_redis() {
        let run = |op, srcs: &[&[u8]]| {
            let mut acc = Bitop::new(op);
            srcs.iter().for_each(|s| acc.feed(s));
            acc.finish()
        };
        assert_eq!(run(BitOp::And, &[b"\xff\x0f", b"\x0f"]), b"\x0f\x00");
        assert_eq!(run(BitOp::Or, &[b"\x01", b"\x10\x20"]), b"\x11\x20");
        assert_eq!(run(BitOp::Xor, &[b"\xff", b"\x0f", b""]), b"\xf0");
        assert_eq!(run(BitOp::Not, &[b"\x0f\xff"]), b"\xf0\x00");
        assert_eq!(run(BitOp::And, &[b"", b""]), b"");
        assert_eq!(run(BitOp::And, &[b"", b"\xff"]), b"\x00");
    }
}

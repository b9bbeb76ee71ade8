//! Memcached's operations as keyed shard functions: one function, [`run`], serves every
//! memcached read, store, delete, arithmetic and touch, whichever of the three wire protocols
//! (text, meta, binary) asked. The memcached front end (`net::memcache`) turns a request into
//! an [`Op`] (encoded as the arguments of a dispatcher request whose spec RESP clients cannot
//! name, `server::memcache`), so tiering, memory checks, cache-mode eviction, grouping by shard
//! and pipelining work as for RESP; the result comes back as an [`Outcome`] it encodes itself.
//!
//! The keyspace is db 0 of the RESP side: a memcached item is a Redis string with its TTL, its
//! 32-bit client flags and 64-bit CAS in the key's metadata column (`KeyMeta`). CAS is cheap
//! and exact: every memcached write gives the key a fresh CAS (or the client's, with `E`);
//! RESP writes leave none (a new value starts without metadata, an in-place change drops the
//! CAS, see `Shard::lookup_mut`), and a memcached read of a key without one gives it a fresh
//! one (`Shard::cas_of`). So a CAS a client holds matches only while nobody wrote the key.
//! CAS values are unique across shards (the shard id is in their low bits).
//!
//! Never: parses or encodes a wire format, or reads an offloaded value itself (the dispatcher
//! loads it first for the specs that read values).

use std::cell::RefCell;

use bytes::{BufMut, Bytes, BytesMut};

use super::Ctx;
use crate::protocol::memcache::{parse_u64, ITEM_OVERHEAD};
use crate::protocol::Reply;
use crate::shard::{CompactBytes, KeyMeta, Value, ValueRef};

/// What an [`Op`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Kind {
    /// Read (get, gets, gat, mg, binary get): with [`Op::VALUE`] the value comes back.
    #[default]
    Get = 0,
    /// Store the request's value (set, add, replace, append, prepend, cas, ms).
    Store = 1,
    Delete = 2,
    /// incr / decr (ma).
    Arith = 3,
    Touch = 4,
}

/// How a store treats an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Mode {
    #[default]
    Set = 0,
    Add = 1,
    Replace = 2,
    Append = 3,
    Prepend = 4,
    /// Set only when [`Op::cas`] matches the item's CAS.
    Cas = 5,
}

/// One memcached operation on one key, as the front end asks it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Op {
    pub kind: Kind,
    pub mode: Mode,
    /// [`Op::VALUE`], [`Op::TOUCH`], ...
    pub bits: u16,
    pub client_flags: u32,
    /// New expiry for stores and touches (ms since the epoch; 0 none, [`EXPIRED`] at once).
    pub expire_at: u64,
    /// CAS to compare (0 = none).
    pub cas: u64,
    /// CAS to give the item (`E`; 0 = a fresh one).
    pub new_cas: u64,
    /// incr/decr amount; initial value on a vivifying miss.
    pub delta: u64,
    pub initial: u64,
    /// Expiry of an item created on a miss (`N`).
    pub vivify_at: u64,
    /// `R`: a hit whose expiry is before this wins the recache token.
    pub recache_at: u64,
}

/// An expiry already past: memcached's negative exptime (the item is stored, and gone).
pub const EXPIRED: u64 = 1;

/// Item states kept in `KeyMeta::state`.
const FETCHED: u32 = 1;
const STALE: u32 = 2;
const TOKEN_SENT: u32 = 4;
/// The key was given base64-encoded (meta `b`): shown so again.
const BINARY_KEY: u32 = 16;

/// Bits of [`Outcome::states`] beyond the stored ones: this request won the token (`W`).
pub const WON: u32 = 8;

impl Op {
    /// Reads return the value.
    pub const VALUE: u16 = 1;
    /// Reads also set the expiry to `expire_at` (gat, mg T, binary touch/gat).
    pub const TOUCH: u16 = 1 << 1;
    /// A miss creates an empty item (mg N) or the initial value (ma N, binary incr).
    pub const VIVIFY: u16 = 1 << 2;
    /// mg R.
    pub const RECACHE: u16 = 1 << 3;
    /// Reads leave the item's fetched bit and access time alone (mg u).
    pub const NO_UPDATE: u16 = 1 << 4;
    /// Delete marks the item stale instead (md I); a store with a CAS lower than the item's
    /// stores it as stale (ms I).
    pub const INVALIDATE: u16 = 1 << 5;
    /// Decrement instead (ma MD, decr).
    pub const DECR: u16 = 1 << 6;
    /// md x: drops the value and client flags, keeps the item.
    pub const CLEAR: u16 = 1 << 7;
    /// An arithmetic op whose item ttl changes to `expire_at` (ma T).
    pub const NEW_TTL: u16 = 1 << 8;
    /// A store whose key came base64-encoded (ms b).
    pub const BINARY_KEY: u16 = 1 << 9;

    pub fn has(&self, bit: u16) -> bool {
        self.bits & bit != 0
    }

    const LEN: usize = 2 + 2 + 4 + 8 * 7;

    /// A plain read of the value (get, binary get): the most common op, encoded once.
    const PLAIN_GET: Op = Op {
        kind: Kind::Get,
        mode: Mode::Set,
        bits: Op::VALUE,
        client_flags: 0,
        expire_at: 0,
        cas: 0,
        new_cas: 0,
        delta: 0,
        initial: 0,
        vivify_at: 0,
        recache_at: 0,
    };

    /// A set without flags, expiry or CAS: the most common store, encoded once.
    const PLAIN_SET: Op = Op {
        kind: Kind::Store,
        bits: 0,
        ..Op::PLAIN_GET
    };

    /// The op as one argument of a dispatcher request.
    pub fn encode(&self) -> Bytes {
        // What `encode` writes for PLAIN_GET: kind 0, mode 0, bits 1, the rest zero.
        static PLAIN_GET: [u8; Op::LEN] = {
            let mut b = [0u8; Op::LEN];
            b[2] = Op::VALUE as u8;
            b
        };
        // For PLAIN_SET: kind 1, the rest zero.
        static PLAIN_SET: [u8; Op::LEN] = {
            let mut b = [0u8; Op::LEN];
            b[0] = Kind::Store as u8;
            b
        };
        if *self == Op::PLAIN_GET {
            return Bytes::from_static(&PLAIN_GET);
        }
        if *self == Op::PLAIN_SET {
            return Bytes::from_static(&PLAIN_SET);
        }
        let mut v = carve(Self::LEN);
        v.put_u8(self.kind as u8);
        v.put_u8(self.mode as u8);
        v.put_u16_le(self.bits);
        v.put_u32_le(self.client_flags);
        for x in [
            self.expire_at,
            self.cas,
            self.new_cas,
            self.delta,
            self.initial,
            self.vivify_at,
            self.recache_at,
        ] {
            v.put_u64_le(x);
        }
        v.freeze()
    }

    /// Reads back what [`Op::encode`] wrote; None for anything else.
    pub fn decode(b: &[u8]) -> Option<Op> {
        if b.len() != Self::LEN {
            return None;
        }
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8 + 8 * i..16 + 8 * i]);
            u64::from_le_bytes(a)
        };
        let kind = match b[0] {
            0 => Kind::Get,
            1 => Kind::Store,
            2 => Kind::Delete,
            3 => Kind::Arith,
            4 => Kind::Touch,
            _ => return None,
        };
        let mode = match b[1] {
            0 => Mode::Set,
            1 => Mode::Add,
            2 => Mode::Replace,
            3 => Mode::Append,
            4 => Mode::Prepend,
            5 => Mode::Cas,
            _ => return None,
        };
        Some(Op {
            kind,
            mode,
            bits: u16::from_le_bytes([b[2], b[3]]),
            client_flags: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            expire_at: u64_at(0),
            cas: u64_at(1),
            new_cas: u64_at(2),
            delta: u64_at(3),
            initial: u64_at(4),
            vivify_at: u64_at(5),
            recache_at: u64_at(6),
        })
    }
}

/// How an op ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    Hit,
    Miss,
    Stored,
    NotStored,
    /// CAS mismatch.
    Exists,
    NotFound,
    Deleted,
    Touched,
    /// incr/decr of a value that is not a number.
    NonNumeric,
    /// An append or prepend would pass `--max_item_size`.
    TooLarge,
}

impl Status {
    const ALL: [Status; 10] = [
        Status::Hit,
        Status::Miss,
        Status::Stored,
        Status::NotStored,
        Status::Exists,
        Status::NotFound,
        Status::Deleted,
        Status::Touched,
        Status::NonNumeric,
        Status::TooLarge,
    ];

    fn from_u8(b: u8) -> Option<Status> {
        Status::ALL.into_iter().find(|s| *s as u8 == b)
    }
}

/// What an op found or left, for the front end to encode. It travels through the dispatcher
/// as one bulk reply, a fixed header then the value (see [`Outcome::into_reply`]), so a read's
/// reply costs one allocation and its value is copied once, out of the shard.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub status: Status,
    pub client_flags: u32,
    pub cas: u64,
    /// The item's expiry after the op (ms since the epoch, 0 = none).
    pub expire_at: u64,
    /// The item's states before the op (fetched, stale, token sent) plus [`WON`] and
    /// [`EXPIRED_SEEN`].
    pub states: u32,
    /// Seconds since the item was last read.
    pub idle: u32,
    /// The value's length (also when the value itself was not asked for).
    pub len: u64,
    /// The packed reply: [`PACKED`] header bytes, then the value when there is one.
    packed: Packed,
}

/// Where an outcome's value is: on the shard side a buffer with room for the header in
/// front, on the front end's the bulk reply it came in.
#[derive(Clone, Debug, PartialEq)]
enum Packed {
    None,
    Building(BytesMut),
    Received(Bytes),
}

thread_local! {
    /// The block small outcomes and ops are carved from (see [`carve`]).
    static BLOCK: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// Bytes per block: one allocation serves this many bytes of outcomes.
const BLOCK_SIZE: usize = 64 * 1024;
/// Parts larger than this get their own allocation (a block holds no big value alive).
const BLOCK_PART_MAX: usize = 2048;

/// An empty buffer with room for `cap` bytes, carved from the thread's block when small: one
/// allocation per block instead of one per reply (parts share the block by reference count
/// and the block is freed when its last part is).
fn carve(cap: usize) -> BytesMut {
    if cap > BLOCK_PART_MAX {
        return BytesMut::with_capacity(cap);
    }
    BLOCK.with(|cell| {
        let mut block = cell.borrow_mut();
        if block.capacity() < cap {
            *block = BytesMut::with_capacity(BLOCK_SIZE);
        }
        let rest = block.split_off(cap);
        std::mem::replace(&mut *block, rest)
    })
}

/// Header bytes in front of the value in an outcome's reply: status, has-value, states,
/// client flags, cas, expiry, idle, len.
const PACKED: usize = 1 + 1 + 4 + 4 + 8 + 8 + 4 + 8;

/// Bits of [`Outcome::states`] beyond the stored ones: the read found the key expired (and
/// removed it), for `get_expired`.
pub const EXPIRED_SEEN: u32 = 32;

impl Outcome {
    fn new(status: Status) -> Outcome {
        Outcome {
            status,
            client_flags: 0,
            cas: 0,
            expire_at: 0,
            states: 0,
            idle: 0,
            len: 0,
            packed: Packed::None,
        }
    }

    /// Gives the outcome a copy of `v` as its value.
    fn set_value(&mut self, v: &[u8]) {
        let mut b = carve(PACKED + v.len());
        b.put_bytes(0, PACKED);
        b.extend_from_slice(v);
        self.packed = Packed::Building(b);
    }

    /// The value (reads with [`Op::VALUE`], arithmetic results).
    pub fn value(&self) -> Option<&[u8]> {
        match &self.packed {
            Packed::None => None,
            Packed::Building(b) => Some(&b[PACKED..]),
            Packed::Received(b) => Some(&b[PACKED..]),
        }
    }

    /// The value as shared bytes (no copy).
    pub fn value_bytes(&self) -> Option<Bytes> {
        match &self.packed {
            Packed::None => None,
            Packed::Building(b) => Some(Bytes::copy_from_slice(&b[PACKED..])),
            Packed::Received(b) => Some(b.slice(PACKED..)),
        }
    }

    pub fn fetched(&self) -> bool {
        self.states & FETCHED != 0
    }

    pub fn stale(&self) -> bool {
        self.states & STALE != 0
    }

    pub fn token_sent(&self) -> bool {
        self.states & TOKEN_SENT != 0
    }

    pub fn won(&self) -> bool {
        self.states & WON != 0
    }

    pub fn binary_key(&self) -> bool {
        self.states & BINARY_KEY != 0
    }

    /// The read found its key expired.
    pub fn expired_seen(&self) -> bool {
        self.states & EXPIRED_SEEN != 0
    }

    fn into_reply(self) -> Reply {
        let (mut b, has_value) = match self.packed {
            Packed::Building(b) => (b, 1),
            _ => {
                let mut b = carve(PACKED);
                b.put_bytes(0, PACKED);
                (b, 0)
            }
        };
        b[0] = self.status as u8;
        b[1] = has_value;
        b[2..6].copy_from_slice(&self.states.to_le_bytes());
        b[6..10].copy_from_slice(&self.client_flags.to_le_bytes());
        b[10..18].copy_from_slice(&self.cas.to_le_bytes());
        b[18..26].copy_from_slice(&self.expire_at.to_le_bytes());
        b[26..30].copy_from_slice(&self.idle.to_le_bytes());
        b[30..38].copy_from_slice(&self.len.to_le_bytes());
        Reply::Bulk(b.freeze())
    }

    /// Reads back [`run`]'s reply; Err(reply) for anything else (the dispatcher's errors:
    /// OOM, NOAUTH, shutting down).
    pub fn from_reply(r: Reply) -> Result<Outcome, Reply> {
        let b = match r {
            Reply::Bulk(b) if b.len() >= PACKED => b,
            r => return Err(r),
        };
        let Some(status) = Status::from_u8(b[0]) else {
            return Err(Reply::Bulk(b));
        };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        Ok(Outcome {
            status,
            states: u32_at(2),
            client_flags: u32_at(6),
            cas: u64_at(10),
            expire_at: u64_at(18),
            idle: u32_at(26),
            len: u64_at(30),
            packed: if b[1] == 1 {
                Packed::Received(b)
            } else {
                Packed::None
            },
        })
    }
}

/// The arguments of a dispatcher request for `op` on `key` (with `value` for stores).
pub fn request_args(name: &'static str, key: Bytes, op: &Op, value: Option<Bytes>) -> Vec<Bytes> {
    let mut args = Vec::with_capacity(4);
    args.push(Bytes::from_static(name.as_bytes()));
    args.push(key);
    args.push(op.encode());
    if let Some(v) = value {
        args.push(v);
    }
    args
}

/// The one shard function of every memcached spec: `[name, key, op, value?]`.
pub fn run(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    let Some(op) = args.get(2).and_then(|b| Op::decode(b)) else {
        return Reply::Error("ERR internal error: bad memcached operation".into());
    };
    let key = &args[1];
    let out = match op.kind {
        Kind::Get => get(ctx, key, &op),
        Kind::Store => store(ctx, key, &op, args.get(3).map_or(&[][..], |v| &v[..])),
        Kind::Delete => delete(ctx, key, &op),
        Kind::Arith => arith(ctx, key, &op),
        Kind::Touch => touch(ctx, key, &op),
    };
    out.into_reply()
}

/// A live string item's metadata and expiry; None when missing (an expired key is removed on
/// the way) or not a string.
fn item(ctx: &mut Ctx, key: &[u8]) -> Option<(KeyMeta, u64)> {
    let (e, at) = ctx.shard.peek_live(ctx.db, key, ctx.now)?;
    if !matches!(e.value(), ValueRef::Str(_) | ValueRef::External(_)) {
        return None;
    }
    Some((ctx.shard.meta(ctx.db, key), at))
}

fn set_meta(ctx: &mut Ctx, key: &[u8], meta: KeyMeta) {
    ctx.shard.set_meta(ctx.db, key, meta);
}

fn get(ctx: &mut Ctx, key: &[u8], op: &Op) -> Outcome {
    let clock = ctx.shard.clock();
    let expired_before = ctx.shard.stats.expired_keys;
    let with_value = op.has(Op::VALUE);
    // One probe: type, value, expiry, metadata and idle time (before this read counts).
    let found = ctx.shard.read_with(ctx.db, key, ctx.now, |e, at, meta| {
        let mut out = Outcome::new(Status::Hit);
        match e.value() {
            ValueRef::Str(s) if with_value => out.set_value(s),
            ValueRef::Str(_) => {}
            // The specs that return values load them first (READS_VALUE).
            ValueRef::External(_) if with_value => return None,
            ValueRef::External(_) => {}
            // A key of another type counts as missing for memcached.
            _ => return None,
        }
        out.len = e.value_len() as u64;
        out.idle = e.idle_seconds(clock);
        out.expire_at = at;
        out.client_flags = meta.client_flags;
        Some((out, meta))
    });
    let Some((mut out, meta)) = found else {
        if !op.has(Op::VIVIFY) {
            let mut out = Outcome::new(Status::Miss);
            if ctx.shard.stats.expired_keys != expired_before {
                out.states = EXPIRED_SEEN;
            }
            return out;
        }
        // mg N: an empty item this client is to fill; it holds the token.
        ctx.shard.store(ctx.db, key, Value::str(b""), op.vivify_at);
        let cas = ctx.shard.new_cas();
        set_meta(
            ctx,
            key,
            KeyMeta {
                client_flags: 0,
                state: TOKEN_SENT,
                cas,
            },
        );
        let mut out = Outcome::new(Status::Hit);
        out.cas = cas;
        out.expire_at = op.vivify_at;
        out.states = WON;
        if with_value {
            out.set_value(b"");
        }
        return out;
    };
    // A key written over RESP has no CAS yet: it gets one now.
    let cas = if meta.cas != 0 {
        meta.cas
    } else {
        ctx.shard.cas_of(ctx.db, key)
    };
    if op.has(Op::TOUCH) {
        ctx.shard.set_expire(ctx.db, key, op.expire_at, ctx.now);
        out.expire_at = op.expire_at;
    }
    let at = out.expire_at;
    let mut states = meta.state;
    let mut won = false;
    if op.has(Op::RECACHE) && states & TOKEN_SENT == 0 && at != 0 && at < op.recache_at {
        won = true;
    }
    if states & STALE != 0 && states & TOKEN_SENT == 0 {
        won = true;
    }
    let mut next = states;
    if won {
        next |= TOKEN_SENT;
    }
    if !op.has(Op::NO_UPDATE) {
        next |= FETCHED;
    }
    if next != meta.state {
        ctx.shard.set_meta_quiet(
            ctx.db,
            key,
            KeyMeta {
                state: next,
                cas,
                ..meta
            },
        );
    }
    if won {
        states |= WON;
    }
    out.cas = cas;
    out.states = states;
    out
}

fn store(ctx: &mut Ctx, key: &[u8], op: &Op, data: &[u8]) -> Outcome {
    if op.mode == Mode::Set && op.cas == 0 {
        // A plain set replaces whatever is there (another type too): one probe of the table.
        let cas = if op.new_cas != 0 {
            op.new_cas
        } else {
            ctx.shard.new_cas()
        };
        let meta = KeyMeta {
            client_flags: op.client_flags,
            state: if op.has(Op::BINARY_KEY) {
                BINARY_KEY
            } else {
                0
            },
            cas,
        };
        ctx.shard
            .store_meta(ctx.db, key, Value::str(data), op.expire_at, meta);
        let mut out = Outcome::new(Status::Stored);
        out.cas = cas;
        out.client_flags = op.client_flags;
        out.expire_at = op.expire_at;
        return out;
    }
    let cur = item(ctx, key);
    // A key of another type counts as missing for memcached, and a set replaces it.
    let exists_other = cur.is_none() && ctx.shard.contains(ctx.db, key, ctx.now);
    let mut stale = false;
    let (cur_meta, cur_at) = match cur {
        Some((meta, at)) => {
            let cur_cas = if op.cas != 0 {
                ctx.shard.cas_of(ctx.db, key)
            } else {
                meta.cas
            };
            // A cas command compares always (0 never matches), others only with a CAS.
            let bad_cas = if op.mode == Mode::Cas {
                op.cas == 0 || op.cas != cur_cas
            } else {
                op.cas != 0 && op.cas != cur_cas
            };
            match op.mode {
                Mode::Add => return Outcome::new(Status::NotStored),
                Mode::Cas if bad_cas => {
                    if op.has(Op::INVALIDATE) && op.cas < cur_cas {
                        // ms I: an older CAS stores the value as stale, keeping the TTL.
                        stale = true;
                    } else {
                        return Outcome::new(Status::Exists);
                    }
                }
                Mode::Append | Mode::Prepend if bad_cas => return Outcome::new(Status::Exists),
                _ => {}
            }
            (Some(meta), at)
        }
        None => match op.mode {
            Mode::Cas => return Outcome::new(Status::NotFound),
            Mode::Replace | Mode::Append | Mode::Prepend => return Outcome::new(Status::NotStored),
            Mode::Set | Mode::Add => {
                if exists_other && op.mode == Mode::Add {
                    return Outcome::new(Status::NotStored);
                }
                (None, 0)
            }
        },
    };
    let cas = if op.new_cas != 0 {
        op.new_cas
    } else {
        ctx.shard.new_cas()
    };
    let (flags, at, state) = match op.mode {
        Mode::Append | Mode::Prepend => {
            let meta = cur_meta.unwrap_or_default();
            let max = ctx.shard.settings.max_item_size;
            let v = {
                let Some((e, _)) = ctx.shard.peek_live(ctx.db, key, ctx.now) else {
                    return Outcome::new(Status::NotStored);
                };
                let ValueRef::Str(old) = e.value() else {
                    return Outcome::new(Status::NotStored);
                };
                let len = old.len() + data.len();
                if len as u64 + key.len() as u64 + ITEM_OVERHEAD > max {
                    return Outcome::new(Status::TooLarge);
                }
                let mut v = Vec::with_capacity(len);
                if op.mode == Mode::Append {
                    v.extend_from_slice(old);
                    v.extend_from_slice(data);
                } else {
                    v.extend_from_slice(data);
                    v.extend_from_slice(old);
                }
                v
            };
            if let Some(e) = ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
                e.set_value(Value::Str(CompactBytes::from_vec(v)));
            }
            ctx.shard.dirty += 1;
            (meta.client_flags, cur_at, meta.state & !(FETCHED))
        }
        _ => {
            let (at, state) = if stale {
                let token = cur_meta.map_or(0, |m| m.state & TOKEN_SENT);
                (cur_at, STALE | token)
            } else {
                (op.expire_at, 0)
            };
            ctx.shard.store(ctx.db, key, Value::str(data), at);
            (op.client_flags, at, state)
        }
    };
    let mut state = state & !FETCHED;
    if op.has(Op::BINARY_KEY) {
        state |= BINARY_KEY;
    }
    set_meta(
        ctx,
        key,
        KeyMeta {
            client_flags: flags,
            state,
            cas,
        },
    );
    let mut out = Outcome::new(Status::Stored);
    out.cas = cas;
    out.client_flags = flags;
    out.expire_at = at;
    out
}

fn delete(ctx: &mut Ctx, key: &[u8], op: &Op) -> Outcome {
    let Some((meta, _)) = item(ctx, key) else {
        return Outcome::new(Status::NotFound);
    };
    if op.cas != 0 && ctx.shard.cas_of(ctx.db, key) != op.cas {
        return Outcome::new(Status::Exists);
    }
    if op.has(Op::INVALIDATE) {
        if op.has(Op::NEW_TTL) {
            ctx.shard.set_expire(ctx.db, key, op.expire_at, ctx.now);
        }
        let cas = ctx.shard.new_cas();
        set_meta(
            ctx,
            key,
            KeyMeta {
                state: (meta.state | STALE) & !TOKEN_SENT,
                cas,
                ..meta
            },
        );
    } else if op.has(Op::CLEAR) {
        let at = ctx
            .shard
            .peek_live(ctx.db, key, ctx.now)
            .map_or(0, |(_, at)| at);
        ctx.shard.store(ctx.db, key, Value::str(b""), at);
        let cas = ctx.shard.new_cas();
        set_meta(
            ctx,
            key,
            KeyMeta {
                cas,
                ..KeyMeta::default()
            },
        );
    } else {
        ctx.shard.remove(ctx.db, key);
    }
    Outcome::new(Status::Deleted)
}

fn arith(ctx: &mut Ctx, key: &[u8], op: &Op) -> Outcome {
    let Some((meta, at)) = item(ctx, key) else {
        if !op.has(Op::VIVIFY) {
            return Outcome::new(Status::NotFound);
        }
        let text = op.initial.to_string();
        ctx.shard
            .store(ctx.db, key, Value::str(text.as_bytes()), op.vivify_at);
        let cas = ctx.shard.new_cas();
        set_meta(
            ctx,
            key,
            KeyMeta {
                cas,
                ..KeyMeta::default()
            },
        );
        let mut out = Outcome::new(Status::Stored);
        out.len = text.len() as u64;
        out.set_value(text.as_bytes());
        out.cas = cas;
        out.expire_at = op.vivify_at;
        return out;
    };
    // memcached's order: an empty value, then the CAS, then the number.
    let (empty, parsed, old_len) = match ctx.shard.peek_live(ctx.db, key, ctx.now) {
        Some((e, _)) => match e.value() {
            ValueRef::Str(old) => (old.is_empty(), parse_u64(old), old.len()),
            _ => (true, None, 0),
        },
        None => return Outcome::new(Status::NotFound),
    };
    if empty {
        return Outcome::new(Status::NonNumeric);
    }
    if op.cas != 0 && ctx.shard.cas_of(ctx.db, key) != op.cas {
        return Outcome::new(Status::Exists);
    }
    let Some(n) = parsed else {
        return Outcome::new(Status::NonNumeric);
    };
    let n = if op.has(Op::DECR) {
        n.saturating_sub(op.delta)
    } else {
        n.wrapping_add(op.delta)
    };
    let digits = n.to_string();
    // As memcached changes a number in place: a shorter result is padded with spaces.
    let mut v = digits.clone().into_bytes();
    if v.len() < old_len {
        v.resize(old_len, b' ');
    }
    if let Some(e) = ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        e.set_value(Value::str(&v));
    }
    ctx.shard.dirty += 1;
    let mut at = at;
    if op.has(Op::NEW_TTL) {
        ctx.shard.set_expire(ctx.db, key, op.expire_at, ctx.now);
        at = op.expire_at;
    }
    let cas = ctx.shard.new_cas();
    set_meta(ctx, key, KeyMeta { cas, ..meta });
    let mut out = Outcome::new(Status::Hit);
    out.len = digits.len() as u64;
    out.set_value(digits.as_bytes());
    out.cas = cas;
    out.client_flags = meta.client_flags;
    out.expire_at = at;
    out
}

fn touch(ctx: &mut Ctx, key: &[u8], op: &Op) -> Outcome {
    if item(ctx, key).is_none() {
        return Outcome::new(Status::NotFound);
    }
    ctx.shard.set_expire(ctx.db, key, op.expire_at, ctx.now);
    Outcome::new(Status::Touched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_op_reads_back_as_written() {
        let op = Op {
            kind: Kind::Arith,
            mode: Mode::Prepend,
            bits: Op::VALUE | Op::DECR,
            client_flags: u32::MAX,
            expire_at: 7,
            cas: u64::MAX,
            new_cas: 3,
            delta: 4,
            initial: 5,
            vivify_at: 6,
            recache_at: 8,
        };
        assert_eq!(Op::decode(&op.encode()), Some(op));
        assert_eq!(Op::decode(b"short"), None);
        let get = Op {
            bits: Op::VALUE,
            ..Op::default()
        };
        assert_eq!(Op::decode(&get.encode()), Some(get));
        let set = Op {
            kind: Kind::Store,
            ..Op::default()
        };
        assert_eq!(Op::decode(&set.encode()), Some(set));
    }

    #[test]
    fn an_outcome_reads_back_as_built() {
        let mut o = Outcome::new(Status::Exists);
        o.client_flags = u32::MAX;
        o.cas = 1 << 60;
        o.expire_at = 3;
        o.states = WON | EXPIRED_SEEN;
        o.idle = 9;
        o.len = 5;
        o.set_value(b"hello");
        let back = Outcome::from_reply(o.clone().into_reply()).expect("an outcome");
        assert_eq!(back.value(), Some(&b"hello"[..]));
        assert_eq!(back.value_bytes().as_deref(), Some(&b"hello"[..]));
        assert_eq!(
            (
                back.status,
                back.client_flags,
                back.cas,
                back.expire_at,
                back.states,
                back.idle,
                back.len
            ),
            (
                o.status,
                o.client_flags,
                o.cas,
                o.expire_at,
                o.states,
                o.idle,
                o.len
            )
        );
        let none =
            Outcome::from_reply(Outcome::new(Status::Miss).into_reply()).expect("an outcome");
        assert_eq!((none.status, none.value()), (Status::Miss, None));
        assert!(Outcome::from_reply(Reply::Error("OOM".into())).is_err());
        assert!(Outcome::from_reply(Reply::Bulk(Bytes::from_static(b"short"))).is_err());
    }
}

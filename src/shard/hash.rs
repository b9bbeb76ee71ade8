//! The large hash (OBJECT ENCODING "hashtable"): what a hash becomes past
//! `hash-max-listpack-entries` fields or a field or value longer than `hash-max-listpack-value`.
//!
//! ```text
//! LargeHash: nodes [Arc<Node>; n]      linear hashing: node of field f = low bits of hash(f)
//!   Node: slots [u32]                  open addressing (linear probing), arena offset + 1
//!         tags [u8]                    8 bits of each slot's field hash (a probe reads a
//!                                        record only when its tag matches)
//!         arena [u8]                   records, back to back:
//!                                        varint (field len << 2 | has_expiry << 1 | spilled)
//!                                        [expiry ms u64 LE]            when has_expiry
//!                                        varint value len, field, value   (inline)
//!                                        u32 LE index into spills         (spilled)
//!         spills [Arc<[u8]>]           field then value, for records longer than SPILL_OVER
//! ```
//!
//! - Memory: a short field costs its bytes, two or three bytes of header and about eight bytes
//!   of slot and tag, where Redis' dict pays a 24-byte entry, two sds headers and a bucket pointer.
//! - Snapshots: [`TypedObject::capture`] clones the vector of node pointers; a later write
//!   copies only the node it touches (`Arc::make_mut`), and long values sit in spills, which
//!   that copy shares, so a node copy stays bounded (about `NODE_FIELDS` short records).
//! - Growth: linear hashing splits one node at a time (the node at the split pointer) when the
//!   fields per node pass [`NODE_FIELDS`] on average, and merges the last one back when they
//!   fall under a quarter of it: no step ever rehashes the whole hash.
//! - HSCAN: a node at depth `d` holds the fields whose hash ends in its index's `d` bits, so in
//!   the order of the *bit-reversed* hash every node is one contiguous range. The scan walks that
//!   order and its cursor is the reversed hash it stopped at: splits and merges never move a
//!   field in that order, so a field present for the whole scan is returned exactly once.
//! - Field hashes are seeded per process: clients cannot pile fields into one node.
//!
//! Never: holds a node that a capture shares while changing it (every change goes through
//! `Arc::make_mut`), or lets its byte count drift from what it holds.

use std::any::Any;
use std::sync::{Arc, OnceLock};

use ondisk::rdb::codec::{write_len, write_string, StringCompression};

use super::object::{ObjectType, RdbPartPos, TypedObject};

/// Average fields per node past which linear hashing splits a node.
const NODE_FIELDS: usize = 128;
/// Records (field plus value bytes) longer than this go to a block of their own.
const SPILL_OVER: usize = 200;
const MIN_SLOTS: usize = 4;
const SPILLED: usize = 1;
const HAS_EXPIRY: usize = 2;

/// The hash of a field: seeded once per process.
pub fn field_hash(field: &[u8]) -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    let seed = *SEED.get_or_init(rand::random);
    xxhash_rust::xxh3::xxh3_64_with_seed(field, seed)
}

/// The position of a field in scan order.
fn scan_key(h: u64) -> u64 {
    h.reverse_bits()
}

/// The 8 bits of a field's hash kept beside its slot: the top ones, which neither the node
/// (low bits) nor the home slot (from bit 32 up) is chosen by.
fn tag(h: u64) -> u8 {
    (h >> 56) as u8
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// (value, bytes read) of the varint at `at`.
fn get_varint(b: &[u8], mut at: usize) -> (usize, usize) {
    let (mut v, mut shift, start) = (0usize, 0, at);
    loop {
        let byte = b[at];
        at += 1;
        v |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return (v, at - start);
        }
        shift += 7;
    }
}

/// One field as stored: its name, value and expiry (ms since the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    pub expire_at: Option<u64>,
}

/// A record read back from an arena.
struct Record<'a> {
    field: Field<'a>,
    /// Bytes it takes in the arena.
    size: usize,
    /// (spill index, arena offset of that index) when spilled.
    spill: Option<(usize, usize)>,
}

#[derive(Clone, Default)]
struct Node {
    slots: Box<[u32]>,
    /// `tag(hash)` of the field in the same slot (meaningless where the slot is empty).
    tags: Box<[u8]>,
    arena: Vec<u8>,
    spills: Vec<Arc<[u8]>>,
    /// Bytes the spills' allocations hold.
    spill_bytes: usize,
    len: usize,
    /// Arena bytes of records no slot points at any more.
    dead: usize,
}

impl Node {
    fn heap(&self) -> usize {
        // The Arc's counts, the node, its slots, arena and spill pointers, the spills.
        16 + std::mem::size_of::<Node>()
            + self.slots.len() * 5
            + self.arena.capacity()
            + self.spills.capacity() * std::mem::size_of::<Arc<[u8]>>()
            + self.spill_bytes
    }

    fn record(&self, off: usize) -> Record<'_> {
        let a = &self.arena;
        let (head, n) = get_varint(a, off);
        let mut at = off + n;
        let expire_at = (head & HAS_EXPIRY != 0).then(|| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&a[at..at + 8]);
            at += 8;
            u64::from_le_bytes(b)
        });
        let flen = head >> 2;
        if head & SPILLED != 0 {
            let mut b = [0u8; 4];
            b.copy_from_slice(&a[at..at + 4]);
            let idx = u32::from_le_bytes(b) as usize;
            let block = &self.spills[idx];
            Record {
                field: Field {
                    name: &block[..flen],
                    value: &block[flen..],
                    expire_at,
                },
                size: at + 4 - off,
                spill: Some((idx, at)),
            }
        } else {
            let (vlen, n) = get_varint(a, at);
            at += n;
            Record {
                field: Field {
                    name: &a[at..at + flen],
                    value: &a[at + flen..at + flen + vlen],
                    expire_at,
                },
                size: at + flen + vlen - off,
                spill: None,
            }
        }
    }

    /// The name, size and spill (as in [`Record`]) of the record at `off`: what moving a
    /// record needs, without its value or expiry.
    fn span(&self, off: usize) -> (&[u8], usize, Option<(usize, usize)>) {
        let a = &self.arena;
        let (head, n) = get_varint(a, off);
        let flen = head >> 2;
        let mut at = off + n;
        if head & HAS_EXPIRY != 0 {
            at += 8;
        }
        if head & SPILLED != 0 {
            let mut b = [0u8; 4];
            b.copy_from_slice(&a[at..at + 4]);
            let idx = u32::from_le_bytes(b) as usize;
            return (&self.spills[idx][..flen], at + 4 - off, Some((idx, at)));
        }
        let (vlen, n) = get_varint(a, at);
        at += n;
        (&a[at..at + flen], at + flen + vlen - off, None)
    }

    /// Whether the record at `off` is the field `name`: the probe's test, which compares
    /// the name's length (in the record's head) before reading the name itself.
    fn name_is(&self, off: usize, name: &[u8]) -> bool {
        let (head, _) = get_varint(&self.arena, off);
        head >> 2 == name.len() && self.span(off).0 == name
    }

    fn at(&self, slot: usize) -> Option<Record<'_>> {
        match self.slots.get(slot) {
            Some(&s) if s != 0 => Some(self.record(s as usize - 1)),
            _ => None,
        }
    }

    fn home(&self, h: u64) -> usize {
        ((h >> 32) as usize) & (self.slots.len() - 1)
    }

    fn find(&self, h: u64, name: &[u8]) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let t = tag(h);
        let mut i = self.home(h);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if self.tags[i] == t && self.name_is(s as usize - 1, name) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Appends a record and returns its slot value (offset + 1).
    fn append(&mut self, name: &[u8], value: &[u8], expire_at: Option<u64>) -> u32 {
        let off = self.arena.len();
        let spilled = name.len() + value.len() > SPILL_OVER;
        let flags =
            if spilled { SPILLED } else { 0 } | if expire_at.is_some() { HAS_EXPIRY } else { 0 };
        put_varint(&mut self.arena, name.len() << 2 | flags);
        if let Some(at) = expire_at {
            self.arena.extend_from_slice(&at.to_le_bytes());
        }
        if spilled {
            let mut block = Vec::with_capacity(name.len() + value.len());
            block.extend_from_slice(name);
            block.extend_from_slice(value);
            let block: Arc<[u8]> = block.into();
            self.spill_bytes += 16 + block.len();
            self.arena
                .extend_from_slice(&(self.spills.len() as u32).to_le_bytes());
            self.spills.push(block);
        } else {
            put_varint(&mut self.arena, value.len());
            self.arena.extend_from_slice(name);
            self.arena.extend_from_slice(value);
        }
        off as u32 + 1
    }

    /// Adds a field known to be absent.
    fn insert_new(&mut self, h: u64, name: &[u8], value: &[u8], expire_at: Option<u64>) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(MIN_SLOTS));
        }
        let s = self.append(name, value, expire_at);
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
        self.tags[i] = tag(h);
        self.len += 1;
    }

    /// Gives the field in `slot` a new value and expiry.
    fn replace(&mut self, slot: usize, value: &[u8], expire_at: Option<u64>) {
        let off = self.slots[slot] as usize - 1;
        let (name_len, same_shape, spill) = {
            let r = self.record(off);
            let fits = r.spill.is_none()
                && r.field.value.len() == value.len()
                && r.field.name.len() + value.len() <= SPILL_OVER;
            (
                r.field.name.len(),
                fits && r.field.expire_at.is_some() == expire_at.is_some(),
                r.spill,
            )
        };
        if same_shape {
            // Same layout: overwrite the expiry and the value where they are.
            let (head, n) = get_varint(&self.arena, off);
            let mut at = off + n;
            if let Some(e) = expire_at {
                self.arena[at..at + 8].copy_from_slice(&e.to_le_bytes());
                at += 8;
            }
            let (_, n) = get_varint(&self.arena, at);
            let start = at + n + (head >> 2);
            self.arena[start..start + value.len()].copy_from_slice(value);
            return;
        }
        if let (Some((idx, _)), true) = (spill, name_len + value.len() > SPILL_OVER) {
            if self.record(off).field.expire_at.is_some() == expire_at.is_some() {
                // Still spilled, same stub: swap the block, and the expiry in place.
                let mut block = Vec::with_capacity(name_len + value.len());
                block.extend_from_slice(&self.spills[idx][..name_len]);
                block.extend_from_slice(value);
                self.spill_bytes = self.spill_bytes + block.len() - self.spills[idx].len();
                self.spills[idx] = block.into();
                if let Some(e) = expire_at {
                    let (_, n) = get_varint(&self.arena, off);
                    self.arena[off + n..off + n + 8].copy_from_slice(&e.to_le_bytes());
                }
                return;
            }
        }
        let name = self.record(off).field.name.to_vec();
        self.drop_record(off);
        self.slots[slot] = self.append(&name, value, expire_at);
        self.maybe_compact();
    }

    /// Sets the expiry of the field in `slot`, keeping its value.
    fn set_expiry(&mut self, slot: usize, expire_at: Option<u64>) {
        let off = self.slots[slot] as usize - 1;
        let value = self.record(off).field.value.to_vec();
        self.replace(slot, &value, expire_at);
    }

    /// Frees what the record at `off` holds (its arena bytes become dead, its spill goes).
    fn drop_record(&mut self, off: usize) {
        let (size, spill) = {
            let r = self.record(off);
            (r.size, r.spill)
        };
        self.dead += size;
        if let Some((idx, _)) = spill {
            self.spill_bytes -= 16 + self.spills[idx].len();
            let last = self.spills.len() - 1;
            // The record whose block moves into `idx` (found while every index still resolves).
            let moved = (idx != last)
                .then(|| {
                    (0..self.slots.len()).find_map(|i| match self.at(i)?.spill {
                        Some((j, at)) if j == last => Some(at),
                        _ => None,
                    })
                })
                .flatten();
            self.spills.swap_remove(idx);
            if let Some(at) = moved {
                self.arena[at..at + 4].copy_from_slice(&(idx as u32).to_le_bytes());
            }
        }
    }

    fn remove_slot(&mut self, slot: usize) {
        let off = self.slots[slot] as usize - 1;
        self.drop_record(off);
        self.len -= 1;
        // Backward-shift deletion: pull later entries of the probe run into the gap.
        let mask = self.slots.len() - 1;
        let mut gap = slot;
        self.slots[gap] = 0;
        let mut j = slot;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = self.home(field_hash(self.record(s as usize - 1).field.name));
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(gap) & mask) {
                self.slots[gap] = s;
                self.tags[gap] = self.tags[j];
                self.slots[j] = 0;
                gap = j;
            }
        }
        if self.len * 8 < self.slots.len() && self.slots.len() > MIN_SLOTS {
            self.rebuild((self.slots.len() / 2).max(MIN_SLOTS));
        } else {
            self.maybe_compact();
        }
    }

    fn maybe_compact(&mut self) {
        if self.dead > 64 && self.dead * 2 > self.arena.len() {
            self.rebuild(self.slots.len());
        }
    }

    /// Rewrites the arena without dead records, with `slots` slots.
    fn rebuild(&mut self, slots: usize) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.dead);
        let old = std::mem::replace(&mut self.slots, vec![0u32; slots].into_boxed_slice());
        let same = old.len() == slots;
        if !same {
            self.tags = vec![0u8; slots].into_boxed_slice();
        }
        let mask = slots - 1;
        for (pos, &s) in old.iter().enumerate() {
            if s == 0 {
                continue;
            }
            let off = s as usize - 1;
            let (name, size, _) = self.span(off);
            let new = arena.len() as u32 + 1;
            arena.extend_from_slice(&self.arena[off..off + size]);
            // Kept in place (and so is its tag), or placed anew by its hash.
            let i = if same {
                pos
            } else {
                let h = field_hash(name);
                let mut i = ((h >> 32) as usize) & mask;
                while self.slots[i] != 0 {
                    i = (i + 1) & mask;
                }
                self.tags[i] = tag(h);
                i
            };
            self.slots[i] = new;
        }
        self.arena = arena;
        self.dead = 0;
    }

    /// An empty node sized for `fields` records of `bytes` arena bytes, so that filling it
    /// neither rehashes nor reallocates.
    fn with_capacity(fields: usize, bytes: usize) -> Node {
        let slots = (fields * 4).div_ceil(3).next_power_of_two().max(MIN_SLOTS);
        Node {
            slots: vec![0u32; slots].into_boxed_slice(),
            tags: vec![0u8; slots].into_boxed_slice(),
            arena: Vec::with_capacity(bytes),
            ..Node::default()
        }
    }

    /// Arena bytes of the live records.
    fn live_bytes(&self) -> usize {
        self.arena.len() - self.dead
    }

    /// The records split in two by their hash (`right` true: the second node), each node sized
    /// for what it receives; every field hashed once.
    fn split_by(&self, right: impl Fn(u64) -> bool) -> (Node, Node) {
        let mut sides = Vec::with_capacity(self.len);
        let (mut counts, mut bytes) = ([0usize; 2], [0usize; 2]);
        for &s in self.slots.iter().filter(|&&s| s != 0) {
            let off = s as usize - 1;
            let (name, size, spill) = self.span(off);
            let h = field_hash(name);
            let side = usize::from(right(h));
            counts[side] += 1;
            bytes[side] += size;
            sides.push((h, side, off, size, spill));
        }
        let mut out = [
            Node::with_capacity(counts[0], bytes[0]),
            Node::with_capacity(counts[1], bytes[1]),
        ];
        for (h, side, off, size, spill) in sides {
            out[side].copy_record(h, self, off, size, spill);
        }
        let [a, b] = out;
        (a, b)
    }

    /// Adds the record at `off` of `src` (a field absent here) as it is: its bytes copied,
    /// its spilled block shared, nothing decoded and encoded again.
    fn copy_record(
        &mut self,
        h: u64,
        src: &Node,
        off: usize,
        size: usize,
        spill: Option<(usize, usize)>,
    ) {
        let at = self.arena.len();
        self.arena.extend_from_slice(&src.arena[off..off + size]);
        if let Some((idx, stub)) = spill {
            let block = src.spills[idx].clone();
            self.spill_bytes += 16 + block.len();
            let pos = at + (stub - off);
            self.arena[pos..pos + 4].copy_from_slice(&(self.spills.len() as u32).to_le_bytes());
            self.spills.push(block);
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(MIN_SLOTS));
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = at as u32 + 1;
        self.tags[i] = tag(h);
        self.len += 1;
    }

    fn fields(&self) -> impl Iterator<Item = (usize, Field<'_>)> {
        (0..self.slots.len()).filter_map(|i| self.at(i).map(|r| (i, r.field)))
    }
}

/// The large hash.
#[derive(Clone)]
pub struct LargeHash {
    nodes: Vec<Arc<Node>>,
    len: usize,
    /// The nodes' heap bytes, kept as they change.
    node_bytes: usize,
    /// Fields with an expiry.
    expiring: usize,
    /// No field expires before this (ms; `u64::MAX` when none may): a lower bound, made exact
    /// again by [`LargeHash::remove_expired`].
    min_expire: u64,
}

impl Default for LargeHash {
    fn default() -> Self {
        LargeHash::new()
    }
}

impl LargeHash {
    pub fn new() -> LargeHash {
        let node = Node::default();
        LargeHash {
            node_bytes: node.heap(),
            nodes: vec![Arc::new(node)],
            len: 0,
            expiring: 0,
            min_expire: u64::MAX,
        }
    }

    /// A hash with no node, only to stand in while the real one is taken out of its entry
    /// (never used as a hash).
    pub fn placeholder() -> LargeHash {
        LargeHash {
            nodes: Vec::new(),
            len: 0,
            node_bytes: 0,
            expiring: 0,
            min_expire: u64::MAX,
        }
    }

    /// The earliest field expiry, or an earlier time (None when no field has one).
    pub fn min_expire_bound(&self) -> Option<u64> {
        (self.expiring > 0).then_some(self.min_expire)
    }

    /// Removes every field expired at `now` (ms); returns how many went. Cheap unless a
    /// field may have expired.
    pub fn remove_expired(&mut self, now: u64) -> usize {
        if self.expiring == 0 || self.min_expire > now {
            return 0;
        }
        let gone: Vec<Vec<u8>> = self
            .iter()
            .filter(|f| f.expire_at.is_some_and(|at| at <= now))
            .map(|f| f.name.to_vec())
            .collect();
        for name in &gone {
            self.remove(name);
        }
        self.min_expire = self
            .iter()
            .filter_map(|f| f.expire_at)
            .min()
            .unwrap_or(u64::MAX);
        gone.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fields that carry an expiry.
    pub fn expiring(&self) -> usize {
        self.expiring
    }

    fn node_of(&self, h: u64) -> usize {
        let n = self.nodes.len();
        let low = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let i = (h as usize) & (2 * low - 1);
        if i >= n {
            i - low
        } else {
            i
        }
    }

    /// Node `i`'s range in scan order: (first scan key, first scan key past it; None at the
    /// end of the space).
    fn range(&self, i: usize) -> (u64, Option<u64>) {
        let n = self.nodes.len();
        let level = usize::BITS - 1 - n.leading_zeros();
        let low = 1usize << level;
        let depth = if i < n - low || i >= low {
            level + 1
        } else {
            level
        };
        let start = (i as u64).reverse_bits();
        let end = if depth == 0 {
            None
        } else {
            start.checked_add(1u64 << (64 - depth))
        };
        (start, end)
    }

    /// Runs `f` on node `i`, copying it first when a capture shares it.
    fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut Node) -> R) -> R {
        let before = self.nodes[i].heap();
        let node = Arc::make_mut(&mut self.nodes[i]);
        let r = f(node);
        self.node_bytes = self.node_bytes + node.heap() - before;
        r
    }

    pub fn get(&self, name: &[u8]) -> Option<Field<'_>> {
        let h = field_hash(name);
        let node = &self.nodes[self.node_of(h)];
        node.find(h, name).and_then(|s| node.at(s)).map(|r| r.field)
    }

    /// Sets a field's value; its expiry goes unless `keep_expiry`. True when the field is new.
    pub fn set(&mut self, name: &[u8], value: &[u8], keep_expiry: bool) -> bool {
        let h = field_hash(name);
        let i = self.node_of(h);
        let (added, had, has) = self.edit(i, |node| match node.find(h, name) {
            Some(slot) => {
                let old = node.at(slot).and_then(|r| r.field.expire_at);
                let keep = if keep_expiry { old } else { None };
                node.replace(slot, value, keep);
                (false, old.is_some(), keep.is_some())
            }
            None => {
                node.insert_new(h, name, value, None);
                (true, false, false)
            }
        });
        self.expiring = self.expiring + usize::from(has) - usize::from(had);
        if added {
            self.len += 1;
            self.rebalance();
        }
        added
    }

    /// Sets (Some) or clears (None) a field's expiry; false when the field is missing.
    pub fn set_expire(&mut self, name: &[u8], expire_at: Option<u64>) -> bool {
        let h = field_hash(name);
        let i = self.node_of(h);
        let Some(slot) = self.nodes[i].find(h, name) else {
            return false;
        };
        let had = self.nodes[i]
            .at(slot)
            .is_some_and(|r| r.field.expire_at.is_some());
        self.edit(i, |node| node.set_expiry(slot, expire_at));
        self.expiring = self.expiring + usize::from(expire_at.is_some()) - usize::from(had);
        if let Some(at) = expire_at {
            self.min_expire = self.min_expire.min(at);
        }
        true
    }

    /// Removes a field; false when it was not there.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        let h = field_hash(name);
        let i = self.node_of(h);
        let Some(slot) = self.nodes[i].find(h, name) else {
            return false;
        };
        let had = self.nodes[i]
            .at(slot)
            .is_some_and(|r| r.field.expire_at.is_some());
        self.edit(i, |node| node.remove_slot(slot));
        self.expiring -= usize::from(had);
        self.len -= 1;
        self.rebalance();
        true
    }

    /// Adds a field; false (nothing changed) when it is already there.
    pub fn insert(&mut self, name: &[u8], value: &[u8], expire_at: Option<u64>) -> bool {
        // One hash and one probe serve both the lookup and the insertion.
        let h = field_hash(name);
        let i = self.node_of(h);
        if self.nodes[i].find(h, name).is_some() {
            return false;
        }
        self.edit(i, |node| node.insert_new(h, name, value, expire_at));
        self.len += 1;
        self.expiring += usize::from(expire_at.is_some());
        if let Some(at) = expire_at {
            self.min_expire = self.min_expire.min(at);
        }
        self.rebalance();
        true
    }

    /// One step of linear hashing: split the node at the split pointer when the nodes hold
    /// too many fields on average, merge the last one back when they hold too few.
    fn rebalance(&mut self) {
        let n = self.nodes.len();
        let level = usize::BITS - 1 - n.leading_zeros();
        let low = 1usize << level;
        if self.len > n * NODE_FIELDS {
            let j = n - low;
            let mask = 2 * low - 1;
            let (stay, go) = self.nodes[j].split_by(|h| (h as usize) & mask == n);
            self.node_bytes = self.node_bytes + stay.heap() + go.heap() - self.nodes[j].heap();
            self.nodes[j] = Arc::new(stay);
            self.nodes.push(Arc::new(go));
        } else if n > 1 && self.len * 4 < n * NODE_FIELDS {
            let last = n - 1;
            let lower = 1usize << (usize::BITS - 1 - last.leading_zeros());
            let partner = last - lower;
            let (a, b) = (&self.nodes[partner], &self.nodes[last]);
            let mut merged = Node::with_capacity(a.len + b.len, a.live_bytes() + b.live_bytes());
            for node in [a, b] {
                for (_, f) in node.fields() {
                    merged.insert_new(field_hash(f.name), f.name, f.value, f.expire_at);
                }
            }
            self.node_bytes = self.node_bytes + merged.heap()
                - self.nodes[partner].heap()
                - self.nodes[last].heap();
            self.nodes.pop();
            self.nodes[partner] = Arc::new(merged);
        }
    }

    /// Every field, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = Field<'_>> {
        self.nodes.iter().flat_map(|n| n.fields().map(|(_, f)| f))
    }

    /// HSCAN's step: fields from `cursor` on in scan order, at least `count` unless the end
    /// comes first (never splitting fields of one hash), appended to `out`; returns the next
    /// cursor, 0 at the end.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, out: &mut Vec<Field<'a>>) -> u64 {
        let mut at = cursor;
        let mut taken = 0;
        loop {
            let i = self.node_of(at.reverse_bits());
            let (_, end) = self.range(i);
            let mut here: Vec<(u64, Field<'a>)> = self.nodes[i]
                .fields()
                .map(|(_, f)| (scan_key(field_hash(f.name)), f))
                .filter(|(k, _)| *k >= at)
                .collect();
            here.sort_unstable_by_key(|(k, _)| *k);
            let mut idx = 0;
            while idx < here.len() {
                let k = here[idx].0;
                while idx < here.len() && here[idx].0 == k {
                    out.push(here[idx].1);
                    taken += 1;
                    idx += 1;
                }
                if taken >= count && idx < here.len() {
                    return k.wrapping_add(1);
                }
            }
            match end {
                Some(e) if taken < count => at = e,
                Some(e) => return e,
                None => return 0,
            }
        }
    }

    /// A uniformly random field's position, for [`LargeHash::field_at`]; None when empty.
    /// `below(n)` draws a number under `n`.
    pub fn random_position(
        &self,
        below: &mut impl FnMut(usize) -> usize,
    ) -> Option<(usize, usize)> {
        if self.len == 0 {
            return None;
        }
        // Every (node, slot) pair of a grid as wide as the widest node is equally likely;
        // empty and missing slots are drawn again.
        let widest = self.nodes.iter().map(|n| n.slots.len()).max().unwrap_or(0);
        loop {
            let i = below(self.nodes.len());
            let s = below(widest);
            if self.nodes[i].at(s).is_some() {
                return Some((i, s));
            }
        }
    }

    /// Nodes, for a walk a node at a time ([`LargeHash::node_fields`]).
    pub(super) fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The fields of node `i`, in [`LargeHash::iter`]'s order.
    pub(super) fn node_fields(&self, i: usize) -> impl Iterator<Item = Field<'_>> {
        self.nodes
            .get(i)
            .into_iter()
            .flat_map(|n| n.fields().map(|(_, f)| f))
    }

    pub fn field_at(&self, (node, slot): (usize, usize)) -> Option<Field<'_>> {
        self.nodes.get(node)?.at(slot).map(|r| r.field)
    }

    /// The hash a listpack of field-value pairs holds, refusing a field named twice.
    pub fn from_listpack(lp: &[u8]) -> Result<LargeHash, String> {
        let mut h = LargeHash::new();
        let mut items = super::listpack::iter(lp).map(|(_, e)| e.to_vec());
        while let (Some(f), Some(v)) = (items.next(), items.next()) {
            if !h.insert(&f, &v, None) {
                return Err("a hash with a field named twice".into());
            }
        }
        Ok(h)
    }

    /// Builds a hash from fields, refusing a field named twice.
    pub fn from_fields<'a>(
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8], Option<u64>)>,
    ) -> Result<LargeHash, String> {
        let mut h = LargeHash::new();
        for (name, value, at) in fields {
            if !h.insert(name, value, at) {
                return Err("a hash with a field named twice".into());
            }
        }
        Ok(h)
    }
}

impl TypedObject for LargeHash {
    fn object_type(&self) -> ObjectType {
        ObjectType::Hash
    }

    fn encoding(&self) -> &'static str {
        "hashtable"
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.nodes.capacity() * std::mem::size_of::<Arc<Node>>()
            + self.node_bytes
    }

    fn capture(&self) -> Box<dyn TypedObject> {
        Box::new(self.clone())
    }

    fn capture_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.nodes.len() * std::mem::size_of::<Arc<Node>>()
    }

    /// RDB_TYPE_HASH: the field count, then field and value strings. With field expiries,
    /// Redis 7.4's RDB_TYPE_HASH_METADATA: the soonest expiry (u64 LE ms) first, and before
    /// each field its expiry as `at - soonest + 1` (0: none).
    fn encode_rdb_part(
        &self,
        pos: &mut RdbPartPos,
        out: &mut Vec<u8>,
        budget: usize,
    ) -> (u8, bool) {
        let start = out.len();
        if !pos.started {
            pos.started = true;
            // One pass for the soonest expiry, only when some field has one (no copy).
            let min = if self.expiring == 0 {
                None
            } else {
                self.iter().filter_map(|f| f.expire_at).min()
            };
            pos.base = min.unwrap_or(0);
            if let Some(m) = min {
                out.extend_from_slice(&m.to_le_bytes());
            }
            write_len(out, self.len as u64);
        }
        let min = (pos.base != 0).then_some(pos.base);
        while pos.at < self.nodes.len() && out.len() - start < budget {
            for (_, f) in self.nodes[pos.at].fields() {
                if let Some(m) = min {
                    write_len(out, f.expire_at.map_or(0, |at| at - m + 1));
                }
                write_string(out, f.name, StringCompression::Off);
                write_string(out, f.value, StringCompression::Off);
            }
            pos.at += 1;
        }
        let t = match min {
            Some(_) => ondisk::rdb::types::HASH_METADATA,
            None => ondisk::rdb::types::HASH,
        };
        (t, pos.at >= self.nodes.len())
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
mod tests {
    use super::*;
    use std::collections::HashMap;

    use rand::{Rng, SeedableRng};

    fn all(h: &LargeHash) -> HashMap<Vec<u8>, Vec<u8>> {
        h.iter()
            .map(|f| (f.name.to_vec(), f.value.to_vec()))
            .collect()
    }

    #[test]
    fn behaves_like_a_map_through_growth_shrinking_and_long_values() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut h = LargeHash::new();
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for step in 0..60_000 {
            let k = format!("f{}", rng.gen_range(0..8_000)).into_bytes();
            let vlen = match rng.gen_range(0..10) {
                0 => rng.gen_range(150..600),
                _ => rng.gen_range(0..20),
            };
            let v: Vec<u8> = (0..vlen).map(|i| (i + step) as u8).collect();
            match rng.gen_range(0..10) {
                0..=5 => {
                    assert_eq!(h.set(&k, &v, false), model.insert(k, v).is_none());
                }
                6..=8 => assert_eq!(h.remove(&k), model.remove(&k).is_some()),
                _ => assert_eq!(h.get(&k).map(|f| f.value.to_vec()), model.get(&k).cloned()),
            }
            assert_eq!(h.len(), model.len());
        }
        assert_eq!(all(&h), model);
        let nodes = h.nodes.len();
        assert!(nodes > 8, "{nodes} nodes for {} fields", h.len());
        let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
        for k in keys {
            assert!(h.remove(&k));
        }
        assert!(h.is_empty());
        assert_eq!(h.nodes.len(), 1);
        let fresh = LargeHash::new();
        assert!(
            h.heap_bytes() < fresh.heap_bytes() + 4096,
            "{}",
            h.heap_bytes()
        );
    }

    #[test]
    fn byte_count_matches_a_recount() {
        let mut h = LargeHash::new();
        for i in 0..5_000 {
            let v = if i % 7 == 0 {
                vec![b'v'; 300]
            } else {
                vec![b'v'; 5]
            };
            h.set(format!("field:{i}").as_bytes(), &v, false);
        }
        for i in (0..5_000).step_by(3) {
            h.remove(format!("field:{i}").as_bytes());
        }
        let recount: usize = h.nodes.iter().map(|n| n.heap()).sum();
        assert_eq!(h.node_bytes, recount);
        // Short fields cost far less than Redis' dict entry, two sds and a bucket (~70 B).
        let mut small = LargeHash::new();
        for i in 0..100_000 {
            small.set(format!("field:{i}").as_bytes(), b"value", false);
        }
        let per_field = small.heap_bytes() / small.len();
        let payload = "field:99999".len() + "value".len();
        // (24 bytes of overhead at most before the slots' hash tags, which add about two.)
        assert!(per_field < payload + 26, "{per_field} bytes per field");
    }

    #[test]
    fn expiries_are_kept_replaced_and_counted() {
        let mut h = LargeHash::new();
        h.set(b"a", b"1", false);
        h.set(b"b", &[b'x'; 500], false);
        assert!(h.set_expire(b"a", Some(1000)));
        assert!(h.set_expire(b"b", Some(2000)));
        assert!(!h.set_expire(b"c", Some(1)));
        assert_eq!(h.expiring(), 2);
        assert_eq!(h.get(b"a").unwrap().expire_at, Some(1000));
        h.set(b"a", b"22", true);
        assert_eq!(h.get(b"a").unwrap().expire_at, Some(1000));
        assert_eq!(h.get(b"a").unwrap().value, b"22");
        h.set(b"b", &[b'y'; 600], true);
        assert_eq!(h.get(b"b").unwrap().expire_at, Some(2000));
        assert_eq!(h.get(b"b").unwrap().value, &[b'y'; 600][..]);
        h.set(b"a", b"3", false);
        assert_eq!(h.get(b"a").unwrap().expire_at, None);
        assert_eq!(h.expiring(), 1);
        h.set_expire(b"b", None);
        assert_eq!(h.expiring(), 0);
        assert_eq!(h.get(b"b").unwrap().value, &[b'y'; 600][..]);
    }

    #[test]
    fn scan_returns_each_field_once_while_the_hash_grows_and_shrinks() {
        let mut h = LargeHash::new();
        for i in 0..3_000 {
            h.set(format!("keep{i}").as_bytes(), b"v", false);
        }
        let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let mut out = Vec::new();
            cursor = h.scan(cursor, 37, &mut out);
            for f in out {
                *seen.entry(f.name.to_vec()).or_default() += 1;
            }
            // Grow, then shrink, between calls.
            for j in 0..200 {
                let k = format!("tmp{round}:{j}");
                if round < 20 {
                    h.set(k.as_bytes(), b"t", false);
                } else {
                    h.remove(format!("tmp{}:{j}", round - 20).as_bytes());
                }
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..3_000 {
            assert_eq!(seen.get(format!("keep{i}").as_bytes()), Some(&1), "keep{i}");
        }
        assert!(seen.values().all(|&n| n == 1));
    }

    #[test]
    fn random_positions_are_uniform_enough() {
        let mut h = LargeHash::new();
        for i in 0..10 {
            h.set(format!("f{i}").as_bytes(), b"v", false);
        }
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
        for _ in 0..10_000 {
            let p = h.random_position(&mut |n| rng.gen_range(0..n)).unwrap();
            *counts
                .entry(h.field_at(p).unwrap().name.to_vec())
                .or_default() += 1;
        }
        assert_eq!(counts.len(), 10);
        assert!(
            counts.values().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn a_capture_shares_nodes_and_a_write_copies_one() {
        let mut h = LargeHash::new();
        for i in 0..20_000 {
            h.set(format!("f{i}").as_bytes(), &[b'v'; 300], false);
        }
        let captured = h.capture();
        let old = captured.as_any().downcast_ref::<LargeHash>().unwrap();
        h.set(b"f77", b"new", false);
        let shared = h
            .nodes
            .iter()
            .zip(&old.nodes)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared, h.nodes.len() - 1);
        assert_eq!(old.get(b"f77").unwrap().value, &[b'v'; 300][..]);
        assert_eq!(h.get(b"f77").unwrap().value, b"new");
        // The copied node shares the spilled values it did not change.
        let i = h.node_of(field_hash(b"f77"));
        let spills_shared = h.nodes[i]
            .spills
            .iter()
            .filter(|s| old.nodes[i].spills.iter().any(|o| Arc::ptr_eq(s, o)))
            .count();
        assert_eq!(spills_shared, h.nodes[i].spills.len());
        assert!(captured.capture_bytes() < h.heap_bytes() / 100);
    }
}

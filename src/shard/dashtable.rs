//! Dashtable: the per-shard, per-db hash table (Dragonfly's design, written for Strata).
//!
//! ```text
//!  directory (2^global_depth entries, indexed by the hash's top bits)
//!   ├─▶ segment (local depth d): 56 regular buckets + 4 stash buckets, 14 slots each
//!   └─▶ ...                     every bucket (72 bytes): 14 one-byte fingerprints, a
//!                               slot mask, 14 four-byte slab ids
//!  slab: chunks of 4096 (key, entry) elements; ids never move
//!        + per chunk, only while one of its keys has a TTL: 4096 expiry times
//! ```
//! A key's *home* bucket comes from the hash's middle bits; it lives in its home bucket, the next
//! one, or a stash bucket. A full segment splits in two by the next hash bit (extendible hashing),
//! touching only that segment and, when its depth equals the global depth, doubling the
//! directory. Growth is therefore incremental: no rehash of the whole table ever happens.
//!
//! Buckets hold 4-byte ids into a slab rather than the entries themselves: a table is between
//! half and nine tenths full depending on where it is in its split cycle, and empty slots then
//! cost 5 bytes instead of a whole entry, while the slab is sized by the entries present (a
//! deleted entry's place is reused by the next insert). Splits move ids, not entries.
//!
//! SCAN's cursor is (home bucket, 32-bit hash prefix). A split only moves an entry between
//! segments that cover adjacent prefix ranges, never to another home bucket, so a scan that walks
//! home buckets in order and prefixes upward returns every key present for the whole scan exactly
//! once, however much the table grows meanwhile. The table never shrinks, so ranges never merge.
//!
//! Expiry times (ms since the epoch, 0 for none) sit beside the slab, one column of 4096 per
//! chunk, allocated when a key of that chunk first gets a TTL and freed when its last one goes:
//! a table of keys without TTLs pays nothing for them, one where every key has a TTL pays 8
//! bytes per key (as an expiry field in every element would). Memcached's client flags and CAS
//! ([`KeyMeta`]) sit in a second column built the same way.
//!
//! Lookups, inserts and removals never allocate except when a split creates a segment, the
//! slab takes a new chunk or a chunk its expiry column.
//!
//! Point-in-time snapshots without a fork: [`Dashtable::snapshot_begin`] gives every bucket a
//! mask of its slots already taken care of, kept beside the segments only while the snapshot
//! runs (buckets carry no snapshot state, so an idle table pays nothing for it). A mutation of a
//! slot not yet taken care of first copies that slot's entry aside ("captured") and sets its
//! bit; the walker copies the occupied slots still unset of each bucket it reaches and sets them
//! all. Each entry that existed at the start is thus serialized exactly once, as it was at the
//! start, and a write costs one entry copy at most, only the first time its slot changes during
//! a save. Splits capture their whole segment first, and segments made during the snapshot
//! start with every slot taken care of; `clear` hands the old segments (and slab) to the walker.

use super::entry::Key;

pub const BUCKETS: usize = 56;
pub const STASH: usize = 4;
pub const SLOTS: usize = 14;
const ALL: usize = BUCKETS + STASH;
/// A bucket's slot mask with every slot set.
const ALL_SLOTS: u16 = (1 << SLOTS) - 1;
/// Elements per slab chunk.
const CHUNK: usize = 4096;

/// 64-bit table hash of a key; must be the same function everywhere the table hashes keys.
#[inline]
pub fn hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, 0x5EED_DA5E)
}

/// A hint to start loading `p`'s cache line; never faults, whatever the address.
#[inline]
pub(crate) fn prefetch<T: ?Sized>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch only hints the cache; it cannot fault or change memory, and SSE is
        // part of the x86_64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[inline]
fn fingerprint(h: u64) -> u8 {
    h as u8
}

#[inline]
fn home(h: u64) -> usize {
    ((h >> 8) as u32 as usize) % BUCKETS
}

/// What a key may carry beside its value for the memcached protocol: its 32-bit client flags
/// and 64-bit CAS. All zero (the default) means none, and costs nothing (see [`Columns`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyMeta {
    pub client_flags: u32,
    /// Memcached's item states of the meta protocol (stale, win token sent): bits in the
    /// padding beside the flags, so the column stays 16 bytes a key. Not kept in snapshots.
    pub state: u32,
    pub cas: u64,
}

/// An element taken out of the table (removed, or copied aside by a snapshot): its key,
/// payload, expiry (ms since the epoch, 0 = none) and metadata.
#[derive(Debug)]
pub struct Element<V> {
    pub key: Key,
    pub value: V,
    pub expire_at: u64,
    pub meta: KeyMeta,
}

/// The entries of a table, addressed by id (chunk, index). Ids stay put for an entry's life.
struct Slab<V> {
    chunks: Vec<Vec<Option<(Key, V)>>>,
    /// Per chunk: the expiry of each element, while any element of the chunk has one.
    ttls: Columns<u64>,
    /// Per chunk: each element's metadata, while any element of the chunk has some.
    metas: Columns<KeyMeta>,
    /// Ids of emptied places, reused first.
    free: Vec<u32>,
}

/// A value per slab element, kept per chunk only while some element of the chunk has one
/// other than the default: a table where no key uses it pays nothing.
struct Columns<T> {
    chunks: Vec<Option<Column<T>>>,
}

/// One chunk's values and how many are not the default.
struct Column<T> {
    vals: Box<[T]>,
    set: u32,
}

impl<T: Copy + Default + PartialEq> Columns<T> {
    fn new() -> Self {
        Columns { chunks: Vec::new() }
    }

    /// Element `id`'s value (the default when it has none).
    #[inline]
    fn get(&self, id: u32) -> T {
        match self.chunks.get(id as usize / CHUNK) {
            Some(Some(col)) => col.vals[id as usize % CHUNK],
            _ => T::default(),
        }
    }

    /// Sets element `id`'s value; the default clears it.
    fn set(&mut self, id: u32, v: T) {
        let (c, i) = (id as usize / CHUNK, id as usize % CHUNK);
        let none = v == T::default();
        if self.chunks.len() <= c {
            if none {
                return;
            }
            self.chunks.resize_with(c + 1, || None);
        }
        let slot = &mut self.chunks[c];
        let col = match slot {
            Some(col) => col,
            None if none => return,
            None => slot.insert(Column {
                vals: vec![T::default(); CHUNK].into_boxed_slice(),
                set: 0,
            }),
        };
        match (col.vals[i] != T::default(), !none) {
            (false, true) => col.set += 1,
            (true, false) => col.set -= 1,
            _ => {}
        }
        col.vals[i] = v;
        if col.set == 0 {
            *slot = None;
        }
    }

    /// The column of chunk `c`, when it has one.
    fn chunk(&self, c: usize) -> Option<&[T]> {
        self.chunks.get(c)?.as_ref().map(|col| &col.vals[..])
    }

    /// Starts loading element `id`'s value into the cache when its chunk has a column.
    #[inline]
    fn prefetch(&self, id: u32) {
        if let Some(Some(col)) = self.chunks.get(id as usize / CHUNK) {
            prefetch(col.vals.as_ptr().wrapping_add(id as usize % CHUNK));
        }
    }

    /// Chunks that have a column.
    fn present(&self) -> usize {
        self.chunks.iter().filter(|c| c.is_some()).count()
    }

    fn bytes(&self) -> usize {
        self.present() * CHUNK * std::mem::size_of::<T>()
            + self.chunks.capacity() * std::mem::size_of::<Option<Column<T>>>()
    }
}

impl<V> Slab<V> {
    fn new() -> Self {
        Slab {
            chunks: Vec::new(),
            ttls: Columns::new(),
            metas: Columns::new(),
            free: Vec::new(),
        }
    }

    /// The expiry of element `id` (0 = none).
    #[inline]
    fn ttl(&self, id: u32) -> u64 {
        self.ttls.get(id)
    }

    /// Sets (or clears, with 0) the expiry of element `id`.
    fn set_ttl(&mut self, id: u32, at: u64) {
        self.ttls.set(id, at);
    }

    /// Element `id` as a snapshot keeps it: a copy of its key and payload with its columns.
    fn copy_out(&self, id: u32) -> Option<Element<V>>
    where
        V: Clone,
    {
        self.get(id).map(|(k, v)| Element {
            key: k.clone(),
            value: v.clone(),
            expire_at: self.ttls.get(id),
            meta: self.metas.get(id),
        })
    }

    /// Element `id` with its expiry.
    #[inline]
    fn get_with_ttl(&self, id: u32) -> Option<(&Key, &V, u64)> {
        self.get(id).map(|(k, v)| (k, v, self.ttl(id)))
    }

    /// Starts loading element `id`'s expiry into the cache when its chunk has any.
    #[inline]
    fn prefetch_ttl(&self, id: u32) {
        self.ttls.prefetch(id);
    }

    fn insert(&mut self, e: (Key, V)) -> u32 {
        if let Some(id) = self.free.pop() {
            self.chunks[id as usize / CHUNK][id as usize % CHUNK] = Some(e);
            return id;
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let n = self.chunks.len() - 1;
        let last = &mut self.chunks[n];
        last.push(Some(e));
        (n * CHUNK + last.len() - 1) as u32
    }

    #[inline]
    fn get(&self, id: u32) -> Option<&(Key, V)> {
        self.chunks
            .get(id as usize / CHUNK)?
            .get(id as usize % CHUNK)?
            .as_ref()
    }

    #[inline]
    fn get_mut(&mut self, id: u32) -> Option<&mut (Key, V)> {
        self.chunks
            .get_mut(id as usize / CHUNK)?
            .get_mut(id as usize % CHUNK)?
            .as_mut()
    }

    /// Empties element `id`; returns it with its columns.
    fn take(&mut self, id: u32) -> Option<Element<V>> {
        let (key, value) = self
            .chunks
            .get_mut(id as usize / CHUNK)?
            .get_mut(id as usize % CHUNK)?
            .take()?;
        self.free.push(id);
        let expire_at = self.ttls.get(id);
        self.ttls.set(id, 0);
        let meta = self.metas.get(id);
        self.metas.set(id, KeyMeta::default());
        Some(Element {
            key,
            value,
            expire_at,
            meta,
        })
    }

    fn bytes(&self) -> usize {
        self.chunks.len() * CHUNK * std::mem::size_of::<Option<(Key, V)>>()
            + self.ttls.bytes()
            + self.metas.bytes()
            + self.free.capacity() * 4
            + self.chunks.capacity() * 24
    }
}

/// Header fields first (`repr(C)`), so one cache line holds the fingerprints, the mask and
/// most ids.
#[repr(C)]
struct Bucket {
    fps: [u8; SLOTS],
    used: u16,
    ids: [u32; SLOTS],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 72);

impl Bucket {
    fn new() -> Self {
        Bucket {
            fps: [0; SLOTS],
            used: 0,
            ids: [0; SLOTS],
        }
    }

    #[inline]
    fn find<V>(&self, fp: u8, key: &[u8], slab: &Slab<V>) -> Option<usize> {
        let mut mask = self.used;
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if self.fps[i] == fp {
                if let Some((k, _)) = slab.get(self.ids[i]) {
                    if k.as_bytes() == key {
                        return Some(i);
                    }
                }
            }
        }
        None
    }

    #[inline]
    fn free_slot(&self) -> Option<usize> {
        let free = !self.used & ((1u16 << SLOTS) - 1);
        (free != 0).then(|| free.trailing_zeros() as usize)
    }

    fn put(&mut self, i: usize, fp: u8, id: u32) {
        self.fps[i] = fp;
        self.used |= 1 << i;
        self.ids[i] = id;
    }

    /// Empties slot `i`; returns the id it held.
    fn take(&mut self, i: usize) -> Option<u32> {
        let was = self.used & (1 << i) != 0;
        self.used &= !(1 << i);
        was.then_some(self.ids[i])
    }

    #[inline]
    fn id(&self, i: usize) -> Option<u32> {
        (self.used & (1 << i) != 0).then_some(self.ids[i])
    }
}

struct Segment {
    depth: u32,
    buckets: Vec<Bucket>,
}

impl Segment {
    fn new(depth: u32) -> Self {
        Segment {
            depth,
            buckets: (0..ALL).map(|_| Bucket::new()).collect(),
        }
    }

    /// Buckets where a key with home bucket `h` may live: home, its neighbour, then the stash.
    #[inline]
    fn probe(h: usize) -> [usize; 2 + STASH] {
        [
            h,
            (h + 1) % BUCKETS,
            BUCKETS,
            BUCKETS + 1,
            BUCKETS + 2,
            BUCKETS + 3,
        ]
    }
}

/// Where an entry sits: (segment, bucket, slot). Valid until the table is next modified.
pub type Pos = (usize, usize, usize);

/// The table. `V` is the per-key payload; keys are stored as [`Key`]s beside it in the slab.
pub struct Dashtable<V> {
    dir: Vec<u32>,
    global_depth: u32,
    segs: Vec<Segment>,
    slab: Slab<V>,
    len: usize,
    snap: Option<Box<Snap<V>>>,
}

/// Heap bytes a payload holds, so a snapshot can tell how much its captured copies weigh.
pub trait Weigh {
    fn weight(&self) -> usize;
}

impl Weigh for usize {
    fn weight(&self) -> usize {
        8
    }
}

impl Weigh for () {
    fn weight(&self) -> usize {
        0
    }
}

/// Per bucket of one segment: the slots a running snapshot has taken care of.
type Saved = [u16; ALL];

/// A snapshot in progress.
struct Snap<V> {
    /// [`Saved`] masks of the live table's segments, by segment index.
    saved: Vec<Saved>,
    /// Bytes held by `captured` (keys and payloads).
    captured_bytes: usize,
    /// Walker position: (segment, bucket).
    cursor: (usize, usize),
    /// Entries copied out of buckets just before a mutation, waiting to be serialized.
    captured: Vec<Element<V>>,
    /// The segments, slab and masks as they were when `clear` ran during the snapshot; the
    /// walker finishes there.
    frozen: Option<(Vec<Segment>, Slab<V>, Vec<Saved>)>,
}

impl<V: Clone + Weigh> Snap<V> {
    /// Before slot `i` of bucket `b` of segment `s` changes: copies its entry aside unless the
    /// snapshot already has it, and marks the slot taken care of.
    #[cold]
    fn capture(&mut self, bucket: &Bucket, s: usize, b: usize, i: usize, slab: &Slab<V>) {
        let Some(mask) = self.saved.get_mut(s).map(|m| &mut m[b]) else {
            return;
        };
        if *mask & (1 << i) == 0 {
            *mask |= 1 << i;
            if let Some(e) = bucket.id(i).and_then(|id| slab.copy_out(id)) {
                self.captured_bytes += e.key.heap_bytes() + e.value.weight() + 32;
                self.captured.push(e);
            }
        }
    }
}

impl<V: Clone + Weigh> Default for Dashtable<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone + Weigh> Dashtable<V> {
    /// An empty table; the first segment is allocated on the first insert.
    pub fn new() -> Self {
        Dashtable {
            dir: Vec::new(),
            global_depth: 0,
            segs: Vec::new(),
            slab: Slab::new(),
            len: 0,
            snap: None,
        }
    }

    /// Must run before slot `(s, b, i)` changes (filled, replaced, emptied): during a snapshot
    /// its entry as of the start is captured first, if the snapshot does not have it yet.
    #[inline]
    fn before_write(&mut self, s: usize, b: usize, i: usize) {
        if let Some(snap) = &mut self.snap {
            snap.capture(&self.segs[s].buckets[b], s, b, i, &self.slab);
        }
    }

    /// Captures every slot of bucket `(s, b)` the snapshot does not have yet (before a split).
    fn before_move(&mut self, s: usize, b: usize) {
        if let Some(snap) = &mut self.snap {
            for i in 0..SLOTS {
                snap.capture(&self.segs[s].buckets[b], s, b, i, &self.slab);
            }
        }
    }

    /// Starts a point-in-time snapshot of the table (see the module comment). A snapshot
    /// already in progress is left as it is.
    pub fn snapshot_begin(&mut self) {
        if self.snap.is_some() {
            return;
        }
        self.snap = Some(Box::new(Snap {
            saved: vec![[0; ALL]; self.segs.len()],
            captured_bytes: 0,
            cursor: (0, 0),
            captured: Vec::new(),
            frozen: None,
        }));
    }

    /// Bytes of the entries captured by mutations and not yet taken.
    pub fn snapshot_captured_bytes(&self) -> usize {
        self.snap.as_ref().map_or(0, |s| s.captured_bytes)
    }

    /// Moves the captured entries into `out`.
    pub fn snapshot_drain(&mut self, out: &mut Vec<Element<V>>) {
        if let Some(snap) = &mut self.snap {
            out.append(&mut snap.captured);
            snap.captured_bytes = 0;
        }
    }

    /// Walks up to `max_buckets` buckets, copying the entries of those not serialized yet into
    /// `out`. True once the whole table has been walked (captured entries may remain: drain
    /// them, then call [`Dashtable::snapshot_end`]).
    pub fn snapshot_step(&mut self, max_buckets: usize, out: &mut Vec<Element<V>>) -> bool {
        let Some(snap) = &mut self.snap else {
            return true;
        };
        let from_frozen = snap.frozen.is_some();
        let (segs, slab, saved) = match &mut snap.frozen {
            Some((f, slab, saved)) => (f, slab, saved),
            None => (&mut self.segs, &mut self.slab, &mut snap.saved),
        };
        for _ in 0..max_buckets {
            let (s, b) = snap.cursor;
            let (Some(seg), Some(mask)) = (segs.get_mut(s), saved.get_mut(s)) else {
                return true;
            };
            let bucket = &mut seg.buckets[b];
            let mut todo = bucket.used & !mask[b];
            while todo != 0 {
                let i = todo.trailing_zeros() as usize;
                todo &= todo - 1;
                if from_frozen {
                    // Nothing else reads frozen segments: their entries move out.
                    if let Some(e) = bucket.take(i).and_then(|id| slab.take(id)) {
                        out.push(e);
                    }
                } else if let Some(e) = bucket.id(i).and_then(|id| slab.copy_out(id)) {
                    out.push(e);
                }
            }
            mask[b] = ALL_SLOTS;
            snap.cursor = if b + 1 == ALL { (s + 1, 0) } else { (s, b + 1) };
        }
        false
    }

    /// True when changing or removing the entry at `pos` copies nothing aside: no snapshot
    /// runs, or it already has that slot (walked, captured, or in a segment made since).
    pub fn snapshot_has(&self, (s, b, i): Pos) -> bool {
        self.snap
            .as_ref()
            .is_none_or(|snap| snap.saved.get(s).is_none_or(|m| m[b] & (1 << i) != 0))
    }

    /// Ends the snapshot (complete or abandoned); captured entries not taken are dropped.
    pub fn snapshot_end(&mut self) {
        self.snap = None;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    /// Buckets of all segments (what a full sweep visits).
    pub fn buckets(&self) -> usize {
        self.segs.len() * ALL
    }

    /// Slots the table can hold before its next split.
    pub fn capacity(&self) -> usize {
        self.segs.len() * ALL * SLOTS
    }

    /// Bytes the table structure itself occupies (directory, buckets and the slab's elements;
    /// heap blocks of long keys and values are not included).
    pub fn table_bytes(&self) -> usize {
        self.dir.capacity() * 4
            + self.segs.len() * (ALL * std::mem::size_of::<Bucket>() + 32)
            + self.slab.bytes()
            + self.snap.as_ref().map_or(0, |s| {
                (s.saved.capacity() + s.frozen.as_ref().map_or(0, |f| f.2.capacity()))
                    * std::mem::size_of::<Saved>()
            })
    }

    #[inline]
    fn seg_of(&self, h: u64) -> usize {
        if self.global_depth == 0 {
            self.dir[0] as usize
        } else {
            self.dir[(h >> (64 - self.global_depth)) as usize] as usize
        }
    }

    /// Finds `key` (with hash `h`); the position stays valid until the next mutation.
    #[inline]
    pub fn find(&self, key: &[u8], h: u64) -> Option<Pos> {
        if self.segs.is_empty() {
            return None;
        }
        let s = self.seg_of(h);
        let seg = &self.segs[s];
        let fp = fingerprint(h);
        for b in Segment::probe(home(h)) {
            if let Some(i) = seg.buckets[b].find(fp, key, &self.slab) {
                return Some((s, b, i));
            }
        }
        None
    }

    /// First stage of warming the cache for a batch: starts loading the headers of `h`'s home
    /// and neighbour buckets without waiting for them.
    #[inline]
    pub fn prefetch_buckets(&self, h: u64) {
        if self.segs.is_empty() {
            return;
        }
        let seg = &self.segs[self.seg_of(h)];
        let home = home(h);
        for b in [home, (home + 1) % BUCKETS] {
            // A bucket (80 bytes) spans two or three cache lines: fetch all of them.
            let at = &seg.buckets[b] as *const Bucket as *const u8;
            prefetch(at);
            prefetch(at.wrapping_add(64));
            prefetch(at.wrapping_add(std::mem::size_of::<Bucket>() - 1));
        }
    }

    /// Second stage: with the headers cached, starts loading the slab elements whose
    /// fingerprint matches. Run over a whole batch after the first stage, the misses of
    /// different keys overlap.
    #[inline]
    pub fn prefetch_entries(&self, h: u64) {
        if self.segs.is_empty() {
            return;
        }
        let seg = &self.segs[self.seg_of(h)];
        let fp = fingerprint(h);
        let home = home(h);
        for b in [home, (home + 1) % BUCKETS] {
            let bucket = &seg.buckets[b];
            let mut mask = bucket.used;
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                if bucket.fps[i] == fp {
                    let id = bucket.ids[i] as usize;
                    if let Some(e) = self
                        .slab
                        .chunks
                        .get(id / CHUNK)
                        .and_then(|c| c.get(id % CHUNK))
                    {
                        prefetch(e);
                    }
                    self.slab.prefetch_ttl(id as u32);
                }
            }
        }
    }

    /// Third stage: with the elements cached, finds `key` and returns its value.
    #[inline]
    pub fn prefetch(&self, key: &[u8], h: u64) -> Option<&V> {
        self.find(key, h).and_then(|pos| self.at(pos))
    }

    #[inline]
    fn id_at(&self, (s, b, i): Pos) -> Option<u32> {
        self.segs.get(s)?.buckets.get(b)?.id(i)
    }

    /// The value at a position returned by [`Dashtable::find`].
    pub fn at(&self, pos: Pos) -> Option<&V> {
        self.slab.get(self.id_at(pos)?).map(|(_, v)| v)
    }

    /// The key and value at a position.
    pub fn entry_at(&self, pos: Pos) -> Option<(&Key, &V)> {
        self.slab.get(self.id_at(pos)?).map(|(k, v)| (k, v))
    }

    /// The expiry (ms since the epoch, 0 = none) of the entry at a position.
    #[inline]
    pub fn expire_at(&self, pos: Pos) -> u64 {
        self.id_at(pos).map_or(0, |id| self.slab.ttl(id))
    }

    /// Sets (or clears, with 0) the expiry of the entry at a position (captured first for a
    /// running snapshot).
    pub fn set_expire_at(&mut self, pos: Pos, at: u64) {
        if let Some(id) = self.id_at(pos) {
            self.before_write(pos.0, pos.1, pos.2);
            self.slab.set_ttl(id, at);
        }
    }

    /// The metadata of the entry at a position (all zero when it has none).
    pub fn meta_at(&self, pos: Pos) -> KeyMeta {
        self.id_at(pos)
            .map_or(KeyMeta::default(), |id| self.slab.metas.get(id))
    }

    /// Sets (or clears, with the default) the metadata of the entry at a position (captured
    /// first for a running snapshot).
    pub fn set_meta_at(&mut self, pos: Pos, meta: KeyMeta) {
        if let Some(id) = self.id_at(pos) {
            self.before_write(pos.0, pos.1, pos.2);
            self.slab.metas.set(id, meta);
        }
    }

    /// Mutable value at a position (captured first for a running snapshot).
    pub fn at_mut(&mut self, pos: Pos) -> Option<&mut V> {
        let id = self.id_at(pos)?;
        self.before_write(pos.0, pos.1, pos.2);
        self.slab.get_mut(id).map(|(_, v)| v)
    }

    /// Mutable value at a position for changes a snapshot does not record (access metadata):
    /// no stamp, no capture. Changing what a snapshot serializes through it is a bug.
    pub fn at_touch(&mut self, pos: Pos) -> Option<&mut V> {
        let id = self.id_at(pos)?;
        self.slab.get_mut(id).map(|(_, v)| v)
    }

    /// Removes the entry at a position; returns it with its columns.
    pub fn remove_at(&mut self, (s, b, i): Pos) -> Option<Element<V>> {
        self.id_at((s, b, i))?;
        self.before_write(s, b, i);
        let id = self.segs[s].buckets[b].take(i)?;
        let out = self.slab.take(id);
        if out.is_some() {
            self.len -= 1;
        }
        out
    }

    pub fn get(&self, key: &[u8], h: u64) -> Option<&V> {
        let pos = self.find(key, h)?;
        self.at(pos)
    }

    /// Mutable access (captured first for a running snapshot: the caller may change the value).
    pub fn get_mut(&mut self, key: &[u8], h: u64) -> Option<&mut V> {
        let pos = self.find(key, h)?;
        self.at_mut(pos)
    }

    /// Inserts or replaces `key` with value `val` and expiry `ttl` (ms since the epoch, 0 =
    /// none); returns the previous value and expiry.
    pub fn insert(&mut self, key: &[u8], h: u64, val: V, ttl: u64) -> Option<(V, u64)> {
        self.insert_meta(key, h, val, ttl, KeyMeta::default())
    }

    /// [`Dashtable::insert`] with the new entry's metadata (memcached's set, in one probe).
    pub fn insert_meta(
        &mut self,
        key: &[u8],
        h: u64,
        val: V,
        ttl: u64,
        meta: KeyMeta,
    ) -> Option<(V, u64)> {
        if let Some(pos) = self.find(key, h) {
            let id = self.id_at(pos)?;
            let old_ttl = self.slab.ttl(id);
            let slot = self.at_mut(pos)?;
            let old = std::mem::replace(slot, val);
            // A new value starts without the old one's metadata.
            self.slab.metas.set(id, meta);
            self.slab.set_ttl(id, ttl);
            return Some((old, old_ttl));
        }
        let id = self.insert_new(Key::new(key), h, val, ttl);
        if meta != KeyMeta::default() {
            self.slab.metas.set(id, meta);
        }
        None
    }

    /// Inserts a key known to be absent; returns its slab id.
    fn insert_new(&mut self, key: Key, h: u64, val: V, ttl: u64) -> u32 {
        if self.segs.is_empty() {
            self.push_segment(Segment::new(0));
            self.dir = vec![0];
        }
        let fp = fingerprint(h);
        loop {
            let s = self.seg_of(h);
            let seg = &mut self.segs[s];
            let probe = Segment::probe(home(h));
            // Prefer the emptier of home and neighbour, then the stash.
            let (a, b) = (probe[0], probe[1]);
            let order = if seg.buckets[b].used.count_ones() < seg.buckets[a].used.count_ones() {
                [b, a]
            } else {
                [a, b]
            };
            let target = order
                .into_iter()
                .chain(probe[2..].iter().copied())
                .find_map(|bk| seg.buckets[bk].free_slot().map(|i| (bk, i)));
            if let Some((bk, i)) = target {
                self.before_write(s, bk, i);
                let id = self.slab.insert((key, val));
                self.slab.set_ttl(id, ttl);
                self.segs[s].buckets[bk].put(i, fp, id);
                self.len += 1;
                return id;
            }
            self.split(s, h);
        }
    }

    /// Splits segment `s` (which `h` maps to) by its next hash bit.
    fn split(&mut self, s: usize, h: u64) {
        // Entries about to move must be serialized where they are.
        for b in 0..ALL {
            self.before_move(s, b);
        }
        let d = self.segs[s].depth;
        if d == self.global_depth {
            let mut dir = Vec::with_capacity(self.dir.len() * 2);
            for &e in &self.dir {
                dir.push(e);
                dir.push(e);
            }
            self.dir = dir;
            self.global_depth += 1;
        }
        let gd = self.global_depth;
        let new_id = self.segs.len() as u32;
        let mut fresh = Segment::new(d + 1);
        self.segs[s].depth = d + 1;
        // Entries whose bit (63 - d) is set move, to the same bucket and slot: that position was
        // valid for them before, so it is in the new segment too.
        let bit = 1u64 << (63 - d);
        let slab = &self.slab;
        let old = &mut self.segs[s];
        for (bi, bucket) in old.buckets.iter_mut().enumerate() {
            let mut mask = bucket.used;
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                let moves = slab
                    .get(bucket.ids[i])
                    .is_some_and(|(k, _)| hash(k.as_bytes()) & bit != 0);
                if moves {
                    let fp = bucket.fps[i];
                    if let Some(id) = bucket.take(i) {
                        fresh.buckets[bi].put(i, fp, id);
                    }
                }
            }
        }
        self.push_segment(fresh);
        // The directory range of the old segment is aligned and 2^(gd-d) long; its upper half
        // now points at the new segment.
        let span = 1usize << (gd - d);
        let start = ((h >> (64 - gd)) as usize) & !(span - 1);
        for e in &mut self.dir[start + span / 2..start + span] {
            *e = new_id;
        }
    }

    /// Adds a segment. One made during a snapshot starts with every slot taken care of: what
    /// moves into it was captured before the move, what arrives later is not the snapshot's.
    fn push_segment(&mut self, seg: Segment) {
        self.segs.push(seg);
        if let Some(snap) = &mut self.snap {
            snap.saved.resize(self.segs.len(), [ALL_SLOTS; ALL]);
        }
    }

    pub fn remove(&mut self, key: &[u8], h: u64) -> Option<Element<V>> {
        let pos = self.find(key, h)?;
        self.remove_at(pos)
    }

    /// Drops every entry and the segments. During a snapshot the old segments and slab go to
    /// the walker instead, which still has to serialize them.
    pub fn clear(&mut self) {
        match &mut self.snap {
            Some(snap) if snap.frozen.is_none() => {
                snap.frozen = Some((
                    std::mem::take(&mut self.segs),
                    std::mem::replace(&mut self.slab, Slab::new()),
                    std::mem::take(&mut snap.saved),
                ))
            }
            snap => {
                self.segs.clear();
                self.slab = Slab::new();
                if let Some(snap) = snap {
                    snap.saved.clear();
                }
            }
        }
        self.dir.clear();
        self.global_depth = 0;
        self.len = 0;
    }

    /// One SCAN step from `cursor`: calls `f` for every entry whose home bucket and prefix range
    /// the cursor names, and returns the next cursor (0 when the walk is complete).
    pub fn scan_step(&self, cursor: u64, mut f: impl FnMut(&Key, &V, u64)) -> u64 {
        let b = (cursor >> 32) as usize;
        let p = cursor & 0xffff_ffff;
        if self.segs.is_empty() || b >= BUCKETS {
            return 0;
        }
        let s = if self.global_depth == 0 {
            self.dir[0] as usize
        } else {
            self.dir[(p >> (32 - self.global_depth)) as usize] as usize
        };
        let seg = &self.segs[s];
        for bk in Segment::probe(b) {
            let bucket = &seg.buckets[bk];
            let mut mask = bucket.used;
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                if let Some((k, v, at)) = self.slab.get_with_ttl(bucket.ids[i]) {
                    let kh = hash(k.as_bytes());
                    if home(kh) == b {
                        f(k, v, at);
                    }
                }
            }
        }
        let d = seg.depth;
        let size = 1u64 << (32 - d);
        let next_p = (p & !(size - 1)) + size;
        if next_p < (1u64 << 32) {
            ((b as u64) << 32) | next_p
        } else if b + 1 < BUCKETS {
            (b as u64 + 1) << 32
        } else {
            0
        }
    }

    /// The sum of `f` over every entry with its metadata, in slab order.
    pub fn sum_with_meta(&self, mut f: impl FnMut(&Key, &V, KeyMeta) -> u64) -> u64 {
        let mut total = 0;
        for (c, chunk) in self.slab.chunks.iter().enumerate() {
            let metas = self.slab.metas.chunk(c);
            for (i, e) in chunk.iter().enumerate() {
                if let Some((k, v)) = e {
                    total += f(k, v, metas.map_or(KeyMeta::default(), |m| m[i]));
                }
            }
        }
        total
    }

    /// Every entry with its expiry, in slab order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &V, u64)> {
        self.slab
            .chunks
            .iter()
            .enumerate()
            .flat_map(move |(c, chunk)| {
                let col = self.slab.ttls.chunk(c);
                chunk.iter().enumerate().filter_map(move |(i, e)| {
                    let at = col.map_or(0, |t| t[i]);
                    e.as_ref().map(|(k, v)| (k, v, at))
                })
            })
    }

    /// Visits up to `max_buckets` buckets from `cursor` (segment, bucket), calling `f` on each
    /// entry; entries for which `f` returns true are removed and handed to `on_remove`. Returns
    /// the number visited buckets; `cursor` wraps to (0, 0) after the last bucket. `f` may change
    /// only what a snapshot does not record (access metadata); removals are captured.
    pub fn sweep(
        &mut self,
        cursor: &mut (usize, usize),
        max_buckets: usize,
        mut f: impl FnMut(&Key, &mut V, u64) -> bool,
        mut on_remove: impl FnMut(Key, V, u64),
    ) -> usize {
        let mut visited = 0;
        while visited < max_buckets && !self.segs.is_empty() {
            if cursor.0 >= self.segs.len() {
                *cursor = (0, 0);
                break;
            }
            let bucket = &mut self.segs[cursor.0].buckets[cursor.1];
            let mut mask = bucket.used;
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                let at = self.slab.ttl(bucket.ids[i]);
                let remove = match self.slab.get_mut(bucket.ids[i]) {
                    Some((k, v)) => f(k, v, at),
                    None => false,
                };
                if remove {
                    if let Some(snap) = &mut self.snap {
                        snap.capture(bucket, cursor.0, cursor.1, i, &self.slab);
                    }
                    if let Some(e) = bucket.take(i).and_then(|id| self.slab.take(id)) {
                        self.len -= 1;
                        on_remove(e.key, e.value, e.expire_at);
                    }
                }
            }
            visited += 1;
            cursor.1 += 1;
            if cursor.1 == ALL {
                *cursor = (cursor.0 + 1, 0);
            }
        }
        visited
    }

    /// Calls `f` with the position, key and value of every entry of `n` buckets picked by `rnd`
    /// (given a bound, returns a number below it): eviction's sample.
    pub fn sample_buckets(
        &self,
        n: usize,
        mut rnd: impl FnMut(usize) -> usize,
        mut f: impl FnMut(Pos, &Key, &V, u64),
    ) {
        if self.len == 0 {
            return;
        }
        for _ in 0..n {
            let s = rnd(self.segs.len());
            let b = rnd(ALL);
            let bucket = &self.segs[s].buckets[b];
            let mut mask = bucket.used;
            while mask != 0 {
                let i = mask.trailing_zeros() as usize;
                mask &= mask - 1;
                if let Some((k, v, at)) = self.slab.get_with_ttl(bucket.ids[i]) {
                    f((s, b, i), k, v, at);
                }
            }
        }
    }

    /// A random entry (uniform over occupied buckets' slots, good enough for RANDOMKEY).
    pub fn random(&self, mut rnd: impl FnMut(usize) -> usize) -> Option<(&Key, &V, u64)> {
        if self.len == 0 {
            return None;
        }
        for _ in 0..64 {
            let seg = &self.segs[rnd(self.segs.len())];
            let bucket = &seg.buckets[rnd(ALL)];
            if bucket.used == 0 {
                continue;
            }
            let n = bucket.used.count_ones() as usize;
            let pick = rnd(n);
            let mut mask = bucket.used;
            for _ in 0..pick {
                mask &= mask - 1;
            }
            let i = mask.trailing_zeros() as usize;
            if let Some(e) = self.slab.get_with_ttl(bucket.ids[i]) {
                return Some(e);
            }
        }
        self.iter().nth(rnd(self.len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    fn key(i: usize) -> Vec<u8> {
        format!("key:{i}").into_bytes()
    }

    #[test]
    fn insert_get_remove_through_splits() {
        let mut t: Dashtable<usize> = Dashtable::new();
        let n = 50_000;
        for i in 0..n {
            let k = key(i);
            assert_eq!(t.insert(&k, hash(&k), i, 0), None);
        }
        assert_eq!(t.len(), n);
        assert!(t.segments() > 1);
        for i in 0..n {
            let k = key(i);
            assert_eq!(t.get(&k, hash(&k)), Some(&i), "key {i}");
        }
        let k = key(7);
        assert_eq!(t.insert(&k, hash(&k), 70, 0), Some((7, 0)));
        for i in (0..n).step_by(2) {
            let k = key(i);
            assert!(t.remove(&k, hash(&k)).is_some());
        }
        assert_eq!(t.len(), n / 2);
        for i in 0..n {
            let k = key(i);
            assert_eq!(t.get(&k, hash(&k)).is_some(), i % 2 == 1);
        }
        assert_eq!(t.iter().count(), n / 2);
        // Load factor stays reasonable.
        assert!(t.capacity() < n * 4, "capacity {}", t.capacity());
    }

    #[test]
    fn scan_returns_each_key_once_while_growing() {
        let mut t: Dashtable<()> = Dashtable::new();
        for i in 0..5000 {
            let k = key(i);
            t.insert(&k, hash(&k), (), 0);
        }
        let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut cursor = 0;
        let mut extra = 5000;
        loop {
            cursor = t.scan_step(cursor, |k, _, _| {
                *seen.entry(k.as_bytes().to_vec()).or_default() += 1;
            });
            // Grow the table during the scan.
            for _ in 0..40 {
                let k = key(extra);
                t.insert(&k, hash(&k), (), 0);
                extra += 1;
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..5000 {
            assert_eq!(seen.get(&key(i)), Some(&1), "key {i}");
        }
        let all: HashSet<_> = seen.keys().collect();
        assert!(all.len() >= 5000);
    }

    #[test]
    fn sweep_removes_selected() {
        let mut t: Dashtable<usize> = Dashtable::new();
        for i in 0..3000 {
            let k = key(i);
            t.insert(&k, hash(&k), i, 0);
        }
        let mut cursor = (0, 0);
        let mut removed = 0;
        loop {
            t.sweep(
                &mut cursor,
                7,
                |_, v, _| *v % 3 == 0,
                |_, _, _| removed += 1,
            );
            if cursor == (0, 0) {
                break;
            }
        }
        assert_eq!(removed, 1000);
        assert_eq!(t.len(), 2000);
    }

    /// Runs a snapshot while `mutate` changes the table between walker steps; the snapshot must
    /// hold every key of the start exactly once, with its value and expiry at the start.
    fn snapshot_under(mut mutate: impl FnMut(&mut Dashtable<usize>, usize)) {
        let mut t: Dashtable<usize> = Dashtable::new();
        let n = 20_000;
        for i in 0..n {
            let k = key(i);
            t.insert(
                &k,
                hash(&k),
                i,
                if i % 3 == 0 { 1000 + i as u64 } else { 0 },
            );
        }
        let before: HashMap<Vec<u8>, (usize, u64)> = t
            .iter()
            .map(|(k, v, at)| (k.as_bytes().to_vec(), (*v, at)))
            .collect();
        assert_eq!(before.values().filter(|(_, at)| *at != 0).count(), 6667);
        t.snapshot_begin();
        let mut out = Vec::new();
        let mut round = 0;
        loop {
            let done = t.snapshot_step(50, &mut out);
            mutate(&mut t, round);
            t.snapshot_drain(&mut out);
            round += 1;
            if done {
                break;
            }
        }
        t.snapshot_drain(&mut out);
        t.snapshot_end();
        let mut got: HashMap<Vec<u8>, (usize, u64)> = HashMap::new();
        for Element {
            key: k,
            value: v,
            expire_at: at,
            ..
        } in out
        {
            assert!(
                got.insert(k.as_bytes().to_vec(), (v, at)).is_none(),
                "{k:?} twice"
            );
        }
        assert_eq!(got.len(), before.len());
        assert!(
            got == before,
            "snapshot differs from the table at its start"
        );
    }

    #[test]
    fn snapshot_is_point_in_time_under_writes_deletes_and_splits() {
        let mut next = 1_000_000;
        snapshot_under(|t, round| {
            for j in 0..30 {
                let i = (round * 7919 + j * 104729) % 20_000;
                let k = key(i);
                match j % 4 {
                    0 => {
                        t.insert(&k, hash(&k), i + 1, 0);
                    }
                    1 => {
                        t.remove(&k, hash(&k));
                    }
                    2 => {
                        if let Some(v) = t.get_mut(&k, hash(&k)) {
                            *v += 5;
                        }
                        // Expiry changes: set, changed, cleared.
                        if let Some(pos) = t.find(&k, hash(&k)) {
                            let at = t.expire_at(pos);
                            t.set_expire_at(pos, if at == 0 { 5 } else { (at + 1) % 3 });
                        }
                    }
                    _ => {
                        // New keys grow the table: splits during the walk.
                        let k = key(next);
                        t.insert(&k, hash(&k), next, 0);
                        next += 1;
                    }
                }
            }
            let mut c = (round % 3, 0);
            t.sweep(&mut c, 4, |_, v, _| *v % 11 == 0, |_, _, _| {});
        });
    }

    #[test]
    fn snapshot_survives_clear() {
        snapshot_under(|t, round| {
            if round == 10 {
                t.clear();
            }
            let k = key(round);
            t.insert(&k, hash(&k), 7, 0);
            if round > 10 {
                // A key stored after the clear, changed again: not the snapshot's.
                let k = key(round - 1);
                t.insert(&k, hash(&k), 8, 0);
            }
        });
    }

    #[test]
    fn expiry_column_exists_only_while_a_key_of_its_chunk_has_a_ttl() {
        let mut t: Dashtable<usize> = Dashtable::new();
        for i in 0..3 * CHUNK {
            let k = key(i);
            t.insert(&k, hash(&k), i, 0);
        }
        let bare = t.table_bytes();
        assert!(t.slab.ttls.chunks.iter().all(|c| c.is_none()));
        let k = key(5);
        let pos = t.find(&k, hash(&k)).unwrap();
        t.set_expire_at(pos, 77);
        assert_eq!(t.expire_at(pos), 77);
        let with = t.table_bytes() - bare;
        assert!((CHUNK * 8..CHUNK * 8 + 128).contains(&with), "{with}");
        // A replacing insert sets the new expiry and returns the old one.
        assert_eq!(t.insert(&k, hash(&k), 6, 88), Some((5, 77)));
        let j = key(6);
        t.insert(&j, hash(&j), 6, 99);
        assert_eq!(t.slab.ttls.chunks.iter().filter(|c| c.is_some()).count(), 1);
        assert_eq!(
            t.remove(&k, hash(&k)).map(|e| (e.value, e.expire_at)),
            Some((6, 88))
        );
        let pos = t.find(&j, hash(&j)).unwrap();
        t.set_expire_at(pos, 0);
        assert!(t.slab.ttls.chunks.iter().all(|c| c.is_none()));
        // A reused slab place does not inherit an expiry.
        t.insert(&k, hash(&k), 5, 0);
        let pos = t.find(&k, hash(&k)).unwrap();
        assert_eq!(t.expire_at(pos), 0);
        assert_eq!(t.iter().filter(|(_, _, at)| *at != 0).count(), 0);
    }

    #[test]
    fn metadata_column_exists_only_while_a_key_of_its_chunk_has_some() {
        let mut t: Dashtable<usize> = Dashtable::new();
        for i in 0..2 * CHUNK {
            let k = key(i);
            t.insert(&k, hash(&k), i, 0);
        }
        let bare = t.table_bytes();
        assert_eq!(t.slab.metas.present(), 0);
        let k = key(3);
        let pos = t.find(&k, hash(&k)).unwrap();
        assert_eq!(t.meta_at(pos), KeyMeta::default());
        let m = KeyMeta {
            client_flags: 0xdead_beef,
            state: 0,
            cas: u64::MAX,
        };
        t.set_meta_at(pos, m);
        assert_eq!(t.meta_at(pos), m);
        assert_eq!(t.slab.metas.present(), 1);
        let with = t.table_bytes() - bare;
        let per = std::mem::size_of::<KeyMeta>();
        assert!((CHUNK * per..CHUNK * per + 128).contains(&with), "{with}");
        // Removal hands the metadata over (RENAME carries it) and frees the column.
        let e = t.remove(&k, hash(&k)).unwrap();
        assert_eq!((e.value, e.meta), (3, m));
        assert_eq!(t.slab.metas.present(), 0);
        // A reused slab place does not inherit it; a replacing insert drops it.
        t.insert(&k, hash(&k), 3, 0);
        let pos = t.find(&k, hash(&k)).unwrap();
        assert_eq!(t.meta_at(pos), KeyMeta::default());
        t.set_meta_at(pos, m);
        t.insert(&k, hash(&k), 4, 0);
        let pos = t.find(&k, hash(&k)).unwrap();
        assert_eq!(t.meta_at(pos), KeyMeta::default());
        assert_eq!(t.slab.metas.present(), 0);
    }

    #[test]
    fn a_snapshot_keeps_the_metadata_as_it_was() {
        let mut t: Dashtable<usize> = Dashtable::new();
        let k = key(1);
        t.insert(&k, hash(&k), 1, 0);
        let m = KeyMeta {
            client_flags: 7,
            state: 0,
            cas: 42,
        };
        let pos = t.find(&k, hash(&k)).unwrap();
        t.set_meta_at(pos, m);
        t.snapshot_begin();
        // Changed before the walk reaches it: the capture keeps the old metadata.
        t.set_meta_at(pos, KeyMeta::default());
        let mut out = Vec::new();
        while !t.snapshot_step(64, &mut out) {}
        t.snapshot_drain(&mut out);
        t.snapshot_end();
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].value, out[0].meta), (1, m));
    }

    #[test]
    fn random_finds_entries() {
        let mut t: Dashtable<usize> = Dashtable::new();
        assert!(t.random(|n| n / 2).is_none());
        let k = key(1);
        t.insert(&k, hash(&k), 1, 0);
        let mut x = 12345usize;
        let got = t.random(|n| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            (x >> 33) % n
        });
        assert_eq!(got.map(|(_, v, at)| (*v, at)), Some((1, 0)));
    }
}

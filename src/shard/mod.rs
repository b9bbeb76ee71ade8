//! A shard: the slice of the keyspace one core owns (`hash(key) % threads`), with one
//! [`Dashtable`] per logical db. Only its own core ever touches it, so nothing here locks.
//!
//! Every key access goes through [`Shard::lookup`] / [`Shard::lookup_mut`], which apply lazy
//! expiry; [`Shard::active_expire`] reaps keys nobody reads, with bounded work per tick.
//!
//! Never: does I/O, waits, or locks: only its own core touches a shard.

pub mod blocked;
pub mod dashtable;
pub mod entry;
pub mod evict;
pub mod field_expiry;
pub mod hash;
pub mod hashform;
pub mod history;
pub mod intset;
pub mod lazyfree;
pub mod list;
pub mod listpack;
pub mod lz4block;
pub mod notify;
pub mod object;
pub mod pins;
pub mod rdb_stream;
pub mod rdb_types;
pub mod set;
pub mod tracking;
pub mod watch;
pub mod ziplist;
pub mod zset;

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::config::Settings;
pub use dashtable::{hash, Dashtable, Element, KeyMeta};
pub use entry::{CompactBytes, Entry, Key, Value, ValueRef};
pub use object::{ObjectType, Packed, PackedEncoding, PackedKind, TypedObject};
use tiering::{DiskPtr, TierStore};

/// Tables with fewer keys are not prefetched for a batch: their segments and entries (about a
/// megabyte with small values) stay in the CPU's cache, where a prefetch only repeats the
/// lookup that follows.
const PREFETCH_MIN_KEYS: usize = 4096;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Which shard owns `key` (the `{hashtag}` part only, when present). It lives in `ondisk`
/// because snapshot files are per shard and the offline tools re-shard them.
pub use ondisk::{hashtag, shard_of};

/// Whether an absolute expiry (0 = none) has passed at `now` (ms since the epoch).
#[inline]
pub fn is_expired(expire_at: u64, now: u64) -> bool {
    expire_at != 0 && expire_at <= now
}

/// Captured bytes per shard above which writers wait for the serializer: 1/64 of maxmemory,
/// between 256 KiB and 4 MiB, so a save under writes keeps RSS within a few percent.
pub fn snapshot_backlog_limit(maxmemory: u64, shards: usize) -> usize {
    let max = if maxmemory == 0 {
        4 << 20
    } else {
        maxmemory / 64 / shards.max(1) as u64
    };
    max.clamp(256 << 10, 4 << 20) as usize
}
/// One logical database inside a shard.
#[derive(Default)]
pub struct Db {
    pub table: Dashtable<Entry>,
    /// Keys with a TTL (approximate: recounted on every full expiry sweep).
    pub volatile: usize,
    expire_cursor: (usize, usize),
    volatile_seen: usize,
    age_cursor: (usize, usize),
    defrag_cursor: (usize, usize),
    /// Estimated average remaining TTL of the keys with one, in ms (INFO keyspace's
    /// `avg_ttl`): a running average of what the active-expiry sweep sees, as Redis keeps it.
    pub avg_ttl: u64,
}

/// Counters reported by INFO stats.
#[derive(Default, Clone, Debug)]
pub struct ShardStats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
    pub commands: u64,
    /// Values moved to the tier file / brought back to RAM / lost to unreadable disk data.
    pub offloaded: u64,
    pub uploaded: u64,
    pub tiered_read_errors: u64,
    /// Offloaded values moved out of half-empty pages.
    pub compacted: u64,
    /// Offloaded values currently referenced by keys.
    pub external_values: u64,
    /// Keys evicted in cache mode, by where their value was.
    pub evicted_ram: u64,
    pub evicted_ssd: u64,
    /// Hash fields removed because their expiry passed.
    pub expired_fields: u64,
    /// Collections moved to the tier file / brought back to RAM (also counted above).
    pub offloaded_collections: u64,
    pub loaded_collections: u64,
    /// Collections the offloader encoded into blobs (once per collection picked).
    pub collection_encodes: u64,
    /// Times a cold collection stayed in RAM because the tier file had no free extent for it.
    pub collections_no_space: u64,
    /// Large collections being encoded and written in steps now (0 or 1).
    pub collection_steps: u64,
    /// Encodings in steps given up because the key changed meanwhile.
    pub collection_steps_dropped: u64,
    /// Offloaded hashes read back because a field of theirs came due.
    pub field_expiry_loads: u64,
    /// Rounds of the offloader's CLOCK sweep (see `server::offload`).
    pub offload_rounds: u64,
    /// Active defrag: heap blocks moved to fuller slabs / looked at and left in place.
    pub active_defrag_hits: u64,
    pub active_defrag_misses: u64,
    /// Share of the tick, in percent, active defrag runs at now (0 = not running).
    pub active_defrag_running: u64,
}

impl ShardStats {
    /// CONFIG RESETSTAT: the counters start again from zero; what describes the data held now
    /// (offloaded values referenced by keys) stays.
    pub fn reset(&mut self) {
        *self = ShardStats {
            external_values: self.external_values,
            collection_steps: self.collection_steps,
            ..ShardStats::default()
        };
    }
}

pub struct Shard {
    pub id: usize,
    pub dbs: Vec<Db>,
    pub stats: ShardStats,
    pub settings: Arc<Settings>,
    rng: SmallRng,
    started: Instant,
    /// Seconds since start, refreshed by the background tick (entries store it for IDLETIME).
    clock: u32,
    /// The db active defrag walks now (each db keeps its own cursor).
    defrag_db: usize,
    /// This shard's tier file, with `--tiered_prefix`.
    pub tier: Option<Rc<TierStore>>,
    /// Writes so far (rdb_changes_since_last_save is the growth since a save started).
    pub dirty: u64,
    /// The db a running snapshot's walker is in; None when no snapshot runs.
    snap_db: Option<usize>,
    /// Keys present when the running snapshot began: exactly as many entries must be handed
    /// out by [`Shard::snapshot_step`] (a check on the capture logic).
    pub snap_keys_at_begin: usize,
    /// In cache mode: the access counters of evicted keys, resumed when they come back.
    history: Option<history::History>,
    /// Bumped whenever a key comes to point at disk (see [`Shard::disk_epoch`]).
    disk_epoch: u64,
    /// Hashes that hold a field with an expiry, by when one may be due: what the active sweep
    /// of fields visits, in RAM or offloaded. A key here may since have changed; the sweep
    /// drops it then.
    field_expiries: field_expiry::FieldExpiries,
    /// Offloaded hashes whose field expiry came due: the server reads them back
    /// ([`Shard::take_field_loads`]), and loading them expires their fields.
    field_loads: Vec<(usize, Rc<[u8]>)>,
    /// The record in `field_expiries` of the offloaded hash [`Shard::take`] took last, by its
    /// disk pointer: [`Shard::put_taken`] gives it to the key it lands under (MOVE).
    taken_field_expiry: Option<(DiskPtr, u64)>,
    /// Keys clients WATCH, with versions every change bumps (see [`watch`]).
    pub watches: watch::Watches,
    /// Keys blocked clients wait on, and those a write made ready (`server::blocking`).
    pub blocked: blocked::BlockedKeys,
    /// Where keyspace events go (see [`Shard::notify`]); None until the server sets it.
    pub events: Option<notify::Sink>,
    /// The next memcached CAS sequence number of this shard (see [`Shard::new_cas`]).
    cas_seq: u64,
    /// Keys commands in flight loaded and need in RAM: the offloader leaves them.
    pub pins: pins::Pins,
}

/// Drops the memcached CAS of the entry at `pos`, which is about to change (flags stay).
fn forget_cas(table: &mut Dashtable<Entry>, pos: dashtable::Pos) {
    let meta = table.meta_at(pos);
    if meta.cas != 0 {
        table.set_meta_at(pos, KeyMeta { cas: 0, ..meta });
    }
}

/// Hashes with field expiries visited per active-expiry tick at most.
const FIELD_SWEEP_KEYS: usize = 256;

/// Offloaded hashes with fields due that wait to be loaded, at most: the sweep stops there
/// until the server has taken them.
const FIELD_LOADS_MAX: usize = 256;

/// One sample's average TTL folded into the running estimate: the sample counts for a
/// fiftieth, as in Redis, and the first sample sets it.
fn blend_avg_ttl(avg: u64, sample: u64) -> u64 {
    if avg == 0 {
        sample
    } else {
        avg / 50 * 49 + sample / 50
    }
}

impl Shard {
    pub fn new(id: usize, settings: Arc<Settings>) -> Shard {
        let dbs = (0..settings.dbnum).map(|_| Db::default()).collect();
        Shard {
            id,
            dbs,
            stats: ShardStats::default(),
            rng: SmallRng::seed_from_u64(0x5eed ^ id as u64),
            started: Instant::now(),
            clock: 0,
            defrag_db: 0,
            tier: None,
            dirty: 0,
            snap_db: None,
            snap_keys_at_begin: 0,
            history: settings
                .cache_mode
                .then(|| history::History::for_maxmemory(settings.maxmemory())),
            disk_epoch: 0,
            field_expiries: Default::default(),
            field_loads: Vec::new(),
            taken_field_expiry: None,
            watches: Default::default(),
            blocked: Default::default(),
            events: None,
            // Seeded from the clock so that CAS values handed out before a restart are not
            // handed out again for other data after it (4096 per ms of uptime stay ahead).
            cas_seq: now_ms() << 12,
            pins: Default::default(),
            settings,
        }
    }

    /// The wrapping seconds clock stored in entries for IDLETIME ([`entry::CLOCK_BITS`]).
    pub fn clock(&self) -> u32 {
        self.clock
    }

    /// Refreshes the clock (called from the background tick, so lookups need no time call).
    pub fn tick_clock(&mut self) {
        self.clock = (self.started.elapsed().as_secs() as u32) & entry::CLOCK_MASK;
    }

    pub fn rand_u32(&mut self) -> u32 {
        self.rng.gen()
    }

    pub fn rand_below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            self.rng.gen_range(0..n)
        }
    }

    /// Looks a key up for reading: expired keys are deleted and reported missing; hits and
    /// misses are counted and the entry's access metadata refreshed (not a write: a snapshot in
    /// progress copies nothing for it).
    pub fn lookup(&mut self, db: usize, key: &[u8], now: u64) -> Option<&Entry> {
        match self.find_live(db, key, now) {
            None => {
                self.stats.keyspace_misses += 1;
                self.notify(crate::notify::KEY_MISS, "keymiss", db, key);
                None
            }
            Some(pos) => self.hit_at(db, pos).map(|(e, _)| &*e),
        }
    }

    /// A read in one probe of the table (memcached's get): `f` sees the live entry before this
    /// hit counts (its idle time still the old one), its expiry and its metadata column, and
    /// returns what to keep; then the hit is counted as [`Shard::lookup`] counts it. None when
    /// the key is missing or expired (a miss counted), or when `f` declines (nothing counted).
    pub fn read_with<R>(
        &mut self,
        db: usize,
        key: &[u8],
        now: u64,
        f: impl FnOnce(&Entry, u64, KeyMeta) -> Option<R>,
    ) -> Option<R> {
        let Some(pos) = self.find_live(db, key, now) else {
            self.stats.keyspace_misses += 1;
            self.notify(crate::notify::KEY_MISS, "keymiss", db, key);
            return None;
        };
        let table = &self.dbs[db].table;
        let r = f(table.at(pos)?, table.expire_at(pos), table.meta_at(pos))?;
        self.hit_at(db, pos);
        Some(r)
    }

    /// A read hit on the entry at `pos`: counts it and refreshes the entry's access metadata
    /// (LFU counter, idle time, the CLOCK bit). Returns the entry and whether its CLOCK bit was
    /// already set (referenced since the offloader last looked at it).
    fn hit_at(&mut self, db: usize, pos: dashtable::Pos) -> Option<(&mut Entry, bool)> {
        let (clock, r) = (self.clock, self.rng.gen::<u32>());
        self.stats.keyspace_hits += 1;
        let e = self.dbs[db].table.at_touch(pos)?;
        let again = e.has(Entry::REFERENCED);
        e.touch(clock, r);
        e.add_flags(Entry::REFERENCED);
        Some((e, again))
    }

    /// GET's lookup of a key whose value was just read from disk at `ptr`: when the key (live)
    /// still points there, counts the hit and the access as [`Shard::lookup`] does and returns
    /// the entry and whether it had been referenced since the offloader last looked at it (the
    /// read is then the second within its window). None when the key points elsewhere, holds
    /// its value in RAM, or is gone (an expired one is deleted on the way), with nothing counted.
    pub fn lookup_offloaded(
        &mut self,
        db: usize,
        key: &[u8],
        ptr: DiskPtr,
        now: u64,
    ) -> Option<(&mut Entry, bool)> {
        let pos = self.find_live(db, key, now)?;
        let e = self.dbs[db].table.at(pos)?;
        // A collection's blob is never a GET's reply.
        if e.offloaded_type().is_some() || e.external(key.len()) != Some(ptr) {
            return None;
        }
        self.hit_at(db, pos)
    }

    /// Looks a key up for writing (no hit/miss counting); expired keys are deleted first. The
    /// caller may change the value: the key's memcached CAS is dropped (see [`Shard::cas_of`]).
    pub fn lookup_mut(&mut self, db: usize, key: &[u8], now: u64) -> Option<&mut Entry> {
        let pos = self.find_live(db, key, now)?;
        let table = &mut self.dbs[db].table;
        forget_cas(table, pos);
        table.at_mut(pos)
    }

    /// [`Shard::lookup_mut`] with the key's absolute expiry (0 = none).
    pub fn lookup_mut_ttl(&mut self, db: usize, key: &[u8], now: u64) -> Option<(&mut Entry, u64)> {
        let pos = self.find_live(db, key, now)?;
        let table = &mut self.dbs[db].table;
        forget_cas(table, pos);
        let at = table.expire_at(pos);
        table.at_mut(pos).map(|e| (e, at))
    }

    /// A live key's entry and expiry for a look only: no hit counted, no access noted, no
    /// metadata dropped (an expired key is removed on the way).
    pub fn peek_live(&mut self, db: usize, key: &[u8], now: u64) -> Option<(&Entry, u64)> {
        let pos = self.find_live(db, key, now)?;
        let table = &self.dbs[db].table;
        Some((table.at(pos)?, table.expire_at(pos)))
    }

    /// Sets a key's metadata without counting a change (memcached's item states and a CAS
    /// given on a read are no change of the data).
    pub fn set_meta_quiet(&mut self, db: usize, key: &[u8], meta: KeyMeta) {
        let table = &mut self.dbs[db].table;
        if let Some(pos) = table.find(key, hash(key)) {
            table.set_meta_at(pos, meta);
        }
    }

    /// A fresh memcached CAS value, unique across shards (the shard's id in the low 8 bits).
    pub fn new_cas(&mut self) -> u64 {
        self.cas_seq += 1;
        (self.cas_seq << 8) | (self.id as u64 & 0xff)
    }

    /// A live key's memcached CAS, given one when it has none: writes from RESP replace or
    /// change values without one (an insert starts with no metadata, [`Shard::lookup_mut`]
    /// drops it), so any write since a client read a CAS makes its compare fail. Not counted
    /// as a change (it is no write of the data).
    pub fn cas_of(&mut self, db: usize, key: &[u8]) -> u64 {
        let table = &self.dbs[db].table;
        let Some(pos) = table.find(key, hash(key)) else {
            return 0;
        };
        let meta = table.meta_at(pos);
        if meta.cas != 0 {
            return meta.cas;
        }
        let cas = self.new_cas();
        self.dbs[db].table.set_meta_at(pos, KeyMeta { cas, ..meta });
        cas
    }

    /// A live key's entry for a change of representation only (its value moving between RAM
    /// and the tier file): the value stays the same, so a running snapshot copies nothing.
    pub fn lookup_repr(&mut self, db: usize, key: &[u8], now: u64) -> Option<&mut Entry> {
        let pos = self.find_live(db, key, now)?;
        self.dbs[db].table.at_touch(pos)
    }

    /// Like [`Shard::lookup_repr`] without the expiry check.
    pub fn peek_repr(&mut self, db: usize, key: &[u8]) -> Option<&mut Entry> {
        let table = &mut self.dbs.get_mut(db)?.table;
        let pos = table.find(key, hash(key))?;
        table.at_touch(pos)
    }

    /// Position of a live (not expired) key; an expired one is removed on the way.
    fn find_live(&mut self, db: usize, key: &[u8], now: u64) -> Option<dashtable::Pos> {
        let d = &mut self.dbs[db];
        let pos = d.table.find(key, hash(key))?;
        if !is_expired(d.table.expire_at(pos), now) {
            return Some(pos);
        }
        if let Some(gone) = d.table.remove_at(pos) {
            d.volatile = d.volatile.saturating_sub(1);
            self.release(gone.key.as_bytes(), &gone.value);
        }
        if !self.field_expiries.is_empty() {
            self.field_expiries.remove(db, key);
        }
        self.watches.touch_unattributed(db, key);
        self.stats.expired_keys += 1;
        self.notify(crate::notify::EXPIRED, "expired", db, key);
        None
    }

    /// Warms the cache for a batch of keys in two passes (see [`Dashtable::prefetch`]); not
    /// for a table under [`PREFETCH_MIN_KEYS`].
    pub fn prefetch<'a>(&self, db: usize, keys: impl Iterator<Item = &'a [u8]> + Clone) {
        let Some(d) = self.dbs.get(db) else {
            return;
        };
        if d.table.len() < PREFETCH_MIN_KEYS {
            // A table this small stays in the cache: prefetching it would only repeat the work
            // of the lookups that follow.
            return;
        }
        // Each key hashed once for the three passes.
        let hashes: smallvec::SmallVec<[u64; 32]> = keys.clone().map(hash).collect();
        for &h in &hashes {
            d.table.prefetch_buckets(h);
        }
        for &h in &hashes {
            d.table.prefetch_entries(h);
        }
        for (k, &h) in keys.zip(&hashes) {
            if let Some(e) = d.table.prefetch(k, h) {
                e.prefetch();
            }
        }
    }

    /// True when the key exists and is not expired (no metadata update).
    pub fn contains(&mut self, db: usize, key: &[u8], now: u64) -> bool {
        self.find_live(db, key, now).is_some()
    }

    /// Stores `value` under `key` with absolute expiry `expire_at` (0 = none), replacing any
    /// previous value; returns the previous entry.
    pub fn store(&mut self, db: usize, key: &[u8], value: Value, expire_at: u64) -> Option<Entry> {
        let h = hash(key);
        let mut entry = Entry::new(value, self.clock());
        // A key evicted not long ago resumes its access count (see `history`).
        if let Some(f) = self.history.as_mut().and_then(|hist| hist.take(h)) {
            entry.set_freq(f.max(entry.freq()));
        }
        self.store_hashed(db, key, h, entry, expire_at, KeyMeta::default())
    }

    /// [`Shard::store`] giving the key memcached's metadata in the same probe of the table.
    pub fn store_meta(
        &mut self,
        db: usize,
        key: &[u8],
        value: Value,
        expire_at: u64,
        meta: KeyMeta,
    ) -> Option<Entry> {
        let h = hash(key);
        let mut entry = Entry::new(value, self.clock());
        if let Some(f) = self.history.as_mut().and_then(|hist| hist.take(h)) {
            entry.set_freq(f.max(entry.freq()));
        }
        self.store_hashed(db, key, h, entry, expire_at, meta)
    }

    /// Notes a key evicted by cache mode, for its return (see `history`).
    pub fn remember_evicted(&mut self, key: &[u8], e: &Entry) {
        let clock = self.clock;
        if let Some(h) = self.history.as_mut() {
            h.remember(hash(key), evict::decayed_freq(e, clock));
        }
    }

    /// Stores an entry as it is (moved from another key or loaded) with absolute expiry
    /// `expire_at` (0 = none); returns the previous entry.
    pub fn store_entry(
        &mut self,
        db: usize,
        key: &[u8],
        entry: Entry,
        expire_at: u64,
    ) -> Option<Entry> {
        self.store_hashed(db, key, hash(key), entry, expire_at, KeyMeta::default())
    }

    /// [`Shard::store_entry`] with the key's table hash `h` already computed.
    fn store_hashed(
        &mut self,
        db: usize,
        key: &[u8],
        h: u64,
        entry: Entry,
        expire_at: u64,
        meta: KeyMeta,
    ) -> Option<Entry> {
        self.dirty += 1;
        self.watches.touch(db, key);
        if !self.blocked.is_empty() {
            self.blocked.stored(db, key);
        }
        if entry.is_external() {
            self.disk_epoch += 1;
        }
        if let Some(at) = hashform::field_expiry_bound(&entry) {
            self.note_field_expiry(db, key, at);
        }
        let expire_at = expire_at.min(entry::MAX_EXPIRE_MS);
        let d = &mut self.dbs[db];
        if expire_at != 0 {
            d.volatile += 1;
        }
        let Some((old, old_ttl)) = d.table.insert_meta(key, h, entry, expire_at, meta) else {
            self.notify(crate::notify::NEW, "new", db, key);
            return None;
        };
        if old_ttl != 0 {
            d.volatile = d.volatile.saturating_sub(1);
        }
        self.release(key, &old);
        Some(old)
    }

    /// Frees the disk space of an entry leaving the keyspace (deleted, overwritten, expired).
    pub fn release(&mut self, key: &[u8], e: &Entry) {
        if let Some(p) = e.external(key.len()) {
            self.free_disk(p);
        }
    }

    /// True when this shard's tier file can take no more (false without tiering).
    pub fn tier_full(&self) -> bool {
        self.tier.as_ref().is_some_and(|t| t.is_full())
    }

    /// True while the offloader's writes are on their way to the tier file.
    pub fn tier_writing(&self) -> bool {
        self.tier.as_ref().is_some_and(|t| t.writes_in_flight())
    }

    /// Returns a disk pointer's space to the tier file.
    pub fn free_disk(&mut self, p: DiskPtr) {
        self.stats.external_values = self.stats.external_values.saturating_sub(1);
        if let Some(t) = &self.tier {
            t.free(p);
        }
    }

    /// Points `key`'s entry at `ptr` on disk; false (nothing done) when the key is not there,
    /// or holds an offloaded collection whose encoding `ptr` has no room for (see
    /// [`Shard::set_offloaded`]). An offloaded collection stays one (compaction moves its blob).
    pub fn set_external(&mut self, db: usize, key: &[u8], ptr: DiskPtr) -> bool {
        let Some(e) = self.peek_repr(db, key) else {
            return false;
        };
        let value = match (e.offloaded_type(), e.offloaded_encoding()) {
            (Some(t), Some(n)) if ptr.pack_tagged(n).is_some() => Value::Offloaded(t, ptr, n),
            (Some(_), _) => return false,
            _ => Value::External(ptr),
        };
        e.set_value(value);
        self.disk_epoch += 1;
        true
    }

    /// Points `key`'s collection (type `t`, in RAM) at its blob `ptr` on disk, keeping its
    /// encoding beside the pointer (OBJECT ENCODING reads no disk); false (nothing done) when
    /// the key is not there or `ptr` has no room for the encoding
    /// (`tiering::store::MAX_TAGGED_VALUE`).
    pub fn set_offloaded(&mut self, db: usize, key: &[u8], t: ObjectType, ptr: DiskPtr) -> bool {
        let Some(e) = self.peek_repr(db, key) else {
            return false;
        };
        let n = entry::offloaded_encoding_index(t, e.encoding());
        if ptr.pack_tagged(n).is_none() {
            return false;
        }
        e.set_value(Value::Offloaded(t, ptr, n));
        self.disk_epoch += 1;
        true
    }

    /// Changes whenever some key comes to point at disk: its value offloaded or moved
    /// ([`Shard::set_external`]), an offloaded entry stored under a key ([`Shard::store_entry`]:
    /// RENAME, MOVE), dbs swapped ([`Shard::swap_dbs`]). While it is unchanged, keys seen in
    /// RAM are still in RAM (a pipeline skips looking again; see `server::exec`).
    pub fn disk_epoch(&self) -> u64 {
        self.disk_epoch
    }

    /// SWAPDB's part on this shard.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        if !self.watches.is_empty() && a != b {
            self.touch_swapped(a, b);
            self.touch_swapped(b, a);
        }
        self.dbs.swap(a, b);
        self.disk_epoch += 1;
        self.blocked.swapped(a, b);
        self.field_expiries.swap_dbs(a, b);
        for (d, _) in &mut self.field_loads {
            if *d == a {
                *d = b;
            } else if *d == b {
                *d = a;
            }
        }
    }

    /// SWAPDB's changes to the keys watched in `emptied` (as Redis 7 decides them): a key
    /// present there changes; a missing one changes only if a live key replaces it.
    fn touch_swapped(&mut self, emptied: usize, with: usize) {
        let now = now_ms();
        for k in self.watches.keys_in(emptied) {
            let h = hash(&k);
            let here = self.dbs[emptied].table.find(&k, h).is_some();
            let there = self.dbs[with]
                .table
                .find(&k, h)
                .is_some_and(|pos| !is_expired(self.dbs[with].table.expire_at(pos), now));
            if here || there {
                self.watches.touch_version(emptied, &k);
            }
        }
    }

    /// The disk pointer of `key`'s value when it is offloaded (no expiry check, no touch).
    pub fn peek_external(&self, db: usize, key: &[u8]) -> Option<DiskPtr> {
        self.dbs
            .get(db)?
            .table
            .get(key, hash(key))?
            .external(key.len())
    }

    /// The disk pointer of `key`'s value when it is offloaded, and the collection type when
    /// the value is an offloaded collection (no expiry check, no touch).
    pub fn peek_offloaded(
        &self,
        db: usize,
        key: &[u8],
    ) -> Option<(DiskPtr, Option<object::ObjectType>)> {
        let e = self.dbs.get(db)?.table.get(key, hash(key))?;
        Some((e.external(key.len())?, e.offloaded_type()))
    }

    /// The db that holds `key` offloaded at `ptr` now: `db` unless a SWAPDB moved it (the
    /// pointer names one value, so the db whose `key` has it is the one).
    pub fn db_of_offloaded(&self, db: usize, key: &[u8], ptr: DiskPtr) -> usize {
        let here = |d: usize| matches!(self.peek_offloaded(d, key), Some((p, _)) if p == ptr);
        if here(db) {
            return db;
        }
        (0..self.dbs.len()).find(|&d| here(d)).unwrap_or(db)
    }

    /// Deletes a key (expired or not), freeing its disk space; returns its entry.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> Option<Entry> {
        // A RENAME's taken entry keeps its record while the old destination goes.
        let taken = self.taken_field_expiry.take();
        let gone = self.take(db, key);
        self.taken_field_expiry = taken;
        let gone = gone?;
        self.release(key, &gone.value);
        Some(gone.value)
    }

    /// Removes a key to store its entry elsewhere (RENAME, MOVE): an offloaded value keeps its
    /// disk pointer, which the entry carries along with its expiry and metadata.
    pub fn take(&mut self, db: usize, key: &[u8]) -> Option<Element<Entry>> {
        let d = &mut self.dbs[db];
        let gone = d.table.remove(key, hash(key))?;
        self.dirty += 1;
        self.watches.touch(db, key);
        if gone.expire_at != 0 {
            d.volatile = d.volatile.saturating_sub(1);
        }
        self.taken_field_expiry = None;
        if !self.field_expiries.is_empty() || !self.field_loads.is_empty() {
            let at = self.field_expiries.remove(db, key);
            // An offloaded hash keeps its record for where it lands (one in RAM is noted
            // again from its fields); one waiting to be loaded is due now.
            // (The pointer's bits identify the entry; the key length is not needed for that.)
            if let Some(p) = gone.value.external(0) {
                let queued = || {
                    self.field_loads
                        .iter()
                        .any(|(d, k)| *d == db && **k == *key)
                };
                if let Some(at) = at.or_else(|| queued().then_some(0)) {
                    self.taken_field_expiry = Some((p, at));
                }
            }
        }
        Some(gone)
    }

    /// Stores what [`Shard::take`] took under `key` (its expiry and metadata along). The move
    /// is one change, as Redis counts a RENAME or MOVE: the take counted it.
    pub fn put_taken(&mut self, db: usize, key: &[u8], taken: Element<Entry>) {
        let meta = taken.meta;
        if let Some((p, at)) = self.taken_field_expiry.take() {
            if taken.value.external(0) == Some(p) {
                self.note_field_expiry(db, key, at);
            }
        }
        self.store_entry(db, key, taken.value, taken.expire_at);
        self.dirty = self.dirty.saturating_sub(1);
        if meta != KeyMeta::default() {
            self.set_meta(db, key, meta);
        }
    }

    /// A key's metadata (memcached's client flags and CAS; zero when it has none).
    pub fn meta(&self, db: usize, key: &[u8]) -> KeyMeta {
        let table = &self.dbs[db].table;
        table
            .find(key, hash(key))
            .map_or(KeyMeta::default(), |pos| table.meta_at(pos))
    }

    /// Sets a key's metadata; false when the key is not there.
    pub fn set_meta(&mut self, db: usize, key: &[u8], meta: KeyMeta) -> bool {
        let table = &mut self.dbs[db].table;
        let Some(pos) = table.find(key, hash(key)) else {
            return false;
        };
        table.set_meta_at(pos, meta);
        self.dirty += 1;
        self.watches.touch(db, key);
        true
    }

    /// Sets or clears (0) the expiry of an existing key; false when the key is missing.
    pub fn set_expire(&mut self, db: usize, key: &[u8], at: u64, now: u64) -> bool {
        let Some(pos) = self.find_live(db, key, now) else {
            return false;
        };
        let at = at.min(entry::MAX_EXPIRE_MS);
        let table = &mut self.dbs[db].table;
        let was = table.expire_at(pos);
        table.set_expire_at(pos, at);
        self.dirty += 1;
        self.watches.touch(db, key);
        let d = &mut self.dbs[db];
        match (was != 0, at != 0) {
            (false, true) => d.volatile += 1,
            (true, false) => d.volatile = d.volatile.saturating_sub(1),
            _ => {}
        }
        true
    }

    pub fn flush_db(&mut self, db: usize) {
        self.dirty += self.dbs[db].table.len() as u64;
        if !self.watches.is_empty() {
            // Watched keys that exist (expired or not) change; missing ones do not.
            for k in self.watches.keys_in(db) {
                if self.dbs[db].table.get(&k, hash(&k)).is_some() {
                    self.watches.touch_version(db, &k);
                }
            }
        }
        self.watches.tracking.clear();
        let ptrs: Vec<DiskPtr> = self.dbs[db]
            .table
            .iter()
            .filter_map(|(k, e, _)| e.external(k.len()))
            .collect();
        for p in ptrs {
            self.free_disk(p);
        }
        let d = &mut self.dbs[db];
        d.table.clear();
        d.volatile = 0;
        d.expire_cursor = (0, 0);
        self.field_expiries.clear_db(db);
        self.field_loads.retain(|(d, _)| *d != db);
    }

    /// Starts a point-in-time snapshot of every db (see [`Dashtable::snapshot_begin`]); frees of
    /// tier space wait until it ends, so captured disk pointers stay readable.
    pub fn snapshot_begin(&mut self) {
        for d in &mut self.dbs {
            d.table.snapshot_begin();
        }
        if let Some(t) = &self.tier {
            t.hold_frees();
        }
        self.snap_db = Some(0);
        self.snap_keys_at_begin = self.key_count();
    }

    /// One step of the snapshot: entries captured by writes, then up to `buckets` buckets of
    /// the walk, go to `out` as (db, element). True once everything has been handed out.
    pub fn snapshot_step(
        &mut self,
        buckets: usize,
        out: &mut Vec<(usize, Element<Entry>)>,
    ) -> bool {
        let Some(mut db) = self.snap_db else {
            return true;
        };
        let mut tmp = Vec::new();
        for (i, d) in self.dbs.iter_mut().enumerate() {
            d.table.snapshot_drain(&mut tmp);
            out.extend(tmp.drain(..).map(|e| (i, e)));
        }
        while db < self.dbs.len() {
            let done = self.dbs[db].table.snapshot_step(buckets, &mut tmp);
            out.extend(tmp.drain(..).map(|e| (db, e)));
            if !done {
                self.snap_db = Some(db);
                return false;
            }
            db += 1;
            if !out.is_empty() {
                break;
            }
        }
        self.snap_db = Some(db);
        if db < self.dbs.len() {
            return false;
        }
        // Walk complete: no bucket is left unserialized, so nothing more can be captured.
        for (i, d) in self.dbs.iter_mut().enumerate() {
            d.table.snapshot_drain(&mut tmp);
            out.extend(tmp.drain(..).map(|e| (i, e)));
        }
        true
    }

    /// Ends the snapshot (finished or abandoned) and lets held tier frees go through.
    pub fn snapshot_end(&mut self) {
        for d in &mut self.dbs {
            d.table.snapshot_end();
        }
        if let Some(t) = &self.tier {
            t.release_frees();
        }
        self.snap_db = None;
    }

    /// True while a save walks this shard.
    pub fn saving(&self) -> bool {
        self.snap_db.is_some()
    }

    /// Bytes copied aside by writes that the running snapshot has not taken yet.
    pub fn snapshot_backlog(&self) -> usize {
        if self.snap_db.is_none() {
            return 0;
        }
        self.dbs
            .iter()
            .map(|d| d.table.snapshot_captured_bytes())
            .sum()
    }

    /// One step of the ageing pass, run from the background tick: an entry idle for more than
    /// half the access clock's range ([`entry::CLOCK_BITS`], about 36 hours) has its access
    /// time moved up to exactly that, so its idle time (OBJECT IDLETIME, eviction's age) stays
    /// about there (36 hours plus up to one period of the pass) instead of growing to the
    /// wrap and restarting at zero. Visits enough buckets per call to cover every table in
    /// `calls` calls (at least 16).
    pub fn age_step(&mut self, calls: usize) {
        let clock = self.clock;
        for d in &mut self.dbs {
            if d.table.is_empty() {
                continue;
            }
            let step = (d.table.buckets() / calls.max(1)).max(16);
            d.table.sweep(
                &mut d.age_cursor,
                step,
                |_, e, _| {
                    if e.idle_seconds(clock) > entry::MAX_IDLE {
                        e.set_clock(clock.wrapping_sub(entry::MAX_IDLE));
                    }
                    false
                },
                |_, _, _| {},
            );
        }
    }

    /// One step of active defrag: walks the tables from where the last step stopped, moving the
    /// heap blocks of string values and packed collections that jemalloc says sit in emptier
    /// slabs than their size class's average, until `budget` is spent. Returns true when the
    /// walk reached the end of every table (the next step starts over). Values keep their bytes.
    pub fn defrag_step(&mut self, budget: std::time::Duration) -> bool {
        const BUCKETS_PER_CHECK: usize = 64;
        let start = Instant::now();
        let (mut hits, mut misses) = (0u64, 0u64);
        let mut finished = false;
        while let Some(d) = self.dbs.get_mut(self.defrag_db) {
            let visited = d.table.sweep(
                &mut d.defrag_cursor,
                BUCKETS_PER_CHECK,
                |_, e, _| {
                    match e.defrag() {
                        Some(true) => hits += 1,
                        Some(false) => misses += 1,
                        None => {}
                    }
                    false
                },
                |_, _, _| {},
            );
            if visited < BUCKETS_PER_CHECK {
                // The end of this table: its cursor went back to the start; on to the next db.
                d.defrag_cursor = (0, 0);
                self.defrag_db += 1;
                if self.defrag_db == self.dbs.len() {
                    self.defrag_db = 0;
                    finished = true;
                    break;
                }
            }
            if start.elapsed() >= budget {
                break;
            }
        }
        self.stats.active_defrag_hits += hits;
        self.stats.active_defrag_misses += misses;
        finished
    }

    pub fn key_count(&self) -> usize {
        self.dbs.iter().map(|d| d.table.len()).sum()
    }

    /// One active-expiry tick: sweeps each db holding TTL keys for at most `budget`, visiting
    /// at least enough buckets that a whole table is covered about once a second, and going on
    /// while more than a tenth of the TTL keys seen were expired. Returns keys reaped.
    pub fn active_expire(&mut self, budget: std::time::Duration, hz: u32) -> usize {
        let start = Instant::now();
        let now = now_ms();
        let mut reaped = 0;
        let mut freed: Vec<DiskPtr> = Vec::new();
        // Keys reaped, kept only when someone wants their `expired` events.
        let mut expired: Option<Vec<(usize, Key)>> =
            self.notifies(crate::notify::EXPIRED).then(Vec::new);
        let watches = &mut self.watches;
        let field_expiries = &mut self.field_expiries;
        for (db_index, db) in self.dbs.iter_mut().enumerate() {
            if db.volatile == 0 || db.table.is_empty() {
                continue;
            }
            let total_buckets = db.table.segments() * (dashtable::BUCKETS + dashtable::STASH);
            let step = (total_buckets / hz.max(1) as usize).max(64);
            loop {
                let (mut seen, mut gone) = (0usize, 0usize);
                let mut volatile_seen = 0usize;
                let mut ttl_sum = 0u64;
                let before = db.expire_cursor;
                db.table.sweep(
                    &mut db.expire_cursor,
                    step,
                    |_, _, at| {
                        if at != 0 {
                            seen += 1;
                            if at <= now {
                                gone += 1;
                                return true;
                            }
                            volatile_seen += 1;
                            ttl_sum = ttl_sum.saturating_add(at - now);
                        }
                        false
                    },
                    |k, e, _| {
                        if let Some(p) = e.external(k.len()) {
                            freed.push(p);
                        }
                        watches.touch_unattributed(db_index, k.as_bytes());
                        if !field_expiries.is_empty() {
                            field_expiries.remove(db_index, k.as_bytes());
                        }
                        if let Some(v) = expired.as_mut() {
                            v.push((db_index, k));
                        }
                    },
                );
                db.volatile_seen += volatile_seen;
                db.volatile = db.volatile.saturating_sub(gone);
                if volatile_seen > 0 {
                    db.avg_ttl = blend_avg_ttl(db.avg_ttl, ttl_sum / volatile_seen as u64);
                }
                reaped += gone;
                let wrapped = db.expire_cursor == (0, 0) || db.expire_cursor < before;
                if wrapped {
                    // A full pass: the count of TTL keys still present is now known.
                    db.volatile = db.volatile_seen;
                    db.volatile_seen = 0;
                    if db.volatile == 0 {
                        db.avg_ttl = 0;
                    }
                    break;
                }
                if seen == 0 || gone * 10 < seen || start.elapsed() >= budget {
                    break;
                }
            }
        }
        self.stats.expired_keys += reaped as u64;
        for (db, k) in expired.unwrap_or_default() {
            self.notify(crate::notify::EXPIRED, "expired", db, k.as_bytes());
        }
        for p in freed {
            self.free_disk(p);
        }
        self.active_expire_fields(FIELD_SWEEP_KEYS);
        reaped
    }

    /// Whether some hash of this shard may hold a field with an expiry.
    pub fn has_field_expiries(&self) -> bool {
        !self.field_expiries.is_empty() || !self.field_loads.is_empty()
    }

    /// Notes that no field of the hash at `key` expires before `at` (ms), for the active
    /// sweep: every hash with a field expiry has such a record, in RAM or offloaded.
    pub fn note_field_expiry(&mut self, db: usize, key: &[u8], at: u64) {
        self.field_expiries.note(db, key, at);
    }

    /// Whether a field of the hash at `key` (in RAM) may have expired at `now`.
    pub fn field_expiry_due(&self, db: usize, key: &[u8], now: u64) -> bool {
        self.dbs[db]
            .table
            .get(key, hash(key))
            .and_then(hashform::field_expiry_bound)
            .is_some_and(|at| at <= now)
    }

    /// Removes the fields of the hash at `key` (in RAM) expired at `now`, as Redis 7.4 expires
    /// them: one `hexpired` event when some went, and the key deleted (a `del` event) when
    /// none is left. Its record in the sweep's list is made exact. None when `key` holds no
    /// hash in RAM.
    pub fn expire_fields(&mut self, db: usize, key: &[u8], now: u64) -> Option<hashform::Swept> {
        let pos = self.find_live(db, key, now)?;
        let bound = hashform::field_expiry_bound(self.dbs[db].table.at(pos)?);
        let swept = match bound {
            Some(at) if at <= now => {
                let table = &mut self.dbs[db].table;
                forget_cas(table, pos);
                hashform::sweep_entry(table.at_mut(pos)?, now)?
            }
            _ => hashform::Swept {
                removed: 0,
                empty: false,
                expiring: bound.is_some(),
            },
        };
        if swept.removed > 0 {
            self.stats.expired_fields += swept.removed as u64;
            self.watches.touch(db, key);
            self.notify(crate::notify::HASH, "hexpired", db, key);
        }
        if swept.empty {
            self.notify(crate::notify::GENERIC, "del", db, key);
            self.remove(db, key);
            return Some(swept);
        }
        let table = &self.dbs[db].table;
        match table
            .get(key, hash(key))
            .and_then(hashform::field_expiry_bound)
        {
            Some(at) => self.field_expiries.set(db, key, at),
            None => {
                self.field_expiries.remove(db, key);
            }
        }
        Some(swept)
    }

    /// One active sweep of hash fields: takes up to `max` hashes whose record came due,
    /// soonest first. One in RAM has its expired fields removed (and is deleted when none is
    /// left); an offloaded one is queued for the server to load (see
    /// [`Shard::take_field_loads`]), which expires them. Returns fields removed.
    pub fn active_expire_fields(&mut self, max: usize) -> usize {
        let now = now_ms();
        let mut removed = 0;
        for _ in 0..max {
            if self.field_loads.len() >= FIELD_LOADS_MAX {
                break;
            }
            let Some((db, key)) = self.field_expiries.pop_due(now) else {
                break;
            };
            let Some(e) = self.dbs[db].table.get(&key, hash(&key)) else {
                continue;
            };
            match e.offloaded_type() {
                Some(ObjectType::Hash) => self.field_loads.push((db, key)),
                Some(_) => {}
                None => {
                    if let Some(s) = self.expire_fields(db, &key, now) {
                        removed += s.removed;
                    }
                }
            }
        }
        removed
    }

    /// The offloaded hashes the field sweep found due, for the server to read back (each
    /// load expires the due fields, see `server::exec`).
    pub fn take_field_loads(&mut self) -> Vec<(usize, Rc<[u8]>)> {
        std::mem::take(&mut self.field_loads)
    }

    /// Bytes held by keys, values and tables of this shard (for INFO and MEMORY USAGE).
    pub fn dataset_bytes(&self) -> usize {
        self.dbs.iter().map(|d| d.table.table_bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Flags, Settings};
    use clap::Parser;

    fn shard() -> Shard {
        let f = Flags::try_parse_from(["strata"]).unwrap();
        Shard::new(0, Arc::new(Settings::from_flags(&f)))
    }

    #[test]
    fn hashtags() {
        assert_eq!(hashtag(b"{user1}.name"), b"user1");
        assert_eq!(hashtag(b"foo{}bar"), b"foo{}bar");
        assert_eq!(hashtag(b"foo{bar"), b"foo{bar");
        assert_eq!(shard_of(b"{a}x", 7), shard_of(b"{a}y", 7));
    }

    #[test]
    fn every_way_a_key_comes_to_point_at_disk_changes_the_disk_epoch() {
        let mut s = shard();
        let p = DiskPtr {
            page: 3,
            len: 100,
            key_len: 1,
            offset: 0,
            packed: 0,
        };
        s.store(0, b"a", Value::str(b"v"), 0);
        let e0 = s.disk_epoch();
        // Plain writes and reads leave it alone.
        s.store(0, b"b", Value::str(b"w"), 0);
        assert!(s.lookup(0, b"a", 0).is_some());
        assert_eq!(s.disk_epoch(), e0);
        // A value moved to disk.
        assert!(s.set_external(0, b"a", p));
        assert_eq!(s.peek_external(0, b"a"), Some(p));
        let e1 = s.disk_epoch();
        assert_ne!(e1, e0);
        // A missing key is not pointed anywhere.
        assert!(!s.set_external(0, b"nope", p));
        assert_eq!(s.disk_epoch(), e1);
        // An offloaded entry stored under another key (RENAME, MOVE).
        let taken = s.take(0, b"a").unwrap();
        s.put_taken(0, b"c", taken);
        let e2 = s.disk_epoch();
        assert_ne!(e2, e1);
        // Dbs swapped.
        s.swap_dbs(0, 1);
        assert_ne!(s.disk_epoch(), e2);
        assert_eq!(s.peek_external(1, b"c"), Some(p));
    }

    #[test]
    fn a_write_during_a_save_copies_one_node_of_a_large_object_not_the_object() {
        use object::test_object::ChunkedList;
        let mut s = shard();
        s.store(
            0,
            b"l",
            Value::Object(Box::new(ChunkedList::with(100_000))),
            0,
        );
        let before = s.peek_repr(0, b"l").unwrap().heap_bytes();
        assert!(before > 800_000, "{before}");
        s.snapshot_begin();
        // A write before the walk reaches the key: the snapshot captures the object first.
        fn list(e: &mut Entry) -> &mut ChunkedList {
            let o = e.object_mut().expect("an object");
            o.as_any_mut().downcast_mut().expect("a ChunkedList")
        }
        list(s.lookup_mut(0, b"l", 0).unwrap()).set(50_000, 7);
        // What was copied aside is a few pointers, not the elements.
        assert!(
            s.snapshot_backlog() < before / 50,
            "{} bytes captured",
            s.snapshot_backlog()
        );
        let mut out = Vec::new();
        while !s.snapshot_step(64, &mut out) {}
        s.snapshot_end();
        assert_eq!(out.len(), 1);
        let (_, captured) = out.pop().unwrap();
        let mut captured = captured.value;
        let live = list(s.peek_repr(0, b"l").unwrap()).chunks.clone();
        let old = list(&mut captured);
        assert_eq!(old.values()[50_000], 50_000);
        assert_eq!(live.len(), old.chunks.len());
        let shared = live
            .iter()
            .zip(&old.chunks)
            .filter(|(a, b)| std::sync::Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared, live.len() - 1, "only the written node was copied");
        assert_eq!(s.peek_repr(0, b"l").unwrap().type_name(), "list");
        assert_eq!(s.peek_repr(0, b"l").unwrap().encoding(), "quicklist");
    }

    #[test]
    fn ageing_keeps_idle_times_from_wrapping() {
        let mut s = shard();
        let half = entry::MAX_IDLE;
        s.clock = 1000;
        s.store(0, b"old", Value::str(b"v"), 0);
        s.store(0, b"new", Value::str(b"v"), 0);
        // "old" unread for longer than half the clock's range, "new" read just now.
        s.clock = (1000 + half + 500) & entry::CLOCK_MASK;
        assert!(s.lookup(0, b"new", 0).is_some());
        s.age_step(1);
        let clock = s.clock;
        let idle = |s: &mut Shard, k: &[u8]| s.peek_repr(0, k).unwrap().idle_seconds(clock);
        assert_eq!(idle(&mut s, b"old"), half);
        assert_eq!(idle(&mut s, b"new"), 0);
        // The next pass is due before it could wrap: idle times keep growing until then.
        s.clock = (s.clock + half - 500) & entry::CLOCK_MASK;
        let clock = s.clock;
        assert_eq!(
            s.peek_repr(0, b"old").unwrap().idle_seconds(clock),
            2 * half - 500
        );
    }

    #[test]
    fn lazy_and_active_expiry() {
        let mut s = shard();
        let now = now_ms();
        for i in 0..2000 {
            let k = format!("k{i}");
            let at = if i % 2 == 0 { now - 1 } else { 0 };
            s.store(0, k.as_bytes(), Value::str(b"v"), at);
        }
        assert_eq!(s.dbs[0].volatile, 1000);
        assert!(s.lookup(0, b"k0", now).is_none());
        assert!(s.lookup(0, b"k1", now).is_some());
        let mut total = 1;
        for _ in 0..200 {
            total += s.active_expire(std::time::Duration::from_millis(5), 100);
            if s.dbs[0].table.len() == 1000 {
                break;
            }
        }
        assert_eq!(total, 1000);
        assert_eq!(s.dbs[0].table.len(), 1000);
        assert_eq!(s.dbs[0].volatile, 0);
    }

    #[test]
    fn offloaded_hashes_keep_their_field_expiry_record_and_come_due_for_loading() {
        use super::hashform::HashForm;
        let mut s = shard();
        let now = now_ms();
        let l = object::PackLimits::default();
        let mut h = HashForm::new();
        h.set(b"a", b"1", false, &l);
        h.set(b"b", b"2", false, &l);
        h.set_expire(b"a", Some(now + 50_000));
        s.store(0, b"h", h.into_value(), 0);
        let p = DiskPtr {
            page: 3,
            len: 100,
            key_len: 1,
            offset: 0,
            packed: 0,
        };
        assert!(s.set_offloaded(0, b"h", ObjectType::Hash, p));
        assert_eq!(s.peek_repr(0, b"h").unwrap().encoding(), "listpackex");
        // MOVE carries the record along; a DEL in between (RENAME's old destination) too.
        let taken = s.take(0, b"h").unwrap();
        assert!(s.remove(1, b"h").is_none());
        s.put_taken(1, b"h", taken);
        assert_eq!(s.field_expiries.get(1, b"h"), Some(now + 50_000));
        assert_eq!(s.field_expiries.get(0, b"h"), None);
        // Not due yet: nothing to load.
        assert_eq!(s.active_expire_fields(10), 0);
        assert!(s.take_field_loads().is_empty());
        // Due: queued for loading, not dropped; a hash taken meanwhile is due at once.
        s.field_expiries.set(1, b"h", now - 1);
        s.active_expire_fields(10);
        assert!(s.has_field_expiries());
        let taken = s.take(1, b"h").unwrap();
        s.put_taken(2, b"h", taken);
        assert_eq!(s.field_expiries.get(2, b"h"), Some(0));
        let loads = s.take_field_loads();
        assert_eq!(loads.len(), 1);
        assert_eq!((loads[0].0, &loads[0].1[..]), (1, &b"h"[..]));
        // Deleted: the record goes with it.
        s.remove(2, b"h");
        assert!(!s.has_field_expiries());
    }

    #[test]
    fn active_sweep_removes_expired_fields_and_empty_hashes() {
        use super::hashform::HashForm;
        let mut s = shard();
        let now = now_ms();
        let mut h = HashForm::new();
        let l = object::PackLimits::default();
        h.set(b"a", b"1", false, &l);
        h.set(b"b", b"2", false, &l);
        h.set_expire(b"a", Some(now - 1));
        s.store(0, b"h", h.into_value(), 0);
        let mut one = HashForm::new();
        one.set(b"x", b"1", false, &l);
        one.set_expire(b"x", Some(now - 1));
        s.store(0, b"gone", one.into_value(), 0);
        assert!(s.has_field_expiries());
        assert_eq!(s.active_expire_fields(10), 2);
        assert!(s.lookup(0, b"gone", now).is_none());
        assert!(s.lookup(0, b"h", now).is_some());
        assert!(!s.has_field_expiries());
    }
}

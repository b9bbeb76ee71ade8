//! Running a keyed command on its shard, loading offloaded values it reads first.
//!
//! Commands stay synchronous functions over RAM. When one that reads values (table flag
//! READS_VALUE) names a key whose value sits in the tier file, the value is read (awaited, the
//! shard keeps serving meanwhile), then — with no await in between — checked to still be what
//! the key points to, put in place, the command runs, and the entry goes back to its disk
//! pointer unless the command changed it (then the disk copy is freed) or the value has been
//! read twice lately and memory allows keeping it (then it stays in RAM). A key deleted,
//! overwritten or expired while its read was in flight is simply what the command sees: no
//! stale value can be returned. An unreadable value (CRC mismatch, I/O error) is counted and
//! its key dropped, so it reads as a miss.
//!
//! An offloaded collection comes back for good (its disk copy freed) before any command on its
//! key runs, except those that need only what its entry keeps in RAM ([`needs_no_collection`]:
//! TYPE, EXISTS, TTL, EXPIRE, DEL, MOVE, OBJECT, ...). Commands that are not one shard's
//! (cross-shard set and sorted-set operations, SORT, blocking pops) load their keys'
//! collections on every shard before they take their locks ([`load_collections`]), and pin
//! them in RAM until they have run: the offloader leaves pinned keys.
//!
//! Never: returns a stale value, or runs a command with a value it did not check is still the
//! key's.

use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use futures::FutureExt;
use smallvec::SmallVec;
use tiering::{DiskPtr, SpaceHold, TierError};

use super::core::Core;
use super::table::{Exec, Spec, READONLY, VALUE_REPLY};
use crate::cmd::{Ctx, ShardFn};
use crate::protocol::Reply;
use crate::shard::tracking::Caller;
use crate::shard::{CompactBytes, Shard, Value};

type Wanted = SmallVec<[(Bytes, DiskPtr); 2]>;

/// A value read back from disk: its bytes (a string, a collection's blob), or a large
/// collection already built from its blob's pieces as they were read (see
/// [`super::offload::collection_in_steps`]).
pub enum Loaded {
    Bytes(Bytes),
    Built(Value),
}

/// Reads the value of `key` at `ptr`: a large collection (of type `t`) in steps, built as it
/// comes, anything else whole.
async fn read_back(
    tier: &tiering::TierStore,
    key: &[u8],
    ptr: DiskPtr,
    t: Option<crate::shard::ObjectType>,
    limits: &crate::shard::object::PackLimits,
) -> Result<Loaded, TierError> {
    match t {
        Some(t) if super::offload::read_in_steps(&ptr) => {
            super::offload::collection_in_steps(tier, key, ptr, t, limits)
                .await
                .map(Loaded::Built)
        }
        _ => tier
            .read(ptr, key)
            .await
            .map(|v| Loaded::Bytes(Bytes::from(v))),
    }
}

fn pack_limits(core: &Core) -> crate::shard::object::PackLimits {
    crate::shard::object::PackLimits::from_settings(&core.shard.borrow().settings)
}

/// Values brought in from disk for one command: (key, pointer, bytes, read before within the
/// offloader's window).
type Installed = SmallVec<[(Bytes, DiskPtr, Bytes, bool); 2]>;

/// Collections brought in from disk for one command: (key, pointer, type, read before within
/// the offloader's window, changed on the way in: a hash's fields expired).
type Collections = SmallVec<[(Bytes, DiskPtr, crate::shard::ObjectType, bool, bool); 2]>;

/// What a batch of commands found on disk before running: the values read ahead, by disk
/// pointer (shared, not copied, by the commands that use them), and which keys were offloaded.
#[derive(Default)]
pub struct Preloaded {
    values: HashMap<DiskPtr, Result<Bytes, TierError>>,
    /// The keys the batch's reading commands found offloaded.
    offloaded: Vec<Bytes>,
    /// [`Shard::disk_epoch`] when they were looked at.
    epoch: u64,
    /// False when nothing was looked at (no tier): commands look for themselves.
    looked: bool,
    /// The space of every value read stays theirs while the batch runs: a key freed and its
    /// page written again meanwhile could otherwise put another value (or a newer one of the
    /// same key) at a pointer found in `values`.
    _holds: Vec<SpaceHold>,
}

impl Preloaded {
    /// True when values were read (the batch awaited: its keys' cache lines may have gone).
    pub fn read_any(&self) -> bool {
        !self.values.is_empty()
    }

    /// True when `args`' keys were seen in RAM (or missing) by the look-ahead and no key has
    /// come to point at disk since: the command can run without looking again.
    fn in_ram(&self, shard: &Shard, spec: &Spec, args: &[Bytes]) -> bool {
        self.looked
            && self.epoch == shard.disk_epoch()
            && key_positions(spec, args).all(|i| !self.offloaded.iter().any(|k| k == &args[i]))
    }
}

/// Reads, all at once, the offloaded values a batch of commands will need, so a pipeline keeps
/// many reads in flight instead of one at a time. Each command still re-checks its keys when
/// it runs unless nothing can have moved to disk since (see [`Shard::disk_epoch`]); a value
/// that moved meanwhile is simply read again.
pub async fn preload(core: &Rc<Core>, db: usize, cmds: &[(&'static Spec, &[Bytes])]) -> Preloaded {
    let (tier, ptrs, epoch) = {
        let shard = core.shard.borrow();
        let Some(tier) = shard.tier.clone() else {
            return Preloaded::default();
        };
        let ptrs: Vec<(Bytes, DiskPtr)> = cmds
            .iter()
            .flat_map(|(spec, args)| offloaded_keys(&shard, db, spec, args))
            .collect();
        // A large collection is read in steps by its command (built as it comes), not
        // ahead as a whole blob.
        let stepwise: Vec<DiskPtr> = ptrs
            .iter()
            .filter(|(k, p)| {
                super::offload::read_in_steps(p)
                    && matches!(shard.peek_offloaded(db, k), Some((_, Some(_))))
            })
            .map(|(_, p)| *p)
            .collect();
        (tier, (ptrs, stepwise), shard.disk_epoch())
    };
    let (ptrs, stepwise) = ptrs;
    let offloaded = ptrs.iter().map(|(k, _)| k.clone()).collect();
    let mut reads = ptrs;
    reads.retain(|(_, p)| !stepwise.contains(p));
    reads.sort_unstable_by_key(|(_, p)| (p.page, p.offset));
    reads.dedup_by_key(|(_, p)| *p);
    let holds = reads.iter().map(|(_, p)| tier.hold(*p)).collect();
    let values = if reads.is_empty() {
        HashMap::new()
    } else {
        let reads = reads.into_iter().map(|(k, p)| {
            let tier = tier.clone();
            async move { (p, tier.read(p, &k).await.map(Bytes::from)) }
        });
        futures::future::join_all(reads).await.into_iter().collect()
    };
    Preloaded {
        values,
        offloaded,
        epoch,
        looked: true,
        _holds: holds,
    }
}

/// Runs `f` (the command `spec`) for `args` on this core's shard. `tx` is the transaction
/// holding the shard when called from one (0 otherwise); `pre` holds values read ahead;
/// `caller` is the client it runs for (see [`call`]).
#[allow(clippy::too_many_arguments)]
pub async fn run_keyed(
    core: &Rc<Core>,
    db: usize,
    spec: &'static Spec,
    f: ShardFn,
    args: &[Bytes],
    now: u64,
    tx: u64,
    pre: Option<&Preloaded>,
    caller: Caller,
) -> Reply {
    loop {
        while core.gate.closed_to(tx) {
            core.gate.opened().await;
        }
        let wanted = {
            let shard = core.shard.borrow();
            if pre.is_some_and(|p| p.in_ram(&shard, spec, args)) {
                debug_assert!(offloaded_keys(&shard, db, spec, args).is_empty());
                Wanted::new()
            } else {
                offloaded_keys(&shard, db, spec, args)
            }
        };
        if wanted.is_empty() {
            let shard = &mut core.shard.borrow_mut();
            if tx == 0 {
                return call_own(shard, db, now, spec, f, args, caller);
            }
            return call(shard, db, now, spec, f, args, caller);
        }
        let Some(tier) = core.shard.borrow().tier.clone() else {
            return crate::cmd::args::err("ERR tiered storage is not available");
        };
        let kinds: SmallVec<[_; 2]> = {
            let shard = core.shard.borrow();
            wanted
                .iter()
                .map(|(k, _)| shard.peek_offloaded(db, k).and_then(|(_, t)| t))
                .collect()
        };
        let limits = pack_limits(core);
        let loaded = futures::future::join_all(wanted.iter().zip(kinds).map(|((k, p), t)| {
            let ahead = pre.and_then(|m| m.values.get(p)).cloned();
            let tier = tier.clone();
            let p = *p;
            let limits = &limits;
            async move {
                match ahead {
                    Some(r) => r.map(Loaded::Bytes),
                    None => read_back(&tier, k, p, t, limits).await,
                }
            }
        }))
        .await;
        if core.gate.closed_to(tx) {
            continue;
        }
        if spec.has(VALUE_REPLY) {
            if let Some(reply) = get_offloaded(core, db, &wanted, &loaded, now) {
                remember_read(&mut core.shard.borrow_mut(), spec, args, caller);
                return reply;
            }
        }
        let mut shard = core.shard.borrow_mut();
        let mut installed: Installed = SmallVec::new();
        let mut colls: Collections = SmallVec::new();
        let mut moved = false;
        for ((key, ptr), data) in wanted.into_iter().zip(loaded) {
            match shard.peek_offloaded(db, &key) {
                Some((cur, Some(t))) if cur == ptr => {
                    let put = install_collection(&mut shard, db, &key, ptr, t, data, now, true);
                    if let Some((again, changed)) = put {
                        colls.push((key, ptr, t, again, changed));
                    }
                }
                Some((cur, None)) if cur == ptr => match data {
                    Ok(Loaded::Built(_)) => {
                        // Only collections are built; a string's key never reads one.
                        shard.remove(db, &key);
                    }
                    Ok(Loaded::Bytes(v)) => {
                        if let Some(e) = shard.lookup_repr(db, &key, now) {
                            // Referenced since the offloader last looked: this read is the
                            // second within its window.
                            let again = e.has(crate::shard::Entry::REFERENCED);
                            e.set_value(Value::str(&v));
                            installed.push((key, ptr, v, again));
                        }
                    }
                    Err(e) => {
                        tracing::warn!("dropping a key whose value cannot be read back: {e}");
                        shard.stats.tiered_read_errors += 1;
                        shard.remove(db, &key);
                    }
                },
                // Offloaded again elsewhere while we read: read the new place.
                Some(_) => moved = true,
                // Deleted, overwritten, expired or already back in RAM.
                None => {}
            }
        }
        // Another of its keys may have gone to disk while these were read.
        moved = moved || !offloaded_keys(&shard, db, spec, args).is_empty();
        let readonly = spec.has(READONLY);
        if moved {
            restore_pointers(&mut shard, db, installed, false);
            restore_collections(&mut shard, db, colls, true, false);
            continue;
        }
        let reply = if tx == 0 {
            call_own(&mut shard, db, now, spec, f, args, caller)
        } else {
            call(&mut shard, db, now, spec, f, args, caller)
        };
        let upload = upload_allowed(core);
        restore_pointers(&mut shard, db, installed, upload);
        restore_collections(&mut shard, db, colls, readonly, upload);
        return reply;
    }
}

/// Runs keyed command `spec` (function `f`) on `shard` for `caller`: its changes are that
/// client's (CLIENT TRACKING NOLOOP), and when it tracks, the keys a read-only command names
/// are remembered for it, in the same step as the read (no change can fall in between).
#[inline]
pub fn call(
    shard: &mut Shard,
    db: usize,
    now: u64,
    spec: &'static Spec,
    f: ShardFn,
    args: &[Bytes],
    caller: Caller,
) -> Reply {
    // The command reports each key it changes itself (`Ctx::changed`), as Redis' commands
    // call `signalModifiedKey`: a write that changed nothing (SADD of a member already
    // there, ...) fails no WATCH and invalidates nothing.
    if caller == Caller::NONE {
        return f(&mut Ctx { shard, db, now }, args);
    }
    shard.watches.tracking.caller = caller;
    let reply = f(&mut Ctx { shard, db, now }, args);
    shard.watches.tracking.caller = Caller::NONE;
    remember_read(shard, spec, args, caller);
    reply
}

/// [`call`] for a command of its own (not one of EXEC's or a script's): the invalidations of
/// keys its client tracks and it changed come right after its reply, as Redis sends them after
/// the command (`trackingHandlePendingKeyInvalidations`), not after the whole pipeline.
#[inline]
pub fn call_own(
    shard: &mut Shard,
    db: usize,
    now: u64,
    spec: &'static Spec,
    f: ShardFn,
    args: &[Bytes],
    caller: Caller,
) -> Reply {
    // No key tracked on this shard: no invalidation to gather.
    if caller == Caller::NONE || shard.watches.tracking.is_empty() {
        return call(shard, db, now, spec, f, args, caller);
    }
    let (reply, own) =
        super::tracking::own_pushes(caller.id, || call(shard, db, now, spec, f, args, caller));
    if own.is_empty() {
        return reply;
    }
    let mut all = Vec::with_capacity(1 + own.len());
    all.push(reply);
    all.extend(own);
    Reply::Many(all)
}

/// Remembers the keys of read-only command `spec` for a tracking `caller`.
fn remember_read(shard: &mut Shard, spec: &'static Spec, args: &[Bytes], caller: Caller) {
    if caller.track && spec.has(READONLY) {
        for i in spec.keys_of(args) {
            shard.watches.tracking.remember(&args[i], caller.id);
        }
    }
}

/// GET of a value just read from disk, answered from the bytes read: the entry keeps its disk
/// pointer (or, read twice lately and with room in RAM, takes the bytes and frees the disk)
/// instead of taking the value in, running the command over it and comparing it on the way
/// back, as other commands do. None (nothing done) unless the read succeeded and the key still
/// points where it was read: the general path handles a key gone, moved or changed meanwhile.
fn get_offloaded(
    core: &Core,
    db: usize,
    wanted: &Wanted,
    loaded: &[Result<Loaded, TierError>],
    now: u64,
) -> Option<Reply> {
    let ([(key, ptr)], [Ok(Loaded::Bytes(value))]) = (&wanted[..], loaded) else {
        return None;
    };
    let mut shard = core.shard.borrow_mut();
    let (e, again) = shard.lookup_offloaded(db, key, *ptr, now)?;
    let upload = again && upload_allowed(core);
    if upload {
        e.set_value(Value::str(value));
        shard.free_disk(*ptr);
        shard.stats.uploaded += 1;
    }
    Some(Reply::Bulk(value.clone()))
}

/// Keys of the command whose values it reads and that are offloaded now: strings when it
/// reads values, collections unless it needs only their entries.
pub(super) fn offloaded_keys(shard: &Shard, db: usize, spec: &Spec, args: &[Bytes]) -> Wanted {
    let mut out = Wanted::new();
    if shard.tier.is_none() {
        return out;
    }
    let (strings, collections) = (spec.reads_value(args), !needs_no_collection(spec, args));
    if !strings && !collections {
        return out;
    }
    for i in key_positions(spec, args) {
        if let Some((p, t)) = shard.peek_offloaded(db, &args[i]) {
            let wanted = if t.is_some() { collections } else { strings };
            if wanted && !out.iter().any(|(k, _)| k == &args[i]) {
                out.push((args[i].clone(), p));
            }
        }
    }
    out
}

/// Where the command's keys are: its table's positions and, for one with movable keys
/// (ZUNIONSTORE's sources, SORT's), those its key function finds (some twice).
fn key_positions<'a>(spec: &'a Spec, args: &[Bytes]) -> impl Iterator<Item = usize> + 'a {
    let movable = match spec.exec {
        Exec::Movable(..) | Exec::AwaitKeyed(..) => spec.keys_of(args),
        _ => Vec::new(),
    };
    spec.key_indices(args.len()).chain(movable)
}

/// Commands that need only what an offloaded collection's entry keeps in RAM (its type,
/// encoding, expiry, access data and disk pointer) or replace it unread: they run without
/// loading it.
pub fn needs_no_collection(spec: &Spec, args: &[Bytes]) -> bool {
    const NAMES: &[&str] = &[
        "type",
        "exists",
        "touch",
        "ttl",
        "pttl",
        "expiretime",
        "pexpiretime",
        "expire",
        "pexpire",
        "expireat",
        "pexpireat",
        "persist",
        "del",
        "unlink",
        "move",
        "object",
    ];
    if spec.name == "set" {
        // SET without GET replaces any value; with GET it reads the old one (WRONGTYPE).
        return !spec.reads_value(args);
    }
    NAMES.contains(&spec.name)
}

/// Puts a collection read back from disk at `ptr` in place, when `key` still points there
/// (the caller checked): decoded and checked against the type the entry keeps. A hash's
/// fields that expired while it was on disk go at once when `expire` (the key too when none
/// is left: its disk copy is freed then), so no command ever sees one; without `expire` (a
/// transaction of others holds the shard) the field sweep's record of it stands. Its disk copy
/// stays the caller's to free or to point at again. Returns whether the entry had been
/// referenced since the offloader last looked at it, and whether fields expired (the blob is
/// stale then); None when nothing was put in place. An unreadable or corrupt blob is counted
/// (`tiered_read_errors`) and its key dropped (its disk space freed): a miss, never a wrong
/// value.
#[allow(clippy::too_many_arguments)]
fn install_collection(
    shard: &mut Shard,
    db: usize,
    key: &[u8],
    ptr: DiskPtr,
    t: crate::shard::ObjectType,
    data: Result<Loaded, TierError>,
    now: u64,
    expire: bool,
) -> Option<(bool, bool)> {
    let limits = crate::shard::object::PackLimits::from_settings(&shard.settings);
    let value = match data {
        Ok(Loaded::Bytes(b)) => super::offload::collection_from_blob(t, &b, &limits),
        Ok(Loaded::Built(v)) => Ok(v),
        Err(e) => Err(e.to_string()),
    };
    match value {
        Ok(v) => {
            let e = shard.lookup_repr(db, key, now)?;
            let again = e.has(crate::shard::Entry::REFERENCED);
            e.set_value(v);
            shard.stats.loaded_collections += 1;
            if t != crate::shard::ObjectType::Hash {
                return Some((again, false));
            }
            if !expire {
                let at = shard
                    .peek_repr(db, key)
                    .and_then(|e| crate::shard::hashform::field_expiry_bound(e));
                if let Some(at) = at {
                    shard.note_field_expiry(db, key, at);
                }
                return Some((again, false));
            }
            match shard.expire_fields(db, key, now) {
                Some(s) if s.empty => {
                    shard.free_disk(ptr);
                    None
                }
                Some(s) => Some((again, s.removed > 0)),
                None => Some((again, false)),
            }
        }
        Err(e) => {
            tracing::warn!("dropping a key whose collection cannot be read back: {e}");
            shard.stats.tiered_read_errors += 1;
            shard.remove(db, key);
            None
        }
    }
}

/// A collection loaded for good (it leaves this shard, or a command outside [`run_keyed`]
/// reads it): its disk copy is freed, and it is marked used so the offloader's next pass
/// leaves it.
fn keep_collection(shard: &mut Shard, db: usize, key: &[u8], ptr: DiskPtr) {
    shard.free_disk(ptr);
    if let Some(e) = shard.peek_repr(db, key) {
        e.add_flags(crate::shard::Entry::REFERENCED);
    }
}

/// After the command, as [`restore_pointers`] for strings: a collection a read-only command
/// left in RAM goes back to its blob on disk (unchanged: nothing rewritten), unless it has
/// been read twice lately and memory allows keeping it; one a write changed or removed, or
/// one read twice with room in RAM, stays as it is and its disk copy is freed.
fn restore_collections(
    shard: &mut Shard,
    db: usize,
    colls: Collections,
    readonly: bool,
    upload: bool,
) {
    for (key, ptr, t, again, changed) in colls {
        let in_ram = shard.dbs[db]
            .table
            .get(&key, crate::shard::hash(&key))
            .is_some_and(|e| e.object_type() == Some(t) && !e.is_external());
        if readonly && in_ram && !changed && !(upload && again) {
            if !shard.set_offloaded(db, &key, t, ptr) {
                shard.free_disk(ptr);
            }
        } else {
            shard.free_disk(ptr);
            if in_ram && readonly {
                shard.stats.uploaded += 1;
            }
        }
    }
}

/// Brings back to RAM the offloaded collections among `keys` on this core's shard (reads
/// awaited, the shard serving others meanwhile), before a command that reads them outside
/// [`run_keyed`] starts. The caller keeps them there: it holds the shard, or pinned them.
pub async fn load_local_collections(core: &Rc<Core>, db: usize, keys: &[Bytes]) {
    loop {
        let (tier, wanted) = {
            let shard = core.shard.borrow();
            let Some(tier) = shard.tier.clone() else {
                return;
            };
            let wanted: Vec<(Bytes, DiskPtr, crate::shard::ObjectType)> = keys
                .iter()
                .filter_map(|k| match shard.peek_offloaded(db, k)? {
                    (p, Some(t)) => Some((k.clone(), p, t)),
                    _ => None,
                })
                .collect();
            (tier, wanted)
        };
        if wanted.is_empty() {
            return;
        }
        let limits = pack_limits(core);
        let loaded = futures::future::join_all(
            wanted
                .iter()
                .map(|(k, p, t)| read_back(&tier, k, *p, Some(*t), &limits)),
        )
        .await;
        let now = crate::shard::now_ms();
        // Fields are not expired under another's transaction (its commands see the shard as
        // it was): the sweep comes back to them.
        let expire = !core.gate.is_locked();
        let mut shard = core.shard.borrow_mut();
        for ((key, ptr, _), data) in wanted.into_iter().zip(loaded) {
            if let Some((cur, Some(t))) = shard.peek_offloaded(db, &key) {
                if cur == ptr
                    && install_collection(&mut shard, db, &key, ptr, t, data, now, expire).is_some()
                {
                    keep_collection(&mut shard, db, &key, ptr);
                }
            }
        }
        // Anything offloaded again or moved meanwhile is looked at once more.
    }
}

/// Blob bytes the field sweep reads back at once at most (a larger hash alone): the hashes
/// it loads stay in RAM.
const DUE_LOAD_BYTES: u64 = 4 << 20;

/// Reads back the offloaded hashes the field sweep found due (`Shard::take_field_loads`),
/// once no transaction holds the shard, each once: loading one expires its due fields
/// (events, the key when none is left) as a command's load does, and it stays in RAM, its
/// disk copy freed. One moved on disk meanwhile, or past this batch's bytes, is due again at
/// the next sweep. (Not [`load_local_collections`], which chases a key the offloader takes
/// again until it holds it: at the offloader's full pace that never ended.)
pub async fn load_due_hashes(core: &Rc<Core>, due: Vec<(usize, Rc<[u8]>)>) {
    while core.gate.is_locked() {
        core.gate.opened().await;
    }
    let Some(tier) = core.shard.borrow().tier.clone() else {
        return;
    };
    let wanted: Vec<(usize, Bytes, DiskPtr)> = {
        let mut shard = core.shard.borrow_mut();
        let now = crate::shard::now_ms();
        let mut bytes = 0u64;
        let mut wanted = Vec::new();
        for (db, key) in due {
            let Some((p, Some(crate::shard::ObjectType::Hash))) = shard.peek_offloaded(db, &key)
            else {
                // Back in RAM meanwhile: the sweep takes it there.
                let at = shard
                    .peek_repr(db, &key)
                    .and_then(|e| crate::shard::hashform::field_expiry_bound(e));
                if let Some(at) = at {
                    shard.note_field_expiry(db, &key, at);
                }
                continue;
            };
            if bytes >= DUE_LOAD_BYTES {
                shard.note_field_expiry(db, &key, now);
                continue;
            }
            bytes += u64::from(p.len);
            wanted.push((db, Bytes::copy_from_slice(&key), p));
        }
        wanted
    };
    let limits = pack_limits(core);
    let hash = Some(crate::shard::ObjectType::Hash);
    let loaded = futures::future::join_all(
        wanted
            .iter()
            .map(|(_, k, p)| read_back(&tier, k, *p, hash, &limits)),
    )
    .await;
    let now = crate::shard::now_ms();
    let expire = !core.gate.is_locked();
    let mut shard = core.shard.borrow_mut();
    for ((db, key, ptr), data) in wanted.into_iter().zip(loaded) {
        // A SWAPDB during the read moved the hash: it is loaded where it is now, or it would
        // be left without its record (its fields then expiring lazily only).
        let db = shard.db_of_offloaded(db, &key, ptr);
        match shard.peek_offloaded(db, &key) {
            Some((cur, Some(t))) if cur == ptr => {
                if install_collection(&mut shard, db, &key, ptr, t, data, now, expire).is_some() {
                    keep_collection(&mut shard, db, &key, ptr);
                }
                shard.stats.field_expiry_loads += 1;
            }
            Some((_, Some(crate::shard::ObjectType::Hash))) => {
                shard.note_field_expiry(db, &key, now);
            }
            _ => {}
        }
    }
}

/// Collections a command loaded into RAM on their shards, pinned there until it has run
/// (see `shard::pins`): without the pins the offloader could move one back to disk between
/// the load and the command's locks, and the command would find it on SSD. Dropping this
/// unpins them, however the command ends (its client gone mid-command included).
pub struct Pinned {
    core: Rc<Core>,
    db: usize,
    /// (shard, keys) of every loading job sent: each pinned its keys when it ran there (or
    /// will, ahead of the unpinning message sent after it).
    parts: Vec<(usize, Vec<Bytes>)>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let db = self.db;
        for (s, keys) in std::mem::take(&mut self.parts) {
            if s == self.core.id {
                if let Ok(mut shard) = self.core.shard.try_borrow_mut() {
                    unpin(&mut shard, db, &keys);
                    continue;
                }
            }
            let job: super::core::Job =
                Box::new(move |c| unpin(&mut c.shard.borrow_mut(), db, &keys));
            self.core.global.send(s, super::core::Msg::Run(job));
        }
    }
}

fn pin(shard: &mut Shard, db: usize, keys: &[Bytes]) {
    for k in keys {
        shard.pins.pin(db, k);
    }
}

fn unpin(shard: &mut Shard, db: usize, keys: &[Bytes]) {
    for k in keys {
        shard.pins.unpin(db, k);
    }
}

/// [`load_local_collections`] for keys anywhere, each shard loading its own, all at once; the
/// keys stay pinned in RAM (whether they were on disk or not) until the returned guard drops.
pub async fn load_collections(core: &Rc<Core>, db: usize, keys: Vec<Bytes>) -> Pinned {
    let mut pinned = Pinned {
        core: core.clone(),
        db,
        parts: Vec::new(),
    };
    if core.global.settings.tiered.is_none() || keys.is_empty() {
        return pinned;
    }
    let n = core.global.shards();
    let mut by_shard: Vec<Vec<Bytes>> = vec![Vec::new(); n];
    for k in keys {
        let s = crate::shard::shard_of(&k, n);
        if !by_shard[s].contains(&k) {
            by_shard[s].push(k);
        }
    }
    // Every job is sent (and this shard's keys pinned) before anything is awaited, so the
    // guard knows exactly which shards to unpin should this future be dropped.
    let mut remote = Vec::new();
    let mut local = None;
    for (s, ks) in by_shard.into_iter().enumerate() {
        if ks.is_empty() {
            continue;
        }
        if s == core.id {
            pin(&mut core.shard.borrow_mut(), db, &ks);
            pinned.parts.push((s, ks.clone()));
            local = Some(ks);
            continue;
        }
        let job_keys = ks.clone();
        let work: super::core::AsyncWork<()> = Box::new(move |c: Rc<Core>| {
            pin(&mut c.shard.borrow_mut(), db, &job_keys);
            async move { load_local_collections(&c, db, &job_keys).await }.boxed_local()
        });
        if let Some(rx) = core.send_work(s, work) {
            pinned.parts.push((s, ks));
            remote.push(rx);
        }
    }
    let _waiting = crate::runtime::remote_wait();
    let here = async {
        if let Some(ks) = &local {
            load_local_collections(core, db, ks).await;
        }
    };
    futures::future::join(here, futures::future::join_all(remote)).await;
    pinned
}

/// After the command: an entry still holding exactly the loaded bytes goes back to its disk
/// pointer (or, read twice lately and with room in RAM, keeps the bytes and frees the disk);
/// anything else means the command replaced or removed the value, so the disk copy is freed.
fn restore_pointers(shard: &mut Shard, db: usize, installed: Installed, upload: bool) {
    for (key, ptr, bytes, again) in installed {
        let unchanged = shard.dbs[db]
            .table
            .get(&key, crate::shard::hash(&key))
            .is_some_and(|e| e.str() == Some(&bytes[..]));
        if !unchanged {
            shard.free_disk(ptr);
            continue;
        }
        if upload && again {
            shard.free_disk(ptr);
            shard.stats.uploaded += 1;
        } else {
            shard.set_external(db, &key, ptr);
        }
    }
}

/// Whether a value read twice may stay in RAM: used memory well under the level where the
/// offloader turns to its hard pace (`offload::hard_limit`), so that bringing a value back
/// never just makes the offloader push another one out at once. Between the offload
/// threshold and that level, hot values come back and cold ones leave at the soft pace.
fn upload_allowed(core: &Core) -> bool {
    let s = &core.global.settings;
    let (Some(t), max) = (&s.tiered, s.maxmemory()) else {
        return false;
    };
    max == 0 || crate::memory::used_memory() < super::offload::upload_limit(&core.global, max, t)
}

/// Loads an entry's value into RAM for good (it is about to leave this shard: cross-shard
/// RENAME, COPY, LCS); the disk copy is freed. Returns a copy of the entry and its expiry;
/// None when the key is missing or unreadable.
pub async fn load_entry(
    core: &Rc<Core>,
    db: usize,
    key: &Bytes,
    now: u64,
) -> Option<(crate::shard::Entry, u64)> {
    loop {
        let ptr = {
            let mut shard = core.shard.borrow_mut();
            let (e, at) = shard.lookup_mut_ttl(db, key, now)?;
            match e.external(key.len()) {
                Some(p) => p,
                None => return Some((e.clone(), at)),
            }
        };
        let (tier, t) = {
            let shard = core.shard.borrow();
            let t = shard.peek_offloaded(db, key).and_then(|(_, t)| t);
            (shard.tier.clone()?, t)
        };
        let data = read_back(&tier, key, ptr, t, &pack_limits(core)).await;
        let mut shard = core.shard.borrow_mut();
        let now_at = shard.peek_offloaded(db, key);
        if now_at.map(|(p, _)| p) != Some(ptr) {
            // Changed while reading: look again.
            continue;
        }
        if let Some((_, Some(t))) = now_at {
            // Run by a transaction holding the shard: the fields it finds expired go now.
            install_collection(&mut shard, db, key, ptr, t, data, now, true)?;
            keep_collection(&mut shard, db, key, ptr);
            let (e, at) = shard.lookup_mut_ttl(db, key, now)?;
            return Some((e.clone(), at));
        }
        return match data {
            Ok(Loaded::Bytes(v)) => {
                shard.free_disk(ptr);
                let (e, at) = shard.lookup_mut_ttl(db, key, now)?;
                e.set_value(Value::Str(CompactBytes::from_vec(v.to_vec())));
                Some((e.clone(), at))
            }
            Ok(Loaded::Built(_)) | Err(_) => {
                if let Err(err) = data {
                    tracing::warn!("dropping a key whose value cannot be read back: {err}");
                }
                shard.stats.tiered_read_errors += 1;
                shard.remove(db, key);
                None
            }
        };
    }
}

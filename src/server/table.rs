//! The command table: one [`Spec`] per command with its arity, flags, key positions and how it
//! runs. It is the only dispatcher: routing to shards, the auth/OOM checks, COMMAND INFO/DOCS
//! and CLIENT LIST all read it, and behaviour that differs between commands is a flag or an
//! [`Exec`] variant here, never a test of a command's name. Adding a command is one line here
//! plus its function in its family's file (`cmd/` for keyed commands, `admin/` for connection
//! and server commands).
//!
//! Must never hold state: the table is static and read by every core.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::OnceLock;

use bytes::Bytes;
use futures::future::LocalBoxFuture;

use super::admin::{
    client, cluster, command, config, connection, debug, info, keyspace, persist, pubsub,
};
use super::blocking;
use super::core::Core;
use super::multi;
use super::script;
use super::session::Session;
use super::sort;
use super::txn;
use super::txn_collections as txc;
use super::zset_cross;
use crate::cmd::sort as cmd_sort;
use crate::cmd::{bitops, dump, hash, hyperloglog, keys, list, set, string, zset, KeysFn, ShardFn};
use crate::protocol::Reply;

/// How replies from the per-shard parts of a split command combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// Integer replies added up (DEL, EXISTS, TOUCH, UNLINK).
    Sum,
    /// Array replies concatenated in key order (MGET).
    Concat,
    /// Every part says OK; atomic across shards (MSET).
    AtomicOk,
}

/// A connection or server command's view: its core, the calling session, its arguments.
pub struct Call<'a> {
    pub core: &'a Rc<Core>,
    pub session: &'a mut Session,
    pub args: Vec<Bytes>,
}

impl<'a> Call<'a> {
    /// The call's parts, for a command that uses them all.
    pub fn parts(self) -> (&'a Rc<Core>, &'a mut Session, Vec<Bytes>) {
        (self.core, self.session, self.args)
    }
}

/// A keyed command whose keys span shards, run under a cross-shard transaction
/// (`server::txn`): (core, the command, db, args).
pub type CrossFn =
    for<'a> fn(&'a Rc<Core>, &'static Spec, usize, &'a [Bytes]) -> LocalBoxFuture<'a, Reply>;
/// A connection or server command that answers at once.
pub type SessionFn = fn(Call<'_>) -> Reply;
/// A connection or server command that may wait (fan-out to every shard, a save, a sleep).
pub type AwaitFn = for<'a> fn(Call<'a>) -> LocalBoxFuture<'a, Reply>;

#[derive(Clone, Copy)]
pub enum Exec {
    /// Runs on the shard that owns its keys (all on one shard).
    Keyed(ShardFn),
    /// Runs on the shard that owns its keys; when they span shards, the second function runs
    /// them under a cross-shard transaction instead (RENAME, COPY, MSETNX, LCS).
    Cross(ShardFn, CrossFn),
    /// Keys found from the arguments by the middle function (keys after a count: ZUNIONSTORE,
    /// ZMPOP, ...); runs like [`Exec::Cross`]: on the keys' shard, or under a cross-shard
    /// transaction when they span shards.
    Movable(ShardFn, KeysFn, CrossFn),
    /// Keys are split by shard, each part runs the function with `[name, keys...]`, and the
    /// replies merge; `usize` is how many arguments make one key's group (1 for DEL, 2 for MSET).
    Split(ShardFn, usize, Merge),
    /// Runs on the connection's core with the session (connection state, COMMAND, TIME).
    Session(SessionFn),
    /// Runs on the connection's core with the session and may wait (fan-out, saves, sleeps).
    Await(AwaitFn),
    /// Like [`Exec::Await`], for a keyed command whose keys the middle function finds and
    /// whose steps may need any shard (SORT: its BY and GET patterns name keys anywhere).
    AwaitKeyed(AwaitFn, KeysFn),
    /// A blocking pop (`server::blocking`): the function parses it; it waits on the
    /// connection's core for its keys. Inside MULTI/EXEC or a script, run
    /// `blocking::try_once` (never blocks) instead.
    Blocking(super::blocking::ParseFn),
}

pub const WRITE: u32 = 1;
pub const READONLY: u32 = 1 << 1;
pub const DENYOOM: u32 = 1 << 2;
pub const FAST: u32 = 1 << 3;
pub const ADMIN: u32 = 1 << 4;
/// Allowed before authentication (AUTH, HELLO, QUIT).
pub const NOAUTH: u32 = 1 << 5;
pub const LOADING: u32 = 1 << 6;
/// Reads string values: offloaded values are loaded before it runs.
pub const READS_VALUE: u32 = 1 << 7;
/// Reads the value only when one of its options after the key and value is GET (SET).
pub const READS_WITH_GET: u32 = 1 << 8;
/// Its reply is the value it reads, unchanged (GET): a value just read from disk is answered
/// from the bytes read, without taking it into RAM.
pub const VALUE_REPLY: u32 = 1 << 9;
/// Its keys depend on its arguments (COMMAND INFO's `movablekeys`).
pub const MOVABLE_KEYS: u32 = 1 << 10;
/// Runs at once even inside MULTI instead of being queued (EXEC, DISCARD, MULTI, WATCH, QUIT).
pub const NO_QUEUE: u32 = 1 << 20;
/// Refused inside MULTI (Redis' `no_multi`: SAVE, SHUTDOWN).
pub const NO_MULTI: u32 = 1 << 21;
/// May wait for data (COMMAND INFO's `blocking`; the connection watches its socket meanwhile).
pub const BLOCKING: u32 = 1 << 11;
/// Allowed to a RESP2 connection in subscribe mode ((P|S)SUBSCRIBE, PING, QUIT, RESET, ...).
pub const PUBSUB_OK: u32 = 1 << 12;

pub struct Spec {
    pub name: &'static str,
    /// Redis' arity: exact count including the name, or -N for "at least N".
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    /// Last key position; negative counts from the end (-1 = last argument).
    pub last_key: i32,
    pub step: i32,
    pub exec: Exec,
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    /// Keys that follow a count (Redis' `keynum` key spec), as COMMAND GETKEYS finds them.
    pub numkeys: Option<NumKeys>,
}

/// Where a command's keys follow a count: `count, key...` from argument `at` on, after a
/// destination key at 1 when `store`. Keys are optional (a bad count names none, no error)
/// when not `mandatory` (scripts).
#[derive(Clone, Copy)]
pub struct NumKeys {
    pub at: usize,
    pub store: bool,
    pub mandatory: bool,
}

impl Spec {
    /// This command with keys after the count at `at` (a destination first when `store`).
    const fn counted(mut self, at: usize, store: bool) -> Spec {
        self.numkeys = Some(NumKeys {
            at,
            store,
            mandatory: true,
        });
        self
    }

    /// A script call: its keys after numkeys at 2, none when numkeys is bad.
    const fn script_keys(mut self) -> Spec {
        self.numkeys = Some(NumKeys {
            at: 2,
            store: false,
            mandatory: false,
        });
        self
    }
}

impl Spec {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        if a >= 0 {
            argc == a as usize
        } else {
            argc >= (-a) as usize
        }
    }

    /// Whether this call reads values (offloaded ones must be loaded first).
    pub fn reads_value(&self, args: &[Bytes]) -> bool {
        self.has(READS_VALUE)
            || self.has(READS_WITH_GET)
                && args
                    .get(3..)
                    .is_some_and(|opts| opts.iter().any(|a| crate::cmd::args::is(a, "GET")))
    }

    /// Indices of the key arguments in `args`.
    pub fn key_indices(&self, argc: usize) -> impl Iterator<Item = usize> {
        let first = self.first_key.max(0) as usize;
        let last = if self.first_key <= 0 {
            0
        } else if self.last_key < 0 {
            (argc as i64 + self.last_key as i64).max(0) as usize
        } else {
            (self.last_key as usize).min(argc.saturating_sub(1))
        };
        let step = self.step.max(1) as usize;
        let valid = self.first_key > 0 && first < argc;
        (first..=last).step_by(step).filter(move |_| valid)
    }

    /// Indices of the key arguments in `args`, counted keys included.
    pub fn keys_of(&self, args: &[Bytes]) -> Vec<usize> {
        let mut v: Vec<usize> = self.key_indices(args.len()).collect();
        if let Exec::Movable(_, keys, _) | Exec::AwaitKeyed(_, keys) = self.exec {
            for i in keys(args) {
                if !v.contains(&i) {
                    v.push(i);
                }
            }
        }
        if let Exec::Blocking(_) = self.exec {
            for i in super::blocking::counted_keys(self, args) {
                if !v.contains(&i) {
                    v.push(i);
                }
            }
        }
        v
    }

    /// Position in [`TABLE`] (CLIENT LIST's `cmd=` keeps it).
    pub fn index(&'static self) -> u32 {
        let offset = (self as *const Spec as usize).wrapping_sub(TABLE.as_ptr() as usize);
        let i = offset / std::mem::size_of::<Spec>();
        // Specs outside the table (memcached's) have no index.
        if i < TABLE.len() {
            i as u32
        } else {
            u32::MAX
        }
    }

    /// Flag names as COMMAND INFO reports them.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (bit, name) in [
            (WRITE, "write"),
            (READONLY, "readonly"),
            (DENYOOM, "denyoom"),
            (ADMIN, "admin"),
            (NOAUTH, "no_auth"),
            (LOADING, "loading"),
            (FAST, "fast"),
            (MOVABLE_KEYS, "movablekeys"),
            (NO_MULTI, "no_multi"),
            (BLOCKING, "blocking"),
        ] {
            if self.has(bit) {
                v.push(name);
            }
        }
        v
    }
}

macro_rules! spec {
    ($name:literal, $arity:expr, $flags:expr, $first:expr, $last:expr, $step:expr, $exec:expr,
     $group:literal, $since:literal, $summary:literal) => {
        Spec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            step: $step,
            exec: $exec,
            group: $group,
            since: $since,
            summary: $summary,
            numkeys: None,
        }
    };
}

/// A keyed command's function, its key finder and its cross-shard form as an
/// [`Exec::Movable`].
macro_rules! movable {
    ($f:path, $keys:path, $across:path) => {
        Exec::Movable($f, $keys, |core, spec, db, args| {
            Box::pin($across(core, spec, db, args))
        })
    };
}

/// An `async fn(Call) -> Reply` as an [`Exec::Await`].
macro_rules! awaits {
    ($f:path) => {
        Exec::Await(|call| Box::pin($f(call)))
    };
}

/// An `async fn(Call) -> Reply` and its key finder as an [`Exec::AwaitKeyed`].
macro_rules! awaits_keyed {
    ($f:path, $keys:path) => {
        Exec::AwaitKeyed(|call| Box::pin($f(call)), $keys)
    };
}

/// A keyed command's function and its cross-shard `async fn(core, spec, db, args) -> Reply`
/// as an [`Exec::Cross`].
macro_rules! cross {
    ($f:path, $across:path) => {
        Exec::Cross($f, |core, spec, db, args| {
            Box::pin($across(core, spec, db, args))
        })
    };
}

use Exec::{Keyed, Split};

const W: u32 = WRITE;
const R: u32 = READONLY;
const M: u32 = DENYOOM;
const F: u32 = FAST;
const V: u32 = READS_VALUE;

/// Every command Strata serves.
#[rustfmt::skip]
pub static TABLE: &[Spec] = &[
    // strings
    spec!("get", 2, R | F | V | VALUE_REPLY, 1, 1, 1, Keyed(string::get), "string", "1.0.0", "Returns the string value of a key."),
    spec!("set", -3, W | M | READS_WITH_GET, 1, 1, 1, Keyed(string::set), "string", "1.0.0", "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    spec!("setnx", 3, W | M | F, 1, 1, 1, Keyed(string::setnx), "string", "1.0.0", "Set the string value of a key only when the key doesn't exist."),
    spec!("setex", 4, W | M, 1, 1, 1, Keyed(string::setex), "string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist."),
    spec!("psetex", 4, W | M, 1, 1, 1, Keyed(string::psetex), "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist."),
    spec!("getset", 3, W | M | F | V, 1, 1, 1, Keyed(string::getset), "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value."),
    spec!("getdel", 2, W | F | V, 1, 1, 1, Keyed(string::getdel), "string", "6.2.0", "Returns the string value of a key after deleting the key."),
    spec!("getex", -2, W | F | V, 1, 1, 1, Keyed(string::getex), "string", "6.2.0", "Returns the string value of a key after setting its expiration time."),
    spec!("mget", -2, R | F | V, 1, -1, 1, Split(string::mget, 1, Merge::Concat), "string", "1.0.0", "Atomically returns the string values of one or more keys."),
    spec!("mset", -3, W | M, 1, -1, 2, Split(string::mset, 2, Merge::AtomicOk), "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys."),
    spec!("msetnx", -3, W | M, 1, -1, 2, cross!(string::msetnx, txn::msetnx), "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist."),
    spec!("append", 3, W | M | F | V, 1, 1, 1, Keyed(string::append), "string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist."),
    spec!("strlen", 2, R | F, 1, 1, 1, Keyed(string::strlen), "string", "2.2.0", "Returns the length of a string value."),
    spec!("incr", 2, W | M | F | V, 1, 1, 1, Keyed(string::incr), "string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    spec!("decr", 2, W | M | F | V, 1, 1, 1, Keyed(string::decr), "string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    spec!("incrby", 3, W | M | F | V, 1, 1, 1, Keyed(string::incrby), "string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    spec!("decrby", 3, W | M | F | V, 1, 1, 1, Keyed(string::decrby), "string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
    spec!("incrbyfloat", 3, W | M | F | V, 1, 1, 1, Keyed(string::incrbyfloat), "string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    spec!("getrange", 4, R | V, 1, 1, 1, Keyed(string::getrange), "string", "2.4.0", "Returns a substring of the string stored at a key."),
    spec!("substr", 4, R | V, 1, 1, 1, Keyed(string::getrange), "string", "1.0.0", "Returns a substring from a string value."),
    spec!("setrange", 4, W | M | V, 1, 1, 1, Keyed(string::setrange), "string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."),
    spec!("lcs", -3, R | V, 1, 2, 1, cross!(string::lcs, txn::lcs), "string", "7.0.0", "Finds the longest common substring."),
    // bitmaps
    spec!("setbit", 4, W | M | V, 1, 1, 1, Keyed(bitops::setbit), "bitmap", "2.2.0", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist."),
    spec!("getbit", 3, R | F | V, 1, 1, 1, Keyed(bitops::getbit), "bitmap", "2.2.0", "Returns a bit value by offset."),
    spec!("bitcount", -2, R | V, 1, 1, 1, Keyed(bitops::bitcount), "bitmap", "2.6.0", "Counts the number of set bits (population counting) in a string."),
    spec!("bitpos", -3, R | V, 1, 1, 1, Keyed(bitops::bitpos), "bitmap", "2.8.7", "Finds the first set (1) or clear (0) bit in a string."),
    spec!("bitop", -4, W | M | V, 2, -1, 1, cross!(bitops::bitop, txn::bitop), "bitmap", "2.6.0", "Performs bitwise operations on multiple strings, and stores the result."),
    spec!("bitfield", -2, W | M | V, 1, 1, 1, Keyed(bitops::bitfield), "bitmap", "3.2.0", "Performs arbitrary bitfield integer operations on strings."),
    spec!("bitfield_ro", -2, R | F | V, 1, 1, 1, Keyed(bitops::bitfield_ro), "bitmap", "6.0.0", "Performs arbitrary read-only bitfield integer operations on strings."),
    // hyperloglog
    spec!("pfadd", -2, W | M | F | V, 1, 1, 1, Keyed(hyperloglog::pfadd), "hyperloglog", "2.8.9", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist."),
    spec!("pfcount", -2, R | V, 1, -1, 1, cross!(hyperloglog::pfcount, txn::pfcount), "hyperloglog", "2.8.9", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s)."),
    spec!("pfmerge", -2, W | M | V, 1, -1, 1, cross!(hyperloglog::pfmerge, txn::pfmerge), "hyperloglog", "2.8.9", "Merges one or more HyperLogLog values into a single key."),
    spec!("pfdebug", 3, W | M | V | ADMIN, 2, 2, 1, Keyed(hyperloglog::pfdebug), "hyperloglog", "2.8.9", "Internal commands for debugging HyperLogLog values."),
    spec!("pfselftest", 1, ADMIN, 0, 0, 0, Keyed(hyperloglog::pfselftest), "hyperloglog", "2.8.9", "An internal command for testing HyperLogLog values."),
    // hashes
    spec!("hset", -4, W | M | F, 1, 1, 1, Keyed(hash::hset), "hash", "2.0.0", "Creates or modifies the value of a field in a hash."),
    spec!("hsetnx", 4, W | M | F, 1, 1, 1, Keyed(hash::hsetnx), "hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist."),
    spec!("hmset", -4, W | M | F, 1, 1, 1, Keyed(hash::hmset), "hash", "2.0.0", "Sets the values of multiple fields."),
    spec!("hget", 3, R | F, 1, 1, 1, Keyed(hash::hget), "hash", "2.0.0", "Returns the value of a field in a hash."),
    spec!("hmget", -3, R | F, 1, 1, 1, Keyed(hash::hmget), "hash", "2.0.0", "Returns the values of all fields in a hash."),
    spec!("hdel", -3, W | F, 1, 1, 1, Keyed(hash::hdel), "hash", "2.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain."),
    spec!("hexists", 3, R | F, 1, 1, 1, Keyed(hash::hexists), "hash", "2.0.0", "Determines whether a field exists in a hash."),
    spec!("hlen", 2, R | F, 1, 1, 1, Keyed(hash::hlen), "hash", "2.0.0", "Returns the number of fields in a hash."),
    spec!("hstrlen", 3, R | F, 1, 1, 1, Keyed(hash::hstrlen), "hash", "3.2.0", "Returns the length of the value of a field."),
    spec!("hkeys", 2, R, 1, 1, 1, Keyed(hash::hkeys), "hash", "2.0.0", "Returns all fields in a hash."),
    spec!("hvals", 2, R, 1, 1, 1, Keyed(hash::hvals), "hash", "2.0.0", "Returns all values in a hash."),
    spec!("hgetall", 2, R, 1, 1, 1, Keyed(hash::hgetall), "hash", "2.0.0", "Returns all fields and values in a hash."),
    spec!("hincrby", 4, W | M | F, 1, 1, 1, Keyed(hash::hincrby), "hash", "2.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist."),
    spec!("hincrbyfloat", 4, W | M | F, 1, 1, 1, Keyed(hash::hincrbyfloat), "hash", "2.6.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist."),
    spec!("hrandfield", -2, R, 1, 1, 1, Keyed(hash::hrandfield), "hash", "6.2.0", "Returns one or more random fields from a hash."),
    spec!("hscan", -3, R, 1, 1, 1, Keyed(hash::hscan), "hash", "2.8.0", "Iterates over fields and values of a hash."),
    spec!("hexpire", -6, W | F, 1, 1, 1, Keyed(hash::hexpire), "hash", "7.4.0", "Set expiry for hash field using relative time to expire (seconds)"),
    spec!("hpexpire", -6, W | F, 1, 1, 1, Keyed(hash::hpexpire), "hash", "7.4.0", "Set expiry for hash field using relative time to expire (milliseconds)"),
    spec!("hexpireat", -6, W | F, 1, 1, 1, Keyed(hash::hexpireat), "hash", "7.4.0", "Set expiry for hash field using an absolute Unix timestamp (seconds)"),
    spec!("hpexpireat", -6, W | F, 1, 1, 1, Keyed(hash::hpexpireat), "hash", "7.4.0", "Set expiry for hash field using an absolute Unix timestamp (milliseconds)"),
    spec!("httl", -5, R | F, 1, 1, 1, Keyed(hash::httl), "hash", "7.4.0", "Returns the TTL in seconds of a hash field."),
    spec!("hpttl", -5, R | F, 1, 1, 1, Keyed(hash::hpttl), "hash", "7.4.0", "Returns the TTL in milliseconds of a hash field."),
    spec!("hexpiretime", -5, R | F, 1, 1, 1, Keyed(hash::hexpiretime), "hash", "7.4.0", "Returns the expiration time of a hash field as a Unix timestamp, in seconds."),
    spec!("hpexpiretime", -5, R | F, 1, 1, 1, Keyed(hash::hpexpiretime), "hash", "7.4.0", "Returns the expiration time of a hash field as a Unix timestamp, in msec."),
    spec!("hpersist", -5, W | F, 1, 1, 1, Keyed(hash::hpersist), "hash", "7.4.0", "Removes the expiration time for each specified field"),
    // lists
    spec!("lpush", -3, W | M | F, 1, 1, 1, Keyed(list::lpush), "list", "1.0.0", "Prepends one or more elements to a list. Creates the key if it doesn't exist."),
    spec!("rpush", -3, W | M | F, 1, 1, 1, Keyed(list::rpush), "list", "1.0.0", "Appends one or more elements to a list. Creates the key if it doesn't exist."),
    spec!("lpushx", -3, W | M | F, 1, 1, 1, Keyed(list::lpushx), "list", "2.2.0", "Prepends one or more elements to a list only when the list exists."),
    spec!("rpushx", -3, W | M | F, 1, 1, 1, Keyed(list::rpushx), "list", "2.2.0", "Appends an element to a list only when the list exists."),
    spec!("lpop", -2, W | F, 1, 1, 1, Keyed(list::lpop), "list", "1.0.0", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped."),
    spec!("rpop", -2, W | F, 1, 1, 1, Keyed(list::rpop), "list", "1.0.0", "Returns and removes the last elements of a list. Deletes the list if the last element was popped."),
    spec!("llen", 2, R | F, 1, 1, 1, Keyed(list::llen), "list", "1.0.0", "Returns the length of a list."),
    spec!("lrange", 4, R, 1, 1, 1, Keyed(list::lrange), "list", "1.0.0", "Returns a range of elements from a list."),
    spec!("lindex", 3, R, 1, 1, 1, Keyed(list::lindex), "list", "1.0.0", "Returns an element from a list by its index."),
    spec!("lset", 4, W | M, 1, 1, 1, Keyed(list::lset), "list", "1.0.0", "Sets the value of an element in a list by its index."),
    spec!("linsert", 5, W | M, 1, 1, 1, Keyed(list::linsert), "list", "2.2.0", "Inserts an element before or after another element in a list."),
    spec!("lrem", 4, W, 1, 1, 1, Keyed(list::lrem), "list", "1.0.0", "Removes elements from a list. Deletes the list if the last element was removed."),
    spec!("ltrim", 4, W, 1, 1, 1, Keyed(list::ltrim), "list", "1.0.0", "Removes elements from both ends a list. Deletes the list if all elements were trimmed."),
    spec!("lpos", -3, R, 1, 1, 1, Keyed(list::lpos), "list", "6.0.6", "Returns the index of matching elements in a list."),
    spec!("lmove", 5, W | M, 1, 2, 1, cross!(list::lmove, txc::lmove), "list", "6.2.0", "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved."),
    spec!("rpoplpush", 3, W | M, 1, 2, 1, cross!(list::lmove, txc::lmove), "list", "1.2.0", "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped."),
    // LMPOP's keys follow its numkeys: routed by every argument after numkeys (a superset).
    spec!("lmpop", -4, W, 2, -1, 1, cross!(list::lmpop, txc::lmpop), "list", "7.0.0", "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.").counted(1, false),
    spec!("blpop", -3, W | BLOCKING, 1, -2, 1, Exec::Blocking(blocking::blpop), "list", "2.0.0", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    spec!("brpop", -3, W | BLOCKING, 1, -2, 1, Exec::Blocking(blocking::brpop), "list", "2.0.0", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    spec!("blmove", 6, W | M | BLOCKING, 1, 2, 1, Exec::Blocking(blocking::blmove), "list", "6.2.0", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved."),
    spec!("brpoplpush", 4, W | M | BLOCKING, 1, 2, 1, Exec::Blocking(blocking::brpoplpush), "list", "2.2.0", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped."),
    spec!("blmpop", -5, W | BLOCKING | MOVABLE_KEYS, 0, 0, 0, Exec::Blocking(blocking::blmpop), "list", "7.0.0", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.").counted(2, false),
    // sets
    spec!("sadd", -3, W | M | F, 1, 1, 1, Keyed(set::sadd), "set", "1.0.0", "Adds one or more members to a set. Creates the key if it doesn't exist."),
    spec!("srem", -3, W | F, 1, 1, 1, Keyed(set::srem), "set", "1.0.0", "Removes one or more members from a set. Deletes the set if the last member was removed."),
    spec!("sismember", 3, R | F, 1, 1, 1, Keyed(set::sismember), "set", "1.0.0", "Determines whether a member belongs to a set."),
    spec!("smismember", -3, R | F, 1, 1, 1, Keyed(set::smismember), "set", "6.2.0", "Determines whether multiple members belong to a set."),
    spec!("smembers", 2, R, 1, 1, 1, Keyed(set::smembers), "set", "1.0.0", "Returns all members of a set."),
    spec!("scard", 2, R | F, 1, 1, 1, Keyed(set::scard), "set", "1.0.0", "Returns the number of members in a set."),
    spec!("spop", -2, W | F, 1, 1, 1, Keyed(set::spop), "set", "1.0.0", "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped."),
    spec!("srandmember", -2, R, 1, 1, 1, Keyed(set::srandmember), "set", "1.0.0", "Get one or multiple random members from a set"),
    spec!("smove", 4, W | F, 1, 2, 1, cross!(set::smove, txc::smove), "set", "1.0.0", "Moves a member from one set to another."),
    spec!("sinter", -2, R, 1, -1, 1, cross!(set::sinter, txc::sinter), "set", "1.0.0", "Returns the intersect of multiple sets."),
    // SINTERCARD's keys follow its numkeys: routed by every argument after numkeys (a superset).
    spec!("sintercard", -3, R, 2, -1, 1, cross!(set::sintercard, txc::sintercard), "set", "7.0.0", "Returns the number of members of the intersect of multiple sets.").counted(1, false),
    spec!("sinterstore", -3, W | M, 1, -1, 1, cross!(set::sinterstore, txc::sinterstore), "set", "1.0.0", "Stores the intersect of multiple sets in a key."),
    spec!("sunion", -2, R, 1, -1, 1, cross!(set::sunion, txc::sunion), "set", "1.0.0", "Returns the union of multiple sets."),
    spec!("sunionstore", -3, W | M, 1, -1, 1, cross!(set::sunionstore, txc::sunionstore), "set", "1.0.0", "Stores the union of multiple sets in a key."),
    spec!("sdiff", -2, R, 1, -1, 1, cross!(set::sdiff, txc::sdiff), "set", "1.0.0", "Returns the difference of multiple sets."),
    spec!("sdiffstore", -3, W | M, 1, -1, 1, cross!(set::sdiffstore, txc::sdiffstore), "set", "1.0.0", "Stores the difference of multiple sets in a key."),
    spec!("sscan", -3, R, 1, 1, 1, Keyed(set::sscan), "set", "2.8.0", "Iterates over members of a set."),
    // sorted sets
    spec!("zadd", -4, W | M | F, 1, 1, 1, Keyed(zset::zadd), "sorted_set", "1.2.0", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist."),
    spec!("zincrby", 4, W | M | F, 1, 1, 1, Keyed(zset::zincrby), "sorted_set", "1.2.0", "Increments the score of a member in a sorted set."),
    spec!("zrem", -3, W | F, 1, 1, 1, Keyed(zset::zrem), "sorted_set", "1.2.0", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed."),
    spec!("zcard", 2, R | F, 1, 1, 1, Keyed(zset::zcard), "sorted_set", "1.2.0", "Returns the number of members in a sorted set."),
    spec!("zscore", 3, R | F, 1, 1, 1, Keyed(zset::zscore), "sorted_set", "1.2.0", "Returns the score of a member in a sorted set."),
    spec!("zmscore", -3, R | F, 1, 1, 1, Keyed(zset::zmscore), "sorted_set", "6.2.0", "Returns the score of one or more members in a sorted set."),
    spec!("zcount", 4, R | F, 1, 1, 1, Keyed(zset::zcount), "sorted_set", "2.0.0", "Returns the count of members in a sorted set that have scores within a range."),
    spec!("zlexcount", 4, R | F, 1, 1, 1, Keyed(zset::zlexcount), "sorted_set", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range."),
    spec!("zrank", 3, R | F, 1, 1, 1, Keyed(zset::zrank), "sorted_set", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores."),
    spec!("zrevrank", 3, R | F, 1, 1, 1, Keyed(zset::zrevrank), "sorted_set", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores."),
    spec!("zrange", -4, R, 1, 1, 1, Keyed(zset::zrange), "sorted_set", "1.2.0", "Returns members in a sorted set within a range of indexes."),
    spec!("zrevrange", -4, R, 1, 1, 1, Keyed(zset::zrevrange), "sorted_set", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order."),
    spec!("zrangebyscore", -4, R, 1, 1, 1, Keyed(zset::zrangebyscore), "sorted_set", "1.0.5", "Returns members in a sorted set within a range of scores."),
    spec!("zrevrangebyscore", -4, R, 1, 1, 1, Keyed(zset::zrevrangebyscore), "sorted_set", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order."),
    spec!("zrangebylex", -4, R, 1, 1, 1, Keyed(zset::zrangebylex), "sorted_set", "2.8.9", "Returns members in a sorted set within a lexicographical range."),
    spec!("zrevrangebylex", -4, R, 1, 1, 1, Keyed(zset::zrevrangebylex), "sorted_set", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order."),
    spec!("zrangestore", -5, W | M, 1, 2, 1, cross!(zset::zrangestore, zset_cross::zrangestore), "sorted_set", "6.2.0", "Stores a range of members from sorted set in a key."),
    spec!("zremrangebyrank", 4, W, 1, 1, 1, Keyed(zset::zremrangebyrank), "sorted_set", "2.0.0", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed."),
    spec!("zremrangebyscore", 4, W, 1, 1, 1, Keyed(zset::zremrangebyscore), "sorted_set", "1.2.0", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed."),
    spec!("zremrangebylex", 4, W, 1, 1, 1, Keyed(zset::zremrangebylex), "sorted_set", "2.8.9", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed."),
    spec!("zpopmin", -2, W | F, 1, 1, 1, Keyed(zset::zpopmin), "sorted_set", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    spec!("zpopmax", -2, W | F, 1, 1, 1, Keyed(zset::zpopmax), "sorted_set", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    spec!("zmpop", -4, W | MOVABLE_KEYS, 0, 0, 0, movable!(zset::zmpop, zset::keys_zmpop, zset_cross::zmpop), "sorted_set", "7.0.0", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.").counted(1, false),
    spec!("bzpopmin", -3, W | F | BLOCKING, 1, -2, 1, Exec::Blocking(blocking::bzpopmin), "sorted_set", "5.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped."),
    spec!("bzpopmax", -3, W | F | BLOCKING, 1, -2, 1, Exec::Blocking(blocking::bzpopmax), "sorted_set", "5.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped."),
    spec!("bzmpop", -5, W | BLOCKING | MOVABLE_KEYS, 0, 0, 0, Exec::Blocking(blocking::bzmpop), "sorted_set", "7.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.").counted(2, false),
    spec!("zrandmember", -2, R, 1, 1, 1, Keyed(zset::zrandmember), "sorted_set", "6.2.0", "Returns one or more random members from a sorted set."),
    spec!("zscan", -3, R, 1, 1, 1, Keyed(zset::zscan), "sorted_set", "2.8.0", "Iterates over members and scores of a sorted set."),
    spec!("zunionstore", -4, W | M | MOVABLE_KEYS, 1, 1, 1, movable!(zset::zunionstore, zset::keys_store_after_count, zset_cross::zunionstore), "sorted_set", "2.0.0", "Stores the union of multiple sorted sets in a key.").counted(2, true),
    spec!("zinterstore", -4, W | M | MOVABLE_KEYS, 1, 1, 1, movable!(zset::zinterstore, zset::keys_store_after_count, zset_cross::zinterstore), "sorted_set", "2.0.0", "Stores the intersect of multiple sorted sets in a key.").counted(2, true),
    spec!("zdiffstore", -4, W | M | MOVABLE_KEYS, 1, 1, 1, movable!(zset::zdiffstore, zset::keys_store_after_count, zset_cross::zdiffstore), "sorted_set", "6.2.0", "Stores the difference of multiple sorted sets in a key.").counted(2, true),
    spec!("zunion", -3, R | MOVABLE_KEYS, 0, 0, 0, movable!(zset::zunion, zset::keys_after_count, zset_cross::zunion), "sorted_set", "6.2.0", "Returns the union of multiple sorted sets.").counted(1, false),
    spec!("zinter", -3, R | MOVABLE_KEYS, 0, 0, 0, movable!(zset::zinter, zset::keys_after_count, zset_cross::zinter), "sorted_set", "6.2.0", "Returns the intersect of multiple sorted sets.").counted(1, false),
    spec!("zdiff", -3, R | MOVABLE_KEYS, 0, 0, 0, movable!(zset::zdiff, zset::keys_after_count, zset_cross::zdiff), "sorted_set", "6.2.0", "Returns the difference between multiple sorted sets.").counted(1, false),
    spec!("zintercard", -3, R | MOVABLE_KEYS, 0, 0, 0, movable!(zset::zintercard, zset::keys_after_count, zset_cross::zintercard), "sorted_set", "7.0.0", "Returns the number of members of the intersect of multiple sorted sets.").counted(1, false),
    // keys
    spec!("del", -2, W, 1, -1, 1, Split(keys::del, 1, Merge::Sum), "generic", "1.0.0", "Deletes one or more keys."),
    spec!("unlink", -2, W | F, 1, -1, 1, Split(keys::del, 1, Merge::Sum), "generic", "4.0.0", "Asynchronously deletes one or more keys."),
    spec!("exists", -2, R | F, 1, -1, 1, Split(keys::exists, 1, Merge::Sum), "generic", "1.0.0", "Determines whether one or more keys exist."),
    spec!("touch", -2, R | F, 1, -1, 1, Split(keys::touch, 1, Merge::Sum), "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed."),
    spec!("type", 2, R | F, 1, 1, 1, Keyed(keys::type_), "generic", "1.0.0", "Determines the type of value stored at a key."),
    spec!("expire", -3, W | F, 1, 1, 1, Keyed(keys::expire), "generic", "1.0.0", "Sets the expiration time of a key in seconds."),
    spec!("pexpire", -3, W | F, 1, 1, 1, Keyed(keys::pexpire), "generic", "2.6.0", "Sets the expiration time of a key in milliseconds."),
    spec!("expireat", -3, W | F, 1, 1, 1, Keyed(keys::expireat), "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp."),
    spec!("pexpireat", -3, W | F, 1, 1, 1, Keyed(keys::pexpireat), "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp."),
    spec!("expiretime", 2, R | F, 1, 1, 1, Keyed(keys::expiretime), "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp."),
    spec!("pexpiretime", 2, R | F, 1, 1, 1, Keyed(keys::pexpiretime), "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp."),
    spec!("ttl", 2, R | F, 1, 1, 1, Keyed(keys::ttl), "generic", "1.0.0", "Returns the expiration time in seconds of a key."),
    spec!("pttl", 2, R | F, 1, 1, 1, Keyed(keys::pttl), "generic", "2.6.0", "Returns the expiration time in milliseconds of a key."),
    spec!("persist", 2, W | F, 1, 1, 1, Keyed(keys::persist), "generic", "2.2.0", "Removes the expiration time of a key."),
    spec!("rename", 3, W | V, 1, 2, 1, cross!(keys::rename, txn::rename), "generic", "1.0.0", "Renames a key and overwrites the destination."),
    spec!("renamenx", 3, W | F | V, 1, 2, 1, cross!(keys::renamenx, txn::renamenx), "generic", "1.0.0", "Renames a key only when the target key name doesn't exist."),
    spec!("copy", -3, W | M | V, 1, 2, 1, cross!(keys::copy, txn::copy), "generic", "6.2.0", "Copies the value of a key to a new key."),
    spec!("move", 3, W | F, 1, 1, 1, Keyed(keys::move_), "generic", "1.0.0", "Moves a key to another database."),
    spec!("object", -2, R, 2, 2, 1, Keyed(keys::object), "generic", "2.2.3", "A container for object introspection commands."),
    spec!("dump", 2, R | V, 1, 1, 1, Keyed(dump::dump), "generic", "2.6.0", "Returns a serialized representation of the value stored at a key."),
    spec!("restore", -4, W | M, 1, 1, 1, Keyed(dump::restore), "generic", "2.6.0", "Creates a key from the serialized representation of a value."),
    spec!("keys", 2, R, 0, 0, 0, awaits!(keyspace::keys), "generic", "1.0.0", "Returns all key names that match a pattern."),
    spec!("scan", -2, R, 0, 0, 0, awaits!(keyspace::scan), "generic", "2.8.0", "Iterates over the key names in the database."),
    spec!("sort", -2, W | M | MOVABLE_KEYS, 1, 1, 1, awaits_keyed!(sort::sort, cmd_sort::keys_sort), "generic", "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result."),
    spec!("sort_ro", -2, R, 1, 1, 1, awaits!(sort::sort_ro), "generic", "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set."),
    spec!("randomkey", 1, R, 0, 0, 0, awaits!(keyspace::randomkey), "generic", "1.0.0", "Returns a random key name from the database."),
    spec!("eval", -3, MOVABLE_KEYS, 0, 0, 0, awaits!(script::eval), "scripting", "2.6.0", "Executes a server-side Lua script.").script_keys(),
    spec!("evalsha", -3, MOVABLE_KEYS, 0, 0, 0, awaits!(script::evalsha), "scripting", "2.6.0", "Executes a server-side Lua script by SHA1 digest.").script_keys(),
    spec!("eval_ro", -3, R | MOVABLE_KEYS, 0, 0, 0, awaits!(script::eval), "scripting", "7.0.0", "Executes a read-only server-side Lua script.").script_keys(),
    spec!("evalsha_ro", -3, R | MOVABLE_KEYS, 0, 0, 0, awaits!(script::evalsha), "scripting", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest.").script_keys(),
    spec!("script", -2, 0, 0, 0, 0, Exec::Session(script::script), "scripting", "2.6.0", "A container for Lua scripts management commands."),
    spec!("function", -2, 0, 0, 0, 0, Exec::Session(script::function::function), "scripting", "7.0.0", "A container for function commands."),
    spec!("fcall", -3, MOVABLE_KEYS, 0, 0, 0, awaits!(script::function::fcall), "scripting", "7.0.0", "Invokes a function.").script_keys(),
    spec!("fcall_ro", -3, R | MOVABLE_KEYS, 0, 0, 0, awaits!(script::function::fcall), "scripting", "7.0.0", "Invokes a read-only function.").script_keys(),
    spec!("dbsize", 1, R | F, 0, 0, 0, awaits!(keyspace::dbsize), "server", "1.0.0", "Returns the number of keys in the database."),
    spec!("flushdb", -1, W, 0, 0, 0, awaits!(keyspace::flushdb), "server", "1.0.0", "Removes all keys from the current database."),
    spec!("flushall", -1, W, 0, 0, 0, awaits!(keyspace::flushall), "server", "1.0.0", "Removes all keys from all databases."),
    spec!("swapdb", 3, W | F, 0, 0, 0, awaits!(keyspace::swapdb), "server", "4.0.0", "Swaps two Redis databases."),
    // connection
    spec!("ping", -1, F | PUBSUB_OK, 0, 0, 0, Exec::Session(connection::ping), "connection", "1.0.0", "Returns the server's liveliness response."),
    spec!("echo", 2, F | LOADING, 0, 0, 0, Exec::Session(connection::echo), "connection", "1.0.0", "Returns the given string."),
    spec!("quit", -1, F | NOAUTH | LOADING | NO_QUEUE | PUBSUB_OK, 0, 0, 0, Exec::Session(connection::quit), "connection", "1.0.0", "Closes the connection."),
    spec!("select", 2, F | LOADING, 0, 0, 0, Exec::Session(connection::select), "connection", "1.0.0", "Changes the selected database."),
    spec!("auth", -2, F | NOAUTH | LOADING, 0, 0, 0, Exec::Session(connection::auth), "connection", "1.0.0", "Authenticates the connection."),
    spec!("hello", -1, F | NOAUTH | LOADING, 0, 0, 0, Exec::Session(connection::hello), "connection", "6.0.0", "Handshakes with the Redis server."),
    spec!("client", -2, LOADING, 0, 0, 0, Exec::Session(client::client), "connection", "2.4.0", "A container for client connection commands."),
    spec!("cluster", -2, 0, 0, 0, 0, Exec::Session(cluster::cluster), "cluster", "3.0.0", "A container for Redis Cluster commands."),
    spec!("reset", 1, F | NOAUTH | LOADING | PUBSUB_OK | NO_QUEUE, 0, 0, 0, Exec::Session(pubsub::reset), "connection", "6.2.0", "Resets the connection."),
    // pub/sub
    spec!("subscribe", -2, LOADING | PUBSUB_OK, 0, 0, 0, Exec::Session(pubsub::subscribe), "pubsub", "2.0.0", "Listens for messages published to channels."),
    spec!("unsubscribe", -1, LOADING | PUBSUB_OK, 0, 0, 0, Exec::Session(pubsub::unsubscribe), "pubsub", "2.0.0", "Stops listening to messages posted to channels."),
    spec!("psubscribe", -2, LOADING | PUBSUB_OK, 0, 0, 0, Exec::Session(pubsub::psubscribe), "pubsub", "2.0.0", "Listens for messages published to channels that match one or more patterns."),
    spec!("punsubscribe", -1, LOADING | PUBSUB_OK, 0, 0, 0, Exec::Session(pubsub::punsubscribe), "pubsub", "2.0.0", "Stops listening to messages published to channels that match one or more patterns."),
    spec!("ssubscribe", -2, LOADING | PUBSUB_OK, 0, 0, 0, Exec::Session(pubsub::ssubscribe), "pubsub", "7.0.0", "Listens for messages published to shard channels."),
    spec!("sunsubscribe", -1, LOADING | PUBSUB_OK, 0, 0, 0, Exec::Session(pubsub::sunsubscribe), "pubsub", "7.0.0", "Stops listening to messages posted to shard channels."),
    spec!("publish", 3, F | LOADING, 0, 0, 0, Exec::Session(pubsub::publish), "pubsub", "2.0.0", "Posts a message to a channel."),
    spec!("spublish", 3, F | LOADING, 0, 0, 0, Exec::Session(pubsub::spublish), "pubsub", "7.0.0", "Post a message to a shard channel"),
    spec!("pubsub", -2, 0, 0, 0, 0, Exec::Session(pubsub::pubsub), "pubsub", "2.8.0", "A container for Pub/Sub commands."),
    // server
    spec!("info", -1, LOADING, 0, 0, 0, awaits!(info::info), "server", "1.0.0", "Returns information and statistics about the server."),
    spec!("config", -2, ADMIN | LOADING, 0, 0, 0, awaits!(config::config), "server", "2.0.0", "A container for server configuration commands."),
    spec!("command", -1, LOADING, 0, 0, 0, Exec::Session(command::command), "server", "2.8.13", "Returns detailed information about all commands."),
    spec!("time", 1, F | LOADING, 0, 0, 0, Exec::Session(debug::time), "server", "2.6.0", "Returns the server time."),
    spec!("debug", -2, ADMIN | LOADING, 0, 0, 0, awaits!(debug::debug), "server", "1.0.0", "A container for debugging commands."),
    spec!("memory", -2, R, 0, 0, 0, awaits!(debug::memory), "server", "4.0.0", "A container for memory diagnostics commands."),
    spec!("shutdown", -1, ADMIN | LOADING | NO_MULTI, 0, 0, 0, awaits!(persist::shutdown), "server", "1.0.0", "Synchronously saves the database(s) to disk and shuts down the Redis server."),
    spec!("lastsave", 1, F | LOADING, 0, 0, 0, Exec::Session(persist::lastsave), "server", "1.0.0", "Returns the Unix timestamp of the last successful save to disk."),
    spec!("save", -1, ADMIN | NO_MULTI, 0, 0, 0, awaits!(persist::save), "server", "1.0.0", "Synchronously saves the database(s) to disk."),
    spec!("bgsave", -1, ADMIN, 0, 0, 0, awaits!(persist::bgsave), "server", "1.0.0", "Asynchronously saves the database(s) to disk."),
    // transactions
    spec!("multi", 1, F | LOADING | NO_QUEUE, 0, 0, 0, Exec::Session(multi::multi), "transactions", "1.2.0", "Starts a transaction."),
    spec!("exec", 1, LOADING | NO_QUEUE, 0, 0, 0, awaits!(multi::exec), "transactions", "1.2.0", "Executes all commands in a transaction."),
    spec!("discard", 1, F | LOADING | NO_QUEUE, 0, 0, 0, Exec::Session(multi::discard), "transactions", "2.0.0", "Discards a transaction."),
    spec!("watch", -2, F | LOADING | NO_QUEUE, 1, -1, 1, awaits!(multi::watch), "transactions", "2.2.0", "Monitors changes to keys to determine the execution of a transaction."),
    spec!("unwatch", 1, F | LOADING, 0, 0, 0, Exec::Session(multi::unwatch), "transactions", "2.2.0", "Forgets about watched keys of a transaction."),

];

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    type Index = HashMap<&'static str, &'static Spec, xxhash_rust::xxh3::Xxh3Builder>;
    static INDEX: OnceLock<Index> = OnceLock::new();
    let index = INDEX.get_or_init(|| TABLE.iter().map(|s| (s.name, s)).collect::<Index>());
    if name.len() > 32 {
        return None;
    }
    let mut buf = [0u8; 32];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    std::str::from_utf8(lower)
        .ok()
        .and_then(|n| index.get(n).copied())
}

/// Redis' reply to a command it does not know: the name cut at 128 characters, then the
/// arguments quoted until their text reaches 128 characters in all.
pub fn unknown_command(args: &[Bytes]) -> Reply {
    let name = String::from_utf8_lossy(args.first().map(|b| &b[..]).unwrap_or(b""));
    let mut listed = String::new();
    for a in args.iter().skip(1) {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let a = &a[..a.len().min(room)];
        listed.push('\'');
        listed.push_str(&String::from_utf8_lossy(a));
        listed.push_str("' ");
    }
    Reply::Error(format!(
        "ERR unknown command '{}', with args beginning with: {listed}",
        truncate(&name, 128)
    ))
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let mut seen = std::collections::HashSet::new();
        for (i, s) in TABLE.iter().enumerate() {
            assert!(seen.insert(s.name), "duplicate {}", s.name);
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(s.arity != 0);
            assert_eq!(s.index() as usize, i);
        }
        assert!(lookup(b"GeT").is_some());
        assert!(lookup(b"nosuch").is_none());
    }

    #[test]
    fn key_positions() {
        let mset = lookup(b"mset").unwrap();
        assert_eq!(mset.key_indices(5).collect::<Vec<_>>(), vec![1, 3]);
        let get = lookup(b"get").unwrap();
        assert_eq!(get.key_indices(2).collect::<Vec<_>>(), vec![1]);
        let ping = lookup(b"ping").unwrap();
        assert_eq!(ping.key_indices(1).count(), 0);
        let del = lookup(b"del").unwrap();
        assert_eq!(del.key_indices(4).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn reading_flags_replace_name_checks() {
        let set = lookup(b"set").unwrap();
        let args = |v: &[&str]| {
            v.iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect::<Vec<_>>()
        };
        assert!(!set.reads_value(&args(&["set", "k", "v"])));
        assert!(!set.reads_value(&args(&["set", "k", "get"])));
        assert!(set.reads_value(&args(&["set", "k", "v", "EX", "1", "get"])));
        assert!(lookup(b"get").unwrap().reads_value(&args(&["get", "k"])));
        assert!(lookup(b"get").unwrap().has(VALUE_REPLY));
        assert!(!lookup(b"getdel").unwrap().has(VALUE_REPLY));
    }

    #[test]
    fn unknown_command_text() {
        let r = unknown_command(&[Bytes::from_static(b"foo"), Bytes::from_static(b"a")]);
        assert_eq!(
            r,
            Reply::Error("ERR unknown command 'foo', with args beginning with: 'a' ".into())
        );
    }
}

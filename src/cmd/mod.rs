//! Keyed commands, one file per family (`string`, `bitops`, `hyperloglog`, `keys`, `dump`):
//! plain functions over one shard, `fn(&mut Ctx, &[Bytes]) -> Reply`, that run wherever the
//! key's shard lives (inline on the connection's core or on another core) and return a value.
//! The command table that names them, and everything that routes, waits or talks to sockets,
//! lives above in `server/`.
//!
//! Must never do I/O, wait, or know which core it runs on: a command sees its shard and its
//! arguments, nothing else.

pub mod args;
pub mod bitops;
pub mod collection;
pub mod dump;
pub mod hash;
pub mod hyperloglog;
pub mod keys;
pub mod list;
pub mod memcache;
pub mod set;
pub mod sort;
pub mod string;
pub mod zset;

use bytes::Bytes;

use crate::protocol::Reply;
use crate::shard::Shard;

/// What a keyed command sees: its shard, the connection's db and the time of the request.
pub struct Ctx<'a> {
    pub shard: &'a mut Shard,
    pub db: usize,
    pub now: u64,
}

impl Ctx<'_> {
    /// Reports keyspace event `event` of class `class` (a bit of `crate::notify`) on `key`.
    /// A write event is also the command's report that it changed `key` ([`Ctx::changed`]):
    /// Redis fires each one beside its `signalModifiedKey`, and a write that changed nothing
    /// fires none, so WATCH, CLIENT TRACKING and notifications agree.
    #[inline]
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        use crate::notify::{HASH, KEY_MISS, LIST, SET, ZSET};
        if class != KEY_MISS {
            self.changed(key);
        }
        // A collection changed in place is a change for rdb_changes_since_last_save too (one
        // where Redis counts the elements); storing or removing a key counted itself.
        if class & (LIST | SET | HASH | ZSET) != 0 {
            self.shard.dirty += 1;
        }
        self.shard.notify(class, event, self.db, key);
    }

    /// Redis' `signalModifiedKey`: `key` changed, so its watchers' EXEC fails and its
    /// trackers are told. Storing or removing a key reports itself (`Shard::store`, ...); a
    /// command that changes a value in place reports it here, or through [`Ctx::notify`].
    #[inline]
    pub fn changed(&mut self, key: &[u8]) {
        if !self.shard.watches.is_empty() {
            self.shard.watches.touch(self.db, key);
        }
    }
}

pub type ShardFn = fn(&mut Ctx, &[Bytes]) -> Reply;

/// The positions of a command's keys found from its arguments (keys after a count, as
/// ZUNIONSTORE's): for commands whose keys the table's first/last/step cannot say.
pub type KeysFn = fn(&[Bytes]) -> Vec<usize>;

/// Redis' error for a wrong number of arguments to `name` (lower case, as Redis names it).
pub fn wrong_args(name: &str) -> Reply {
    Reply::Error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Redis' reply to a container command's (`CLIENT`, `DEBUG`, ...) subcommand it does not know.
/// Containers whose subcommands check their own arity say so too (`or wrong number of
/// arguments for`), as Redis words it for them.
pub fn unknown_subcommand(container: &str, sub: &[u8], checks_arity: bool) -> Reply {
    let what = if checks_arity {
        "unknown subcommand or wrong number of arguments for"
    } else {
        "unknown subcommand"
    };
    Reply::Error(format!(
        "ERR {what} '{}'. Try {container} HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// A HELP subcommand's reply: one simple string per line.
pub fn help_reply(lines: &[&str]) -> Reply {
    Reply::Array(
        lines
            .iter()
            .map(|l| Reply::StatusOwned(l.to_string()))
            .collect(),
    )
}

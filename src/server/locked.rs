//! Running any command while a transaction holds the shards it needs: the one primitive that
//! EXEC and Lua scripts share (part of the coordination built in `server::txn`).
//!
//! ```text
//! let mut need = ShardSet::default();
//! need.add_command(core, spec, &args);      // each command: its keys' shards, or all of them
//! need.add_all();                           // or: a script that did not declare its keys
//! let locked = Locked::lock(core, need).await?;          // ascending order, as any Txn
//! let reply = locked.run(core, session, spec, args).await; // any Exec kind, in order
//! drop(locked);                                           // unlocks
//! ```
//!
//! [`Locked::run`] runs a command as the dispatcher would run it alone (keyed, split,
//! cross-shard, connection or server command) but under the held locks: a keyed command runs
//! as the transaction's job on its shard; anything else runs in a `txn::Scoped` future, where
//! a cross-shard command's own `Txn::begin` reuses the held locks instead of waiting on them,
//! and `Core::on_shard` (KEYS, FLUSHALL, DBSIZE, ...) sends its jobs as the transaction's.
//! Commands run with `session.multi.deny_blocking` set: a blocking command answers at once as
//! its timeout would (Redis' CLIENT_DENY_BLOCKING). Arguments must have passed
//! `dispatch::admit` (a known command, its arity, auth); a script also refuses what Redis
//! refuses in scripts before calling here. For `redis.call`: build
//! `dispatch::Request::new(args)`, `dispatch::admit(session, &req)?`, then
//! `locked.run(core, session, spec, req.args)`; a script that declared its keys locks their
//! shards (`add_shard(shard_of(key, n))`), one that did not locks all (`add_all`). A script
//! run inside EXEC (EVAL queued in MULTI) calls `Locked::lock` in EXEC's scope: it reuses the
//! shards EXEC holds and may add only shards above them (ascending order), else `lock` gives
//! None. Writes mark the keys they change for WATCH on their own (`cmd::Ctx::changed`).
//!
//! Never: locks a shard out of ascending order, or runs a keyed command on a shard it does not
//! hold while it holds others (the shards come from the same key specs the runner uses).

use std::rc::Rc;

use bytes::Bytes;
use futures::FutureExt;

use super::core::Core;
use super::dispatch;
use super::exec;
use super::session::Session;
use super::table::{Exec, Spec};
use super::txn::{Scoped, Txn};
use crate::cmd::args::err;
use crate::cmd::ShardFn;
use crate::protocol::Reply;
use crate::shard::tracking::Caller;
use crate::shard::{now_ms, shard_of, Shard};

/// The shards a group of commands needs.
#[derive(Default, Debug, Clone)]
pub struct ShardSet {
    shards: Vec<usize>,
    all: bool,
}

impl ShardSet {
    /// Adds what `spec` with `args` needs: a keyed command its keys' shards; a command that
    /// may wait (`Exec::Await`, `Exec::AwaitKeyed`: KEYS, SCAN, DBSIZE, FLUSHALL, SWAPDB,
    /// INFO, SORT whose patterns name keys anywhere, ...) every shard; a connection command
    /// (`Exec::Session`: PING, SELECT, ...) none.
    pub fn add_command(&mut self, core: &Core, spec: &'static Spec, args: &[Bytes]) {
        match spec.exec {
            Exec::Await(_) | Exec::AwaitKeyed(..) => self.all = true,
            Exec::Session(_) => {}
            _ => {
                let n = core.global.shards();
                let keys = spec.keys_of(args).into_iter();
                self.shards.extend(keys.map(|i| shard_of(&args[i], n)));
            }
        }
    }

    pub fn add_shard(&mut self, shard: usize) {
        self.shards.push(shard);
    }

    /// Every shard (a script that did not declare its keys).
    pub fn add_all(&mut self) {
        self.all = true;
    }

    /// The one shard needed, when exactly one is.
    pub fn single(&self) -> Option<usize> {
        let first = *self.shards.first()?;
        (!self.all && self.shards.iter().all(|&s| s == first)).then_some(first)
    }

    /// True when nothing but shard `here` is needed.
    pub fn only(&self, here: usize) -> bool {
        !self.all && self.shards.iter().all(|&s| s == here)
    }

    fn list(self, n: usize) -> Vec<usize> {
        if self.all {
            (0..n).collect()
        } else {
            self.shards
        }
    }
}

/// Shards held for a group of commands; dropping it unlocks them.
pub struct Locked {
    txn: Txn,
    /// Whether read-only commands remember their keys for a tracking client (EXEC); a script's
    /// `redis.call`s do not (Redis tracks the keys the script declared instead).
    track_reads: bool,
}

fn shutting_down() -> Reply {
    err("ERR server is shutting down")
}

impl Locked {
    /// Locks the shards of `need` in ascending order (inside another transaction's scope:
    /// reuses what that one holds). None when shutting down.
    pub async fn lock(core: &Rc<Core>, need: ShardSet) -> Option<Locked> {
        let txn = Txn::begin(core, need.list(core.global.shards())).await?;
        Some(Locked {
            txn,
            track_reads: true,
        })
    }

    /// For a script: its commands' reads are not remembered for CLIENT TRACKING.
    pub fn without_read_tracking(mut self) -> Locked {
        self.track_reads = false;
        self
    }

    pub fn holds(&self, shard: usize) -> bool {
        self.txn.holds(shard)
    }

    /// Runs `f` on `shard` (held or not) with the held locks in scope.
    pub async fn on_shard<R, F>(&self, core: &Rc<Core>, shard: usize, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Shard) -> R + Send + 'static,
    {
        Scoped::holding(&self.txn, core.on_shard(shard, f).boxed_local()).await
    }

    /// Runs one command for `session` under the held locks and returns its reply.
    pub async fn run(
        &self,
        core: &Rc<Core>,
        session: &mut Session,
        spec: &'static Spec,
        args: Vec<Bytes>,
    ) -> Reply {
        let deny = std::mem::replace(&mut session.multi.deny_blocking, true);
        // A blocking pop never blocks here: its non-blocking form runs under the held locks,
        // answered as Redis answers it where it may not block.
        if let Exec::Blocking(parse) = spec.exec {
            session.multi.deny_blocking = deny;
            return match parse(&args) {
                Err(e) => e,
                Ok(b) => {
                    let form = b.form.clone();
                    b.finish(Box::pin(self.run(core, session, b.form_spec, form)).await)
                }
            };
        }
        let reply = match dispatch::one_shard(core.global.shards(), core.id, spec, &args) {
            Some((shard, f)) => {
                let mut caller = super::tracking::caller(session);
                caller.track &= self.track_reads;
                caller.script |= !self.track_reads;
                self.keyed(core, session.db, shard, spec, f, args, caller)
                    .await
            }
            None => {
                let fut = dispatch::run_barrier(core, session, spec, args).boxed_local();
                let scope = Scoped::holding(&self.txn, fut);
                if self.track_reads {
                    scope.await
                } else {
                    scope.untracked().await
                }
            }
        };
        session.multi.deny_blocking = deny;
        reply
    }

    #[allow(clippy::too_many_arguments)]
    async fn keyed(
        &self,
        core: &Rc<Core>,
        db: usize,
        shard: usize,
        spec: &'static Spec,
        f: ShardFn,
        args: Vec<Bytes>,
        caller: Caller,
    ) -> Reply {
        // A shard not held (a command without keys runs here) is used as any command uses it.
        let tx = if self.holds(shard) { self.txn.id() } else { 0 };
        if shard == core.id {
            return exec::run_keyed(core, db, spec, f, &args, now_ms(), tx, None, caller).await;
        }
        let work = Box::new(move |c: Rc<Core>| {
            async move { exec::run_keyed(&c, db, spec, f, &args, now_ms(), tx, None, caller).await }
                .boxed_local()
        });
        let reply = if tx != 0 {
            self.txn.run_async(shard, work).await
        } else {
            core.on_shard_async(shard, work).await
        };
        reply.unwrap_or_else(shutting_down)
    }
}

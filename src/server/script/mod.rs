//! Lua scripting as Redis 7.0 has it: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT here,
//! the interpreter in [`vm`], `redis.call` in [`call`], FUNCTION/FCALL in [`function`].
//!
//! Scripts are known by SHA1 to every core (one process-wide map from SHA to body and flags);
//! each core has its own interpreter and compiles a script the first time it runs it there,
//! so SCRIPT LOAD on one core makes EVALSHA work on all. SCRIPT FLUSH empties the map and
//! bumps an epoch; each core starts a fresh interpreter when it sees a newer epoch.
//!
//! Atomicity: with more than one shard a script first locks every shard (one cross-shard
//! transaction, `server::txn`), because it may touch keys it did not declare; then the
//! script runs to its end without yielding to this core's other tasks, and its commands for
//! other shards run there under that transaction while this core waits for their replies.
//! So no client ever sees a script half done, on any shard.
//!
//! A script running past `busy-reply-threshold` makes other clients' commands answer -BUSY
//! ([`busy`]: those of this core's own connections from the interpreter's hook, every 100000
//! instructions); SCRIPT KILL / FUNCTION KILL set a flag that hook checks. Never: lets a script run a command that would wait for
//! this core (blocking commands, fan-outs) while it holds the shards.

pub mod busy;
pub mod call;
pub mod function;
pub mod vm;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use mlua::{Function, Value};

use super::core::Core;
use super::locked::{Locked, ShardSet};
use super::session::Session;
use super::table::Call;
use crate::cmd::args::{err, is, parse_i64, ERR_NOT_INT};
use crate::protocol::Reply;
use crate::shard::now_ms;
use vm::Vm;

/// Script flags (shebang `flags=` and `redis.register_function`'s).
pub const NO_WRITES: u32 = 1;
pub const ALLOW_OOM: u32 = 1 << 1;
pub const ALLOW_STALE: u32 = 1 << 2;
pub const NO_CLUSTER: u32 = 1 << 3;
pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
/// No shebang: EVAL's compatibility mode (flags come from the commands it runs).
pub const COMPAT: u32 = 1 << 5;

/// Flag names as Redis spells them.
pub const FLAG_NAMES: [(&str, u32); 5] = [
    ("no-writes", NO_WRITES),
    ("allow-oom", ALLOW_OOM),
    ("allow-stale", ALLOW_STALE),
    ("no-cluster", NO_CLUSTER),
    ("allow-cross-slot-keys", ALLOW_CROSS_SLOT),
];

const ERR_NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// A cached script: its body and its flags.
pub struct Script {
    pub body: Bytes,
    pub flags: u32,
}

fn scripts() -> &'static Mutex<HashMap<String, Arc<Script>>> {
    static S: OnceLock<Mutex<HashMap<String, Arc<Script>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Bumped by SCRIPT FLUSH: cores with an older interpreter start a new one.
static EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static DRIVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while a script drives a command's future on this thread (`call::drive`): this core's
/// own shard work must then run inline, not as a message to this core's executor.
pub fn driving() -> bool {
    DRIVING.with(|d| d.get())
}

/// Marks this thread as driving a script's command until dropped.
pub struct Driving(bool);

impl Driving {
    pub fn enter() -> Driving {
        Driving(DRIVING.with(|d| d.replace(true)))
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with(|d| d.set(self.0));
    }
}

/// The script running now (one at a time: each holds every shard), for BUSY and KILL.
pub struct Running {
    started: Instant,
    name: String,
    command: Vec<Bytes>,
    kill: AtomicBool,
    dirty: AtomicBool,
    /// EVAL (true) or FCALL (false): each KILL only stops its own kind.
    eval: bool,
    /// The core it runs on (its hook serves that core's shard for other cores' WATCH).
    core: usize,
}

fn running() -> &'static Mutex<Option<Arc<Running>>> {
    static R: OnceLock<Mutex<Option<Arc<Running>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Milliseconds since start of the running script's start + 1 (0: none), for a cheap check.
static RUNNING_SINCE: AtomicU64 = AtomicU64::new(0);

fn epoch_ms() -> u64 {
    static T0: OnceLock<Instant> = OnceLock::new();
    T0.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// The running script for FUNCTION STATS: (function name, command, ms running) of a function,
/// and whether an EVAL script is what runs.
pub fn running_info() -> (Option<(String, Vec<Bytes>, u64)>, bool) {
    let r = running().lock().ok().and_then(|r| r.clone());
    match r {
        Some(r) if r.eval => (None, true),
        Some(r) => (
            Some((
                r.name.clone(),
                r.command.clone(),
                r.started.elapsed().as_millis() as u64,
            )),
            false,
        ),
        None => (None, false),
    }
}

/// SCRIPT KILL (`eval`) or FUNCTION KILL.
pub fn kill(eval: bool) -> Reply {
    let r = running().lock().ok().and_then(|r| r.clone());
    let Some(r) = r else {
        return err("NOTBUSY No scripts in execution right now.");
    };
    if r.dirty.load(Ordering::Relaxed) {
        return err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
    }
    if eval && !r.eval {
        return err("BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.");
    }
    if !eval && r.eval {
        return err("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.");
    }
    r.kill.store(true, Ordering::Relaxed);
    Reply::Ok
}

/// One core's EVAL interpreter and what it compiled.
struct CoreVm {
    vm: Rc<Vm>,
    epoch: u64,
    /// SHA -> the script and its compiled function.
    compiled: HashMap<String, (Arc<Script>, Function)>,
}

thread_local! {
    static CORE_VM: RefCell<Option<CoreVm>> = const { RefCell::new(None) };
}

/// This core's interpreter, fresh when SCRIPT FLUSH happened since.
fn core_vm() -> Result<Rc<Vm>, Reply> {
    let epoch = EPOCH.load(Ordering::Acquire);
    CORE_VM.with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref().is_none_or(|v| v.epoch != epoch) {
            let vm = Vm::new().map_err(|e| err(&format!("ERR cannot start Lua: {e}")))?;
            *c = Some(CoreVm {
                vm: Rc::new(vm),
                epoch,
                compiled: HashMap::new(),
            });
        }
        Ok(c.as_ref()
            .map(|v| v.vm.clone())
            .unwrap_or_else(|| unreachable!()))
    })
}

/// Splits Redis' shebang line off a body: (flags, body with the line blanked but its line
/// feed kept), or Redis' error.
pub fn shebang(body: &[u8]) -> Result<(u32, &[u8]), String> {
    if !body.starts_with(b"#!") {
        return Ok((COMPAT, body));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    let Some(&engine) = parts.first() else {
        return Err("ERR Invalid engine in script shebang".into());
    };
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = 0;
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {p}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            match FLAG_NAMES.iter().find(|(n, _)| *n == f) {
                Some((_, bit)) => flags |= bit,
                None => return Err(format!("ERR Unexpected flag in script shebang: {f}")),
            }
        }
    }
    Ok((flags, &body[end..]))
}

/// Adds `body` to the cache (compiling it here to report errors); its SHA.
fn load_script(body: &Bytes) -> Result<String, Reply> {
    let sha = vm::sha1_hex(body);
    if scripts()
        .lock()
        .map(|m| m.contains_key(&sha))
        .unwrap_or(false)
    {
        return Ok(sha);
    }
    let (flags, code) = shebang(body).map_err(Reply::Error)?;
    let vm = core_vm()?;
    let f = vm
        .compile(code, "@user_script")
        .map_err(|e| Reply::Error(format!("ERR Error compiling script (new function): {e}")))?;
    let script = Arc::new(Script {
        body: body.clone(),
        flags,
    });
    CORE_VM.with(|c| {
        if let Some(c) = c.borrow_mut().as_mut() {
            c.compiled.insert(sha.clone(), (script.clone(), f));
        }
    });
    if let Ok(mut m) = scripts().lock() {
        m.insert(sha.clone(), script);
    }
    Ok(sha)
}

/// The script `sha` and its function compiled on this core: from this core's cache while no
/// SCRIPT FLUSH happened since it was filled, else from the process-wide map (compiled here
/// the first time).
fn script_here(vm: &Vm, sha: &str) -> Result<(Arc<Script>, Function), Reply> {
    let epoch = EPOCH.load(Ordering::Acquire);
    let hit = CORE_VM.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|c| c.epoch == epoch)
            .and_then(|c| c.compiled.get(sha).cloned())
    });
    if let Some(hit) = hit {
        return Ok(hit);
    }
    let Some(script) = scripts().lock().ok().and_then(|m| m.get(sha).cloned()) else {
        return Err(err(ERR_NOSCRIPT));
    };
    let (_, code) = shebang(&script.body).map_err(Reply::Error)?;
    let f = vm
        .compile(code, "@user_script")
        .map_err(|e| Reply::Error(format!("ERR Error compiling script (new function): {e}")))?;
    CORE_VM.with(|c| {
        if let Some(c) = c.borrow_mut().as_mut() {
            c.compiled
                .insert(sha.to_string(), (script.clone(), f.clone()));
        }
    });
    Ok((script, f))
}

/// EVAL script numkeys [key ...] [arg ...] (and EVAL_RO).
pub async fn eval(call: Call<'_>) -> Reply {
    eval_generic(call, false).await
}

/// EVALSHA sha1 numkeys [key ...] [arg ...] (and EVALSHA_RO).
pub async fn evalsha(call: Call<'_>) -> Reply {
    eval_generic(call, true).await
}

/// numkeys checked as Redis checks it.
pub fn numkeys(args: &[Bytes]) -> Result<usize, Reply> {
    let Some(n) = parse_i64(&args[2]) else {
        return Err(err(ERR_NOT_INT));
    };
    if n > (args.len() - 3) as i64 {
        return Err(err(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(err("ERR Number of keys can't be negative"));
    }
    Ok(n as usize)
}

async fn eval_generic(call: Call<'_>, by_sha: bool) -> Reply {
    let (core, session, args) = call.parts();
    let ro = args[0].len() > 4 && args[0][args[0].len() - 3..].eq_ignore_ascii_case(b"_ro");
    let nkeys = match numkeys(&args) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let sha = if by_sha {
        if args[1].len() != 40 {
            return err(ERR_NOSCRIPT);
        }
        String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
    } else {
        match load_script(&args[1]) {
            Ok(s) => s,
            Err(e) => return e,
        }
    };
    let vm = match core_vm() {
        Ok(vm) => vm,
        Err(e) => return e,
    };
    let (script, f) = match script_here(&vm, &sha) {
        Ok(found) => found,
        Err(e) => return e,
    };
    if let Some(e) = precheck(core, script.flags, ro) {
        return e;
    }
    let keys = &args[3..3 + nkeys];
    let argv = &args[3 + nkeys..];
    let run = Run {
        vm: &vm,
        name: &sha,
        flags: script.flags,
        ro,
        eval: true,
        command: &args,
    };
    run.go(core, session, &f, keys, argv).await
}

/// The checks before a script runs (Redis' `scriptPrepareForRun`).
pub fn precheck(core: &Core, flags: u32, ro: bool) -> Option<Reply> {
    if flags & COMPAT != 0 {
        return None;
    }
    if flags & NO_WRITES == 0 && ro {
        return Some(err(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    let max = core.global.settings.maxmemory();
    if flags & (ALLOW_OOM | NO_WRITES) == 0
        && max > 0
        && !core.global.settings.cache_mode
        && crate::memory::used_memory() > max
    {
        return Some(err("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'"));
    }
    None
}

/// One run of a script or function.
pub struct Run<'a> {
    pub vm: &'a Vm,
    /// The SHA (EVAL) or the function's name (FCALL), for error texts.
    pub name: &'a str,
    pub flags: u32,
    /// EVAL_RO / FCALL_RO.
    pub ro: bool,
    pub eval: bool,
    /// The command that runs it (FUNCTION STATS shows it).
    pub command: &'a [Bytes],
}

/// What `redis.call` sees of the run.
pub struct RunCtx<'a> {
    pub core: &'a Rc<Core>,
    pub session: &'a mut Session,
    pub locked: Option<&'a Locked>,
    pub read_only: bool,
    pub allow_oom: bool,
    pub resp3: bool,
    pub now: u64,
    pub state: &'a Running,
    /// Whether used memory was past maxmemory when the script started.
    pub oom_at_start: bool,
    /// Whether the script called a read-only command (CLIENT TRACKING then remembers the keys
    /// it declared, as Redis does).
    pub read_any: bool,
}

impl vm::RunApi for RefCell<RunCtx<'_>> {
    fn call(
        &self,
        lua: &mlua::Lua,
        args: Result<Vec<Bytes>, &'static str>,
    ) -> mlua::Result<(bool, Value)> {
        // An error in the arguments reached no command: nothing counted it.
        let (reply, counted) = match args {
            Ok(cmd) => (call::run(&mut self.borrow_mut(), cmd), true),
            Err(msg) => (err(&format!("ERR {msg}")), false),
        };
        let resp3 = self.borrow().resp3;
        vm::reply_to_lua(lua, &reply, resp3, counted)
    }

    fn set_resp3(&self, resp3: bool) {
        self.borrow_mut().resp3 = resp3;
    }

    fn interrupted(&self) -> Option<String> {
        let ctx = self.try_borrow().ok()?;
        if busy::past_threshold(&ctx.core.global.settings) {
            // A SCRIPT KILL among what it answers is seen just below.
            if let Some(locked) = ctx.locked {
                busy::serve_own_core(ctx.core, locked);
            }
        }
        ctx.state
            .kill
            .load(Ordering::Relaxed)
            .then(|| "Script killed by user with SCRIPT KILL...".to_string())
    }
}

impl Run<'_> {
    /// Locks the shards, runs `f` with KEYS/ARGV (EVAL) or (keys, args) (FCALL), and turns
    /// its result or error into the reply.
    pub async fn go(
        &self,
        core: &Rc<Core>,
        session: &mut Session,
        f: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
    ) -> Reply {
        // Every shard: the script may touch keys it did not declare.
        let mut need = ShardSet::default();
        need.add_all();
        let Some(locked) = Locked::lock(core, need)
            .await
            .map(Locked::without_read_tracking)
        else {
            return err("ERR server is shutting down");
        };
        let state = Arc::new(Running {
            started: Instant::now(),
            name: self.name.to_string(),
            // Only FUNCTION STATS shows it, and only a function's.
            command: if self.eval {
                Vec::new()
            } else {
                self.command.to_vec()
            },
            kill: AtomicBool::new(false),
            dirty: AtomicBool::new(false),
            eval: self.eval,
            core: core.id,
        });
        if let Ok(mut r) = running().lock() {
            *r = Some(state.clone());
        }
        RUNNING_SINCE.store(epoch_ms() + 1, Ordering::Relaxed);
        let saved_db = session.db;
        let max = core.global.settings.maxmemory();
        let ctx = RefCell::new(RunCtx {
            core,
            session,
            locked: Some(&locked),
            read_only: self.ro || (self.flags & COMPAT == 0 && self.flags & NO_WRITES != 0),
            allow_oom: self.flags & COMPAT == 0 && self.flags & ALLOW_OOM != 0,
            resp3: false,
            now: now_ms(),
            state: &state,
            oom_at_start: max > 0
                && !core.global.settings.cache_mode
                && crate::memory::used_memory() > max,
            read_any: false,
        });
        let reply = self.call_lua(&ctx, f, keys, argv).unwrap_or_else(|e| {
            Reply::Error(format!("ERR Error running script {}, {e}", self.name))
        });
        let ctx = ctx.into_inner();
        if ctx.session.db != saved_db {
            ctx.session.select(saved_db);
        }
        let caller = crate::server::tracking::caller(ctx.session);
        if ctx.read_any && caller.track {
            // Still holding every shard: no change can come between the reads and this.
            let n = core.global.shards();
            for key in keys {
                let key = key.clone();
                locked
                    .on_shard(core, crate::shard::shard_of(&key, n), move |sh| {
                        sh.watches.tracking.remember(&key, caller.id)
                    })
                    .await;
            }
        }
        RUNNING_SINCE.store(0, Ordering::Relaxed);
        if let Ok(mut r) = running().lock() {
            *r = None;
        }
        busy::forget_hook_jobs();
        drop(locked);
        reply
    }

    fn call_lua(
        &self,
        ctx: &RefCell<RunCtx<'_>>,
        f: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
    ) -> mlua::Result<Reply> {
        let lua = &self.vm.lua;
        let seq = |items: &[Bytes]| -> mlua::Result<mlua::Table> {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, k) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(k)?)?;
            }
            Ok(t)
        };
        let keys_t = seq(keys)?;
        let argv_t = seq(argv)?;
        let (kv, av) = if self.eval {
            self.vm.set_global("KEYS", Value::Table(keys_t))?;
            self.vm.set_global("ARGV", Value::Table(argv_t))?;
            (Value::Nil, Value::Nil)
        } else {
            (Value::Table(keys_t), Value::Table(argv_t))
        };
        let result = vm::with_run(ctx, || self.vm.run(f, kv, av));
        let (ok, v) = match result {
            Ok(r) => r,
            Err(e) => {
                if ctx.borrow().state.kill.load(Ordering::Relaxed) {
                    return Ok(err("ERR Script killed by user with SCRIPT KILL..."));
                }
                return Err(e);
            }
        };
        if ok {
            let mut errors = vm::ResultErrors::default();
            let reply = vm::lua_to_reply(&v, ctx.borrow().resp3, &mut errors);
            // As Redis' afterErrorReply for each: an error the script made is counted now, one
            // a command it called made was counted then and only fails the script once more;
            // the first counted now fails it once (call()'s incrCommandStatsOnError).
            crate::server::cmdstats::errors(&errors.fresh);
            let failures = errors.counted + u32::from(!errors.fresh.is_empty());
            ctx.borrow_mut().session.errors_counted = Some(failures);
            return Ok(reply);
        }
        if vm::error_counted(&v) {
            ctx.borrow_mut().session.errors_counted = Some(1);
        }
        let e = vm::script_error(&v);
        let mut msg = e.msg;
        if let (Some(source), Some(line)) = (e.source, e.line) {
            msg.push_str(&format!(" script: {}, on {source}:{line}.", self.name));
        }
        Ok(Reply::Error(msg))
    }
}

/// SCRIPT HELP | EXISTS | FLUSH | KILL | LOAD | DEBUG.
pub fn script(Call { args, .. }: Call<'_>) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("help", 2) => help(),
        ("flush", 2..) => {
            if args.len() > 3 || args.len() == 3 && !is(&args[2], "sync") && !is(&args[2], "async")
            {
                return err("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            if let Ok(mut m) = scripts().lock() {
                m.clear();
            }
            EPOCH.fetch_add(1, Ordering::AcqRel);
            Reply::Ok
        }
        ("exists", 3..) => {
            let m = scripts().lock();
            Reply::Array(
                args[2..]
                    .iter()
                    .map(|s| {
                        let sha = String::from_utf8_lossy(s).to_ascii_lowercase();
                        Reply::Int(m.as_ref().is_ok_and(|m| m.contains_key(&sha)) as i64)
                    })
                    .collect(),
            )
        }
        ("load", 3) => match load_script(&args[2]) {
            Ok(sha) => Reply::Bulk(Bytes::from(sha.into_bytes())),
            Err(e) => e,
        },
        ("kill", 2) => kill(true),
        ("debug", 3) => {
            if is(&args[2], "no") {
                Reply::Ok
            } else if is(&args[2], "yes") || is(&args[2], "sync") {
                err("ERR SCRIPT DEBUG is not supported by this server")
            } else {
                err("ERR Use SCRIPT DEBUG YES/SYNC/NO")
            }
        }
        _ => known_or_not(
            "SCRIPT",
            &args[1],
            &["help", "flush", "exists", "load", "kill", "debug"],
        ),
    }
}

fn help() -> Reply {
    crate::cmd::help_reply(&[
        "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DEBUG (YES|SYNC|NO)",
        "    Set the debug mode for subsequent scripts executed.",
        "EXISTS <sha1> [<sha1> ...]",
        "    Return information about the existence of the scripts in the script cache.",
        "FLUSH [ASYNC|SYNC]",
        "    Flush the Lua scripts cache. Very dangerous on replicas.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the scripts cache.",
        "    * SYNC: Synchronously flush the scripts cache.",
        "KILL",
        "    Kill the currently executing Lua script.",
        "LOAD <script>",
        "    Load a script into the scripts cache without executing it.",
        "HELP",
        "    Prints this help.",
    ])
}

/// Redis' error for a bad SCRIPT/FUNCTION call: a known subcommand with the wrong number of
/// arguments, or an unknown one.
pub fn known_or_not(container: &str, sub: &[u8], known: &[&str]) -> Reply {
    crate::cmd::unknown_subcommand(container, sub, known.iter().any(|k| is(sub, k)))
}

/// Number of cached scripts and their bytes (INFO memory's `number_of_cached_scripts`).
pub fn cached_scripts() -> (usize, usize) {
    scripts()
        .lock()
        .map(|m| (m.len(), m.values().map(|s| s.body.len() + 40).sum()))
        .unwrap_or((0, 0))
}

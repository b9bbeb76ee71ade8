//! One core's Lua 5.1 interpreter, set up as Redis 7.0 sets up its own: the libraries it
//! loads (base, table, string, math, cjson, struct, cmsgpack, bit; no os, io, package,
//! loadfile, dofile, print), the `redis` API table, Redis' math.random, the error handler that
//! adds where an error happened, and the protection of globals (reading an unknown global and
//! writing any global or any library table are errors).
//!
//! Conversions between Lua values and replies follow Redis' rules byte for byte: a command's
//! reply reaches Lua by way of its RESP encoding (as in Redis), and a script's result becomes
//! a [`Reply`] by the rules of `luaReplyToRedisReply`.
//!
//! Stock Lua 5.1 has no read-only tables (Redis patches its Lua for them): every table
//! reachable from the globals is replaced by an empty proxy that reads through to it and
//! refuses writes, and `rawset`/`setmetatable` refuse proxies. Never: runs a command itself
//! (see `call`).

use std::cell::Cell;

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, VmState};

use crate::protocol::Reply;

/// Lua's own error for a write to a protected table, as Redis' patched Lua words it.
const READONLY_TABLE: &str = "Attempt to modify a readonly table";

extern "C-unwind" {
    fn luaopen_cjson(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int;
    fn luaopen_struct(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int;
    fn luaopen_cmsgpack(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int;
    fn luaopen_bit(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int;
    fn strata_wrap_call(l: *mut mlua::ffi::lua_State) -> std::os::raw::c_int;
}

/// What a running script lends the `redis` API for its duration (see [`with_run`]).
pub trait RunApi {
    /// One redis.call/pcall: whether the reply is an error, and its Lua value.
    fn call(
        &self,
        lua: &Lua,
        args: Result<Vec<Bytes>, &'static str>,
    ) -> mlua::Result<(bool, Value)>;
    /// redis.setresp(2|3).
    fn set_resp3(&self, resp3: bool);
    /// Checked every 100000 instructions and after each call: an error message ends the
    /// script (SCRIPT KILL).
    fn interrupted(&self) -> Option<String>;
}

thread_local! {
    /// The run in progress on this thread, set only inside [`with_run`].
    static ACTIVE: Cell<Option<std::ptr::NonNull<dyn RunApi>>> = const { Cell::new(None) };
    /// Redis' lrand48 state (math.random): one per core, never reseeded between scripts,
    /// like Redis' one per process.
    static RAND48: Cell<u64> = const { Cell::new(0x1234_ABCD_330E) };
}

fn lrand48() -> i32 {
    RAND48.with(|x| {
        let next = (x.get().wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB)) & 0xFFFF_FFFF_FFFF;
        x.set(next);
        (next >> 17) as i32
    })
}

fn srand48(seed: i32) {
    RAND48.with(|x| x.set(((seed as u32 as u64) << 16) | 0x330E));
}

/// Runs `f` with `api` as the run the `redis` API functions serve. The API functions are
/// made once per interpreter; only this pointer changes per run.
pub fn with_run<R>(api: &dyn RunApi, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<std::ptr::NonNull<dyn RunApi>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(self.0));
        }
    }
    let p = std::ptr::NonNull::from(api);
    // SAFETY: only the lifetime bound is erased. The pointer is in ACTIVE only while `f` runs
    // (the guard below puts the previous value back on return and on unwinding, and cannot be
    // leaked by a caller), `api` is borrowed for that whole time, and ACTIVE is per thread, so
    // the pointer is never read after `api` is gone or from another thread.
    let p: std::ptr::NonNull<dyn RunApi> = unsafe { std::mem::transmute(p) };
    let _restore = Restore(ACTIVE.with(|a| a.replace(Some(p))));
    f()
}

/// `f` applied to the run in progress, if one is.
fn with_active<R>(f: impl FnOnce(&dyn RunApi) -> R) -> Option<R> {
    let p = ACTIVE.with(|a| a.get())?;
    // SAFETY: a pointer in ACTIVE points to a value `with_run` borrows until it takes the
    // pointer out again (see there); `RunApi` methods take `&self`, so shared use is fine.
    Some(f(unsafe { p.as_ref() }))
}

/// The Lua part of the setup, run once the libraries are in: the error handler (Redis'
/// `__redis__err__handler`, skipping the frames of our wrappers), `redis.call`/`pcall` as
/// wrappers raising Redis' error tables, and the global protection. `hidden` holds what the
/// run installs (the command caller) and is reachable from nowhere else.
const SETUP: &str = r#"
local hidden = ...
local type_ = type
local function pending(e)
  if type_(e) == 'userdata' then
    local p = hidden.pending
    if p ~= nil then
      hidden.pending = nil
      return p
    end
  end
  return e
end
local dbg = debug
debug = nil
local getinfo = dbg.getinfo
function __redis__err__handler(err)
  err = pending(err)
  local level = 2
  local i = getinfo(level, 'nSl')
  while i and (i.what == 'C' or i.source == '@strata_api') do
    level = level + 1
    i = getinfo(level, 'nSl')
  end
  if type(err) ~= 'table' then
    err = {err='ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end
-- Rust functions raise Redis' error values by leaving them in hidden.pending and raising an
-- mlua error: the handler and pcall put the value back in its place.
local pcall_ = pcall
-- Redis' pcall gives the message of an error table, not the table.
local function fix(ok, ...)
  if ok then return ok, ... end
  local e = pending((...))
  if type_(e) == 'table' and type_(rawget(e, 'err')) == 'string' then e = rawget(e, 'err') end
  return false, e
end
pcall = function(...) return fix(pcall_(...)) end
local xpcall, handler = xpcall, __redis__err__handler
hidden.run = function(f, keys, args)
  return xpcall(function() return (f(keys, args)) end, handler)
end
-- Global protection: every table reachable from the globals becomes a read-only proxy.
local proxies = setmetatable({}, {__mode = 'k'})
local rawset_, setmetatable_, getmetatable_, type_, next_, error_ =
  rawset, setmetatable, getmetatable, type, next, error
local function protect(t)
  if proxies[t] then return t end
  local real = {}
  for k, v in next_, t do
    if type_(v) == 'table' and v ~= t then v = protect(v) end
    real[k] = v
  end
  for k in next_, real do t[k] = nil end
  local mt = getmetatable_(t) or {}
  mt.__index = real
  mt.__newindex = function() error_(']] .. READONLY .. [[', 2) end
  setmetatable_(t, mt)
  proxies[t] = real
  return t
end
hidden.proxies = proxies
hidden.raw_setmetatable = setmetatable_
rawset = function(t, k, v)
  if proxies[t] then error_(']] .. READONLY .. [[', 0) end
  return rawset_(t, k, v)
end
setmetatable = function(t, mt)
  if proxies[t] then error_(']] .. READONLY .. [[', 0) end
  return setmetatable_(t, mt)
end
-- A protected table's metatable is seen read-only too.
local views = setmetatable_({}, {__mode = 'k'})
getmetatable = function(t)
  local mt = getmetatable_(t)
  if mt == nil or not proxies[t] then return mt end
  local v = views[mt]
  if v == nil then
    v = setmetatable_({}, {__index = mt, __newindex = function() error_(']] .. READONLY .. [[', 2) end})
    proxies[v] = mt
    views[mt] = v
  end
  return v
end
-- Redis' Lua refuses precompiled chunks.
local loadstring_, load_, byte_ = loadstring, load, string.byte
loadstring = function(s, ...)
  if type_(s) == 'string' and byte_(s, 1) == 27 then
    return nil, 'binary string: bad binary format (cannot load binary chunks)'
  end
  return loadstring_(s, ...)
end
load = function(f, ...)
  if type_(f) == 'string' then return loadstring(f, ...) end
  return load_(f, ...)
end
local G = _G
local globals = {}
for k, v in next_, G do globals[k] = v end
for k in next_, globals do rawset_(G, k, nil) end
for k, v in next_, globals do
  if type_(v) == 'table' and v ~= G then globals[k] = protect(v) end
end
globals._G = G
hidden.globals = globals
setmetatable_(G, {
  __index = function(_, k)
    local v = globals[k]
    if v == nil then
      error_("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error_(']] .. READONLY .. [[', 2) end,
})
proxies[G] = globals
"#;

/// A core's interpreter with its hidden table.
pub struct Vm {
    pub lua: Lua,
    hidden: Table,
    /// The globals behind the protection (KEYS and ARGV are set there).
    globals: Table,
    /// The setup's `run(f, keys, args)` (xpcall with the error handler).
    run: Function,
    /// The instruction hook's state (also in the interpreter's app data, for redis.call).
    hook: HookState,
}

/// Installs the instruction hook: every 100000 instructions it consults the watch (FUNCTION
/// LOAD's time limit) or the run's `interrupted` (SCRIPT KILL), and raises the stop they
/// report. Once one is raised it runs on every line of the script's own code, as Redis'
/// does, so a script that catches the error with pcall meets it again at its next line
/// outside the pcall and ends; it is not raised in the setup's code (the error handler),
/// which would turn it into "error in error handling".
fn install_hook(lua: &Lua, hook: &HookState) -> mlua::Result<()> {
    let hook = hook.clone();
    let triggers = if hook.every_line.get() {
        HookTriggers::new().every_line()
    } else {
        HookTriggers::new().every_nth_instruction(100_000)
    };
    lua.set_hook(triggers, move |lua, debug| {
        let stop = match hook.watch.borrow().as_ref() {
            Some(w) => w().err(),
            None => with_active(|a| a.interrupted()).flatten(),
        };
        let Some(e) = stop else {
            return Ok(VmState::Continue);
        };
        if hook.every_line.get() {
            let user = debug
                .source()
                .source
                .is_some_and(|s| s.starts_with("@user_"));
            if !user {
                return Ok(VmState::Continue);
            }
        } else {
            to_every_line(lua, &hook)?;
        }
        // Raised as Redis raises it: an error table the script sees.
        fail(lua, &e).map(|_| VmState::Continue)
    })
}

type Watch = Box<dyn Fn() -> Result<(), String>>;

/// The instruction hook's state, shared by the [`Vm`], the hook and redis.call (which finds
/// it in the interpreter's app data).
#[derive(Clone, Default)]
struct HookState {
    /// What the hook checks besides the run's own `interrupted` (FUNCTION LOAD's time limit).
    watch: std::rc::Rc<std::cell::RefCell<Option<Watch>>>,
    /// The hook runs on every line: a stop was raised (see [`install_hook`]).
    every_line: std::rc::Rc<Cell<bool>>,
}

/// Turns the hook to every line once a stop was raised; nothing when it already is.
fn to_every_line(lua: &Lua, hook: &HookState) -> mlua::Result<()> {
    if !hook.every_line.replace(true) {
        install_hook(lua, hook)?;
    }
    Ok(())
}

impl Vm {
    /// A fresh interpreter; a run lends its API the command caller with [`with_run`].
    pub fn new() -> mlua::Result<Vm> {
        // SAFETY: the debug library is loaded as Redis loads it, only to build the error
        // handler; the setup removes it from the globals before any script runs.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        let g = lua.globals();
        // Redis 7.0.15 also has no getfenv, setfenv or newproxy.
        for name in [
            "dofile", "loadfile", "print", "getfenv", "setfenv", "newproxy",
        ] {
            g.raw_set(name, Value::Nil)?;
        }
        for (name, f) in [
            ("cjson", luaopen_cjson as mlua::ffi::lua_CFunction),
            ("struct", luaopen_struct),
            ("cmsgpack", luaopen_cmsgpack),
            ("bit", luaopen_bit),
        ] {
            // SAFETY: these are the libraries' own `luaopen_*` entry points, built from the
            // C sources Redis bundles against this Lua's headers; each registers its table.
            let open = unsafe { lua.create_c_function(f)? };
            open.call::<()>(name)?;
        }
        let math: Table = g.raw_get("math")?;
        math.raw_set(
            "random",
            lua.create_function(|lua, args: mlua::Variadic<Value>| {
                let r = (lrand48() % i32::MAX) as f64 / i32::MAX as f64;
                let int = |v: &Value| number(v).map(|f| f as i64);
                let bad = |n: usize, v: &Value, what: &str| {
                    let got = if what.is_empty() {
                        format!("number expected, got {}", lua_type(v))
                    } else {
                        what.to_string()
                    };
                    fail_plain(lua, &format!("bad argument #{n} to 'random' ({got})"))
                };
                match &args[..] {
                    [] => answer(r, lua),
                    [a] => match int(a) {
                        None => bad(1, a, ""),
                        Some(u) if u < 1 => bad(1, a, "interval is empty"),
                        Some(u) => answer((r * u as f64).floor() + 1.0, lua),
                    },
                    [a, b] => match (int(a), int(b)) {
                        (None, _) => bad(1, a, ""),
                        (_, None) => bad(2, b, ""),
                        (Some(l), Some(u)) if l > u => bad(2, b, "interval is empty"),
                        (Some(l), Some(u)) => {
                            answer((r * (u - l + 1) as f64).floor() + l as f64, lua)
                        }
                    },
                    _ => fail_plain(lua, "wrong number of arguments"),
                }
            })?,
        )?;
        math.raw_set(
            "randomseed",
            lua.create_function(|lua, seed: Value| match number(&seed) {
                Some(n) => {
                    srand48(n as i64 as i32);
                    answer(Value::Nil, lua)
                }
                None => fail_plain(
                    lua,
                    &format!(
                        "bad argument #1 to 'randomseed' (number expected, got {})",
                        lua_type(&seed)
                    ),
                ),
            })?,
        )?;
        let hidden = lua.create_table()?;
        lua.set_named_registry_value("strata_hidden", &hidden)?;
        let redis = lua.create_table()?;
        register_api(&lua, &redis)?;
        g.raw_set("redis", redis)?;
        let setup = SETUP.replace("]] .. READONLY .. [[", READONLY_TABLE);
        lua.load(setup)
            .set_name("@strata_api")
            .call::<()>(hidden.clone())?;
        let hook = HookState::default();
        install_hook(&lua, &hook)?;
        lua.set_app_data(hook.clone());
        Ok(Vm {
            globals: hidden.raw_get("globals")?,
            run: hidden.raw_get("run")?,
            lua,
            hidden,
            hook,
        })
    }

    /// Compiles a script body (its shebang line already blanked out) as Redis does, with
    /// the chunk name `@user_script`.
    pub fn compile(&self, body: &[u8], name: &str) -> Result<Function, String> {
        self.lua
            .load(body)
            .set_name(name)
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })
    }

    /// Sets a global (KEYS, ARGV) behind the protection.
    pub fn set_global(&self, name: &str, v: Value) -> mlua::Result<()> {
        self.globals.raw_set(name, v)
    }

    /// The table only Rust and the setup code reach (FUNCTION's loader keeps its state there).
    pub fn hidden(&self) -> &Table {
        &self.hidden
    }

    /// Compiles `body` with `env` as its environment (a function library's).
    pub fn compile_in(&self, body: &[u8], name: &str, env: &Table) -> Result<Function, String> {
        self.lua
            .load(body)
            .set_name(name)
            .set_environment(env.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })
    }

    /// Runs `f(keys, args)` under the error handler: Ok(value) or Err(error value).
    pub fn run(&self, f: &Function, keys: Value, args: Value) -> mlua::Result<(bool, Value)> {
        self.hook_back()?;
        let r = self.run.call::<(bool, Value)>((f, keys, args));
        self.hook_back()?;
        r
    }

    /// Puts the hook back to every 100000 instructions after a stop made it run every line.
    fn hook_back(&self) -> mlua::Result<()> {
        if self.hook.every_line.replace(false) {
            install_hook(&self.lua, &self.hook)?;
        }
        Ok(())
    }

    /// Checks `check` every 100000 instructions (Redis' period) until [`Vm::clear_watch`];
    /// an error from it ends the running code.
    pub fn set_watch(&self, check: impl Fn() -> Result<(), String> + 'static) {
        *self.hook.watch.borrow_mut() = Some(Box::new(check));
    }

    pub fn clear_watch(&self) {
        *self.hook.watch.borrow_mut() = None;
        // Errors here leave the hook running every line, which only costs time.
        let _ = self.hook_back();
    }

    /// A table protected like the globals' (a library made by FUNCTION LOAD's `redis`).
    pub fn protect(&self, t: &Table) -> mlua::Result<()> {
        let proxies: Table = self.hidden.raw_get("proxies")?;
        let real = self.lua.create_table()?;
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            real.raw_set(k, v)?;
        }
        let keys: Vec<Value> = real
            .clone()
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok().map(|(k, _)| k))
            .collect();
        for k in keys {
            t.raw_set(k, Value::Nil)?;
        }
        let mt = self.lua.create_table()?;
        mt.raw_set("__index", real.clone())?;
        mt.raw_set(
            "__newindex",
            self.lua
                .create_function(|_, _: mlua::MultiValue| -> mlua::Result<()> {
                    Err(mlua::Error::runtime(READONLY_TABLE))
                })?,
        )?;
        t.set_metatable(Some(mt))?;
        proxies.raw_set(t.clone(), real)
    }
}

/// A Lua number (integral or not), or a string Lua would convert to one.
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => std::str::from_utf8(&s.as_bytes()).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// Redis' error table `{err = "CODE message"}` for `msg` ("-CODE message" or a plain message,
/// which gets the ERR code), as `luaPushErrorBuff` builds it.
pub fn error_table(lua: &Lua, msg: &str) -> mlua::Result<Value> {
    let text = error_text(msg);
    let t = lua.create_table()?;
    t.raw_set("err", text)?;
    Ok(Value::Table(t))
}

/// The field Redis puts in the error table of a command's error reply: the error was counted
/// in INFO errorstats when the command answered it, and is not again when the script answers
/// it in turn.
const COUNTED: &str = "ignore_error_stats_update";

/// Whether `v` is an error table whose error was counted already (see [`COUNTED`]).
pub fn error_counted(v: &Value) -> bool {
    match v {
        Value::Table(t) => {
            matches!(t.raw_get::<Value>("err"), Ok(Value::String(_)))
                && matches!(t.raw_get::<Value>(COUNTED), Ok(Value::Boolean(true)))
        }
        _ => false,
    }
}

fn error_text(msg: &str) -> String {
    let (code, rest) = match msg.strip_prefix('-') {
        Some(m) => match m.split_once(' ') {
            Some((code, rest)) => (code, rest),
            None => ("ERR", m),
        },
        None => ("ERR", msg),
    };
    format!("{code} {}", rest.trim_matches(|c| c == '\r' || c == '\n'))
}

/// The `redis` table's functions that need no run (the command caller is installed per run).
fn register_api(lua: &Lua, redis: &Table) -> mlua::Result<()> {
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: mlua::Variadic<Value>| {
            if args.len() != 1 {
                return fail(lua, "wrong number of arguments");
            }
            let bytes = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(_) | Value::Number(_) => {
                    crate::protocol::reply::format_double(number(&args[0]).unwrap_or(0.0))
                        .into_bytes()
                }
                _ => Vec::new(),
            };
            answer(sha1_hex(&bytes), lua)
        })?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: mlua::Variadic<Value>| match &args[..] {
            [Value::String(s)] => {
                let s = s.to_string_lossy();
                let msg = if s.starts_with('-') {
                    s.to_string()
                } else {
                    format!("-{s}")
                };
                error_table(lua, &msg)
            }
            _ => error_table(lua, "wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: mlua::Variadic<Value>| match &args[..] {
            [v @ Value::String(_)] => {
                let t = lua.create_table()?;
                t.raw_set("ok", v.clone())?;
                Ok(Value::Table(t))
            }
            _ => error_table(lua, "wrong number or type of arguments"),
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|lua, args: mlua::Variadic<Value>| {
            if args.len() < 2 {
                return fail(lua, "redis.log() requires two arguments or more.");
            }
            let Some(level) = number(&args[0]) else {
                return fail(lua, "First argument must be a number (log level).");
            };
            let level = level as i64;
            if !(0..=3).contains(&level) {
                return fail(lua, "Invalid debug level.");
            }
            let text: Vec<String> = args[1..]
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.to_string_lossy().to_string()),
                    Value::Integer(_) | Value::Number(_) => Some(
                        crate::protocol::reply::format_double(number(v).unwrap_or(0.0)),
                    ),
                    _ => None,
                })
                .collect();
            let text = text.join(" ");
            match level {
                0 => tracing::debug!(target: "script", "{text}"),
                1 | 2 => tracing::info!(target: "script", "{text}"),
                _ => tracing::warn!(target: "script", "{text}"),
            }
            answer(Value::Nil, lua)
        })?,
    )?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
        ("REDIS_VERSION_NUM", 0x07_00_0f),
    ] {
        redis.raw_set(name, v)?;
    }
    redis.raw_set("REDIS_VERSION", "7.0.15")?;
    redis.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: mlua::MultiValue| Ok(true))?,
    )?;
    redis.raw_set(
        "breakpoint",
        lua.create_function(|_, _: mlua::MultiValue| Ok(false))?,
    )?;
    redis.raw_set(
        "debug",
        lua.create_function(|_, _: mlua::MultiValue| Ok(()))?,
    )?;
    // SAFETY: strata_wrap_call (lua-libs/strata_call.c) only builds a C closure around the
    // function it is given, with the Lua API.
    let wrap = unsafe { lua.create_c_function(strata_wrap_call)? };
    for (name, raising) in [("call", true), ("pcall", false)] {
        let rust = lua.create_function(move |lua, (list, n): (Table, i64)| {
            let mut args = Vec::with_capacity(n.clamp(0, 64) as usize);
            for i in 1..=n {
                args.push(list.raw_get::<Value>(i)?);
            }
            let cmd = command_args(&args);
            let Some(out) = with_active(|run| run.call(lua, cmd)) else {
                return fail(
                    lua,
                    "redis.call/pcall can only be called inside a script invocation",
                );
            };
            let (failed, v) = out?;
            // The hook counts instructions only, so a script of slow calls (keys of other
            // cores) would meet it seldom: each call also serves this core's clients, and a
            // SCRIPT KILL among them turns the hook to every line, which ends the script at
            // its next line as the hook itself would.
            if with_active(|run| run.interrupted()).flatten().is_some() {
                let hook = lua.app_data_ref::<HookState>().map(|h| h.clone());
                if let Some(h) = hook {
                    to_every_line(lua, &h)?;
                }
            }
            if failed && raising {
                return raise(lua, v, "redis.call failed");
            }
            Ok(v)
        })?;
        redis.raw_set(name, wrap.call::<Function>(rust)?)?;
    }
    let outside = |lua: &Lua, name: &str| {
        fail(
            lua,
            &format!("redis.{name} can only be called inside a script invocation"),
        )
    };
    redis.raw_set(
        "setresp",
        lua.create_function(move |lua, args: mlua::Variadic<Value>| {
            if with_active(|_| ()).is_none() {
                return outside(lua, "setresp");
            }
            if args.len() != 1 {
                return fail(lua, "redis.setresp() requires one argument.");
            }
            let resp3 = match number(&args[0]).map(|n| n as i64) {
                Some(2) => false,
                Some(3) => true,
                _ => return fail(lua, "RESP version must be 2 or 3."),
            };
            with_active(|run| run.set_resp3(resp3));
            answer(Value::Nil, lua)
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        lua.create_function(move |lua, args: mlua::Variadic<Value>| {
            if with_active(|_| ()).is_none() {
                return outside(lua, "set_repl");
            }
            if args.len() != 1 {
                return fail(lua, "redis.set_repl() requires two arguments.");
            }
            let flags = number(&args[0]).map(|n| n as i64).unwrap_or(0);
            if flags & !3 != 0 {
                return fail(
                    lua,
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                );
            }
            answer(Value::Nil, lua)
        })?,
    )?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(move |lua, args: mlua::Variadic<Value>| {
            if with_active(|_| ()).is_none() {
                return outside(lua, "acl_check_cmd");
            }
            match command_args(&args) {
                Err(msg) => fail(lua, msg),
                Ok(cmd) => match crate::server::table::lookup(&cmd[0]) {
                    None => fail(lua, "Invalid command passed to redis.acl_check_cmd()"),
                    // One user with every permission.
                    Some(_) => answer(true, lua),
                },
            }
        })?,
    )?;
    Ok(())
}

/// Raises Redis' error table `{err = "ERR msg"}` from a Rust function (mlua raises only its
/// own errors: the value waits in the hidden table for the handler or pcall).
pub fn fail(lua: &Lua, msg: &str) -> mlua::Result<Value> {
    let t = error_table(lua, msg)?;
    raise(lua, t, msg)
}

/// Raises a plain message, as luaL_error from a C function does (with the caller's place).
pub fn fail_plain(lua: &Lua, msg: &str) -> mlua::Result<Value> {
    let place = lua
        .inspect_stack(1, |d| {
            let line = d.current_line()?;
            let src = d.source().short_src?.to_string();
            Some(format!("{src}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    let msg = format!("{place}{msg}");
    let v = Value::String(lua.create_string(&msg)?);
    raise(lua, v, &msg)
}

/// Raises `v` (an error value the script will see).
pub fn raise(lua: &Lua, v: Value, msg: &str) -> mlua::Result<Value> {
    let hidden: Table = lua.named_registry_value("strata_hidden")?;
    hidden.raw_set("pending", v)?;
    Err(mlua::Error::runtime(msg))
}

/// A raising API function's normal answer.
pub fn answer(v: impl mlua::IntoLua, lua: &Lua) -> mlua::Result<Value> {
    v.into_lua(lua)
}

/// Lua's name of a value's type (as `type()` says it).
fn lua_type(v: &Value) -> &'static str {
    match v {
        Value::Nil => "no value",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

pub fn sha1_hex(data: &[u8]) -> String {
    sha1_smol::Sha1::from(data).digest().to_string()
}

/// Lua arguments of redis.call as command arguments: strings as they are, numbers as `%.17g`;
/// anything else is Redis' error.
pub fn command_args(args: &[Value]) -> Result<Vec<Bytes>, &'static str> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|v| match v {
            Value::String(s) => Ok(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(i) => Ok(Bytes::from(
                crate::protocol::reply::format_double(*i as f64).into_bytes(),
            )),
            Value::Number(n) => Ok(Bytes::from(
                crate::protocol::reply::format_double(*n).into_bytes(),
            )),
            _ => Err("Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// A command's reply as the Lua value Redis gives the script: the reply is encoded in the
/// script's protocol version and parsed back, exactly as Redis does. Its error tables say
/// `ignore_error_stats_update` when the error was `counted` already (a command's reply).
pub fn reply_to_lua(
    lua: &Lua,
    reply: &Reply,
    resp3: bool,
    counted: bool,
) -> mlua::Result<(bool, Value)> {
    let mut buf = Vec::with_capacity(64);
    reply.encode(resp3, &mut buf);
    let mut p = Parser {
        buf: &buf,
        at: 0,
        counted,
    };
    let failed = buf.first() == Some(&b'-');
    let v = p.value(lua)?;
    Ok((failed, v))
}

struct Parser<'a> {
    buf: &'a [u8],
    at: usize,
    /// Errors were counted in INFO errorstats already.
    counted: bool,
}

impl Parser<'_> {
    fn line(&mut self) -> &[u8] {
        let rest = &self.buf[self.at..];
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(rest.len());
        self.at += (end + 2).min(rest.len());
        &rest[..end]
    }

    fn int(&mut self) -> i64 {
        std::str::from_utf8(self.line())
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    fn blob(&mut self, len: i64) -> &[u8] {
        let len = len.max(0) as usize;
        let start = self.at.min(self.buf.len());
        let end = (start + len).min(self.buf.len());
        self.at = (end + 2).min(self.buf.len());
        &self.buf[start..end]
    }

    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let Some(&kind) = self.buf.get(self.at) else {
            return Ok(Value::Nil);
        };
        self.at += 1;
        Ok(match kind {
            b'+' => {
                let t = lua.create_table()?;
                t.raw_set("ok", lua.create_string(self.line())?)?;
                Value::Table(t)
            }
            b'-' => {
                let line = String::from_utf8_lossy(self.line()).to_string();
                let t = error_table(lua, &format!("-{line}"))?;
                if let (true, Value::Table(t)) = (self.counted, &t) {
                    t.raw_set(COUNTED, true)?;
                }
                t
            }
            b':' => Value::Number(self.int() as f64),
            b'$' => match self.int() {
                -1 => Value::Boolean(false),
                n => Value::String(lua.create_string(self.blob(n))?),
            },
            b'*' | b'>' => match self.int() {
                -1 => Value::Boolean(false),
                n => {
                    let t = lua.create_table()?;
                    for i in 0..n.max(0) {
                        t.raw_set(i + 1, self.value(lua)?)?;
                    }
                    Value::Table(t)
                }
            },
            b'%' => {
                let n = self.int();
                let m = lua.create_table()?;
                for _ in 0..n.max(0) {
                    let k = self.value(lua)?;
                    let v = self.value(lua)?;
                    if k != Value::Nil {
                        m.raw_set(k, v)?;
                    }
                }
                let t = lua.create_table()?;
                t.raw_set("map", m)?;
                Value::Table(t)
            }
            b'~' => {
                let n = self.int();
                let s = lua.create_table()?;
                for _ in 0..n.max(0) {
                    let k = self.value(lua)?;
                    if k != Value::Nil {
                        s.raw_set(k, true)?;
                    }
                }
                let t = lua.create_table()?;
                t.raw_set("set", s)?;
                Value::Table(t)
            }
            b'_' => {
                self.line();
                Value::Nil
            }
            b'#' => Value::Boolean(self.line() == b"t"),
            b',' => {
                let d = match self.line() {
                    b"inf" => f64::INFINITY,
                    b"-inf" => f64::NEG_INFINITY,
                    l => std::str::from_utf8(l)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(f64::NAN),
                };
                let t = lua.create_table()?;
                t.raw_set("double", d)?;
                Value::Table(t)
            }
            b'(' => {
                let t = lua.create_table()?;
                t.raw_set("big_number", lua.create_string(self.line())?)?;
                Value::Table(t)
            }
            b'=' => {
                let n = self.int();
                let body = self.blob(n);
                let (format, text) = if body.len() >= 4 {
                    (&body[..3], &body[4..])
                } else {
                    (&b"txt"[..], body)
                };
                let inner = lua.create_table()?;
                inner.raw_set("string", lua.create_string(text)?)?;
                inner.raw_set("format", lua.create_string(format)?)?;
                let t = lua.create_table()?;
                t.raw_set("verbatim_string", inner)?;
                Value::Table(t)
            }
            _ => Value::Nil,
        })
    }
}

/// How deep a script's result may nest before "reached lua stack limit".
const MAX_REPLY_DEPTH: usize = 200;

/// The error replies in a script's result, at any depth, as Redis' luaReplyToRedisReply
/// counts them (each through afterErrorReply).
#[derive(Default)]
pub struct ResultErrors {
    /// Errors the script made (error tables, redis.error_reply, ...): each counted in INFO
    /// errorstats now.
    pub fresh: Vec<String>,
    /// Errors of commands the script called, counted where they arose
    /// (`ignore_error_stats_update`): each only makes the script's call fail once more.
    pub counted: u32,
}

/// A script's result as a reply, by Redis' rules (`luaReplyToRedisReply`); `resp3` is the
/// version the script chose with redis.setresp. The errors in it go to `errors`.
pub fn lua_to_reply(v: &Value, resp3: bool, errors: &mut ResultErrors) -> Reply {
    Conv { resp3, errors }.reply(v, 0)
}

/// C's `(long long)` of a double on x86: truncation, and i64::MIN where C is undefined
/// (NaN, out of range), as Redis replies.
fn float_to_i64(n: f64) -> i64 {
    if n.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn raw_str(t: &Table, key: &str) -> Option<mlua::LuaString> {
    match t.raw_get::<Value>(key).ok()? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

struct Conv<'a> {
    resp3: bool,
    errors: &'a mut ResultErrors,
}

impl Conv<'_> {
    fn reply(&mut self, v: &Value, depth: usize) -> Reply {
        let resp3 = self.resp3;
        // Redis stops where its Lua stack runs out; here the native stack of a core bounds it.
        if depth > MAX_REPLY_DEPTH {
            let e = String::from("ERR reached lua stack limit");
            self.errors.fresh.push(e.clone());
            return Reply::Error(e);
        }
        match v {
            Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Boolean(b) => {
                if resp3 {
                    Reply::Bool(*b)
                } else if *b {
                    Reply::Int(1)
                } else {
                    Reply::Nil
                }
            }
            Value::Integer(i) => Reply::Int(*i),
            Value::Number(n) => Reply::Int(float_to_i64(*n)),
            Value::Table(t) => self.table(t, depth),
            _ => Reply::Nil,
        }
    }

    fn table(&mut self, t: &Table, depth: usize) -> Reply {
        if let Some(e) = raw_str(t, "err") {
            // Redis formats it with "-%s" (so it ends at a NUL), trims the line ends and blanks
            // the line breaks inside.
            let bytes = e.as_bytes();
            let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
            let text = String::from_utf8_lossy(text);
            let text = text
                .trim_end_matches(['\r', '\n'])
                .replace(['\r', '\n'], " ");
            if matches!(t.raw_get::<Value>(COUNTED), Ok(Value::Boolean(true))) {
                self.errors.counted += 1;
            } else {
                self.errors.fresh.push(text.clone());
            }
            return Reply::Error(text);
        }
        if let Some(s) = raw_str(t, "ok") {
            let s: String = s
                .to_string_lossy()
                .chars()
                .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                .collect();
            return Reply::StatusOwned(s);
        }
        if let Ok(Value::Number(_) | Value::Integer(_)) = t.raw_get::<Value>("double") {
            let d = number(&t.raw_get::<Value>("double").unwrap_or(Value::Nil)).unwrap_or(0.0);
            return Reply::Double(d);
        }
        if let Some(s) = raw_str(t, "big_number") {
            let s: String = s
                .to_string_lossy()
                .chars()
                .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                .collect();
            return Reply::Bulk(Bytes::from(s.into_bytes()));
        }
        if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
            if let (Some(_), Some(s)) = (raw_str(&v, "format"), raw_str(&v, "string")) {
                return Reply::Verbatim(s.to_string_lossy().to_string());
            }
        }
        if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
            let mut out = Vec::new();
            for (k, v) in m.pairs::<Value, Value>().flatten() {
                out.push((self.reply(&k, depth + 1), self.reply(&v, depth + 1)));
            }
            return Reply::Map(out);
        }
        if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
            let mut out = Vec::new();
            for (k, _) in s.pairs::<Value, Value>().flatten() {
                out.push(self.reply(&k, depth + 1));
            }
            return Reply::Set(out);
        }
        let mut out = Vec::new();
        let mut i = 1;
        loop {
            match t.raw_get::<Value>(i) {
                Ok(Value::Nil) | Err(_) => break,
                Ok(v) => out.push(self.reply(&v, depth + 1)),
            }
            i += 1;
        }
        Reply::Array(out)
    }
}

/// The message of a script's error value: Redis' error table's fields (msg, source, line), or
/// a non-table value's text.
pub struct ScriptError {
    pub msg: String,
    pub source: Option<String>,
    pub line: Option<String>,
}

pub fn script_error(v: &Value) -> ScriptError {
    let field = |t: &Table, k: &str| -> Option<String> {
        match t.raw_get::<Value>(k).ok()? {
            Value::String(s) => Some(s.to_string_lossy().to_string()),
            Value::Integer(i) => Some(i.to_string()),
            Value::Number(n) => Some(crate::protocol::reply::format_double(n)),
            _ => None,
        }
    };
    match v {
        Value::Table(t) => ScriptError {
            msg: field(t, "err").unwrap_or_default(),
            source: field(t, "source"),
            line: field(t, "line"),
        },
        Value::String(s) => ScriptError {
            msg: format!("ERR {}", s.to_string_lossy()),
            source: None,
            line: None,
        },
        Value::Error(e) => ScriptError {
            msg: format!("ERR {e}"),
            source: None,
            line: None,
        },
        _ => ScriptError {
            msg: "ERR execution failure".into(),
            source: None,
            line: None,
        },
    }
}

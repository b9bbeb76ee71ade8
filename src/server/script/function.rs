//! Redis 7.0 functions: FUNCTION LOAD / LIST / DELETE / FLUSH / DUMP / RESTORE / STATS / KILL
//! and FCALL / FCALL_RO.
//!
//! Libraries are known to every core (one process-wide map from library name to its code and
//! the functions it registered); each core has its own interpreter for functions (apart from
//! EVAL's, as in Redis) and runs a library's code there the first time one of its functions is
//! called on that core, which registers the callbacks again. While a library's code runs at
//! load, its globals are only `redis` with `register_function`, `log` and the version fields;
//! its functions, when called, see the same sandboxed globals as EVAL scripts.
//!
//! Never: keeps a library whose load failed, or changes the map partly (LOAD, RESTORE and
//! DELETE apply whole or not at all).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Function, Table, Value};
use ondisk::rdb::codec::{read_string, write_string, Crc64, DumpPayload, StringCompression};

use super::vm::{self, Vm};
use super::{kill, numkeys, precheck, Run, FLAG_NAMES};
use crate::cmd::args::{err, is, ERR_NOT_INT};
use crate::protocol::Reply;
use crate::server::table::Call;

/// RDB opcode of a function library in DUMP payloads and RDB files (Redis' FUNCTION2).
const RDB_OPCODE_FUNCTION2: u8 = 245;
/// RDB version written in FUNCTION DUMP payloads (Redis 7.0's).
const DUMP_RDB_VERSION: u16 = 10;

/// A function a library registered.
#[derive(Clone)]
pub struct FunctionMeta {
    pub name: String,
    pub description: Option<String>,
    pub flags: u32,
}

/// A loaded library: its whole code (metadata line included) and its functions.
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub functions: Vec<FunctionMeta>,
}

fn libraries() -> &'static Mutex<BTreeMap<String, Arc<Library>>> {
    static L: OnceLock<Mutex<BTreeMap<String, Arc<Library>>>> = OnceLock::new();
    L.get_or_init(Default::default)
}

/// The Lua side of the loader: a library's environment reads the load API while it loads and
/// the sandboxed globals afterwards.
const FUNCTION_SETUP: &str = r#"
local hidden = ...
local setmetatable_ = hidden.raw_setmetatable
local load_redis = {
  register_function = function(...)
    local r = hidden.register
    if not r then
      error({err='ERR redis.register_function can only be called on FUNCTION LOAD command'})
    end
    return r(...)
  end,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local globals = hidden.globals
setmetatable_(load_redis, {__index = missing, __newindex = function() error('Attempt to modify a readonly table', 2) end, __metatable = false})
local load_api = {redis = load_redis}
hidden.env = setmetatable_({}, {
  __index = function(_, k)
    local v
    if hidden.loading then v = load_api[k] else v = globals[k] end
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
"#;

/// One core's function interpreter and the callbacks of the libraries it ran.
struct CoreFunctions {
    vm: Rc<Vm>,
    /// Library name -> (the library it ran, its callbacks by function name).
    loaded: HashMap<String, (Arc<Library>, HashMap<String, Function>)>,
}

thread_local! {
    static CORE_FUNCTIONS: RefCell<Option<CoreFunctions>> = const { RefCell::new(None) };
}

fn core_vm() -> Result<Rc<Vm>, Reply> {
    CORE_FUNCTIONS.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            let vm = Vm::new()
                .and_then(|vm| {
                    vm.lua
                        .load(FUNCTION_SETUP)
                        .set_name("@strata_api")
                        .call::<()>(vm.hidden().clone())?;
                    Ok(vm)
                })
                .map_err(|e| err(&format!("ERR cannot start Lua: {e}")))?;
            *c = Some(CoreFunctions {
                vm: Rc::new(vm),
                loaded: HashMap::new(),
            });
        }
        Ok(c.as_ref()
            .map(|c| c.vm.clone())
            .unwrap_or_else(|| unreachable!()))
    })
}

/// The library's name from its metadata line (`#!lua name=NAME`), or Redis' error text.
fn metadata(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let line = String::from_utf8_lossy(&code[..end]);
    let parts: Vec<&str> = line.split_ascii_whitespace().collect();
    let Some(first) = parts.first() else {
        return Err("Invalid library metadata".into());
    };
    let engine = &first[2..];
    let mut name = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            // Quotes group words as in Redis' argument splitting: `name="foo"` is foo.
            name = Some(p[5..].replace(['"', '\''], ""));
            continue;
        }
        return Err(format!("Invalid metadata value given: {p}"));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    if !valid_name(&name) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    Ok(name)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Runs a library's code on this core's interpreter: its functions, with their callbacks.
fn run_library(
    vm: &Vm,
    code: &[u8],
) -> Result<(Vec<FunctionMeta>, HashMap<String, Function>), String> {
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let hidden = vm.hidden();
    let env: Table = hidden
        .raw_get("env")
        .map_err(|e| format!("Error compiling function: {e}"))?;
    let chunk = vm
        .compile_in(&code[end..], "@user_function", &env)
        .map_err(|e| format!("Error compiling function: {e}"))?;
    let found: RefCell<(Vec<FunctionMeta>, HashMap<String, Function>)> = Default::default();
    let started = Instant::now();
    vm.set_watch(move || {
        if started.elapsed() > Duration::from_millis(500) {
            Err("FUNCTION LOAD timeout".into())
        } else {
            Ok(())
        }
    });
    let result = vm.lua.scope(|scope| {
        let register = scope.create_function(|lua, args: mlua::MultiValue| {
            match registration(&args.into_iter().collect::<Vec<_>>()) {
                Err(msg) => vm::fail(lua, msg),
                Ok((meta, f)) => {
                    let mut found = found.borrow_mut();
                    if found.1.keys().any(|k| k.eq_ignore_ascii_case(&meta.name)) {
                        return vm::fail(lua, "Function already exists in the library");
                    }
                    found.1.insert(meta.name.clone(), f);
                    found.0.push(meta);
                    Ok(Value::Nil)
                }
            }
        })?;
        hidden.raw_set("register", register)?;
        hidden.raw_set("loading", true)?;
        let run: Function = vm
            .lua
            .load("local f, handler = ...; return xpcall(f, handler)")
            .set_name("@strata_api")
            .into_function()?;
        let handler: Function = vm
            .lua
            .load("local hidden = ...; return function(e) local p = hidden.pending; if type(e) == 'userdata' and p ~= nil then hidden.pending = nil; return p end; return e end")
            .set_name("@strata_api")
            .call(hidden.clone())?;
        let out = run.call::<(bool, Value)>((chunk, handler));
        hidden.raw_set("loading", false)?;
        hidden.raw_set("register", Value::Nil)?;
        out
    });
    vm.clear_watch();
    match result {
        Ok((true, _)) => Ok(found.into_inner()),
        Ok((false, e)) => {
            let e = vm::script_error(&e);
            Err(format!("Error registering functions: {}", e.msg))
        }
        Err(e) => Err(format!("Error registering functions: {e}")),
    }
}

/// `redis.register_function`'s arguments: positional (name, callback) or one table of named
/// arguments (function_name, callback, description, flags).
fn registration(args: &[Value]) -> Result<(FunctionMeta, Function), &'static str> {
    let (name, f, description, flags) = match args {
        [Value::Table(t)] => {
            let (mut name, mut f, mut desc, mut flags) = (None, None, None, 0);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|_| "unknown argument given to redis.register_function")?;
                let Value::String(k) = k else {
                    return Err("named argument key given to redis.register_function is not a string");
                };
                match k.to_string_lossy().to_ascii_lowercase().as_str() {
                    "function_name" => match v {
                        Value::String(s) => name = Some(s.to_string_lossy().to_string()),
                        _ => return Err("function_name argument given to redis.register_function must be a string"),
                    },
                    "description" => match v {
                        Value::String(s) => desc = Some(s.to_string_lossy().to_string()),
                        _ => return Err("description argument given to redis.register_function must be a string"),
                    },
                    "callback" => match v {
                        Value::Function(cb) => f = Some(cb),
                        _ => return Err("callback argument given to redis.register_function must be a function"),
                    },
                    "flags" => {
                        let Value::Table(list) = v else {
                            return Err("flags argument to redis.register_function must be a table representing function flags");
                        };
                        for item in list.sequence_values::<Value>() {
                            let name = match item {
                                Ok(Value::String(s)) => s.to_string_lossy().to_string(),
                                _ => return Err("unknown flag given"),
                            };
                            match FLAG_NAMES.iter().find(|(n, _)| *n == name) {
                                Some((_, bit)) => flags |= bit,
                                None => return Err("unknown flag given"),
                            }
                        }
                    }
                    _ => return Err("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return Err("redis.register_function must get a function name argument");
            };
            let Some(f) = f else {
                return Err("redis.register_function must get a callback argument");
            };
            (name, f, desc, flags)
        }
        [_] => return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."),
        [name, f] => {
            let Value::String(name) = name else {
                return Err("first argument to redis.register_function must be a string");
            };
            let Value::Function(f) = f else {
                return Err("second argument to redis.register_function must be a function");
            };
            (name.to_string_lossy().to_string(), f.clone(), None, 0)
        }
        _ => return Err("wrong number of arguments to redis.register_function"),
    };
    if !valid_name(&name) {
        // Redis 7.0 words it so for functions too.
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
    }
    Ok((
        FunctionMeta {
            name,
            description,
            flags,
        },
        f,
    ))
}

/// Loads `code` into `libs` (a copy of the map): checks as Redis does, runs it on this core.
fn create(
    libs: &mut BTreeMap<String, Arc<Library>>,
    code: &Bytes,
    replace: bool,
) -> Result<String, String> {
    let name = metadata(code)?;
    if libs.contains_key(&name) && !replace {
        return Err(format!("Library '{name}' already exists"));
    }
    let vm = core_vm().map_err(|_| "cannot start Lua".to_string())?;
    let (functions, callbacks) = run_library(&vm, code)?;
    if functions.is_empty() {
        return Err("No functions registered".into());
    }
    for f in &functions {
        let taken = libs.values().any(|l| {
            l.name != name
                && l.functions
                    .iter()
                    .any(|g| g.name.eq_ignore_ascii_case(&f.name))
        });
        if taken {
            return Err(format!("Function {} already exists", f.name));
        }
    }
    let lib = Arc::new(Library {
        name: name.clone(),
        code: code.clone(),
        functions,
    });
    CORE_FUNCTIONS.with(|c| {
        if let Some(c) = c.borrow_mut().as_mut() {
            c.loaded.insert(name.clone(), (lib.clone(), callbacks));
        }
    });
    libs.insert(name.clone(), lib);
    Ok(name)
}

/// FUNCTION LOAD | LIST | DELETE | FLUSH | DUMP | RESTORE | STATS | KILL | HELP.
pub fn function(Call { args, .. }: Call<'_>) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "load" if args.len() >= 3 => load(&args),
        "list" => list(&args),
        "delete" if args.len() == 3 => {
            let name = String::from_utf8_lossy(&args[2]).to_string();
            let removed = libraries()
                .lock()
                .map(|mut l| l.remove(&name).is_some())
                .unwrap_or(false);
            if removed {
                Reply::Ok
            } else {
                err("ERR Library not found")
            }
        }
        "flush" if args.len() <= 3 => {
            if args.len() == 3 && !is(&args[2], "sync") && !is(&args[2], "async") {
                return err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            if let Ok(mut l) = libraries().lock() {
                l.clear();
            }
            Reply::Ok
        }
        "dump" if args.len() == 2 => Reply::Bulk(Bytes::from(dump())),
        "restore" if args.len() == 3 || args.len() == 4 => restore(&args),
        "stats" if args.len() == 2 => stats(),
        "kill" if args.len() == 2 => kill(false),
        "help" if args.len() == 2 => help(),
        _ => super::known_or_not(
            "FUNCTION",
            &args[1],
            &[
                "load", "list", "delete", "flush", "dump", "restore", "stats", "kill", "help",
            ],
        ),
    }
}

fn load(args: &[Bytes]) -> Reply {
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if is(&args[i], "replace") {
            replace = true;
            i += 1;
            continue;
        }
        return err(&format!(
            "ERR Unknown option given: {}",
            String::from_utf8_lossy(&args[i])
        ));
    }
    let Some(code) = args.get(i) else {
        return err("ERR Function code is missing");
    };
    let mut libs = match libraries().lock() {
        Ok(l) => l.clone(),
        Err(_) => return err("ERR internal error"),
    };
    match create(&mut libs, code, replace) {
        Ok(name) => {
            if let Ok(mut l) = libraries().lock() {
                *l = libs;
            }
            Reply::Bulk(Bytes::from(name.into_bytes()))
        }
        Err(e) => Reply::Error(format!("ERR {e}")),
    }
}

fn list(args: &[Bytes]) -> Reply {
    let (mut with_code, mut pattern) = (false, None);
    let mut i = 2;
    while i < args.len() {
        if !with_code && is(&args[i], "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(&args[i], "libraryname") {
            if i + 1 >= args.len() {
                return err("ERR library name argument was not given");
            }
            i += 1;
            pattern = Some(args[i].clone());
        } else {
            return err(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(&args[i])
            ));
        }
        i += 1;
    }
    let libs = libraries().lock().map(|l| l.clone()).unwrap_or_default();
    let bulk = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let out = libs
        .values()
        .filter(|l| {
            pattern
                .as_ref()
                .is_none_or(|p| crate::glob::matches(p, l.name.as_bytes(), true))
        })
        .map(|l| {
            let functions = l
                .functions
                .iter()
                .map(|f| {
                    Reply::Map(vec![
                        (bulk("name"), bulk(&f.name)),
                        (
                            bulk("description"),
                            f.description.as_deref().map(bulk).unwrap_or(Reply::Nil),
                        ),
                        (bulk("flags"), flag_set(f.flags)),
                    ])
                })
                .collect();
            let mut m = vec![
                (bulk("library_name"), bulk(&l.name)),
                (bulk("engine"), bulk("LUA")),
                (bulk("functions"), Reply::Array(functions)),
            ];
            if with_code {
                m.push((bulk("library_code"), Reply::Bulk(l.code.clone())));
            }
            Reply::Map(m)
        })
        .collect();
    Reply::Array(out)
}

fn flag_set(flags: u32) -> Reply {
    Reply::Set(
        FLAG_NAMES
            .iter()
            .filter(|(_, bit)| flags & bit != 0)
            .map(|(n, _)| Reply::Status(n))
            .collect(),
    )
}

/// Every library as Redis' FUNCTION DUMP payload: (FUNCTION2 opcode, code)*, RDB version,
/// CRC-64.
pub fn dump() -> Vec<u8> {
    let libs = libraries().lock().map(|l| l.clone()).unwrap_or_default();
    let mut out = Vec::new();
    for l in libs.values() {
        out.push(RDB_OPCODE_FUNCTION2);
        write_string(&mut out, &l.code, StringCompression::Lzf);
    }
    out.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
    let crc = Crc64::checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes in a FUNCTION DUMP payload, or Redis' error.
fn payload_codes(payload: &[u8]) -> Result<Vec<Bytes>, Reply> {
    let parsed = DumpPayload::parse(payload)
        .map_err(|_| err("ERR DUMP payload version or checksum are wrong"))?;
    let mut kind = parsed.rdb_type;
    let mut cursor = parsed.value;
    let mut codes = Vec::new();
    loop {
        if kind != RDB_OPCODE_FUNCTION2 {
            return Err(err("ERR given type is not a function"));
        }
        let code = read_string(&mut cursor)
            .map_err(|_| err("ERR failed loading the given functions payload"))?;
        codes.push(Bytes::from(code));
        if cursor.remaining().is_empty() {
            return Ok(codes);
        }
        kind = ondisk::rdb::codec::RdbInput::read_u8(&mut cursor)
            .map_err(|_| err("ERR can not read data type"))?;
    }
}

fn restore(args: &[Bytes]) -> Reply {
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy =
        match args.get(3) {
            None => Policy::Append,
            Some(p) if is(p, "flush") => Policy::Flush,
            Some(p) if is(p, "append") => Policy::Append,
            Some(p) if is(p, "replace") => Policy::Replace,
            Some(_) => return err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    let codes = match payload_codes(&args[2]) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let Ok(mut guard) = libraries().lock() else {
        return err("ERR internal error");
    };
    let mut libs = if policy == Policy::Flush {
        BTreeMap::new()
    } else {
        guard.clone()
    };
    // Loaded first on their own: a payload naming one library twice, or a function twice, fails.
    let mut fresh = BTreeMap::new();
    for code in &codes {
        if let Err(e) = create(&mut fresh, code, false) {
            return Reply::Error(format!("ERR {e}"));
        }
    }
    for (name, lib) in fresh {
        if libs.contains_key(&name) && policy != Policy::Replace {
            return Reply::Error(format!("ERR Library {name} already exists"));
        }
        libs.remove(&name);
        for f in &lib.functions {
            if libs
                .values()
                .any(|l| l.functions.iter().any(|g| g.name == f.name))
            {
                return Reply::Error(format!("ERR Function {} already exists", f.name));
            }
        }
        libs.insert(name, lib);
    }
    *guard = libs;
    Reply::Ok
}

pub(super) fn stats() -> Reply {
    let bulk = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let (running, eval) = super::running_info();
    if eval {
        return err("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.");
    }
    let running = match running {
        Some((name, command, ms)) => Reply::Map(vec![
            (bulk("name"), bulk(&name)),
            (
                bulk("command"),
                Reply::Array(command.into_iter().map(Reply::Bulk).collect()),
            ),
            (bulk("duration_ms"), Reply::Int(ms as i64)),
        ]),
        None => Reply::Nil,
    };
    let libs = libraries().lock().map(|l| l.clone()).unwrap_or_default();
    let nfun: usize = libs.values().map(|l| l.functions.len()).sum();
    Reply::Map(vec![
        (bulk("running_script"), running),
        (
            bulk("engines"),
            Reply::Map(vec![(
                bulk("LUA"),
                Reply::Map(vec![
                    (bulk("libraries_count"), Reply::Int(libs.len() as i64)),
                    (bulk("functions_count"), Reply::Int(nfun as i64)),
                ]),
            )]),
        ),
    ])
}

fn help() -> Reply {
    crate::cmd::help_reply(&[
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ])
}

/// FCALL function numkeys [key ...] [arg ...] (and FCALL_RO).
pub async fn fcall(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    let ro = args[0].len() > 4 && args[0][args[0].len() - 3..].eq_ignore_ascii_case(b"_ro");
    let name = String::from_utf8_lossy(&args[1]).to_string();
    // Function names are case-insensitive, as in Redis.
    let lib = libraries().lock().ok().and_then(|l| {
        l.values()
            .find(|l| {
                l.functions
                    .iter()
                    .any(|f| f.name.eq_ignore_ascii_case(&name))
            })
            .cloned()
    });
    let Some(lib) = lib else {
        return err("ERR Function not found");
    };
    let nkeys = match numkeys(&args) {
        Ok(n) => n,
        Err(e) if e == err(ERR_NOT_INT) => return err("ERR Bad number of keys provided"),
        Err(e) => return e,
    };
    let Some(meta) = lib
        .functions
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(&name))
        .cloned()
    else {
        return err("ERR Function not found");
    };
    if let Some(e) = precheck(core, meta.flags, ro) {
        return e;
    }
    let vm = match core_vm() {
        Ok(vm) => vm,
        Err(e) => return e,
    };
    let cached = CORE_FUNCTIONS.with(|c| {
        c.borrow().as_ref().and_then(|c| {
            c.loaded
                .get(&lib.name)
                .filter(|(l, _)| Arc::ptr_eq(l, &lib))
                .and_then(|(_, fs)| fs.get(&meta.name).cloned())
        })
    });
    let f = match cached {
        Some(f) => f,
        None => match run_library(&vm, &lib.code) {
            Ok((_, callbacks)) => {
                let f = callbacks.get(&meta.name).cloned();
                CORE_FUNCTIONS.with(|c| {
                    if let Some(c) = c.borrow_mut().as_mut() {
                        c.loaded.insert(lib.name.clone(), (lib.clone(), callbacks));
                    }
                });
                match f {
                    Some(f) => f,
                    None => return err("ERR Function not found"),
                }
            }
            Err(e) => return Reply::Error(format!("ERR {e}")),
        },
    };
    let run = Run {
        vm: &vm,
        name: &name,
        flags: meta.flags,
        ro,
        eval: false,
        command: &args,
    };
    run.go(core, session, &f, &args[3..3 + nkeys], &args[3 + nkeys..])
        .await
}

/// Every library's code, in name order (what snapshots and RDB files keep).
pub fn codes() -> Vec<Bytes> {
    libraries()
        .lock()
        .map(|l| l.values().map(|l| l.code.clone()).collect())
        .unwrap_or_default()
}

/// Loads a library read from a snapshot or RDB file, as FUNCTION LOAD would (without
/// REPLACE: a file naming a library or function twice is refused, as Redis refuses it).
pub fn load_saved(code: Bytes) -> Result<String, String> {
    let mut libs = libraries()
        .lock()
        .map_err(|_| "internal error".to_string())?
        .clone();
    let name = create(&mut libs, &code, false)?;
    if let Ok(mut l) = libraries().lock() {
        *l = libs;
    }
    Ok(name)
}

/// Number of libraries and functions (INFO).
pub fn counts() -> (usize, usize) {
    libraries()
        .lock()
        .map(|l| (l.len(), l.values().map(|l| l.functions.len()).sum()))
        .unwrap_or((0, 0))
}

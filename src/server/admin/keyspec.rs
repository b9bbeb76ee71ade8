//! Redis 7.0's key specs: how COMMAND GETKEYS / GETKEYSANDFLAGS find a command's keys and
//! their access flags, and how COMMAND INFO describes them (key specs and the legacy
//! first/last/step derived from them). The specs themselves are in `keyspecs.rs`.
//!
//! Never: routes a command; the command table's own key positions do that.

use bytes::Bytes;

use super::keyspecs;
use crate::cmd::args::{is, parse_i64};
use crate::protocol::Reply;

pub const RO: u16 = 1;
pub const RW: u16 = 1 << 1;
pub const OW: u16 = 1 << 2;
pub const RM: u16 = 1 << 3;
pub const ACCESS: u16 = 1 << 4;
pub const UPDATE: u16 = 1 << 5;
pub const INSERT: u16 = 1 << 6;
pub const DELETE: u16 = 1 << 7;
pub const NOT_KEY: u16 = 1 << 8;
pub const INCOMPLETE: u16 = 1 << 9;
pub const VARIABLE_FLAGS: u16 = 1 << 10;

/// Flag names in the order Redis lists them.
const FLAG_NAMES: [(u16, &str); 11] = [
    (RO, "RO"),
    (RW, "RW"),
    (OW, "OW"),
    (RM, "RM"),
    (ACCESS, "access"),
    (UPDATE, "update"),
    (INSERT, "insert"),
    (DELETE, "delete"),
    (NOT_KEY, "not_key"),
    (INCOMPLETE, "incomplete"),
    (VARIABLE_FLAGS, "variable_flags"),
];

pub enum Begin {
    Index(i32),
    /// The keyword, and where its search starts (negative: from the end, backwards).
    Keyword(&'static str, i32),
    UnknownBegin,
}

pub enum Find {
    /// lastkey (relative to the first key; negative from the end), keystep, limit.
    Range(i32, i32, i32),
    /// keynumidx, firstkey (both relative to the begin), keystep.
    Keynum(i32, i32, i32),
    UnknownFind,
}

pub struct KeySpec {
    pub notes: &'static str,
    pub flags: u16,
    pub begin: Begin,
    pub find: Find,
}

/// A spec found by a command's name, its subcommand's when it is a container (`object|freq`);
/// None when the container has no such subcommand.
pub struct Resolved {
    pub name: String,
    pub arity: i32,
}

/// The command (or subcommand) `args` names, with its arity, as Redis' lookupCommand finds it;
/// None for an unknown subcommand of a container.
pub fn resolve(name: &str, arity: i32, args: &[Bytes]) -> Option<Resolved> {
    if !is_container(name) || args.len() < 2 {
        return Some(Resolved {
            name: name.to_string(),
            arity,
        });
    }
    let sub = format!(
        "{name}|{}",
        String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
    );
    keyspecs::SUBCOMMANDS
        .iter()
        .find(|(n, _)| *n == sub)
        .map(|&(n, a)| Resolved {
            name: n.to_string(),
            arity: a,
        })
}

/// Whether `name` is a container of subcommands (OBJECT, MEMORY, CLIENT, ...).
pub fn is_container(name: &str) -> bool {
    keyspecs::SUBCOMMANDS
        .iter()
        .any(|(n, _)| n.split_once('|').is_some_and(|(c, _)| c == name))
}

/// COMMAND INFO's flags of a command: the table's, movablekeys as the key specs imply it, and
/// Redis' descriptive ones, in Redis' order; a container's are Redis' own for it.
pub fn info_flags(name: &str, table_flags: &[&'static str]) -> Vec<&'static str> {
    const ORDER: [&str; 24] = [
        "write",
        "readonly",
        "denyoom",
        "module",
        "admin",
        "pubsub",
        "noscript",
        "blocking",
        "loading",
        "stale",
        "skip_monitor",
        "skip_slowlog",
        "asking",
        "fast",
        "no_auth",
        "may_replicate",
        "sentinel",
        "only_sentinel",
        "no_mandatory_keys",
        "protected",
        "no_async_loading",
        "no_multi",
        "movablekeys",
        "allow_busy",
    ];
    let extra = keyspecs::descriptive_flags(name);
    if is_container(name) {
        return ORDER.into_iter().filter(|f| extra.contains(f)).collect();
    }
    let movable = legacy_range(name).3;
    ORDER
        .into_iter()
        .filter(|f| {
            table_flags.contains(f) || extra.contains(f) || (*f == "movablekeys" && movable)
        })
        .collect()
}

/// A command's own key finder, used where its key specs can't say (Redis' getkeys_proc).
enum Proc {
    /// destination index (0: none), count index, first key index (Redis' genericGetKeys).
    Counted(usize, usize, usize),
    Sort,
    SortRo,
    Set,
    Bitfield,
}

fn proc_of(name: &str) -> Option<Proc> {
    Some(match name {
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" | "lmpop" | "zmpop" => {
            Proc::Counted(0, 1, 2)
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => Proc::Counted(1, 2, 3),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => Proc::Counted(0, 2, 3),
        "sort" => Proc::Sort,
        "sort_ro" => Proc::SortRo,
        "set" => Proc::Set,
        "bitfield" => Proc::Bitfield,
        _ => return None,
    })
}

/// Commands whose keys may be none at all (Redis' `no_mandatory_keys`).
pub fn no_mandatory_keys(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// Whether the command may have keys (Redis' doesCommandHaveKeys).
pub fn has_keys(name: &str) -> bool {
    proc_of(name).is_some()
        || keyspecs::key_specs(name)
            .iter()
            .any(|s| s.flags & NOT_KEY == 0)
}

/// The keys of `args` (a full command, `name` resolved) with their flags, as Redis'
/// getKeysFromCommandWithSpecs finds them: the key specs when they say, else the command's
/// own finder.
pub fn keys_with_flags(name: &str, args: &[Bytes]) -> Vec<(usize, u16)> {
    let specs = keyspecs::key_specs(name);
    let all = specs.iter().fold(0, |f, s| f | s.flags);
    let has_keyspec = specs.iter().any(|s| s.flags & NOT_KEY == 0);
    if has_keyspec && all & VARIABLE_FLAGS == 0 {
        if let Some(k) = from_specs(specs, args) {
            return k;
        }
    }
    match proc_of(name) {
        Some(p) => from_proc(p, args),
        None => Vec::new(),
    }
}

/// Redis' getKeysUsingKeySpecs: None where a spec is invalid or incomplete.
fn from_specs(specs: &[KeySpec], args: &[Bytes]) -> Option<Vec<(usize, u16)>> {
    let argc = args.len() as i64;
    let mut keys = Vec::new();
    for spec in specs {
        if spec.flags & NOT_KEY != 0 {
            continue;
        }
        let mut first: i64 = match spec.begin {
            Begin::Index(i) => i64::from(i),
            Begin::Keyword(word, from) => {
                let from = i64::from(from);
                let start = if from > 0 { from } else { argc + from };
                let end = if from > 0 { argc - 1 } else { 1 };
                let mut i = start;
                let mut found = 0;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if is(&args[i as usize], word) {
                        found = i + 1;
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::UnknownBegin => return None,
        };
        let (last, step) = match spec.find {
            Find::Range(lastkey, step, limit) => {
                let lastkey = i64::from(lastkey);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / i64::from(limit) + lastkey)
                };
                (last, i64::from(step))
            }
            Find::Keynum(idx, firstkey, step) => {
                let at = first + i64::from(idx);
                if i64::from(idx) >= argc || at >= argc {
                    return None;
                }
                let n = parse_i64(&args[at as usize]).filter(|&n| n >= 0)?;
                first += i64::from(firstkey);
                (first + n - 1, i64::from(step))
            }
            Find::UnknownFind => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            keys.push((i as usize, spec.flags));
            i += step.max(1);
        }
        if spec.flags & INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// C's `atoi`: leading blanks, a sign, then digits up to the first other byte (0 if none).
fn atoi(s: &[u8]) -> i64 {
    let s = s.trim_ascii_start();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for &d in digits.iter().take_while(|d| d.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(i64::from(d - b'0'));
    }
    if neg {
        -v
    } else {
        v
    }
}

fn from_proc(p: Proc, args: &[Bytes]) -> Vec<(usize, u16)> {
    match p {
        Proc::Counted(store, count, first) => {
            let Some(c) = args.get(count) else {
                return Vec::new();
            };
            let n = atoi(c);
            if n < 1 || n > args.len() as i64 - first as i64 {
                return Vec::new();
            }
            let mut v: Vec<(usize, u16)> = (first..first + n as usize).map(|i| (i, 0)).collect();
            if store > 0 {
                v.push((store, 0));
            }
            v
        }
        Proc::SortRo => vec![(1, RO | ACCESS)],
        Proc::Sort => {
            let mut store = None;
            let mut i = 2;
            while i < args.len() {
                let a = &args[i];
                if is(a, "limit") {
                    i += 2;
                } else if is(a, "store") && i + 1 < args.len() {
                    store = Some(i + 1);
                } else if is(a, "get") || is(a, "by") {
                    i += 1;
                }
                i += 1;
            }
            let mut v = vec![(1, RO | ACCESS)];
            v.extend(store.map(|s| (s, OW | UPDATE)));
            v
        }
        Proc::Set => {
            let get = args.iter().skip(3).any(|a| a.len() == 3 && is(a, "get"));
            vec![(
                1,
                if get {
                    RW | ACCESS | UPDATE
                } else {
                    OW | UPDATE
                },
            )]
        }
        Proc::Bitfield => {
            let mut readonly = true;
            let mut i = 2;
            while i < args.len() {
                let rem = args.len() - i - 1;
                let a = &args[i];
                if is(a, "get") && rem >= 2 {
                    i += 2;
                } else if (is(a, "set") || is(a, "incrby")) && rem >= 3 {
                    readonly = false;
                    break;
                } else if is(a, "overflow") && rem >= 1 {
                    i += 1;
                } else {
                    readonly = false;
                    break;
                }
                i += 1;
            }
            vec![(
                1,
                if readonly {
                    RO | ACCESS
                } else {
                    RW | ACCESS | UPDATE
                },
            )]
        }
    }
}

pub fn flags_reply(flags: u16) -> Reply {
    Reply::Set(
        FLAG_NAMES
            .iter()
            .filter(|(b, _)| flags & b != 0)
            .map(|(_, n)| Reply::Status(n))
            .collect(),
    )
}

fn int(name: &str, v: i32) -> (Reply, Reply) {
    (Reply::bulk_str(name), Reply::Int(i64::from(v)))
}

/// COMMAND INFO's key specs of `name`.
pub fn specs_reply(name: &str) -> Reply {
    let specs = keyspecs::key_specs(name);
    Reply::Array(
        specs
            .iter()
            .map(|s| {
                let mut m = Vec::new();
                if !s.notes.is_empty() {
                    m.push((Reply::bulk_str("notes"), Reply::bulk_str(s.notes)));
                }
                m.push((Reply::bulk_str("flags"), flags_reply(s.flags)));
                let (bt, bs) = match s.begin {
                    Begin::Index(i) => ("index", vec![int("index", i)]),
                    Begin::Keyword(k, from) => (
                        "keyword",
                        vec![
                            (Reply::bulk_str("keyword"), Reply::bulk_str(k)),
                            int("startfrom", from),
                        ],
                    ),
                    Begin::UnknownBegin => ("unknown", vec![]),
                };
                m.push((
                    Reply::bulk_str("begin_search"),
                    Reply::Map(vec![
                        (Reply::bulk_str("type"), Reply::bulk_str(bt)),
                        (Reply::bulk_str("spec"), Reply::Map(bs)),
                    ]),
                ));
                let (ft, fs) = match s.find {
                    Find::Range(l, st, lim) => (
                        "range",
                        vec![int("lastkey", l), int("keystep", st), int("limit", lim)],
                    ),
                    Find::Keynum(i, f, st) => (
                        "keynum",
                        vec![int("keynumidx", i), int("firstkey", f), int("keystep", st)],
                    ),
                    Find::UnknownFind => ("unknown", vec![]),
                };
                m.push((
                    Reply::bulk_str("find_keys"),
                    Reply::Map(vec![
                        (Reply::bulk_str("type"), Reply::bulk_str(ft)),
                        (Reply::bulk_str("spec"), Reply::Map(fs)),
                    ]),
                ));
                Reply::Map(m)
            })
            .collect(),
    )
}

/// COMMAND INFO's first key, last key and step, and whether the keys are movable, derived from
/// the key specs as Redis' populateCommandLegacyRangeSpec does.
pub fn legacy_range(name: &str) -> (i32, i32, i32, bool) {
    let specs = keyspecs::key_specs(name);
    if specs.is_empty() {
        return (0, 0, 0, false);
    }
    if let [s] = specs {
        if let (Begin::Index(pos), Find::Range(last, step, _)) = (&s.begin, &s.find) {
            let abs = if *last >= 0 { last + pos } else { *last };
            return (*pos, abs, *step, s.flags & INCOMPLETE != 0);
        }
    }
    let mut movable = false;
    let mut first = i32::MAX;
    let mut lastkey: i32 = 0;
    let mut prev: i32 = 0;
    for s in specs {
        let (Begin::Index(pos), Find::Range(last, step, _)) = (&s.begin, &s.find) else {
            movable = true;
            continue;
        };
        if *step != 1 || (prev != 0 && prev != pos - 1) {
            movable = true;
            continue;
        }
        if s.flags & INCOMPLETE != 0 {
            movable = true;
        }
        first = first.min(*pos);
        let abs = if *last >= 0 { last + pos } else { *last };
        // Unsigned, as Redis compares: a negative (from the end) last key wins.
        lastkey = (lastkey as u32).max(abs as u32) as i32;
        prev = lastkey;
    }
    if first == i32::MAX {
        return (0, 0, 0, true);
    }
    (first, lastkey, 1, movable)
}

//! COMMAND and its subcommands, read from the command table.
//!
//! Never: describes a command any way but as the table declares it.

use crate::cmd::args::*;
use crate::cmd::help_reply;
use crate::protocol::Reply;
use crate::server::table::{self, Call, NumKeys, Spec, TABLE};

fn command_info(s: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::bulk_str(s.name),
        Reply::Int(s.arity as i64),
        Reply::Set(s.flag_names().into_iter().map(Reply::Status).collect()),
        Reply::Int(s.first_key.max(0) as i64),
        Reply::Int(if s.first_key > 0 {
            s.last_key as i64
        } else {
            0
        }),
        Reply::Int(if s.first_key > 0 { s.step as i64 } else { 0 }),
        Reply::Set(vec![]),
        Reply::Set(vec![]),
        Reply::Array(vec![]),
        Reply::Array(vec![]),
    ])
}

fn command_docs(s: &Spec) -> Reply {
    Reply::Map(vec![
        (Reply::bulk_str("summary"), Reply::bulk_str(s.summary)),
        (Reply::bulk_str("since"), Reply::bulk_str(s.since)),
        (Reply::bulk_str("group"), Reply::bulk_str(s.group)),
    ])
}

pub fn command(Call { args, .. }: Call<'_>) -> Reply {
    if args.len() == 1 {
        return Reply::Array(TABLE.iter().map(command_info).collect());
    }
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "count" if args.len() == 2 => Reply::Int(TABLE.len() as i64),
        "info" => {
            if args.len() == 2 {
                return Reply::Array(TABLE.iter().map(command_info).collect());
            }
            Reply::Array(
                args[2..]
                    .iter()
                    .map(|n| table::lookup(n).map(command_info).unwrap_or(Reply::Nil))
                    .collect(),
            )
        }
        "docs" => {
            let specs: Vec<&Spec> = if args.len() == 2 {
                TABLE.iter().collect()
            } else {
                args[2..].iter().filter_map(|n| table::lookup(n)).collect()
            };
            Reply::Map(
                specs
                    .into_iter()
                    .map(|s| (Reply::bulk_str(s.name), command_docs(s)))
                    .collect(),
            )
        }
        "list" => {
            let mut names: Vec<&Spec> = TABLE.iter().collect();
            if args.len() > 2 {
                if args.len() != 5 || !is(&args[2], "FILTERBY") {
                    return err(ERR_SYNTAX);
                }
                let v = args[4].clone();
                if is(&args[3], "PATTERN") {
                    names.retain(|s| crate::glob::matches(&v, s.name.as_bytes(), true));
                } else if is(&args[3], "ACLCAT") || is(&args[3], "MODULE") {
                    if is(&args[3], "MODULE") {
                        names.clear();
                    }
                } else {
                    return err(ERR_SYNTAX);
                }
            }
            Reply::Array(names.into_iter().map(|s| Reply::bulk_str(s.name)).collect())
        }
        "getkeys" if args.len() >= 4 => getkeys(&args[2..]),
        "getkeys" => err("ERR wrong number of arguments for 'command|getkeys' command"),
        "help" => help_reply(&[
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
            "HELP",
            "    Print this help.",
        ]),
        _ => crate::cmd::unknown_subcommand("COMMAND", &args[1], true),
    }
}

/// COMMAND GETKEYS: the keys of `cmd` (a full command) as Redis finds them, with its errors
/// in its order: an unknown command, one without keys, a wrong count of arguments, then
/// arguments that name no key.
fn getkeys(cmd: &[bytes::Bytes]) -> Reply {
    let Some(spec) = table::lookup(&cmd[0]) else {
        return err("ERR Invalid command specified");
    };
    if spec.first_key <= 0 && spec.numkeys.is_none() && !spec.has(table::MOVABLE_KEYS) {
        return err("ERR The command has no key arguments");
    }
    if !spec.arity_ok(cmd.len()) {
        return err("ERR Invalid number of arguments specified for command");
    }
    let keys = match spec.numkeys {
        Some(n) => match counted_keys(n, cmd) {
            Some(k) => k,
            None if n.mandatory => return err("ERR Invalid arguments specified for command"),
            None => Vec::new(),
        },
        None => {
            let k = spec.keys_of(cmd);
            if k.is_empty() {
                // A container's subcommand without keys (OBJECT HELP).
                return err("ERR The command has no key arguments");
            }
            k
        }
    };
    Reply::Array(
        keys.into_iter()
            .map(|i| Reply::Bulk(cmd[i].clone()))
            .collect(),
    )
}

/// The keys after a count, as Redis' `keynum` key spec finds them (the destination first);
/// where that spec fails, as its fallback (`genericGetKeys`: the count read as `atoi` does,
/// the destination last); None when neither names a key.
fn counted_keys(n: NumKeys, cmd: &[bytes::Bytes]) -> Option<Vec<usize>> {
    let count = cmd.get(n.at)?;
    let dst = n.store.then_some(1);
    let first = n.at + 1;
    if let Some(c) = parse_i64(count).filter(|&c| c >= 1) {
        if (c as u64) <= (cmd.len() - first) as u64 {
            return Some(dst.into_iter().chain(first..first + c as usize).collect());
        }
    }
    let c = atoi(count);
    if c < 1 || c > (cmd.len() - first) as i64 {
        return None;
    }
    Some((first..first + c as usize).chain(dst).collect())
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

//! COMMAND and its subcommands, read from the command table.
//!
//! Never: describes a command any way but as the table declares it.

use super::keyspec;
use crate::cmd::args::*;
use crate::cmd::help_reply;
use crate::protocol::Reply;
use crate::server::table::{self, Call, Spec, TABLE};

/// COMMAND INFO of one command: its key positions and key specs are Redis' (`keyspec`).
fn command_info(s: &Spec) -> Reply {
    let (first, last, step, _) = keyspec::legacy_range(s.name);
    Reply::Array(vec![
        Reply::bulk_str(s.name),
        Reply::Int(s.arity as i64),
        Reply::Set(
            keyspec::info_flags(s.name, &s.flag_names())
                .into_iter()
                .map(Reply::Status)
                .collect(),
        ),
        Reply::Int(i64::from(first)),
        Reply::Int(i64::from(last)),
        Reply::Int(i64::from(step)),
        Reply::Set(vec![]),
        Reply::Set(vec![]),
        keyspec::specs_reply(s.name),
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
        "getkeys" if args.len() >= 4 => getkeys(&args[2..], false),
        "getkeys" => err("ERR wrong number of arguments for 'command|getkeys' command"),
        "getkeysandflags" if args.len() >= 4 => getkeys(&args[2..], true),
        "getkeysandflags" => {
            err("ERR wrong number of arguments for 'command|getkeysandflags' command")
        }
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
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full command.",
            "HELP",
            "    Print this help.",
        ]),
        _ => crate::cmd::unknown_subcommand("COMMAND", &args[1], true),
    }
}

/// COMMAND GETKEYS and GETKEYSANDFLAGS: the keys of `cmd` (a full command) as Redis finds
/// them (`keyspec`), with its errors in its order: an unknown command, one without keys, a
/// wrong count of arguments, then arguments that name no key.
fn getkeys(cmd: &[bytes::Bytes], with_flags: bool) -> Reply {
    let found = table::lookup(&cmd[0]).and_then(|s| keyspec::resolve(s.name, s.arity, cmd));
    let Some(found) = found else {
        return err("ERR Invalid command specified");
    };
    if !keyspec::has_keys(&found.name) {
        return err("ERR The command has no key arguments");
    }
    let argc = cmd.len() as i64;
    let arity = i64::from(found.arity);
    if (arity > 0 && arity != argc) || argc < -arity {
        return err("ERR Invalid number of arguments specified for command");
    }
    let keys = keyspec::keys_with_flags(&found.name, cmd);
    if keys.is_empty() {
        if keyspec::no_mandatory_keys(&found.name) {
            return Reply::Array(vec![]);
        }
        return err("ERR Invalid arguments specified for command");
    }
    Reply::Array(
        keys.into_iter()
            .map(|(i, flags)| {
                let key = Reply::Bulk(cmd[i].clone());
                if with_flags {
                    Reply::Array(vec![key, keyspec::flags_reply(flags)])
                } else {
                    key
                }
            })
            .collect(),
    )
}

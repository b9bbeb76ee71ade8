//! COMMAND and its subcommands, read from the command table.
//!
//! Never: describes a command any way but as the table declares it.

use crate::cmd::args::*;
use crate::cmd::help_reply;
use crate::protocol::Reply;
use crate::server::table::{self, Call, Spec, TABLE};

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
        "getkeys" if args.len() >= 3 => {
            let Some(spec) = table::lookup(&args[2]) else {
                return err("ERR Invalid command specified");
            };
            let cmd_args = &args[2..];
            if !spec.arity_ok(cmd_args.len()) {
                return err("ERR Invalid number of arguments specified for command");
            }
            // Scripts' keys are the declared ones; none (or a bad numkeys) is an empty answer,
            // as Redis gives for commands whose keys are not mandatory.
            if crate::server::script::is_script_call(spec.name) {
                let n = crate::server::script::numkeys(cmd_args).unwrap_or(0);
                return Reply::Array(
                    cmd_args[3..3 + n]
                        .iter()
                        .cloned()
                        .map(Reply::Bulk)
                        .collect(),
                );
            }
            let keys: Vec<Reply> = spec
                .keys_of(cmd_args)
                .into_iter()
                .map(|i| Reply::Bulk(cmd_args[i].clone()))
                .collect();
            if keys.is_empty() {
                return err("ERR The command has no key arguments");
            }
            Reply::Array(keys)
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
            "HELP",
            "    Print this help.",
        ]),
        _ => crate::cmd::unknown_subcommand("COMMAND", &args[1], true),
    }
}

//! CLIENT and its subcommands: naming, listing and killing connections.
//!
//! Never: closes another core's socket except through `ClientInfo::kill`.

use bytes::Bytes;

use super::connection::valid_name;
use crate::cmd::args::*;
use crate::cmd::help_reply;
use crate::protocol::Reply;
use crate::server::core::Core;
use crate::server::session::{ClientInfo, Session};
use crate::server::table::Call;

pub fn client(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity = |n: usize| {
        if args.len() != n {
            Err(Reply::Error(format!(
                "ERR wrong number of arguments for 'client|{sub}' command"
            )))
        } else {
            Ok(())
        }
    };
    let now = core.global.uptime_ms();
    match sub.as_str() {
        "id" => match arity(2) {
            Ok(()) => Reply::Int(session.id as i64),
            Err(e) => e,
        },
        "getname" => {
            if let Err(e) = arity(2) {
                return e;
            }
            let n = session
                .client
                .name
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default();
            if n.is_empty() {
                Reply::Nil
            } else {
                Reply::bulk(Bytes::from(n))
            }
        }
        "setname" => {
            if let Err(e) = arity(3) {
                return e;
            }
            if let Err(e) = valid_name(&args[2]) {
                return e;
            }
            if let Ok(mut m) = session.client.name.lock() {
                *m = String::from_utf8_lossy(&args[2]).into_owned();
            }
            Reply::Ok
        }
        "setinfo" => {
            if let Err(e) = arity(4) {
                return e;
            }
            let field = if is(&args[2], "LIB-NAME") {
                &session.client.lib_name
            } else if is(&args[2], "LIB-VER") {
                &session.client.lib_ver
            } else {
                return Reply::Error(format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(&args[2])
                ));
            };
            if let Err(e) = valid_name(&args[3]) {
                return e;
            }
            if let Ok(mut m) = field.lock() {
                *m = String::from_utf8_lossy(&args[3]).into_owned();
            }
            Reply::Ok
        }
        "info" => match arity(2) {
            Ok(()) => Reply::Verbatim(format!("{}\n", session.client.describe(now))),
            Err(e) => e,
        },
        "list" => {
            let ids: Option<Vec<u64>> = if args.len() > 2 {
                if args.len() >= 4 && is(&args[2], "ID") {
                    let mut v = Vec::new();
                    for a in &args[3..] {
                        match parse_i64(a) {
                            Some(id) if id > 0 => v.push(id as u64),
                            _ => return err("ERR Invalid client ID"),
                        }
                    }
                    Some(v)
                } else if args.len() == 4 && is(&args[2], "TYPE") {
                    // Normal clients and subscribers are told apart by their subscriptions.
                    let pubsub = is(&args[3], "pubsub");
                    if !pubsub && !is(&args[3], "normal") {
                        return Reply::Verbatim(String::new());
                    }
                    let mut v = Vec::new();
                    core.global.clients.for_each(|c| {
                        if c.subscribed() == pubsub {
                            v.push(c.id);
                        }
                    });
                    Some(v)
                } else {
                    return err(ERR_SYNTAX);
                }
            } else {
                None
            };
            let mut text = String::new();
            core.global.clients.for_each(|c| {
                if ids.as_ref().is_none_or(|ids| ids.contains(&c.id)) {
                    text.push_str(&c.describe(now));
                    text.push('\n');
                }
            });
            Reply::Verbatim(text)
        }
        "kill" => client_kill(core, session, &args),
        "unblock" if args.len() == 3 || args.len() == 4 => {
            let r = crate::server::blocking::client_unblock(&core.global, &args);
            // The error it sends the blocked client is counted in Redis while this command
            // runs, which makes it a failed call there.
            let error = args.get(3).is_some_and(|a| is(a, "error"));
            session.failed_elsewhere = error && r == Reply::Int(1);
            r
        }
        "reply" if args.len() == 3 => {
            use crate::server::session::ReplyMode;
            if is(&args[2], "on") {
                session.reply_mode = ReplyMode::On;
                Reply::Ok
            } else if is(&args[2], "off") {
                session.reply_mode = ReplyMode::Off;
                Reply::Many(Vec::new())
            } else if is(&args[2], "skip") {
                if session.reply_mode != ReplyMode::Off {
                    session.reply_mode = ReplyMode::SkipNext;
                }
                Reply::Many(Vec::new())
            } else {
                err(ERR_SYNTAX)
            }
        }
        "tracking" => {
            if args.len() < 3 {
                return Reply::Error(format!(
                    "ERR wrong number of arguments for 'client|{sub}' command"
                ));
            }
            crate::server::tracking::client_tracking(&core.global, session, &args)
        }
        "caching" => match arity(3) {
            Ok(()) => crate::server::tracking::client_caching(session, &args[2]),
            Err(e) => e,
        },
        "getredir" => match arity(2) {
            Ok(()) => crate::server::tracking::client_getredir(session),
            Err(e) => e,
        },
        "trackinginfo" => match arity(2) {
            Ok(()) => crate::server::tracking::client_trackinginfo(session),
            Err(e) => e,
        },
        "no-evict" | "no-touch" if args.len() == 3 => {
            if is(&args[2], "on") || is(&args[2], "off") {
                Reply::Ok
            } else {
                err(ERR_SYNTAX)
            }
        }
        "help" => help_reply(&[
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are: ID <client-id>, ADDR <ip:port>, LADDR <ip:port>,",
            "    USER <username>, SKIPME (YES|NO).",
            "LIST [options ...]",
            "    Return information about client connections. Options: TYPE (normal|pubsub), ID <id> [...].",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "HELP",
            "    Print this help.",
        ]),
        _ => crate::cmd::unknown_subcommand("CLIENT", &args[1], false),
    }
}

fn client_kill(core: &Core, session: &mut Session, args: &[Bytes]) -> Reply {
    // Old form: CLIENT KILL ip:port -> OK or error.
    if args.len() == 3 {
        let target = String::from_utf8_lossy(&args[2]).into_owned();
        let killed = kill_where(core, session, |c| c.peer.addr == target, false);
        return if killed > 0 {
            Reply::Ok
        } else {
            err("ERR No such client")
        };
    }
    if args.len() < 4 || !(args.len() - 2).is_multiple_of(2) {
        return err(ERR_SYNTAX);
    }
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, true);
    let mut user_ok = true;
    let mut filters = ArgCursor::new(args, 2);
    while let (Some(opt), Ok(value)) = (filters.next_arg(), filters.value()) {
        let v = String::from_utf8_lossy(value).into_owned();
        if is(opt, "ID") {
            match parse_i64(value) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return err("ERR client-id should be greater than 0"),
            }
        } else if is(opt, "ADDR") {
            addr = Some(v);
        } else if is(opt, "LADDR") {
            laddr = Some(v);
        } else if is(opt, "USER") {
            user_ok = v == "default";
        } else if is(opt, "SKIPME") {
            if v.eq_ignore_ascii_case("yes") {
                skipme = true;
            } else if v.eq_ignore_ascii_case("no") {
                skipme = false;
            } else {
                return err(ERR_SYNTAX);
            }
        } else if is(opt, "TYPE") {
            if !v.eq_ignore_ascii_case("normal") {
                return Reply::Int(0);
            }
        } else {
            return err(ERR_SYNTAX);
        }
    }
    if let Err(e) = filters.finish() {
        return e;
    }
    if !user_ok {
        return Reply::Int(0);
    }
    let n = kill_where(
        core,
        session,
        |c| {
            id.is_none_or(|i| c.id == i)
                && addr.as_ref().is_none_or(|a| &c.peer.addr == a)
                && laddr.as_ref().is_none_or(|a| &c.peer.laddr == a)
        },
        skipme,
    );
    Reply::Int(n as i64)
}

/// Kills matching clients; the calling connection closes after its reply instead.
fn kill_where(
    core: &Core,
    session: &mut Session,
    pred: impl Fn(&ClientInfo) -> bool,
    skipme: bool,
) -> usize {
    let mut n = 0;
    // Killed clients leave the registry at once (as Redis frees them at once), so they no
    // longer show in CLIENT LIST and a second KILL finds nothing.
    core.global.clients.retain(|c| {
        if !pred(c) || (c.id == session.id && skipme) {
            return true;
        }
        n += 1;
        if c.id == session.id {
            session.close_after_reply = true;
            true
        } else {
            c.kill(&core.global);
            false
        }
    });
    n
}

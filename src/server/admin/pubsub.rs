//! Pub/sub commands: SUBSCRIBE and its kin, PUBLISH, SPUBLISH, PUBSUB, and RESET (which also
//! leaves subscribe mode). The registry and message delivery are `server::pubsub`.
//!
//! Never: touches a shard.

use bytes::Bytes;

use crate::cmd::{help_reply, unknown_subcommand};
use crate::protocol::Reply;
use crate::server::pubsub::{self, Kind};
use crate::server::session::Session;
use crate::server::table::Call;
use crate::server::Core;

/// A subscribe-family command: `$f` of `server::pubsub` on `$kind` with the names given.
macro_rules! subscription_command {
    ($name:ident, $f:ident, $kind:expr) => {
        pub fn $name(call: Call<'_>) -> Reply {
            let (core, session, args) = call.parts();
            pubsub::$f(&core.global, session, $kind, &args[1..])
        }
    };
}

subscription_command!(subscribe, subscribe, Kind::Channel);
subscription_command!(psubscribe, subscribe, Kind::Pattern);
subscription_command!(ssubscribe, subscribe, Kind::Shard);
subscription_command!(unsubscribe, unsubscribe, Kind::Channel);
subscription_command!(punsubscribe, unsubscribe, Kind::Pattern);
subscription_command!(sunsubscribe, unsubscribe, Kind::Shard);

pub fn publish(Call { core, args, .. }: Call<'_>) -> Reply {
    let g = &core.global;
    Reply::Int(g.pubsub.publish(g, &args[1], &args[2], false))
}

pub fn spublish(Call { core, args, .. }: Call<'_>) -> Reply {
    let g = &core.global;
    Reply::Int(g.pubsub.publish(g, &args[1], &args[2], true))
}

/// PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB / HELP, with Redis 7's
/// per-subcommand arity.
pub fn pubsub(Call { core, args, .. }: Call<'_>) -> Reply {
    let reg = &core.global.pubsub;
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let (min, exact) = match sub.as_str() {
        "channels" | "shardchannels" | "numsub" | "shardnumsub" => (2, false),
        "numpat" | "help" => (2, true),
        _ => return unknown_subcommand("PUBSUB", &args[1], false),
    };
    if args.len() < min || exact && args.len() != min {
        return Reply::Error(format!(
            "ERR wrong number of arguments for 'pubsub|{sub}' command"
        ));
    }
    match sub.as_str() {
        "help" => help_reply(&[
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        ]),
        "channels" | "shardchannels" if args.len() <= 3 => Reply::Array(
            reg.list(
                sub == "shardchannels",
                args.get(2).map(|p| &p[..]),
            )
            .into_iter()
            .map(Reply::Bulk)
            .collect(),
        ),
        "numsub" | "shardnumsub" => {
            let shard = sub == "shardnumsub";
            let mut out = Vec::with_capacity((args.len() - 2) * 2);
            for ch in &args[2..] {
                out.push(Reply::Bulk(ch.clone()));
                out.push(Reply::Int(reg.count(shard, ch) as i64));
            }
            Reply::Array(out)
        }
        "numpat" => Reply::Int(reg.patterns() as i64),
        _ => unknown_subcommand("PUBSUB", &args[1], true),
    }
}

/// RESET: the connection back to a fresh one's state: subscriptions left, MULTI discarded and
/// nothing watched, tracking off, db 0, RESP2, no
/// name, replies on, and unauthenticated again when a password is set.
pub fn reset(call: Call<'_>) -> Reply {
    let (core, session, _) = call.parts();
    reset_session(core, session);
    Reply::Status("RESET")
}

/// What RESET does to `session` (a busy script's hook answers RESET and leaves this to the
/// connection).
pub fn reset_session(core: &Core, session: &mut Session) {
    let global = core.global.clone();
    let client = session.client.clone();
    session.subs.clear(&global, &client);
    crate::server::multi::discard_state(core, session);
    crate::server::tracking::disable(&global, session);
    session.select(0);
    session.set_resp3(false);
    if let Ok(mut n) = client.name.lock() {
        n.clear();
    }
    session.authed = global.settings.requirepass().is_empty();
    session.reply_mode = crate::server::session::ReplyMode::On;
}

/// PING's reply: in RESP2 subscribe mode Redis answers `["pong", arg or ""]`.
pub fn ping_reply(subscribed_resp2: bool, arg: Option<&Bytes>) -> Reply {
    match (subscribed_resp2, arg) {
        (true, a) => Reply::Array(vec![
            Reply::bulk_str("pong"),
            Reply::Bulk(a.cloned().unwrap_or_default()),
        ]),
        (false, None) => Reply::Status("PONG"),
        (false, Some(a)) => Reply::Bulk(a.clone()),
    }
}

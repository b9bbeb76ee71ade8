//! Connection commands: PING, ECHO, QUIT, SELECT, AUTH, HELLO. They change only the calling
//! session's state.
//!
//! Never: touches a shard.

use crate::cmd::args::*;
use crate::cmd::wrong_args;
use crate::protocol::Reply;
use crate::server::core::Core;
use crate::server::table::Call;

pub fn ping(Call { session, args, .. }: Call<'_>) -> Reply {
    match args.len() {
        1 | 2 => super::pubsub::ping_reply(session.subs.active() && !session.resp3, args.get(1)),
        _ => wrong_args("ping"),
    }
}

pub fn echo(Call { args, .. }: Call<'_>) -> Reply {
    Reply::Bulk(args[1].clone())
}

pub fn quit(Call { session, .. }: Call<'_>) -> Reply {
    session.close_after_reply = true;
    Reply::Ok
}

pub fn select(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    let Some(n) = parse_i64(&args[1]) else {
        return err(ERR_NOT_INT);
    };
    if n < 0 || n >= core.global.settings.dbnum as i64 {
        return err(ERR_DB_RANGE);
    }
    session.select(n as usize);
    Reply::Ok
}

/// Checks credentials; the only user is "default".
fn check_password(core: &Core, user: &[u8], pass: &[u8]) -> Result<(), Reply> {
    let required = core.global.settings.requirepass();
    if user == b"default" && (required.is_empty() || required.as_bytes() == pass) {
        Ok(())
    } else {
        Err(err(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ))
    }
}

pub fn auth(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    match authenticate(core, &args) {
        Ok(()) => {
            session.authed = true;
            Reply::Ok
        }
        Err(e) => e,
    }
}

/// AUTH's check of its arguments (a busy script's hook answers AUTH with it too).
pub(crate) fn authenticate(core: &Core, args: &[bytes::Bytes]) -> Result<(), Reply> {
    let (user, pass): (&[u8], &[u8]) = match args.len() {
        2 => {
            if core.global.settings.requirepass().is_empty() {
                return Err(err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"));
            }
            (b"default", &args[1])
        }
        3 => (&args[1], &args[2]),
        _ => return Err(err(ERR_SYNTAX)),
    };
    check_password(core, user, pass)
}

pub fn hello(call: Call<'_>) -> Reply {
    let (core, session, args) = call.parts();
    let mut s = Hello {
        id: session.id,
        resp3: session.resp3,
        authed: session.authed,
        name: None,
    };
    let reply = hello_with(core, &args, &mut s);
    session.authed = s.authed;
    if let Some(n) = s.name {
        if let Ok(mut m) = session.client.name.lock() {
            *m = n;
        }
    }
    if s.resp3 != session.resp3 {
        session.set_resp3(s.resp3);
    }
    reply
}

/// The session state HELLO reads and changes (a busy script's hook answers it from a
/// connection's view too).
pub struct Hello {
    pub id: u64,
    pub resp3: bool,
    pub authed: bool,
    /// SETNAME's name, for the caller to give the client.
    pub name: Option<String>,
}

/// HELLO [protover [AUTH user pass] [SETNAME name]] for the session state `session`.
pub fn hello_with(core: &Core, args: &[bytes::Bytes], session: &mut Hello) -> Reply {
    let mut proto = if session.resp3 { 3 } else { 2 };
    let mut opts = ArgCursor::new(args, 1);
    if let Some(v) = opts.next_arg() {
        match parse_i64(v) {
            Some(v @ 2..=3) => proto = v,
            Some(_) => return err("NOPROTO unsupported protocol version"),
            None => return err("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut name = None;
    loop {
        if let Some(creds) = opts.eat_with("AUTH", 2) {
            if let Err(e) = check_password(core, &creds[0], &creds[1]) {
                return e;
            }
            session.authed = true;
        } else if let Some(n) = opts.eat_with_value("SETNAME") {
            if let Err(e) = valid_name(n) {
                return e;
            }
            name = Some(String::from_utf8_lossy(n).into_owned());
        } else {
            break;
        }
    }
    if let Some(bad) = opts.peek() {
        return Reply::Error(format!(
            "ERR Syntax error in HELLO option '{}'",
            String::from_utf8_lossy(bad)
        ));
    }
    if opts.finish().is_err() {
        return err(ERR_SYNTAX);
    }
    if !session.authed {
        return err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    session.name = name;
    session.resp3 = proto == 3;
    Reply::Map(vec![
        (Reply::bulk_str("server"), Reply::bulk_str("redis")),
        (Reply::bulk_str("version"), Reply::bulk_str(REDIS_VERSION)),
        (Reply::bulk_str("proto"), Reply::Int(proto)),
        (Reply::bulk_str("id"), Reply::Int(session.id as i64)),
        (Reply::bulk_str("mode"), Reply::bulk_str("standalone")),
        (Reply::bulk_str("role"), Reply::bulk_str("master")),
        (Reply::bulk_str("modules"), Reply::Array(vec![])),
    ])
}

/// The Redis version Strata's replies are compatible with (clients check it for features).
pub const REDIS_VERSION: &str = "7.2.0";

pub(super) fn valid_name(n: &[u8]) -> Result<(), Reply> {
    if n.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(err(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

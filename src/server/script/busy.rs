//! What a client gets while a script has run past `busy-reply-threshold` (Redis'
//! `processCommand` during a timed-out script): -BUSY for every command but those Redis marks
//! ALLOW_BUSY. Clients on other cores reach it through the dispatcher ([`busy_reply`]); the
//! script's own core cannot run its connection tasks until the script ends, so the
//! interpreter's hook calls the servicer the net layer installs here ([`install`]), which
//! answers those connections' requests with [`answer`].
//!
//! Never: runs a command that needs a connection's session or a shard from the hook; those
//! wait for the script's end ([`Answer::Wait`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::{epoch_ms, kill, running, RUNNING_SINCE};
use crate::cmd::args::{err, is};
use crate::cmd::wrong_args;
use crate::config::Settings;
use crate::protocol::Reply;
use crate::server::table::{self, Spec};
use crate::server::Core;

const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// Commands Redis 7.0 flags ALLOW_BUSY (`src/commands/*.json`): AUTH, DISCARD, FUNCTION
/// KILL, FUNCTION STATS, HELLO, MULTI, QUIT, REPLCONF, RESET, SCRIPT KILL, SHUTDOWN, UNWATCH,
/// WATCH. Whether `args` (of command `spec`) is one.
fn allowed(spec: &Spec, args: &[Bytes]) -> bool {
    let sub = |w: &str| args.get(1).is_some_and(|a| is(a, w));
    match spec.name {
        "script" => sub("kill"),
        "function" => sub("kill") || sub("stats"),
        "auth" | "hello" | "discard" | "multi" | "quit" | "replconf" | "reset" | "shutdown"
        | "unwatch" | "watch" => true,
        _ => false,
    }
}

/// Whether a script has run past the threshold now.
pub fn past_threshold(settings: &Settings) -> bool {
    let since = RUNNING_SINCE.load(Ordering::Relaxed);
    if since == 0 {
        return false;
    }
    let threshold = settings.busy_reply_threshold.load(Ordering::Relaxed);
    threshold != 0 && epoch_ms() + 1 >= since + threshold
}

/// The -BUSY error for the script running now (EVAL's or FCALL's text).
fn busy_error() -> Reply {
    let eval = running()
        .lock()
        .ok()
        .and_then(|r| r.as_ref().map(|r| r.eval))
        .unwrap_or(true);
    err(if eval { BUSY_EVAL } else { BUSY_FUNCTION })
}

/// The -BUSY reply for `spec` while a script has run past the threshold; None otherwise
/// (and for the commands still served then). For clients on the cores not running it.
pub fn busy_reply(settings: &Settings, spec: &Spec, args: &[Bytes]) -> Option<Reply> {
    if !past_threshold(settings) {
        return None;
    }
    // Of those Redis allows: AUTH, HELLO, SCRIPT/FUNCTION KILL, FUNCTION STATS, and SHUTDOWN
    // NOSAVE (any other SHUTDOWN gets -BUSY, as in Redis: saving would wait for the script).
    let served = allowed(spec, args)
        && match spec.name {
            "auth" | "hello" | "script" | "function" => true,
            "shutdown" => shutdown_kind(args) == Shutdown::NoSave,
            _ => false,
        };
    (!served).then(busy_error)
}

/// What the script's own core does with a request that came while the script is busy.
pub enum Answer {
    /// Its reply, sent now.
    Reply(Reply),
    /// Left to the connection, which runs it (and what follows it) once the script ends.
    Wait,
}

/// The reply Redis gives `args` (a whole request, name first) during a busy script, when it
/// can be given without the connection's session.
pub fn answer(core: &Core, args: &[Bytes]) -> Answer {
    let Some(spec) = args.first().and_then(|n| table::lookup(n)) else {
        return Answer::Reply(table::unknown_command(args));
    };
    if !spec.arity_ok(args.len()) {
        return Answer::Reply(wrong_args(spec.name));
    }
    if !allowed(spec, args) {
        return Answer::Reply(busy_error());
    }
    match (spec.name, args.len()) {
        ("script", 2) => Answer::Reply(kill(true)),
        ("function", 2) if is(&args[1], "kill") => Answer::Reply(kill(false)),
        ("function", 2) => Answer::Reply(super::function::stats()),
        ("shutdown", _) => shutdown(core, args),
        _ => Answer::Wait,
    }
}

#[derive(PartialEq)]
enum Shutdown {
    NoSave,
    /// Saving (the default or SAVE): -BUSY.
    Saving,
    /// ABORT, errors: the normal path answers once the script ends.
    Other,
}

fn shutdown_kind(args: &[Bytes]) -> Shutdown {
    let (mut nosave, mut save) = (false, false);
    for a in &args[1..] {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") {
            save = true;
        } else if !(is(a, "now") || is(a, "force")) {
            return Shutdown::Other;
        }
    }
    match (nosave, save) {
        (true, false) => Shutdown::NoSave,
        (false, _) => Shutdown::Saving,
        (true, true) => Shutdown::Other,
    }
}

/// SHUTDOWN during a busy script: NOSAVE ends the process at once (a script that wrote can
/// be stopped no other way); saving gets -BUSY, as in Redis.
fn shutdown(core: &Core, args: &[Bytes]) -> Answer {
    match shutdown_kind(args) {
        Shutdown::NoSave => {}
        Shutdown::Saving => return Answer::Reply(busy_error()),
        Shutdown::Other => return Answer::Wait,
    }
    tracing::info!("SHUTDOWN NOSAVE requested by a client during a busy script");
    core.global.remove_tier_files();
    std::process::exit(0);
}

/// Serves this core's own connections from inside a busy script, given the answer for each
/// request.
pub type Servicer = Rc<dyn Fn(&dyn Fn(&[Bytes]) -> Answer)>;

thread_local! {
    static SERVICER: RefCell<Option<Servicer>> = const { RefCell::new(None) };
}

/// Sets this core's servicer (the net layer's, once per core).
pub fn install(s: Servicer) {
    SERVICER.with(|c| *c.borrow_mut() = Some(s));
}

/// Called from the interpreter's hook while the script is past the threshold: answers what
/// this core's idle connections sent meanwhile.
pub fn serve_own_core(core: &Core) {
    let s = SERVICER.with(|c| c.borrow().clone());
    if let Some(s) = s {
        s(&|args| answer(core, args));
    }
}

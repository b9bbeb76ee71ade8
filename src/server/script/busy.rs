//! What a client gets while a script has run past `busy-reply-threshold` (Redis'
//! `processCommand` during a timed-out script): -BUSY for every command but those Redis marks
//! ALLOW_BUSY, which run; inside MULTI a refusal makes EXEC abort, and a refused EXEC
//! discards the transaction with -EXECABORT. Clients on other cores reach it through the
//! dispatcher ([`busy_reply`]); the script's own core cannot run its connection tasks until
//! the script ends, so the interpreter's hook calls the servicer the net layer installs here
//! ([`install`]), which answers those connections' requests with [`answer`] by the session
//! state each lent ([`View`]), and hands the changes back ([`apply`]).
//!
//! HELLO, RESET and WATCH are answered from the hook as Redis answers them; what they change
//! beyond the view (the client's name, subscriptions, tracking) the connection applies when it
//! takes over ([`apply`]): nothing can observe the difference meanwhile, as every other client
//! gets -BUSY. WATCH registers its keys at once, on every shard, under the script's
//! transaction (which holds them all), so a write the script makes after the WATCH reply
//! fails the EXEC, as in Redis; a WATCH from another core's client does the same beside the
//! script ([`on_shard_beside_script`]: its own shard in place, the script's by the hook). A
//! connection accepted but not started yet has its client id already (given at accept, as
//! Redis does), so HELLO is answered for it too.
//!
//! Never: runs from the hook a command that needs a shard (but WATCH's registration, under
//! the script's own locks or asked by another core), or in MULTI the ALLOW_BUSY commands
//! Redis queues: those and what follows them wait for the script's end ([`Answer::Wait`]).
//! Memcached connections on the script's core wait too (memcached has no BUSY).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

use super::{epoch_ms, kill, running, RUNNING_SINCE};
use crate::cmd::args::{err, is, ERR_NOAUTH};
use crate::cmd::wrong_args;
use crate::config::Settings;
use crate::protocol::Reply;
use crate::server::cmdstats;
use crate::server::core::{shard_job, Job, Msg};
use crate::server::locked::Locked;
use crate::server::multi::WatchedKey;
use crate::server::session::{ReplyMode, Session};
use crate::server::table::{self, Spec, NOAUTH, NO_MULTI, PUBSUB_OK};
use crate::server::Core;
use crate::shard::Shard;

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

/// The reply for `spec` while a script has run past the threshold; None otherwise (and for
/// the commands Redis still runs then, ALLOW_BUSY: they run as usual). For clients on the
/// cores not running it, after the checks Redis makes first (`dispatch::admit`). As Redis'
/// rejectCommand: a refusal inside MULTI makes EXEC abort, and a refused EXEC discards the
/// transaction with -EXECABORT.
pub fn busy_reply(
    core: &Core,
    session: &mut Session,
    spec: &Spec,
    args: &[Bytes],
) -> Option<Reply> {
    if !past_threshold(&core.global.settings) {
        return None;
    }
    // SHUTDOWN NOSAVE only (saving would wait for the script: -BUSY, as in Redis).
    let served =
        allowed(spec, args) && (spec.name != "shutdown" || shutdown_kind(args) == Shutdown::NoSave);
    if served {
        return None;
    }
    let busy = busy_error();
    if spec.name == "exec" {
        crate::server::multi::discard_state(core, session);
        return Some(exec_abort(&busy));
    }
    if session.multi.queuing() {
        session.multi.refuse();
    }
    Some(busy)
}

/// EXEC's reply when it is refused with `why` (Redis' execCommandAbort).
fn exec_abort(why: &Reply) -> Reply {
    let text = match why {
        Reply::Error(e) => e.as_str(),
        _ => "",
    };
    Reply::Error(format!(
        "EXECABORT Transaction discarded because of: {text}"
    ))
}

/// What the script's own core does with a request that came while the script is busy.
pub enum Answer {
    /// Its reply, sent now (unless CLIENT REPLY silences it).
    Reply(Reply),
    /// Left to the connection, which runs it (and what follows it) once the script ends.
    Wait,
}

/// The session state the hook answers a connection by, lent with its socket; the hook changes
/// it as the commands it answers would, and [`apply`] hands the changes back.
#[derive(Clone)]
pub struct View {
    /// The session's client id (given when the connection was accepted).
    pub id: u64,
    pub authed: bool,
    pub resp3: bool,
    /// In RESP2 subscribe mode.
    pub subscribed: bool,
    /// In MULTI: Some(whether a command was refused since).
    pub multi: Option<bool>,
    pub reply: ReplyMode,
    /// The watched keys are forgotten (UNWATCH, DISCARD, a refused EXEC).
    pub unwatch: bool,
    /// QUIT answered: the connection closes.
    pub quit: bool,
    /// RESET answered: the session is reset (before the rest of the view applies).
    pub reset: bool,
    /// The client's name HELLO SETNAME gave.
    pub name: Option<String>,
    /// The session's db.
    pub db: usize,
    /// Keys WATCH registered (after any UNWATCH or RESET), for the session.
    pub watched: Vec<WatchedKey>,
    /// Keys registered here and unwatched since, to forget.
    pub forget: Vec<WatchedKey>,
}

impl View {
    pub fn of(session: &Session) -> View {
        View {
            id: session.id,
            resp3: session.resp3,
            subscribed: session.subs.active() && !session.resp3,
            multi: session.multi.queuing().then(|| session.multi.refused()),
            reply: session.reply_mode,
            db: session.db,
            ..View::fresh(session.id, session.authed)
        }
    }

    /// What a new connection's session (client `id`) looks like before it starts.
    pub fn fresh(id: u64, authed: bool) -> View {
        View {
            id,
            authed,
            resp3: false,
            subscribed: false,
            multi: None,
            reply: ReplyMode::On,
            unwatch: false,
            quit: false,
            reset: false,
            name: None,
            db: 0,
            watched: Vec::new(),
            forget: Vec::new(),
        }
    }

    /// UNWATCH, DISCARD, a refused EXEC, RESET: nothing stays watched.
    fn unwatch_all(&mut self) {
        self.unwatch = true;
        self.forget.append(&mut self.watched);
    }

    /// Redis' flagTransaction: a refusal inside MULTI makes EXEC abort.
    fn refuse(&mut self, reply: Reply) -> Answer {
        if self.multi.is_some() {
            self.multi = Some(true);
        }
        Answer::Reply(reply)
    }
}

/// Gives `session` the changes the hook made to its view `v` (taken when it was lent).
pub async fn apply(core: &Rc<Core>, session: &mut Session, v: View) {
    if v.reset {
        crate::server::admin::pubsub::reset_session(core, session);
    }
    // Those unwatched since leave with the session's own.
    crate::server::multi::adopt_watches(session, v.forget);
    if v.unwatch {
        crate::server::multi::discard_state(core, session);
    }
    crate::server::multi::adopt_watches(session, v.watched);
    match (session.multi.queuing(), v.multi) {
        (true, None) => crate::server::multi::discard_state(core, session),
        (false, Some(refused)) => {
            crate::server::multi::begin(session);
            if refused {
                session.multi.refuse();
            }
        }
        (true, Some(true)) => session.multi.refuse(),
        _ => {}
    }
    session.reply_mode = v.reply;
    session.authed = v.authed;
    if v.resp3 != session.resp3 {
        session.set_resp3(v.resp3);
    }
    if let Some(n) = v.name {
        if let Ok(mut m) = session.client.name.lock() {
            *m = n;
        }
    }
    if v.quit {
        session.close_after_reply = true;
    }
}

/// The reply Redis gives `args` (a whole request, name first) during a busy script, checked
/// in processCommand's order, for a connection in state `v`; Wait for what needs more of the
/// session than `v` (in MULTI, the ALLOW_BUSY commands Redis queues). `locked`: the running
/// script's transaction (WATCH registers its keys under it).
/// Counted in INFO commandstats as the dispatcher counts: refused, or run.
pub fn answer(core: &Rc<Core>, locked: &Locked, v: &mut View, args: &[Bytes]) -> Answer {
    let spec = args.first().and_then(|n| table::lookup(n));
    let target = cmdstats::target_of(spec, args);
    let start = cmdstats::now();
    let (answer, ran) = answer_counted(core, locked, v, args);
    if let Answer::Reply(r) = &answer {
        if ran {
            let track = core.global.settings.latency_tracking();
            cmdstats::ran(target, r, start, track);
        } else {
            cmdstats::rejected(target, r);
        }
    }
    answer
}

/// [`answer`], with whether the command ran (else it was refused).
fn answer_counted(
    core: &Rc<Core>,
    locked: &Locked,
    v: &mut View,
    args: &[Bytes],
) -> (Answer, bool) {
    let refused = |a: Answer| (a, false);
    let Some(spec) = args.first().and_then(|n| table::lookup(n)) else {
        return refused(v.refuse(table::unknown_command(args)));
    };
    if !spec.arity_ok(args.len()) {
        return refused(v.refuse(wrong_args(spec.name)));
    }
    if !v.authed && !spec.has(NOAUTH) {
        return refused(v.refuse(err(ERR_NOAUTH)));
    }
    if v.multi.is_some() && spec.has(NO_MULTI) {
        return refused(v.refuse(err("ERR Command not allowed inside a transaction")));
    }
    if v.subscribed && !spec.has(PUBSUB_OK) {
        return refused(v.refuse(Reply::Error(format!("ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", spec.name))));
    }
    if !allowed(spec, args) {
        let busy = busy_error();
        if spec.name == "exec" {
            v.multi = None;
            v.unwatch_all();
            return refused(Answer::Reply(exec_abort(&busy)));
        }
        return refused(v.refuse(busy));
    }
    let in_multi = v.multi.is_some();
    let answer = ran(core, locked, v, spec, args, in_multi);
    if let Answer::Reply(_) = answer {
        // Run, not refused: counted as Redis' call() counts it.
        RAN.fetch_add(1, Ordering::Relaxed);
    }
    (answer, true)
}

/// Commands the hooks of every core ran (not refused) since the last CONFIG RESETSTAT, for
/// INFO's total_commands_processed.
static RAN: AtomicU64 = AtomicU64::new(0);

/// See [`RAN`].
pub fn commands_ran() -> u64 {
    RAN.load(Ordering::Relaxed)
}

/// CONFIG RESETSTAT.
pub fn reset_stats() {
    RAN.store(0, Ordering::Relaxed);
}

/// [`answer`] for an ALLOW_BUSY command.
fn ran(
    core: &Rc<Core>,
    locked: &Locked,
    v: &mut View,
    spec: &Spec,
    args: &[Bytes],
    in_multi: bool,
) -> Answer {
    match (spec.name, args.len()) {
        ("multi", _) if in_multi => Answer::Reply(err("ERR MULTI calls can not be nested")),
        ("multi", _) => {
            v.multi = Some(false);
            Answer::Reply(Reply::Ok)
        }
        ("discard", _) if in_multi => {
            v.multi = None;
            v.unwatch_all();
            Answer::Reply(Reply::Ok)
        }
        ("discard", _) => Answer::Reply(err("ERR DISCARD without MULTI")),
        ("watch", _) if in_multi => Answer::Reply(err("ERR WATCH inside MULTI is not allowed")),
        ("quit", _) => {
            v.quit = true;
            Answer::Reply(Reply::Ok)
        }
        // Never queued (Redis' resetCommand).
        ("reset", _) => {
            v.unwatch_all();
            let fresh = View::fresh(v.id, core.global.settings.requirepass().is_empty());
            let old = std::mem::replace(v, fresh);
            v.forget = old.forget;
            v.reset = true;
            v.unwatch = true;
            Answer::Reply(Reply::Status("RESET"))
        }
        // Queued in MULTI (the connection queues it).
        _ if in_multi => Answer::Wait,
        ("watch", _) => {
            // A key named twice (here or before the script) is registered twice and
            // forgotten twice: the same as once.
            match crate::server::multi::watch_from_hook(core, locked, v.db, &args[1..]) {
                Some(ws) => {
                    v.watched.extend(ws);
                    Answer::Reply(Reply::Ok)
                }
                None => Answer::Reply(err("ERR server is shutting down")),
            }
        }
        ("hello", _) => {
            let mut h = crate::server::admin::connection::Hello {
                id: v.id,
                resp3: v.resp3,
                authed: v.authed,
                name: None,
            };
            let r = crate::server::admin::connection::hello_with(core, args, &mut h);
            v.authed = h.authed;
            v.resp3 = h.resp3;
            if h.name.is_some() {
                v.name = h.name;
            }
            if v.resp3 {
                // RESP3 has no subscribe mode.
                v.subscribed = false;
            }
            Answer::Reply(r)
        }
        ("auth", _) => match crate::server::admin::connection::authenticate(core, args) {
            Ok(()) => {
                v.authed = true;
                Answer::Reply(Reply::Ok)
            }
            Err(e) => Answer::Reply(e),
        },
        ("unwatch", _) => {
            v.unwatch_all();
            Answer::Reply(Reply::Ok)
        }
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
pub type Servicer = Rc<dyn Fn(&dyn Fn(&mut View, &[Bytes]) -> Answer)>;

thread_local! {
    static SERVICER: RefCell<Option<Servicer>> = const { RefCell::new(None) };
}

/// Sets this core's servicer (the net layer's, once per core).
pub fn install(s: Servicer) {
    SERVICER.with(|c| *c.borrow_mut() = Some(s));
}

/// Called from the interpreter's hook while the script (holding `locked`) is past the
/// threshold: runs what other cores' WATCH asked of this shard, and answers what this core's
/// idle connections sent meanwhile.
pub fn serve_own_core(core: &Rc<Core>, locked: &Locked) {
    run_hook_jobs(core);
    let s = SERVICER.with(|c| c.borrow().clone());
    if let Some(s) = s {
        s(&|v, args| answer(core, locked, v, args));
    }
}

/// The core of the script past the threshold now; None when none is.
pub fn busy_core(settings: &Settings) -> Option<usize> {
    if !past_threshold(settings) {
        return None;
    }
    running()
        .lock()
        .ok()
        .and_then(|r| r.as_ref().map(|r| r.core))
}

/// A job for shard `.0` that whichever comes first runs: the busy script's hook, or that
/// core's mailbox once the script ended.
type HookJob = (usize, Arc<Mutex<Option<Job>>>);

fn hook_jobs() -> &'static Mutex<Vec<HookJob>> {
    static Q: OnceLock<Mutex<Vec<HookJob>>> = OnceLock::new();
    Q.get_or_init(Default::default)
}

/// Takes `job` out of its slot (None when the other path ran it).
fn take(job: &Mutex<Option<Job>>) -> Option<Job> {
    job.lock().ok().and_then(|mut j| j.take())
}

/// Runs `f` on `shard` now although the busy script on `script_core` holds every shard, as
/// Redis runs WATCH during a busy script: in place on this core's own shard, by the script's
/// hook on its core, at once on any other (their executors are free; the script's jobs there
/// run whole, so `f` lands between two of them). None when shutting down. Only for what
/// changes no data (WATCH's registration).
pub async fn on_shard_beside_script<R, F>(
    core: &Rc<Core>,
    shard: usize,
    script_core: usize,
    f: F,
) -> Option<R>
where
    R: Send + 'static,
    F: FnOnce(&mut Shard) -> R + Send + 'static,
{
    if shard == core.id {
        return Some(f(&mut core.shard.borrow_mut()));
    }
    let (job, rx) = shard_job(f);
    let job = Arc::new(Mutex::new(Some(job)));
    if shard == script_core {
        if let Ok(mut q) = hook_jobs().lock() {
            q.push((shard, job.clone()));
        }
    }
    // Also mailed, so it runs even when the script ends before its hook took it.
    let mail: Job = Box::new(move |core| {
        if let Some(j) = take(&job) {
            j(core)
        }
    });
    let _waiting = crate::runtime::remote_wait();
    if !core.global.send(shard, Msg::RunTx(0, mail)) {
        return None;
    }
    rx.await.ok()
}

/// Runs the jobs other cores left for this core's shard (see [`on_shard_beside_script`]).
fn run_hook_jobs(core: &Rc<Core>) {
    let mine: Vec<HookJob> = {
        let Ok(mut q) = hook_jobs().lock() else {
            return;
        };
        if q.is_empty() {
            return;
        }
        let (mine, rest) = std::mem::take(&mut *q)
            .into_iter()
            .partition(|(s, _)| *s == core.id);
        *q = rest;
        mine
    };
    for (_, job) in mine {
        // The hook runs between the script's commands: the shard is free.
        if core.shard.try_borrow_mut().is_err() {
            if let Ok(mut q) = hook_jobs().lock() {
                q.push((core.id, job));
            }
            continue;
        }
        if let Some(j) = take(&job) {
            j(core);
        }
    }
}

/// Drops what a script's end left in the hook's queue: those jobs run from their mail.
pub fn forget_hook_jobs() {
    if let Ok(mut q) = hook_jobs().lock() {
        q.clear();
    }
}

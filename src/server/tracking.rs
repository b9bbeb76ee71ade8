//! Client-side caching as Redis 7 does it: CLIENT TRACKING (default, BCAST, OPTIN, OPTOUT,
//! NOLOOP, REDIRECT), CLIENT CACHING / GETREDIR / TRACKINGINFO, and the delivery of
//! invalidations.
//!
//! A client's tracking flags and redirect live in its [`ClientInfo`] (any core reads them); its
//! BCAST prefixes in its session and in the process-wide [`Registry`]. Default mode's table of
//! keys read lives in the shard that owns each key (`shard::tracking`), which the one change
//! hook of the shard (`shard::watch::Watches::touch`) consults; each core's [`CoreSink`] turns
//! what the shards report into messages: at once for default mode (one key each, as Redis), and
//! for BCAST batched until the core's current work is done (what one event-loop turn of Redis
//! gathers: one message per prefix for a MULTI/EXEC or an MSET). A change another core's
//! client made goes to that client's core ([`Registry`]'s routed keys), which sends it with the
//! rest of the command's changes when the command ends (`Core::hold_invalidations`).
//!
//! Delivery (as Redis' `sendTrackingMessage`): a RESP3 client (or RESP3 redirect target) gets
//! the push `invalidate [keys]`; a RESP2 redirect target that subscribes to anything gets a
//! `message` on `__redis__:invalidate`; a redirect to a client gone marks the tracker broken and
//! tells it (RESP3) `tracking-redir-broken <id>`. FLUSHDB / FLUSHALL send a null instead of
//! keys to every tracking client.
//!
//! Never: holds the registry's lock while posting, or keeps anything of a client after it
//! disconnects but table entries with its id (dropped at the key's next change, or by the
//! `tracking-table-max-keys` limit: memory stays bounded).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;

use super::core::Global;
use super::session::{ClientInfo, Delivery, Session};
use crate::cmd::args::*;
use crate::protocol::Reply;
use crate::shard::tracking::{self as table, Caller, Invalidations};

/// Tracking is on.
pub const ON: u32 = 1;
pub const BCAST: u32 = 1 << 1;
pub const OPTIN: u32 = 1 << 2;
pub const OPTOUT: u32 = 1 << 3;
pub const NOLOOP: u32 = 1 << 4;
/// CLIENT CACHING yes (OPTIN) / no (OPTOUT) given for the next command.
pub const CACHING: u32 = 1 << 5;
/// The redirect target is gone.
pub const BROKEN: u32 = 1 << 6;

/// The channel a RESP2 redirect target hears invalidations on.
const CHANNEL: &[u8] = b"__redis__:invalidate";

/// Process-wide tracking state: BCAST prefixes with their clients, and how many clients track.
#[derive(Default)]
pub struct Registry {
    prefixes: RwLock<BTreeMap<Bytes, BTreeSet<u64>>>,
    clients: AtomicUsize,
    /// BCAST: keys other cores' shards changed for work a core started, by that core; it
    /// sends them with its own when that work ends.
    routed: Mutex<HashMap<u16, BTreeMap<Bytes, u64>>>,
    /// Whether `routed` may hold keys (skips its lock on every flush otherwise).
    any_routed: AtomicBool,
}

impl Registry {
    /// Clients with tracking on (INFO `tracking_clients`).
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// Prefixes some BCAST client holds (INFO `tracking_total_prefixes`).
    pub fn prefixes(&self) -> usize {
        self.prefixes.read().map(|p| p.len()).unwrap_or(0)
    }

    fn add_prefix(&self, prefix: &Bytes, id: u64) {
        if let Ok(mut p) = self.prefixes.write() {
            p.entry(prefix.clone()).or_default().insert(id);
            table::set_bcast_prefixes(p.len());
        }
    }

    fn remove_prefix(&self, prefix: &Bytes, id: u64) {
        if let Ok(mut p) = self.prefixes.write() {
            if let Some(ids) = p.get_mut(prefix) {
                ids.remove(&id);
                if ids.is_empty() {
                    p.remove(prefix);
                }
            }
            table::set_bcast_prefixes(p.len());
        }
    }

    /// (prefix, its clients) for every prefix some key of `keys` starts with.
    /// Keeps `key`, changed by `writer` for work core `origin` started, for that core.
    fn route(&self, origin: u16, key: &[u8], writer: u64) {
        if let Ok(mut r) = self.routed.lock() {
            merge_change(r.entry(origin).or_default(), key, writer);
            self.any_routed.store(true, Ordering::Release);
        }
    }

    /// The keys other cores kept for core `core` (see [`Registry::route`]).
    fn take_routed(&self, core: u16) -> Option<BTreeMap<Bytes, u64>> {
        if !self.any_routed.load(Ordering::Acquire) {
            return None;
        }
        let mut r = self.routed.lock().ok()?;
        let keys = r.remove(&core);
        if r.is_empty() {
            self.any_routed.store(false, Ordering::Release);
        }
        keys
    }

    fn matching(&self, keys: &BTreeMap<Bytes, u64>) -> Vec<(Bytes, Vec<u64>)> {
        let Ok(p) = self.prefixes.read() else {
            return Vec::new();
        };
        p.iter()
            .filter(|(prefix, _)| {
                keys.range::<Bytes, _>((*prefix).clone()..)
                    .next()
                    .is_some_and(|(k, _)| k.starts_with(prefix))
            })
            .map(|(prefix, ids)| (prefix.clone(), ids.iter().copied().collect()))
            .collect()
    }
}

/// What a session's next command runs as, for the shards (see `shard::tracking::Caller`):
/// its keys are remembered when tracking is on in default mode, unless OPTIN without CLIENT
/// CACHING yes, or OPTOUT with CLIENT CACHING no.
pub fn caller(session: &Session) -> Caller {
    let f = session.client.tracking.load(Ordering::Relaxed);
    let track = f & ON != 0
        && f & BCAST == 0
        && !(f & OPTIN != 0 && f & CACHING == 0)
        && !(f & OPTOUT != 0 && f & CACHING != 0);
    Caller {
        id: session.id,
        track,
        script: super::txn::in_script(),
        core: u16::try_from(session.client.core).ok(),
    }
}

/// After a request ran (not queued): CLIENT CACHING lasts for one command or transaction, as
/// in Redis, which keeps it across CLIENT subcommands and while MULTI queues.
pub fn after_command(session: &Session, was_client: bool) {
    let t = &session.client.tracking;
    if t.load(Ordering::Relaxed) & CACHING != 0 && !was_client && !session.multi.queuing() {
        t.fetch_and(!CACHING, Ordering::Relaxed);
    }
}

/// Sends `payload` (an array of keys, or a null array for a flush) to tracking client `c`, or to
/// where it redirects.
pub fn send(global: &Global, c: &ClientInfo, payload: Reply) {
    let redirect = c.redirect.load(Ordering::Relaxed);
    if redirect == 0 {
        deliver(global, c, payload, false);
        return;
    }
    match global.clients.get(redirect) {
        Some(target) => deliver(global, &target, payload, true),
        None => {
            c.tracking.fetch_or(BROKEN, Ordering::Relaxed);
            if c.resp.load(Ordering::Relaxed) == 3 {
                c.post(
                    global,
                    Delivery::Push(Reply::Push(vec![
                        Reply::bulk_str("tracking-redir-broken"),
                        Reply::Int(redirect as i64),
                    ])),
                );
            }
        }
    }
}

fn deliver(global: &Global, target: &ClientInfo, payload: Reply, redirected: bool) {
    let msg = if target.resp.load(Ordering::Relaxed) == 3 {
        vec![Reply::bulk_str("invalidate"), payload]
    } else if redirected && target.subscribed() {
        vec![
            Reply::bulk_str("message"),
            Reply::bulk(Bytes::from_static(CHANNEL)),
            payload,
        ]
    } else {
        // RESP2 without a redirect: the connection has no way to carry it.
        return;
    };
    target.post(global, Delivery::Push(Reply::Push(msg)));
}

/// FLUSHDB / FLUSHALL ran (the shards dropped their tables): every tracking client gets a null
/// invalidation; the flushing client `writer` after its reply, as Redis.
pub fn flushed(global: &Global, writer: u64) {
    if global.tracking.clients() == 0 {
        return;
    }
    let mut tracking = Vec::new();
    global.clients.retain(|c| {
        if c.tracking.load(Ordering::Relaxed) & ON != 0 {
            tracking.push(c.clone());
        }
        true
    });
    for c in tracking {
        if c.id == writer && keep_own(&c, &Reply::Nil) {
            continue;
        }
        send(global, &c, Reply::Nil);
    }
}

thread_local! {
    /// While a command of its own runs on this core's shard: its client, and the invalidations
    /// it has to get after the command's reply (see [`own_pushes`]).
    static OWN: RefCell<Option<(u64, Vec<Reply>)>> = const { RefCell::new(None) };
}

/// Runs `f`, a command of client `id`'s own, and returns the invalidation pushes `id` gets for
/// keys it changed itself, to go right after the command's reply.
pub fn own_pushes<R>(id: u64, f: impl FnOnce() -> R) -> (R, Vec<Reply>) {
    let prev = OWN.with(|o| o.borrow_mut().replace((id, Vec::new())));
    let r = f();
    let own = OWN.with(|o| std::mem::replace(&mut *o.borrow_mut(), prev));
    (r, own.map(|(_, v)| v).unwrap_or_default())
}

/// Keeps `payload` for the command of client `c` running now when `c` is that client and gets
/// its invalidations on its own connection (RESP3, without a redirect or redirected to
/// itself); false otherwise.
fn keep_own(c: &ClientInfo, payload: &Reply) -> bool {
    let redirect = c.redirect.load(Ordering::Relaxed);
    if (redirect != 0 && redirect != c.id) || c.resp.load(Ordering::Relaxed) != 3 {
        return false;
    }
    let push = || Reply::Push(vec![Reply::bulk_str("invalidate"), payload.clone()]);
    let kept = OWN.with(|o| match &mut *o.borrow_mut() {
        Some((id, pushes)) if *id == c.id => {
            pushes.push(push());
            true
        }
        _ => false,
    });
    kept || c
        .own_pushes
        .lock()
        .ok()
        .and_then(|mut p| p.as_mut().map(|v| v.push(push())))
        .is_some()
}

/// Runs `fut`, a command of `c`'s that may run on several cores (EXEC, a script, a cross-shard
/// command), and puts after its reply the invalidations of keys `c` tracks and it changed, as
/// Redis sends them after the command; in the order of `keys` when given (the parts of a
/// split command run at once on their shards, Redis changes the keys in argument order).
pub async fn with_own_pushes(
    c: &ClientInfo,
    keys: Option<Vec<Bytes>>,
    fut: impl std::future::Future<Output = Reply>,
) -> Reply {
    if c.tracking.load(Ordering::Relaxed) & ON == 0 {
        return fut.await;
    }
    if let Ok(mut p) = c.own_pushes.lock() {
        *p = Some(Vec::new());
    }
    let reply = fut.await;
    let own = c.own_pushes.lock().ok().and_then(|mut p| p.take());
    match own {
        Some(mut own) if !own.is_empty() => {
            if let Some(keys) = keys {
                let at = |p: &Reply| match p {
                    Reply::Push(v) => match v.get(1) {
                        Some(Reply::Array(k)) => match k.first() {
                            Some(Reply::Bulk(k)) => keys.iter().position(|a| a == k),
                            _ => None,
                        },
                        _ => None,
                    },
                    _ => None,
                };
                own.sort_by_key(at);
            }
            let mut all = Vec::with_capacity(1 + own.len());
            all.push(reply);
            all.extend(own);
            Reply::Many(all)
        }
        _ => reply,
    }
}

/// Each core's outlet for what its shard reports (installed in `Shard::watches.tracking`).
pub struct CoreSink {
    global: Arc<Global>,
    /// This core's id (see [`Caller::core`]).
    core: u16,
    me: Weak<CoreSink>,
    /// BCAST: keys changed since the last flush, with the client whose command changed each
    /// last (0: none), in key order as Redis sends them.
    pending: RefCell<BTreeMap<Bytes, u64>>,
    scheduled: Cell<bool>,
    /// Work spanning shards running now (see `Invalidations::hold`).
    held: Cell<u32>,
}

impl CoreSink {
    pub fn new(global: Arc<Global>, core: usize) -> Rc<CoreSink> {
        Rc::new_cyclic(|me| CoreSink {
            global,
            core: u16::try_from(core).unwrap_or(u16::MAX),
            me: me.clone(),
            pending: RefCell::default(),
            scheduled: Cell::new(false),
            held: Cell::new(0),
        })
    }

    /// Sends what BCAST clients have to hear of the keys gathered (here and, for work this
    /// core started, on other cores' shards): per prefix one array of the matching keys, less,
    /// for a NOLOOP client, the keys it changed itself.
    fn send_gathered(&self) {
        if self.held.get() > 0 {
            return;
        }
        let routed = self.global.tracking.take_routed(self.core);
        if !self.scheduled.replace(false) && routed.is_none() {
            return;
        }
        let mut keys = std::mem::take(&mut *self.pending.borrow_mut());
        for (k, w) in routed.into_iter().flatten() {
            merge_change(&mut keys, &k, w);
        }
        if keys.is_empty() {
            return;
        }
        for (prefix, ids) in self.global.tracking.matching(&keys) {
            let matched: Vec<(&Bytes, u64)> = keys
                .range::<Bytes, _>(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(&prefix))
                .map(|(k, w)| (k, *w))
                .collect();
            let all = Reply::Array(
                matched
                    .iter()
                    .map(|(k, _)| Reply::bulk((*k).clone()))
                    .collect(),
            );
            for id in ids {
                let Some(c) = self.global.clients.get(id) else {
                    continue;
                };
                if c.tracking.load(Ordering::Relaxed) & NOLOOP == 0 {
                    send(&self.global, &c, all.clone());
                    continue;
                }
                let others: Vec<Reply> = matched
                    .iter()
                    .filter(|(_, w)| *w != id)
                    .map(|(k, _)| Reply::bulk((*k).clone()))
                    .collect();
                if !others.is_empty() {
                    send(&self.global, &c, Reply::Array(others));
                }
            }
        }
    }
}

impl Invalidations for CoreSink {
    fn invalidate(&self, ids: &[u64], key: &[u8], writer: u64) {
        let payload = Reply::Array(vec![Reply::bulk(Bytes::copy_from_slice(key))]);
        for &id in ids {
            let Some(c) = self.global.clients.get(id) else {
                continue;
            };
            let f = c.tracking.load(Ordering::Relaxed);
            // Off since, or switched to BCAST (which does not hear of keys read before).
            if f & ON == 0 || f & BCAST != 0 || (f & NOLOOP != 0 && id == writer) {
                continue;
            }
            if id == writer && keep_own(&c, &payload) {
                continue;
            }
            send(&self.global, &c, payload.clone());
        }
    }

    fn flush(&self) {
        self.send_gathered();
    }

    fn hold(&self, on: bool) {
        if on {
            self.held.set(self.held.get() + 1);
        } else {
            self.held.set(self.held.get().saturating_sub(1));
            self.send_gathered();
        }
    }

    fn changed(&self, key: &[u8], writer: u64, origin: Option<u16>) {
        if let Some(o) = origin.filter(|&o| o != self.core) {
            // The core that started the work sends it with the rest of its changes when the
            // work ends (after this job's reply reaches it).
            self.global.tracking.route(o, key, writer);
            return;
        }
        merge_change(&mut self.pending.borrow_mut(), key, writer);
        if self.scheduled.replace(true) {
            return;
        }
        // Normally sent when the work that changed the key ends, before its reply goes out
        // (`Core::flush_invalidations`); this catches work that ends elsewhere.
        let me = self.me.clone();
        crate::runtime::spawn(async move {
            // Let the work running now (a transaction's jobs, a batch) finish first.
            YieldOnce(false).await;
            if let Some(sink) = me.upgrade() {
                sink.send_gathered();
            }
        })
        .detach();
    }
}

/// Adds the change of `key` by `writer` to `keys`: a second report of the same change (its
/// transaction's, with no client) keeps the writer.
fn merge_change(keys: &mut BTreeMap<Bytes, u64>, key: &[u8], writer: u64) {
    match keys.get_mut(key) {
        Some(w) => {
            if writer != 0 {
                *w = writer;
            }
        }
        None => {
            keys.insert(Bytes::copy_from_slice(key), writer);
        }
    }
}

/// Returns pending once, so that tasks ready now run before the rest.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Turns tracking off for `session` (CLIENT TRACKING OFF, disconnect): its prefixes leave the
/// registry; its flags are cleared.
pub fn disable(global: &Global, session: &mut Session) {
    for p in std::mem::take(&mut session.tracking_prefixes) {
        global.tracking.remove_prefix(&p, session.id);
    }
    let t = &session.client.tracking;
    if t.swap(0, Ordering::Relaxed) & ON != 0 {
        global.tracking.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP].
pub fn client_tracking(global: &Global, session: &mut Session, args: &[Bytes]) -> Reply {
    let mut options = 0u32;
    let mut redirect: i64 = 0;
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if is(a, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return err("ERR A client can only redirect to a single other client");
            }
            redirect = match parse_i64(&args[j]) {
                Some(v) => v,
                None => return err(ERR_NOT_INT),
            };
            if redirect <= 0 || global.clients.get(redirect as u64).is_none() {
                return err("ERR The client ID you want redirect to does not exist");
            }
        } else if is(a, "bcast") {
            options |= BCAST;
        } else if is(a, "optin") {
            options |= OPTIN;
        } else if is(a, "optout") {
            options |= OPTOUT;
        } else if is(a, "noloop") {
            options |= NOLOOP;
        } else if is(a, "prefix") && more {
            j += 1;
            prefixes.push(args[j].clone());
        } else {
            return err(ERR_SYNTAX);
        }
        j += 1;
    }
    if is(&args[2], "off") {
        disable(global, session);
        return Reply::Ok;
    }
    if !is(&args[2], "on") {
        return err(ERR_SYNTAX);
    }
    let flags = session.client.tracking.load(Ordering::Relaxed);
    if options & BCAST == 0 && !prefixes.is_empty() {
        return err("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if flags & ON != 0 && (flags & BCAST != 0) != (options & BCAST != 0) {
        return err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if options & BCAST != 0 && options & (OPTIN | OPTOUT) != 0 {
        return err("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if options & OPTIN != 0 && options & OPTOUT != 0 {
        return err("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if (options & OPTIN != 0 && flags & OPTOUT != 0)
        || (options & OPTOUT != 0 && flags & OPTIN != 0)
    {
        return err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if options & BCAST != 0 {
        if let Some(e) = prefix_collision(&session.tracking_prefixes, &prefixes) {
            return e;
        }
    }
    // Enable (again): the mode flags are replaced, CLIENT CACHING stays.
    let t = &session.client.tracking;
    let kept = flags & CACHING;
    t.store(ON | kept | options, Ordering::Relaxed);
    session
        .client
        .redirect
        .store(redirect as u64, Ordering::Relaxed);
    if flags & ON == 0 {
        global.tracking.clients.fetch_add(1, Ordering::Relaxed);
    }
    if options & BCAST != 0 {
        if prefixes.is_empty() {
            prefixes.push(Bytes::new());
        }
        for p in prefixes {
            if session.tracking_prefixes.insert(p.clone()) {
                global.tracking.add_prefix(&p, session.id);
            }
        }
    }
    Reply::Ok
}

/// Redis' check that prefixes of one client do not overlap (one a prefix of another), against
/// those it holds and among those given.
fn prefix_collision(held: &BTreeSet<Bytes>, given: &[Bytes]) -> Option<Reply> {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in given.iter().enumerate() {
        if let Some(h) = held.iter().find(|h| overlap(h, p)) {
            return Some(Reply::Error(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                s(p),
                s(h)
            )));
        }
        if let Some(q) = given[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(Reply::Error(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                s(p),
                s(q)
            )));
        }
    }
    None
}

/// CLIENT CACHING YES|NO.
pub fn client_caching(session: &Session, arg: &[u8]) -> Reply {
    let t = &session.client.tracking;
    let f = t.load(Ordering::Relaxed);
    if f & ON == 0 {
        return err("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    }
    if is(arg, "yes") {
        if f & OPTIN == 0 {
            return err(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if is(arg, "no") {
        if f & OPTOUT == 0 {
            return err(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return err(ERR_SYNTAX);
    }
    t.fetch_or(CACHING, Ordering::Relaxed);
    Reply::Ok
}

/// CLIENT GETREDIR: the redirect (0 for none) while tracking, else -1.
pub fn client_getredir(session: &Session) -> Reply {
    Reply::Int(redirect_shown(&session.client))
}

/// The redirect CLIENT GETREDIR and CLIENT LIST's `redir=` show.
pub fn redirect_shown(c: &ClientInfo) -> i64 {
    if c.tracking.load(Ordering::Relaxed) & ON != 0 {
        c.redirect.load(Ordering::Relaxed) as i64
    } else {
        -1
    }
}

/// CLIENT TRACKINGINFO.
pub fn client_trackinginfo(session: &Session) -> Reply {
    let f = session.client.tracking.load(Ordering::Relaxed);
    let mut flags = vec![if f & ON != 0 { "on" } else { "off" }];
    if f & BCAST != 0 {
        flags.push("bcast");
    }
    if f & OPTIN != 0 {
        flags.push("optin");
        if f & CACHING != 0 {
            flags.push("caching-yes");
        }
    }
    if f & OPTOUT != 0 {
        flags.push("optout");
        if f & CACHING != 0 {
            flags.push("caching-no");
        }
    }
    if f & NOLOOP != 0 {
        flags.push("noloop");
    }
    if f & BROKEN != 0 {
        flags.push("broken_redirect");
    }
    Reply::Map(vec![
        (
            Reply::bulk_str("flags"),
            Reply::Set(flags.into_iter().map(Reply::bulk_str).collect()),
        ),
        (
            Reply::bulk_str("redirect"),
            Reply::Int(redirect_shown(&session.client)),
        ),
        (
            Reply::bulk_str("prefixes"),
            Reply::Array(
                session
                    .tracking_prefixes
                    .iter()
                    .map(|p| Reply::bulk(p.clone()))
                    .collect(),
            ),
        ),
    ])
}

/// CLIENT LIST / INFO flag letters for tracking, in Redis' order.
pub fn flag_letters(c: &ClientInfo, out: &mut String) {
    let f = c.tracking.load(Ordering::Relaxed);
    if f & ON != 0 {
        out.push('t');
    }
    if f & BROKEN != 0 {
        out.push('R');
    }
    if f & BCAST != 0 {
        out.push('B');
    }
}

/// The shards' part of `tracking-table-max-keys`: each invalidates keys of its own while the
/// total passes the limit, with more effort each tick it stays over (as Redis' cron does).
pub fn limit_table(shard: &mut crate::shard::Shard, max: usize, over_ticks: &Cell<usize>) {
    if max == 0 || table::total_keys() <= max {
        over_ticks.set(0);
        return;
    }
    let effort = 100 * (over_ticks.get() + 1);
    shard.watches.tracking.evict_over(max, effort);
    if table::total_keys() > max {
        over_ticks.set(over_ticks.get() + 1);
    } else {
        over_ticks.set(0);
    }
}

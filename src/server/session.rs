//! Sessions: one per client connection, whatever the protocol. A [`Session`] holds the
//! connection's protocol state (RESP version, selected db, authentication) and the receiving end
//! of its mailbox; its [`ClientInfo`] is what the rest of the server sees of it (CLIENT LIST,
//! CLIENT KILL) and the sending end: any core can post it a [`Delivery`] (a pushed message, the
//! wake-up of a command blocked on keys, a kill).
//!
//! Output is bounded: bytes posted and not yet taken by the connection are counted, and a post
//! that would pass `--pubsub_client_output_limit` drops the client (logged) instead of queueing.
//!
//! Never: touches a socket (the connection task in `net/` does) or a shard.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use futures::StreamExt;

use super::core::Global;
use super::pubsub::Subscriptions;
use super::table::TABLE;
use crate::protocol::Reply;

/// What another core can hand a session.
#[derive(Debug)]
pub enum Delivery {
    /// A message for the client outside any request's reply (pub/sub, invalidations): RESP3
    /// sends it as a push, RESP2 as an array.
    Push(Reply),
    /// Wakes the command blocked on keys under this token; a wake that finds no such command
    /// (it timed out meanwhile) is dropped.
    Wake(u64),
    /// Close the connection (CLIENT KILL, output limit).
    Kill,
}

impl Delivery {
    /// Bytes it holds against the output limit.
    fn weight(&self) -> usize {
        match self {
            Delivery::Push(r) => r.size_hint(),
            Delivery::Wake(_) | Delivery::Kill => 0,
        }
    }
}

/// How a client reached us (for CLIENT LIST / KILL).
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
}

/// What CLIENT LIST/INFO/KILL know about a connection, and its mailbox; shared with the
/// registry, so other cores can reach the session.
pub struct ClientInfo {
    pub id: u64,
    pub peer: Peer,
    /// The core whose task serves this connection (its bell is rung after a post).
    pub core: usize,
    pub created_ms: u64,
    pub last_cmd_ms: AtomicU64,
    pub db: AtomicU32,
    pub resp: AtomicU8,
    pub name: Mutex<String>,
    pub lib_name: Mutex<String>,
    pub lib_ver: Mutex<String>,
    /// Index into the command table of the last command (u32::MAX = none yet).
    pub last_cmd: AtomicU32,
    pub killed: AtomicBool,
    /// Commands queued since MULTI; -1 outside MULTI (CLIENT LIST's `multi`, flag `x`).
    pub multi: AtomicI64,
    /// The token of the command blocked on keys (`server::blocking`); 0 when none is.
    pub blocked: AtomicU64,
    /// CLIENT UNBLOCK's request to that command (`server::blocking::UNBLOCK_*`); 0 when none.
    pub unblock: AtomicU8,
    mailbox: mpsc::UnboundedSender<(Delivery, usize)>,
    /// Bytes posted and not yet taken by the connection.
    pending: AtomicUsize,
    /// Channels, patterns and shard channels subscribed to (CLIENT LIST `sub=`, `psub=`, `ssub=`).
    subscriptions: [AtomicUsize; 3],
    /// CLIENT TRACKING's flags (`server::tracking::ON`, ...), read by the shards that send
    /// invalidations.
    pub tracking: AtomicU32,
    /// CLIENT TRACKING's REDIRECT target (0 = none).
    pub redirect: AtomicU64,
    /// While a command that spans cores runs (EXEC, a script, a cross-shard command): the
    /// invalidations its own writes cause it, to go after its reply (`server::tracking`).
    pub own_pushes: Mutex<Option<Vec<Reply>>>,
}

impl ClientInfo {
    /// One CLIENT LIST line (without the newline), in Redis 7's field order.
    pub fn describe(&self, now_ms: u64) -> String {
        let get = |m: &Mutex<String>| m.lock().map(|s| s.clone()).unwrap_or_default();
        let cmd = TABLE
            .get(self.last_cmd.load(Ordering::Relaxed) as usize)
            .map(|s| s.name)
            .unwrap_or("NULL");
        let multi = self.multi.load(Ordering::Relaxed);
        let [sub, psub, ssub] = self
            .subscriptions
            .each_ref()
            .map(|n| n.load(Ordering::Relaxed));
        // Redis' order: P (pub/sub), x (MULTI), b (blocked); N for none.
        let mut flags = String::new();
        if sub + psub + ssub > 0 {
            flags.push('P');
        }
        if multi >= 0 {
            flags.push('x');
        }
        if self.blocked.load(Ordering::Relaxed) != 0 {
            flags.push('b');
        }
        super::tracking::flag_letters(self, &mut flags);
        if flags.is_empty() {
            flags.push('N');
        }
        format!(
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={sub} psub={psub} ssub={ssub} multi={multi} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={} tot-mem=0 events=r cmd={} user=default redir={} resp={} lib-name={} lib-ver={}",
            self.id,
            self.peer.addr,
            self.peer.laddr,
            self.peer.fd,
            get(&self.name),
            now_ms.saturating_sub(self.created_ms) / 1000,
            now_ms.saturating_sub(self.last_cmd_ms.load(Ordering::Relaxed)) / 1000,
            self.db.load(Ordering::Relaxed),
            self.pending.load(Ordering::Relaxed),
            cmd,
            super::tracking::redirect_shown(self),
            self.resp.load(Ordering::Relaxed),
            get(&self.lib_name),
            get(&self.lib_ver),
        )
    }

    /// Hands the session `d` (from any core). False when the session is gone, or when `d`
    /// would take its waiting output past the limit: the client is then dropped.
    pub fn post(&self, global: &Global, d: Delivery) -> bool {
        if self.killed.load(Ordering::Relaxed) {
            return false;
        }
        let weight = d.weight();
        if weight > 0 {
            let limit = global.settings.pubsub_client_output_limit() as usize;
            let before = self.pending.fetch_add(weight, Ordering::Relaxed);
            if limit > 0 && before + weight > limit {
                self.pending.fetch_sub(weight, Ordering::Relaxed);
                tracing::warn!(
                    client = self.id,
                    addr = %self.peer.addr,
                    pending = before,
                    limit,
                    "dropping a client whose waiting output passed --pubsub_client_output_limit"
                );
                self.kill(global);
                return false;
            }
        }
        if self.mailbox.unbounded_send((d, weight)).is_err() {
            self.pending.fetch_sub(weight, Ordering::Relaxed);
            return false;
        }
        global.ring(self.core);
        true
    }

    /// Makes the connection close: its task wakes from the mailbox if it waits there, or from
    /// its socket (shut down) if it waits on a read or a write.
    pub fn kill(&self, global: &Global) {
        if self.killed.swap(true, Ordering::Relaxed) {
            return;
        }
        if self.mailbox.unbounded_send((Delivery::Kill, 0)).is_ok() {
            global.ring(self.core);
        }
        if self.peer.fd < 0 {
            return;
        }
        // SAFETY: `fd` belongs to a socket that is still registered: connections unregister
        // (under the registry lock held by our caller, or before closing) before the socket
        // closes, so it is not reused. shutdown() only changes the socket's state; it touches
        // no memory of ours.
        unsafe {
            libc::shutdown(self.peer.fd, libc::SHUT_RDWR);
        }
    }

    /// Records the session's subscription counts for CLIENT LIST.
    pub fn set_subscriptions(&self, channels: usize, patterns: usize, shard: usize) {
        for (slot, n) in self.subscriptions.iter().zip([channels, patterns, shard]) {
            slot.store(n, Ordering::Relaxed);
        }
    }

    /// True while the client has any pub/sub subscription (CLIENT LIST TYPE pubsub).
    pub fn subscribed(&self) -> bool {
        self.subscriptions
            .iter()
            .any(|n| n.load(Ordering::Relaxed) > 0)
    }

    /// Bytes posted and not yet taken (CLIENT LIST's `omem`).
    pub fn pending_output(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }
}

/// Every connected client, by id.
#[derive(Default)]
pub struct Registry {
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl Registry {
    pub fn insert(&self, c: Arc<ClientInfo>) {
        if let Ok(mut m) = self.clients.lock() {
            m.insert(c.id, c);
        }
    }

    /// Removes a client before its socket closes, so a concurrent CLIENT KILL can never shut
    /// down a reused file descriptor.
    pub fn remove(&self, id: u64) {
        if let Ok(mut m) = self.clients.lock() {
            m.remove(&id);
        }
    }

    pub fn len(&self) -> usize {
        self.clients.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.clients.lock().ok()?.get(&id).cloned()
    }

    /// Calls `f` on every client in id order.
    pub fn for_each(&self, mut f: impl FnMut(&ClientInfo)) {
        if let Ok(m) = self.clients.lock() {
            m.values().for_each(|c| f(c));
        }
    }

    /// Keeps the clients for which `keep` says true, under the registry's lock.
    pub fn retain(&self, mut keep: impl FnMut(&Arc<ClientInfo>) -> bool) {
        if let Ok(mut m) = self.clients.lock() {
            m.retain(|_, c| keep(c));
        }
    }
}

/// CLIENT REPLY: whether the session's replies are sent (pushes always are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// CLIENT REPLY SKIP: the next command's reply is not sent.
    SkipNext,
}

/// One connection's protocol state and mailbox, owned by its connection task and lent to the
/// dispatcher for each batch.
pub struct Session {
    pub id: u64,
    pub db: usize,
    pub resp3: bool,
    pub authed: bool,
    /// Close the connection once the current batch's replies are written (QUIT, a protocol
    /// error, CLIENT KILL of oneself).
    pub close_after_reply: bool,
    pub client: Arc<ClientInfo>,
    /// MULTI's queue and the keys WATCHed (`server::multi`).
    pub multi: super::multi::MultiState,
    /// Pub/sub subscriptions; any puts a RESP2 session in subscribe mode.
    pub subs: Subscriptions,
    pub reply_mode: ReplyMode,
    /// CLIENT TRACKING BCAST's prefixes (its flags are in `client`).
    pub tracking_prefixes: std::collections::BTreeSet<bytes::Bytes>,
    /// The errors in the reply were counted already (a script's: where they arose, by the
    /// command the script called, Redis' `ignore_error_stats_update`, or as the script
    /// replied them), with how many times INFO counts the command failed.
    pub errors_counted: Option<u32>,
    /// The running command sent another client an error (CLIENT UNBLOCK ... ERROR): INFO
    /// counts it failed, as Redis does.
    pub failed_elsewhere: bool,
    /// Clock ticks (`cmdstats::now`) the running command spent blocked waiting for data: not
    /// its own time in INFO commandstats.
    pub blocked_ticks: u64,
    inbox: mpsc::UnboundedReceiver<(Delivery, usize)>,
    /// Deliveries taken while a command waited for its wake-up, kept for the connection.
    held: VecDeque<(Delivery, usize)>,
    global: Arc<Global>,
}

impl Session {
    /// A new session on core `core`, registered so that CLIENT LIST and other cores see it.
    pub fn open(global: &Arc<Global>, core: usize, peer: Peer) -> Session {
        Session::open_as(global, core, peer, global.next_client_id())
    }

    /// [`Session::open`] for client `id` (`Global::next_client_id`, taken when the connection
    /// was accepted, as Redis numbers its clients).
    pub fn open_as(global: &Arc<Global>, core: usize, peer: Peer, id: u64) -> Session {
        let (tx, rx) = mpsc::unbounded();
        let client = Arc::new(ClientInfo {
            id,
            peer,
            core,
            created_ms: global.uptime_ms(),
            last_cmd_ms: global.uptime_ms().into(),
            db: 0.into(),
            resp: 2.into(),
            name: Mutex::new(String::new()),
            lib_name: Mutex::new(String::new()),
            lib_ver: Mutex::new(String::new()),
            last_cmd: u32::MAX.into(),
            killed: false.into(),
            multi: (-1).into(),
            blocked: 0.into(),
            unblock: 0.into(),
            mailbox: tx,
            pending: AtomicUsize::new(0),
            own_pushes: Mutex::new(None),
            subscriptions: Default::default(),
            tracking: 0.into(),
            redirect: 0.into(),
        });
        global.clients.insert(client.clone());
        global.total_connections.fetch_add(1, Ordering::Relaxed);
        Session {
            id,
            db: 0,
            resp3: false,
            authed: global.settings.requirepass().is_empty(),
            close_after_reply: false,
            client,
            multi: Default::default(),
            subs: Subscriptions::default(),
            reply_mode: ReplyMode::On,
            tracking_prefixes: Default::default(),
            errors_counted: None,
            failed_elsewhere: false,
            blocked_ticks: 0,
            inbox: rx,
            held: VecDeque::new(),
            global: global.clone(),
        }
    }

    /// The next delivery posted to this session; waits until one comes.
    pub async fn next_delivery(&mut self) -> Delivery {
        let next = match self.held.pop_front() {
            Some(d) => Some(d),
            None => self.inbox.next().await,
        };
        match next {
            Some((d, weight)) => {
                self.client.pending.fetch_sub(weight, Ordering::Relaxed);
                d
            }
            // The registry holds a sender while the session lives: only a closed registry
            // (shutdown) gets here.
            None => Delivery::Kill,
        }
    }

    /// A delivery already waiting, without waiting for one.
    pub fn try_delivery(&mut self) -> Option<Delivery> {
        let (d, weight) = match self.held.pop_front() {
            Some(d) => d,
            None => self.inbox.try_recv().ok()?,
        };
        self.client.pending.fetch_sub(weight, Ordering::Relaxed);
        Some(d)
    }

    /// Waits for a `Delivery::Wake` and returns its token; None when the session is killed.
    /// Other deliveries are kept for the connection, which sends them after the reply.
    pub async fn next_wake(&mut self) -> Option<u64> {
        loop {
            match self.inbox.next().await {
                Some((Delivery::Wake(token), _)) => return Some(token),
                Some((Delivery::Kill, w)) => {
                    self.held.push_back((Delivery::Kill, w));
                    return None;
                }
                Some(other) => self.held.push_back(other),
                None => return None,
            }
        }
    }

    /// True once CLIENT KILL or the output limit dropped this client.
    pub fn killed(&self) -> bool {
        self.client.killed.load(Ordering::Relaxed)
    }

    /// Switches the protocol version replies are encoded in (HELLO).
    pub fn set_resp3(&mut self, on: bool) {
        self.resp3 = on;
        self.client
            .resp
            .store(if on { 3 } else { 2 }, Ordering::Relaxed);
    }

    /// Selects a db (SELECT).
    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.client.db.store(db as u32, Ordering::Relaxed);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.subs.clear(&self.global, &self.client);
        let global = self.global.clone();
        super::tracking::disable(&global, self);
        // Before the connection's socket closes: see `Registry::remove`.
        self.global.clients.remove(self.id);
        self.multi.forget_watches(&self.global, None);
    }
}

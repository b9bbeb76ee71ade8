//! Pub/sub: the one registry of subscriptions that every core reads ([`Channels`], in
//! [`Global`]), each session's own subscriptions ([`Subscriptions`]), and publishing. A publish
//! runs on the publisher's core: it looks the channel up under a read lock and posts the message
//! straight into each subscriber's mailbox (`ClientInfo::post`, which enforces
//! `--pubsub_client_output_limit`), so one publisher's messages reach every subscriber in publish
//! order and the receiver count is exact. With nobody subscribed a publish is one atomic load.
//!
//! Never: waits, touches a shard or a socket, or holds the registry lock while doing anything
//! but posting to mailboxes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use super::core::Global;
use super::session::{ClientInfo, Delivery, Session};
use crate::protocol::Reply;

/// Which of the three namespaces a subscription lives in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE: glob patterns matched against PUBLISH's channel.
    Pattern,
    /// SSUBSCRIBE / SPUBLISH (patterns never see these).
    Shard,
}

impl Kind {
    fn subscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    fn unsubscribe_word(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// Subscribers of each channel (or pattern), in subscription order.
type Table = HashMap<Bytes, Vec<Arc<ClientInfo>>>;

/// Every subscription of every client, reachable from every core.
#[derive(Default)]
pub struct Channels {
    channels: RwLock<Table>,
    patterns: RwLock<Table>,
    shard: RwLock<Table>,
    /// Entries in the three tables: zero lets a publish return at once.
    live: AtomicUsize,
}

impl Channels {
    fn table(&self, kind: Kind) -> &RwLock<Table> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn add(&self, kind: Kind, name: &Bytes, client: &Arc<ClientInfo>) {
        if let Ok(mut t) = self.table(kind).write() {
            let subs = t.entry(name.clone()).or_insert_with(|| {
                self.live.fetch_add(1, Ordering::Relaxed);
                Vec::new()
            });
            subs.push(client.clone());
        }
    }

    fn remove(&self, kind: Kind, name: &[u8], client: u64) {
        if let Ok(mut t) = self.table(kind).write() {
            if let Some(subs) = t.get_mut(name) {
                subs.retain(|c| c.id != client);
                if subs.is_empty() {
                    // Keep no empty entries: PUBSUB CHANNELS lists only live channels.
                    t.remove(name);
                    self.live.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// PUBLISH (`shard` false) or SPUBLISH: posts `message` to every subscriber of `channel`
    /// (and, for PUBLISH, of every matching pattern); returns how many it was posted to.
    pub fn publish(&self, global: &Global, channel: &Bytes, message: &Bytes, shard: bool) -> i64 {
        if self.live.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let mut receivers = 0;
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        if let Ok(t) = self.table(kind).read() {
            if let Some(subs) = t.get(channel) {
                let word = if shard { "smessage" } else { "message" };
                let msg = Reply::Push(vec![
                    Reply::bulk_str(word),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]);
                for c in subs {
                    c.post(global, Delivery::Push(msg.clone()));
                    receivers += 1;
                }
            }
        }
        if shard {
            return receivers;
        }
        if let Ok(t) = self.patterns.read() {
            for (pattern, subs) in t.iter() {
                if !crate::glob::matches(pattern, channel, false) {
                    continue;
                }
                let msg = Reply::Push(vec![
                    Reply::bulk_str("pmessage"),
                    Reply::Bulk(pattern.clone()),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]);
                for c in subs {
                    c.post(global, Delivery::Push(msg.clone()));
                    receivers += 1;
                }
            }
        }
        receivers
    }

    /// True when someone listens on a channel or a pattern (keyspace events are built only
    /// then).
    pub fn any(&self) -> bool {
        self.live.load(Ordering::Relaxed) > 0
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: live channels matching `pattern` (all without one).
    pub fn list(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        self.table(kind)
            .read()
            .map(|t| {
                t.keys()
                    .filter(|c| pattern.is_none_or(|p| crate::glob::matches(p, c, false)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of one channel (patterns not counted).
    pub fn count(&self, shard: bool, channel: &[u8]) -> usize {
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        self.table(kind)
            .read()
            .map(|t| t.get(channel).map_or(0, Vec::len))
            .unwrap_or(0)
    }

    /// Live channels (INFO's `pubsub_channels`, `pubsubshard_channels`).
    pub fn channels(&self, shard: bool) -> usize {
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        self.table(kind).read().map(|t| t.len()).unwrap_or(0)
    }

    /// PUBSUB NUMPAT: distinct patterns subscribed to.
    pub fn patterns(&self) -> usize {
        self.patterns.read().map(|t| t.len()).unwrap_or(0)
    }
}

/// One session's subscriptions (what UNSUBSCRIBE without arguments and a closing connection
/// undo). Patterns keep their order, as Redis' list does.
#[derive(Default)]
pub struct Subscriptions {
    channels: HashSet<Bytes>,
    patterns: Vec<Bytes>,
    shard: HashSet<Bytes>,
}

impl Subscriptions {
    /// Channels and patterns (the count SUBSCRIBE and PSUBSCRIBE report).
    fn plain(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Any subscription at all: the session is in subscribe mode.
    pub fn active(&self) -> bool {
        self.plain() + self.shard.len() > 0
    }

    /// The count a confirmation of `kind` reports.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.plain(),
        }
    }

    fn has(&self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.contains(name),
            Kind::Pattern => self.patterns.iter().any(|p| p[..] == *name),
            Kind::Shard => self.shard.contains(name),
        }
    }

    fn insert(&mut self, kind: Kind, name: Bytes) {
        match kind {
            Kind::Channel => {
                self.channels.insert(name);
            }
            Kind::Pattern => self.patterns.push(name),
            Kind::Shard => {
                self.shard.insert(name);
            }
        }
    }

    fn take(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.remove(name),
            Kind::Pattern => {
                let before = self.patterns.len();
                self.patterns.retain(|p| p[..] != *name);
                before != self.patterns.len()
            }
            Kind::Shard => self.shard.remove(name),
        }
    }

    fn names(&self, kind: Kind) -> Vec<Bytes> {
        match kind {
            Kind::Channel => self.channels.iter().cloned().collect(),
            Kind::Pattern => self.patterns.clone(),
            Kind::Shard => self.shard.iter().cloned().collect(),
        }
    }

    /// Leaves every subscription in the registry (the session is closing or RESET).
    pub fn clear(&mut self, global: &Global, client: &ClientInfo) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in self.names(kind) {
                global.pubsub.remove(kind, &name, client.id);
            }
        }
        *self = Subscriptions::default();
        client.set_subscriptions(0, 0, 0);
    }

    fn publish_counts(&self, client: &ClientInfo) {
        client.set_subscriptions(self.channels.len(), self.patterns.len(), self.shard.len());
    }
}

/// A confirmation (`subscribe`, `unsubscribe`, ...): a push in RESP3, an array in RESP2.
fn confirmation(word: &str, name: Option<Bytes>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk_str(word),
        name.map_or(Reply::Nil, Reply::Bulk),
        Reply::Int(count as i64),
    ])
}

/// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE: one confirmation per name.
pub fn subscribe(global: &Global, session: &mut Session, kind: Kind, names: &[Bytes]) -> Reply {
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        if !session.subs.has(kind, name) {
            session.subs.insert(kind, name.clone());
            global.pubsub.add(kind, name, &session.client);
        }
        out.push(confirmation(
            kind.subscribe_word(),
            Some(name.clone()),
            session.subs.count(kind),
        ));
    }
    session.subs.publish_counts(&session.client);
    Reply::Many(out)
}

/// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE: the names given, or all of that kind; one
/// confirmation per name, or one with a nil name when there was nothing to leave.
pub fn unsubscribe(global: &Global, session: &mut Session, kind: Kind, names: &[Bytes]) -> Reply {
    let all = names.is_empty();
    let names = if all {
        session.subs.names(kind)
    } else {
        names.to_vec()
    };
    let mut out = Vec::with_capacity(names.len().max(1));
    for name in names {
        if session.subs.take(kind, &name) {
            global.pubsub.remove(kind, &name, session.id);
        }
        out.push(confirmation(
            kind.unsubscribe_word(),
            Some(name),
            session.subs.count(kind),
        ));
    }
    if out.is_empty() {
        out.push(confirmation(
            kind.unsubscribe_word(),
            None,
            session.subs.count(kind),
        ));
    }
    session.subs.publish_counts(&session.client);
    Reply::Many(out)
}

/// Keyspace events published as Redis does: `__keyspace@<db>__:<key>` with the event as the
/// message, `__keyevent@<db>__:<event>` with the key, as `notify-keyspace-events` asks.
pub struct KeyspaceEvents {
    global: Arc<Global>,
}

impl KeyspaceEvents {
    pub fn new(global: Arc<Global>) -> KeyspaceEvents {
        KeyspaceEvents { global }
    }
}

impl crate::shard::notify::EventSink for KeyspaceEvents {
    fn keyspace_event(&self, flags: u32, event: &str, db: usize, key: &[u8]) {
        let g = &self.global;
        // Nobody listens: nothing to build.
        if !g.pubsub.any() {
            return;
        }
        let channel = |space: &str, name: &[u8]| {
            let mut c = format!("__{space}@{db}__:").into_bytes();
            c.extend_from_slice(name);
            Bytes::from(c)
        };
        if flags & crate::notify::KEYSPACE != 0 {
            let ch = channel("keyspace", key);
            g.pubsub
                .publish(g, &ch, &Bytes::copy_from_slice(event.as_bytes()), false);
        }
        if flags & crate::notify::KEYEVENT != 0 {
            let ch = channel("keyevent", event.as_bytes());
            g.pubsub
                .publish(g, &ch, &Bytes::copy_from_slice(key), false);
        }
    }
}

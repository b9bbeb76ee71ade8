//! The shard's outlet for keyspace events: commands (through `Ctx::notify`), expiry and
//! eviction report `(class, event, db, key)` here; when `notify-keyspace-events` enables the
//! class, the [`EventSink`] the server installed publishes it. Off, a report costs one atomic
//! load and a branch.
//!
//! Never: formats or publishes anything itself (the sink does, above this layer).

use std::sync::Arc;

use super::Shard;

/// Where enabled keyspace events go: the server's pub/sub.
pub trait EventSink {
    /// Publishes one event; `flags` is the `notify-keyspace-events` value it was enabled by
    /// (which of the keyspace and keyevent channels to use).
    fn keyspace_event(&self, flags: u32, event: &str, db: usize, key: &[u8]);
}

/// The sink a shard holds.
pub type Sink = Arc<dyn EventSink + Send + Sync>;

impl Shard {
    /// Reports a keyspace event of class `class` (a bit of `crate::notify`).
    #[inline]
    pub fn notify(&self, class: u32, event: &str, db: usize, key: &[u8]) {
        let flags = self.settings.notify_flags();
        if flags & class == 0 {
            return;
        }
        if let Some(sink) = &self.events {
            sink.keyspace_event(flags, event, db, key);
        }
    }

    /// True when events of `class` are reported (to skip collecting them otherwise).
    #[inline]
    pub fn notifies(&self, class: u32) -> bool {
        self.settings.notify_flags() & class != 0 && self.events.is_some()
    }
}

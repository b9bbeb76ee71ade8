//! Cache-mode eviction: which entry leaves when memory (or the SSD budget) is full.
//!
//! Policy: sampled LFU with ageing. Each round looks at every entry of random buckets until at
//! least sixteen entries were seen (a fixed number of buckets would often give a sample of one
//! or two, since buckets hold 0 to 14 entries, and then a hot key goes) and evicts the one with
//! the lowest score: its logarithmic access counter, less one per idle minute, with
//! expired keys and keys within a minute of their TTL first, and the longest idle first among
//! equals. New keys start at the counter's initial value and a single hit lifts them above it,
//! so a one-off scan (keys written once, never read) is evicted before anything read twice and
//! cannot flush the hot set; the ageing lets a formerly hot key go once it stops being read.
//!
//! An evicted key's counter is remembered (`shard::history`, ~1/100 of maxmemory) and resumed
//! when the key is stored again, so a key read often before it was pushed out does not come
//! back as the least valued entry: +0.2 to +0.35 points on every trace of the benchmark below
//! (RAM only: 0.688 to 0.691, 0.800 to 0.802, 0.542 to 0.545, 0.632 to 0.634).
//!
//! Why this one: measured with `benches/hit_ratio.sh` (Zipf 0.9/0.99 over 1M keys, with and
//! without a 20% scan, cache at 10% of the data) against Redis' allkeys-lru and allkeys-lfu at
//! the same maxmemory; see the README's figures. The sample is three times Redis' default of 5
//! keys, for two or three cache misses.
//!
//! With tiering, a nearly full SSD tier is not emptied here entry by entry (that leaves holes
//! in shared pages) but reclaimed a page at a time by the offloader (`server::offload`): an
//! LFU over the file, keeping the entries whose counter reached a level that follows what
//! reclaim finds. The counter counts the first hits one by one (`Entry::touch`), which is what
//! lets the tier tell a key read twice from one read five times. Sampling here stays the
//! fallback past 98.5% of the tier. Tried and dropped on the same benchmark: S3-FIFO-style
//! admission (never-read values dropped when leaving RAM, with a ghost filter), no gain.
//!
//! During a save, evicting an entry the snapshot has not reached frees nothing until the
//! serializer writes the copy it leaves: such entries go only while those copies stay under the
//! writers' backlog limit (a write burst into a full cache once emptied the table by evicting
//! on and on while nothing came back).
//!
//! Never: evicts more than asked (callers pass the goal), runs past its time budget.

use std::time::{Duration, Instant};

use super::dashtable::Element;
use super::{now_ms, Entry, Shard};

/// Entries looked at per eviction (whole buckets, so a little more)...
const SAMPLE: usize = 16;
/// ...from at most this many buckets.
const MAX_SAMPLE_BUCKETS: usize = 8;
/// Keys this close to their expiry go first.
const NEAR_EXPIRY_MS: u64 = 60_000;

/// Which entries may be evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidates {
    /// Any entry: RAM is the constraint.
    Any,
    /// Only offloaded entries: the SSD budget is the constraint.
    OnDisk,
    /// Only entries in RAM: RAM is the constraint and evicting from SSD would not help it (a
    /// save holds the tier's frees, so the offloader cannot move values there).
    InRam,
}

/// Keys evicted by one call, by where the value was.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    pub ram: u64,
    pub ssd: u64,
}

/// Eviction order: lower goes first. `expire_at` is the entry's expiry (0 = none).
pub fn score(e: &Entry, expire_at: u64, clock: u32, now: u64) -> u64 {
    if expire_at != 0 && expire_at <= now.saturating_add(NEAR_EXPIRY_MS) {
        return 0;
    }
    let idle = e.idle_seconds(clock);
    let freq = decayed_freq(e, clock) as u64;
    (freq << 24) | u64::from(0xff_ffff - idle.min(0xff_ffff))
}

/// The access counter less one per idle minute.
pub fn decayed_freq(e: &Entry, clock: u32) -> u32 {
    e.freq().saturating_sub(e.idle_seconds(clock) / 60)
}

impl Shard {
    /// True when the copies a running save holds leave room for one more (see
    /// `snapshot_backlog_limit`).
    fn capture_room(&self) -> bool {
        let limit = super::snapshot_backlog_limit(self.settings.maxmemory(), self.settings.threads);
        self.snapshot_backlog() < limit
    }

    /// Evicts one entry at a time, lowest [`score`] among a sample, until `enough` says so or
    /// `budget` is spent. Returns what went.
    pub fn evict(
        &mut self,
        which: Candidates,
        budget: Duration,
        mut enough: impl FnMut(&Shard) -> bool,
    ) -> Evicted {
        let start = Instant::now();
        let now = now_ms();
        let clock = self.clock();
        let mut out = Evicted::default();
        let mut misses = 0;
        while !enough(self) {
            let total: usize = self.dbs.iter().map(|d| d.table.len()).sum();
            if total == 0 {
                break;
            }
            // A db picked in proportion to its keys.
            let mut pick = self.rand_below(total);
            let db = self
                .dbs
                .iter()
                .position(|d| {
                    if pick < d.table.len() {
                        true
                    } else {
                        pick -= d.table.len();
                        false
                    }
                })
                .unwrap_or(0);
            let mut best: Option<(u64, super::dashtable::Pos)> = None;
            {
                use rand::Rng;
                let rng = &mut self.rng;
                let table = &self.dbs[db].table;
                let tier = &self.tier;
                // Whole buckets until the sample is large enough: buckets hold 0 to 14 entries,
                // and a sample of one or two would often miss every cold entry.
                let mut seen = 0;
                for _ in 0..MAX_SAMPLE_BUCKETS {
                    table.sample_buckets(
                        1,
                        |n| rng.gen_range(0..n.max(1)),
                        |pos, k, e, at| {
                            let wanted = match which {
                                Candidates::Any => true,
                                Candidates::OnDisk => e.is_external(),
                                Candidates::InRam => !e.is_external(),
                            };
                            if !wanted {
                                return;
                            }
                            seen += 1;
                            let mut sc = score(e, at, clock, now);
                            // An offloaded value with few neighbours on its page ranks a little
                            // colder: evicting it frees (nearly) a whole page, which keeps the
                            // tier file dense instead of riddled with holes.
                            if let (Some(p), Some(t)) = (e.external(k.len()), tier.as_ref()) {
                                let crowd = u64::from(t.page_entries(p).min(3));
                                sc = sc.saturating_sub((3 - crowd) << 24);
                            }
                            if best.is_none_or(|(b, _)| sc < b) {
                                best = Some((sc, pos));
                            }
                        },
                    );
                    if seen >= SAMPLE {
                        break;
                    }
                }
            }
            // During a save, removing an entry the snapshot does not have yet copies it aside
            // until the serializer writes it: no room comes back before then. Such an entry
            // goes only while those copies stay under the writers' backlog limit; past it the
            // round is a miss (the batch waits for the serializer, see
            // `server::eviction::make_room`). Evicting only what the snapshot has instead would
            // favour the keys just read or written, which the snapshot copied first.
            if let Some((_, pos)) = best {
                if !self.dbs[db].table.snapshot_has(pos) && !self.capture_room() {
                    best = None;
                }
            }
            match best {
                Some((_, pos)) => {
                    misses = 0;
                    let d = &mut self.dbs[db];
                    if let Some(Element {
                        key: k,
                        value: e,
                        expire_at: at,
                        ..
                    }) = d.table.remove_at(pos)
                    {
                        self.dirty += 1;
                        self.watches.touch_unattributed(db, k.as_bytes());
                        if at != 0 {
                            d.volatile = d.volatile.saturating_sub(1);
                        }
                        if super::is_expired(at, now) {
                            self.stats.expired_keys += 1;
                            self.notify(crate::notify::EXPIRED, "expired", db, k.as_bytes());
                        } else {
                            self.notify(crate::notify::EVICTED, "evicted", db, k.as_bytes());
                            if e.is_external() {
                                out.ssd += 1;
                            } else {
                                out.ram += 1;
                            }
                            self.remember_evicted(k.as_bytes(), &e);
                        }
                        self.release(k.as_bytes(), &e);
                    }
                }
                None => {
                    // Empty buckets, or no candidate of the wanted kind: try elsewhere, a while.
                    misses += 1;
                    if misses > 64 {
                        break;
                    }
                }
            }
            if (out.ram + out.ssd).is_multiple_of(16) && start.elapsed() >= budget {
                break;
            }
        }
        self.stats.evicted_ram += out.ram;
        self.stats.evicted_ssd += out.ssd;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Flags, Settings};
    use crate::shard::Value;
    use clap::Parser;
    use std::sync::Arc;

    fn shard() -> Shard {
        let f = Flags::try_parse_from(["strata", "--cache_mode"]).unwrap();
        Shard::new(0, Arc::new(Settings::from_flags(&f)))
    }

    #[test]
    fn scores_order_expiring_then_cold_then_idle() {
        let now = 1_000_000_000;
        let clock = 10_000;
        let fresh = Entry::new(Value::str(b"v"), clock);
        let mut hot = fresh.clone();
        for r in 0..200 {
            hot.touch(clock, r);
        }
        let idle = Entry::new(Value::str(b"v"), clock - 30);
        // Within a minute of its TTL: first to go, however hot.
        assert_eq!(score(&hot, now + 5_000, clock, now), 0);
        assert!(score(&fresh, 0, clock, now) < score(&hot, 0, clock, now));
        assert_eq!(
            score(&fresh, now + 3_600_000, clock, now),
            score(&fresh, 0, clock, now)
        );
        assert!(score(&idle, 0, clock, now) < score(&fresh, 0, clock, now));
        // A hot key idle for an hour has decayed below a fresh one.
        let mut old_hot = Entry::new(Value::str(b"v"), clock - 3600);
        old_hot.set_freq(hot.freq());
        assert!(score(&old_hot, 0, clock, now) < score(&fresh, 0, clock, now));
    }

    #[test]
    fn evicts_until_enough_and_keeps_the_hot_keys() {
        let mut s = shard();
        let now = now_ms();
        for i in 0..20_000 {
            s.store(0, format!("k{i}").as_bytes(), Value::str(b"value"), 0);
        }
        // The first 500 keys are read often.
        for _ in 0..20 {
            for i in 0..500 {
                assert!(s.lookup(0, format!("k{i}").as_bytes(), now).is_some());
            }
        }
        let out = s.evict(Candidates::Any, Duration::from_secs(5), |s| {
            s.key_count() <= 10_000
        });
        assert_eq!(out.ram, 10_000);
        assert_eq!(s.key_count(), 10_000);
        assert_eq!(s.stats.evicted_ram, 10_000);
        let hot_left = (0..500)
            .filter(|i| s.contains(0, format!("k{i}").as_bytes(), now))
            .count();
        assert!(hot_left >= 495, "only {hot_left} of 500 hot keys survived");
        // OnDisk finds nothing in RAM-only data and stops.
        let out = s.evict(Candidates::OnDisk, Duration::from_secs(1), |_| false);
        assert_eq!(out, Evicted::default());
    }
}

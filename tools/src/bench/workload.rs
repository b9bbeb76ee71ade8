//! What a connection asks next: which operation (the SET:GET ratio), which key (uniform, zipf
//! or sequential over the key space), how big a value, and the command-line syntax of each.
//!
//! Each connection has its own [`Generator`] with its own seeded random source, so connections
//! never share state on the load path and a run is repeatable for a given `--seed`.
//!
//! Never: allocates per request (keys are formatted into a reused buffer, values are slices of
//! one shared block); decides *when* a request leaves (that is the engine's timetable).

use crate::codec::{encode_get, encode_resp, encode_set, Op, Protocol};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// `--ratio SET:GET`: of every `set + get` requests, `set` are SETs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub set: u32,
    pub get: u32,
}

impl FromStr for Ratio {
    type Err = String;
    fn from_str(s: &str) -> Result<Ratio, String> {
        let bad = || format!("expected SET:GET as two whole numbers, like 1:10, not {s:?}");
        let (set, get) = s.split_once(':').ok_or_else(bad)?;
        let set: u32 = set.trim().parse().map_err(|_| bad())?;
        let get: u32 = get.trim().parse().map_err(|_| bad())?;
        if set == 0 && get == 0 {
            return Err("SET:GET must not be 0:0".into());
        }
        Ok(Ratio { set, get })
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.set, self.get)
    }
}

/// `--key-dist`: how keys are drawn from `0..keys`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeyDist {
    Uniform,
    /// Key ranks follow a Zipf law with this exponent; key 0 is the hottest.
    Zipf(f64),
    /// Each connection walks the key space from its own starting point, wrapping around.
    Sequential,
}

impl FromStr for KeyDist {
    type Err = String;
    fn from_str(s: &str) -> Result<KeyDist, String> {
        match s {
            "uniform" => Ok(KeyDist::Uniform),
            "sequential" => Ok(KeyDist::Sequential),
            _ => {
                let exponent = s.strip_prefix("zipf:").ok_or_else(|| {
                    format!("expected uniform, sequential or zipf:S (like zipf:0.99), not {s:?}")
                })?;
                match exponent.parse::<f64>() {
                    Ok(e) if e > 0.0 && e.is_finite() => Ok(KeyDist::Zipf(e)),
                    _ => Err(format!(
                        "zipf exponent must be a number above 0 (like zipf:0.99), not {exponent:?}"
                    )),
                }
            }
        }
    }
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::Uniform => write!(f, "uniform"),
            KeyDist::Zipf(e) => write!(f, "zipf:{e}"),
            KeyDist::Sequential => write!(f, "sequential"),
        }
    }
}

/// `B` or `B1-B2` (inclusive, drawn uniformly): value sizes in bytes, or expiries in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub min: u32,
    pub max: u32,
}

impl FromStr for Range {
    type Err = String;
    fn from_str(s: &str) -> Result<Range, String> {
        let bad = || format!("expected N or N1-N2 (whole numbers, N1 <= N2), not {s:?}");
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let n = s.trim().parse().map_err(|_| bad())?;
                (n, n)
            }
        };
        if min > max {
            return Err(bad());
        }
        Ok(Range { min, max })
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

impl Range {
    fn draw(&self, rng: &mut SmallRng) -> u32 {
        if self.min == self.max {
            self.min
        } else {
            rng.gen_range(self.min..=self.max)
        }
    }
}

/// The key/value workload of a `run` or `sweep`, shared by every connection's generator.
#[derive(Debug, Clone)]
pub struct Workload {
    pub protocol: Protocol,
    pub ratio: Ratio,
    pub keys: u64,
    pub key_dist: KeyDist,
    pub key_prefix: String,
    /// Key numbers are zero-padded to this many digits (redis-benchmark's `-r` keys are
    /// `key:` and 12 digits).
    pub key_width: usize,
    pub value_size: Range,
    /// Seconds to live for SETs; None: no expiry.
    pub expiry: Option<Range>,
    pub seed: u64,
    /// Servers the key space is split over by hash slot, as a cluster client splits it (1: no
    /// split). Connection `i` talks to server `i % shards` and only asks for its keys.
    pub shards: u32,
}

/// Redis Cluster's slot count; a key's slot is CRC16 (XMODEM) of its name, mod this.
const SLOTS: u32 = 16384;

/// The server of `shards` that holds `key` when the slots are dealt out in equal contiguous
/// ranges (what `redis-cli --cluster create` does).
pub fn shard_of(key: &[u8], shards: u32) -> u32 {
    const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    let slot = u32::from(CRC16.checksum(key)) % SLOTS;
    slot * shards / SLOTS
}

/// What a generator produces.
#[derive(Debug, Clone)]
enum Mode {
    /// The SET:GET mix of the run.
    Mix,
    /// SETs of the keys `next..end`, each once (`--preload`).
    Preload { end: u64 },
    /// PUBLISH to `channels` channels in turn, `size`-byte messages that start with the
    /// scheduled send time.
    Publish { channels: u32, size: usize },
}

/// One connection's source of requests.
pub struct Generator {
    work: Arc<Workload>,
    mode: Mode,
    rng: SmallRng,
    zipf: Option<Zipf<f64>>,
    /// Requests made so far (decides SET or GET).
    count: u64,
    /// The next key of a sequential walk or a preload.
    next: u64,
    key: Vec<u8>,
    /// A pub/sub message being built.
    message: Vec<u8>,
    /// Value bytes: every value is a prefix of this block.
    values: Arc<Vec<u8>>,
    /// The server this connection talks to, of `work.shards`.
    shard: u32,
}

impl Generator {
    /// The mix generator of connection `conn` of `conns`.
    pub fn mix(work: &Arc<Workload>, values: &Arc<Vec<u8>>, conn: usize, conns: usize) -> Self {
        let start = work.keys * conn as u64 / conns.max(1) as u64;
        let zipf = match work.key_dist {
            KeyDist::Zipf(e) => Zipf::new(work.keys.max(1), e).ok(),
            _ => None,
        };
        Generator::new(work, values, Mode::Mix, conn, start, zipf)
    }

    /// Connection `conn` of `conns` sets its share of the keys once each: with shards, its share
    /// of the keys among its server's connections, skipping the keys other servers hold.
    pub fn preload(work: &Arc<Workload>, values: &Arc<Vec<u8>>, conn: usize, conns: usize) -> Self {
        let shards = work.shards.max(1) as usize;
        let shard = conn % shards;
        // This connection's rank among its server's connections, and their number.
        let (rank, peers) = (conn / shards, (conns + shards - 1 - shard) / shards);
        let share = |c: usize| work.keys * c as u64 / peers.max(1) as u64;
        let mode = Mode::Preload {
            end: share(rank + 1),
        };
        Generator::new(work, values, mode, conn, share(rank), None)
    }

    /// PUBLISH messages of `size` bytes to channels `<prefix>0 ..`.
    pub fn publish(work: &Arc<Workload>, conn: usize, channels: u32, size: usize) -> Self {
        let mode = Mode::Publish { channels, size };
        Generator::new(work, &Arc::new(Vec::new()), mode, conn, conn as u64, None)
    }

    fn new(
        work: &Arc<Workload>,
        values: &Arc<Vec<u8>>,
        mode: Mode,
        conn: usize,
        next: u64,
        zipf: Option<Zipf<f64>>,
    ) -> Self {
        Generator {
            shard: (conn % work.shards.max(1) as usize) as u32,
            work: Arc::clone(work),
            mode,
            rng: SmallRng::seed_from_u64(work.seed ^ (conn as u64).wrapping_mul(0x9e37_79b9)),
            zipf,
            count: 0,
            next,
            key: Vec::with_capacity(work.key_prefix.len() + 20),
            message: Vec::new(),
            values: Arc::clone(values),
        }
    }

    /// Appends the next request to `out`; `sched_ns` is its scheduled send time (pub/sub
    /// messages carry it). None when a preload has set all its keys.
    pub fn next(&mut self, sched_ns: u64, out: &mut Vec<u8>) -> Option<Op> {
        let protocol = self.work.protocol;
        match self.mode {
            Mode::Preload { end } => loop {
                if self.next >= end {
                    return None;
                }
                let key = self.next;
                self.next += 1;
                if self.owns(key) {
                    self.set(protocol, key, out);
                    return Some(Op::Set);
                }
            },
            Mode::Mix => {
                let ratio = self.work.ratio;
                let is_set = self.count % u64::from(ratio.set + ratio.get) < u64::from(ratio.set);
                self.count += 1;
                let key = self.draw_key();
                if is_set {
                    self.set(protocol, key, out);
                    Some(Op::Set)
                } else {
                    self.format_key(key);
                    encode_get(protocol, &self.key, out);
                    Some(Op::Get)
                }
            }
            Mode::Publish { channels, size } => {
                let channel = self.next % u64::from(channels.max(1));
                self.next += 1;
                self.format_key(channel);
                let mut stamp = [0u8; 20];
                self.message.clear();
                self.message
                    .extend_from_slice(format_stamp(sched_ns, &mut stamp));
                self.message.resize(size.max(stamp.len()), b'x');
                encode_resp(&[b"PUBLISH", &self.key, &self.message], out);
                Some(Op::Publish)
            }
        }
    }

    /// A key this connection's server holds (any key, without shards). Drawing again until
    /// one comes takes `shards` draws on average.
    fn draw_key(&mut self) -> u64 {
        for _ in 0..1_000_000 {
            let key = self.draw_any_key();
            if self.owns(key) {
                return key;
            }
        }
        // A key space so small that this server holds none of it: send the last draw anyway
        // (the server's error reply, if any, is then counted).
        self.draw_any_key()
    }

    fn owns(&mut self, key: u64) -> bool {
        if self.work.shards <= 1 {
            return true;
        }
        self.format_key(key);
        shard_of(&self.key, self.work.shards) == self.shard
    }

    fn draw_any_key(&mut self) -> u64 {
        let keys = self.work.keys.max(1);
        match self.work.key_dist {
            KeyDist::Uniform => self.rng.gen_range(0..keys),
            KeyDist::Zipf(_) => match &self.zipf {
                // Zipf draws ranks 1..=keys.
                Some(z) => (z.sample(&mut self.rng) as u64).clamp(1, keys) - 1,
                None => self.rng.gen_range(0..keys),
            },
            KeyDist::Sequential => {
                let key = self.next % keys;
                self.next = self.next.wrapping_add(1);
                key
            }
        }
    }

    fn set(&mut self, protocol: Protocol, key: u64, out: &mut Vec<u8>) {
        self.format_key(key);
        let size = self.work.value_size.draw(&mut self.rng) as usize;
        let ttl = self.work.expiry.map_or(0, |r| r.draw(&mut self.rng));
        let value = &self.values[..size.min(self.values.len())];
        encode_set(protocol, &self.key, value, ttl, out);
    }

    fn format_key(&mut self, n: u64) {
        self.key.clear();
        self.key.extend_from_slice(self.work.key_prefix.as_bytes());
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n).as_bytes();
        for _ in digits.len()..self.work.key_width {
            self.key.push(b'0');
        }
        self.key.extend_from_slice(digits);
    }
}

/// The value block for `work`: its largest value's worth of letters drawn from the seed, so
/// values are neither all one byte nor all alike.
pub fn value_block(work: &Workload) -> Arc<Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(work.seed);
    let block = (0..work.value_size.max)
        .map(|_| rng.gen_range(b'a'..=b'z'))
        .collect();
    Arc::new(block)
}

/// `ns` as 20 zero-padded decimal digits: the time stamp at the start of a pub/sub message.
pub fn format_stamp(ns: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = ns;
    for b in buf.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
    &buf[..]
}

/// The time stamp at the start of a pub/sub message, if it has one.
pub fn parse_stamp(message: &[u8]) -> Option<u64> {
    let digits = message.get(..20)?;
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then(|| n.wrapping_mul(10).wrapping_add(u64::from(b - b'0')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(dist: KeyDist, ratio: Ratio) -> Arc<Workload> {
        Arc::new(Workload {
            protocol: Protocol::Resp,
            ratio,
            keys: 100,
            key_dist: dist,
            key_prefix: "key:".into(),
            key_width: 0,
            value_size: Range { min: 4, max: 8 },
            expiry: None,
            seed: 7,
            shards: 1,
        })
    }

    #[test]
    fn flags_parse_or_say_what_they_expect() {
        assert_eq!("1:10".parse(), Ok(Ratio { set: 1, get: 10 }));
        assert!("1-10".parse::<Ratio>().unwrap_err().contains("SET:GET"));
        assert!("0:0".parse::<Ratio>().is_err());
        assert_eq!("zipf:0.99".parse(), Ok(KeyDist::Zipf(0.99)));
        assert!("zipf:-1"
            .parse::<KeyDist>()
            .unwrap_err()
            .contains("above 0"));
        assert!("normal".parse::<KeyDist>().is_err());
        assert_eq!("100-200".parse(), Ok(Range { min: 100, max: 200 }));
        assert_eq!("32".parse(), Ok(Range { min: 32, max: 32 }));
        assert!("200-100".parse::<Range>().is_err());
    }

    #[test]
    fn the_mix_follows_the_ratio() {
        let w = work(KeyDist::Uniform, Ratio { set: 1, get: 3 });
        let values = value_block(&w);
        let mut g = Generator::mix(&w, &values, 0, 1);
        let mut out = Vec::new();
        let ops: Vec<Op> = (0..8).map(|_| g.next(0, &mut out).unwrap()).collect();
        assert_eq!(ops.iter().filter(|&&o| o == Op::Set).count(), 2);
    }

    #[test]
    fn preload_covers_every_key_once() {
        let w = work(KeyDist::Uniform, Ratio { set: 1, get: 1 });
        let values = value_block(&w);
        let mut sets = 0;
        for conn in 0..3 {
            let mut g = Generator::preload(&w, &values, conn, 3);
            let mut out = Vec::new();
            while g.next(0, &mut out).is_some() {
                sets += 1;
            }
        }
        assert_eq!(sets, 100);
    }

    #[test]
    fn sequential_and_zipf_keys_stay_in_the_key_space() {
        for dist in [KeyDist::Sequential, KeyDist::Zipf(1.1)] {
            let w = work(dist, Ratio { set: 0, get: 1 });
            let values = value_block(&w);
            let mut g = Generator::mix(&w, &values, 1, 2);
            for _ in 0..1000 {
                assert!(g.draw_key() < 100);
            }
        }
    }

    #[test]
    fn slots_are_redis_clusters() {
        // CLUSTER KEYSLOT foo is 12182, bar is 5061.
        assert_eq!(shard_of(b"foo", SLOTS), 12182);
        assert_eq!(shard_of(b"bar", SLOTS), 5061);
        assert_eq!(shard_of(b"foo", 2), 1);
        assert_eq!(shard_of(b"bar", 2), 0);
    }

    #[test]
    fn with_shards_each_connection_asks_only_its_server_and_preload_covers_all() {
        let mut w = (*work(KeyDist::Uniform, Ratio { set: 1, get: 1 })).clone();
        w.shards = 3;
        let w = Arc::new(w);
        let values = value_block(&w);
        let conns = 7;
        let mut set = std::collections::BTreeSet::new();
        for conn in 0..conns {
            let mut g = Generator::preload(&w, &values, conn, conns);
            let mut out = Vec::new();
            while g.next(0, &mut out).is_some() {
                assert_eq!(shard_of(&g.key, 3), (conn % 3) as u32);
                assert!(set.insert(g.key.clone()), "set twice");
            }
            let mut g = Generator::mix(&w, &values, conn, conns);
            for _ in 0..100 {
                g.next(0, &mut out);
                assert_eq!(shard_of(&g.key, 3), (conn % 3) as u32);
            }
        }
        assert_eq!(set.len(), 100);
    }

    #[test]
    fn keys_are_padded_to_the_key_width() {
        let mut w = (*work(KeyDist::Sequential, Ratio { set: 0, get: 1 })).clone();
        w.key_width = 12;
        let w = Arc::new(w);
        let values = value_block(&w);
        let mut g = Generator::mix(&w, &values, 0, 1);
        let mut out = Vec::new();
        g.next(0, &mut out);
        assert!(out.ends_with(b"$16\r\nkey:000000000000\r\n"), "{out:?}");
    }

    #[test]
    fn stamps_round_trip() {
        let mut buf = [0u8; 20];
        let s = format_stamp(123_456_789, &mut buf).to_vec();
        assert_eq!(parse_stamp(&s), Some(123_456_789));
        assert_eq!(parse_stamp(b"12x"), None);
    }
}

//! Hit-ratio benchmark: a deterministic trace generator and a cache-aside driver that replays a
//! trace against any RESP or memcached server (`benches/hit_ratio.sh` runs it against Strata,
//! Redis and memcached).
//!
//! ```text
//! hit_ratio run   --trace T [opts]   replay the trace against --host/--port, print RESULT
//! hit_ratio trace --trace T [opts]   offline facts about the trace (no server), print TRACE
//!
//! --trace zipf<S>[+scan]         e.g. zipf0.9, zipf0.99, zipf0.9+scan, zipf0.99+scan
//! --keys 1000000                 distinct Zipf keys: key:<i>, i zero-padded, in 0..keys
//! --requests 20*keys             trace length (GETs)
//! --warmup requests/2            the first W requests run but are not counted
//! --value-size 1024              bytes SET on a miss
//! --scan-frac 0.2 --scan-run 4096  "+scan": share of requests that are one-off sweeps, and
//!                                the length of one sweep (consecutive scan:<n> keys)
//! --seed 1
//! --host 127.0.0.1 --port 6379 --conns 4 --pipeline 32 --server NAME (label in RESULT)
//! --protocol resp                resp (GET / SET) or memcache (the text protocol's get / set)
//! --rate 0                       cap on trace requests per second (0 = as fast as it goes)
//! --capacity keys/10             entries of the simulated caches (`trace` only)
//! ```
//!
//! The trace: request i is a Zipf(S) draw over `keys` ranks (CDF table + binary search), the rank
//! mapped to a key by a seeded shuffle so that hot keys are spread over the key space. With
//! "+scan", the trace is cut into blocks of `scan-run / scan-frac` requests, and in each block one
//! run of `scan-run` consecutive requests (at a seeded offset) reads the next never-seen keys
//! `scan:<n>`, `scan:<n+1>`, ...: keys requested once and never again, which push hot keys out of
//! an LRU. The Zipf draws come from their own generator, so a "+scan" trace holds the same Zipf
//! sequence as the plain one, with the sweeps spliced in.
//!
//! The driver does what a cache-aside client does: GET key; on a miss, SET key value. Batches
//! of `--pipeline` consecutive trace requests are taken in trace order by `--conns` connections
//! (one thread each); the SETs for a batch's misses go out ahead of that connection's next GETs,
//! so a missed key is back in the cache within about conns x pipeline requests. Every hit's value
//! is compared with what was SET (`wrong=`, not counted as hits). Requests before `--warmup` fill
//! the cache and are not counted: a short warm-up leaves first requests of tail keys in the
//! measured part, which no cache can hit (on zipf0.99 over 1M keys an infinite cache hits only
//! 0.887 of requests 1M..3M, 0.986 of 10M..20M; `trace` prints this bound). Output is one line:
//!
//! ```text
//! RESULT trace=.. server=.. hit_ratio=.. zipf_hit_ratio=.. gets=.. hits=.. sets=.. errors=..
//!        oom=.. wrong=.. warmup_errors=.. keys=.. requests=.. warmup=.. value_size=.. seconds=..
//!        requests_per_sec=..
//! ```
//!
//! `hit_ratio` = hits / gets over the counted requests (scan requests included: they always
//! miss); `zipf_hit_ratio` leaves the scan requests out. `errors` counts error replies to the
//! counted GETs and to the SETs their misses caused (`oom` of them -OOM); `warmup_errors` the
//! same during the warm-up. `trace` prints `max_hit_ratio` (an infinite cache: only first
//! requests of a key miss), `lru_hit_ratio` (an exact LRU of `--capacity` entries),
//! `top_hit_ratio` (an oracle that keeps the `--capacity` most popular keys once it has seen
//! them: an offline bound) and `lfu_hit_ratio` (an online LFU of `--capacity` entries that
//! remembers the count of every key ever requested and admits a missed key only when it beats
//! the least counted cached one: the best a frequency-based policy can do without knowing the
//! future).
//!
//! Exit status: 0 when the run completed (whatever the counts), 1 on a connection or protocol
//! error, 2 on bad arguments. With no mode (as `cargo bench` runs it) it prints this usage.

use std::io::Write;
use std::num::NonZeroUsize;
use std::process::exit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::{rngs::SmallRng, Rng, SeedableRng};

const USAGE: &str = "usage: hit_ratio run|trace --trace zipf<S>[+scan] [--keys N] [--requests N] \
[--warmup N] [--value-size N] [--scan-frac F] [--scan-run N] [--seed N] [--host H] [--port P] \
[--conns C] [--pipeline D] [--server NAME] [--protocol resp|memcache] [--rate R] [--capacity N]";

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Run,
    Trace,
}

struct Opts {
    mode: Mode,
    trace: String,
    /// Zipf exponent and whether sweeps are mixed in, both from `trace`.
    zipf_s: f64,
    scan: bool,
    keys: u64,
    requests: u64,
    warmup: u64,
    value_size: usize,
    scan_frac: f64,
    scan_run: u64,
    seed: u64,
    host: String,
    port: u16,
    conns: usize,
    pipeline: usize,
    server: String,
    /// The memcached text protocol instead of RESP.
    memcache: bool,
    rate: f64,
    capacity: u64,
}

fn bad(msg: String) -> ! {
    eprintln!("hit_ratio: {msg}\n{USAGE}");
    exit(2)
}

fn parse() -> Option<Opts> {
    let mut mode = None;
    let mut trace = String::new();
    let (mut keys, mut requests, mut warmup, mut capacity) = (1_000_000u64, None, None, None);
    let mut o = Opts {
        mode: Mode::Run,
        trace: String::new(),
        zipf_s: 0.0,
        scan: false,
        keys: 0,
        requests: 0,
        warmup: 0,
        value_size: 1024,
        scan_frac: 0.2,
        scan_run: 4096,
        seed: 1,
        host: "127.0.0.1".into(),
        port: 6379,
        conns: 4,
        pipeline: 32,
        server: "server".into(),
        memcache: false,
        rate: 0.0,
        capacity: 0,
    };
    fn num<T: std::str::FromStr>(name: &str, s: String) -> T {
        s.parse()
            .unwrap_or_else(|_| bad(format!("bad value '{s}' for {name}")))
    }
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || {
            it.next()
                .unwrap_or_else(|| bad(format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--bench" => {} // added by `cargo bench`
            "--trace" => trace = val(),
            "--keys" => keys = num("--keys", val()),
            "--requests" => requests = Some(num("--requests", val())),
            "--warmup" => warmup = Some(num("--warmup", val())),
            "--value-size" => o.value_size = num("--value-size", val()),
            "--scan-frac" => o.scan_frac = num("--scan-frac", val()),
            "--scan-run" => o.scan_run = num("--scan-run", val()),
            "--seed" => o.seed = num("--seed", val()),
            "--host" => o.host = val(),
            "--port" => o.port = num("--port", val()),
            "--conns" => o.conns = num("--conns", val()),
            "--pipeline" => o.pipeline = num("--pipeline", val()),
            "--server" => o.server = val(),
            "--protocol" => {
                o.memcache = match val().as_str() {
                    "resp" => false,
                    "memcache" => true,
                    p => bad(format!("--protocol must be resp or memcache, not '{p}'")),
                }
            }
            "--rate" => o.rate = num("--rate", val()),
            "--capacity" => capacity = Some(num("--capacity", val())),
            "-h" | "--help" => {
                println!("{USAGE}");
                exit(0)
            }
            "run" if mode.is_none() => mode = Some(Mode::Run),
            "trace" if mode.is_none() => mode = Some(Mode::Trace),
            s => bad(format!("unexpected argument '{s}'")),
        }
    }
    o.mode = mode?;
    let body = trace
        .strip_prefix("zipf")
        .unwrap_or_else(|| bad(format!("--trace must be zipf<S>[+scan], not '{trace}'")));
    let (s, scan) = match body.strip_suffix("+scan") {
        Some(s) => (s, true),
        None => (body, false),
    };
    o.zipf_s = num("--trace exponent", s.to_string());
    o.scan = scan;
    o.trace = trace;
    o.keys = keys;
    o.requests = requests.unwrap_or(20 * keys);
    o.warmup = warmup.unwrap_or(o.requests / 2);
    o.capacity = capacity.unwrap_or(keys / 10);
    if o.keys == 0 || o.requests == 0 || o.conns == 0 || o.pipeline == 0 || o.value_size == 0 {
        bad("--keys, --requests, --conns, --pipeline and --value-size must be positive".into());
    }
    if o.warmup >= o.requests {
        bad(format!(
            "--warmup ({}) must be below --requests ({})",
            o.warmup, o.requests
        ));
    }
    if !(o.zipf_s >= 0.0 && o.zipf_s.is_finite()) {
        bad(format!("bad Zipf exponent in '{}'", o.trace));
    }
    if o.scan && !(o.scan_frac > 0.0 && o.scan_frac < 1.0 && o.scan_run > 0) {
        bad("--scan-frac must be in (0, 1) and --scan-run positive".into());
    }
    // Trace entries are u32: Zipf keys below `keys`, then one id per scan request.
    if o.keys + o.requests > u32::MAX as u64 {
        bad("--keys + --requests must stay below 2^32".into());
    }
    Some(o)
}

// --- trace -----------------------------------------------------------------

#[path = "common/zipf.rs"]
mod zipf;
use zipf::{key_of_rank, Zipf};

/// The requests of a trace: ids below `keys` are Zipf keys, `keys + n` is the scan key n.
fn generate(o: &Opts) -> Vec<u32> {
    let zipf = Zipf::new(o.keys, o.zipf_s);
    let key_of_rank = key_of_rank(o.keys, o.seed);
    let mut zipf_rng = SmallRng::seed_from_u64(o.seed);
    let mut scan_rng = SmallRng::seed_from_u64(o.seed.wrapping_add(0x5CA9));
    let block = if o.scan {
        ((o.scan_run as f64 / o.scan_frac).round() as u64).max(o.scan_run)
    } else {
        u64::MAX
    };
    let mut scan_start = u64::MAX;
    let mut next_scan = o.keys as u32;
    let mut trace = Vec::with_capacity(o.requests as usize);
    for i in 0..o.requests {
        if o.scan {
            let within = i % block;
            if within == 0 {
                scan_start = scan_rng.gen_range(0..=block - o.scan_run);
            }
            if (scan_start..scan_start + o.scan_run).contains(&within) {
                trace.push(next_scan);
                next_scan += 1;
                continue;
            }
        }
        trace.push(key_of_rank[zipf.sample(&mut zipf_rng) as usize]);
    }
    trace
}

/// `trace` mode: what an infinite cache, an exact LRU and an oracle holding the most popular
/// keys would hit on the counted requests.
fn trace_stats(o: &Opts, trace: &[u32]) {
    let warm = o.warmup as usize;
    let mut seen = vec![false; o.keys as usize];
    let mut top = vec![false; o.keys as usize];
    for &k in key_of_rank(o.keys, o.seed).iter().take(o.capacity as usize) {
        top[k as usize] = true;
    }
    let mut distinct = 0u64;
    let (mut gets, mut repeats, mut scans) = (0u64, 0u64, 0u64);
    let (mut lru_hits, mut top_hits) = (0u64, 0u64);
    let mut lru = NonZeroUsize::new(o.capacity as usize).map(lru::LruCache::<u32, ()>::new);
    let mut lfu = PerfectLfu::new(o.capacity as usize);
    let mut lfu_hits = 0u64;
    for (i, &id) in trace.iter().enumerate() {
        let counted = i >= warm;
        let is_zipf = (id as u64) < o.keys;
        if counted {
            gets += 1;
            scans += u64::from(!is_zipf);
        }
        if is_zipf {
            let s = &mut seen[id as usize];
            if *s {
                repeats += u64::from(counted);
                top_hits += u64::from(counted && top[id as usize]);
            } else {
                *s = true;
                distinct += 1;
            }
        }
        lfu_hits += u64::from(lfu.access(id) && counted);
        if let Some(lru) = lru.as_mut() {
            // get() refreshes recency; a miss inserts, as cache-aside does.
            if lru.get(&id).is_some() {
                lru_hits += u64::from(counted);
            } else {
                lru.put(id, ());
            }
        }
    }
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    println!(
        "TRACE trace={} keys={} requests={} warmup={} gets={gets} scan_gets={scans} \
         distinct_keys={distinct} max_hit_ratio={:.4} lru_hit_ratio={:.4} top_hit_ratio={:.4} \
         lfu_hit_ratio={:.4} capacity={}",
        o.trace,
        o.keys,
        o.requests,
        o.warmup,
        ratio(repeats, gets),
        ratio(lru_hits, gets),
        ratio(top_hits, gets),
        ratio(lfu_hits, gets),
        o.capacity
    );
}

/// An online LFU with perfect memory, the best a frequency-based cache policy can do without
/// knowing the future: it counts every request of every key since the start of the trace
/// (keys not in the cache too), a missed key enters only when its count is above the lowest
/// count in the cache, and then that key leaves (ties keep the key already cached).
struct PerfectLfu {
    capacity: usize,
    counts: std::collections::HashMap<u32, u32>,
    cached: std::collections::HashSet<u32>,
    /// (count, key) of cached keys; stale pairs (count since raised, key gone) are skipped.
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(u32, u32)>>,
}

impl PerfectLfu {
    fn new(capacity: usize) -> Self {
        PerfectLfu {
            capacity,
            counts: Default::default(),
            cached: Default::default(),
            heap: Default::default(),
        }
    }

    /// One request of `id`; true on a hit.
    fn access(&mut self, id: u32) -> bool {
        if self.capacity == 0 {
            return false;
        }
        let c = self.counts.entry(id).or_insert(0);
        *c += 1;
        let count = *c;
        if self.cached.contains(&id) {
            self.heap.push(std::cmp::Reverse((count, id)));
            self.compact_heap();
            return true;
        }
        if self.cached.len() >= self.capacity {
            // The cached key with the lowest current count.
            let victim = loop {
                let Some(&std::cmp::Reverse((c, k))) = self.heap.peek() else {
                    return false;
                };
                if self.cached.contains(&k) && self.counts.get(&k) == Some(&c) {
                    break (c, k);
                }
                self.heap.pop();
            };
            if count <= victim.0 {
                return false;
            }
            self.heap.pop();
            self.cached.remove(&victim.1);
        }
        self.cached.insert(id);
        self.heap.push(std::cmp::Reverse((count, id)));
        false
    }

    /// Drops stale heap pairs once they outnumber the live ones three to one.
    fn compact_heap(&mut self) {
        if self.heap.len() > 4 * self.capacity.max(1024) {
            let live: Vec<_> = self.cached.iter().map(|&k| (self.counts[&k], k)).collect();
            self.heap = live.into_iter().map(std::cmp::Reverse).collect();
        }
    }
}

// --- RESP client -----------------------------------------------------------

/// Width of the zero-padded number in every key, so that all keys are the same length.
fn key_width(keys: u64) -> usize {
    (keys.max(2) - 1).to_string().len()
}

fn push_key(buf: &mut Vec<u8>, id: u32, keys: u64, width: usize) {
    if (id as u64) < keys {
        let _ = write!(buf, "key:{id:0width$}");
    } else {
        let _ = write!(buf, "scan:{:0width$}", id as u64 - keys);
    }
}

/// The value stored under a key: `<key>:` then fixed filler, cut to `size`.
fn value_of(key: &[u8], filler: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(key);
    out.push(b':');
    out.extend_from_slice(filler);
    out.truncate(filler.len());
}

#[path = "common/resp_client.rs"]
mod resp_client;
use resp_client::{push_bulk, Conn, Reply};

#[path = "common/mc_client.rs"]
mod mc_client;
use mc_client::McConn;

/// One driver connection, in the protocol asked.
enum Client {
    Resp(Conn),
    Memcache(McConn),
}

impl Client {
    fn open(o: &Opts) -> Result<Client, String> {
        if o.memcache {
            McConn::open(&o.host, o.port).map(Client::Memcache)
        } else {
            Conn::open(&o.host, o.port).map(Client::Resp)
        }
    }

    fn send(&mut self, buf: &[u8]) -> Result<(), String> {
        match self {
            Client::Resp(c) => c.send(buf),
            Client::Memcache(c) => c.send(buf),
        }
    }

    fn reply(&mut self, data: &mut Vec<u8>) -> Result<Reply, String> {
        match self {
            Client::Resp(c) => c.reply(data),
            Client::Memcache(c) => c.reply(data),
        }
    }

    fn push_get(&self, buf: &mut Vec<u8>, key: &[u8]) {
        match self {
            Client::Resp(_) => {
                buf.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
                push_bulk(buf, key);
            }
            Client::Memcache(_) => mc_client::push_get(buf, key),
        }
    }

    fn push_set(&self, buf: &mut Vec<u8>, key: &[u8], value: &[u8]) {
        match self {
            Client::Resp(_) => {
                buf.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
                push_bulk(buf, key);
                push_bulk(buf, value);
            }
            Client::Memcache(_) => mc_client::push_set(buf, key, value),
        }
    }

    /// The reply to a SET that stored the value.
    fn stored(&self, reply: &Reply) -> bool {
        match (self, reply) {
            (Client::Resp(_), Reply::Simple(s)) => s == "OK",
            (Client::Memcache(_), Reply::Simple(s)) => s == "STORED",
            _ => false,
        }
    }
}

// --- driver ----------------------------------------------------------------

#[derive(Default)]
struct Stats {
    gets: u64,
    hits: u64,
    scan_gets: u64,
    scan_hits: u64,
    sets: u64,
    errors: u64,
    oom: u64,
    wrong: u64,
    warmup_errors: u64,
    first_error: Option<String>,
    first_wrong: Option<String>,
}

impl Stats {
    /// Counts an error reply (or an unexpected one) to `cmd`.
    fn error(&mut self, counted: bool, cmd: &str, key: &[u8], reply: Reply) {
        let text = match reply {
            Reply::Error(e) => format!("-{e}"),
            Reply::Simple(s) => format!("unexpected reply \"+{s}\""),
            Reply::Int(n) => format!("unexpected reply \":{n}\""),
            Reply::Bulk | Reply::Nil => "unexpected bulk reply".into(),
        };
        if counted {
            self.errors += 1;
            // RESP's -OOM, memcached's SERVER_ERROR out of memory storing object.
            self.oom += u64::from(text.starts_with("-OOM") || text.contains("out of memory"));
        } else {
            self.warmup_errors += 1;
        }
        self.first_error
            .get_or_insert_with(|| format!("{cmd} {}: {text}", String::from_utf8_lossy(key)));
    }

    fn add(&mut self, s: Stats) {
        self.gets += s.gets;
        self.hits += s.hits;
        self.scan_gets += s.scan_gets;
        self.scan_hits += s.scan_hits;
        self.sets += s.sets;
        self.errors += s.errors;
        self.oom += s.oom;
        self.wrong += s.wrong;
        self.warmup_errors += s.warmup_errors;
        self.first_error = self.first_error.take().or(s.first_error);
        self.first_wrong = self.first_wrong.take().or(s.first_wrong);
    }
}

/// Replays batches taken from `cursor` over one connection until the trace is done.
fn drive_conn(
    o: &Opts,
    trace: &[u32],
    cursor: &AtomicUsize,
    t0: Instant,
    mut conn: Client,
) -> Result<Stats, String> {
    let mut st = Stats::default();
    let width = key_width(o.keys);
    let filler: Vec<u8> = {
        let mut rng = SmallRng::seed_from_u64(0xF111);
        (0..o.value_size)
            .map(|_| b'a' + rng.gen_range(0..26))
            .collect()
    };
    let warm = o.warmup as usize;
    // SETs owed for the previous batch's misses: (key id, counted).
    let mut owed: Vec<(u32, bool)> = Vec::with_capacity(o.pipeline);
    let (mut req, mut key, mut val, mut data) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    loop {
        let start = cursor
            .fetch_add(o.pipeline, Ordering::Relaxed)
            .min(trace.len());
        if o.rate > 0.0 {
            let due = t0 + Duration::from_secs_f64(start as f64 / o.rate);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        let batch = &trace[start..(start + o.pipeline).min(trace.len())];
        if batch.is_empty() && owed.is_empty() {
            return Ok(st);
        }
        req.clear();
        for &(id, _) in &owed {
            key.clear();
            push_key(&mut key, id, o.keys, width);
            value_of(&key, &filler, &mut val);
            conn.push_set(&mut req, &key, &val);
        }
        for &id in batch {
            key.clear();
            push_key(&mut key, id, o.keys, width);
            conn.push_get(&mut req, &key);
        }
        conn.send(&req)?;
        for (id, counted) in owed.drain(..) {
            st.sets += u64::from(counted);
            match conn.reply(&mut data)? {
                r if conn.stored(&r) => {}
                other => {
                    key.clear();
                    push_key(&mut key, id, o.keys, width);
                    st.error(counted, "SET", &key, other);
                }
            }
        }
        for (j, &id) in batch.iter().enumerate() {
            let counted = start + j >= warm;
            let is_scan = id as u64 >= o.keys;
            if counted {
                st.gets += 1;
                st.scan_gets += u64::from(is_scan);
            }
            match conn.reply(&mut data)? {
                Reply::Bulk => {
                    key.clear();
                    push_key(&mut key, id, o.keys, width);
                    value_of(&key, &filler, &mut val);
                    if data != val {
                        st.wrong += 1;
                        st.first_wrong.get_or_insert_with(|| {
                            format!(
                                "GET {}: {} bytes starting {:?}",
                                String::from_utf8_lossy(&key),
                                data.len(),
                                String::from_utf8_lossy(&data[..data.len().min(40)])
                            )
                        });
                    } else if counted {
                        st.hits += 1;
                        st.scan_hits += u64::from(is_scan);
                    }
                }
                Reply::Nil => {
                    // A key twice in one batch is SET once.
                    if !owed.iter().any(|&(k, _)| k == id) {
                        owed.push((id, counted));
                    }
                }
                other => {
                    key.clear();
                    push_key(&mut key, id, o.keys, width);
                    st.error(counted, "GET", &key, other);
                }
            }
        }
    }
}

fn run(o: &Opts, trace: &[u32]) {
    let mut conns = Vec::with_capacity(o.conns);
    for _ in 0..o.conns {
        match Client::open(o) {
            Ok(c) => conns.push(c),
            Err(e) => {
                eprintln!("hit_ratio: {e}");
                exit(1)
            }
        }
    }
    let cursor = AtomicUsize::new(0);
    let start = Instant::now();
    let results: Vec<Result<Stats, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = conns
            .into_iter()
            .map(|conn| {
                let cursor = &cursor;
                s.spawn(move || drive_conn(o, trace, cursor, start, conn))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut t = Stats::default();
    for r in results {
        match r {
            Ok(s) => t.add(s),
            Err(e) => {
                eprintln!("hit_ratio run: {e}");
                exit(1)
            }
        }
    }
    if let Some(e) = &t.first_error {
        eprintln!(
            "hit_ratio run: {} error repl(ies) ({} in warm-up), first: {e}",
            t.errors + t.warmup_errors,
            t.warmup_errors
        );
    }
    if let Some(w) = &t.first_wrong {
        eprintln!("hit_ratio run: {} wrong value(s), first: {w}", t.wrong);
    }
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    println!(
        "RESULT trace={} server={} hit_ratio={:.4} zipf_hit_ratio={:.4} gets={} hits={} sets={} \
         errors={} oom={} wrong={} warmup_errors={} keys={} requests={} warmup={} value_size={} \
         seconds={secs:.2} requests_per_sec={:.0}",
        o.trace,
        o.server,
        ratio(t.hits, t.gets),
        ratio(t.hits - t.scan_hits, t.gets - t.scan_gets),
        t.gets,
        t.hits,
        t.sets,
        t.errors,
        t.oom,
        t.wrong,
        t.warmup_errors,
        o.keys,
        o.requests,
        o.warmup,
        o.value_size,
        trace.len() as f64 / secs
    );
}

fn main() {
    let Some(o) = parse() else {
        println!("{USAGE}\n(no mode given: nothing to do)");
        return;
    };
    let trace = generate(&o);
    match o.mode {
        Mode::Trace => trace_stats(&o, &trace),
        Mode::Run => run(&o, &trace),
    }
}

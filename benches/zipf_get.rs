//! Closed-loop RESP load generator for the tiering benchmark (`benches/tiering_bench.sh`).
//!
//! ```text
//! zipf_get fill [opts]   SET prefix0..prefix(K-1) to deterministic values
//! zipf_get get  [opts]   GET random keys for --seconds, check every value
//!
//! --host 127.0.0.1 --port 6379   server
//! --keys K (100000)              keyspace size; keys are PREFIX<i>, i in 0..K
//! --prefix key:                  key prefix
//! --value-size 1024              value length in bytes (must match between fill and get)
//! --conns 8 --pipeline 16        connections (one thread each) and requests per round trip
//! --seconds 10                   how long `get` runs
//! --dist uniform|hot|zipf|seq    uniform over all keys; hot = --hot-share (0.9) of requests
//!                                to the hottest --hot-frac (0.1) of keys (every 10th key),
//!                                the rest uniform over all; zipf = Zipf over all keys with
//!                                the exponent at which the hottest --hot-frac of keys draw
//!                                --hot-share of requests (or --zipf-s), ranks spread over the
//!                                keys by a fixed shuffle; seq = every key once, then stop
//! --hot-frac 0.1 --hot-share 0.9
//! --zipf-s S                     the Zipf exponent, instead of the one --hot-frac/--hot-share give
//! --seed 1
//! --fill-timeout 600             seconds `fill` keeps retrying writes refused with -OOM
//! ```
//!
//! The value of key i is `"<i>:"` followed by pseudo-random letters seeded with i, so every
//! reply can be checked against the key it answers. Output is one parseable line:
//!
//! ```text
//! FILL keys=... ops_per_sec=... oom_replies=... errors=... seconds=...
//! LOAD ops_per_sec=... p50_us=... p99_us=... p999_us=... max_us=... ops=... hits=... misses=... wrong=... errors=... seconds=... dist=... conns=... pipeline=...
//! ```
//!
//! Latency is per round trip of one pipelined batch (send all, read all), in microseconds.
//! Exit status: 0 when the run completed (whatever the counts), 1 on a connection or protocol
//! error, 2 on bad arguments. With no mode (as `cargo bench` runs it) it prints this help.

use std::io::Write;
use std::process::exit;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, Rng, SeedableRng};

const USAGE: &str = "usage: zipf_get fill|get [--host H] [--port P] [--keys K] [--prefix S] \
[--value-size N] [--conns C] [--pipeline D] [--seconds S] [--dist uniform|hot|zipf|seq] \
[--hot-frac F] [--hot-share F] [--zipf-s S] [--seed N] [--fill-timeout S]";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Dist {
    Uniform,
    Hot,
    Zipf,
    Seq,
}

#[derive(Clone)]
struct Opts {
    mode: String,
    host: String,
    port: u16,
    keys: u64,
    prefix: String,
    value_size: usize,
    conns: usize,
    pipeline: usize,
    seconds: f64,
    dist: Dist,
    hot_frac: f64,
    hot_share: f64,
    zipf_s: Option<f64>,
    seed: u64,
    fill_timeout: f64,
}

fn bad(msg: String) -> ! {
    eprintln!("zipf_get: {msg}\n{USAGE}");
    exit(2)
}

fn parse() -> Option<Opts> {
    let mut o = Opts {
        mode: String::new(),
        host: "127.0.0.1".into(),
        port: 6379,
        keys: 100_000,
        prefix: "key:".into(),
        value_size: 1024,
        conns: 8,
        pipeline: 16,
        seconds: 10.0,
        dist: Dist::Uniform,
        hot_frac: 0.1,
        hot_share: 0.9,
        zipf_s: None,
        seed: 1,
        fill_timeout: 600.0,
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
            "--host" => o.host = val(),
            "--port" => o.port = num("--port", val()),
            "--keys" => o.keys = num("--keys", val()),
            "--prefix" => o.prefix = val(),
            "--value-size" => o.value_size = num("--value-size", val()),
            "--conns" => o.conns = num("--conns", val()),
            "--pipeline" => o.pipeline = num("--pipeline", val()),
            "--seconds" => o.seconds = num("--seconds", val()),
            "--hot-frac" => o.hot_frac = num("--hot-frac", val()),
            "--hot-share" => o.hot_share = num("--hot-share", val()),
            "--zipf-s" => o.zipf_s = Some(num("--zipf-s", val())),
            "--seed" => o.seed = num("--seed", val()),
            "--fill-timeout" => o.fill_timeout = num("--fill-timeout", val()),
            "--dist" => {
                o.dist = match val().as_str() {
                    "uniform" => Dist::Uniform,
                    "hot" => Dist::Hot,
                    "zipf" => Dist::Zipf,
                    "seq" => Dist::Seq,
                    d => bad(format!("unknown --dist '{d}'")),
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                exit(0)
            }
            "fill" | "get" if o.mode.is_empty() => o.mode = arg,
            s => bad(format!("unexpected argument '{s}'")),
        }
    }
    if o.mode.is_empty() {
        return None;
    }
    if o.keys == 0 || o.conns == 0 || o.pipeline == 0 || o.seconds <= 0.0 {
        bad("--keys, --conns, --pipeline and --seconds must be positive".into());
    }
    let hot_ok = 0.0 < o.hot_frac && o.hot_frac <= 1.0 && (0.0..=1.0).contains(&o.hot_share);
    if o.dist == Dist::Zipf && o.keys > u64::from(u32::MAX) {
        bad("--dist zipf takes at most 2^32 - 1 keys".into());
    }
    if !hot_ok {
        bad("--hot-frac must be in (0, 1], --hot-share in [0, 1]".into());
    }
    Some(o)
}

/// The value stored under key index `i`: `"<i>:"` then letters from a generator seeded with i.
fn expected_value(i: u64, size: usize, out: &mut Vec<u8>) {
    out.clear();
    let _ = write!(out, "{i}:");
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    while out.len() < size {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        for b in z.to_le_bytes() {
            if out.len() < size {
                out.push(b'a' + b % 26);
            }
        }
    }
    out.truncate(size);
}

#[path = "common/zipf.rs"]
mod zipf;
use zipf::{key_of_rank, Zipf};

#[path = "common/resp_client.rs"]
mod resp_client;
use resp_client::{push_bulk, Conn, Reply};

#[derive(Default)]
struct FillStats {
    done: u64,
    oom: u64,
    errors: u64,
    first_error: Option<String>,
}

/// SETs the keys `c, c+conns, ...` over one connection, retrying keys refused with -OOM.
fn fill_conn(o: &Opts, mut conn: Conn, c: usize) -> Result<FillStats, String> {
    let mut st = FillStats::default();
    let deadline = Instant::now() + Duration::from_secs_f64(o.fill_timeout);
    let mut next = c as u64;
    let mut retry: Vec<u64> = Vec::new();
    let (mut req, mut val, mut data) = (Vec::new(), Vec::new(), Vec::new());
    let mut batch: Vec<u64> = Vec::with_capacity(o.pipeline);
    loop {
        batch.clear();
        while batch.len() < o.pipeline {
            if let Some(i) = retry.pop() {
                batch.push(i);
            } else if next < o.keys {
                batch.push(next);
                next += o.conns as u64;
            } else {
                break;
            }
        }
        if batch.is_empty() {
            return Ok(st);
        }
        req.clear();
        for &i in &batch {
            expected_value(i, o.value_size, &mut val);
            req.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
            push_bulk(&mut req, format!("{}{i}", o.prefix).as_bytes());
            push_bulk(&mut req, &val);
        }
        conn.send(&req)?;
        let mut refused = 0;
        for &i in &batch {
            match conn.reply(&mut data)? {
                Reply::Simple(s) if s == "OK" => st.done += 1,
                Reply::Error(e) if e.starts_with("OOM") => {
                    st.oom += 1;
                    refused += 1;
                    retry.push(i);
                }
                other => {
                    st.errors += 1;
                    st.first_error.get_or_insert_with(|| match other {
                        Reply::Error(e) => format!("SET {}{i}: -{e}", o.prefix),
                        _ => format!("SET {}{i}: unexpected reply", o.prefix),
                    });
                }
            }
        }
        if refused > 0 {
            if Instant::now() > deadline {
                st.errors += retry.len() as u64;
                st.first_error.get_or_insert_with(|| {
                    format!("writes still refused with -OOM after {}s", o.fill_timeout)
                });
                return Ok(st);
            }
            // The server is over maxmemory: give its offloader time to make room.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

struct LoadStats {
    hist: Histogram<u64>,
    ops: u64,
    hits: u64,
    misses: u64,
    wrong: u64,
    errors: u64,
    first_wrong: Option<String>,
    first_error: Option<String>,
}

/// GETs keys from the configured distribution over one connection until the deadline (or,
/// for `seq`, until its share of the keyspace is done).
/// The Zipf popularity shared by every connection of a `--dist zipf` run: the same ranking of
/// keys whatever `--seed` (only the draws differ), so runs warm each other's caches.
/// Ranks are drawn by rejection-inversion (`rand_distr::Zipf`: a few floating-point operations
/// and no table), not by a search of a cumulative table, whose ~20 dependent cache misses per
/// draw over 512Ki keys would make the load generator, not the server, the limit of a run.
struct Popularity {
    zipf: rand_distr::Zipf<f64>,
    key_of_rank: Vec<u32>,
    exponent: f64,
}

impl Popularity {
    fn new(o: &Opts) -> Popularity {
        let exponent = o
            .zipf_s
            .unwrap_or_else(|| Zipf::exponent_for(o.keys, o.hot_frac, o.hot_share));
        let zipf = rand_distr::Zipf::new(o.keys, exponent)
            .unwrap_or_else(|e| bad(format!("bad Zipf exponent {exponent}: {e}")));
        Popularity {
            zipf,
            key_of_rank: key_of_rank(o.keys, 0),
            exponent,
        }
    }
}

fn load_conn(
    o: &Opts,
    pop: Option<&Popularity>,
    mut conn: Conn,
    c: usize,
    deadline: Instant,
) -> Result<LoadStats, String> {
    let mut st = LoadStats {
        hist: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
        ops: 0,
        hits: 0,
        misses: 0,
        wrong: 0,
        errors: 0,
        first_wrong: None,
        first_error: None,
    };
    let mut rng = SmallRng::seed_from_u64(o.seed.wrapping_mul(1_000_003) ^ c as u64);
    let stride = (1.0 / o.hot_frac).round().max(1.0) as u64;
    let hot_keys = o.keys.div_ceil(stride);
    let mut next = c as u64;
    let (mut req, mut val, mut data) = (Vec::new(), Vec::new(), Vec::new());
    let mut batch: Vec<u64> = Vec::with_capacity(o.pipeline);
    loop {
        if o.dist != Dist::Seq && Instant::now() >= deadline {
            return Ok(st);
        }
        batch.clear();
        while batch.len() < o.pipeline {
            let i = match o.dist {
                Dist::Uniform => rng.gen_range(0..o.keys),
                Dist::Hot => {
                    if rng.gen_bool(o.hot_share) {
                        rng.gen_range(0..hot_keys) * stride
                    } else {
                        rng.gen_range(0..o.keys)
                    }
                }
                Dist::Zipf => match pop {
                    Some(p) => {
                        // A rank in 1..=keys (as a float).
                        let rank = (rng.sample(p.zipf) as usize).clamp(1, p.key_of_rank.len());
                        u64::from(p.key_of_rank[rank - 1])
                    }
                    None => return Err("no Zipf table".into()),
                },
                Dist::Seq => {
                    if next >= o.keys {
                        break;
                    }
                    next += o.conns as u64;
                    next - o.conns as u64
                }
            };
            batch.push(i);
        }
        if batch.is_empty() {
            return Ok(st);
        }
        req.clear();
        for &i in &batch {
            req.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
            push_bulk(&mut req, format!("{}{i}", o.prefix).as_bytes());
        }
        let t0 = Instant::now();
        conn.send(&req)?;
        for &i in &batch {
            match conn.reply(&mut data)? {
                Reply::Bulk => {
                    st.hits += 1;
                    expected_value(i, o.value_size, &mut val);
                    if data != val {
                        st.wrong += 1;
                        st.first_wrong.get_or_insert_with(|| {
                            let show = |b: &[u8]| {
                                String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned()
                            };
                            format!(
                                "GET {}{i}: got {} bytes starting {:?}, expected {} bytes starting {:?}",
                                o.prefix,
                                data.len(),
                                show(&data),
                                val.len(),
                                show(&val)
                            )
                        });
                    }
                }
                Reply::Nil => st.misses += 1,
                other => {
                    st.errors += 1;
                    st.first_error.get_or_insert_with(|| match other {
                        Reply::Error(e) => format!("GET {}{i}: -{e}", o.prefix),
                        Reply::Simple(s) => format!("GET {}{i}: +{s}", o.prefix),
                        Reply::Int(n) => format!("GET {}{i}: :{n}", o.prefix),
                        _ => format!("GET {}{i}: unexpected reply", o.prefix),
                    });
                }
            }
        }
        let us = t0.elapsed().as_micros() as u64;
        let _ = st.hist.record(us.max(1));
        st.ops += batch.len() as u64;
    }
}

fn main() {
    let Some(o) = parse() else {
        println!("{USAGE}\n(no mode given: nothing to do)");
        return;
    };
    let mut conns = Vec::with_capacity(o.conns);
    for _ in 0..o.conns {
        match Conn::open(&o.host, o.port) {
            Ok(c) => conns.push(c),
            Err(e) => {
                eprintln!("zipf_get: {e}");
                exit(1)
            }
        }
    }
    // Built before the clock starts: the exponent search and the key shuffle take a moment.
    let pop = (o.mode == "get" && o.dist == Dist::Zipf).then(|| Popularity::new(&o));
    let start = Instant::now();
    if o.mode == "fill" {
        let results: Vec<Result<FillStats, String>> = std::thread::scope(|s| {
            let hs: Vec<_> = conns
                .into_iter()
                .enumerate()
                .map(|(c, conn)| {
                    let o = &o;
                    s.spawn(move || fill_conn(o, conn, c))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
                .collect()
        });
        let secs = start.elapsed().as_secs_f64();
        let mut t = FillStats::default();
        for r in results {
            match r {
                Ok(s) => {
                    t.done += s.done;
                    t.oom += s.oom;
                    t.errors += s.errors;
                    if t.first_error.is_none() {
                        t.first_error = s.first_error;
                    }
                }
                Err(e) => {
                    eprintln!("zipf_get fill: {e}");
                    exit(1)
                }
            }
        }
        if let Some(e) = &t.first_error {
            eprintln!("zipf_get fill: {} error(s), first: {e}", t.errors);
        }
        println!(
            "FILL keys={} ops_per_sec={:.0} oom_replies={} errors={} seconds={secs:.2}",
            t.done,
            t.done as f64 / secs,
            t.oom,
            t.errors
        );
        return;
    }
    let deadline = start + Duration::from_secs_f64(o.seconds);
    let results: Vec<Result<LoadStats, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(c, conn)| {
                let o = &o;
                let pop = pop.as_ref();
                s.spawn(move || load_conn(o, pop, conn, c, deadline))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let (mut ops, mut hits, mut misses, mut wrong, mut errors) = (0, 0, 0, 0, 0);
    let (mut first_wrong, mut first_error) = (None, None);
    for r in results {
        match r {
            Ok(s) => {
                let _ = hist.add(&s.hist);
                ops += s.ops;
                hits += s.hits;
                misses += s.misses;
                wrong += s.wrong;
                errors += s.errors;
                first_wrong = first_wrong.or(s.first_wrong);
                first_error = first_error.or(s.first_error);
            }
            Err(e) => {
                eprintln!("zipf_get get: {e}");
                exit(1)
            }
        }
    }
    if let Some(w) = first_wrong {
        eprintln!("zipf_get get: {wrong} wrong value(s), first: {w}");
    }
    if let Some(e) = first_error {
        eprintln!("zipf_get get: {errors} error repl(ies), first: {e}");
    }
    println!(
        "LOAD ops_per_sec={:.0} p50_us={} p99_us={} p999_us={} max_us={} ops={ops} hits={hits} misses={misses} wrong={wrong} errors={errors} seconds={secs:.2} dist={} conns={} pipeline={}{}",
        ops as f64 / secs,
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
        hist.max(),
        format!("{:?}", o.dist).to_lowercase(),
        o.conns,
        o.pipeline,
        pop.map_or_else(String::new, |p| format!(" zipf_s={:.4}", p.exponent))
    );
}

//! `strata-bench pubsub`: publishers on the engine's open-loop timetable, subscribers on their
//! own connections, and the publish-to-delivery latency of every message.
//!
//! Each message starts with its scheduled publish time (20 decimal digits of the run's
//! [`Clock`]); a subscriber subtracts it from the time it read the message, so a slow publish
//! path, a slow fan-out or a slow subscriber socket all show as latency. Every subscriber
//! subscribes to every channel, so each message is expected once per subscriber; what has not
//! arrived a few seconds after the last publish is reported lost.
//!
//! Never: times a message by anything but the stamp it carries; counts a message it could not
//! read a stamp from as delivered (it is counted as malformed).

use crate::codec::{encode_resp, parse_bulk_array, Outcome, Protocol};
use crate::engine::{self, Clock, Plan, Progress};
use crate::summary::{self, latency_header, latency_row, Percentiles};
use crate::workload::{self, Generator, KeyDist, Range, Ratio, Workload};
use crate::{report, Failure, Target};
use hdrhistogram::Histogram;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long deliveries may trail the last publish before the missing ones count as lost.
const DELIVERY_GRACE: Duration = Duration::from_secs(5);

#[derive(clap::Args, Debug)]
pub struct PubsubArgs {
    #[command(flatten)]
    target: Target,
    /// Publisher connections, sharing --rate.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    publishers: u32,
    /// Subscriber connections (one thread each), each subscribed to every channel.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    subscribers: u32,
    /// Channels the publishers take turns on: channel:0 .. channel:N-1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    channels: u32,
    /// Messages published per second, all publishers together.
    #[arg(long, short = 'r', default_value = "1000", value_parser = crate::positive_rate)]
    rate: f64,
    /// Message size in bytes (at least 20: the time stamp).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(20..=64 * 1024 * 1024))]
    message_size: u32,
    /// Seconds of publishing.
    #[arg(long, short = 'd', default_value = "10", value_parser = crate::positive_seconds)]
    duration: f64,
    /// Publisher threads; at most --publishers.
    #[arg(long, short = 't', default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(serde::Serialize)]
struct PubsubJson {
    tool: &'static str,
    version: &'static str,
    command: &'static str,
    server: String,
    publishers: u32,
    subscribers: u32,
    channels: u32,
    message_size: u32,
    duration: f64,
    requested_rate: f64,
    achieved_rate: f64,
    published: u64,
    publish_errors: u64,
    expected: u64,
    delivered: u64,
    lost: u64,
    malformed: u64,
    delivery_latency_ms: Option<Percentiles>,
    publish_latency_ms: Option<Percentiles>,
}

pub fn pubsub(args: PubsubArgs) -> Result<(), Failure> {
    if args.threads > args.publishers {
        return Err(Failure::Usage(format!(
            "--threads {} is more than --publishers {}: each thread needs a connection",
            args.threads, args.publishers
        )));
    }
    let addr = args.target.resolve(Protocol::Resp)?;
    let clock = Clock::new();
    let prefix = "channel:";

    // Subscribers first: a message published before they listen would be lost.
    let stop = Arc::new(AtomicBool::new(false));
    let delivered = Arc::new(AtomicU64::new(0));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let mut handles = Vec::new();
    for s in 0..args.subscribers {
        let stream =
            subscribe(addr, prefix, args.channels).map_err(|e| format!("subscriber {s}: {e}"))?;
        let sub = Subscriber {
            stream,
            clock,
            stop: Arc::clone(&stop),
            delivered: Arc::clone(&delivered),
        };
        let ready = ready_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("subscriber-{s}"))
            .spawn(move || sub.run(ready))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        handles.push(handle);
    }
    drop(ready_tx);
    for _ in 0..args.subscribers {
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(Failure::Run(e)),
            Err(_) => return Err(Failure::Run("a subscriber did not get ready".into())),
        }
    }

    report!(
        "strata-bench pubsub: {addr}, {} publisher(s) at {:.0}/s for {} s, {} subscriber(s) \
         on {} channel(s), {} B messages",
        args.publishers,
        args.rate,
        args.duration,
        args.subscribers,
        args.channels,
        args.message_size
    );
    let work = Arc::new(Workload {
        protocol: Protocol::Resp,
        ratio: Ratio { set: 0, get: 1 },
        keys: 1,
        key_dist: KeyDist::Uniform,
        key_prefix: prefix.to_string(),
        key_width: 0,
        value_size: Range { min: 0, max: 0 },
        expiry: None,
        seed: 1,
        shards: 1,
    });
    let plan = Plan {
        protocol: Protocol::Resp,
        connections: args.publishers as usize,
        threads: args.threads as usize,
        pipeline: 1,
        rate: Some(args.rate),
        duration: Some(Duration::from_secs_f64(args.duration)),
        max_outstanding: 1000,
        busy_poll: false,
    };
    let gens = (0..args.publishers as usize)
        .map(|c| Generator::publish(&work, c, args.channels, args.message_size as usize))
        .collect();
    let progress = if args.quiet {
        Progress::Quiet
    } else {
        Progress::PerSecond
    };
    let published = engine::run(&[addr], &plan, gens, progress, clock);

    // Wait for the deliveries (or the grace time), then stop the subscribers.
    let expected = published.as_ref().map_or(0, |t| {
        (t.completed - t.errors) * u64::from(args.subscribers)
    });
    let deadline = Instant::now() + DELIVERY_GRACE;
    while delivered.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let mut latency = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .map_err(|e| format!("histogram: {e}"))?;
    let mut malformed = 0;
    let mut first_error = None;
    for handle in handles {
        match handle.join() {
            Ok(Ok(done)) => {
                latency
                    .add(&done.latency)
                    .map_err(|e| format!("histogram merge: {e:?}"))?;
                malformed += done.malformed;
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert_with(|| "a subscriber thread panicked".into());
            }
        }
    }
    let published = published?;
    if let Some(e) = first_error {
        return Err(Failure::Run(e));
    }

    let got = latency.len();
    let json = PubsubJson {
        tool: "strata-bench",
        version: env!("CARGO_PKG_VERSION"),
        command: "pubsub",
        server: addr.to_string(),
        publishers: args.publishers,
        subscribers: args.subscribers,
        channels: args.channels,
        message_size: args.message_size,
        duration: args.duration,
        requested_rate: args.rate,
        achieved_rate: published.achieved_rate(),
        published: published.completed,
        publish_errors: published.errors + published.unanswered,
        expected,
        delivered: got,
        lost: expected.saturating_sub(got),
        malformed,
        delivery_latency_ms: Percentiles::of(&latency),
        publish_latency_ms: Percentiles::of(&published.latency.all),
    };
    report!(
        "published: {} ({:.1}/s achieved of {:.0}/s requested), {} errors",
        json.published,
        json.achieved_rate,
        json.requested_rate,
        json.publish_errors
    );
    report!(
        "delivered: {} of {} expected, {} lost, {} malformed",
        json.delivered,
        json.expected,
        json.lost,
        json.malformed
    );
    report!("{}", latency_header());
    report!(
        "{}",
        latency_row("delivery", json.delivery_latency_ms.as_ref())
    );
    report!(
        "{}",
        latency_row("PUBLISH", json.publish_latency_ms.as_ref())
    );
    if let Some(path) = &args.json {
        summary::write_json(path, &json)?;
    }
    Ok(())
}

/// A connection subscribed to `channels` channels, once the server has confirmed them all.
fn subscribe(addr: SocketAddr, prefix: &str, channels: u32) -> Result<TcpStream, String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    stream
        .set_nodelay(true)
        .and_then(|()| stream.set_read_timeout(Some(Duration::from_secs(10))))
        .map_err(|e| format!("connection to {addr}: {e}"))?;
    let names: Vec<String> = (0..channels).map(|c| format!("{prefix}{c}")).collect();
    let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
    args.extend(names.iter().map(|n| n.as_bytes()));
    let mut out = Vec::new();
    encode_resp(&args, &mut out);
    stream
        .write_all(&out)
        .map_err(|e| format!("SUBSCRIBE: {e}"))?;
    // One confirmation per channel; nothing else can arrive before the publishers start.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut confirmed = 0;
    let mut parts = Vec::new();
    while confirmed < channels {
        let n = stream
            .read(&mut chunk)
            .map_err(|e| format!("waiting for SUBSCRIBE to be confirmed: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection after SUBSCRIBE".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut at = 0;
        while let Some((outcome, len)) =
            parse_bulk_array(&buf[at..], &mut parts).map_err(|e| format!("SUBSCRIBE: {e}"))?
        {
            if outcome == Outcome::Error {
                return Err(format!(
                    "SUBSCRIBE: {}",
                    String::from_utf8_lossy(&buf[at..at + len]).trim_end()
                ));
            }
            at += len;
            confirmed += 1;
        }
        buf.drain(..at);
    }
    Ok(stream)
}

struct Subscriber {
    stream: TcpStream,
    clock: Clock,
    stop: Arc<AtomicBool>,
    delivered: Arc<AtomicU64>,
}

struct Received {
    latency: Histogram<u64>,
    malformed: u64,
}

impl Subscriber {
    fn run(mut self, ready: mpsc::Sender<Result<(), String>>) -> Result<Received, String> {
        let setup = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
            .map_err(|e| format!("histogram: {e}"))
            .and_then(|h| {
                self.stream
                    .set_read_timeout(Some(Duration::from_millis(20)))
                    .map(|()| h)
                    .map_err(|e| format!("subscriber socket: {e}"))
            });
        let latency = match setup {
            Ok(h) => {
                let _ = ready.send(Ok(()));
                h
            }
            Err(e) => {
                let _ = ready.send(Err(e.clone()));
                return Err(e);
            }
        };
        let mut got = Received {
            latency,
            malformed: 0,
        };
        let mut buf = vec![0u8; 256 * 1024];
        let (mut start, mut end) = (0usize, 0usize);
        let mut parts = Vec::with_capacity(3);
        while !self.stop.load(Ordering::Relaxed) {
            if end == buf.len() {
                if start > 0 {
                    buf.copy_within(start..end, 0);
                    end -= start;
                    start = 0;
                } else {
                    let len = buf.len();
                    buf.resize(len * 2, 0);
                }
            }
            let n = match self.stream.read(&mut buf[end..]) {
                Ok(0) => return Err("a subscriber's connection was closed".into()),
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(format!("subscriber read: {e}")),
            };
            let now = self.clock.now_ns();
            end += n;
            let mut count = 0;
            while let Some((_, len)) = parse_bulk_array(&buf[start..end], &mut parts)
                .map_err(|e| format!("subscriber: {e}"))?
            {
                let message = &buf[start..start + len];
                let part = |i: usize| parts.get(i).map(|&(a, b): &(usize, usize)| &message[a..b]);
                match (part(0), part(2).and_then(workload::parse_stamp)) {
                    (Some(b"message"), Some(stamp)) => {
                        let ns = now.saturating_sub(stamp).max(1);
                        got.latency.saturating_record(ns);
                        count += 1;
                    }
                    _ => got.malformed += 1,
                }
                start += len;
            }
            if start == end {
                start = 0;
                end = 0;
            }
            self.delivered.fetch_add(count, Ordering::Relaxed);
        }
        Ok(got)
    }
}

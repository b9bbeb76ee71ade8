//! The load engine: connections spread over threads, each thread one epoll loop that sends on a
//! timetable (open loop) or keeps `--pipeline` requests in flight (closed loop), matches replies
//! to requests in order, and records latencies in HDR histograms.
//!
//! ```text
//!  main thread: connect all ─► spawn T workers ─► print one progress line a second ─► merge
//!  worker t:    connections t, t+T, t+2T, ...   one epoll fd + one timerfd
//!     loop { issue what is due ─► write ─► sleep on epoll until a reply or the next due time
//!            ─► read, parse, record (now − scheduled time) }
//! ```
//!
//! Open loop: request `j` of the run (over all connections) is due at `start + j·P/rate`, a
//! batch of `P` (`--pipeline`) at a time, connection `j mod C` sending it. Its latency counts
//! from that due time, not from when it was written, so a server stall (or a client that fell
//! behind) shows as latency instead of silently slowing the schedule: no coordinated omission.
//! A connection with `--max-outstanding` requests unanswered sends nothing more until replies
//! come; the late requests then still count from their due time. Sleeps use a timerfd, so a
//! due time is met to within microseconds without spinning (only waits under [`SPIN_NS`] spin).
//!
//! Never: sends a request before its due time; blocks a worker on anything but its epoll wait;
//! lets one connection's failure pass silently (the run stops with the error).

use crate::codec::{parse_reply, Op, Outcome, Protocol};
use crate::workload::Generator;
use hdrhistogram::Histogram;
use rustix::event::epoll;
use rustix::time::Timespec;
use rustix::time::{timerfd_create, timerfd_settime};
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::num::NonZeroU64;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A wait shorter than this is spun (epoll with a zero timeout) rather than slept: arming a
/// timer and waking costs about as much.
const SPIN_NS: u64 = 20_000;
/// How long the replies to requests already sent may take after the run's window closes
/// before they are counted as unanswered.
const DRAIN: Duration = Duration::from_secs(5);
/// Latencies are recorded in nanoseconds, up to an hour, to 3 significant digits.
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;
const TIMER_TOKEN: u64 = u64::MAX;

/// Monotonic nanoseconds since the run began; shared by every thread of a run (and by the
/// pub/sub subscribers, whose messages carry a time from it).
#[derive(Clone, Copy, Debug)]
pub struct Clock(Instant);

impl Clock {
    pub fn new() -> Clock {
        Clock(Instant::now())
    }
    pub fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// How a run sends.
#[derive(Debug, Clone)]
pub struct Plan {
    pub protocol: Protocol,
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    /// Requests per second over all connections; None: closed loop.
    pub rate: Option<f64>,
    /// How long requests are issued; None: until every generator runs out (a preload).
    pub duration: Option<Duration>,
    /// Unanswered requests a connection may have before it waits (open loop).
    pub max_outstanding: usize,
    /// Closed loop: poll without sleeping while replies are awaited. On one machine a
    /// sleeping client is woken by the server's send, and the server pays for that wakeup.
    pub busy_poll: bool,
}

/// What the main thread prints while a run goes.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// One line a second: rate, in flight, errors, misses, worst latency of the second.
    PerSecond,
    /// One line a second: how many of `total` requests are done (a preload).
    Count {
        what: &'static str,
        total: u64,
    },
    Quiet,
}

/// Latency histograms, nanoseconds.
#[derive(Clone)]
pub struct Latencies {
    pub all: Histogram<u64>,
    pub get: Histogram<u64>,
    pub set: Histogram<u64>,
    /// Open loop: how late each batch was written after its due time. Large, the client (not
    /// the server) is behind: its own CPU, or a connection held at --max-outstanding.
    pub send_lag: Histogram<u64>,
}

impl Latencies {
    pub fn new() -> Result<Latencies, String> {
        let h = || {
            Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).map_err(|e| format!("histogram: {e}"))
        };
        Ok(Latencies {
            all: h()?,
            get: h()?,
            set: h()?,
            send_lag: h()?,
        })
    }

    fn add(&mut self, other: &Latencies) -> Result<(), String> {
        let err = |e: hdrhistogram::AdditionError| format!("histogram merge: {e:?}");
        self.all.add(&other.all).map_err(err)?;
        self.get.add(&other.get).map_err(err)?;
        self.set.add(&other.set).map_err(err)?;
        self.send_lag.add(&other.send_lag).map_err(err)
    }
}

/// What a run did, all threads together.
#[derive(Clone)]
pub struct Totals {
    pub latency: Latencies,
    /// Requests written.
    pub sent: u64,
    /// Replies received.
    pub completed: u64,
    pub gets: u64,
    pub sets: u64,
    pub hits: u64,
    pub misses: u64,
    /// Error replies.
    pub errors: u64,
    /// Requests still unanswered when the drain time ran out.
    pub unanswered: u64,
    /// From the start until the window closed or the last reply came, whichever is later.
    pub elapsed: Duration,
    /// CPU time this process (the load generator) used during the run, user and system.
    pub client_cpu: Duration,
    /// Ctrl-C ended the run before its time.
    pub interrupted: bool,
}

impl Totals {
    pub fn achieved_rate(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Counters the workers bump and the progress printer reads.
#[derive(Default)]
struct Live {
    sent: AtomicU64,
    completed: AtomicU64,
    errors: AtomicU64,
    misses: AtomicU64,
    /// The worst latency since the last progress line.
    max_ns: AtomicU64,
    /// Set when a worker failed: the others stop.
    abort: AtomicBool,
    /// When the window was cut short by Ctrl-C (0: it was not).
    interrupted_ns: AtomicU64,
}

/// Set by SIGINT once [`stop_on_interrupt`] has run.
static INTERRUPT: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Makes the first Ctrl-C end the current run's window at once (it drains and reports what it
/// measured; a sweep stops after that level) and a second one end the process.
pub fn stop_on_interrupt() -> Result<(), String> {
    use signal_hook::consts::SIGINT;
    let flag = INTERRUPT.get_or_init(|| Arc::new(AtomicBool::new(false)));
    // The shutdown check runs before the flag is set, so only a second SIGINT finds it set.
    signal_hook::flag::register_conditional_shutdown(SIGINT, 130, Arc::clone(flag))
        .and_then(|_| signal_hook::flag::register(SIGINT, Arc::clone(flag)))
        .map(|_| ())
        .map_err(|e| format!("cannot handle SIGINT: {e}"))
}

/// True once Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPT.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Connects once for every generator (connection `i` to `addrs[i % addrs.len()]`) and runs
/// `plan` over the connections.
pub fn run(
    addrs: &[SocketAddr],
    plan: &Plan,
    generators: Vec<Generator>,
    progress: Progress,
    clock: Clock,
) -> Result<Totals, String> {
    let mut conns = Vec::with_capacity(generators.len());
    for (index, gen) in generators.into_iter().enumerate() {
        let addr = addrs
            .get(index % addrs.len().max(1))
            .ok_or("no server address")?;
        conns.push(Conn::open(*addr, index, gen, plan)?);
    }
    let threads = plan.threads.clamp(1, conns.len().max(1));
    let mut per_thread: Vec<Vec<Conn>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, mut conn) in conns.into_iter().enumerate() {
        let list = &mut per_thread[i % threads];
        conn.token = list.len() as u64;
        list.push(conn);
    }
    let live = Arc::new(Live::default());
    let cpu_before = process_cpu();
    // A little time for the threads to start before the first request is due.
    let start_ns = clock.now_ns() + 2_000_000;
    let end_ns = plan
        .duration
        .map_or(u64::MAX, |d| start_ns + d.as_nanos() as u64);
    let mut handles = Vec::with_capacity(threads);
    for (t, mut conns) in per_thread.into_iter().enumerate() {
        for conn in &mut conns {
            conn.start_ns = start_ns;
        }
        let worker = Worker {
            conns,
            plan: plan.clone(),
            live: Arc::clone(&live),
            clock,
            start_ns,
            end_ns,
            latency: Latencies::new()?,
            counts: Counts::default(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("bench-{t}"))
            .spawn(move || worker.run())
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        handles.push(handle);
    }
    report_progress(&handles, &live, plan, progress, clock, start_ns);

    let mut totals = Totals {
        latency: Latencies::new()?,
        sent: 0,
        completed: 0,
        gets: 0,
        sets: 0,
        hits: 0,
        misses: 0,
        errors: 0,
        unanswered: 0,
        elapsed: Duration::ZERO,
        client_cpu: Duration::ZERO,
        interrupted: false,
    };
    let mut first_error = None;
    let mut last_reply_ns = 0;
    for handle in handles {
        match handle.join() {
            Ok(Ok(done)) => {
                totals.latency.add(&done.latency)?;
                let c = done.counts;
                totals.sent += c.sent;
                totals.completed += c.completed;
                totals.gets += c.gets;
                totals.sets += c.sets;
                totals.hits += c.hits;
                totals.misses += c.misses;
                totals.errors += c.errors;
                totals.unanswered += c.unanswered;
                last_reply_ns = last_reply_ns.max(c.last_reply_ns);
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert_with(|| "a load thread panicked".to_string());
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let stopped_ns = live.interrupted_ns.load(Ordering::Relaxed);
    totals.interrupted = stopped_ns != 0;
    let window_end = match stopped_ns {
        0 if end_ns == u64::MAX => 0,
        0 => end_ns,
        stopped => stopped,
    };
    totals.elapsed = Duration::from_nanos(window_end.max(last_reply_ns).saturating_sub(start_ns));
    totals.client_cpu = process_cpu().saturating_sub(cpu_before);
    Ok(totals)
}

/// CPU time used by this process so far (all threads, user and system).
fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// Prints a line a second (as `progress` says) until every worker has finished.
fn report_progress(
    handles: &[std::thread::JoinHandle<Result<Done, String>>],
    live: &Live,
    plan: &Plan,
    progress: Progress,
    clock: Clock,
    start_ns: u64,
) {
    let mut second = 1u64;
    let mut last_completed = 0;
    while !handles.iter().all(|h| h.is_finished()) {
        let tick_ns = start_ns + second * 1_000_000_000;
        let now = clock.now_ns();
        if now < tick_ns {
            std::thread::sleep(Duration::from_nanos((tick_ns - now).min(50_000_000)));
            continue;
        }
        let completed = live.completed.load(Ordering::Relaxed);
        let in_second = completed - last_completed;
        last_completed = completed;
        let max_ns = live.max_ns.swap(0, Ordering::Relaxed);
        match progress {
            Progress::Quiet => {}
            Progress::PerSecond => {
                let sent = live.sent.load(Ordering::Relaxed);
                let asked = plan
                    .rate
                    .map_or(String::new(), |r| format!(" (asked {r:.0}/s)"));
                eprintln!(
                    "[{second:>4}s] {in_second} ops/s{asked}, in flight {}, errors {}, misses {}, max {:.3} ms",
                    sent.saturating_sub(completed),
                    live.errors.load(Ordering::Relaxed),
                    live.misses.load(Ordering::Relaxed),
                    max_ns as f64 / 1e6
                );
            }
            Progress::Count { what, total } => {
                eprintln!(
                    "[{second:>4}s] {what}: {completed}/{total} ({:.0}%), {in_second}/s",
                    100.0 * completed as f64 / total.max(1) as f64
                );
            }
        }
        second += 1;
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    sent: u64,
    completed: u64,
    gets: u64,
    sets: u64,
    hits: u64,
    misses: u64,
    errors: u64,
    unanswered: u64,
    last_reply_ns: u64,
}

/// A worker's result.
struct Done {
    latency: Latencies,
    counts: Counts,
}

/// One thread's share of the connections, and what it has measured.
struct Worker {
    conns: Vec<Conn>,
    plan: Plan,
    live: Arc<Live>,
    clock: Clock,
    start_ns: u64,
    end_ns: u64,
    latency: Latencies,
    counts: Counts,
}

impl Worker {
    fn run(mut self) -> Result<Done, String> {
        let result = self.event_loop();
        if result.is_err() {
            self.live.abort.store(true, Ordering::Relaxed);
        }
        result.map(|()| Done {
            latency: self.latency,
            counts: self.counts,
        })
    }

    fn event_loop(&mut self) -> Result<(), String> {
        let os = |what: &str, e: rustix::io::Errno| format!("{what}: {e}");
        // The kernel's default 50 µs timer slack would blur the timetable.
        let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
        let poller =
            epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| os("epoll_create", e))?;
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .map_err(|e| os("timerfd_create", e))?;
        // Edge-triggered: each expiry wakes the loop once, and re-arming resets the timer, so
        // its expiration count never needs a read.
        epoll::add(
            &poller,
            &timer,
            epoll::EventData::new_u64(TIMER_TOKEN),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )
        .map_err(|e| os("epoll_ctl", e))?;
        for conn in &self.conns {
            epoll::add(
                &poller,
                &conn.stream,
                epoll::EventData::new_u64(conn.token),
                epoll::EventFlags::IN,
            )
            .map_err(|e| os("epoll_ctl", e))?;
        }
        let mut events: Vec<epoll::Event> = Vec::with_capacity(self.conns.len() + 1);
        let mut armed: Option<u64> = None;
        let mut drain_deadline = self.end_ns.saturating_add(DRAIN.as_nanos() as u64);
        let open = self.plan.rate.is_some();
        let now = self.clock.now_ns();
        if now < self.start_ns {
            std::thread::sleep(Duration::from_nanos(self.start_ns - now));
        }

        loop {
            if self.live.abort.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = self.clock.now_ns();
            if now < self.end_ns && interrupted() {
                // Ctrl-C: the window ends now; what was sent is still answered and counted.
                self.end_ns = now;
                drain_deadline = now.saturating_add(DRAIN.as_nanos() as u64);
                let _ = self.live.interrupted_ns.compare_exchange(
                    0,
                    now,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            let issuing = now < self.end_ns;
            if issuing {
                let mut sent = 0;
                for conn in &mut self.conns {
                    sent += conn.issue(now, self.end_ns, &self.plan, &mut self.latency.send_lag);
                }
                if sent > 0 {
                    self.counts.sent += sent;
                    self.live.sent.fetch_add(sent, Ordering::Relaxed);
                }
            }
            for conn in &mut self.conns {
                conn.flush(&poller)?;
            }
            let busy = self.conns.iter().any(|c| !c.pending.is_empty());
            let exhausted = self.conns.iter().all(|c| c.exhausted);
            if !busy && (!issuing || exhausted) {
                return Ok(());
            }
            if !issuing && now >= drain_deadline {
                let left: usize = self.conns.iter().map(|c| c.pending.len()).sum();
                self.counts.unanswered += left as u64;
                return Ok(());
            }

            // Sleep until a reply comes or the next request is due.
            let mut wake = if issuing { self.end_ns } else { drain_deadline };
            if issuing && open {
                for conn in &self.conns {
                    if conn.pending.len() + self.plan.pipeline <= self.plan.max_outstanding {
                        wake = wake.min(conn.due_ns());
                    }
                }
            }
            let now = self.clock.now_ns();
            let spin = self.plan.busy_poll && !open && busy;
            let timeout = if spin || wake <= now + SPIN_NS {
                Some(Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                })
            } else {
                if armed != Some(wake) {
                    arm(&timer, wake - now).map_err(|e| os("timerfd_settime", e))?;
                    armed = Some(wake);
                }
                None
            };
            events.clear();
            match epoll::wait(
                &poller,
                rustix::buffer::spare_capacity(&mut events),
                timeout.as_ref(),
            ) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(os("epoll_wait", e)),
            }
            let now = self.clock.now_ns();
            for event in &events {
                // Copied out: the event struct is packed.
                let (token, flags) = (event.data.u64(), event.flags);
                if token == TIMER_TOKEN {
                    armed = None;
                    continue;
                }
                let Some(conn) = self.conns.get_mut(token as usize) else {
                    continue;
                };
                if flags.contains(epoll::EventFlags::OUT) {
                    conn.writable(&poller)?;
                }
                if flags.intersects(
                    epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR,
                ) {
                    conn.read(
                        now,
                        self.plan.protocol,
                        &mut self.latency,
                        &mut self.counts,
                        &self.live,
                    )?;
                }
            }
        }
    }
}

/// Arms `timer` to fire once, `after_ns` from now.
fn arm(timer: &OwnedFd, after_ns: u64) -> Result<(), rustix::io::Errno> {
    let after_ns = after_ns.max(1);
    let spec = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: (after_ns / 1_000_000_000) as i64,
            tv_nsec: (after_ns % 1_000_000_000) as _,
        },
    };
    timerfd_settime(timer, TimerfdTimerFlags::empty(), &spec).map(|_| ())
}

/// One connection: its output and input buffers, and the requests it awaits replies to.
struct Conn {
    /// Its number in the run (for messages and the timetable).
    index: usize,
    /// Its place in its worker's list: the epoll token.
    token: u64,
    stream: TcpStream,
    gen: Generator,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    written: usize,
    /// Waiting for EPOLLOUT (the socket's send buffer was full).
    blocked: bool,
    input: Vec<u8>,
    in_start: usize,
    in_end: usize,
    /// (time the latency counts from, operation) of each unanswered request, oldest first.
    pending: VecDeque<(u64, Op)>,
    /// Open loop: timetable batches issued so far.
    batches: u64,
    /// Open loop: this connection's first due time after the start, and its period (ns).
    offset_ns: f64,
    period_ns: f64,
    start_ns: u64,
    /// The generator has nothing more to send (a finished preload).
    exhausted: bool,
}

impl Conn {
    fn open(addr: SocketAddr, index: usize, gen: Generator, plan: &Plan) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_nonblocking(true))
            .map_err(|e| format!("connection to {addr}: {e}"))?;
        // Batch j of the whole run (P requests) is due at j·P/rate; connection i sends
        // batches i, i+C, i+2C, ...
        let batch_ns = plan
            .rate
            .map_or(0.0, |r| plan.pipeline as f64 * 1e9 / r.max(1e-9));
        Ok(Conn {
            index,
            token: 0,
            stream,
            gen,
            out: Vec::with_capacity(64 * 1024),
            written: 0,
            blocked: false,
            input: vec![0; 64 * 1024],
            in_start: 0,
            in_end: 0,
            pending: VecDeque::with_capacity(plan.pipeline.max(16)),
            batches: 0,
            offset_ns: index as f64 * batch_ns,
            period_ns: plan.connections as f64 * batch_ns,
            start_ns: 0,
            exhausted: false,
        })
    }

    fn due_ns(&self) -> u64 {
        self.start_ns + (self.offset_ns + self.batches as f64 * self.period_ns) as u64
    }

    /// Queues what is due at `now` (open loop) or what fits in the pipeline (closed loop);
    /// returns how many requests it queued.
    fn issue(&mut self, now: u64, end_ns: u64, plan: &Plan, lag: &mut Histogram<u64>) -> u64 {
        if self.exhausted {
            return 0;
        }
        let before = self.pending.len();
        if plan.rate.is_some() {
            loop {
                let due = self.due_ns();
                if due > now || due >= end_ns {
                    break;
                }
                if self.pending.len() + plan.pipeline > plan.max_outstanding {
                    break;
                }
                for _ in 0..plan.pipeline {
                    match self.gen.next(due, &mut self.out) {
                        Some(op) => self.pending.push_back((due, op)),
                        None => {
                            self.exhausted = true;
                            break;
                        }
                    }
                }
                self.batches += 1;
                lag.saturating_record((now - due).clamp(1, MAX_LATENCY_NS));
            }
        } else {
            while self.pending.len() < plan.pipeline {
                match self.gen.next(now, &mut self.out) {
                    Some(op) => self.pending.push_back((now, op)),
                    None => {
                        self.exhausted = true;
                        break;
                    }
                }
            }
        }
        (self.pending.len() - before) as u64
    }

    /// Writes what is queued, as far as the socket takes it; waits for EPOLLOUT when full.
    fn flush(&mut self, poller: &OwnedFd) -> Result<(), String> {
        if self.blocked || self.written == self.out.len() {
            return Ok(());
        }
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(self.failed("the server closed the connection")),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = true;
                    return self.interest(poller, epoll::EventFlags::IN | epoll::EventFlags::OUT);
                }
                Err(e) => return Err(self.failed(&format!("write: {e}"))),
            }
        }
        self.out.clear();
        self.written = 0;
        Ok(())
    }

    fn writable(&mut self, poller: &OwnedFd) -> Result<(), String> {
        if self.blocked {
            self.blocked = false;
            self.interest(poller, epoll::EventFlags::IN)?;
        }
        self.flush(poller)
    }

    fn interest(&self, poller: &OwnedFd, flags: epoll::EventFlags) -> Result<(), String> {
        epoll::modify(
            poller,
            &self.stream,
            epoll::EventData::new_u64(self.token),
            flags,
        )
        .map_err(|e| self.failed(&format!("epoll_ctl: {e}")))
    }

    /// Reads what has arrived, matches replies to requests and records their latencies.
    fn read(
        &mut self,
        now: u64,
        protocol: Protocol,
        latency: &mut Latencies,
        counts: &mut Counts,
        live: &Live,
    ) -> Result<(), String> {
        loop {
            if self.in_end == self.input.len() {
                if self.in_start > 0 {
                    self.input.copy_within(self.in_start..self.in_end, 0);
                    self.in_end -= self.in_start;
                    self.in_start = 0;
                } else {
                    // One reply larger than the buffer: grow it.
                    let len = self.input.len();
                    self.input.resize(len * 2, 0);
                }
            }
            let room = self.input.len() - self.in_end;
            let n = match self.stream.read(&mut self.input[self.in_end..]) {
                Ok(0) => return Err(self.failed("the server closed the connection")),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(self.failed(&format!("read: {e}"))),
            };
            self.in_end += n;
            self.parse(now, protocol, latency, counts, live)?;
            if n < room {
                // Most likely all there was; epoll says so again if not.
                return Ok(());
            }
        }
    }

    fn parse(
        &mut self,
        now: u64,
        protocol: Protocol,
        latency: &mut Latencies,
        counts: &mut Counts,
        live: &Live,
    ) -> Result<(), String> {
        let (mut done, mut errors, mut misses, mut worst) = (0u64, 0u64, 0u64, 0u64);
        while self.in_start < self.in_end {
            let parsed = parse_reply(protocol, &self.input[self.in_start..self.in_end])
                .map_err(|e| self.failed(&e.to_string()))?;
            let Some((outcome, n)) = parsed else {
                break;
            };
            self.in_start += n;
            let (from, op) = self
                .pending
                .pop_front()
                .ok_or_else(|| self.failed("a reply to no request"))?;
            let ns = now.saturating_sub(from).clamp(1, MAX_LATENCY_NS);
            worst = worst.max(ns);
            latency.all.saturating_record(ns);
            done += 1;
            match op {
                Op::Get => {
                    counts.gets += 1;
                    latency.get.saturating_record(ns);
                }
                Op::Set => {
                    counts.sets += 1;
                    latency.set.saturating_record(ns);
                }
                Op::Publish => {}
            }
            match outcome {
                Outcome::Hit => counts.hits += 1,
                Outcome::Miss => misses += 1,
                Outcome::Error => errors += 1,
                Outcome::Done => {}
            }
        }
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
        }
        if done > 0 {
            counts.completed += done;
            counts.errors += errors;
            counts.misses += misses;
            counts.last_reply_ns = now;
            live.completed.fetch_add(done, Ordering::Relaxed);
            live.max_ns.fetch_max(worst, Ordering::Relaxed);
            if errors > 0 {
                live.errors.fetch_add(errors, Ordering::Relaxed);
            }
            if misses > 0 {
                live.misses.fetch_add(misses, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    fn failed(&self, what: &str) -> String {
        format!("connection {}: {what}", self.index)
    }
}

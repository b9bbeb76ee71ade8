//! INFO commandstats, errorstats and latencystats, as Redis 7.0 counts them: per command its
//! calls, time, rejected and failed calls and a latency histogram; per error code the error
//! replies sent; and their total (`total_error_replies`). A call is *rejected* when it is
//! refused before it runs (arity, NOAUTH, OOM, BUSY, refused inside MULTI or by a script),
//! *failed* when it ran and replied an error. An unknown command or subcommand counts its
//! error only, as in Redis (no command to count it against).
//!
//! Each core counts what it runs in its own thread-local table, indexed by the command's slot
//! (its place in the command table; containers' subcommands, `client|list`, after the table);
//! INFO adds the cores' copies up. Time is read from the TSC where it is invariant (one
//! instruction, converted to microseconds only when INFO asks), else from the monotonic clock.
//!
//! Memcached's commands are not counted here: memcached's `stats` (and INFO memcached)
//! count them.
//!
//! Never: shares a counter between cores, or takes a lock or an atomic read-modify-write on
//! the command path.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Instant;

use bytes::Bytes;

use super::session::Session;
use super::table::{Spec, TABLE};
use crate::protocol::Reply;

/// Redis 7.0's subcommands of its container commands, with their arities (`commands.c`).
const SUBCOMMANDS: &[(&str, &[(&str, i32)])] = &[
    (
        "acl",
        &[
            ("cat", -2),
            ("deluser", -3),
            ("dryrun", -4),
            ("genpass", -2),
            ("getuser", 3),
            ("help", 2),
            ("list", 2),
            ("load", 2),
            ("log", -2),
            ("save", 2),
            ("setuser", -3),
            ("users", 2),
            ("whoami", 2),
        ],
    ),
    (
        "client",
        &[
            ("caching", 3),
            ("getname", 2),
            ("getredir", 2),
            ("help", 2),
            ("id", 2),
            ("info", 2),
            ("kill", -3),
            ("list", -2),
            ("no-evict", 3),
            ("pause", -3),
            ("reply", 3),
            ("setname", 3),
            // Redis 7.2's; Strata has it.
            ("setinfo", -4),
            ("tracking", -3),
            ("trackinginfo", 2),
            ("unblock", -3),
            ("unpause", 2),
        ],
    ),
    (
        "cluster",
        &[
            ("addslots", -3),
            ("addslotsrange", -4),
            ("bumpepoch", 2),
            ("count-failure-reports", 3),
            ("countkeysinslot", 3),
            ("delslots", -3),
            ("delslotsrange", -4),
            ("failover", -2),
            ("flushslots", 2),
            ("forget", 3),
            ("getkeysinslot", 4),
            ("help", 2),
            ("info", 2),
            ("keyslot", 3),
            ("links", 2),
            ("meet", -4),
            ("myid", 2),
            ("nodes", 2),
            ("replicas", 3),
            ("replicate", 3),
            ("reset", -2),
            ("saveconfig", 2),
            ("set-config-epoch", 3),
            ("setslot", -4),
            ("shards", 2),
            ("slaves", 3),
            ("slots", 2),
        ],
    ),
    (
        "command",
        &[
            ("count", 2),
            ("docs", -2),
            ("getkeys", -4),
            ("getkeysandflags", -4),
            ("help", 2),
            ("info", -2),
            ("list", -2),
        ],
    ),
    (
        "config",
        &[
            ("get", -3),
            ("help", 2),
            ("resetstat", 2),
            ("rewrite", 2),
            ("set", -4),
        ],
    ),
    (
        "function",
        &[
            ("delete", 3),
            ("dump", 2),
            ("flush", -2),
            ("help", 2),
            ("kill", 2),
            ("list", -2),
            ("load", -3),
            ("restore", -3),
            ("stats", 2),
        ],
    ),
    (
        "latency",
        &[
            ("doctor", 2),
            ("graph", 3),
            ("help", 2),
            ("histogram", -2),
            ("history", 3),
            ("latest", 2),
            ("reset", -2),
        ],
    ),
    (
        "memory",
        &[
            ("doctor", 2),
            ("help", 2),
            ("malloc-stats", 2),
            ("purge", 2),
            ("stats", 2),
            ("usage", -3),
        ],
    ),
    (
        "module",
        &[
            ("help", 2),
            ("list", 2),
            ("load", -3),
            ("loadex", -3),
            ("unload", 3),
        ],
    ),
    (
        "object",
        &[
            ("encoding", 3),
            ("freq", 3),
            ("help", 2),
            ("idletime", 3),
            ("refcount", 3),
        ],
    ),
    (
        "pubsub",
        &[
            ("channels", -2),
            ("help", 2),
            ("numpat", 2),
            ("numsub", -2),
            ("shardchannels", -2),
            ("shardnumsub", -2),
        ],
    ),
    (
        "script",
        &[
            ("debug", 3),
            ("exists", -3),
            ("flush", -2),
            ("help", 2),
            ("kill", 2),
            ("load", 3),
        ],
    ),
    (
        "slowlog",
        &[("get", -2), ("help", 2), ("len", 2), ("reset", 2)],
    ),
    (
        "xgroup",
        &[
            ("create", -5),
            ("createconsumer", 5),
            ("delconsumer", 5),
            ("destroy", 4),
            ("help", 2),
            ("setid", -5),
        ],
    ),
    (
        "xinfo",
        &[("consumers", 4), ("groups", 3), ("help", 2), ("stream", -3)],
    ),
];

type Subs = &'static [(&'static str, i32)];

/// Where each command's counters live.
struct Layout {
    /// Per table index: for a container, its subcommands' first slot and list.
    subs: Vec<Option<(usize, Subs)>>,
    /// Per slot: its name in INFO (`get`, `client|list`).
    names: Vec<String>,
}

fn layout() -> &'static Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        let mut names: Vec<String> = TABLE.iter().map(|s| s.name.to_string()).collect();
        let subs = TABLE
            .iter()
            .map(|spec| {
                let (_, list) = SUBCOMMANDS.iter().find(|(c, _)| *c == spec.name)?;
                let base = names.len();
                names.extend(list.iter().map(|(sub, _)| format!("{}|{sub}", spec.name)));
                Some((base, *list))
            })
            .collect();
        Layout { subs, names }
    })
}

/// What a request counts against.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Target {
    /// The counters at this slot.
    Slot(usize),
    /// A subcommand called with the wrong number of arguments: Redis refuses it before it
    /// runs, whatever the container's function answers.
    Refused(usize),
    /// No command (unknown command or subcommand): its error counts, nothing else.
    Unknown,
    /// Not a Redis command (memcached's): nothing counts.
    Outside,
}

fn arity_ok(arity: i32, argc: usize) -> bool {
    if arity >= 0 {
        argc == arity as usize
    } else {
        argc >= arity.unsigned_abs() as usize
    }
}

/// The counters `args` (the name first) of command `spec` count against.
pub fn target(spec: &'static Spec, args: &[Bytes]) -> Target {
    let i = spec.index() as usize;
    match layout().subs.get(i) {
        None => Target::Outside,
        Some(None) => Target::Slot(i),
        Some(Some((base, list))) => {
            // Alone, the container itself (its arity refuses it).
            let Some(sub) = args.get(1) else {
                return Target::Slot(i);
            };
            match list
                .iter()
                .position(|(name, _)| sub.eq_ignore_ascii_case(name.as_bytes()))
            {
                Some(k) if arity_ok(list[k].1, args.len()) => Target::Slot(base + k),
                Some(k) => Target::Refused(base + k),
                None => Target::Unknown,
            }
        }
    }
}

/// The target of a parsed request (none for an unknown command).
pub fn target_of(spec: Option<&'static Spec>, args: &[Bytes]) -> Target {
    spec.map_or(Target::Unknown, |s| target(s, args))
}

/// The clock commands are timed with: the TSC (ticks per nanosecond) where the CPU keeps it
/// invariant, else nanoseconds since `base`.
struct Clock {
    tsc_per_ns: Option<f64>,
    base: Instant,
}

fn clock() -> &'static Clock {
    static CLOCK: OnceLock<Clock> = OnceLock::new();
    CLOCK.get_or_init(|| Clock {
        tsc_per_ns: tsc_rate(),
        base: Instant::now(),
    })
}

/// Chooses the clock (the first command would otherwise spend the TSC's calibration).
pub fn init() {
    clock();
}

#[cfg(target_arch = "x86_64")]
#[inline]
#[allow(unused_unsafe)]
fn tsc() -> u64 {
    // SAFETY: RDTSC reads a counter; it has no memory effects and every x86_64 CPU has it.
    unsafe { std::arch::x86_64::_rdtsc() }
}

/// The TSC's ticks per nanosecond, measured against the monotonic clock for 2 ms, when the
/// kernel says it is constant and keeps running in sleep states.
#[cfg(target_arch = "x86_64")]
fn tsc_rate() -> Option<f64> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags"))?;
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    if !has("constant_tsc") || !has("nonstop_tsc") {
        return None;
    }
    let (t0, c0) = (Instant::now(), tsc());
    while t0.elapsed() < std::time::Duration::from_millis(2) {
        std::hint::spin_loop();
    }
    let (ns, ticks) = (
        t0.elapsed().as_nanos() as f64,
        tsc().wrapping_sub(c0) as f64,
    );
    let rate = ticks / ns;
    (0.05..100.0).contains(&rate).then_some(rate)
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc() -> u64 {
    0
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_rate() -> Option<f64> {
    None
}

/// Now, in the clock's ticks (for [`ran`]'s `start`).
#[inline]
pub fn now() -> u64 {
    let c = clock();
    if c.tsc_per_ns.is_some() {
        tsc()
    } else {
        c.base.elapsed().as_nanos() as u64
    }
}

fn ticks_per_ns() -> f64 {
    clock().tsc_per_ns.unwrap_or(1.0)
}

/// A latency histogram in clock ticks with the buckets of an HDR histogram of two significant
/// digits from 1 (Redis': `hdr_init(1, 1e9, 2)`, here in ticks): 256 exact values, then 128
/// sub-buckets per power of two. Recording is a few instructions (no min, max or checks).
/// A row of 128 slots is allocated when a value first falls in it: a command's latencies span
/// a few powers of two, and every command keeps one histogram on every core.
#[derive(Clone, Default)]
pub struct Latencies {
    rows: [Option<Box<Row>>; ROWS],
    total: u64,
}

type Row = [u64; ROW];

/// Sub-buckets per power of two (HDR's `sub_bucket_half_count` for two digits), as a shift.
const HALF_SHIFT: u32 = 7;
const ROW: usize = 1 << HALF_SHIFT;
/// Powers of two above the first 256 values: up to 2^36 ticks (over 1 s at 64 per ns).
const BUCKETS: usize = 29;
const ROWS: usize = BUCKETS + 1;
const SLOTS: usize = ROWS << HALF_SHIFT;

impl Latencies {
    fn new() -> Latencies {
        Latencies::default()
    }

    /// HDR's counts index of `v` (`counts_index_for`, unit magnitude 0).
    #[inline]
    fn index(v: u64) -> usize {
        let bucket = 56 - (v | 255).leading_zeros();
        let sub = (v >> bucket) as usize;
        (((bucket + 1) as usize) << HALF_SHIFT) + sub - (1 << HALF_SHIFT)
    }

    /// The lowest value of slot `i` and how many values it covers.
    fn range(i: usize) -> (u64, u64) {
        if i < 256 {
            return (i as u64, 1);
        }
        let bucket = (i >> HALF_SHIFT) - 1;
        let sub = ((i & 127) + 128) as u64;
        (sub << bucket, 1 << bucket)
    }

    #[inline]
    fn record(&mut self, ticks: u64) {
        let i = Self::index(ticks.max(1)).min(SLOTS - 1);
        let row = self.rows[i >> HALF_SHIFT].get_or_insert_with(|| Box::new([0; ROW]));
        row[i & (ROW - 1)] += 1;
        self.total += 1;
    }

    fn add(&mut self, o: &Latencies) {
        for (mine, theirs) in self.rows.iter_mut().zip(o.rows.iter()) {
            if let Some(theirs) = theirs {
                let mine = mine.get_or_insert_with(|| Box::new([0; ROW]));
                for (a, b) in mine.iter_mut().zip(theirs.iter()) {
                    *a += b;
                }
            }
        }
        self.total += o.total;
    }

    /// Every slot's count in order, zeros for rows never allocated.
    fn counts(&self) -> impl Iterator<Item = u64> + '_ {
        self.rows.iter().flat_map(|r| {
            let row: &[u64] = r.as_deref().map_or(&[0; ROW], |r| &r[..]);
            row.iter().copied()
        })
    }

    /// Redis' hdr_value_at_percentile: the highest value equivalent to the slot where the
    /// count reaches `p` percent (the lowest, for p = 0).
    fn at_percentile(&self, p: f64) -> u64 {
        let p = p.min(100.0);
        let want = ((((p / 100.0) * self.total as f64) + 0.5) as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.counts().enumerate() {
            seen += n;
            if n > 0 && seen >= want {
                let (low, len) = Self::range(i);
                return if p == 0.0 { low } else { low + len - 1 };
            }
        }
        0
    }
}

/// One command's (or subcommand's) counters on one core.
#[derive(Clone, Default)]
pub struct Counters {
    calls: u64,
    ticks: u64,
    rejected: u64,
    failed: u64,
    /// Latency, while latency tracking is on.
    hist: Option<Box<Latencies>>,
}

impl Counters {
    fn used(&self) -> bool {
        self.calls > 0 || self.rejected > 0 || self.failed > 0
    }

    fn add(&mut self, o: &Counters) {
        self.calls += o.calls;
        self.ticks += o.ticks;
        self.rejected += o.rejected;
        self.failed += o.failed;
        if let Some(h) = &o.hist {
            match &mut self.hist {
                Some(mine) => mine.add(h),
                None => self.hist = Some(h.clone()),
            }
        }
    }
}

/// One core's counts (or all cores' added up, for INFO).
#[derive(Clone, Default)]
pub struct Report {
    cmds: Vec<Counters>,
    /// Error replies by code.
    errors: BTreeMap<Box<str>, u64>,
    /// Every error reply (`total_error_replies`).
    error_replies: u64,
}

thread_local! {
    static LOCAL: RefCell<Report> = const {
        RefCell::new(Report {
            cmds: Vec::new(),
            errors: BTreeMap::new(),
            error_replies: 0,
        })
    };
}

/// An error's code as Redis files it: the first word when a space comes within the first 32
/// bytes of the line (its `-` included), else ERR.
fn code(msg: &str) -> &str {
    let head = &msg.as_bytes()[..msg.len().min(31)];
    match head.iter().position(|&b| b == b' ') {
        Some(at) => &msg[..at],
        None => "ERR",
    }
}

impl Report {
    fn at(&mut self, slot: usize) -> &mut Counters {
        if slot >= self.cmds.len() {
            let n = layout().names.len().max(slot + 1);
            self.cmds.resize_with(n, Counters::default);
        }
        &mut self.cmds[slot]
    }

    fn error(&mut self, msg: &str) {
        self.error_replies += 1;
        let code = code(msg);
        match self.errors.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                self.errors.insert(code.into(), 1);
            }
        }
    }

    /// Counts the errors among `reply`'s top-level replies; true when there was one.
    fn errors_of(&mut self, reply: &Reply) -> bool {
        match reply {
            Reply::Error(e) => {
                self.error(e);
                true
            }
            Reply::Many(v) => {
                let mut any = false;
                for r in v {
                    if let Reply::Error(e) = r {
                        self.error(e);
                        any = true;
                    }
                }
                any
            }
            _ => false,
        }
    }

    fn reject(&mut self, target: Target, reply: &Reply) {
        if target == Target::Outside {
            return;
        }
        if let Target::Slot(s) | Target::Refused(s) = target {
            self.at(s).rejected += 1;
        }
        self.errors_of(reply);
    }

    /// Counts a call; `counted`: its reply's errors were counted already, and the times it
    /// failed; `failed`: it failed whatever its reply.
    fn ran(
        &mut self,
        target: Target,
        reply: &Reply,
        ticks: u64,
        track: bool,
        counted: Option<u32>,
        failed: bool,
    ) {
        let slot = match target {
            Target::Slot(s) => s,
            Target::Refused(_) | Target::Unknown => return self.reject(target, reply),
            Target::Outside => return,
        };
        let failed = match counted {
            Some(n) => u64::from(n).max(u64::from(failed)),
            None => u64::from(self.errors_of(reply) || failed),
        };
        let c = self.at(slot);
        c.calls += 1;
        c.ticks += ticks;
        c.failed += failed;
        if track {
            c.hist
                .get_or_insert_with(|| Box::new(Latencies::new()))
                .record(ticks);
        }
    }

    fn add(&mut self, o: &Report) {
        for (i, c) in o.cmds.iter().enumerate() {
            if c.used() || c.hist.is_some() {
                self.at(i).add(c);
            }
        }
        for (code, n) in &o.errors {
            *self.errors.entry(code.clone()).or_insert(0) += n;
        }
        self.error_replies += o.error_replies;
    }
}

/// A request refused before it ran, with its error `reply`.
pub fn rejected(target: Target, reply: &Reply) {
    LOCAL.with(|l| l.borrow_mut().reject(target, reply));
}

/// A command that ran from `start` ([`now`]) until now and answered `reply`; `track` adds
/// its latency to the histogram (`latency-tracking`).
#[inline]
pub fn ran(target: Target, reply: &Reply, start: u64, track: bool) {
    let ticks = now().saturating_sub(start);
    LOCAL.with(|l| l.borrow_mut().ran(target, reply, ticks, track, None, false));
}

/// Errors a command replied inside its reply, counted as it made them (a script's result).
pub fn errors(msgs: &[String]) {
    if msgs.is_empty() {
        return;
    }
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        for m in msgs {
            l.error(m);
        }
    });
}

/// [`ran`] for a command a session ran: a script's errors are counted as it replies them
/// ([`errors`], and those of commands it called were counted there: Redis'
/// `ignore_error_stats_update`), so its call only fails; so does a command that sent another
/// client an error (CLIENT UNBLOCK ... ERROR, as Redis sees its error count move); time the
/// command spent blocked waiting for data is not its own.
pub fn ran_for(session: &mut Session, target: Target, reply: &Reply, start: u64, track: bool) {
    let counted = session.errors_counted.take();
    let failed = std::mem::take(&mut session.failed_elsewhere);
    let blocked = std::mem::take(&mut session.blocked_ticks);
    let ticks = now().saturating_sub(start).saturating_sub(blocked);
    LOCAL.with(|l| {
        l.borrow_mut()
            .ran(target, reply, ticks, track, counted, failed)
    });
}

/// This core's counts; latency histograms only when `histograms`.
pub fn snapshot(histograms: bool) -> Report {
    LOCAL.with(|l| {
        let l = l.borrow();
        let mut r = Report {
            cmds: l.cmds.clone(),
            errors: l.errors.clone(),
            error_replies: l.error_replies,
        };
        if !histograms {
            for c in &mut r.cmds {
                c.hist = None;
            }
        }
        r
    })
}

/// CONFIG RESETSTAT on this core.
pub fn reset() {
    LOCAL.with(|l| *l.borrow_mut() = Report::default());
}

/// INFO's characters that cannot appear in a field name (Redis' getSafeInfoString).
fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if matches!(c, '#' | ':' | '\n' | '\r') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

impl Report {
    /// Every core's reports added up.
    pub fn sum<'a>(reports: impl IntoIterator<Item = &'a Report>) -> Report {
        let mut total = Report::default();
        for r in reports {
            total.add(r);
        }
        total
    }

    pub fn total_error_replies(&self) -> u64 {
        self.error_replies
    }

    /// Slots in INFO's order: each command, its subcommands after it.
    fn order(&self) -> impl Iterator<Item = usize> + '_ {
        let l = layout();
        l.subs.iter().enumerate().flat_map(|(i, subs)| {
            let subs = subs.as_ref().map(|(base, list)| *base..*base + list.len());
            std::iter::once(i).chain(subs.into_iter().flatten())
        })
    }

    /// INFO commandstats' lines.
    pub fn commandstats(&self) -> String {
        let names = &layout().names;
        let per_us = ticks_per_ns() * 1000.0;
        let mut out = String::new();
        for slot in self.order() {
            let Some(c) = self.cmds.get(slot).filter(|c| c.used()) else {
                continue;
            };
            let usec = (c.ticks as f64 / per_us) as u64;
            // Redis divides as a C float.
            let per_call = if c.calls == 0 {
                0.0
            } else {
                f64::from(usec as f32 / c.calls as f32)
            };
            let _ = write!(
                out,
                "cmdstat_{}:calls={},usec={usec},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                safe(&names[slot]),
                c.calls,
                c.rejected,
                c.failed
            );
        }
        out
    }

    /// INFO errorstats' lines, by code in byte order.
    pub fn errorstats(&self) -> String {
        let mut out = String::new();
        for (code, n) in &self.errors {
            let _ = write!(out, "errorstat_{}:count={n}\r\n", safe(code));
        }
        out
    }

    /// INFO latencystats' lines for `percentiles`.
    pub fn latencystats(&self, percentiles: &[f64]) -> String {
        let names = &layout().names;
        let per_ns = ticks_per_ns();
        let mut out = String::new();
        for slot in self.order() {
            let Some(h) = self.cmds.get(slot).and_then(|c| c.hist.as_ref()) else {
                continue;
            };
            let _ = write!(out, "latency_percentiles_usec_{}:", safe(&names[slot]));
            for (j, &p) in percentiles.iter().enumerate() {
                // Redis keeps 1 ns to 1 s.
                let ns = (h.at_percentile(p) as f64 / per_ns).clamp(1.0, 1e9);
                if j > 0 {
                    out.push(',');
                }
                let _ = write!(out, "p{}={:.3}", crate::config::trim_double(p), ns / 1000.0);
            }
            out.push_str("\r\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> &'static Spec {
        super::super::table::lookup(name.as_bytes()).expect("command")
    }

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    #[test]
    fn subcommands_have_their_own_slots() {
        let names = &layout().names;
        let t = target(spec("client"), &args(&["client", "LIST"]));
        let Target::Slot(s) = t else { panic!("{t:?}") };
        assert_eq!(names[s], "client|list");
        let t = target(spec("config"), &args(&["config", "get"]));
        let Target::Refused(s) = t else {
            panic!("{t:?}")
        };
        assert_eq!(names[s], "config|get");
        assert_eq!(
            target(spec("client"), &args(&["client", "nosuch"])),
            Target::Unknown
        );
        let t = target(spec("client"), &args(&["client"]));
        assert_eq!(t, Target::Slot(spec("client").index() as usize));
        let t = target(spec("get"), &args(&["get", "k"]));
        assert_eq!(t, Target::Slot(spec("get").index() as usize));
    }

    #[test]
    fn error_codes_as_redis_files_them() {
        assert_eq!(code("WRONGTYPE Operation against a key"), "WRONGTYPE");
        assert_eq!(code("ERR"), "ERR");
        assert_eq!(code("MY_ERR_CODE custom msg"), "MY_ERR_CODE");
        // No space within Redis' first 32 bytes (its '-' included).
        let long = format!("{} x", "A".repeat(31));
        assert_eq!(code(&long), "ERR");
        let edge = format!("{} x", "A".repeat(30));
        assert_eq!(code(&edge), &edge[..30]);
    }

    #[test]
    fn percentile_names_trim_as_redis() {
        assert_eq!(crate::config::trim_double(50.0), "50");
        assert_eq!(crate::config::trim_double(99.9), "99.9");
        assert_eq!(crate::config::trim_double(0.0), "0");
        assert_eq!(crate::config::trim_double(99.99), "99.99");
    }

    /// The buckets are an HDR histogram's (1 to 2^36, two digits): the same equivalent values
    /// and the same percentiles as the hdrhistogram crate gives.
    #[test]
    fn latencies_are_hdr_buckets() {
        let mut hdr =
            hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 36, 2).expect("histogram");
        let mut mine = Latencies::new();
        let mut values = Vec::new();
        let mut v = 1u64;
        while v < 1 << 36 {
            values.push(v);
            values.push((v + v / 3).min((1 << 36) - 1));
            v = v * 7 / 5 + 1;
        }
        for &v in &values {
            let (low, len) = Latencies::range(Latencies::index(v));
            assert_eq!(low, hdr.lowest_equivalent(v), "{v}");
            assert_eq!(low + len - 1, hdr.highest_equivalent(v), "{v}");
            hdr.saturating_record(v);
            mine.record(v);
        }
        assert_eq!(SLOTS, Latencies::index((1 << 36) - 1) + 1);
        // Where the crate's count (rounded up) and Redis' (to nearest) agree.
        assert_eq!(values.len() % 2, 0);
        for p in [0.0, 50.0, 100.0] {
            let at = hdr.value_at_percentile(p);
            let want = if p == 0.0 {
                hdr.lowest_equivalent(at)
            } else {
                hdr.highest_equivalent(at)
            };
            assert_eq!(mine.at_percentile(p), want, "p{p}");
        }
        // Past the top: counted in the last slot.
        let top = mine.counts().last();
        mine.record(u64::MAX);
        assert_eq!(mine.counts().last(), top.map(|n| n + 1));
        assert_eq!(mine.counts().count(), SLOTS);
    }

    #[test]
    fn rejected_failed_and_errors_count_apart() {
        reset();
        let set = target(spec("set"), &args(&["set", "k", "v"]));
        rejected(set, &Reply::Error("OOM command not allowed".into()));
        ran(set, &Reply::Ok, now(), true);
        ran(set, &Reply::Error("WRONGTYPE x".into()), now(), true);
        rejected(Target::Unknown, &Reply::Error("ERR unknown command".into()));
        rejected(Target::Outside, &Reply::Error("ERR ignored".into()));
        let r = Report::sum(&[snapshot(true)]);
        let stats = r.commandstats();
        assert!(stats.starts_with("cmdstat_set:calls=2,usec="), "{stats}");
        assert!(
            stats.ends_with(",rejected_calls=1,failed_calls=1\r\n"),
            "{stats}"
        );
        assert_eq!(
            r.errorstats(),
            "errorstat_ERR:count=1\r\nerrorstat_OOM:count=1\r\nerrorstat_WRONGTYPE:count=1\r\n"
        );
        assert_eq!(r.total_error_replies(), 3);
        assert!(r
            .latencystats(&[50.0, 99.0, 99.9])
            .starts_with("latency_percentiles_usec_set:p50="));
        reset();
        assert_eq!(snapshot(true).error_replies, 0);
    }
}

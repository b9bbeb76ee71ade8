//! One memcached client connection, for its whole life on one core. The first byte picks the
//! protocol as memcached does (0x80: binary, anything else: text with meta commands). Bytes
//! in are parsed by `protocol::memcache`; every keyed request becomes a dispatcher request
//! (`server::memcache`'s specs), a batch of them goes through the one dispatcher (so tiering,
//! memory checks, eviction, shard grouping and pipelining are RESP's), and the outcomes are
//! encoded here, in request order, in the connection's protocol. Connection-wide commands
//! (stats, flush_all, version, verbosity, quit, mn, noop, SASL) run here in their place in
//! the stream: a batch is cut before them.
//!
//! Never: runs a keyed command itself or touches a shard (everything keyed goes through the
//! dispatcher); buffers a request beyond `--max_item_size` plus one line.

use std::cell::LazyCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use tracing::debug;

use super::socket::Socket;
use crate::cmd::memcache::{Kind, Mode, Op, Outcome, Status, EXPIRED};
use crate::protocol::memcache::binary::{self as bin, op, status, BinParsed, BinParser, BinReq};
use crate::protocol::memcache::meta::{self, ItemView, MetaCmd, MetaReq, MetaStatus};
use crate::protocol::memcache::text::{Cmd, Keys, Parsed, StoreCmd, TextParser};
use crate::protocol::Reply;
use crate::server::dispatch::{dispatch, Request};
use crate::server::memcache::{self as mc, McStats, PrefixOp, DETAIL, STATS};
use crate::server::session::Session;
use crate::server::Core;
use crate::shard::now_ms;

/// Requests parsed from one read before they are executed (bounds memory per connection).
const MAX_BATCH: usize = 1024;
const READ_CHUNK: usize = 16 * 1024;
/// The version memcached clients are told (the protocol level Strata speaks).
const VERSION: &str = "1.6.18";
/// memcached's REALTIME_MAXDELTA: exptimes past 30 days are absolute unix times.
const MAX_DELTA: i64 = 60 * 60 * 24 * 30;

/// Serves a memcached connection until the client leaves or breaks the protocol.
pub async fn serve(core: Rc<Core>, stream: Socket) {
    let peer = super::peer_of(&stream);
    let mut session = Session::open(&core.global, core.id, peer);
    McStats::add(&STATS.curr_connections, 1);
    McStats::add(&STATS.total_connections, 1);
    let mut conn = Conn::new(&core);
    if let Err(e) = conn.run(&core, &mut session, &stream).await {
        debug!(client = session.id, "memcached connection closed: {e}");
    }
    STATS.curr_connections.fetch_sub(1, Ordering::Relaxed);
    drop(session);
}

/// How the replies of one parsed request are encoded from the outcomes of its dispatcher
/// requests (each plan takes as many as it sent).
enum Plan {
    /// Bytes written as they are (errors, version, mn...).
    Raw(Vec<u8>),
    Get {
        keys: Keys,
        cas: bool,
        /// gat / gats: counted as touches, as memcached counts them.
        touch: bool,
    },
    Store {
        noreply: bool,
        /// A `cas` command (counted in cas_hits when it stores).
        cas: bool,
    },
    Delete {
        noreply: bool,
    },
    Arith {
        noreply: bool,
        incr: bool,
    },
    Touch {
        noreply: bool,
    },
    MetaGet(MetaReq),
    MetaSet(MetaReq),
    MetaDelete(MetaReq),
    MetaArith(MetaReq),
    MetaDebug(MetaReq),
    Bin(BinReq),
}

impl Plan {
    /// Dispatcher requests it sent.
    fn replies(&self) -> usize {
        match self {
            Plan::Raw(_) => 0,
            Plan::Get { keys, .. } => keys.len(),
            _ => 1,
        }
    }
}

/// What the connection does between batches.
enum Barrier {
    Stats(Vec<Bytes>, Option<BinReq>),
    Flush { delay: i64, reply: Option<Vec<u8>> },
    Quit(Option<Vec<u8>>),
    Close,
}

struct Conn {
    text: TextParser,
    bin: BinParser,
    /// Decided by the first byte.
    binary: Option<bool>,
    /// The input length the request at its front needs before it is parsed again.
    want: usize,
    sasl: bool,
    /// `--requirepass` when the connection opened (memcached's auth checks against it).
    password: String,
}

impl Conn {
    fn new(core: &Rc<Core>) -> Conn {
        let max = core.global.settings.max_item_size;
        Conn {
            text: TextParser::new(max),
            bin: BinParser::new(max),
            binary: None,
            want: 0,
            sasl: !core.global.settings.requirepass().is_empty(),
            password: core.global.settings.requirepass(),
        }
    }

    async fn run(
        &mut self,
        core: &Rc<Core>,
        session: &mut Session,
        stream: &Socket,
    ) -> std::io::Result<()> {
        let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
        let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);
        // Kept across batches (emptied by `encode`), so a batch allocates no plan list.
        let mut plans: Vec<Plan> = Vec::new();
        loop {
            let n = stream.read_into(&mut inbuf, READ_CHUNK).await?;
            if n == 0 || session.killed() {
                return Ok(());
            }
            McStats::add(&STATS.bytes_read, n as u64);
            if inbuf.len() < self.want {
                // A request known to be longer than what came so far: not parsed again yet.
                continue;
            }
            loop {
                let mut barrier = None;
                // The input as shared bytes: requests take their keys and values as slices of
                // it (no copy); what is left unparsed goes back in front of what comes next.
                let view = inbuf.split().freeze();
                // Sized for the requests the input may hold (a binary one is 24 bytes or more).
                let mut reqs = Vec::with_capacity((view.len() / 24).clamp(1, MAX_BATCH));
                let mut at = 0;
                self.want = 0;
                while plans.len() < MAX_BATCH && barrier.is_none() && at < view.len() {
                    if self.binary.is_none() {
                        self.binary = Some(view[at] == bin::REQ_MAGIC);
                    }
                    let rest = view.slice(at..);
                    let used = if self.binary == Some(true) {
                        self.next_binary(&rest, session, &mut plans, &mut reqs, &mut barrier)
                    } else {
                        self.next_text(&rest, session, &mut plans, &mut reqs, &mut barrier)
                    };
                    match used {
                        Some(n) => at += n,
                        None => {
                            self.want = self.wanted(&rest);
                            break;
                        }
                    }
                }
                if at < view.len() {
                    inbuf.extend_from_slice(&view[at..]);
                }
                drop(view);
                let more = plans.len() == MAX_BATCH;
                if !reqs.is_empty() || !plans.is_empty() {
                    let outcomes = if reqs.is_empty() {
                        Vec::new()
                    } else {
                        dispatch(core, session, reqs).await.into_vec()
                    };
                    encode(&mut plans, outcomes, &mut out);
                }
                let mut close = false;
                let cut = barrier.is_some();
                if let Some(b) = barrier {
                    let now = core.global.uptime_ms();
                    session.client.last_cmd_ms.store(now, Ordering::Relaxed);
                    close = self.run_barrier(core, session, b, &mut out).await;
                }
                flush(stream, &mut out).await?;
                if close {
                    return Ok(());
                }
                if cut && self.could_parse(&inbuf) {
                    // A barrier cut the batch: parse on (the next pass waits for input if
                    // what is there is not a whole request after all).
                    continue;
                }
                if !more {
                    break;
                }
            }
            if inbuf.capacity() > 4 << 20 && inbuf.len() < READ_CHUNK {
                inbuf = BytesMut::from(&inbuf[..]);
            }
        }
    }

    /// The length the incomplete request at the front of `buf` needs to be whole, when known
    /// (0 when not: any new input may complete it).
    fn wanted(&self, buf: &[u8]) -> usize {
        if self.binary == Some(true) {
            bin::frame_len(buf)
        } else {
            self.text.wanted()
        }
    }

    /// Whether the input may hold a whole request (after a barrier cut a batch).
    fn could_parse(&self, buf: &[u8]) -> bool {
        if self.binary == Some(true) {
            buf.len() >= bin::HEADER
        } else {
            buf.contains(&b'\n')
        }
    }

    /// Parses one text request at the front of `buf` into plans and requests; returns the
    /// bytes taken, None when more input is needed.
    fn next_text(
        &mut self,
        buf: &Bytes,
        session: &mut Session,
        plans: &mut Vec<Plan>,
        reqs: &mut Vec<Request>,
        barrier: &mut Option<Barrier>,
    ) -> Option<usize> {
        let (cmd, used) = match self.text.parse(buf, !session.authed) {
            Parsed::Cmd(c, n) => (c, n),
            Parsed::Skipped(n) => return Some(n),
            Parsed::Incomplete => return None,
            Parsed::Close => {
                *barrier = Some(Barrier::Close);
                return Some(buf.len());
            }
        };
        McStats::add(&STATS.commands, 1);
        let now: Clock = LazyCell::new(now_ms);
        match cmd {
            Cmd::Reply { text, noreply } => {
                if text.starts_with("SERVER_ERROR object too large") {
                    McStats::add(&STATS.store_too_large, 1);
                }
                if !noreply {
                    plans.push(Plan::Raw(line(&text)));
                }
            }
            Cmd::Auth { pass, .. } => {
                McStats::add(&STATS.auth_cmds, 1);
                let ok = pass[..] == *self.password.as_bytes();
                if ok {
                    session.authed = true;
                    plans.push(Plan::Raw(line("STORED")));
                } else {
                    McStats::add(&STATS.auth_errors, 1);
                    plans.push(Plan::Raw(line("CLIENT_ERROR authentication failure")));
                }
            }
            Cmd::Get { keys, cas, touch } => {
                let mut op = Op {
                    bits: Op::VALUE,
                    ..Op::default()
                };
                let spec = match touch {
                    Some(e) => {
                        op.bits |= Op::TOUCH;
                        op.expire_at = expire_in(i64::from(e), &now);
                        McStats::add(&STATS.cmd_touch, keys.len() as u64);
                        &mc::GET_WRITE
                    }
                    None => {
                        McStats::add(&STATS.cmd_get, keys.len() as u64);
                        &mc::GET
                    }
                };
                for k in &keys {
                    reqs.push(mc::request(spec, k.clone(), &op, None));
                }
                plans.push(Plan::Get {
                    keys,
                    cas,
                    touch: touch.is_some(),
                });
            }
            Cmd::Store {
                cmd,
                key,
                flags,
                exptime,
                cas,
                data,
                noreply,
            } => {
                McStats::add(&STATS.cmd_set, 1);
                DETAIL.count(&key, PrefixOp::Set);
                let (mode, spec) = match cmd {
                    StoreCmd::Set => (Mode::Set, &mc::STORE),
                    StoreCmd::Add => (Mode::Add, &mc::STORE),
                    StoreCmd::Replace => (Mode::Replace, &mc::STORE),
                    StoreCmd::Cas => (Mode::Cas, &mc::STORE),
                    StoreCmd::Append => (Mode::Append, &mc::CONCAT),
                    StoreCmd::Prepend => (Mode::Prepend, &mc::CONCAT),
                };
                let op = Op {
                    kind: Kind::Store,
                    mode,
                    client_flags: flags,
                    expire_at: expire_in(i64::from(exptime), &now),
                    cas,
                    ..Op::default()
                };
                reqs.push(mc::request(spec, key, &op, Some(data)));
                plans.push(Plan::Store {
                    noreply,
                    cas: mode == Mode::Cas,
                });
            }
            Cmd::Delete { key, noreply } => {
                DETAIL.count(&key, PrefixOp::Delete);
                let op = Op {
                    kind: Kind::Delete,
                    ..Op::default()
                };
                reqs.push(mc::request(&mc::DELETE, key, &op, None));
                plans.push(Plan::Delete { noreply });
            }
            Cmd::Arith {
                key,
                incr,
                delta,
                noreply,
            } => {
                let op = Op {
                    kind: Kind::Arith,
                    bits: if incr { 0 } else { Op::DECR },
                    delta,
                    ..Op::default()
                };
                reqs.push(mc::request(&mc::ARITH, key, &op, None));
                plans.push(Plan::Arith { noreply, incr });
            }
            Cmd::Touch {
                key,
                exptime,
                noreply,
            } => {
                McStats::add(&STATS.cmd_touch, 1);
                let op = Op {
                    kind: Kind::Touch,
                    expire_at: expire_in(i64::from(exptime), &now),
                    ..Op::default()
                };
                reqs.push(mc::request(&mc::TOUCH, key, &op, None));
                plans.push(Plan::Touch { noreply });
            }
            Cmd::FlushAll { delay, noreply } => {
                *barrier = Some(Barrier::Flush {
                    delay: i64::from(delay),
                    reply: (!noreply).then(|| line("OK")),
                });
            }
            Cmd::Stats(args) => *barrier = Some(Barrier::Stats(args, None)),
            Cmd::Version => plans.push(Plan::Raw(line(&format!("VERSION {VERSION}")))),
            Cmd::Verbosity { noreply } => {
                if !noreply {
                    plans.push(Plan::Raw(line("OK")));
                }
            }
            Cmd::Quit => *barrier = Some(Barrier::Quit(None)),
            Cmd::MetaNoop => plans.push(Plan::Raw(line("MN"))),
            Cmd::Meta(m) => {
                McStats::add(&STATS.cmd_meta, 1);
                meta_request(m, *now, plans, reqs);
            }
        }
        Some(used)
    }

    /// Parses one binary request; as [`Conn::next_text`].
    fn next_binary(
        &mut self,
        buf: &Bytes,
        session: &mut Session,
        plans: &mut Vec<Plan>,
        reqs: &mut Vec<Request>,
        barrier: &mut Option<Barrier>,
    ) -> Option<usize> {
        let (r, used) = match self.bin.parse(buf, session.authed, self.sasl) {
            BinParsed::Req(r, n) => (r, n),
            BinParsed::Skipped(n) => return Some(n),
            BinParsed::Incomplete => return None,
            BinParsed::Close => {
                *barrier = Some(Barrier::Close);
                return Some(buf.len());
            }
            BinParsed::Error {
                opcode,
                opaque,
                status: st,
                close,
                used,
            } => {
                if st == status::E2BIG {
                    McStats::add(&STATS.store_too_large, 1);
                }
                let mut v = Vec::new();
                bin::error(&mut v, opcode, opaque, st);
                if close {
                    *barrier = Some(Barrier::Quit(Some(v)));
                } else {
                    plans.push(Plan::Raw(v));
                }
                return Some(used);
            }
        };
        McStats::add(&STATS.commands, 1);
        let now: Clock = LazyCell::new(now_ms);
        let raw = |status: u16, value: &[u8], plans: &mut Vec<Plan>| {
            let mut v = Vec::new();
            bin::response(&mut v, r.opcode, status, r.opaque, 0, &[], &[], value);
            plans.push(Plan::Raw(v));
        };
        match r.cmd {
            op::VERSION => raw(status::OK, VERSION.as_bytes(), plans),
            op::NOOP => raw(status::OK, b"", plans),
            op::QUIT => {
                let mut v = Vec::new();
                if !r.quiet {
                    bin::response(&mut v, r.opcode, status::OK, r.opaque, 0, &[], &[], &[]);
                }
                *barrier = Some(Barrier::Quit(Some(v)));
            }
            op::FLUSH => {
                let mut v = Vec::new();
                if !r.quiet {
                    bin::response(&mut v, r.opcode, status::OK, r.opaque, 0, &[], &[], &[]);
                }
                *barrier = Some(Barrier::Flush {
                    delay: i64::from(r.touch_exptime()),
                    reply: Some(v),
                });
            }
            op::STAT => {
                let args = if r.key.is_empty() {
                    Vec::new()
                } else {
                    r.key
                        .split(|&b| b == b' ')
                        .filter(|s| !s.is_empty())
                        .map(Bytes::copy_from_slice)
                        .collect()
                };
                *barrier = Some(Barrier::Stats(args, Some(r)));
            }
            op::SASL_LIST_MECHS => raw(status::OK, b"PLAIN", plans),
            op::SASL_AUTH | op::SASL_STEP => {
                McStats::add(&STATS.auth_cmds, 1);
                let pass = self.password.clone();
                // PLAIN: [authzid] NUL authcid NUL password.
                let parts: Vec<&[u8]> = r.value.split(|&b| b == 0).collect();
                let ok = r.cmd == op::SASL_AUTH
                    && &r.key[..] == b"PLAIN"
                    && parts.len() == 3
                    && parts[2] == pass.as_bytes();
                if ok {
                    session.authed = true;
                    raw(status::OK, b"Authenticated", plans);
                } else {
                    McStats::add(&STATS.auth_errors, 1);
                    let mut v = Vec::new();
                    bin::error(&mut v, r.opcode, r.opaque, status::AUTH_ERROR);
                    plans.push(Plan::Raw(v));
                }
            }
            op::GET | op::GETK | op::GAT | op::GATK | op::TOUCH => {
                let touch = matches!(r.cmd, op::GAT | op::GATK | op::TOUCH);
                let mut o = Op {
                    bits: if r.cmd == op::TOUCH { 0 } else { Op::VALUE },
                    ..Op::default()
                };
                let spec = if touch {
                    McStats::add(&STATS.cmd_touch, 1);
                    o.bits |= Op::TOUCH;
                    o.expire_at = expire_in(i64::from(r.touch_exptime()), &now);
                    if r.cmd == op::TOUCH {
                        &mc::PEEK_WRITE
                    } else {
                        &mc::GET_WRITE
                    }
                } else {
                    McStats::add(&STATS.cmd_get, 1);
                    &mc::GET
                };
                reqs.push(mc::request(spec, r.key.clone(), &o, None));
                plans.push(Plan::Bin(r));
            }
            op::SET | op::ADD | op::REPLACE | op::APPEND | op::PREPEND => {
                McStats::add(&STATS.cmd_set, 1);
                DETAIL.count(&r.key, PrefixOp::Set);
                let mut mode = match r.cmd {
                    op::SET => Mode::Set,
                    op::ADD => Mode::Add,
                    op::REPLACE => Mode::Replace,
                    op::APPEND => Mode::Append,
                    _ => Mode::Prepend,
                };
                if r.cas != 0 && matches!(mode, Mode::Set | Mode::Add | Mode::Replace) {
                    mode = Mode::Cas;
                }
                let concat = matches!(mode, Mode::Append | Mode::Prepend);
                let (flags, exp) = if concat {
                    (0, 0)
                } else {
                    (r.flags(), expire_in(i64::from(r.set_exptime()), &now))
                };
                let o = Op {
                    kind: Kind::Store,
                    mode,
                    client_flags: flags,
                    expire_at: exp,
                    cas: r.cas,
                    ..Op::default()
                };
                let spec = if concat { &mc::CONCAT } else { &mc::STORE };
                reqs.push(mc::request(spec, r.key.clone(), &o, Some(r.value.clone())));
                plans.push(Plan::Bin(r));
            }
            op::DELETE => {
                DETAIL.count(&r.key, PrefixOp::Delete);
                let o = Op {
                    kind: Kind::Delete,
                    cas: r.cas,
                    ..Op::default()
                };
                reqs.push(mc::request(&mc::DELETE, r.key.clone(), &o, None));
                plans.push(Plan::Bin(r));
            }
            op::INCREMENT | op::DECREMENT => {
                let (delta, initial, exp) = r.incr_args();
                let mut o = Op {
                    kind: Kind::Arith,
                    bits: if r.cmd == op::DECREMENT { Op::DECR } else { 0 },
                    delta,
                    initial,
                    cas: r.cas,
                    ..Op::default()
                };
                if exp != u32::MAX {
                    o.bits |= Op::VIVIFY;
                    o.vivify_at = expire_in(i64::from(exp), &now);
                }
                reqs.push(mc::request(&mc::ARITH, r.key.clone(), &o, None));
                plans.push(Plan::Bin(r));
            }
            _ => {
                let mut v = Vec::new();
                bin::error(&mut v, r.opcode, r.opaque, status::UNKNOWN_COMMAND);
                plans.push(Plan::Raw(v));
            }
        }
        Some(used)
    }

    /// Runs a connection-wide command; true when the connection must close after it.
    async fn run_barrier(
        &mut self,
        core: &Rc<Core>,
        session: &Session,
        b: Barrier,
        out: &mut Vec<u8>,
    ) -> bool {
        match b {
            Barrier::Close => true,
            Barrier::Quit(reply) => {
                if let Some(r) = reply {
                    out.extend_from_slice(&r);
                }
                true
            }
            Barrier::Flush { delay, reply } => {
                McStats::add(&STATS.cmd_flush, 1);
                let delay = if delay > 0 {
                    let at = expire_at(delay, now_ms());
                    at.saturating_sub(now_ms()).div_ceil(1000)
                } else {
                    0
                };
                mc::flush(core, delay).await;
                if let Some(r) = reply {
                    out.extend_from_slice(&r);
                }
                false
            }
            Barrier::Stats(args, bin_req) => {
                let reply = stats(core, session, &args).await;
                match bin_req {
                    None => text_stats(reply, out),
                    Some(r) => bin_stats(&r, reply, out),
                }
                false
            }
        }
    }
}

/// A `stats` reply in the text protocol.
fn text_stats(reply: StatsReply, out: &mut Vec<u8>) {
    match reply {
        StatsReply::Lines(lines) => {
            for (k, v) in lines {
                out.extend_from_slice(b"STAT ");
                out.extend_from_slice(k.as_bytes());
                out.push(b' ');
                out.extend_from_slice(v.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            push_line(out, "END");
        }
        StatsReply::Reset => push_line(out, "RESET"),
        StatsReply::DetailSet => push_line(out, "OK"),
        StatsReply::DetailDump(d) => out.extend_from_slice(&d),
        StatsReply::DetailUsage => push_line(out, "CLIENT_ERROR usage: stats detail on|off|dump"),
        StatsReply::Unknown => push_line(out, "ERROR"),
    }
}

/// A `stat` reply in the binary protocol: one response per value, then an empty one.
fn bin_stats(r: &BinReq, reply: StatsReply, out: &mut Vec<u8>) {
    let put = |out: &mut Vec<u8>, k: &[u8], v: &[u8]| {
        bin::response(out, r.opcode, status::OK, r.opaque, 0, &[], k, v);
    };
    match reply {
        StatsReply::Lines(lines) => {
            for (k, v) in lines {
                put(out, k.as_bytes(), v.as_bytes());
            }
        }
        StatsReply::DetailDump(d) => put(out, b"detailed", &d),
        StatsReply::Reset | StatsReply::DetailSet => {}
        StatsReply::DetailUsage | StatsReply::Unknown => {
            bin::error(out, r.opcode, r.opaque, status::KEY_ENOENT);
            return;
        }
    }
    put(out, b"", b"");
}

/// Appends a text reply line.
fn push_line(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends a number in decimal.
fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A text reply line.
fn line(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 2);
    v.extend_from_slice(s.as_bytes());
    v.extend_from_slice(b"\r\n");
    v
}

/// The time of a request, read only when an expiry needs it (most gets and sets have none).
type Clock = LazyCell<u64, fn() -> u64>;

/// [`expire_at`] reading the clock only for an exptime that needs it.
fn expire_in(exptime: i64, now: &Clock) -> u64 {
    if exptime == 0 {
        0
    } else {
        expire_at(exptime, **now)
    }
}

/// memcached's realtime(): an exptime in seconds as an absolute expiry in ms (0 = none).
fn expire_at(exptime: i64, now: u64) -> u64 {
    if exptime == 0 {
        0
    } else if exptime < 0 {
        EXPIRED
    } else if exptime > MAX_DELTA {
        let at = (exptime as u64).saturating_mul(1000);
        if at <= now {
            EXPIRED
        } else {
            at
        }
    } else {
        now + exptime as u64 * 1000
    }
}

/// Seconds an expiry leaves (-1 for none), as meta's `t` shows them.
fn ttl_left(at: u64, now: u64) -> i64 {
    if at == 0 {
        -1
    } else {
        (at.saturating_sub(now).div_ceil(1000)) as i64
    }
}

fn view(o: &Outcome, now: u64) -> ItemView {
    ItemView {
        value: o.value_bytes(),
        len: o.len,
        client_flags: o.client_flags,
        cas: o.cas,
        ttl: ttl_left(o.expire_at, now),
        idle: o.idle,
        fetched: o.fetched(),
        stale: o.stale(),
        token_sent: o.token_sent(),
        won: o.won(),
        binary_key: o.binary_key(),
    }
}

/// Sets `bit` when a meta flag without a value came.
fn flag(o: &mut Op, bit: u16, on: bool) {
    if on {
        o.bits |= bit;
    }
}

/// Sets `bit`, and the time `field` picks to the flag's exptime, when a timed meta flag came.
fn timed_flag(
    o: &mut Op,
    bit: u16,
    exptime: Option<i32>,
    now: u64,
    field: fn(&mut Op) -> &mut u64,
) {
    if let Some(t) = exptime {
        o.bits |= bit;
        *field(o) = expire_at(i64::from(t), now);
    }
}

/// Turns a meta command into its plan and request.
fn meta_request(m: MetaCmd, now: u64, plans: &mut Vec<Plan>, reqs: &mut Vec<Request>) {
    match m {
        MetaCmd::Get(req) => {
            let f = &req.f;
            let mut o = Op::default();
            flag(&mut o, Op::VALUE, f.value);
            timed_flag(&mut o, Op::TOUCH, f.ttl, now, |o| &mut o.expire_at);
            timed_flag(&mut o, Op::VIVIFY, f.vivify, now, |o| &mut o.vivify_at);
            timed_flag(&mut o, Op::RECACHE, f.recache, now, |o| &mut o.recache_at);
            flag(&mut o, Op::NO_UPDATE, f.no_update);
            let writes = f.ttl.is_some() || f.vivify.is_some();
            let spec = match (f.value, writes) {
                (true, false) => &mc::GET,
                (true, true) => &mc::GET_WRITE,
                (false, false) => &mc::PEEK,
                (false, true) => &mc::PEEK_WRITE,
            };
            McStats::add(&STATS.cmd_get, 1);
            reqs.push(mc::request(spec, req.key.clone(), &o, None));
            plans.push(Plan::MetaGet(req));
        }
        MetaCmd::Set(req, data) => {
            let f = &req.f;
            let mut mode = match f.mode {
                Some(b'E') => Mode::Add,
                Some(b'A') => Mode::Append,
                Some(b'P') => Mode::Prepend,
                Some(b'R') => Mode::Replace,
                _ => Mode::Set,
            };
            if f.cas.is_some() && matches!(mode, Mode::Set | Mode::Replace) {
                mode = Mode::Cas;
            }
            let mut o = Op {
                kind: Kind::Store,
                mode,
                client_flags: f.client_flags,
                expire_at: f.ttl.map_or(0, |t| expire_at(i64::from(t), now)),
                cas: f.cas.unwrap_or(0),
                new_cas: f.new_cas.unwrap_or(0),
                ..Op::default()
            };
            flag(&mut o, Op::INVALIDATE, f.invalidate);
            flag(&mut o, Op::BINARY_KEY, f.base64);
            let spec = if matches!(mode, Mode::Append | Mode::Prepend) {
                &mc::CONCAT
            } else {
                &mc::STORE
            };
            McStats::add(&STATS.cmd_set, 1);
            reqs.push(mc::request(spec, req.key.clone(), &o, Some(data)));
            plans.push(Plan::MetaSet(req));
        }
        MetaCmd::Delete(req) => {
            let f = &req.f;
            let mut o = Op {
                kind: Kind::Delete,
                cas: f.cas.unwrap_or(0),
                ..Op::default()
            };
            flag(&mut o, Op::INVALIDATE, f.invalidate);
            flag(&mut o, Op::CLEAR, f.clear);
            timed_flag(&mut o, Op::NEW_TTL, f.ttl, now, |o| &mut o.expire_at);
            reqs.push(mc::request(&mc::DELETE, req.key.clone(), &o, None));
            plans.push(Plan::MetaDelete(req));
        }
        MetaCmd::Arith(req) => {
            let f = &req.f;
            let mut o = Op {
                kind: Kind::Arith,
                delta: f.delta,
                initial: f.initial,
                cas: f.cas.unwrap_or(0),
                ..Op::default()
            };
            flag(&mut o, Op::DECR, matches!(f.mode, Some(b'D' | b'-')));
            timed_flag(&mut o, Op::VIVIFY, f.vivify, now, |o| &mut o.vivify_at);
            timed_flag(&mut o, Op::NEW_TTL, f.ttl, now, |o| &mut o.expire_at);
            reqs.push(mc::request(&mc::ARITH, req.key.clone(), &o, None));
            plans.push(Plan::MetaArith(req));
        }
        MetaCmd::Debug(req) => {
            let o = Op {
                bits: Op::NO_UPDATE,
                ..Op::default()
            };
            reqs.push(mc::request(&mc::PEEK, req.key.clone(), &o, None));
            plans.push(Plan::MetaDebug(req));
        }
    }
}

/// The text error for a dispatcher error (out of memory, shutting down).
fn server_error(r: &Reply) -> &'static str {
    match r {
        Reply::Error(e) if e.starts_with("OOM") => {
            McStats::add(&STATS.store_no_memory, 1);
            "SERVER_ERROR out of memory storing object"
        }
        _ => "SERVER_ERROR internal error",
    }
}

/// Encodes each plan's replies from the outcomes of its requests, in order.
fn encode(plans: &mut Vec<Plan>, outcomes: Vec<Reply>, out: &mut Vec<u8>) {
    let now: Clock = LazyCell::new(now_ms);
    let mut it = outcomes.into_iter().map(Outcome::from_reply);
    for plan in plans.drain(..) {
        match plan {
            Plan::Get { keys, cas, touch } => {
                encode_get(&keys, cas, touch, it.by_ref().take(keys.len()), out)
            }
            plan => {
                let first = if plan.replies() == 1 { it.next() } else { None };
                encode_one(plan, first, &now, out)
            }
        }
    }
}

fn encode_one(plan: Plan, first: Option<Result<Outcome, Reply>>, now: &Clock, out: &mut Vec<u8>) {
    match plan {
        Plan::Raw(v) => out.extend_from_slice(&v),
        // Encoded by `encode_get`.
        Plan::Get { .. } => {}
        Plan::Store { noreply, cas } => {
            let word = match first {
                Some(Ok(o)) => {
                    if o.status == Status::Stored {
                        McStats::add(&STATS.total_items, 1);
                        if cas {
                            McStats::add(&STATS.cas_hits, 1);
                        }
                    }
                    store_word(&o)
                }
                Some(Err(e)) => server_error(&e),
                None => "SERVER_ERROR internal error",
            };
            if !noreply {
                push_line(out, word);
            }
        }
        Plan::Delete { noreply } => {
            let counters = (&STATS.delete_hits, &STATS.delete_misses);
            hit_or_miss(first, Status::Deleted, "DELETED", counters, noreply, out);
        }
        Plan::Arith { noreply, incr } => {
            let (hits, misses) = if incr {
                (&STATS.incr_hits, &STATS.incr_misses)
            } else {
                (&STATS.decr_hits, &STATS.decr_misses)
            };
            let text = match first {
                Some(Ok(o)) => match o.status {
                    Status::Hit | Status::Stored => {
                        McStats::add(hits, 1);
                        String::from_utf8_lossy(o.value().unwrap_or_default()).into_owned()
                    }
                    Status::NonNumeric => {
                        "CLIENT_ERROR cannot increment or decrement non-numeric value".into()
                    }
                    _ => {
                        McStats::add(misses, 1);
                        "NOT_FOUND".into()
                    }
                },
                Some(Err(e)) => server_error(&e).into(),
                None => "SERVER_ERROR internal error".into(),
            };
            if !noreply {
                push_line(out, &text);
            }
        }
        Plan::Touch { noreply } => {
            let counters = (&STATS.touch_hits, &STATS.touch_misses);
            hit_or_miss(first, Status::Touched, "TOUCHED", counters, noreply, out);
        }
        Plan::MetaGet(req) => match first {
            Some(Ok(o)) if o.status == Status::Hit => {
                McStats::add(&STATS.get_hits, 1);
                meta::encode_get(&req, Some(&view(&o, **now)), out)
            }
            Some(Ok(o)) => {
                count_miss(&o);
                meta::encode_get(&req, None, out)
            }
            Some(Err(e)) => push_line(out, server_error(&e)),
            None => {}
        },
        Plan::MetaSet(req) => match first {
            Some(Ok(o)) => {
                if o.status == Status::TooLarge {
                    push_line(out, "SERVER_ERROR out of memory storing object");
                    return;
                }
                meta::encode_set(&req, meta_status(o.status), o.cas, out)
            }
            Some(Err(e)) => push_line(out, server_error(&e)),
            None => {}
        },
        Plan::MetaDelete(req) => match first {
            Some(Ok(o)) => meta::encode_delete(&req, meta_status(o.status), out),
            Some(Err(e)) => push_line(out, server_error(&e)),
            None => {}
        },
        Plan::MetaArith(req) => match first {
            Some(Ok(o)) => match o.status {
                Status::NonNumeric => push_line(
                    out,
                    "CLIENT_ERROR cannot increment or decrement non-numeric value",
                ),
                Status::Hit | Status::Stored => {
                    meta::encode_arith(&req, MetaStatus::Ok, Some(&view(&o, **now)), out)
                }
                s => meta::encode_arith(&req, meta_status(s), None, out),
            },
            Some(Err(e)) => push_line(out, server_error(&e)),
            None => {}
        },
        Plan::MetaDebug(req) => match first {
            Some(Ok(o)) if o.status == Status::Hit => {
                meta::encode_debug(&req, Some(&view(&o, **now)), out)
            }
            Some(Ok(_)) => meta::encode_debug(&req, None, out),
            Some(Err(e)) => push_line(out, server_error(&e)),
            None => {}
        },
        Plan::Bin(r) => encode_bin(&r, first, out),
    }
}

/// The reply of delete and touch: `word` when the op ended in `hit`, else NOT_FOUND.
fn hit_or_miss(
    first: Option<Result<Outcome, Reply>>,
    hit: Status,
    word: &'static str,
    (hits, misses): (&std::sync::atomic::AtomicU64, &std::sync::atomic::AtomicU64),
    noreply: bool,
    out: &mut Vec<u8>,
) {
    let word = match first {
        Some(Ok(o)) if o.status == hit => {
            McStats::add(hits, 1);
            word
        }
        Some(Ok(_)) => {
            McStats::add(misses, 1);
            "NOT_FOUND"
        }
        Some(Err(e)) => server_error(&e),
        None => "SERVER_ERROR internal error",
    };
    if !noreply {
        push_line(out, word);
    }
}

fn store_word(o: &Outcome) -> &'static str {
    match o.status {
        Status::Stored => "STORED",
        Status::Exists => {
            McStats::add(&STATS.cas_badval, 1);
            "EXISTS"
        }
        Status::NotFound => {
            McStats::add(&STATS.cas_misses, 1);
            "NOT_FOUND"
        }
        Status::TooLarge => "SERVER_ERROR out of memory storing object",
        _ => "NOT_STORED",
    }
}

fn meta_status(s: Status) -> MetaStatus {
    match s {
        Status::Stored | Status::Deleted | Status::Hit | Status::Touched => MetaStatus::Ok,
        Status::Exists => MetaStatus::Exists,
        Status::NotFound | Status::Miss => MetaStatus::NotFound,
        _ => MetaStatus::NotStored,
    }
}

/// `stats detail`: a get of `key` and whether it hit.
fn detail_get(key: &[u8], r: &Result<Outcome, Reply>) {
    DETAIL.count(key, PrefixOp::Get);
    if matches!(r, Ok(o) if o.status == Status::Hit) {
        DETAIL.count(key, PrefixOp::Hit);
    }
}

/// Counts a read that found nothing (get_misses, and get_expired when the key had expired).
fn count_miss(o: &Outcome) {
    McStats::add(&STATS.get_misses, 1);
    if o.expired_seen() {
        McStats::add(&STATS.get_expired, 1);
    }
}

/// The text reply of a get: VALUE lines for the hits, then END.
fn encode_get(
    keys: &[Bytes],
    cas: bool,
    touch: bool,
    rs: impl Iterator<Item = Result<Outcome, Reply>>,
    out: &mut Vec<u8>,
) {
    let detail = DETAIL.enabled();
    for (key, r) in keys.iter().zip(rs) {
        if detail {
            detail_get(key, &r);
        }
        match r {
            Ok(o) if o.status == Status::Hit => {
                McStats::add(
                    if touch {
                        &STATS.touch_hits
                    } else {
                        &STATS.get_hits
                    },
                    1,
                );
                let value = o.value().unwrap_or_default();
                out.extend_from_slice(b"VALUE ");
                out.extend_from_slice(key);
                out.push(b' ');
                push_u64(out, u64::from(o.client_flags));
                out.push(b' ');
                push_u64(out, value.len() as u64);
                if cas {
                    out.push(b' ');
                    push_u64(out, o.cas);
                }
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
            Ok(_) if touch => McStats::add(&STATS.touch_misses, 1),
            Ok(o) => count_miss(&o),
            Err(_) => {}
        }
    }
    out.extend_from_slice(b"END\r\n");
}

/// A binary request's response from its outcome.
fn encode_bin(r: &BinReq, res: Option<Result<Outcome, Reply>>, out: &mut Vec<u8>) {
    if r.cmd != op::TOUCH && DETAIL.enabled() {
        if let Some(res) = &res {
            if matches!(r.cmd, op::GET | op::GETK | op::GAT | op::GATK) {
                detail_get(&r.key, res);
            }
        }
    }
    let o = match res {
        Some(Ok(o)) => o,
        Some(Err(e)) => {
            let st = match &e {
                Reply::Error(m) if m.starts_with("OOM") => status::ENOMEM,
                _ => status::EINVAL,
            };
            bin::error(out, r.opcode, r.opaque, st);
            return;
        }
        None => return,
    };
    let ok = |out: &mut Vec<u8>, cas: u64, extras: &[u8], key: &[u8], value: &[u8]| {
        bin::response(out, r.opcode, status::OK, r.opaque, cas, extras, key, value);
    };
    match r.cmd {
        op::GET | op::GETK | op::GAT | op::GATK | op::TOUCH => {
            let with_key = matches!(r.cmd, op::GETK | op::GATK);
            // Touches and gats count as touches, as memcached counts them.
            let touch = matches!(r.cmd, op::TOUCH | op::GAT | op::GATK);
            if o.status == Status::Hit {
                if touch {
                    McStats::add(&STATS.touch_hits, 1);
                } else {
                    McStats::add(&STATS.get_hits, 1);
                }
                let flags = o.client_flags.to_be_bytes();
                let key: &[u8] = if with_key { &r.key } else { &[] };
                let value = o.value().unwrap_or_default();
                ok(out, o.cas, &flags, key, value);
            } else {
                if touch {
                    McStats::add(&STATS.touch_misses, 1);
                } else {
                    count_miss(&o);
                }
                if r.quiet {
                    return;
                }
                if with_key {
                    let k = &r.key[..];
                    bin::response(out, r.opcode, status::KEY_ENOENT, r.opaque, 0, &[], k, &[]);
                } else {
                    bin::error(out, r.opcode, r.opaque, status::KEY_ENOENT);
                }
            }
        }
        op::SET | op::ADD | op::REPLACE | op::APPEND | op::PREPEND => match o.status {
            Status::Stored => {
                McStats::add(&STATS.total_items, 1);
                if r.cas != 0 {
                    McStats::add(&STATS.cas_hits, 1);
                }
                if !r.quiet {
                    ok(out, o.cas, &[], &[], &[]);
                }
            }
            Status::Exists => {
                McStats::add(&STATS.cas_badval, 1);
                bin::error(out, r.opcode, r.opaque, status::KEY_EEXISTS)
            }
            Status::NotFound => {
                McStats::add(&STATS.cas_misses, 1);
                bin::error(out, r.opcode, r.opaque, status::KEY_ENOENT)
            }
            Status::TooLarge => bin::error(out, r.opcode, r.opaque, status::E2BIG),
            _ => {
                let st = match r.cmd {
                    op::ADD if r.cas == 0 => status::KEY_EEXISTS,
                    op::REPLACE if r.cas == 0 => status::KEY_ENOENT,
                    _ => status::NOT_STORED,
                };
                bin::error(out, r.opcode, r.opaque, st);
            }
        },
        op::DELETE => match o.status {
            Status::Deleted => {
                McStats::add(&STATS.delete_hits, 1);
                if !r.quiet {
                    ok(out, 0, &[], &[], &[]);
                }
            }
            Status::Exists => bin::error(out, r.opcode, r.opaque, status::KEY_EEXISTS),
            _ => {
                McStats::add(&STATS.delete_misses, 1);
                bin::error(out, r.opcode, r.opaque, status::KEY_ENOENT);
            }
        },
        op::INCREMENT | op::DECREMENT => match o.status {
            Status::Hit | Status::Stored => {
                let v = o
                    .value()
                    .and_then(crate::protocol::memcache::parse_u64)
                    .unwrap_or(0);
                if !r.quiet {
                    ok(out, o.cas, &[], &[], &v.to_be_bytes());
                }
            }
            Status::NonNumeric => bin::error(out, r.opcode, r.opaque, status::DELTA_BADVAL),
            Status::Exists => bin::error(out, r.opcode, r.opaque, status::KEY_EEXISTS),
            _ => bin::error(out, r.opcode, r.opaque, status::KEY_ENOENT),
        },
        _ => {}
    }
}

/// What a `stats` request answers.
enum StatsReply {
    /// STAT lines, then END (binary: one response each, then the empty one).
    Lines(Vec<(String, String)>),
    /// `stats reset`: RESET (binary: the empty response).
    Reset,
    /// `stats detail on|off`: OK (binary: the empty response).
    DetailSet,
    /// `stats detail dump`: PREFIX lines and END (binary: one "detailed" response).
    DetailDump(Vec<u8>),
    /// `stats detail` with anything else.
    DetailUsage,
    /// An unknown group: ERROR (binary: not found).
    Unknown,
}

/// Answers `stats` and its groups, with memcached 1.6's field names in its order (the fields
/// Strata can fill with a meaning; see `tests/memcached_vs_memcached.rs`).
async fn stats(core: &Rc<Core>, session: &Session, args: &[Bytes]) -> StatsReply {
    let g = &core.global;
    let s = &*STATS;
    let mut v: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, val: String| v.push((k.to_string(), val));
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed).to_string();
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let sasl = !g.settings.requirepass().is_empty();
    match args.first().map(|a| &a[..]) {
        None => {
            let items = mc::item_counts(core).await;
            let (user, sys) = crate::server::admin::info::cpu_times();
            put("pid", std::process::id().to_string());
            put("uptime", g.started.elapsed().as_secs().to_string());
            put("time", (now_ms() / 1000).to_string());
            put("version", VERSION.to_string());
            put("pointer_size", (usize::BITS).to_string());
            put("rusage_user", format!("{user:.6}"));
            put("rusage_system", format!("{sys:.6}"));
            put("max_connections", max_connections().to_string());
            put("curr_connections", load(&s.curr_connections));
            put("total_connections", load(&s.total_connections));
            put("rejected_connections", "0".into());
            for (k, n) in s.counters() {
                put(k, n.to_string());
            }
            put("limit_maxbytes", g.settings.maxmemory().to_string());
            put("accepting_conns", "1".into());
            put("threads", g.shards().to_string());
            put("bytes", items.bytes.to_string());
            put("curr_items", items.items.to_string());
            put("total_items", load(&s.total_items));
            put("evictions", items.evictions.to_string());
        }
        Some(b"settings") => {
            let bind = g.settings.bind.trim();
            put("maxbytes", g.settings.maxmemory().to_string());
            put("maxconns", max_connections().to_string());
            put("tcpport", g.settings.memcached_port.to_string());
            put("udpport", "0".into());
            put("inter", if bind.is_empty() { "NULL" } else { bind }.into());
            put(
                "evictions",
                if g.settings.cache_mode { "on" } else { "off" }.into(),
            );
            put("num_threads", g.shards().to_string());
            put(
                "stat_key_prefix",
                char::from(mc::PREFIX_DELIMITER).to_string(),
            );
            put("detail_enabled", yes_no(DETAIL.enabled()));
            put("cas_enabled", "yes".into());
            put("binding_protocol", "auto-negotiate".into());
            put("auth_enabled_sasl", yes_no(sasl));
            put("auth_enabled_ascii", yes_no(sasl));
            put("item_size_max", g.settings.max_item_size.to_string());
            put("flush_enabled", "yes".into());
            put("track_sizes", "no".into());
        }
        Some(b"items") => {
            let items = mc::item_counts(core).await;
            if items.items > 0 {
                put("items:1:number", items.items.to_string());
                put("items:1:mem_requested", items.bytes.to_string());
                put("items:1:evicted", items.evictions.to_string());
                put("items:1:outofmemory", load(&s.store_no_memory));
            }
        }
        Some(b"slabs") => {
            // One class holds every item: its hit counters are the totals.
            let items = mc::item_counts(core).await;
            if items.items > 0 {
                put("1:used_chunks", items.items.to_string());
                put("1:get_hits", load(&s.get_hits));
                put("1:cmd_set", load(&s.cmd_set));
                put("1:delete_hits", load(&s.delete_hits));
                put("1:incr_hits", load(&s.incr_hits));
                put("1:decr_hits", load(&s.decr_hits));
                put("1:cas_hits", load(&s.cas_hits));
                put("1:cas_badval", load(&s.cas_badval));
                put("1:touch_hits", load(&s.touch_hits));
            }
            put("active_slabs", u8::from(items.items > 0).to_string());
            put("total_malloced", crate::memory::used_memory().to_string());
        }
        Some(b"conns") => {
            // Every memcached connection (the listening sockets are per core: not listed).
            let port = format!(":{}", g.settings.memcached_port);
            let now = g.uptime_ms();
            g.clients.for_each(|c| {
                if !c.peer.laddr.ends_with(&port) {
                    return;
                }
                let fd = c.peer.fd;
                let state = if c.id == session.id {
                    "conn_parse_cmd"
                } else {
                    "conn_waiting"
                };
                let idle = now.saturating_sub(c.last_cmd_ms.load(Ordering::Relaxed)) / 1000;
                put(&format!("{fd}:addr"), format!("tcp:{}", c.peer.addr));
                put(
                    &format!("{fd}:listen_addr"),
                    format!("tcp:{}", c.peer.laddr),
                );
                put(&format!("{fd}:state"), state.into());
                put(&format!("{fd}:secs_since_last_cmd"), idle.to_string());
            });
        }
        // Strata keeps no item size histogram: memcached's answer when it is off.
        Some(b"sizes") => put("sizes_status", "disabled".into()),
        Some(b"detail") => {
            return match args.get(1).map(|a| &a[..]) {
                Some(b"on") => {
                    DETAIL.set_enabled(true);
                    StatsReply::DetailSet
                }
                Some(b"off") => {
                    DETAIL.set_enabled(false);
                    StatsReply::DetailSet
                }
                Some(b"dump") => StatsReply::DetailDump(DETAIL.dump()),
                _ => StatsReply::DetailUsage,
            }
        }
        Some(b"reset") => {
            mc::reset(core).await;
            return StatsReply::Reset;
        }
        Some(_) => return StatsReply::Unknown,
    }
    StatsReply::Lines(v)
}

/// The most connections the process can hold: its open-file limit.
fn max_connections() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given, which lives on our stack.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if rc == 0 {
        lim.rlim_cur
    } else {
        1024
    }
}

/// Writes `out` whole and empties it.
async fn flush(stream: &Socket, out: &mut Vec<u8>) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    McStats::add(&STATS.bytes_written, out.len() as u64);
    stream.write_all(out).await?;
    out.clear();
    if out.capacity() > 1 << 20 {
        out.shrink_to(16 * 1024);
    }
    Ok(())
}

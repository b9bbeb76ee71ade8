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

use std::rc::Rc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use tracing::debug;

use super::socket::Socket;
use crate::cmd::memcache::{Kind, Mode, Op, Outcome, Status, EXPIRED};
use crate::protocol::memcache::binary::{self as bin, op, status, BinParsed, BinParser, BinReq};
use crate::protocol::memcache::meta::{self, ItemView, MetaCmd, MetaReq, MetaStatus};
use crate::protocol::memcache::text::{Cmd, Parsed, StoreCmd, TextParser};
use crate::protocol::Reply;
use crate::server::dispatch::{dispatch, Request};
use crate::server::memcache::{self as mc, McStats, STATS};
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
        keys: Vec<Bytes>,
        cas: bool,
    },
    Store {
        noreply: bool,
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
        loop {
            let n = stream.read_into(&mut inbuf, READ_CHUNK).await?;
            if n == 0 || session.killed() {
                return Ok(());
            }
            McStats::add(&STATS.bytes_read, n as u64);
            loop {
                let mut plans = Vec::new();
                let mut reqs = Vec::new();
                let mut barrier = None;
                while plans.len() < MAX_BATCH && barrier.is_none() {
                    if self.binary.is_none() {
                        match inbuf.first() {
                            Some(&b) => self.binary = Some(b == bin::REQ_MAGIC),
                            None => break,
                        }
                    }
                    let used = if self.binary == Some(true) {
                        self.next_binary(&inbuf, session, &mut plans, &mut reqs, &mut barrier)
                    } else {
                        self.next_text(&inbuf, session, &mut plans, &mut reqs, &mut barrier)
                    };
                    match used {
                        Some(n) => {
                            let _ = inbuf.split_to(n);
                        }
                        None => break,
                    }
                }
                let more = plans.len() == MAX_BATCH;
                if !reqs.is_empty() || !plans.is_empty() {
                    let outcomes = if reqs.is_empty() {
                        Vec::new()
                    } else {
                        dispatch(core, session, reqs).await.into_vec()
                    };
                    encode(plans, outcomes, &mut out);
                }
                let mut close = false;
                let cut = barrier.is_some();
                if let Some(b) = barrier {
                    close = self.run_barrier(core, b, &mut out).await;
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
        buf: &[u8],
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
        let now = now_ms();
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
                        op.expire_at = expire_at(i64::from(e), now);
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
                plans.push(Plan::Get { keys, cas });
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
                    expire_at: expire_at(i64::from(exptime), now),
                    cas,
                    ..Op::default()
                };
                reqs.push(mc::request(spec, key, &op, Some(data)));
                plans.push(Plan::Store { noreply });
            }
            Cmd::Delete { key, noreply } => {
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
                    expire_at: expire_at(i64::from(exptime), now),
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
                McStats::add(&STATS.meta_cmds, 1);
                meta_request(m, now, plans, reqs);
            }
        }
        Some(used)
    }

    /// Parses one binary request; as [`Conn::next_text`].
    fn next_binary(
        &mut self,
        buf: &[u8],
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
        let now = now_ms();
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
                    o.expire_at = expire_at(i64::from(r.touch_exptime()), now);
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
                    (r.flags(), expire_at(i64::from(r.set_exptime()), now))
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
                    o.vivify_at = expire_at(i64::from(exp), now);
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
    async fn run_barrier(&mut self, core: &Rc<Core>, b: Barrier, out: &mut Vec<u8>) -> bool {
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
                let stats = stats(core, &args).await;
                match (bin_req, stats) {
                    (None, Ok(lines)) => {
                        for (k, v) in lines {
                            out.extend_from_slice(format!("STAT {k} {v}\r\n").as_bytes());
                        }
                        if args.first().is_some_and(|a| &a[..] == b"reset") {
                            out.extend_from_slice(b"RESET\r\n");
                        } else {
                            out.extend_from_slice(b"END\r\n");
                        }
                    }
                    (None, Err(e)) => out.extend_from_slice(&line(e)),
                    (Some(r), Ok(lines)) => {
                        for (k, v) in lines {
                            let (k, v) = (k.as_bytes(), v.as_bytes());
                            bin::response(out, r.opcode, status::OK, r.opaque, 0, &[], k, v);
                        }
                        bin::response(out, r.opcode, status::OK, r.opaque, 0, &[], &[], &[]);
                    }
                    (Some(r), Err(_)) => bin::error(out, r.opcode, r.opaque, status::KEY_ENOENT),
                }
                false
            }
        }
    }
}

/// A text reply line.
fn line(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 2);
    v.extend_from_slice(s.as_bytes());
    v.extend_from_slice(b"\r\n");
    v
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
        value: o.value.clone(),
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

/// Turns a meta command into its plan and request.
fn meta_request(m: MetaCmd, now: u64, plans: &mut Vec<Plan>, reqs: &mut Vec<Request>) {
    match m {
        MetaCmd::Get(req) => {
            let f = &req.f;
            let mut o = Op::default();
            if f.value {
                o.bits |= Op::VALUE;
            }
            if let Some(t) = f.ttl {
                o.bits |= Op::TOUCH;
                o.expire_at = expire_at(i64::from(t), now);
            }
            if let Some(n) = f.vivify {
                o.bits |= Op::VIVIFY;
                o.vivify_at = expire_at(i64::from(n), now);
            }
            if let Some(r) = f.recache {
                o.bits |= Op::RECACHE;
                o.recache_at = expire_at(i64::from(r), now);
            }
            if f.no_update {
                o.bits |= Op::NO_UPDATE;
            }
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
            if f.invalidate {
                o.bits |= Op::INVALIDATE;
            }
            if f.base64 {
                o.bits |= Op::BINARY_KEY;
            }
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
            if f.invalidate {
                o.bits |= Op::INVALIDATE;
            }
            if f.clear {
                o.bits |= Op::CLEAR;
            }
            if let Some(t) = f.ttl {
                o.bits |= Op::NEW_TTL;
                o.expire_at = expire_at(i64::from(t), now);
            }
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
            if matches!(f.mode, Some(b'D' | b'-')) {
                o.bits |= Op::DECR;
            }
            if let Some(n) = f.vivify {
                o.bits |= Op::VIVIFY;
                o.vivify_at = expire_at(i64::from(n), now);
            }
            if let Some(t) = f.ttl {
                o.bits |= Op::NEW_TTL;
                o.expire_at = expire_at(i64::from(t), now);
            }
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
fn encode(plans: Vec<Plan>, outcomes: Vec<Reply>, out: &mut Vec<u8>) {
    let now = now_ms();
    let mut it = outcomes.into_iter();
    for plan in plans {
        let n = plan.replies();
        let rs: Vec<Result<Outcome, Reply>> =
            it.by_ref().take(n).map(Outcome::from_reply).collect();
        match plan {
            Plan::Get { keys, cas } => encode_get(&keys, cas, rs, out),
            plan => encode_one(plan, rs, now, out),
        }
    }
}

fn encode_one(plan: Plan, rs: Vec<Result<Outcome, Reply>>, now: u64, out: &mut Vec<u8>) {
    let first = rs.into_iter().next();
    match plan {
        Plan::Raw(v) => out.extend_from_slice(&v),
        // Encoded by `encode_get`.
        Plan::Get { .. } => {}
        Plan::Store { noreply } => {
            let word = match first {
                Some(Ok(o)) => {
                    if o.status == Status::Stored {
                        McStats::add(&STATS.total_items, 1);
                    }
                    store_word(&o)
                }
                Some(Err(e)) => server_error(&e),
                None => "SERVER_ERROR internal error",
            };
            if !noreply {
                out.extend_from_slice(&line(word));
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
                        String::from_utf8_lossy(o.value.as_deref().unwrap_or_default()).into_owned()
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
                out.extend_from_slice(&line(&text));
            }
        }
        Plan::Touch { noreply } => {
            let counters = (&STATS.touch_hits, &STATS.touch_misses);
            hit_or_miss(first, Status::Touched, "TOUCHED", counters, noreply, out);
        }
        Plan::MetaGet(req) => match first {
            Some(Ok(o)) if o.status == Status::Hit => {
                McStats::add(&STATS.get_hits, 1);
                meta::encode_get(&req, Some(&view(&o, now)), out)
            }
            Some(Ok(_)) => {
                McStats::add(&STATS.get_misses, 1);
                meta::encode_get(&req, None, out)
            }
            Some(Err(e)) => out.extend_from_slice(&line(server_error(&e))),
            None => {}
        },
        Plan::MetaSet(req) => match first {
            Some(Ok(o)) => {
                if o.status == Status::TooLarge {
                    out.extend_from_slice(&line("SERVER_ERROR out of memory storing object"));
                    return;
                }
                meta::encode_set(&req, meta_status(o.status), o.cas, out)
            }
            Some(Err(e)) => out.extend_from_slice(&line(server_error(&e))),
            None => {}
        },
        Plan::MetaDelete(req) => match first {
            Some(Ok(o)) => meta::encode_delete(&req, meta_status(o.status), out),
            Some(Err(e)) => out.extend_from_slice(&line(server_error(&e))),
            None => {}
        },
        Plan::MetaArith(req) => match first {
            Some(Ok(o)) => match o.status {
                Status::NonNumeric => out.extend_from_slice(&line(
                    "CLIENT_ERROR cannot increment or decrement non-numeric value",
                )),
                Status::Hit | Status::Stored => {
                    meta::encode_arith(&req, MetaStatus::Ok, Some(&view(&o, now)), out)
                }
                s => meta::encode_arith(&req, meta_status(s), None, out),
            },
            Some(Err(e)) => out.extend_from_slice(&line(server_error(&e))),
            None => {}
        },
        Plan::MetaDebug(req) => match first {
            Some(Ok(o)) if o.status == Status::Hit => {
                meta::encode_debug(&req, Some(&view(&o, now)), out)
            }
            Some(Ok(_)) => meta::encode_debug(&req, None, out),
            Some(Err(e)) => out.extend_from_slice(&line(server_error(&e))),
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
        out.extend_from_slice(&line(word));
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

/// The text reply of a get: VALUE lines for the hits, then END.
fn encode_get(keys: &[Bytes], cas: bool, rs: Vec<Result<Outcome, Reply>>, out: &mut Vec<u8>) {
    for (key, r) in keys.iter().zip(rs) {
        match r {
            Ok(o) if o.status == Status::Hit => {
                McStats::add(&STATS.get_hits, 1);
                let value = o.value.unwrap_or_default();
                out.extend_from_slice(b"VALUE ");
                out.extend_from_slice(key);
                out.extend_from_slice(format!(" {} {}", o.client_flags, value.len()).as_bytes());
                if cas {
                    out.extend_from_slice(format!(" {}", o.cas).as_bytes());
                }
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(&value);
                out.extend_from_slice(b"\r\n");
            }
            Ok(_) => McStats::add(&STATS.get_misses, 1),
            Err(_) => {}
        }
    }
    out.extend_from_slice(b"END\r\n");
}

/// A binary request's response from its outcome.
fn encode_bin(r: &BinReq, res: Option<Result<Outcome, Reply>>, out: &mut Vec<u8>) {
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
            if o.status == Status::Hit {
                if r.cmd == op::TOUCH {
                    McStats::add(&STATS.touch_hits, 1);
                } else {
                    McStats::add(&STATS.get_hits, 1);
                }
                let flags = o.client_flags.to_be_bytes();
                let key: &[u8] = if with_key { &r.key } else { &[] };
                let value = o.value.as_deref().unwrap_or_default();
                ok(out, o.cas, &flags, key, value);
            } else {
                if r.cmd == op::TOUCH {
                    McStats::add(&STATS.touch_misses, 1);
                } else {
                    McStats::add(&STATS.get_misses, 1);
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
                if !r.quiet {
                    ok(out, o.cas, &[], &[], &[]);
                }
            }
            Status::Exists => bin::error(out, r.opcode, r.opaque, status::KEY_EEXISTS),
            Status::NotFound => bin::error(out, r.opcode, r.opaque, status::KEY_ENOENT),
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
                    .value
                    .as_deref()
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

/// `stats` lines for its arguments; Err(reply line) for an unknown group.
async fn stats(core: &Rc<Core>, args: &[Bytes]) -> Result<Vec<(String, String)>, &'static str> {
    let g = &core.global;
    let s = &*STATS;
    let mut v: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, val: String| v.push((k.to_string(), val));
    match args.first().map(|a| &a[..]) {
        None => {
            let (items, bytes) = mc::item_counts(core).await;
            let unix = now_ms() / 1000;
            let uptime = g.started.elapsed().as_secs();
            let (user, sys) = crate::server::admin::info::cpu_times();
            put("pid", std::process::id().to_string());
            put("uptime", uptime.to_string());
            put("time", unix.to_string());
            put("version", VERSION.to_string());
            put("pointer_size", "64".into());
            put("rusage_user", format!("{user:.6}"));
            put("rusage_system", format!("{sys:.6}"));
            put("max_connections", "1024".into());
            put(
                "curr_connections",
                s.curr_connections.load(Ordering::Relaxed).to_string(),
            );
            put(
                "total_connections",
                s.total_connections.load(Ordering::Relaxed).to_string(),
            );
            put("rejected_connections", "0".into());
            for (k, n) in s.counters() {
                put(k, n.to_string());
            }
            put("limit_maxbytes", g.settings.maxmemory().to_string());
            put("threads", g.shards().to_string());
            put("bytes", bytes.to_string());
            put("curr_items", items.to_string());
            put("evictions", "0".into());
        }
        Some(b"settings") => {
            put("maxbytes", g.settings.maxmemory().to_string());
            put("maxconns", "1024".into());
            put("tcpport", g.settings.memcached_port.to_string());
            put("num_threads", g.shards().to_string());
            put("cas_enabled", "yes".into());
            put("item_size_max", g.settings.max_item_size.to_string());
            put("binding_protocol", "auto-negotiate".into());
            put(
                "evictions",
                if g.settings.cache_mode { "on" } else { "off" }.into(),
            );
            let sasl = !g.settings.requirepass().is_empty();
            put("sasl", if sasl { "yes" } else { "no" }.into());
        }
        Some(b"items") => {
            let (items, _) = mc::item_counts(core).await;
            if items > 0 {
                put("items:1:number", items.to_string());
                put("items:1:evicted", "0".into());
            }
        }
        Some(b"slabs") => {
            let (items, bytes) = mc::item_counts(core).await;
            if items > 0 {
                put("1:used_chunks", items.to_string());
                put("1:mem_requested", bytes.to_string());
            }
            put("active_slabs", u8::from(items > 0).to_string());
            put("total_malloced", crate::memory::used_memory().to_string());
        }
        Some(b"reset") => s.reset(),
        Some(_) => return Err("ERROR"),
    }
    Ok(v)
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

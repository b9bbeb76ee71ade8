//! One RESP client connection, for its whole life on one core: bytes in, RESP requests parsed
//! from them, each batch handed to the dispatcher (`server::dispatch`), the replies encoded and
//! written in one write. Between batches the task also waits on the session's mailbox, so
//! messages other cores post (pushes, kills) go out even while the client sends nothing.
//! While it waits with nothing buffered, a busy script on this core may answer what it sends
//! (`busy`); the connection takes over what that left before it reads again.
//!
//! A protocol error gets `-ERR Protocol error: ...` and the connection closes; nothing a client
//! sends can panic the server.
//!
//! Never: runs a command itself or touches a shard (everything goes through the dispatcher).

use std::os::fd::OwnedFd;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures::future::{select, Either};
use tracing::{debug, warn};

use super::busy;
use super::socket::{accept_loop, Socket};
use crate::protocol::{Parsed, Reply, RequestParser};
use crate::runtime::{spawn, Poller};
use crate::server::cmdstats;
use crate::server::dispatch::{dispatch, Replies, Request};
use crate::server::script::busy::{self as script_busy, View};
use crate::server::session::{Delivery, Session};
use crate::server::table::BLOCKING;
use crate::server::Core;

/// Requests parsed from one read before they are executed (bounds memory per connection).
const MAX_BATCH: usize = 1024;
/// Free room kept in the input buffer for each read.
const READ_CHUNK: usize = 16 * 1024;
/// Most bytes of pushed messages taken from the mailbox before they are written: what waits
/// beyond stays in the mailbox, counted against the output limit, while a slow reader blocks
/// the write (see `session::ClientInfo::post`).
const PUSH_CHUNK: usize = 256 * 1024;

/// Accepts RESP connections on this core until the process ends (a busy script on this core
/// accepts them too, see `busy`).
pub async fn accept(poller: Rc<Poller>, listener: std::net::TcpListener, core: Rc<Core>) {
    let id = core.id;
    let p = poller.clone();
    let on_conn: Rc<dyn Fn(OwnedFd)> = Rc::new(move |fd| match Socket::new(fd, p.clone()) {
        Ok(sock) => {
            // Numbered now, as Redis numbers its clients: a busy script's hook answers HELLO
            // for it before its task starts.
            let id = core.global.next_client_id();
            let port = busy::register(&sock, busy_view(&core, id));
            let c = core.clone();
            spawn(async move {
                serve(c, sock, port, id).await;
            })
            .detach();
        }
        Err(e) => warn!("core {id}: cannot watch a new connection: {e}"),
    });
    busy::listen(&listener, on_conn.clone());
    accept_loop(poller, listener, move |fd| on_conn(fd)).await
}

/// Serves a connection (client `id`) until the client leaves, breaks the protocol or is
/// killed.
pub async fn serve(core: Rc<Core>, stream: Socket, port: busy::Registered, id: u64) {
    let peer = super::peer_of(&stream);
    let mut session = Session::open_as(&core.global, core.id, peer, id);
    if let Err(e) = conn_loop(&core, &mut session, &stream, &port).await {
        debug!(client = session.id, "connection closed: {e}");
    }
    // The session and the port leave their registries before the socket closes (when
    // `stream` drops), so a concurrent CLIENT KILL or a busy script's hook can never touch a
    // reused descriptor.
    drop(port);
    drop(session);
}

/// What woke the connection.
enum Woken {
    /// Bytes read (0: the peer closed; None: only what a busy script's hook left, see
    /// `busy`).
    Read(std::io::Result<Option<usize>>),
    Mail(Delivery),
}

/// Whether a busy script on this core may answer the connection's next requests from its hook
/// (see `busy`): nothing is half read or unwritten.
fn idle(session: &Session, inbuf: &BytesMut, parser: &RequestParser, out: &[u8]) -> bool {
    inbuf.is_empty() && !parser.in_progress() && out.is_empty() && !session.close_after_reply
}

/// What a new connection's session (client `id`) looks like to a busy script's hook before it
/// exists.
fn busy_view(core: &Core, id: u64) -> View {
    View::fresh(id, core.global.settings.requirepass().is_empty())
}

async fn conn_loop(
    core: &Rc<Core>,
    session: &mut Session,
    stream: &Socket,
    port: &busy::Port,
) -> std::io::Result<()> {
    let mut inbuf = BytesMut::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut parser = RequestParser::new();
    loop {
        if idle(session, &inbuf, &parser, &out) {
            port.arm(View::of(session));
        }
        let woken = {
            let read = std::pin::pin!(busy::read(port, stream, &mut inbuf, READ_CHUNK));
            let mail = std::pin::pin!(session.next_delivery());
            match select(read, mail).await {
                Either::Left((n, _)) => Woken::Read(n),
                Either::Right((d, _)) => Woken::Mail(d),
            }
        };
        // What the hook answered goes out first; what it read and did not answer is parsed
        // before anything read later.
        let held = inbuf.len();
        if let Some(v) = port.take_over(&mut inbuf, &mut out) {
            script_busy::apply(core, session, v).await;
        }
        let from_hook = inbuf.len() > held || session.close_after_reply;
        match woken {
            Woken::Read(n) => {
                if n? == Some(0) {
                    return Ok(());
                }
            }
            Woken::Mail(d) => {
                if !deliver(session, d, &mut out) {
                    return Ok(());
                }
                // Take whatever else waits (a bounded chunk), then write it all at once.
                while out.len() < PUSH_CHUNK {
                    let Some(d) = session.try_delivery() else {
                        break;
                    };
                    if !deliver(session, d, &mut out) {
                        return Ok(());
                    }
                }
                if !from_hook {
                    flush(stream, &mut out).await?;
                    continue;
                }
            }
        }
        if session.killed() {
            return Ok(());
        }
        // What was posted before these requests came goes out before their replies (a push
        // and a read can be ready at once; the read is taken first).
        while out.len() < PUSH_CHUNK {
            let Some(d) = session.try_delivery() else {
                break;
            };
            if !deliver(session, d, &mut out) {
                return Ok(());
            }
        }
        loop {
            let mut reqs = Vec::new();
            let mut proto_err = None;
            // Unauthenticated clients are parsed one request at a time, so a pipelined AUTH
            // lifts the stricter limits for what follows it.
            parser.set_unauthenticated(!session.authed);
            let max_batch = if session.authed { MAX_BATCH } else { 1 };
            while reqs.len() < max_batch {
                match parser.parse(&inbuf) {
                    Ok(Parsed::Request(frame, used)) => {
                        let bytes: Bytes = inbuf.split_to(used).freeze();
                        if !frame.is_empty() {
                            reqs.push(Request::new(frame.into_args(&bytes)));
                        }
                    }
                    Ok(Parsed::Incomplete) => break,
                    Err(e) => {
                        proto_err = Some(e);
                        break;
                    }
                }
            }
            let mut more = reqs.len() == max_batch;
            if !reqs.is_empty() {
                let blocks = reqs.iter().any(|r| r.spec.is_some_and(|s| s.has(BLOCKING)));
                let replies = if blocks {
                    let (replies, read) =
                        dispatch_watching(core, session, reqs, stream, &mut inbuf).await;
                    // Requests that came while it waited are parsed next.
                    more |= read;
                    replies
                } else {
                    dispatch(core, session, reqs).await
                };
                for (r, resp3) in replies.iter() {
                    r.encode(resp3, &mut out);
                }
            }
            if let Some(e) = &proto_err {
                let reply = Reply::Error(format!("ERR {e}"));
                // An error reply with no command, as Redis counts it (INFO errorstats).
                cmdstats::rejected(cmdstats::Target::Unknown, &reply);
                reply.encode(session.resp3, &mut out);
                session.close_after_reply = true;
            }
            // Messages posted while the batch ran go out after its replies (a bounded chunk; the
            // rest wakes the next turn of the loop).
            while out.len() < PUSH_CHUNK {
                let Some(d) = session.try_delivery() else {
                    break;
                };
                if !deliver(session, d, &mut out) {
                    session.close_after_reply = true;
                    break;
                }
            }
            flush(stream, &mut out).await?;
            if session.close_after_reply {
                return Ok(());
            }
            if !more {
                break;
            }
        }
        if inbuf.capacity() > 1 << 20 && inbuf.len() < 16 * 1024 && !parser.in_progress() {
            // A big request passed; give its memory back.
            inbuf = BytesMut::from(&inbuf[..]);
        }
    }
}

/// Most bytes read ahead while a command blocks; past them the socket is left alone.
const READ_AHEAD_WHILE_BLOCKED: usize = 1 << 20;

/// Runs a batch holding a blocking command while reading the socket: a client that hangs up
/// meanwhile is killed, which ends the wait (a blocked client leaves nothing behind). Returns
/// the replies and whether bytes were read.
async fn dispatch_watching(
    core: &Rc<Core>,
    session: &mut Session,
    reqs: Vec<Request>,
    stream: &Socket,
    inbuf: &mut BytesMut,
) -> (Replies, bool) {
    let client = session.client.clone();
    let global = core.global.clone();
    let before = inbuf.len();
    let replies = {
        let watch = async {
            while inbuf.len() < READ_AHEAD_WHILE_BLOCKED {
                match stream.read_into(inbuf, READ_CHUNK).await {
                    Ok(0) | Err(_) => {
                        client.kill(&global);
                        return;
                    }
                    Ok(_) => {}
                }
            }
        };
        let run = std::pin::pin!(dispatch(core, session, reqs));
        match select(run, std::pin::pin!(watch)).await {
            Either::Left((r, _)) => r,
            // Hung up, or read as much ahead as it may: the batch runs on.
            Either::Right(((), run)) => run.await,
        }
    };
    (replies, inbuf.len() > before)
}

/// Adds a delivery's bytes to `out`; false when the connection must close.
fn deliver(session: &Session, d: Delivery, out: &mut Vec<u8>) -> bool {
    match d {
        Delivery::Push(r) => {
            r.encode(session.resp3, out);
            true
        }
        // No command of this connection is blocked waiting for it (it timed out, or the
        // connection never blocked): nothing to do.
        Delivery::Wake(_) => true,
        Delivery::Kill => false,
    }
}

/// Writes `out` whole and empties it (giving back the memory of a large reply).
async fn flush(stream: &Socket, out: &mut Vec<u8>) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(out).await?;
    out.clear();
    if out.capacity() > 1 << 20 {
        out.shrink_to(16 * 1024);
    }
    Ok(())
}

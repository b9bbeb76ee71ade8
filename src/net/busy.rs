//! This core's idle RESP connections, served while a script on this core runs past
//! `busy-reply-threshold`. The script runs to its end without yielding (Lua 5.1 cannot yield
//! across pcall), so the connection tasks of its core cannot run; instead the interpreter's
//! hook calls [`serve_all`], which reads what those connections sent, answers what Redis
//! answers during a busy script (-BUSY, SCRIPT KILL, ...) and writes the replies, all
//! without blocking.
//!
//! A connection takes part only while it waits for input with nothing half read and nothing
//! unwritten: it *arms* its [`Port`], lending it the session state the answers depend on
//! (a [`View`]: authentication, MULTI, RESP2 subscribe mode, CLIENT REPLY). From then until
//! it wakes, the hook alone reads its socket and updates that view; the connection applies
//! the changes when it takes over. Bytes read but not answered (a partial request, or a request left for the
//! connection, with all that follows it) stay in the port's stash, replies not yet written in
//! its pending output; the connection takes both over before it reads again, so no byte is
//! lost or reordered.
//!
//! Never: answers a request of a connection that is not armed, or one after a request it
//! left for the connection; blocks on a socket.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::future::{select, Either};

use super::socket::{recv_now, send_now, Socket};
use crate::protocol::{Parsed, RequestParser};
use crate::server::script::busy::{self, Answer, View};
use crate::server::session::ReplyMode;

/// Most bytes read ahead, and most replies held unwritten, per connection while a script is
/// busy; past them the connection's socket is left alone until it reads again.
const LIMIT: usize = 1 << 20;
/// Free room kept in the stash for each read.
const READ_CHUNK: usize = 16 * 1024;

/// One connection's share of the busy servicing (see the module doc).
pub struct Port {
    /// The connection's socket; valid while the port is registered (see [`Registered`]).
    fd: RawFd,
    st: RefCell<State>,
}

struct State {
    /// The connection waits for input and leaves its socket to the hook.
    armed: bool,
    /// The connection's session as the hook answers it (valid while armed).
    view: View,
    /// Bytes read and not answered, from the first unanswered request on.
    stash: BytesMut,
    parser: RequestParser,
    /// Replies encoded and not yet written.
    pending: Vec<u8>,
    /// The first request of the stash is left for the connection: nothing after it is
    /// answered here.
    left: bool,
    /// The socket reported end of stream or an error (the connection's own read sees it again).
    closed: bool,
    waker: Option<Waker>,
}

impl State {
    /// Something only the connection can finish: input to parse, output to write, or
    /// session changes to apply (RESET, WATCH, a name) as soon as the script ends.
    fn for_conn(&self) -> bool {
        !self.stash.is_empty()
            || !self.pending.is_empty()
            || self.view.quit
            || self.view.reset
            || self.view.name.is_some()
            || !self.view.watched.is_empty()
            || !self.view.forget.is_empty()
    }
}

thread_local! {
    static PORTS: RefCell<HashMap<u64, Rc<Port>>> = RefCell::new(HashMap::new());
    static NEXT_PORT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// This core's RESP listening socket and what a new connection starts with.
    static LISTENER: RefCell<Option<(RawFd, NewConn)>> = const { RefCell::new(None) };
}

/// Starts serving an accepted connection.
pub type NewConn = Rc<dyn Fn(OwnedFd)>;

/// Lets a busy script accept this core's new connections with `on_conn` (the listener stays
/// open for the life of the core).
pub fn listen(listener: &std::net::TcpListener, on_conn: NewConn) {
    LISTENER.with(|l| *l.borrow_mut() = Some((listener.as_raw_fd(), on_conn)));
}

/// Accepts the connections waiting on this core's listener (a bounded number per call).
fn accept_new() {
    let Some((fd, on_conn)) = LISTENER.with(|l| l.borrow().clone()) else {
        return;
    };
    for _ in 0..64 {
        // SAFETY: null address pointers are allowed; `fd` is the core's listening socket, open
        // while the core runs (its accept loop owns it and never ends).
        let c = unsafe {
            libc::accept4(
                fd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if c < 0 {
            // EAGAIN and the rest: the accept loop sees and handles them after the script.
            return;
        }
        // SAFETY: accept4 returned a new fd that nobody else owns.
        on_conn(unsafe { OwnedFd::from_raw_fd(c) });
    }
}

/// A registered port; leaving the registry on drop, which must come before the socket closes.
pub struct Registered {
    id: u64,
    port: Rc<Port>,
}

impl std::ops::Deref for Registered {
    type Target = Port;
    fn deref(&self) -> &Port {
        &self.port
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        PORTS.with(|p| p.borrow_mut().remove(&self.id));
    }
}

/// Registers a connection's socket with this core's busy servicing, armed with the session
/// state it starts with. The caller keeps the socket open for as long as the returned guard
/// lives.
pub fn register(socket: &Socket, view: View) -> Registered {
    thread_local! {
        static INSTALLED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !INSTALLED.with(|h| h.replace(true)) {
        busy::install(Rc::new(serve_all));
    }
    let parser = unauthenticated(&view);
    let port = Rc::new(Port {
        fd: socket.raw_fd(),
        st: RefCell::new(State {
            armed: true,
            view,
            stash: BytesMut::new(),
            parser,
            pending: Vec::new(),
            left: false,
            closed: false,
            waker: None,
        }),
    });
    let id = NEXT_PORT.with(|n| n.replace(n.get() + 1));
    PORTS.with(|p| p.borrow_mut().insert(id, port.clone()));
    Registered { id, port }
}

/// A parser with the limits for a client that is not authenticated yet when `view` says so.
fn unauthenticated(view: &View) -> RequestParser {
    let mut p = RequestParser::new();
    p.set_unauthenticated(!view.authed);
    p
}

impl Port {
    /// Lends the socket to the hook until the connection wakes (see the module doc), with its
    /// session state `view`. The caller has nothing buffered either way.
    pub fn arm(&self, view: View) {
        let mut st = self.st.borrow_mut();
        if !st.for_conn() && !st.closed {
            st.armed = true;
            st.parser = unauthenticated(&view);
            st.view = view;
        }
    }

    /// Takes the socket back: the replies the hook could not write go to `out` (before
    /// anything the connection adds), the bytes it read and did not answer to `inbuf`
    /// (which the caller's parser starts on afresh). The session state as the hook left it
    /// when the port was armed (for `busy::apply`).
    pub fn take_over(&self, inbuf: &mut BytesMut, out: &mut Vec<u8>) -> Option<View> {
        let mut st = self.st.borrow_mut();
        let authed = st.view.authed;
        let id = st.view.id;
        let view = std::mem::replace(&mut st.armed, false)
            .then(|| std::mem::replace(&mut st.view, View::fresh(id, authed)));
        st.view.quit = false;
        if !st.pending.is_empty() {
            out.extend_from_slice(&st.pending);
            st.pending = Vec::new();
        }
        if !st.stash.is_empty() {
            inbuf.extend_from_slice(&st.stash);
            st.stash = BytesMut::new();
        }
        st.parser = RequestParser::new();
        st.left = false;
        st.closed = false;
        view
    }

    /// Resolves once the hook left something for the connection.
    async fn for_conn(&self) {
        poll_fn(|cx| {
            let mut st = self.st.borrow_mut();
            if st.for_conn() {
                Poll::Ready(())
            } else {
                st.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

/// Reads like [`Socket::read_into`], but never while the hook holds bytes or replies for the
/// connection: then it returns None, and the caller calls [`Port::take_over`] first.
pub async fn read(
    port: &Port,
    stream: &Socket,
    inbuf: &mut BytesMut,
    min_room: usize,
) -> io::Result<Option<usize>> {
    let mut wait = stream.must_wait();
    loop {
        if port.st.borrow().for_conn() {
            return Ok(None);
        }
        if !wait {
            match stream.try_read_into(inbuf, min_room) {
                Ok(n) => return Ok(Some(n)),
                // Nothing there: wait for the next readiness report.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        let readable = std::pin::pin!(stream.readable());
        let mine = std::pin::pin!(port.for_conn());
        match select(readable, mine).await {
            Either::Left(_) => wait = false,
            Either::Right(_) => return Ok(None),
        }
    }
}

/// Least time between two passes of [`serve_all`].
const MIN_PAUSE: Duration = Duration::from_millis(1);
/// Most time between two passes: a pass the OS paused midway (a loaded machine) must not
/// leave the connections unserved for ten times that pause.
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// Serves every armed connection of this core once (the hook's call, see the module doc). A
/// pass costs a syscall or two per connection, so passes are spaced by ten times what the last
/// one took (within [`MIN_PAUSE`]..[`MAX_PAUSE`]): with many connections the script still gets
/// most of the core.
fn serve_all(answer: &dyn Fn(&mut View, &[Bytes]) -> Answer) {
    thread_local! {
        static NEXT_PASS: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
    }
    let start = Instant::now();
    if NEXT_PASS.with(|n| n.get()).is_some_and(|next| start < next) {
        return;
    }
    serve_pass(answer);
    let took = start.elapsed();
    let pause = (took * 10).clamp(MIN_PAUSE, MAX_PAUSE);
    NEXT_PASS.with(|n| n.set(Some(Instant::now() + pause)));
}

fn serve_pass(answer: &dyn Fn(&mut View, &[Bytes]) -> Answer) {
    accept_new();
    let ports: Vec<Rc<Port>> = PORTS.with(|p| p.borrow().values().cloned().collect());
    for port in ports {
        let Ok(mut st) = port.st.try_borrow_mut() else {
            continue;
        };
        if !st.armed || st.closed {
            continue;
        }
        // SAFETY: the port is registered, so its connection still owns the open socket (the
        // guard leaves the registry before the socket closes), and it does not touch the
        // socket while armed: this thread runs the script, not the connection task.
        let fd = unsafe { BorrowedFd::borrow_raw(port.fd) };
        serve_one(fd, &mut st, answer);
        if st.for_conn() || st.closed {
            if let Some(w) = st.waker.take() {
                w.wake();
            }
        }
    }
}

fn serve_one(fd: BorrowedFd<'_>, st: &mut State, answer: &dyn Fn(&mut View, &[Bytes]) -> Answer) {
    if !write_pending(fd, st) {
        return;
    }
    if st.view.quit {
        hang_up(fd, st);
        return;
    }
    if st.left || st.pending.len() >= LIMIT {
        return;
    }
    while st.stash.len() < LIMIT {
        match recv_now(fd, &mut st.stash, READ_CHUNK) {
            Ok(0) => {
                st.closed = true;
                break;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => {
                st.closed = true;
                break;
            }
        }
    }
    while st.pending.len() < LIMIT {
        let (args, used) = match st.parser.parse(&st.stash) {
            Ok(Parsed::Request(frame, used)) => {
                // A copy: the bytes stay in the stash until the request is answered.
                let bytes = Bytes::copy_from_slice(&st.stash[..used]);
                (frame.into_args(&bytes), used)
            }
            Ok(Parsed::Incomplete) => break,
            Err(_) => {
                // The connection answers the protocol error itself.
                st.left = true;
                st.parser = RequestParser::new();
                break;
            }
        };
        if !args.is_empty() {
            match answer(&mut st.view, &args) {
                Answer::Reply(r) => {
                    // CLIENT REPLY OFF / SKIP silence it (what the hook answers cannot change
                    // the mode: CLIENT is refused).
                    let silent = match st.view.reply {
                        ReplyMode::On => false,
                        ReplyMode::Off => true,
                        ReplyMode::SkipNext => {
                            st.view.reply = ReplyMode::On;
                            true
                        }
                    };
                    if !silent {
                        r.encode(st.view.resp3, &mut st.pending);
                    }
                }
                Answer::Wait => {
                    st.left = true;
                    break;
                }
            }
        }
        let _ = st.stash.split_to(used);
        // AUTH lifts the limits on what follows it.
        st.parser.set_unauthenticated(!st.view.authed);
        if st.view.quit {
            // Nothing after QUIT is read.
            st.stash.clear();
            break;
        }
    }
    if write_pending(fd, st) && st.view.quit {
        hang_up(fd, st);
    }
}

/// After QUIT's reply went out: the client sees the connection close now, as in Redis, not
/// when the script ends (the connection closes the descriptor itself then).
fn hang_up(fd: BorrowedFd<'_>, st: &State) {
    if st.pending.is_empty() {
        // SAFETY: plain syscall on a descriptor the connection keeps open (see serve_pass);
        // shutdown does not release it.
        unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
    }
}

/// Writes what it can of the pending replies; false when the socket failed (the connection's
/// own write reports it).
fn write_pending(fd: BorrowedFd<'_>, st: &mut State) -> bool {
    let mut done = 0;
    let mut ok = true;
    while done < st.pending.len() {
        match send_now(fd, &st.pending[done..]) {
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => {
                st.closed = true;
                ok = false;
                break;
            }
        }
    }
    st.pending.drain(..done);
    ok
}

//! Client sockets on a core's [`Poller`]: non-blocking reads and writes that wait for
//! readiness from the poller's edge-triggered epoll set, and the accept loop.
//!
//! A read that comes back shorter than the room it was given has drained the socket: the next
//! read waits for the poller's readiness report instead of asking the kernel first (a second
//! `recv` would only answer EAGAIN), unless the peer has hung up (that is reported once, maybe
//! together with the data already read). Never blocks the core: every call is non-blocking.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

use crate::runtime::Poller;

/// A client socket owned by one core's poller.
pub struct Socket {
    fd: OwnedFd,
    token: usize,
    poller: Rc<Poller>,
    /// The last read emptied the socket (it came back short): wait for readiness first.
    drained: Cell<bool>,
}

impl Socket {
    /// Adopts an accepted, non-blocking socket.
    pub fn new(fd: OwnedFd, poller: Rc<Poller>) -> io::Result<Socket> {
        let token = poller.register(fd.as_raw_fd())?;
        Ok(Socket {
            fd,
            token,
            poller,
            drained: Cell::new(false),
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads into the spare capacity of `buf` (growing it by at least `min_room`), waiting for
    /// data; returns the bytes added, 0 when the peer closed.
    pub async fn read_into(&self, buf: &mut bytes::BytesMut, min_room: usize) -> io::Result<usize> {
        if self.must_wait() {
            self.readable().await;
        }
        loop {
            match self.try_read_into(buf, min_room) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable().await,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a read should wait for a readiness report first: the last read emptied the
    /// socket. A hang-up may have come with the data that read took: then no later edge will
    /// report it, and only a read can see it.
    pub fn must_wait(&self) -> bool {
        self.drained.get() && !self.poller.peer_closed(self.token)
    }

    /// Resolves once the poller reports the socket readable.
    pub async fn readable(&self) {
        self.poller.readable(self.token).await
    }

    /// One non-blocking read into the spare capacity of `buf` (growing it by at least
    /// `min_room`): the bytes added, 0 when the peer closed, `WouldBlock` when none wait.
    pub fn try_read_into(&self, buf: &mut bytes::BytesMut, min_room: usize) -> io::Result<usize> {
        if buf.capacity() - buf.len() < min_room {
            buf.reserve(min_room);
        }
        let room = buf.capacity() - buf.len();
        let n = recv_now(self.fd.as_fd(), buf, min_room)?;
        // A short read took everything the socket had: any later data arrives as a new edge,
        // which the poller reports.
        self.drained.set(n < room);
        Ok(n)
    }

    /// Writes all of `buf`, waiting for room as needed.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                buf = &buf[n as usize..];
                continue;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => self.poller.writable(self.token).await,
                io::ErrorKind::Interrupted => {}
                _ => return Err(e),
            }
        }
        Ok(())
    }
}

/// One non-blocking `recv` on `fd` into the spare capacity of `buf` (grown to at least
/// `min_room` free bytes): the bytes added, 0 at end of stream, `WouldBlock` when none wait.
pub fn recv_now(
    fd: BorrowedFd<'_>,
    buf: &mut bytes::BytesMut,
    min_room: usize,
) -> io::Result<usize> {
    use bytes::BufMut;
    if buf.capacity() - buf.len() < min_room {
        buf.reserve(min_room);
    }
    let spare = buf.chunk_mut();
    // SAFETY: `spare` is valid for writes of `spare.len()` bytes; recv writes at most that many
    // and reports how many it wrote.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            spare.as_mut_ptr().cast(),
            spare.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel initialised exactly `n` bytes of the spare capacity.
    unsafe { buf.advance_mut(n as usize) };
    Ok(n as usize)
}

/// One non-blocking `send` of `buf` on `fd`: the bytes taken, `WouldBlock` when none fit.
pub fn send_now(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        self.poller.deregister(self.token, self.fd.as_raw_fd());
    }
}

/// Accepts from the shared listening socket on this core until the process ends.
pub async fn accept_loop(
    poller: Rc<Poller>,
    listener: std::net::TcpListener,
    mut on_conn: impl FnMut(OwnedFd),
) {
    let token = match poller.register_listener(listener.as_raw_fd()) {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("cannot watch the listening socket: {e}");
            std::process::exit(1);
        }
    };
    loop {
        // SAFETY: null address pointers are allowed (we do not want the peer address here).
        let fd = unsafe {
            libc::accept4(
                listener.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if fd >= 0 {
            // SAFETY: accept4 returned a new fd that nobody else owns.
            on_conn(unsafe { OwnedFd::from_raw_fd(fd) });
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) => poller.readable(token).await,
            Some(libc::EINTR) | Some(libc::ECONNABORTED) => {}
            _ => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

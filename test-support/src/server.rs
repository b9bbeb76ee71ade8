//! Starting the `strata` binary for a test: on a port no other test of the process has, with a
//! snapshot directory of its own, killed when the test lets go of it.
//!
//! The binary's path is a parameter (`env!("CARGO_BIN_EXE_strata")` exists only in the strata
//! package's own integration tests).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::raw::Raw;

/// A port no other test of this process has been given and nothing listens on. Ports come from
/// a per-process sequence (tests run in parallel threads, and asking the OS for port 0 can hand
/// two threads the same port before either server binds it).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base = 20_000 + (std::process::id() % 400) as u16 * 100;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = base + n % 100;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Calls `ready` every 20 ms until it gives a value, for up to 20 s, panicking with
/// "`what` exited early" if `child` exits first; None when the time is up.
pub fn poll_started<T>(
    child: &mut Child,
    what: &str,
    ready: impl FnMut() -> Option<T>,
) -> Option<T> {
    poll_child(child, ready).unwrap_or_else(|status| panic!("{what} exited early: {status}"))
}

/// [`poll_started`]'s loop: Err with its status when `child` exits first.
fn poll_child<T>(
    child: &mut Child,
    mut ready: impl FnMut() -> Option<T>,
) -> Result<Option<T>, std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(status);
        }
        if let Some(v) = ready() {
            return Ok(Some(v));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when a server on `port` answers an inline PING with +PONG.
fn answers_ping(port: u16) -> bool {
    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 7];
    c.write_all(b"PING\r\n").is_ok() && c.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// A running `strata`; killed when dropped.
pub struct Server {
    pub port: u16,
    child: Child,
    /// The snapshot directory made for it when `--dir` was not given (so a test never saves
    /// into, or loads from, the working directory).
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts `bin` with `args` (plus `--port`), waiting until it answers PING. A server that
    /// exits at once is started again on another port, twice at most: between [`free_port`]'s
    /// check and the server's bind, a client socket of another test process may take the port
    /// as its ephemeral one (seen in CI: "Address already in use").
    pub fn start(bin: impl AsRef<OsStr>, args: &[&str]) -> Server {
        for _ in 0..2 {
            let mut s = Server::spawn(bin.as_ref(), args);
            let port = s.port;
            if let Ok(ready) = poll_child(&mut s.child, || answers_ping(port).then_some(())) {
                assert!(ready.is_some(), "strata did not start");
                return s;
            }
        }
        let mut s = Server::spawn(bin, args);
        s.wait_ready();
        s
    }

    /// Starts `bin` with `args` (plus `--port`) without waiting for it.
    pub fn spawn(bin: impl AsRef<OsStr>, args: &[&str]) -> Server {
        let port = free_port();
        let dir = (!args
            .iter()
            .any(|a| *a == "--dir" || a.starts_with("--dir=")))
        .then(|| tempfile::tempdir().expect("temp dir"));
        let mut command = Command::new(bin);
        command
            .arg("--port")
            .arg(port.to_string())
            .args(["--log_level", "warn"]);
        if let Some(d) = &dir {
            command.arg("--dir").arg(d.path());
        }
        let child = command
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn strata");
        Server {
            port,
            child,
            _dir: dir,
        }
    }

    /// Takes charge of a server started by hand that listens (or will) on `port`.
    pub fn adopt(child: Child, port: u16) -> Server {
        Server {
            port,
            child,
            _dir: None,
        }
    }

    /// Waits until a [`Server::spawn`]ed server answers PING.
    pub fn wait_ready(&mut self) {
        let ready = self.poll_started("strata", |port| answers_ping(port).then_some(()));
        assert!(ready.is_some(), "strata did not start");
    }

    /// [`poll_started`] on this server's process; `ready` is given the port.
    pub fn poll_started<T>(
        &mut self,
        what: &str,
        mut ready: impl FnMut(u16) -> Option<T>,
    ) -> Option<T> {
        let port = self.port;
        poll_started(&mut self.child, what, || ready(port))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A raw connection for byte-exact checks.
    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    /// True while the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit (e.g. after SHUTDOWN); returns true if it did in time.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (a clean stop: the server saves, then exits).
    pub fn terminate(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill -TERM failed");
    }

    /// Kills the process at once (SIGKILL), like a crash, and reaps it.
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.crash();
    }
}

/// Runs `bin` with `args` to its end, collecting what it writes; after 30 s it is killed and
/// the test fails.
pub fn run_to_exit(bin: impl AsRef<OsStr>, args: &[&str]) -> Output {
    let child = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id().to_string();
    let (exited, exit) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let late = exit.recv_timeout(Duration::from_secs(30)).is_err();
        if late {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        late
    });
    // Reads both pipes while waiting, so a chatty process cannot block on a full pipe.
    let out = child.wait_with_output().expect("wait");
    let _ = exited.send(());
    assert!(
        !watchdog.join().unwrap(),
        "{args:?} did not exit within 30s"
    );
    out
}

/// Runs `bin` with `args` (plus `--port`), which it must refuse to start with; returns its
/// stderr.
pub fn startup_error(bin: impl AsRef<OsStr>, args: &[&str]) -> String {
    let port = free_port().to_string();
    let mut all = vec!["--port", &port];
    all.extend_from_slice(args);
    let out = run_to_exit(&bin, &all);
    assert!(
        !out.status.success(),
        "{} started with {args:?}",
        bin.as_ref().to_string_lossy()
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

//! Start-up: flags become settings, the listening socket, the mesh between cores and one
//! pinned glommio executor per core; each core sets up its server part (`server::start_core`),
//! loads its share of the snapshot, then runs its poller and accepts connections, each served
//! by a task of `net::connection`. Also the process's signals.
//!
//! The top of the layering: it wires every layer and nothing imports it.
//!
//! Never: serves a client before every core is set up and its share of the snapshot loaded.

use std::net::SocketAddr;
use std::os::unix::io::{FromRawFd, IntoRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;

use futures::channel::mpsc;
use glommio::{LocalExecutorBuilder, Placement};
use tracing::{error, info, warn};

use crate::config::{Flags, Settings};
use crate::net::socket::{accept_loop, Socket};
use crate::runtime::{spawn, Bell, Poller};
use crate::server::core::Job;
use crate::server::error::{ErrorKind, Result, ServerError};
use crate::server::{human_bytes, load, snapshot, Core, Global, Msg};

fn config_error(message: impl Into<String>) -> ServerError {
    ServerError::new(ErrorKind::Config, message)
}

fn io_error(message: impl Into<String>) -> ServerError {
    ServerError::new(ErrorKind::Io, message)
}

/// Bytes of io_uring-registered buffers per core (glommio's default is 10 MiB).
const IO_MEMORY: usize = 1 << 20;

/// Starts every core and blocks until the server stops. Errors are start-up failures.
pub fn run(flags: &Flags) -> Result<()> {
    let tiered = crate::config::TierSettings::from_flags(flags).map_err(config_error)?;
    let settings = Arc::new(Settings::with_tiering(flags, tiered));
    let threads = settings.threads;
    // The clock commands are timed with is calibrated once, before any command.
    crate::server::cmdstats::init();
    let addr: SocketAddr = format!("{}:{}", flags.bind, flags.port)
        .parse()
        .or_else(|_| {
            use std::net::ToSocketAddrs;
            (flags.bind.as_str(), flags.port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .ok_or(())
        })
        .map_err(|_| config_error(format!("--bind: cannot resolve '{}'", flags.bind)))?;
    let listener = listen(addr)
        .map_err(|e| io_error(format!("--port/--bind: cannot listen on {addr}: {e}")))?;
    // memcached's port, bound on the same address.
    let mc_listener = match flags.memcached_port {
        0 => None,
        port => {
            let mc_addr = SocketAddr::new(addr.ip(), port);
            Some(listen(mc_addr).map_err(|e| {
                io_error(format!(
                    "--memcached_port/--bind: cannot listen on {mc_addr}: {e}"
                ))
            })?)
        }
    };

    let mut senders = Vec::with_capacity(threads);
    let mut receivers = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = mpsc::unbounded::<Msg>();
        senders.push(tx);
        receivers.push(rx);
    }
    let bells = (0..threads)
        .map(|_| Bell::new())
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| io_error(format!("cannot create the cores' eventfds: {e}")))?;
    let global = Arc::new(Global::new(settings.clone(), senders, bells));
    global.rss_overhead.store(
        crate::memory::owned_rss_bytes().saturating_sub(crate::memory::used_memory()),
        std::sync::atomic::Ordering::Relaxed,
    );
    install_exit_handler(global.clone())?;
    let snapshot: Option<load::Shared> = match load::find(&flags.dir, &flags.dbfilename)? {
        Some(plan) => {
            info!("loading snapshot {}", plan.describe());
            let progress = load::Progress::new(&plan);
            Some(Arc::new((plan, progress)))
        }
        None => None,
    };
    let cpus = allowed_cpus();
    info!(
        version = env!("CARGO_PKG_VERSION"),
        threads,
        %addr,
        maxmemory = settings.maxmemory(),
        dbnum = settings.dbnum,
        "Strata {} starting: {} thread(s), listening on {}, maxmemory {}",
        env!("CARGO_PKG_VERSION"),
        threads,
        addr,
        human_bytes(settings.maxmemory()),
    );

    let mut handles = Vec::with_capacity(threads);
    // No core accepts clients before every core is set up (tier files created).
    let ready = Arc::new(std::sync::Barrier::new(threads));
    for (id, rx) in receivers.into_iter().enumerate() {
        let global = global.clone();
        let ready = ready.clone();
        let snapshot = snapshot.clone();
        let fd = listener
            .try_clone()
            .map_err(|e| io_error(format!("cannot share the listening socket: {e}")))?
            .into_raw_fd();
        let mc_fd = match &mc_listener {
            Some(l) => Some(
                l.try_clone()
                    .map_err(|e| io_error(format!("cannot share the memcached socket: {e}")))?
                    .into_raw_fd(),
            ),
            None => None,
        };
        let placement = match cpus.get(id % cpus.len().max(1)) {
            Some(&cpu) => Placement::Fixed(cpu),
            None => Placement::Unbound,
        };
        let h =
            LocalExecutorBuilder::new(placement)
                .name(&format!("strata-{id}"))
                // Registered I/O buffers count against maxmemory; the network path needs few.
                .io_memory(IO_MEMORY)
                .spawn(move || async move {
                    core_main(id, global, rx, (fd, mc_fd), ready, snapshot).await
                })
                .map_err(|e| io_error(format!("cannot start executor {id}: {e}")))?;
        handles.push(h);
    }
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(io_error(format!("executor failed: {e}"))),
        }
    }
    Ok(())
}

/// Everything one core runs: its server part, its poller and its listener.
async fn core_main(
    id: usize,
    global: Arc<Global>,
    rx: mpsc::UnboundedReceiver<Msg>,
    (listen_fd, mc_fd): (RawFd, Option<RawFd>),
    ready: Arc<std::sync::Barrier>,
    snapshot: Option<load::Shared>,
) -> Result<()> {
    let core = crate::server::start_core(id, global.clone(), rx).await;
    // Start-up only: every core waits here once, before serving anything.
    ready.wait();
    crate::server::before_serving(&core, snapshot.as_ref()).await;
    // SAFETY: `listen_fd` is a listening TCP socket duplicated for this core alone in `run`;
    // the std listener takes ownership and closes it.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(listen_fd) };
    let poller = match Poller::new() {
        Ok(p) => p,
        Err(e) => {
            error!("core {id}: cannot create the epoll set: {e}");
            std::process::exit(1);
        }
    };
    // An idle driver naps in epoll; whoever sends this core a message rings its bell.
    if let Err(e) = poller.allow_nap(global.bell(id)) {
        error!("core {id}: cannot watch the core's bell: {e}");
        std::process::exit(1);
    }
    // Tier reads complete on a ring of the tier's own: the driver delivers them on each pass
    // while the core is busy, and wakes for them when it is idle.
    if let Some(t) = core.shard.borrow().tier.clone() {
        if let Some(fd) = t.reap_externally() {
            let signalled = t.clone();
            if let Err(e) = poller.watch(
                fd,
                Box::new(move || {
                    signalled.reap(true);
                }),
            ) {
                error!("core {id}: cannot watch tier reads: {e}");
                std::process::exit(1);
            }
            // While the driver keeps coming back, the reads asked for in between go to the
            // kernel together at its next pass; before it sleeps, each goes at once.
            poller.on_pass(Box::new(move |busy| {
                let woke = t.reap(false);
                t.set_batching(busy);
                woke
            }));
        } else {
            // Tier reads go through glommio, which submits them from its loop.
            poller.short_naps();
        }
    }
    // Not through `poller::spawn`: the driver does not count its own turns.
    glommio::spawn_local(poller.clone().drive()).detach();
    if let Some(fd) = mc_fd {
        // SAFETY: as for `listen_fd`: a listening socket duplicated for this core alone.
        let mc_listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
        let (p, c) = (poller.clone(), core.clone());
        spawn(accept_loop(
            poller.clone(),
            mc_listener,
            move |fd| match Socket::new(fd, p.clone()) {
                Ok(sock) => {
                    let c = c.clone();
                    spawn(async move {
                        crate::net::memcache::serve(c, sock).await;
                    })
                    .detach();
                }
                Err(e) => warn!("core {id}: cannot watch a new memcached connection: {e}"),
            },
        ))
        .detach();
    }
    crate::net::connection::accept(poller, listener, core).await;
    Ok(())
}

/// The one listening socket every core accepts from. SO_REUSEADDR lets old TIME_WAIT
/// connections pass; no SO_REUSEPORT, so a second server on the same port fails to start
/// instead of silently sharing the port.
fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// SIGTERM and SIGINT save a snapshot (unless `--dbfilename` is empty) and end the process
/// after removing the tier files (the SSD tier is ephemeral, nothing in it survives a restart).
/// A second signal exits at once.
fn install_exit_handler(global: Arc<Global>) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| io_error(format!("cannot install signal handlers: {e}")))?;
    std::thread::Builder::new()
        .name("strata-signals".into())
        .spawn(move || {
            let mut signals = signals.forever();
            if let Some(sig) = signals.next() {
                info!(signal = sig, "signal received; saving and exiting");
                let serving = global.serving.load(std::sync::atomic::Ordering::SeqCst);
                let job: Job = Box::new(|core: &Rc<Core>| {
                    let c = core.clone();
                    spawn(async move {
                        let _ = snapshot::shutdown(&c, false).await;
                    })
                    .detach();
                });
                if !serving || !global.send(0, Msg::Run(job)) {
                    global.remove_tier_files();
                    std::process::exit(0);
                }
            }
            if let Some(sig) = signals.next() {
                info!(
                    signal = sig,
                    "second signal; exiting without waiting for the save"
                );
                global.remove_tier_files();
                std::process::exit(0);
            }
        })
        .map_err(|e| io_error(format!("cannot start the signal thread: {e}")))?;
    Ok(())
}

/// CPUs this process may run on (honours `taskset`), from /proc/self/status.
fn allowed_cpus() -> Vec<usize> {
    let list = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Cpus_allowed_list:"))
                .map(|l| l["Cpus_allowed_list:".len()..].trim().to_string())
        })
        .unwrap_or_default();
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let mut it = part.split('-');
        let a = it.next().and_then(|v| v.trim().parse::<usize>().ok());
        let b = it.next().and_then(|v| v.trim().parse::<usize>().ok());
        match (a, b) {
            (Some(a), Some(b)) => cpus.extend(a..=b),
            (Some(a), None) => cpus.push(a),
            _ => {}
        }
    }
    if cpus.is_empty() {
        error!("cannot read the allowed CPU list; threads will not be pinned");
    }
    cpus
}

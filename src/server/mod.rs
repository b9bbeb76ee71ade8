//! Thread-per-core wiring: one glommio executor per core, each owning one [`Shard`].
//!
//! ```text
//!   core 0                          core 1
//!  ┌──────────────────────┐        ┌──────────────────────┐
//!  │ listener (REUSEPORT) │        │ listener (REUSEPORT) │
//!  │ connections ──┐      │  Msg   │      ┌── connections │
//!  │               ├─inline──▶ shard 0    │               │
//!  │               └───────┼──────▶ mesh rx ─▶ shard 1     │
//!  │ mesh rx ◀─────────────┼───────┘      │               │
//!  └──────────────────────┘        └──────────────────────┘
//! ```
//! A command for the local shard runs inline; one for another shard is boxed into a job and
//! sent over that core's channel, and the reply comes back on a oneshot. Jobs never block: the
//! only waiting is for a cross-shard transaction's lock ([`Gate`]), and then jobs are deferred,
//! not blocked on. Executors park when idle (no spinning).

pub mod core;
pub mod eviction;
pub mod exec;
pub mod load;
pub mod offload;
pub mod snapshot;
pub mod txn;

use std::net::SocketAddr;
use std::os::unix::io::{FromRawFd, IntoRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::StreamExt;
use glommio::{LocalExecutorBuilder, Placement};
use tracing::{error, info, warn};

pub use self::core::{ClientInfo, Core, Global, Msg};
use crate::config::{Flags, Settings};
use crate::net::poller::{accept_loop, Poller, Socket};
use crate::shard::Shard;

/// Bytes of io_uring-registered buffers per core (glommio's default is 10 MiB).
const IO_MEMORY: usize = 1 << 20;

/// Starts every core and blocks until the server stops. Errors are start-up failures.
pub fn run(flags: &Flags) -> Result<(), String> {
    let tiered = crate::config::TierSettings::from_flags(flags)?;
    let settings = Arc::new(Settings::with_tiering(flags, tiered));
    let threads = settings.threads;
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
        .map_err(|_| format!("--bind: cannot resolve '{}'", flags.bind))?;
    let listener =
        listen(addr).map_err(|e| format!("--port/--bind: cannot listen on {addr}: {e}"))?;

    let mut senders = Vec::with_capacity(threads);
    let mut receivers = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = mpsc::unbounded::<Msg>();
        senders.push(tx);
        receivers.push(rx);
    }
    let bells = (0..threads)
        .map(|_| crate::net::poller::Bell::new())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot create the cores' eventfds: {e}"))?;
    let global = Arc::new(Global::new(settings.clone(), senders, bells));
    global.rss_overhead.store(
        crate::memory::rss_bytes().saturating_sub(crate::memory::used_memory()),
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
            .map_err(|e| format!("cannot share the listening socket: {e}"))?
            .into_raw_fd();
        let placement = match cpus.get(id % cpus.len().max(1)) {
            Some(&cpu) => Placement::Fixed(cpu),
            None => Placement::Unbound,
        };
        let h = LocalExecutorBuilder::new(placement)
            .name(&format!("strata-{id}"))
            // Registered I/O buffers count against maxmemory; the network path needs few.
            .io_memory(IO_MEMORY)
            .spawn(move || async move { core_main(id, global, rx, fd, ready, snapshot).await })
            .map_err(|e| format!("cannot start executor {id}: {e}"))?;
        handles.push(h);
    }
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(format!("executor failed: {e}")),
        }
    }
    Ok(())
}

/// Everything one core runs: its mesh receiver, its timers and its listener.
async fn core_main(
    id: usize,
    global: Arc<Global>,
    rx: mpsc::UnboundedReceiver<Msg>,
    listen_fd: RawFd,
    ready: Arc<std::sync::Barrier>,
    snapshot: Option<load::Shared>,
) -> Result<(), String> {
    let mut shard = Shard::new(id, global.settings.clone());
    let tier = match &global.settings.tiered {
        Some(ts) => {
            let path = ts.file_path(id);
            match tiering::TierStore::create(&path, ts.file_bytes_per_shard).await {
                Ok(t) => {
                    t.set_codec(ts.codec);
                    t.set_read_budget(read_budget(
                        global.settings.maxmemory(),
                        global.settings.threads as u64,
                    ));
                    global.add_tier_file(path);
                    Some((t, ts.clone()))
                }
                Err(e) => {
                    error!("--tiered_prefix: {e}");
                    global.remove_tier_files();
                    std::process::exit(1);
                }
            }
        }
        None => None,
    };
    shard.tier = tier.as_ref().map(|(t, _)| t.clone());
    let core = Rc::new(Core::new(id, shard, global.clone()));
    if let Some((t, ts)) = tier {
        let c = core.clone();
        crate::net::poller::spawn(async move { offload::run(c, t, ts).await }).detach();
    }

    let c = core.clone();
    crate::net::poller::spawn(async move {
        let mut rx = rx;
        while let Some(msg) = rx.next().await {
            c.handle(msg);
        }
    })
    .detach();

    let c = core.clone();
    crate::net::poller::spawn(async move { background(c).await }).detach();

    // Start-up only: every core waits here once, before serving anything.
    ready.wait();
    if let Some(shared) = &snapshot {
        load::run(&core, &shared.0, &shared.1).await;
    }
    if id == 0 {
        global
            .serving
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(schedule) = global.settings.snapshot.cron.clone() {
            let c = core.clone();
            crate::net::poller::spawn(async move { snapshot::cron(c, schedule).await }).detach();
        }
    }
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
        }
    }
    // Not through `poller::spawn`: the driver does not count its own turns.
    glommio::spawn_local(poller.clone().drive()).detach();
    let p = poller.clone();
    accept_loop(poller, listener, move |fd| {
        match Socket::new(fd, p.clone()) {
            Ok(sock) => {
                let c = core.clone();
                crate::net::poller::spawn(async move {
                    crate::net::connection::serve(c, sock).await;
                })
                .detach();
            }
            Err(e) => warn!("core {id}: cannot watch a new connection: {e}"),
        }
    })
    .await;
    Ok(())
}

/// Periodic per-core work at `--hz`: active expiry with a CPU budget, memory peak tracking.
async fn background(core: Rc<Core>) {
    let mut last_trim = (std::time::Instant::now(), std::time::Instant::now());
    loop {
        let settings = &core.global.settings;
        let (period, hz) = (
            settings.tick_period(),
            settings
                .hz
                .load(std::sync::atomic::Ordering::Relaxed)
                .max(1),
        );
        glommio::timer::sleep(period).await;
        let used = core.global.note_memory();
        core.shard.borrow_mut().tick_clock();
        if core.id == 0 {
            trim_heap(&core.global, used, &mut last_trim);
        }
        if core.gate.is_locked() {
            continue;
        }
        // Cache mode: eviction toward the memory goal, a quarter of the tick at most.
        if settings.cache_mode {
            eviction::heartbeat(&core, period / 4);
        }
        // Idle times kept from wrapping: every table covered about every ten minutes.
        core.shard.borrow_mut().age_step(600 * hz as usize);
        if !core.global.active_expire_enabled() {
            continue;
        }
        // A quarter of the tick at most, like Redis' slow expire cycle.
        let budget = period / 4;
        let reaped = core.shard.borrow_mut().active_expire(budget, hz);
        if reaped > 0 {
            tracing::trace!(core = core.id, reaped, "active expiry");
        }
    }
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
fn install_exit_handler(global: Arc<Global>) -> Result<(), String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    std::thread::Builder::new()
        .name("strata-signals".into())
        .spawn(move || {
            let mut signals = signals.forever();
            if let Some(sig) = signals.next() {
                info!(signal = sig, "signal received; saving and exiting");
                let serving = global.serving.load(std::sync::atomic::Ordering::SeqCst);
                let job: core::Job = Box::new(|core: &Rc<Core>| {
                    let c = core.clone();
                    crate::net::poller::spawn(async move {
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
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(())
}

/// Ten times a second notes how far RSS runs past what is allocated, and hands freed heap
/// memory back to the OS when that is a lot, or when RSS nears maxmemory (glibc keeps freed
/// blocks otherwise, e.g. after values moved to SSD): once a second at most, ten times a
/// second near the bound.
fn trim_heap(
    global: &Global,
    used: u64,
    (measured, trimmed): &mut (std::time::Instant, std::time::Instant),
) {
    if measured.elapsed() < Duration::from_millis(100) {
        return;
    }
    *measured = std::time::Instant::now();
    let mut rss = crate::memory::rss_bytes();
    let max = global.settings.maxmemory();
    let near_bound = max > 0 && rss > max / 100 * 90 && rss > used + (4 << 20);
    let every = if near_bound {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    };
    if (near_bound || rss > used + (16 << 20)) && trimmed.elapsed() >= every {
        *trimmed = std::time::Instant::now();
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim has no preconditions; it only returns free heap pages to the OS.
        unsafe {
            libc::malloc_trim(0);
        }
        rss = crate::memory::rss_bytes();
    }
    // Measured after any trim: what RSS keeps beyond the count even when freed memory went
    // back, which is what the limits derived from it must leave room for. Peaks fade slowly
    // (1% of maxmemory per measurement): churn brings them back between trims.
    let measured_now = rss.saturating_sub(used);
    let before = global
        .rss_overhead
        .load(std::sync::atomic::Ordering::Relaxed);
    global.rss_overhead.store(
        measured_now.max(before.saturating_sub((max / 100).max(1 << 20))),
        std::sync::atomic::Ordering::Relaxed,
    );
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

/// 1.50G-style rendering used by INFO and logs.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n}B")
    } else {
        format!("{v:.2}{}", UNITS[u])
    }
}

/// Bytes of tier reads one shard keeps in flight: its share of maxmemory / 64, between 512 KiB
/// (128 single-page reads, more than the disk needs to run at full rate) and 16 MiB (no
/// maxmemory).
fn read_budget(maxmemory: u64, shards: u64) -> u64 {
    if maxmemory == 0 {
        return 16 << 20;
    }
    (maxmemory / 64 / shards.max(1)).clamp(512 << 10, 16 << 20)
}

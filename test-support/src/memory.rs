//! A process's resident memory, read from `/proc/<pid>/status` (Linux), for the tests that
//! bound what a server or tool may use.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A field of `/proc/<pid>/status` given in kB (`VmRSS`, `VmHWM`, ...); None once the process
/// is gone.
pub fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The resident memory process `pid` owns (RssAnon + RssShmem: not its binary's file pages,
/// which the kernel may drop and reread), what `--maxmemory` bounds, in bytes; None once the
/// process is gone.
pub fn owned_rss(pid: u32) -> Option<u64> {
    let anon = proc_status_kb(pid, "RssAnon")?;
    Some((anon + proc_status_kb(pid, "RssShmem").unwrap_or(0)) * 1024)
}

/// A running [`rss_sampler`]: the flag that stops it, and the thread that returns the peak.
pub type RssSampler = (Arc<AtomicBool>, JoinHandle<u64>);

/// Samples the owned RSS ([`owned_rss`]) of process `pid` every 20 ms until stopped; returns
/// the peak.
pub fn rss_sampler(pid: u32) -> RssSampler {
    rss_sampler_every(pid, Duration::from_millis(20))
}

/// [`rss_sampler`] with a sample every `period` (short peaks need a short one).
pub fn rss_sampler_every(pid: u32, period: Duration) -> RssSampler {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        let mut peak = 0u64;
        while !s.load(Ordering::Relaxed) {
            if let Some(rss) = owned_rss(pid) {
                peak = peak.max(rss);
            }
            std::thread::sleep(period);
        }
        peak
    });
    (stop, h)
}

/// Stops a sampler of [`rss_sampler`] and asserts that the peak owned RSS it saw stayed within
/// 5% of `max` (the bound maxmemory promises); returns the peak.
pub fn assert_peak_rss_within((stop, handle): RssSampler, max: u64) -> u64 {
    stop.store(true, Ordering::Relaxed);
    let peak = handle.join().expect("the RSS sampler panicked");
    assert!(
        peak as f64 <= max as f64 * 1.05,
        "peak owned RSS {peak} passed maxmemory {max} by more than 5%"
    );
    peak
}

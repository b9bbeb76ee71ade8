//! What a run reports: percentiles out of the HDR histograms, the summary printed on stdout,
//! and the same figures as JSON (`--json FILE`) for scripts such as `benches/report.sh`.
//!
//! Never: measures anything itself (the engine does); prints a latency it did not record (an
//! empty histogram prints as "-", and as null in JSON).

use crate::engine::Totals;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Latency percentiles of one histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl Percentiles {
    /// None for an empty histogram.
    pub fn of(h: &Histogram<u64>) -> Option<Percentiles> {
        if h.is_empty() {
            return None;
        }
        let ms = |ns: u64| ns as f64 / 1e6;
        Some(Percentiles {
            count: h.len(),
            mean: h.mean() / 1e6,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p99_9: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        })
    }
}

/// The figures of one run (or one level of a sweep).
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// "open" (a timetable at `requested_rate`) or "closed" (as fast as replies come).
    pub mode: &'static str,
    pub requested_rate: Option<f64>,
    pub achieved_rate: f64,
    /// Open loop: achieved at least 97% of the requested rate.
    pub sustained: Option<bool>,
    pub seconds: f64,
    /// Ctrl-C ended the run early: the figures cover `seconds`, not the requested duration.
    pub interrupted: bool,
    pub requests: u64,
    pub gets: u64,
    pub sets: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub unanswered: u64,
    /// The load generator's own CPU use over the run, in percent of one core: near 100 per
    /// thread, the client (not the server) may be what limits the rate.
    pub client_cpu_percent: f64,
    pub latency_ms: Option<Percentiles>,
    pub get_latency_ms: Option<Percentiles>,
    pub set_latency_ms: Option<Percentiles>,
    /// Open loop: how late requests were written after their due time.
    pub send_lag_ms: Option<Percentiles>,
}

/// The 97% rule of the published fixed-rate sweeps: under it, a level is "not sustained".
pub const SUSTAINED_SHARE: f64 = 0.97;

impl RunReport {
    pub fn new(totals: &Totals, requested_rate: Option<f64>) -> RunReport {
        let achieved = totals.achieved_rate();
        RunReport {
            mode: if requested_rate.is_some() {
                "open"
            } else {
                "closed"
            },
            requested_rate,
            achieved_rate: achieved,
            sustained: requested_rate.map(|r| achieved >= SUSTAINED_SHARE * r),
            seconds: totals.elapsed.as_secs_f64(),
            interrupted: totals.interrupted,
            requests: totals.completed,
            gets: totals.gets,
            sets: totals.sets,
            hits: totals.hits,
            misses: totals.misses,
            errors: totals.errors,
            unanswered: totals.unanswered,
            client_cpu_percent: 100.0 * totals.client_cpu.as_secs_f64()
                / totals.elapsed.as_secs_f64().max(1e-9),
            latency_ms: Percentiles::of(&totals.latency.all),
            get_latency_ms: Percentiles::of(&totals.latency.get),
            set_latency_ms: Percentiles::of(&totals.latency.set),
            send_lag_ms: Percentiles::of(&totals.latency.send_lag),
        }
    }

    /// The summary lines after the setup line.
    pub fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        if self.interrupted {
            writeln!(
                out,
                "interrupted: the figures cover the first {:.2} s",
                self.seconds
            )?;
        }
        match self.requested_rate {
            Some(asked) => writeln!(
                out,
                "rate: {:.1}/s achieved of {asked:.0}/s requested ({:.2}%{}), {} requests in {:.2} s",
                self.achieved_rate,
                100.0 * self.achieved_rate / asked,
                if self.sustained == Some(false) {
                    ", NOT SUSTAINED"
                } else {
                    ""
                },
                self.requests,
                self.seconds
            )?,
            None => writeln!(
                out,
                "rate: {:.1}/s (closed loop), {} requests in {:.2} s",
                self.achieved_rate, self.requests, self.seconds
            )?,
        }
        writeln!(
            out,
            "replies: {} GET ({} hits, {} misses), {} SET, {} errors, {} unanswered",
            self.gets, self.hits, self.misses, self.sets, self.errors, self.unanswered
        )?;
        write!(
            out,
            "client: {:.0}% of a core (strata-bench itself)",
            self.client_cpu_percent
        )?;
        match &self.send_lag_ms {
            Some(lag) => writeln!(
                out,
                "; sends late by p50 {:.3} p99 {:.3} max {:.3} ms (counted in the latencies)",
                lag.p50, lag.p99, lag.max
            )?,
            None => writeln!(out)?,
        }
        writeln!(out, "{}", latency_header())?;
        for (name, p) in [
            ("all", &self.latency_ms),
            ("GET", &self.get_latency_ms),
            ("SET", &self.set_latency_ms),
        ] {
            if name == "all" || p.is_some() {
                writeln!(out, "{}", latency_row(name, p.as_ref()))?;
            }
        }
        Ok(())
    }
}

pub fn latency_header() -> String {
    format!(
        "{:<12}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "latency ms", "p50", "p90", "p99", "p99.9", "max"
    )
}

pub fn latency_row(name: &str, p: Option<&Percentiles>) -> String {
    match p {
        Some(p) => format!(
            "{name:<12}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>10.3}",
            p.p50, p.p90, p.p99, p.p99_9, p.max
        ),
        None => format!(
            "{name:<12}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "-", "-", "-", "-", "-"
        ),
    }
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| format!("cannot encode the JSON report: {e}"))?;
    std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

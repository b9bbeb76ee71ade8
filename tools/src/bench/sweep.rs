//! `strata-bench sweep`: one open-loop run per requested rate against the same server, the
//! published sweeps' 97% rule (a level whose achieved rate is under 97% of the requested one
//! is NS, not sustained), a table on stdout and the latency-vs-rate chart as SVG.
//!
//! Never: hides an NS level (it stays in the table and the chart, marked); draws a point for
//! a latency it did not measure.

use crate::summary::{self, RunReport, SUSTAINED_SHARE};
use crate::{report, Failure, Setup, SweepArgs};
use plotters::prelude::*;
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// One level of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    pub rate: f64,
    #[serde(flatten)]
    pub report: RunReport,
}

impl Level {
    fn sustained(&self) -> bool {
        self.report.sustained != Some(false)
    }
}

pub fn sweep(args: SweepArgs) -> Result<(), Failure> {
    let setup = Setup::new(&args.target, &args.servers, &args.load)?;
    let clock = crate::engine::Clock::new();
    if args.load.preload {
        setup.preload(clock)?;
    }
    let what = setup
        .describe(None)
        .replacen("closed loop", "each level", 1);
    report!("strata-bench sweep: {} levels, {what}", args.rates.len());
    let mut levels = Vec::with_capacity(args.rates.len());
    for (i, &rate) in args.rates.iter().enumerate() {
        eprintln!("level {}/{}: {rate:.0}/s", i + 1, args.rates.len());
        let report = setup.run(Some(rate), clock)?;
        if !args.load.quiet {
            eprintln!(
                "{}",
                row(&Level {
                    rate,
                    report: report.clone(),
                })
            );
        }
        levels.push(Level { rate, report });
        if crate::engine::interrupted() {
            eprintln!(
                "interrupted: the sweep stops after {} level(s)",
                levels.len()
            );
            break;
        }
    }
    report!("{}", header());
    for level in &levels {
        report!("{}", row(level));
    }
    report!(
        "NS: not sustained, achieved under {:.0}% of the requested rate; lag: how late the \
         client sent (ms), large when the client itself is behind",
        SUSTAINED_SHARE * 100.0
    );
    if let Some(path) = &args.svg {
        chart(path, &levels, &what)?;
        report!("chart: {}", path.display());
    }
    if let Some(path) = &args.json {
        #[derive(Serialize)]
        struct SweepJson<'a> {
            #[serde(flatten)]
            setup: crate::SetupJson,
            levels: &'a [Level],
        }
        let json = SweepJson {
            setup: setup.json("sweep"),
            levels: &levels,
        };
        summary::write_json(path, &json)?;
    }
    Ok(())
}

fn header() -> String {
    format!(
        "{:>10} {:>12} {:>7} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "asked/s",
        "achieved/s",
        "%",
        "",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "errors"
    )
}

fn row(level: &Level) -> String {
    let r = &level.report;
    let ms = |f: fn(&summary::Percentiles) -> f64| {
        r.latency_ms
            .as_ref()
            .map_or("-".to_string(), |p| format!("{:.3}", f(p)))
    };
    format!(
        "{:>10.0} {:>12.1} {:>7.2} {:>4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>10}",
        level.rate,
        r.achieved_rate,
        100.0 * r.achieved_rate / level.rate,
        if level.sustained() { "" } else { "NS" },
        ms(|p| p.p50),
        ms(|p| p.p90),
        ms(|p| p.p99),
        ms(|p| p.p99_9),
        ms(|p| p.max),
        r.errors + r.unanswered,
        r.send_lag_ms
            .as_ref()
            .map_or("-".to_string(), |p| format!("{:.3}", p.p99))
    )
}

/// One server's sweep, as the chart draws it.
pub struct Series {
    pub name: String,
    /// (requested rate, p50 ms, p99 ms, sustained) per level.
    pub points: Vec<(f64, f64, f64, bool)>,
}

impl Series {
    fn of(name: &str, levels: &[Level]) -> Series {
        let points = levels
            .iter()
            .filter_map(|l| {
                let p = l.report.latency_ms.as_ref()?;
                Some((l.rate, p.p50, p.p99, l.sustained()))
            })
            .collect();
        Series {
            name: name.to_string(),
            points,
        }
    }

    /// The levels of a `sweep --json` file.
    pub fn from_json(name: &str, path: &Path) -> Result<Series, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let levels = json["levels"]
            .as_array()
            .ok_or_else(|| format!("{} is not a sweep report (no levels)", path.display()))?;
        let points = levels
            .iter()
            .filter_map(|l| {
                Some((
                    l["rate"].as_f64()?,
                    l["latency_ms"]["p50"].as_f64()?,
                    l["latency_ms"]["p99"].as_f64()?,
                    l["sustained"].as_bool().unwrap_or(true),
                ))
            })
            .collect();
        Ok(Series {
            name: name.to_string(),
            points,
        })
    }
}

fn chart(path: &Path, levels: &[Level], title: &str) -> Result<(), String> {
    draw(path, &[Series::of("", levels)], title)
}

/// p50 (thin) and p99 (thick) latency against the requested rate, one colour per series, log
/// latency axis; NS levels drawn as crosses and named in the legend.
pub fn draw(path: &Path, series: &[Series], title: &str) -> Result<(), String> {
    let draw_err = |e: DrawingAreaErrorKind<_>| format!("chart {}: {e}", path.display());
    let all = || series.iter().flat_map(|s| s.points.iter());
    let max_rate = all().map(|p| p.0).fold(0.0, f64::max).max(1.0);
    let (lo, hi) = all().fold((f64::MAX, 0.0f64), |(lo, hi), p| {
        (lo.min(p.1.max(0.001)), hi.max(p.2))
    });
    let (lo, hi) = if hi > 0.0 {
        (lo / 2.0, hi * 2.0)
    } else {
        (0.01, 10.0)
    };

    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let area = root
        .titled("latency vs requested rate", ("sans-serif", 22))
        .map_err(draw_err)?;
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 12))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..max_rate * 1.05, (lo..hi).log_scale())
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("requested ops/s")
        .y_desc("latency (ms)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| short(*y))
        .draw()
        .map_err(draw_err)?;
    let palette = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (i, s) in series.iter().enumerate() {
        let color = palette[i % palette.len()];
        let prefix = if s.name.is_empty() {
            String::new()
        } else {
            format!("{} ", s.name)
        };
        for (what, width, pick) in [
            ("p99", 3, (|p: &(f64, f64, f64, bool)| p.2) as fn(&_) -> f64),
            ("p50", 1, |p| p.1),
        ] {
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().map(|p| (p.0, pick(p).max(0.001))),
                    color.stroke_width(width),
                ))
                .map_err(draw_err)?
                .label(format!("{prefix}{what}"))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(width))
                });
            chart
                .draw_series(
                    s.points
                        .iter()
                        .filter(|p| p.3)
                        .map(|p| Circle::new((p.0, pick(p).max(0.001)), 3, color.filled())),
                )
                .map_err(draw_err)?;
        }
    }
    let ns: Vec<(f64, f64)> = all()
        .filter(|p| !p.3)
        .flat_map(|p| [(p.0, p.1.max(0.001)), (p.0, p.2.max(0.001))])
        .collect();
    if !ns.is_empty() {
        chart
            .draw_series(
                ns.iter()
                    .map(|&(x, y)| Cross::new((x, y), 6, BLACK.stroke_width(2))),
            )
            .map_err(draw_err)?
            .label(format!(
                "NS: achieved < {:.0}% of requested",
                SUSTAINED_SHARE * 100.0
            ))
            .legend(|(x, y)| Cross::new((x + 9, y), 5, BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(draw_err)?;
    root.present().map_err(draw_err)?;
    Ok(())
}

/// A latency for an axis label: 3 significant digits at most, no trailing zeros.
fn short(ms: f64) -> String {
    let text = if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

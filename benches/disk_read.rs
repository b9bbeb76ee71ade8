//! The disk's limit for the tiering benchmark: 4 KiB random O_DIRECT reads from one glommio
//! `DmaFile` at a fixed queue depth (default 32), the way a Strata shard reads its tier file.
//!
//! ```text
//! disk_read PATH [--size-mb 1024] [--seconds 10] [--qd 32] [--bs 4096] [--cpu N] [--keep]
//! ```
//!
//! PATH is created (replaced) and filled with real data through plain buffered I/O first, then
//! fsynced: glommio's open-time polled-I/O probe misbehaves on empty or sparse files, and reads
//! of holes would never reach the device. The file is removed at the end unless `--keep`.
//! Prints one parseable line:
//!
//! ```text
//! DISK reads_per_sec=... p50_us=... p99_us=... p999_us=... max_us=... slow_reads=... slow_pct=... reads=... errors=... seconds=... qd=32 bs=4096 file_mb=1024
//! ```
//!
//! `slow_reads` counts reads that took 3 ms or more and `slow_pct` is their share of the time
//! reads were in flight: about the share of the run the device was stalled.
//!
//! Run with no PATH (as `cargo bench` does) it only prints this help.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::path::PathBuf;
use std::process::exit;
use std::rc::Rc;
use std::time::{Duration, Instant};

use glommio::{LocalExecutorBuilder, Placement};
use hdrhistogram::Histogram;
use rand::{rngs::SmallRng, Rng, SeedableRng};

struct Args {
    path: PathBuf,
    size_mb: u64,
    seconds: f64,
    qd: usize,
    bs: u64,
    cpu: Option<usize>,
    keep: bool,
}

/// A read this slow (us) waited out a stall of the device, not a queue.
const SLOW_US: u64 = 3000;
const USAGE: &str = "usage: disk_read PATH [--size-mb 1024] [--seconds 10] [--qd 32] [--bs 4096] [--cpu N] [--keep]";

fn parse_args() -> Option<Args> {
    let mut path = None;
    let mut a = Args {
        path: PathBuf::new(),
        size_mb: 1024,
        seconds: 10.0,
        qd: 32,
        bs: 4096,
        cpu: std::env::var("CPU").ok().and_then(|s| s.parse().ok()),
        keep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = |name: &str| -> String {
            it.next().unwrap_or_else(|| {
                eprintln!("disk_read: {name} needs a value\n{USAGE}");
                exit(2)
            })
        };
        fn num<T: std::str::FromStr>(name: &str, s: String) -> T {
            s.parse().unwrap_or_else(|_| {
                eprintln!("disk_read: bad value '{s}' for {name}\n{USAGE}");
                exit(2)
            })
        }
        match arg.as_str() {
            "--bench" => {} // added by `cargo bench`
            "--size-mb" => a.size_mb = num("--size-mb", val("--size-mb")),
            "--seconds" => a.seconds = num("--seconds", val("--seconds")),
            "--qd" => a.qd = num("--qd", val("--qd")),
            "--bs" => a.bs = num("--bs", val("--bs")),
            "--cpu" => a.cpu = Some(num("--cpu", val("--cpu"))),
            "--keep" => a.keep = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                exit(0)
            }
            s if s.starts_with("--") => {
                eprintln!("disk_read: unknown option {s}\n{USAGE}");
                exit(2)
            }
            s => path = Some(PathBuf::from(s)),
        }
    }
    let bad = a.bs == 0 || !a.bs.is_multiple_of(512) || a.qd == 0 || a.seconds <= 0.0;
    if bad || a.size_mb * (1 << 20) < a.bs * 2 {
        eprintln!(
            "disk_read: need bs a multiple of 512, qd >= 1, seconds > 0, file >= 2 blocks\n{USAGE}"
        );
        exit(2);
    }
    a.path = path?;
    Some(a)
}

/// Writes `size` bytes of non-repeating data with ordinary buffered I/O and fsyncs them, so
/// every block exists on the device before O_DIRECT reads start.
fn fill_file(a: &Args) -> std::io::Result<()> {
    let _ = std::fs::remove_file(&a.path);
    let mut f = std::fs::File::create(&a.path)?;
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let mut chunk = vec![0u8; 1 << 20];
    for _ in 0..a.size_mb {
        rng.fill(&mut chunk[..]);
        f.write_all(&chunk)?;
    }
    f.sync_all()
}

fn main() {
    let Some(a) = parse_args() else {
        println!("{USAGE}\n(no PATH given: nothing to do)");
        return;
    };
    let t = Instant::now();
    if let Err(e) = fill_file(&a) {
        eprintln!("disk_read: cannot write {}: {e}", a.path.display());
        let _ = std::fs::remove_file(&a.path);
        exit(1);
    }
    eprintln!(
        "disk_read: wrote {} MiB to {} in {:.1}s",
        a.size_mb,
        a.path.display(),
        t.elapsed().as_secs_f64()
    );
    let placement = match a.cpu {
        Some(c) => Placement::Fixed(c),
        None => Placement::Unbound,
    };
    let path = a.path.clone();
    let (qd, bs, blocks) = (a.qd, a.bs, a.size_mb * (1 << 20) / a.bs);
    let run_for = Duration::from_secs_f64(a.seconds);
    let res = LocalExecutorBuilder::new(placement)
        .name("disk_read")
        .io_memory(4 << 20)
        .spawn(move || async move {
            let file = glommio::io::OpenOptions::new()
                .read(true)
                .write(true)
                .dma_open(&path)
                .await
                .map_err(|e| format!("cannot open {} with O_DIRECT: {e}", path.display()))?;
            let file = Rc::new(file);
            let hist = Rc::new(RefCell::new(
                Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap(),
            ));
            let errors = Rc::new(Cell::new(0u64));
            let first_err = Rc::new(RefCell::new(None::<String>));
            let start = Instant::now();
            let deadline = start + run_for;
            let workers = (0..qd).map(|w| {
                let (file, hist, errors, first_err) = (
                    file.clone(),
                    hist.clone(),
                    errors.clone(),
                    first_err.clone(),
                );
                async move {
                    let mut rng = SmallRng::seed_from_u64(w as u64 + 1);
                    while Instant::now() < deadline {
                        let pos = rng.gen_range(0..blocks) * bs;
                        let t0 = Instant::now();
                        match file.read_at_aligned(pos, bs as usize).await {
                            Ok(buf) if buf.len() == bs as usize => {
                                let us = t0.elapsed().as_micros() as u64;
                                let _ = hist.borrow_mut().record(us.max(1));
                            }
                            Ok(buf) => {
                                errors.set(errors.get() + 1);
                                first_err.borrow_mut().get_or_insert_with(|| {
                                    format!("short read: {} of {bs} bytes at {pos}", buf.len())
                                });
                            }
                            Err(e) => {
                                errors.set(errors.get() + 1);
                                first_err
                                    .borrow_mut()
                                    .get_or_insert_with(|| format!("read at {pos}: {e}"));
                                if errors.get() > 1000 {
                                    return;
                                }
                            }
                        }
                    }
                }
            });
            futures::future::join_all(workers).await;
            let secs = start.elapsed().as_secs_f64();
            let _ = file.close_rc().await;
            let h = hist.borrow();
            let e = first_err.borrow_mut().take();
            Ok::<_, String>((h.len(), secs, h.clone(), errors.get(), e))
        })
        .map_err(|e| format!("cannot start executor: {e}"))
        .and_then(|h| h.join().map_err(|e| format!("executor failed: {e}")))
        .and_then(|r| r);
    if !a.keep {
        let _ = std::fs::remove_file(&a.path);
    }
    match res {
        Ok((n, secs, h, errors, first_err)) => {
            if let Some(e) = first_err {
                eprintln!("disk_read: {errors} read error(s), first: {e}");
            }
            // Reads of SLOW_US or more: how many, and their share of all the time reads were
            // in flight (about the share of the run the device was stalled; a virtual disk
            // stalls for ~20 ms at a time, several times a second under load).
            let (mut slow, mut slow_us, mut all_us) = (0u64, 0u64, 0u64);
            for v in h.iter_recorded() {
                let us = v.value_iterated_to() * v.count_at_value();
                all_us += us;
                if v.value_iterated_to() >= SLOW_US {
                    slow += v.count_at_value();
                    slow_us += us;
                }
            }
            println!(
                "DISK reads_per_sec={:.0} p50_us={} p99_us={} p999_us={} max_us={} slow_reads={} slow_pct={:.1} reads={} errors={} seconds={:.2} qd={} bs={} file_mb={}",
                n as f64 / secs,
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                h.max(),
                slow,
                100.0 * slow_us as f64 / all_us.max(1) as f64,
                n,
                errors,
                secs,
                a.qd,
                a.bs,
                a.size_mb
            );
            if n == 0 {
                exit(1);
            }
        }
        Err(e) => {
            eprintln!("disk_read: {e}");
            exit(1);
        }
    }
}

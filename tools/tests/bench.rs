//! strata-bench, driven as a process against real servers: the open-loop timetable holds its
//! rate, a paused server shows as latency, closed loop and preload get every key right, the
//! memcached protocols run clean against memcached, sweeps mark NS levels and draw the chart,
//! pub/sub delivers every message, and bad flags are usage errors that say what is wrong.
//!
//! redis-server and memcached are found by test-support's rule: missing, these tests fail
//! under STRATA_REQUIRE_REDIS=1 and are skipped with a NOTE otherwise.

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use test_support::{Memcached, RedisServer};

const BENCH: &str = env!("CARGO_BIN_EXE_strata-bench");

fn bench(args: &[&str]) -> Command {
    let mut c = Command::new(BENCH);
    c.args(args).stdin(Stdio::null());
    c
}

/// Runs strata-bench to its end (killed, and the test failed, after 60 s).
fn run(args: &[&str]) -> Output {
    let child = bench(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata-bench");
    finish(child, args)
}

fn finish(mut child: Child, args: &[&str]) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("strata-bench {args:?} ran past 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Runs strata-bench, which must succeed, and returns its JSON report (written to `json`).
fn run_json(args: &[&str], json: &Path) -> Value {
    let out = run(args);
    assert_ok(&out, args);
    read_json(json)
}

fn assert_ok(out: &Output, args: &[&str]) {
    assert!(
        out.status.success(),
        "strata-bench {args:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("JSON report");
    serde_json::from_str(&text).expect("JSON report parses")
}

fn num(v: &Value, path: &str) -> f64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number in {v}"))
}

fn redis(dir: &Path) -> Option<RedisServer> {
    RedisServer::start(dir, "dump.rdb", &[])
}

/// Sends `signal` to `pid` with kill(1).
fn signal(signal: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {signal} {pid} failed");
}

/// Resumes a stopped process when dropped, so a failing test never leaves it stopped.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

#[test]
fn open_loop_holds_the_requested_rate_against_a_quiet_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = redis(dir.path()) else {
        return;
    };
    let json = dir.path().join("run.json");
    let port = server.port.to_string();
    let args = [
        "run",
        "--port",
        &port,
        "--rate",
        "5000",
        "--duration",
        "5",
        "--connections",
        "8",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ];
    let r = run_json(&args, &json);
    // 5 s, not less: the achieved rate divides by the time until the last reply, and a latency
    // tail at the end of a short run on a loaded machine would weigh more.
    let achieved = num(&r, "achieved_rate");
    assert!(
        (achieved - 5000.0).abs() <= 0.03 * 5000.0,
        "achieved {achieved}/s of 5000/s: {r}"
    );
    assert_eq!(r["sustained"], Value::Bool(true), "{r}");
    assert_eq!(r["mode"], "open");
    assert_eq!(num(&r, "errors"), 0.0, "{r}");
    assert_eq!(num(&r, "unanswered"), 0.0, "{r}");
    // 1:10 SET:GET, counted per connection: one SET in every 11 requests, give or take one
    // per connection.
    let (sets, gets) = (num(&r, "sets"), num(&r, "gets"));
    assert!(
        (sets - (sets + gets) / 11.0).abs() <= 8.0,
        "sets {sets}, gets {gets}"
    );
    for p in ["p50", "p90", "p99", "p99_9", "max"] {
        assert!(num(&r, &format!("latency_ms.{p}")) > 0.0, "{p}: {r}");
    }
}

#[test]
fn a_paused_server_shows_as_latency_in_an_open_loop_run() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = redis(dir.path()) else {
        return;
    };
    let json = dir.path().join("run.json");
    let port = server.port.to_string();
    let args = [
        "run",
        "--port",
        &port,
        "--rate",
        "2000",
        "--duration",
        "3",
        "--connections",
        "4",
        "--json",
        json.to_str().unwrap(),
    ];
    let child = bench(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata-bench");
    std::thread::sleep(Duration::from_millis(1200));
    {
        signal("-STOP", server.pid());
        let _resume = Resume(server.pid());
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = finish(child, &args);
    assert_ok(&out, &args);
    let r = read_json(&json);
    let max = num(&r, "latency_ms.max");
    assert!(
        max >= 200.0,
        "a 200 ms stall, yet max latency {max} ms: {r}"
    );
    assert!(max < 2000.0, "max latency {max} ms: {r}");
    assert_eq!(num(&r, "errors"), 0.0, "{r}");
    assert_eq!(num(&r, "unanswered"), 0.0, "{r}");
    // The stalled requests were still sent on time and answered after the pause.
    let achieved = num(&r, "achieved_rate");
    assert!(achieved >= 0.97 * 2000.0, "achieved {achieved}/s: {r}");
    // The progress lines showed the stall as it happened.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[   1s]"), "{stderr}");
}

#[test]
fn ctrl_c_ends_the_run_early_and_it_still_reports() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = redis(dir.path()) else {
        return;
    };
    let json = dir.path().join("run.json");
    let port = server.port.to_string();
    let args = [
        "run",
        "--port",
        &port,
        "--rate",
        "1000",
        "--duration",
        "30",
        "--connections",
        "2",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ];
    let child = bench(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata-bench");
    std::thread::sleep(Duration::from_millis(1500));
    signal("-INT", child.id());
    let out = finish(child, &args);
    assert_ok(&out, &args);
    let r = read_json(&json);
    assert_eq!(r["interrupted"], Value::Bool(true), "{r}");
    let seconds = num(&r, "seconds");
    assert!((1.0..10.0).contains(&seconds), "{r}");
    assert!(num(&r, "requests") >= 900.0, "{r}");
    assert_eq!(num(&r, "unanswered"), 0.0, "{r}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("interrupted: the figures cover the first"),
        "{stdout}"
    );
}

#[test]
fn closed_loop_after_preload_finds_every_key_without_errors() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut server) = redis(dir.path()) else {
        return;
    };
    let json = dir.path().join("run.json");
    let port = server.port.to_string();
    let args = [
        "run",
        "--port",
        &port,
        "--preload",
        "--keys",
        "5000",
        "--ratio",
        "0:1",
        "--duration",
        "1",
        "--connections",
        "4",
        "--pipeline",
        "8",
        "--value-size",
        "10-100",
        "--json",
        json.to_str().unwrap(),
    ];
    let r = run_json(&args, &json);
    assert_eq!(r["mode"], "closed");
    assert_eq!(server.int(&[b"DBSIZE"]), 5000);
    assert_eq!(num(&r, "errors"), 0.0, "{r}");
    assert_eq!(num(&r, "misses"), 0.0, "every key was preloaded: {r}");
    assert_eq!(num(&r, "sets"), 0.0, "{r}");
    assert!(num(&r, "gets") > 100.0, "{r}");
    assert_eq!(num(&r, "hits"), num(&r, "gets"), "{r}");
    let value = server.get(b"key:4999").expect("the last key was preloaded");
    assert!((10..=100).contains(&value.len()), "{}", value.len());
    assert_eq!(server.get(b"key:5000"), None);
}

#[test]
fn busy_poll_closed_loop_matches_every_reply_to_its_request() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = redis(dir.path()) else {
        return;
    };
    let json = dir.path().join("run.json");
    let port = server.port.to_string();
    let args = [
        "run",
        "--port",
        &port,
        "--preload",
        "--keys",
        "2000",
        "--ratio",
        "1:3",
        "--duration",
        "1",
        "--connections",
        "3",
        "--pipeline",
        "4",
        "--busy-poll",
        "--json",
        json.to_str().unwrap(),
    ];
    let r = run_json(&args, &json);
    assert_eq!(r["mode"], "closed");
    assert_eq!(num(&r, "errors"), 0.0, "{r}");
    assert_eq!(num(&r, "unanswered"), 0.0, "{r}");
    assert!(num(&r, "gets") > 100.0 && num(&r, "sets") > 30.0, "{r}");
    assert_eq!(
        num(&r, "hits"),
        num(&r, "gets"),
        "every key was preloaded: {r}"
    );
    assert_eq!(
        num(&r, "requests"),
        num(&r, "gets") + num(&r, "sets"),
        "{r}"
    );
}

#[test]
fn servers_split_the_keys_by_hash_slot_as_a_cluster_client_does() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let Some(mut first) = redis(dirs[0].path()) else {
        return;
    };
    let Some(mut second) = redis(dirs[1].path()) else {
        return;
    };
    let json = dirs[0].path().join("run.json");
    let servers = format!("127.0.0.1:{},127.0.0.1:{}", first.port, second.port);
    let args = [
        "run",
        "--servers",
        &servers,
        "--preload",
        "--keys",
        "4000",
        "--ratio",
        "0:1",
        "--connections",
        "5",
        "--duration",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ];
    let r = run_json(&args, &json);
    let (a, b) = (first.int(&[b"DBSIZE"]), second.int(&[b"DBSIZE"]));
    assert_eq!(a + b, 4000, "{a} + {b}");
    assert!(
        (1600..=2400).contains(&a),
        "{a} of 4000 keys on the first server"
    );
    // Every GET went to the server holding its key.
    assert_eq!(num(&r, "misses"), 0.0, "{r}");
    assert_eq!(num(&r, "errors"), 0.0, "{r}");
    assert!(num(&r, "gets") > 100.0, "{r}");
    assert_eq!(r["server"], servers.as_str());
    // "foo" is slot 12182: the second half of the slots.
    second.ok(&[b"SET", b"foo", b"x"]);
    assert_eq!(first.get(b"foo"), None);
}

#[test]
fn memcached_text_and_binary_runs_get_no_errors() {
    let Some(server) = Memcached::start(&[]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = server.port.to_string();
    for (protocol, rate) in [
        ("memcache", None),
        ("memcache-binary", None),
        ("memcache", Some("3000")),
        ("memcache-binary", Some("3000")),
    ] {
        let json = dir.path().join(format!("{protocol}.json"));
        let mut args = vec![
            "run",
            "--protocol",
            protocol,
            "--port",
            &port,
            "--preload",
            "--keys",
            "2000",
            "--ratio",
            "1:4",
            "--duration",
            "1",
            "--connections",
            "4",
            "--value-size",
            "1-2000",
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ];
        if let Some(rate) = rate {
            args.extend(["--rate", rate]);
        }
        let r = run_json(&args, &json);
        assert_eq!(r["protocol"], protocol);
        assert_eq!(num(&r, "errors"), 0.0, "{protocol}: {r}");
        assert_eq!(num(&r, "unanswered"), 0.0, "{protocol}: {r}");
        assert_eq!(num(&r, "misses"), 0.0, "{protocol}: preloaded: {r}");
        assert!(num(&r, "sets") > 0.0 && num(&r, "gets") > 0.0, "{r}");
        assert_eq!(num(&r, "hits"), num(&r, "gets"), "{protocol}: {r}");
    }
}

#[test]
fn sweep_marks_levels_not_sustained_and_writes_the_chart() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = redis(dir.path()) else {
        return;
    };
    let json = dir.path().join("sweep.json");
    let svg = dir.path().join("sweep.svg");
    let port = server.port.to_string();
    // The second level is far past what one connection to one redis-server can answer.
    let args = [
        "sweep",
        "--port",
        &port,
        "--rates",
        "2000,50000000",
        "--duration",
        "1",
        "--connections",
        "2",
        "--max-outstanding",
        "64",
        "--svg",
        svg.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ];
    let out = run(&args);
    assert_ok(&out, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(!rows[0].contains("NS"), "{stdout}");
    assert!(rows[1].contains("NS"), "{stdout}");
    let r = read_json(&json);
    assert_eq!(r["levels"][0]["sustained"], Value::Bool(true), "{r}");
    assert_eq!(r["levels"][1]["sustained"], Value::Bool(false), "{r}");
    assert_eq!(num(&r["levels"][1], "errors"), 0.0, "{r}");
    let chart = std::fs::read_to_string(&svg).expect("the chart");
    assert!(
        chart.starts_with("<svg"),
        "{}",
        &chart[..chart.len().min(200)]
    );
    for text in ["latency vs requested rate", "p50", "p99", "NS"] {
        assert!(chart.contains(text), "the chart lacks {text:?}");
    }

    // Two servers' sweeps on one chart.
    let both = dir.path().join("both.svg");
    let (a, b) = (
        format!("first={}", json.display()),
        format!("second={}", json.display()),
    );
    let args = ["chart", "--svg", both.to_str().unwrap(), &a, &b];
    assert_ok(&run(&args), &args);
    let chart = std::fs::read_to_string(&both).expect("the chart of two sweeps");
    for text in ["first p99", "first p50", "second p99", "NS"] {
        assert!(chart.contains(text), "the chart lacks {text:?}");
    }
    let out = run(&[
        "chart",
        "--svg",
        both.to_str().unwrap(),
        "x=/nonexistent.json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.json"));
}

#[test]
fn pubsub_times_every_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = redis(dir.path()) else {
        return;
    };
    let json = dir.path().join("pubsub.json");
    let port = server.port.to_string();
    let args = [
        "pubsub",
        "--port",
        &port,
        "--rate",
        "1000",
        "--duration",
        "1",
        "--publishers",
        "2",
        "--subscribers",
        "3",
        "--channels",
        "4",
        "--message-size",
        "100",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ];
    let r = run_json(&args, &json);
    let published = num(&r, "published");
    assert!((published - 1000.0).abs() <= 30.0, "{r}");
    assert_eq!(num(&r, "expected"), 3.0 * published, "{r}");
    assert_eq!(num(&r, "delivered"), num(&r, "expected"), "{r}");
    assert_eq!(num(&r, "lost"), 0.0, "{r}");
    assert_eq!(num(&r, "malformed"), 0.0, "{r}");
    assert_eq!(num(&r, "publish_errors"), 0.0, "{r}");
    let p50 = num(&r, "delivery_latency_ms.p50");
    assert!(p50 > 0.0 && p50 < 1000.0, "{r}");
}

#[test]
fn bad_flags_are_usage_errors_that_say_what_is_wrong() {
    for (args, says) in [
        (&["run", "--ratio", "1-10"][..], "SET:GET"),
        (&["run", "--key-dist", "zipf:0"], "above 0"),
        (
            &["run", "--key-dist", "normal"],
            "uniform, sequential or zipf:S",
        ),
        (&["run", "--value-size", "100-10"], "N1 <= N2"),
        (&["run", "--rate", "0"], "requests per second above 0"),
        (&["run", "--duration=-1"], "seconds above 0"),
        (&["run", "--duration", "0"], "seconds above 0"),
        (&["run", "--protocol", "http"], "resp"),
        (&["run", "--connections", "0"], "--connections"),
        (
            &["run", "--threads", "4", "--connections", "2"],
            "each thread needs a connection",
        ),
        (
            &["run", "--pipeline", "10", "--max-outstanding", "5"],
            "--max-outstanding",
        ),
        (
            &["run", "--servers", "a:1,b:2", "--port", "1"],
            "cannot be used with",
        ),
        (&["run", "--servers", "localhost"], "expected HOST:PORT"),
        (
            &["run", "--servers", "a:1,b:2,c:3", "--connections", "2"],
            "each server needs a connection",
        ),
        (&["sweep"], "--rates"),
        (&["sweep", "--rates", "1000,x"], "requests per second"),
        (&["pubsub", "--message-size", "8"], "--message-size"),
        (&["frobnicate"], "unrecognized subcommand"),
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(says),
            "{args:?} should say {says:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn no_server_is_a_run_failure_naming_the_address() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
        .to_string();
    let out = run(&["run", "--port", &port, "--duration", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("strata-bench: cannot connect to 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn help_lists_the_subcommands_and_the_flags_of_run() {
    let out = run(&["--help"]);
    assert_ok(&out, &["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for sub in ["run", "sweep", "pubsub"] {
        assert!(help.contains(&format!("\n  {sub} ")), "{help}");
    }
    let out = run(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--host",
        "--port",
        "--protocol",
        "--connections",
        "--threads",
        "--pipeline",
        "--ratio",
        "--keys",
        "--key-dist",
        "--value-size",
        "--preload",
        "--duration",
        "--json",
        "--rate",
        "--busy-poll",
        "Exit codes:",
    ] {
        assert!(help.contains(flag), "run --help lacks {flag}: {help}");
    }
}

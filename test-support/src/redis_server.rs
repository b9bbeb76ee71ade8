//! A real `redis-server` for cross-checks, and the one rule for when it is not installed.
//!
//! The rule ([`RedisLookup::find`]): a test that cross-checks against redis-server and cannot
//! find it fails when `STRATA_REQUIRE_REDIS=1` (CI sets it, after installing redis-server);
//! without the variable it prints a NOTE that the cross-check was skipped and passes. Every
//! such test reaches the rule through [`RedisServer::start`] or [`redis_server_binary`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::raw::Raw;
use crate::resp::Resp;
use crate::server::free_port;

/// The environment variable that, set to `1`, makes a missing redis-server fail the test.
pub const REQUIRE_REDIS: &str = "STRATA_REQUIRE_REDIS";

/// Where to look for redis-server, and whether not finding it fails the test.
#[derive(Debug, Clone)]
pub struct RedisLookup {
    /// Tried in order; the first that is a file is used.
    pub candidates: Vec<PathBuf>,
    /// A missing redis-server fails the test instead of skipping the cross-check.
    pub required: bool,
}

impl RedisLookup {
    /// As this process's environment says (see [`RedisLookup::from_vars`]).
    pub fn from_env() -> RedisLookup {
        RedisLookup::from_vars(|name| std::env::var_os(name))
    }

    /// As the environment read through `var` says: the path in `REDIS_SERVER` if it is set,
    /// else `redis-server` in each directory of `PATH`; required when `STRATA_REQUIRE_REDIS`
    /// is `1`.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> RedisLookup {
        let candidates = program_candidates(&var, "REDIS_SERVER", "redis-server");
        RedisLookup {
            candidates,
            required: var(REQUIRE_REDIS).is_some_and(|v| v == "1"),
        }
    }

    /// The redis-server to cross-check against. When there is none: panics if it is required,
    /// else prints a NOTE naming the test whose cross-check is skipped and returns None.
    pub fn find(&self) -> Option<PathBuf> {
        find_program(
            "redis-server",
            "redis-server",
            "REDIS_SERVER",
            &self.candidates,
            self.required,
        )
    }
}

/// The rule for every outside server a test cross-checks against (redis-server, memcached):
/// the first of `candidates` that is a file; when there is none, a panic if `required`, else a
/// NOTE naming the test whose cross-check is skipped, and None.
pub(crate) fn find_program(
    program: &str,
    package: &str,
    path_var: &str,
    candidates: &[PathBuf],
    required: bool,
) -> Option<PathBuf> {
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Some(found.clone());
    }
    let tried = candidates
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        !required,
        "{program} is required ({REQUIRE_REDIS}=1) but was not found (tried: [{tried}]); \
         install it (apt-get install {package}) or point {path_var} at it"
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string();
    eprintln!(
        "NOTE: {program} not found (tried: [{tried}]); skipped the {program} \
         cross-check of {test} (set {REQUIRE_REDIS}=1 to make this a failure)"
    );
    None
}

/// Where to look for a program: the path in `path_var` if it is set, else `name` in each
/// directory of `PATH` (both read through `var`).
pub(crate) fn program_candidates(
    var: impl Fn(&str) -> Option<OsString>,
    path_var: &str,
    name: &str,
) -> Vec<PathBuf> {
    match var(path_var) {
        Some(path) => vec![PathBuf::from(path)],
        None => var("PATH")
            .map(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(name))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The redis-server a cross-check runs, as [`RedisLookup::from_env`] finds it; None (after a
/// NOTE) when it is missing and not required, a panic when it is missing and required.
pub fn redis_server_binary() -> Option<PathBuf> {
    RedisLookup::from_env().find()
}

/// A redis-server child process on a free port, with a parsed-reply connection to it; killed
/// when dropped.
pub struct RedisServer {
    pub port: u16,
    child: Child,
    conn: Raw,
    log: PathBuf,
}

impl RedisServer {
    /// Starts the redis-server [`redis_server_binary`] finds (None: the caller skips its
    /// cross-check): see [`RedisServer::start_with`].
    pub fn start(dir: &Path, dbfilename: &str, extra: &[&str]) -> Option<RedisServer> {
        let bin = redis_server_binary()?;
        Some(RedisServer::start_with(&bin, dir, dbfilename, extra))
    }

    /// Starts `bin` with `dir` as its directory and `dbfilename` in it (loaded at start when
    /// it exists), no saving and no AOF unless `extra` asks, its log in `dir`; waits until it
    /// answers PING (after loading). Panics when it does not start.
    pub fn start_with(bin: &Path, dir: &Path, dbfilename: &str, extra: &[&str]) -> RedisServer {
        let mut why = String::new();
        for _attempt in 0..5 {
            why.clear();
            let port = free_port();
            let log = dir.join(format!("redis-{port}.log"));
            let mut child = Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .arg("--dir")
                .arg(dir)
                .args(["--dbfilename", dbfilename])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--protected-mode", "no"])
                .arg("--logfile")
                .arg(&log)
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(status)) = child.try_wait() {
                    why = format!(
                        "redis-server exited ({status}): {}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                    break;
                }
                if let Some(conn) = answers_ping(port) {
                    return RedisServer {
                        port,
                        child,
                        conn,
                        log,
                    };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            // Another process took the port between free_port and the bind: try another.
            if !why.contains("Address already in use") {
                break;
            }
        }
        if why.is_empty() {
            why = "redis-server did not answer PING within 20 s".into();
        }
        panic!("could not start redis-server: {why}");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The process id (to pause the server with SIGSTOP, say).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a command and returns its reply; panics (with redis-server's log) when the
    /// connection fails.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Resp {
        self.conn.request(args).unwrap_or_else(|e| {
            panic!(
                "redis-server connection failed: {e}; log: {}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            )
        })
    }

    /// Sends a command that must not answer an error.
    pub fn ok(&mut self, args: &[&[u8]]) {
        let r = self.cmd(args);
        assert!(
            !matches!(r, Resp::Error(_)),
            "{:?} -> {r:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
        );
    }

    /// Sends a command that answers an integer.
    pub fn int(&mut self, args: &[&[u8]]) -> i64 {
        match self.cmd(args) {
            Resp::Int(i) => i,
            r => panic!("expected an integer, got {r:?}"),
        }
    }

    pub fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        match self.cmd(&[b"GET", key]) {
            Resp::Bulk(v) => v,
            r => panic!("GET: {r:?}"),
        }
    }

    pub fn select(&mut self, db: u32) {
        self.ok(&[b"SELECT", db.to_string().as_bytes()]);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection to `port` once the server there answers PING with PONG (it answers -LOADING
/// while it loads its dataset).
fn answers_ping(port: u16) -> Option<Raw> {
    let mut conn = Raw::open("127.0.0.1", port, Duration::from_secs(30)).ok()?;
    (conn.request(&[b"PING"]).ok()? == Resp::Simple("PONG".into())).then_some(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &[(&str, &str)]) -> RedisLookup {
        RedisLookup::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    #[should_panic(
        expected = "redis-server is required (STRATA_REQUIRE_REDIS=1) but was not found"
    )]
    fn missing_redis_fails_the_test_when_required() {
        lookup(&[("PATH", "/nonexistent/bin"), (REQUIRE_REDIS, "1")]).find();
    }

    #[test]
    #[should_panic(expected = "tried: [/nonexistent/redis-server]")]
    fn a_missing_redis_server_path_fails_the_test_when_required() {
        lookup(&[
            ("REDIS_SERVER", "/nonexistent/redis-server"),
            ("PATH", "/usr/bin:/bin"),
            (REQUIRE_REDIS, "1"),
        ])
        .find();
    }

    #[test]
    fn missing_redis_skips_the_cross_check_when_not_required() {
        assert_eq!(lookup(&[("PATH", "/nonexistent/bin")]).find(), None);
        assert_eq!(
            lookup(&[("PATH", "/nonexistent/bin"), (REQUIRE_REDIS, "0")]).find(),
            None
        );
        assert_eq!(lookup(&[]).find(), None);
    }

    #[test]
    fn redis_server_is_found_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("redis-server");
        std::fs::write(&bin, "").unwrap();
        let path = format!("/nonexistent/bin:{}", dir.path().display());
        let found = lookup(&[("PATH", &path), (REQUIRE_REDIS, "1")]).find();
        assert_eq!(found, Some(bin));
    }
}

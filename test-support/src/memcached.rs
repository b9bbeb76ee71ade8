//! A real `memcached` for the memcached-protocol tests (strata-bench's, and Strata's own once
//! it speaks memcached), found by the same rule as redis-server: `MEMCACHED` names the binary,
//! else `memcached` on `PATH`; missing, it fails the test under `STRATA_REQUIRE_REDIS=1` (CI
//! installs both) and is skipped with a NOTE otherwise.
//!
//! Never: leaves a memcached running after its test (killed on drop); skips a check silently.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::redis_server::{find_program, program_candidates, REQUIRE_REDIS};
use crate::server::{free_port, poll_started};

/// The memcached a test runs against, as the environment read through `var` says; None (after
/// a NOTE) when it is missing and not required, a panic when it is missing and required.
pub fn memcached_binary_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let candidates = program_candidates(&var, "MEMCACHED", "memcached");
    let required = var(REQUIRE_REDIS).is_some_and(|v| v == "1");
    find_program("memcached", "memcached", "MEMCACHED", &candidates, required)
}

/// [`memcached_binary_from`] this process's environment.
pub fn memcached_binary() -> Option<PathBuf> {
    memcached_binary_from(|name| std::env::var_os(name))
}

/// A memcached child process on a free port (one worker thread, UDP off, 64 MB); killed when
/// dropped.
pub struct Memcached {
    pub port: u16,
    child: Child,
}

impl Memcached {
    /// Starts the memcached [`memcached_binary`] finds (None: the caller skips its check).
    pub fn start(extra: &[&str]) -> Option<Memcached> {
        let bin = memcached_binary()?;
        Some(Memcached::start_with(&bin, extra))
    }

    /// Starts `bin` and waits until it answers `version`. Panics when it does not start.
    pub fn start_with(bin: &Path, extra: &[&str]) -> Memcached {
        let port = free_port();
        let mut command = Command::new(bin);
        command
            .args([
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-t",
                "1",
                "-l",
                "127.0.0.1",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // memcached refuses to run as root unless told which user to be.
        if running_as_root() {
            command.args(["-u", "root"]);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let ready = poll_started(&mut child, "memcached", || answers_version(port));
        if ready.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("memcached did not answer `version` within 20 s");
        }
        Memcached { port, child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn answers_version(port: u16) -> Option<()> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    c.write_all(b"version\r\n").ok()?;
    let mut buf = [0u8; 8];
    c.read_exact(&mut buf).ok()?;
    (&buf == b"VERSION ").then_some(())
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(list: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            list.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    #[should_panic(expected = "memcached is required (STRATA_REQUIRE_REDIS=1) but was not found")]
    fn missing_memcached_fails_the_test_when_required() {
        memcached_binary_from(vars(&[("PATH", "/nonexistent/bin"), (REQUIRE_REDIS, "1")]));
    }

    #[test]
    fn missing_memcached_skips_the_check_when_not_required() {
        assert_eq!(
            memcached_binary_from(vars(&[("PATH", "/nonexistent/bin")])),
            None
        );
    }

    #[test]
    fn memcached_is_found_where_memcached_points() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("mc");
        std::fs::write(&bin, "").unwrap();
        let path = bin.display().to_string();
        let found = memcached_binary_from(vars(&[("MEMCACHED", &path), (REQUIRE_REDIS, "1")]));
        assert_eq!(found, Some(bin));
    }
}

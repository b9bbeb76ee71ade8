//! Function libraries kept in saves: Strata's own snapshot (SAVE, restart, FCALL) on one and
//! three threads, and Redis RDB files both ways against the real redis-server 7.0.

mod common;

use std::path::Path;

use common::*;
use redis::Connection;

/// A server saving to and loading from `dir`.
fn server_in(dir: &Path, threads: usize, extra: &[&str]) -> Server {
    let t = threads.to_string();
    let mut args = vec!["--dir", dir.to_str().unwrap(), "--proactor_threads", &t];
    args.extend_from_slice(extra);
    Server::start(STRATA, &args)
}

const LIB_A: &str = "#!lua name=liba\n\
    redis.register_function('seta', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n\
    redis.register_function{function_name='geta', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads'}";
/// Long enough that RDB writers compress it (LZF).
const LIB_B: &str = "#!lua name=libb\n\
    -- a comment to make this library longer than what RDB leaves uncompressed, twice over\n\
    redis.register_function('echo_b', function(keys, args) return args[1] .. args[1] end)";

fn load_libs(c: &mut Connection) {
    assert_eq!(q::<String>(c, &["FUNCTION", "LOAD", LIB_A]), "liba");
    assert_eq!(q::<String>(c, &["FUNCTION", "LOAD", LIB_B]), "libb");
}

/// The libraries work: FCALL of each function, with its flags in force.
fn check_libs(c: &mut Connection) {
    assert_eq!(q::<String>(c, &["FCALL", "seta", "1", "fk", "v1"]), "OK");
    assert_eq!(q::<String>(c, &["FCALL_RO", "geta", "1", "fk"]), "v1");
    assert_eq!(q::<String>(c, &["FCALL", "echo_b", "0", "ab"]), "abab");
    let e = redis::cmd("FCALL_RO")
        .arg("seta")
        .arg(1)
        .arg("fk")
        .arg("x")
        .query::<String>(c)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Can not execute a script with write flag using *_ro command"),
        "{e}"
    );
}

/// FUNCTION LIST WITHCODE as (name, code) pairs, sorted by name.
fn listed(c: &mut Connection) -> Vec<(String, String)> {
    let v: Vec<Vec<redis::Value>> = q(c, &["FUNCTION", "LIST", "WITHCODE"]);
    let mut out: Vec<(String, String)> = v
        .into_iter()
        .map(|lib| {
            let mut name = String::new();
            let mut code = String::new();
            for pair in lib.chunks(2) {
                let k: String = redis::from_redis_value(&pair[0]).unwrap();
                if k == "library_name" {
                    name = redis::from_redis_value(&pair[1]).unwrap();
                } else if k == "library_code" {
                    code = redis::from_redis_value(&pair[1]).unwrap();
                }
            }
            (name, code)
        })
        .collect();
    out.sort();
    out
}

fn want() -> Vec<(String, String)> {
    vec![
        ("liba".to_string(), LIB_A.to_string()),
        ("libb".to_string(), LIB_B.to_string()),
    ]
}

#[test]
fn save_and_restart_keep_function_libraries_on_1_and_3_threads() {
    for threads in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = server_in(dir.path(), threads, &[]);
            let mut c = s.client();
            load_libs(&mut c);
            assert_eq!(q::<String>(&mut c, &["SET", "plain", "kept"]), "OK");
            assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
        }
        // And on another thread count than the one that saved.
        for load_threads in [threads, 4 - threads] {
            let s = server_in(dir.path(), load_threads, &[]);
            let mut c = s.client();
            assert_eq!(
                listed(&mut c),
                want(),
                "{threads} -> {load_threads} threads"
            );
            check_libs(&mut c);
            assert_eq!(q::<String>(&mut c, &["GET", "plain"]), "kept");
        }
    }
}

#[test]
fn a_save_after_function_flush_restarts_without_libraries() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), 2, &[]);
        let mut c = s.client();
        load_libs(&mut c);
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
        assert_eq!(q::<String>(&mut c, &["FUNCTION", "DELETE", "liba"]), "OK");
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    let s = server_in(dir.path(), 2, &[]);
    let mut c = s.client();
    assert_eq!(listed(&mut c), want()[1..].to_vec());
    {
        let mut c = s.client();
        assert_eq!(q::<String>(&mut c, &["FUNCTION", "FLUSH"]), "OK");
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    drop(c);
    drop(s);
    let s = server_in(dir.path(), 2, &[]);
    assert_eq!(listed(&mut s.client()), Vec::new());
}

#[test]
fn rdb_with_functions_written_by_redis_loads_into_strata() {
    let dir = tempfile::tempdir().unwrap();
    {
        let Some(r) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
            return;
        };
        let mut c = r.client();
        load_libs(&mut c);
        assert_eq!(q::<String>(&mut c, &["SET", "plain", "kept"]), "OK");
        assert_eq!(q::<String>(&mut c, &["SAVE"]), "OK");
    }
    let s = server_in(dir.path(), 2, &["--dbfilename", "dump.rdb"]);
    let mut c = s.client();
    assert_eq!(listed(&mut c), want());
    check_libs(&mut c);
    assert_eq!(q::<String>(&mut c, &["GET", "plain"]), "kept");
}

#[test]
fn rdb_with_functions_exported_by_strata_loads_into_redis_and_back() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = server_in(dir.path(), 3, &[]);
        let mut c = s.client();
        load_libs(&mut c);
        assert_eq!(q::<String>(&mut c, &["SET", "plain", "kept"]), "OK");
        assert_eq!(q::<String>(&mut c, &["SAVE", "RDB", "export.rdb"]), "OK");
    }
    {
        let Some(r) = RedisServer::start(dir.path(), "export.rdb", &[]) else {
            return;
        };
        let mut c = r.client();
        assert_eq!(listed(&mut c), want());
        check_libs(&mut c);
        assert_eq!(q::<String>(&mut c, &["GET", "plain"]), "kept");
    }
    let s = server_in(dir.path(), 1, &["--dbfilename", "export.rdb"]);
    let mut c = s.client();
    assert_eq!(listed(&mut c), want());
    check_libs(&mut c);
}

#[test]
fn a_library_that_no_longer_loads_refuses_the_start() {
    // Two libraries registering one function name cannot both load: an RDB holding both
    // (hand-made, as no server writes one) is refused, as redis-server refuses it.
    let dir = tempfile::tempdir().unwrap();
    let lib_c = LIB_B.replace("name=libb", "name=libc");
    let mut rdb = b"REDIS0010".to_vec();
    for code in [LIB_B, lib_c.as_str()] {
        rdb.push(245);
        // RDB length, 14-bit form (both are shorter than 16384 bytes).
        let n = code.len();
        rdb.push(0x40 | (n >> 8) as u8);
        rdb.push(n as u8);
        rdb.extend_from_slice(code.as_bytes());
    }
    rdb.push(255);
    let crc = crc64(&rdb);
    rdb.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.path().join("two.rdb"), &rdb).unwrap();
    let d = dir.path().to_str().unwrap();
    let err = startup_error(
        STRATA,
        &[
            "--dir",
            d,
            "--dbfilename",
            "two.rdb",
            "--proactor_threads",
            "1",
        ],
    );
    assert!(err.contains("Function echo_b already exists"), "{err}");
}

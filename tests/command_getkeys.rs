//! COMMAND GETKEYS byte for byte: the keys of commands whose keys follow a count (ZUNIONSTORE,
//! LMPOP, SINTERCARD, BZMPOP, scripts, ...) found as Redis' key specs find them, a bad count
//! answered as Redis does (its fallback included), and Redis' errors in Redis' order; checked
//! against the expected bytes, then against a real redis-server.
//!
//! Without redis-server installed the cross-check says so and passes, unless
//! STRATA_REQUIRE_REDIS=1.
mod common;

use common::*;

const INVALID_ARGS: &str = "-ERR Invalid arguments specified for command\r\n";

/// (command after COMMAND GETKEYS, the reply).
const CASES: &[(&str, &str)] = &[
    (
        "",
        "-ERR wrong number of arguments for 'command|getkeys' command\r\n",
    ),
    (
        "GET",
        "-ERR wrong number of arguments for 'command|getkeys' command\r\n",
    ),
    ("NOSUCH a", "-ERR Invalid command specified\r\n"),
    ("PING x", "-ERR The command has no key arguments\r\n"),
    ("PUBLISH a b", "-ERR The command has no key arguments\r\n"),
    (
        "GET a b",
        "-ERR Invalid number of arguments specified for command\r\n",
    ),
    ("get k", "*1\r\n$1\r\nk\r\n"),
    ("MSET a 1 b 2", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    (
        "ZUNIONSTORE d 2 a b",
        "*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n",
    ),
    (
        "ZUNIONSTORE d 1 a WEIGHTS 2",
        "*2\r\n$1\r\nd\r\n$1\r\na\r\n",
    ),
    ("ZUNIONSTORE d 5 a", INVALID_ARGS),
    ("ZINTERSTORE d 0 a", INVALID_ARGS),
    ("ZDIFFSTORE d x a", INVALID_ARGS),
    // Not a count to the key spec, 1 to atoi: the fallback's order, destination last.
    ("ZUNIONSTORE d 1.5 a", "*2\r\n$1\r\na\r\n$1\r\nd\r\n"),
    ("ZUNION 2 a b", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    ("ZINTER 3 a b", INVALID_ARGS),
    ("ZDIFF -1 a b", INVALID_ARGS),
    ("ZINTERCARD 2 a b LIMIT 1", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    ("SINTERCARD 1 a b", "*1\r\n$1\r\na\r\n"),
    ("SINTERCARD 0 a b", INVALID_ARGS),
    ("SINTERCARD 5 a b", INVALID_ARGS),
    ("LMPOP 2 a b LEFT", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    ("LMPOP 0 a LEFT", INVALID_ARGS),
    ("LMPOP x a LEFT", INVALID_ARGS),
    ("BLMPOP 0 1 a LEFT COUNT 2", "*1\r\n$1\r\na\r\n"),
    ("BLMPOP 0 5 a LEFT", INVALID_ARGS),
    ("ZMPOP 2 a b MIN", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    ("ZMPOP 0 a MIN", INVALID_ARGS),
    ("BZMPOP 1 7 a b MIN", INVALID_ARGS),
    ("EVAL return 2 a b", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
    ("EVAL return 5 a", "*0\r\n"),
    ("FCALL_RO f x a", "*0\r\n"),
    ("SORT a BY w STORE d", "*2\r\n$1\r\na\r\n$1\r\nd\r\n"),
    ("OBJECT HELP", "-ERR The command has no key arguments\r\n"),
    ("BLPOP a b 0", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
];

fn args(case: &str) -> Vec<&str> {
    let mut v = vec!["COMMAND", "GETKEYS"];
    v.extend(case.split_whitespace());
    v
}

#[test]
fn getkeys_answers_as_redis() {
    let s = server();
    let mut raw = s.raw();
    for (case, want) in CASES {
        let a: Vec<&[u8]> = args(case).iter().map(|s| s.as_bytes()).collect();
        let got = String::from_utf8_lossy(&raw.call(&a)).into_owned();
        assert_eq!(got, *want, "COMMAND GETKEYS {case}");
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let cases: Vec<Vec<&str>> = CASES.iter().map(|(c, _)| args(c)).collect();
    let cases: Vec<&[&str]> = cases.iter().map(Vec::as_slice).collect();
    let diffs = differing_replies(&mut s.raw(), &mut Raw::connect(real.port), &cases);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

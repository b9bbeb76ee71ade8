//! HyperLogLog commands against the real binary, checked against Redis 7's replies and bytes:
//! PFADD, PFCOUNT (one key, cached; several, their union), PFMERGE, the sparse and dense
//! encodings and the promotion between them at `hll-sparse-max-bytes`, the cached count and
//! its stale bit, the WRONGTYPE and INVALIDOBJ errors, keys on two shards, HLLs on SSD, and
//! PFDEBUG.
//!
//! The expected counts and bytes were taken from redis-server 7.0.15.
mod common;

use common::*;
use redis::Connection;

const NOT_HLL: &str = "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
const CORRUPT: &str = "-INVALIDOBJ Corrupted HLL object detected\r\n";

/// PFADD of `1..=n` (as decimal strings) to `key`, 1000 elements a command.
fn add_range(c: &mut Connection, key: &str, from: usize, to: usize) {
    let all: Vec<String> = (from..=to).map(|n| n.to_string()).collect();
    for chunk in all.chunks(1000) {
        let _: i64 = redis::cmd("PFADD").arg(key).arg(chunk).query(c).unwrap();
    }
}

fn count(c: &mut Connection, keys: &[&str]) -> i64 {
    redis::cmd("PFCOUNT").arg(keys).query(c).unwrap()
}

/// Whether the cached count in the header is marked stale.
fn stale(c: &mut Connection, key: &str) -> bool {
    get_bytes(c, key)[15] & 0x80 != 0
}

#[test]
fn pfadd_and_pfcount_answer_like_redis() {
    let s = server();
    let mut raw = s.raw();
    let mut c = s.client();
    rt(&mut raw, &["PFCOUNT", "h"], &i(0));
    rt(&mut raw, &["PFADD", "h", "a"], &i(1));
    rt(&mut raw, &["PFADD", "h", "a"], &i(0));
    rb(
        &mut raw,
        b"h",
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80q\xa6\x84NW",
    );
    rt(&mut raw, &["PFCOUNT", "h"], &i(1));
    rt(&mut raw, &["TYPE", "h"], "+string\r\n");
    rt(&mut raw, &["OBJECT", "ENCODING", "h"], &b("raw"));
    // PFADD without elements creates the key (1), then changes nothing (0).
    rt(&mut raw, &["PFADD", "empty"], &i(1));
    rt(&mut raw, &["PFADD", "empty"], &i(0));
    rt(&mut raw, &["PFCOUNT", "empty"], &i(0));
    rb(
        &mut raw,
        b"empty",
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff",
    );
    // Counts and sizes Redis gives for 1..=n.
    for (n, want, len) in [
        (10, 10, 47),
        (100, 100, 287),
        (1000, 1001, 1922),
        (10_000, 9988, 12304),
    ] {
        let key = format!("r{n}");
        add_range(&mut c, &key, 1, n);
        assert_eq!(count(&mut c, &[&key]), want, "PFCOUNT of 1..={n}");
        assert_eq!(get_bytes(&mut c, &key).len(), len, "length after 1..={n}");
    }
    rt(&mut raw, &["PFCOUNT", "r10", "r100", "r1000"], &i(1001));
    rt(&mut raw, &["PFCOUNT", "r10", "missing"], &i(10));
    rt(&mut raw, &["PFCOUNT", "missing", "missing2"], &i(0));
    rt(&mut raw, &["PFADD"], &wrong_args("pfadd"));
    rt(&mut raw, &["PFCOUNT"], &wrong_args("pfcount"));
    rt(&mut raw, &["PFMERGE"], &wrong_args("pfmerge"));
}

/// Asserts `key` holds exactly `want`.
fn rb(raw: &mut Raw, key: &[u8], want: &[u8]) {
    raw.expect_cmd(&[b"GET", key], &bulk(want));
}

#[test]
fn the_cached_count_and_its_stale_bit() {
    let s = server();
    let mut c = s.client();
    add_range(&mut c, "h", 1, 100);
    assert!(stale(&mut c, "h"));
    assert_eq!(count(&mut c, &["h"]), 100);
    // PFCOUNT of one key writes the count into the header, little endian.
    let v = get_bytes(&mut c, "h");
    assert_eq!(&v[8..16], &100u64.to_le_bytes());
    // A PFADD that changes no register leaves it valid; one that does marks it stale.
    let _: i64 = q(&mut c, &["PFADD", "h", "1", "2", "3"]);
    assert!(!stale(&mut c, "h"));
    let _: i64 = q(&mut c, &["PFADD", "h", "new element"]);
    assert!(stale(&mut c, "h"));
    // A count of several keys is not cached anywhere.
    add_range(&mut c, "g", 50, 150);
    let before = (get_bytes(&mut c, "h"), get_bytes(&mut c, "g"));
    assert_eq!(
        count(&mut c, &["h", "g"]),
        152,
        "Redis' estimate of 151 elements"
    );
    assert_eq!((get_bytes(&mut c, "h"), get_bytes(&mut c, "g")), before);
    // A valid cached count is answered as it is, even one Redis never wrote.
    let mut forged = get_bytes(&mut c, "g");
    forged[8..16].copy_from_slice(&12345u64.to_le_bytes());
    set_bytes(&mut c, "forged", &forged);
    assert_eq!(count(&mut c, &["forged"]), 12345);
}

#[test]
fn sparse_turns_dense_at_hll_sparse_max_bytes() {
    let s = server();
    let mut raw = s.raw();
    let mut c = s.client();
    let get = |c: &mut Connection| -> Vec<(String, String)> {
        redis::cmd("CONFIG")
            .arg("GET")
            .arg("hll-sparse-max-bytes")
            .query(c)
            .unwrap()
    };
    assert_eq!(
        get(&mut c),
        vec![("hll-sparse-max-bytes".into(), "3000".into())]
    );
    add_range(&mut c, "h", 1, 1000);
    assert_eq!(get_bytes(&mut c, "h")[4], 1, "sparse");
    add_range(&mut c, "h", 1001, 1600);
    assert_eq!(
        get_bytes(&mut c, "h").len(),
        2926,
        "still sparse, as in Redis"
    );
    add_range(&mut c, "h", 1601, 2500);
    assert_eq!(get_bytes(&mut c, "h").len(), 12304, "dense");
    assert_eq!(get_bytes(&mut c, "h")[4], 0);
    // With a lower limit, HLLs turn dense sooner; the size counts the header.
    rt(
        &mut raw,
        &["CONFIG", "SET", "hll-sparse-max-bytes", "1kb"],
        OK,
    );
    assert_eq!(
        get(&mut c),
        vec![("hll-sparse-max-bytes".into(), "1024".into())]
    );
    add_range(&mut c, "small", 1, 1000);
    assert_eq!(get_bytes(&mut c, "small").len(), 12304);
    rt(
        &mut raw,
        &["CONFIG", "SET", "hll-sparse-max-bytes", "0"],
        OK,
    );
    rt(&mut raw, &["PFADD", "z", "a"], &i(1));
    assert_eq!(get_bytes(&mut c, "z").len(), 12304);
    let bad = "-ERR CONFIG SET failed (possibly related to argument 'hll-sparse-max-bytes') - argument must be a memory value\r\n";
    rt(
        &mut raw,
        &["CONFIG", "SET", "hll-sparse-max-bytes", "-1"],
        bad,
    );
    rt(
        &mut raw,
        &["CONFIG", "SET", "hll-sparse-max-bytes", "lots"],
        bad,
    );
    rt(
        &mut raw,
        &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"],
        OK,
    );
    // Sparse and dense count alike.
    add_range(&mut c, "again", 1, 1000);
    assert_eq!(count(&mut c, &["again"]), count(&mut c, &["small"]));
}

#[test]
fn wrongtype_and_corrupted_hlls() {
    let s = server();
    let mut raw = s.raw();
    let mut c = s.client();
    rt(&mut raw, &["SET", "str", "not an hll"], OK);
    rt(&mut raw, &["PFADD", "str", "a"], NOT_HLL);
    rt(&mut raw, &["PFCOUNT", "str"], NOT_HLL);
    rt(&mut raw, &["PFCOUNT", "missing", "str"], NOT_HLL);
    rt(&mut raw, &["PFMERGE", "dst", "str"], NOT_HLL);
    rt(&mut raw, &["PFMERGE", "str"], NOT_HLL);
    rt(&mut raw, &["EXISTS", "dst"], &i(0));
    // Shorter than the header, a bad magic or encoding, a dense one of the wrong length.
    let bad: [&[u8]; 5] = [
        b"HYLL",
        b"HYLX\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff",
        b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0\x7f\xff",
        b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0\x7f\xff",
        b"12345",
    ];
    for v in bad {
        set_bytes(&mut c, "bad", v);
        raw.expect_cmd(&[b"PFADD", b"bad", b"x"], NOT_HLL.as_bytes());
        raw.expect_cmd(&[b"PFCOUNT", b"bad"], NOT_HLL.as_bytes());
    }
    // Sparse opcodes that cover too few or too many registers (a VAL past the end is an error
    // even when the runs before it cover every register, as in redis-server since its fix for
    // CVE-2025-32023).
    let few = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xfe";
    let many = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff\x80";
    for v in [&few[..], &many[..]] {
        set_bytes(&mut c, "bad", v);
        raw.expect_cmd(&[b"PFCOUNT", b"bad"], CORRUPT.as_bytes());
        raw.expect_cmd(&[b"PFCOUNT", b"bad", b"missing"], CORRUPT.as_bytes());
        raw.expect_cmd(&[b"PFMERGE", b"dst", b"bad"], CORRUPT.as_bytes());
    }
    // An HLL with no opcodes at all: PFADD cannot find its register.
    set_bytes(&mut c, "bad", b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80");
    rt(&mut raw, &["PFADD", "bad", "a"], CORRUPT);
    // Only the stale count is checked: a corrupted HLL with a valid cache still answers it.
    set_bytes(&mut c, "cached", b"HYLL\x01\0\0\0\x07\0\0\0\0\0\0\0\x01");
    rt(&mut raw, &["PFCOUNT", "cached"], &i(7));
    rt(&mut raw, &["PFCOUNT", "cached", "missing"], CORRUPT);
}

#[test]
fn pfmerge_builds_the_union() {
    let s = server();
    let mut raw = s.raw();
    let mut c = s.client();
    add_range(&mut c, "a", 1, 100);
    add_range(&mut c, "b", 51, 150);
    rt(&mut raw, &["PFMERGE", "m", "a", "b"], OK);
    assert_eq!(count(&mut c, &["m"]), count(&mut c, &["a", "b"]));
    assert_eq!(
        count(&mut c, &["m"]),
        151,
        "Redis' estimate of 150 elements"
    );
    // Sparse sources make a sparse destination; a dense one makes it dense.
    assert_eq!(get_bytes(&mut c, "m")[4], 1);
    add_range(&mut c, "big", 1, 5000);
    rt(&mut raw, &["PFMERGE", "m2", "a", "big"], OK);
    assert_eq!(get_bytes(&mut c, "m2").len(), 12304);
    // The destination is a source too; missing sources are empty; no source makes an empty HLL.
    rt(&mut raw, &["PFMERGE", "a", "b", "missing"], OK);
    assert_eq!(count(&mut c, &["a"]), 151);
    rt(&mut raw, &["PFMERGE", "new"], OK);
    rt(&mut raw, &["PFCOUNT", "new"], &i(0));
    rb(&mut raw, b"new", b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
    // The destination keeps its TTL.
    rt(&mut raw, &["EXPIRE", "a", "100"], &i(1));
    rt(&mut raw, &["PFMERGE", "a", "big"], OK);
    rt(&mut raw, &["TTL", "a"], &i(100));
}

#[test]
fn keys_on_two_shards_count_and_merge_like_keys_on_one() {
    let s = server();
    let mut raw = s.raw();
    let mut c = s.client();
    let (a, b_) = keys_on_different_shards("hll", 2);
    let (d1, d2) = keys_on_different_shards("merged", 2);
    add_range(&mut c, &a, 1, 3000);
    add_range(&mut c, &b_, 2001, 2500);
    add_range(&mut c, "{t}a", 1, 3000);
    add_range(&mut c, "{t}b", 2001, 2500);
    let one_shard = count(&mut c, &["{t}a", "{t}b"]);
    assert_eq!(one_shard, 3005, "Redis' estimate");
    assert_eq!(count(&mut c, &[&a, &b_]), one_shard);
    assert_eq!(count(&mut c, &[&a, &b_, "missing"]), one_shard);
    rt(&mut raw, &["PFMERGE", "{t}m", "{t}a", "{t}b"], OK);
    for d in [&d1, &d2] {
        rt(&mut raw, &["PFMERGE", d, &a, &b_], OK);
        assert_eq!(get_bytes(&mut c, d), get_bytes(&mut c, "{t}m"), "{d}");
    }
    // Errors across shards come in key order.
    rt(&mut raw, &["SET", &d1, "plain"], OK);
    rt(&mut raw, &["PFCOUNT", &a, &d1], NOT_HLL);
    rt(&mut raw, &["PFMERGE", &d2, &a, &d1], NOT_HLL);
    rt(&mut raw, &["PFMERGE", &d1, &a], NOT_HLL);
    assert_eq!(get_bytes(&mut c, &d2), get_bytes(&mut c, "{t}m"));
}

#[test]
fn hll_commands_read_offloaded_values() {
    let dir = tempfile::tempdir().unwrap();
    let s = tiered_server(&dir, "24mb", "2");
    let mut c = s.client();
    let n = 30;
    let mut counts = Vec::new();
    for k in 0..n {
        let key = format!("hll:{k}");
        add_range(&mut c, &key, k * 100, k * 100 + 3000);
        counts.push(count(&mut c, &[&key]));
    }
    let union = count(&mut c, &["hll:0", "hll:1", "hll:2"]);
    // Push the HLLs out of RAM with newer values.
    fill(&mut c, 0..60_000, 0, 500);
    assert!(info_u64(&mut c, "tiered", "tiered_disk_keys") > 10_000);
    let reads = info_u64(&mut c, "tiered", "tiered_reads");
    assert_eq!(count(&mut c, &["hll:0", "hll:1", "hll:2"]), union);
    for (k, &want) in counts.iter().enumerate() {
        assert_eq!(count(&mut c, &[&format!("hll:{k}")]), want, "hll:{k}");
    }
    assert!(
        info_u64(&mut c, "tiered", "tiered_reads") > reads,
        "no HLL was read back from disk"
    );
    // Writes to values that were on disk.
    let _: i64 = q(&mut c, &["PFADD", "hll:5", "a", "b", "c"]);
    assert!(count(&mut c, &["hll:5"]) >= counts[5]);
    let _: String = q(&mut c, &["PFMERGE", "hll:6", "hll:7", "hll:8"]);
    assert!(count(&mut c, &["hll:6"]) > counts[6]);
    assert_eq!(info_u64(&mut c, "tiered", "tiered_read_errors"), 0);
}

/// PFDEBUG, which Redis' own test suite reads: the key is checked before the subcommand, and
/// GETREG and TODENSE leave the value dense.
#[test]
fn pfdebug_answers_like_redis() {
    let s = server();
    let mut raw = s.raw();
    let mut c = s.client();
    rt(
        &mut raw,
        &["PFDEBUG", "ENCODING", "missing"],
        "-ERR The specified key does not exist\r\n",
    );
    rt(
        &mut raw,
        &["PFDEBUG", "ENCODING"],
        "-ERR wrong number of arguments for 'pfdebug' command\r\n",
    );
    rt(&mut raw, &["SET", "str", "x"], OK);
    rt(&mut raw, &["PFDEBUG", "DECODE", "str"], NOT_HLL);
    rt(&mut raw, &["PFADD", "h", "a"], &i(1));
    rt(
        &mut raw,
        &["PFDEBUG", "nope", "h"],
        "-ERR Unknown PFDEBUG subcommand 'nope'\r\n",
    );
    rt(&mut raw, &["PFDEBUG", "encoding", "h"], "+sparse\r\n");
    rt(
        &mut raw,
        &["PFDEBUG", "DECODE", "h"],
        &b("Z:12711 v:2,1 Z:3672"),
    );
    rt(&mut raw, &["PFDEBUG", "TODENSE", "h"], &i(1));
    rt(&mut raw, &["PFDEBUG", "TODENSE", "h"], &i(0));
    rt(&mut raw, &["PFDEBUG", "ENCODING", "h"], "+dense\r\n");
    rt(
        &mut raw,
        &["PFDEBUG", "DECODE", "h"],
        "-ERR HLL encoding is not sparse\r\n",
    );
    assert_eq!(get_bytes(&mut c, "h").len(), 12304);
    rt(&mut raw, &["PFCOUNT", "h"], &i(1));
    // GETREG: every register, the one "a" set at 2.
    rt(&mut raw, &["PFADD", "g", "a"], &i(1));
    let regs: Vec<i64> = q(&mut c, &["PFDEBUG", "GETREG", "g"]);
    assert_eq!(regs.len(), 16384);
    assert_eq!(regs[12711], 2);
    assert_eq!(regs.iter().sum::<i64>(), 2);
    rt(&mut raw, &["PFDEBUG", "ENCODING", "g"], "+dense\r\n");
    // A corrupted sparse value is refused, not converted.
    rt(&mut raw, &["PFADD", "bad", "a"], &i(1));
    rt(&mut raw, &["APPEND", "bad", "\u{7f}"], &i(22));
    rt(&mut raw, &["PFDEBUG", "TODENSE", "bad"], CORRUPT);
    rt(&mut raw, &["PFDEBUG", "ENCODING", "bad"], "+sparse\r\n");
}

//! Collections over 1 MiB on SSD: a 4 MiB hash, list, set and sorted set each go to the tier
//! file as one multi-page extent and read back element for element; a write brings one back
//! and it leaves again with the write in it; DEL, overwrite and expiry free their extents
//! unread; a damaged extent page is a counted miss; with no free extent of its size a big
//! collection stays in RAM, counted, and reads back whole.
mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use common::*;
use redis::Connection;

/// Elements per collection: 40,000 of ~100 bytes make a blob of about 4 MiB.
const N: usize = 40_000;

fn elem(kind: &str, j: usize) -> String {
    hex_elem(kind, j, 6, 100)
}

fn score(j: usize) -> f64 {
    (j % 1000) as f64 * 1.5 - 7.25
}

/// HSET/RPUSH/SADD/ZADD `key` with its N elements, a thousand to a command.
fn fill_big(c: &mut Connection, kind: &str, key: &str) {
    for start in (0..N).step_by(1000) {
        let mut cmd = redis::cmd(adding_command(kind));
        cmd.arg(key);
        for j in start..(start + 1000).min(N) {
            match kind {
                "hash" => cmd.arg(format!("f{j}")).arg(elem("hv", j)),
                "list" => cmd.arg(elem("le", j)),
                "set" => cmd.arg(elem("sm", j)),
                _ => cmd.arg(score(j)).arg(elem("zm", j)),
            };
        }
        cmd.query::<i64>(c).expect("big collection write");
    }
}

fn want_hash() -> HashMap<String, String> {
    (0..N).map(|j| (format!("f{j}"), elem("hv", j))).collect()
}

fn want_list() -> Vec<String> {
    (0..N).map(|j| elem("le", j)).collect()
}

fn want_set() -> BTreeSet<String> {
    (0..N).map(|j| elem("sm", j)).collect()
}

/// Sorted by score, then member, as ZRANGE answers.
fn want_zset() -> Vec<(String, f64)> {
    let mut z: Vec<(String, f64)> = (0..N).map(|j| (elem("zm", j), score(j))).collect();
    z.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    z
}

fn hgetall(c: &mut Connection, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(c).unwrap()
}

fn lrange(c: &mut Connection, key: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(c)
        .unwrap()
}

fn smembers(c: &mut Connection, key: &str) -> BTreeSet<String> {
    redis::cmd("SMEMBERS").arg(key).query(c).unwrap()
}

fn zrange(c: &mut Connection, key: &str) -> Vec<(String, f64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .unwrap()
}

/// Waits until `field` of INFO tiered satisfies `ok`; its last value.
fn wait_info(c: &mut Connection, field: &str, ok: impl Fn(u64) -> bool, what: &str) -> u64 {
    let timing = (Duration::from_secs(40), Duration::from_millis(100));
    wait_tiered(c, field, ok, what, timing)
}

/// One shard; 64 MB of RAM and an offload threshold of 0.05, so every cold collection goes.
fn server(dir: &tempfile::TempDir, extra: &[&str]) -> Server {
    let mut args = vec!["--log_level", "error", "--tiered_offload_threshold", "0.05"];
    args.extend_from_slice(extra);
    tiered_server_with(dir, "64mb", "1", &args)
}

#[test]
fn four_mib_collections_of_each_type_go_to_ssd_as_extents_and_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(&dir, &[]);
    let mut c = s.client();
    for (kind, key) in [("hash", "h"), ("list", "l"), ("set", "s"), ("zset", "z")] {
        fill_big(&mut c, kind, key);
    }
    wait_info(
        &mut c,
        "tiered_disk_keys",
        |v| v == 4,
        "big collections offloaded",
    );
    // Each one is a single extent of at least 4 MB.
    let used = info_u64(&mut c, "tiered", "tiered_file_used");
    assert!(used >= 4 * 4_000_000, "tier file holds {used} bytes");
    assert!(info_u64(&mut c, "tiered", "tiered_collection_offloads") >= 4);
    // TYPE and OBJECT ENCODING answer without a read.
    let reads = info_u64(&mut c, "tiered", "tiered_reads");
    for (key, t, enc) in [
        ("h", "hash", "hashtable"),
        ("l", "list", "quicklist"),
        ("s", "set", "hashtable"),
        ("z", "zset", "skiplist"),
    ] {
        let got: String = redis::cmd("TYPE").arg(key).query(&mut c).unwrap();
        assert_eq!(got, t);
        let got: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .query(&mut c)
            .unwrap();
        assert_eq!(got, enc, "{key}");
    }
    assert_eq!(info_u64(&mut c, "tiered", "tiered_reads"), reads);

    assert_eq!(hgetall(&mut c, "h"), want_hash());
    assert_eq!(lrange(&mut c, "l"), want_list());
    assert_eq!(smembers(&mut c, "s"), want_set());
    assert_eq!(zrange(&mut c, "z"), want_zset());
    assert!(info_u64(&mut c, "tiered", "tiered_collection_loads") >= 4);
    assert_eq!(
        info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
        0
    );

    // Writes onto offloaded big ones: back to RAM, written, and off again with the write.
    wait_info(&mut c, "tiered_disk_keys", |v| v == 4, "offloaded again");
    let _: i64 = redis::cmd("HSET")
        .arg("h")
        .arg("added")
        .arg("after the offload")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("LPUSH")
        .arg("l")
        .arg("head")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("ZADD")
        .arg("z")
        .arg(-100)
        .arg("lowest")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("SREM")
        .arg("s")
        .arg(elem("sm", 7))
        .query(&mut c)
        .unwrap();
    wait_info(
        &mut c,
        "tiered_disk_keys",
        |v| v == 4,
        "written ones offloaded",
    );
    let mut h = want_hash();
    h.insert("added".into(), "after the offload".into());
    assert_eq!(hgetall(&mut c, "h"), h);
    let mut l = want_list();
    l.insert(0, "head".into());
    assert_eq!(lrange(&mut c, "l"), l);
    let mut z = want_zset();
    z.insert(0, ("lowest".into(), -100.0));
    assert_eq!(zrange(&mut c, "z"), z);
    let mut set = want_set();
    set.remove(&elem("sm", 7));
    assert_eq!(smembers(&mut c, "s"), set);
    let len: i64 = redis::cmd("HLEN").arg("h").query(&mut c).unwrap();
    assert_eq!(len, N as i64 + 1);
    assert_eq!(
        info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
        0
    );

    // DEL, an overwrite and an expiry free the extents without reading them.
    wait_info(
        &mut c,
        "tiered_disk_keys",
        |v| v == 4,
        "offloaded before DEL",
    );
    let reads = info_u64(&mut c, "tiered", "tiered_reads");
    let before = info_u64(&mut c, "tiered", "tiered_file_used");
    let gone: i64 = redis::cmd("DEL").arg("h").query(&mut c).unwrap();
    assert_eq!(gone, 1);
    let after_del = info_u64(&mut c, "tiered", "tiered_file_used");
    assert!(
        before - after_del >= 4_000_000,
        "DEL freed {} bytes",
        before - after_del
    );
    let _: () = redis::cmd("SET")
        .arg("l")
        .arg("a string now")
        .query(&mut c)
        .unwrap();
    let _: i64 = redis::cmd("PEXPIRE").arg("s").arg(1).query(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let exists: i64 = redis::cmd("EXISTS").arg("s").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    let _: i64 = redis::cmd("UNLINK").arg("z").query(&mut c).unwrap();
    assert_eq!(info_u64(&mut c, "tiered", "tiered_reads"), reads);
    assert_eq!(info_u64(&mut c, "tiered", "tiered_disk_keys"), 0);
    let used = info_u64(&mut c, "tiered", "tiered_file_used");
    assert!(used < 1_000_000, "{used} bytes still used in the tier file");
    let got: String = redis::cmd("GET").arg("l").query(&mut c).unwrap();
    assert_eq!(got, "a string now");
}

#[test]
fn a_damaged_page_in_a_big_collections_extent_is_a_counted_miss() {
    let dir = tempfile::tempdir().unwrap();
    let s = server(&dir, &[]);
    let mut c = s.client();
    fill_big(&mut c, "hash", "h");
    wait_info(&mut c, "tiered_disk_keys", |v| v == 1, "big hash offloaded");
    // The file's first extent follows its header page; its 500th page is deep inside the
    // blob, past where the tier compression could look (off here anyway).
    flip_tier_file_bytes(&dir, 500..501, 1234);
    let got = hgetall(&mut c, "h");
    assert!(
        got.is_empty(),
        "a damaged extent answered {} fields",
        got.len()
    );
    assert_eq!(
        info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
        1
    );
    let exists: i64 = redis::cmd("EXISTS").arg("h").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
    // The key can be written again and read back.
    fill_big(&mut c, "list", "h");
    assert_eq!(lrange(&mut c, "h"), want_list());
}

#[test]
fn a_big_collection_with_no_free_extent_stays_in_ram_counted() {
    let dir = tempfile::tempdir().unwrap();
    // 2 MB of tier file: no room for a 4 MB extent.
    let s = server(&dir, &["--tiered_max_file_size", "2mb"]);
    let mut c = s.client();
    fill_big(&mut c, "set", "s");
    wait_info(
        &mut c,
        "tiered_collection_no_space",
        |v| v >= 1,
        "no-space count",
    );
    assert_eq!(info_u64(&mut c, "tiered", "tiered_disk_keys"), 0);
    assert_eq!(info_u64(&mut c, "tiered", "tiered_collection_offloads"), 0);
    assert_eq!(smembers(&mut c, "s"), want_set());
    // Small ones still go.
    let _: i64 = redis::cmd("RPUSH")
        .arg("small")
        .arg(elem("le", 1))
        .arg(elem("le", 2))
        .query(&mut c)
        .unwrap();
    wait_info(
        &mut c,
        "tiered_disk_keys",
        |v| v == 1,
        "small list offloaded",
    );
    let l: Vec<String> = redis::cmd("LRANGE")
        .arg("small")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(l, [elem("le", 1), elem("le", 2)]);
}

#[test]
fn offloaded_big_collections_survive_save_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let start = |dir: &tempfile::TempDir| {
        let d = dir.path().to_str().unwrap().to_string();
        server(dir, &["--dir", &d, "--dbfilename", "big"])
    };
    {
        let s = start(&dir);
        let mut c = s.client();
        fill_big(&mut c, "hash", "h");
        fill_big(&mut c, "zset", "z");
        let _: i64 = redis::cmd("EXPIRE")
            .arg("z")
            .arg(5000)
            .query(&mut c)
            .unwrap();
        wait_info(
            &mut c,
            "tiered_disk_keys",
            |v| v == 2,
            "offloaded before SAVE",
        );
        let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
        assert_eq!(
            info_u64(&mut c, "tiered", "tiered_unreadable_keys_dropped"),
            0
        );
    }
    let s = start(&dir);
    let mut c = s.client();
    let ttl: i64 = redis::cmd("TTL").arg("z").query(&mut c).unwrap();
    assert!((4900..=5000).contains(&ttl), "TTL {ttl}");
    assert_eq!(hgetall(&mut c, "h"), want_hash());
    assert_eq!(zrange(&mut c, "z"), want_zset());
}

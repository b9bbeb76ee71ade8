//! SORT and SORT_RO against a real redis-server 7.0: the same data and seeded random SORT
//! commands (BY key and hash-field patterns, GET, LIMIT, ASC/DESC, ALPHA, STORE) sent to
//! Strata on two shards — so patterns, sources and destinations cross shards — and to Redis,
//! replies and stored lists compared byte for byte. Where Redis leaves the order open (ties
//! under ALPHA BY, which its unstable partial sort or a set's layout decides) the items are
//! compared as a multiset. Also: errors, and GET of values that live on SSD.
//! A missing redis-server fails the test under STRATA_REQUIRE_REDIS=1.
mod common;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn w(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|a| a.as_bytes().to_vec()).collect()
}

fn refs(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(|a| &a[..]).collect()
}

/// The same data on both servers: a list, a set and a sorted set of overlapping elements,
/// numeric and word weights (some missing), hash fields, and a string of the wrong type.
fn load(rng: &mut SmallRng, conns: &mut [&mut Raw]) {
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
    let elements: Vec<String> = (0..40)
        .map(|i| {
            if i % 3 == 0 {
                format!("e{i}")
            } else {
                (i as i64 * 7 - 90).to_string()
            }
        })
        .collect();
    for (i, e) in elements.iter().enumerate() {
        cmds.push(w(&format!("RPUSH l {e}")));
        if i % 2 == 0 {
            cmds.push(w(&format!("RPUSH l {e}")));
        }
        cmds.push(w(&format!("SADD s {e}")));
        cmds.push(w(&format!("ZADD z {} {e}", rng.gen_range(-50..50))));
        if rng.gen_range(0..8) != 0 {
            let weight = format!("{}.{}", rng.gen_range(-1000..1000), i);
            cmds.push(w(&format!("SET w_{e} {weight}")));
            cmds.push(w(&format!("HSET h_{e} f {weight} g word{i}")));
            cmds.push(w(&format!("SET word_{e} {}{i}", ["b", "a", "c"][i % 3])));
        }
    }
    cmds.push(w("SET notnum_e3 abc"));
    cmds.push(w("SET str x"));
    cmds.push(w("RPUSH onlynums 3 1 2 10 -5 1.5"));
    for c in &cmds {
        for conn in conns.iter_mut() {
            let r = conn.call(&refs(c));
            assert!(!r.starts_with(b"-"), "{:?}", String::from_utf8_lossy(&r));
        }
    }
}

/// How much of a reply Redis decides: ties under ALPHA BY (elements whose weights are equal
/// or missing) come in the order of a set's layout, and under LIMIT its unstable partial sort
/// picks which of them make the cut.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    Exact,
    Multiset,
    Count,
}

/// One random SORT (or SORT_RO), and how its reply is compared.
fn random_sort(rng: &mut SmallRng) -> (Vec<Vec<u8>>, Order) {
    let ro = rng.gen_range(0..5) == 0;
    let src = ["l", "s", "z", "onlynums", "missing"][rng.gen_range(0..5)];
    let mut c = vec![
        if ro { "SORT_RO" } else { "SORT" }.to_string(),
        src.to_string(),
    ];
    let mut by_pattern = false;
    let mut alpha = false;
    let mut limited = false;
    let mut dontsort = false;
    match rng.gen_range(0..6) {
        0 => {
            c.extend(["BY".into(), "w_*".into()]);
            by_pattern = true;
        }
        1 => {
            c.extend(["BY".into(), "h_*->f".into()]);
            by_pattern = true;
        }
        2 => {
            c.extend(["BY".into(), "word_*".into()]);
            by_pattern = true;
        }
        3 if src != "s" => {
            c.extend(["BY".into(), "nosort".into()]);
            dontsort = true;
        }
        _ => {}
    }
    if rng.gen_range(0..3) == 0 {
        c.extend([
            "LIMIT".into(),
            rng.gen_range(-2..12).to_string(),
            rng.gen_range(-2..12).to_string(),
        ]);
        limited = true;
    }
    for _ in 0..rng.gen_range(0..3) {
        let g = ["#", "w_*", "h_*->g", "h_*->", "nostar", "word_*"][rng.gen_range(0..6)];
        c.extend(["GET".into(), g.into()]);
    }
    if rng.gen() {
        c.push(if rng.gen() { "DESC" } else { "ASC" }.into());
    }
    // Numbers sort numerically; words need ALPHA (else Redis' "can't be converted" error,
    // which is checked too, now and then).
    let words = src != "onlynums" || by_pattern;
    if (words && rng.gen_range(0..6) != 0) || rng.gen_range(0..4) == 0 {
        c.push("ALPHA".into());
        alpha = true;
    }
    if !ro && rng.gen_range(0..3) == 0 {
        c.extend(["STORE".into(), format!("dst{}", rng.gen_range(0..3))]);
    }
    let order = if alpha && by_pattern && !dontsort {
        if limited {
            Order::Count
        } else if src != "l" {
            Order::Multiset
        } else {
            Order::Exact
        }
    } else {
        Order::Exact
    };
    (c.into_iter().map(String::into_bytes).collect(), order)
}

/// The bulk items of a RESP array reply, sorted (for replies whose order is Redis' choice).
fn sorted_items(reply: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(reply);
    let mut lines: Vec<Vec<u8>> = text
        .split("\r\n")
        .skip(1)
        .map(|l| l.as_bytes().to_vec())
        .collect();
    lines.sort();
    lines
}

/// Checks Strata's reply against Redis' as far as `order` says Redis decides it; true when
/// compared byte for byte.
fn same(order: Order, strata: &[u8], redis: &[u8], what: &str) -> bool {
    match order {
        Order::Count => {
            assert_eq!(
                sorted_items(strata).len(),
                sorted_items(redis).len(),
                "{what}"
            );
            false
        }
        Order::Multiset => {
            assert_eq!(sorted_items(strata), sorted_items(redis), "{what}");
            false
        }
        Order::Exact => {
            let text = String::from_utf8_lossy;
            assert_eq!(text(strata), text(redis), "{what}");
            true
        }
    }
}

#[test]
fn random_sorts_answer_and_store_as_redis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(redis) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let strata = server_with_threads(2);
    let mut s = strata.raw();
    let mut r = Raw::connect(redis.port);
    let mut rng = SmallRng::seed_from_u64(0x5047_0001);
    load(&mut rng, &mut [&mut s, &mut r]);
    let mut compared = 0;
    for step in 0..1500 {
        let (cmd, order) = random_sort(&mut rng);
        let a = refs(&cmd);
        let (sr, rr) = (s.call(&a), r.call(&a));
        let what = || format!("step {step}: {}", String::from_utf8_lossy(&cmd.join(&b' ')));
        if same(order, &sr, &rr, &what()) {
            compared += 1;
        }
        // An error stored nothing: the destination still holds an earlier result.
        let stored = cmd
            .iter()
            .position(|x| x == b"STORE")
            .filter(|_| !rr.starts_with(b"-"));
        if let Some(i) = stored {
            let dst = &cmd[i + 1];
            let check = [&b"LRANGE"[..], dst, b"0", b"-1"];
            let (sl, rl) = (s.call(&check), r.call(&check));
            same(order, &sl, &rl, &what());
            let ty = [&b"TYPE"[..], dst];
            assert_eq!(s.call(&ty), r.call(&ty), "{}", what());
        }
    }
    assert!(compared > 800, "only {compared} compared byte for byte");
}

#[test]
fn fixed_cases_answer_as_redis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(redis) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let strata = server_with_threads(2);
    let mut s = strata.raw();
    let mut r = Raw::connect(redis.port);
    for c in [
        "RPUSH l 3 1 2",
        "SORT l",
        "SORT l DESC",
        "SORT l LIMIT 1 1",
        "SORT l LIMIT 0 0",
        "SORT l LIMIT -5 -5",
        "SORT l LIMIT 1",
        "SORT l LIMIT x 1",
        "SORT l BADOPT",
        "SORT_RO l STORE d",
        "SORT l BY nosort DESC",
        "SET str x",
        "SORT str",
        "SORT missing",
        "SORT missing STORE d",
        "SORT l STORE d",
        "LRANGE d 0 -1",
        "SORT missing STORE d",
        "EXISTS d",
        "SET w_1 10",
        "SET w_2 x",
        "SORT l BY w_*",
        "SORT l BY w_* ALPHA",
        "SORT l BY nostar GET w_* GET # GET nostar",
        "RPUSH words b a c",
        "SORT words",
        "SORT words ALPHA",
        "ZADD z 1 a 5 b 2 c 10 d 3 e",
        "SORT z BY nosort",
        "SORT z BY nosort DESC",
        "SORT z BY nosort LIMIT 1 3",
        "SORT z BY nosort DESC LIMIT 0 2",
        "ZADD zi -inf x +inf y 0 zero",
        "SORT zi ALPHA",
        "HSET h_1 f 5",
        "SORT l BY h_*->f GET h_*->f GET h_*-> STORE d",
        "LRANGE d 0 -1",
        "COMMAND GETKEYS SORT abc STORE def",
        "COMMAND GETKEYS SORT abc STORE x GET y STORE def",
        "COMMAND GETKEYS SORT_RO abc",
        "SORT_RO l",
    ] {
        let args = w(c);
        let a = refs(&args);
        let (sr, rr) = (s.call(&a), r.call(&a));
        assert_eq!(
            String::from_utf8_lossy(&sr),
            String::from_utf8_lossy(&rr),
            "{c}"
        );
    }
}

#[test]
fn get_patterns_read_values_on_ssd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = tiered_server(&dir, "24mb", "2");
    let mut c = s.client();
    let n = 50_000;
    fill(&mut c, 0..n, 0, 500);
    let disk = info_u64(&mut c, "tiered", "tiered_disk_keys");
    assert!(disk > 10_000, "only {disk} offloaded");
    let picked: Vec<usize> = (0..n).step_by(997).collect();
    for i in &picked {
        let _: () = redis::cmd("RPUSH")
            .arg("ids")
            .arg(i)
            .query(&mut c)
            .expect("rpush");
    }
    let got: Vec<Vec<u8>> = redis::cmd("SORT")
        .arg("ids")
        .arg("GET")
        .arg("key:*")
        .query(&mut c)
        .expect("sort");
    let want: Vec<Vec<u8>> = picked.iter().map(|&i| value(i, 0, 500)).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "a value read through GET key:* differs");
    let reads = info_u64(&mut c, "tiered", "tiered_reads");
    assert!(reads > 0, "no value was read from disk");
}

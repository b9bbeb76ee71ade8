//! jemalloc under the server and active defrag, end to end: INFO memory's allocator fields,
//! the `activedefrag` settings, and a defrag that moves values (strings and packed hashes)
//! out of emptied slabs without changing a byte of them.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redis::Connection;

const STRINGS: usize = 60_000;
const HASHES: usize = 20_000;
const FIELDS: usize = 8;

/// Keys kept after the deletes: every key of even runs of 512, one in eight of odd runs, so
/// the slabs of the odd runs are left nearly empty beside full ones.
fn kept(i: usize) -> bool {
    (i / 512).is_multiple_of(2) || i.is_multiple_of(8)
}

fn field_value(i: usize, f: usize) -> Vec<u8> {
    value(i, f + 1, 20)
}

fn allocator(c: &mut Connection) -> [u64; 4] {
    info_u64s(
        c,
        "memory",
        [
            "allocator_allocated",
            "allocator_active",
            "allocator_resident",
            "allocator_frag_bytes",
        ],
    )
}

#[test]
fn info_memory_shows_jemalloc_and_defrag_settings() {
    let s = server_with_threads(1);
    let mut c = s.client();
    assert_eq!(
        info_str(&mut c, "memory", "mem_allocator"),
        "jemalloc-5.3.0"
    );
    let [allocated, active, resident, frag_bytes] = allocator(&mut c);
    assert!(
        allocated > 0 && active >= allocated && resident >= active,
        "allocated {allocated} active {active} resident {resident}"
    );
    assert_eq!(frag_bytes, active - allocated);
    let ratio: f64 = info_str(&mut c, "memory", "allocator_frag_ratio")
        .parse()
        .expect("allocator_frag_ratio is a number");
    assert!(ratio >= 1.0, "allocator_frag_ratio {ratio}");
    // Nothing to defrag in an empty server.
    assert_eq!(info_u64(&mut c, "memory", "active_defrag_running"), 0);
    assert_eq!(info_u64(&mut c, "stats", "active_defrag_hits"), 0);
    assert_eq!(info_u64(&mut c, "stats", "active_defrag_misses"), 0);

    let get = |c: &mut Connection, name: &str| -> Vec<String> { q(c, &["CONFIG", "GET", name]) };
    assert_eq!(get(&mut c, "activedefrag"), ["activedefrag", "yes"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "activedefrag", "no"]);
    assert_eq!(get(&mut c, "activedefrag"), ["activedefrag", "no"]);
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "active-defrag-ignore-bytes", "2mb"],
    );
    assert_eq!(
        get(&mut c, "active-defrag-ignore-bytes"),
        ["active-defrag-ignore-bytes", "2097152"]
    );
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("active-defrag-cycle-max")
        .arg("100")
        .query::<()>(&mut c)
        .expect_err("cycle-max past 99");
    assert!(
        err.to_string()
            .contains("argument must be between 1 and 99 inclusive"),
        "{err}"
    );
    let err = redis::cmd("CONFIG")
        .arg("SET")
        .arg("activedefrag")
        .arg("maybe")
        .query::<()>(&mut c)
        .expect_err("not yes/no");
    assert!(
        err.to_string().contains("argument must be 'yes' or 'no'"),
        "{err}"
    );
}

#[test]
fn defrag_moves_values_without_changing_them() {
    let s = server_with_threads(1);
    let mut c = s.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "activedefrag", "no"]);
    fill(&mut c, 0..STRINGS, 0, 100);
    for chunk in (0..HASHES).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for &i in chunk {
            let cmd = p.cmd("HSET").arg(format!("h:{i}"));
            for f in 0..FIELDS {
                cmd.arg(format!("f{f}")).arg(field_value(i, f));
            }
            cmd.ignore();
        }
        p.query::<()>(&mut c).expect("pipelined HSET");
    }
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "h:0"]),
        "listpack"
    );
    for chunk in (0..STRINGS.max(HASHES)).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for &i in chunk.iter().filter(|&&i| !kept(i)) {
            if i < STRINGS {
                p.cmd("DEL").arg(format!("key:{i}")).ignore();
            }
            if i < HASHES {
                p.cmd("DEL").arg(format!("h:{i}")).ignore();
            }
        }
        p.query::<()>(&mut c).expect("pipelined DEL");
    }
    let [_, _, _, frag_before] = allocator(&mut c);
    assert!(
        frag_before > 1 << 20,
        "deletes left {frag_before} bytes of fragmentation"
    );

    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "active-defrag-ignore-bytes", "1mb"],
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "active-defrag-cycle-min", "25"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "activedefrag", "yes"]);
    // Until a walk has moved blocks and the fragmentation it can remove is gone.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let hits = info_u64(&mut c, "stats", "active_defrag_hits");
        let running = info_u64(&mut c, "memory", "active_defrag_running");
        if hits > 0 && (running == 0 || hits == last) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "defrag still running: {hits} hits"
        );
        last = hits;
    }
    let hits = info_u64(&mut c, "stats", "active_defrag_hits");
    let misses = info_u64(&mut c, "stats", "active_defrag_misses");
    assert!(hits > 0 && misses > 0, "hits {hits} misses {misses}");
    let [_, _, _, frag_after] = allocator(&mut c);
    assert!(
        frag_after < frag_before,
        "fragmentation {frag_before} before defrag, {frag_after} after"
    );

    // Every value read back exactly; deleted keys stay gone.
    for chunk in (0..STRINGS).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("GET").arg(format!("key:{i}"));
        }
        let got: Vec<Option<Vec<u8>>> = p.query(&mut c).expect("pipelined GET");
        for (&i, v) in chunk.iter().zip(got) {
            let want = kept(i).then(|| value(i, 0, 100));
            assert_eq!(v, want, "key:{i}");
        }
    }
    for i in 0..HASHES {
        let got: Vec<Vec<u8>> = redis::cmd("HGETALL")
            .arg(format!("h:{i}"))
            .query(&mut c)
            .expect("HGETALL");
        let want: Vec<Vec<u8>> = if kept(i) {
            (0..FIELDS)
                .flat_map(|f| [format!("f{f}").into_bytes(), field_value(i, f)])
                .collect()
        } else {
            Vec::new()
        };
        assert_eq!(got, want, "h:{i}");
    }
}

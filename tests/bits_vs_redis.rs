//! Bitmaps and HyperLogLogs against the real redis-server, byte for byte.
//!
//! - Seeded random sequences of SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD,
//!   BITFIELD_RO, PFADD, PFCOUNT, PFMERGE and PFDEBUG (with GET of the values, DEL, SET,
//!   SETRANGE that corrupts HLLs, OBJECT ENCODING and CONFIG SET hll-sparse-max-bytes among them) go to both
//!   servers; every reply must be the same bytes. Keys spread over Strata's two shards, so
//!   BITOP, PFCOUNT and PFMERGE run both on one shard and across shards.
//! - HLLs made by redis-server, sparse and dense, move to Strata by DUMP/RESTORE and back:
//!   they count the same, and the same PFADDs and PFMERGEs leave the same bytes on both.
//!
//! Without redis-server installed these tests say so and pass, unless STRATA_REQUIRE_REDIS=1.
mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A random command generator over a small key space, biased towards what exercises the
/// representations: small offsets, fields across byte boundaries, HLLs that turn dense.
struct Gen {
    rng: StdRng,
}

const BITMAP_KEYS: &[&str] = &["bm0", "bm1", "bm2", "bm3", "bm4", "{t}bm5"];
const HLL_KEYS: &[&str] = &["hll0", "hll1", "hll2", "hll3", "hll4", "{t}hll5"];

impl Gen {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.gen_range(0..from.len())]
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.gen_range(0..100) < percent
    }

    /// Mostly a key of `own`, sometimes one of the other family.
    fn key(&mut self, own: &[&'static str]) -> String {
        if self.chance(85) {
            self.pick(own).to_string()
        } else {
            let all = [BITMAP_KEYS, HLL_KEYS].concat();
            self.pick(&all).to_string()
        }
    }

    fn int_in(&mut self, lo: i64, hi: i64) -> String {
        self.rng.gen_range(lo..=hi).to_string()
    }

    /// An integer argument: usually small, sometimes extreme or not an integer.
    fn int_arg(&mut self, small: i64) -> String {
        match self.rng.gen_range(0..100) {
            0..=84 => self.int_in(-small, small),
            85..=89 => self.rng.gen::<i64>().to_string(),
            90 => i64::MAX.to_string(),
            91 => i64::MIN.to_string(),
            92 => "9223372036854775808".into(),
            93 => "x".into(),
            94 => "".into(),
            95 => "01".into(),
            _ => self.int_in(-3, 3),
        }
    }

    fn bit_offset(&mut self) -> String {
        match self.rng.gen_range(0..100) {
            0..=69 => self.int_in(0, 256),
            70..=89 => self.int_in(0, 5000),
            90..=94 => self.int_in(0, 1 << 19),
            95 => "-1".into(),
            96 => "4294967296".into(),
            97 => "abc".into(),
            98 => "".into(),
            _ => "99999999999999999999".into(),
        }
    }

    fn unit(&mut self) -> Option<&'static str> {
        match self.rng.gen_range(0..10) {
            0..=2 => Some("BIT"),
            3 => Some("bit"),
            4..=5 => Some("BYTE"),
            6 => Some("bits"),
            _ => None,
        }
    }

    fn field_type(&mut self) -> String {
        match self.rng.gen_range(0..100) {
            0..=44 => format!("u{}", self.rng.gen_range(1..=63)),
            45..=89 => format!("i{}", self.rng.gen_range(1..=64)),
            90 => "u64".into(),
            91 => "i0".into(),
            92 => "i65".into(),
            93 => "I8".into(),
            94 => "u".into(),
            95 => "".into(),
            96 => "x8".into(),
            97 => "u08".into(),
            _ => format!("i{}", [8, 16, 32, 64][self.rng.gen_range(0..4)]),
        }
    }

    fn field_offset(&mut self) -> String {
        match self.rng.gen_range(0..100) {
            0..=59 => self.int_in(0, 300),
            60..=89 => format!("#{}", self.rng.gen_range(0..40)),
            90..=94 => self.int_in(0, 40_000),
            95 => "#-1".into(),
            96 => "-1".into(),
            97 => "#".into(),
            98 => "4294967296".into(),
            _ => "#x".into(),
        }
    }

    fn element(&mut self) -> String {
        format!("e{}", self.rng.gen_range(0..20_000))
    }

    fn command(&mut self) -> Vec<String> {
        let s = |v: &str| v.to_string();
        let mut c: Vec<String>;
        match self.rng.gen_range(0..1000) {
            0..=119 => {
                let bit = match self.rng.gen_range(0..20) {
                    0 => s("2"),
                    1 => s("-1"),
                    2 => s("x"),
                    n => (n % 2).to_string(),
                };
                c = vec![s("SETBIT"), self.key(BITMAP_KEYS), self.bit_offset(), bit];
            }
            120..=189 => c = vec![s("GETBIT"), self.key(BITMAP_KEYS), self.bit_offset()],
            190..=279 => {
                c = vec![s("BITCOUNT"), self.key(BITMAP_KEYS)];
                let n = self.rng.gen_range(0..10);
                if n >= 2 {
                    c.push(self.int_arg(70));
                    c.push(self.int_arg(70));
                    if let Some(u) = self.unit() {
                        c.push(s(u));
                    }
                } else if n == 1 {
                    c.push(self.int_arg(70));
                }
                if self.chance(2) {
                    c.push(s("BIT"));
                }
            }
            280..=379 => {
                let bit = match self.rng.gen_range(0..20) {
                    0 => s("2"),
                    1 => s("x"),
                    n => (n % 2).to_string(),
                };
                c = vec![s("BITPOS"), self.key(BITMAP_KEYS), bit];
                let n = self.rng.gen_range(0..4);
                if n >= 1 {
                    c.push(self.int_arg(70));
                }
                if n >= 2 {
                    c.push(self.int_arg(70));
                }
                if n >= 3 {
                    if let Some(u) = self.unit() {
                        c.push(s(u));
                    }
                }
                if self.chance(2) {
                    c.push(s("BYTE"));
                }
            }
            380..=449 => {
                let op = ["AND", "OR", "XOR", "NOT", "and", "xor", "NOR"][self.rng.gen_range(0..7)];
                c = vec![s("BITOP"), s(op), self.key(BITMAP_KEYS)];
                let n = if op.eq_ignore_ascii_case("not") && self.chance(90) {
                    1
                } else {
                    self.rng.gen_range(1..=4)
                };
                for _ in 0..n {
                    c.push(self.key(BITMAP_KEYS));
                }
            }
            450..=569 => {
                let ro = self.chance(20);
                c = vec![
                    s(if ro { "BITFIELD_RO" } else { "BITFIELD" }),
                    self.key(BITMAP_KEYS),
                ];
                for _ in 0..self.rng.gen_range(0..=4) {
                    match self.rng.gen_range(0..20) {
                        0..=6 => {
                            c.extend([s("GET"), self.field_type(), self.field_offset()]);
                        }
                        7..=11 => {
                            let v = self.int_arg(300);
                            c.extend([s("SET"), self.field_type(), self.field_offset(), v]);
                        }
                        12..=16 => {
                            let v = self.int_arg(300);
                            c.extend([s("INCRBY"), self.field_type(), self.field_offset(), v]);
                        }
                        17..=18 => {
                            let o = ["WRAP", "SAT", "FAIL", "sat", "fail", "NONE"]
                                [self.rng.gen_range(0..6)];
                            c.extend([s("OVERFLOW"), s(o)]);
                        }
                        _ => {
                            // A truncated or unknown subcommand.
                            let sub = ["GET", "SET", "INCRBY", "OVERFLOW", "DEL"]
                                [self.rng.gen_range(0..5)];
                            c.push(s(sub));
                            if self.chance(50) {
                                c.push(self.field_type());
                            }
                        }
                    }
                }
            }
            570..=719 => {
                c = vec![s("PFADD"), self.key(HLL_KEYS)];
                let n = match self.rng.gen_range(0..10) {
                    0 => 0,
                    1..=6 => self.rng.gen_range(1..=5),
                    7..=8 => self.rng.gen_range(5..=60),
                    _ => self.rng.gen_range(60..=1500),
                };
                for _ in 0..n {
                    c.push(self.element());
                }
            }
            720..=819 => {
                c = vec![s("PFCOUNT")];
                for _ in 0..self.rng.gen_range(1..=3) {
                    c.push(self.key(HLL_KEYS));
                }
            }
            820..=869 => {
                c = vec![s("PFMERGE"), self.key(HLL_KEYS)];
                for _ in 0..self.rng.gen_range(0..=3) {
                    c.push(self.key(HLL_KEYS));
                }
            }
            870..=929 => c = vec![s("GET"), self.key(HLL_KEYS)],
            930..=941 => c = vec![s("OBJECT"), s("ENCODING"), self.key(BITMAP_KEYS)],
            942..=949 => {
                let sub = ["ENCODING", "DECODE", "TODENSE", "decode", "GETREG", "NOPE"]
                    [self.rng.gen_range(0..6)];
                c = vec![s("PFDEBUG"), s(sub), self.key(HLL_KEYS)];
            }
            950..=956 => {
                // Corrupt a value: one byte anywhere in it (headers included).
                let b = char::from(self.rng.gen_range(0..128u8)).to_string();
                let at = if self.chance(20) {
                    self.int_in(0, 20)
                } else {
                    self.int_in(0, 12_400)
                };
                c = vec![s("SETRANGE"), self.key(HLL_KEYS), at, b];
            }
            957..=969 => {
                let v = match self.rng.gen_range(0..4) {
                    0 => s("HYLL"),
                    1 => s("12345"),
                    2 => "\u{7f}".repeat(self.rng.gen_range(0..40)),
                    _ => s("hello world"),
                };
                c = vec![s("SET"), self.key(BITMAP_KEYS), v];
            }
            970..=994 => c = vec![s("DEL"), self.key(HLL_KEYS)],
            _ => {
                let v = ["3000", "200", "0", "1000", "50"][self.rng.gen_range(0..5)];
                c = vec![s("CONFIG"), s("SET"), s("hll-sparse-max-bytes"), s(v)];
            }
        }
        c
    }
}

/// How often each kind of reply came (errors by their text), to show what a run covered.
type Tally = std::collections::BTreeMap<String, usize>;

fn kind_of(reply: &[u8]) -> String {
    match reply.first() {
        Some(b'-') => String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned(),
        Some(b':') => "integer".into(),
        Some(b'*') => "array".into(),
        Some(b'$') if reply.starts_with(b"$-1") => "nil".into(),
        Some(b'$') => "bulk".into(),
        _ => "status".into(),
    }
}

/// Sends `cmds` to both servers (pipelined) and compares every reply.
fn compare(
    strata: &mut Raw,
    redis: &mut Raw,
    cmds: &[Vec<String>],
    (seed, first): (u64, usize),
    tally: &mut Tally,
) {
    let mut req = Vec::new();
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
        req.extend_from_slice(&cmd(&args));
    }
    strata.send(&req);
    redis.send(&req);
    for (n, c) in cmds.iter().enumerate() {
        let want = redis.reply();
        let got = strata.reply();
        *tally
            .entry(format!("{} {}", c[0], kind_of(&want)))
            .or_default() += 1;
        assert_bytes(
            &got,
            &want,
            &format!("seed {seed}, command {}: {c:?}", first + n),
        );
    }
}

#[test]
fn random_bit_and_hll_commands_answer_like_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let (mut strata, mut redis) = (s.raw(), Raw::connect(real.port));
    // Both shards hold keys of both families.
    for family in [BITMAP_KEYS, HLL_KEYS] {
        let shards: std::collections::HashSet<_> =
            family.iter().map(|k| shard_of(k.as_bytes(), 2)).collect();
        assert_eq!(shards.len(), 2, "{family:?} on both shards");
    }
    let mut total = 0;
    let mut tally = Tally::new();
    for seed in [1u64, 2, 3, 4] {
        let mut g = Gen {
            rng: StdRng::seed_from_u64(seed),
        };
        let cmds: Vec<Vec<String>> = (0..6_000).map(|_| g.command()).collect();
        for (n, batch) in cmds.chunks(64).enumerate() {
            compare(&mut strata, &mut redis, batch, (seed, n * 64), &mut tally);
        }
        // Every value ends the same, byte for byte.
        let keys: Vec<Vec<String>> = [BITMAP_KEYS, HLL_KEYS]
            .concat()
            .iter()
            .map(|k| vec!["GET".to_string(), k.to_string()])
            .collect();
        compare(
            &mut strata,
            &mut redis,
            &keys,
            (seed, cmds.len()),
            &mut tally,
        );
        total += cmds.len();
        let reset = [
            vec!["FLUSHALL".to_string()],
            ["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]
                .map(String::from)
                .to_vec(),
        ];
        compare(&mut strata, &mut redis, &reset, (seed, 0), &mut tally);
    }
    println!("{total} random commands answered the same by Strata and redis-server:");
    for (kind, n) in &tally {
        println!("  {n:6}  {kind}");
    }
}

/// The RDB version in a DUMP payload's footer.
fn rdb_version(p: &[u8]) -> u16 {
    u16::from_le_bytes([p[p.len() - 10], p[p.len() - 9]])
}

/// `p` with RDB version `ver` stamped in place of its own (so an older redis-server takes a
/// payload whose object it can read).
fn restamp(p: &[u8], ver: u16) -> Vec<u8> {
    payload(&p[..p.len() - 10], ver)
}

#[test]
fn hlls_move_between_redis_and_strata_and_stay_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let (mut rc, s) = (real.client(), server());
    let mut c = s.client();
    let mut rng = StdRng::seed_from_u64(7);
    let redis_ver = {
        let _: () = q(&mut rc, &["SET", "probe", "x"]);
        rdb_version(&dump(&mut rc, "probe"))
    };
    // Sizes on both sides of sparse -> dense; counted (cached) or not.
    let sizes = [0usize, 1, 5, 40, 200, 700, 1500, 3000, 20_000];
    let mut moved = 0;
    for (n, &size) in sizes.iter().enumerate() {
        for cached in [false, true] {
            let key = format!("h{n}:{cached}");
            let mut add: Vec<String> = vec!["PFADD".into(), key.clone()];
            add.extend((0..size).map(|_| format!("x{}", rng.gen::<u32>())));
            let args: Vec<&str> = add.iter().map(String::as_str).collect();
            let _: i64 = q(&mut rc, &args);
            if cached {
                let _: i64 = q(&mut rc, &["PFCOUNT", &key]);
            }
            // redis-server -> Strata.
            let from_redis = dump(&mut rc, &key);
            restore(&mut c, &key, 0, &from_redis, &[]).expect("RESTORE of redis' HLL");
            assert_eq!(get_bytes(&mut c, &key), get_bytes(&mut rc, &key), "{key}");
            let count = |c: &mut redis::Connection| -> i64 { q(c, &["PFCOUNT", &key]) };
            assert_eq!(count(&mut c), count(&mut rc), "PFCOUNT {key}");
            // The same PFADDs leave the same bytes.
            for round in 0..3 {
                let mut more: Vec<String> = vec!["PFADD".into(), key.clone()];
                more.extend((0..size / 3 + 3).map(|_| format!("y{}", rng.gen::<u32>())));
                let args: Vec<&str> = more.iter().map(String::as_str).collect();
                let (a, b): (i64, i64) = (q(&mut c, &args), q(&mut rc, &args));
                assert_eq!(a, b, "PFADD {key} round {round}");
                assert_eq!(get_bytes(&mut c, &key), get_bytes(&mut rc, &key), "{key}");
            }
            assert_eq!(count(&mut c), count(&mut rc), "PFCOUNT {key}");
            assert_eq!(get_bytes(&mut c, &key), get_bytes(&mut rc, &key), "{key}");
            // Strata -> redis-server.
            let from_strata = dump(&mut c, &key);
            assert!(check_crc(&from_strata));
            let back = format!("back:{key}");
            let p = if rdb_version(&from_strata) > redis_ver {
                restamp(&from_strata, redis_ver)
            } else {
                from_strata
            };
            restore(&mut rc, &back, 0, &p, &[]).expect("RESTORE of Strata's HLL");
            assert_eq!(get_bytes(&mut rc, &back), get_bytes(&mut c, &key), "{back}");
            let (a, b): (i64, i64) = (q(&mut rc, &["PFCOUNT", &back]), count(&mut c));
            assert_eq!(a, b, "PFCOUNT {back}");
            moved += 1;
        }
    }
    // Merges of everything moved, on both sides, byte for byte.
    let all: Vec<String> = sizes
        .iter()
        .enumerate()
        .flat_map(|(n, _)| [format!("h{n}:false"), format!("h{n}:true")])
        .collect();
    for dest in ["m:sparse", "m:all"] {
        let mut args = vec!["PFMERGE", dest];
        let take = if dest == "m:sparse" { 6 } else { all.len() };
        args.extend(all.iter().take(take).map(String::as_str));
        let (_, _): (String, String) = (q(&mut c, &args), q(&mut rc, &args));
        assert_eq!(get_bytes(&mut c, dest), get_bytes(&mut rc, dest), "{dest}");
        let count = |c: &mut redis::Connection| -> i64 { q(c, &["PFCOUNT", dest]) };
        assert_eq!(count(&mut c), count(&mut rc), "PFCOUNT {dest}");
    }
    let mut union = vec!["PFCOUNT"];
    union.extend(all.iter().map(String::as_str));
    let (a, b): (i64, i64) = (q(&mut c, &union), q(&mut rc, &union));
    assert_eq!(a, b, "PFCOUNT of the union");
    println!("{moved} HLLs moved both ways and stayed the same");
}

#[test]
fn crafted_sparse_hlls_answer_like_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let (mut strata, mut redis) = (s.raw(), Raw::connect(real.port));
    // Opcodes after a header with a stale count: runs covering too few or too many registers,
    // a VAL just past the end, XZEROs cut short, VAL runs of every length.
    let bodies: &[&[u8]] = &[
        b"\x7f\xff",
        b"\x7f\xff\x80",
        b"\x7f\xff\x00",
        b"\x7f\xfe\x81",
        b"\x7f\xfe\x01",
        b"\x80\x7f\xff",
        b"\x7f\xfe\x80\x00",
        b"\x5f\xff\x5f\xff\x5f\xff",
        b"\x7f",
        b"\x7f\xfe\x40",
        b"\x83\x7f\xfb",
        b"\xff\xff\xff\xff\x7f\xef",
        b"",
        b"\x00",
        b"\xbc\x7f\xfe",
    ];
    let mut n = 0;
    for body in bodies {
        let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        v.extend_from_slice(body);
        for max in ["3000", "0"] {
            let set: [&[u8]; 3] = [b"SET", b"k", &v];
            let cmds: [&[&[u8]]; 10] = [
                &[b"CONFIG", b"SET", b"hll-sparse-max-bytes", max.as_bytes()],
                &set,
                &[b"PFADD", b"k", b"a", b"b", b"c"],
                &[b"GET", b"k"],
                &set,
                &[b"PFCOUNT", b"k"],
                &[b"PFCOUNT", b"k", b"missing"],
                &[b"PFMERGE", b"d", b"k"],
                &[b"PFMERGE", b"k", b"d"],
                &[b"GET", b"k"],
            ];
            for c in cmds {
                let (got, want) = (strata.call(c), redis.call(c));
                let what: Vec<String> = c.iter().map(|a| show(a)).collect();
                assert_bytes(
                    &got,
                    &want,
                    &format!("{} with {}", what.join(" "), show(body)),
                );
                n += 1;
            }
        }
    }
    redis.call(&[b"CONFIG", b"SET", b"hll-sparse-max-bytes", b"3000"]);
    println!("{n} commands on crafted HLLs answered the same");
}

/// Every bit and HLL command on a key of another type (lists and a hash made by redis-server
/// and moved to Strata by DUMP/RESTORE, on both shards) answers as Redis: WRONGTYPE for a
/// source, while BITOP's destination is overwritten whatever it held.
#[test]
fn commands_on_other_types_answer_like_redis() {
    let dir = tempfile::tempdir().unwrap();
    let Some(real) = RedisServer::start(dir.path(), "dump.rdb", &[]) else {
        return;
    };
    let s = server();
    let (mut rc, mut c) = (real.client(), s.client());
    let (mut strata, mut redis) = (s.raw(), Raw::connect(real.port));
    let (list_a, list_b) = keys_on_different_shards("list", 2);
    let make: [&[&str]; 4] = [
        &["RPUSH", &list_a, "a", "b"],
        &["RPUSH", &list_b, "c"],
        &["RPUSH", "dest", "x"],
        &["HSET", "hash", "f", "v"],
    ];
    for m in make {
        let _: i64 = q(&mut rc, m);
        restore(&mut c, m[1], 0, &dump(&mut rc, m[1]), &[]).expect("RESTORE of redis' value");
    }
    let _: () = q(&mut rc, &["SET", "str", "\u{ff}"]);
    let _: () = q(&mut c, &["SET", "str", "\u{ff}"]);
    let (a, b) = (list_a.as_str(), list_b.as_str());
    let cmds: Vec<Vec<String>> = [
        &["SETBIT", a, "0", "1"][..],
        &["SETBIT", a, "x", "1"],
        &["GETBIT", a, "0"],
        &["BITCOUNT", a],
        &["BITCOUNT", a, "0", "-1", "BIT"],
        &["BITPOS", a, "1"],
        &["BITFIELD", a, "GET", "u8", "0"],
        &["BITFIELD", a, "SET", "u8", "0", "1"],
        &["BITFIELD_RO", a, "GET", "u8", "0"],
        &["BITOP", "AND", "out", "str", a],
        &["BITOP", "OR", "out", a, b],
        &["BITOP", "NOT", "out", b],
        &["PFADD", a, "x"],
        &["PFADD", "hash"],
        &["PFCOUNT", a],
        &["PFCOUNT", "str", b],
        &["PFMERGE", a, "str"],
        &["PFMERGE", "out", b],
        &["PFDEBUG", "ENCODING", "hash"],
        &["TYPE", a],
        &["EXISTS", "out"],
        // A destination of another type is replaced.
        &["BITOP", "NOT", "dest", "str"],
        &["TYPE", "dest"],
        &["GET", "dest"],
        &["BITOP", "OR", "hash", "missing"],
        &["EXISTS", "hash"],
    ]
    .iter()
    .map(|c| c.iter().map(|a| a.to_string()).collect())
    .collect();
    compare(&mut strata, &mut redis, &cmds, (0, 0), &mut Tally::new());
}

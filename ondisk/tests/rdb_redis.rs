//! RDB import and export checked against a real `redis-server`.
//!
//! Import: populate Redis over RESP (strings in every encoding, TTLs, several dbs, and one key
//! of every other type so skipping is exercised), SAVE, read dump.rdb with `RdbReader`.
//! Export: write files with `RdbWriter` (whole, and stitched from fragments), start Redis on
//! them, and compare what it serves. When `redis-server` is absent: see test-support's
//! `RedisLookup::find` (a failure under STRATA_REQUIRE_REDIS=1, else skipped with a NOTE).

use ondisk::rdb::{
    rdb_header, rdb_trailer, types, Crc64, RdbEncoder, RdbItem, RdbReader, RdbWriter,
};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use test_support::{now_ms, redis_server_binary, RedisServer};

/// Deterministic pseudo-random bytes.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

/// Expected string contents: (db, key) -> (value, ttl in ms if any).
type Expected = BTreeMap<(u32, Vec<u8>), (Vec<u8>, Option<u64>)>;

/// Fills a running Redis; returns the strings and the number of non-string keys per type name.
fn populate(r: &mut RedisServer) -> (Expected, HashMap<&'static str, usize>) {
    let mut strings = Expected::new();
    let mut set = |r: &mut RedisServer, db: u32, key: &[u8], value: &[u8], ttl: Option<u64>| {
        r.select(db);
        match ttl {
            Some(ms) => r.ok(&[b"SET", key, value, b"PX", ms.to_string().as_bytes()]),
            None => r.ok(&[b"SET", key, value]),
        }
        strings.insert((db, key.to_vec()), (value.to_vec(), ttl));
    };
    let binary: Vec<u8> = (0..=255u8).collect();
    set(r, 0, b"hello", b"world", None);
    set(r, 0, &binary, &binary, None);
    set(r, 0, b"empty", b"", None);
    for (i, v) in [
        "0",
        "-7",
        "300",
        "70000",
        "-2147483648",
        "2147483648",
        "9223372036854775807",
        "007",
        "-0",
        "3.14",
        "12345678901234567890",
    ]
    .iter()
    .enumerate()
    {
        set(r, 0, format!("int:{i}").as_bytes(), v.as_bytes(), None);
    }
    set(
        r,
        0,
        b"lzf:short",
        "abcabcabcabcabcabcabcabc".as_bytes(),
        None,
    );
    set(
        r,
        0,
        b"lzf:long",
        "compress me please ".repeat(1000).as_bytes(),
        None,
    );
    let big: Vec<u8> = (0..1_000_000u32)
        .map(|i| b"0123456789abcdef"[(i % 16) as usize])
        .collect();
    set(r, 0, b"lzf:1mb", &big, None);
    set(r, 0, b"noise", &noise(1, 10_000), None);
    set(r, 0, b"ttl:text", b"expiring", Some(3_600_000));
    set(r, 0, b"ttl:int", b"42", Some(7_200_000));
    set(
        r,
        0,
        b"ttl:lzf",
        "z".repeat(500).as_bytes(),
        Some(3_600_000),
    );
    for i in 0..500 {
        set(
            r,
            0,
            format!("bulk:{i}").as_bytes(),
            format!("v{i}").as_bytes(),
            None,
        );
    }
    set(r, 3, b"hello", b"from db 3", None);
    set(r, 3, b"ttl:db3", b"x", Some(86_400_000));
    set(r, 3, b"int", b"-1", None);

    let mut others: HashMap<&'static str, usize> = HashMap::new();
    let mut other = |r: &mut RedisServer, db: u32, kind: &'static str, cmds: Vec<Vec<Vec<u8>>>| {
        r.select(db);
        for c in cmds {
            let args: Vec<&[u8]> = c.iter().map(|a| a.as_slice()).collect();
            r.ok(&args);
        }
        *others.entry(kind).or_default() += 1;
    };
    let v = |parts: &[&str]| {
        parts
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    let many = |head: &[&str], n: usize, each: &dyn Fn(usize) -> Vec<String>| {
        let mut c = v(head);
        for i in 0..n {
            c.extend(each(i).into_iter().map(String::into_bytes));
        }
        c
    };
    other(
        r,
        0,
        "list",
        vec![v(&["RPUSH", "list:small", "a", "b", "1"])],
    );
    other(
        r,
        0,
        "list",
        vec![many(&["RPUSH", "list:big"], 5000, &|i| {
            vec![format!("item-{i}")]
        })],
    );
    other(
        r,
        0,
        "hash",
        vec![v(&["HSET", "hash:small", "f", "v", "n", "1"])],
    );
    other(
        r,
        0,
        "hash",
        vec![many(&["HSET", "hash:big"], 300, &|i| {
            vec![format!("f{i}"), "x".repeat(i)]
        })],
    );
    other(r, 0, "set", vec![v(&["SADD", "set:ints", "1", "2", "3"])]);
    other(
        r,
        0,
        "set",
        vec![v(&["SADD", "set:strings", "a", "b", "c"])],
    );
    other(
        r,
        0,
        "set",
        vec![many(&["SADD", "set:big"], 1000, &|i| vec![format!("m{i}")])],
    );
    other(
        r,
        0,
        "zset",
        vec![v(&[
            "ZADD",
            "zset:small",
            "1",
            "a",
            "2.5",
            "b",
            "-inf",
            "c",
        ])],
    );
    other(
        r,
        0,
        "zset",
        vec![many(&["ZADD", "zset:big"], 300, &|i| {
            vec![format!("{i}.5"), format!("m{i}")]
        })],
    );
    other(
        r,
        0,
        "stream",
        vec![
            v(&["XADD", "stream", "*", "field", "value"]),
            v(&["XADD", "stream", "*", "field", "value2", "other", "x"]),
            v(&["XGROUP", "CREATE", "stream", "group", "0"]),
            v(&[
                "XREADGROUP",
                "GROUP",
                "group",
                "alice",
                "COUNT",
                "1",
                "STREAMS",
                "stream",
                ">",
            ]),
        ],
    );
    other(
        r,
        3,
        "list",
        vec![
            v(&["LPUSH", "list:db3", "x"]),
            v(&["PEXPIRE", "list:db3", "3600000"]),
        ],
    );
    other(r, 3, "hash", vec![v(&["HSET", "hash:db3", "a", "b"])]);
    r.ok(&[
        b"FUNCTION",
        b"LOAD",
        b"#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 1 end)",
    ]);
    (strings, others)
}

fn read_rdb(path: &Path) -> (Vec<RdbItem>, u64, u32) {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = RdbReader::new(std::io::BufReader::new(file)).unwrap();
    let mut items = Vec::new();
    while let Some(item) = reader
        .next()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    {
        items.push(item);
    }
    (items, reader.functions_skipped(), reader.version())
}

#[test]
fn import_what_redis_saved() {
    let Some(bin) = redis_server_binary() else {
        return;
    };
    // LFU makes Redis write FREQ opcodes, LRU writes IDLE; the reader must step over both.
    for policy in ["noeviction", "allkeys-lfu", "allkeys-lru"] {
        let dir = tempfile::tempdir().unwrap();
        let mut redis = RedisServer::start_with(
            &bin,
            dir.path(),
            "dump.rdb",
            &["--maxmemory-policy", policy],
        );
        let before = now_ms();
        let (strings, others) = populate(&mut redis);
        let after = now_ms();
        redis.ok(&[b"SAVE"]);
        drop(redis);

        let path = dir.path().join("dump.rdb");
        let (items, functions, version) = read_rdb(&path);
        assert!((9..=12).contains(&version), "version {version}");
        assert_eq!(functions, 1, "{policy}: the Lua library");
        assert!(items
            .iter()
            .any(|i| matches!(i, RdbItem::Aux { key, .. } if &key[..] == b"redis-ver")));

        let mut got = Expected::new();
        let mut skipped: HashMap<&'static str, usize> = HashMap::new();
        let mut skipped_keys = Vec::new();
        for item in items {
            match item {
                RdbItem::String {
                    db,
                    key,
                    value,
                    expire_at_ms,
                } => {
                    let prev = got.insert((db, key.to_vec()), (value.to_vec(), expire_at_ms));
                    assert!(prev.is_none(), "duplicate key {key:?}");
                }
                RdbItem::Skipped { db, key, type_code } => {
                    *skipped.entry(types::name(type_code)).or_default() += 1;
                    skipped_keys.push((db, String::from_utf8(key.to_vec()).unwrap()));
                }
                RdbItem::Object { .. } => panic!("{policy}: objects come only when asked for"),
                RdbItem::Function(_) => panic!("{policy}: libraries come only when asked for"),
                RdbItem::Aux { .. } => {}
            }
        }
        // Asked to keep them, the reader hands over the same keys whole, each value's raw
        // encoding exactly what skipping it consumed (the strings after them still read).
        let file = std::fs::File::open(&path).unwrap();
        let mut reader = RdbReader::new(std::io::BufReader::new(file)).unwrap();
        reader.keep_objects(64 << 20);
        let (mut objects, mut strings_again) = (Vec::new(), 0);
        while let Some(item) = reader.next().unwrap() {
            match item {
                RdbItem::Object {
                    db,
                    key,
                    rdb_type,
                    value,
                    ..
                } => {
                    let mut cursor = ondisk::rdb::RdbCursor::new(&value);
                    ondisk::rdb::codec::skip_value(&mut cursor, rdb_type).unwrap();
                    cursor.finish().unwrap();
                    objects.push((db, String::from_utf8(key.to_vec()).unwrap()));
                }
                RdbItem::String { .. } => strings_again += 1,
                _ => {}
            }
        }
        assert_eq!(
            strings_again,
            got.len(),
            "{policy}: strings read around objects"
        );
        objects.sort();
        let mut expected_objects = skipped_keys.clone();
        expected_objects.sort();
        assert_eq!(objects, expected_objects, "{policy}: objects kept whole");
        assert_eq!(got.len(), strings.len(), "{policy}: string count");
        for ((db, key), (value, ttl)) in &strings {
            let (got_value, got_expire) = got
                .get(&(*db, key.clone()))
                .unwrap_or_else(|| panic!("{policy}: missing db {db} key {key:?}"));
            assert!(got_value == value, "{policy}: value of db {db} key {key:?}");
            match (ttl, got_expire) {
                (None, None) => {}
                (Some(ttl), Some(at)) => {
                    assert!(
                        (before + ttl..=after + ttl).contains(at),
                        "{policy}: expiry of {key:?}: {at} not in {}..={}",
                        before + ttl,
                        after + ttl
                    );
                }
                _ => panic!("{policy}: expiry of {key:?}: want {ttl:?}, got {got_expire:?}"),
            }
        }
        assert_eq!(skipped, others, "{policy}: skipped keys by type");
        assert!(skipped_keys.contains(&(3, "list:db3".to_string())));
        assert!(skipped_keys.contains(&(0, "stream".to_string())));
        // The 1 MB value and the other repetitive ones only fit because Redis LZF-compressed
        // them, so this also proves the LZF path decoded correctly.
        let file_len = std::fs::metadata(&path).unwrap().len();
        assert!(file_len < 300_000, "dump.rdb is {file_len} bytes");
    }
}

/// A string key: (db, key, value, expire_at_ms).
type StringKey = (u32, Vec<u8>, Vec<u8>, Option<u64>);

/// What the export tests write.
fn export_keys(now: u64) -> Vec<StringKey> {
    let mut keys = Vec::new();
    let binary: Vec<u8> = (0..=255u8).rev().collect();
    keys.push((0, b"hello".to_vec(), b"world".to_vec(), None));
    keys.push((0, binary.clone(), binary, None));
    keys.push((0, b"empty".to_vec(), Vec::new(), None));
    for (i, v) in [
        "0",
        "-1",
        "127",
        "-32768",
        "65536",
        "2147483647",
        "-2147483649",
        "007",
        "-0",
    ]
    .iter()
    .enumerate()
    {
        keys.push((
            0,
            format!("int:{i}").into_bytes(),
            v.as_bytes().to_vec(),
            None,
        ));
    }
    keys.push((
        0,
        b"lzf".to_vec(),
        "squeeze ".repeat(5000).into_bytes(),
        None,
    ));
    keys.push((0, b"noise".to_vec(), noise(9, 50_000), None));
    keys.push((0, b"ttl".to_vec(), b"soon".to_vec(), Some(now + 3_600_000)));
    keys.push((
        0,
        b"ttl:int".to_vec(),
        b"99".to_vec(),
        Some(now + 3_600_000),
    ));
    keys.push((0, b"expired".to_vec(), b"gone".to_vec(), Some(now - 1000)));
    for i in 0..300 {
        let db = [0, 3, 15][i % 3];
        keys.push((
            db,
            format!("k{i}").into_bytes(),
            format!("value {i}").into_bytes(),
            None,
        ));
    }
    keys.push((
        3,
        b"hello".to_vec(),
        b"db three".to_vec(),
        Some(now + 7_200_000),
    ));
    keys
}

/// Checks that Redis serves exactly `keys` (expired ones excepted).
fn check_redis_has(redis: &mut RedisServer, keys: &[StringKey], now: u64) {
    let mut per_db: BTreeMap<u32, i64> = BTreeMap::new();
    for (db, _, _, exp) in keys {
        let live = exp.is_none_or(|at| at > now);
        *per_db.entry(*db).or_default() += i64::from(live);
    }
    for db in 0..16u32 {
        redis.select(db);
        assert_eq!(
            redis.int(&[b"DBSIZE"]),
            per_db.get(&db).copied().unwrap_or(0),
            "DBSIZE of db {db}"
        );
    }
    for (db, key, value, exp) in keys {
        redis.select(*db);
        let live = exp.is_none_or(|at| at > now);
        let got = redis.get(key);
        if !live {
            assert_eq!(got, None, "expired key {key:?}");
            continue;
        }
        assert!(got.as_ref() == Some(value), "db {db} key {key:?}");
        let pttl = redis.int(&[b"PTTL", key]);
        match exp {
            None => assert_eq!(pttl, -1, "key {key:?} must not expire"),
            Some(at) => {
                let want = (*at - now) as i64;
                assert!(
                    pttl <= want && pttl > want - 120_000,
                    "PTTL of {key:?}: {pttl}, want about {want}"
                );
            }
        }
    }
}

#[test]
fn redis_loads_what_we_export() {
    let Some(bin) = redis_server_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let now = now_ms();
    let mut keys = export_keys(now);
    let file = std::fs::File::create(dir.path().join("export.rdb")).unwrap();
    let mut w = RdbWriter::new(
        std::io::BufWriter::new(file),
        ondisk::rdb::RDB_EXPORT_VERSION,
    );
    for (db, key, value, exp) in &keys {
        w.select_db(*db).unwrap();
        w.write_string(key, value, *exp).unwrap();
    }
    // A 3 MB value streamed in chunks, as the server does for values on disk.
    let big = noise(5, 3 << 20);
    w.select_db(7).unwrap();
    w.begin_string(b"streamed", big.len() as u64, None).unwrap();
    for chunk in big.chunks(100_000) {
        w.value_chunk(chunk).unwrap();
    }
    keys.push((7, b"streamed".to_vec(), big, None));
    w.finish().unwrap();

    let mut redis = RedisServer::start_with(&bin, dir.path(), "export.rdb", &[]);
    check_redis_has(&mut redis, &keys, now);
}

#[test]
fn redis_loads_an_export_stitched_from_fragments() {
    let Some(bin) = redis_server_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let now = now_ms();
    let keys = export_keys(now);
    // Four "shards", each owning some keys of every db, as the server would split them.
    let mut shards: Vec<RdbEncoder> = (0..4).map(|_| RdbEncoder::fragment()).collect();
    let mut sorted = keys.clone();
    sorted.sort_by_key(|k| k.0);
    for (i, (db, key, value, exp)) in sorted.iter().enumerate() {
        let shard = &mut shards[i % 4];
        shard.select_db(*db);
        shard.write_string(key, value, *exp);
    }
    let mut crc = Crc64::new();
    let mut file = std::fs::File::create(dir.path().join("stitched.rdb")).unwrap();
    let mut put = |bytes: &[u8]| {
        crc.update(bytes);
        file.write_all(bytes).unwrap();
    };
    put(&rdb_header(10));
    for shard in shards {
        put(&shard.finish());
    }
    file.write_all(&rdb_trailer(crc)).unwrap();
    file.sync_all().unwrap();
    drop(file);

    let mut redis = RedisServer::start_with(&bin, dir.path(), "stitched.rdb", &[]);
    check_redis_has(&mut redis, &keys, now);
}

#[test]
fn redis_save_then_strata_export_then_redis_load_is_identity() {
    let Some(bin) = redis_server_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut redis = RedisServer::start_with(&bin, dir.path(), "dump.rdb", &[]);
    let (strings, _) = populate(&mut redis);
    redis.ok(&[b"SAVE"]);
    drop(redis);

    let (items, _, _) = read_rdb(&dir.path().join("dump.rdb"));
    let out = dir.path().join("again.rdb");
    let mut w = RdbWriter::new(std::fs::File::create(&out).unwrap(), 10);
    let mut keys = Vec::new();
    for item in items {
        if let RdbItem::String {
            db,
            key,
            value,
            expire_at_ms,
        } = item
        {
            w.select_db(db).unwrap();
            w.write_string(&key, &value, expire_at_ms).unwrap();
            keys.push((db, key.to_vec(), value.to_vec(), expire_at_ms));
        }
    }
    w.finish().unwrap();
    assert_eq!(keys.len(), strings.len());

    let now = now_ms();
    let mut redis = RedisServer::start_with(&bin, dir.path(), "again.rdb", &[]);
    check_redis_has(&mut redis, &keys, now);
}

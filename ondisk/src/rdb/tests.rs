use super::codec::{
    integer_encoding, write_len as put_len, write_plain_string as put_plain_string,
};
use super::*;
use crate::error::{ErrorKind, FormatError};
use proptest::prelude::*;

/// Reads a whole RDB: strings, skipped keys, aux fields; the checksum must verify.
fn read_all(file: &[u8]) -> Result<Vec<RdbItem>, FormatError> {
    let mut r = RdbReader::new(file)?;
    let mut items = Vec::new();
    while let Some(item) = r.next()? {
        items.push(item);
    }
    Ok(items)
}

/// A string key: (db, key, value, expire_at_ms).
type StringKey = (u32, Vec<u8>, Vec<u8>, Option<u64>);

fn strings(items: &[RdbItem]) -> Vec<StringKey> {
    items
        .iter()
        .filter_map(|i| match i {
            RdbItem::String {
                db,
                key,
                value,
                expire_at_ms,
            } => Some((*db, key.to_vec(), value.to_vec(), *expire_at_ms)),
            _ => None,
        })
        .collect()
}

fn tricky_values() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "",
        "0",
        "-1",
        "1",
        "127",
        "-128",
        "128",
        "-129",
        "32767",
        "-32768",
        "32768",
        "2147483647",
        "-2147483648",
        "2147483648",
        "-2147483649",
        "9223372036854775807",
        "-0",
        "007",
        "+5",
        " 1",
        "1 ",
        "1.5",
        "0x10",
        "12345678901",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    v.push((0..=255u8).collect());
    v.push(b"abcabcabcabcabcabcabcabcabcabcabcabcabcabc".to_vec());
    v.push("compressible ".repeat(10_000).into_bytes());
    v.push(vec![0u8; 21]);
    v
}

#[test]
fn crc64_matches_redis() {
    // Redis' crc64 self-test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
    let mut c = Crc64::new();
    c.update(b"123456789");
    assert_eq!(c.value(), 0xe9c6_d914_c4b8_d9ca);
    let mut parts = Crc64::new();
    parts.update(b"1234");
    parts.update(b"");
    parts.update(b"56789");
    assert_eq!(parts.value(), c.value());
    assert_eq!(Crc64::default().value(), 0);
}

#[test]
fn integer_encoding_only_for_canonical_32_bit_integers() {
    assert_eq!(integer_encoding(b"0"), Some(0));
    assert_eq!(integer_encoding(b"-2147483648"), Some(i32::MIN));
    assert_eq!(integer_encoding(b"2147483647"), Some(i32::MAX));
    for s in ["", "-0", "007", "+5", " 1", "2147483648", "1e3", "-"] {
        assert_eq!(integer_encoding(s.as_bytes()), None, "{s:?}");
    }
}

#[test]
fn encoder_round_trip_every_version() {
    let values = tricky_values();
    for version in RDB_MIN_EXPORT_VERSION..=RDB_MAX_VERSION {
        let mut enc = RdbEncoder::new(version);
        let mut want = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let db = [0, 0, 3, 3, 15, 0][i % 6];
            let expire = (i % 2 == 0).then_some(1_800_000_000_000 + i as u64);
            enc.select_db(db);
            let key = format!("key:{i}");
            enc.write_string(key.as_bytes(), v, expire);
            want.push((db, key.into_bytes(), v.clone(), expire));
        }
        assert_eq!(enc.keys(), values.len() as u64);
        let mut file = enc.take_output().unwrap().to_vec();
        file.extend_from_slice(&enc.finish());
        assert_eq!(&file[..9], format!("REDIS{version:04}").as_bytes());
        let mut r = RdbReader::new(&file[..]).unwrap();
        assert_eq!(r.version(), version);
        let mut items = Vec::new();
        while let Some(item) = r.next().unwrap() {
            items.push(item);
        }
        assert_eq!(r.offset(), file.len() as u64);
        assert_eq!(strings(&items), want);
        let aux: Vec<Vec<u8>> = items
            .iter()
            .filter_map(|i| match i {
                RdbItem::Aux { key, .. } => Some(key.to_vec()),
                _ => None,
            })
            .collect();
        assert_eq!(
            aux,
            [&b"redis-ver"[..], b"redis-bits", b"ctime", b"used-mem"]
        );
    }
}

#[test]
fn encodings_are_compact_like_redis() {
    let mut enc = RdbEncoder::fragment();
    enc.write_string(b"k", b"-5", None);
    // SELECTDB 0, type, key, then INT8 marker and the byte.
    assert_eq!(
        &enc.take_output().unwrap()[..],
        &[0xFE, 0, 0, 1, b'k', 0xC0, 0xFB]
    );
    enc.write_string(b"k", b"1000", None);
    assert_eq!(
        &enc.take_output().unwrap()[..],
        &[0, 1, b'k', 0xC1, 0xE8, 0x03]
    );
    let long = "x".repeat(1000);
    enc.write_string(b"k", long.as_bytes(), None);
    let out = enc.take_output().unwrap();
    assert_eq!(out[3], 0xC3, "LZF marker");
    assert!(out.len() < 100);
    enc.set_compression(false);
    enc.write_string(b"k", long.as_bytes(), None);
    assert!(enc.take_output().unwrap().len() > 1000);
    // SELECTDB only when the db changes.
    enc.select_db(0);
    assert!(enc.take_output().is_none());
    enc.select_db(2);
    assert_eq!(&enc.take_output().unwrap()[..], &[0xFE, 2]);
    assert!(enc.finish().is_empty(), "a fragment has no trailer");
}

#[test]
fn version_is_clamped() {
    assert_eq!(&RdbEncoder::new(1).finish()[..9], b"REDIS0007");
    assert_eq!(&RdbEncoder::new(99).finish()[..9], b"REDIS0012");
    assert_eq!(&rdb_header(RDB_EXPORT_VERSION)[..9], b"REDIS0010");
}

#[test]
fn stitched_fragments_make_one_valid_file() {
    let mut crc = Crc64::new();
    let mut file = Vec::new();
    let mut put = |file: &mut Vec<u8>, b: &[u8]| {
        crc.update(b);
        file.extend_from_slice(b);
    };
    put(&mut file, &rdb_header(10));
    let mut want = Vec::new();
    for shard in 0..4u32 {
        let mut frag = RdbEncoder::fragment();
        for db in [0u32, 5] {
            frag.select_db(db);
            for i in 0..10 {
                let key = format!("s{shard}:{i}");
                let value = format!("value {shard} {i} {}", "z".repeat(i * 10));
                frag.write_string(key.as_bytes(), value.as_bytes(), None);
                want.push((db, key.into_bytes(), value.into_bytes(), None));
            }
        }
        let bytes = frag.finish();
        put(&mut file, &bytes);
    }
    let trailer = rdb_trailer(crc);
    file.extend_from_slice(&trailer);
    assert_eq!(strings(&read_all(&file).unwrap()), want);
}

#[test]
fn writer_round_trip_and_streamed_values() {
    let mut w = RdbWriter::new(Vec::new(), RDB_EXPORT_VERSION);
    w.select_db(1).unwrap();
    w.write_string(b"a", b"1", Some(5)).unwrap();
    w.begin_string(b"big", 100_000, None).unwrap();
    for _ in 0..100 {
        w.value_chunk(&[b'q'; 1000]).unwrap();
    }
    assert_eq!(w.keys(), 2);
    let file = w.finish().unwrap();
    let got = strings(&read_all(&file).unwrap());
    assert_eq!(got[0], (1, b"a".to_vec(), b"1".to_vec(), Some(5)));
    assert_eq!(got[1], (1, b"big".to_vec(), vec![b'q'; 100_000], None));
}

#[test]
#[should_panic(expected = "missing")]
fn unfinished_streamed_value_panics() {
    let mut enc = RdbEncoder::new(10);
    enc.begin_string(b"k", 10, None);
    enc.value_chunk(b"12345");
    enc.finish();
}

fn full_file() -> Vec<u8> {
    let mut enc = RdbEncoder::new(10);
    for (i, v) in tricky_values().iter().enumerate() {
        enc.write_string(format!("k{i}").as_bytes(), v, Some(i as u64));
    }
    enc.finish().to_vec()
}

#[test]
fn checksum_is_verified_and_zero_means_unchecked() {
    let file = full_file();
    read_all(&file).unwrap();
    let n = file.len();
    let mut bad = file.clone();
    bad[n - 1] ^= 0x40;
    let err = read_all(&bad).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ChecksumMismatch);
    assert_eq!(err.offset, n as u64 - 8);
    let mut unchecked = file.clone();
    unchecked[n - 8..].fill(0);
    read_all(&unchecked).unwrap();
    // A flipped bit inside a value: the reader may parse on, but never ends cleanly.
    let mut flipped = file.clone();
    let at = file
        .windows(4)
        .position(|w| w == [100, 101, 102, 103])
        .unwrap();
    flipped[at] ^= 1;
    assert!(read_all(&flipped).is_err());
}

#[test]
fn every_cut_is_an_error() {
    let file = full_file();
    for cut in 0..file.len() {
        let err = read_all(&file[..cut]).expect_err("cut file");
        if cut >= 9 {
            assert_eq!(err.kind, ErrorKind::Truncated, "cut {cut}: {err}");
            assert_eq!(err.offset, cut as u64);
        }
    }
}

#[test]
fn header_checks() {
    assert_eq!(
        read_all(b"REDIS0013\xff").unwrap_err().kind,
        ErrorKind::UnsupportedVersion
    );
    assert_eq!(
        read_all(b"REDIS0000\xff").unwrap_err().kind,
        ErrorKind::UnsupportedVersion
    );
    assert_eq!(
        read_all(b"REDIX0010\xff").unwrap_err().kind,
        ErrorKind::BadMagic
    );
    assert_eq!(
        read_all(b"REDIS00a0\xff").unwrap_err().kind,
        ErrorKind::BadMagic
    );
    assert_eq!(read_all(b"RED").unwrap_err().kind, ErrorKind::BadMagic);
    // Version 4 files have no checksum after EOF.
    assert!(read_all(b"REDIS0004\xff").unwrap().is_empty());
}

/// Builds an RDB body by hand, for types Redis 7.0 cannot produce.
#[derive(Default)]
struct Body(Vec<u8>);

impl Body {
    fn op(mut self, b: u8) -> Self {
        self.0.push(b);
        self
    }
    fn len(mut self, n: u64) -> Self {
        put_len(&mut self.0, n);
        self
    }
    fn s(mut self, s: &[u8]) -> Self {
        put_plain_string(&mut self.0, s);
        self
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A string in every encoding in turn: int8, int16, int32, LZF.
    fn encoded_strings(self) -> Self {
        let lzf = lzf_compress(&[b'a'; 100]).unwrap();
        self.raw(&[0xC0, 5, 0xC1, 1, 2, 0xC2, 1, 2, 3, 4, 0xC3])
            .len(lzf.len() as u64)
            .len(100)
            .raw(&lzf)
    }
    /// One LZF-compressed string of 100 'a's.
    fn lzf_string(self) -> Self {
        let lzf = lzf_compress(&[b'a'; 100]).unwrap();
        self.op(0xC3).len(lzf.len() as u64).len(100).raw(&lzf)
    }
    fn key(self, t: u8, name: &str) -> Self {
        self.op(t).s(name.as_bytes())
    }
    fn file(self, version: u32) -> Vec<u8> {
        let mut f = format!("REDIS{version:04}").into_bytes();
        f.extend_from_slice(&self.0);
        f.push(opcode::EOF);
        let mut crc = Crc64::new();
        crc.update(&f);
        f.extend_from_slice(&crc.value().to_le_bytes());
        f
    }
}

fn every_type_body() -> (Body, Vec<u8>) {
    use types::*;
    let b = Body::default()
        .op(opcode::AUX)
        .s(b"redis-ver")
        .s(b"7.4.0")
        .op(opcode::AUX)
        .s(b"aof-base")
        .raw(&[0xC0, 0])
        .op(opcode::MODULE_AUX)
        .len(12345)
        .len(2)
        .len(1)
        .len(1)
        .len(7)
        .len(2)
        .len(8)
        .len(3)
        .raw(&[0; 4])
        .len(4)
        .raw(&[0; 8])
        .len(5)
        .s(b"m")
        .len(0)
        .op(opcode::FUNCTION2)
        .s(b"#!lua name=lib\nredis.register_function('f', function() return 1 end)")
        .op(opcode::SELECTDB)
        .len(2)
        .op(opcode::RESIZEDB)
        .len(100)
        .len(5)
        .op(opcode::SLOT_INFO)
        .len(9)
        .len(100)
        .len(5)
        .key(LIST, "list")
        .len(3)
        .s(b"a")
        .raw(&[0xC0, 1])
        .s(b"c")
        .key(SET, "set")
        .len(4)
        .encoded_strings()
        .key(ZSET, "zset")
        .len(4)
        .s(b"a")
        .op(3)
        .raw(b"1.5")
        .s(b"b")
        .op(253)
        .s(b"c")
        .op(254)
        .s(b"d")
        .op(255)
        .key(HASH, "hash")
        .len(3)
        .s(b"f1")
        .s(b"v1")
        .encoded_strings()
        .key(ZSET_2, "zset2")
        .len(2)
        .s(b"a")
        .raw(&1.5f64.to_le_bytes())
        .s(b"b")
        .raw(&[0; 8])
        .key(MODULE_2, "module")
        .len(0x1234_5678)
        .len(2)
        .len(99)
        .len(5)
        .lzf_string()
        .len(0)
        .key(HASH_ZIPMAP, "zipmap")
        .s(b"opaque zipmap")
        .key(LIST_ZIPLIST, "ziplist")
        .s(b"opaque")
        .key(SET_INTSET, "intset")
        .s(b"opaque")
        .key(ZSET_ZIPLIST, "zsetzl")
        .s(b"opaque")
        .key(HASH_ZIPLIST, "hashzl")
        .s(b"opaque")
        .key(LIST_QUICKLIST, "ql")
        .len(5)
        .s(b"node1")
        .encoded_strings()
        .key(STREAM_LISTPACKS, "stream1")
        .len(1)
        .s(&[0; 16])
        .s(b"lp")
        .len(10)
        .len(1)
        .len(2)
        .len(1)
        .s(b"group")
        .len(1)
        .len(2)
        .len(1)
        .raw(&[1; 16])
        .raw(&[2; 8])
        .len(3)
        .len(1)
        .s(b"consumer")
        .raw(&[3; 8])
        .len(1)
        .raw(&[1; 16])
        .key(HASH_LISTPACK, "hashlp")
        .s(b"opaque")
        .key(ZSET_LISTPACK, "zsetlp")
        .s(b"opaque")
        .key(LIST_QUICKLIST_2, "ql2")
        .len(2)
        .len(2)
        .s(b"packed")
        .len(1)
        .s(b"plain")
        .key(STREAM_LISTPACKS_2, "stream2")
        .len(2)
        .s(&[0; 16])
        .s(b"lp1")
        .s(&[1; 16])
        .lzf_string()
        .len(10)
        .len(1)
        .len(2)
        .len(0)
        .len(1)
        .len(0)
        .len(0)
        .len(10)
        .len(2)
        .s(b"g1")
        .len(1)
        .len(2)
        .len(7)
        .len(0)
        .len(0)
        .s(b"g2")
        .len(1)
        .len(2)
        .len(7)
        .len(2)
        .raw(&[1; 16])
        .raw(&[2; 8])
        .len(3)
        .raw(&[4; 16])
        .raw(&[2; 8])
        .len(1)
        .len(2)
        .s(b"c1")
        .raw(&[3; 8])
        .len(2)
        .raw(&[1; 16])
        .raw(&[4; 16])
        .s(b"c2")
        .raw(&[3; 8])
        .len(0)
        .key(SET_LISTPACK, "setlp")
        .s(b"opaque")
        .key(STREAM_LISTPACKS_3, "stream3")
        .len(0)
        .len(0)
        .len(0)
        .len(0)
        .len(0)
        .len(0)
        .len(0)
        .len(0)
        .len(0)
        .len(1)
        .s(b"g")
        .len(0)
        .len(0)
        .len(0)
        .len(0)
        .len(1)
        .s(b"c")
        .raw(&[3; 8])
        .raw(&[5; 8])
        .len(1)
        .raw(&[1; 16])
        .key(HASH_METADATA_PRE_GA, "hmeta-pre")
        .len(2)
        .len(0)
        .s(b"f")
        .s(b"v")
        .len(1_800_000_000_000)
        .s(b"g")
        .s(b"w")
        .key(HASH_LISTPACK_EX_PRE_GA, "hlpex-pre")
        .s(b"opaque")
        .key(HASH_METADATA, "hmeta")
        .raw(&[7; 8])
        .len(2)
        .len(0)
        .s(b"f")
        .s(b"v")
        .len(5)
        .s(b"g")
        .lzf_string()
        .key(HASH_LISTPACK_EX, "hlpex")
        .raw(&[7; 8])
        .s(b"opaque")
        .op(opcode::EXPIRETIME)
        .raw(&2_000_000_000i32.to_le_bytes())
        .key(STRING, "secs")
        .s(b"v")
        .op(opcode::FREQ)
        .op(5)
        .op(opcode::IDLE)
        .len(1000)
        .op(opcode::EXPIRETIME_MS)
        .raw(&1_800_000_000_123i64.to_le_bytes())
        .key(STRING, "ms")
        .raw(&[0xC0, 5]);
    let codes = vec![
        LIST,
        SET,
        ZSET,
        HASH,
        ZSET_2,
        MODULE_2,
        HASH_ZIPMAP,
        LIST_ZIPLIST,
        SET_INTSET,
        ZSET_ZIPLIST,
        HASH_ZIPLIST,
        LIST_QUICKLIST,
        STREAM_LISTPACKS,
        HASH_LISTPACK,
        ZSET_LISTPACK,
        LIST_QUICKLIST_2,
        STREAM_LISTPACKS_2,
        SET_LISTPACK,
        STREAM_LISTPACKS_3,
        HASH_METADATA_PRE_GA,
        HASH_LISTPACK_EX_PRE_GA,
        HASH_METADATA,
        HASH_LISTPACK_EX,
    ];
    (b, codes)
}

#[test]
fn every_type_and_opcode_is_skipped_exactly() {
    let (body, codes) = every_type_body();
    let file = body.file(12);
    let mut r = RdbReader::new(&file[..]).unwrap();
    let mut items = Vec::new();
    while let Some(item) = r.next().unwrap() {
        items.push(item);
    }
    assert_eq!(r.functions_skipped(), 1);
    assert_eq!(r.module_aux_skipped(), 1);
    let skipped: Vec<u8> = items
        .iter()
        .filter_map(|i| match i {
            RdbItem::Skipped { db, type_code, .. } => {
                assert_eq!(*db, 2);
                Some(*type_code)
            }
            _ => None,
        })
        .collect();
    assert_eq!(skipped, codes);
    assert_eq!(
        items[1],
        RdbItem::Aux {
            key: "aof-base".into(),
            value: "0".into()
        }
    );
    assert_eq!(
        strings(&items),
        vec![
            (2, b"secs".to_vec(), b"v".to_vec(), Some(2_000_000_000_000)),
            (2, b"ms".to_vec(), b"5".to_vec(), Some(1_800_000_000_123)),
        ]
    );
}

#[test]
fn function_libraries_come_out_when_asked_and_round_trip() {
    let libs: [&[u8]; 2] = [
        b"#!lua name=a\nredis.register_function('fa', function() return 1 end)",
        &[b'y'; 500], // LZF-compressed by the writer
    ];
    let mut file = rdb_header(10);
    file.extend_from_slice(&rdb_functions(libs));
    let mut enc = RdbEncoder::fragment();
    enc.write_string(b"k", b"v", None);
    file.extend_from_slice(&enc.finish());
    let mut crc = Crc64::new();
    crc.update(&file);
    file.extend_from_slice(&rdb_trailer(crc));

    let mut kept = RdbReader::new(&file[..]).unwrap();
    kept.keep_functions();
    let mut items = Vec::new();
    while let Some(item) = kept.next().unwrap() {
        if !matches!(item, RdbItem::Aux { .. }) {
            items.push(item);
        }
    }
    assert_eq!(
        items[..2],
        [
            RdbItem::Function(Bytes::from_static(libs[0])),
            RdbItem::Function(Bytes::from_static(libs[1]))
        ]
    );
    assert!(matches!(&items[2], RdbItem::String { key, .. } if &key[..] == b"k"));
    assert_eq!(kept.functions_skipped(), 0);

    // Not asked: skipped and counted, as before.
    let mut plain = RdbReader::new(&file[..]).unwrap();
    let mut n = 0;
    while let Some(item) = plain.next().unwrap() {
        assert!(!matches!(item, RdbItem::Function(_)));
        n += 1;
    }
    assert_eq!(n, 4 + 1);
    assert_eq!(plain.functions_skipped(), 2);
}

#[test]
fn all_string_encodings_decode() {
    let lzf = lzf_compress(&[b'a'; 100]).unwrap();
    let body = Body::default()
        .key(types::STRING, "i8")
        .raw(&[0xC0, 0x85])
        .key(types::STRING, "i16")
        .raw(&[0xC1, 0x00, 0x80])
        .key(types::STRING, "i32")
        .raw(&[0xC2, 0xFF, 0xFF, 0xFF, 0x7F])
        .key(types::STRING, "lzf")
        .op(0xC3)
        .len(lzf.len() as u64)
        .len(100)
        .raw(&lzf)
        .key(types::STRING, "14bit")
        .len(300)
        .raw(&[b'z'; 300])
        .key(types::STRING, "32bit")
        .raw(&[0x80, 0, 0, 0, 3])
        .raw(b"abc")
        .key(types::STRING, "64bit")
        .raw(&[0x81, 0, 0, 0, 0, 0, 0, 0, 2])
        .raw(b"xy");
    let got = strings(&read_all(&body.file(9)).unwrap());
    let values: Vec<Vec<u8>> = got.into_iter().map(|(_, _, v, _)| v).collect();
    assert_eq!(
        values,
        vec![
            b"-123".to_vec(),
            b"-32768".to_vec(),
            b"2147483647".to_vec(),
            vec![b'a'; 100],
            vec![b'z'; 300],
            b"abc".to_vec(),
            b"xy".to_vec(),
        ]
    );
}

#[test]
fn malformed_files_are_errors_with_offsets() {
    let cases: Vec<(Body, ErrorKind)> = vec![
        (Body::default().op(8).s(b"k"), ErrorKind::Corrupt),
        (Body::default().op(26).s(b"k"), ErrorKind::Corrupt),
        (Body::default().op(200), ErrorKind::Corrupt),
        (
            Body::default().key(types::MODULE_PRE_GA, "m"),
            ErrorKind::UnsupportedVersion,
        ),
        (
            Body::default().op(opcode::FUNCTION_PRE_GA),
            ErrorKind::UnsupportedVersion,
        ),
        (
            Body::default().key(types::STRING, "k").raw(&[0xC4]),
            ErrorKind::Corrupt,
        ),
        (
            Body::default().key(types::STRING, "k").raw(&[0x82]),
            ErrorKind::Corrupt,
        ),
        (
            Body::default()
                .key(types::STRING, "k")
                .raw(&[0xC3, 2, 200, 0, b'a']),
            ErrorKind::Corrupt,
        ),
        (
            Body::default()
                .key(types::LIST_QUICKLIST_2, "k")
                .len(1)
                .len(3),
            ErrorKind::Corrupt,
        ),
        (
            Body::default().key(types::MODULE_2, "k").len(1).len(6),
            ErrorKind::Corrupt,
        ),
        (
            Body::default().op(opcode::MODULE_AUX).len(1).len(1),
            ErrorKind::Corrupt,
        ),
        (
            Body::default().op(opcode::SELECTDB).len(1 << 40),
            ErrorKind::Corrupt,
        ),
    ];
    for (i, (body, kind)) in cases.into_iter().enumerate() {
        let err = read_all(&body.file(11)).unwrap_err();
        assert_eq!(err.kind, kind, "case {i}: {err}");
        assert!(err.offset >= 9, "case {i}: {err}");
    }
}

#[test]
fn huge_declared_lengths_do_not_allocate() {
    // A string claiming 2^62 bytes, a list claiming 2^62 elements, an LZF string claiming a
    // huge raw length: each must end with an error, quickly and without a giant allocation.
    let huge = 1u64 << 62;
    let cases = [
        Body::default()
            .key(types::STRING, "k")
            .len(huge)
            .raw(b"abc")
            .0,
        Body::default().key(types::LIST, "k").len(huge).s(b"a").0,
        Body::default()
            .key(types::STRING, "k")
            .op(0xC3)
            .len(3)
            .len(huge)
            .raw(&[1, b'a', b'b'])
            .0,
        Body::default()
            .key(types::STRING, "k")
            .op(0xC3)
            .len(huge)
            .len(3)
            .raw(b"x")
            .0,
    ];
    for (i, body) in cases.iter().enumerate() {
        let mut file = b"REDIS0010".to_vec();
        file.extend_from_slice(body);
        let err = read_all(&file).unwrap_err();
        assert!(
            matches!(err.kind, ErrorKind::Truncated | ErrorKind::Corrupt),
            "case {i}: {err}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut file = b"REDIS0011".to_vec();
        file.extend_from_slice(&body);
        let _ = read_all(&file);
    }

    #[test]
    fn mutated_files_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
        let (body, _) = every_type_body();
        let mut file = body.file(12);
        for (at, v) in edits {
            let at = at % file.len();
            file[at] = v;
        }
        let _ = read_all(&file);
    }

    #[test]
    fn random_strings_round_trip(
        keys in proptest::collection::vec(
            (0u32..16, proptest::collection::vec(any::<u8>(), 0..10),
             proptest::collection::vec(any::<u8>(), 0..200), proptest::option::of(0u64..1 << 62)),
            0..20),
    ) {
        let mut enc = RdbEncoder::new(RDB_EXPORT_VERSION);
        for (db, k, v, e) in &keys {
            enc.select_db(*db);
            enc.write_string(k, v, *e);
        }
        let got = strings(&read_all(&enc.finish()).unwrap());
        prop_assert_eq!(got, keys);
    }
}

//! The DUMP payload tests, moved here from `cmd/dump.rs` with their assertions: CRC-64, lengths,
//! string encodings, LZF, bad payloads, noise. The helpers below give the codec the names and
//! shapes those assertions were written against.

use super::*;

const RDB_VERSION: u16 = DUMP_RDB_VERSION;
/// The two classes of RESTORE errors (`cmd/dump.rs` maps them to Redis' texts).
const ERR_PAYLOAD: &str = "DUMP payload version or checksum are wrong";
const ERR_BAD_FORMAT: &str = "Bad data format";

fn encode_string_payload(value: &[u8]) -> Vec<u8> {
    encode_dump_string(value)
}

fn decode_string_payload(payload: &[u8]) -> Result<Vec<u8>, &'static str> {
    decode_dump_string(payload).map_err(|e| match e {
        DumpError::Footer(_) => ERR_PAYLOAD,
        DumpError::Object(_) => ERR_BAD_FORMAT,
    })
}

/// The decompressor as the moved tests call it: any error is `None`.
fn lzf_decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    super::lzf_decompress(input, out_len).ok()
}

/// A payload with a correct footer around `body`, for hand-built encodings.
fn wrap(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = Crc64::checksum(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn crc_is_redis_crc64() {
    assert_eq!(Crc64::checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
}

#[test]
fn restores_redis_docs_payload() {
    // `DUMP mykey` for the value 10, from the Redis documentation (an RDB 9 payload).
    let p = b"\x00\xc0\n\t\x00\xbem\x06\x89Z(\x00\n";
    assert_eq!(decode_string_payload(p).as_deref(), Ok(&b"10"[..]));
}

#[test]
fn dump_bytes_match_redis() {
    let p = encode_string_payload(b"bar");
    // As redis-server 7.0.15 answers DUMP of "bar" (RDB version 10).
    assert_eq!(&p[..], b"\x00\x03bar\n\x00\xe6\xbeI`\xeef\xfd\x17");
    assert_eq!(p.len(), 15);
    assert_eq!(p[7..], Crc64::checksum(&p[..7]).to_le_bytes());
    // Integer encodings: 1, 2 and 4 little-endian bytes after 0xC0/0xC1/0xC2.
    assert_eq!(&encode_string_payload(b"123")[..3], b"\x00\xc0\x7b");
    assert_eq!(&encode_string_payload(b"-5")[..3], b"\x00\xc0\xfb");
    assert_eq!(&encode_string_payload(b"1000")[..4], b"\x00\xc1\xe8\x03");
    assert_eq!(
        &encode_string_payload(b"-2147483648")[..6],
        b"\x00\xc2\x00\x00\x00\x80"
    );
    // Not canonical integers: stored raw.
    assert_eq!(&encode_string_payload(b"007")[..5], b"\x00\x03007");
    assert_eq!(&encode_string_payload(b"+1")[..4], b"\x00\x02+1");
}

#[test]
fn length_forms() {
    let mut out = Vec::new();
    write_len(&mut out, 63);
    assert_eq!(out, [0x3f]);
    out.clear();
    write_len(&mut out, 64);
    assert_eq!(out, [0x40, 0x40]);
    out.clear();
    write_len(&mut out, 16383);
    assert_eq!(out, [0x7f, 0xff]);
    out.clear();
    write_len(&mut out, 16384);
    assert_eq!(out, [0x80, 0, 0, 0x40, 0]);
    out.clear();
    write_len(&mut out, 1 << 32);
    assert_eq!(out, [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
    let mut r = RdbCursor::new(&out);
    assert_eq!(read_len_field(&mut r).ok(), Some((1 << 32, false)));
}

#[test]
fn round_trips() {
    let random: Vec<u8> = (0u32..1000)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let big = vec![b'x'; 20000];
    let cases: Vec<&[u8]> = vec![
        b"",
        b"123",
        b"-5",
        b"0",
        b"-0",
        b"12345678901",
        b"2147483647",
        b"9223372036854775807",
        &random,
        &big,
    ];
    for v in cases {
        let p = encode_string_payload(v);
        assert_eq!(decode_string_payload(&p).as_deref(), Ok(v));
    }
    // Too long for an integer encoding even though it parses.
    assert_eq!(&encode_string_payload(b"12345678901")[..3], b"\x00\x0b1");
}

#[test]
fn bad_payloads() {
    let p = encode_string_payload(b"bar");
    let mut bad = p.clone();
    bad[14] ^= 1;
    assert_eq!(decode_string_payload(&bad), Err(ERR_PAYLOAD));
    bad = p.clone();
    bad[3] ^= 1;
    assert_eq!(decode_string_payload(&bad), Err(ERR_PAYLOAD));
    assert_eq!(decode_string_payload(&p[..9]), Err(ERR_PAYLOAD));
    assert_eq!(decode_string_payload(b""), Err(ERR_PAYLOAD));

    // A newer RDB version is refused even with a good checksum.
    let mut newer = b"\x00\x03bar".to_vec();
    newer.extend_from_slice(&12u16.to_le_bytes());
    let crc = Crc64::checksum(&newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_string_payload(&newer), Err(ERR_PAYLOAD));
    // Older versions are fine.
    let mut older = b"\x00\x03bar".to_vec();
    older.extend_from_slice(&9u16.to_le_bytes());
    let crc = Crc64::checksum(&older);
    older.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_string_payload(&older).as_deref(), Ok(&b"bar"[..]));

    for body in [
        &b""[..],            // no type byte
        b"\x02\x03bar",      // a set: not supported
        b"\x00",             // no string
        b"\x00\x05bar",      // length past the end
        b"\x00\x03barx",     // trailing garbage
        b"\x00\xc0",         // truncated INT8
        b"\x00\xc2\x01\x02", // truncated INT32
        b"\x00\xc4\x01",     // unknown special encoding
        b"\x00\x82\x01",     // unknown length form
        b"\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x00\x80\xff\xff\xff\xff",
    ] {
        assert_eq!(
            decode_string_payload(&wrap(body)),
            Err(ERR_BAD_FORMAT),
            "{body:?}"
        );
    }
    assert_eq!(
        decode_string_payload(&wrap(b"\x00\xc1\x00\x80")).as_deref(),
        Ok(&b"-32768"[..])
    );
}

#[test]
fn lzf_strings() {
    // "abc" as a literal run, then a 3-byte copy from 3 back: "abcabc".
    let lzf = [0x02, b'a', b'b', b'c', 0x20, 0x02];
    assert_eq!(lzf_decompress(&lzf, 6).as_deref(), Some(&b"abcabc"[..]));
    // Overlapping long copy: 7-length form, 7 + 3 + 2 = 12 bytes from 1 back.
    let run = [0x00, b'z', 0xe0, 0x03, 0x00];
    assert_eq!(lzf_decompress(&run, 13), Some(vec![b'z'; 13]));

    // Through the RDB encoding: 0xC3, clen, len, data.
    let mut body = vec![0x00, 0xc3, lzf.len() as u8, 6];
    body.extend_from_slice(&lzf);
    assert_eq!(
        decode_string_payload(&wrap(&body)).as_deref(),
        Ok(&b"abcabc"[..])
    );

    // Wrong claimed size, either way.
    assert_eq!(lzf_decompress(&lzf, 5), None);
    assert_eq!(lzf_decompress(&lzf, 7), None);
    assert_eq!(lzf_decompress(&lzf, 0), None);
    // Truncated literal run, back-reference without its offset byte or length byte.
    assert_eq!(lzf_decompress(&[0x05, b'a', b'b'], 6), None);
    assert_eq!(lzf_decompress(&[0x00, b'a', 0x20], 4), None);
    assert_eq!(lzf_decompress(&[0x00, b'a', 0xe0], 12), None);
    // Reference before the start of the output.
    assert_eq!(lzf_decompress(&[0x00, b'a', 0x20, 0x05], 4), None);
    assert_eq!(lzf_decompress(&[0x20, 0x00], 3), None);
    // A huge claimed size allocates nothing silly and fails.
    assert_eq!(lzf_decompress(&lzf, usize::MAX), None);

    for body in [
        &[0x00, 0xc3, 0x06, 0x06, 0x02, b'a'][..], // clen past the end
        &[0x00, 0xc3, 0x06, 0x07, 0x02, b'a', b'b', b'c', 0x20, 0x02],
        &[0x00, 0xc3, 0x06][..], // no len
        &[0x00, 0xc3, 0x00, 0x00],
        &[
            0x00, 0xc3, 0x02, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, b'a',
        ],
    ] {
        assert_eq!(
            decode_string_payload(&wrap(body)),
            Err(ERR_BAD_FORMAT),
            "{body:?}"
        );
    }
}

#[test]
fn never_panics_on_noise() {
    // Every prefix and single-byte corruption of a few payloads, checksums fixed up.
    let mut lzf_body = vec![0x00, 0xc3, 0x06, 0x06];
    lzf_body.extend_from_slice(&[0x02, b'a', b'b', b'c', 0x20, 0x02]);
    let bodies = [
        lzf_body,
        b"\x00\x40\x41xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".to_vec(),
        b"\x00\xc2\x01\x02\x03\x04".to_vec(),
    ];
    for body in bodies {
        for cut in 0..=body.len() {
            let _ = decode_string_payload(&wrap(&body[..cut]));
        }
        for at in 0..body.len() {
            for x in [0x01u8, 0x20, 0x80, 0xff] {
                let mut b = body.clone();
                b[at] ^= x;
                let _ = decode_string_payload(&wrap(&b));
            }
        }
    }
    let mut seed = 0x1234_5678_u32;
    for _ in 0..2000 {
        let mut data = Vec::new();
        for _ in 0..(seed % 40) {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            data.push((seed >> 16) as u8);
        }
        let _ = lzf_decompress(&data, (seed % 300) as usize);
    }
}

#[test]
fn rdb_files_and_dump_share_the_string_encoding() {
    let values: [&[u8]; 6] = [b"", b"7", b"-70000", b"007", &[0xff; 64], &[b'z'; 20_000]];
    for value in values {
        let mut enc = super::super::RdbEncoder::fragment();
        enc.set_compression(false);
        enc.write_string(b"k", value, None);
        let file = enc.finish();
        // SELECTDB 0, type, key "k", then the value's encoding.
        let encoding = &file[5..];
        let dump = encode_dump_string(value);
        assert_eq!(&dump[1..dump.len() - 10], encoding, "{value:?}");
    }
}

#[test]
fn lzf_is_used_exactly_when_redis_would() {
    let mut samples: Vec<Vec<u8>> = vec![
        vec![b'a'; 20],
        vec![b'a'; 21],
        b"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz".to_vec(),
        (0..200u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect(),
    ];
    // Around the 4-byte saving Redis asks for: a literal run with one short repeat.
    for tail in 0..12 {
        let mut v: Vec<u8> = (0..30u8).collect();
        v.extend_from_within(..3 + tail);
        samples.push(v);
    }
    let mut boundary = 0;
    for v in samples {
        let mut out = Vec::new();
        write_string(&mut out, &v, StringCompression::Lzf);
        let redis_compresses = v.len() > 20 && lzf_compress_within(&v, v.len() - 4).is_some();
        if v.len() > 20 && super::super::lzf::lzf_compress(&v).is_some() && !redis_compresses {
            boundary += 1;
        }
        assert_eq!(out[0] == 0xC3, redis_compresses, "{v:?}");
        assert_eq!(read_string(&mut RdbCursor::new(&out)).unwrap(), v);
        let mut plain = Vec::new();
        write_string(&mut plain, &v, StringCompression::Off);
        assert_ne!(plain[0], 0xC3);
    }
    assert!(boundary > 0, "no sample that shrinks by less than 4 bytes");
}

#[test]
fn a_payload_gives_its_type_and_a_reader_of_its_value() {
    let payload = dump_payload(types::LIST, 16, |out| {
        write_len(out, 2);
        write_string(out, b"a", StringCompression::Off);
        write_string(out, b"100", StringCompression::Off);
    });
    let mut p = DumpPayload::parse(&payload).unwrap();
    assert_eq!(p.rdb_type, types::LIST);
    assert_eq!(p.rdb_version, DUMP_RDB_VERSION);
    assert_eq!(read_len(&mut p.value).unwrap(), 2);
    assert_eq!(read_string(&mut p.value).unwrap(), b"a");
    assert_eq!(read_string(&mut p.value).unwrap(), b"100");
    p.value.finish().unwrap();
    // A string payload is not a list, and the other way round.
    assert!(matches!(
        decode_dump_string(&payload),
        Err(DumpError::Object(_))
    ));

    // A list claiming more elements than it has: the error points into the payload.
    let short = dump_payload(types::LIST, 4, |out| {
        write_len(out, 3);
        write_string(out, b"a", StringCompression::Off);
    });
    let mut p = DumpPayload::parse(&short).unwrap();
    let err = skip_value(&mut p.value, types::LIST).unwrap_err();
    assert_eq!(err.kind, crate::ErrorKind::Truncated);
    assert_eq!(err.offset, 4, "{err}");

    // Older versions are read and say which they are; footer problems are the footer's.
    let mut older = b"\x00\xc0\x05".to_vec();
    older.extend_from_slice(&7u16.to_le_bytes());
    let crc = Crc64::checksum(&older);
    older.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(DumpPayload::parse(&older).unwrap().rdb_version, 7);
    assert_eq!(decode_dump_string(&older), Ok(b"5".to_vec()));
    let mut flipped = older.clone();
    flipped[2] ^= 1;
    let mut newer = older.clone();
    newer[3] = 12;
    // (A leading zero byte, alone, is invisible to this CRC: Redis' is the same.)
    for bad in [&older[..9], &flipped, &newer] {
        let res = DumpPayload::parse(bad);
        assert!(matches!(res, Err(DumpError::Footer(_))), "{bad:?}: {res:?}");
    }
}

#[test]
fn a_cursor_checks_lengths_before_it_allocates() {
    let bytes = [1u8, 2, 3];
    let mut c = RdbCursor::at_offset(&bytes, 100);
    assert_eq!(c.read_u8().unwrap(), 1);
    for len in [3, u64::MAX, 1 << 62] {
        let err = c.read_vec(len).unwrap_err();
        assert_eq!(err.kind, crate::ErrorKind::Truncated);
        assert_eq!(err.offset, 101, "{err}");
    }
    assert_eq!(c.remaining(), &[2, 3]);
    assert_eq!(c.finish().unwrap_err().offset, 101);
    c.skip(2).unwrap();
    c.finish().unwrap();
    assert!(c.read_u8().is_err());
}

use super::*;
use crate::error::{ErrorKind, FormatError};
use proptest::prelude::*;

fn header(compression: Compression) -> SnapshotHeader {
    SnapshotHeader {
        shard_index: 3,
        shard_count: 8,
        snapshot_id: 0x0123_4567_89AB_CDEF,
        created_ms: 1_700_000_000_000,
        compression,
    }
}

/// Deterministic xorshift bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn string(db: u16, key: &[u8], value: &[u8], expire: Option<u64>, flags: u32) -> Record {
    Record {
        db,
        key: Bytes::copy_from_slice(key),
        expire_at_ms: expire,
        client_flags: flags,
        value: RecordValue::String(Bytes::copy_from_slice(value)),
    }
}

fn tombstone(db: u16, key: &[u8]) -> Record {
    Record {
        db,
        key: Bytes::copy_from_slice(key),
        expire_at_ms: None,
        client_flags: 0,
        value: RecordValue::Tombstone,
    }
}

/// A mix of every record shape: many small keys, empty and binary values, TTLs, client flags,
/// tombstones, high db numbers and one 5 MB value.
fn sample_records() -> Vec<Record> {
    let mut rng = Rng(42);
    let mut recs = Vec::new();
    for i in 0..3000u32 {
        let key = format!("key:{i}");
        let value = format!("value-{i}-").repeat((i % 7) as usize);
        let expire = (i % 3 == 0).then_some(1_700_000_000_000 + u64::from(i));
        let flags = if i % 5 == 0 { i } else { 0 };
        recs.push(string(
            (i % 16) as u16,
            key.as_bytes(),
            value.as_bytes(),
            expire,
            flags,
        ));
    }
    recs.push(string(0, b"empty", b"", None, 0));
    recs.push(string(0, b"", b"empty key", None, 0));
    let all: Vec<u8> = (0..=255u8).collect();
    recs.push(string(1, &all, &all, Some(u64::MAX), u32::MAX));
    recs.push(string(u16::MAX, b"last db", &rng.bytes(1000), Some(0), 1));
    recs.push(string(2, b"big", &rng.bytes(5 * 1024 * 1024), Some(123), 7));
    for i in 0..50u32 {
        recs.push(tombstone((i % 4) as u16, format!("gone:{i}").as_bytes()));
    }
    recs.push(string(0, b"after big", b"still here", None, 0));
    recs
}

fn encode(recs: &[Record], h: SnapshotHeader, block_size: usize) -> (Vec<u8>, FileStats) {
    let mut enc = SnapshotEncoder::with_block_size(h, block_size);
    let mut file = Vec::new();
    for r in recs {
        match &r.value {
            RecordValue::String(v) => {
                enc.write_string(r.db, &r.key, v, r.expire_at_ms, r.client_flags)
            }
            RecordValue::Tombstone => enc.write_tombstone(r.db, &r.key),
        }
        if enc.pending_bytes() > 100_000 {
            while let Some(b) = enc.take_output() {
                file.extend_from_slice(&b);
            }
        }
    }
    while let Some(b) = enc.take_output() {
        file.extend_from_slice(&b);
    }
    let (tail, stats) = enc.finish();
    file.extend_from_slice(&tail);
    (file, stats)
}

/// Decodes `file` fed in chunks of `chunk` bytes; returns the records and the end stats.
fn decode(
    file: &[u8],
    chunk: usize,
) -> Result<(SnapshotHeader, Vec<Record>, FileStats), FormatError> {
    let mut dec = SnapshotDecoder::new();
    let mut recs = Vec::new();
    let mut stats = None;
    let mut fed = 0;
    loop {
        match dec.next()? {
            Some(Item::Record(r)) => recs.push(r),
            Some(Item::Object(o)) => panic!("no Object records here: {o:?}"),
            Some(Item::Function(f)) => panic!("no Function records here: {f:?}"),
            Some(Item::End(s)) => stats = Some(s),
            Some(other) => panic!("no pieces here: {other:?}"),
            None if fed < file.len() => {
                let n = chunk.min(file.len() - fed);
                dec.feed(&file[fed..fed + n]);
                fed += n;
            }
            None => break,
        }
    }
    dec.finish()?;
    let h = dec.header().cloned().expect("header after a good file");
    Ok((h, recs, stats.expect("end after finish() passed")))
}

/// Frame start offsets of a well-formed file, end frame included.
fn frame_starts(file: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = FILE_HEADER_LEN;
    while at < file.len() {
        starts.push(at);
        let stored = u32::from_le_bytes(file[at + 8..at + 12].try_into().unwrap()) as usize;
        at += FRAME_HEADER_LEN + stored;
    }
    assert_eq!(at, file.len());
    starts
}

#[test]
fn round_trip_with_each_compression() {
    let recs = sample_records();
    let mut sizes = Vec::new();
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (file, stats) = encode(&recs, header(c), DEFAULT_BLOCK_SIZE);
        let (h, got, end) = decode(&file, 1 << 20).unwrap();
        assert_eq!(h, header(c));
        assert_eq!(got.len(), recs.len());
        for (i, (a, b)) in got.iter().zip(&recs).enumerate() {
            assert_eq!(a, b, "record {i} with {c}");
        }
        assert_eq!(end, stats);
        assert_eq!(stats.records, recs.len() as u64);
        assert_eq!(stats.keys, recs.len() as u64 - 50);
        assert_eq!(stats.bytes, file.len() as u64);
        assert_eq!(stats.crc32, crc32fast::hash(&file));
        assert_eq!(stats.blocks as usize, frame_starts(&file).len() - 1);
        // The 5 MB value alone needs more than 80 blocks of 64 KiB.
        assert!(stats.blocks > 80, "{stats:?}");
        sizes.push(file.len());
    }
    // The small keys compress; the random 5 MB do not, so blocks of them are stored raw.
    assert!(sizes[1] < sizes[0] && sizes[2] < sizes[0], "{sizes:?}");
}

#[test]
fn incompressible_blocks_are_stored_raw_and_compressible_ones_are_not() {
    let mut rng = Rng(7);
    let recs = vec![
        string(0, b"noise", &rng.bytes(300_000), None, 0),
        string(0, b"zeros", &vec![0u8; 300_000], None, 0),
    ];
    for c in [Compression::Lz4, Compression::Zstd] {
        let (file, _) = encode(&recs, header(c), DEFAULT_BLOCK_SIZE);
        let codecs: Vec<u8> = frame_starts(&file).iter().map(|&at| file[at + 4]).collect();
        assert!(codecs.contains(&0), "{c}: {codecs:?}");
        assert!(codecs.contains(&c.as_u8()), "{c}: {codecs:?}");
        let (_, got, _) = decode(&file, 4096).unwrap();
        assert_eq!(got, recs);
    }
}

#[test]
fn streamed_value_gives_the_same_bytes_as_a_whole_value() {
    let mut rng = Rng(3);
    let value = rng.bytes(1_000_003);
    let (whole, whole_stats) = encode(
        &[string(5, b"k", &value, Some(99), 4)],
        header(Compression::Lz4),
        4096,
    );
    let mut enc = SnapshotEncoder::with_block_size(header(Compression::Lz4), 4096);
    enc.begin_string(5, b"k", value.len() as u64, Some(99), 4);
    let mut file = Vec::new();
    for chunk in value.chunks(7777) {
        enc.value_chunk(chunk);
        // Output is produced while the value streams: memory stays at about a block.
        assert!(enc.pending_bytes() < 3 * 4096 + 7777 + 100);
        while let Some(b) = enc.take_output() {
            file.extend_from_slice(&b);
        }
    }
    let (tail, stats) = enc.finish();
    file.extend_from_slice(&tail);
    assert_eq!(file, whole);
    assert_eq!(stats, whole_stats);
}

#[test]
fn one_byte_at_a_time_gives_the_same_records() {
    let recs: Vec<Record> = sample_records()
        .into_iter()
        .filter(|r| match &r.value {
            RecordValue::String(v) => v.len() < 100_000,
            RecordValue::Tombstone => true,
        })
        .step_by(7)
        .collect();
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (file, stats) = encode(&recs, header(c), 1000);
        let (_, got, end) = decode(&file, 1).unwrap();
        assert_eq!(got, recs);
        assert_eq!(end, stats);
        let (_, got, _) = decode(&file, 333).unwrap();
        assert_eq!(got, recs);
    }
}

#[test]
fn empty_snapshot_round_trips() {
    let (file, stats) = encode(&[], header(Compression::Zstd), DEFAULT_BLOCK_SIZE);
    assert_eq!(
        file.len(),
        FILE_HEADER_LEN + FRAME_HEADER_LEN + END_PAYLOAD_LEN
    );
    let (_, got, end) = decode(&file, 10).unwrap();
    assert!(got.is_empty());
    assert_eq!(end, stats);
    assert_eq!(stats.records, 0);
}

#[test]
fn tiny_block_sizes_work() {
    let recs = vec![string(1, b"abc", b"defgh", Some(5), 9), tombstone(2, b"x")];
    for bs in [0, 1, 2, 5] {
        let (file, stats) = encode(&recs, header(Compression::Lz4), bs);
        let (_, got, _) = decode(&file, 3).unwrap();
        assert_eq!(got, recs);
        assert!(stats.blocks >= stats.raw_bytes / bs.max(1) as u64);
    }
}

fn small_file() -> (Vec<u8>, Vec<Record>) {
    let mut rng = Rng(11);
    let recs: Vec<Record> = (0..40u32)
        .map(|i| {
            if i % 9 == 0 {
                tombstone(0, format!("t{i}").as_bytes())
            } else {
                let v = rng.bytes((i * 13) as usize % 90);
                string(
                    i as u16 % 3,
                    format!("k{i}").as_bytes(),
                    &v,
                    Some(u64::from(i)),
                    i,
                )
            }
        })
        .collect();
    (encode(&recs, header(Compression::Lz4), 256).0, recs)
}

/// Feeds all of `file`, collecting records until an error or the end.
fn decode_lossy(file: &[u8]) -> (Vec<Record>, Result<(), FormatError>) {
    let mut dec = SnapshotDecoder::new();
    dec.feed(file);
    let mut recs = Vec::new();
    loop {
        match dec.next() {
            Ok(Some(Item::Record(r))) => recs.push(r),
            Ok(Some(_)) => {}
            Ok(None) => return (recs, dec.finish()),
            Err(e) => return (recs, Err(e)),
        }
    }
}

#[test]
fn every_bit_flip_is_caught_at_its_frame() {
    let (file, recs) = small_file();
    let starts = frame_starts(&file);
    assert!(
        starts.len() > 5,
        "want several blocks, got {}",
        starts.len()
    );
    for i in 0..file.len() {
        for bit in 0..8 {
            let mut bad = file.clone();
            bad[i] ^= 1 << bit;
            let (got, res) = decode_lossy(&bad);
            let err = res.expect_err("a flipped file must not decode");
            // Whatever came out before the error is exactly the original data.
            assert_eq!(got[..], recs[..got.len()], "byte {i} bit {bit}");
            if i >= FILE_HEADER_LEN {
                let frame = *starts.iter().filter(|&&s| s <= i).max().unwrap();
                assert_eq!(err.kind, ErrorKind::ChecksumMismatch, "byte {i}: {err}");
                assert_eq!(err.offset, frame as u64, "byte {i}: {err}");
                assert!(
                    err.to_string().contains("checksum mismatch in block"),
                    "{err}"
                );
            }
        }
    }
}

#[test]
fn every_cut_is_truncated_at_the_cut() {
    let (file, recs) = small_file();
    for cut in 0..file.len() {
        let (got, res) = decode_lossy(&file[..cut]);
        let err = res.expect_err("a cut file must not decode");
        assert_eq!(err.kind, ErrorKind::Truncated, "cut {cut}: {err}");
        assert_eq!(err.offset, cut as u64);
        assert_eq!(got[..], recs[..got.len()]);
    }
    let (got, res) = decode_lossy(&file);
    res.unwrap();
    assert_eq!(got, recs);
}

#[test]
fn bytes_after_the_end_frame_are_corrupt() {
    let (mut file, _) = small_file();
    file.push(0);
    let (_, res) = decode_lossy(&file);
    assert_eq!(res.unwrap_err().kind, ErrorKind::Corrupt);
}

#[test]
fn header_problems_are_named() {
    let (file, _) = small_file();
    let mut bad = file.clone();
    bad[0] = b'X';
    assert_eq!(decode_lossy(&bad).1.unwrap_err().kind, ErrorKind::BadMagic);
    // Recognised as foreign from the first byte, without waiting for a whole header.
    assert_eq!(decode_lossy(b"R").1.unwrap_err().kind, ErrorKind::BadMagic);
    let mut bad = file.clone();
    bad[8] = 3;
    assert_eq!(
        decode_lossy(&bad).1.unwrap_err().kind,
        ErrorKind::UnsupportedVersion
    );
    let mut bad = file.clone();
    bad[20] ^= 1;
    let err = decode_lossy(&bad).1.unwrap_err();
    assert_eq!(err.kind, ErrorKind::ChecksumMismatch);
    assert_eq!(err.offset, 0);
}

#[test]
fn unknown_record_kinds_are_skipped_and_counted() {
    let mut enc = SnapshotEncoder::with_block_size(header(Compression::None), 100);
    enc.write_string(0, b"a", b"1", None, 0);
    enc.write_raw_record(kind::LIST, b"a list body");
    enc.write_raw_record(200, &vec![7u8; 1000]); // spans ten blocks
    enc.write_raw_record(99, b"");
    enc.write_string(0, b"b", b"2", None, 0);
    let (file, stats) = enc.finish();
    let mut dec = SnapshotDecoder::new();
    dec.feed(&file);
    let mut keys = Vec::new();
    let mut end = None;
    while let Some(item) = dec.next().unwrap() {
        match item {
            Item::Record(r) => keys.push(r.key),
            Item::Object(o) => panic!("no Object records here: {o:?}"),
            Item::Function(f) => panic!("no Function records here: {f:?}"),
            Item::End(s) => end = Some(s),
            other => panic!("no pieces here: {other:?}"),
        }
    }
    dec.finish().unwrap();
    assert_eq!(
        keys,
        vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]
    );
    assert_eq!(dec.skipped_unknown(), 3);
    assert_eq!(end.unwrap().records, 5);
    assert_eq!(stats.records, 5);
}

#[test]
fn function_records_come_back_first_and_are_not_keys() {
    let lib = b"#!lua name=l\nredis.register_function('f', function() return 1 end)";
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
        // Small blocks: the second library spans several.
        let mut enc = SnapshotEncoder::with_block_size(header(compression), 32);
        enc.write_function(lib);
        enc.write_function(&[b'x'; 300]);
        enc.write_function(b"");
        enc.write_string(0, b"k", b"v", None, 0);
        let (file, stats) = enc.finish();
        assert_eq!(stats.records, 4);
        assert_eq!(stats.keys, 1);
        for chunk in [1, 7, file.len()] {
            let (items, end) = decode_items(&file, chunk).unwrap();
            assert_eq!(items.len(), 4, "{compression:?} chunk {chunk}");
            assert_eq!(items[0], Item::Function(Bytes::from_static(lib)));
            assert_eq!(items[1], Item::Function(Bytes::from(vec![b'x'; 300])));
            assert_eq!(items[2], Item::Function(Bytes::new()));
            assert!(matches!(&items[3], Item::Record(r) if &r.key[..] == b"k"));
            assert_eq!((end.records, end.keys), (4, 1));
        }
        let mut dec = SnapshotDecoder::new();
        dec.feed(&file);
        while dec.next().unwrap().is_some() {}
        assert_eq!(dec.skipped_unknown(), 0);
    }
}

#[test]
fn checksummed_but_malformed_records_are_corrupt() {
    let cases: Vec<(u8, Vec<u8>)> = vec![
        (0, b"zero kind".to_vec()),
        (kind::STRING, vec![0, 0x80, 1]),     // unknown flag bit
        (kind::STRING, vec![0]),              // no flags byte
        (kind::STRING, vec![0, 1, 1, 2]),     // expire cut short
        (kind::STRING, vec![0, 0, 50, b'k']), // key longer than the body
        (kind::STRING, vec![0xff, 0xff, 0x7f, 0]), // db > 65535
        (kind::TOMBSTONE, vec![0x80]),        // db varint cut short
    ];
    for (k, body) in cases {
        let mut enc = SnapshotEncoder::new(header(Compression::None));
        enc.write_raw_record(k, &body);
        let (file, _) = enc.finish();
        let (got, res) = decode_lossy(&file);
        assert!(got.is_empty());
        let err = res.unwrap_err();
        assert_eq!(
            err.kind,
            ErrorKind::Corrupt,
            "kind {k} body {body:?}: {err}"
        );
        assert_eq!(err.offset, FILE_HEADER_LEN as u64);
    }
}

#[test]
fn errors_are_sticky() {
    let (mut file, _) = small_file();
    file[FILE_HEADER_LEN + 30] ^= 1;
    let mut dec = SnapshotDecoder::new();
    dec.feed(&file);
    let first = dec.next().unwrap_err();
    assert_eq!(dec.next().unwrap_err(), first);
    assert_eq!(dec.finish().unwrap_err(), first);
}

#[test]
fn writer_and_reader_over_files() {
    let recs = sample_records();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(crate::shard_file_name("snap", 3));
    let file = std::fs::File::create(&path).unwrap();
    let mut w = SnapshotWriter::new(std::io::BufWriter::new(file), header(Compression::Zstd));
    for r in &recs {
        match &r.value {
            RecordValue::String(v) => {
                w.write_string(r.db, &r.key, v, r.expire_at_ms, r.client_flags)
            }
            RecordValue::Tombstone => w.write_tombstone(r.db, &r.key),
        }
        .unwrap();
    }
    let written = w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(written.bytes, bytes.len() as u64);
    assert_eq!(written.crc32, crc32fast::hash(&bytes));

    let mut r = SnapshotReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(r.header(), &header(Compression::Zstd));
    let mut got = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        got.push(rec);
    }
    assert_eq!(got, recs);
    assert_eq!(r.stats(), Some(&written));
    assert_eq!(r.skipped_unknown(), 0);

    // The same file cut short: the reader reports where the data ended.
    let cut = bytes.len() - 1000;
    let mut r = SnapshotReader::new(&bytes[..cut]).unwrap();
    let err = loop {
        match r.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("a cut file must not end cleanly"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind, ErrorKind::Truncated);
    assert_eq!(err.offset, cut as u64);
    assert!(SnapshotReader::new(&bytes[..20]).is_err());
    assert_eq!(
        SnapshotReader::new(&b"REDIS0010"[..]).err().unwrap().kind,
        ErrorKind::BadMagic
    );
}

#[test]
fn streaming_writer_matches_whole_writes() {
    let mut a = SnapshotWriter::with_block_size(Vec::new(), header(Compression::None), 512);
    a.write_string(0, b"k", &[1u8; 5000], None, 0).unwrap();
    let mut b = SnapshotWriter::with_block_size(Vec::new(), header(Compression::None), 512);
    b.begin_string(0, b"k", 5000, None, 0).unwrap();
    b.value_chunk(&[1u8; 2000]).unwrap();
    b.value_chunk(&[1u8; 3000]).unwrap();
    let (a, sa) = a.finish_into_inner().unwrap();
    let (b, sb) = b.finish_into_inner().unwrap();
    assert_eq!(a, b);
    assert_eq!(sa, sb);
}

#[test]
#[should_panic(expected = "announced")]
fn too_many_value_bytes_panic() {
    let mut enc = SnapshotEncoder::new(header(Compression::None));
    enc.begin_string(0, b"k", 3, None, 0);
    enc.value_chunk(b"four");
}

#[test]
#[should_panic(expected = "missing")]
fn unfinished_value_panics_at_the_next_record() {
    let mut enc = SnapshotEncoder::new(header(Compression::None));
    enc.begin_string(0, b"k", 3, None, 0);
    enc.value_chunk(b"ab");
    enc.write_tombstone(0, b"x");
}

#[test]
fn compression_names() {
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
        assert_eq!(Compression::from_u8(c.as_u8()), Some(c));
    }
    assert_eq!("ZSTD".parse::<Compression>().unwrap(), Compression::Zstd);
    assert!("gzip".parse::<Compression>().unwrap_err().contains("gzip"));
    assert_eq!(Compression::from_u8(3), None);
}

#[test]
fn varints() {
    for v in [
        0,
        1,
        127,
        128,
        300,
        u64::from(u32::MAX),
        u64::MAX - 1,
        u64::MAX,
    ] {
        let mut b = Vec::new();
        put_varint(&mut b, v);
        assert_eq!(b.len(), varint_len(v));
        assert_eq!(get_varint(&b), Ok(Some((v, b.len()))));
        assert_eq!(get_varint(&b[..b.len() - 1]), Ok(None));
    }
    assert_eq!(get_varint(&[0xff; 11]), Err(()));
    // Ten bytes whose last one would overflow 64 bits.
    let mut b = vec![0xff; 9];
    b.push(0x02);
    assert_eq!(get_varint(&b), Err(()));
}

/// Wraps a raw record stream in valid frames and an end frame with the given counts, so the
/// record parser itself sees arbitrary bytes behind good checksums.
fn frame_stream(stream: &[u8], block: usize, counts: [u64; 3]) -> Vec<u8> {
    use super::encoder::{encode_file_header, encode_frame_header};
    let mut file = encode_file_header(&header(Compression::None)).to_vec();
    for chunk in stream.chunks(block.max(1)) {
        file.extend_from_slice(&encode_frame_header(TAG_BLOCK, 0, chunk, chunk.len()));
        file.extend_from_slice(chunk);
    }
    let mut p = Vec::new();
    for c in counts {
        p.extend_from_slice(&c.to_le_bytes());
    }
    p.extend_from_slice(&crc32fast::hash(&file).to_le_bytes());
    file.extend_from_slice(&encode_frame_header(TAG_END, 0, &p, p.len()));
    file.extend_from_slice(&p);
    file
}

#[test]
fn end_frame_counts_must_match() {
    let mut stream = vec![kind::TOMBSTONE, 2, 0, b'x'];
    stream.extend_from_slice(&[kind::STRING, 4, 0, 0, 1, b'k']);
    let good = frame_stream(&stream, 3, [2, 1, stream.len() as u64]);
    let (got, res) = decode_lossy(&good);
    res.unwrap();
    assert_eq!(got.len(), 2);
    for counts in [[3, 1, 10], [2, 2, 10], [2, 1, 11]] {
        let (_, res) = decode_lossy(&frame_stream(&stream, 3, counts));
        assert_eq!(res.unwrap_err().kind, ErrorKind::Corrupt, "{counts:?}");
    }
    // A record cut off by the end frame.
    let (_, res) = decode_lossy(&frame_stream(&stream[..8], 3, [1, 0, 8]));
    assert_eq!(res.unwrap_err().kind, ErrorKind::Corrupt);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_record_streams_never_panic(
        stream in proptest::collection::vec(any::<u8>(), 0..400),
        block in 1usize..64,
        chunk in 1usize..50,
    ) {
        let file = frame_stream(&stream, block, [0, 0, stream.len() as u64]);
        let mut dec = SnapshotDecoder::new();
        for piece in file.chunks(chunk) {
            dec.feed(piece);
            while let Ok(Some(_)) = dec.next() {}
        }
        let _ = dec.finish();
    }

    #[test]
    fn arbitrary_files_never_panic(
        tail in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut file = super::encoder::encode_file_header(&header(Compression::Lz4)).to_vec();
        file.extend_from_slice(&tail);
        let (_, res) = decode_lossy(&file);
        prop_assert!(res.is_err());
        let (_, res) = decode_lossy(&tail);
        prop_assert!(res.is_err());
    }

    #[test]
    fn mutated_files_never_decode_wrong_data(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let (file, recs) = small_file();
        let mut bad = file.clone();
        for (at, v) in edits {
            let at = at % bad.len();
            bad[at] = v;
        }
        let (got, res) = decode_lossy(&bad);
        prop_assert_eq!(&got[..], &recs[..got.len()]);
        if bad != file {
            prop_assert!(res.is_err());
        }
    }

    #[test]
    fn random_records_round_trip(
        recs in proptest::collection::vec(
            (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..20),
             proptest::collection::vec(any::<u8>(), 0..300),
             proptest::option::of(any::<u64>()), any::<u32>(), any::<bool>()),
            0..30),
        block in 1usize..500,
        codec in 0u8..3,
    ) {
        let recs: Vec<Record> = recs
            .into_iter()
            .map(|(db, k, v, e, f, t)| if t { tombstone(db, &k) } else { string(db, &k, &v, e, f) })
            .collect();
        let c = Compression::from_u8(codec).unwrap();
        let (file, stats) = encode(&recs, header(c), block);
        let (_, got, end) = decode(&file, 97).unwrap();
        prop_assert_eq!(got, recs);
        prop_assert_eq!(end, stats);
    }
}

/// Object records of a few RDB types, with and without expiry and client flags, their values
/// written by the RDB codec.
fn sample_objects() -> Vec<ObjectRecord> {
    use crate::rdb::codec::{write_len, write_string, StringCompression};
    use crate::rdb::types;
    let object = |db, key: &[u8], expire, flags, rdb_type, value: Vec<u8>| ObjectRecord {
        db,
        key: Bytes::copy_from_slice(key),
        expire_at_ms: expire,
        client_flags: flags,
        rdb_type,
        value: Bytes::from(value),
    };
    let mut list = Vec::new();
    write_len(&mut list, 3);
    for item in [&b"a"[..], b"12345", &[b'x'; 500]] {
        write_string(&mut list, item, StringCompression::Lzf);
    }
    let mut hash = Vec::new();
    write_len(&mut hash, 2);
    for field in [&b"f1"[..], b"v1", b"f2", &vec![b'v'; 3000]] {
        write_string(&mut hash, field, StringCompression::Off);
    }
    let mut zset = Vec::new();
    write_len(&mut zset, 1);
    write_string(&mut zset, b"member", StringCompression::Off);
    zset.extend_from_slice(&2.5f64.to_le_bytes());
    let mut listpack = Vec::new();
    write_string(&mut listpack, b"an opaque listpack", StringCompression::Off);
    vec![
        object(0, b"list", None, 0, types::LIST, list),
        object(3, b"hash", Some(1_800_000_000_000), 0, types::HASH, hash),
        object(9, b"zset", None, 77, types::ZSET_2, zset),
        object(
            u16::MAX,
            b"lp",
            Some(5),
            u32::MAX,
            types::HASH_LISTPACK,
            listpack,
        ),
        object(1, b"", None, 0, types::SET, vec![0]),
    ]
}

/// Strings, tombstones and objects interleaved; returns the file and what was written.
fn encode_with_objects(h: SnapshotHeader, block_size: usize) -> (Vec<u8>, FileStats, Vec<Item>) {
    let mut enc = SnapshotEncoder::with_block_size(h, block_size);
    let mut items = Vec::new();
    for (i, o) in sample_objects().into_iter().enumerate() {
        let s = string(i as u16, format!("s{i}").as_bytes(), b"v", None, 0);
        enc.write_string(s.db, &s.key, b"v", None, 0);
        items.push(Item::Record(s));
        let head = KeyHead {
            db: o.db,
            key: &o.key,
            expire_at_ms: o.expire_at_ms,
            client_flags: o.client_flags,
        };
        if i % 2 == 0 {
            enc.write_object(&head, o.rdb_type, &o.value);
        } else {
            enc.begin_object(&head, o.rdb_type, o.value.len() as u64);
            for chunk in o.value.chunks(1000) {
                enc.value_chunk(chunk);
            }
        }
        items.push(Item::Object(o));
    }
    enc.write_tombstone(2, b"gone");
    items.push(Item::Record(tombstone(2, b"gone")));
    let mut file = Vec::new();
    while let Some(b) = enc.take_output() {
        file.extend_from_slice(&b);
    }
    let (tail, stats) = enc.finish();
    file.extend_from_slice(&tail);
    (file, stats, items)
}

/// Every item of `file` fed `chunk` bytes at a time, and the end totals.
fn decode_items(file: &[u8], chunk: usize) -> Result<(Vec<Item>, FileStats), FormatError> {
    decode_items_streaming(file, chunk, false)
}

fn decode_items_streaming(
    file: &[u8],
    chunk: usize,
    stream: bool,
) -> Result<(Vec<Item>, FileStats), FormatError> {
    let mut dec = SnapshotDecoder::new();
    dec.stream_pieces(stream);
    let mut items = Vec::new();
    let mut fed = 0;
    loop {
        match dec.next()? {
            Some(Item::End(s)) => {
                dec.finish()?;
                return Ok((items, s));
            }
            Some(item) => items.push(item),
            None if fed < file.len() => {
                let n = chunk.min(file.len() - fed);
                dec.feed(&file[fed..fed + n]);
                fed += n;
            }
            None => {
                dec.finish()?;
                unreachable!("finish() passes only after the end frame");
            }
        }
    }
}

#[test]
fn object_records_round_trip() {
    for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
        for block in [7, 4096, DEFAULT_BLOCK_SIZE] {
            let (file, stats, items) = encode_with_objects(header(c), block);
            for chunk in [1, 333, 1 << 20] {
                let (got, end) = decode_items(&file, chunk).unwrap();
                assert_eq!(got, items, "{c}, block {block}, chunk {chunk}");
                assert_eq!(end, stats);
            }
            assert_eq!(stats.records, 11);
            // The end frame's `keys` counts String records only, as readers older than
            // Object records count them.
            assert_eq!(stats.keys, 5);
            assert_eq!(stats.objects, 5);
        }
    }
}

#[test]
fn object_values_decode_with_the_rdb_codec() {
    use crate::rdb::codec::{read_len, read_string, RdbCursor};
    let (file, _, _) = encode_with_objects(header(Compression::Lz4), 100);
    let (items, _) = decode_items(&file, 1 << 20).unwrap();
    let Some(Item::Object(list)) = items.iter().find(|i| matches!(i, Item::Object(_))) else {
        panic!("no object decoded");
    };
    assert_eq!(list.rdb_type, crate::rdb::types::LIST);
    let mut c = RdbCursor::new(&list.value);
    assert_eq!(read_len(&mut c).unwrap(), 3);
    assert_eq!(read_string(&mut c).unwrap(), b"a");
    assert_eq!(read_string(&mut c).unwrap(), b"12345");
    assert_eq!(read_string(&mut c).unwrap(), vec![b'x'; 500]);
    c.finish().unwrap();
}

#[test]
fn reader_hands_objects_to_next_item_and_counts_them_in_next_record() {
    let (file, stats, items) = encode_with_objects(header(Compression::Zstd), 4096);
    let mut r = SnapshotReader::new(&file[..]).unwrap();
    let mut got = Vec::new();
    while let Some(item) = r.next_item().unwrap() {
        got.push(item);
    }
    assert_eq!(got, items);
    assert_eq!(r.stats(), Some(&stats));
    assert_eq!(r.skipped_unknown(), 0);

    // A caller that takes only strings and tombstones is told what it did not get.
    let mut r = SnapshotReader::new(&file[..]).unwrap();
    let mut records = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        records.push(Item::Record(rec));
    }
    let want: Vec<Item> = items
        .into_iter()
        .filter(|i| matches!(i, Item::Record(_)))
        .collect();
    assert_eq!(records, want);
    assert_eq!(r.skipped_unknown(), 5);
    assert_eq!(r.stats(), Some(&stats));
}

#[test]
fn writer_writes_object_records() {
    let o = &sample_objects()[1];
    let head = KeyHead {
        db: o.db,
        key: &o.key,
        expire_at_ms: o.expire_at_ms,
        client_flags: o.client_flags,
    };
    let mut w = SnapshotWriter::new(Vec::new(), header(Compression::None));
    w.write_object(&head, o.rdb_type, &o.value).unwrap();
    w.begin_object(&head, o.rdb_type, o.value.len() as u64)
        .unwrap();
    w.value_chunk(&o.value).unwrap();
    let (file, stats) = w.finish_into_inner().unwrap();
    assert_eq!(stats.objects, 2);
    let (got, _) = decode_items(&file, 1 << 20).unwrap();
    assert_eq!(got, vec![Item::Object(o.clone()), Item::Object(o.clone())]);
}

#[test]
fn cuts_of_an_object_file_are_truncated_at_the_cut() {
    let (file, _, items) = encode_with_objects(header(Compression::Lz4), 50);
    // Every byte of the first few frames, then a stride: each cut decodes the whole prefix.
    let cuts = (0..1000).chain((1000..file.len()).step_by(7));
    for cut in cuts {
        let mut dec = SnapshotDecoder::new();
        dec.feed(&file[..cut]);
        let mut got = Vec::new();
        let err = loop {
            match dec.next() {
                Ok(Some(item)) => got.push(item),
                Ok(None) => break dec.finish().expect_err("a cut file must not decode"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind, ErrorKind::Truncated, "cut {cut}: {err}");
        assert_eq!(err.offset, cut as u64);
        assert_eq!(got[..], items[..got.len()]);
    }
}

#[test]
fn malformed_object_records_are_corrupt_at_their_frame() {
    use crate::rdb::types;
    // db 0, flags 0, key "k", then what follows.
    let with = |tail: &[u8]| {
        let mut body = vec![0, 0, 1, b'k'];
        body.extend_from_slice(tail);
        body
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![0], "object record too short"),
        (vec![0, 0x04, 1, b'k', 0, 0], "unknown object record flags"),
        (vec![0, 1, 1, 2], "object record too short"),
        (vec![0, 2, 1], "object record too short"),
        (vec![0, 0, 9, b'k'], "key longer than the record"),
        (with(&[]), "without its RDB type"),
        (with(&[6, 0]), "cannot skip type 6"),
        (with(&[8, 0]), "cannot skip type 8"),
        (with(&[26, 0]), "cannot skip type 26"),
        (with(&[types::LIST, 3, 1, b'a']), "data ends"),
        (with(&[types::LIST, 1, 1, b'a', 0]), "1 bytes after its end"),
        (with(&[types::LIST, 1, 0xC4]), "unknown string encoding 4"),
        (with(&[types::HASH, 0x82]), "bad length encoding"),
        (
            with(&[
                types::LIST,
                0x81,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
                0xff,
            ]),
            "data ends",
        ),
    ];
    for (body, want) in cases {
        let mut enc = SnapshotEncoder::new(header(Compression::None));
        enc.write_raw_record(kind::OBJECT, &body);
        let (file, _) = enc.finish();
        let err = decode_items(&file, 1 << 20).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Corrupt, "body {body:?}: {err}");
        assert_eq!(err.offset, FILE_HEADER_LEN as u64, "body {body:?}: {err}");
        assert!(err.to_string().contains(want), "body {body:?}: {err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_object_values_never_panic(
        rdb_type in 0u8..30,
        value in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let head = KeyHead { db: 1, key: b"k", expire_at_ms: Some(9), client_flags: 3 };
        let mut enc = SnapshotEncoder::new(header(Compression::None));
        enc.write_object(&head, rdb_type, &value);
        let (file, _) = enc.finish();
        match decode_items(&file, 64) {
            Ok((items, _)) => {
                let Some(Item::Object(o)) = items.first() else {
                    panic!("no object in {items:?}");
                };
                prop_assert_eq!(o.rdb_type, rdb_type);
                prop_assert_eq!(&o.value[..], &value[..]);
            }
            Err(e) => {
                prop_assert_eq!(e.kind, ErrorKind::Corrupt);
                prop_assert_eq!(e.offset, FILE_HEADER_LEN as u64);
            }
        }
    }
}

use crate::rdb::types as rdb_types;

/// An RDB set of `n` members (a value well past one piece for large `n`).
fn big_set(n: usize) -> Vec<u8> {
    use crate::rdb::codec::{write_len, write_string, StringCompression};
    let mut v = Vec::new();
    write_len(&mut v, n as u64);
    for i in 0..n {
        write_string(
            &mut v,
            format!("member:{i}").as_bytes(),
            StringCompression::Off,
        );
    }
    v
}

#[test]
fn a_large_object_goes_in_pieces_and_comes_back_whole() {
    let value = big_set(40_000);
    assert!(value.len() > 5 * PIECE_LEN);
    let head = KeyHead {
        db: 2,
        key: b"big",
        expire_at_ms: Some(1_900_000_000_000),
        client_flags: 0,
    };
    for compression in [Compression::None, Compression::Lz4] {
        let mut enc = SnapshotEncoder::new(header(compression));
        enc.write_string(0, b"before", b"x", None, 0);
        enc.write_object(&head, rdb_types::SET, &value);
        // The server's way: a head, pieces of any length, an end.
        enc.begin_pieces(
            &KeyHead {
                key: b"streamed",
                ..head
            },
            rdb_types::SET,
        );
        for part in value.chunks(10_000) {
            enc.write_piece(part);
        }
        enc.end_pieces();
        enc.write_string(0, b"after", b"y", None, 0);
        let (file, stats) = enc.finish();
        let pieces = value.len().div_ceil(PIECE_LEN) as u64;
        let streamed = value.chunks(10_000).count() as u64;
        assert_eq!(stats.records, 2 + (2 + pieces) + (2 + streamed));
        assert_eq!(stats.objects, 2);
        assert_eq!(&file[8..10], &2u16.to_le_bytes());
        for chunk in [7, 4096, 1 << 20] {
            let (items, s) = decode_items(&file, chunk).unwrap();
            assert_eq!(s.records, stats.records);
            assert_eq!(s.objects, 2);
            assert_eq!(items.len(), 4);
            for (item, key) in items[1..3].iter().zip([&b"big"[..], b"streamed"]) {
                let Item::Object(o) = item else {
                    panic!("not an object: {item:?}");
                };
                assert_eq!(&o.key[..], key);
                assert_eq!(o.db, 2);
                assert_eq!(o.expire_at_ms, Some(1_900_000_000_000));
                assert_eq!(o.rdb_type, rdb_types::SET);
                assert!(o.value[..] == value[..]);
            }
        }
    }
}

#[test]
fn streamed_pieces_come_out_as_written_without_a_joined_copy() {
    let value = big_set(40_000);
    let head = KeyHead {
        db: 1,
        key: b"big",
        expire_at_ms: None,
        client_flags: 7,
    };
    let mut enc = SnapshotEncoder::new(header(Compression::Lz4));
    enc.write_object(&head, rdb_types::SET, &value);
    enc.write_object(
        &KeyHead {
            key: b"small",
            ..head
        },
        rdb_types::SET,
        &big_set(3),
    );
    let (file, stats) = enc.finish();
    for chunk in [7, 4096, 1 << 20] {
        let (items, s) = decode_items_streaming(&file, chunk, true).unwrap();
        assert_eq!(s.records, stats.records);
        assert_eq!(s.objects, 2);
        let Item::ObjectHead(o) = &items[0] else {
            panic!("not a head: {:?}", items[0]);
        };
        assert_eq!((&o.key[..], o.db, o.client_flags), (&b"big"[..], 1, 7));
        assert!(o.value.is_empty());
        let mut joined = Vec::new();
        for item in &items[1..items.len() - 2] {
            let Item::Piece(p) = item else {
                panic!("not a piece: {item:?}");
            };
            assert!(p.len() <= PIECE_LEN);
            joined.extend_from_slice(p);
        }
        assert!(joined == value);
        assert_eq!(items[items.len() - 2], Item::ObjectEnd);
        // A small object is one record, as ever.
        assert!(matches!(&items[items.len() - 1], Item::Object(o) if &o.key[..] == b"small"));
    }
    // A damaged piece is still caught at the end, streaming or not.
    let mut bad = file.to_vec();
    let at = bad.len() / 2;
    bad[at] ^= 1;
    assert!(decode_items_streaming(&bad, 4096, true).is_err());
}

/// A file of raw records (a head, pieces, ...) as a writer that went wrong would leave it.
fn raw_file(records: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut enc = SnapshotEncoder::new(header(Compression::None));
    for (k, body) in records {
        enc.write_raw_record(*k, body);
    }
    enc.finish().0.to_vec()
}

#[test]
fn cut_or_damaged_pieces_are_clear_errors() {
    let value = big_set(20_000);
    let mut head = vec![0u8, 0, 3];
    head.extend_from_slice(b"big");
    head.push(rdb_types::SET);
    let pieces: Vec<(u8, Vec<u8>)> = value
        .chunks(PIECE_LEN)
        .map(|p| (kind::PIECE, p.to_vec()))
        .collect();
    let end = |len: u64, n: u32, crc: u32| {
        let mut e = len.to_le_bytes().to_vec();
        e.extend_from_slice(&n.to_le_bytes());
        e.extend_from_slice(&crc.to_le_bytes());
        (kind::OBJECT_END, e)
    };
    let good_end = end(
        value.len() as u64,
        pieces.len() as u32,
        crc32fast::hash(&value),
    );
    let with = |mid: Vec<(u8, Vec<u8>)>| {
        let mut r = vec![(kind::OBJECT_HEAD, head.clone())];
        r.extend(mid);
        r
    };
    // Whole: it decodes.
    let mut all = with(pieces.clone());
    all.push(good_end.clone());
    assert_eq!(decode_items(&raw_file(&all), 4096).unwrap().0.len(), 1);

    let last_missing = {
        let mut r = with(pieces[..pieces.len() - 1].to_vec());
        r.push(good_end.clone());
        r
    };
    let no_end = with(pieces.clone());
    let other_between = {
        let mut r = with(pieces[..2].to_vec());
        r.push((kind::STRING, vec![0, 0, 1, b'k', b'v']));
        r
    };
    let bad_crc = {
        let mut r = with(pieces.clone());
        r.push(end(value.len() as u64, pieces.len() as u32, 1));
        r
    };
    let stray_piece = vec![pieces[0].clone()];
    let stray_end = vec![good_end.clone()];
    let cut_value = {
        // The pieces agree with their end but the RDB set inside is cut short.
        let short = &value[..value.len() - 3];
        let parts: Vec<(u8, Vec<u8>)> = short
            .chunks(PIECE_LEN)
            .map(|p| (kind::PIECE, p.to_vec()))
            .collect();
        let n = parts.len() as u32;
        let mut r = with(parts);
        r.push(end(short.len() as u64, n, crc32fast::hash(short)));
        r
    };
    let cases = [
        (last_missing, ErrorKind::Corrupt, "pieces missing or extra"),
        (no_end, ErrorKind::Corrupt, "no end (cut off)"),
        (
            other_between,
            ErrorKind::Corrupt,
            "is cut off after 2 piece(s)",
        ),
        (
            bad_crc,
            ErrorKind::ChecksumMismatch,
            "pieces of object \"big\"",
        ),
        (
            stray_piece,
            ErrorKind::Corrupt,
            "a piece without its object's head",
        ),
        (
            stray_end,
            ErrorKind::Corrupt,
            "an object's end without its head",
        ),
        (cut_value, ErrorKind::Corrupt, "object \"big\" in pieces"),
    ];
    for (records, want_kind, want) in cases {
        let err = decode_items(&raw_file(&records), 4096).unwrap_err();
        assert_eq!(err.kind, want_kind, "{err}");
        assert!(err.to_string().contains(want), "{err}");
    }
    // A file cut anywhere inside the pieces: an error, never a panic or an object.
    let mut enc = SnapshotEncoder::new(header(Compression::Lz4));
    let h = KeyHead {
        db: 0,
        key: b"big",
        expire_at_ms: None,
        client_flags: 0,
    };
    enc.write_object(&h, rdb_types::SET, &value);
    let (file, _) = enc.finish();
    for cut in (FILE_HEADER_LEN..file.len()).step_by(997) {
        match decode_items(&file[..cut], 4096) {
            Err(e) => assert_eq!(e.kind, ErrorKind::Truncated, "cut at {cut}: {e}"),
            Ok(_) => panic!("a file cut at {cut} decoded"),
        }
    }
}

#[test]
fn version_1_files_still_load_and_newer_ones_are_refused() {
    let mut enc = SnapshotEncoder::new(header(Compression::None));
    enc.write_string(0, b"k", b"v", None, 0);
    let (file, _) = enc.finish();
    let restamp = |v: u16| {
        let mut f = file.to_vec();
        f[8..10].copy_from_slice(&v.to_le_bytes());
        let crc = crc32fast::hash(&f[..36]);
        f[36..40].copy_from_slice(&crc.to_le_bytes());
        // The file CRC in the end frame covers the header too.
        let end = f.len() - FRAME_HEADER_LEN - END_PAYLOAD_LEN;
        let body_crc = crc32fast::hash(&f[..end]);
        let at = end + FRAME_HEADER_LEN + 24;
        f[at..at + 4].copy_from_slice(&body_crc.to_le_bytes());
        let payload_crc = crc32fast::hash(&f[end + FRAME_HEADER_LEN..]);
        f[end + 16..end + 20].copy_from_slice(&payload_crc.to_le_bytes());
        let hcrc = crc32fast::hash(&f[end..end + 20]);
        f[end + 20..end + 24].copy_from_slice(&hcrc.to_le_bytes());
        f
    };
    let (items, _) = decode_items(&restamp(1), 64).unwrap();
    assert_eq!(items, vec![Item::Record(string(0, b"k", b"v", None, 0))]);
    let err = decode_items(&restamp(3), 64).unwrap_err();
    assert_eq!(err.kind, ErrorKind::UnsupportedVersion, "{err}");
    // In a version-1 file kinds 9..=11 are unknown records, skipped.
    let mut enc = SnapshotEncoder::new(header(Compression::None));
    enc.write_raw_record(kind::PIECE, b"not a piece there");
    enc.write_string(0, b"k", b"v", None, 0);
    let (f2, _) = enc.finish();
    let mut dec = SnapshotDecoder::new();
    let old = {
        let mut f = f2.to_vec();
        f[8..10].copy_from_slice(&1u16.to_le_bytes());
        let crc = crc32fast::hash(&f[..36]);
        f[36..40].copy_from_slice(&crc.to_le_bytes());
        f
    };
    dec.feed(&old);
    assert_eq!(
        dec.next().unwrap(),
        Some(Item::Record(string(0, b"k", b"v", None, 0)))
    );
    assert_eq!(dec.skipped_unknown(), 1);
}

//! `stats`: what a snapshot holds, in one streaming pass over its records.
//!
//! Counts records as stored (expired keys are counted under "expired", tombstones on their own
//! line; `compact` is what removes them). Objects (keys of types other than string) are keys
//! like strings, counted per type by their RDB type's name, their values at their RDB-encoded
//! size, and their elements counted per type (fields of a hash, members of a set or sorted set,
//! elements of a list), read from the encoding's counts without decoding the elements. Memory
//! is fixed: histograms are arrays of power-of-two buckets, the per-db table has at
//! most 65536 rows, the per-type table a row per RDB type name, and the largest values are a
//! heap of ten with key names cut to [`KEY_SHOWN`] bytes.

use crate::error::{Failure, EXIT_OK};
use crate::input::{Entry, ShardScan, SnapshotInput};
use crate::progress::Progress;
use ondisk::rdb::types;
use ondisk::{Record, RecordValue};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::Path;

/// How many of the largest values are listed.
const TOP: usize = 10;
/// Bytes of a key name kept for the largest-values list.
const KEY_SHOWN: usize = 64;
/// Bucket 0 holds size 0; bucket b > 0 holds sizes 2^(b-1) ..= 2^b - 1.
const BUCKETS: usize = 65;

/// TTL classes, in the order printed.
const TTL_LABELS: [&str; 7] = ["none", "expired", "<1m", "<1h", "<1d", "<7d", "more"];

#[derive(Default)]
struct Tally {
    records: u64,
    /// Strings and objects.
    keys: u64,
    objects: u64,
    /// Keys per type name: "string", then objects by their RDB type's ("hash", "list", ...).
    per_type: BTreeMap<&'static str, u64>,
    /// Elements per type name (objects only); objects whose count could not be read apart.
    elements: BTreeMap<&'static str, u64>,
    uncounted: u64,
    tombstones: u64,
    unknown: u64,
    per_db: BTreeMap<u16, u64>,
    value_sizes: Histogram,
    key_sizes: Histogram,
    ttl: [u64; 7],
    key_bytes: u64,
    value_bytes: u64,
    raw_bytes: u64,
    disk_bytes: u64,
    /// Min-heap of the largest values seen, at most [`TOP`].
    largest: BinaryHeap<Reverse<Large>>,
}

/// One of the largest values; ordered by size first.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Large {
    size: u64,
    db: u16,
    /// The key's first [`KEY_SHOWN`] bytes.
    key: Vec<u8>,
    key_len: usize,
}

struct Histogram([u64; BUCKETS]);

impl Default for Histogram {
    fn default() -> Self {
        Histogram([0; BUCKETS])
    }
}

impl Histogram {
    fn add(&mut self, size: u64) {
        self.0[(u64::BITS - size.leading_zeros()) as usize] += 1;
    }

    /// `(label, count)` from the first non-empty bucket to the last.
    fn rows(&self) -> Vec<(String, u64)> {
        let Some(first) = self.0.iter().position(|&n| n > 0) else {
            return Vec::new();
        };
        let last = self.0.iter().rposition(|&n| n > 0).unwrap_or(first);
        (first..=last)
            .map(|b| {
                let label = match b {
                    0 => "0".to_string(),
                    1 => "1".to_string(),
                    _ => {
                        let lo = 1u128 << (b - 1);
                        format!("{lo}-{}", (lo << 1) - 1)
                    }
                };
                (label, self.0[b])
            })
            .collect()
    }
}

fn ttl_class(expire_at_ms: Option<u64>, now_ms: u64) -> usize {
    const MIN: u64 = 60_000;
    let Some(at) = expire_at_ms else {
        return 0;
    };
    if at <= now_ms {
        return 1;
    }
    match at - now_ms {
        d if d < MIN => 2,
        d if d < 60 * MIN => 3,
        d if d < 24 * 60 * MIN => 4,
        d if d < 7 * 24 * 60 * MIN => 5,
        _ => 6,
    }
}

pub fn run(summary: &Path, now_ms: u64) -> Result<u8, Failure> {
    let input = SnapshotInput::open(summary)?;
    let progress = Progress::new("stats", input.total_bytes());
    let mut t = Tally::default();
    for index in 0..input.summary.files.len() {
        let path = input.file_path(index);
        let ctx = |e: Failure| e.context(path.display());
        let mut scan = ShardScan::open(&input, index, &progress).map_err(ctx)?;
        while let Some(entry) = scan.next().map_err(ctx)? {
            t.records += 1;
            let (type_name, value) = match &entry {
                Entry::Record(Record {
                    value: RecordValue::String(value),
                    ..
                }) => ("string", value),
                Entry::Record(_) => {
                    t.tombstones += 1;
                    continue;
                }
                Entry::ObjectHead(_) => {
                    return Err(Failure::Corrupt("an object in pieces, not joined".into()))
                }
                Entry::Object(o) => {
                    t.objects += 1;
                    let name = types::name(o.rdb_type);
                    match element_count(o.rdb_type, &o.value) {
                        Some(n) => *t.elements.entry(name).or_default() += n,
                        None => t.uncounted += 1,
                    }
                    (name, &o.value)
                }
            };
            *t.per_type.entry(type_name).or_default() += 1;
            let (db, key) = (entry.db(), entry.key());
            t.keys += 1;
            *t.per_db.entry(db).or_default() += 1;
            let (klen, vlen) = (key.len() as u64, value.len() as u64);
            t.key_sizes.add(klen);
            t.value_sizes.add(vlen);
            t.key_bytes += klen;
            t.value_bytes += vlen;
            t.ttl[ttl_class(entry.expire_at_ms(), now_ms)] += 1;
            let smallest = t.largest.peek().map(|Reverse(e)| e.size);
            if t.largest.len() < TOP || smallest.is_some_and(|s| vlen > s) {
                t.largest.push(Reverse(Large {
                    size: vlen,
                    db,
                    key: key[..key.len().min(KEY_SHOWN)].to_vec(),
                    key_len: key.len(),
                }));
                if t.largest.len() > TOP {
                    t.largest.pop();
                }
            }
        }
        if let Some(stats) = scan.stats() {
            t.raw_bytes += stats.raw_bytes;
            t.disk_bytes += stats.bytes;
        }
        t.records += scan.skipped_unknown();
        t.unknown += scan.skipped_unknown();
    }
    progress.finish();
    print_report(&input, &t);
    Ok(EXIT_OK)
}

fn print_report(input: &SnapshotInput, t: &Tally) {
    let s = &input.summary;
    report!("snapshot: {}", input.summary_path.display());
    report!(
        "id: {:x}  created_ms: {}  files: {}  compression: {}",
        s.snapshot_id,
        s.created_ms,
        s.files.len(),
        s.compression
    );
    report!("records: {}", t.records);
    report!("keys: {}", t.keys);
    report!("objects: {}", t.objects);
    report!("tombstones: {}", t.tombstones);
    if t.unknown > 0 {
        report!("unknown kinds: {}", t.unknown);
    }
    report!("keys per db:");
    for (db, n) in &t.per_db {
        report!("  db {db}: {n}");
    }
    report!("keys per type:");
    report!(
        "  string: {}",
        t.per_type.get("string").copied().unwrap_or(0)
    );
    for (name, n) in t.per_type.iter().filter(|(name, _)| **name != "string") {
        report!("  {name}: {n}");
    }
    if t.objects > 0 {
        report!("elements per type:");
        for (name, n) in &t.elements {
            report!("  {name}: {n}");
        }
        if t.uncounted > 0 {
            report!("  uncounted objects: {}", t.uncounted);
        }
    }
    report!("value sizes (bytes):");
    for (label, n) in t.value_sizes.rows() {
        report!("  {label}: {n}");
    }
    report!("key sizes (bytes):");
    for (label, n) in t.key_sizes.rows() {
        report!("  {label}: {n}");
    }
    report!("ttl:");
    for (label, n) in TTL_LABELS.iter().zip(t.ttl) {
        report!("  {label}: {n}");
    }
    report!("largest values:");
    let mut top: Vec<_> = t.largest.iter().map(|Reverse(e)| e).collect();
    top.sort_by(|a, b| {
        b.size
            .cmp(&a.size)
            .then_with(|| (a.db, &a.key).cmp(&(b.db, &b.key)))
    });
    for (i, l) in top.iter().enumerate() {
        let cut = if l.key_len > l.key.len() {
            format!("... ({} bytes)", l.key_len)
        } else {
            String::new()
        };
        report!(
            "  {}. db {} \"{}\"{cut}: {}",
            i + 1,
            l.db,
            escape(&l.key),
            l.size
        );
    }
    report!("bytes keys+values: {}", t.key_bytes + t.value_bytes);
    report!("bytes raw: {}", t.raw_bytes);
    report!("bytes on disk: {}", t.disk_bytes);
}

/// Elements of an RDB-encoded collection (a hash's fields, not its fields and values), from
/// the counts its encoding carries; None for a type it does not know or a damaged value.
fn element_count(rdb_type: u8, value: &[u8]) -> Option<u64> {
    use ondisk::rdb::codec::{read_len, read_string, RdbInput};
    use ondisk::rdb::RdbCursor;
    use types::*;
    let mut c = RdbCursor::new(value);
    let skip8 = |c: &mut RdbCursor<'_>| c.read_exact(&mut [0u8; 8]).ok();
    match rdb_type {
        LIST | SET | ZSET | ZSET_2 | HASH => read_len(&mut c).ok(),
        HASH_METADATA => {
            skip8(&mut c)?;
            read_len(&mut c).ok()
        }
        SET_INTSET => {
            let b = read_string(&mut c).ok()?;
            Some(u64::from(u32::from_le_bytes(b.get(4..8)?.try_into().ok()?)))
        }
        LIST_ZIPLIST | ZSET_ZIPLIST | HASH_ZIPLIST => {
            let n = ziplist_len(&read_string(&mut c).ok()?)?;
            Some(if rdb_type == LIST_ZIPLIST { n } else { n / 2 })
        }
        SET_LISTPACK | ZSET_LISTPACK | HASH_LISTPACK => {
            let n = listpack_len(&read_string(&mut c).ok()?)?;
            Some(if rdb_type == SET_LISTPACK { n } else { n / 2 })
        }
        HASH_LISTPACK_EX => {
            skip8(&mut c)?;
            Some(listpack_len(&read_string(&mut c).ok()?)? / 3)
        }
        LIST_QUICKLIST => {
            let nodes = read_len(&mut c).ok()?;
            (0..nodes).try_fold(0u64, |t, _| {
                Some(t + ziplist_len(&read_string(&mut c).ok()?)?)
            })
        }
        LIST_QUICKLIST_2 => {
            let nodes = read_len(&mut c).ok()?;
            (0..nodes).try_fold(0u64, |t, _| {
                let container = read_len(&mut c).ok()?;
                let node = read_string(&mut c).ok()?;
                // 1: one plain element; 2: a listpack.
                Some(
                    t + if container == 1 {
                        1
                    } else {
                        listpack_len(&node)?
                    },
                )
            })
        }
        _ => None,
    }
}

/// A ziplist's element count from its header (None when it says "count them": 65535).
fn ziplist_len(zl: &[u8]) -> Option<u64> {
    let n = u16::from_le_bytes(zl.get(8..10)?.try_into().ok()?);
    (n != u16::MAX).then_some(u64::from(n))
}

/// A listpack's element count: its header's, or counted entry by entry past 65534.
fn listpack_len(lp: &[u8]) -> Option<u64> {
    let n = u16::from_le_bytes(lp.get(4..6)?.try_into().ok()?);
    if n != u16::MAX {
        return Some(u64::from(n));
    }
    let (mut at, mut count) = (6usize, 0u64);
    loop {
        let b = *lp.get(at)?;
        let len = match b {
            0xFF => return Some(count),
            _ if b & 0x80 == 0 => 1,
            _ if b & 0xC0 == 0x80 => 1 + usize::from(b & 0x3F),
            _ if b & 0xE0 == 0xC0 => 2,
            _ if b & 0xF0 == 0xE0 => {
                2 + (usize::from(b & 0x0F) << 8 | usize::from(*lp.get(at + 1)?))
            }
            0xF0 => 5 + u32::from_le_bytes(lp.get(at + 1..at + 5)?.try_into().ok()?) as usize,
            0xF1 => 3,
            0xF2 => 4,
            0xF3 => 5,
            0xF4 => 9,
            _ => return None,
        };
        let back = match len {
            0..=127 => 1,
            128..=16_383 => 2,
            16_384..=2_097_151 => 3,
            2_097_152..=268_435_455 => 4,
            _ => 5,
        };
        at += len + back;
        count += 1;
    }
}

/// A key as printable ASCII: `\"`, `\\` and `\xNN` for everything else.
fn escape(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len());
    for &b in key {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_powers_of_two() {
        let mut h = Histogram::default();
        for size in [0, 1, 2, 3, 4, 7, 8, 1023, 1024] {
            h.add(size);
        }
        let rows = h.rows();
        let want: Vec<(String, u64)> = [
            ("0", 1),
            ("1", 1),
            ("2-3", 2),
            ("4-7", 2),
            ("8-15", 1),
            ("16-31", 0),
            ("32-63", 0),
            ("64-127", 0),
            ("128-255", 0),
            ("256-511", 0),
            ("512-1023", 1),
            ("1024-2047", 1),
        ]
        .iter()
        .map(|(l, n)| (l.to_string(), *n))
        .collect();
        assert_eq!(rows, want);
        let mut h = Histogram::default();
        h.add(u64::MAX);
        assert_eq!(h.rows()[0].0, format!("{}-{}", 1u64 << 63, u64::MAX));
    }

    #[test]
    fn elements_are_counted_from_the_encodings() {
        use ondisk::rdb::codec::{write_len, write_string, StringCompression};
        let mut set = Vec::new();
        write_len(&mut set, 3);
        for m in [&b"a"[..], b"b", b"c"] {
            write_string(&mut set, m, StringCompression::Off);
        }
        assert_eq!(element_count(types::SET, &set), Some(3));
        // A listpack of 4 entries (two field-value pairs): total bytes, count, entries, end.
        let entries = [0x81, b'f', 0x01, 0x05, 0x01, 0x81, b'g', 0x01, 0x06, 0x01];
        let mut lp = ((6 + entries.len() + 1) as u32).to_le_bytes().to_vec();
        lp.extend_from_slice(&4u16.to_le_bytes());
        lp.extend_from_slice(&entries);
        lp.push(0xFF);
        let mut hash = Vec::new();
        write_string(&mut hash, &lp, StringCompression::Off);
        assert_eq!(element_count(types::HASH_LISTPACK, &hash), Some(2));
        // The same listpack with its count unknown: counted entry by entry.
        lp[4..6].copy_from_slice(&u16::MAX.to_le_bytes());
        let mut list = Vec::new();
        write_len(&mut list, 1);
        write_len(&mut list, 2);
        write_string(&mut list, &lp, StringCompression::Off);
        assert_eq!(element_count(types::LIST_QUICKLIST_2, &list), Some(4));
        assert_eq!(element_count(types::STREAM_LISTPACKS, &list), None);
    }

    #[test]
    fn ttl_classes() {
        let now = 1_000_000_000;
        assert_eq!(ttl_class(None, now), 0);
        assert_eq!(ttl_class(Some(now), now), 1);
        assert_eq!(ttl_class(Some(now + 59_999), now), 2);
        assert_eq!(ttl_class(Some(now + 60_000), now), 3);
        assert_eq!(ttl_class(Some(now + 3_600_000), now), 4);
        assert_eq!(ttl_class(Some(now + 86_400_000), now), 5);
        assert_eq!(ttl_class(Some(now + 7 * 86_400_000), now), 6);
    }

    #[test]
    fn escape_keeps_keys_readable() {
        assert_eq!(escape(b"user:1"), "user:1");
        assert_eq!(escape(b"a\"b\\c\n\xff"), "a\\\"b\\\\c\\x0a\\xff");
    }
}

//! Building a collection from its RDB value as the value arrives in pieces (a snapshot's large
//! objects, kinds 9..=11), element by element, so that loading never holds the whole encoded
//! value beside the collection it becomes.
//!
//! The forms Strata writes in pieces stream: SET, HASH and HASH_METADATA (past
//! `hash-max-listpack-entries` fields), ZSET_2 (past `zset-max-listpack-entries` members) and
//! LIST_QUICKLIST_2. They are a count, then that many units (a member; a field and value; a
//! member and score; a node), and each unit is decoded as soon as its last byte has come. Any
//! other form, or a count small enough to end up packed, is joined and handed to
//! [`value_from_rdb`] whole, as before (a packed form is bounded by its limits).
//!
//! Never: makes a different value from [`value_from_rdb`] for the same bytes, or holds more of
//! the encoding than one piece plus one unit cut by a piece's end.

use ondisk::rdb::codec::{read_len, read_string, RdbInput};
use ondisk::rdb::{types, RdbCursor};
use ondisk::ErrorKind;

use super::entry::Value;
use super::hash::LargeHash;
use super::list::QuickList;
use super::object::{value_from_rdb, PackLimits};
use super::set::SetBuilder;
use super::zset::LargeZSet;

/// What the units build.
enum Build {
    /// Not streamed: the joined value, decoded at the end.
    Join(Vec<u8>),
    Set(SetBuilder),
    Hash(LargeHash),
    ZSet(LargeZSet),
    /// Quicklist nodes, each a checked listpack, compressed as the next one comes.
    List(QuickList),
}

/// One collection being built from its value's pieces: [`feed`](Self::feed) each piece in
/// order, then [`finish`](Self::finish).
pub struct PieceBuilder {
    rdb_type: u8,
    limits: PackLimits,
    /// Bytes fed but not decoded yet: the value's start until its count is whole, then a
    /// unit cut by a piece's end.
    carry: Vec<u8>,
    /// Units still to come; `None` until the count was read.
    left: Option<u64>,
    /// HASH_METADATA's soonest expiry, the base of every field's.
    min_expiry: u64,
    build: Option<Build>,
    failed: Option<String>,
}

impl PieceBuilder {
    pub fn new(rdb_type: u8, limits: &PackLimits) -> PieceBuilder {
        let streamed = matches!(
            rdb_type,
            types::SET
                | types::HASH
                | types::HASH_METADATA
                | types::ZSET_2
                | types::LIST_QUICKLIST_2
        );
        PieceBuilder {
            rdb_type,
            limits: *limits,
            carry: Vec::new(),
            left: None,
            min_expiry: 0,
            build: (!streamed).then(|| Build::Join(Vec::new())),
            failed: None,
        }
    }

    /// The next run of the value's bytes. An error is kept for [`finish`](Self::finish), and
    /// later pieces are passed over.
    pub fn feed(&mut self, piece: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if let Some(Build::Join(v)) = &mut self.build {
            v.extend_from_slice(piece);
            return;
        }
        if let Err(e) = self.decode(piece) {
            self.failed = Some(e);
            self.build = None;
            self.carry = Vec::new();
        }
    }

    /// The collection, or why its value is not one.
    pub fn finish(self) -> Result<Value, String> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let t = self.rdb_type;
        let Some(build) = self.build else {
            return Err(format!("RDB type {t}: the value ends inside its count"));
        };
        if let Build::Join(v) = build {
            return value_from_rdb(t, &v, &self.limits);
        }
        if self.left != Some(0) || !self.carry.is_empty() {
            return Err(format!(
                "RDB type {t}: the value ends inside its elements ({} still to come)",
                self.left.unwrap_or(0)
            ));
        }
        match build {
            Build::Join(_) => Err(format!("RDB type {t}: joined twice")),
            Build::Set(set) => super::rdb_types::finish_set(set),
            Build::Hash(h) => Ok(Value::Object(Box::new(h))),
            Build::ZSet(z) => Ok(Value::Object(Box::new(z))),
            Build::List(ql) => super::rdb_types::finish_list(ql),
        }
    }

    fn decode(&mut self, piece: &[u8]) -> Result<(), String> {
        // Units wholly inside `piece` are read from it in place; only a cut one is copied.
        let mut joined;
        let bytes: &[u8] = if self.carry.is_empty() {
            piece
        } else {
            joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(piece);
            &joined
        };
        let mut input = RdbCursor::new(bytes);
        let mut used = 0usize;
        if self.left.is_none() {
            match self.read_count(&mut input) {
                Ok(()) => {
                    if let Some(Build::Join(v)) = &mut self.build {
                        v.extend_from_slice(bytes);
                        return Ok(());
                    }
                    used = bytes.len() - input.remaining().len();
                }
                Err(e) if e.kind == ErrorKind::Truncated => {
                    self.carry = bytes.to_vec();
                    return Ok(());
                }
                Err(e) => return Err(format!("RDB type {}: {e}", self.rdb_type)),
            }
        }
        while self.left.is_some_and(|n| n > 0) && used < bytes.len() {
            match self.read_unit(&mut input) {
                Ok(()) => {
                    used = bytes.len() - input.remaining().len();
                    self.left = self.left.map(|n| n - 1);
                }
                Err(Some(e)) if e.kind == ErrorKind::Truncated => break,
                Err(Some(e)) => return Err(format!("RDB type {}: {e}", self.rdb_type)),
                Err(None) => return Err(self.unit_error()),
            }
        }
        let rest = &bytes[used..];
        if self.left == Some(0) && !rest.is_empty() {
            return Err(format!(
                "RDB type {}: {} bytes after its last element",
                self.rdb_type,
                rest.len()
            ));
        }
        self.carry = rest.to_vec();
        Ok(())
    }

    /// Reads the value's count (after HASH_METADATA's soonest expiry) and picks the builder:
    /// a count that ends up packed is joined instead.
    fn read_count(&mut self, input: &mut RdbCursor<'_>) -> Result<(), ondisk::FormatError> {
        let l = &self.limits;
        if self.rdb_type == types::HASH_METADATA {
            self.min_expiry = u64::from_le_bytes(input.read_array::<8>()?);
        }
        let n = read_len(input)?;
        let fits = |limit: usize| n <= limit as u64;
        self.build = Some(match self.rdb_type {
            types::SET => SetBuilder::new(if fits(l.set_intset_entries) {
                l.set_intset_entries
            } else {
                0
            })
            .into(),
            types::HASH | types::HASH_METADATA if !fits(l.hash_entries) => {
                Build::Hash(LargeHash::new())
            }
            types::ZSET_2 if !fits(l.zset_entries) => Build::ZSet(LargeZSet::new()),
            types::LIST_QUICKLIST_2 => Build::List(QuickList::new(l.list_fill)),
            _ => Build::Join(Vec::new()),
        });
        self.left = Some(n);
        Ok(())
    }

    /// One unit into the builder. `Err(None)`: it was read but does not belong (a duplicate, a
    /// bad node, an expiry out of range).
    fn read_unit(&mut self, input: &mut RdbCursor<'_>) -> Result<(), Option<ondisk::FormatError>> {
        let min = self.min_expiry;
        let rdb_type = self.rdb_type;
        match &mut self.build {
            Some(Build::Set(set)) => {
                let m = read_string(input)?;
                set.add(&m).then_some(()).ok_or(None)
            }
            Some(Build::Hash(h)) => {
                let ttl = if rdb_type == types::HASH_METADATA {
                    read_len(input)?
                } else {
                    0
                };
                let name = read_string(input)?;
                let value = read_string(input)?;
                let expire_at = super::hashform::field_expiry_from_rdb(ttl, min).ok_or(None)?;
                h.insert(&name, &value, expire_at).then_some(()).ok_or(None)
            }
            Some(Build::ZSet(z)) => {
                let m = read_string(input)?;
                let score = f64::from_le_bytes(input.read_array::<8>()?);
                if score.is_nan() {
                    return Err(None);
                }
                z.insert(&m, score).then_some(()).ok_or(None)
            }
            Some(Build::List(ql)) => {
                let container = read_len(input)?;
                let data = read_string(input)?;
                match container {
                    _ if data.is_empty() => Err(None),
                    1 => {
                        let mut lp = super::listpack::new();
                        super::listpack::push(&mut lp, &[&data]);
                        ql.push_loaded(lp);
                        Ok(())
                    }
                    2 if super::listpack::validate(&data, false) => {
                        ql.push_loaded(data);
                        Ok(())
                    }
                    _ => Err(None),
                }
            }
            Some(Build::Join(_)) | None => Err(None),
        }
    }

    fn unit_error(&self) -> String {
        let t = self.rdb_type;
        match self.build {
            Some(Build::Set(_)) => "a set with a member twice".into(),
            Some(Build::Hash(_)) => {
                format!("RDB type {t}: a field named twice or an expiry out of range")
            }
            Some(Build::ZSet(_)) => "RDB zset: a member named twice or a NaN score".into(),
            Some(Build::List(_)) => "RDB list: an empty or damaged node".into(),
            _ => format!("RDB type {t}: damaged"),
        }
    }
}

impl From<SetBuilder> for Build {
    fn from(s: SetBuilder) -> Build {
        Build::Set(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ondisk::rdb::codec::{write_len, write_string, StringCompression};

    fn encode(v: &Value) -> (Option<u8>, Vec<u8>) {
        let mut out = Vec::new();
        let t = match v {
            Value::Packed(p) => Some(p.kind.encode_rdb(&p.bytes, &mut out)),
            Value::Object(o) => Some(o.encode_rdb(&mut out)),
            _ => None,
        };
        (t, out)
    }

    fn strings(out: &mut Vec<u8>, items: &[Vec<u8>]) {
        for s in items {
            write_string(out, s, StringCompression::Lzf);
        }
    }

    /// RDB bodies of every form that streams, large and small, and one that is always joined.
    fn bodies() -> Vec<(u8, Vec<u8>)> {
        let member = |i: usize| format!("member:{i}:{}", "y".repeat(i % 31)).into_bytes();
        let mut v = Vec::new();
        for n in [3usize, 20_000] {
            let mut set = Vec::new();
            write_len(&mut set, n as u64);
            strings(&mut set, &(0..n).map(member).collect::<Vec<_>>());
            v.push((types::SET, set));
            let mut ints = Vec::new();
            write_len(&mut ints, n as u64);
            strings(
                &mut ints,
                &(0..n)
                    .map(|i| i.to_string().into_bytes())
                    .collect::<Vec<_>>(),
            );
            v.push((types::SET, ints));
            let mut hash = Vec::new();
            write_len(&mut hash, n as u64);
            for i in 0..n {
                strings(&mut hash, &[member(i), format!("v{i}").into_bytes()]);
            }
            v.push((types::HASH, hash));
            let mut meta = 1_900_000_000_000u64.to_le_bytes().to_vec();
            write_len(&mut meta, n as u64);
            for i in 0..n {
                write_len(&mut meta, (i % 3) as u64 * 1000);
                strings(&mut meta, &[member(i), format!("v{i}").into_bytes()]);
            }
            v.push((types::HASH_METADATA, meta));
            let mut zset = Vec::new();
            write_len(&mut zset, n as u64);
            for i in 0..n {
                strings(&mut zset, &[member(i)]);
                zset.extend_from_slice(&((i % 97) as f64 * 0.5).to_le_bytes());
            }
            v.push((types::ZSET_2, zset));
            let mut list = Vec::new();
            let nodes = n.div_ceil(100);
            write_len(&mut list, nodes as u64);
            for node in 0..nodes {
                let mut lp = super::super::listpack::new();
                let items: Vec<Vec<u8>> = (node * 100..(node * 100 + 100).min(n))
                    .map(member)
                    .collect();
                let refs: Vec<&[u8]> = items.iter().map(|m| &m[..]).collect();
                super::super::listpack::push(&mut lp, &refs);
                write_len(&mut list, 2);
                write_string(&mut list, &lp, StringCompression::Lzf);
            }
            v.push((types::LIST_QUICKLIST_2, list));
            let mut plain = Vec::new();
            write_len(&mut plain, n as u64);
            strings(&mut plain, &(0..n).map(member).collect::<Vec<_>>());
            v.push((types::LIST, plain));
        }
        v
    }

    #[test]
    fn pieces_of_any_length_build_what_the_whole_value_does() {
        let limits = PackLimits::default();
        for (t, body) in bodies() {
            let whole = encode(&value_from_rdb(t, &body, &limits).unwrap());
            for piece in [1usize, 7, 4096, 65_536, body.len()] {
                let mut b = PieceBuilder::new(t, &limits);
                for p in body.chunks(piece) {
                    b.feed(p);
                }
                let built = b.finish().unwrap();
                assert!(encode(&built) == whole, "type {t}, pieces of {piece}");
            }
        }
    }

    #[test]
    fn a_cut_damaged_or_duplicated_value_is_an_error() {
        let limits = PackLimits::default();
        for (t, body) in bodies() {
            // Cut short, or with a byte more.
            let mut b = PieceBuilder::new(t, &limits);
            b.feed(&body[..body.len() - 1]);
            assert!(b.finish().is_err(), "type {t} cut");
            let mut b = PieceBuilder::new(t, &limits);
            b.feed(&body);
            b.feed(b"x");
            assert!(b.finish().is_err(), "type {t} with a byte after");
        }
        // A member twice.
        let mut set = Vec::new();
        write_len(&mut set, 1000);
        for i in 0..1000 {
            write_string(
                &mut set,
                format!("m{}", i.min(998)).as_bytes(),
                StringCompression::Off,
            );
        }
        let mut b = PieceBuilder::new(types::SET, &limits);
        for p in set.chunks(100) {
            b.feed(p);
        }
        assert_eq!(
            b.finish().err().as_deref(),
            Some("a set with a member twice")
        );
    }
}

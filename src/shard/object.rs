//! Typed values beyond strings: every collection type lives behind the same two entry kinds,
//! so a new type needs no new entry layout, and this module is the one place that answers what
//! the rest of the server asks of a value whatever its type: its TYPE name, its OBJECT ENCODING,
//! its heap bytes (what maxmemory, eviction, MEMORY USAGE and the snapshot backlog count), how a
//! snapshot captures it, and its RDB form (DUMP, RDB export, the snapshot's typed records).
//!
//! - A small collection is one [`Packed`] block: its elements in Redis' own packed layout
//!   (listpack, intset), tagged with its type. One allocation; RDB and DUMP carry the bytes as
//!   they are, as Redis does. Copying it is bounded by the size thresholds that keep it small.
//! - A large one is a [`TypedObject`]: a structure of its type's own. Its snapshot capture must
//!   not be a deep copy (a write during a save would otherwise copy a million-member set):
//!   [`TypedObject::capture`] shares the object's nodes, and a later write copies only the
//!   node it changes.
//!
//! Never: does I/O, or hands out a value of one type as another (commands check
//! [`ObjectType`] and answer WRONGTYPE).

use std::any::Any;
use std::borrow::Cow;

use super::entry::Value;
use super::hash::LargeHash;

/// The collection types (strings are not objects).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ObjectType {
    List = 1,
    Set = 2,
    ZSet = 3,
    Hash = 4,
}

impl ObjectType {
    /// The name TYPE and SCAN TYPE use.
    pub fn name(self) -> &'static str {
        match self {
            ObjectType::List => "list",
            ObjectType::Set => "set",
            ObjectType::ZSet => "zset",
            ObjectType::Hash => "hash",
        }
    }

    fn from_u8(v: u8) -> Option<ObjectType> {
        Some(match v {
            1 => ObjectType::List,
            2 => ObjectType::Set,
            3 => ObjectType::ZSet,
            4 => ObjectType::Hash,
            _ => return None,
        })
    }
}

/// How a packed block lays out its elements (Redis' formats, byte for byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PackedEncoding {
    Listpack = 1,
    Intset = 2,
    /// A hash's listpack of field, value, expiry (ms; 0 = none) triplets (Redis 7.4).
    ListpackEx = 3,
    /// A hash's listpack LZ4-compressed, `raw length u32 LE | LZ4 block` (Strata's own: RDB,
    /// DUMP and OBJECT ENCODING see the listpack).
    ListpackLz4 = 4,
}

impl PackedEncoding {
    pub fn name(self) -> &'static str {
        match self {
            PackedEncoding::Listpack => "listpack",
            PackedEncoding::Intset => "intset",
            PackedEncoding::ListpackEx => "listpackex",
            PackedEncoding::ListpackLz4 => "listpack",
        }
    }
}

/// A packed block's type and layout, in one byte (type in the low nibble, layout in the high).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackedKind {
    pub ty: ObjectType,
    pub encoding: PackedEncoding,
}

impl PackedKind {
    pub fn to_byte(self) -> u8 {
        (self.encoding as u8) << 4 | self.ty as u8
    }

    /// None for a byte no kind encodes to.
    pub fn from_byte(b: u8) -> Option<PackedKind> {
        let ty = ObjectType::from_u8(b & 0xf)?;
        let encoding = match b >> 4 {
            1 => PackedEncoding::Listpack,
            2 => PackedEncoding::Intset,
            3 => PackedEncoding::ListpackEx,
            4 => PackedEncoding::ListpackLz4,
            _ => return None,
        };
        Some(PackedKind { ty, encoding })
    }

    /// The RDB type code of a value stored in this layout (Redis 7's codes).
    pub fn rdb_type(self) -> u8 {
        use ObjectType::*;
        use PackedEncoding::*;
        match (self.ty, self.encoding) {
            (Set, Intset) => 11,
            (Hash, ListpackEx) => ondisk::rdb::types::HASH_LISTPACK_EX,
            (Hash, _) => 16,
            (ZSet, _) => 17,
            (List, _) => 18,
            (Set, Listpack | ListpackEx | ListpackLz4) => 20,
        }
    }
}

impl PackedKind {
    /// Writes the RDB encoding of a packed block of this kind (the bytes as they are, LZF
    /// compressed when that saves bytes, as Redis writes them; a list's listpack as a quicklist of one packed node) and returns its RDB
    /// type code.
    pub fn encode_rdb(self, bytes: &[u8], out: &mut Vec<u8>) -> u8 {
        if self.encoding == PackedEncoding::ListpackLz4 {
            return self.plain().encode_rdb(&packed_bytes(self, bytes), out);
        }
        if self.ty == ObjectType::List {
            // QUICKLIST_2: node count, then per node its container kind (2 = packed) and bytes.
            super::list::encode_quicklist(std::iter::once(bytes), out);
            return self.rdb_type();
        }
        if self.ty == ObjectType::Set {
            // As Redis saves an intset: a string, LZF-compressed when that saves bytes (an
            // intset kept narrower in RAM goes out at Redis' width).
            let bytes = if self.encoding == PackedEncoding::Intset {
                super::intset::to_redis(bytes)
            } else {
                std::borrow::Cow::Borrowed(bytes)
            };
            ondisk::rdb::codec::write_string(
                out,
                &bytes,
                ondisk::rdb::codec::StringCompression::Lzf,
            );
            return self.rdb_type();
        }
        if self.encoding == PackedEncoding::ListpackEx {
            // The soonest field expiry first (0 when none), as Redis 7.4 writes it.
            let min = super::hashform::min_expiry(bytes).unwrap_or(0);
            out.extend_from_slice(&min.to_le_bytes());
        }
        // As `rdbSaveRawString` with `rdbcompression yes`: LZF when it pays.
        ondisk::rdb::codec::write_string(out, bytes, ondisk::rdb::StringCompression::Lzf);
        self.rdb_type()
    }

    /// The kind of this block's bytes once [`packed_bytes`] has decompressed them.
    pub fn plain(self) -> PackedKind {
        match self.encoding {
            PackedEncoding::ListpackLz4 => PackedKind {
                ty: self.ty,
                encoding: PackedEncoding::Listpack,
            },
            _ => self,
        }
    }

    /// What OBJECT ENCODING says of a packed block of this kind: Redis 7.0 calls every list
    /// "quicklist" (a packed list is its one node).
    pub fn encoding_name(self) -> &'static str {
        if self.ty == ObjectType::List {
            "quicklist"
        } else {
            self.encoding.name()
        }
    }
}

/// A listpack this short is stored as it is (compressing it saves too little).
const MIN_COMPRESS_BYTES: usize = 128;

/// A packed block's elements in its plain layout: the bytes as they are, or decompressed.
pub fn packed_bytes(kind: PackedKind, bytes: &[u8]) -> Cow<'_, [u8]> {
    if kind.encoding != PackedEncoding::ListpackLz4 {
        return Cow::Borrowed(bytes);
    }
    let raw = bytes
        .first_chunk::<4>()
        .map_or(0, |n| u32::from_le_bytes(*n) as usize);
    Cow::Owned(super::lz4block::decompress(
        bytes.get(4..).unwrap_or_default(),
        raw,
    ))
}

/// A hash's listpack (of field-value pairs) as the block to store: LZ4-compressed when it is
/// long enough and that saves an eighth of it.
pub fn pack_hash(lp: Vec<u8>) -> Packed {
    let plain = Packed {
        kind: PackedKind {
            ty: ObjectType::Hash,
            encoding: PackedEncoding::Listpack,
        },
        bytes: lp.into_boxed_slice(),
    };
    let lp = &plain.bytes;
    let Ok(raw) = u32::try_from(lp.len()) else {
        return plain;
    };
    if lp.len() < MIN_COMPRESS_BYTES {
        return plain;
    }
    match super::lz4block::compress(lp, &raw.to_le_bytes()) {
        Some(bytes) => Packed {
            kind: PackedKind {
                ty: ObjectType::Hash,
                encoding: PackedEncoding::ListpackLz4,
            },
            bytes,
        },
        None => plain,
    }
}

/// A loaded value as it is kept: a packed hash compressed as [`pack_hash`] decides.
fn compress_hash(v: Value) -> Value {
    match v {
        Value::Packed(p)
            if p.kind.ty == ObjectType::Hash && p.kind.encoding == PackedEncoding::Listpack =>
        {
            Value::Packed(pack_hash(p.bytes.into_vec()))
        }
        v => v,
    }
}

/// The sizes past which a collection leaves its packed form (settings CONFIG SET changes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackLimits {
    /// `hash-max-listpack-entries`: most fields of a listpack hash.
    pub hash_entries: usize,
    /// `hash-max-listpack-value`: longest field or value of a listpack hash.
    pub hash_value: usize,
    /// `list-max-listpack-size`, clamped as a quicklist keeps it.
    pub list_fill: i32,
    /// `set-max-intset-entries`: most members of an intset set.
    pub set_intset_entries: usize,
    /// `zset-max-listpack-entries`: most members of a listpack sorted set.
    pub zset_entries: usize,
    /// `zset-max-listpack-value`: longest member of a listpack sorted set.
    pub zset_value: usize,
}

impl PackLimits {
    pub fn from_settings(s: &crate::config::Settings) -> PackLimits {
        PackLimits {
            hash_entries: s.hash_max_listpack_entries(),
            hash_value: s.hash_max_listpack_value(),
            list_fill: super::list::clamp_fill(s.list_max_listpack_size()),
            set_intset_entries: s.set_max_intset_entries(),
            zset_entries: s.zset_max_listpack_entries(),
            zset_value: s.zset_max_listpack_value(),
        }
    }
}

impl Default for PackLimits {
    fn default() -> Self {
        PackLimits {
            hash_entries: 128,
            hash_value: 64,
            list_fill: -2,
            set_intset_entries: 512,
            zset_entries: 128,
            zset_value: 64,
        }
    }
}

/// The value an RDB-encoded collection (`rdb_type`, `body`) from outside stands for (an RDB
/// file, a DUMP payload, a snapshot record), in the form Redis would load it in: small ones
/// packed, large ones (past `limits`) as their type's object. Err names what cannot be taken:
/// a type or layout not kept yet, an empty collection, a body that does not parse.
pub fn value_from_rdb(rdb_type: u8, body: &[u8], limits: &PackLimits) -> Result<Value, String> {
    use ondisk::rdb::types;
    match rdb_type {
        types::HASH => hash_from_pairs(body, limits).map(compress_hash),
        types::HASH_ZIPLIST => hash_from_ziplist(body, limits).map(compress_hash),
        types::HASH_METADATA => super::hashform::from_rdb_metadata(body, limits),
        types::HASH_LISTPACK_EX => super::hashform::from_rdb_listpack_ex(body, limits),
        types::LIST
        | types::LIST_ZIPLIST
        | types::LIST_QUICKLIST
        | types::LIST_QUICKLIST_2
        | types::SET
        | types::SET_INTSET
        | types::SET_LISTPACK => super::rdb_types::value_from_rdb(rdb_type, body, limits),
        types::ZSET | types::ZSET_2 | types::ZSET_ZIPLIST | types::ZSET_LISTPACK => {
            super::zset::from_rdb(rdb_type, body, limits)
        }
        _ => {
            let p = packed_from_rdb(rdb_type, body)?;
            if p.kind.ty == ObjectType::Hash {
                return hash_from_listpack(p, limits).map(compress_hash);
            }
            Ok(Value::Packed(p))
        }
    }
}

/// A hash loaded from a listpack: kept packed unless it has more fields than the limit (as
/// Redis 7 loads it); refused when a field is named twice.
fn hash_from_listpack(p: Packed, limits: &PackLimits) -> Result<Value, String> {
    let fields = super::listpack::len(&p.bytes) / 2;
    if fields > limits.hash_entries {
        return Ok(Value::Object(Box::new(LargeHash::from_listpack(&p.bytes)?)));
    }
    let mut seen = std::collections::HashSet::with_capacity(fields);
    let names = super::listpack::iter(&p.bytes).step_by(2);
    if !names.map(|(_, e)| e.to_vec()).all(|n| seen.insert(n)) {
        return Err("a hash with a field named twice".into());
    }
    Ok(Value::Packed(p))
}

/// RDB_TYPE_HASH_ZIPLIST (Redis before 7.0): the ziplist becomes a listpack.
fn hash_from_ziplist(body: &[u8], limits: &PackLimits) -> Result<Value, String> {
    use ondisk::rdb::codec::read_string;
    use ondisk::rdb::RdbCursor;
    let mut input = RdbCursor::new(body);
    let bad = |e: ondisk::FormatError| format!("RDB hash ziplist: {e}");
    let zl = read_string(&mut input).map_err(bad)?;
    input.finish().map_err(bad)?;
    let items = super::ziplist::elements(&zl).ok_or("RDB hash ziplist: a damaged ziplist")?;
    if items.is_empty() || !items.len().is_multiple_of(2) {
        return Err("RDB hash ziplist: not field-value pairs".into());
    }
    let mut lp = super::listpack::new();
    let refs: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
    super::listpack::push(&mut lp, &refs);
    let packed = Packed {
        kind: PackedKind {
            ty: ObjectType::Hash,
            encoding: PackedEncoding::Listpack,
        },
        bytes: lp.into_boxed_slice(),
    };
    hash_from_listpack(packed, limits)
}

/// RDB_TYPE_HASH: a field count, then field and value strings. Packed when small enough for
/// `limits`, as Redis loads it.
fn hash_from_pairs(body: &[u8], limits: &PackLimits) -> Result<Value, String> {
    use ondisk::rdb::codec::{read_len, read_string};
    use ondisk::rdb::RdbCursor;
    let mut input = RdbCursor::new(body);
    let bad = |e: ondisk::FormatError| format!("RDB hash: {e}");
    let n = read_len(&mut input).map_err(bad)?;
    if n == 0 {
        return Err("RDB hash: no fields".into());
    }
    let mut large = (n > limits.hash_entries as u64).then(LargeHash::new);
    let mut small: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for _ in 0..n {
        let f = read_string(&mut input).map_err(bad)?;
        let v = read_string(&mut input).map_err(bad)?;
        if large.is_none() && (f.len() > limits.hash_value || v.len() > limits.hash_value) {
            let fields = small.iter().map(|(f, v)| (&f[..], &v[..], None));
            large = Some(LargeHash::from_fields(fields)?);
            small = Vec::new();
        }
        match &mut large {
            Some(h) => {
                if !h.insert(&f, &v, None) {
                    return Err("a hash with a field named twice".into());
                }
            }
            None => small.push((f, v)),
        }
    }
    input.finish().map_err(bad)?;
    if let Some(h) = large {
        return Ok(Value::Object(Box::new(h)));
    }
    let mut seen = std::collections::HashSet::with_capacity(small.len());
    if !small.iter().all(|(f, _)| seen.insert(&f[..])) {
        return Err("a hash with a field named twice".into());
    }
    let mut lp = super::listpack::new();
    for (f, v) in &small {
        super::listpack::push(&mut lp, &[f, v]);
    }
    Ok(Value::Packed(Packed {
        kind: PackedKind {
            ty: ObjectType::Hash,
            encoding: PackedEncoding::Listpack,
        },
        bytes: lp.into_boxed_slice(),
    }))
}

/// The packed block an RDB-encoded value from outside holds: the packed layouts are taken as
/// they are, once their blocks pass a whole-block check. Err names what cannot be taken: a
/// type or layout not kept yet, or a body that does not parse.
fn packed_from_rdb(rdb_type: u8, body: &[u8]) -> Result<Packed, String> {
    use ondisk::rdb::codec::{read_len, read_string};
    use ondisk::rdb::RdbCursor;
    let (ty, encoding) = match rdb_type {
        11 => (ObjectType::Set, PackedEncoding::Intset),
        16 => (ObjectType::Hash, PackedEncoding::Listpack),
        17 => (ObjectType::ZSet, PackedEncoding::Listpack),
        18 => (ObjectType::List, PackedEncoding::Listpack),
        20 => (ObjectType::Set, PackedEncoding::Listpack),
        other => return Err(format!("RDB type {other} is not loaded yet")),
    };
    let mut input = RdbCursor::new(body);
    let bad = |e: ondisk::FormatError| format!("RDB type {rdb_type}: {e}");
    if ty == ObjectType::List {
        let nodes = read_len(&mut input).map_err(bad)?;
        let container = read_len(&mut input).map_err(bad)?;
        if nodes != 1 || container != 2 {
            return Err(format!(
                "a list of {nodes} node(s) (container {container}) is not loaded yet"
            ));
        }
    }
    let bytes = read_string(&mut input).map_err(bad)?;
    input.finish().map_err(bad)?;
    let sound = match encoding {
        PackedEncoding::Intset => super::intset::validate(&bytes),
        PackedEncoding::Listpack | PackedEncoding::ListpackEx => {
            let pairs = matches!(ty, ObjectType::Hash | ObjectType::ZSet);
            super::listpack::validate(&bytes, pairs) && super::listpack::len(&bytes) > 0
        }
        PackedEncoding::ListpackLz4 => false,
    };
    if !sound {
        return Err(format!(
            "RDB type {rdb_type}: a damaged {} block",
            encoding.name()
        ));
    }
    let bytes = if encoding == PackedEncoding::Intset {
        super::intset::compact(bytes)
    } else {
        bytes
    };
    Ok(Packed {
        kind: PackedKind { ty, encoding },
        bytes: bytes.into_boxed_slice(),
    })
}

/// A small collection as one packed block, as commands build it before storing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    pub kind: PackedKind,
    pub bytes: Box<[u8]>,
}

/// Where an encoding a part at a time ([`TypedObject::encode_rdb_part`]) stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdbPartPos {
    /// False until the first part (the element count and any prefix) is written.
    pub started: bool,
    /// The type's own position: a node index, a rank.
    pub at: usize,
    /// What the first part decided for the later ones (a hash's soonest field expiry; 0: none).
    pub base: u64,
}

/// A large collection: a structure of its type's own. Implementations live with their type
/// (one file per type under `shard/`), and commands reach them through
/// [`TypedObject::as_any`] / [`TypedObject::as_any_mut`].
///
/// `Send`: an entry moves between cores with its object (RENAME and COPY across shards), so an
/// object shares its nodes with atomic counts (`Arc`), never `Rc`.
pub trait TypedObject: Send + 'static {
    fn object_type(&self) -> ObjectType;

    /// What OBJECT ENCODING says ("hashtable", "quicklist", "skiplist", ...).
    fn encoding(&self) -> &'static str;

    /// Heap bytes the object holds, its own struct included.
    fn heap_bytes(&self) -> usize;

    /// A copy that shares this object's nodes (O(nodes), never a copy of the elements): what a
    /// snapshot keeps of it when a write comes before the serializer, and what COPY stores.
    /// Changing either copy afterwards copies only the node that changes.
    fn capture(&self) -> Box<dyn TypedObject>;

    /// Heap bytes a [`TypedObject::capture`] adds of its own (its node pointers: the shared
    /// nodes are counted once, in the object), what a save's backlog counts for it.
    fn capture_bytes(&self) -> usize;

    /// The RDB type code and the value's RDB encoding (DUMP, RDB export, snapshot records).
    fn encode_rdb(&self, out: &mut Vec<u8>) -> u8;

    /// The next part of [`TypedObject::encode_rdb`]'s output, appended to `out`: whole
    /// elements, about `budget` bytes (at least one element). Returns the RDB type and true
    /// once the encoding is complete; the parts from a fresh `pos` on join to exactly what
    /// `encode_rdb` writes. A snapshot encodes a large collection this way, serving clients
    /// between parts and never holding its whole encoding. The default writes it at once.
    fn encode_rdb_part(
        &self,
        pos: &mut RdbPartPos,
        out: &mut Vec<u8>,
        budget: usize,
    ) -> (u8, bool) {
        let _ = budget;
        pos.started = true;
        (self.encode_rdb(out), true)
    }

    fn as_any(&self) -> &dyn Any;

    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl std::fmt::Debug for dyn TypedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}({}, {} bytes)",
            self.object_type().name(),
            self.encoding(),
            self.heap_bytes()
        )
    }
}

#[cfg(test)]
pub(crate) mod test_object {
    //! A large list of its own for tests of the object machinery: elements in shared chunks.

    use std::sync::Arc;

    use super::*;

    const CHUNK: usize = 64;

    /// A list kept as `Arc`-shared chunks of at most [`CHUNK`] elements.
    #[derive(Default)]
    pub struct ChunkedList {
        pub chunks: Vec<Arc<Vec<u64>>>,
    }

    impl ChunkedList {
        pub fn with(n: u64) -> ChunkedList {
            let mut l = ChunkedList::default();
            for v in 0..n {
                l.push(v);
            }
            l
        }

        pub fn push(&mut self, v: u64) {
            match self.chunks.last_mut() {
                Some(c) if c.len() < CHUNK => Arc::make_mut(c).push(v),
                _ => self.chunks.push(Arc::new(vec![v])),
            }
        }

        /// Changes element `i`, copying only its chunk when that chunk is shared.
        pub fn set(&mut self, i: usize, v: u64) {
            Arc::make_mut(&mut self.chunks[i / CHUNK])[i % CHUNK] = v;
        }

        pub fn values(&self) -> Vec<u64> {
            self.chunks.iter().flat_map(|c| c.iter().copied()).collect()
        }
    }

    impl TypedObject for ChunkedList {
        fn object_type(&self) -> ObjectType {
            ObjectType::List
        }

        fn encoding(&self) -> &'static str {
            "quicklist"
        }

        fn heap_bytes(&self) -> usize {
            std::mem::size_of::<Self>()
                + self.chunks.capacity() * 8
                + self
                    .chunks
                    .iter()
                    .map(|c| 40 + c.capacity() * 8)
                    .sum::<usize>()
        }

        fn capture(&self) -> Box<dyn TypedObject> {
            Box::new(ChunkedList {
                chunks: self.chunks.clone(),
            })
        }

        fn capture_bytes(&self) -> usize {
            std::mem::size_of::<Self>() + self.chunks.len() * 8
        }

        fn encode_rdb(&self, out: &mut Vec<u8>) -> u8 {
            for v in self.values() {
                out.extend_from_slice(&v.to_le_bytes());
            }
            1
        }

        fn as_any(&self) -> &dyn Any {
            self
        }

        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_kinds_round_trip_through_their_byte() {
        for ty in [
            ObjectType::List,
            ObjectType::Set,
            ObjectType::ZSet,
            ObjectType::Hash,
        ] {
            for encoding in [PackedEncoding::Listpack, PackedEncoding::Intset] {
                let k = PackedKind { ty, encoding };
                assert_eq!(PackedKind::from_byte(k.to_byte()), Some(k));
            }
        }
        assert_eq!(PackedKind::from_byte(0), None);
        assert_eq!(PackedKind::from_byte(0x35), None);
        let intset = PackedKind {
            ty: ObjectType::Set,
            encoding: PackedEncoding::Intset,
        };
        assert_eq!(intset.rdb_type(), 11);
        let mut out = Vec::new();
        assert_eq!(intset.encode_rdb(b"abc", &mut out), 11);
        assert_eq!(out, b"\x03abc");
        let list = PackedKind {
            ty: ObjectType::List,
            encoding: PackedEncoding::Listpack,
        };
        out.clear();
        assert_eq!(list.encode_rdb(b"xy", &mut out), 18);
        assert_eq!(out, b"\x01\x02\x02xy");
        // Real blocks go back; fake ones are refused.
        assert!(packed_from_rdb(18, &out).is_err());
        let mut lp = super::super::listpack::new();
        super::super::listpack::push(&mut lp, &[b"a", b"1"]);
        let mut out = Vec::new();
        list.encode_rdb(&lp, &mut out);
        let back = packed_from_rdb(18, &out).expect("a one-node list");
        assert_eq!((back.kind, &back.bytes[..]), (list, &lp[..]));
        let mut set = super::super::intset::new();
        super::super::intset::insert(&mut set, 3);
        let mut out = Vec::new();
        intset.encode_rdb(&set, &mut out);
        assert_eq!(
            &packed_from_rdb(11, &out).expect("intset").bytes[..],
            &set[..]
        );
        // Refused, never misread: leftovers, a cut body, types not kept yet.
        out.push(0);
        assert!(packed_from_rdb(11, &out).is_err());
        assert!(packed_from_rdb(16, &[0x05, b'a']).is_err());
        assert!(packed_from_rdb(4, &[0x00]).is_err());
        assert!(packed_from_rdb(18, b"\x02\x02\x01a").is_err());
    }

    #[test]
    fn a_capture_shares_the_nodes_and_a_write_copies_only_one() {
        let mut list = test_object::ChunkedList::with(10_000);
        let captured = list.capture();
        let captured = captured
            .as_any()
            .downcast_ref::<test_object::ChunkedList>()
            .expect("same type");
        let shared = |a: &test_object::ChunkedList, b: &test_object::ChunkedList| {
            a.chunks
                .iter()
                .zip(&b.chunks)
                .filter(|(x, y)| std::sync::Arc::ptr_eq(x, y))
                .count()
        };
        let n = list.chunks.len();
        assert_eq!(shared(&list, captured), n);
        list.set(5_000, 1);
        assert_eq!(shared(&list, captured), n - 1);
        assert_eq!(captured.values()[5_000], 5_000);
        assert_eq!(list.values()[5_000], 1);
    }
}

#[cfg(test)]
mod part_tests {
    use super::*;
    use crate::shard::hash::LargeHash;
    use crate::shard::list::QuickList;
    use crate::shard::set::LargeSet;
    use crate::shard::zset::LargeZSet;

    /// The encoding in parts of `budget` bytes: its type, bytes and number of parts.
    fn in_parts(o: &dyn TypedObject, budget: usize) -> (u8, Vec<u8>, usize) {
        let (mut pos, mut out, mut n) = (RdbPartPos::default(), Vec::new(), 0);
        loop {
            let before = out.len();
            let (t, done) = o.encode_rdb_part(&mut pos, &mut out, budget);
            n += 1;
            assert!(
                out.len() - before < budget + 64 * 1024,
                "a part far past its budget"
            );
            if done {
                return (t, out, n);
            }
        }
    }

    #[test]
    fn parts_join_to_the_whole_encoding() {
        let mut plain = LargeHash::new();
        let mut ttl = LargeHash::new();
        let mut set = LargeSet::new();
        let mut list = QuickList::new(-2);
        let mut zset = LargeZSet::new();
        for i in 0..30_000u64 {
            let k = format!("field:{i}");
            plain.insert(k.as_bytes(), b"value", None);
            let at = (i % 3 == 0).then_some(1_900_000_000_000 + i * 7);
            ttl.insert(k.as_bytes(), b"v", at);
            set.insert(k.as_bytes());
            list.push_back(k.as_bytes());
            zset.insert(k.as_bytes(), (i % 977) as f64 * 0.5);
        }
        let objects: [&dyn TypedObject; 5] = [&plain, &ttl, &set, &list, &zset];
        for o in objects {
            let mut whole = Vec::new();
            let t = o.encode_rdb(&mut whole);
            for budget in [1, 4096, 64 * 1024] {
                let (pt, parts, n) = in_parts(o, budget);
                assert_eq!(pt, t, "{o:?}");
                assert!(parts == whole, "{o:?} in parts of {budget} bytes");
                assert!(n > 1, "{o:?}: one part of {budget} bytes");
            }
        }
    }
}

//! A hash in whichever form it is stored in, behind one set of operations: small hashes as a
//! listpack of field-value pairs ("listpack") or, once a field has an expiry, of field, value,
//! expiry triplets ("listpackex", the expiry in ms, 0 for none, as Redis 7.4 keeps them);
//! large ones as a [`LargeHash`] ("hashtable"). Converting to the large form happens exactly
//! when Redis converts: a field or value longer than `hash-max-listpack-value`, or more fields
//! than `hash-max-listpack-entries`. Also the RDB forms Redis 7.4 gives hashes with field
//! expiries (RDB_TYPE_HASH_METADATA, RDB_TYPE_HASH_LISTPACK_EX), and the sweep of expired
//! fields.
//!
//! Never: converts a large hash back to a listpack (Redis does not), or keeps a field whose
//! expiry has passed once [`HashForm::remove_expired`] ran.

use super::entry::{Entry, Value, ValueRef};
use super::hash::{Field, LargeHash};
use super::listpack::{self, Element};
use super::object::{
    pack_hash, packed_bytes, ObjectType, PackLimits, Packed, PackedEncoding, PackedKind,
    TypedObject,
};

/// A small hash's listpack and its stride (2: pairs; 3: triplets with expiries).
fn stride(ex: bool) -> usize {
    if ex {
        3
    } else {
        2
    }
}

/// The kind of a small hash's packed block.
pub fn packed_kind(ex: bool) -> PackedKind {
    PackedKind {
        ty: ObjectType::Hash,
        encoding: if ex {
            PackedEncoding::ListpackEx
        } else {
            PackedEncoding::Listpack
        },
    }
}

fn elem_int(e: Element<'_>) -> u64 {
    match e {
        Element::Int(v) => v.max(0) as u64,
        Element::Str(s) => crate::protocol::string2ll(s).map_or(0, |v| v.max(0) as u64),
    }
}

/// The soonest expiry of a listpackex block's fields (None when no field has one).
pub fn min_expiry(lp: &[u8]) -> Option<u64> {
    listpack::iter(lp)
        .skip(2)
        .step_by(3)
        .map(|(_, e)| elem_int(e))
        .filter(|&t| t != 0)
        .min()
}

/// The soonest field expiry of a stored packed block (None when it is no listpackex hash).
pub fn packed_min_expiry(kind: PackedKind, bytes: &[u8]) -> Option<u64> {
    (kind.ty == ObjectType::Hash && kind.encoding == PackedEncoding::ListpackEx)
        .then(|| min_expiry(bytes))
        .flatten()
}

/// One field read out of any form: name, value (integers as their text), expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedField {
    pub name: Vec<u8>,
    pub value: Vec<u8>,
    pub expire_at: Option<u64>,
}

/// A stored hash, for reading.
#[derive(Clone, Copy)]
pub enum HashRef<'a> {
    Small(&'a [u8], bool),
    Large(&'a LargeHash),
}

impl<'a> HashRef<'a> {
    /// The hash a packed block in its plain layout (see [`packed_bytes`]) or an object holds
    /// (None when it is not a hash, or still compressed).
    pub fn from_packed(kind: PackedKind, bytes: &'a [u8]) -> Option<HashRef<'a>> {
        (kind.ty == ObjectType::Hash && kind.encoding != PackedEncoding::ListpackLz4)
            .then(|| HashRef::Small(bytes, kind.encoding == PackedEncoding::ListpackEx))
    }

    pub fn from_object(o: &'a dyn TypedObject) -> Option<HashRef<'a>> {
        o.as_any().downcast_ref::<LargeHash>().map(HashRef::Large)
    }

    pub fn len(&self) -> usize {
        match self {
            HashRef::Small(lp, ex) => listpack::len(lp) / stride(*ex),
            HashRef::Large(h) => h.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A field's value and expiry.
    pub fn get(&self, name: &[u8]) -> Option<(Vec<u8>, Option<u64>)> {
        match self {
            HashRef::Small(lp, ex) => {
                let pos = listpack::find(lp, listpack::first(lp), name, stride(*ex) - 1)?;
                let (_, vpos) = listpack::get(lp, pos)?;
                let (v, tpos) = listpack::get(lp, vpos)?;
                let at = if *ex {
                    let t = elem_int(listpack::get(lp, tpos)?.0);
                    (t != 0).then_some(t)
                } else {
                    None
                };
                Some((v.to_vec(), at))
            }
            HashRef::Large(h) => h.get(name).map(|f| (f.value.to_vec(), f.expire_at)),
        }
    }

    /// A field's value length, without copying it.
    pub fn value_len(&self, name: &[u8]) -> Option<usize> {
        match self {
            HashRef::Small(..) => self.get(name).map(|(v, _)| v.len()),
            HashRef::Large(h) => h.get(name).map(|f| f.value.len()),
        }
    }

    /// Every field (a small hash in its stored order).
    pub fn fields(&self) -> Vec<OwnedField> {
        match self {
            HashRef::Small(lp, ex) => {
                let items: Vec<Element<'_>> = listpack::iter(lp).map(|(_, e)| e).collect();
                items
                    .chunks_exact(stride(*ex))
                    .map(|c| OwnedField {
                        name: c[0].to_vec(),
                        value: c[1].to_vec(),
                        expire_at: c.get(2).map(|t| elem_int(*t)).filter(|&t| t != 0),
                    })
                    .collect()
            }
            HashRef::Large(h) => h.iter().map(owned).collect(),
        }
    }

    /// The soonest a field may expire (None when none has an expiry).
    pub fn min_expire_bound(&self) -> Option<u64> {
        match self {
            HashRef::Small(lp, true) => min_expiry(lp),
            HashRef::Small(_, false) => None,
            HashRef::Large(h) => h.min_expire_bound(),
        }
    }
}

fn owned(f: Field<'_>) -> OwnedField {
    OwnedField {
        name: f.name.to_vec(),
        value: f.value.to_vec(),
        expire_at: f.expire_at,
    }
}

/// A hash taken out of its entry to be changed, then put back with [`HashForm::into_value`].
pub enum HashForm {
    Small { lp: Vec<u8>, ex: bool },
    Large(LargeHash),
}

impl HashForm {
    /// An empty small hash.
    pub fn new() -> HashForm {
        HashForm::Small {
            lp: listpack::new(),
            ex: false,
        }
    }

    pub fn as_ref(&self) -> HashRef<'_> {
        match self {
            HashForm::Small { lp, ex } => HashRef::Small(lp, *ex),
            HashForm::Large(h) => HashRef::Large(h),
        }
    }

    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored value this hash becomes.
    pub fn into_value(self) -> Value {
        match self {
            HashForm::Small { lp, ex: false } => Value::Packed(pack_hash(lp)),
            HashForm::Small { lp, ex: true } => Value::Packed(Packed {
                kind: packed_kind(true),
                bytes: lp.into_boxed_slice(),
            }),
            HashForm::Large(h) => Value::Object(Box::new(h)),
        }
    }

    /// Converts a small hash to the large form.
    pub fn convert(&mut self) {
        if let HashForm::Small { .. } = self {
            let mut h = LargeHash::new();
            for f in self.as_ref().fields() {
                h.insert(&f.name, &f.value, f.expire_at);
            }
            *self = HashForm::Large(h);
        }
    }

    /// Converts when any of `lens` (fields or values about to be written) passes the value
    /// limit, as Redis' `hashTypeTryConversion` does before a write.
    pub fn convert_for(&mut self, lens: impl IntoIterator<Item = usize>, limits: &PackLimits) {
        if matches!(self, HashForm::Small { .. }) && lens.into_iter().any(|l| l > limits.hash_value)
        {
            self.convert();
        }
    }

    /// Sets a field; its expiry is kept when `keep_ttl` (HINCRBY), dropped otherwise (HSET).
    /// True when the field is new. Converts as Redis' `hashTypeSet` does: a field or value
    /// past the value limit before, more fields than the entry limit after.
    pub fn set(&mut self, name: &[u8], value: &[u8], keep_ttl: bool, limits: &PackLimits) -> bool {
        self.convert_for([name.len(), value.len()], limits);
        let added = match self {
            HashForm::Small { lp, ex } => {
                let st = stride(*ex);
                match listpack::find(lp, listpack::first(lp), name, st - 1) {
                    Some(pos) => {
                        let vpos = listpack::get(lp, pos).map_or(pos, |(_, n)| n);
                        listpack::replace(lp, vpos, value);
                        if *ex && !keep_ttl {
                            // HSET drops the expiry: the triplet moves to the unexpiring tail.
                            let had = HashRef::Small(lp, true).get(name).and_then(|(_, t)| t);
                            if had.is_some() {
                                listpack::delete(lp, pos, 3);
                                listpack::push(lp, &[name, value, b"0"]);
                            }
                        }
                        false
                    }
                    None => {
                        if *ex {
                            listpack::push(lp, &[name, value, b"0"]);
                        } else {
                            listpack::push(lp, &[name, value]);
                        }
                        true
                    }
                }
            }
            HashForm::Large(h) => h.set(name, value, keep_ttl),
        };
        if added && self.len() > limits.hash_entries {
            self.convert();
        }
        added
    }

    /// Removes a field; true when it was there.
    pub fn remove(&mut self, name: &[u8]) -> bool {
        match self {
            HashForm::Small { lp, ex } => {
                let st = stride(*ex);
                match listpack::find(lp, listpack::first(lp), name, st - 1) {
                    Some(pos) => {
                        listpack::delete(lp, pos, st);
                        true
                    }
                    None => false,
                }
            }
            HashForm::Large(h) => h.remove(name),
        }
    }

    /// Sets (Some) or clears (None) a field's expiry; false when the field is missing. A
    /// listpack becomes a listpackex, whose triplets stay ordered by expiry (none last).
    pub fn set_expire(&mut self, name: &[u8], at: Option<u64>) -> bool {
        match self {
            HashForm::Small { lp, ex } => {
                let Some((value, _)) = HashRef::Small(lp, *ex).get(name) else {
                    return false;
                };
                if !*ex {
                    let mut out = listpack::new();
                    let items: Vec<Vec<u8>> = listpack::iter(lp).map(|(_, e)| e.to_vec()).collect();
                    for pair in items.chunks_exact(2) {
                        listpack::push(&mut out, &[&pair[0], &pair[1], b"0"]);
                    }
                    *lp = out;
                    *ex = true;
                }
                if let Some(pos) = listpack::find(lp, listpack::first(lp), name, 2) {
                    listpack::delete(lp, pos, 3);
                }
                let t = at.unwrap_or(0);
                // Before the first triplet expiring later (or never).
                let mut insert_at = lp.len() - 1;
                let mut pos = listpack::first(lp);
                while !listpack::at_end(lp, pos) {
                    let Some((_, vpos)) = listpack::get(lp, pos) else {
                        break;
                    };
                    let Some((_, tpos)) = listpack::get(lp, vpos) else {
                        break;
                    };
                    let Some((te, next)) = listpack::get(lp, tpos) else {
                        break;
                    };
                    let other = elem_int(te);
                    if t != 0 && (other == 0 || other > t) {
                        insert_at = pos;
                        break;
                    }
                    pos = next;
                }
                let ts = t.to_string();
                listpack::insert(lp, insert_at, &[name, &value, ts.as_bytes()]);
                true
            }
            HashForm::Large(h) => h.set_expire(name, at),
        }
    }

    /// Removes every field expired at `now`; returns how many went.
    pub fn remove_expired(&mut self, now: u64) -> usize {
        match self {
            HashForm::Small { lp, ex: true } => {
                if min_expiry(lp).is_none_or(|m| m > now) {
                    return 0;
                }
                let gone: Vec<Vec<u8>> = HashRef::Small(lp, true)
                    .fields()
                    .into_iter()
                    .filter(|f| f.expire_at.is_some_and(|t| t <= now))
                    .map(|f| f.name)
                    .collect();
                for name in &gone {
                    self.remove(name);
                }
                gone.len()
            }
            HashForm::Small { ex: false, .. } => 0,
            HashForm::Large(h) => h.remove_expired(now),
        }
    }
}

impl HashForm {
    /// The hash an entry holds, taken out to be changed (None when it holds no hash). A large
    /// one leaves a placeholder behind: [`HashForm::put`] must follow.
    pub fn take(e: &mut Entry) -> Option<HashForm> {
        match e.value() {
            ValueRef::Packed(kind, b) if kind.ty == ObjectType::Hash => Some(HashForm::Small {
                lp: packed_bytes(kind, b).into_owned(),
                ex: kind.encoding == PackedEncoding::ListpackEx,
            }),
            ValueRef::Object(_) => {
                let h = e.object_mut()?.as_any_mut().downcast_mut::<LargeHash>()?;
                Some(HashForm::Large(std::mem::replace(
                    h,
                    LargeHash::placeholder(),
                )))
            }
            _ => None,
        }
    }

    /// Puts a hash taken with [`HashForm::take`] back (a large one into its old box).
    pub fn put(self, e: &mut Entry) {
        match self {
            HashForm::Large(h) => {
                match e
                    .object_mut()
                    .and_then(|o| o.as_any_mut().downcast_mut::<LargeHash>())
                {
                    Some(slot) => *slot = h,
                    None => e.set_value(Value::Object(Box::new(h))),
                }
            }
            small => e.set_value(small.into_value()),
        }
    }
}

/// What sweeping a stored hash's expired fields did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Swept {
    pub removed: usize,
    /// No field is left: the key must go.
    pub empty: bool,
    /// Some field still has an expiry.
    pub expiring: bool,
}

/// Removes the fields of the hash in `e` expired at `now` (None when `e` holds no hash).
/// Touches the entry only when a field is due.
pub fn sweep_entry(e: &mut Entry, now: u64) -> Option<Swept> {
    let due = match e.value() {
        ValueRef::Packed(kind, b) if kind.ty == ObjectType::Hash => packed_min_expiry(kind, b),
        ValueRef::Object(o) => HashRef::from_object(o)?.min_expire_bound(),
        _ => return None,
    };
    let Some(due) = due else {
        return Some(Swept {
            removed: 0,
            empty: false,
            expiring: false,
        });
    };
    if due > now {
        return Some(Swept {
            removed: 0,
            empty: false,
            expiring: true,
        });
    }
    let mut h = HashForm::take(e)?;
    let removed = h.remove_expired(now);
    let swept = Swept {
        removed,
        empty: h.is_empty(),
        expiring: h.as_ref().min_expire_bound().is_some(),
    };
    h.put(e);
    Some(swept)
}

/// The soonest a field of the hash in `e` (in RAM) may expire: None when `e` holds no hash in
/// RAM or no field of it has an expiry (the shard's field sweep records this time).
pub fn field_expiry_bound(e: &Entry) -> Option<u64> {
    match e.value() {
        ValueRef::Packed(kind, b) => packed_min_expiry(kind, b),
        ValueRef::Object(o) => HashRef::from_object(o)?.min_expire_bound(),
        _ => None,
    }
}

impl Default for HashForm {
    fn default() -> Self {
        HashForm::new()
    }
}

/// Builds a hash of `fields` in the form Redis would load it in.
fn from_fields(fields: Vec<OwnedField>, limits: &PackLimits) -> Result<Value, String> {
    let mut seen = std::collections::HashSet::with_capacity(fields.len());
    if !fields.iter().all(|f| seen.insert(&f.name[..])) {
        return Err("a hash with a field named twice".into());
    }
    if fields.is_empty() {
        return Err("a hash with no field".into());
    }
    let large = fields.len() > limits.hash_entries
        || fields
            .iter()
            .any(|f| f.name.len() > limits.hash_value || f.value.len() > limits.hash_value);
    let mut h = if large {
        HashForm::Large(LargeHash::new())
    } else {
        HashForm::new()
    };
    let mut no_limits = *limits;
    no_limits.hash_entries = usize::MAX;
    no_limits.hash_value = usize::MAX;
    for f in &fields {
        h.set(&f.name, &f.value, false, &no_limits);
    }
    for f in &fields {
        if f.expire_at.is_some() {
            h.set_expire(&f.name, f.expire_at);
        }
    }
    if let HashForm::Small { ex: false, .. } = h {
        // Redis 7.4 loads a HASH_METADATA hash as a listpackex even when no field expires.
        if let HashForm::Small { lp, .. } = &mut h {
            let items: Vec<Vec<u8>> = listpack::iter(lp).map(|(_, e)| e.to_vec()).collect();
            let mut out = listpack::new();
            for pair in items.chunks_exact(2) {
                listpack::push(&mut out, &[&pair[0], &pair[1], b"0"]);
            }
            h = HashForm::Small { lp: out, ex: true };
        }
    }
    Ok(h.into_value())
}

/// A field's expiry from Redis 7.4's hash-metadata form, where 0 is none and any other `ttl`
/// is `min + ttl - 1` ms; None when that is out of range.
pub fn field_expiry_from_rdb(ttl: u64, min: u64) -> Option<Option<u64>> {
    match ttl {
        0 => Some(None),
        t => t
            .checked_add(min)
            .and_then(|v| v.checked_sub(1))
            .filter(|&v| v < 1 << 48)
            .map(Some),
    }
}

/// RDB_TYPE_HASH_METADATA (Redis 7.4): the soonest expiry (u64 LE ms), the field count, then
/// per field its expiry (`at - soonest + 1`, 0 for none), name and value.
pub fn from_rdb_metadata(body: &[u8], limits: &PackLimits) -> Result<Value, String> {
    use ondisk::rdb::codec::{read_len, read_string};
    use ondisk::rdb::RdbCursor;
    let bad = |e: ondisk::FormatError| format!("RDB hash with field expiries: {e}");
    let min = body
        .get(..8)
        .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .ok_or("RDB hash with field expiries: cut short")?;
    let mut input = RdbCursor::new(&body[8..]);
    let n = read_len(&mut input).map_err(bad)?;
    let mut fields = Vec::new();
    for _ in 0..n {
        let ttl = read_len(&mut input).map_err(bad)?;
        let name = read_string(&mut input).map_err(bad)?;
        let value = read_string(&mut input).map_err(bad)?;
        let expire_at = field_expiry_from_rdb(ttl, min)
            .ok_or("RDB hash with field expiries: an expiry out of range")?;
        fields.push(OwnedField {
            name,
            value,
            expire_at,
        });
    }
    input.finish().map_err(bad)?;
    from_fields(fields, limits)
}

/// RDB_TYPE_HASH_LISTPACK_EX (Redis 7.4): the soonest expiry (u64 LE ms), then the listpack
/// of triplets; kept as it is unless it has more fields than the entry limit.
pub fn from_rdb_listpack_ex(body: &[u8], limits: &PackLimits) -> Result<Value, String> {
    use ondisk::rdb::codec::read_string;
    use ondisk::rdb::RdbCursor;
    let bad = |e: ondisk::FormatError| format!("RDB listpackex hash: {e}");
    let rest = body.get(8..).ok_or("RDB listpackex hash: cut short")?;
    let mut input = RdbCursor::new(rest);
    let lp = read_string(&mut input).map_err(bad)?;
    input.finish().map_err(bad)?;
    if !listpack::validate(&lp, false)
        || !listpack::len(&lp).is_multiple_of(3)
        || listpack::len(&lp) == 0
    {
        return Err("RDB listpackex hash: a damaged listpack".into());
    }
    let fields = HashRef::Small(&lp, true).fields();
    let mut seen = std::collections::HashSet::with_capacity(fields.len());
    if !fields.iter().all(|f| seen.insert(&f.name[..])) {
        return Err("a hash with a field named twice".into());
    }
    if fields.len() > limits.hash_entries {
        let mut h = LargeHash::new();
        for f in &fields {
            h.insert(&f.name, &f.value, f.expire_at);
        }
        return Ok(Value::Object(Box::new(h)));
    }
    Ok(Value::Packed(Packed {
        kind: packed_kind(true),
        bytes: lp.into_boxed_slice(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> PackLimits {
        PackLimits::default()
    }

    #[test]
    fn long_small_hashes_are_kept_compressed_and_read_as_their_listpack() {
        let mut h = HashForm::new();
        for f in 0..20 {
            let (name, value) = (format!("field{f}"), format!("value{f}-7"));
            h.set(name.as_bytes(), value.as_bytes(), false, &limits());
        }
        let plain_lp = match &h {
            HashForm::Small { lp, .. } => lp.clone(),
            HashForm::Large(_) => panic!("20 short fields stay small"),
        };
        let Value::Packed(p) = h.into_value() else {
            panic!("a small hash is packed")
        };
        assert_eq!(p.kind.encoding, PackedEncoding::ListpackLz4);
        assert_eq!(p.kind.encoding_name(), "listpack");
        assert!(p.bytes.len() < plain_lp.len() * 2 / 3);
        let lp = packed_bytes(p.kind, &p.bytes);
        assert_eq!(&lp[..], &plain_lp[..]);
        let r = HashRef::from_packed(p.kind.plain(), &lp).expect("a hash");
        assert_eq!(r.len(), 20);
        assert_eq!(r.get(b"field7").map(|(v, _)| v), Some(b"value7-7".to_vec()));
        assert!(HashRef::from_packed(p.kind, &p.bytes).is_none());
        // RDB and DUMP carry the listpack.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        assert_eq!(p.kind.encode_rdb(&p.bytes, &mut a), 16);
        assert_eq!(p.kind.plain().encode_rdb(&plain_lp, &mut b), 16);
        assert_eq!(a, b);
        // A short hash stays as it is.
        let mut small = HashForm::new();
        small.set(b"a", b"1", false, &limits());
        let Value::Packed(q) = small.into_value() else {
            panic!("packed")
        };
        assert_eq!(q.kind.encoding, PackedEncoding::Listpack);
    }

    #[test]
    fn converts_where_redis_does() {
        let l = limits();
        let mut h = HashForm::new();
        for i in 0..128 {
            assert!(h.set(format!("f{i}").as_bytes(), b"v", false, &l));
        }
        assert!(matches!(h, HashForm::Small { .. }));
        h.set(b"f128", b"v", false, &l);
        assert!(matches!(h, HashForm::Large(_)));
        let mut h = HashForm::new();
        h.set(b"a", &[b'x'; 64], false, &l);
        assert!(matches!(h, HashForm::Small { .. }));
        h.set(b"a", &[b'x'; 65], false, &l);
        assert!(matches!(h, HashForm::Large(_)));
    }

    #[test]
    fn expiries_order_triplets_and_expire() {
        let l = limits();
        let mut h = HashForm::new();
        for f in [b"a", b"b", b"c"] {
            h.set(f, b"1", false, &l);
        }
        assert!(h.set_expire(b"c", Some(300)));
        assert!(h.set_expire(b"a", Some(100)));
        assert!(!h.set_expire(b"zz", Some(1)));
        let names: Vec<Vec<u8>> = h.as_ref().fields().into_iter().map(|f| f.name).collect();
        assert_eq!(names, vec![b"a".to_vec(), b"c".to_vec(), b"b".to_vec()]);
        assert_eq!(h.as_ref().min_expire_bound(), Some(100));
        assert_eq!(h.remove_expired(150), 1);
        assert_eq!(h.len(), 2);
        h.set(b"c", b"2", false, &l);
        assert_eq!(h.as_ref().get(b"c"), Some((b"2".to_vec(), None)));
        let mut out = Vec::new();
        let v = h.into_value();
        let Value::Packed(p) = v else { panic!() };
        assert_eq!(p.kind.encode_rdb(&p.bytes, &mut out), 25);
        let back = from_rdb_listpack_ex(&out, &l).unwrap();
        assert!(matches!(back, Value::Packed(q) if q == p));
    }

    #[test]
    fn large_hashes_with_expiries_round_trip_through_rdb() {
        let mut h = LargeHash::new();
        for i in 0..200 {
            h.set(format!("f{i}").as_bytes(), b"v", false);
        }
        h.set_expire(b"f3", Some(5_000));
        h.set_expire(b"f9", Some(4_000));
        let mut out = Vec::new();
        assert_eq!(h.encode_rdb(&mut out), 24);
        let Value::Object(o) = from_rdb_metadata(&out, &limits()).unwrap() else {
            panic!()
        };
        let back = HashRef::from_object(&*o).unwrap();
        assert_eq!(back.len(), 200);
        assert_eq!(back.get(b"f3").unwrap().1, Some(5_000));
        assert_eq!(back.get(b"f9").unwrap().1, Some(4_000));
        assert_eq!(back.get(b"f1").unwrap().1, None);
    }
}

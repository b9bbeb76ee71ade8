//! The large set (OBJECT ENCODING "hashtable"): what a set becomes past
//! `set-max-intset-entries` members or with a member that is not an integer. Its members live
//! in a [`LargeHash`] with empty values, so it inherits that structure's memory (a short member
//! costs its bytes plus a few of header and slot), its node sharing with snapshot captures,
//! and its stable scan cursor (a member present for a whole SSCAN is returned exactly once).
//!
//! Never: stores a value beside a member, or answers for a member twice.

use std::any::Any;

use ondisk::rdb::codec::{write_len, write_string, StringCompression};

use super::hash::LargeHash;
use super::object::{ObjectType, RdbPartPos, TypedObject};

#[derive(Clone, Default)]
pub struct LargeSet {
    members: LargeHash,
}

impl LargeSet {
    pub fn new() -> LargeSet {
        LargeSet::default()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        self.members.get(m).is_some()
    }

    /// Adds `m`; false when it was there already.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        self.members.insert(m, b"", None)
    }

    /// Removes `m`; false when it was not there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        self.members.remove(m)
    }

    /// Every member, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.members.iter().map(|f| f.name)
    }

    /// SSCAN's step: members from `cursor` on, at least `count` unless the end comes first;
    /// returns the next cursor (0 at the end).
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, out: &mut Vec<&'a [u8]>) -> u64 {
        let mut fields = Vec::new();
        let next = self.members.scan(cursor, count, &mut fields);
        out.extend(fields.into_iter().map(|f| f.name));
        next
    }

    /// A uniformly random member; None when empty. `below(n)` draws a number under `n`.
    pub fn random(&self, below: &mut impl FnMut(usize) -> usize) -> Option<&[u8]> {
        let at = self.members.random_position(below)?;
        self.members.field_at(at).map(|f| f.name)
    }
}

/// A set being built member by member as Redis builds one (SADD, the STORE commands, RDB
/// load): an intset while every member is an integer and there are at most `intset_max` of
/// them, the large set from the first member that is not.
pub enum SetBuilder {
    Intset(Vec<u8>, usize),
    Large(LargeSet),
}

impl SetBuilder {
    pub fn new(intset_max: usize) -> SetBuilder {
        SetBuilder::Intset(super::intset::new(), intset_max.min(1 << 30))
    }

    /// Adds a member; false when it was there already.
    pub fn add(&mut self, m: &[u8]) -> bool {
        match self {
            SetBuilder::Intset(is, max) => match crate::protocol::string2ll(m) {
                Some(v) => {
                    if !super::intset::insert(is, v) {
                        return false;
                    }
                    if super::intset::len(is) > *max {
                        *self = SetBuilder::Large(large_from_intset(is));
                    }
                    true
                }
                None => {
                    let mut large = large_from_intset(is);
                    large.insert(m);
                    *self = SetBuilder::Large(large);
                    true
                }
            },
            SetBuilder::Large(l) => l.insert(m),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            SetBuilder::Intset(is, _) => super::intset::len(is),
            SetBuilder::Large(l) => l.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value to store.
    pub fn into_value(self) -> super::entry::Value {
        use super::object::{Packed, PackedEncoding, PackedKind};
        match self {
            SetBuilder::Intset(is, _) => super::entry::Value::Packed(Packed {
                kind: PackedKind {
                    ty: ObjectType::Set,
                    encoding: PackedEncoding::Intset,
                },
                bytes: is.into_boxed_slice(),
            }),
            SetBuilder::Large(l) => super::entry::Value::Object(Box::new(l)),
        }
    }
}

/// The large set holding an intset's members.
pub fn large_from_intset(is: &[u8]) -> LargeSet {
    let mut l = LargeSet::new();
    for v in super::intset::iter(is) {
        l.insert(v.to_string().as_bytes());
    }
    l
}

impl TypedObject for LargeSet {
    fn object_type(&self) -> ObjectType {
        ObjectType::Set
    }

    fn encoding(&self) -> &'static str {
        "hashtable"
    }

    fn heap_bytes(&self) -> usize {
        self.members.heap_bytes()
    }

    fn capture(&self) -> Box<dyn TypedObject> {
        Box::new(self.clone())
    }

    fn capture_bytes(&self) -> usize {
        self.members.capture_bytes()
    }

    /// RDB_TYPE_SET: the member count, then each member as a string.
    fn encode_rdb_part(
        &self,
        pos: &mut RdbPartPos,
        out: &mut Vec<u8>,
        budget: usize,
    ) -> (u8, bool) {
        let start = out.len();
        if !pos.started {
            pos.started = true;
            write_len(out, self.len() as u64);
        }
        let nodes = self.members.node_count();
        while pos.at < nodes && out.len() - start < budget {
            for f in self.members.node_fields(pos.at) {
                write_string(out, f.name, StringCompression::Lzf);
            }
            pos.at += 1;
        }
        (ondisk::rdb::types::SET, pos.at >= nodes)
    }

    fn encode_rdb(&self, out: &mut Vec<u8>) -> u8 {
        self.encode_rdb_part(&mut RdbPartPos::default(), out, usize::MAX)
            .0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_come_and_go_and_a_scan_sees_each_once() {
        let mut s = LargeSet::new();
        for i in 0..2000 {
            assert!(s.insert(format!("m{i}").as_bytes()));
        }
        assert!(!s.insert(b"m5"));
        assert!(s.remove(b"m5"));
        assert!(!s.contains(b"m5"));
        assert_eq!(s.len(), 1999);
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            let mut out = Vec::new();
            cursor = s.scan(cursor, 10, &mut out);
            for m in out {
                assert!(seen.insert(m.to_vec()));
            }
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1999);
        let mut n = 7usize;
        let mut below = |k: usize| {
            n = n.wrapping_mul(6364136223846793005).wrapping_add(1);
            (n >> 33) % k
        };
        assert!(s.random(&mut below).is_some_and(|m| s.contains(m)));
    }
}

//! The list (OBJECT ENCODING "quicklist", as Redis 7.0 reports every list): a sequence of
//! listpack nodes, each bounded by `list-max-listpack-size`, with Redis 7.0's quicklist rules
//! for where an element goes (push, insert with split and merge, delete), so that a list built
//! by the same commands has the same nodes as in redis-server and DUMPs to the same bytes.
//!
//! ```text
//! QuickList: nodes VecDeque<Arc<Node>>   O(1) push and pop at both ends
//!   Node: lp   Redis' listpack bytes     (shard::listpack)
//!         count                          elements in lp
//! ```
//! - A one-node list is stored as a packed block (`Value::Packed`, the node's listpack) by the
//!   list commands; a list of more nodes is this object.
//! - Snapshots: [`TypedObject::capture`] clones the node pointers; a later write copies only
//!   the node it changes (`Arc::make_mut`), at most one node's bytes (about 8 KiB by default).
//!
//! Never: holds an empty node, changes a node a capture shares in place, or lets its element
//! and byte counts drift from its nodes.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use ondisk::rdb::codec::{write_len, write_string, StringCompression};

use super::listpack::{self, Element};
use super::object::{ObjectType, RdbPartPos, TypedObject};

/// Node sizes the negative fills select (-1 = 4 KiB ... -5 = 64 KiB).
const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// A node grows past a count-based fill only while it stays under this many bytes.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Redis' estimate of the bytes an element adds besides its own.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
/// The largest count-based fill Redis keeps.
const FILL_MAX: i64 = (1 << 15) - 1;

/// `list-max-listpack-size` as a quicklist keeps it (clamped as Redis clamps it).
pub fn clamp_fill(fill: i64) -> i32 {
    fill.clamp(-5, FILL_MAX) as i32
}

fn meets_optimization(sz: usize, fill: i32) -> bool {
    if fill >= 0 {
        return false;
    }
    let offset = (-(fill as i64) - 1) as usize;
    offset < OPTIMIZATION_LEVEL.len() && sz <= OPTIMIZATION_LEVEL[offset]
}

/// One node: a listpack and its element count.
#[derive(Clone, Debug)]
pub struct Node {
    lp: Vec<u8>,
    count: usize,
}

impl Node {
    fn new() -> Node {
        Node {
            lp: listpack::new(),
            count: 0,
        }
    }

    fn from_listpack(lp: Vec<u8>) -> Node {
        let count = listpack::len(&lp);
        Node { lp, count }
    }

    /// Heap bytes: the Arc's counts, the node and its listpack.
    fn heap(&self) -> usize {
        16 + std::mem::size_of::<Node>() + self.lp.capacity()
    }

    pub fn listpack(&self) -> &[u8] {
        &self.lp
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether an element of `sz` bytes may join this node (`_quicklistNodeAllowInsert`).
    fn allows_insert(&self, fill: i32, sz: usize) -> bool {
        let new_sz = self.lp.len() + sz + SIZE_ESTIMATE_OVERHEAD;
        if meets_optimization(new_sz, fill) {
            true
        } else if new_sz > SIZE_SAFETY_LIMIT {
            false
        } else {
            (self.count as i64) < fill as i64
        }
    }

    /// Offset of element `i` (counted from the front), walking from the nearer end.
    fn offset_of(&self, i: usize) -> Option<usize> {
        if i >= self.count {
            return None;
        }
        if i <= self.count / 2 {
            let mut pos = listpack::first(&self.lp);
            for _ in 0..i {
                pos = listpack::get(&self.lp, pos)?.1;
            }
            Some(pos)
        } else {
            let mut pos = listpack::last(&self.lp)?;
            for _ in 0..(self.count - 1 - i) {
                pos = listpack::prev(&self.lp, pos)?;
            }
            Some(pos)
        }
    }

    fn get(&self, i: usize) -> Option<Element<'_>> {
        let pos = self.offset_of(i)?;
        listpack::get(&self.lp, pos).map(|(e, _)| e)
    }

    fn push_front(&mut self, v: &[u8]) {
        let at = listpack::first(&self.lp);
        listpack::insert(&mut self.lp, at, &[v]);
        self.count += 1;
    }

    fn push_back(&mut self, v: &[u8]) {
        listpack::push(&mut self.lp, &[v]);
        self.count += 1;
    }

    fn insert_at(&mut self, i: usize, v: &[u8]) {
        let pos = if i >= self.count {
            self.lp.len() - 1
        } else {
            self.offset_of(i).unwrap_or(self.lp.len() - 1)
        };
        listpack::insert(&mut self.lp, pos, &[v]);
        self.count += 1;
    }

    /// Deletes `n` elements from element `i` on.
    fn delete_range(&mut self, i: usize, n: usize) {
        if n == 0 {
            return;
        }
        if let Some(pos) = self.offset_of(i) {
            let n = n.min(self.count - i);
            listpack::delete(&mut self.lp, pos, n);
            self.count -= n;
        }
        self.trim_capacity();
    }

    /// Gives back spare capacity once it is a large part of the node.
    fn trim_capacity(&mut self) {
        let len = self.lp.len();
        if self.lp.capacity() > len + len / 4 + 16 {
            self.lp.shrink_to(len + len / 16);
        }
    }
}

/// A large list: listpack nodes in order.
#[derive(Clone, Debug)]
pub struct QuickList {
    nodes: VecDeque<Arc<Node>>,
    len: usize,
    fill: i32,
    /// The nodes' heap bytes, kept as they change.
    node_bytes: usize,
}

impl QuickList {
    pub fn new(fill: i32) -> QuickList {
        QuickList {
            nodes: VecDeque::new(),
            len: 0,
            fill,
            node_bytes: 0,
        }
    }

    /// A list of the given listpack nodes, as they are (empty ones are skipped, as Redis
    /// skips them on load).
    pub fn from_listpacks(fill: i32, nodes: impl IntoIterator<Item = Vec<u8>>) -> QuickList {
        let mut ql = QuickList::new(fill);
        for lp in nodes {
            let node = Node::from_listpack(lp);
            if node.count == 0 {
                continue;
            }
            ql.len += node.count;
            ql.node_bytes += node.heap();
            ql.nodes.push_back(Arc::new(node));
        }
        ql
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn fill(&self) -> i32 {
        self.fill
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The nodes' listpacks, front to back.
    pub fn listpacks(&self) -> impl Iterator<Item = &[u8]> {
        self.nodes.iter().map(|n| n.listpack())
    }

    /// The only node's listpack, taken out; the list itself unless it has exactly one node.
    pub fn into_single(mut self) -> Result<Vec<u8>, QuickList> {
        if self.nodes.len() != 1 {
            return Err(self);
        }
        let Some(node) = self.nodes.pop_front() else {
            return Err(self);
        };
        let mut lp = Arc::try_unwrap(node).map_or_else(|n| n.lp.clone(), |n| n.lp);
        lp.shrink_to_fit();
        Ok(lp)
    }

    /// Runs `f` on node `i`, copying it first when a capture shares it; a node left empty is
    /// removed.
    fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut Node) -> R) -> R {
        let before = self.nodes[i].heap();
        let before_count = self.nodes[i].count;
        let node = Arc::make_mut(&mut self.nodes[i]);
        let r = f(node);
        let (after, count) = (node.heap(), node.count);
        self.node_bytes = self.node_bytes + after - before;
        self.len = self.len + count - before_count;
        if count == 0 {
            self.remove_node(i);
        }
        r
    }

    fn remove_node(&mut self, i: usize) {
        if let Some(n) = self.nodes.remove(i) {
            self.node_bytes -= n.heap();
            self.len -= n.count;
        }
    }

    fn insert_node(&mut self, i: usize, node: Node) {
        self.node_bytes += node.heap();
        self.len += node.count;
        self.nodes.insert(i, Arc::new(node));
    }

    fn allows_insert(&self, i: Option<usize>, sz: usize) -> bool {
        i.and_then(|i| self.nodes.get(i))
            .is_some_and(|n| n.allows_insert(self.fill, sz))
    }

    /// Whether nodes `a` and `b` may become one (`_quicklistNodeAllowMerge`).
    fn allows_merge(&self, a: usize, b: usize) -> bool {
        let (Some(x), Some(y)) = (self.nodes.get(a), self.nodes.get(b)) else {
            return false;
        };
        let merge_sz = (x.lp.len() + y.lp.len()).saturating_sub(11);
        if meets_optimization(merge_sz, self.fill) {
            true
        } else if merge_sz > SIZE_SAFETY_LIMIT {
            false
        } else {
            ((x.count + y.count) as i64) <= self.fill as i64
        }
    }

    /// Merges node `a + 1` into node `a`.
    fn merge(&mut self, a: usize) {
        let Some(b) = self.nodes.get(a + 1).cloned() else {
            return;
        };
        self.remove_node(a + 1);
        self.edit(a, |n| {
            let items: Vec<Vec<u8>> = listpack::iter(&b.lp).map(|(_, e)| e.to_vec()).collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| &v[..]).collect();
            listpack::push(&mut n.lp, &refs);
            n.count += refs.len();
            n.trim_capacity();
        });
    }

    /// Gives back node `i`'s spare capacity: pushes go to a new node next to it from now on.
    /// A node a capture shares is left as it is (it is not copied for this).
    fn seal(&mut self, i: usize) {
        if let Some(n) = self.nodes.get_mut(i).and_then(Arc::get_mut) {
            let before = n.heap();
            n.lp.shrink_to_fit();
            self.node_bytes = self.node_bytes + n.heap() - before;
        }
    }

    pub fn push_front(&mut self, v: &[u8]) {
        if self.allows_insert(Some(0).filter(|_| !self.nodes.is_empty()), v.len()) {
            self.edit(0, |n| n.push_front(v));
        } else {
            self.seal(0);
            let mut node = Node::new();
            node.push_front(v);
            self.insert_node(0, node);
        }
    }

    pub fn push_back(&mut self, v: &[u8]) {
        let last = self.nodes.len().checked_sub(1);
        match last {
            Some(i) if self.allows_insert(Some(i), v.len()) => self.edit(i, |n| n.push_back(v)),
            _ => {
                if let Some(i) = last {
                    self.seal(i);
                }
                let mut node = Node::new();
                node.push_back(v);
                let at = self.nodes.len();
                self.insert_node(at, node);
            }
        }
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let v = self.nodes.front()?.get(0)?.to_vec();
        self.edit(0, |n| n.delete_range(0, 1));
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let i = self.nodes.len().checked_sub(1)?;
        let last = self.nodes[i].count.checked_sub(1)?;
        let v = self.nodes[i].get(last)?.to_vec();
        self.edit(i, |n| n.delete_range(last, 1));
        Some(v)
    }

    /// (node, index in node) of element `i`, walking from the nearer end.
    fn locate(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.len {
            return None;
        }
        if i < self.len / 2 {
            let mut at = i;
            for (n, node) in self.nodes.iter().enumerate() {
                if at < node.count {
                    return Some((n, at));
                }
                at -= node.count;
            }
        } else {
            let mut from_end = self.len - 1 - i;
            for (n, node) in self.nodes.iter().enumerate().rev() {
                if from_end < node.count {
                    return Some((n, node.count - 1 - from_end));
                }
                from_end -= node.count;
            }
        }
        None
    }

    pub fn get(&self, i: usize) -> Option<Element<'_>> {
        let (n, at) = self.locate(i)?;
        self.nodes[n].get(at)
    }

    /// Replaces element `i` (in place, whatever its size, as Redis does); false when out of
    /// range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        let Some((n, at)) = self.locate(i) else {
            return false;
        };
        self.edit(n, |node| {
            if let Some(pos) = node.offset_of(at) {
                listpack::replace(&mut node.lp, pos, v);
                node.trim_capacity();
            }
        });
        true
    }

    /// Elements from index `start` on, towards the back (`forward`) or the front.
    pub fn iter_from(&self, start: usize, forward: bool) -> ListIter<'_> {
        let (node, at) = self.locate(start).unwrap_or((self.nodes.len(), 0));
        ListIter::new(self, node, at, forward)
    }

    /// Inserts `v` next to element `i` (after it or before it), as `_quicklistInsert` does:
    /// into the same node when it has room, else into the neighbour, a new node or a split.
    pub fn insert(&mut self, i: usize, v: &[u8], after: bool) {
        let Some((n, off)) = self.locate(i) else {
            return;
        };
        let sz = v.len();
        let count = self.nodes[n].count;
        let full = !self.allows_insert(Some(n), sz);
        let at_tail = after && off == count - 1;
        let at_head = !after && off == 0;
        let avail_next = at_tail && self.allows_insert(Some(n + 1), sz);
        let avail_prev = at_head && n > 0 && self.allows_insert(Some(n - 1), sz);
        if !full {
            let at = if after { off + 1 } else { off };
            self.edit(n, |node| node.insert_at(at, v));
        } else if at_tail && avail_next {
            self.edit(n + 1, |node| node.push_front(v));
        } else if at_head && avail_prev {
            self.edit(n - 1, |node| node.push_back(v));
        } else if at_tail || at_head {
            let mut node = Node::new();
            node.push_front(v);
            self.insert_node(if after { n + 1 } else { n }, node);
        } else {
            // Split the node at the pivot; the element joins the part split off.
            let original = self.nodes[n].clone();
            let mut split = (*original).clone();
            if after {
                self.edit(n, |node| node.delete_range(off + 1, count));
                split.delete_range(0, off + 1);
                split.push_front(v);
                split.trim_capacity();
                self.insert_node(n + 1, split);
                self.merge_around(n);
            } else {
                self.edit(n, |node| node.delete_range(0, off));
                split.delete_range(off, count);
                split.push_back(v);
                split.trim_capacity();
                self.insert_node(n, split);
                self.merge_around(n + 1);
            }
        }
    }

    /// `_quicklistMergeNodes`: merges the two nodes before `center`, the two after it, then
    /// `center` with its neighbours, where the fill allows.
    fn merge_around(&mut self, mut center: usize) {
        if center >= 2 && self.allows_merge(center - 1, center - 2) {
            self.merge(center - 2);
            center -= 1;
        }
        if center + 2 < self.nodes.len() && self.allows_merge(center + 1, center + 2) {
            self.merge(center + 1);
        }
        let target = if center >= 1 && self.allows_merge(center, center - 1) {
            self.merge(center - 1);
            center - 1
        } else {
            center
        };
        if target + 1 < self.nodes.len() && self.allows_merge(target, target + 1) {
            self.merge(target);
        }
    }

    /// Deletes `front` elements from the front and `back` from the back (LTRIM, pops with a
    /// count): whole nodes go at once, a node left empty goes, nothing merges.
    pub fn trim(&mut self, mut front: usize, mut back: usize) {
        while front > 0 && !self.nodes.is_empty() {
            let c = self.nodes[0].count;
            if front >= c {
                self.remove_node(0);
                front -= c;
            } else {
                self.edit(0, |n| n.delete_range(0, front));
                front = 0;
            }
        }
        while back > 0 && !self.nodes.is_empty() {
            let i = self.nodes.len() - 1;
            let c = self.nodes[i].count;
            if back >= c {
                self.remove_node(i);
                back -= c;
            } else {
                self.edit(i, |n| n.delete_range(c - back, back));
                back = 0;
            }
        }
    }

    /// LREM: deletes up to `limit` (0: all) elements equal to `v`, from the front
    /// (`forward`) or the back; returns how many went.
    pub fn remove_matching(&mut self, v: &[u8], limit: usize, forward: bool) -> usize {
        let mut removed = 0;
        let order: Vec<usize> = if forward {
            (0..self.nodes.len()).collect()
        } else {
            (0..self.nodes.len()).rev().collect()
        };
        // Nodes are visited by identity: indexes shift as emptied nodes go.
        let nodes: Vec<Arc<Node>> = order.iter().map(|&i| self.nodes[i].clone()).collect();
        for node in nodes {
            if limit != 0 && removed >= limit {
                break;
            }
            let hits: Vec<usize> = listpack::iter(&node.lp)
                .enumerate()
                .filter(|(_, (_, e))| e.eq_bytes(v))
                .map(|(i, _)| i)
                .collect();
            if hits.is_empty() {
                continue;
            }
            let room = if limit == 0 {
                hits.len()
            } else {
                limit - removed
            };
            let mut take: Vec<usize> = if forward {
                hits.into_iter().take(room).collect()
            } else {
                hits.into_iter().rev().take(room).collect()
            };
            take.sort_unstable();
            let Some(i) = self.nodes.iter().position(|n| Arc::ptr_eq(n, &node)) else {
                continue;
            };
            drop(node);
            removed += take.len();
            self.edit(i, |n| {
                for &at in take.iter().rev() {
                    n.delete_range(at, 1);
                }
            });
        }
        removed
    }

    /// LRANGE's elements from `start` to `end` (inclusive, both in range).
    pub fn range(&self, start: usize, end: usize) -> Vec<Vec<u8>> {
        self.iter_from(start, true)
            .take(end + 1 - start)
            .map(Element::to_vec)
            .collect()
    }

    /// Checks the whole list against its counts (tests and loaders).
    pub fn is_consistent(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| n.count > 0 && listpack::len(&n.lp) == n.count)
            && self.nodes.iter().map(|n| n.count).sum::<usize>() == self.len
            && self.nodes.iter().map(|n| n.heap()).sum::<usize>() == self.node_bytes
    }
}

/// Elements of a list in one direction, read from the listpacks as they go (a pop or a short
/// LRANGE decodes only the elements it takes, not the whole node).
pub struct ListIter<'a> {
    list: &'a QuickList,
    node: usize,
    forward: bool,
    /// Offset of the next element in the current node's listpack; None once that node is done.
    pos: Option<usize>,
}

impl<'a> ListIter<'a> {
    fn new(list: &'a QuickList, node: usize, at: usize, forward: bool) -> ListIter<'a> {
        let pos = list.nodes.get(node).and_then(|n| n.offset_of(at));
        ListIter {
            list,
            node,
            forward,
            pos,
        }
    }
}

impl<'a> Iterator for ListIter<'a> {
    type Item = Element<'a>;

    fn next(&mut self) -> Option<Element<'a>> {
        let list: &'a QuickList = self.list;
        loop {
            if let (Some(pos), Some(n)) = (self.pos, list.nodes.get(self.node)) {
                let lp: &'a [u8] = &n.lp;
                if !listpack::at_end(lp, pos) {
                    if let Some((e, next)) = listpack::get(lp, pos) {
                        self.pos = if self.forward {
                            Some(next)
                        } else {
                            listpack::prev(lp, pos)
                        };
                        return Some(e);
                    }
                }
            }
            if self.forward {
                self.node += 1;
            } else {
                self.node = self.node.checked_sub(1)?;
            }
            let lp: &'a [u8] = &list.nodes.get(self.node)?.lp;
            self.pos = if self.forward {
                Some(listpack::first(lp))
            } else {
                listpack::last(lp)
            };
        }
    }
}

/// A list as the value to store: one node as a packed block, more as the object.
pub fn list_value(ql: QuickList) -> super::entry::Value {
    use super::object::{PackedEncoding, PackedKind};
    match ql.into_single() {
        Ok(lp) => super::entry::Value::Packed(super::object::Packed {
            kind: PackedKind {
                ty: ObjectType::List,
                encoding: PackedEncoding::Listpack,
            },
            bytes: lp.into_boxed_slice(),
        }),
        Err(ql) => super::entry::Value::Object(Box::new(ql)),
    }
}

/// Writes the RDB_TYPE_LIST_QUICKLIST_2 body of a list with these nodes, as Redis 7.0 writes
/// it: the node count, then per node its container (2: packed) and its listpack as a string
/// (LZF-compressed when that saves, as with `rdbcompression yes`).
pub fn encode_quicklist<'a>(nodes: impl ExactSizeIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    write_len(out, nodes.len() as u64);
    for lp in nodes {
        write_len(out, 2);
        write_string(out, lp, StringCompression::Lzf);
    }
}

impl TypedObject for QuickList {
    fn object_type(&self) -> ObjectType {
        ObjectType::List
    }

    fn encoding(&self) -> &'static str {
        "quicklist"
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.nodes.capacity() * std::mem::size_of::<Arc<Node>>()
            + self.node_bytes
    }

    fn capture(&self) -> Box<dyn TypedObject> {
        Box::new(self.clone())
    }

    fn capture_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.nodes.len() * std::mem::size_of::<Arc<Node>>()
    }

    fn encode_rdb_part(
        &self,
        pos: &mut RdbPartPos,
        out: &mut Vec<u8>,
        budget: usize,
    ) -> (u8, bool) {
        let start = out.len();
        if !pos.started {
            pos.started = true;
            write_len(out, self.nodes.len() as u64);
        }
        while pos.at < self.nodes.len() && out.len() - start < budget {
            write_len(out, 2);
            write_string(out, self.nodes[pos.at].listpack(), StringCompression::Lzf);
            pos.at += 1;
        }
        (
            ondisk::rdb::types::LIST_QUICKLIST_2,
            pos.at >= self.nodes.len(),
        )
    }

    fn encode_rdb(&self, out: &mut Vec<u8>) -> u8 {
        encode_quicklist(self.nodes.iter().map(|n| n.listpack()), out);
        ondisk::rdb::types::LIST_QUICKLIST_2
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

    fn values(ql: &QuickList) -> Vec<Vec<u8>> {
        ql.iter_from(0, true).map(Element::to_vec).collect()
    }

    #[test]
    fn pushes_fill_nodes_to_the_size_limit_and_pops_empty_them() {
        let mut ql = QuickList::new(-2);
        for i in 0..1000 {
            ql.push_back(format!("element:{i}").as_bytes());
        }
        assert_eq!(ql.len(), 1000);
        assert_eq!(ql.node_count(), 2);
        assert!(ql.listpacks().all(|lp| lp.len() <= 8192));
        assert!(ql.is_consistent());
        for i in 0..10 {
            ql.push_front(format!("h{i}").as_bytes());
        }
        assert_eq!(ql.get(0).map(Element::to_vec), Some(b"h9".to_vec()));
        assert_eq!(
            ql.get(1009).map(Element::to_vec),
            Some(b"element:999".to_vec())
        );
        assert_eq!(ql.pop_back(), Some(b"element:999".to_vec()));
        ql.trim(5, 500);
        assert_eq!(ql.len(), 504);
        assert!(ql.is_consistent());
        let back: Vec<_> = ql
            .iter_from(503, false)
            .take(2)
            .map(Element::to_vec)
            .collect();
        assert_eq!(back, vec![b"element:498".to_vec(), b"element:497".to_vec()]);
    }

    #[test]
    fn insert_splits_and_merges_keep_order() {
        let mut ql = QuickList::new(4);
        for i in 0..20 {
            ql.push_back(i.to_string().as_bytes());
        }
        let mut model: Vec<Vec<u8>> = (0..20).map(|i: i32| i.to_string().into_bytes()).collect();
        for (k, i) in [5usize, 0, 23, 11, 2, 2, 17, 3, 3, 8]
            .into_iter()
            .enumerate()
        {
            let i = i % model.len();
            let v = format!("x{k}");
            let after = k % 2 == 0;
            ql.insert(i, v.as_bytes(), after);
            model.insert(if after { i + 1 } else { i }, v.into_bytes());
            assert_eq!(values(&ql), model);
            assert!(ql.is_consistent());
            assert!(ql.nodes.iter().all(|n| n.count <= 4));
        }
        assert_eq!(ql.remove_matching(b"x2", 0, false), 1);
        model.retain(|v| v != b"x2");
        assert_eq!(values(&ql), model);
        assert!(ql.is_consistent());
    }

    #[test]
    fn a_capture_shares_nodes() {
        let mut ql = QuickList::new(-2);
        for i in 0..5000 {
            ql.push_back(format!("v{i}").as_bytes());
        }
        let cap = ql.clone();
        ql.set(0, b"changed");
        let shared = ql
            .nodes
            .iter()
            .zip(&cap.nodes)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count();
        assert_eq!(shared, ql.node_count() - 1);
        assert_eq!(cap.get(0).map(Element::to_vec), Some(b"v0".to_vec()));
    }
}

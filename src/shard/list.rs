//! The list (OBJECT ENCODING "quicklist", as Redis 7.0 reports every list): a sequence of
//! listpack nodes, each bounded by `list-max-listpack-size`, with Redis 7.0's quicklist rules
//! for where an element goes (push, insert with split and merge, delete), so that a list built
//! by the same commands has the same nodes as in redis-server and DUMPs to the same bytes.
//!
//! ```text
//! QuickList: nodes VecDeque<Arc<Node>>   O(1) push and pop at both ends
//!   Node: body  Plain(listpack bytes)    (shard::listpack)
//!               Lz4(compressed listpack) a node pushes have left behind
//!         count                          elements in the listpack
//! ```
//! - Compression (as Redis' `list-compress-depth`, but for every node away from the ends): a
//!   node a push leaves behind, and a node between the ends at the end of a command, is kept
//!   LZ4-compressed when that saves an eighth; the node a push or pop touches is decompressed
//!   and stays plain while it is at an end. Reads decompress into a scratch buffer and leave
//!   the node as it is. RDB and DUMP carry plain listpacks, as Redis writes them.
//! - A one-node list is stored as a packed block (`Value::Packed`, the node's listpack) by the
//!   list commands; a list of more nodes is this object.
//! - Snapshots: [`TypedObject::capture`] clones the node pointers; a later write copies only
//!   the node it changes (`Arc::make_mut`), at most one node's bytes (about 8 KiB by default).
//!
//! Never: holds an empty node, changes a node a capture shares in place, or lets its element
//! and byte counts drift from its nodes.

use std::any::Any;
use std::borrow::Cow;
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

/// A node's listpack smaller than this stays plain (compressing it saves too little).
const MIN_COMPRESS_BYTES: usize = 512;

/// A node's listpack, as it is or LZ4-compressed.
#[derive(Clone, Debug)]
enum Body {
    Plain(Vec<u8>),
    /// An LZ4 block (lz4_flex's block format) of a listpack of `raw` bytes.
    Lz4 {
        data: Box<[u8]>,
        raw: usize,
    },
}

use super::lz4block::decompress;

/// One node: a listpack and its element count.
#[derive(Clone, Debug)]
pub struct Node {
    body: Body,
    count: usize,
    /// Plain because compressing it did not pay, and unchanged since: not tried again.
    incompressible: bool,
}

impl Node {
    fn new() -> Node {
        Node {
            body: Body::Plain(listpack::new()),
            count: 0,
            incompressible: false,
        }
    }

    fn from_listpack(lp: Vec<u8>) -> Node {
        let count = listpack::len(&lp);
        Node {
            body: Body::Plain(lp),
            count,
            incompressible: false,
        }
    }

    /// Heap bytes: the Arc's counts, the node and its listpack.
    fn heap(&self) -> usize {
        16 + std::mem::size_of::<Node>()
            + match &self.body {
                Body::Plain(lp) => lp.capacity(),
                Body::Lz4 { data, .. } => data.len(),
            }
    }

    /// The listpack's length in bytes (compressed or not).
    fn lp_len(&self) -> usize {
        match &self.body {
            Body::Plain(lp) => lp.len(),
            Body::Lz4 { raw, .. } => *raw,
        }
    }

    fn is_compressed(&self) -> bool {
        matches!(self.body, Body::Lz4 { .. })
    }

    /// The listpack: borrowed when plain, decompressed into a new vector when not.
    pub fn listpack(&self) -> Cow<'_, [u8]> {
        match &self.body {
            Body::Plain(lp) => Cow::Borrowed(lp),
            Body::Lz4 { data, raw } => Cow::Owned(decompress(data, *raw)),
        }
    }

    /// The listpack for changing it: a compressed node becomes plain.
    fn lp_mut(&mut self) -> &mut Vec<u8> {
        if let Body::Lz4 { data, raw } = &self.body {
            self.body = Body::Plain(decompress(data, *raw));
        }
        match &mut self.body {
            Body::Plain(lp) => lp,
            Body::Lz4 { .. } => unreachable!("made plain above"),
        }
    }

    /// This node compressed, when it is plain, large enough and compression saves an eighth.
    fn compressed(&self) -> Option<Node> {
        let Body::Plain(lp) = &self.body else {
            return None;
        };
        if lp.len() < MIN_COMPRESS_BYTES {
            return None;
        }
        let data = super::lz4block::compress(lp, &[])?;
        Some(Node {
            body: Body::Lz4 {
                data,
                raw: lp.len(),
            },
            count: self.count,
            incompressible: false,
        })
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Makes room for an element of `sz` bytes: a node that must grow grows to `room` bytes
    /// at once (the node's size limit; [`QuickList::settle`] gives back what stays unused),
    /// not by doubling, which would leave a trail of freed blocks behind it.
    fn reserve(&mut self, room: usize, sz: usize) {
        let lp = self.lp_mut();
        let need = sz + 16;
        if lp.capacity() - lp.len() < need {
            lp.reserve_exact(room.saturating_sub(lp.len()).max(need));
        }
    }

    /// Whether an element of `sz` bytes may join this node (`_quicklistNodeAllowInsert`).
    fn allows_insert(&self, fill: i32, sz: usize) -> bool {
        let new_sz = self.lp_len() + sz + SIZE_ESTIMATE_OVERHEAD;
        if meets_optimization(new_sz, fill) {
            true
        } else if new_sz > SIZE_SAFETY_LIMIT {
            false
        } else {
            (self.count as i64) < fill as i64
        }
    }

    fn push_front(&mut self, v: &[u8]) {
        let lp = self.lp_mut();
        let at = listpack::first(lp);
        listpack::insert(lp, at, &[v]);
        self.count += 1;
    }

    fn push_back(&mut self, v: &[u8]) {
        listpack::push(self.lp_mut(), &[v]);
        self.count += 1;
    }

    fn insert_at(&mut self, i: usize, v: &[u8]) {
        let count = self.count;
        let lp = self.lp_mut();
        let end = lp.len() - 1;
        let pos = if i >= count {
            end
        } else {
            offset_of(lp, count, i).unwrap_or(end)
        };
        listpack::insert(lp, pos, &[v]);
        self.count += 1;
    }

    /// Deletes `n` elements from element `i` on.
    fn delete_range(&mut self, i: usize, n: usize) {
        if n == 0 {
            return;
        }
        let count = self.count;
        let lp = self.lp_mut();
        if let Some(pos) = offset_of(lp, count, i) {
            let n = n.min(count - i);
            listpack::delete(lp, pos, n);
            self.count -= n;
        }
        self.trim_capacity();
    }

    /// Gives back spare capacity once it is a large part of the node.
    fn trim_capacity(&mut self) {
        if let Body::Plain(lp) = &mut self.body {
            let len = lp.len();
            if lp.capacity() > len + len / 4 + 16 {
                lp.shrink_to(len + len / 16);
            }
        }
    }
}

/// Offset of element `i` (counted from the front) of a listpack of `count` elements, walking
/// from the nearer end.
fn offset_of(lp: &[u8], count: usize, i: usize) -> Option<usize> {
    if i >= count {
        return None;
    }
    if i <= count / 2 {
        let mut pos = listpack::first(lp);
        for _ in 0..i {
            pos = listpack::get(lp, pos)?.1;
        }
        Some(pos)
    } else {
        let mut pos = listpack::last(lp)?;
        for _ in 0..(count - 1 - i) {
            pos = listpack::prev(lp, pos)?;
        }
        Some(pos)
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
    /// Nodes decompressed or added since the last [`QuickList::settle`], to compress there when
    /// they are not at an end (indices kept as nodes come and go).
    loose: Loose,
}

/// The nodes [`QuickList::settle`] looks at: a few by index, or every one.
#[derive(Clone, Debug, Default)]
struct Loose {
    at: Vec<usize>,
    all: bool,
}

/// Loose nodes tracked one by one; past this many, settle looks at every node.
const LOOSE_TRACKED: usize = 8;

impl Loose {
    fn mark(&mut self, i: usize) {
        if self.all || self.at.contains(&i) {
            return;
        }
        if self.at.len() < LOOSE_TRACKED {
            self.at.push(i);
        } else {
            self.at.clear();
            self.all = true;
        }
    }

    /// A node was inserted at `i`: those from `i` on moved one up.
    fn inserted(&mut self, i: usize) {
        for a in &mut self.at {
            if *a >= i {
                *a += 1;
            }
        }
    }

    /// Node `i` was removed: those past it moved one down.
    fn removed(&mut self, i: usize) {
        self.at.retain(|&a| a != i);
        for a in &mut self.at {
            if *a > i {
                *a -= 1;
            }
        }
    }

    fn is_empty(&self) -> bool {
        !self.all && self.at.is_empty()
    }
}

impl QuickList {
    pub fn new(fill: i32) -> QuickList {
        QuickList {
            nodes: VecDeque::new(),
            len: 0,
            fill,
            node_bytes: 0,
            loose: Loose::default(),
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

    /// Appends a node loaded whole (a checked listpack) and compresses the one before it, as
    /// [`QuickList::compress_loaded`] would at the end: a list built a node at a time (a
    /// snapshot's pieces, a large blob read back in steps) compresses as its nodes come,
    /// not all at once when the last has come.
    pub fn push_loaded(&mut self, lp: Vec<u8>) {
        let node = Node::from_listpack(lp);
        if node.count == 0 {
            return;
        }
        if let Some(last) = self.nodes.len().checked_sub(1) {
            self.compress(last);
        }
        self.len += node.count;
        self.node_bytes += node.heap();
        self.nodes.push_back(Arc::new(node));
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

    /// The nodes' listpacks, front to back (a compressed one decompressed).
    pub fn listpacks(&self) -> impl ExactSizeIterator<Item = Cow<'_, [u8]>> {
        self.nodes.iter().map(|n| n.listpack())
    }

    /// How many nodes are compressed.
    pub fn compressed_nodes(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_compressed()).count()
    }

    /// The only node's listpack, taken out; the list itself unless it has exactly one node.
    pub fn into_single(mut self) -> Result<Vec<u8>, QuickList> {
        if self.nodes.len() != 1 {
            return Err(self);
        }
        let Some(node) = self.nodes.pop_front() else {
            return Err(self);
        };
        let mut node = Arc::try_unwrap(node).unwrap_or_else(|n| (*n).clone());
        let mut lp = std::mem::take(node.lp_mut());
        lp.shrink_to_fit();
        Ok(lp)
    }

    /// Runs `f` on node `i`, copying it first when a capture shares it; a node left empty is
    /// removed.
    fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut Node) -> R) -> R {
        let before = self.nodes[i].heap();
        let before_count = self.nodes[i].count;
        let was_compressed = self.nodes[i].is_compressed();
        let node = Arc::make_mut(&mut self.nodes[i]);
        let r = f(node);
        node.incompressible = false;
        if was_compressed && !node.is_compressed() {
            self.loose.mark(i);
        }
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
            self.loose.removed(i);
            self.node_bytes -= n.heap();
            self.len -= n.count;
        }
    }

    fn insert_node(&mut self, i: usize, node: Node) {
        self.loose.inserted(i);
        self.loose.mark(i);
        // The node it pushed off an end is interior now.
        if i == 0 {
            self.loose.mark(1);
        } else if i == self.nodes.len() {
            self.loose.mark(i - 1);
        }
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
        let merge_sz = (x.lp_len() + y.lp_len()).saturating_sub(11);
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
            let blp = b.listpack();
            let items: Vec<Vec<u8>> = listpack::iter(&blp).map(|(_, e)| e.to_vec()).collect();
            let refs: Vec<&[u8]> = items.iter().map(|v| &v[..]).collect();
            listpack::push(n.lp_mut(), &refs);
            n.count += refs.len();
            n.trim_capacity();
        });
    }

    /// Node `i` is left behind by pushes (they go to a new node next to it from now on):
    /// compressed, or its spare capacity given back.
    fn seal(&mut self, i: usize) {
        if self.compress(i) {
            return;
        }
        if let Some(n) = self.nodes.get_mut(i).and_then(Arc::get_mut) {
            let before = n.heap();
            if let Body::Plain(lp) = &mut n.body {
                lp.shrink_to_fit();
            }
            self.node_bytes = self.node_bytes + n.heap() - before;
        }
    }

    /// Compresses node `i` when that pays; a node a capture shares is replaced, not changed.
    fn compress(&mut self, i: usize) -> bool {
        let Some(n) = self.nodes.get_mut(i) else {
            return false;
        };
        if n.is_compressed() || n.incompressible {
            return false;
        }
        let Some(c) = n.compressed() else {
            if let Some(n) = Arc::get_mut(n) {
                n.incompressible = true;
            }
            return false;
        };
        let before = self.nodes[i].heap();
        self.node_bytes = self.node_bytes + c.heap() - before;
        self.nodes[i] = Arc::new(c);
        true
    }

    /// What a command does last on a list it changed: the end nodes give back spare capacity
    /// and the nodes decompressed or added since the last call, when between them, are
    /// compressed (when that pays): a push or pop at an end looks at a node or two, not at
    /// every node of a long list.
    pub fn settle(&mut self) {
        for i in [0, self.nodes.len().saturating_sub(1)] {
            if let Some(n) = self.nodes.get_mut(i).and_then(Arc::get_mut) {
                let before = n.heap();
                n.trim_capacity();
                self.node_bytes = self.node_bytes + n.heap() - before;
            }
        }
        if self.loose.is_empty() {
            return;
        }
        let loose = std::mem::take(&mut self.loose);
        let last = self.nodes.len().saturating_sub(1);
        if loose.all {
            for i in 1..last {
                self.compress(i);
            }
        } else {
            for i in loose.at {
                if i > 0 && i < last {
                    self.compress(i);
                }
            }
        }
    }

    /// Compresses every node but the tail, as pushes onto the tail would have left them (a
    /// list loaded whole: RDB, RESTORE, a snapshot).
    pub fn compress_loaded(&mut self) {
        for i in 0..self.nodes.len().saturating_sub(1) {
            self.compress(i);
        }
        self.loose = Loose::default();
    }

    /// The bytes a node may grow to: its size limit for a size-based fill, none for a
    /// count-based one (such nodes are usually small).
    fn room(&self) -> usize {
        if self.fill < 0 {
            OPTIMIZATION_LEVEL
                [((-(self.fill as i64) - 1) as usize).min(OPTIMIZATION_LEVEL.len() - 1)]
        } else {
            0
        }
    }

    pub fn push_front(&mut self, v: &[u8]) {
        let room = self.room();
        if self.allows_insert(Some(0).filter(|_| !self.nodes.is_empty()), v.len()) {
            self.edit(0, |n| {
                n.reserve(room, v.len());
                n.push_front(v)
            });
        } else {
            self.seal(0);
            let mut node = Node::new();
            node.reserve(room, v.len());
            node.push_front(v);
            self.insert_node(0, node);
        }
    }

    pub fn push_back(&mut self, v: &[u8]) {
        let room = self.room();
        let last = self.nodes.len().checked_sub(1);
        match last {
            Some(i) if self.allows_insert(Some(i), v.len()) => self.edit(i, |n| {
                n.reserve(room, v.len());
                n.push_back(v)
            }),
            _ => {
                if let Some(i) = last {
                    self.seal(i);
                }
                let mut node = Node::new();
                node.reserve(room, v.len());
                node.push_back(v);
                let at = self.nodes.len();
                self.insert_node(at, node);
            }
        }
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        let v = self.get(0)?;
        self.edit(0, |n| n.delete_range(0, 1));
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        let i = self.nodes.len().checked_sub(1)?;
        let last = self.nodes[i].count.checked_sub(1)?;
        let v = self.get(self.len - 1)?;
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

    /// Element `i`, as a client reads it.
    pub fn get(&self, i: usize) -> Option<Vec<u8>> {
        let (n, at) = self.locate(i)?;
        let node = &self.nodes[n];
        let lp = node.listpack();
        let pos = offset_of(&lp, node.count, at)?;
        listpack::get(&lp, pos).map(|(e, _)| e.to_vec())
    }

    /// Replaces element `i` (in place, whatever its size, as Redis does); false when out of
    /// range.
    pub fn set(&mut self, i: usize, v: &[u8]) -> bool {
        let Some((n, at)) = self.locate(i) else {
            return false;
        };
        self.edit(n, |node| {
            let count = node.count;
            let lp = node.lp_mut();
            if let Some(pos) = offset_of(lp, count, at) {
                listpack::replace(lp, pos, v);
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
            let hits: Vec<usize> = listpack::iter(&node.listpack())
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
        let mut out = Vec::with_capacity(end + 1 - start);
        self.iter_from(start, true).visit(end + 1 - start, |_, e| {
            out.push(e.to_vec());
            true
        });
        out
    }

    /// Checks the whole list against its counts (tests and loaders).
    pub fn is_consistent(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| n.count > 0 && listpack::len(&n.listpack()) == n.count)
            && self.nodes.iter().map(|n| n.count).sum::<usize>() == self.len
            && self.nodes.iter().map(|n| n.heap()).sum::<usize>() == self.node_bytes
    }
}

/// Elements of a list in one direction, read from the listpacks as they go (a pop or a short
/// LRANGE decodes only the elements it takes, not the whole node); a compressed node is
/// decompressed into the iterator's own buffer, so `next` lends its element until the next call.
pub struct ListIter<'a> {
    list: &'a QuickList,
    node: usize,
    forward: bool,
    /// Offset of the next element in the current node's listpack; None once that node is done.
    pos: Option<usize>,
    /// The current node's listpack when that node is compressed.
    buf: Option<Vec<u8>>,
}

/// A node's listpack: its own bytes, or `buf` (where the iterator decompressed it).
fn bytes_of<'b>(node: &'b Node, buf: &'b Option<Vec<u8>>) -> &'b [u8] {
    match (&node.body, buf) {
        (Body::Plain(lp), _) => lp,
        (Body::Lz4 { .. }, Some(b)) => b,
        (Body::Lz4 { .. }, None) => &[],
    }
}

impl<'a> ListIter<'a> {
    fn new(list: &'a QuickList, node: usize, at: usize, forward: bool) -> ListIter<'a> {
        let mut it = ListIter {
            list,
            node,
            forward,
            pos: None,
            buf: None,
        };
        if let Some(n) = list.nodes.get(node) {
            it.load();
            it.pos = offset_of(bytes_of(n, &it.buf), n.count, at);
        }
        it
    }

    /// Decompresses the current node into the buffer when it is compressed.
    fn load(&mut self) {
        self.buf = match self.list.nodes.get(self.node).map(|n| &n.body) {
            Some(Body::Lz4 { data, raw }) => Some(decompress(data, *raw)),
            _ => None,
        };
    }

    /// The next element; None past the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Element<'_>> {
        let list: &'a QuickList = self.list;
        loop {
            let n = list.nodes.get(self.node)?;
            if let Some(pos) = self.pos {
                if !listpack::at_end(bytes_of(n, &self.buf), pos) {
                    break;
                }
            }
            if self.forward {
                self.node += 1;
            } else {
                self.node = self.node.checked_sub(1)?;
            }
            let n = list.nodes.get(self.node)?;
            self.load();
            let lp = bytes_of(n, &self.buf);
            self.pos = if self.forward {
                Some(listpack::first(lp))
            } else {
                listpack::last(lp)
            };
        }
        let n = list.nodes.get(self.node)?;
        let pos = self.pos?;
        let lp = bytes_of(n, &self.buf);
        let (e, next) = listpack::get(lp, pos)?;
        self.pos = if self.forward {
            Some(next)
        } else {
            listpack::prev(lp, pos)
        };
        Some(e)
    }

    /// Calls `f` with the index (from where the walk began) and each of up to `limit`
    /// elements, until it returns false.
    pub fn visit(mut self, limit: usize, mut f: impl FnMut(usize, Element<'_>) -> bool) {
        for i in 0..limit {
            match self.next() {
                Some(e) if f(i, e) => {}
                _ => return,
            }
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
pub fn encode_quicklist(nodes: impl ExactSizeIterator<Item = impl AsRef<[u8]>>, out: &mut Vec<u8>) {
    write_len(out, nodes.len() as u64);
    for lp in nodes {
        write_len(out, 2);
        write_string(out, lp.as_ref(), StringCompression::Lzf);
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
            write_string(out, &self.nodes[pos.at].listpack(), StringCompression::Lzf);
            pos.at += 1;
        }
        (
            ondisk::rdb::types::LIST_QUICKLIST_2,
            pos.at >= self.nodes.len(),
        )
    }

    fn encode_rdb(&self, out: &mut Vec<u8>) -> u8 {
        encode_quicklist(self.listpacks(), out);
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
        if ql.is_empty() {
            return vec![];
        }
        ql.range(0, ql.len() - 1)
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
        assert_eq!(ql.get(0), Some(b"h9".to_vec()));
        assert_eq!(ql.get(1009), Some(b"element:999".to_vec()));
        assert_eq!(ql.pop_back(), Some(b"element:999".to_vec()));
        ql.trim(5, 500);
        assert_eq!(ql.len(), 504);
        assert!(ql.is_consistent());
        let mut back = Vec::new();
        ql.iter_from(503, false).visit(2, |_, e| {
            back.push(e.to_vec());
            true
        });
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
        assert_eq!(cap.get(0), Some(b"v0".to_vec()));
    }

    /// Settling looks only at the nodes a change loosened, yet leaves no plain node between
    /// the ends (these elements compress), whatever the changes: pushes and pops at both ends,
    /// edits and inserts in the middle, trims.
    #[test]
    fn settle_leaves_no_plain_node_between_the_ends() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let mut ql = QuickList::new(-2);
        let v = |i: usize| format!("element:{i:06}:").repeat(12).into_bytes();
        for i in 0..4000 {
            ql.push_back(&v(i));
        }
        for step in 0..4000 {
            let len = ql.len();
            let i = rng.gen_range(0..len.max(1));
            match rng.gen_range(0..8) {
                0 | 1 => ql.push_front(&v(step)),
                2 | 3 => ql.push_back(&v(step)),
                4 if len > 0 => {
                    ql.pop_front();
                }
                5 if len > 0 => {
                    ql.pop_back();
                }
                6 if len > 0 => {
                    ql.set(i, &v(step));
                }
                7 if len > 0 => ql.insert(i, &v(step), step % 2 == 0),
                _ if len > 2 => ql.trim(1, 1),
                _ => {}
            }
            ql.settle();
            let last = ql.node_count().saturating_sub(1);
            for (k, n) in ql.nodes.iter().enumerate().take(last).skip(1) {
                assert!(
                    n.is_compressed() || n.incompressible,
                    "step {step}: node {k} of {} plain",
                    ql.node_count()
                );
            }
        }
        assert!(ql.is_consistent());
    }

    #[test]
    fn compressed_nodes_read_back_exactly_under_mixed_changes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut ql = QuickList::new(-2);
        let mut model: Vec<Vec<u8>> = Vec::new();
        for i in 0..6000 {
            let v = format!("element:{i}").into_bytes();
            ql.push_back(&v);
            model.push(v);
        }
        ql.settle();
        assert!(ql.compressed_nodes() >= ql.node_count() - 1);
        assert!(ql.heap_bytes() < model.iter().map(|v| v.len()).sum::<usize>());
        for step in 0..3000 {
            let len = model.len();
            let i = rng.gen_range(0..len.max(1));
            let v = format!("v{step}").into_bytes();
            match rng.gen_range(0..9) {
                0 => {
                    ql.push_front(&v);
                    model.insert(0, v);
                }
                1 => {
                    ql.push_back(&v);
                    model.push(v);
                }
                2 if len > 0 => assert_eq!(ql.pop_front(), Some(model.remove(0))),
                3 if len > 0 => assert_eq!(ql.pop_back(), model.pop()),
                4 if len > 0 => {
                    assert!(ql.set(i, &v));
                    model[i] = v;
                }
                5 if len > 0 => {
                    let after = step % 2 == 0;
                    ql.insert(i, &v, after);
                    model.insert(if after { i + 1 } else { i }, v);
                }
                6 if len > 0 => {
                    let target = model[i].clone();
                    let n = ql.remove_matching(&target, 1, step % 2 == 0);
                    assert_eq!(n, 1);
                    let at = if step % 2 == 0 {
                        model.iter().position(|m| *m == target)
                    } else {
                        model.iter().rposition(|m| *m == target)
                    };
                    model.remove(at.unwrap_or(i));
                }
                7 if len > 0 => assert_eq!(ql.get(i).as_ref(), model.get(i)),
                _ if len > 2 => {
                    ql.trim(1, 1);
                    model.remove(0);
                    model.pop();
                }
                _ => {}
            }
            ql.settle();
            if step % 500 == 0 {
                assert_eq!(values(&ql), model);
                assert!(ql.is_consistent());
            }
        }
        assert_eq!(values(&ql), model);
        assert!(ql.is_consistent());
        assert!(ql.compressed_nodes() > 0);
        // Backwards across compressed nodes, and the RDB form is the plain listpacks.
        let mut back = Vec::new();
        ql.iter_from(ql.len() - 1, false).visit(ql.len(), |_, e| {
            back.push(e.to_vec());
            true
        });
        back.reverse();
        assert_eq!(back, model);
        let plain: Vec<Vec<u8>> = ql.listpacks().map(|lp| lp.to_vec()).collect();
        let again = QuickList::from_listpacks(-2, plain);
        assert_eq!(values(&again), model);
    }
}

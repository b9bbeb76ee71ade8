//! What one key holds, packed tight: a [`Key`] (12 bytes) and an [`Entry`] (12 bytes) make the
//! 24-byte element the dashtable keeps per key in its slab.
//!
//! - Keys up to 11 bytes and string values up to 8 bytes live inline; longer ones take one heap
//!   block each, `[len u32 | bytes]`, with no other header.
//! - An offloaded value is its disk pointer packed in 8 bytes ([`tiering::DiskPtr::pack`]); the
//!   key's length completes it. An offloaded collection keeps its type in the entry's kind
//!   (hash, list, set; a sorted set is the set kind with the [`Entry::RAW`] bit, which only
//!   strings use otherwise), so TYPE and SCAN TYPE need no disk read.
//! - The value's kind, the per-key flags, the access clock and the frequency counter share one
//!   4-byte word.
//! - Expiry is not here: the dashtable keeps it beside the slab, in a column that exists only
//!   for the slab chunks holding keys with a TTL (see `dashtable`), so a key without one pays
//!   nothing for it.
//!
//! Heap blocks are addressed by a plain `usize` so that they fit in packed byte arrays; the
//! provenance of every address is exposed when it is made and taken back when it is used
//! (`expose_provenance` / `with_exposed_provenance`), and each block has exactly one owner (the
//! `Key` or `Entry` holding its address), which frees it on drop.
//!
//! Never: lets a heap block have two owners or outlive its owner.

use bytes::Bytes;

use super::object::{ObjectType, Packed, PackedKind, TypedObject};

const _: () = assert!(
    usize::BITS == 64,
    "packed heap addresses need 64-bit pointers"
);

/// Heap blocks `[len u32 LE | bytes]` for keys and values.
mod block {
    /// Copies `bytes` into a new block and returns its address.
    pub fn alloc(bytes: &[u8]) -> usize {
        alloc_tagged(None, bytes)
    }

    /// A new block holding `tag` (when given) then `bytes`.
    pub fn alloc_tagged(tag: Option<u8>, bytes: &[u8]) -> usize {
        let n = bytes.len() + usize::from(tag.is_some());
        // Strings are capped at 512 MB by the protocol layer and by snapshot loading (longer
        // ones are refused there), and packed collections are small by definition, far below
        // 4 GiB: this cannot fail on anything stored.
        let len = u32::try_from(n).expect("block under 4 GiB");
        let mut v = Vec::with_capacity(4 + n);
        v.extend_from_slice(&len.to_le_bytes());
        v.extend(tag);
        v.extend_from_slice(bytes);
        let raw: *mut [u8] = Box::into_raw(v.into_boxed_slice());
        raw.cast::<u8>().expose_provenance()
    }

    /// The bytes of the block at `addr`.
    ///
    /// # Safety
    /// `addr` came from [`alloc`] and the block has not been freed; the slice must not outlive
    /// the block (callers tie it to the borrow of the owner).
    pub unsafe fn bytes<'a>(addr: usize) -> &'a [u8] {
        let p = std::ptr::with_exposed_provenance::<u8>(addr);
        // SAFETY: the block starts with 4 length bytes written by `alloc` ([u8; 4] has
        // alignment 1), followed by exactly that many bytes, all inside the allocation.
        unsafe {
            let len = u32::from_le_bytes(p.cast::<[u8; 4]>().read()) as usize;
            std::slice::from_raw_parts(p.add(4), len)
        }
    }

    /// Frees the block at `addr`.
    ///
    /// # Safety
    /// As for [`bytes`]; afterwards the address must never be used again.
    pub unsafe fn free(addr: usize) {
        let p = std::ptr::with_exposed_provenance_mut::<u8>(addr);
        // SAFETY: `alloc` made this a boxed slice of 4 + len bytes at `p`; rebuilding the same
        // fat pointer gives the allocator back the layout it handed out.
        unsafe {
            let len = u32::from_le_bytes(p.cast::<[u8; 4]>().read()) as usize;
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                p,
                4 + len,
            )));
        }
    }

    /// Bytes the block takes from the allocator.
    pub fn size(len: usize) -> usize {
        4 + len
    }

    /// Active defrag: moves the block at `addr` when jemalloc says its slab is emptier than
    /// its size class's average. Returns the new address, or None when it stays.
    ///
    /// # Safety
    /// As for [`bytes`], and jemalloc serves the heap ([`crate::memory::jemalloc_heap`]); on
    /// Some the caller stores the new address in place of `addr`, which is freed.
    pub unsafe fn defrag(addr: usize) -> Option<usize> {
        let p = std::ptr::with_exposed_provenance_mut::<u8>(addr);
        // SAFETY: the caller guarantees a live block made by the global allocator, which is
        // jemalloc's; it was allocated as a boxed slice of 4 + len bytes with alignment 1, the
        // size and alignment `move_block` asks for.
        unsafe {
            if !crate::memory::defrag_hint(p) {
                return None;
            }
            let len = u32::from_le_bytes(p.cast::<[u8; 4]>().read()) as usize;
            let new = crate::memory::move_block(p, size(len));
            (!new.is_null()).then(|| new.expose_provenance())
        }
    }
}

/// Bytes held inline when they fit (short keys, small values), else in one exact-size heap
/// block. The owned form commands build values in before they are stored.
#[derive(Clone, PartialEq, Eq)]
pub enum CompactBytes {
    Inline { len: u8, data: [u8; INLINE_CAP] },
    Heap(Box<[u8]>),
}

pub const INLINE_CAP: usize = 22;

impl CompactBytes {
    pub fn new(b: &[u8]) -> CompactBytes {
        if b.len() <= INLINE_CAP {
            let mut data = [0u8; INLINE_CAP];
            data[..b.len()].copy_from_slice(b);
            CompactBytes::Inline {
                len: b.len() as u8,
                data,
            }
        } else {
            CompactBytes::Heap(b.into())
        }
    }

    pub fn from_vec(v: Vec<u8>) -> CompactBytes {
        if v.len() <= INLINE_CAP {
            CompactBytes::new(&v)
        } else {
            CompactBytes::Heap(v.into_boxed_slice())
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            CompactBytes::Inline { len, data } => &data[..*len as usize],
            CompactBytes::Heap(b) => b,
        }
    }

    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for CompactBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// Longest key stored inline.
pub const KEY_INLINE: usize = 11;

/// How a [`Key`] holds its bytes: the inline length, or a heap block. An enum, so that
/// `Option<(Key, Entry)>` needs no extra byte (the values past `Heap` are its niche).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum KeyTag {
    L0,
    L1,
    L2,
    L3,
    L4,
    L5,
    L6,
    L7,
    L8,
    L9,
    L10,
    L11,
    Heap,
}

const KEY_TAGS: [KeyTag; KEY_INLINE + 1] = [
    KeyTag::L0,
    KeyTag::L1,
    KeyTag::L2,
    KeyTag::L3,
    KeyTag::L4,
    KeyTag::L5,
    KeyTag::L6,
    KeyTag::L7,
    KeyTag::L8,
    KeyTag::L9,
    KeyTag::L10,
    KeyTag::L11,
];

/// A key as the table stores it: 12 bytes, up to 11 inline, longer ones in a heap block whose
/// address sits in the last 8 bytes.
pub struct Key {
    tag: KeyTag,
    data: [u8; KEY_INLINE],
}

const _: () = assert!(std::mem::size_of::<Key>() == 12);

impl Key {
    pub fn new(b: &[u8]) -> Key {
        let mut data = [0u8; KEY_INLINE];
        if b.len() <= KEY_INLINE {
            data[..b.len()].copy_from_slice(b);
            Key {
                tag: KEY_TAGS[b.len()],
                data,
            }
        } else {
            data[3..].copy_from_slice(&block::alloc(b).to_le_bytes());
            Key {
                tag: KeyTag::Heap,
                data,
            }
        }
    }

    fn addr(&self) -> usize {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.data[3..]);
        usize::from_le_bytes(a)
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self.tag {
            // SAFETY: a Heap key owns the block at its address until it is dropped, and the
            // slice borrows `self`.
            KeyTag::Heap => unsafe { block::bytes(self.addr()) },
            t => &self.data[..t as usize],
        }
    }

    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned beyond the 12-byte handle.
    pub fn heap_bytes(&self) -> usize {
        match self.tag {
            KeyTag::Heap => block::size(self.len()),
            _ => 0,
        }
    }

    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.tag == KeyTag::Heap {
            // SAFETY: the key owns its block; it is freed once, here.
            unsafe { block::free(self.addr()) }
        }
    }
}

impl Clone for Key {
    fn clone(&self) -> Key {
        Key::new(self.as_bytes())
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A value to store. Strings, inline or on the heap or offloaded; collections as a packed block
/// or a large object (see `shard::object`). Commands check the kind and answer WRONGTYPE.
pub enum Value {
    Str(CompactBytes),
    /// A string value offloaded to the shard's tier file; only its pointer stays in RAM.
    External(tiering::DiskPtr),
    /// A small collection in one packed block.
    Packed(Packed),
    /// A large collection.
    Object(Box<dyn TypedObject>),
    /// A collection offloaded to the tier file as one blob (see `server::offload`): its type,
    /// pointer and encoding (an index into [`offloaded_encodings`]) stay in RAM.
    Offloaded(ObjectType, tiering::DiskPtr, u8),
}

impl Value {
    pub fn str(b: &[u8]) -> Value {
        Value::Str(CompactBytes::new(b))
    }
}

impl Clone for Value {
    /// Strings and packed blocks are copied; a large object is captured (its nodes shared).
    fn clone(&self) -> Value {
        match self {
            Value::Str(s) => Value::Str(s.clone()),
            Value::External(p) => Value::External(*p),
            Value::Packed(p) => Value::Packed(p.clone()),
            Value::Object(o) => Value::Object(o.capture()),
            Value::Offloaded(t, p, n) => Value::Offloaded(*t, *p, *n),
        }
    }
}

impl PartialEq for Value {
    /// Large objects are equal only to themselves.
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::External(a), Value::External(b)) => a == b,
            (Value::Packed(a), Value::Packed(b)) => a == b,
            (Value::Object(a), Value::Object(b)) => std::ptr::addr_eq(&**a, &**b),
            (Value::Offloaded(s, a, m), Value::Offloaded(t, b, n)) => s == t && a == b && m == n,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl std::fmt::Debug for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Str(s) => write!(f, "Str({s:?})"),
            Value::External(p) => write!(f, "External({p:?})"),
            Value::Packed(p) => write!(f, "Packed({:?}, {} bytes)", p.kind, p.bytes.len()),
            Value::Object(o) => write!(f, "Object({o:?})"),
            Value::Offloaded(t, p, n) => write!(f, "Offloaded({t:?}, {p:?}, {n})"),
        }
    }
}

/// A stored value seen through its entry.
#[derive(Clone, Copy)]
pub enum ValueRef<'a> {
    Str(&'a [u8]),
    /// Offloaded: the packed disk pointer ([`Entry::external`] unpacks it with the key).
    External(u64),
    /// A small collection: its kind and packed bytes.
    Packed(PackedKind, &'a [u8]),
    /// A large collection.
    Object(&'a dyn TypedObject),
    /// An offloaded collection: its type and packed disk pointer ([`Entry::external`]; its
    /// encoding taken out, see [`Entry::offloaded_encoding`]).
    Offloaded(ObjectType, u64),
}

impl PartialEq for ValueRef<'_> {
    fn eq(&self, other: &ValueRef<'_>) -> bool {
        match (self, other) {
            (ValueRef::Str(a), ValueRef::Str(b)) => a == b,
            (ValueRef::External(a), ValueRef::External(b)) => a == b,
            (ValueRef::Packed(k, a), ValueRef::Packed(l, b)) => k == l && a == b,
            (ValueRef::Object(a), ValueRef::Object(b)) => std::ptr::addr_eq(*a, *b),
            (ValueRef::Offloaded(s, a), ValueRef::Offloaded(t, b)) => s == t && a == b,
            _ => false,
        }
    }
}

impl Eq for ValueRef<'_> {}

impl std::fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueRef::Str(s) => write!(f, "Str({:?})", String::from_utf8_lossy(s)),
            ValueRef::External(p) => write!(f, "External({p:#x})"),
            ValueRef::Packed(k, b) => write!(f, "Packed({k:?}, {} bytes)", b.len()),
            ValueRef::Object(o) => write!(f, "Object({o:?})"),
            ValueRef::Offloaded(t, p) => write!(f, "Offloaded({t:?}, {p:#x})"),
        }
    }
}

/// The encodings a collection of type `t` can have when it is offloaded: an offloaded entry
/// keeps the index of its own in two bits.
pub fn offloaded_encodings(t: ObjectType) -> &'static [&'static str] {
    match t {
        ObjectType::Hash => &["listpack", "hashtable", "listpackex"],
        ObjectType::List => &["quicklist"],
        ObjectType::Set => &["intset", "listpack", "hashtable"],
        ObjectType::ZSet => &["listpack", "skiplist"],
    }
}

/// The index of encoding `name` among [`offloaded_encodings`] of `t` (0 when not there).
pub fn offloaded_encoding_index(t: ObjectType, name: &str) -> u8 {
    offloaded_encodings(t)
        .iter()
        .position(|n| *n == name)
        .unwrap_or(0) as u8
}

/// The type of a string value (TYPE, SCAN TYPE).
pub const STRING_TYPE: &str = "string";

/// The largest expiry (ms since the epoch) a key can have: what Redis reports for
/// PEXPIREAT's largest argument.
pub const MAX_EXPIRE_MS: u64 = i64::MAX as u64;
/// Longest string value stored inline.
const VALUE_INLINE: usize = 8;

/// Bits of the access clock (seconds, wrapping: 2^18 s is about 73 hours; the shard's ageing
/// pass keeps idle times from wrapping, see `Shard::age_step`).
pub const CLOCK_BITS: u32 = 18;
pub const CLOCK_MASK: u32 = (1 << CLOCK_BITS) - 1;
/// The longest idle time an entry reports (half the clock's range): the ageing pass holds
/// longer ones there.
pub const MAX_IDLE: u32 = 1 << (CLOCK_BITS - 1);
const FREQ_SHIFT: u32 = CLOCK_BITS;
/// 4 bits: 0..=8 an inline string of that length, then heap, external, packed, object,
/// offloaded collections.
const KIND_SHIFT: u32 = 26;
const KIND_HEAP: u32 = 9;
const KIND_EXTERNAL: u32 = 10;
/// A heap block `[len u32 | kind byte | packed bytes]`.
const KIND_PACKED: u32 = 11;
/// The address of a `Box<dyn TypedObject>` on the heap (a thin pointer to the fat one).
const KIND_OBJECT: u32 = 12;
/// An offloaded hash, list, or set (a sorted set: the set kind with [`Entry::RAW`]); the value
/// bytes are the packed disk pointer, as for [`KIND_EXTERNAL`].
const KIND_OFF_HASH: u32 = 13;
const KIND_OFF_LIST: u32 = 14;
const KIND_OFF_SET: u32 = 15;
const FLAGS_SHIFT: u32 = 30;

/// One key's payload: value, flags, and access metadata for OBJECT IDLETIME/FREQ and eviction.
/// 12 bytes, 4-aligned, so that with its [`Key`] it makes 24.
pub struct Entry {
    /// Inline bytes, a heap block's address or a packed disk pointer, by kind.
    val: [u8; 8],
    /// Bits 0..18: last access in seconds (wrapping clock); 18..26: frequency counter; 26..30:
    /// kind (inline length, heap, external); 30..32: flags.
    pub meta: u32,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 12);
const _: () = assert!(std::mem::size_of::<Option<(Key, Entry)>>() == 24);

impl Entry {
    /// The string was edited in place (APPEND, SETRANGE): OBJECT ENCODING says "raw", as Redis
    /// does for a string it grew in place.
    pub const RAW: u8 = 1;
    /// Accessed since the offloader last looked (CLOCK's second-chance bit).
    pub const REFERENCED: u8 = 2;

    pub fn new(value: Value, clock: u32) -> Entry {
        let mut e = Entry {
            val: [0; 8],
            meta: (clock & CLOCK_MASK) | (LFU_INIT << FREQ_SHIFT),
        };
        e.put(value);
        e
    }

    #[inline]
    fn kind(&self) -> u32 {
        (self.meta >> KIND_SHIFT) & 0xf
    }

    #[inline]
    fn set_kind(&mut self, kind: u32) {
        self.meta = (self.meta & !(0xf << KIND_SHIFT)) | (kind << KIND_SHIFT);
    }

    fn addr(&self) -> usize {
        u64::from_le_bytes(self.val) as usize
    }

    /// Writes `value` into a slot holding nothing that needs freeing.
    fn put(&mut self, value: Value) {
        let (kind, val) = match value {
            Value::Str(s) => {
                let b = s.as_bytes();
                if b.len() <= VALUE_INLINE {
                    let mut v = [0u8; 8];
                    v[..b.len()].copy_from_slice(b);
                    (b.len() as u32, v)
                } else {
                    (KIND_HEAP, (block::alloc(b) as u64).to_le_bytes())
                }
            }
            Value::External(p) => (KIND_EXTERNAL, p.pack().to_le_bytes()),
            Value::Offloaded(t, p, n) => {
                let kind = match t {
                    ObjectType::Hash => KIND_OFF_HASH,
                    ObjectType::List => KIND_OFF_LIST,
                    ObjectType::Set | ObjectType::ZSet => KIND_OFF_SET,
                };
                if t == ObjectType::ZSet {
                    self.add_flags(Entry::RAW);
                } else {
                    self.clear_flags(Entry::RAW);
                }
                // Callers store only pointers with room for it (`Shard::set_offloaded`).
                let bits = p.pack_tagged(n);
                debug_assert!(bits.is_some(), "no room for the encoding beside {p:?}");
                (kind, bits.unwrap_or_else(|| p.pack()).to_le_bytes())
            }
            Value::Packed(p) => {
                let addr = block::alloc_tagged(Some(p.kind.to_byte()), &p.bytes);
                (KIND_PACKED, (addr as u64).to_le_bytes())
            }
            Value::Object(o) => {
                let raw: *mut Box<dyn TypedObject> = Box::into_raw(Box::new(o));
                (KIND_OBJECT, (raw.expose_provenance() as u64).to_le_bytes())
            }
        };
        self.val = val;
        self.set_kind(kind);
    }

    /// The object an object-kind entry owns.
    ///
    /// # Safety
    /// The entry's kind is [`KIND_OBJECT`]; the reference must not outlive the entry's borrow.
    unsafe fn object_ptr(&self) -> *mut Box<dyn TypedObject> {
        std::ptr::with_exposed_provenance_mut::<Box<dyn TypedObject>>(self.addr())
    }

    /// Frees what the value owns and leaves an empty inline string.
    fn clear_value(&mut self) {
        match self.kind() {
            // SAFETY: a heap- or packed-kind entry owns the block at its address; the kind is
            // reset below, so it is freed once.
            KIND_HEAP | KIND_PACKED => unsafe { block::free(self.addr()) },
            KIND_OBJECT => {
                // SAFETY: an object-kind entry owns the box at its address (made by `put` with
                // Box::into_raw); the kind is reset below, so it is dropped once.
                let outer = unsafe { Box::from_raw(self.object_ptr()) };
                super::lazyfree::free(*outer);
            }
            // The RAW bit told a sorted set from a set; the next value starts without it.
            KIND_OFF_HASH..=KIND_OFF_SET => self.clear_flags(Entry::RAW),
            _ => {}
        }
        self.val = [0; 8];
        self.set_kind(0);
    }

    /// Replaces the value (the old one's heap block is freed; a disk pointer is the caller's
    /// to free).
    pub fn set_value(&mut self, value: Value) {
        self.clear_value();
        self.put(value);
    }

    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        match self.kind() {
            KIND_HEAP => {
                // SAFETY: a heap-kind entry owns the block at its address while it keeps that
                // kind; the slice borrows `self`.
                ValueRef::Str(unsafe { block::bytes(self.addr()) })
            }
            KIND_EXTERNAL => ValueRef::External(u64::from_le_bytes(self.val)),
            KIND_OFF_HASH => ValueRef::Offloaded(ObjectType::Hash, self.offloaded_bits().0),
            KIND_OFF_LIST => ValueRef::Offloaded(ObjectType::List, self.offloaded_bits().0),
            KIND_OFF_SET if self.has(Entry::RAW) => {
                ValueRef::Offloaded(ObjectType::ZSet, self.offloaded_bits().0)
            }
            KIND_OFF_SET => ValueRef::Offloaded(ObjectType::Set, self.offloaded_bits().0),
            KIND_PACKED => {
                // SAFETY: a packed-kind entry owns the block at its address while it keeps that
                // kind; `put` wrote the kind byte first, so the block is never empty.
                let b = unsafe { block::bytes(self.addr()) };
                match b
                    .split_first()
                    .and_then(|(k, rest)| Some((PackedKind::from_byte(*k)?, rest)))
                {
                    Some((kind, bytes)) => ValueRef::Packed(kind, bytes),
                    // `put` only writes kinds that read back.
                    None => ValueRef::Str(&[]),
                }
            }
            // SAFETY: an object-kind entry owns the box at its address while it keeps that
            // kind; the reference borrows `self`.
            KIND_OBJECT => ValueRef::Object(unsafe { &**self.object_ptr() }),
            n => ValueRef::Str(&self.val[..(n as usize).min(VALUE_INLINE)]),
        }
    }

    /// Active defrag of the value's heap block (a long string or a packed collection): Some(true)
    /// when it moved to a fuller slab, Some(false) when it was looked at and stays, None when
    /// the value has no such block. The bytes, and so everything a reader sees, stay the same.
    pub fn defrag(&mut self) -> Option<bool> {
        if !matches!(self.kind(), KIND_HEAP | KIND_PACKED) || !crate::memory::jemalloc_heap() {
            return None;
        }
        // SAFETY: a heap- or packed-kind entry owns the live block at its address (made by
        // `block::alloc*` through the global allocator, jemalloc's as just checked); `&mut self`
        // means no borrow of the old bytes is alive, and the new address replaces the old one
        // before anything else can read it.
        let moved = unsafe { block::defrag(self.addr()) };
        if let Some(addr) = moved {
            self.val = (addr as u64).to_le_bytes();
        }
        Some(moved.is_some())
    }

    /// The large object, for changing it in place.
    pub fn object_mut(&mut self) -> Option<&mut dyn TypedObject> {
        if self.kind() != KIND_OBJECT {
            return None;
        }
        // SAFETY: an object-kind entry owns the box at its address; the reference borrows
        // `self` mutably, so nothing else reaches the object meanwhile.
        Some(unsafe { &mut **self.object_ptr() })
    }

    /// The string bytes when the value is in RAM.
    #[inline]
    pub fn str(&self) -> Option<&[u8]> {
        match self.value() {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }

    /// True when the value (a string or a collection) is in the tier file.
    pub fn is_external(&self) -> bool {
        matches!(
            self.kind(),
            KIND_EXTERNAL | KIND_OFF_HASH | KIND_OFF_LIST | KIND_OFF_SET
        )
    }

    /// The type of an offloaded collection; None for anything else.
    pub fn offloaded_type(&self) -> Option<ObjectType> {
        match self.value() {
            ValueRef::Offloaded(t, _) => Some(t),
            _ => None,
        }
    }

    /// An offloaded collection's packed pointer and encoding (see [`Entry::put`]).
    #[inline]
    fn offloaded_bits(&self) -> (u64, u8) {
        tiering::DiskPtr::split_tagged(u64::from_le_bytes(self.val))
    }

    /// The encoding an offloaded collection had in RAM (an index into
    /// [`offloaded_encodings`]); None for anything else.
    pub fn offloaded_encoding(&self) -> Option<u8> {
        self.offloaded_type().map(|_| self.offloaded_bits().1)
    }

    /// The disk pointer of an offloaded value (string or collection), given its key's length.
    pub fn external(&self, key_len: usize) -> Option<tiering::DiskPtr> {
        match self.value() {
            ValueRef::External(bits) | ValueRef::Offloaded(_, bits) => {
                Some(tiering::DiskPtr::unpack(bits, key_len))
            }
            _ => None,
        }
    }

    /// A string value's length without reading it (STRLEN); a packed block's byte length; 0
    /// for a large object; an offloaded collection's blob length.
    pub fn value_len(&self) -> usize {
        match self.value() {
            ValueRef::Str(s) => s.len(),
            ValueRef::External(bits) | ValueRef::Offloaded(_, bits) => {
                tiering::DiskPtr::unpack(bits, 0).len as usize
            }
            ValueRef::Packed(_, b) => b.len(),
            ValueRef::Object(_) => 0,
        }
    }

    /// The value as an owned [`Value`] (COPY; a large object is captured, not copied).
    pub fn to_value(&self, key_len: usize) -> Value {
        match self.value() {
            ValueRef::Str(s) => Value::str(s),
            ValueRef::External(bits) => Value::External(tiering::DiskPtr::unpack(bits, key_len)),
            ValueRef::Packed(kind, b) => Value::Packed(Packed {
                kind,
                bytes: b.into(),
            }),
            ValueRef::Object(o) => Value::Object(o.capture()),
            ValueRef::Offloaded(t, bits) => Value::Offloaded(
                t,
                tiering::DiskPtr::unpack(bits, key_len),
                self.offloaded_bits().1,
            ),
        }
    }

    /// The collection type (in RAM or offloaded), None for a string.
    pub fn object_type(&self) -> Option<ObjectType> {
        match self.value() {
            ValueRef::Packed(k, _) => Some(k.ty),
            ValueRef::Object(o) => Some(o.object_type()),
            ValueRef::Offloaded(t, _) => Some(t),
            ValueRef::Str(_) | ValueRef::External(_) => None,
        }
    }

    /// Name reported by TYPE.
    pub fn type_name(&self) -> &'static str {
        self.object_type().map_or(STRING_TYPE, ObjectType::name)
    }

    /// For a collection in RAM, writes its RDB encoding (DUMP, RDB export, snapshot records)
    /// and returns its RDB type; None for a string, which the string codecs write, and for an
    /// offloaded collection, whose blob already holds it.
    pub fn encode_rdb(&self, out: &mut Vec<u8>) -> Option<u8> {
        match self.value() {
            ValueRef::Packed(kind, bytes) => Some(kind.encode_rdb(bytes, out)),
            ValueRef::Object(o) => Some(o.encode_rdb(out)),
            ValueRef::Str(_) | ValueRef::External(_) | ValueRef::Offloaded(..) => None,
        }
    }

    /// What OBJECT ENCODING reports. Strings as Redis would encode them (an offloaded value is
    /// at least 64 bytes and not an integer: "raw").
    pub fn encoding(&self) -> &'static str {
        match self.value() {
            ValueRef::Str(_) if self.has(Entry::RAW) => "raw",
            ValueRef::Str(s) => string_encoding(s),
            ValueRef::External(_) => "raw",
            ValueRef::Packed(k, _) => k.encoding_name(),
            ValueRef::Object(o) => o.encoding(),
            // What it said in RAM, kept beside its pointer: OBJECT ENCODING reads no disk.
            ValueRef::Offloaded(t, _) => {
                let names = offloaded_encodings(t);
                names[(self.offloaded_bits().1 as usize).min(names.len() - 1)]
            }
        }
    }

    pub fn flags(&self) -> u8 {
        (self.meta >> FLAGS_SHIFT) as u8
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags() & flag != 0
    }

    pub fn add_flags(&mut self, flags: u8) {
        self.meta |= u32::from(flags & 3) << FLAGS_SHIFT;
    }

    pub fn clear_flags(&mut self, flags: u8) {
        self.meta &= !(u32::from(flags & 3) << FLAGS_SHIFT);
    }

    /// Starts loading the first lines (up to 256 bytes) of a heap value into the cache (no
    /// wait).
    #[inline]
    pub fn prefetch(&self) {
        if let (KIND_HEAP, ValueRef::Str(s)) = (self.kind(), self.value()) {
            let start = s.as_ptr().wrapping_sub(4);
            let end = 4 + s.len().min(256);
            let mut off = 0;
            while off < end {
                super::dashtable::prefetch(start.wrapping_add(off));
                off += 64;
            }
        }
    }

    /// Heap bytes the value owns beyond the entry (what maxmemory, eviction, MEMORY USAGE and
    /// a snapshot's backlog count).
    pub fn heap_bytes(&self) -> usize {
        match self.value() {
            ValueRef::Str(s) if self.kind() == KIND_HEAP => block::size(s.len()),
            ValueRef::Packed(_, b) => block::size(1 + b.len()),
            // The box holding the object's fat pointer, then the object.
            ValueRef::Object(o) => 16 + o.heap_bytes(),
            _ => 0,
        }
    }

    /// Records an access: refresh the clock and bump the frequency counter. The first
    /// [`LFU_LINEAR`] hits count one each; after them it is Redis' LFU log counter (factor 10:
    /// the more hits, the less likely another increment). An SSD tier's reclaim tells keys
    /// read twice from keys read four times (`server::offload`), which a log counter cannot.
    pub fn touch(&mut self, clock: u32, rand: u32) {
        let mut freq = self.freq();
        if freq < 255 {
            let base = freq.saturating_sub(LFU_INIT);
            let step = match base.checked_sub(LFU_LINEAR) {
                None => true,
                // p = 1 / ((hits past the linear part + 1) * 10 + 1)
                Some(over) => (rand as u64).is_multiple_of((over as u64 + 1) * 10 + 1),
            };
            if step {
                freq += 1;
            }
        }
        self.set_freq(freq);
        self.set_clock(clock);
    }

    /// Seconds since the last access, given the shard's clock.
    pub fn idle_seconds(&self, clock: u32) -> u32 {
        clock.wrapping_sub(self.meta) & CLOCK_MASK
    }

    /// Sets the access clock (seconds, wrapping at [`CLOCK_BITS`]).
    pub fn set_clock(&mut self, clock: u32) {
        self.meta = (self.meta & !CLOCK_MASK) | (clock & CLOCK_MASK);
    }

    pub fn freq(&self) -> u32 {
        (self.meta >> FREQ_SHIFT) & 0xff
    }

    /// Sets the frequency counter (at most 255), keeping the rest.
    pub fn set_freq(&mut self, freq: u32) {
        self.meta = (self.meta & !(0xff << FREQ_SHIFT)) | (freq.min(255) << FREQ_SHIFT);
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.clear_value();
    }
}

impl Clone for Entry {
    /// What a snapshot keeps of an entry about to change, and what COPY stores: strings and
    /// packed blocks are copied, a large object is captured (its nodes shared, see
    /// [`TypedObject::capture`]).
    fn clone(&self) -> Entry {
        let mut e = Entry {
            val: self.val,
            meta: self.meta,
        };
        match self.value() {
            // The copy gets its own block.
            ValueRef::Str(s) if self.kind() == KIND_HEAP => {
                e.val = (block::alloc(s) as u64).to_le_bytes();
            }
            ValueRef::Packed(..) | ValueRef::Object(_) => {
                e.val = [0; 8];
                e.set_kind(0);
                e.put(self.to_value(0));
            }
            _ => {}
        }
        e
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.value() == other.value() && self.meta == other.meta
    }
}

impl Eq for Entry {}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("value", &self.value())
            .field("flags", &self.flags())
            .field("meta", &self.meta)
            .finish()
    }
}

/// What OBJECT ENCODING says for a string, as Redis would encode it.
pub fn string_encoding(v: &[u8]) -> &'static str {
    if v.len() <= 20 && crate::protocol::string2ll(v).is_some() {
        "int"
    } else if v.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// The frequency counter of a new entry ([`Entry::freq`]).
pub const LFU_INIT: u32 = 5;
/// Hits counted one by one before the counter turns logarithmic.
const LFU_LINEAR: u32 = 8;

impl crate::shard::dashtable::Weigh for Entry {
    /// What a snapshot's copy of the entry holds of its own: a large object's capture shares
    /// its nodes, so only its node pointers count (a node a later write copies is that
    /// write's allocation).
    fn weight(&self) -> usize {
        match self.value() {
            ValueRef::Object(o) => 16 + o.capture_bytes(),
            _ => self.heap_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_inline_and_heap() {
        for len in [0usize, 1, 10, 11, 12, 40, 70_000] {
            let b: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let k = Key::new(&b);
            assert_eq!(k.as_bytes(), &b[..]);
            assert_eq!(k.heap_bytes() > 0, len > KEY_INLINE);
            let c = k.clone();
            drop(k);
            assert_eq!(c.as_bytes(), &b[..]);
        }
    }

    #[test]
    fn values_inline_heap_and_external() {
        for len in [0usize, 1, 8, 9, 100, 5000] {
            let b: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut e = Entry::new(Value::str(&b), 3);
            e.add_flags(Entry::RAW);
            assert_eq!(e.str(), Some(&b[..]));
            assert_eq!(e.value_len(), len);
            assert_eq!(e.heap_bytes() > 0, len > VALUE_INLINE);
            let c = e.clone();
            e.set_value(Value::str(b"x"));
            assert_eq!(c.str(), Some(&b[..]));
            assert_eq!(e.str(), Some(&b"x"[..]));
            // The value's kind shares the word with the flags and the counters: untouched.
            assert!(e.has(Entry::RAW) && c.has(Entry::RAW));
            assert_eq!((e.freq(), e.idle_seconds(3)), (LFU_INIT, 0));
        }
        let p = tiering::DiskPtr {
            page: 77,
            len: 1000,
            key_len: 5,
            offset: 16,
            packed: 0,
        };
        let mut e = Entry::new(Value::External(p), 0);
        assert!(e.is_external());
        assert_eq!(e.external(5), Some(p));
        assert_eq!(e.value_len(), 1000);
        assert_eq!(e.str(), None);
        e.add_flags(Entry::RAW | Entry::REFERENCED);
        e.clear_flags(Entry::REFERENCED);
        assert!(e.has(Entry::RAW) && !e.has(Entry::REFERENCED));
        assert_eq!(e.external(5), Some(p));
        e.set_freq(300);
        e.set_clock(CLOCK_MASK);
        assert_eq!(e.freq(), 255);
        assert!(e.has(Entry::RAW));
        assert_eq!(e.external(5), Some(p));
    }

    #[test]
    fn offloaded_collections_keep_their_type_and_pointer() {
        let p = tiering::DiskPtr {
            page: 9,
            len: 700,
            key_len: 3,
            offset: 0,
            packed: 0,
        };
        for t in [
            ObjectType::Hash,
            ObjectType::List,
            ObjectType::Set,
            ObjectType::ZSet,
        ] {
            let mut e = Entry::new(Value::Offloaded(t, p, 0), 4);
            e.add_flags(Entry::REFERENCED);
            assert!(e.is_external());
            assert_eq!(e.offloaded_type(), Some(t));
            assert_eq!(e.object_type(), Some(t));
            assert_eq!(e.type_name(), t.name());
            assert_eq!(e.external(3), Some(p));
            assert_eq!(e.heap_bytes(), 0);
            assert_eq!(e.encode_rdb(&mut Vec::new()), None);
            // Clones and re-pointing (compaction) keep the type.
            let c = e.clone();
            assert_eq!(c.offloaded_type(), Some(t));
            assert!(c.has(Entry::REFERENCED));
            // Its encoding sits beside the pointer, which reads back unchanged.
            for (n, name) in offloaded_encodings(t).iter().enumerate() {
                let mut o = Entry::new(Value::Offloaded(t, p, n as u8), 4);
                assert_eq!(o.encoding(), *name);
                assert_eq!(o.offloaded_encoding(), Some(n as u8));
                assert_eq!(offloaded_encoding_index(t, name), n as u8);
                assert_eq!((o.external(3), o.offloaded_type()), (Some(p), Some(t)));
                assert_eq!(o.value_len(), 700);
                assert_eq!(o.clone().encoding(), *name);
                let small = tiering::DiskPtr { offset: 16, ..p };
                o.set_value(Value::Offloaded(t, small, n as u8));
                assert_eq!((o.encoding(), o.external(3)), (*name, Some(small)));
            }
            // A string stored over it starts without the sorted-set bit.
            e.set_value(Value::str(b"a string of some length"));
            assert!(!e.has(Entry::RAW), "{t:?}");
            assert_eq!(e.offloaded_type(), None);
            assert!(!e.is_external());
            assert!(e.has(Entry::REFERENCED));
        }
    }

    #[test]
    fn idle_time_and_counter() {
        let mut e = Entry::new(Value::str(b"v"), 10);
        assert_eq!(e.idle_seconds(15), 5);
        assert_eq!(e.freq(), LFU_INIT);
        // The clock wraps: idle time is taken modulo its range.
        e.set_clock(CLOCK_MASK - 1);
        assert_eq!(e.idle_seconds(3), 5);
        assert_eq!(e.freq(), LFU_INIT);
    }

    #[test]
    fn the_first_hits_count_one_each_then_the_counter_turns_logarithmic() {
        let mut e = Entry::new(Value::str(b"v"), 10);
        // A random draw that would refuse a logarithmic step: only the linear part moves.
        for i in 1..=LFU_LINEAR {
            e.touch(20, 1);
            assert_eq!(e.freq(), LFU_INIT + i);
            assert_eq!(e.idle_seconds(20), 0);
        }
        e.touch(21, 1);
        assert_eq!(e.freq(), LFU_INIT + LFU_LINEAR);
        // A draw divisible by every step's odds always steps: 1 in 11, then 1 in 21.
        e.touch(22, 0);
        assert_eq!(e.freq(), LFU_INIT + LFU_LINEAR + 1);
        e.touch(22, 11);
        assert_eq!(e.freq(), LFU_INIT + LFU_LINEAR + 1);
        e.touch(22, 21);
        assert_eq!(e.freq(), LFU_INIT + LFU_LINEAR + 2);
        for _ in 0..1000 {
            e.touch(23, 0);
        }
        assert_eq!(e.freq(), 255);
    }
}

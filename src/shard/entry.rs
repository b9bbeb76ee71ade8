//! What one key holds: a compact byte string for keys and string values (short ones inline, no
//! heap block), the value, the absolute expiry time and access metadata, all in one slot.

use bytes::Bytes;

/// Bytes stored inline when they fit in 22 bytes, else in one exact-size heap block.
/// 24 bytes either way; inline strings cost no allocation and no heap header.
#[derive(Clone, PartialEq, Eq)]
pub enum CompactBytes {
    Inline { len: u8, data: [u8; INLINE_CAP] },
    Heap(Box<[u8]>),
}

pub const INLINE_CAP: usize = 22;

const _: () = assert!(std::mem::size_of::<CompactBytes>() == 24);

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

    /// Heap bytes owned beyond the 24-byte handle.
    pub fn heap_bytes(&self) -> usize {
        match self {
            CompactBytes::Inline { .. } => 0,
            CompactBytes::Heap(b) => b.len(),
        }
    }

    /// Starts loading the first lines of a heap string into the cache (no wait).
    #[inline]
    pub fn prefetch(&self) {
        if let CompactBytes::Heap(b) = self {
            for line in b.chunks(64).take(4) {
                super::dashtable::prefetch(line);
            }
        }
    }

    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
}

impl std::fmt::Debug for CompactBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A key's value. Later data types (lists, hashes, sets, ...) add variants here and snapshot
/// record kinds in `ondisk/`; every command checks the variant and answers WRONGTYPE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(CompactBytes),
    /// A string value offloaded to the shard's tier file; only its pointer stays in RAM.
    External(tiering::DiskPtr),
}

impl Value {
    pub fn str(b: &[u8]) -> Value {
        Value::Str(CompactBytes::new(b))
    }

    /// Name reported by TYPE.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::External(_) => "string",
        }
    }

    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Str(b) => b.heap_bytes(),
            Value::External(_) => 0,
        }
    }

    /// The disk pointer of an offloaded value.
    pub fn external(&self) -> Option<tiering::DiskPtr> {
        match self {
            Value::External(p) => Some(*p),
            _ => None,
        }
    }
}

/// One key's slot payload: value, absolute expiry (ms since the epoch, 0 = none) and access
/// metadata for OBJECT IDLETIME/FREQ and eviction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub value: Value,
    pub expire_at: u64,
    /// Bits 0..24: last access in seconds (wrapping clock); bits 24..32: logarithmic frequency.
    pub meta: u32,
    /// [`Entry::RAW`] and later per-key flags (fits in the slot's padding).
    pub flags: u8,
}

impl Entry {
    /// The string was edited in place (APPEND, SETRANGE): OBJECT ENCODING says "raw", as Redis
    /// does for a string it grew in place.
    pub const RAW: u8 = 1;
    /// Accessed since the offloader last looked (CLOCK's second-chance bit).
    pub const REFERENCED: u8 = 2;

    pub fn new(value: Value, expire_at: u64, clock: u32) -> Entry {
        Entry {
            value,
            expire_at,
            meta: (clock & 0xff_ffff) | (LFU_INIT << 24),
            flags: 0,
        }
    }

    #[inline]
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// Records an access: refresh the clock and bump the frequency counter (Redis' LFU log
    /// counter, factor 10: the more hits, the less likely another increment).
    pub fn touch(&mut self, clock: u32, rand: u32) {
        let mut freq = self.meta >> 24;
        if freq < 255 {
            let base = freq.saturating_sub(LFU_INIT) as u64;
            // p = 1 / (base * 10 + 1)
            if (rand as u64).is_multiple_of(base * 10 + 1) {
                freq += 1;
            }
        }
        self.meta = (clock & 0xff_ffff) | (freq << 24);
    }

    pub fn idle_seconds(&self, clock: u32) -> u32 {
        clock.wrapping_sub(self.meta & 0xff_ffff) & 0xff_ffff
    }

    pub fn freq(&self) -> u32 {
        self.meta >> 24
    }
}

const LFU_INIT: u32 = 5;

impl crate::shard::dashtable::Weigh for Entry {
    fn weight(&self) -> usize {
        self.value.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_bytes_inline_and_heap() {
        let a = CompactBytes::new(b"short");
        assert_eq!(a.as_bytes(), b"short");
        assert_eq!(a.heap_bytes(), 0);
        let long = vec![7u8; 100];
        let b = CompactBytes::new(&long);
        assert_eq!(b.as_bytes(), &long[..]);
        assert_eq!(b.heap_bytes(), 100);
        let c = CompactBytes::new(&[1u8; INLINE_CAP]);
        assert_eq!(c.heap_bytes(), 0);
        assert!(CompactBytes::new(b"").is_empty());
    }

    #[test]
    fn expiry_and_idle() {
        let e = Entry::new(Value::str(b"v"), 1000, 10);
        assert!(!e.is_expired(999));
        assert!(e.is_expired(1000));
        assert_eq!(e.idle_seconds(15), 5);
        assert_eq!(e.freq(), LFU_INIT);
    }
}

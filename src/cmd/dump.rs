//! DUMP and RESTORE: Redis' DUMP payload format for string values.
//!
//! A payload is one RDB object (type byte, then the RDB string encoding of the value), the
//! 2-byte RDB version and a CRC64 ('jones', as Redis uses) of everything before it, so payloads
//! move between Strata and Redis 7 in both directions. Payloads come straight from clients:
//! decoding must never panic, never trust a length before checking it against the bytes at
//! hand, and never allocate more than the input can justify.

use bytes::Bytes;

use super::args::{err, int_arg, is, parse_i64, ERR_SYNTAX};
use super::Ctx;
use crate::protocol::Reply;
use crate::shard::entry::MAX_IDLE;
use crate::shard::{CompactBytes, Entry, Value};

/// Redis 7.2's RDB version; payloads from newer versions are refused, as Redis does.
const RDB_VERSION: u16 = 11;
const RDB_TYPE_STRING: u8 = 0;

/// Top two bits of a length byte: 6-bit, 14-bit, 32/64-bit, or a special string encoding.
const LEN_6BIT: u8 = 0;
const LEN_14BIT: u8 = 1;
const LEN_32BIT: u8 = 0x80;
const LEN_64BIT: u8 = 0x81;
const LEN_ENCVAL: u8 = 3;

const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

/// Version byte pair plus CRC64.
const FOOTER_LEN: usize = 10;

/// Longest output one LZF input byte can produce: a 3-byte back-reference copies 264 bytes.
const LZF_MAX_RATIO: usize = 88;

const ERR_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
const ERR_BAD_FORMAT: &str = "ERR Bad data format";
const ERR_BUSYKEY: &str = "BUSYKEY Target key name already exists.";
const ERR_TTL: &str = "ERR Invalid TTL value, must be >= 0";
const ERR_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
const ERR_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";

static CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// DUMP key
pub fn dump(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() != 2 {
        return super::wrong_args("dump");
    }
    // A read like GET: counts a hit or miss and refreshes the access time, as Redis does.
    let Some(entry) = ctx.shard.lookup(ctx.db, &args[1], ctx.now) else {
        return Reply::Nil;
    };
    let payload = match super::string::as_str(entry) {
        Ok(s) => encode_string_payload(s),
        Err(e) => return e,
    };
    Reply::Bulk(Bytes::from(payload))
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
pub fn restore(ctx: &mut Ctx, args: &[Bytes]) -> Reply {
    if args.len() < 4 {
        return super::wrong_args("restore");
    }
    let key = &args[1];
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let opt = &args[j];
        let has_value = j + 1 < args.len();
        if is(opt, "replace") {
            replace = true;
        } else if is(opt, "absttl") {
            absttl = true;
        } else if is(opt, "idletime") && has_value && freq.is_none() {
            // IDLETIME and FREQ exclude each other; the second one falls through to a syntax
            // error, as in Redis.
            let v = match int_arg(&args[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if v < 0 {
                return err(ERR_IDLETIME);
            }
            idle = Some(v);
            j += 1;
        } else if is(opt, "freq") && has_value && idle.is_none() {
            let v = match int_arg(&args[j + 1]) {
                Ok(v) => v,
                Err(e) => return e,
            };
            if !(0..=255).contains(&v) {
                return err(ERR_FREQ);
            }
            freq = Some(v);
            j += 1;
        } else {
            return err(ERR_SYNTAX);
        }
        j += 1;
    }

    // Redis' order of checks: options, existing key, TTL, then the payload.
    if !replace && ctx.shard.contains(ctx.db, key, ctx.now) {
        return err(ERR_BUSYKEY);
    }
    let ttl = match int_arg(&args[2]) {
        Ok(t) => t,
        Err(e) => return e,
    };
    if ttl < 0 {
        return err(ERR_TTL);
    }
    let value = match decode_string_payload(&args[3]) {
        Ok(v) => v,
        Err(e) => return err(e),
    };

    if replace {
        ctx.shard.remove(ctx.db, key);
    }
    let expire_at = match (ttl as u64, absttl) {
        (0, _) => 0,
        (t, true) => t,
        (t, false) => ctx.now.saturating_add(t),
    };
    if expire_at != 0 && expire_at <= ctx.now {
        // Already expired: Redis drops the key (the old one too, under REPLACE) and says OK.
        return Reply::Ok;
    }

    let clock = ctx.shard.clock();
    let mut entry = Entry::new(Value::Str(CompactBytes::from_vec(value)), clock);
    if let Some(idle) = idle {
        // The clock wraps; longer idle times saturate at the ageing pass's ceiling instead of
        // wrapping to "fresh" (see `Shard::age_step`).
        let idle = idle.min(MAX_IDLE.into()) as u32;
        entry.set_clock(clock.wrapping_sub(idle));
    }
    if let Some(f) = freq {
        entry.set_freq(f as u32);
    }
    ctx.shard.store_entry(ctx.db, key, entry, expire_at);
    Reply::Ok
}

/// The DUMP payload of a string value, byte for byte what Redis 7.2 produces for values it
/// would not LZF-compress (Redis compresses only strings over 20 bytes that shrink).
pub fn encode_string_payload(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 1 + 9 + FOOTER_LEN);
    out.push(RDB_TYPE_STRING);
    write_string(&mut out, value);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The string value inside a DUMP payload, or the Redis error text for RESTORE.
pub fn decode_string_payload(payload: &[u8]) -> Result<Vec<u8>, &'static str> {
    let Some(body_len) = payload.len().checked_sub(FOOTER_LEN) else {
        return Err(ERR_PAYLOAD);
    };
    let (body, footer) = payload.split_at(body_len);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION {
        return Err(ERR_PAYLOAD);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    if CRC64.checksum(&payload[..body_len + 2]) != u64::from_le_bytes(crc) {
        return Err(ERR_PAYLOAD);
    }

    let mut r = Reader { buf: body, pos: 0 };
    if r.byte() != Some(RDB_TYPE_STRING) {
        return Err(ERR_BAD_FORMAT);
    }
    match read_string(&mut r) {
        // The object must fill the body exactly; anything left over means a corrupt payload.
        Some(v) if r.pos == body.len() => Ok(v),
        _ => Err(ERR_BAD_FORMAT),
    }
}

/// RDB string encoding: small canonical integers as INT8/16/32, everything else raw with a
/// length prefix.
fn write_string(out: &mut Vec<u8>, value: &[u8]) {
    // 11 bytes is the longest decimal i32 ("-2147483648"); Redis only tries up to there.
    if value.len() <= 11 {
        if let Some(n) = parse_i64(value) {
            if let Ok(n) = i8::try_from(n) {
                out.push(LEN_ENCVAL << 6 | ENC_INT8);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
            if let Ok(n) = i16::try_from(n) {
                out.push(LEN_ENCVAL << 6 | ENC_INT16);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
            if let Ok(n) = i32::try_from(n) {
                out.push(LEN_ENCVAL << 6 | ENC_INT32);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
        }
    }
    write_len(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// RDB length: the shortest of the 6-bit, 14-bit (big-endian), 32-bit and 64-bit forms.
fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push((LEN_6BIT << 6) | len as u8);
    } else if len < 1 << 14 {
        out.push((LEN_14BIT << 6) | (len >> 8) as u8);
        out.push(len as u8);
    } else if let Ok(l) = u32::try_from(len) {
        out.push(LEN_32BIT);
        out.extend_from_slice(&l.to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// A bounds-checked cursor over payload bytes: every read is `None` past the end.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// A length, or (with the flag set) a special-encoding code in its low 6 bits.
    fn len(&mut self) -> Option<(u64, bool)> {
        let b = self.byte()?;
        match b >> 6 {
            LEN_6BIT => Some(((b & 0x3f) as u64, false)),
            LEN_14BIT => Some(((((b & 0x3f) as u64) << 8) | self.byte()? as u64, false)),
            LEN_ENCVAL => Some(((b & 0x3f) as u64, true)),
            _ => match b {
                LEN_32BIT => Some((u32::from_be_bytes(self.array()?) as u64, false)),
                LEN_64BIT => Some((u64::from_be_bytes(self.array()?), false)),
                _ => None,
            },
        }
    }

    /// A length that must fit this machine's address space.
    fn size(&mut self) -> Option<usize> {
        // Like Redis, the encoded flag is ignored where only a plain length makes sense.
        usize::try_from(self.len()?.0).ok()
    }
}

fn read_string(r: &mut Reader) -> Option<Vec<u8>> {
    let (n, encoded) = r.len()?;
    if !encoded {
        let n = usize::try_from(n).ok()?;
        // `take` checks the length against the bytes present before anything is allocated.
        return Some(r.take(n)?.to_vec());
    }
    let int = match n as u8 {
        ENC_INT8 => i8::from_le_bytes(r.array()?) as i64,
        ENC_INT16 => i16::from_le_bytes(r.array()?) as i64,
        ENC_INT32 => i32::from_le_bytes(r.array()?) as i64,
        ENC_LZF => {
            let clen = r.size()?;
            let len = r.size()?;
            let data = r.take(clen)?;
            return lzf_decompress(data, len);
        }
        _ => return None,
    };
    Some(int.to_string().into_bytes())
}

/// Decompresses an LZF stream that must expand to exactly `out_len` bytes (a zero-length
/// result is never valid, as in Redis). `None` on any malformed or truncated input.
///
/// The stream is a series of chunks: a control byte below 32 starts a literal run of
/// `ctrl + 1` bytes; otherwise its top 3 bits are a length (7 = one more length byte follows)
/// and its low 5 bits plus the next byte an offset, copying `len + 2` bytes from
/// `offset + 1` bytes back in the output (the copy may overlap itself).
fn lzf_decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if out_len == 0 {
        return None;
    }
    // The claimed size is client data: never reserve more than the input could expand to.
    let mut out = Vec::with_capacity(out_len.min(input.len().saturating_mul(LZF_MAX_RATIO)));
    let mut i = 0;
    while let Some(&ctrl) = input.get(i) {
        i += 1;
        let ctrl = ctrl as usize;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lit = input.get(i..i + run)?;
            if run > out_len - out.len() {
                return None;
            }
            out.extend_from_slice(lit);
            i += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            let len = len + 2;
            let back = (((ctrl & 0x1f) << 8) | *input.get(i)? as usize) + 1;
            i += 1;
            if back > out.len() || len > out_len - out.len() {
                return None;
            }
            // Byte by byte: a reference may reach into the bytes it is producing.
            for _ in 0..len {
                let b = out[out.len() - back];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Flags, Settings};
    use crate::shard::Shard;
    use clap::Parser;
    use std::sync::Arc;

    /// A payload with a correct footer around `body`, for hand-built encodings.
    fn wrap(body: &[u8]) -> Vec<u8> {
        let mut p = body.to_vec();
        p.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let crc = CRC64.checksum(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    }

    #[test]
    fn crc_is_redis_crc64() {
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn restores_redis_docs_payload() {
        // `DUMP mykey` for the value 10, from the Redis documentation (an RDB 9 payload).
        let p = b"\x00\xc0\n\t\x00\xbem\x06\x89Z(\x00\n";
        assert_eq!(decode_string_payload(p).as_deref(), Ok(&b"10"[..]));
    }

    #[test]
    fn dump_bytes_match_redis() {
        let p = encode_string_payload(b"bar");
        assert_eq!(&p[..7], b"\x00\x03bar\x0b\x00");
        assert_eq!(p.len(), 15);
        assert_eq!(p[7..], CRC64.checksum(&p[..7]).to_le_bytes());
        // Integer encodings: 1, 2 and 4 little-endian bytes after 0xC0/0xC1/0xC2.
        assert_eq!(&encode_string_payload(b"123")[..3], b"\x00\xc0\x7b");
        assert_eq!(&encode_string_payload(b"-5")[..3], b"\x00\xc0\xfb");
        assert_eq!(&encode_string_payload(b"1000")[..4], b"\x00\xc1\xe8\x03");
        assert_eq!(
            &encode_string_payload(b"-2147483648")[..6],
            b"\x00\xc2\x00\x00\x00\x80"
        );
        // Not canonical integers: stored raw.
        assert_eq!(&encode_string_payload(b"007")[..5], b"\x00\x03007");
        assert_eq!(&encode_string_payload(b"+1")[..4], b"\x00\x02+1");
    }

    #[test]
    fn length_forms() {
        let mut out = Vec::new();
        write_len(&mut out, 63);
        assert_eq!(out, [0x3f]);
        out.clear();
        write_len(&mut out, 64);
        assert_eq!(out, [0x40, 0x40]);
        out.clear();
        write_len(&mut out, 16383);
        assert_eq!(out, [0x7f, 0xff]);
        out.clear();
        write_len(&mut out, 16384);
        assert_eq!(out, [0x80, 0, 0, 0x40, 0]);
        out.clear();
        write_len(&mut out, 1 << 32);
        assert_eq!(out, [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
        let mut r = Reader { buf: &out, pos: 0 };
        assert_eq!(r.len(), Some((1 << 32, false)));
    }

    #[test]
    fn round_trips() {
        let random: Vec<u8> = (0u32..1000)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let big = vec![b'x'; 20000];
        let cases: Vec<&[u8]> = vec![
            b"",
            b"123",
            b"-5",
            b"0",
            b"-0",
            b"12345678901",
            b"2147483647",
            b"9223372036854775807",
            &random,
            &big,
        ];
        for v in cases {
            let p = encode_string_payload(v);
            assert_eq!(decode_string_payload(&p).as_deref(), Ok(v));
        }
        // Too long for an integer encoding even though it parses.
        assert_eq!(&encode_string_payload(b"12345678901")[..3], b"\x00\x0b1");
    }

    #[test]
    fn bad_payloads() {
        let p = encode_string_payload(b"bar");
        let mut bad = p.clone();
        bad[14] ^= 1;
        assert_eq!(decode_string_payload(&bad), Err(ERR_PAYLOAD));
        bad = p.clone();
        bad[3] ^= 1;
        assert_eq!(decode_string_payload(&bad), Err(ERR_PAYLOAD));
        assert_eq!(decode_string_payload(&p[..9]), Err(ERR_PAYLOAD));
        assert_eq!(decode_string_payload(b""), Err(ERR_PAYLOAD));

        // A newer RDB version is refused even with a good checksum.
        let mut newer = b"\x00\x03bar".to_vec();
        newer.extend_from_slice(&12u16.to_le_bytes());
        let crc = CRC64.checksum(&newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_string_payload(&newer), Err(ERR_PAYLOAD));
        // Older versions are fine.
        let mut older = b"\x00\x03bar".to_vec();
        older.extend_from_slice(&9u16.to_le_bytes());
        let crc = CRC64.checksum(&older);
        older.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_string_payload(&older).as_deref(), Ok(&b"bar"[..]));

        for body in [
            &b""[..],            // no type byte
            b"\x02\x03bar",      // a set: not supported
            b"\x00",             // no string
            b"\x00\x05bar",      // length past the end
            b"\x00\x03barx",     // trailing garbage
            b"\x00\xc0",         // truncated INT8
            b"\x00\xc2\x01\x02", // truncated INT32
            b"\x00\xc4\x01",     // unknown special encoding
            b"\x00\x82\x01",     // unknown length form
            b"\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff",
            b"\x00\x80\xff\xff\xff\xff",
        ] {
            assert_eq!(
                decode_string_payload(&wrap(body)),
                Err(ERR_BAD_FORMAT),
                "{body:?}"
            );
        }
        assert_eq!(
            decode_string_payload(&wrap(b"\x00\xc1\x00\x80")).as_deref(),
            Ok(&b"-32768"[..])
        );
    }

    #[test]
    fn lzf_strings() {
        // "abc" as a literal run, then a 3-byte copy from 3 back: "abcabc".
        let lzf = [0x02, b'a', b'b', b'c', 0x20, 0x02];
        assert_eq!(lzf_decompress(&lzf, 6).as_deref(), Some(&b"abcabc"[..]));
        // Overlapping long copy: 7-length form, 7 + 3 + 2 = 12 bytes from 1 back.
        let run = [0x00, b'z', 0xe0, 0x03, 0x00];
        assert_eq!(lzf_decompress(&run, 13), Some(vec![b'z'; 13]));

        // Through the RDB encoding: 0xC3, clen, len, data.
        let mut body = vec![0x00, 0xc3, lzf.len() as u8, 6];
        body.extend_from_slice(&lzf);
        assert_eq!(
            decode_string_payload(&wrap(&body)).as_deref(),
            Ok(&b"abcabc"[..])
        );

        // Wrong claimed size, either way.
        assert_eq!(lzf_decompress(&lzf, 5), None);
        assert_eq!(lzf_decompress(&lzf, 7), None);
        assert_eq!(lzf_decompress(&lzf, 0), None);
        // Truncated literal run, back-reference without its offset byte or length byte.
        assert_eq!(lzf_decompress(&[0x05, b'a', b'b'], 6), None);
        assert_eq!(lzf_decompress(&[0x00, b'a', 0x20], 4), None);
        assert_eq!(lzf_decompress(&[0x00, b'a', 0xe0], 12), None);
        // Reference before the start of the output.
        assert_eq!(lzf_decompress(&[0x00, b'a', 0x20, 0x05], 4), None);
        assert_eq!(lzf_decompress(&[0x20, 0x00], 3), None);
        // A huge claimed size allocates nothing silly and fails.
        assert_eq!(lzf_decompress(&lzf, usize::MAX), None);

        for body in [
            &[0x00, 0xc3, 0x06, 0x06, 0x02, b'a'][..], // clen past the end
            &[0x00, 0xc3, 0x06, 0x07, 0x02, b'a', b'b', b'c', 0x20, 0x02],
            &[0x00, 0xc3, 0x06][..], // no len
            &[0x00, 0xc3, 0x00, 0x00],
            &[
                0x00, 0xc3, 0x02, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, b'a',
            ],
        ] {
            assert_eq!(
                decode_string_payload(&wrap(body)),
                Err(ERR_BAD_FORMAT),
                "{body:?}"
            );
        }
    }

    #[test]
    fn never_panics_on_noise() {
        // Every prefix and single-byte corruption of a few payloads, checksums fixed up.
        let mut lzf_body = vec![0x00, 0xc3, 0x06, 0x06];
        lzf_body.extend_from_slice(&[0x02, b'a', b'b', b'c', 0x20, 0x02]);
        let bodies = [
            lzf_body,
            b"\x00\x40\x41xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                .to_vec(),
            b"\x00\xc2\x01\x02\x03\x04".to_vec(),
        ];
        for body in bodies {
            for cut in 0..=body.len() {
                let _ = decode_string_payload(&wrap(&body[..cut]));
            }
            for at in 0..body.len() {
                for x in [0x01u8, 0x20, 0x80, 0xff] {
                    let mut b = body.clone();
                    b[at] ^= x;
                    let _ = decode_string_payload(&wrap(&b));
                }
            }
        }
        let mut seed = 0x1234_5678_u32;
        for _ in 0..2000 {
            let mut data = Vec::new();
            for _ in 0..(seed % 40) {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                data.push((seed >> 16) as u8);
            }
            let _ = lzf_decompress(&data, (seed % 300) as usize);
        }
    }

    fn shard() -> Shard {
        let f = Flags::try_parse_from(["strata"]).unwrap();
        Shard::new(0, Arc::new(Settings::from_flags(&f)))
    }

    fn run(shard: &mut Shard, now: u64, f: super::super::ShardFn, args: &[&[u8]]) -> Reply {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let mut ctx = Ctx { shard, db: 0, now };
        f(&mut ctx, &args)
    }

    #[test]
    fn dump_and_restore_commands() {
        let mut s = shard();
        let now = 1_700_000_000_000;
        assert_eq!(run(&mut s, now, dump, &[b"dump", b"k"]), Reply::Nil);
        s.store(0, b"k", Value::str(b"bar"), 0);
        let Reply::Bulk(p) = run(&mut s, now, dump, &[b"dump", b"k"]) else {
            panic!("dump gave no bulk");
        };
        assert_eq!(&p[..], &encode_string_payload(b"bar")[..]);

        let e = |m: &str| Reply::Error(m.to_string());
        let r = |s: &mut Shard, a: &[&[u8]]| run(s, now, restore, a);
        assert_eq!(r(&mut s, &[b"restore", b"k", b"0", &p]), e(ERR_BUSYKEY));
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"x", &p]),
            e(super::super::args::ERR_NOT_INT)
        );
        assert_eq!(r(&mut s, &[b"restore", b"n", b"-1", &p]), e(ERR_TTL));
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", b"junkjunkjunk"]),
            e(ERR_PAYLOAD)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &wrap(b"\x02")]),
            e(ERR_BAD_FORMAT)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"bogus"]),
            e(ERR_SYNTAX)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"idletime"]),
            e(ERR_SYNTAX)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"idletime", b"-1"]),
            e(ERR_IDLETIME)
        );
        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"0", &p, b"freq", b"256"]),
            e(ERR_FREQ)
        );
        assert_eq!(
            r(
                &mut s,
                &[b"restore", b"n", b"0", &p, b"idletime", b"1", b"freq", b"1"]
            ),
            e(ERR_SYNTAX)
        );
        assert!(!s.contains(0, b"n", now));

        assert_eq!(
            r(&mut s, &[b"restore", b"n", b"5000", &p, b"FREQ", b"200"]),
            Reply::Ok
        );
        let (n, at) = s.lookup_mut_ttl(0, b"n", now).unwrap();
        assert_eq!(n.str(), Some(&b"bar"[..]));
        assert_eq!(at, now + 5000);
        assert_eq!(n.freq(), 200);

        let q = encode_string_payload(b"12345");
        assert_eq!(
            r(
                &mut s,
                &[b"restore", b"k", b"0", &q, b"replace", b"idletime", b"100"]
            ),
            Reply::Ok
        );
        let clock = s.clock();
        let (k, at) = s.lookup_mut_ttl(0, b"k", now).unwrap();
        assert_eq!(k.str(), Some(&b"12345"[..]));
        assert_eq!(at, 0);
        assert_eq!(k.idle_seconds(clock), 100);

        let abs = (now + 10).to_string();
        assert_eq!(
            r(&mut s, &[b"restore", b"a", abs.as_bytes(), &p, b"absttl"]),
            Reply::Ok
        );
        assert_eq!(s.lookup_mut_ttl(0, b"a", now).unwrap().1, now + 10);

        // A time already past deletes rather than stores, and still says OK.
        let past = (now - 1).to_string();
        assert_eq!(
            r(
                &mut s,
                &[b"restore", b"k", past.as_bytes(), &p, b"ABSTTL", b"REPLACE"]
            ),
            Reply::Ok
        );
        assert!(!s.contains(0, b"k", now));
    }
}

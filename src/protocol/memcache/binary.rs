//! memcached's binary protocol (requests with magic 0x80): frames in, [`BinReq`]s out, and the
//! response frames, checked and worded as memcached 1.6's proto_bin does.
//!
//! A frame is taken once its header, extras and key are in; a value is read only when its
//! length is acceptable (a too-large one is skipped as it streams by, never buffered).
//!
//! Never: knows about storage or sessions; panics or allocates without bound on any input.

use bytes::Bytes;

use super::item_fits;
use super::text::KEY_MAX;

pub const REQ_MAGIC: u8 = 0x80;
const RES_MAGIC: u8 = 0x81;
pub const HEADER: usize = 24;

pub mod op {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
}

pub mod status {
    pub const OK: u16 = 0x00;
    pub const KEY_ENOENT: u16 = 0x01;
    pub const KEY_EEXISTS: u16 = 0x02;
    pub const E2BIG: u16 = 0x03;
    pub const EINVAL: u16 = 0x04;
    pub const NOT_STORED: u16 = 0x05;
    pub const DELTA_BADVAL: u16 = 0x06;
    pub const AUTH_ERROR: u16 = 0x20;
    pub const UNKNOWN_COMMAND: u16 = 0x81;
    pub const ENOMEM: u16 = 0x82;
}

/// memcached's words for an error status.
pub fn status_text(s: u16) -> &'static str {
    match s {
        status::ENOMEM => "Out of memory",
        status::UNKNOWN_COMMAND => "Unknown command",
        status::KEY_ENOENT => "Not found",
        status::EINVAL => "Invalid arguments",
        status::KEY_EEXISTS => "Data exists for key.",
        status::E2BIG => "Too large.",
        status::DELTA_BADVAL => "Non-numeric server-side value for incr or decr",
        status::NOT_STORED => "Not stored.",
        status::AUTH_ERROR => "Auth failure.",
        _ => "UNHANDLED ERROR",
    }
}

/// One binary request, its quiet opcodes folded into their loud forms (`quiet` set).
#[derive(Clone, Debug, PartialEq)]
pub struct BinReq {
    /// The opcode as sent (echoed in the response).
    pub opcode: u8,
    /// The loud form of the opcode.
    pub cmd: u8,
    pub quiet: bool,
    pub opaque: u32,
    pub cas: u64,
    pub extras: Bytes,
    pub key: Bytes,
    pub value: Bytes,
}

impl BinReq {
    fn ext_u32(&self, at: usize) -> u32 {
        self.extras
            .get(at..at + 4)
            .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn ext_u64(&self, at: usize) -> u64 {
        self.extras.get(at..at + 8).map_or(0, |b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_be_bytes(a)
        })
    }

    /// set/add/replace: client flags; touch/gat/flush: exptime.
    pub fn flags(&self) -> u32 {
        self.ext_u32(0)
    }

    /// set/add/replace: exptime.
    pub fn set_exptime(&self) -> u32 {
        self.ext_u32(4)
    }

    /// touch, gat, flush: exptime (flush: 0 when no extras).
    pub fn touch_exptime(&self) -> u32 {
        self.ext_u32(0)
    }

    /// incr/decr: (delta, initial, exptime).
    pub fn incr_args(&self) -> (u64, u64, u32) {
        (self.ext_u64(0), self.ext_u64(8), self.ext_u32(16))
    }
}

/// What [`BinParser::parse`] found.
#[derive(Debug, PartialEq)]
pub enum BinParsed {
    Req(BinReq, usize),
    /// An error response to send; `close` after it.
    Error {
        opcode: u8,
        opaque: u32,
        status: u16,
        close: bool,
        used: usize,
    },
    Skipped(usize),
    Incomplete,
    /// A frame without the request magic: the connection closes.
    Close,
}

pub struct BinParser {
    skip: usize,
    max_item: u64,
}

fn loud(opcode: u8) -> (u8, bool) {
    use op::*;
    let l = match opcode {
        SETQ => SET,
        ADDQ => ADD,
        REPLACEQ => REPLACE,
        DELETEQ => DELETE,
        INCREMENTQ => INCREMENT,
        DECREMENTQ => DECREMENT,
        QUITQ => QUIT,
        FLUSHQ => FLUSH,
        APPENDQ => APPEND,
        PREPENDQ => PREPEND,
        GETQ => GET,
        GETKQ => GETK,
        GATQ => GAT,
        GATKQ => GATK,
        _ => return (opcode, false),
    };
    (l, true)
}

impl BinParser {
    pub fn new(max_item: u64) -> BinParser {
        BinParser { skip: 0, max_item }
    }

    /// Parses the frame at the front of `src` (extras, key and value are slices of it: no
    /// copy); `authed` false makes every command but the SASL ones and version an auth error
    /// (memcached closes after it).
    pub fn parse(&mut self, src: &Bytes, authed: bool, sasl: bool) -> BinParsed {
        let buf: &[u8] = src;
        if self.skip > 0 {
            if buf.is_empty() {
                return BinParsed::Incomplete;
            }
            let n = self.skip.min(buf.len());
            self.skip -= n;
            return BinParsed::Skipped(n);
        }
        if buf.len() < HEADER {
            return BinParsed::Incomplete;
        }
        if buf[0] != REQ_MAGIC {
            return BinParsed::Close;
        }
        let opcode = buf[1];
        let keylen = u16::from_be_bytes([buf[2], buf[3]]) as usize;
        let extlen = buf[4] as usize;
        let bodylen = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
        let opaque = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]);
        let mut c = [0u8; 8];
        c.copy_from_slice(&buf[16..24]);
        let cas = u64::from_be_bytes(c);
        let head = HEADER + extlen + keylen;
        if buf.len() < head {
            return BinParsed::Incomplete;
        }
        let error = |status: u16, close: bool, used: usize| BinParsed::Error {
            opcode,
            opaque,
            status,
            close,
            used,
        };
        if keylen > bodylen || keylen + extlen > bodylen {
            return error(status::UNKNOWN_COMMAND, true, head);
        }
        let (cmd, quiet) = loud(opcode);
        let authed = authed
            || matches!(
                cmd,
                op::SASL_LIST_MECHS | op::SASL_AUTH | op::SASL_STEP | op::VERSION
            );
        if sasl && !authed {
            return error(status::AUTH_ERROR, true, head);
        }
        if keylen > KEY_MAX {
            return error(status::EINVAL, true, head);
        }
        let vlen = bodylen - extlen - keylen;
        use op::*;
        let valid = match cmd {
            VERSION | NOOP | QUIT | SASL_LIST_MECHS => extlen == 0 && keylen == 0 && bodylen == 0,
            FLUSH => keylen == 0 && bodylen == extlen && (extlen == 0 || extlen == 4),
            SET | ADD | REPLACE => extlen == 8 && keylen != 0,
            GET | GETK => extlen == 0 && bodylen == keylen && keylen > 0,
            DELETE => keylen > 0 && extlen == 0 && bodylen == keylen,
            INCREMENT | DECREMENT => keylen > 0 && extlen == 20 && bodylen == keylen + extlen,
            APPEND | PREPEND => keylen > 0 && extlen == 0,
            STAT => extlen == 0,
            SASL_AUTH | SASL_STEP => extlen == 0 && keylen != 0,
            TOUCH | GAT | GATK => extlen == 4 && keylen != 0,
            _ => {
                // Unknown: the error, and the body skipped.
                return self.refuse(buf, head, vlen, error(status::UNKNOWN_COMMAND, false, 0));
            }
        };
        if !valid {
            return error(status::EINVAL, true, head);
        }
        if !sasl && matches!(cmd, SASL_LIST_MECHS | SASL_AUTH | SASL_STEP) {
            return self.refuse(buf, head, vlen, error(status::UNKNOWN_COMMAND, false, 0));
        }
        let takes_value = matches!(
            cmd,
            SET | ADD | REPLACE | APPEND | PREPEND | SASL_AUTH | SASL_STEP
        );
        if takes_value && !item_fits(keylen, vlen as u64, self.max_item) {
            return self.refuse(buf, head, vlen, error(status::E2BIG, false, 0));
        }
        if !takes_value && vlen > 0 {
            // Only a stat can carry a body it does not use: refused, never buffered.
            return error(status::EINVAL, true, head);
        }
        let end = head + vlen;
        if buf.len() < end {
            return BinParsed::Incomplete;
        }
        BinParsed::Req(
            BinReq {
                opcode,
                cmd,
                quiet,
                opaque,
                cas,
                extras: src.slice(HEADER..HEADER + extlen),
                key: src.slice(HEADER + extlen..head),
                value: src.slice(head..end),
            },
            end,
        )
    }

    /// An error for a frame whose `vlen` body bytes after `head` are skipped (as much as is
    /// here now, the rest as it comes).
    fn refuse(&mut self, buf: &[u8], head: usize, vlen: usize, e: BinParsed) -> BinParsed {
        let here = buf.len() - head;
        let take = vlen.min(here);
        self.skip = vlen - take;
        match e {
            BinParsed::Error {
                opcode,
                opaque,
                status,
                close,
                ..
            } => BinParsed::Error {
                opcode,
                opaque,
                status,
                close,
                used: head + take,
            },
            other => other,
        }
    }
}

/// The bytes the frame at the front of `buf` needs before [`BinParser::parse`] can answer
/// more than Incomplete: its header, then its extras and key (a value too large is refused
/// then, never waited for), then its body; 0 while the header is short.
pub fn frame_len(buf: &[u8]) -> usize {
    if buf.len() < HEADER {
        return 0;
    }
    let keylen = u16::from_be_bytes([buf[2], buf[3]]) as usize;
    let head = HEADER + buf[4] as usize + keylen;
    if buf.len() < head {
        return head;
    }
    HEADER + u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize
}

/// Appends one response frame.
#[allow(clippy::too_many_arguments)]
pub fn response(
    out: &mut Vec<u8>,
    opcode: u8,
    status: u16,
    opaque: u32,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    let body = extras.len() + key.len() + value.len();
    out.reserve(HEADER + body);
    // The header built whole, then written at once.
    let mut h = [0u8; HEADER];
    h[0] = RES_MAGIC;
    h[1] = opcode;
    h[2..4].copy_from_slice(&(key.len() as u16).to_be_bytes());
    h[4] = extras.len() as u8;
    h[6..8].copy_from_slice(&status.to_be_bytes());
    h[8..12].copy_from_slice(&(body as u32).to_be_bytes());
    h[12..16].copy_from_slice(&opaque.to_be_bytes());
    h[16..24].copy_from_slice(&cas.to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// An error response with memcached's text for `status`.
pub fn error(out: &mut Vec<u8>, opcode: u8, opaque: u32, status: u16) {
    response(
        out,
        opcode,
        status,
        opaque,
        0,
        &[],
        &[],
        status_text(status).as_bytes(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut v = vec![REQ_MAGIC, opcode];
        v.extend_from_slice(&(key.len() as u16).to_be_bytes());
        v.push(extras.len() as u8);
        v.extend_from_slice(&[0, 0, 0]);
        v.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
        v.extend_from_slice(&7u32.to_be_bytes());
        v.extend_from_slice(&0u64.to_be_bytes());
        v.extend_from_slice(extras);
        v.extend_from_slice(key);
        v.extend_from_slice(value);
        v
    }

    #[test]
    fn a_set_frame_parses_whole() {
        let f = frame(op::SETQ, &[0, 0, 0, 5, 0, 0, 0, 0], b"k", b"val");
        let mut p = BinParser::new(1 << 20);
        assert_eq!(
            p.parse(&Bytes::copy_from_slice(&f[..f.len() - 1]), true, false),
            BinParsed::Incomplete
        );
        let BinParsed::Req(r, used) = p.parse(&Bytes::copy_from_slice(&f), true, false) else {
            panic!("not a request");
        };
        assert_eq!(
            (r.cmd, r.quiet, r.flags(), used),
            (op::SET, true, 5, f.len())
        );
        assert_eq!((&r.key[..], &r.value[..]), (&b"k"[..], &b"val"[..]));
    }

    #[test]
    fn a_frame_says_how_long_it_is() {
        let f = frame(op::SET, &[0; 8], b"key", &[b'x'; 300]);
        assert_eq!(frame_len(&f[..10]), 0);
        // Header, extras and key first (a too-large value is refused then), then the body.
        assert_eq!(frame_len(&f[..30]), HEADER + 8 + 3);
        assert_eq!(frame_len(&f[..40]), f.len());
    }

    #[test]
    fn a_too_large_value_is_refused_and_skipped() {
        let f = frame(op::SET, &[0; 8], b"k", &[b'x'; 300]);
        let mut p = BinParser::new(200);
        let r = p.parse(&Bytes::copy_from_slice(&f[..100]), true, false);
        assert!(matches!(
            r,
            BinParsed::Error {
                status: status::E2BIG,
                used: 100,
                ..
            }
        ));
        assert_eq!(
            p.parse(&Bytes::copy_from_slice(&f[100..]), true, false),
            BinParsed::Skipped(f.len() - 100)
        );
    }

    #[test]
    fn bad_frames_close_or_error() {
        let mut p = BinParser::new(1 << 20);
        assert_eq!(
            p.parse(&Bytes::copy_from_slice(&[0x42; 24]), true, false),
            BinParsed::Close
        );
        let f = frame(op::GET, &[1], b"k", b"");
        assert!(matches!(
            p.parse(&Bytes::copy_from_slice(&f), true, false),
            BinParsed::Error {
                status: status::EINVAL,
                close: true,
                ..
            }
        ));
    }
}

//! memcached 1.6's meta commands (mg ms md ma me; mn is in [`super::text`]): their flags
//! parsed as memcached's `_meta_flag_preparse` does (same error words, same order of checks),
//! and their replies written with the requested return flags in the order the client gave
//! them, plus the stale-while-revalidate markers (W won, X stale, Z token already sent).
//! Beyond 1.6.18 it takes two flags of later versions: `E` (explicit CAS) and `x` (md: clear
//! the value, keep the item).
//!
//! Never: knows about storage; panics on any input.

use bytes::Bytes;

use super::text::{safe_strtol, safe_strtoul, safe_strtoull, Cmd, KEY_MAX};
use super::{base64_decode, base64_encode};

/// memcached's MFLAG_MAX_OPT_LENGTH and MFLAG_MAX_OPAQUE_LENGTH.
const MAX_OPT_TOKENS: usize = 20;
const MAX_OPAQUE: usize = 32;
const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";

/// The flags of one meta request, parsed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetaFlags {
    /// `b`: the key was base64 and is decoded.
    pub base64: bool,
    /// `N`: vivify on miss with this exptime.
    pub vivify: Option<i32>,
    /// `T`: new exptime.
    pub ttl: Option<i32>,
    /// `R`: win the recache token when the TTL left is below this exptime.
    pub recache: Option<i32>,
    pub value: bool,
    pub no_update: bool,
    pub quiet: bool,
    /// `F`
    pub client_flags: u32,
    /// `C`
    pub cas: Option<u64>,
    /// `E`
    pub new_cas: Option<u64>,
    /// `M`
    pub mode: Option<u8>,
    /// `J`
    pub initial: u64,
    /// `D` (1 when absent)
    pub delta: u64,
    /// `I`
    pub invalidate: bool,
    /// `x`
    pub clear: bool,
}

/// A meta request other than ms.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaReq {
    /// The key (decoded when `b`).
    pub key: Bytes,
    /// The flag tokens as sent, for the reply's return flags.
    pub tokens: Vec<Bytes>,
    pub f: MetaFlags,
}

#[derive(Clone, Debug, PartialEq)]
pub enum MetaCmd {
    Get(MetaReq),
    Set(MetaReq, Bytes),
    Delete(MetaReq),
    Arith(MetaReq),
    Debug(MetaReq),
}

/// What the item looked like, for the reply.
#[derive(Clone, Debug, Default)]
pub struct ItemView {
    pub value: Option<Bytes>,
    pub len: u64,
    pub client_flags: u32,
    pub cas: u64,
    /// Seconds left, -1 for none.
    pub ttl: i64,
    pub idle: u32,
    pub fetched: bool,
    pub stale: bool,
    pub token_sent: bool,
    pub won: bool,
    /// The item's key was stored base64-encoded (shown so in `k` and me).
    pub binary_key: bool,
}

/// How a meta write ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaStatus {
    /// HD (or VA with a value).
    Ok,
    /// NS
    NotStored,
    /// EX
    Exists,
    /// NF
    NotFound,
}

/// Parses flags as `_meta_flag_preparse`: Err(error reply).
fn preparse(key: &mut Bytes, tokens: &[&[u8]]) -> Result<MetaFlags, String> {
    let mut f = MetaFlags {
        delta: 1,
        ..MetaFlags::default()
    };
    let mut seen = [false; 127];
    let mut error: Option<&str> = None;
    let mut failed = false;
    for t in tokens {
        let o = t[0];
        if o >= 127 || seen[o as usize] {
            return Err("CLIENT_ERROR duplicate flag".into());
        }
        seen[o as usize] = true;
        let arg = &t[1..];
        let bad_token = "CLIENT_ERROR bad token in command line format";
        match o {
            b'b' => match base64_decode(key) {
                Some(k) if !k.is_empty() => {
                    *key = Bytes::from(k);
                    f.base64 = true;
                }
                _ => {
                    error = Some("CLIENT_ERROR error decoding key");
                    failed = true;
                }
            },
            b'N' | b'T' | b'R' => match safe_strtol(arg) {
                Some(v) => match o {
                    b'N' => f.vivify = Some(v),
                    b'T' => f.ttl = Some(v),
                    _ => f.recache = Some(v),
                },
                None => {
                    error = Some(bad_token);
                    failed = true;
                }
            },
            b'l' | b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'h' => {}
            b'v' => f.value = true,
            b'u' => f.no_update = true,
            b'q' => f.quiet = true,
            b'F' => match safe_strtoul(arg) {
                Some(v) => f.client_flags = v,
                None => failed = true,
            },
            b'C' | b'E' => match safe_strtoull(arg) {
                Some(v) if o == b'C' => f.cas = Some(v),
                Some(v) => f.new_cas = Some(v),
                None => {
                    error = Some(bad_token);
                    failed = true;
                }
            },
            b'M' => {
                if t.len() != 2 {
                    error = Some("CLIENT_ERROR incorrect length for M token");
                    failed = true;
                } else {
                    f.mode = Some(t[1]);
                }
            }
            b'J' => match safe_strtoull(arg) {
                Some(v) => f.initial = v,
                None => {
                    error = Some("CLIENT_ERROR invalid numeric initial value");
                    failed = true;
                }
            },
            b'D' => match safe_strtoull(arg) {
                Some(v) => f.delta = v,
                None => {
                    error = Some("CLIENT_ERROR invalid numeric delta value");
                    failed = true;
                }
            },
            b'I' => f.invalidate = true,
            b'x' => f.clear = true,
            _ => return Err("CLIENT_ERROR invalid flag".into()),
        }
    }
    if failed {
        return Err(error.unwrap_or(BAD_FORMAT).into());
    }
    Ok(f)
}

fn opaque_ok(tokens: &[&[u8]]) -> bool {
    tokens.iter().all(|t| t[0] != b'O' || t.len() <= MAX_OPAQUE)
}

fn err(text: &str) -> Cmd {
    Cmd::Reply {
        text: text.to_string(),
        noreply: false,
    }
}

/// The tokens as slices of `src`, the read buffer they were cut from (no copy).
fn shared(src: &Bytes, tokens: &[&[u8]]) -> Vec<Bytes> {
    tokens.iter().map(|t| src.slice_ref(t)).collect()
}

/// mg, md, ma and me: `list` is the line's tokens, cut from `src`, `n` memcached's token count.
pub fn parse(src: &Bytes, name: &[u8], list: &[&[u8]], n: usize) -> Cmd {
    if n < 3 {
        return err("ERROR");
    }
    let mut key = src.slice_ref(list[1]);
    if name == b"me" {
        if key.len() > KEY_MAX {
            return err(BAD_FORMAT);
        }
        let binary = list.get(2).is_some_and(|t| *t == b"b");
        if binary {
            match base64_decode(&key) {
                Some(k) if !k.is_empty() => key = Bytes::from(k),
                _ => return err(BAD_FORMAT),
            }
        }
        let f = MetaFlags {
            base64: binary,
            ..MetaFlags::default()
        };
        return Cmd::Meta(MetaCmd::Debug(MetaReq {
            key,
            tokens: Vec::new(),
            f,
        }));
    }
    if key.len() > KEY_MAX {
        return err(BAD_FORMAT);
    }
    if n > MAX_OPT_TOKENS {
        return err(if name == b"mg" {
            "CLIENT_ERROR options flags are too long"
        } else {
            "CLIENT_ERROR options flags too long"
        });
    }
    let tokens = &list[2..];
    let f = match preparse(&mut key, tokens) {
        Ok(f) => f,
        Err(e) if name == b"mg" => return err(&e),
        Err(_) => return err("CLIENT_ERROR invalid or duplicate flag"),
    };
    if name == b"ma" && !matches!(f.mode, None | Some(b'I' | b'+' | b'D' | b'-')) {
        return err("CLIENT_ERROR invalid mode for ma M token");
    }
    if !opaque_ok(tokens) {
        return err("CLIENT_ERROR opaque token too long");
    }
    let req = MetaReq {
        key,
        tokens: shared(src, tokens),
        f,
    };
    Cmd::Meta(match name {
        b"mg" => MetaCmd::Get(req),
        b"md" => MetaCmd::Delete(req),
        _ => MetaCmd::Arith(req),
    })
}

/// What an ms line says before its data block.
pub enum SetLine {
    /// Answer this; no data block is read.
    Error(String),
    /// Answer this and skip the data block of this length.
    Refuse(String, u64),
    /// The request (its data still empty) and its data length.
    Ok(MetaReq, u64),
}

/// The `ms <key> <datalen> <flags>*` line.
pub fn parse_set_line(src: &Bytes, list: &[&[u8]], n: usize) -> SetLine {
    if n < 3 {
        return SetLine::Error("ERROR".into());
    }
    let mut key = src.slice_ref(list[1]);
    if key.len() > KEY_MAX || n == 3 {
        return SetLine::Error(BAD_FORMAT.into());
    }
    if n > MAX_OPT_TOKENS {
        return SetLine::Error("CLIENT_ERROR options flags too long".into());
    }
    let vlen = match safe_strtol(list[2]) {
        Some(v) if (0..=i32::MAX - 2).contains(&v) => v as u64,
        _ => return SetLine::Error(BAD_FORMAT.into()),
    };
    let tokens = &list[3..];
    let f = match preparse(&mut key, tokens) {
        Ok(f) => f,
        Err(e) => return SetLine::Refuse(e, vlen),
    };
    if !opaque_ok(tokens) {
        return SetLine::Refuse("CLIENT_ERROR opaque token too long".into(), vlen);
    }
    if !matches!(f.mode, None | Some(b'E' | b'A' | b'P' | b'R' | b'S')) {
        return SetLine::Refuse("CLIENT_ERROR invalid mode for ms M token".into(), vlen);
    }
    SetLine::Ok(
        MetaReq {
            key,
            tokens: shared(src, tokens),
            f,
        },
        vlen,
    )
}

/// Appends `n` in decimal without allocating (a flag or length per reply).
fn push_dec(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

fn push_num(out: &mut Vec<u8>, flag: u8, n: impl itoa::Integer) {
    out.push(b' ');
    out.push(flag);
    push_dec(out, n);
}

fn push_key(out: &mut Vec<u8>, req: &MetaReq, binary: bool) {
    out.extend_from_slice(b" k");
    if binary {
        out.extend_from_slice(&base64_encode(&req.key));
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(&req.key);
    }
}

/// O and k, the return flags every reply carries (k as the request gave the key).
fn push_opaque_key(out: &mut Vec<u8>, req: &MetaReq, t: &[u8]) {
    push_opaque_key_as(out, req, t, req.f.base64)
}

/// [`push_opaque_key`] with the key shown base64 when `binary`.
fn push_opaque_key_as(out: &mut Vec<u8>, req: &MetaReq, t: &[u8], binary: bool) {
    match t[0] {
        b'O' => {
            out.push(b' ');
            out.extend_from_slice(t);
        }
        b'k' => push_key(out, req, binary),
        _ => {}
    }
}

/// mg's reply: `item` None for a miss.
pub fn encode_get(req: &MetaReq, item: Option<&ItemView>, out: &mut Vec<u8>) {
    let Some(it) = item else {
        if req.f.quiet {
            return;
        }
        out.extend_from_slice(b"EN");
        for t in &req.tokens {
            push_opaque_key(out, req, t);
        }
        out.extend_from_slice(b"\r\n");
        return;
    };
    if req.f.value {
        out.extend_from_slice(b"VA ");
        push_dec(out, it.len);
    } else {
        out.extend_from_slice(b"HD");
    }
    for t in &req.tokens {
        match t[0] {
            b's' => push_num(out, b's', it.len),
            b't' => push_num(out, b't', it.ttl),
            b'c' => push_num(out, b'c', it.cas),
            b'f' => push_num(out, b'f', it.client_flags),
            b'l' => push_num(out, b'l', it.idle),
            b'h' => push_num(out, b'h', u8::from(it.fetched)),
            // A hit shows the key as the item holds it.
            _ => push_opaque_key_as(out, req, t, it.binary_key),
        }
    }
    if it.token_sent {
        out.extend_from_slice(b" Z");
    }
    if it.stale {
        out.extend_from_slice(b" X");
    }
    if it.won {
        out.extend_from_slice(b" W");
    }
    out.extend_from_slice(b"\r\n");
    if req.f.value {
        out.extend_from_slice(it.value.as_deref().unwrap_or_default());
        out.extend_from_slice(b"\r\n");
    }
}

/// ms's reply; `cas` is the item's new CAS.
pub fn encode_set(req: &MetaReq, status: MetaStatus, cas: u64, out: &mut Vec<u8>) {
    if status == MetaStatus::Ok && req.f.quiet {
        return;
    }
    out.extend_from_slice(status_word(status));
    for t in &req.tokens {
        match t[0] {
            b'c' => push_num(out, b'c', cas),
            _ => push_opaque_key(out, req, t),
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn status_word(s: MetaStatus) -> &'static [u8] {
    match s {
        MetaStatus::Ok => b"HD",
        MetaStatus::NotStored => b"NS",
        MetaStatus::Exists => b"EX",
        MetaStatus::NotFound => b"NF",
    }
}

/// md's reply.
pub fn encode_delete(req: &MetaReq, status: MetaStatus, out: &mut Vec<u8>) {
    if status == MetaStatus::Ok && req.f.quiet {
        return;
    }
    out.extend_from_slice(status_word(status));
    for t in &req.tokens {
        push_opaque_key(out, req, t);
    }
    out.extend_from_slice(b"\r\n");
}

/// ma's reply: `item` (the number as value) when it succeeded.
pub fn encode_arith(req: &MetaReq, status: MetaStatus, item: Option<&ItemView>, out: &mut Vec<u8>) {
    if status == MetaStatus::Ok && req.f.quiet {
        return;
    }
    let value = item.and_then(|i| i.value.as_deref()).unwrap_or_default();
    match (status, item) {
        (MetaStatus::Ok, Some(_)) if req.f.value => {
            out.extend_from_slice(b"VA ");
            push_dec(out, value.len());
        }
        _ => out.extend_from_slice(status_word(status)),
    }
    for t in &req.tokens {
        match (t[0], item) {
            (b'c', Some(it)) => push_num(out, b'c', it.cas),
            (b't', Some(it)) => push_num(out, b't', it.ttl),
            _ => push_opaque_key(out, req, t),
        }
    }
    out.extend_from_slice(b"\r\n");
    if status == MetaStatus::Ok && item.is_some() && req.f.value {
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
}

/// me's reply.
pub fn encode_debug(req: &MetaReq, item: Option<&ItemView>, out: &mut Vec<u8>) {
    let Some(it) = item else {
        out.extend_from_slice(b"EN\r\n");
        return;
    };
    out.extend_from_slice(b"ME ");
    if it.binary_key {
        out.extend_from_slice(&base64_encode(&req.key));
    } else {
        out.extend_from_slice(&req.key);
    }
    let exp = if it.ttl < 0 { -1 } else { -it.ttl };
    let size = req.key.len() as u64 + it.len + super::ITEM_OVERHEAD;
    out.extend_from_slice(
        format!(
            " exp={exp} la={} cas={} fetch={} cls=1 size={size}\r\n",
            it.idle,
            it.cas,
            if it.fetched { "yes" } else { "no" },
        )
        .as_bytes(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_written_as_display_writes_them() {
        let mut out = Vec::new();
        push_dec(&mut out, 0u64);
        push_num(&mut out, b't', -1i64);
        push_num(&mut out, b'c', u64::MAX);
        push_num(&mut out, b't', i64::MIN);
        push_num(&mut out, b'f', u32::MAX);
        push_num(&mut out, b'h', 1u8);
        assert_eq!(
            out,
            format!("0 t-1 c{} t{} f{} h1", u64::MAX, i64::MIN, u32::MAX).into_bytes()
        );
    }
}

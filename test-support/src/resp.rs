//! The RESP wire format as tests see it: requests to send, replies parsed into values, and the
//! exact reply bytes that byte-for-byte assertions are written with.

use std::io::Write;

/// Encodes a command as a RESP multibulk request.
pub fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        push_bulk(&mut v, a);
    }
    v
}

/// Appends `s` as a bulk string (for building requests without a `Vec` per argument).
pub fn push_bulk(buf: &mut Vec<u8>, s: &[u8]) {
    let _ = write!(buf, "${}\r\n", s.len());
    buf.extend_from_slice(s);
    buf.extend_from_slice(b"\r\n");
}

/// A reply parsed into a value (RESP2: what a redis-server answers a plain client).
#[derive(Debug, Clone, PartialEq)]
pub enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    /// None is the null bulk string.
    Bulk(Option<Vec<u8>>),
    /// None is the null array.
    Array(Option<Vec<Resp>>),
}

// ---------------------------------------------------------------------------------------------
// Expected replies as RESP bytes
// ---------------------------------------------------------------------------------------------

/// An error reply.
pub fn e(msg: &str) -> String {
    format!("-{msg}\r\n")
}

/// A bulk reply of text.
pub fn b(v: &str) -> String {
    format!("${}\r\n{v}\r\n", v.len())
}

/// A bulk reply of any bytes.
pub fn bulk(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() + 16);
    push_bulk(&mut out, v);
    out
}

/// An integer reply.
pub fn i(n: i64) -> String {
    format!(":{n}\r\n")
}

/// An array reply of already encoded `items`.
pub fn arr(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for it in items {
        s.push_str(it);
    }
    s
}

/// The error reply for a wrong number of arguments to `cmd` (named in lower case, as Redis does).
pub fn wrong_args(cmd: &str) -> String {
    e(&format!(
        "ERR wrong number of arguments for '{cmd}' command"
    ))
}

pub const OK: &str = "+OK\r\n";
pub const NIL: &str = "$-1\r\n";
pub const SYNTAX: &str = "-ERR syntax error\r\n";
pub const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
pub const NOT_FLOAT: &str = "-ERR value is not a valid float\r\n";
pub const NO_KEY: &str = "-ERR no such key\r\n";
pub const SAME: &str = "-ERR source and destination objects are the same\r\n";
pub const DB_RANGE: &str = "-ERR DB index is out of range\r\n";

// ---------------------------------------------------------------------------------------------
// Reading reply bytes
// ---------------------------------------------------------------------------------------------

/// The integer of a `:N` reply.
pub fn int_of(reply: &[u8]) -> i64 {
    assert!(
        reply.starts_with(b":") && reply.ends_with(b"\r\n"),
        "not an integer reply: {}",
        show(reply)
    );
    parse_num(&reply[1..reply.len() - 2])
}

/// The body of a `$N` (or RESP3 `=N`) reply.
pub fn bulk_of(reply: &[u8]) -> Vec<u8> {
    assert!(
        reply.starts_with(b"$") || reply.starts_with(b"="),
        "not a bulk reply: {}",
        show(reply)
    );
    let nl = reply.iter().position(|&b| b == b'\n').unwrap();
    reply[nl + 1..reply.len() - 2].to_vec()
}

fn parse_num(b: &[u8]) -> i64 {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad length/number in reply: {}", show(b)))
}

/// Printable form of bytes for failure messages (truncated when long).
pub fn show(b: &[u8]) -> String {
    let s = b.escape_ascii().to_string();
    if s.len() > 600 {
        format!("{}...({} bytes)", &s[..600], b.len())
    } else {
        s
    }
}

/// Byte-exact comparison whose failure message points at the first difference.
pub fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    let from = at.saturating_sub(60);
    panic!(
        "{what}: replies differ at byte {at} (got {} bytes, want {})\n  got:  {}\n  want: {}",
        got.len(),
        want.len(),
        show(&got[from..(at + 200).min(got.len())]),
        show(&want[from..(at + 200).min(want.len())]),
    );
}

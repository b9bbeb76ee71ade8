//! Command results as values, and their RESP2/RESP3 encoding.
//!
//! Commands return a [`Reply`] instead of writing to a socket, so the same command code runs
//! inline on the connection's core or on another core whose answer travels back by message.
//!
//! Never: writes anything but the encoding of the value it is given.

use bytes::{BufMut, Bytes};

/// A command's answer, independent of the protocol version until it is encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`
    Ok,
    /// A simple string such as `+PONG` or `+string`.
    Status(&'static str),
    /// A simple string built at run time (e.g. TYPE of a key).
    StatusOwned(String),
    /// An error: the full text after `-`, starting with its code (`ERR`, `WRONGTYPE`, ...).
    Error(String),
    Int(i64),
    Bulk(Bytes),
    /// Null bulk string: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// Null array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    /// A map in RESP3 (`%`), a flat array of key, value in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// Pairs as an array of two-element arrays in RESP3, one flat array in RESP2
    /// (HRANDFIELD ... WITHVALUES).
    Pairs(Vec<(Reply, Reply)>),
    /// A set in RESP3 (`~`), an array in RESP2.
    Set(Vec<Reply>),
    /// A double in RESP3 (`,`), a bulk string in RESP2.
    Double(f64),
    /// A boolean in RESP3 (`#t`/`#f`), the integer 1/0 in RESP2.
    Bool(bool),
    /// Verbatim text in RESP3 (`=len\r\ntxt:...`), a bulk string in RESP2.
    Verbatim(String),
    /// A message outside any request's reply (pub/sub, invalidations): a push in RESP3 (`>`),
    /// an array in RESP2.
    Push(Vec<Reply>),
    /// Several replies in a row for one request (SUBSCRIBE confirms each channel apart).
    Many(Vec<Reply>),
}

impl Reply {
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }

    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// What of it a client with replies turned off still gets (CLIENT REPLY OFF/SKIP): its
    /// pushes.
    pub fn pushes_only(self) -> Reply {
        match self {
            Reply::Push(_) => self,
            Reply::Many(v) => Reply::Many(
                v.into_iter()
                    .filter(|r| matches!(r, Reply::Push(_)))
                    .collect(),
            ),
            _ => Reply::Many(Vec::new()),
        }
    }

    /// About how many bytes its encoding takes (what a session's output limit counts).
    pub fn size_hint(&self) -> usize {
        match self {
            Reply::Bulk(b) => b.len() + 16,
            Reply::Status(s) => s.len() + 3,
            Reply::StatusOwned(s) | Reply::Error(s) | Reply::Verbatim(s) => s.len() + 16,
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => {
                16 + v.iter().map(Reply::size_hint).sum::<usize>()
            }
            Reply::Many(v) => v.iter().map(Reply::size_hint).sum::<usize>(),
            Reply::Map(v) | Reply::Pairs(v) => {
                16 + v
                    .iter()
                    .map(|(k, x)| k.size_hint() + x.size_hint())
                    .sum::<usize>()
            }
            _ => 24,
        }
    }

    /// Appends the encoding of `self` for protocol version 2 or 3.
    pub fn encode(&self, resp3: bool, out: &mut Vec<u8>) {
        match self {
            Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::StatusOwned(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => {
                // A newline inside an error would break framing.
                let clean: Vec<u8> = e
                    .bytes()
                    .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                    .collect();
                line(out, b'-', &clean);
            }
            Reply::Int(n) => {
                out.push(b':');
                write_int(out, *n);
                out.extend_from_slice(b"\r\n");
            }
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
            Reply::NilArray => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
            Reply::Array(items) => {
                header(out, b'*', items.len());
                for i in items {
                    i.encode(resp3, out);
                }
            }
            Reply::Push(items) => {
                header(out, if resp3 { b'>' } else { b'*' }, items.len());
                for i in items {
                    i.encode(resp3, out);
                }
            }
            Reply::Set(items) => {
                header(out, if resp3 { b'~' } else { b'*' }, items.len());
                for i in items {
                    i.encode(resp3, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    header(out, b'%', pairs.len());
                } else {
                    header(out, b'*', pairs.len() * 2);
                }
                for (k, v) in pairs {
                    k.encode(resp3, out);
                    v.encode(resp3, out);
                }
            }
            Reply::Pairs(pairs) => {
                header(out, b'*', if resp3 { pairs.len() } else { pairs.len() * 2 });
                for (k, v) in pairs {
                    if resp3 {
                        header(out, b'*', 2);
                    }
                    k.encode(resp3, out);
                    v.encode(resp3, out);
                }
            }
            Reply::Double(d) => {
                // Integral scores (the common case) format on the stack, without a String.
                let mut digits = itoa::Buffer::new();
                let owned;
                let s = match short_double(*d, &mut digits) {
                    Some(s) => s,
                    None => {
                        owned = format_double(*d);
                        owned.as_str()
                    }
                };
                if resp3 {
                    line(out, b',', s.as_bytes());
                } else {
                    bulk(out, s.as_bytes());
                }
            }
            Reply::Bool(b) => {
                if resp3 {
                    out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                } else {
                    out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" });
                }
            }
            Reply::Verbatim(s) => {
                if resp3 {
                    header(out, b'=', s.len() + 4);
                    out.extend_from_slice(b"txt:");
                    out.extend_from_slice(s.as_bytes());
                    out.extend_from_slice(b"\r\n");
                } else {
                    bulk(out, s.as_bytes());
                }
            }
            Reply::Many(items) => {
                for i in items {
                    i.encode(resp3, out);
                }
            }
        }
    }
}

/// Formats a double the way Redis 7.0 replies with one (`addReplyDouble`): C's `%.17g`, and
/// `inf`/`-inf`.
pub fn format_double(d: f64) -> String {
    if let Some(s) = short_double(d, &mut itoa::Buffer::new()) {
        return s.to_string();
    }
    let sci = format!("{d:.16e}");
    let Some((mant, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..17).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", strip_zeros(mant), exp.abs());
    }
    let fixed = format!("{:.*}", (16 - exp) as usize, d);
    strip_zeros(&fixed).to_string()
}

/// `format_double`'s text for the values that need no float formatting: nan, the infinities
/// and integral values of at most 17 digits, which `%.17g` prints as that integer (its fixed
/// form, zeros stripped). None for the others.
fn short_double(d: f64, digits: &mut itoa::Buffer) -> Option<&str> {
    if d.is_nan() {
        return Some("nan");
    }
    if d.is_infinite() {
        return Some(if d > 0.0 { "inf" } else { "-inf" });
    }
    if d.fract() == 0.0 && d.abs() < 1e17 {
        return Some(if d == 0.0 && d.is_sign_negative() {
            "-0"
        } else {
            digits.format(d as i64)
        });
    }
    None
}

/// A `%g` mantissa without its trailing zeros (and point).
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn line(out: &mut Vec<u8>, prefix: u8, body: &[u8]) {
    out.push(prefix);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, prefix: u8, n: usize) {
    out.push(prefix);
    write_int(out, n as i64);
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, b: &[u8]) {
    header(out, b'$', b.len());
    out.reserve(b.len() + 2);
    out.put_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Allocation-free integer formatting (the hot path writes many lengths).
fn write_int(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, resp3: bool) -> String {
        let mut v = Vec::new();
        r.encode(resp3, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn encodings() {
        assert_eq!(enc(&Reply::Ok, false), "+OK\r\n");
        assert_eq!(enc(&Reply::Int(-42), false), ":-42\r\n");
        assert_eq!(
            enc(&Reply::Int(i64::MIN), false),
            ":-9223372036854775808\r\n"
        );
        assert_eq!(enc(&Reply::bulk_str("hi"), false), "$2\r\nhi\r\n");
        assert_eq!(enc(&Reply::Nil, false), "$-1\r\n");
        assert_eq!(enc(&Reply::Nil, true), "_\r\n");
        assert_eq!(enc(&Reply::NilArray, false), "*-1\r\n");
        assert_eq!(
            enc(
                &Reply::Map(vec![(Reply::bulk_str("a"), Reply::Int(1))]),
                true
            ),
            "%1\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(
            enc(
                &Reply::Map(vec![(Reply::bulk_str("a"), Reply::Int(1))]),
                false
            ),
            "*2\r\n$1\r\na\r\n:1\r\n"
        );
        assert_eq!(enc(&Reply::Double(1.5), true), ",1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), false), "$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(-42.0), false), "$3\r\n-42\r\n");
        assert_eq!(enc(&Reply::Double(-0.0), true), ",-0\r\n");
        assert_eq!(
            enc(&Reply::Double(f64::NEG_INFINITY), false),
            "$4\r\n-inf\r\n"
        );
        assert_eq!(enc(&Reply::Double(f64::NAN), true), ",nan\r\n");
        assert_eq!(enc(&Reply::Double(1e17), false), "$5\r\n1e+17\r\n");
        assert_eq!(enc(&Reply::Bool(true), true), "#t\r\n");
        assert_eq!(enc(&Reply::error("ERR x\r\ny"), false), "-ERR x  y\r\n");
        assert_eq!(enc(&Reply::Verbatim("ab".into()), true), "=6\r\ntxt:ab\r\n");
        let push = Reply::Push(vec![Reply::bulk_str("message"), Reply::Int(1)]);
        assert_eq!(enc(&push, true), ">2\r\n$7\r\nmessage\r\n:1\r\n");
        assert_eq!(enc(&push, false), "*2\r\n$7\r\nmessage\r\n:1\r\n");
    }

    #[test]
    fn doubles() {
        assert_eq!(format_double(10.6), "10.6");
        assert_eq!(format_double(3.0), "3");
        // Integral values: the integer below 1e17 (as printf's %.17g), exponent form from it.
        assert_eq!(format_double(-0.0), "-0");
        assert_eq!(format_double(0.0), "0");
        assert_eq!(format_double(-123456789012345.0), "-123456789012345");
        assert_eq!(format_double(9007199254740992.0), "9007199254740992");
        assert_eq!(format_double(99999999999999984.0), "99999999999999984");
        assert_eq!(format_double(1e17), "1e+17");
        assert_eq!(format_double(-1e20), "-1e+20");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(-0.5), "-0.5");
    }
}

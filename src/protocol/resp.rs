//! Request parsing: multibulk (`*N\r\n$len\r\n...`) and inline (`PING\r\n`) commands.
//!
//! `parse_request` looks at the front of a buffer and says one of three things: here is a whole
//! request and how many bytes it used, the request is not complete yet, or the bytes are not RESP
//! (with Redis' exact error text). It never reads past the request it returns and never panics,
//! whatever the bytes; the fuzz target and property tests hold it to that.

use bytes::Bytes;

use super::{MAX_BULK_LEN, MAX_INLINE_LEN, MAX_MULTIBULK_LEN};

/// One parsed request: its arguments (the command name first).
pub type Request = Vec<Bytes>;

/// A protocol violation; the text follows `-ERR ` on the wire and the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub std::borrow::Cow<'static, str>);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Byte ranges of a request's arguments; most requests have few, so they stay inline.
pub type Ranges = smallvec::SmallVec<[(usize, usize); 4]>;

/// A whole request found at the front of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// Multibulk: byte ranges of each argument inside the request's bytes (zero-copy).
    Multi(Ranges),
    /// Inline: arguments after quote processing.
    Inline(Vec<Bytes>),
}

impl Frame {
    /// The arguments, slicing `bytes` (the request's bytes, starting where parsing started).
    pub fn into_args(self, bytes: &Bytes) -> Request {
        match self {
            Frame::Multi(ranges) => ranges.into_iter().map(|(a, b)| bytes.slice(a..b)).collect(),
            Frame::Inline(args) => args,
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Frame::Multi(v) => v.is_empty(),
            Frame::Inline(v) => v.is_empty(),
        }
    }
}

/// Outcome of looking at the front of the input buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request and the number of bytes it used. Empty requests (`*0`, blank inline
    /// lines) come back with no arguments and are to be skipped.
    Request(Frame, usize),
    /// More bytes are needed.
    Incomplete,
}

/// Resumable request parser: a multibulk request that arrives in pieces is not re-parsed from
/// its start on every read (a request of a million arguments would otherwise cost quadratic
/// time). The caller must keep the unconsumed bytes in place and only append to them.
#[derive(Default, Debug)]
pub struct RequestParser {
    partial: Option<Partial>,
    unauthenticated: bool,
}

#[derive(Debug)]
struct Partial {
    remaining: usize,
    args: Ranges,
    pos: usize,
}

impl RequestParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Before a client authenticates, Redis allows at most 10 arguments and 16 KiB bulks, so an
    /// unauthenticated peer cannot make the server buffer much.
    pub fn set_unauthenticated(&mut self, on: bool) {
        self.unauthenticated = on;
    }

    /// Parses one request from the front of `buf`.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Parsed, ParseError> {
        if let Some(p) = self.partial.take() {
            return self.continue_multibulk(buf, p);
        }
        match buf.first() {
            None => Ok(Parsed::Incomplete),
            Some(b'*') => {
                let Some(end) = find_crlf(buf, 1) else {
                    if buf.len() > MAX_INLINE_LEN {
                        return Err(ParseError(
                            "Protocol error: too big mbulk count string".into(),
                        ));
                    }
                    return Ok(Parsed::Incomplete);
                };
                let count = parse_len(&buf[1..end])
                    .filter(|&n| n <= MAX_MULTIBULK_LEN)
                    .ok_or_else(|| ParseError("Protocol error: invalid multibulk length".into()))?;
                if count <= 0 {
                    return Ok(Parsed::Request(Frame::Multi(Ranges::new()), end + 2));
                }
                if self.unauthenticated && count > 10 {
                    return Err(ParseError(
                        "Protocol error: unauthenticated multibulk length".into(),
                    ));
                }
                let p = Partial {
                    remaining: count as usize,
                    // Reserve for what the buffer can hold, not what the client claims.
                    args: Ranges::with_capacity((count as usize).min(1024)),
                    pos: end + 2,
                };
                self.continue_multibulk(buf, p)
            }
            Some(_) => parse_inline(buf),
        }
    }

    fn continue_multibulk(&mut self, buf: &[u8], mut p: Partial) -> Result<Parsed, ParseError> {
        while p.remaining > 0 {
            let pos = p.pos;
            let Some(&first) = buf.get(pos) else {
                self.partial = Some(p);
                return Ok(Parsed::Incomplete);
            };
            if first != b'$' {
                return Err(ParseError(
                    format!("Protocol error: expected '$', got '{}'", first as char).into(),
                ));
            }
            let Some(end) = find_crlf(buf, pos + 1) else {
                if buf.len() - pos > MAX_INLINE_LEN {
                    return Err(ParseError(
                        "Protocol error: too big bulk count string".into(),
                    ));
                }
                self.partial = Some(p);
                return Ok(Parsed::Incomplete);
            };
            let len = parse_len(&buf[pos + 1..end])
                .filter(|&n| n >= 0 && n as usize <= MAX_BULK_LEN)
                .ok_or_else(|| ParseError("Protocol error: invalid bulk length".into()))?
                as usize;
            if self.unauthenticated && len > 16384 {
                return Err(ParseError(
                    "Protocol error: unauthenticated bulk length".into(),
                ));
            }
            let start = end + 2;
            let stop = start + len;
            // Like Redis, the two bytes after the data are skipped, not checked.
            if buf.len() < stop + 2 {
                self.partial = Some(p);
                return Ok(Parsed::Incomplete);
            }
            p.args.push((start, stop));
            p.pos = stop + 2;
            p.remaining -= 1;
        }
        Ok(Parsed::Request(Frame::Multi(p.args), p.pos))
    }

    /// Bytes the current partial request is known to need before parsing can progress.
    pub fn in_progress(&self) -> bool {
        self.partial.is_some()
    }
}

/// One-shot parse of the front of `buf` (no resumption), returning owned arguments.
pub fn parse_request(buf: &Bytes) -> Result<(Request, usize), Option<ParseError>> {
    match RequestParser::new().parse(buf) {
        Ok(Parsed::Request(frame, used)) => Ok((frame.into_args(buf), used)),
        Ok(Parsed::Incomplete) => Err(None),
        Err(e) => Err(Some(e)),
    }
}

/// Finds `\r\n` from `from`; returns the index of `\r`.
fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        let rel = buf[i..].iter().position(|&b| b == b'\r')?;
        let at = i + rel;
        if at + 1 >= buf.len() {
            return None;
        }
        if buf[at + 1] == b'\n' {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// Parses a length line as Redis' string2ll does: optional '-', digits with no leading zero
/// (a lone "0" aside), no overflow.
fn parse_len(digits: &[u8]) -> Option<i64> {
    crate::protocol::string2ll(digits)
}

fn parse_inline(buf: &[u8]) -> Result<Parsed, ParseError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_INLINE_LEN {
            return Err(ParseError("Protocol error: too big inline request".into()));
        }
        return Ok(Parsed::Incomplete);
    };
    let consumed = nl + 1;
    let line = if nl > 0 && buf[nl - 1] == b'\r' {
        &buf[..nl - 1]
    } else {
        &buf[..nl]
    };
    let args = split_args(line)
        .ok_or_else(|| ParseError("Protocol error: unbalanced quotes in request".into()))?;
    Ok(Parsed::Request(Frame::Inline(args), consumed))
}

/// Splits an inline command line like Redis' sdssplitargs: whitespace separates, "double quotes"
/// take \n \r \t \b \a \\ \" and \xHH escapes, 'single quotes' take \' only. None = unbalanced.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                let c = *line.get(i)?;
                if c == b'\\' && i + 3 < line.len() && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        cur.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < line.len() {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    // A closing quote must be followed by a space or the end.
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return None;
                    }
                    inq = false;
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
                i += 1;
            } else if insq {
                let c = *line.get(i)?;
                if c == b'\\' && i + 1 < line.len() && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return None;
                    }
                    insq = false;
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
                i += 1;
            } else {
                match line.get(i) {
                    None => break,
                    Some(&c) if is_space(c) => break,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(&c) => cur.push(c),
                }
                i += 1;
            }
        }
        if inq || insq {
            return None;
        }
        out.push(Bytes::from(cur));
    }
}

/// C's isspace(), which Redis' inline splitting uses (includes \v and \f).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(s: &[u8]) -> Result<Option<(Vec<String>, usize)>, String> {
        let b = Bytes::copy_from_slice(s);
        match parse_request(&b) {
            Ok((args, used)) => Ok(Some((
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect(),
                used,
            ))),
            Err(None) => Ok(None),
            Err(Some(e)) => Err(e.0.into_owned()),
        }
    }

    fn args(v: &[&str], used: usize) -> Result<Option<(Vec<String>, usize)>, String> {
        Ok(Some((v.iter().map(|s| s.to_string()).collect(), used)))
    }

    #[test]
    fn multibulk() {
        assert_eq!(
            req(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nextra"),
            args(&["GET", "k"], 20)
        );
        assert_eq!(req(b"*2\r\n$3\r\nGET\r\n$1\r\n"), Ok(None));
        assert_eq!(req(b"*2\r"), Ok(None));
        assert_eq!(req(b"*0\r\n"), args(&[], 4));
        assert_eq!(req(b"*-1\r\n"), args(&[], 5));
    }

    #[test]
    fn resumes_where_it_stopped() {
        let full = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        let mut p = RequestParser::new();
        for cut in 1..full.len() {
            assert_eq!(
                p.parse(&full[..cut]).unwrap(),
                Parsed::Incomplete,
                "cut {cut}"
            );
        }
        match p.parse(full).unwrap() {
            Parsed::Request(f, used) => {
                assert_eq!(used, full.len());
                let args = f.into_args(&Bytes::copy_from_slice(full));
                assert_eq!(args, vec!["SET", "k", "hello"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn multibulk_errors() {
        let e = |s: &[u8]| req(s).unwrap_err();
        assert_eq!(e(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            e(b"*1048577\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(
            e(b"*1\r\n$536870913\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(e(b"*1\r\n$-1\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(e(b"*1\r\n:1\r\n"), "Protocol error: expected '$', got ':'");
        let long = vec![b'1'; MAX_INLINE_LEN + 10];
        let mut mb = b"*".to_vec();
        mb.extend_from_slice(&long);
        assert_eq!(e(&mb), "Protocol error: too big mbulk count string");
        let mut inl = b"GET ".to_vec();
        inl.extend_from_slice(&long);
        assert_eq!(e(&inl), "Protocol error: too big inline request");
    }

    #[test]
    fn inline() {
        assert_eq!(req(b"PING\r\n"), args(&["PING"], 6));
        assert_eq!(
            req(b"set k \"a b\\n\" 'c'\n"),
            args(&["set", "k", "a b\n", "c"], 18)
        );
        assert_eq!(req(b"\r\n"), args(&[], 2));
        assert_eq!(req(b"PING"), Ok(None));
        assert_eq!(
            req(b"set \"k\r\n").unwrap_err(),
            "Protocol error: unbalanced quotes in request"
        );
        assert_eq!(req(b"echo \"\\x41\\x4a\"\r\n"), args(&["echo", "AJ"], 17));
    }
}

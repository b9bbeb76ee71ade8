//! The wire formats strata-bench speaks: requests written straight into a connection's output
//! buffer, and replies recognised in its input buffer, for RESP, memcached text and memcached
//! binary.
//!
//! A reply is only classified (stored, hit, miss, error) and measured (how many bytes it took);
//! its contents are not copied, so the load path allocates nothing per request or reply.
//!
//! Never: trusts a length the server sent beyond the bytes it has (a short buffer means "wait
//! for more", a malformed one is a [`ProtocolError`]); panics on any bytes a server can send.

use std::fmt;

/// The protocol a run speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// Redis' RESP (GET, SET, PUBLISH).
    Resp,
    /// memcached's text protocol (get, set).
    Memcache,
    /// memcached's binary protocol (GET and SET opcodes).
    MemcacheBinary,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Resp => "resp",
            Protocol::Memcache => "memcache",
            Protocol::MemcacheBinary => "memcache-binary",
        }
    }
}

/// What a request asks for; replies are matched to requests in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Get,
    Set,
    Publish,
}

/// What a reply says, as far as the statistics care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Stored, published, or any other non-error reply without a value.
    Done,
    /// A GET that found its key.
    Hit,
    /// A GET that did not.
    Miss,
    /// An error reply (`-ERR`, `SERVER_ERROR`, a binary status other than "not found").
    Error,
}

/// Bytes that are no reply of the protocol: the connection cannot be trusted past them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed reply: {}", self.0)
    }
}

/// `Ok(None)`: the buffer holds only the start of a reply.
pub type Parsed = Result<Option<(Outcome, usize)>, ProtocolError>;

/// Appends a GET of `key`.
pub fn encode_get(protocol: Protocol, key: &[u8], out: &mut Vec<u8>) {
    match protocol {
        Protocol::Resp => encode_resp(&[b"GET", key], out),
        Protocol::Memcache => {
            out.extend_from_slice(b"get ");
            out.extend_from_slice(key);
            out.extend_from_slice(b"\r\n");
        }
        Protocol::MemcacheBinary => {
            binary_header(OPCODE_GET, key.len(), 0, key.len(), out);
            out.extend_from_slice(key);
        }
    }
}

/// Appends a SET of `key` to `value`, expiring after `ttl_s` seconds when it is not 0.
pub fn encode_set(protocol: Protocol, key: &[u8], value: &[u8], ttl_s: u32, out: &mut Vec<u8>) {
    match protocol {
        Protocol::Resp if ttl_s == 0 => encode_resp(&[b"SET", key, value], out),
        Protocol::Resp => {
            let mut ttl = itoa::Buffer::new();
            encode_resp(
                &[b"SET", key, value, b"EX", ttl.format(ttl_s).as_bytes()],
                out,
            )
        }
        Protocol::Memcache => {
            let mut ttl = itoa::Buffer::new();
            let mut len = itoa::Buffer::new();
            out.extend_from_slice(b"set ");
            out.extend_from_slice(key);
            out.extend_from_slice(b" 0 ");
            out.extend_from_slice(ttl.format(ttl_s).as_bytes());
            out.push(b' ');
            out.extend_from_slice(len.format(value.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        Protocol::MemcacheBinary => {
            binary_header(OPCODE_SET, key.len(), 8, 8 + key.len() + value.len(), out);
            out.extend_from_slice(&0u32.to_be_bytes()); // flags
            out.extend_from_slice(&ttl_s.to_be_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(value);
        }
    }
}

/// Appends a RESP command (an array of bulk strings).
pub fn encode_resp(args: &[&[u8]], out: &mut Vec<u8>) {
    let mut n = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(n.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        out.extend_from_slice(n.format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// The first reply in `buf`, and how many bytes it takes.
pub fn parse_reply(protocol: Protocol, buf: &[u8]) -> Parsed {
    match protocol {
        Protocol::Resp => parse_resp(buf),
        Protocol::Memcache => parse_memcache(buf),
        Protocol::MemcacheBinary => parse_binary(buf),
    }
}

const OPCODE_GET: u8 = 0x00;
const OPCODE_SET: u8 = 0x01;
const BINARY_HEADER: usize = 24;
const BINARY_STATUS_NOT_FOUND: u16 = 0x0001;

fn binary_header(opcode: u8, key_len: usize, extras_len: u8, body_len: usize, out: &mut Vec<u8>) {
    out.push(0x80); // request magic
    out.push(opcode);
    // Keys and values are bounded by the command line (key prefix + a u64, --value-size).
    out.extend_from_slice(&(key_len.min(u16::MAX as usize) as u16).to_be_bytes());
    out.push(extras_len);
    out.push(0); // data type
    out.extend_from_slice(&0u16.to_be_bytes()); // vbucket
    out.extend_from_slice(&(body_len.min(u32::MAX as usize) as u32).to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes()); // opaque
    out.extend_from_slice(&0u64.to_be_bytes()); // cas
}

/// The line at the start of `buf` without its CRLF, and the length with it.
fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtocolError> {
    match buf.iter().position(|&b| b == b'\n') {
        None if buf.len() > 64 * 1024 => Err(ProtocolError("a line longer than 64 KiB".into())),
        None => Ok(None),
        Some(0) => Err(ProtocolError("a line without CR".into())),
        Some(i) if buf[i - 1] != b'\r' => Err(ProtocolError("a line without CR".into())),
        Some(i) => Ok(Some((&buf[..i - 1], i + 1))),
    }
}

fn int(digits: &[u8], what: &str) -> Result<i64, ProtocolError> {
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            ProtocolError(format!(
                "{what} {:?} is not a number",
                String::from_utf8_lossy(digits)
            ))
        })
}

fn parse_resp(buf: &[u8]) -> Parsed {
    parse_resp_at(buf, 0)
}

/// Nesting past this is no reply a benchmark can get; refusing it bounds the recursion.
const MAX_RESP_DEPTH: usize = 16;

fn parse_resp_at(buf: &[u8], depth: usize) -> Parsed {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    let Some((head, head_len)) = line(buf)? else {
        return Ok(None);
    };
    let body = &head[1..];
    match kind {
        b'+' | b':' | b',' | b'#' => Ok(Some((Outcome::Done, head_len))),
        b'_' => Ok(Some((Outcome::Miss, head_len))),
        b'-' => Ok(Some((Outcome::Error, head_len))),
        b'$' | b'=' | b'!' => {
            let len = int(body, "bulk length")?;
            if len < 0 {
                return Ok(Some((Outcome::Miss, head_len)));
            }
            let end = span(head_len, len, 2)?;
            if buf.len() < end {
                return Ok(None);
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err(ProtocolError("bulk string not ended by CRLF".into()));
            }
            let outcome = if kind == b'!' {
                Outcome::Error
            } else {
                Outcome::Hit
            };
            Ok(Some((outcome, end)))
        }
        b'*' | b'>' | b'~' | b'%' => {
            let count = int(body, "array length")?;
            if count < 0 {
                return Ok(Some((Outcome::Miss, head_len)));
            }
            if depth >= MAX_RESP_DEPTH {
                return Err(ProtocolError("arrays nested too deep".into()));
            }
            let items = if kind == b'%' { count * 2 } else { count };
            let mut at = head_len;
            for _ in 0..items {
                match parse_resp_at(&buf[at..], depth + 1)? {
                    Some((_, n)) => at += n,
                    None => return Ok(None),
                }
            }
            Ok(Some((Outcome::Done, at)))
        }
        other => Err(ProtocolError(format!(
            "RESP type byte {:?}",
            char::from(other)
        ))),
    }
}

fn parse_memcache(buf: &[u8]) -> Parsed {
    let Some((head, head_len)) = line(buf)? else {
        return Ok(None);
    };
    if head == b"STORED" {
        return Ok(Some((Outcome::Done, head_len)));
    }
    if head == b"END" {
        return Ok(Some((Outcome::Miss, head_len)));
    }
    if head.starts_with(b"VALUE ") {
        // VALUE <key> <flags> <bytes> [<cas>], then the data, CRLF, and END for a one-key get.
        let len = head
            .split(|&b| b == b' ')
            .nth(3)
            .ok_or_else(|| ProtocolError("VALUE line without a length".into()))?;
        let len = int(len, "VALUE length")?;
        let data_end = span(head_len, len, 0)?;
        let end = data_end + 2 + b"END\r\n".len();
        if buf.len() < end {
            return Ok(None);
        }
        if &buf[data_end..end] != b"\r\nEND\r\n" {
            return Err(ProtocolError("VALUE data not followed by END".into()));
        }
        return Ok(Some((Outcome::Hit, end)));
    }
    let error_words: [&[u8]; 6] = [
        b"ERROR",
        b"CLIENT_ERROR",
        b"SERVER_ERROR",
        b"NOT_STORED",
        b"EXISTS",
        b"NOT_FOUND",
    ];
    if error_words.iter().any(|w| head.starts_with(w)) {
        return Ok(Some((Outcome::Error, head_len)));
    }
    Err(ProtocolError(format!(
        "memcached reply {:?}",
        String::from_utf8_lossy(&head[..head.len().min(80)])
    )))
}

/// `start + len + tail`, for a length the server sent: an error when it is negative or absurd.
fn span(start: usize, len: i64, tail: usize) -> Result<usize, ProtocolError> {
    usize::try_from(len)
        .ok()
        .filter(|&len| len < 1 << 40)
        .map(|len| start + len + tail)
        .ok_or_else(|| ProtocolError(format!("length {len}")))
}

fn parse_binary(buf: &[u8]) -> Parsed {
    if buf.len() < BINARY_HEADER {
        return Ok(None);
    }
    if buf[0] != 0x81 {
        return Err(ProtocolError(format!(
            "binary response magic {:#04x}",
            buf[0]
        )));
    }
    let status = u16::from_be_bytes([buf[6], buf[7]]);
    let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    let end = BINARY_HEADER + body;
    if buf.len() < end {
        return Ok(None);
    }
    let outcome = match (status, buf[1]) {
        (0, OPCODE_GET) => Outcome::Hit,
        (0, _) => Outcome::Done,
        (BINARY_STATUS_NOT_FOUND, OPCODE_GET) => Outcome::Miss,
        _ => Outcome::Error,
    };
    Ok(Some((outcome, end)))
}

/// The bulk strings of a RESP array of bulk strings (a pub/sub message), and its length.
/// `Ok(None)` while incomplete; an error for anything else.
pub fn parse_bulk_array(buf: &[u8], out: &mut Vec<(usize, usize)>) -> Parsed {
    out.clear();
    let Some((head, head_len)) = line(buf)? else {
        return Ok(None);
    };
    if head.first() != Some(&b'*') && head.first() != Some(&b'>') {
        return match parse_resp(buf)? {
            Some((Outcome::Error, n)) => Ok(Some((Outcome::Error, n))),
            Some(_) => Err(ProtocolError("expected an array".into())),
            None => Ok(None),
        };
    }
    let count = int(&head[1..], "array length")?;
    let mut at = head_len;
    for _ in 0..count.max(0) {
        let Some((item, item_head)) = line(&buf[at..])? else {
            return Ok(None);
        };
        match item.first() {
            Some(b'$') => {
                let start = at + item_head;
                let end = span(start, int(&item[1..], "bulk length")?, 0)?;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                out.push((start, end));
                at = end + 2;
            }
            Some(b':') => {
                out.push((at + 1, at + item_head - 2));
                at += item_head;
            }
            _ => return Err(ProtocolError("array item is not a bulk string".into())),
        }
    }
    Ok(Some((Outcome::Done, at)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(protocol: Protocol, reply: &[u8]) -> Outcome {
        for cut in 0..reply.len() {
            assert_eq!(
                parse_reply(protocol, &reply[..cut]),
                Ok(None),
                "{cut} bytes of {:?}",
                String::from_utf8_lossy(reply)
            );
        }
        let mut more = reply.to_vec();
        more.extend_from_slice(b"+NEXT");
        let (outcome, n) = parse_reply(protocol, &more).unwrap().unwrap();
        assert_eq!(n, reply.len());
        outcome
    }

    #[test]
    fn resp_replies_are_classified_and_measured() {
        assert_eq!(whole(Protocol::Resp, b"+OK\r\n"), Outcome::Done);
        assert_eq!(whole(Protocol::Resp, b"-ERR no\r\n"), Outcome::Error);
        assert_eq!(whole(Protocol::Resp, b"$-1\r\n"), Outcome::Miss);
        assert_eq!(whole(Protocol::Resp, b"$3\r\nabc\r\n"), Outcome::Hit);
        assert_eq!(whole(Protocol::Resp, b":12\r\n"), Outcome::Done);
        assert_eq!(
            whole(Protocol::Resp, b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n"),
            Outcome::Done
        );
        assert!(parse_reply(Protocol::Resp, b"?x\r\n").is_err());
        assert!(parse_reply(Protocol::Resp, b"$3\r\nabcd\r\n").is_err());
    }

    #[test]
    fn memcache_text_replies_are_classified_and_measured() {
        assert_eq!(whole(Protocol::Memcache, b"STORED\r\n"), Outcome::Done);
        assert_eq!(whole(Protocol::Memcache, b"END\r\n"), Outcome::Miss);
        assert_eq!(
            whole(Protocol::Memcache, b"VALUE k 0 3\r\nabc\r\nEND\r\n"),
            Outcome::Hit
        );
        assert_eq!(
            whole(Protocol::Memcache, b"SERVER_ERROR out of memory\r\n"),
            Outcome::Error
        );
        assert!(parse_reply(Protocol::Memcache, b"HELLO\r\n").is_err());
    }

    #[test]
    fn memcache_binary_replies_are_classified_and_measured() {
        let reply = |opcode: u8, status: u16, body: &[u8]| {
            let mut r = vec![0x81, opcode, 0, 0, 0, 0];
            r.extend_from_slice(&status.to_be_bytes());
            r.extend_from_slice(&(body.len() as u32).to_be_bytes());
            r.extend_from_slice(&[0; 12]);
            r.extend_from_slice(body);
            r
        };
        let b = Protocol::MemcacheBinary;
        assert_eq!(whole(b, &reply(OPCODE_SET, 0, b"")), Outcome::Done);
        assert_eq!(whole(b, &reply(OPCODE_GET, 0, b"flagabc")), Outcome::Hit);
        assert_eq!(whole(b, &reply(OPCODE_GET, 1, b"Not found")), Outcome::Miss);
        assert_eq!(whole(b, &reply(OPCODE_SET, 0x82, b"")), Outcome::Error);
    }

    #[test]
    fn requests_are_encoded_per_protocol() {
        let mut out = Vec::new();
        encode_set(Protocol::Resp, b"k", b"vv", 0, &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n");
        out.clear();
        encode_set(Protocol::Resp, b"k", b"v", 5, &mut out);
        assert_eq!(
            out,
            b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nEX\r\n$1\r\n5\r\n"
        );
        out.clear();
        encode_set(Protocol::Memcache, b"k", b"vv", 0, &mut out);
        assert_eq!(out, b"set k 0 0 2\r\nvv\r\n");
        out.clear();
        encode_get(Protocol::Memcache, b"k", &mut out);
        assert_eq!(out, b"get k\r\n");
        out.clear();
        encode_set(Protocol::MemcacheBinary, b"k", b"vv", 0, &mut out);
        assert_eq!(out.len(), 24 + 8 + 1 + 2);
        assert_eq!(&out[..2], &[0x80, OPCODE_SET]);
        assert_eq!(&out[8..12], &11u32.to_be_bytes());
    }

    #[test]
    fn pubsub_messages_split_into_their_parts() {
        let msg = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n";
        let mut parts = Vec::new();
        let (_, n) = parse_bulk_array(msg, &mut parts).unwrap().unwrap();
        assert_eq!(n, msg.len());
        let words: Vec<&[u8]> = parts.iter().map(|&(a, b)| &msg[a..b]).collect();
        assert_eq!(words, [&b"message"[..], b"ch", b"hello"]);
        assert_eq!(parse_bulk_array(&msg[..20], &mut parts), Ok(None));
        let sub = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
        let (_, n) = parse_bulk_array(sub, &mut parts).unwrap().unwrap();
        assert_eq!(n, sub.len());
        assert_eq!(&sub[parts[2].0..parts[2].1], b"1");
    }
}

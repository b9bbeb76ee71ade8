//! memcached's text protocol (and the meta commands' framing): request lines and data blocks
//! in, [`Cmd`]s out, parsed exactly as memcached 1.6 parses them (its tokenizer, its number
//! parsing, its token counts and its error words), so a client sees the same replies.
//!
//! A bad line is answered and skipped on its own; a store's data block is read only when its
//! length was accepted (a too-large one is skipped as it streams by, never buffered), so the
//! next command is never lost. A line with no end within 2 KiB closes the connection (a
//! multi-key get may run to [`MAX_GET_LINE`]), as memcached does.
//!
//! Never: knows about storage or sessions; panics or allocates without bound on any input.

use bytes::Bytes;
use smallvec::SmallVec;

use super::item_fits;
use super::meta::{self, MetaCmd};

/// Longest key memcached accepts.
pub const KEY_MAX: usize = 250;
/// A line without its end past this closes the connection (memcached's read buffer)...
const MAX_LINE: usize = 2048;
/// ...unless it is a get, whose keys may run to this.
pub const MAX_GET_LINE: usize = 4 << 20;
/// memcached's MAX_TOKENS: a line is cut into at most this many tokens less one, the rest of
/// the line kept for get's keys.
const MAX_TOKENS: usize = 24;

/// The keys of a get (most gets name one: no allocation for them).
pub type Keys = SmallVec<[Bytes; 2]>;

/// How a store treats an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreCmd {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

/// One text-protocol request.
#[derive(Clone, Debug, PartialEq)]
pub enum Cmd {
    /// get, gets, gat, gats: `touch` is gat's exptime.
    Get {
        keys: Keys,
        cas: bool,
        touch: Option<i32>,
    },
    Store {
        cmd: StoreCmd,
        key: Bytes,
        flags: u32,
        exptime: i32,
        cas: u64,
        data: Bytes,
        noreply: bool,
    },
    Delete {
        key: Bytes,
        noreply: bool,
    },
    Arith {
        key: Bytes,
        incr: bool,
        delta: u64,
        noreply: bool,
    },
    Touch {
        key: Bytes,
        exptime: i32,
        noreply: bool,
    },
    FlushAll {
        delay: i32,
        noreply: bool,
    },
    /// `stats` with its arguments.
    Stats(Vec<Bytes>),
    Version,
    Verbosity {
        noreply: bool,
    },
    Quit,
    /// `mn`: flushes the replies so far.
    MetaNoop,
    Meta(MetaCmd),
    /// A reply the request gets at once (errors), unless `noreply` hides it.
    Reply {
        text: String,
        noreply: bool,
    },
    /// memcached's text authentication: the `set` carrying "user password".
    Auth {
        user: Bytes,
        pass: Bytes,
    },
}

/// What [`TextParser::parse`] found at the front of the input.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A request and how many bytes it took.
    Cmd(Cmd, usize),
    /// Bytes of a refused data block skipped (nothing to answer).
    Skipped(usize),
    /// More input is needed.
    Incomplete,
    /// The connection must close (a line too long, an HTTP request).
    Close,
}

/// Parser state of one connection: the bytes of a refused data block still to skip.
pub struct TextParser {
    skip: usize,
    max_item: u64,
    /// After Incomplete: the input length the request needs (0: unknown, a line still open).
    want: usize,
}

/// The line's tokens, split on spaces as memcached's tokenize_command does: at most
/// `MAX_TOKENS - 1`, then what remains of the line.
struct Tokens<'a> {
    /// Never more than `MAX_TOKENS - 1`: no allocation per line.
    list: SmallVec<[&'a [u8]; MAX_TOKENS]>,
    rest: Option<&'a [u8]>,
}

impl Tokens<'_> {
    /// memcached's ntokens: the tokens plus its terminal one.
    fn n(&self) -> usize {
        self.list.len() + 1
    }

    fn get(&self, i: usize) -> &[u8] {
        self.list.get(i).copied().unwrap_or(b"")
    }
}

fn tokenize(line: &[u8]) -> Tokens<'_> {
    let mut list = SmallVec::new();
    let mut i = 0;
    while i < line.len() {
        if line[i] == b' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < line.len() && line[i] != b' ' {
            i += 1;
        }
        list.push(&line[start..i]);
        if list.len() == MAX_TOKENS - 1 {
            // memcached steps past the one separator after the last token it takes.
            let rest = &line[(i + 1).min(line.len())..];
            let rest = (i < line.len()).then_some(rest);
            return Tokens { list, rest };
        }
    }
    Tokens { list, rest: None }
}

/// C's strtoll/strtoull front: optional spaces, an optional sign, digits. Returns (negative,
/// magnitude, digits seen, the rest) or None when the number overflows (ERANGE).
fn c_number(s: &[u8]) -> Option<(bool, u64, bool, &[u8])> {
    let mut i = 0;
    while i < s.len() && super::is_c_space(s[i]) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let start = i;
    let mut n: u64 = 0;
    let mut overflow = false;
    while i < s.len() && s[i].is_ascii_digit() {
        match n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(s[i] - b'0')))
        {
            Some(v) => n = v,
            None => overflow = true,
        }
        i += 1;
    }
    if overflow {
        return None;
    }
    Some((neg, n, i > start, &s[i..]))
}

/// memcached's check after strto*: the number ends the token or is followed by a space.
fn ends_well(rest: &[u8]) -> bool {
    rest.first().is_none_or(|&c| super::is_c_space(c))
}

/// memcached's safe_strtol into an int32_t (a long parsed, then truncated).
pub fn safe_strtol(s: &[u8]) -> Option<i32> {
    let (neg, n, digits, rest) = c_number(s)?;
    if !digits || !ends_well(rest) {
        return None;
    }
    let v: i64 = if neg {
        if n > i64::MAX as u64 + 1 {
            return None;
        }
        (n as i64).wrapping_neg()
    } else {
        i64::try_from(n).ok()?
    };
    Some(v as i32)
}

/// memcached's safe_strtoull.
pub fn safe_strtoull(s: &[u8]) -> Option<u64> {
    let (neg, n, digits, rest) = c_number(s)?;
    if !digits || !ends_well(rest) {
        return None;
    }
    let v = if neg { n.wrapping_neg() } else { n };
    if (v as i64) < 0 && s.contains(&b'-') {
        return None;
    }
    Some(v)
}

/// memcached's safe_strtoul into a uint32_t (an unsigned long parsed, then truncated).
pub fn safe_strtoul(s: &[u8]) -> Option<u32> {
    safe_strtoull(s).map(|v| v as u32)
}

fn reply(text: &str, noreply: bool) -> Cmd {
    Cmd::Reply {
        text: text.to_string(),
        noreply,
    }
}

const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";

impl TextParser {
    pub fn new(max_item: u64) -> TextParser {
        TextParser {
            skip: 0,
            max_item,
            want: 0,
        }
    }

    /// Parses the request at the front of `src`; keys and values are slices of it (no copy).
    /// With `auth` the connection is not yet authenticated: only the authentication `set` is
    /// read (memcached's asciiauth).
    pub fn parse(&mut self, src: &Bytes, auth: bool) -> Parsed {
        let buf: &[u8] = src;
        self.want = 0;
        if self.skip > 0 {
            if buf.is_empty() {
                return Parsed::Incomplete;
            }
            let n = self.skip.min(buf.len());
            self.skip -= n;
            return Parsed::Skipped(n);
        }
        let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
            if buf.len() > MAX_LINE && !(get_line(buf) && buf.len() <= MAX_GET_LINE) {
                return Parsed::Close;
            }
            return Parsed::Incomplete;
        };
        let mut line = &buf[..nl];
        if line.len() > 1 && line[line.len() - 1] == b'\r' {
            line = &line[..line.len() - 1];
        }
        let used = nl + 1;
        if auth {
            return self.parse_auth(src, line, used);
        }
        if let Some(key) = line.strip_prefix(b"get ") {
            // The most common line, one key: what the tokenizer would make of it, without it.
            if !key.is_empty() && key.len() <= KEY_MAX && !key.contains(&b' ') {
                let cmd = Cmd::Get {
                    keys: smallvec::smallvec![src.slice_ref(key)],
                    cas: false,
                    touch: None,
                };
                return Parsed::Cmd(cmd, used);
            }
        }
        let t = tokenize(line);
        let n = t.n();
        if n < 2 || t.get(0).len() < 2 {
            return Parsed::Cmd(reply("ERROR", false), used);
        }
        let name = t.get(0);
        let want = |ok: bool| -> Option<Parsed> {
            (!ok).then(|| Parsed::Cmd(reply("ERROR", false), used))
        };
        let cmd = match name {
            b"get" | b"gets" | b"gat" | b"gats" | b"bget" => {
                if let Some(p) = want(n >= 3) {
                    return p;
                }
                return Parsed::Cmd(get_cmd(src, name, &t), used);
            }
            b"set" | b"add" | b"replace" | b"append" | b"prepend" => {
                if let Some(p) = want(n == 6 || n == 7) {
                    return p;
                }
                return self.store(src, name, &t, used);
            }
            b"cas" => {
                if let Some(p) = want(n == 7 || n == 8) {
                    return p;
                }
                return self.store(src, name, &t, used);
            }
            b"incr" | b"decr" => {
                if let Some(p) = want(n == 4 || n == 5) {
                    return p;
                }
                arith(src, name == b"incr", &t)
            }
            b"delete" => {
                if let Some(p) = want((3..=5).contains(&n)) {
                    return p;
                }
                delete(src, &t)
            }
            b"touch" => {
                if let Some(p) = want(n == 4 || n == 5) {
                    return p;
                }
                touch(src, &t)
            }
            b"flush_all" => {
                if let Some(p) = want((2..=4).contains(&n)) {
                    return p;
                }
                flush_all(&t)
            }
            b"version" => Cmd::Version,
            b"quit" => Cmd::Quit,
            b"verbosity" => {
                if let Some(p) = want(n == 3 || n == 4) {
                    return p;
                }
                let noreply = noreply(&t);
                match safe_strtoul(t.get(1)) {
                    Some(_) => Cmd::Verbosity { noreply },
                    None => reply(BAD_FORMAT, noreply),
                }
            }
            b"stats" => Cmd::Stats(t.list[1..].iter().map(|s| src.slice_ref(s)).collect()),
            b"mn" => Cmd::MetaNoop,
            b"mg" | b"md" | b"ma" | b"me" => meta::parse(src, name, &t.list, n),
            b"ms" => return self.meta_set(src, &t, used),
            _ if name.len() == 2 && name[0] == b'm' => reply("ERROR", false),
            _ => {
                // memcached drops a connection that speaks HTTP.
                if t.list.last().is_some_and(|l| l.starts_with(b"HTTP/")) {
                    return Parsed::Close;
                }
                reply("ERROR", false)
            }
        };
        Parsed::Cmd(cmd, used)
    }

    /// After [`TextParser::parse`] said Incomplete: the input length that request needs to be
    /// whole (its line and data block), or 0 when unknown (its line has not ended).
    pub fn wanted(&self) -> usize {
        self.want
    }

    /// The data block of a store whose line ended at `used`: None while incomplete, else the
    /// value (or the bad-chunk error) and the bytes taken in all.
    fn data_block(src: &Bytes, used: usize, vlen: usize) -> Option<(Result<Bytes, ()>, usize)> {
        let buf: &[u8] = src;
        let end = used.checked_add(vlen)?.checked_add(2)?;
        if buf.len() < end {
            return None;
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Some((Err(()), end));
        }
        Some((Ok(src.slice(used..end - 2)), end))
    }

    /// A refused data block of `vlen` bytes: what of it is here is taken now, the rest later.
    fn refuse(&mut self, text: &str, noreply: bool, buf: &[u8], used: usize, vlen: u64) -> Parsed {
        let total = vlen.saturating_add(2);
        let here = (buf.len() - used) as u64;
        let take = total.min(here);
        self.skip = (total - take) as usize;
        Parsed::Cmd(reply(text, noreply), used + take as usize)
    }

    fn store(&mut self, src: &Bytes, name: &[u8], t: &Tokens, used: usize) -> Parsed {
        let buf: &[u8] = src;
        let noreply = noreply(t);
        let key = t.get(1);
        if key.len() > KEY_MAX {
            return Parsed::Cmd(reply(BAD_FORMAT, noreply), used);
        }
        let (Some(flags), Some(exptime), Some(vlen)) = (
            safe_strtoul(t.get(2)),
            safe_strtol(t.get(3)),
            safe_strtol(t.get(4)),
        ) else {
            return Parsed::Cmd(reply(BAD_FORMAT, noreply), used);
        };
        let cmd = match name {
            b"set" => StoreCmd::Set,
            b"add" => StoreCmd::Add,
            b"replace" => StoreCmd::Replace,
            b"append" => StoreCmd::Append,
            b"prepend" => StoreCmd::Prepend,
            _ => StoreCmd::Cas,
        };
        let mut cas = 0;
        if cmd == StoreCmd::Cas {
            match safe_strtoull(t.get(5)) {
                Some(c) => cas = c,
                None => return Parsed::Cmd(reply(BAD_FORMAT, noreply), used),
            }
        }
        if !(0..=i32::MAX - 2).contains(&vlen) {
            return Parsed::Cmd(reply(BAD_FORMAT, noreply), used);
        }
        if !item_fits(key.len(), vlen as u64, self.max_item) {
            return self.refuse(
                "SERVER_ERROR object too large for cache",
                noreply,
                buf,
                used,
                vlen as u64,
            );
        }
        let Some((data, end)) = Self::data_block(src, used, vlen as usize) else {
            self.want = used + vlen as usize + 2;
            return Parsed::Incomplete;
        };
        match data {
            Err(()) => Parsed::Cmd(reply("CLIENT_ERROR bad data chunk", noreply), end),
            Ok(data) => Parsed::Cmd(
                Cmd::Store {
                    cmd,
                    key: src.slice_ref(key),
                    flags,
                    exptime,
                    cas,
                    data,
                    noreply,
                },
                end,
            ),
        }
    }

    fn meta_set(&mut self, src: &Bytes, t: &Tokens, used: usize) -> Parsed {
        let buf: &[u8] = src;
        match meta::parse_set_line(src, &t.list, t.n()) {
            meta::SetLine::Error(text) => Parsed::Cmd(reply(&text, false), used),
            meta::SetLine::Refuse(text, vlen) => self.refuse(&text, false, buf, used, vlen),
            meta::SetLine::Ok(req, vlen) => {
                if !item_fits(req.key.len(), vlen, self.max_item) {
                    return self.refuse(
                        "SERVER_ERROR object too large for cache",
                        false,
                        buf,
                        used,
                        vlen,
                    );
                }
                let Some((data, end)) = Self::data_block(src, used, vlen as usize) else {
                    self.want = used + vlen as usize + 2;
                    return Parsed::Incomplete;
                };
                match data {
                    Err(()) => Parsed::Cmd(reply("CLIENT_ERROR bad data chunk", false), end),
                    Ok(data) => Parsed::Cmd(Cmd::Meta(MetaCmd::Set(req, data)), end),
                }
            }
        }
    }

    /// memcached's asciiauth: "set <key> <flags> <exptime> <len>\r\nuser pass\r\n".
    fn parse_auth(&mut self, src: &Bytes, line: &[u8], used: usize) -> Parsed {
        let buf: &[u8] = src;
        let t = tokenize(line);
        let size = safe_strtoul(t.get(4));
        let (true, Some(size)) = (t.n() >= 6 && t.get(0) == b"set", size) else {
            return Parsed::Cmd(reply("CLIENT_ERROR unauthenticated", false), used);
        };
        let end = used + size as usize + 2;
        if buf.len() < end {
            if end - used > MAX_LINE {
                return Parsed::Close;
            }
            return Parsed::Incomplete;
        }
        let payload = &buf[used..end];
        if &payload[payload.len() - 2..] != b"\r\n" {
            return Parsed::Cmd(
                reply("CLIENT_ERROR bad command line termination", false),
                end,
            );
        }
        let words = tokenize(&payload[..payload.len() - 2]);
        if words.n() < 3 {
            return Parsed::Cmd(
                reply("CLIENT_ERROR bad authentication token format", false),
                end,
            );
        }
        Parsed::Cmd(
            Cmd::Auth {
                user: src.slice_ref(words.get(0)),
                pass: src.slice_ref(words.get(1)),
            },
            end,
        )
    }
}

/// A line that may run long: a get with many keys.
fn get_line(buf: &[u8]) -> bool {
    let spaces = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[spaces..];
    spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

/// memcached's set_noreply_maybe: the last token is "noreply".
fn noreply(t: &Tokens) -> bool {
    t.list.last().is_some_and(|l| *l == b"noreply")
}

fn get_cmd(src: &Bytes, name: &[u8], t: &Tokens) -> Cmd {
    let touch = name.starts_with(b"gat");
    let cas = name == b"gets" || name == b"gats";
    let mut first = 1;
    let mut exptime = None;
    if touch {
        match safe_strtol(t.get(1)) {
            Some(e) => exptime = Some(e),
            None => return reply("CLIENT_ERROR invalid exptime argument", false),
        }
        first = 2;
    }
    let first = &t.list[first.min(t.list.len())..];
    let mut keys = Keys::new();
    // False at a key memcached refuses.
    let mut take = |list: &[&[u8]]| {
        for k in list {
            if k.len() > KEY_MAX {
                return false;
            }
            keys.push(src.slice_ref(k));
        }
        true
    };
    if !take(first) {
        return reply(BAD_FORMAT, false);
    }
    let mut rest = t.rest;
    while let Some(r) = rest {
        let more = tokenize(r);
        if !take(&more.list) {
            return reply(BAD_FORMAT, false);
        }
        rest = more.rest;
    }
    Cmd::Get {
        keys,
        cas,
        touch: exptime,
    }
}

fn arith(src: &Bytes, incr: bool, t: &Tokens) -> Cmd {
    let noreply = noreply(t);
    let key = t.get(1);
    if key.len() > KEY_MAX {
        return reply(BAD_FORMAT, noreply);
    }
    match safe_strtoull(t.get(2)) {
        Some(delta) => Cmd::Arith {
            key: src.slice_ref(key),
            incr,
            delta,
            noreply,
        },
        None => reply("CLIENT_ERROR invalid numeric delta argument", noreply),
    }
}

fn delete(src: &Bytes, t: &Tokens) -> Cmd {
    let mut noreply = false;
    if t.n() > 3 {
        let hold_is_zero = t.get(2) == b"0";
        noreply = self::noreply(t);
        let valid =
            (t.n() == 4 && (hold_is_zero || noreply)) || (t.n() == 5 && hold_is_zero && noreply);
        if !valid {
            return reply(
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]",
                noreply,
            );
        }
    }
    let key = t.get(1);
    if key.len() > KEY_MAX {
        return reply(BAD_FORMAT, noreply);
    }
    Cmd::Delete {
        key: src.slice_ref(key),
        noreply,
    }
}

fn touch(src: &Bytes, t: &Tokens) -> Cmd {
    let noreply = noreply(t);
    let key = t.get(1);
    if key.len() > KEY_MAX {
        return reply(BAD_FORMAT, noreply);
    }
    match safe_strtol(t.get(2)) {
        Some(exptime) => Cmd::Touch {
            key: src.slice_ref(key),
            exptime,
            noreply,
        },
        None => reply("CLIENT_ERROR invalid exptime argument", noreply),
    }
}

fn flush_all(t: &Tokens) -> Cmd {
    let noreply = noreply(t);
    let mut delay = 0;
    if t.n() != if noreply { 3 } else { 2 } {
        match safe_strtol(t.get(1)) {
            Some(d) => delay = d,
            None => return reply("CLIENT_ERROR invalid exptime argument", noreply),
        }
    }
    Cmd::FlushAll { delay, noreply }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(input: &[u8]) -> Parsed {
        TextParser::new(1 << 20).parse(&Bytes::copy_from_slice(input), false)
    }

    #[test]
    fn numbers_parse_as_in_c() {
        assert_eq!(safe_strtol(b"12"), Some(12));
        assert_eq!(safe_strtol(b"-3"), Some(-3));
        assert_eq!(safe_strtol(b"4294967297"), Some(1));
        assert_eq!(safe_strtol(b"1x"), None);
        assert_eq!(safe_strtoul(b"-1"), None);
        assert_eq!(safe_strtoul(b"4294967296"), Some(0));
        assert_eq!(safe_strtoull(b"99999999999999999999"), None);
    }

    #[test]
    fn a_store_waits_for_its_data_and_checks_its_end() {
        assert_eq!(one(b"set a 0 0 2\r\nh"), Parsed::Incomplete);
        let Parsed::Cmd(Cmd::Store { data, .. }, 17) = one(b"set a 0 0 2\r\nhi\r\nget a\r\n")
        else {
            panic!("not a store");
        };
        assert_eq!(&data[..], b"hi");
        assert_eq!(
            one(b"set a 0 0 2\r\nabc\r\n"),
            Parsed::Cmd(reply("CLIENT_ERROR bad data chunk", false), 17)
        );
    }

    #[test]
    fn a_one_key_get_parses_as_the_tokenizer_would() {
        for line in [
            &b"get k\r\n"[..],
            b"get k\n",
            b"get  k\r\n",
            b"get k \r\n",
            b"get k1 k2\r\n",
            b"get k\r\r\n",
        ] {
            let Parsed::Cmd(Cmd::Get { keys, .. }, used) = one(line) else {
                panic!("not a get: {line:?}");
            };
            assert_eq!(used, line.len());
            let want: Vec<&[u8]> = line[4..]
                .strip_suffix(b"\n")
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .unwrap_or(b"")
                .split(|&b| b == b' ')
                .filter(|k| !k.is_empty())
                .collect();
            let got: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            assert_eq!(got, want, "{line:?}");
        }
        let long = format!("get {}\r\n", "k".repeat(KEY_MAX + 1));
        assert_eq!(
            one(long.as_bytes()),
            Parsed::Cmd(reply(BAD_FORMAT, false), long.len())
        );
    }

    #[test]
    fn an_incomplete_store_says_how_long_it_is() {
        let mut p = TextParser::new(1 << 20);
        let src = Bytes::from_static(b"set a 0 0 1000\r\nxx");
        assert_eq!(p.parse(&src, false), Parsed::Incomplete);
        assert_eq!(p.wanted(), 16 + 1000 + 2);
        let line = Bytes::from_static(b"get a");
        assert_eq!(p.parse(&line, false), Parsed::Incomplete);
        assert_eq!(p.wanted(), 0);
    }

    #[test]
    fn a_too_large_value_is_skipped_as_it_streams() {
        let mut p = TextParser::new(100);
        let r = p.parse(&Bytes::copy_from_slice(b"set a 0 0 1000\r\nxx"), false);
        assert_eq!(
            r,
            Parsed::Cmd(reply("SERVER_ERROR object too large for cache", false), 18)
        );
        assert_eq!(
            p.parse(&Bytes::copy_from_slice(&[b'x'; 500]), false),
            Parsed::Skipped(500)
        );
        assert_eq!(
            p.parse(&Bytes::copy_from_slice(&[b'x'; 1000]), false),
            Parsed::Skipped(500)
        );
        assert!(matches!(
            p.parse(&Bytes::copy_from_slice(b"get a\r\n"), false),
            Parsed::Cmd(Cmd::Get { .. }, 7)
        ));
    }

    #[test]
    fn long_lines_close_unless_they_are_gets() {
        assert_eq!(one(&[b'x'; 3000]), Parsed::Close);
        let mut get = b"get ".to_vec();
        get.extend_from_slice(&[b'k'; 3000]);
        assert_eq!(one(&get), Parsed::Incomplete);
    }

    #[test]
    fn a_get_takes_keys_past_the_token_limit() {
        let mut line = b"get".to_vec();
        for i in 0..50 {
            line.extend_from_slice(format!(" k{i}").as_bytes());
        }
        line.extend_from_slice(b"\r\n");
        let Parsed::Cmd(Cmd::Get { keys, .. }, _) = one(&line) else {
            panic!("not a get");
        };
        assert_eq!(keys.len(), 50);
        assert_eq!(&keys[49][..], b"k49");
    }
}

//! Argument parsing shared by commands, with Redis' exact error texts: the [`ArgCursor`] every
//! option parser walks, and the parsers of single values.
//!
//! Never: lets an argument go unread (parsers end with `ArgCursor::finish`), or panics on one.

use bytes::Bytes;

use crate::protocol::Reply;

pub const ERR_SYNTAX: &str = "ERR syntax error";
pub const ERR_NOT_INT: &str = "ERR value is not an integer or out of range";
pub const ERR_NOT_FLOAT: &str = "ERR value is not a valid float";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const ERR_NO_KEY: &str = "ERR no such key";
pub const ERR_OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const ERR_NOAUTH: &str = "NOAUTH Authentication required.";
pub const ERR_DB_RANGE: &str = "ERR DB index is out of range";
pub const ERR_TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

pub fn err(msg: &str) -> Reply {
    Reply::Error(msg.to_string())
}

pub use crate::protocol::string2ll as parse_i64;

/// Integer argument or Redis' "not an integer" error.
pub fn int_arg(b: &Bytes) -> Result<i64, Reply> {
    parse_i64(b).ok_or_else(|| err(ERR_NOT_INT))
}

/// Parses a float as Redis' strtold-based parser: no spaces, no "nan", "inf" allowed.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v = match lower.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ if lower.contains("nan") || lower.contains("inf") => return None,
        _ => s.parse::<f64>().ok()?,
    };
    Some(v)
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A cursor over a command's options: each parser takes keywords and their values from it and
/// ends with [`ArgCursor::finish`], so an argument nobody took is a syntax error rather than
/// silently ignored.
pub struct ArgCursor<'a> {
    args: &'a [Bytes],
    pos: usize,
}

impl<'a> ArgCursor<'a> {
    /// A cursor over `args` starting at index `from` (past the name, keys and fixed arguments).
    pub fn new(args: &'a [Bytes], from: usize) -> ArgCursor<'a> {
        ArgCursor {
            args,
            pos: from.min(args.len()),
        }
    }

    /// Arguments not taken yet.
    pub fn remaining(&self) -> usize {
        self.args.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next argument, taken.
    pub fn next_arg(&mut self) -> Option<&'a Bytes> {
        let a = self.args.get(self.pos)?;
        self.pos += 1;
        Some(a)
    }

    /// The next argument, left in place.
    pub fn peek(&self) -> Option<&'a Bytes> {
        self.args.get(self.pos)
    }

    /// Takes the next argument when it is `word` (any case).
    pub fn eat(&mut self, word: &str) -> bool {
        let hit = self.peek().is_some_and(|a| is(a, word));
        if hit {
            self.pos += 1;
        }
        hit
    }

    /// Takes the next argument when it is `word` and a value follows it (an option that takes
    /// a value: given last, without one, it is left for `finish` to refuse).
    pub fn eat_with_value(&mut self, word: &str) -> Option<&'a Bytes> {
        self.eat_with(word, 1).map(|v| &v[0])
    }

    /// Takes `word` and the `n` values after it, when they are all there.
    pub fn eat_with(&mut self, word: &str, n: usize) -> Option<&'a [Bytes]> {
        if self.remaining() > n && self.peek().is_some_and(|a| is(a, word)) {
            let values = &self.args[self.pos + 1..self.pos + 1 + n];
            self.pos += 1 + n;
            return Some(values);
        }
        None
    }

    /// The value of an option: the next argument, or a syntax error when there is none.
    pub fn value(&mut self) -> Result<&'a Bytes, Reply> {
        self.next_arg().ok_or_else(|| err(ERR_SYNTAX))
    }

    /// The next argument as an integer (Redis' not-an-integer error otherwise).
    pub fn int(&mut self) -> Result<i64, Reply> {
        int_arg(self.value()?)
    }

    /// Ends the parse: Ok when every argument was taken, a syntax error otherwise.
    pub fn finish(self) -> Result<(), Reply> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(err(ERR_SYNTAX))
        }
    }
}

/// A SCAN-family cursor as Redis reads it (`strtoul`): digits after an optional sign (a negative
/// value wraps around), nothing after them, no overflow.
pub fn parse_cursor(b: &[u8]) -> Option<u64> {
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis' index range rules (LRANGE, LTRIM, ZRANGE by rank, ...): the inclusive range
/// `start..=end`, negative from the end, clipped to `len` items; None when empty.
pub fn clip(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 {
        len.saturating_add(start)
    } else {
        start
    };
    let mut end = if end < 0 {
        len.saturating_add(end)
    } else {
        end
    };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= len {
        return None;
    }
    if end >= len {
        end = len - 1;
    }
    Some((start as usize, end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    #[test]
    fn cursor_takes_options_and_refuses_leftovers() {
        let a = args(&["set", "k", "v", "nx", "EX", "10", "junk"]);
        let mut c = ArgCursor::new(&a, 3);
        assert!(!c.eat("XX"));
        assert!(c.eat("NX"));
        assert_eq!(c.eat_with_value("ex").map(|v| &v[..]), Some(&b"10"[..]));
        assert_eq!(c.remaining(), 1);
        assert_eq!(c.finish(), Err(err(ERR_SYNTAX)));
        // An option given last without its value is not taken.
        let a = args(&["scan", "0", "COUNT"]);
        let mut c = ArgCursor::new(&a, 2);
        assert_eq!(c.eat_with_value("COUNT"), None);
        assert_eq!(c.value().cloned(), Ok(Bytes::from_static(b"COUNT")));
        assert_eq!(c.value(), Err(err(ERR_SYNTAX)));
        assert!(c.finish().is_ok());
        let a = args(&["x", "12", "zz"]);
        let mut c = ArgCursor::new(&a, 1);
        assert_eq!(c.int(), Ok(12));
        assert_eq!(c.int(), Err(err(ERR_NOT_INT)));
        // A start past the end is an empty cursor, not a panic.
        assert!(ArgCursor::new(&a, 9).finish().is_ok());
    }

    #[test]
    fn ints_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"01"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"1a"), None);
    }

    #[test]
    fn floats_like_redis() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"abc"), None);
    }
}

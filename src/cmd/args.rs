//! Argument parsing shared by commands, with Redis' exact error texts.

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

#[cfg(test)]
mod tests {
    use super::*;

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

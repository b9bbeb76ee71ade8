//! Keyspace notification classes (`notify-keyspace-events`): Redis' flag letters, their bits,
//! and the text CONFIG GET shows for a set of them.
//!
//! Never: imports anything of Strata's.

pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m (not part of A, as in Redis)
pub const MODULE: u32 = 1 << 13; // d
pub const NEW: u32 = 1 << 14; // n (not part of A, as in Redis)
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes named by `s` (`"KEA"`, `"Kx"`, `""`), or None when it holds a letter Redis does
/// not know.
pub fn parse(s: &str) -> Option<u32> {
    let mut flags = 0;
    for c in s.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => GENERIC,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            't' => STREAM,
            'm' => KEY_MISS,
            'd' => MODULE,
            'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// The text for `flags` that CONFIG GET shows, in Redis' order (`A` for all of its classes).
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                s.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_as_redis_shows_it() {
        assert_eq!(format(parse("KEA").unwrap()), "AKE");
        assert_eq!(format(parse("Egx$").unwrap()), "g$xE");
        assert_eq!(format(parse("").unwrap()), "");
        assert_eq!(format(parse("nm").unwrap()), "nm");
        assert_eq!(format(parse("Am").unwrap()), "Am");
        assert!(parse("KEQ").is_none());
        assert_eq!(parse("A").unwrap() & (NEW | KEY_MISS), 0);
    }
}

//! Redis-style glob matching (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes) for KEYS, SCAN MATCH and
//! CONFIG GET. Iterative with backtracking on the last `*`, so a hostile pattern cannot recurse
//! deeply.
//!
//! Never: imports anything of Strata's, or recurses.

/// True when `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(pattern, p, s[i], nocase) {
                        if matched {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if eq(pattern[p + 1], s[i]) {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, s[i]) {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

/// Matches `c` against the class starting at `pattern[start] == b'['`; returns (matched, index
/// after the class). An unterminated class runs to the end of the pattern, as in Redis.
fn class(pattern: &[u8], start: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let mut p = start + 1;
    let negate = p < pattern.len() && pattern[p] == b'^';
    if negate {
        p += 1;
    }
    let lower = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = lower(c);
    let mut matched = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            p += 1;
            if lower(pattern[p]) == c {
                matched = true;
            }
            p += 1;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (mut a, mut b) = (lower(pattern[p]), lower(pattern[p + 2]));
            if a > b {
                std::mem::swap(&mut a, &mut b);
            }
            if c >= a && c <= b {
                matched = true;
            }
            p += 3;
        } else {
            if lower(pattern[p]) == c {
                matched = true;
            }
            p += 1;
        }
    }
    let next = if p < pattern.len() { p + 1 } else { p };
    Some((matched != negate, next))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h*llo", b"heeeello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[ae]llo", b"hillo", false));
        assert!(matches(b"h[^e]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"key:\\*", b"key:*", false));
        assert!(!matches(b"key:\\*", b"key:x", false));
        assert!(matches(b"*a*b*c", b"xxaxxbxxc", false));
        assert!(!matches(b"*a*b*c", b"xxaxxbxx", false));
        assert!(matches(b"MAX*", b"maxmemory", true));
        assert!(!matches(b"", b"a", false));
        assert!(matches(b"", b"", false));
    }
}

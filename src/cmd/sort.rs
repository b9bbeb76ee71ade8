//! SORT and SORT_RO, the shard-side steps: their options parsed, the elements of the list, set
//! or sorted set read, BY and GET patterns turned into the keys (and hash fields) they name,
//! the elements ordered as Redis orders them, and a STORE result written as a list.
//!
//! A pattern can name any key, so the server runs SORT as steps over the shards it needs
//! (`server::sort`); everything here is one shard's part or pure computation.
//!
//! Never: reads a key other than the one it is handed, or orders elements other than as Redis'
//! `sortCompare` does (numbers, then the element's bytes on a tie; ALPHA by bytes).

use std::cmp::Ordering;

use bytes::Bytes;

use super::args::{err, is, parse_i64, ERR_NOT_INT, ERR_SYNTAX, ERR_WRONGTYPE};
use super::list::list_of;
use super::{hash, Ctx};
use crate::protocol::Reply;
use crate::shard::list::clamp_fill;
use crate::shard::zset::strtod;
use crate::shard::ObjectType;

const ERR_SCORES: &str = "ERR One or more scores can't be converted into double";

/// SORT's options, as parsed (Redis' order of checks: syntax before the key's type).
#[derive(Debug, Clone)]
pub struct SortOpts {
    pub desc: bool,
    pub alpha: bool,
    /// LIMIT offset count (Redis' defaults: 0, -1 = all).
    pub limit_start: i64,
    pub limit_count: i64,
    /// BY pattern (with a `*`: sort by what it names).
    pub by: Option<Bytes>,
    /// BY a pattern without `*`: elements keep the order they are stored in.
    pub dontsort: bool,
    pub gets: Vec<Bytes>,
    pub store: Option<Bytes>,
}

impl SortOpts {
    /// Whether running it reads keys other than the sorted one (its BY or GET patterns).
    pub fn reads_other_keys(&self) -> bool {
        (self.by.is_some() && !self.dontsort)
            || self
                .gets
                .iter()
                .any(|g| matches!(target(g, b"x"), Target::Key(..)))
    }
}

/// Parses SORT's (or, with `readonly`, SORT_RO's) options after the key.
pub fn parse(args: &[Bytes], readonly: bool) -> Result<SortOpts, Reply> {
    let mut o = SortOpts {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        by: None,
        dontsort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if is(a, "ASC") {
            o.desc = false;
        } else if is(a, "DESC") {
            o.desc = true;
        } else if is(a, "ALPHA") {
            o.alpha = true;
        } else if is(a, "LIMIT") && left >= 2 {
            let int = |b: &Bytes| parse_i64(b).ok_or_else(|| err(ERR_NOT_INT));
            o.limit_start = int(&args[j + 1])?;
            o.limit_count = int(&args[j + 2])?;
            j += 2;
        } else if !readonly && is(a, "STORE") && left >= 1 {
            o.store = Some(args[j + 1].clone());
            j += 1;
        } else if is(a, "BY") && left >= 1 {
            let p = args[j + 1].clone();
            // A constant BY names no weights: nothing to sort by.
            o.dontsort = !p.contains(&b'*');
            o.by = Some(p);
            j += 1;
        } else if is(a, "GET") && left >= 1 {
            o.gets.push(args[j + 1].clone());
            j += 1;
        } else {
            return Err(err(ERR_SYNTAX));
        }
        j += 1;
    }
    Ok(o)
}

/// SORT's keys, as Redis' `sortGetKeys` finds them: the sorted key and the destination of the
/// last STORE (LIMIT's, BY's and GET's values are skipped, so a key named "store" is not one).
pub fn keys_sort(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "LIMIT") {
            i += 2;
        } else if is(a, "GET") || is(a, "BY") {
            i += 1;
        } else if is(a, "STORE") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// The key (and field) a BY or GET pattern names for one element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `#`: the element itself.
    Element,
    /// A pattern without `*`: nothing (GET of a fixed key is not a thing in Redis).
    Nothing,
    /// The string at the key, or the field of the hash at the key (`pattern->field`).
    Key(Bytes, Option<Bytes>),
}

/// What `pattern` names for `element`, as Redis' `lookupKeyByPattern` builds it: the first `*`
/// replaced by the element; `->field` after it (with at least one byte of field) reads a hash.
pub fn target(pattern: &[u8], element: &[u8]) -> Target {
    if pattern == b"#" {
        return Target::Element;
    }
    let Some(star) = pattern.iter().position(|&c| c == b'*') else {
        return Target::Nothing;
    };
    let after = &pattern[star + 1..];
    let arrow = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&i| i + 2 < after.len());
    let (suffix, field) = match arrow {
        Some(i) => (&after[..i], Some(Bytes::copy_from_slice(&after[i + 2..]))),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(star + element.len() + suffix.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(suffix);
    Target::Key(Bytes::from(key), field)
}

/// The value of `field` in the hash at `key`; None for a missing key or field, or a key of
/// another type (strings, which may be on disk, are read as MGET reads them: `server::sort`).
pub fn read_field(ctx: &mut Ctx, key: &Bytes, field: &Bytes) -> Option<Bytes> {
    // HGET answers WRONGTYPE for a non-hash: that is a miss here.
    match hash::hget(
        ctx,
        &[Bytes::from_static(b"HGET"), key.clone(), field.clone()],
    ) {
        Reply::Bulk(b) => Some(b),
        _ => None,
    }
}

/// The kind of collection sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    List,
    Set,
    ZSet,
}

/// The elements of the list, set or sorted set at `key` in their stored order (a missing key
/// sorts as an empty list); WRONGTYPE for any other type.
pub fn read_source(ctx: &mut Ctx, key: &Bytes) -> Result<(Source, Vec<Bytes>), Reply> {
    let ty = match ctx.shard.lookup(ctx.db, key, ctx.now) {
        None => return Ok((Source::List, Vec::new())),
        Some(e) => e.object_type(),
    };
    let (source, reply) = match ty {
        Some(ObjectType::List) => {
            let args = [
                Bytes::from_static(b"LRANGE"),
                key.clone(),
                Bytes::from_static(b"0"),
                Bytes::from_static(b"-1"),
            ];
            (Source::List, super::list::lrange(ctx, &args))
        }
        Some(ObjectType::Set) => {
            let args = [Bytes::from_static(b"SMEMBERS"), key.clone()];
            (Source::Set, super::set::smembers(ctx, &args))
        }
        Some(ObjectType::ZSet) => {
            let args = [
                Bytes::from_static(b"ZRANGE"),
                key.clone(),
                Bytes::from_static(b"0"),
                Bytes::from_static(b"-1"),
            ];
            (Source::ZSet, super::zset::zrange(ctx, &args))
        }
        _ => return Err(err(ERR_WRONGTYPE)),
    };
    let items = match reply {
        Reply::Array(v) | Reply::Set(v) => v,
        Reply::Error(e) => return Err(Reply::Error(e)),
        _ => Vec::new(),
    };
    let elements = items
        .into_iter()
        .filter_map(|r| match r {
            Reply::Bulk(b) => Some(b),
            _ => None,
        })
        .collect();
    Ok((source, elements))
}

/// The elements' order before sorting, and whether they are sorted at all: with a constant BY
/// lists and sorted sets keep their order (reversed by DESC); a set is sorted ALPHA instead
/// when the result is stored or goes to a script, so neither depends on the set's layout.
pub fn prepare(opts: &mut SortOpts, source: Source, elements: &mut [Bytes], in_script: bool) {
    if opts.dontsort && source == Source::Set && (opts.store.is_some() || in_script) {
        opts.dontsort = false;
        opts.alpha = true;
        opts.by = None;
    }
    if opts.dontsort && opts.desc && source != Source::Set {
        elements.reverse();
    }
}

/// The slice of the sorted elements LIMIT selects, as Redis clamps it: (start, end) inclusive,
/// empty when end < start.
pub fn limit_range(opts: &SortOpts, len: usize) -> (i64, i64) {
    let len = len as i64;
    let mut start = opts.limit_start.max(0).min(len);
    let count = opts.limit_count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// One element with what it sorts by.
struct Weighted {
    element: Bytes,
    score: f64,
    by: Option<Bytes>,
}

/// Orders `elements` as Redis' `sortCompare` does. `weights[i]` is what the BY pattern named
/// for element i (None without BY, or where it named nothing). An error when numeric sorting
/// meets a weight that is not a number.
pub fn order(
    opts: &SortOpts,
    elements: Vec<Bytes>,
    weights: Option<Vec<Option<Bytes>>>,
) -> Result<Vec<Bytes>, Reply> {
    if opts.dontsort {
        return Ok(elements);
    }
    let by_pattern = weights.is_some();
    let mut weights = weights.map(Vec::into_iter);
    let mut bad = false;
    let mut v: Vec<Weighted> = elements
        .into_iter()
        .map(|element| {
            let by = match weights.as_mut() {
                Some(w) => w.next().flatten(),
                None => Some(element.clone()),
            };
            let mut score = 0.0;
            if !opts.alpha {
                if let Some(b) = &by {
                    match strtod(b) {
                        Some((s, false)) if !s.is_nan() => score = s,
                        _ => bad = true,
                    }
                }
            }
            Weighted {
                element,
                score,
                by: if by_pattern { by } else { None },
            }
        })
        .collect();
    if bad {
        return Err(err(ERR_SCORES));
    }
    let cmp = |a: &Weighted, b: &Weighted| -> Ordering {
        if !opts.alpha {
            a.score
                .partial_cmp(&b.score)
                .unwrap_or(Ordering::Equal)
                .then_with(|| a.element.cmp(&b.element))
        } else if by_pattern {
            // A missing weight sorts first.
            match (&a.by, &b.by) {
                (Some(x), Some(y)) => x.cmp(y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            }
        } else {
            a.element.cmp(&b.element)
        }
    };
    if opts.desc {
        v.sort_by(|a, b| cmp(b, a));
    } else {
        v.sort_by(cmp);
    }
    Ok(v.into_iter().map(|w| w.element).collect())
}

/// Stores SORT's result at `dst` as a list (deleting `dst` when the result is empty); the
/// reply is the number of elements stored.
pub fn store(ctx: &mut Ctx, dst: &[u8], values: &[Bytes]) -> Reply {
    if values.is_empty() {
        if ctx.shard.remove(ctx.db, dst).is_some() {
            ctx.notify(crate::notify::GENERIC, "del", dst);
        }
    } else {
        let fill = clamp_fill(ctx.shard.settings.list_max_listpack_size());
        let refs: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
        ctx.shard.store(ctx.db, dst, list_of(fill, &refs), 0);
        ctx.notify(crate::notify::LIST, "sortstore", dst);
    }
    Reply::Int(values.len() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn opts(args: &[&str]) -> Result<SortOpts, Reply> {
        let mut v = vec![b("SORT"), b("k")];
        v.extend(args.iter().map(|a| b(a)));
        parse(&v, false)
    }

    #[test]
    fn patterns_name_keys_and_hash_fields_as_redis_does() {
        assert_eq!(target(b"#", b"e"), Target::Element);
        assert_eq!(target(b"nostar", b"e"), Target::Nothing);
        assert_eq!(target(b"w_*", b"3"), Target::Key(b("w_3"), None));
        assert_eq!(target(b"a*b", b"3"), Target::Key(b("a3b"), None));
        assert_eq!(target(b"h_*->f", b"3"), Target::Key(b("h_3"), Some(b("f"))));
        // `->` with nothing after it is part of the key name.
        assert_eq!(target(b"h_*->", b"3"), Target::Key(b("h_3->"), None));
        // Only the first `*` is replaced.
        assert_eq!(target(b"*_*", b"x"), Target::Key(b("x_*"), None));
    }

    #[test]
    fn options_parse_with_redis_errors() {
        let o = opts(&["BY", "w_*", "LIMIT", "1", "2", "GET", "#", "DESC", "ALPHA"]).unwrap();
        assert!(o.desc && o.alpha && !o.dontsort);
        assert_eq!((o.limit_start, o.limit_count), (1, 2));
        assert!(opts(&["BY", "const"]).unwrap().dontsort);
        assert!(matches!(opts(&["LIMIT", "1"]), Err(Reply::Error(e)) if e == ERR_SYNTAX));
        assert!(matches!(opts(&["LIMIT", "x", "1"]), Err(Reply::Error(e)) if e == ERR_NOT_INT));
        assert!(matches!(opts(&["FOO"]), Err(Reply::Error(e)) if e == ERR_SYNTAX));
        let ro = parse(&[b("SORT_RO"), b("k"), b("STORE"), b("d")], true);
        assert!(matches!(ro, Err(Reply::Error(e)) if e == ERR_SYNTAX));
    }

    #[test]
    fn keys_are_the_sorted_key_and_the_last_store() {
        let args = |v: &[&str]| v.iter().map(|a| b(a)).collect::<Vec<_>>();
        assert_eq!(keys_sort(&args(&["SORT", "k"])), vec![1]);
        assert_eq!(
            keys_sort(&args(&["SORT", "k", "STORE", "a", "STORE", "d"])),
            vec![1, 5]
        );
        assert_eq!(
            keys_sort(&args(&["SORT", "k", "GET", "store", "BY", "x"])),
            vec![1]
        );
        assert_eq!(
            keys_sort(&args(&["SORT", "k", "LIMIT", "store", "1", "STORE"])),
            vec![1]
        );
    }

    #[test]
    fn limit_clamps_as_redis_does() {
        let mut o = opts(&[]).unwrap();
        assert_eq!(limit_range(&o, 5), (0, 4));
        (o.limit_start, o.limit_count) = (1, 2);
        assert_eq!(limit_range(&o, 5), (1, 2));
        (o.limit_start, o.limit_count) = (10, 2);
        assert_eq!(limit_range(&o, 5), (4, 3));
        (o.limit_start, o.limit_count) = (-3, 100);
        assert_eq!(limit_range(&o, 5), (0, 4));
        assert_eq!(limit_range(&o, 0), (-1, -2));
    }

    #[test]
    fn numeric_order_breaks_ties_by_bytes_and_rejects_non_numbers() {
        let o = opts(&[]).unwrap();
        let out = order(&o, vec![b("10"), b("2"), b("2.0"), b("-1")], None).unwrap();
        assert_eq!(out, vec![b("-1"), b("2"), b("2.0"), b("10")]);
        assert!(order(&o, vec![b("1"), b("x")], None).is_err());
        let d = opts(&["DESC", "ALPHA"]).unwrap();
        let out = order(&d, vec![b("b"), b("c"), b("a")], None).unwrap();
        assert_eq!(out, vec![b("c"), b("b"), b("a")]);
    }

    #[test]
    fn weights_from_a_by_pattern_order_elements_missing_ones_as_zero() {
        let o = opts(&["BY", "w_*"]).unwrap();
        let out = order(
            &o,
            vec![b("a"), b("b"), b("c")],
            Some(vec![Some(b("3")), None, Some(b("-2"))]),
        )
        .unwrap();
        assert_eq!(out, vec![b("c"), b("b"), b("a")]);
        let a = opts(&["BY", "w_*", "ALPHA"]).unwrap();
        let out = order(
            &a,
            vec![b("a"), b("b"), b("c")],
            Some(vec![Some(b("z")), None, Some(b("m"))]),
        )
        .unwrap();
        assert_eq!(out, vec![b("b"), b("c"), b("a")]);
    }
}

//! Lists and sets from their RDB encodings (RDB files, DUMP payloads, snapshot records), in
//! the form Redis 7.0 loads them in: every list form becomes quicklist nodes (a one-node list
//! packed), a set an intset while its members are integers within `set-max-intset-entries`,
//! else the large set.
//!
//! Never: trusts a block from outside before its whole-block check, or keeps an empty
//! collection or a set with a member twice.

use ondisk::rdb::codec::{read_len, read_string};
use ondisk::rdb::{types, RdbCursor};

use super::entry::Value;
use super::list::{list_value, QuickList};
use super::object::PackLimits;
use super::set::SetBuilder;
use super::{intset, listpack, ziplist};

/// The list or set an RDB body of `rdb_type` holds.
pub fn value_from_rdb(rdb_type: u8, body: &[u8], limits: &PackLimits) -> Result<Value, String> {
    let mut input = RdbCursor::new(body);
    let bad = |e: ondisk::FormatError| format!("RDB type {rdb_type}: {e}");
    let value = match rdb_type {
        types::LIST => {
            let n = read_len(&mut input).map_err(bad)?;
            let mut ql = QuickList::new(limits.list_fill);
            for _ in 0..n {
                ql.push_back(&read_string(&mut input).map_err(bad)?);
            }
            finish_list(ql)?
        }
        types::LIST_ZIPLIST => {
            let zl = read_string(&mut input).map_err(bad)?;
            let items = ziplist::elements(&zl).ok_or("RDB list ziplist: a damaged ziplist")?;
            let mut ql = QuickList::new(limits.list_fill);
            for v in &items {
                ql.push_back(v);
            }
            finish_list(ql)?
        }
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
            let n = read_len(&mut input).map_err(bad)?;
            let mut nodes = Vec::new();
            for _ in 0..n {
                let container = if rdb_type == types::LIST_QUICKLIST_2 {
                    read_len(&mut input).map_err(bad)?
                } else {
                    2
                };
                let data = read_string(&mut input).map_err(bad)?;
                if data.is_empty() {
                    return Err(format!("RDB type {rdb_type}: an empty node"));
                }
                match container {
                    // A plain node: one element as it is.
                    1 => {
                        let mut lp = listpack::new();
                        listpack::push(&mut lp, &[&data]);
                        nodes.push(lp);
                    }
                    2 if rdb_type == types::LIST_QUICKLIST_2 => {
                        if !listpack::validate(&data, false) {
                            return Err("RDB list: a damaged listpack node".into());
                        }
                        nodes.push(data);
                    }
                    2 => {
                        let items =
                            ziplist::elements(&data).ok_or("RDB list: a damaged ziplist node")?;
                        let mut lp = listpack::new();
                        let refs: Vec<&[u8]> = items.iter().map(|v| &v[..]).collect();
                        listpack::push(&mut lp, &refs);
                        nodes.push(lp);
                    }
                    other => return Err(format!("RDB list: node container {other}")),
                }
            }
            finish_list(QuickList::from_listpacks(limits.list_fill, nodes))?
        }
        types::SET => {
            let n = read_len(&mut input).map_err(bad)?;
            let mut set = SetBuilder::new(if n > limits.set_intset_entries as u64 {
                0
            } else {
                limits.set_intset_entries
            });
            for _ in 0..n {
                if !set.add(&read_string(&mut input).map_err(bad)?) {
                    return Err("a set with a member twice".into());
                }
            }
            finish_set(set)?
        }
        types::SET_INTSET => {
            let is = read_string(&mut input).map_err(bad)?;
            if !intset::validate(&is) {
                return Err("RDB set: a damaged intset".into());
            }
            let mut set = SetBuilder::new(limits.set_intset_entries);
            if intset::len(&is) <= limits.set_intset_entries {
                set =
                    SetBuilder::Intset(intset::compact(is), limits.set_intset_entries.min(1 << 30));
            } else {
                for v in intset::iter(&is) {
                    set.add(v.to_string().as_bytes());
                }
            }
            finish_set(set)?
        }
        types::SET_LISTPACK => {
            let lp = read_string(&mut input).map_err(bad)?;
            if !listpack::validate(&lp, false) {
                return Err("RDB set: a damaged listpack".into());
            }
            let mut set = SetBuilder::new(limits.set_intset_entries);
            for (_, e) in listpack::iter(&lp) {
                if !set.add(&e.to_vec()) {
                    return Err("a set with a member twice".into());
                }
            }
            finish_set(set)?
        }
        other => return Err(format!("RDB type {other} is not a list or a set")),
    };
    input.finish().map_err(bad)?;
    Ok(value)
}

pub(super) fn finish_list(mut ql: QuickList) -> Result<Value, String> {
    if ql.is_empty() {
        return Err("an empty list".into());
    }
    ql.compress_loaded();
    Ok(list_value(ql))
}

pub(super) fn finish_set(set: SetBuilder) -> Result<Value, String> {
    if set.is_empty() {
        return Err("an empty set".into());
    }
    Ok(set.into_value())
}

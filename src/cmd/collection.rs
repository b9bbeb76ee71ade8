//! Typed access to collection values, shared by the collection families (hashes; lists, sets
//! and sorted sets next): a key's value of one type for reading or for writing, or WRONGTYPE;
//! a packed block taken out, edited and put back; an object reached as its concrete type; a
//! key removed once its collection is empty.
//!
//! Never: knows a type's layout (that is its family's file and `shard/`), or leaves an empty
//! collection stored.

use std::any::Any;

use super::args::{err, ERR_WRONGTYPE};
use super::Ctx;
use crate::protocol::Reply;
use crate::shard::{Entry, ObjectType, Packed, TypedObject, Value, ValueRef};

/// A stored collection, for reading.
#[derive(Clone, Copy)]
pub enum Coll<'a> {
    /// A small one: its packed block.
    Packed(&'a [u8]),
    /// A large one.
    Object(&'a dyn TypedObject),
}

/// WRONGTYPE unless `e` holds a collection of type `ty` (a string, in RAM or on disk, is not).
/// A collection still on SSD reaching a command is a bug of the path that ran it (commands load
/// offloaded collections first, `server::exec`): an error, never a wrong answer.
pub fn check_type(e: &Entry, ty: ObjectType) -> Result<(), Reply> {
    if e.offloaded_type().is_some() {
        return Err(err("ERR internal error: collection on SSD was not loaded"));
    }
    if e.object_type() == Some(ty) {
        Ok(())
    } else {
        Err(err(ERR_WRONGTYPE))
    }
}

/// The collection of type `ty` at `key` for reading (a hit or a miss is counted); None when
/// the key is missing, WRONGTYPE when it holds another type.
pub fn read<'a>(ctx: &'a mut Ctx, key: &[u8], ty: ObjectType) -> Result<Option<Coll<'a>>, Reply> {
    let Some(e) = ctx.shard.lookup(ctx.db, key, ctx.now) else {
        return Ok(None);
    };
    check_type(e, ty)?;
    Ok(match e.value() {
        ValueRef::Packed(_, b) => Some(Coll::Packed(b)),
        ValueRef::Object(o) => Some(Coll::Object(o)),
        // check_type let only collections through.
        ValueRef::Str(_) | ValueRef::External(_) | ValueRef::Offloaded(..) => None,
    })
}

/// The entry of type `ty` at `key` for changing it (a running snapshot keeps what it held
/// before); None when the key is missing, WRONGTYPE when it holds another type.
pub fn write<'a>(
    ctx: &'a mut Ctx,
    key: &[u8],
    ty: ObjectType,
) -> Result<Option<&'a mut Entry>, Reply> {
    match ctx.shard.lookup_mut(ctx.db, key, ctx.now) {
        None => Ok(None),
        Some(e) => {
            check_type(e, ty)?;
            Ok(Some(e))
        }
    }
}

/// A large object as its concrete type.
pub fn object_as<T: Any>(o: &dyn TypedObject) -> Option<&T> {
    o.as_any().downcast_ref::<T>()
}

/// An entry's large object as its concrete type, for changing it in place.
pub fn object_mut<T: Any>(e: &mut Entry) -> Option<&mut T> {
    e.object_mut()?.as_any_mut().downcast_mut::<T>()
}

/// A packed entry's block, copied out for editing (None when the entry is not packed).
pub fn take_packed(e: &Entry) -> Option<Packed> {
    match e.value() {
        ValueRef::Packed(kind, b) => Some(Packed {
            kind,
            bytes: b.into(),
        }),
        _ => None,
    }
}

/// Puts an edited packed block back, or the large object it became.
pub fn put_back(e: &mut Entry, value: Value) {
    e.set_value(value);
}

/// Deletes `key` once its collection has no element left, as Redis does.
pub fn remove_if_empty(ctx: &mut Ctx, key: &[u8], empty: bool) {
    if empty {
        ctx.shard.remove(ctx.db, key);
    }
}

/// An error reply for a large object of the right type but an unknown layout: a bug, never
/// data from outside (loaders build only known objects).
pub fn unknown_layout() -> Reply {
    err("ERR internal error: unknown object layout")
}

/// Reports keyspace event `event` (class `class`) for a change to the collection at `key`,
/// then `del` when the change left it empty (and so removed), in Redis' order.
pub fn notify_change(ctx: &mut Ctx, class: u32, event: &str, key: &[u8]) {
    ctx.notify(class, event, key);
    if ctx.shard.notifies(crate::notify::GENERIC) && !ctx.shard.contains(ctx.db, key, ctx.now) {
        ctx.notify(crate::notify::GENERIC, "del", key);
    }
}

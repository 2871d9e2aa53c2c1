//! Whole values, read and written at once (`DUMP`, `RESTORE`): any type, in the form Redis's
//! RDB encoding carries (`rdb::value`).

use std::collections::HashMap;

use super::{hash, list, set, string, zset, Result};
use crate::rdb::value::Value;
use crate::store::encoding::{Hint, Kind};
use crate::store::txn::Txn;

/// The value at `key` and its expiry time (0: none), if it exists.
pub fn read(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<(Value, u64)>> {
    let Some(m) = txn.get(db, key)?.cloned() else {
        return Ok(None);
    };
    let v = match m.kind {
        Kind::String => Value::String(m.payload),
        Kind::List => match list::list(txn, db, key)? {
            Some(l) => Value::List(list::read(txn, db, key, &l, 0, l.len())?),
            None => return Ok(None),
        },
        Kind::Set => Value::Set(set::members(txn, db, key)?),
        Kind::Hash => Value::Hash(hash::fields(txn, db, key)?),
        Kind::ZSet => match zset::get(txn, db, key)? {
            Some(z) => {
                let all = zset::Query {
                    select: zset::Select::Rank(0, -1),
                    rev: false,
                    offset: 0,
                    limit: -1,
                };
                Value::ZSet(zset::select(txn, db, key, &z, &all)?)
            }
            None => return Ok(None),
        },
        Kind::Stream => return Err(super::Error::Unsupported("streams")),
    };
    Ok(Some((v, m.expire_at)))
}

/// Whether `v` holds anything (Redis refuses to restore an empty collection).
pub fn is_empty(v: &Value) -> bool {
    match v {
        Value::String(_) => false,
        Value::List(i) | Value::Set(i) => i.is_empty(),
        Value::Hash(f) => f.is_empty(),
        Value::ZSet(m) => m.is_empty(),
    }
}

/// Replaces whatever `key` holds with `v` (not empty), expiring at `expire_at` (0: never).
/// A member or field named twice keeps its last value, as loading it into Redis does.
pub fn write(txn: &mut Txn<'_>, db: usize, key: &[u8], v: Value, expire_at: u64) -> Result<()> {
    match v {
        // A string's record carries its expiry as it is written.
        Value::String(s) => return string::put(txn, db, key, s, Some(expire_at), Hint::Auto),
        Value::List(items) => {
            let mut l = list::replace(txn, db, key)?;
            list::push(txn, db, key, &mut l, false, &items)?;
        }
        Value::Set(members) => {
            set::replace(txn, db, key, &members)?;
        }
        Value::Hash(fields) => {
            txn.create(db, key, Kind::Hash)?;
            let flat: Vec<Vec<u8>> = fields.into_iter().flat_map(|(f, v)| [f, v]).collect();
            hash::set(txn, db, key, &flat)?;
        }
        Value::ZSet(members) => {
            let mut last: HashMap<Vec<u8>, f64> = HashMap::new();
            for (m, s) in members {
                last.insert(m, s);
            }
            let items: Vec<(Vec<u8>, f64)> = last.into_iter().collect();
            zset::replace(txn, db, key, &items)?;
        }
    }
    if expire_at != 0 {
        if let Some(m) = txn.get_mut(db, key)? {
            m.expire_at = expire_at;
        }
    }
    Ok(())
}

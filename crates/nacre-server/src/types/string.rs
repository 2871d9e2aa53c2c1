//! Strings over the keyspace transaction: the value lives in the key's metadata record.
//! Commands (`cmd/strings.rs`) parse arguments, raise events and write replies around these
//! operations.

use super::{Error, Result};
use crate::store::encoding::{Hint, Kind, Meta};
use crate::store::txn::Txn;

/// The string at `key`: `None` if missing, WRONGTYPE if another type.
pub fn get(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Vec<u8>>> {
    match txn.get(db, key)? {
        None => Ok(None),
        Some(m) if m.kind == Kind::String => Ok(Some(m.payload.clone())),
        Some(_) => Err(Error::WrongType),
    }
}

/// Stores `v` at `key` (replacing whatever it held) with expiry time `expire_at` (0: none),
/// or keeping the key's expiry when `None`; `OBJECT ENCODING` then answers by `hint`.
pub fn put(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    v: Vec<u8>,
    expire_at: Option<u64>,
    hint: Hint,
) -> Result<()> {
    let keep = match expire_at {
        Some(at) => at,
        None => txn.get(db, key)?.map_or(0, |m| m.expire_at),
    };
    let mut m = Meta::string(v);
    m.expire_at = keep;
    m.hint = hint;
    txn.set(db, key, Some(m))?;
    Ok(())
}

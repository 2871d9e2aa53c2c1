//! Operations over the keyspace transaction, one file per Redis type: what a command does to
//! a key, apart from parsing its arguments and writing its reply (`cmd/`). Operations return
//! typed errors; commands of any family call them, never each other's handlers.

pub mod coll;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod list;
pub mod set;
pub mod stream;
pub mod stream_group;
pub mod string;
pub mod whole;
pub mod zset;

use nacre_resp::Reply;

use crate::store::encoding::{Kind, Meta};
use crate::store::txn::Txn;
use crate::store::StoreError;

/// What an operation on a key can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key holds another type.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// The keyspace failed (the engine, or a damaged record).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Shorthand.
pub type Result<T> = std::result::Result<T, Error>;

impl From<Error> for Reply {
    fn from(e: Error) -> Reply {
        match e {
            Error::WrongType => Reply::Error(Error::WrongType.to_string()),
            Error::Store(e) => e.into(),
        }
    }
}

/// The record at `key` in database `db` if it holds a `kind` (`None` if missing; WRONGTYPE
/// for another type).
pub fn typed(txn: &mut Txn<'_>, db: usize, key: &[u8], kind: Kind) -> Result<Option<Meta>> {
    match txn.get(db, key)? {
        None => Ok(None),
        Some(m) if m.kind == kind => Ok(Some(m.clone())),
        Some(_) => Err(Error::WrongType),
    }
}

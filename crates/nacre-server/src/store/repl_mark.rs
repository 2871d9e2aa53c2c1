//! A replica's durable position in its master's stream: the stream's id, the offset up to
//! which its writes are applied, and the database the stream had selected there; the `sys`
//! record [`RECORD`], which a restarted replica reads to ask its master for a partial
//! resynchronization from exactly there.
//!
//! Invariants:
//! - M1: a batch committed on a thread while a mark is armed there carries the mark (a put,
//!   or the record's deletion) in the same batch: the record is durable exactly when the
//!   writes of the command that armed it are, and after a crash the record's offset is the
//!   end of the last applied write command that survived.
//! - M2: a mark is armed only for the length of one synchronous call ([`with_armed`]), so it
//!   can never leak onto another command's commit: `cmd::execute` runs a command to its
//!   commit without yielding, on the caller's thread.
//! - M3: when the data set stops being the stream's (a full synchronization starts, the
//!   replica is promoted), the record is deleted in the batch that starts the change.
//! - M4: a full synchronization's load is bracketed by the [`LOADING`] record: it is durable
//!   before the batch that empties the data set (with M3's deletion) and deleted in the batch
//!   that writes the new mark after the last key. A server that opens with it finds a
//!   partial data set and empties it before it serves anyone, deleting the record in that
//!   emptying batch; so a load cut short by a crash is never served as a data set.

use std::cell::RefCell;

use nacre::{Subtable, WriteBatch};

use super::{Result, Store, StoreError};

/// The `sys` record.
pub const RECORD: &[u8] = b"repl-mark";

/// The `sys` record present while a full synchronization loads (M4); its value is the
/// master's replication id the load was for, as text.
pub const LOADING: &[u8] = b"repl-loading";

/// A position in a master's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The master's replication id (40 characters).
    pub replid: String,
    /// Bytes of the stream applied.
    pub offset: u64,
    /// The database selected at `offset`.
    pub db: usize,
}

impl Mark {
    /// The record: offset (8 bytes LE), database (4 bytes LE), replid.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.replid.len());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&(self.db as u32).to_le_bytes());
        out.extend_from_slice(self.replid.as_bytes());
        out
    }

    /// Reads a record.
    pub fn decode(b: &[u8]) -> Result<Mark> {
        let bad = || StoreError::Corrupt(format!("the {} record ({} bytes)", "repl-mark", b.len()));
        if b.len() < 12 {
            return Err(bad());
        }
        let offset = u64::from_le_bytes(b[..8].try_into().map_err(|_| bad())?);
        let db = u32::from_le_bytes(b[8..12].try_into().map_err(|_| bad())?) as usize;
        let replid = std::str::from_utf8(&b[12..])
            .map_err(|_| bad())?
            .to_string();
        Ok(Mark { replid, offset, db })
    }
}

/// What a commit made while armed does with the record.
#[derive(Clone, Debug)]
pub enum Armed {
    /// Writes this mark.
    Put(Mark),
    /// Deletes the record (M3) and the loading record (M4).
    Forget,
    /// Deletes the record (M3) and writes the loading record (M4) with this replication id.
    Loading(String),
    /// Writes this mark and deletes the loading record: a load is complete (M4).
    Loaded(Mark),
}

impl Armed {
    /// Adds what this does with the records to `batch`.
    pub(crate) fn add_to(&self, batch: &mut WriteBatch, sys: &Subtable) {
        match self {
            Armed::Put(m) => {
                batch.put(sys, RECORD, m.encode());
            }
            Armed::Forget => {
                batch.delete(sys, RECORD);
                batch.delete(sys, LOADING);
            }
            Armed::Loading(replid) => {
                batch.delete(sys, RECORD);
                batch.put(sys, LOADING, replid.as_bytes());
            }
            Armed::Loaded(m) => {
                batch.put(sys, RECORD, m.encode());
                batch.delete(sys, LOADING);
            }
        }
    }
}

thread_local! {
    static ARMED: RefCell<Option<Armed>> = const { RefCell::new(None) };
}

/// Runs `f` with `armed` on this thread (M2): every commit `f` makes carries it (M1).
pub fn with_armed<R>(armed: Armed, f: impl FnOnce() -> R) -> R {
    struct Disarm;
    impl Drop for Disarm {
        fn drop(&mut self) {
            ARMED.with(|a| *a.borrow_mut() = None);
        }
    }
    ARMED.with(|a| *a.borrow_mut() = Some(armed));
    let _disarm = Disarm;
    f()
}

/// Adds the armed mark, if any, to `batch`, which is about to be queued and writes
/// something (M1).
pub(crate) fn attach(batch: &mut WriteBatch, sys: &Subtable) {
    ARMED.with(|a| {
        if let Some(armed) = &*a.borrow() {
            armed.add_to(batch, sys);
        }
    });
}

/// The recorded mark, if any.
pub fn read(store: &Store) -> Result<Option<Mark>> {
    match store.db.get(&store.subs.sys, RECORD)? {
        Some(b) => Mark::decode(&b).map(Some),
        None => Ok(None),
    }
}

/// The replication id of a full synchronization whose load a crash cut short (M4), if the
/// data set is such a partial one.
pub fn interrupted_load(store: &Store) -> Result<Option<String>> {
    Ok(store
        .db
        .get(&store.subs.sys, LOADING)?
        .map(|b| String::from_utf8_lossy(&b).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_a_short_record_is_an_error() {
        let m = Mark {
            replid: "a".repeat(40),
            offset: 12345,
            db: 3,
        };
        assert_eq!(Mark::decode(&m.encode()).unwrap(), m);
        assert!(Mark::decode(&[1, 2, 3]).is_err());
    }
}

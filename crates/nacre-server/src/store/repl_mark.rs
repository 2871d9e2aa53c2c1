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

use std::cell::RefCell;

use nacre::{Subtable, WriteBatch};

use super::{Result, Store, StoreError};

/// The `sys` record.
pub const RECORD: &[u8] = b"repl-mark";

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
    /// Deletes the record (M3).
    Forget,
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
    ARMED.with(|a| match &*a.borrow() {
        Some(Armed::Put(m)) => {
            batch.put(sys, RECORD, m.encode());
        }
        Some(Armed::Forget) => {
            batch.delete(sys, RECORD);
        }
        None => {}
    });
}

/// The recorded mark, if any.
pub fn read(store: &Store) -> Result<Option<Mark>> {
    match store.db.get(&store.subs.sys, RECORD)? {
        Some(b) => Mark::decode(&b).map(Some),
        None => Ok(None),
    }
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

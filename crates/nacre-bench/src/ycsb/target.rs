//! What the YCSB runner drives: a [`Store`] (a database under test, shared by the client
//! threads) hands each thread a [`Session`] that executes [`Request`]s.
//!
//! A session executes requests in order and may send them together (the RESP target
//! pipelines them on one connection); the runner gives it one operation's requests at a time
//! unless pipelining is asked for.

use crate::error::Result;

use super::record::Fields;

/// One request of a YCSB operation (a read-modify-write is a read, then an update).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Read one record: every field (`None`) or the listed ones.
    Read {
        /// The record's key.
        key: Vec<u8>,
        /// Field indexes, `None` for all.
        fields: Option<Vec<usize>>,
    },
    /// Overwrite the given fields of an existing record.
    Update {
        /// The record's key.
        key: Vec<u8>,
        /// New field values.
        values: Fields,
    },
    /// Insert a new record with every field.
    Insert {
        /// The record's key.
        key: Vec<u8>,
        /// Every field.
        values: Fields,
    },
    /// Read up to `count` records starting at `start`, in the store's scan order.
    Scan {
        /// The first key.
        start: Vec<u8>,
        /// Most records returned.
        count: usize,
        /// Field indexes, `None` for all.
        fields: Option<Vec<usize>>,
    },
}

/// What a request found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A write was acknowledged.
    Written,
    /// A read found the record with this many fields, or a scan returned this many records.
    Found(usize),
    /// A read found no record.
    NotFound,
}

/// One client thread's handle on a store.
pub trait Session: Send {
    /// Executes `requests` in order, pushing one outcome per request onto `out`.
    fn execute(&mut self, requests: &[Request], out: &mut Vec<Outcome>) -> Result<()>;
}

/// A database under test.
pub trait Store: Sync {
    /// A short label for tables and charts, e.g. `Nacre (emulated)`.
    fn label(&self) -> String;
    /// The durability backend or setting, e.g. `emulated`, `msync`, `sync=1`.
    fn backend(&self) -> String;
    /// What an acknowledged write survives, e.g. `process crash only`, `power loss`.
    fn durability(&self) -> String;
    /// A session for one client thread.
    fn session(&self) -> Result<Box<dyn Session + '_>>;
    /// Bytes the store wrote into PM so far, where it has PM.
    fn pm_written(&self) -> Option<u64> {
        None
    }

    /// Durable commits (group commits) the store made so far, where it counts them.
    fn commits(&self) -> Option<u64> {
        None
    }
}

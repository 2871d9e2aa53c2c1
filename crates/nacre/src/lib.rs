//! `nacre`: the embedded storage engine.
//!
//! Writes are durable without a write-ahead log: records are appended into persistent-memory
//! zones of a *semi-persistent memtable* (its index is volatile and rebuilt on open), and
//! groups of write batches commit through the *Reorder Ring*: space granted in order, records
//! persisted in parallel, commit points advanced in order (seed 000 §3.1-3.2). Full memtables
//! are merged into a per-subtable Global Index by pointer moves (§3.3), and a background
//! cleaner relocates live records out of mostly dead zones and gives the zones back, so the
//! pool holds live data, not write history. Values too long for a record (up to 512 MiB) are
//! stored in zones of their own, named by their record.
//!
//! ```
//! use nacre::{Db, Options, WriteBatch};
//! use nacre_pmem::Backend;
//! let db = Db::open(Options::new("unused-for-sim").backend(Backend::Sim))?;
//! let users = db.subtable("users")?;
//! let mut batch = WriteBatch::new();
//! batch.put(&users, b"alice", b"1").put(&users, b"bob", b"2");
//! db.write(batch)?;
//! assert_eq!(db.get(&users, b"bob")?, Some(b"2".to_vec()));
//! # Ok::<(), nacre::Error>(())
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_docs)]

mod art;
mod background;
mod batch;
mod blob;
mod check;
mod commit;
mod core;
mod db;
mod disk;
mod engine;
mod error;
mod gi;
mod index;
mod iter;
mod memtable;
mod oneshot;
mod options;
mod outcome;
mod read;
mod rebuild;
mod record;
mod recovery;
mod ring;
mod space;
mod spiller;
mod stats;
mod store;
mod subtable;
mod txn;
mod verify;
mod view;
mod write;

pub use batch::WriteBatch;
pub use blob::MAX_VALUE;
pub use db::{Db, SimHandle, DEFAULT_SUBTABLE};
pub use error::{Error, FullCause, Result};
pub use iter::{DbIterator, IterOptions};
pub use nacre_pmem::{ActiveBackend, Backend, BackendReport};
pub use options::{limits, CommitMode, DiskFault, Inject, Options, Pipelining, RecoveryMutation};
pub use outcome::{WriteFuture, WriteToken};
pub use recovery::{LostSubtable, RecoveryReport};
pub use ring::wait_until;
pub use stats::{DiskStats, PersistentIndexStats, Stats, SubtableStats};
pub use subtable::Subtable;
pub use txn::{Transaction, TxnIterator, TxnOptions};
pub use verify::{Problem, VerifyReport};
pub use view::Snapshot;
pub use write::NowGrants;

/// PM bytes one put of a `klen`-byte key and a `vlen`-byte value stored inline takes at most:
/// its record and an item header of its own (for sizing pools).
pub fn put_footprint(klen: usize, vlen: usize) -> u64 {
    (record::record_size(klen, vlen) + record::ITEM_HEADER) as u64
}

//! The engine: the shared state and the commit path of one open database, which the public
//! `Db` and the background worker drive.

use std::sync::atomic::AtomicBool;

use crate::commit::{CommitPath, GroupError, Moved};
use crate::core::Shared;
use crate::recovery::RecoveryReport;

/// An open database's engine.
pub(crate) struct Engine {
    pub sh: Shared,
    pub commit: CommitPath,
    pub recovery: RecoveryReport,
    pub closed: AtomicBool,
    /// The queue and thread behind `Db::write_async`.
    pub writes: crate::write::Committer,
    /// Pessimistic transactions' locks (volatile: L4 in txn/locks.rs).
    pub locks: crate::txn::LockTable,
}

impl std::ops::Deref for Engine {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.sh
    }
}

impl Engine {
    /// Seals subtable `sub`'s active memtable (see [`CommitPath::seal`]).
    pub fn seal(&self, sub: u32) -> bool {
        self.commit.seal(&self.sh, sub)
    }

    /// Writes records the cleaner moves (see [`CommitPath::commit_moved`]).
    pub fn commit_moved(
        &self,
        sub: u32,
        records: Vec<Moved>,
    ) -> Result<Vec<nacre_pmem::PmOffset>, GroupError> {
        self.commit.commit_moved(&self.sh, sub, records)
    }
}

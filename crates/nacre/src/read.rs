//! Reads on the engine: point lookups at a sequence number and iterators, shared by `Db`
//! and transactions. Readers load a subtable's view, then read `visible` (V1 in view.rs),
//! and never block writers.

use std::sync::atomic::Ordering;

use crate::blob::value_at;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::iter::{DbIterator, IterOptions};
use crate::subtable::Subtable;
use crate::view::Holder;

impl Engine {
    /// Refuses a subtable handle of another database.
    pub(crate) fn check_subtable(&self, s: &Subtable) -> Result<()> {
        if s.inner.db == self.id {
            return Ok(());
        }
        Err(Error::InvalidOptions(format!(
            "subtable {:?} does not belong to this database",
            s.name()
        )))
    }

    /// The value of `key` at `seq` (default: the latest acknowledged write).
    pub(crate) fn read(
        &self,
        subtable: &Subtable,
        key: &[u8],
        seq: Option<u64>,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self.lookup(subtable, key, seq)?.map(|(_, v)| v))
    }

    /// The newest version of `key` at `seq` (default: the latest acknowledged write). The
    /// view is loaded before `visible` is read (V1 in view.rs).
    pub(crate) fn lookup(
        &self,
        subtable: &Subtable,
        key: &[u8],
        seq: Option<u64>,
    ) -> Result<Option<(u64, Vec<u8>)>> {
        self.check_subtable(subtable)?;
        let view = subtable.inner.view.load();
        let seq = seq.unwrap_or_else(|| self.visible.load(Ordering::Acquire));
        let hit = view.newest(key, seq)?;
        if hit.is_none() {
            // G3: nothing in PM; the disk levels, read after the view was loaded, hold
            // everything a spill took out of it.
            if let Some(t) = self.disk.as_ref().and_then(|d| d.existing(subtable.id())) {
                return t.get(key, seq);
            }
        }
        match hit {
            Some((s, at)) => {
                let store = &self.store;
                Ok(
                    value_at(&store.pool, &store.zones, at, self.opts.verify_checksums)?
                        .map(|v| (s, v)),
                )
            }
            None => Ok(None),
        }
    }

    /// An iterator over `subtable` with `opts`' bounds and direction, at `opts`' snapshot or
    /// at the latest acknowledged write.
    pub(crate) fn iter_at(&self, subtable: &Subtable, opts: IterOptions<'_>) -> Result<DbIterator> {
        self.check_subtable(subtable)?;
        // R3 in gi/pending.rs: iterators walk the rebuilt Global Index.
        self.index_ready.wait()?;
        let visible = &self.visible;
        let pin = match opts.snapshot {
            Some(s) => self.snapshots.register(Holder::Iterator, || s.sequence()),
            None => self
                .snapshots
                .register(Holder::Iterator, || visible.load(Ordering::Acquire)),
        };
        Ok(DbIterator::new(
            (
                self.store.pool.clone(),
                self.store.zones.clone(),
                self.opts.verify_checksums,
                self.disk.clone(),
            ),
            subtable.clone(),
            pin,
            opts,
        ))
    }

    /// A snapshot of everything acknowledged so far.
    pub(crate) fn snapshot(&self) -> crate::view::Snapshot {
        let visible = &self.visible;
        crate::view::Snapshot {
            guard: self
                .snapshots
                .register(Holder::Snapshot, || visible.load(Ordering::Acquire)),
        }
    }

    /// A transaction reading at a fresh snapshot: optimistic, or pessimistic with `opts`.
    pub(crate) fn begin(
        &self,
        opts: Option<crate::txn::TxnOptions>,
    ) -> crate::txn::Transaction<'_> {
        crate::txn::Transaction::begin(self, self.snapshot(), opts)
    }
}

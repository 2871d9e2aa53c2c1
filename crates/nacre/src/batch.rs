//! `WriteBatch`: puts and deletes, across subtables, applied atomically by `Db::write`.

use crate::outcome::WriteToken;
use crate::record::{record_size, Kind};
use crate::subtable::Subtable;

/// An earlier batch a batch depends on ([`WriteBatch::after`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// The batch at this position of the same `write_async_many` or `write_now` call
    /// (replaced by its token when the call queues the batches).
    InCall(usize),
    /// A batch queued before.
    Token(WriteToken),
}

/// One operation of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    /// Identity of the database the subtable handle came from.
    pub db: u64,
    pub subtable: u32,
    pub kind: Kind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// An ordered set of puts and deletes applied atomically: after `Db::write` returns, all of
/// them are durable and visible; after a crash, either all or none are present. Later
/// operations on the same key win.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<Op>,
    /// Declared by the caller to free space (see [`WriteBatch::frees_space`]).
    frees: bool,
    /// Earlier batches this one depends on.
    pub(crate) after: Vec<After>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Sets `key` to `value` in `subtable`.
    pub fn put(
        &mut self,
        subtable: &Subtable,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.ops.push(Op {
            db: subtable.inner.db,
            subtable: subtable.id(),
            kind: Kind::Put,
            key: key.as_ref().to_vec(),
            value: value.as_ref().to_vec(),
        });
        self
    }

    /// Deletes `key` from `subtable`.
    pub fn delete(&mut self, subtable: &Subtable, key: impl AsRef<[u8]>) -> &mut Self {
        self.ops.push(Op {
            db: subtable.inner.db,
            subtable: subtable.id(),
            kind: Kind::Delete,
            key: key.as_ref().to_vec(),
            value: Vec::new(),
        });
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every operation and dependency.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.after.clear();
    }

    /// Makes this batch depend on a batch queued before it (`token` from its
    /// [`crate::WriteFuture::token`]): if that one fails, this one fails with
    /// [`crate::Error::DependencyFailed`] and nothing of it is applied, and batches that
    /// depend on this one fail in turn. For a batch computed from another's writes before
    /// they were durable (a server whose commands read queued writes). Two such batches that
    /// commit in one group share its outcome.
    pub fn after(&mut self, token: &WriteToken) -> &mut Self {
        self.after.push(After::Token(token.clone()));
        self
    }

    /// [`WriteBatch::after`] for the batch at position `i` of the same
    /// [`crate::Db::write_async_many`] or [`crate::Db::write_now`] call, which must come
    /// before this one (else this batch fails with [`crate::Error::InvalidOptions`]).
    pub fn after_batch(&mut self, i: usize) -> &mut Self {
        self.after.push(After::InCall(i));
        self
    }

    /// Declares that committing the batch frees space (it drops or replaces data: a
    /// server's `FLUSHALL` writing a new namespace record, an expiry): like a batch of
    /// deletes, it is not slowed when free zones run low and may use part of the zones kept
    /// for the cleaner, so that a full pool can always be made writable again. A caller
    /// that marks batches which add data takes that reserve from the cleaner.
    pub fn mark_frees_space(&mut self) -> &mut Self {
        self.frees = true;
        self
    }

    /// Whether the batch frees space: marked so, or made of deletes only.
    pub fn frees_space(&self) -> bool {
        self.frees || self.ops.iter().all(|o| o.kind == Kind::Delete)
    }

    /// Record bytes the batch adds to each subtable it touches, as (subtable, bytes).
    pub(crate) fn bytes_per_subtable(&self) -> Vec<(u32, usize)> {
        let mut out: Vec<(u32, usize)> = Vec::new();
        for op in &self.ops {
            let n = record_size(op.key.len(), op.value.len());
            match out.iter_mut().find(|(s, _)| *s == op.subtable) {
                Some(e) => e.1 += n,
                None => out.push((op.subtable, n)),
            }
        }
        out
    }
}

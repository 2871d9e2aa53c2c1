//! A transaction's private state: its buffered writes (the last one per key), the keys it
//! tracks for conflicts and locks, and the undo log behind savepoints.
//!
//! Invariants:
//! - B1: `writes` holds, per (subtable, key), the transaction's last put (`Some`) or delete
//!   (`None`); committing them in key order applies the same final state as replaying every
//!   operation in order.
//! - B2: while a savepoint is set, every change to `writes` and `tracked` pushes the entry's
//!   previous state onto `undo` first; rolling back to the savepoint pops and restores them
//!   in reverse, so both are exactly as they were when it was set.

use std::collections::{BTreeMap, HashMap};

use super::locks::{LockKey, Mode};

/// What the transaction knows of a key it tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tracked {
    /// The read point the commit checks the key against: no version above it may exist.
    pub since: u64,
    /// The lock held on it (pessimistic transactions).
    pub lock: Option<Mode>,
}

/// One undo record: an entry's state before a change.
enum Undo {
    Write(LockKey, Option<Option<Vec<u8>>>),
    Track(LockKey, Option<Tracked>),
}

/// A transaction's buffered writes, tracked keys and savepoints.
#[derive(Default)]
pub(crate) struct Buffer {
    pub writes: BTreeMap<LockKey, Option<Vec<u8>>>,
    pub tracked: HashMap<LockKey, Tracked>,
    undo: Vec<Undo>,
    /// Undo lengths at each savepoint, oldest first.
    savepoints: Vec<usize>,
}

impl Buffer {
    /// Buffers a put (`Some`) or delete (`None`) of `key` (B1, B2).
    pub fn write(&mut self, key: LockKey, value: Option<Vec<u8>>) {
        if self.savepoints.is_empty() {
            self.writes.insert(key, value);
        } else {
            let prev = self.writes.insert(key.clone(), value);
            self.undo.push(Undo::Write(key, prev));
        }
    }

    /// Tracks `key` as `t` (B2).
    pub fn track(&mut self, key: &LockKey, t: Tracked) {
        let prev = self.tracked.insert(key.clone(), t);
        if !self.savepoints.is_empty() && prev != Some(t) {
            self.undo.push(Undo::Track(key.clone(), prev));
        }
    }

    /// The buffered write of `key`: `Some(None)` for a delete, `None` if it has none.
    pub fn own(&self, key: &LockKey) -> Option<Option<&[u8]>> {
        self.writes.get(key).map(|v| v.as_deref())
    }

    pub fn set_savepoint(&mut self) {
        self.savepoints.push(self.undo.len());
    }

    /// Forgets the newest savepoint, keeping what was done since; false if there is none.
    pub fn pop_savepoint(&mut self) -> bool {
        if self.savepoints.pop().is_none() {
            return false;
        }
        if self.savepoints.is_empty() {
            // Nothing can roll back to these records any more.
            self.undo.clear();
        }
        true
    }

    /// Undoes everything since the newest savepoint and forgets it (B2). Calls `released`
    /// with each key's lock before and after, so the caller can release or downgrade locks
    /// taken since. False if there is no savepoint.
    pub fn rollback_to_savepoint(
        &mut self,
        mut released: impl FnMut(&LockKey, Option<Mode>, Option<Mode>),
    ) -> bool {
        let Some(at) = self.savepoints.pop() else {
            return false;
        };
        while self.undo.len() > at {
            match self.undo.pop() {
                Some(Undo::Write(k, prev)) => match prev {
                    Some(v) => {
                        self.writes.insert(k, v);
                    }
                    None => {
                        self.writes.remove(&k);
                    }
                },
                Some(Undo::Track(k, prev)) => {
                    let now = self.tracked.get(&k).and_then(|t| t.lock);
                    let before = prev.and_then(|t| t.lock);
                    if now != before {
                        released(&k, now, before);
                    }
                    match prev {
                        Some(t) => {
                            self.tracked.insert(k, t);
                        }
                        None => {
                            self.tracked.remove(&k);
                        }
                    }
                }
                None => break,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> LockKey {
        (1, s.as_bytes().to_vec())
    }

    #[test]
    fn rolling_back_restores_writes_and_tracking_as_they_were() {
        let mut b = Buffer::default();
        b.write(k("a"), Some(b"1".to_vec()));
        b.track(
            &k("a"),
            Tracked {
                since: 5,
                lock: Some(Mode::Shared),
            },
        );
        b.set_savepoint();
        b.write(k("a"), None);
        b.write(k("b"), Some(b"2".to_vec()));
        b.track(
            &k("a"),
            Tracked {
                since: 5,
                lock: Some(Mode::Exclusive),
            },
        );
        b.track(
            &k("b"),
            Tracked {
                since: 7,
                lock: Some(Mode::Exclusive),
            },
        );
        b.set_savepoint();
        b.write(k("c"), Some(b"3".to_vec()));
        assert!(b.pop_savepoint());
        let mut changes = Vec::new();
        assert!(b.rollback_to_savepoint(|key, now, before| changes.push((
            key.clone(),
            now,
            before
        ))));
        assert_eq!(b.own(&k("a")), Some(Some(&b"1"[..])));
        assert_eq!(b.own(&k("b")), None);
        assert_eq!(b.own(&k("c")), None);
        assert_eq!(b.tracked.len(), 1);
        assert_eq!(b.tracked[&k("a")].lock, Some(Mode::Shared));
        changes.sort();
        assert_eq!(
            changes,
            vec![
                (k("a"), Some(Mode::Exclusive), Some(Mode::Shared)),
                (k("b"), Some(Mode::Exclusive), None)
            ]
        );
        assert!(!b.rollback_to_savepoint(|_, _, _| {}));
    }
}

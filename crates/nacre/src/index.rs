//! The volatile index of a memtable: (user key, sequence) -> record offset in PM. Rebuilt by
//! scanning the memtable's zones on open, so it is never persisted (seed 000 §3.1).
//!
//! Order: user key ascending, then sequence descending, so the first entry at or after
//! (key, snapshot) is the newest version visible at that snapshot.
//!
//! Thread safety: lock-free inserts and reads (a concurrent skip list); readers never block
//! writers.

use std::cmp::Ordering;
use std::ops::Bound;

#[cfg(test)]
use crossbeam_skiplist::SkipMap;
use nacre_pmem::PmOffset;

/// An index key: user key and sequence number, ordered key ascending, sequence descending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IKey {
    /// User key.
    pub key: Vec<u8>,
    /// Sequence number of the version.
    pub seq: u64,
}

impl Ord for IKey {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key).then_with(|| o.seq.cmp(&self.seq))
    }
}

impl PartialOrd for IKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// One index entry.
pub type Entry = (IKey, PmOffset);

/// What the engine needs from a memtable index. Implementations must be safe for concurrent
/// inserts and reads.
pub trait MemIndex: Send + Sync {
    /// Adds a version.
    fn insert(&self, key: &[u8], seq: u64, at: PmOffset);
    /// The newest version of `key` with sequence at most `snapshot`.
    fn get(&self, key: &[u8], snapshot: u64) -> Option<(u64, PmOffset)>;
    /// The first entry after `bound` in index order, written into `out` (whose key buffer is
    /// reused: walks allocate nothing per step); its record's offset.
    fn next_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Option<PmOffset>;
    /// The last entry before `bound` in index order, written into `out` like
    /// [`MemIndex::next_into`].
    fn prev_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Option<PmOffset>;
    /// The first entry after `bound` in index order (a key of its own).
    fn next(&self, bound: Bound<&IKey>) -> Option<Entry> {
        let mut k = IKey::default();
        self.next_into(bound, &mut k).map(|at| (k, at))
    }
    /// The last entry before `bound` in index order (a key of its own).
    fn prev(&self, bound: Bound<&IKey>) -> Option<Entry> {
        let mut k = IKey::default();
        self.prev_into(bound, &mut k).map(|at| (k, at))
    }
    /// The first key after `after` (`None`: the first key), into `key`, with every version
    /// of it, newest first, into `versions`; false when there is none. A walk over every
    /// version (a merge) reads each key's versions in one pass this way, where stepping
    /// with [`MemIndex::next_into`] may look a hot key's versions over once per version.
    fn next_key_into(
        &self,
        after: Option<&[u8]>,
        key: &mut Vec<u8>,
        versions: &mut Vec<(u64, PmOffset)>,
    ) -> bool {
        versions.clear();
        let mut ik = IKey::default();
        let first = match after {
            None => self.next_into(Bound::Unbounded, &mut ik),
            // (k, 0) is k's last possible entry: what follows it is the next key's first.
            Some(k) => {
                let end = IKey {
                    key: k.to_vec(),
                    seq: 0,
                };
                self.next_into(Bound::Excluded(&end), &mut ik)
            }
        };
        let Some(at) = first else {
            return false;
        };
        key.clear();
        key.extend_from_slice(&ik.key);
        versions.push((ik.seq, at));
        let mut cur = ik.clone();
        while let Some(at) = self.next_into(Bound::Excluded(&cur), &mut ik) {
            if ik.key != *key {
                break;
            }
            versions.push((ik.seq, at));
            cur.seq = ik.seq;
        }
        true
    }
    /// Entries after `bound` in index order, appended to `out` until it holds `max` or a key
    /// reaches `upper`: what [`MemIndex::next_into`] would return step by step, read in one
    /// walk (an ordered scan then descends once per batch, not once per entry).
    fn next_batch(
        &self,
        bound: Bound<&IKey>,
        upper: Option<&[u8]>,
        max: usize,
        out: &mut Vec<Entry>,
    ) {
        let mut cur = IKey::default();
        let mut first = true;
        while out.len() < max {
            let b = if first { bound } else { Bound::Excluded(&cur) };
            let mut next = IKey::default();
            let Some(at) = self.next_into(b, &mut next) else {
                return;
            };
            if upper.is_some_and(|u| next.key.as_slice() >= u) {
                return;
            }
            first = false;
            cur.clone_from(&next);
            out.push((next, at));
        }
    }
    /// Number of versions indexed (tests compare indexes by it).
    #[cfg(test)]
    fn len(&self) -> usize;
}

/// [`MemIndex`] on a lock-free skip list (the reference the radix tree is tested against).
#[cfg(test)]
#[derive(Default)]
pub struct SkipListIndex {
    map: SkipMap<IKey, u64>,
}

#[cfg(test)]
impl MemIndex for SkipListIndex {
    fn insert(&self, key: &[u8], seq: u64, at: PmOffset) {
        self.map.insert(
            IKey {
                key: key.to_vec(),
                seq,
            },
            at.get(),
        );
    }

    fn get(&self, key: &[u8], snapshot: u64) -> Option<(u64, PmOffset)> {
        let probe = IKey {
            key: key.to_vec(),
            seq: snapshot,
        };
        let e = self.map.lower_bound(Bound::Included(&probe))?;
        (e.key().key == key).then(|| (e.key().seq, PmOffset(*e.value())))
    }

    fn next_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Option<PmOffset> {
        self.map.lower_bound(bound).map(|e| {
            out.clone_from(e.key());
            PmOffset(*e.value())
        })
    }

    fn prev_into(&self, bound: Bound<&IKey>, out: &mut IKey) -> Option<PmOffset> {
        self.map.upper_bound(bound).map(|e| {
            out.clone_from(e.key());
            PmOffset(*e.value())
        })
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_visible_version_wins() {
        let ix = SkipListIndex::default();
        ix.insert(b"a", 5, PmOffset(50));
        ix.insert(b"a", 9, PmOffset(90));
        ix.insert(b"b", 3, PmOffset(30));
        assert_eq!(ix.get(b"a", 100), Some((9, PmOffset(90))));
        assert_eq!(ix.get(b"a", 8), Some((5, PmOffset(50))));
        assert_eq!(ix.get(b"a", 4), None);
        assert_eq!(ix.get(b"c", 100), None);
        let first = ix.next(Bound::Unbounded).map(|e| e.0);
        assert_eq!(
            first,
            Some(IKey {
                key: b"a".to_vec(),
                seq: 9
            })
        );
        let last = ix.prev(Bound::Unbounded).map(|e| e.0);
        assert_eq!(
            last,
            Some(IKey {
                key: b"b".to_vec(),
                seq: 3
            })
        );
        let after = ix.next(Bound::Excluded(&IKey {
            key: b"a".to_vec(),
            seq: 5,
        }));
        assert_eq!(after.map(|e| e.0.key), Some(b"b".to_vec()));
    }
}

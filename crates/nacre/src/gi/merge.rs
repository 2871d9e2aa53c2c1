//! Merging versions into the Global Index: which versions stay (the horizon rule), the ghost
//! and tombstone bookkeeping (GI2, GI3 in index.rs), and the live-byte deltas it causes.

use nacre_pmem::PmOffset;

use crate::gi::index::{GlobalIndex, KeyEntry, Version};

/// Which read points can still need old versions (V2 in view.rs): every sequence number at
/// or above `h`, and the registered snapshots below it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Horizon {
    pub h: u64,
    /// Registered read points below `h`, ascending.
    pub snaps: Vec<u64>,
    /// GI3 switched off (mutation tests only).
    pub ignore_ghosts: bool,
    /// With disk levels a key's oldest tombstone stays: disk may hold older versions (G4 in
    /// disk/mod.rs).
    pub keep_tombstones: bool,
}

impl Horizon {
    /// Whether a version at `seq`, whose next newer version is at `newer` (`u64::MAX` if it
    /// is the newest), is the answer for some read point.
    fn keeps(&self, seq: u64, newer: u64) -> bool {
        let needed_by = |p: u64| seq <= p && p < newer;
        seq > self.h || needed_by(self.h) || self.snaps.iter().any(|&p| needed_by(p))
    }
}

/// Merges `new` (versions of `key` newer than every indexed one, newest first; recovery
/// passes every copy it found) into the Global Index and drops what the horizon no longer
/// needs. `extra_ghosts` counts copies the caller found but is not passing (duplicates).
/// `live(at, size, added)` is told of every record that starts or stops being indexed, and
/// every version of a blob that leaves (or never joins) the index is added to `gone` (its
/// zones can be given back, blob.rs B2).
/// Returns whether the key should be looked at again later: it keeps older versions for
/// readers that may go away, or a tombstone that waits for its ghosts to leave PM.
pub(crate) fn apply(
    gi: &GlobalIndex,
    key: &[u8],
    new: &[Version],
    extra_ghosts: u64,
    hz: &Horizon,
    live: &mut impl FnMut(PmOffset, u32, bool),
    gone: &mut Vec<Version>,
) -> bool {
    let entry = gi.entry(key);
    let (old, mut ghosts, mut born) = match &entry {
        Some(e) => (
            e.value().versions().to_vec(),
            e.value().ghosts(),
            e.value().born(),
        ),
        None => (Vec::new(), 0, new.iter().map(|v| v.seq).min().unwrap_or(0)),
    };
    let old_ghosts = ghosts;
    ghosts += extra_ghosts;
    // A version already indexed (a copy of it): counted as a ghost, never indexed twice (GI1)
    // nor dropped, which would give back the zones of a blob the indexed copy names.
    // `old` is newest first; new versions are normally all newer than it (one comparison).
    let dup = |v: &Version| {
        old.first().is_some_and(|o| v.seq <= o.seq)
            && old.binary_search_by(|o| v.seq.cmp(&o.seq)).is_ok()
    };
    ghosts += new.iter().filter(|v| dup(v)).count() as u64;
    let all = new
        .iter()
        .filter(|v| !dup(v))
        .map(|v| (*v, true))
        .chain(old.iter().map(|v| (*v, false)));
    let mut kept: Vec<(Version, bool)> = Vec::with_capacity(new.len() + old.len());
    let mut newer = u64::MAX;
    let mut removed = 0u64;
    for (v, is_new) in all {
        if hz.keeps(v.seq, newer) {
            kept.push((v, is_new));
        } else {
            ghosts += 1;
            if !is_new {
                removed += 1;
                live(v.at, v.size, false);
            }
            if v.blob {
                gone.push(v);
            }
        }
        newer = v.seq;
    }
    // GI3: an oldest tombstone with no older copy anywhere in PM hides nothing.
    while !hz.keep_tombstones
        && (ghosts == 0 || hz.ignore_ghosts)
        && kept.last().is_some_and(|(v, _)| v.tomb)
    {
        if let Some((v, is_new)) = kept.pop() {
            if !is_new {
                removed += 1;
                live(v.at, v.size, false);
            }
        }
        if let Some((v, _)) = kept.last() {
            born = v.seq;
        }
    }
    let mut added = 0u64;
    for (v, is_new) in &kept {
        if *is_new {
            added += 1;
            live(v.at, v.size, true);
        }
    }
    gi.count_versions(added, removed);
    let versions: Vec<Version> = kept.into_iter().map(|(v, _)| v).collect();
    let revisit = versions.len() > 1 || versions.last().is_some_and(|v| v.tomb);
    gi.mirror_change(key, (&old, old_ghosts), (&versions, ghosts));
    match entry {
        None if versions.is_empty() => {}
        None => gi.put_entry(key.to_vec(), KeyEntry::new(versions, ghosts, born)),
        Some(_) if versions.is_empty() => gi.remove(key),
        Some(e) => {
            let e = e.value();
            e.set_versions(versions);
            e.set_ghosts(ghosts);
            e.set_born(born);
        }
    }
    revisit
}

/// The entry recovery builds for a key from every copy it found: `versions` newest first, one
/// per sequence number, and `dups` further copies (a record and its relocated copy). The
/// newest version stays, the other copies are ghosts (GI2), and a newest version that is a
/// tombstone with no ghost goes (GI3): what [`apply`] gives for an absent key with a horizon at
/// or above every version, without its lookups. `None` when nothing stays.
pub(crate) fn fresh(
    versions: &[Version],
    dups: u64,
    ignore_ghosts: bool,
    keep_tombstones: bool,
) -> Option<(Version, u64, u64)> {
    let newest = *versions.first()?;
    let ghosts = versions.len() as u64 - 1 + dups;
    if newest.tomb && !keep_tombstones && (ghosts == 0 || ignore_ghosts) {
        return None;
    }
    let born = versions.last().map_or(newest.seq, |v| v.seq);
    Some((newest, ghosts, born))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::MemIndex;

    fn v(seq: u64, tomb: bool) -> Version {
        Version {
            seq,
            at: PmOffset(seq * 64),
            size: 64,
            tomb,
            blob: false,
        }
    }

    /// `apply` with no extra ghosts, ignoring dropped blobs.
    fn merge(
        gi: &GlobalIndex,
        key: &[u8],
        new: &[Version],
        hz: &Horizon,
        acct: &mut impl FnMut(PmOffset, u32, bool),
    ) -> bool {
        apply(gi, key, new, 0, hz, acct, &mut Vec::new())
    }

    fn seqs(gi: &GlobalIndex, key: &[u8]) -> Vec<u64> {
        gi.entry(key)
            .map(|e| e.value().versions().iter().map(|v| v.seq).collect())
            .unwrap_or_default()
    }

    #[test]
    fn superseded_versions_go_unless_a_read_point_needs_them() {
        let gi = GlobalIndex::default();
        let mut live = 0i64;
        let mut acct =
            |_: PmOffset, n: u32, add: bool| live += if add { n as i64 } else { -(n as i64) };
        let hz = Horizon {
            h: 100,
            snaps: vec![],
            ignore_ghosts: false,
            keep_tombstones: false,
        };
        merge(&gi, b"k", &[v(5, false)], &hz, &mut acct);
        merge(&gi, b"k", &[v(9, false)], &hz, &mut acct);
        assert_eq!(seqs(&gi, b"k"), vec![9]);
        let hz = Horizon {
            h: 100,
            snaps: vec![10],
            ignore_ghosts: false,
            keep_tombstones: false,
        };
        merge(&gi, b"k", &[v(20, false)], &hz, &mut acct);
        assert_eq!(seqs(&gi, b"k"), vec![20, 9], "snapshot 10 reads 9");
        let hz = Horizon {
            h: 15,
            snaps: vec![],
            ignore_ghosts: false,
            keep_tombstones: false,
        };
        merge(&gi, b"k", &[v(30, false)], &hz, &mut acct);
        assert_eq!(seqs(&gi, b"k"), vec![30, 20, 9], "reads at 15 still need 9");
        assert_eq!(live, 3 * 64);
        assert_eq!(gi.entry(b"k").map(|e| e.value().ghosts()), Some(1));
    }

    #[test]
    fn recovery_entries_match_apply_on_an_absent_key() {
        let cases: [&[Version]; 4] = [
            &[v(9, false), v(5, false)],
            &[v(9, true), v(5, false)],
            &[v(9, true)],
            &[v(12, false)],
        ];
        for (i, vs) in cases.iter().enumerate() {
            for dups in [0, 1] {
                let gi = GlobalIndex::default();
                let hz = Horizon {
                    h: 100,
                    snaps: vec![],
                    ignore_ghosts: false,
                    keep_tombstones: false,
                };
                apply(&gi, b"k", vs, dups, &hz, &mut |_, _, _| {}, &mut Vec::new());
                let got = gi.entry(b"k").map(|e| {
                    let e = e.value();
                    (e.versions()[0], e.ghosts(), e.born())
                });
                assert_eq!(got, fresh(vs, dups, false, false), "case {i} dups {dups}");
            }
        }
    }

    #[test]
    fn a_tombstone_stays_while_an_older_copy_remains() {
        let gi = GlobalIndex::default();
        let mut acct = |_: PmOffset, _: u32, _: bool| {};
        let hz = Horizon {
            h: 100,
            snaps: vec![],
            ignore_ghosts: false,
            keep_tombstones: false,
        };
        merge(&gi, b"k", &[v(5, false)], &hz, &mut acct);
        merge(&gi, b"k", &[v(9, true)], &hz, &mut acct);
        assert_eq!(seqs(&gi, b"k"), vec![9], "the put at 5 is still in PM");
        assert_eq!(gi.get(b"k", 100), Some((9, PmOffset(9 * 64))));
        if let Some(e) = gi.entry(b"k") {
            e.value().ghost_gone(5);
        }
        merge(&gi, b"k", &[], &hz, &mut acct);
        assert!(
            gi.entry(b"k").is_none(),
            "nothing older remains: the tombstone goes"
        );
        // A tombstone with no older copy at all is never kept.
        merge(&gi, b"j", &[v(12, true), v(11, false)], &hz, &mut acct);
        assert_eq!(seqs(&gi, b"j"), vec![12]);
        assert_eq!(gi.len(), 1);
    }

    #[test]
    fn a_version_already_indexed_counts_as_a_ghost_and_is_never_dropped() {
        let gi = GlobalIndex::default();
        let mut acct = |_: PmOffset, _: u32, _: bool| {};
        let hz = Horizon {
            h: 100,
            snaps: vec![5],
            ignore_ghosts: false,
            keep_tombstones: false,
        };
        merge(&gi, b"k", &[v(9, false), v(5, false)], &hz, &mut acct);
        let mut copy = v(9, false);
        copy.at = PmOffset(12_345);
        copy.blob = true;
        let mut gone = Vec::new();
        apply(&gi, b"k", &[copy], 0, &hz, &mut acct, &mut gone);
        assert_eq!(seqs(&gi, b"k"), vec![9, 5], "indexed once");
        assert_eq!(
            gi.get(b"k", 100),
            Some((9, PmOffset(9 * 64))),
            "the first copy stays"
        );
        assert!(gone.is_empty(), "the copy's blob is not given back");
        assert_eq!(gi.entry(b"k").map(|e| e.value().ghosts()), Some(1));
    }
}

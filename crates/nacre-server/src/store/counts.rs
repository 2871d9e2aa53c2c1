//! Key counts kept in PM, so that a start after a crash answers `DBSIZE` and `INFO keyspace`
//! at once instead of after counting every key.
//!
//! Each namespace's count is split over [`SLOTS`] records in `sys` (`count` + the slot's
//! number); a slot's record holds, per namespace, the keys that the batches written
//! through that slot added or removed. A namespace's count is the sum over the slots.
//!
//! Invariants:
//! - C1 (atomic with the keys): a batch that adds or removes keys (its metadata records)
//!   carries the new value of one slot's record, in the same batch: it commits with the
//!   keys or not at all.
//! - C2 (no guess survives): a batch takes a slot no unresolved batch holds, so the value it
//!   writes rests only on resolved commits; the slot is given back when the batch is
//!   resolved, and a failed batch's changes are taken out of the slot's value first. Only
//!   when every slot is held (more than [`SLOTS`] such batches in flight) does a batch
//!   share one, and it then depends on the slot's holder (`WriteBatch::after`): if that one
//!   fails, so does it.
//! - C3 (trusted only when whole): the records answer for the counts only once the
//!   `counts-kept` record exists, written with the database's creation, with a clean
//!   shutdown's counts, or once a background count has put the records right. A start
//!   without it, or with a slot record that fails its checksum or does not decode (a pool
//!   from an earlier build, damaged media), counts keys in the background as before.
//! - C4 (checked): after a crash the start still counts keys in the background, on a
//!   snapshot taken before any write, and compares each namespace with its records; a
//!   difference is logged as an error and corrected in the counts and the records.

use std::collections::BTreeMap;

use nacre::{Db, Subtable};
use parking_lot::Mutex;

use super::Result;

/// Count slots.
pub const SLOTS: usize = 1024;

/// The `sys` record whose presence says the slots hold every namespace's count (C3).
pub const KEPT: &[u8] = b"counts-kept";

const PREFIX: &[u8] = b"count";

/// The `sys` key of slot `s`.
pub fn slot_key(s: usize) -> Vec<u8> {
    let mut k = PREFIX.to_vec();
    k.extend_from_slice(&(s as u16).to_be_bytes());
    k
}

/// A slot's record: per namespace (ascending), its count in this slot.
pub fn encode(counts: &BTreeMap<u32, i64>) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + counts.len() * 12);
    v.extend_from_slice(&(counts.len() as u16).to_le_bytes());
    for (g, n) in counts {
        v.extend_from_slice(&g.to_le_bytes());
        v.extend_from_slice(&n.to_le_bytes());
    }
    v
}

/// A slot's record, or `None` if it is malformed.
pub fn decode(b: &[u8]) -> Option<BTreeMap<u32, i64>> {
    let n = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
    if b.len() != 2 + n * 12 {
        return None;
    }
    let mut out = BTreeMap::new();
    for e in b[2..].chunks_exact(12) {
        let g = u32::from_le_bytes(e[..4].try_into().ok()?);
        let c = i64::from_le_bytes(e[4..].try_into().ok()?);
        if out.insert(g, c).is_some() {
            return None;
        }
    }
    Some(out)
}

/// What the start read of the slots.
pub struct Read {
    /// Each slot's counts (empty for a slot without a record or with a malformed one).
    pub slots: Vec<BTreeMap<u32, i64>>,
    /// Slots whose records are malformed or fail their checksum: the caller deletes them and
    /// counts keys (C3).
    pub malformed: Vec<usize>,
    /// Whether `counts-kept` exists.
    pub kept: bool,
}

impl Read {
    /// Namespace `gen`'s count: the sum over the slots.
    pub fn total(&self, gen: u32) -> i64 {
        self.slots.iter().filter_map(|s| s.get(&gen)).sum()
    }
}

/// Reads every slot's record (point reads: they do not wait for the engine's background
/// index rebuild).
pub fn read(db: &Db, sys: &Subtable) -> Result<Read> {
    let mut slots = Vec::with_capacity(SLOTS);
    let mut malformed = Vec::new();
    for s in 0..SLOTS {
        // A record that fails its checksum is as untrusted as one that does not decode: the
        // counts are derivable, so the start counts keys rather than refuse to start.
        let damage = match db.get(sys, slot_key(s)) {
            Ok(None) => {
                slots.push(BTreeMap::new());
                continue;
            }
            Ok(Some(b)) => match decode(&b) {
                Some(m) => {
                    slots.push(m);
                    continue;
                }
                None => "malformed".to_string(),
            },
            Err(e @ nacre::Error::Corrupt { .. }) => e.to_string(),
            Err(e) => return Err(e.into()),
        };
        tracing::warn!(
            slot = s,
            damage,
            "a key count record is damaged: counting keys"
        );
        malformed.push(s);
        slots.push(BTreeMap::new());
    }
    Ok(Read {
        slots,
        malformed,
        kept: db.get(sys, KEPT)?.is_some(),
    })
}

/// The slots' values (C2): resolved commits plus the one batch holding each slot.
pub struct Slots {
    inner: Mutex<Inner>,
}

struct Inner {
    values: Vec<BTreeMap<u32, i64>>,
    /// The ticket of the batch holding each slot (0: free).
    holder: Vec<u64>,
    /// Free slots.
    free: Vec<usize>,
}

/// The slot a batch took, and its changes per namespace (to take out if it fails).
#[derive(Debug)]
pub struct Taken {
    pub slot: usize,
    pub deltas: Vec<(u32, i64)>,
}

impl Slots {
    /// Slots holding `values` (one map per slot).
    pub fn new(mut values: Vec<BTreeMap<u32, i64>>) -> Slots {
        values.resize_with(SLOTS, BTreeMap::new);
        Slots {
            inner: Mutex::new(Inner {
                values,
                holder: vec![0; SLOTS],
                free: (0..SLOTS).rev().collect(),
            }),
        }
    }

    /// Takes a slot for the batch of `ticket` with `deltas` (under the commit queue's lock,
    /// so slots are taken in ticket order): the slot, its record's new value, and the
    /// ticket the batch must depend on when it shares the slot (C2).
    pub fn take(&self, ticket: u64, deltas: Vec<(u32, i64)>) -> (Taken, Vec<u8>, Option<u64>) {
        let mut g = self.inner.lock();
        let (slot, dep) = match g.free.pop() {
            Some(s) => (s, None),
            None => {
                // Every slot is held: share the one whose holder is oldest.
                let s = (0..SLOTS).min_by_key(|&s| g.holder[s]).unwrap_or(0);
                (s, Some(g.holder[s]))
            }
        };
        g.holder[slot] = ticket;
        let v = &mut g.values[slot];
        for &(gen, d) in &deltas {
            add(v, gen, d);
        }
        let record = encode(v);
        (Taken { slot, deltas }, record, dep)
    }

    /// The batch of `ticket` that took `t` is resolved (`ok`: committed): its changes come
    /// out of the slot if it failed, and the slot is free again unless a later batch shares
    /// it.
    pub fn release(&self, ticket: u64, t: &Taken, ok: bool) {
        let mut g = self.inner.lock();
        if !ok {
            let v = &mut g.values[t.slot];
            for &(gen, d) in &t.deltas {
                add(v, gen, -d);
            }
        }
        if g.holder[t.slot] == ticket {
            g.holder[t.slot] = 0;
            g.free.push(t.slot);
        }
    }

    /// Forgets namespace `gen` (dropped, and its keys deleted): its counts go from the
    /// values, and from each record the next time its slot is written.
    pub fn forget(&self, gen: u32) {
        let mut g = self.inner.lock();
        for v in &mut g.values {
            v.remove(&gen);
        }
    }

    /// Slots held by an unresolved batch (for tests).
    pub fn held(&self) -> usize {
        let g = self.inner.lock();
        SLOTS - g.free.len()
    }
}

/// Adds `d` to namespace `gen`'s count in a slot's values (a zero count is left out).
pub fn add(v: &mut BTreeMap<u32, i64>, gen: u32, d: i64) {
    let e = v.entry(gen).or_insert(0);
    *e += d;
    if *e == 0 {
        v.remove(&gen);
    }
}

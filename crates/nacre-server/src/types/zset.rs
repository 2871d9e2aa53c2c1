//! Sorted sets over the keyspace transaction: a metadata record (member count, version,
//! index bounds), one `sub` record per member holding its score, and a score index under the
//! same version (`store/encoding.rs`). Commands (`cmd/zsets.rs`, `cmd/zsetops.rs`, the
//! blocking pops) parse arguments, raise events and write replies around these operations.

use super::{coll, typed, Result};
use crate::store::encoding::{self, Hint, Kind, Meta};
use crate::store::txn::Txn;
use crate::store::StoreError;

/// Redis's `zset-max-listpack-entries` and `zset-max-listpack-value` defaults.
pub const MAX_LISTPACK: (u64, usize) = (128, 64);

/// A sorted set while a command works on it.
pub struct Z {
    /// Its version.
    pub version: u64,
    /// Members.
    pub size: u64,
    /// Past its compact encoding.
    pub outgrown: bool,
    /// Bounds on its index entries (suffixes after version ++ 0xFF): every entry is at or
    /// above `lo` and below `hi`. Pops move them past what they delete, so a walk from an
    /// end does not step over the deleted entries again.
    pub lo: Option<Vec<u8>>,
    /// See `lo`.
    pub hi: Option<Vec<u8>>,
    /// The bounds changed and must be written.
    pub bounds_changed: bool,
}

impl Z {
    /// The sorted set a metadata record describes.
    pub fn of(m: &Meta) -> Result<Z> {
        let (lo, hi) = encoding::zset_bounds(&m.payload)?;
        Ok(Z {
            version: m.version,
            size: m.size,
            outgrown: m.hint == Hint::Raw,
            lo,
            hi,
            bounds_changed: false,
        })
    }

    /// A new, empty sorted set under `version`.
    pub fn empty(version: u64) -> Z {
        Z {
            version,
            size: 0,
            outgrown: false,
            lo: None,
            hi: None,
            bounds_changed: false,
        }
    }

    /// The index key range `[start, end)` that holds every entry.
    pub fn index_range(&self) -> (Vec<u8>, Vec<u8>) {
        let (mut start, mut end) = encoding::score_index(self.version);
        if let Some(lo) = &self.lo {
            start.extend_from_slice(lo);
        }
        if let Some(hi) = &self.hi {
            end = encoding::score_index(self.version).0;
            end.extend_from_slice(hi);
        }
        (start, end)
    }

    /// Notes an index entry written with `suffix`, widening the bounds to hold it.
    fn admit(&mut self, suffix: &[u8]) {
        if self.lo.as_deref().is_some_and(|lo| suffix < lo) {
            self.lo = Some(suffix.to_vec());
            self.bounds_changed = true;
        }
        if self.hi.as_deref().is_some_and(|hi| suffix >= hi) {
            let mut h = suffix.to_vec();
            h.push(0);
            self.hi = Some(h);
            self.bounds_changed = true;
        }
    }
}

/// The sorted set at `key` (`None` if missing; WRONGTYPE for another type).
pub fn get(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Z>> {
    typed(txn, db, key, Kind::ZSet)?
        .map(|m| Z::of(&m))
        .transpose()
}

/// The sorted set at `key`, created empty if missing.
pub fn get_or_new(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Z> {
    if let Some(z) = get(txn, db, key)? {
        return Ok(z);
    }
    let m = txn.create(db, key, Kind::ZSet)?;
    Ok(Z::empty(m.version))
}

/// The score of `member`, if it is in the set.
pub fn score(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    z: &Z,
    member: &[u8],
) -> Result<Option<f64>> {
    match txn.member(db, key, z.version, member)? {
        None => Ok(None),
        Some(v) => Ok(Some(encoding::decode_score(&v)?)),
    }
}

/// Sets `member`'s score to `new` (`None`: removes it), given its score now; keeps the
/// index and the count in step.
pub fn set_score(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    z: &mut Z,
    member: &[u8],
    old: Option<f64>,
    new: Option<f64>,
) -> Result<()> {
    if let Some(o) = old {
        txn.sub_put(db, key, encoding::score_key(z.version, o, member), None)?;
    }
    // Redis stores -0 as 0.
    match new.map(|n| if n == 0.0 { 0.0 } else { n }) {
        Some(n) => {
            txn.set_member(db, key, z.version, member, Some(n.to_le_bytes().to_vec()))?;
            let ik = encoding::score_key(z.version, n, member);
            z.admit(&ik[9..]);
            txn.sub_put(db, key, ik, Some(Vec::new()))?;
            if old.is_none() {
                z.size += 1;
                z.outgrown |= z.size > MAX_LISTPACK.0 || member.len() > MAX_LISTPACK.1;
            }
        }
        None => {
            txn.set_member(db, key, z.version, member, None)?;
            if old.is_some() {
                z.size -= 1;
            }
        }
    }
    Ok(())
}

/// Records the set's count, encoding and index bounds (deleting it when empty).
pub fn save(txn: &mut Txn<'_>, db: usize, key: &[u8], z: &Z) -> Result<()> {
    coll::resize(txn, db, key, z.size, z.outgrown)?;
    if z.bounds_changed && z.size > 0 {
        if let Some(m) = txn.get_mut(db, key)? {
            m.payload = encoding::zset_payload(z.lo.as_deref(), z.hi.as_deref());
        }
    }
    Ok(())
}

/// Visits index entries in `[lower, upper)` in score order (highest first when `reverse`)
/// until `f` says stop.
pub fn walk(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    lower: Vec<u8>,
    upper: Vec<u8>,
    reverse: bool,
    mut f: impl FnMut(f64, &[u8]) -> bool,
) -> Result<()> {
    txn.sub_scan(db, key, lower, upper, reverse, |k, _| {
        let (s, m) = encoding::split_score_key(k)
            .ok_or_else(|| StoreError::Corrupt("sorted set index key".into()))?;
        Ok(f(s, m))
    })?;
    Ok(())
}

/// A score bound as `ZRANGEBYSCORE` takes it: `(` makes it exclusive; what follows reads as
/// C's `strtod` reads it, NaN refused.
fn score_bound(b: &[u8]) -> Option<(f64, bool)> {
    let (ex, rest) = match b.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, b),
    };
    let s = std::str::from_utf8(rest).ok()?;
    let t = s.trim_start();
    let v = if t.is_empty() {
        0.0
    } else {
        crate::num::parse_f64(t.as_bytes())?
    };
    Some((v, ex))
}

/// A score range.
#[derive(Clone, Copy)]
pub struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

impl ScoreRange {
    /// Scores in `[min, max)`.
    pub fn half_open(min: f64, max: f64) -> ScoreRange {
        ScoreRange {
            min,
            minex: false,
            max,
            maxex: true,
        }
    }

    /// Parses `min max` (`None` when either is bad).
    pub fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let ((min, minex), (max, maxex)) = (score_bound(min)?, score_bound(max)?);
        Some(ScoreRange {
            min,
            minex,
            max,
            maxex,
        })
    }

    fn above_min(&self, s: f64) -> bool {
        if self.minex {
            s > self.min
        } else {
            s >= self.min
        }
    }

    fn below_max(&self, s: f64) -> bool {
        if self.maxex {
            s < self.max
        } else {
            s <= self.max
        }
    }

    fn empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }
}

/// One end of a lexicographic range.
#[derive(Clone)]
enum LexBound {
    Min,
    Max,
    In(Vec<u8>),
    Ex(Vec<u8>),
}

impl LexBound {
    fn parse(b: &[u8]) -> Option<LexBound> {
        match b.split_first() {
            Some((b'+', [])) => Some(LexBound::Max),
            Some((b'-', [])) => Some(LexBound::Min),
            Some((b'[', rest)) => Some(LexBound::In(rest.to_vec())),
            Some((b'(', rest)) => Some(LexBound::Ex(rest.to_vec())),
            _ => None,
        }
    }
}

/// A lexicographic range.
#[derive(Clone)]
pub struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    /// Parses `min max` (`None` when either is bad).
    pub fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        Some(LexRange {
            min: LexBound::parse(min)?,
            max: LexBound::parse(max)?,
        })
    }

    fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::In(b) => m >= b.as_slice(),
            LexBound::Ex(b) => m > b.as_slice(),
        }
    }

    fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::Max => true,
            LexBound::Min => false,
            LexBound::In(b) => m <= b.as_slice(),
            LexBound::Ex(b) => m < b.as_slice(),
        }
    }
}

/// What a range command selects.
#[derive(Clone)]
pub enum Select {
    /// Ranks `start..=stop` (negative: from the end).
    Rank(i64, i64),
    /// Scores.
    Score(ScoreRange),
    /// Members, for sets whose scores are all equal.
    Lex(LexRange),
}

/// A range query: what, in which direction, and `LIMIT offset count` (count < 0: all).
#[derive(Clone)]
pub struct Query {
    /// The selection.
    pub select: Select,
    /// Highest first.
    pub rev: bool,
    /// Matches skipped first.
    pub offset: i64,
    /// Matches returned at most (negative: all).
    pub limit: i64,
}

/// The members (with scores) a query selects, in reply order.
pub fn select(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    z: &Z,
    q: &Query,
) -> Result<Vec<(Vec<u8>, f64)>> {
    let (start, end) = z.index_range();
    let mut out = Vec::new();
    match &q.select {
        Select::Rank(s, e) => {
            let Some((a, b)) = crate::num::range(*s, *e, z.size as usize) else {
                return Ok(out);
            };
            let n = z.size as usize;
            // Ascending ranks [a, b] (from the other end when reversed).
            let (a, b) = if q.rev {
                (n - 1 - b, n - 1 - a)
            } else {
                (a, b)
            };
            let from_front = a <= n - 1 - b;
            let skip = if from_front { a } else { n - 1 - b };
            let take = b - a + 1;
            let mut seen = 0;
            walk(txn, db, key, start, end, !from_front, |s, m| {
                if seen >= skip {
                    out.push((m.to_vec(), s));
                }
                seen += 1;
                out.len() < take
            })?;
            if from_front == q.rev {
                out.reverse();
            }
            return Ok(out);
        }
        Select::Score(r) if r.empty() => return Ok(out),
        Select::Score(_) | Select::Lex(_) => {}
    }
    if q.offset < 0 || q.limit == 0 {
        return Ok(out);
    }
    let limit = usize::try_from(q.limit).unwrap_or(usize::MAX);
    let mut skip = q.offset;
    // Where the walk starts and ends: a score range seeks to its first score (from the
    // high end: past its last); a lexicographic range walks the whole index.
    let (lo, hi) = match &q.select {
        Select::Score(r) if q.rev && r.max != f64::INFINITY => {
            let mut hi = encoding::score_seek(z.version, r.max);
            let past = u64::from_be_bytes(encoding::score_bytes(r.max)) + 1;
            hi.truncate(9);
            hi.extend_from_slice(&past.to_be_bytes());
            (start, hi.min(end))
        }
        Select::Score(r) if !q.rev => (encoding::score_seek(z.version, r.min).max(start), end),
        _ => (start, end),
    };
    let select = &q.select;
    walk(txn, db, key, lo, hi, q.rev, |s, m| {
        // (below the range's low end, above its high end)
        let (low, high) = match select {
            Select::Score(r) => (!r.above_min(s), !r.below_max(s)),
            Select::Lex(r) => (!r.above_min(m), !r.below_max(m)),
            Select::Rank(..) => (false, false),
        };
        // Entries before the range (ties with an exclusive bound) are skipped; the first one
        // past it ends the walk.
        let (before, past) = if q.rev { (high, low) } else { (low, high) };
        if !before && !past {
            if skip > 0 {
                skip -= 1;
            } else {
                out.push((m.to_vec(), s));
            }
        }
        !past && out.len() < limit
    })?;
    Ok(out)
}

/// The 0-based rank of `member` with `score`, from the low end (or the high end when
/// `rev`), counted from whichever end of the index is nearer.
pub fn rank(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    z: &Z,
    member: &[u8],
    score: f64,
    rev: bool,
) -> Result<u64> {
    let (start, end) = z.index_range();
    let me = encoding::score_key(z.version, score, member);
    // Count the entries below `me` from the front, giving up halfway; past halfway, count
    // those above it from the back instead.
    let half = z.size / 2;
    let mut below = 0u64;
    let mut reached = true;
    walk(txn, db, key, start, me.clone(), false, |_, _| {
        below += 1;
        if below > half {
            reached = false;
        }
        reached
    })?;
    let above = if reached {
        z.size - 1 - below
    } else {
        let mut past = me;
        past.push(0);
        let mut above = 0u64;
        walk(txn, db, key, past, end, true, |_, _| {
            above += 1;
            true
        })?;
        below = z.size - 1 - above;
        above
    };
    Ok(if rev { above } else { below })
}

/// Replaces whatever `key` holds with a sorted set of `items` (distinct members, at least
/// one); its size. As Redis, a result that fits the compact encoding takes it.
pub fn replace(txn: &mut Txn<'_>, db: usize, key: &[u8], items: &[(Vec<u8>, f64)]) -> Result<u64> {
    let m = txn.create(db, key, Kind::ZSet)?;
    let mut z = Z::empty(m.version);
    for (member, s) in items {
        set_score(txn, db, key, &mut z, member, None, Some(*s))?;
    }
    let longest = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    z.outgrown = z.size > MAX_LISTPACK.0 || longest > MAX_LISTPACK.1;
    save(txn, db, key, &z)?;
    Ok(z.size)
}

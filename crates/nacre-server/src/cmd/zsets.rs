//! Sorted set commands, part one: the encoding's helpers, ZADD and its relatives, ranges and
//! ranks. A sorted set is a metadata record (member count, version), a `sub` record per
//! member holding its score, and a score index under the same version (entries ordered by
//! score, then member, as Redis orders them; `store/encoding.rs`). Range queries by score or
//! by member seek the index; a rank is counted from the nearer end of the index.

use nacre_resp::Reply;

use super::args::{int, is};
use super::registry::{cmd, Command, Keys::Range as KR, Run::Key};
use super::{err, syntax, CmdResult, Ctx};
use crate::store::encoding::{self, Hint, Kind};
use crate::store::StoreError;
use crate::types::{coll, typed};

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
    pub fn of(m: &crate::store::encoding::Meta) -> Result<Z, Reply> {
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
pub fn zset(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Z>, Reply> {
    typed(ctx.txn, ctx.db, key, Kind::ZSet)?
        .map(|m| Z::of(&m))
        .transpose()
}

/// The sorted set at `key`, created empty if missing.
pub fn zset_or_new(ctx: &mut Ctx, key: &[u8]) -> Result<Z, Reply> {
    if let Some(z) = zset(ctx, key)? {
        return Ok(z);
    }
    let m = ctx.txn.create(ctx.db, key, Kind::ZSet)?;
    Ok(Z::empty(m.version))
}

/// The score of `member`, if it is in the set.
pub fn score_of(ctx: &mut Ctx, key: &[u8], z: &Z, member: &[u8]) -> Result<Option<f64>, Reply> {
    match ctx.txn.member(ctx.db, key, z.version, member)? {
        None => Ok(None),
        Some(v) => Ok(Some(encoding::decode_score(&v)?)),
    }
}

/// Sets `member`'s score to `new` (`None`: removes it), given its score now; keeps the
/// index and the count in step.
pub fn set_score(
    ctx: &mut Ctx,
    key: &[u8],
    z: &mut Z,
    member: &[u8],
    old: Option<f64>,
    new: Option<f64>,
) -> Result<(), Reply> {
    if let Some(o) = old {
        ctx.txn
            .sub_put(ctx.db, key, encoding::score_key(z.version, o, member), None)?;
    }
    // Redis stores -0 as 0.
    match new.map(|n| if n == 0.0 { 0.0 } else { n }) {
        Some(n) => {
            ctx.txn.set_member(
                ctx.db,
                key,
                z.version,
                member,
                Some(n.to_le_bytes().to_vec()),
            )?;
            let ik = encoding::score_key(z.version, n, member);
            z.admit(&ik[9..]);
            ctx.txn.sub_put(ctx.db, key, ik, Some(Vec::new()))?;
            if old.is_none() {
                z.size += 1;
                z.outgrown |= z.size > MAX_LISTPACK.0 || member.len() > MAX_LISTPACK.1;
            }
        }
        None => {
            ctx.txn.set_member(ctx.db, key, z.version, member, None)?;
            if old.is_some() {
                z.size -= 1;
            }
        }
    }
    Ok(())
}

/// Records the set's count, encoding and index bounds (deleting it when empty).
pub fn save(ctx: &mut Ctx, key: &[u8], z: &Z) -> Result<(), Reply> {
    coll::resize(ctx.txn, ctx.db, key, z.size, z.outgrown)?;
    if z.bounds_changed && z.size > 0 {
        if let Some(m) = ctx.txn.get_mut(ctx.db, key)? {
            m.payload = encoding::zset_payload(z.lo.as_deref(), z.hi.as_deref());
        }
    }
    Ok(())
}

/// Visits index entries in `[lower, upper)` in score order (highest first when `reverse`)
/// until `f` says stop.
pub fn walk(
    ctx: &mut Ctx,
    key: &[u8],
    lower: Vec<u8>,
    upper: Vec<u8>,
    reverse: bool,
    mut f: impl FnMut(f64, &[u8]) -> bool,
) -> Result<(), Reply> {
    ctx.txn
        .sub_scan(ctx.db, key, lower, upper, reverse, |k, _| {
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
        super::args::parse_f64(t.as_bytes())?
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
    /// Parses `min max` (Redis's error when either is bad).
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
        match (score_bound(min), score_bound(max)) {
            (Some((min, minex)), Some((max, maxex))) => Ok(ScoreRange {
                min,
                minex,
                max,
                maxex,
            }),
            _ => Err(err("min or max is not a float")),
        }
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
    /// Parses `min max` (Redis's error when either is bad).
    pub fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, Reply> {
        match (LexBound::parse(min), LexBound::parse(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(err("min or max not valid string range item")),
        }
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
pub fn select(ctx: &mut Ctx, key: &[u8], z: &Z, q: &Query) -> Result<Vec<(Vec<u8>, f64)>, Reply> {
    let (start, end) = z.index_range();
    let mut out = Vec::new();
    match &q.select {
        Select::Rank(s, e) => {
            let Some((a, b)) = super::args::range(*s, *e, z.size as usize) else {
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
            walk(ctx, key, start, end, !from_front, |s, m| {
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
    walk(ctx, key, lo, hi, q.rev, |s, m| {
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
    ctx: &mut Ctx,
    key: &[u8],
    z: &Z,
    member: &[u8],
    score: f64,
    rev: bool,
) -> Result<u64, Reply> {
    let (start, end) = z.index_range();
    let me = encoding::score_key(z.version, score, member);
    // Count the entries below `me` from the front, giving up halfway; past halfway, count
    // those above it from the back instead.
    let half = z.size / 2;
    let mut below = 0u64;
    let mut reached = true;
    walk(ctx, key, start, me.clone(), false, |_, _| {
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
        walk(ctx, key, past, end, true, |_, _| {
            above += 1;
            true
        })?;
        below = z.size - 1 - above;
        above
    };
    Ok(if rev { above } else { below })
}

/// A score argument (`ERR value is not a valid float`), read as Redis reads one.
pub fn score_arg(b: &[u8]) -> Result<f64, Reply> {
    parse_score(b).ok_or_else(|| err("value is not a valid float"))
}

/// C's `strtod` over the whole argument, as Redis checks it: no NaN, and nothing that
/// overflows to infinity or underflows to zero unless written so.
pub fn parse_score(b: &[u8]) -> Option<f64> {
    let v = super::args::parse_f64(b)?;
    let s = std::str::from_utf8(b).ok()?.to_ascii_lowercase();
    let mantissa = s.split('e').next().unwrap_or("");
    if v.is_infinite() && !s.contains("inf") {
        return None;
    }
    if v == 0.0 && mantissa.chars().any(|c| ('1'..='9').contains(&c)) {
        return None;
    }
    Some(v)
}

/// Members with scores as Redis replies them: flat pairs in RESP2, `[member, score]`
/// arrays in RESP3 (`WITHSCORES`), or members alone.
pub fn scored_reply(ctx: &Ctx, items: Vec<(Vec<u8>, f64)>, withscores: bool) -> Reply {
    if !withscores {
        return Reply::Array(items.into_iter().map(|(m, _)| Reply::Bulk(m)).collect());
    }
    if ctx.resp == 3 {
        Reply::Array(
            items
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect(),
        )
    } else {
        Reply::Array(
            items
                .into_iter()
                .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
                .collect(),
        )
    }
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
pub fn zadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    zadd_generic(ctx, args, false)
}

/// `ZINCRBY key increment member`.
pub fn zincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    zadd_generic(ctx, args, true)
}

fn zadd_generic(ctx: &mut Ctx, args: &[Vec<u8>], zincrby: bool) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, zincrby);
    let mut i = 2;
    while !zincrby && i < args.len() {
        let a = &args[i];
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else if is(a, "ch") {
            ch = true;
        } else if is(a, "incr") {
            incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &args[i..];
    if rest.is_empty() || rest.len() % 2 != 0 {
        return Err(syntax());
    }
    if xx && nx {
        return Err(err("XX and NX options at the same time are not compatible"));
    }
    if ((gt || lt) && nx) || (gt && lt) {
        return Err(err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && rest.len() > 2 {
        return Err(err("INCR option supports a single increment-element pair"));
    }
    let scores: Vec<f64> = rest
        .chunks(2)
        .map(|p| score_arg(&p[0]))
        .collect::<Result<_, _>>()?;
    let key = &args[1];
    let existing = zset(ctx, key)?;
    if existing.is_none() && xx {
        return Ok(if incr { Reply::Nil } else { Reply::Integer(0) });
    }
    let mut z = match existing {
        Some(z) => z,
        None => zset_or_new(ctx, key)?,
    };
    let (mut added, mut updated, mut processed) = (0, 0, 0);
    let mut last = 0.0;
    for (p, &score) in rest.chunks(2).zip(&scores) {
        let member = &p[1];
        let cur = score_of(ctx, key, &z, member)?;
        match cur {
            Some(c) => {
                if nx {
                    continue;
                }
                let new = if incr { c + score } else { score };
                if new.is_nan() {
                    return Err(err("resulting score is not a number (NaN)"));
                }
                if (gt && new <= c) || (lt && new >= c) {
                    continue;
                }
                processed += 1;
                last = new;
                if new != c {
                    set_score(ctx, key, &mut z, member, Some(c), Some(new))?;
                    updated += 1;
                }
            }
            None => {
                if xx {
                    continue;
                }
                processed += 1;
                last = score;
                set_score(ctx, key, &mut z, member, None, Some(score))?;
                added += 1;
            }
        }
    }
    save(ctx, key, &z)?;
    if added + updated > 0 {
        ctx.notify(key, if incr { "zincr" } else { "zadd" });
    }
    Ok(if incr {
        if processed > 0 {
            Reply::Double(last)
        } else {
            Reply::Nil
        }
    } else {
        Reply::Integer(if ch { added + updated } else { added })
    })
}

/// `ZREM key member...`.
pub fn zrem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let Some(mut z) = zset(ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    let mut n = 0;
    for m in &args[2..] {
        if let Some(c) = score_of(ctx, key, &z, m)? {
            set_score(ctx, key, &mut z, m, Some(c), None)?;
            n += 1;
        }
    }
    if n > 0 {
        save(ctx, key, &z)?;
        ctx.notify(key, "zrem");
    }
    Ok(Reply::Integer(n))
}

/// `ZSCORE key member`.
pub fn zscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(z) = zset(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    Ok(score_of(ctx, &args[1], &z, &args[2])?.map_or(Reply::Nil, Reply::Double))
}

/// `ZMSCORE key member...`.
pub fn zmscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let z = zset(ctx, &args[1])?;
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        out.push(match &z {
            None => Reply::Nil,
            Some(z) => score_of(ctx, &args[1], z, m)?.map_or(Reply::Nil, Reply::Double),
        });
    }
    Ok(Reply::Array(out))
}

/// `ZCARD key`.
pub fn zcard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(
        zset(ctx, &args[1])?.map_or(0, |z| z.size as i64),
    ))
}

fn count_of(ctx: &mut Ctx, key: &[u8], what: Select) -> CmdResult {
    let Some(z) = zset(ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    let q = Query {
        select: what,
        rev: false,
        offset: 0,
        limit: -1,
    };
    Ok(Reply::Integer(select(ctx, key, &z, &q)?.len() as i64))
}

/// `ZCOUNT key min max`.
pub fn zcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = ScoreRange::parse(&args[2], &args[3])?;
    count_of(ctx, &args[1], Select::Score(r))
}

/// `ZLEXCOUNT key min max`.
pub fn zlexcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = LexRange::parse(&args[2], &args[3])?;
    count_of(ctx, &args[1], Select::Lex(r))
}

fn rank_cmd(ctx: &mut Ctx, args: &[Vec<u8>], rev: bool) -> CmdResult {
    let Some(z) = zset(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let Some(s) = score_of(ctx, &args[1], &z, &args[2])? else {
        return Ok(Reply::Nil);
    };
    Ok(Reply::Integer(
        rank(ctx, &args[1], &z, &args[2], s, rev)? as i64
    ))
}

/// `ZRANK key member`.
pub fn zrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rank_cmd(ctx, args, false)
}

/// `ZREVRANK key member`.
pub fn zrevrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rank_cmd(ctx, args, true)
}

/// How a range command was called (the legacy names fix the kind and the direction).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kindof {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Parses `min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]` starting at
/// `at` (the `min`); the query and whether scores are wanted.
fn parse_range(
    args: &[Vec<u8>],
    at: usize,
    mut kind: Kindof,
    rev: Option<bool>,
) -> Result<(Query, bool), Reply> {
    let (mut withscores, mut limit, mut offset) = (false, None, 0);
    let mut dir = rev;
    let mut j = at + 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = int(&args[j + 1])?;
            limit = Some(int(&args[j + 2])?);
            j += 2;
        } else if dir.is_none() && is(a, "rev") {
            dir = Some(true);
        } else if kind == Kindof::Auto && is(a, "bylex") {
            kind = Kindof::Lex;
        } else if kind == Kindof::Auto && is(a, "byscore") {
            kind = Kindof::Score;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let rev = dir.unwrap_or(false);
    if kind == Kindof::Auto {
        kind = Kindof::Rank;
    }
    if limit.is_some() && kind == Kindof::Rank {
        return Err(err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == Kindof::Lex {
        return Err(err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (&args[at], &args[at + 1]);
    if rev && kind != Kindof::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let select = match kind {
        Kindof::Score => Select::Score(ScoreRange::parse(lo, hi)?),
        Kindof::Lex => Select::Lex(LexRange::parse(lo, hi)?),
        _ => Select::Rank(int(lo)?, int(hi)?),
    };
    Ok((
        Query {
            select,
            rev,
            offset,
            limit: limit.unwrap_or(-1),
        },
        withscores,
    ))
}

fn range_cmd(ctx: &mut Ctx, args: &[Vec<u8>], kind: Kindof, rev: Option<bool>) -> CmdResult {
    let (q, withscores) = parse_range(args, 2, kind, rev)?;
    let Some(z) = zset(ctx, &args[1])? else {
        return Ok(Reply::Array(vec![]));
    };
    let items = select(ctx, &args[1], &z, &q)?;
    Ok(scored_reply(ctx, items, withscores))
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
pub fn zrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, args, Kindof::Auto, None)
}

/// `ZREVRANGE key start stop [WITHSCORES]`.
pub fn zrevrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, args, Kindof::Rank, Some(true))
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub fn zrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, args, Kindof::Score, Some(false))
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`.
pub fn zrevrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, args, Kindof::Score, Some(true))
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`.
pub fn zrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, args, Kindof::Lex, Some(false))
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`.
pub fn zrevrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_cmd(ctx, args, Kindof::Lex, Some(true))
}

/// Replaces `dst` with a sorted set of `items` (deleting it when there are none); the count.
/// As Redis, a stored result takes the compact encoding when it fits one. Raises `event`
/// (the command's name), or `del` when an empty result deletes `dst`.
pub fn store(
    ctx: &mut Ctx,
    dst: &[u8],
    items: &[(Vec<u8>, f64)],
    event: &'static str,
) -> Result<i64, Reply> {
    if items.is_empty() {
        if ctx.txn.get(ctx.db, dst)?.is_some() {
            ctx.txn.set(ctx.db, dst, None)?;
            ctx.notify(dst, "del");
        }
        return Ok(0);
    }
    let m = ctx.txn.create(ctx.db, dst, Kind::ZSet)?;
    let mut z = Z::empty(m.version);
    for (member, s) in items {
        set_score(ctx, dst, &mut z, member, None, Some(*s))?;
    }
    let longest = items.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    z.outgrown = z.size > MAX_LISTPACK.0 || longest > MAX_LISTPACK.1;
    save(ctx, dst, &z)?;
    ctx.notify(dst, event);
    Ok(z.size as i64)
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`.
pub fn zrangestore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (q, withscores) = parse_range(args, 3, Kindof::Auto, None)?;
    if withscores {
        return Err(syntax());
    }
    let items = match zset(ctx, &args[2])? {
        None => Vec::new(),
        Some(z) => select(ctx, &args[2], &z, &q)?,
    };
    Ok(Reply::Integer(store(ctx, &args[1], &items, "zrangestore")?))
}

fn remrange(ctx: &mut Ctx, args: &[Vec<u8>], what: Select) -> CmdResult {
    let event = match &what {
        Select::Rank(..) => "zremrangebyrank",
        Select::Score(_) => "zremrangebyscore",
        Select::Lex(_) => "zremrangebylex",
    };
    let key = &args[1];
    let Some(mut z) = zset(ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    let q = Query {
        select: what,
        rev: false,
        offset: 0,
        limit: -1,
    };
    let items = select(ctx, key, &z, &q)?;
    for (m, s) in &items {
        set_score(ctx, key, &mut z, m, Some(*s), None)?;
    }
    if !items.is_empty() {
        save(ctx, key, &z)?;
        ctx.notify(key, event);
    }
    Ok(Reply::Integer(items.len() as i64))
}

/// `ZREMRANGEBYRANK key start stop`: recorded as the members it removed.
pub fn zremrangebyrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (s, e) = (int(&args[2])?, int(&args[3])?);
    remrange(ctx, args, Select::Rank(s, e))
}

/// `ZREMRANGEBYSCORE key min max`.
pub fn zremrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = ScoreRange::parse(&args[2], &args[3])?;
    remrange(ctx, args, Select::Score(r))
}

/// `ZREMRANGEBYLEX key min max`.
pub fn zremrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = LexRange::parse(&args[2], &args[3])?;
    remrange(ctx, args, Select::Lex(r))
}

/// The sorted-set commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("zadd", -4, [WRITE DENYOOM FAST], [WRITE SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Adds one or more members to a sorted set, or updates their scores.", Key(zadd)),
    cmd!("zincrby", 4, [WRITE DENYOOM FAST], [WRITE SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Increments the score of a member in a sorted set.", Key(zincrby)),
    cmd!("zrem", -3, [WRITE FAST], [WRITE SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Removes one or more members from a sorted set.", Key(zrem)),
    cmd!("zscore", 3, [READONLY FAST], [READ SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Returns the score of a member in a sorted set.", Key(zscore)),
    cmd!("zmscore", -3, [READONLY FAST], [READ SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "6.2.0", "Returns the score of one or more members in a sorted set.", Key(zmscore)),
    cmd!("zcard", 2, [READONLY FAST], [READ SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Returns the number of members in a sorted set.", Key(zcard)),
    cmd!("zcount", 4, [READONLY FAST], [READ SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "2.0.0", "Returns the count of members in a sorted set that have scores within a range.", Key(zcount)),
    cmd!("zlexcount", 4, [READONLY FAST], [READ SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range.", Key(zlexcount)),
    cmd!("zrank", 3, [READONLY FAST], [READ SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores.", Key(zrank)),
    cmd!("zrevrank", 3, [READONLY FAST], [READ SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores.", Key(zrevrank)),
    cmd!("zrange", -4, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes.", Key(zrange)),
    cmd!("zrangestore", -5, [WRITE DENYOOM], [WRITE SORTEDSET SLOW], [], KR(1, 2, 1), "sorted-set", "6.2.0", "Stores a range of members from sorted set in a key.", Key(zrangestore)),
    cmd!("zrevrange", -4, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order.", Key(zrevrange)),
    cmd!("zrangebyscore", -4, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "1.0.5", "Returns members in a sorted set within a range of scores.", Key(zrangebyscore)),
    cmd!("zrevrangebyscore", -4, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order.", Key(zrevrangebyscore)),
    cmd!("zrangebylex", -4, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range.", Key(zrangebylex)),
    cmd!("zrevrangebylex", -4, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order.", Key(zrevrangebylex)),
    cmd!("zremrangebyrank", 4, [WRITE], [WRITE SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "2.0.0", "Removes members in a sorted set within a range of indexes.", Key(zremrangebyrank)),
    cmd!("zremrangebyscore", 4, [WRITE], [WRITE SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "1.2.0", "Removes members in a sorted set within a range of scores.", Key(zremrangebyscore)),
    cmd!("zremrangebylex", 4, [WRITE], [WRITE SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "2.8.9", "Removes members in a sorted set within a lexicographical range.", Key(zremrangebylex)),
];

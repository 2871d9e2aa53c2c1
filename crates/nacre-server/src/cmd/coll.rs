//! What the collection commands share: finding a key of the expected type, creating it,
//! recording its size, and picking random members.

use nacre_resp::Reply;

use super::{err, wrongtype, Ctx};
use crate::store::encoding::{Hint, Kind, Meta};
use crate::store::txn::Members;

/// A member and its value.
pub type Member = (Vec<u8>, Vec<u8>);

/// The key's metadata if it holds a `kind` (`None` if missing; WRONGTYPE for another type).
pub fn typed(ctx: &mut Ctx, key: &[u8], kind: Kind) -> Result<Option<Meta>, Reply> {
    match ctx.txn.get(ctx.db, key)? {
        None => Ok(None),
        Some(m) if m.kind == kind => Ok(Some(m.clone())),
        Some(_) => Err(wrongtype()),
    }
}

/// Checks that `key` is missing or holds a `kind`.
pub fn check_type(ctx: &mut Ctx, key: &[u8], kind: Kind) -> Result<(), Reply> {
    typed(ctx, key, kind).map(|_| ())
}

/// The `kind` at `key`, created empty if missing.
pub fn typed_or_new(ctx: &mut Ctx, key: &[u8], kind: Kind) -> Result<Meta, Reply> {
    match typed(ctx, key, kind)? {
        Some(m) => Ok(m),
        None => Ok(ctx.txn.create(ctx.db, key, kind)?.clone()),
    }
}

/// Stores the collection's new size, deleting the key when it is empty; `outgrown` marks it
/// as past its compact encoding for `OBJECT ENCODING` (never undone, as in Redis).
pub fn resize(ctx: &mut Ctx, key: &[u8], size: u64, outgrown: bool) -> Result<(), Reply> {
    if size == 0 {
        ctx.txn.set(ctx.db, key, None)?;
        return Ok(());
    }
    // An unchanged record is left alone: a command that changed nothing (SADD of members
    // already there) neither writes nor counts as a change.
    let unchanged = ctx
        .txn
        .get(ctx.db, key)?
        .is_some_and(|m| m.size == size && (!outgrown || m.hint == Hint::Raw));
    if unchanged {
        return Ok(());
    }
    if let Some(m) = ctx.txn.get_mut(ctx.db, key)? {
        m.size = size;
        if outgrown {
            m.hint = Hint::Raw;
        }
    }
    Ok(())
}

/// A uniformly random index below `n` (`n > 0`).
pub fn pick(n: usize) -> usize {
    (crate::shared::random_u64() % n as u64) as usize
}

/// Indexes of `count` distinct random elements out of `n` (all of them when `count >= n`),
/// by a partial Fisher-Yates shuffle.
pub fn distinct(n: usize, count: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    if count >= n {
        return idx;
    }
    for i in 0..count {
        let j = i + pick(n - i);
        idx.swap(i, j);
    }
    idx.truncate(count);
    idx
}

/// The count argument of `SRANDMEMBER`/`HRANDFIELD`/`ZRANDMEMBER`: any `i64` but the
/// smallest (whose negation overflows).
pub fn rand_count(b: &[u8]) -> Result<i64, Reply> {
    let c = super::args::int(b)?;
    if c == i64::MIN {
        return Err(err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(c)
}

/// The `numkeys key...` of SINTERCARD, ZINTERCARD, LMPOP and the like: the count, checked
/// against the arguments that follow it at `at`.
pub fn numkeys(args: &[Vec<u8>], at: usize) -> Result<usize, Reply> {
    let n = match super::args::parse_i64_strict(&args[at]) {
        Some(n) if n > 0 => n,
        _ => return Err(err("numkeys should be greater than 0")),
    };
    if n as usize > args.len() - at - 1 {
        return Err(err("Number of keys can't be greater than number of args"));
    }
    Ok(n as usize)
}

/// Keys of `SINTERCARD numkeys key... [LIMIT limit]`.
pub fn numkeys_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let n = numkeys(args, 1)?;
    Ok(args[2..2 + n].iter().map(|k| (db, k.clone())).collect())
}

/// Most members read after a random position for one draw: choosing among them evens out
/// how likely each member is (a member's chance follows the hash gaps before it, averaged
/// over this many members). Tombstones of deleted members between them are bounded by
/// [`removed`]'s rebuilds.
const DRAW_WINDOW: u64 = 16;

/// One member of collection `version` (of `size` members) drawn at random: a random
/// position in hash order is sought once, and one of the members from there on (up to
/// [`DRAW_WINDOW`], wrapping around) is picked, so a draw costs one seek whatever the
/// collection's size.
pub fn random_member(
    ctx: &mut Ctx,
    key: &[u8],
    version: u64,
    size: u64,
) -> Result<Option<Member>, Reply> {
    let window = size.clamp(1, DRAW_WINDOW) as usize;
    let from = crate::shared::random_u64() >> 1;
    let (mut got, _) = ctx.txn.members(ctx.db, key, version, from, window)?;
    if got.len() < window {
        let (more, _) = ctx
            .txn
            .members(ctx.db, key, version, 0, window - got.len())?;
        for m in more {
            if !got.iter().any(|g| g.0 == m.0) {
                got.push(m);
            }
        }
    }
    if got.is_empty() {
        return Ok(None);
    }
    let i = pick(got.len().min(window));
    Ok(Some(got.swap_remove(i)))
}

/// `count` random members of a collection of `size` under `version`: with repeats when
/// `repeat`, else distinct (all of them when `count >= size`). Small draws seek once per
/// member; a draw of a large part of the collection reads it whole.
pub fn random_members(
    ctx: &mut Ctx,
    key: &[u8],
    version: u64,
    size: u64,
    count: u64,
    repeat: bool,
) -> Result<Members, Reply> {
    if size == 0 || count == 0 {
        return Ok(Vec::new());
    }
    if repeat {
        let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
        if count > size {
            let all = ctx.txn.all_members(ctx.db, key, version)?;
            for _ in 0..count {
                out.push(all[pick(all.len())].clone());
            }
            return Ok(out);
        }
        for _ in 0..count {
            out.extend(random_member(ctx, key, version, size)?);
        }
        return Ok(out);
    }
    if count.saturating_mul(3) > size {
        let all = ctx.txn.all_members(ctx.db, key, version)?;
        let idx = distinct(all.len(), count as usize);
        return Ok(idx.into_iter().map(|i| all[i].clone()).collect());
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(count as usize);
    let mut tries = 0;
    while (out.len() as u64) < count {
        tries += 1;
        if tries > count * 16 {
            // Unlucky draws: fall back to the whole collection.
            let all = ctx.txn.all_members(ctx.db, key, version)?;
            let idx = distinct(all.len(), count as usize);
            return Ok(idx.into_iter().map(|i| all[i].clone()).collect());
        }
        if let Some((m, v)) = random_member(ctx, key, version, size)? {
            if seen.insert(m.clone()) {
                out.push((m, v));
            }
        }
    }
    Ok(out)
}

/// Deleted members a set or hash may leave behind, per live member, before it is rebuilt
/// under a new version. Until the engine merges them, deleted members stay as tombstones
/// that walks over the collection step over: a set drained by SPOP would make every later
/// draw step over all it ever held. Rebuilding costs a write per live member, paid for by
/// the deletes that led to it.
const DEAD_PER_LIVE: u64 = 4;

/// A set's or hash's count of members deleted since it was (re)built, from its payload.
fn dead_of(m: &Meta) -> Result<u64, Reply> {
    match m.payload.len() {
        0 => Ok(0),
        8 => Ok(u64::from_le_bytes(
            m.payload[..].try_into().unwrap_or([0; 8]),
        )),
        _ => Err(
            crate::store::StoreError::Corrupt("set or hash metadata: bad payload".into()).into(),
        ),
    }
}

/// Notes that `n` members of the set or hash at `key` were deleted (after its new size is
/// recorded), rebuilding it when deleted ones outnumber live ones [`DEAD_PER_LIVE`] times.
pub fn removed(ctx: &mut Ctx, key: &[u8], n: u64) -> Result<(), Reply> {
    let Some(m) = ctx.txn.get(ctx.db, key)?.cloned() else {
        return Ok(());
    };
    if n == 0 || !matches!(m.kind, Kind::Set | Kind::Hash) {
        return Ok(());
    }
    let dead = dead_of(&m)? + n;
    if dead > 64 && dead > DEAD_PER_LIVE * m.size {
        let members = ctx.txn.all_members(ctx.db, key, m.version)?;
        let nm = ctx.txn.create(ctx.db, key, m.kind)?;
        nm.size = m.size;
        nm.expire_at = m.expire_at;
        nm.hint = m.hint;
        let v = nm.version;
        for (f, val) in members {
            ctx.txn.set_member(ctx.db, key, v, &f, Some(val))?;
        }
    } else if let Some(mm) = ctx.txn.get_mut(ctx.db, key)? {
        mm.payload = dead.to_le_bytes().to_vec();
    }
    Ok(())
}

/// Parses `numkeys key... <first>|<second> [COUNT count]` from `at` (LMPOP's LEFT|RIGHT,
/// ZMPOP's MIN|MAX): the keys, whether the first word was given, and the count.
pub fn mpop_args(
    args: &[Vec<u8>],
    at: usize,
    words: (&str, &str),
) -> Result<(Vec<Vec<u8>>, bool, u64), Reply> {
    let n = numkeys(args, at)?;
    let keys = args[at + 1..at + 1 + n].to_vec();
    let mut i = at + 1 + n;
    let first = match args.get(i) {
        Some(a) if super::args::is(a, words.0) => true,
        Some(a) if super::args::is(a, words.1) => false,
        _ => return Err(super::syntax()),
    };
    i += 1;
    let mut count = None;
    while i < args.len() {
        if super::args::is(&args[i], "count") && i + 1 < args.len() && count.is_none() {
            let c = super::args::int(&args[i + 1]).ok().filter(|c| *c > 0);
            count = Some(c.ok_or_else(|| err("count should be greater than 0"))? as u64);
            i += 2;
        } else {
            return Err(super::syntax());
        }
    }
    Ok((keys, first, count.unwrap_or(1)))
}

/// `HSCAN`, `SSCAN` and `ZSCAN key cursor [MATCH pattern] [COUNT count]` over a `kind`: the
/// cursor is a position in hash order; `emit` adds a matching member's items to the reply.
pub fn scan_members(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    kind: Kind,
    mut emit: impl FnMut(&mut Vec<Reply>, Vec<u8>, Vec<u8>) -> Result<(), Reply>,
) -> Result<Reply, Reply> {
    let from = super::keys::cursor(&args[2])?;
    let o = super::keys::scan_opts(&args[3..], false)?;
    let empty = || Reply::Array(vec![Reply::Bulk(b"0".to_vec()), Reply::Array(vec![])]);
    let Some(m) = typed(ctx, &args[1], kind)? else {
        return Ok(empty());
    };
    if from >= 1 << 63 {
        return Ok(empty());
    }
    let (items, next) = ctx
        .txn
        .members(ctx.db, &args[1], m.version, from, o.count)?;
    let mut out = Vec::new();
    for (f, v) in items {
        if o.pattern
            .as_ref()
            .is_none_or(|p| crate::glob::glob_match(p, &f, false))
        {
            emit(&mut out, f, v)?;
        }
    }
    Ok(Reply::Array(vec![
        Reply::Bulk(next.to_string().into_bytes()),
        Reply::Array(out),
    ]))
}

/// What the draw commands (`SRANDMEMBER`, `HRANDFIELD`, `ZRANDMEMBER`) settled.
pub enum Draw {
    /// The whole reply (a missing key, or a single draw without a count).
    Done(Reply),
    /// The members drawn for a count, and whether `with` (WITHVALUES, WITHSCORES) was given.
    Drawn(Members, bool),
}

/// `<cmd> key [count [<with>]]` over a `kind` (`with`: the option word, if the command has
/// one), checked as Redis checks it, then drawn.
pub fn draw(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    kind: Kind,
    with: Option<&str>,
) -> Result<Draw, Reply> {
    let most = if with.is_some() { 4 } else { 3 };
    let count = match args.len() {
        2 => None,
        n if n <= most => Some(rand_count(&args[2])?),
        _ => return Err(super::syntax()),
    };
    let withv = match (args.get(3), with) {
        (None, _) => false,
        (Some(a), Some(w)) if super::args::is(a, w) => true,
        _ => return Err(super::syntax()),
    };
    if let Some(c) = count {
        if withv && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&c) {
            return Err(err("value is out of range"));
        }
    }
    let Some(m) = typed(ctx, &args[1], kind)? else {
        return Ok(Draw::Done(if count.is_some() {
            Reply::Array(vec![])
        } else {
            Reply::Nil
        }));
    };
    let Some(c) = count else {
        return Ok(Draw::Done(
            random_member(ctx, &args[1], m.version, m.size)?
                .map_or(Reply::Nil, |(k, _)| Reply::Bulk(k)),
        ));
    };
    let drawn = random_members(ctx, &args[1], m.version, m.size, c.unsigned_abs(), c < 0)?;
    Ok(Draw::Drawn(drawn, withv))
}

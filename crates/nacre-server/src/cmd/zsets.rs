//! Sorted set commands, part one: ZADD and its relatives, ranges and ranks, with arguments,
//! events and replies around the operations in `types/zset.rs`.

use nacre_resp::Reply;

use super::args::{int, is};
use super::registry::{cmd, Command, Keys::Range as KR, Run::Key};
use super::{err, syntax, CmdResult, Ctx};
use crate::types::zset;
pub use crate::types::zset::{LexRange, Query, ScoreRange, Select, MAX_LISTPACK, Z};

/// The sorted set at `key` (`None` if missing; WRONGTYPE for another type).
pub fn zset(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Z>, Reply> {
    Ok(zset::get(ctx.txn, ctx.db, key)?)
}

/// The sorted set at `key`, created empty if missing.
pub fn zset_or_new(ctx: &mut Ctx, key: &[u8]) -> Result<Z, Reply> {
    Ok(zset::get_or_new(ctx.txn, ctx.db, key)?)
}

/// The score of `member`, if it is in the set.
pub fn score_of(ctx: &mut Ctx, key: &[u8], z: &Z, member: &[u8]) -> Result<Option<f64>, Reply> {
    Ok(zset::score(ctx.txn, ctx.db, key, z, member)?)
}

/// Sets `member`'s score to `new` (`None`: removes it), given its score now.
pub fn set_score(
    ctx: &mut Ctx,
    key: &[u8],
    z: &mut Z,
    member: &[u8],
    old: Option<f64>,
    new: Option<f64>,
) -> Result<(), Reply> {
    Ok(zset::set_score(ctx.txn, ctx.db, key, z, member, old, new)?)
}

/// Records the set's count, encoding and index bounds (deleting it when empty).
pub fn save(ctx: &mut Ctx, key: &[u8], z: &Z) -> Result<(), Reply> {
    Ok(zset::save(ctx.txn, ctx.db, key, z)?)
}

/// The members (with scores) a query selects, in reply order.
pub fn select(ctx: &mut Ctx, key: &[u8], z: &Z, q: &Query) -> Result<Vec<(Vec<u8>, f64)>, Reply> {
    Ok(zset::select(ctx.txn, ctx.db, key, z, q)?)
}

/// A score range argument pair, or Redis's error.
pub fn score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, Reply> {
    ScoreRange::parse(min, max).ok_or_else(|| err("min or max is not a float"))
}

/// A lexicographic range argument pair, or Redis's error.
pub fn lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, Reply> {
    LexRange::parse(min, max).ok_or_else(|| err("min or max not valid string range item"))
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
    let r = score_range(&args[2], &args[3])?;
    count_of(ctx, &args[1], Select::Score(r))
}

/// `ZLEXCOUNT key min max`.
pub fn zlexcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = lex_range(&args[2], &args[3])?;
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
        zset::rank(ctx.txn, ctx.db, &args[1], &z, &args[2], s, rev)? as i64,
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
        Kindof::Score => Select::Score(score_range(lo, hi)?),
        Kindof::Lex => Select::Lex(lex_range(lo, hi)?),
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
        ctx.delete(dst)?;
        return Ok(0);
    }
    let n = zset::replace(ctx.txn, ctx.db, dst, items)?;
    ctx.notify(dst, event);
    Ok(n as i64)
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
    let r = score_range(&args[2], &args[3])?;
    remrange(ctx, args, Select::Score(r))
}

/// `ZREMRANGEBYLEX key min max`.
pub fn zremrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = lex_range(&args[2], &args[3])?;
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

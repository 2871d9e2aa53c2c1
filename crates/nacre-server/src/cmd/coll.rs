//! What the collection commands share in parsing and replies: counts and `numkeys`, the
//! `*MPOP` arguments, the `*SCAN` and random-draw commands. The operations themselves are in
//! `types/coll.rs`.

use nacre_resp::Reply;

use super::{err, Ctx};
use crate::store::encoding::Kind;
use crate::store::txn::Members;
use crate::types::coll::{random_member, random_members};
use crate::types::typed;

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
    let Some(m) = typed(ctx.txn, ctx.db, &args[1], kind)? else {
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
    let Some(m) = typed(ctx.txn, ctx.db, &args[1], kind)? else {
        return Ok(Draw::Done(if count.is_some() {
            Reply::Array(vec![])
        } else {
            Reply::Nil
        }));
    };
    let Some(c) = count else {
        return Ok(Draw::Done(
            random_member(ctx.txn, ctx.db, &args[1], m.version, m.size)?
                .map_or(Reply::Nil, |(k, _)| Reply::Bulk(k)),
        ));
    };
    let drawn = random_members(
        ctx.txn,
        ctx.db,
        &args[1],
        m.version,
        m.size,
        c.unsigned_abs(),
        c < 0,
    )?;
    Ok(Draw::Drawn(drawn, withv))
}

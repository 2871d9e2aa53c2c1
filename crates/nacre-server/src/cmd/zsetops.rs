//! Sorted set commands, part two: pops, random members, the set algebra over sorted sets
//! and sets (ZUNION, ZINTER, ZDIFF and their STOREs, ZINTERCARD) and ZSCAN.

use std::collections::HashMap;

use nacre_resp::{format_double, Reply};

use super::args::{int, is, positive, positive_or};
use super::coll::{draw, Draw};
use super::registry::{cmd, Command, Keys, Keys::Range as KR, Run::Key};
use super::zsets::{
    parse_score, save, scored_reply, select, set_score, store, zset, Query, Select, Z,
};
use super::{err, syntax, wrongtype, CmdResult, Ctx};
use crate::store::encoding::{self, Kind};

/// Pops up to `count` members from the low end (`max == false`) or the high end.
pub fn pop(
    ctx: &mut Ctx,
    key: &[u8],
    z: &mut Z,
    max: bool,
    count: u64,
) -> Result<Vec<(Vec<u8>, f64)>, Reply> {
    let q = Query {
        select: Select::Rank(0, count.min(z.size).saturating_sub(1) as i64),
        rev: max,
        offset: 0,
        limit: -1,
    };
    let items = if count == 0 {
        Vec::new()
    } else {
        select(ctx, key, z, &q)?
    };
    for (m, s) in &items {
        set_score(ctx, key, z, m, Some(*s), None)?;
    }
    // Walks from this end start past what was just deleted.
    if let Some((m, s)) = items.last() {
        let ik = encoding::score_key(z.version, *s, m);
        let mut b = ik[9..].to_vec();
        if max {
            z.hi = Some(b);
        } else {
            b.push(0);
            z.lo = Some(b);
        }
        z.bounds_changed = true;
    }
    save(ctx, key, z)?;
    if !items.is_empty() {
        ctx.notify(key, if max { "zpopmax" } else { "zpopmin" });
    }
    Ok(items)
}

fn pop_cmd(ctx: &mut Ctx, args: &[Vec<u8>], max: bool) -> CmdResult {
    let count = match args.len() {
        2 => None,
        3 => Some(positive(&args[2])? as u64),
        _ => return Err(syntax()),
    };
    let key = &args[1];
    let z = zset(ctx, key)?;
    let (Some(mut z), false) = (z, count == Some(0)) else {
        return Ok(Reply::Array(vec![]));
    };
    let items = pop(ctx, key, &mut z, max, count.unwrap_or(1))?;
    // RESP3 nests pairs only when a count was given.
    if ctx.resp == 3 && count.is_some() {
        return Ok(scored_reply(ctx, items, true));
    }
    Ok(Reply::Array(
        items
            .into_iter()
            .flat_map(|(m, s)| [Reply::Bulk(m), Reply::Double(s)])
            .collect(),
    ))
}

/// `ZPOPMIN key [count]`.
pub fn zpopmin(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, args, false)
}

/// `ZPOPMAX key [count]`.
pub fn zpopmax(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, args, true)
}

/// Parses `numkeys key... MIN|MAX [COUNT count]` from `at`: keys, the end (true: max),
/// the count.
pub fn mpop_args(args: &[Vec<u8>], at: usize) -> Result<(Vec<Vec<u8>>, bool, u64), Reply> {
    super::coll::mpop_args(args, at, ("max", "min"))
}

/// Keys of `ZMPOP numkeys key... MIN|MAX [COUNT count]`.
pub fn zmpop_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    Ok(mpop_args(args, 1)?.0.into_iter().map(|k| (db, k)).collect())
}

/// Pops from the first non-empty sorted set of `keys`: the `[key, [[member, score]...]]`
/// reply, or `None` when all are empty.
pub fn mpop(
    ctx: &mut Ctx,
    keys: &[Vec<u8>],
    max: bool,
    count: u64,
) -> Result<Option<Reply>, Reply> {
    for k in keys {
        if let Some(mut z) = zset(ctx, k)? {
            let items = pop(ctx, k, &mut z, max, count)?;
            let pairs = items
                .into_iter()
                .map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)]))
                .collect();
            return Ok(Some(Reply::Array(vec![
                Reply::Bulk(k.clone()),
                Reply::Array(pairs),
            ])));
        }
    }
    Ok(None)
}

/// `ZMPOP numkeys key... MIN|MAX [COUNT count]`.
pub fn zmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (keys, max, count) = mpop_args(args, 1)?;
    Ok(mpop(ctx, &keys, max, count)?.unwrap_or(Reply::NilArray))
}

/// Every member with its score, in score order.
fn all(ctx: &mut Ctx, key: &[u8], z: &Z) -> Result<Vec<(Vec<u8>, f64)>, Reply> {
    let q = Query {
        select: Select::Rank(0, -1),
        rev: false,
        offset: 0,
        limit: -1,
    };
    select(ctx, key, z, &q)
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`.
pub fn zrandmember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (drawn, withscores) = match draw(ctx, args, Kind::ZSet, Some("withscores"))? {
        Draw::Done(r) => return Ok(r),
        Draw::Drawn(d, w) => (d, w),
    };
    let mut chosen = Vec::with_capacity(drawn.len());
    for (m, v) in drawn {
        chosen.push((m, encoding::decode_score(&v)?));
    }
    Ok(scored_reply(ctx, chosen, withscores))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, acc: f64, v: f64) -> f64 {
        match self {
            Aggregate::Sum => {
                let s = acc + v;
                if s.is_nan() {
                    0.0
                } else {
                    s
                }
            }
            Aggregate::Min => acc.min(v),
            Aggregate::Max => acc.max(v),
        }
    }
}

/// The input count of the algebra commands at `at`, with Redis's errors.
fn setnum(args: &[Vec<u8>], at: usize) -> Result<usize, Reply> {
    let n = int(&args[at])?;
    if n < 1 {
        return Err(err(format!(
            "at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
        )));
    }
    if n as usize > args.len() - at - 1 {
        return Err(syntax());
    }
    Ok(n as usize)
}

/// Keys of `ZUNION|ZINTER|ZDIFF|ZINTERCARD numkeys key...`.
pub fn algebra_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let n = setnum(args, 1)?;
    Ok(args[2..2 + n].iter().map(|k| (db, k.clone())).collect())
}

/// Keys of `ZUNIONSTORE|ZINTERSTORE|ZDIFFSTORE destination numkeys key...`.
pub fn algebra_store_keys(
    db: usize,
    args: &[Vec<u8>],
    _: usize,
) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let n = setnum(args, 2)?;
    let mut keys = vec![(db, args[1].clone())];
    keys.extend(args[3..3 + n].iter().map(|k| (db, k.clone())));
    Ok(keys)
}

/// One input of the algebra: a sorted set, a set (every score 1) or nothing.
enum Input {
    Missing,
    ZSet(Z),
    Set(crate::store::encoding::Meta),
}

impl Input {
    fn size(&self) -> u64 {
        match self {
            Input::Missing => 0,
            Input::ZSet(z) => z.size,
            Input::Set(m) => m.size,
        }
    }
}

fn input(ctx: &mut Ctx, key: &[u8]) -> Result<Input, Reply> {
    match ctx.txn.get(ctx.db, key)?.cloned() {
        None => Ok(Input::Missing),
        Some(m) if m.kind == Kind::Set => Ok(Input::Set(m)),
        Some(m) if m.kind == Kind::ZSet => Ok(Input::ZSet(Z::of(&m)?)),
        Some(_) => Err(wrongtype()),
    }
}

fn members_of(ctx: &mut Ctx, key: &[u8], inp: &Input) -> Result<Vec<(Vec<u8>, f64)>, Reply> {
    match inp {
        Input::Missing => Ok(Vec::new()),
        Input::ZSet(z) => all(ctx, key, z),
        Input::Set(m) => Ok(ctx
            .txn
            .all_members(ctx.db, key, m.version)?
            .into_iter()
            .map(|(k, _)| (k, 1.0))
            .collect()),
    }
}

fn score_in(ctx: &mut Ctx, key: &[u8], inp: &Input, member: &[u8]) -> Result<Option<f64>, Reply> {
    match inp {
        Input::Missing => Ok(None),
        Input::ZSet(z) => super::zsets::score_of(ctx, key, z, member),
        Input::Set(m) => Ok(ctx.txn.member(ctx.db, key, m.version, member)?.map(|_| 1.0)),
    }
}

/// What an algebra command asked for.
struct Algebra {
    op: Op,
    keys: Vec<Vec<u8>>,
    weights: Vec<f64>,
    aggregate: Aggregate,
    withscores: bool,
    limit: usize,
}

/// Parses `numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES] [LIMIT n]`
/// from `at`, checking the inputs' types first as Redis does.
fn parse_algebra(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    at: usize,
    op: Op,
    store: bool,
    card: bool,
) -> Result<(Algebra, Vec<Input>), Reply> {
    let n = setnum(args, at)?;
    let keys: Vec<Vec<u8>> = args[at + 1..at + 1 + n].to_vec();
    let mut inputs = Vec::with_capacity(n);
    for k in &keys {
        inputs.push(input(ctx, k)?);
    }
    let mut a = Algebra {
        op,
        keys,
        weights: vec![1.0; n],
        aggregate: Aggregate::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = at + 1 + n;
    while j < args.len() {
        let remaining = args.len() - j;
        let w = &args[j];
        if op != Op::Diff && !card && remaining > n && is(w, "weights") {
            for i in 0..n {
                a.weights[i] = parse_score(&args[j + 1 + i])
                    .ok_or_else(|| err("weight value is not a float"))?;
            }
            j += 1 + n;
        } else if op != Op::Diff && !card && remaining >= 2 && is(w, "aggregate") {
            let g = &args[j + 1];
            a.aggregate = if is(g, "sum") {
                Aggregate::Sum
            } else if is(g, "min") {
                Aggregate::Min
            } else if is(g, "max") {
                Aggregate::Max
            } else {
                return Err(syntax());
            };
            j += 2;
        } else if !store && !card && is(w, "withscores") {
            a.withscores = true;
            j += 1;
        } else if card && remaining >= 2 && is(w, "limit") {
            a.limit = positive_or(&args[j + 1], "LIMIT can't be negative")? as usize;
            j += 2;
        } else {
            return Err(syntax());
        }
    }
    Ok((a, inputs))
}

/// The result of the algebra, sorted by score then member.
fn compute(ctx: &mut Ctx, a: &Algebra, inputs: &[Input]) -> Result<Vec<(Vec<u8>, f64)>, Reply> {
    let weigh = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut out: Vec<(Vec<u8>, f64)> = match a.op {
        Op::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for (i, inp) in inputs.iter().enumerate() {
                for (m, s) in members_of(ctx, &a.keys[i], inp)? {
                    let v = weigh(s, a.weights[i]);
                    acc.entry(m)
                        .and_modify(|x| *x = a.aggregate.apply(*x, v))
                        .or_insert(v);
                }
            }
            acc.into_iter().collect()
        }
        Op::Inter => {
            if inputs.iter().any(|i| matches!(i, Input::Missing)) {
                return Ok(Vec::new());
            }
            let mut order: Vec<usize> = (0..inputs.len()).collect();
            order.sort_by_key(|&i| inputs[i].size());
            let first = order[0];
            let mut out = Vec::new();
            'member: for (m, s) in members_of(ctx, &a.keys[first], &inputs[first])? {
                let mut acc = weigh(s, a.weights[first]);
                for &j in &order[1..] {
                    match score_in(ctx, &a.keys[j], &inputs[j], &m)? {
                        None => continue 'member,
                        Some(s2) => acc = a.aggregate.apply(acc, weigh(s2, a.weights[j])),
                    }
                }
                out.push((m, acc));
                if a.limit != 0 && out.len() >= a.limit {
                    break;
                }
            }
            out
        }
        Op::Diff => {
            let mut out = Vec::new();
            'outer: for (m, s) in members_of(ctx, &a.keys[0], &inputs[0])? {
                for (k, inp) in a.keys.iter().zip(inputs).skip(1) {
                    if score_in(ctx, k, inp, &m)?.is_some() {
                        continue 'outer;
                    }
                }
                out.push((m, s));
            }
            out
        }
    };
    out.sort_by(|x, y| x.1.total_cmp(&y.1).then_with(|| x.0.cmp(&y.0)));
    Ok(out)
}

fn algebra(ctx: &mut Ctx, args: &[Vec<u8>], op: Op) -> CmdResult {
    let (a, inputs) = parse_algebra(ctx, args, 1, op, false, false)?;
    let items = compute(ctx, &a, &inputs)?;
    Ok(scored_reply(ctx, items, a.withscores))
}

fn algebra_store(ctx: &mut Ctx, args: &[Vec<u8>], op: Op) -> CmdResult {
    let (a, inputs) = parse_algebra(ctx, args, 2, op, true, false)?;
    let items = compute(ctx, &a, &inputs)?;
    let event = match op {
        Op::Union => "zunionstore",
        Op::Inter => "zinterstore",
        Op::Diff => "zdiffstore",
    };
    Ok(Reply::Integer(store(ctx, &args[1], &items, event)?))
}

/// `ZUNION numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub fn zunion(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    algebra(ctx, args, Op::Union)
}

/// `ZINTER numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub fn zinter(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    algebra(ctx, args, Op::Inter)
}

/// `ZDIFF numkeys key... [WITHSCORES]`.
pub fn zdiff(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    algebra(ctx, args, Op::Diff)
}

/// `ZUNIONSTORE destination numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX]`.
pub fn zunionstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    algebra_store(ctx, args, Op::Union)
}

/// `ZINTERSTORE destination numkeys key... [WEIGHTS w...] [AGGREGATE SUM|MIN|MAX]`.
pub fn zinterstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    algebra_store(ctx, args, Op::Inter)
}

/// `ZDIFFSTORE destination numkeys key...`.
pub fn zdiffstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    algebra_store(ctx, args, Op::Diff)
}

/// `ZINTERCARD numkeys key... [LIMIT limit]`.
pub fn zintercard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (a, inputs) = parse_algebra(ctx, args, 1, Op::Inter, false, true)?;
    Ok(Reply::Integer(compute(ctx, &a, &inputs)?.len() as i64))
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn zscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    super::coll::scan_members(ctx, args, Kind::ZSet, |out, m, v| {
        let s = encoding::decode_score(&v)?;
        out.push(Reply::Bulk(m));
        out.push(Reply::Bulk(format_double(s).into_bytes()));
        Ok(())
    })
}

/// The sorted-set pop, random and algebra commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("zpopmin", -2, [WRITE FAST], [WRITE SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them.", Key(zpopmin)),
    cmd!("zpopmax", -2, [WRITE FAST], [WRITE SORTEDSET FAST], [], KR(1, 1, 1), "sorted-set", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them.", Key(zpopmax)),
    cmd!("zmpop", -4, [WRITE MOVABLEKEYS], [WRITE SORTEDSET SLOW], [], Keys::Custom(zmpop_keys, 0, 0, 0), "sorted-set", "7.0.0", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them.", Key(zmpop)),
    cmd!("zrandmember", -2, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "6.2.0", "Returns one or more random members from a sorted set.", Key(zrandmember)),
    cmd!("zunion", -3, [READONLY MOVABLEKEYS], [READ SORTEDSET SLOW], [], Keys::Custom(algebra_keys, 0, 0, 0), "sorted-set", "6.2.0", "Returns the union of multiple sorted sets.", Key(zunion)),
    cmd!("zinter", -3, [READONLY MOVABLEKEYS], [READ SORTEDSET SLOW], [], Keys::Custom(algebra_keys, 0, 0, 0), "sorted-set", "6.2.0", "Returns the intersect of multiple sorted sets.", Key(zinter)),
    cmd!("zdiff", -3, [READONLY MOVABLEKEYS], [READ SORTEDSET SLOW], [], Keys::Custom(algebra_keys, 0, 0, 0), "sorted-set", "6.2.0", "Returns the difference between multiple sorted sets.", Key(zdiff)),
    cmd!("zunionstore", -4, [WRITE DENYOOM MOVABLEKEYS], [WRITE SORTEDSET SLOW], [], Keys::Custom(algebra_store_keys, 1, 1, 1), "sorted-set", "2.0.0", "Stores the union of multiple sorted sets in a key.", Key(zunionstore)),
    cmd!("zinterstore", -4, [WRITE DENYOOM MOVABLEKEYS], [WRITE SORTEDSET SLOW], [], Keys::Custom(algebra_store_keys, 1, 1, 1), "sorted-set", "2.0.0", "Stores the intersect of multiple sorted sets in a key.", Key(zinterstore)),
    cmd!("zdiffstore", -4, [WRITE DENYOOM MOVABLEKEYS], [WRITE SORTEDSET SLOW], [], Keys::Custom(algebra_store_keys, 1, 1, 1), "sorted-set", "6.2.0", "Stores the difference of multiple sorted sets in a key.", Key(zdiffstore)),
    cmd!("zintercard", -3, [READONLY MOVABLEKEYS], [READ SORTEDSET SLOW], [], Keys::Custom(algebra_keys, 0, 0, 0), "sorted-set", "7.0.0", "Returns the number of members of the intersect of multiple sorted sets.", Key(zintercard)),
    cmd!("zscan", -3, [READONLY], [READ SORTEDSET SLOW], [], KR(1, 1, 1), "sorted-set", "2.8.0", "Iterates over members and scores of a sorted set.", Key(zscan)),
];

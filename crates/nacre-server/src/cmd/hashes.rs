//! Hash commands: arguments, events and replies around the operations in `types/hash.rs`.

use nacre_resp::Reply;

use super::args::{int, long_double, parse_i64_strict};
use super::coll::{self, Draw};
use super::registry::{cmd, Command, Keys::Range as KR, Run::Key};
use super::{arity_error, err, ok, CmdResult, Ctx};
use crate::store::encoding::{Kind, Meta};
use crate::types::hash;

/// The hash at `key` (`None` if missing; WRONGTYPE for another type).
fn get(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Meta>, Reply> {
    Ok(hash::get(ctx.txn, ctx.db, key)?)
}

fn field(ctx: &mut Ctx, key: &[u8], m: &Meta, f: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    Ok(hash::field(ctx.txn, ctx.db, key, m, f)?)
}

/// `HSET key field value [field value ...]`: fields added.
pub fn hset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() % 2 != 0 {
        return Err(arity_error("hset"));
    }
    let added = hash::set(ctx.txn, ctx.db, &args[1], &args[2..])?;
    ctx.notify(&args[1], "hset");
    Ok(Reply::Integer(added))
}

/// `HMSET key field value [field value ...]`.
pub fn hmset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() % 2 != 0 {
        return Err(arity_error("hmset"));
    }
    hset(ctx, args)?;
    Ok(ok())
}

/// `HSETNX key field value`.
pub fn hsetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    if let Some(m) = get(ctx, key)? {
        if field(ctx, key, &m, &args[2])?.is_some() {
            return Ok(Reply::Integer(0));
        }
    }
    hset(ctx, args)
}

/// `HGET key field`.
pub fn hget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(m) = get(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    Ok(field(ctx, &args[1], &m, &args[2])?.map_or(Reply::Nil, Reply::Bulk))
}

/// `HMGET key field...`.
pub fn hmget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let m = get(ctx, &args[1])?;
    let mut out = Vec::with_capacity(args.len() - 2);
    for f in &args[2..] {
        out.push(match &m {
            None => Reply::Nil,
            Some(m) => field(ctx, &args[1], m, f)?.map_or(Reply::Nil, Reply::Bulk),
        });
    }
    Ok(Reply::Array(out))
}

/// `HDEL key field...`.
pub fn hdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = hash::delete(ctx.txn, ctx.db, &args[1], &args[2..])?;
    if n > 0 {
        ctx.notify(&args[1], "hdel");
    }
    Ok(Reply::Integer(n))
}

/// `HLEN key`.
pub fn hlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(
        get(ctx, &args[1])?.map_or(0, |m| m.size as i64),
    ))
}

/// `HEXISTS key field`.
pub fn hexists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(m) = get(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    Ok(Reply::Integer(
        field(ctx, &args[1], &m, &args[2])?.is_some().into(),
    ))
}

/// `HGETALL key`.
pub fn hgetall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Map(
        hash::fields(ctx.txn, ctx.db, &args[1])?
            .into_iter()
            .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
            .collect(),
    ))
}

/// `HKEYS key`.
pub fn hkeys(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(
        hash::fields(ctx.txn, ctx.db, &args[1])?
            .into_iter()
            .map(|(f, _)| Reply::Bulk(f))
            .collect(),
    ))
}

/// `HVALS key`.
pub fn hvals(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(
        hash::fields(ctx.txn, ctx.db, &args[1])?
            .into_iter()
            .map(|(_, v)| Reply::Bulk(v))
            .collect(),
    ))
}

/// `HINCRBY key field n`.
pub fn hincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = int(&args[3])?;
    let key = &args[1];
    let m = hash::get_or_new(ctx.txn, ctx.db, key)?;
    let old = field(ctx, key, &m, &args[2])?;
    let cur = match &old {
        None => 0,
        Some(v) => parse_i64_strict(v).ok_or_else(|| err("hash value is not an integer"))?,
    };
    let new = cur
        .checked_add(by)
        .ok_or_else(|| err("increment or decrement would overflow"))?;
    let v = new.to_string().into_bytes();
    hash::put(ctx.txn, ctx.db, key, &m, &args[2], v, old.is_none())?;
    ctx.notify(key, "hincrby");
    Ok(Reply::Integer(new))
}

/// `HINCRBYFLOAT key field n`: in C `long double` arithmetic, as Redis.
pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = long_double(&args[3]).ok_or_else(super::args::not_float)?;
    if by.is_infinite() {
        return Err(err("value is NaN or Infinity"));
    }
    let key = &args[1];
    let m = hash::get_or_new(ctx.txn, ctx.db, key)?;
    let old = field(ctx, key, &m, &args[2])?;
    let cur = match &old {
        None => crate::longdouble::LongDouble::ZERO,
        Some(v) => long_double(v).ok_or_else(|| err("hash value is not a float"))?,
    };
    let new = cur.add(by);
    if new.is_nan() || new.is_infinite() {
        return Err(err("increment would produce NaN or Infinity"));
    }
    let s = new.to_human().into_bytes();
    hash::put(ctx.txn, ctx.db, key, &m, &args[2], s.clone(), old.is_none())?;
    ctx.notify(key, "hincrbyfloat");
    // As Redis: replicas set the field's value.
    ctx.propagate(&[b"HSET", key, &args[2], &s]);
    Ok(Reply::Bulk(s))
}

/// `HSTRLEN key field`.
pub fn hstrlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(m) = get(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    Ok(Reply::Integer(
        field(ctx, &args[1], &m, &args[2])?.map_or(0, |v| v.len() as i64),
    ))
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn hscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    coll::scan_members(ctx, args, Kind::Hash, |out, f, v| {
        out.push(Reply::Bulk(f));
        out.push(Reply::Bulk(v));
        Ok(())
    })
}

/// `HRANDFIELD key [count [WITHVALUES]]`.
pub fn hrandfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (drawn, withvalues) = match coll::draw(ctx, args, Kind::Hash, Some("withvalues"))? {
        Draw::Done(r) => return Ok(r),
        Draw::Drawn(d, w) => (d, w),
    };
    Ok(Reply::Array(if !withvalues {
        drawn.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()
    } else if ctx.resp == 3 {
        drawn
            .into_iter()
            .map(|(f, v)| Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)]))
            .collect()
    } else {
        drawn
            .into_iter()
            .flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)])
            .collect()
    }))
}

/// The hash commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("hset", -4, [WRITE DENYOOM FAST], [WRITE HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Creates or modifies the value of a field in a hash.", Key(hset)),
    cmd!("hmset", -4, [WRITE DENYOOM FAST], [WRITE HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Sets the values of multiple fields.", Key(hmset)),
    cmd!("hsetnx", 4, [WRITE DENYOOM FAST], [WRITE HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist.", Key(hsetnx)),
    cmd!("hget", 3, [READONLY FAST], [READ HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Returns the value of a field in a hash.", Key(hget)),
    cmd!("hmget", -3, [READONLY FAST], [READ HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Returns the values of all fields in a hash.", Key(hmget)),
    cmd!("hdel", -3, [WRITE FAST], [WRITE HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Deletes one or more fields and their values from a hash.", Key(hdel)),
    cmd!("hlen", 2, [READONLY FAST], [READ HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Returns the number of fields in a hash.", Key(hlen)),
    cmd!("hexists", 3, [READONLY FAST], [READ HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Determines whether a field exists in a hash.", Key(hexists)),
    cmd!("hgetall", 2, [READONLY], [READ HASH SLOW], [], KR(1, 1, 1), "hash", "2.0.0", "Returns all fields and values in a hash.", Key(hgetall)),
    cmd!("hkeys", 2, [READONLY], [READ HASH SLOW], [], KR(1, 1, 1), "hash", "2.0.0", "Returns all fields in a hash.", Key(hkeys)),
    cmd!("hvals", 2, [READONLY], [READ HASH SLOW], [], KR(1, 1, 1), "hash", "2.0.0", "Returns all values in a hash.", Key(hvals)),
    cmd!("hincrby", 4, [WRITE DENYOOM FAST], [WRITE HASH FAST], [], KR(1, 1, 1), "hash", "2.0.0", "Increments the integer value of a field in a hash by a number.", Key(hincrby)),
    cmd!("hincrbyfloat", 4, [WRITE DENYOOM FAST], [WRITE HASH FAST], [], KR(1, 1, 1), "hash", "2.6.0", "Increments the floating point value of a field by a number.", Key(hincrbyfloat)),
    cmd!("hstrlen", 3, [READONLY FAST], [READ HASH FAST], [], KR(1, 1, 1), "hash", "3.2.0", "Returns the length of the value of a field.", Key(hstrlen)),
    cmd!("hscan", -3, [READONLY], [READ HASH SLOW], [], KR(1, 1, 1), "hash", "2.8.0", "Iterates over fields and values of a hash.", Key(hscan)),
    cmd!("hrandfield", -2, [READONLY], [READ HASH SLOW], [], KR(1, 1, 1), "hash", "6.2.0", "Returns one or more random fields from a hash.", Key(hrandfield)),
];

//! Hash commands. A hash is a metadata record (field count, version) and one `sub` record
//! per field under its version.

use nacre_resp::Reply;

use super::args::{int, long_double, parse_i64_strict};
use super::coll::{self, typed, typed_or_new, Draw};
use super::registry::{cmd, Command, Keys::Range as KR, Run::Key};
use super::{arity_error, err, ok, CmdResult, Ctx};
use crate::store::encoding::{Kind, Meta};
use crate::store::txn::Members;

/// Redis's `hash-max-listpack-entries` and `hash-max-listpack-value` defaults.
const MAX_LISTPACK: (u64, usize) = (128, 64);

/// The hash at `key` (`None` if missing; WRONGTYPE for another type).
fn hash(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Meta>, Reply> {
    typed(ctx, key, Kind::Hash)
}

/// The hash at `key`, created empty if missing.
fn hash_or_new(ctx: &mut Ctx, key: &[u8]) -> Result<Meta, Reply> {
    typed_or_new(ctx, key, Kind::Hash)
}

/// Stores the hash's new size (deleting it when empty), noting when a size or a field or
/// value of `len` bytes takes it past a listpack.
fn resize(ctx: &mut Ctx, key: &[u8], size: u64, len: usize) -> Result<(), Reply> {
    coll::resize(
        ctx,
        key,
        size,
        size > MAX_LISTPACK.0 || len > MAX_LISTPACK.1,
    )
}

fn field(ctx: &mut Ctx, key: &[u8], m: &Meta, f: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    Ok(ctx.txn.member(ctx.db, key, m.version, f)?)
}

fn set_field(
    ctx: &mut Ctx,
    key: &[u8],
    m: &Meta,
    f: &[u8],
    v: Option<Vec<u8>>,
) -> Result<(), Reply> {
    ctx.txn.set_member(ctx.db, key, m.version, f, v)?;
    Ok(())
}

/// `HSET key field value [field value ...]`: fields added.
pub fn hset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() % 2 != 0 {
        return Err(arity_error("hset"));
    }
    let key = &args[1];
    let m = hash_or_new(ctx, key)?;
    let mut size = m.size;
    let mut added = 0;
    let mut len = 0;
    for fv in args[2..].chunks(2) {
        if field(ctx, key, &m, &fv[0])?.is_none() {
            added += 1;
            size += 1;
        }
        len = len.max(fv[0].len()).max(fv[1].len());
        set_field(ctx, key, &m, &fv[0], Some(fv[1].clone()))?;
    }
    resize(ctx, key, size, len)?;
    ctx.notify(key, "hset");
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
    if let Some(m) = hash(ctx, key)? {
        if field(ctx, key, &m, &args[2])?.is_some() {
            return Ok(Reply::Integer(0));
        }
    }
    hset(ctx, args)
}

/// `HGET key field`.
pub fn hget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(m) = hash(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    Ok(field(ctx, &args[1], &m, &args[2])?.map_or(Reply::Nil, Reply::Bulk))
}

/// `HMGET key field...`.
pub fn hmget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let m = hash(ctx, &args[1])?;
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
    let key = &args[1];
    let Some(m) = hash(ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    let mut size = m.size;
    let mut n = 0;
    for f in &args[2..] {
        if field(ctx, key, &m, f)?.is_some() {
            set_field(ctx, key, &m, f, None)?;
            size -= 1;
            n += 1;
        }
    }
    if n > 0 {
        resize(ctx, key, size, 0)?;
        coll::removed(ctx, key, n as u64)?;
        ctx.notify(key, "hdel");
    }
    Ok(Reply::Integer(n))
}

/// `HLEN key`.
pub fn hlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(
        hash(ctx, &args[1])?.map_or(0, |m| m.size as i64),
    ))
}

/// `HEXISTS key field`.
pub fn hexists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(m) = hash(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    Ok(Reply::Integer(
        field(ctx, &args[1], &m, &args[2])?.is_some().into(),
    ))
}

fn all(ctx: &mut Ctx, key: &[u8]) -> Result<Members, Reply> {
    match hash(ctx, key)? {
        None => Ok(Vec::new()),
        Some(m) => Ok(ctx.txn.all_members(ctx.db, key, m.version)?),
    }
}

/// `HGETALL key`.
pub fn hgetall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Map(
        all(ctx, &args[1])?
            .into_iter()
            .map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v)))
            .collect(),
    ))
}

/// `HKEYS key`.
pub fn hkeys(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(
        all(ctx, &args[1])?
            .into_iter()
            .map(|(f, _)| Reply::Bulk(f))
            .collect(),
    ))
}

/// `HVALS key`.
pub fn hvals(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(
        all(ctx, &args[1])?
            .into_iter()
            .map(|(_, v)| Reply::Bulk(v))
            .collect(),
    ))
}

/// `HINCRBY key field n`.
pub fn hincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = int(&args[3])?;
    let key = &args[1];
    let m = hash_or_new(ctx, key)?;
    let old = field(ctx, key, &m, &args[2])?;
    let cur = match &old {
        None => 0,
        Some(v) => parse_i64_strict(v).ok_or_else(|| err("hash value is not an integer"))?,
    };
    let new = cur
        .checked_add(by)
        .ok_or_else(|| err("increment or decrement would overflow"))?;
    set_field(ctx, key, &m, &args[2], Some(new.to_string().into_bytes()))?;
    resize(ctx, key, m.size + u64::from(old.is_none()), 0)?;
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
    let m = hash_or_new(ctx, key)?;
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
    set_field(ctx, key, &m, &args[2], Some(s.clone()))?;
    resize(ctx, key, m.size + u64::from(old.is_none()), 0)?;
    ctx.notify(key, "hincrbyfloat");
    Ok(Reply::Bulk(s))
}

/// `HSTRLEN key field`.
pub fn hstrlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(m) = hash(ctx, &args[1])? else {
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

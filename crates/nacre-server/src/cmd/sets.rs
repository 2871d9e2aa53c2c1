//! Set commands: arguments, events and replies around the operations in `types/set.rs`.

use nacre_resp::Reply;

use super::args::{is, positive, positive_or};
use super::coll::{self, numkeys, Draw};
use super::registry::{cmd, Command, Keys, Keys::Range as KR, Run::Key};
use super::{syntax, CmdResult, Ctx};
use crate::store::encoding::{Kind, Meta};
use crate::types::set;

fn set(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Meta>, Reply> {
    Ok(set::get(ctx.txn, ctx.db, key)?)
}

fn has(ctx: &mut Ctx, key: &[u8], m: &Meta, member: &[u8]) -> Result<bool, Reply> {
    Ok(set::contains(ctx.txn, ctx.db, key, m, member)?)
}

/// Replaces `dst` with a set of `items` (deleting it when there are none); the count. Raises
/// `event` (the command's name), or `del` when an empty result deletes `dst`.
fn store(ctx: &mut Ctx, dst: &[u8], items: &[Vec<u8>], event: &'static str) -> Result<i64, Reply> {
    if items.is_empty() {
        ctx.delete(dst)?;
        return Ok(0);
    }
    let n = set::replace(ctx.txn, ctx.db, dst, items)?;
    ctx.notify(dst, event);
    Ok(n)
}

fn bulk_set(ctx: &Ctx, items: Vec<Vec<u8>>) -> Reply {
    let v = items.into_iter().map(Reply::Bulk).collect();
    if ctx.resp == 3 {
        Reply::Set(v)
    } else {
        Reply::Array(v)
    }
}

/// `SADD key member...`.
pub fn sadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = set::add(ctx.txn, ctx.db, &args[1], &args[2..])?;
    if n > 0 {
        ctx.notify(&args[1], "sadd");
    }
    Ok(Reply::Integer(n))
}

/// `SREM key member...`.
pub fn srem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let Some(m) = set(ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    let n = set::remove(ctx.txn, ctx.db, key, &m, &args[2..])?;
    if n > 0 {
        ctx.notify(key, "srem");
    }
    Ok(Reply::Integer(n as i64))
}

/// `SMEMBERS key`.
pub fn smembers(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let all = set::members(ctx.txn, ctx.db, &args[1])?;
    Ok(bulk_set(ctx, all))
}

/// `SISMEMBER key member`.
pub fn sismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(m) = set(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    Ok(Reply::Integer(has(ctx, &args[1], &m, &args[2])?.into()))
}

/// `SMISMEMBER key member...`.
pub fn smismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let m = set(ctx, &args[1])?;
    let mut out = Vec::with_capacity(args.len() - 2);
    for it in &args[2..] {
        let hit = match &m {
            Some(m) => has(ctx, &args[1], m, it)?,
            None => false,
        };
        out.push(Reply::Integer(hit.into()));
    }
    Ok(Reply::Array(out))
}

/// `SCARD key`.
pub fn scard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(
        set(ctx, &args[1])?.map_or(0, |m| m.size as i64),
    ))
}

/// `SPOP key [count]`: the removal is recorded as the members it removed.
pub fn spop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let count = match args.len() {
        2 => None,
        3 => Some(positive(&args[2])? as usize),
        _ => return Err(syntax()),
    };
    let key = &args[1];
    let m = set(ctx, key)?;
    let Some(m) = m else {
        return Ok(match count {
            None => Reply::Nil,
            Some(_) => bulk_set(ctx, Vec::new()),
        });
    };
    if count == Some(0) {
        return Ok(bulk_set(ctx, Vec::new()));
    }
    let chosen = set::pop(ctx.txn, ctx.db, key, &m, count.unwrap_or(1) as u64)?;
    if !chosen.is_empty() {
        ctx.notify(key, "spop");
        // As Redis: replicas remove the members drawn (1024 at a time).
        for part in chosen.chunks(1024) {
            let mut srem: Vec<&[u8]> = vec![b"SREM", key];
            srem.extend(part.iter().map(Vec::as_slice));
            ctx.propagate(&srem);
        }
    }
    Ok(match count {
        None => chosen.into_iter().next().map_or(Reply::Nil, Reply::Bulk),
        Some(_) => bulk_set(ctx, chosen),
    })
}

/// `SRANDMEMBER key [count]`.
pub fn srandmember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(match coll::draw(ctx, args, Kind::Set, None)? {
        Draw::Done(r) => r,
        Draw::Drawn(d, _) => Reply::Array(d.into_iter().map(|(k, _)| Reply::Bulk(k)).collect()),
    })
}

/// `SMOVE source destination member`.
pub fn smove(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (src, dst, it) = (&args[1], &args[2], &args[3]);
    let Some(sm) = set(ctx, src)? else {
        return Ok(Reply::Integer(0));
    };
    set(ctx, dst)?;
    if src == dst {
        return Ok(Reply::Integer(has(ctx, src, &sm, it)?.into()));
    }
    if !has(ctx, src, &sm, it)? {
        return Ok(Reply::Integer(0));
    }
    // As Redis: the member leaves `src` (which goes if it empties), then joins `dst`.
    set::remove(ctx.txn, ctx.db, src, &sm, std::slice::from_ref(it))?;
    ctx.notify(src, "srem");
    if set::add(ctx.txn, ctx.db, dst, std::slice::from_ref(it))? > 0 {
        ctx.notify(dst, "sadd");
    }
    Ok(Reply::Integer(1))
}

/// `SINTER key...`.
pub fn sinter(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = set::inter(ctx.txn, ctx.db, &args[1..], 0)?;
    Ok(bulk_set(ctx, r))
}

/// `SUNION key...`.
pub fn sunion(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = set::union_or_diff(ctx.txn, ctx.db, &args[1..], false)?;
    Ok(bulk_set(ctx, r))
}

/// `SDIFF key...`.
pub fn sdiff(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = set::union_or_diff(ctx.txn, ctx.db, &args[1..], true)?;
    Ok(bulk_set(ctx, r))
}

/// `SINTERSTORE destination key...`.
pub fn sinterstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = set::inter(ctx.txn, ctx.db, &args[2..], 0)?;
    Ok(Reply::Integer(store(ctx, &args[1], &r, "sinterstore")?))
}

/// `SUNIONSTORE destination key...`.
pub fn sunionstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = set::union_or_diff(ctx.txn, ctx.db, &args[2..], false)?;
    Ok(Reply::Integer(store(ctx, &args[1], &r, "sunionstore")?))
}

/// `SDIFFSTORE destination key...`.
pub fn sdiffstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = set::union_or_diff(ctx.txn, ctx.db, &args[2..], true)?;
    Ok(Reply::Integer(store(ctx, &args[1], &r, "sdiffstore")?))
}

/// `SINTERCARD numkeys key... [LIMIT limit]`.
pub fn sintercard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = numkeys(args, 1)?;
    let mut limit = 0;
    let mut i = 2 + n;
    while i < args.len() {
        if is(&args[i], "limit") && i + 1 < args.len() {
            limit = positive_or(&args[i + 1], "LIMIT can't be negative")? as usize;
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    Ok(Reply::Integer(
        set::inter(ctx.txn, ctx.db, &args[2..2 + n], limit)?.len() as i64,
    ))
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn sscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    coll::scan_members(ctx, args, Kind::Set, |out, f, _| {
        out.push(Reply::Bulk(f));
        Ok(())
    })
}

/// The set commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("sadd", -3, [WRITE DENYOOM FAST], [WRITE SET FAST], [], KR(1, 1, 1), "set", "1.0.0", "Adds one or more members to a set.", Key(sadd)),
    cmd!("srem", -3, [WRITE FAST], [WRITE SET FAST], [], KR(1, 1, 1), "set", "1.0.0", "Removes one or more members from a set.", Key(srem)),
    cmd!("smembers", 2, [READONLY], [READ SET SLOW], [], KR(1, 1, 1), "set", "1.0.0", "Returns all members of a set.", Key(smembers)),
    cmd!("sismember", 3, [READONLY FAST], [READ SET FAST], [], KR(1, 1, 1), "set", "1.0.0", "Determines whether a member belongs to a set.", Key(sismember)),
    cmd!("smismember", -3, [READONLY FAST], [READ SET FAST], [], KR(1, 1, 1), "set", "6.2.0", "Determines whether multiple members belong to a set.", Key(smismember)),
    cmd!("scard", 2, [READONLY FAST], [READ SET FAST], [], KR(1, 1, 1), "set", "1.0.0", "Returns the number of members in a set.", Key(scard)),
    cmd!("spop", -2, [WRITE FAST], [WRITE SET FAST], [], KR(1, 1, 1), "set", "1.0.0", "Returns one or more random members from a set after removing them.", Key(spop)),
    cmd!("srandmember", -2, [READONLY], [READ SET SLOW], [], KR(1, 1, 1), "set", "1.0.0", "Get one or multiple random members from a set.", Key(srandmember)),
    cmd!("smove", 4, [WRITE FAST], [WRITE SET FAST], [], KR(1, 2, 1), "set", "1.0.0", "Moves a member from one set to another.", Key(smove)),
    cmd!("sinter", -2, [READONLY], [READ SET SLOW], [], KR(1, -1, 1), "set", "1.0.0", "Returns the intersect of multiple sets.", Key(sinter)),
    cmd!("sintercard", -3, [READONLY MOVABLEKEYS], [READ SET SLOW], [], Keys::Custom(super::coll::numkeys_keys, 0, 0, 0), "set", "7.0.0", "Returns the number of members of the intersect of multiple sets.", Key(sintercard)),
    cmd!("sunion", -2, [READONLY], [READ SET SLOW], [], KR(1, -1, 1), "set", "1.0.0", "Returns the union of multiple sets.", Key(sunion)),
    cmd!("sdiff", -2, [READONLY], [READ SET SLOW], [], KR(1, -1, 1), "set", "1.0.0", "Returns the difference of multiple sets.", Key(sdiff)),
    cmd!("sinterstore", -3, [WRITE DENYOOM], [WRITE SET SLOW], [], KR(1, -1, 1), "set", "1.0.0", "Stores the intersect of multiple sets in a key.", Key(sinterstore)),
    cmd!("sunionstore", -3, [WRITE DENYOOM], [WRITE SET SLOW], [], KR(1, -1, 1), "set", "1.0.0", "Stores the union of multiple sets in a key.", Key(sunionstore)),
    cmd!("sdiffstore", -3, [WRITE DENYOOM], [WRITE SET SLOW], [], KR(1, -1, 1), "set", "1.0.0", "Stores the difference of multiple sets in a key.", Key(sdiffstore)),
    cmd!("sscan", -3, [READONLY], [READ SET SLOW], [], KR(1, 1, 1), "set", "2.8.0", "Iterates over members of a set.", Key(sscan)),
];

//! List commands. A list is a metadata record holding its ends and one `sub` record per
//! element keyed by its position (`store/encoding.rs`): pushes and pops move an end, so
//! they touch one record each; `LINDEX` and `LSET` read or write one record by position;
//! `LRANGE` reads only the elements it returns. `LINSERT` and `LREM` shift whichever side of
//! the change is shorter.

use nacre_resp::Reply;

use super::args::{int, is, positive, positive_or, range};
use super::registry::{cmd, Command, Keys, Keys::Range as KR, Run::Key};
use super::{err, syntax, CmdResult, Ctx};
use crate::types::list::{at, list, list_or_new, pop, push, put, read, save, splice, walk, List};

fn push_cmd(ctx: &mut Ctx, args: &[Vec<u8>], left: bool, only_existing: bool) -> CmdResult {
    let key = &args[1];
    let mut l = if only_existing {
        match list(ctx.txn, ctx.db, key)? {
            Some(l) => l,
            None => return Ok(Reply::Integer(0)),
        }
    } else {
        list_or_new(ctx.txn, ctx.db, key)?
    };
    push(ctx.txn, ctx.db, key, &mut l, left, &args[2..])?;
    ctx.notify(key, push_event(left));
    Ok(Reply::Integer(l.len() as i64))
}

/// `LPUSH key element...`.
pub fn lpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, args, true, false)
}

/// `RPUSH key element...`.
pub fn rpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, args, false, false)
}

/// `LPUSHX key element...`.
pub fn lpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, args, true, true)
}

/// `RPUSHX key element...`.
pub fn rpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push_cmd(ctx, args, false, true)
}

/// The event a push raises.
fn push_event(left: bool) -> &'static str {
    if left {
        "lpush"
    } else {
        "rpush"
    }
}

/// Pops up to `n` elements from an end of the list at `key`, raising the pop's event when
/// any went.
fn pop_notify(
    ctx: &mut Ctx,
    key: &[u8],
    l: &mut List,
    left: bool,
    n: u64,
) -> Result<Vec<Vec<u8>>, Reply> {
    let out = pop(ctx.txn, ctx.db, key, l, left, n)?;
    if !out.is_empty() {
        ctx.notify(key, if left { "lpop" } else { "rpop" });
    }
    Ok(out)
}

fn pop_cmd(ctx: &mut Ctx, args: &[Vec<u8>], left: bool) -> CmdResult {
    let count = match args.len() {
        2 => None,
        3 => Some(positive(&args[2])? as u64),
        _ => return Err(super::arity_error(if left { "lpop" } else { "rpop" })),
    };
    let key = &args[1];
    let Some(mut l) = list(ctx.txn, ctx.db, key)? else {
        // As Redis: a null array where a count asked for an array.
        return Ok(if count.is_some() {
            Reply::NilArray
        } else {
            Reply::Nil
        });
    };
    match count {
        None => Ok(pop_notify(ctx, key, &mut l, left, 1)?
            .pop()
            .map_or(Reply::Nil, Reply::Bulk)),
        Some(0) => Ok(Reply::Array(vec![])),
        Some(c) => Ok(Reply::Array(
            pop_notify(ctx, key, &mut l, left, c)?
                .into_iter()
                .map(Reply::Bulk)
                .collect(),
        )),
    }
}

/// `LPOP key [count]`.
pub fn lpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, args, true)
}

/// `RPOP key [count]`.
pub fn rpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_cmd(ctx, args, false)
}

/// `LLEN key`.
pub fn llen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(
        list(ctx.txn, ctx.db, &args[1])?.map_or(0, |l| l.len() as i64),
    ))
}

/// `LRANGE key start stop`.
pub fn lrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (s, e) = (int(&args[2])?, int(&args[3])?);
    let Some(l) = list(ctx.txn, ctx.db, &args[1])? else {
        return Ok(Reply::Array(vec![]));
    };
    let Some((s, e)) = range(s, e, l.len() as usize) else {
        return Ok(Reply::Array(vec![]));
    };
    Ok(Reply::Array(
        read(ctx.txn, ctx.db, &args[1], &l, s as u64, e as u64 + 1)?
            .into_iter()
            .map(Reply::Bulk)
            .collect(),
    ))
}

/// An index from the head (negative: from the tail) as a position inside `l`, if any.
fn index(l: &List, i: i64) -> Option<u64> {
    let n = l.len() as i64;
    let i = if i < 0 { n.checked_add(i)? } else { i };
    (0..n).contains(&i).then(|| l.head + i as u64)
}

/// `LINDEX key index`.
pub fn lindex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(l) = list(ctx.txn, ctx.db, &args[1])? else {
        return Ok(Reply::Nil);
    };
    let i = int(&args[2])?;
    match index(&l, i) {
        Some(p) => Ok(Reply::Bulk(at(ctx.txn, ctx.db, &args[1], &l, p)?)),
        None => Ok(Reply::Nil),
    }
}

/// `LSET key index element`.
pub fn lset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(l) = list(ctx.txn, ctx.db, &args[1])? else {
        return Err(err("no such key"));
    };
    let i = int(&args[2])?;
    let p = index(&l, i).ok_or_else(|| err("index out of range"))?;
    put(ctx.txn, ctx.db, &args[1], &l, p, Some(args[3].clone()))?;
    save(ctx.txn, ctx.db, &args[1], &l)?;
    ctx.notify(&args[1], "lset");
    Ok(super::ok())
}

/// `LTRIM key start stop`.
pub fn ltrim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (s, e) = (int(&args[2])?, int(&args[3])?);
    let key = &args[1];
    let Some(mut l) = list(ctx.txn, ctx.db, key)? else {
        return Ok(super::ok());
    };
    let Some((s, e)) = range(s, e, l.len() as usize) else {
        l.tail = l.head;
        save(ctx.txn, ctx.db, key, &l)?;
        ctx.notify(key, "ltrim");
        return Ok(super::ok());
    };
    let (new_head, new_tail) = (l.head + s as u64, l.head + e as u64 + 1);
    for p in (l.head..new_head).chain(new_tail..l.tail) {
        put(ctx.txn, ctx.db, key, &l, p, None)?;
    }
    (l.head, l.tail) = (new_head, new_tail);
    save(ctx.txn, ctx.db, key, &l)?;
    ctx.notify(key, "ltrim");
    Ok(super::ok())
}

/// `LREM key count element`.
pub fn lrem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let count = int(&args[2])?;
    let key = &args[1];
    let Some(mut l) = list(ctx.txn, ctx.db, key)? else {
        return Ok(Reply::Integer(0));
    };
    let want = &args[3];
    let limit = if count == 0 {
        u64::MAX
    } else {
        count.unsigned_abs()
    };
    // The elements from the walk's start to the last match, and which of them go.
    let mut seen: Vec<(u64, Vec<u8>, bool)> = Vec::new();
    let mut found = 0;
    walk(
        ctx.txn,
        ctx.db,
        key,
        &l,
        l.head..l.tail,
        count < 0,
        |p, v| {
            let hit = v == *want;
            seen.push((p, v, hit));
            if hit {
                found += 1;
            }
            found < limit
        },
    )?;
    if found == 0 {
        return Ok(Reply::Integer(0));
    }
    if count < 0 {
        seen.reverse();
    }
    // Only the window from the first match to the last one changes.
    let first = seen.iter().position(|(_, _, hit)| *hit).unwrap_or(0);
    let last = seen.iter().rposition(|(_, _, hit)| *hit).unwrap_or(0);
    let (a, b) = (seen[first].0 - l.head, seen[last].0 - l.head + 1);
    let kept: Vec<Vec<u8>> = seen
        .drain(first..=last)
        .filter(|(_, _, hit)| !hit)
        .map(|(_, v, _)| v)
        .collect();
    splice(ctx.txn, ctx.db, key, &mut l, a, b, kept)?;
    ctx.notify(key, "lrem");
    Ok(Reply::Integer(found as i64))
}

/// `LINSERT key BEFORE|AFTER pivot element`.
pub fn linsert(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let after = if is(&args[2], "after") {
        true
    } else if is(&args[2], "before") {
        false
    } else {
        return Err(syntax());
    };
    let key = &args[1];
    let Some(mut l) = list(ctx.txn, ctx.db, key)? else {
        return Ok(Reply::Integer(0));
    };
    let mut pivot = None;
    walk(ctx.txn, ctx.db, key, &l, l.head..l.tail, false, |p, v| {
        if v == args[3] {
            pivot = Some(p - l.head);
        }
        pivot.is_none()
    })?;
    let Some(i) = pivot else {
        return Ok(Reply::Integer(-1));
    };
    let i = i + u64::from(after);
    splice(ctx.txn, ctx.db, key, &mut l, i, i, vec![args[4].clone()])?;
    ctx.notify(key, "linsert");
    Ok(Reply::Integer(l.len() as i64))
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.
pub fn lpos(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut rank, mut count, mut maxlen) = (1i64, None::<u64>, 0u64);
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "rank") && more {
            rank = int(&args[i + 1])?;
            if rank == 0 {
                return Err(err("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
        } else if is(&args[i], "count") && more {
            count = Some(positive_or(&args[i + 1], "COUNT can't be negative")? as u64);
        } else if is(&args[i], "maxlen") && more {
            maxlen = positive_or(&args[i + 1], "MAXLEN can't be negative")? as u64;
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    let Some(l) = list(ctx.txn, ctx.db, &args[1])? else {
        return Ok(if count.is_some() {
            Reply::Array(vec![])
        } else {
            Reply::Nil
        });
    };
    let reverse = rank < 0;
    // As Redis: the smallest rank, whose negation overflows, stays negative and so takes
    // the first match from the tail.
    let skip = if rank == i64::MIN {
        0
    } else {
        rank.unsigned_abs() - 1
    };
    let want = count.map_or(1, |c| if c == 0 { u64::MAX } else { c });
    let (mut matches, mut scanned) = (0u64, 0u64);
    let mut out = Vec::new();
    walk(
        ctx.txn,
        ctx.db,
        &args[1],
        &l,
        l.head..l.tail,
        reverse,
        |p, v| {
            if maxlen != 0 && scanned >= maxlen {
                return false;
            }
            scanned += 1;
            if v == args[2] {
                matches += 1;
                if matches > skip {
                    out.push(Reply::Integer((p - l.head) as i64));
                }
            }
            (out.len() as u64) < want
        },
    )?;
    Ok(match count {
        Some(_) => Reply::Array(out),
        None => out.pop().unwrap_or(Reply::Nil),
    })
}

fn side(b: &[u8]) -> Result<bool, Reply> {
    if is(b, "left") {
        Ok(true)
    } else if is(b, "right") {
        Ok(false)
    } else {
        Err(syntax())
    }
}

/// Moves one element from an end of `src` to an end of `dst`; it, or `None` when `src` is
/// missing. As Redis, the element is pushed first (creating `dst` if need be), then popped,
/// with their events in that order.
pub fn lmove_one(
    ctx: &mut Ctx,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> Result<Option<Vec<u8>>, Reply> {
    let Some(s) = list(ctx.txn, ctx.db, src)? else {
        return Ok(None);
    };
    list(ctx.txn, ctx.db, dst)?;
    if s.is_empty() {
        return Ok(None);
    }
    let end = if from_left { s.head } else { s.tail - 1 };
    let v = at(ctx.txn, ctx.db, src, &s, end)?;
    let mut d = list_or_new(ctx.txn, ctx.db, dst)?;
    push(
        ctx.txn,
        ctx.db,
        dst,
        &mut d,
        to_left,
        std::slice::from_ref(&v),
    )?;
    ctx.notify(dst, push_event(to_left));
    // Read again: `dst` may be `src`.
    let Some(mut s) = list(ctx.txn, ctx.db, src)? else {
        return Ok(None);
    };
    pop_notify(ctx, src, &mut s, from_left, 1)?;
    Ok(Some(v))
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`.
pub fn lmove(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (from, to) = (side(&args[3])?, side(&args[4])?);
    Ok(lmove_one(ctx, &args[1], &args[2], from, to)?.map_or(Reply::Nil, Reply::Bulk))
}

/// `RPOPLPUSH source destination`.
pub fn rpoplpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(lmove_one(ctx, &args[1], &args[2], false, true)?.map_or(Reply::Nil, Reply::Bulk))
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT count]` starting at `at`: the keys, the side
/// (true: left) and the count.
pub fn mpop_args(args: &[Vec<u8>], at: usize) -> Result<(Vec<Vec<u8>>, bool, u64), Reply> {
    super::coll::mpop_args(args, at, ("left", "right"))
}

/// Keys of `LMPOP numkeys key... LEFT|RIGHT [COUNT count]`.
pub fn lmpop_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    Ok(mpop_args(args, 1)?.0.into_iter().map(|k| (db, k)).collect())
}

/// A key and the elements popped from it.
pub type Popped = (Vec<u8>, Vec<Vec<u8>>);

/// Pops up to `count` elements from the first non-empty list of `keys`: the key and them.
pub fn mpop(
    ctx: &mut Ctx,
    keys: &[Vec<u8>],
    left: bool,
    count: u64,
) -> Result<Option<Popped>, Reply> {
    for k in keys {
        if let Some(mut l) = list(ctx.txn, ctx.db, k)? {
            let popped = pop_notify(ctx, k, &mut l, left, count)?;
            return Ok(Some((k.clone(), popped)));
        }
    }
    Ok(None)
}

/// The `[key, [element...]]` reply of LMPOP and BLMPOP.
pub fn mpop_reply(found: Option<Popped>) -> Reply {
    match found {
        None => Reply::NilArray,
        Some((k, els)) => Reply::Array(vec![
            Reply::Bulk(k),
            Reply::Array(els.into_iter().map(Reply::Bulk).collect()),
        ]),
    }
}

/// `LMPOP numkeys key... LEFT|RIGHT [COUNT count]`.
pub fn lmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (keys, left, count) = mpop_args(args, 1)?;
    Ok(mpop_reply(mpop(ctx, &keys, left, count)?))
}

/// The list commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("lpush", -3, [WRITE DENYOOM FAST], [WRITE LIST FAST], [], KR(1, 1, 1), "list", "1.0.0", "Prepends one or more elements to a list.", Key(lpush)),
    cmd!("rpush", -3, [WRITE DENYOOM FAST], [WRITE LIST FAST], [], KR(1, 1, 1), "list", "1.0.0", "Appends one or more elements to a list.", Key(rpush)),
    cmd!("lpushx", -3, [WRITE DENYOOM FAST], [WRITE LIST FAST], [], KR(1, 1, 1), "list", "2.2.0", "Prepends one or more elements to a list only when the list exists.", Key(lpushx)),
    cmd!("rpushx", -3, [WRITE DENYOOM FAST], [WRITE LIST FAST], [], KR(1, 1, 1), "list", "2.2.0", "Appends an element to a list only when the list exists.", Key(rpushx)),
    cmd!("lpop", -2, [WRITE FAST], [WRITE LIST FAST], [], KR(1, 1, 1), "list", "1.0.0", "Returns the first elements in a list after removing it.", Key(lpop)),
    cmd!("rpop", -2, [WRITE FAST], [WRITE LIST FAST], [], KR(1, 1, 1), "list", "1.0.0", "Returns and removes the last elements of a list.", Key(rpop)),
    cmd!("llen", 2, [READONLY FAST], [READ LIST FAST], [], KR(1, 1, 1), "list", "1.0.0", "Returns the length of a list.", Key(llen)),
    cmd!("lrange", 4, [READONLY], [READ LIST SLOW], [], KR(1, 1, 1), "list", "1.0.0", "Returns a range of elements from a list.", Key(lrange)),
    cmd!("lindex", 3, [READONLY], [READ LIST SLOW], [], KR(1, 1, 1), "list", "1.0.0", "Returns an element from a list by its index.", Key(lindex)),
    cmd!("lset", 4, [WRITE DENYOOM], [WRITE LIST SLOW], [], KR(1, 1, 1), "list", "1.0.0", "Sets the value of an element in a list by its index.", Key(lset)),
    cmd!("ltrim", 4, [WRITE], [WRITE LIST SLOW], [], KR(1, 1, 1), "list", "1.0.0", "Removes elements from both ends a list.", Key(ltrim)),
    cmd!("lrem", 4, [WRITE], [WRITE LIST SLOW], [], KR(1, 1, 1), "list", "1.0.0", "Removes elements from a list.", Key(lrem)),
    cmd!("linsert", 5, [WRITE DENYOOM], [WRITE LIST SLOW], [], KR(1, 1, 1), "list", "2.2.0", "Inserts an element before or after another element in a list.", Key(linsert)),
    cmd!("lpos", -3, [READONLY], [READ LIST SLOW], [], KR(1, 1, 1), "list", "6.0.6", "Returns the index of matching elements in a list.", Key(lpos)),
    cmd!("lmove", 5, [WRITE DENYOOM], [WRITE LIST SLOW], [], KR(1, 2, 1), "list", "6.2.0", "Returns an element after popping it from one list and pushing it to another.", Key(lmove)),
    cmd!("rpoplpush", 3, [WRITE DENYOOM], [WRITE LIST SLOW], [], KR(1, 2, 1), "list", "1.2.0", "Returns the last element of a list after removing and pushing it to another list.", Key(rpoplpush)),
    cmd!("lmpop", -4, [WRITE MOVABLEKEYS], [WRITE LIST SLOW], [], Keys::Custom(lmpop_keys, 0, 0, 0), "list", "7.0.0", "Returns multiple elements from a list after removing them.", Key(lmpop)),
];

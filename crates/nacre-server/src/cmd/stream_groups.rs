//! Consumer-group and introspection commands of streams: XGROUP XREADGROUP XACK XPENDING
//! XCLAIM XAUTOCLAIM XINFO.

use nacre_resp::Reply;

use super::args::{int, is, lower};
use super::registry::{cmd, sub, unknown_subcommand, Command, Keys, Keys::Range as KR, Run::Key};
use super::streams::{
    entries_reply, entry_reply, get, id_reply, parse_read, range_end, range_start, read_keys,
    read_reply, strict_id,
};
use super::{err, err_bytes, help_lines, ok, syntax, CmdResult, Ctx};
use crate::types::stream::{self, Header, Id};
use crate::types::stream_group::{self as sg, Group, Nack};

/// A `-NOGROUP ...` error naming client bytes.
fn nogroup(msg: Vec<u8>) -> Reply {
    let mut line = b"NOGROUP ".to_vec();
    line.extend_from_slice(&msg);
    match String::from_utf8(line) {
        Ok(t) => Reply::Error(t),
        Err(e) => Reply::BlobError(e.into_bytes()),
    }
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Redis's error for a container's subcommand it does not know or got the wrong count of
/// arguments for.
fn sub_syntax(sub: &[u8], cmd: &str) -> Reply {
    let mut msg = b"unknown subcommand or wrong number of arguments for '".to_vec();
    msg.extend_from_slice(sub);
    msg.extend_from_slice(format!("'. Try {cmd} HELP.").as_bytes());
    err_bytes(&msg)
}

/// Marks consumer `name` seen (Redis's lookup), creating it if missing and raising
/// `xgroup-createconsumer` then.
pub fn touch_consumer(
    ctx: &mut Ctx,
    key: &[u8],
    h: &Header,
    group: &[u8],
    name: &[u8],
) -> Result<(), Reply> {
    let now = ctx.txn.now();
    if sg::touch(ctx.txn, ctx.db, key, h, group, name, now)? {
        ctx.notify(key, "xgroup-createconsumer");
    }
    Ok(())
}

/// The group `name` of the stream at `key`, or NOGROUP with `what` after the names.
fn group_or(ctx: &mut Ctx, key: &[u8], name: &[u8], what: &[u8]) -> Result<(Header, Group), Reply> {
    let miss = || {
        nogroup(cat(&[
            b"No such key '",
            key,
            b"' or consumer group '",
            name,
            b"'",
            what,
        ]))
    };
    let Some(h) = get(ctx, key)? else {
        return Err(miss());
    };
    match sg::group(ctx.txn, ctx.db, key, &h, name)? {
        Some(g) => Ok((h, g)),
        None => Err(miss()),
    }
}

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

/// `XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP`.
fn xgroup(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let op = lower(&args[1]);
    if op == "help" && args.len() == 2 {
        return Ok(help_lines(XGROUP_HELP));
    }
    let known = [
        "create",
        "setid",
        "destroy",
        "createconsumer",
        "delconsumer",
    ];
    if !known.contains(&op.as_str()) {
        return Err(unknown_subcommand(&args[1], "xgroup"));
    }
    let mut mkstream = false;
    let mut read: Option<u64> = None;
    if args.len() >= 4 {
        let mut i = 5;
        while i < args.len() {
            if op == "create" && is(&args[i], "mkstream") {
                mkstream = true;
                i += 1;
            } else if (op == "create" || op == "setid")
                && is(&args[i], "entriesread")
                && i + 1 < args.len()
            {
                let n = int(&args[i + 1])?;
                if n < -1 {
                    return Err(err("value for ENTRIESREAD must be positive or -1"));
                }
                read = u64::try_from(n).ok();
                i += 2;
            } else {
                return Err(sub_syntax(&args[1], "XGROUP"));
            }
        }
    }
    let key = &args[2];
    let name = &args[3];
    let h = get(ctx, key)?;
    let need = || {
        err("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
    };
    if !mkstream && h.is_none() {
        return Err(need());
    }
    let existing = match &h {
        Some(h) => sg::group(ctx.txn, ctx.db, key, h, name)?,
        None => None,
    };
    if existing.is_none() && matches!(op.as_str(), "setid" | "createconsumer" | "delconsumer") {
        return Err(nogroup(cat(&[
            b"No such consumer group '",
            name,
            b"' for key name '",
            key,
            b"'",
        ])));
    }
    match op.as_str() {
        "create" if (5..=8).contains(&args.len()) => {
            let id = if args[4].as_slice() == b"$" {
                h.as_ref().map_or(Id::MIN, |h| h.last)
            } else {
                strict_id(&args[4])?
            };
            let h = match h {
                Some(h) => h,
                None => stream::create(ctx.txn, ctx.db, key)?,
            };
            if existing.is_some() {
                return Err(Reply::Error(
                    "BUSYGROUP Consumer Group name already exists".into(),
                ));
            }
            let g = Group {
                name: name.clone(),
                last: id,
                read,
            };
            sg::put_group(ctx.txn, ctx.db, key, &h, &g)?;
            ctx.notify(key, "xgroup-create");
            Ok(ok())
        }
        "setid" if args.len() == 5 || args.len() == 7 => {
            let h = h.ok_or_else(need)?;
            let id = if args[4].as_slice() == b"$" {
                h.last
            } else {
                super::streams::loose_id(&args[4], 0)?
            };
            let g = Group {
                name: name.clone(),
                last: id,
                read,
            };
            sg::put_group(ctx.txn, ctx.db, key, &h, &g)?;
            ctx.notify(key, "xgroup-setid");
            Ok(ok())
        }
        "destroy" if args.len() == 4 => {
            let h = h.ok_or_else(need)?;
            if existing.is_none() {
                return Ok(Reply::Integer(0));
            }
            sg::destroy(ctx.txn, ctx.db, key, &h, name)?;
            ctx.notify(key, "xgroup-destroy");
            Ok(Reply::Integer(1))
        }
        "createconsumer" if args.len() == 5 => {
            let h = h.ok_or_else(need)?;
            let now = ctx.txn.now();
            let created = sg::create_consumer(ctx.txn, ctx.db, key, &h, name, &args[4], now)?;
            if created {
                ctx.notify(key, "xgroup-createconsumer");
            }
            Ok(Reply::Integer(i64::from(created)))
        }
        "delconsumer" if args.len() == 5 => {
            let h = h.ok_or_else(need)?;
            let n = sg::delete_consumer(ctx.txn, ctx.db, key, &h, name, &args[4])?;
            if n.is_some() {
                ctx.notify(key, "xgroup-delconsumer");
            }
            Ok(Reply::Integer(n.unwrap_or(0) as i64))
        }
        _ => Err(sub_syntax(&args[1], "XGROUP")),
    }
}

/// `XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS key... id...`
fn xreadgroup(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = parse_read(args)?;
    let Some((gname, consumer)) = r.group.clone() else {
        return Err(err("Missing GROUP option for XREADGROUP"));
    };
    // Every stream, group and id is checked before anything is served.
    let mut plan = Vec::with_capacity(r.streams.len());
    for (key, arg) in &r.streams {
        let suffix = b" in XREADGROUP with GROUP option";
        let (h, g) = group_or(ctx, key, &gname, suffix)?;
        let from = match arg.as_slice() {
            b"$" => return Err(err("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")),
            b">" => None,
            a => Some(strict_id(a)?),
        };
        plan.push((key.clone(), h, g, from));
    }
    let mut found = Vec::new();
    for (key, h, mut g, from) in plan {
        // A stream named twice is read again, with what the first read changed.
        let h = get(ctx, &key)?.unwrap_or(h);
        if let Some(fresh) = sg::group(ctx.txn, ctx.db, &key, &h, &gname)? {
            g = fresh;
        }
        let reply = match from {
            Some(after) => {
                touch_consumer(ctx, &key, &h, &gname, &consumer)?;
                let hist =
                    sg::history(ctx.txn, ctx.db, &key, &h, &gname, &consumer, after, r.count)?;
                Reply::Array(
                    hist.into_iter()
                        .map(|(id, e)| match e {
                            Some(pairs) => entry_reply((id, pairs)),
                            None => Reply::Array(vec![id_reply(id), Reply::NilArray]),
                        })
                        .collect(),
                )
            }
            None => {
                let top = stream::last_present(&h);
                if top.is_none_or(|t| t <= g.last) {
                    continue;
                }
                touch_consumer(ctx, &key, &h, &gname, &consumer)?;
                let e = sg::deliver(
                    ctx.txn, ctx.db, &key, &h, &mut g, &consumer, r.count, r.noack,
                )?;
                entries_reply(e)
            }
        };
        found.push((key, reply));
    }
    if !found.is_empty() {
        return Ok(read_reply(ctx.resp, found));
    }
    Ok(if r.block.is_some() {
        Reply::Nil
    } else {
        Reply::NilArray
    })
}

/// `XACK key group id...`
fn xack(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(h) = get(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    if sg::group(ctx.txn, ctx.db, &args[1], &h, &args[2])?.is_none() {
        return Ok(Reply::Integer(0));
    }
    let ids = args[3..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let mut n = 0;
    for id in ids {
        if sg::ack(ctx.txn, ctx.db, &args[1], &h, &args[2], id)? {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

/// `XPENDING key group [[IDLE ms] start end count [consumer]]`
fn xpending(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let n = args.len();
    if n != 3 && !(6..=9).contains(&n) {
        return Err(syntax());
    }
    let mut detail = None;
    if n >= 6 {
        let mut at = 3;
        let mut min_idle = 0i64;
        if is(&args[3], "idle") {
            min_idle = int(&args[4])?;
            if n < 8 {
                return Err(syntax());
            }
            at += 2;
        }
        let count = int(&args[at + 2])?.max(0) as u64;
        let start = range_start(&args[at])?;
        let end = range_end(&args[at + 1])?;
        let consumer = args.get(at + 3).cloned();
        detail = Some((min_idle, start, end, count, consumer));
    }
    let (h, _) = group_or(ctx, &args[1], &args[2], b"")?;
    let (key, group) = (&args[1], &args[2]);
    let Some((min_idle, start, end, mut count, consumer)) = detail else {
        // The summary: how many, the lowest and highest ids, and per consumer.
        let mut total = 0i64;
        let mut lo = None;
        let mut hi = None;
        sg::walk_pending(
            ctx.txn,
            ctx.db,
            key,
            &h,
            group,
            Id::MIN,
            Id::MAX,
            |id, _| {
                total += 1;
                lo.get_or_insert(id);
                hi = Some(id);
                true
            },
        )?;
        if total == 0 {
            return Ok(Reply::Array(vec![
                Reply::Integer(0),
                Reply::Nil,
                Reply::Nil,
                Reply::NilArray,
            ]));
        }
        let per = sg::pending_per_consumer(ctx.txn, ctx.db, key, &h, group)?;
        return Ok(Reply::Array(vec![
            Reply::Integer(total),
            id_reply(lo.unwrap_or_default()),
            id_reply(hi.unwrap_or_default()),
            Reply::Array(
                per.into_iter()
                    .map(|(c, k)| {
                        Reply::Array(vec![
                            Reply::Bulk(c),
                            Reply::Bulk(k.to_string().into_bytes()),
                        ])
                    })
                    .collect(),
            ),
        ]));
    };
    let now = ctx.txn.now();
    let mut rows = Vec::new();
    let mut row = |id: Id, nk: Nack| -> bool {
        if count == 0 {
            return false;
        }
        if min_idle != 0 && (now as i64 - nk.time as i64) < min_idle {
            return true;
        }
        count -= 1;
        rows.push(Reply::Array(vec![
            id_reply(id),
            Reply::Bulk(nk.owner),
            Reply::Integer((now as i64 - nk.time as i64).max(0)),
            Reply::Integer(nk.count as i64),
        ]));
        true
    };
    match consumer {
        Some(c) => {
            if sg::consumer(ctx.txn, ctx.db, key, &h, group, &c)?.is_none() {
                return Ok(Reply::Array(Vec::new()));
            }
            for id in sg::owned(ctx.txn, ctx.db, key, &h, group, &c, start, 0)? {
                if id > end {
                    break;
                }
                if let Some(nk) = sg::pending(ctx.txn, ctx.db, key, &h, group, id)? {
                    if !row(id, nk) {
                        break;
                    }
                }
            }
        }
        None => sg::walk_pending(ctx.txn, ctx.db, key, &h, group, start, end, row)?,
    }
    Ok(Reply::Array(rows))
}

/// Claims pending entry `id` for `owner` (XCLAIM / XAUTOCLAIM's shared step).
// (The transaction, database, key and stream come first, as in every operation here.)
#[allow(clippy::too_many_arguments)]
fn claim_one(
    ctx: &mut Ctx,
    key: &[u8],
    h: &Header,
    group: &[u8],
    owner: &[u8],
    id: Id,
    nack: Nack,
    time: u64,
    count: u64,
) -> Result<(), Reply> {
    let was = nack.owner.clone();
    let n = Nack {
        time,
        count,
        owner: owner.to_vec(),
    };
    let prev = if was.is_empty() {
        None
    } else {
        Some(was.as_slice())
    };
    sg::set_pending(ctx.txn, ctx.db, key, h, group, id, &n, prev)?;
    Ok(())
}

/// `XCLAIM key group consumer min-idle id... [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE]
/// [JUSTID] [LASTID id]`
fn xclaim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, group, owner) = (&args[1], &args[2], &args[3]);
    let (h, mut g) = group_or(ctx, key, group, b"")?;
    let min_idle = crate::num::parse_i64_strict(&args[4])
        .ok_or_else(|| err("Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match strict_id(&args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.txn.now() as i64;
    let (mut force, mut justid) = (false, false);
    let mut time: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = Id::MIN;
    let num = |b: &[u8], what: &str| {
        crate::num::parse_i64_strict(b)
            .ok_or_else(|| err(format!("Invalid {what} option argument for XCLAIM")))
    };
    while j < args.len() {
        let more = j + 1 < args.len();
        let o = &args[j];
        if is(o, "force") {
            force = true;
        } else if is(o, "justid") {
            justid = true;
        } else if is(o, "idle") && more {
            j += 1;
            time = Some(now - num(&args[j], "IDLE")?);
        } else if is(o, "time") && more {
            j += 1;
            time = Some(num(&args[j], "TIME")?);
        } else if is(o, "retrycount") && more {
            j += 1;
            retry = Some(num(&args[j], "RETRYCOUNT")?);
        } else if is(o, "lastid") && more {
            j += 1;
            last_id = strict_id(&args[j])?;
        } else {
            let mut m = b"Unrecognized XCLAIM option '".to_vec();
            m.extend_from_slice(o);
            m.push(b'\'');
            return Err(err_bytes(&m));
        }
        j += 1;
    }
    if last_id > g.last {
        g.last = last_id;
        sg::put_group(ctx.txn, ctx.db, key, &h, &g)?;
    }
    let time = match time {
        Some(t) if t >= 0 && t <= now => t as u64,
        _ => now as u64,
    };
    let mut out = Vec::new();
    let mut seen = false;
    for id in ids {
        let nack = sg::pending(ctx.txn, ctx.db, key, &h, group, id)?;
        let Some(pairs) = stream::entry(ctx.txn, ctx.db, key, &h, id)? else {
            // The entry is gone: its pending entry goes too.
            if nack.is_some() {
                sg::ack(ctx.txn, ctx.db, key, &h, group, id)?;
            }
            continue;
        };
        let nack = match nack {
            Some(n) => n,
            None if force => Nack {
                time: now as u64,
                count: 1,
                owner: Vec::new(),
            },
            None => continue,
        };
        if !nack.owner.is_empty() && min_idle != 0 && now - (nack.time as i64) < min_idle {
            continue;
        }
        if !seen {
            touch_consumer(ctx, key, &h, group, owner)?;
            seen = true;
        }
        let count = match retry {
            Some(r) if r >= 0 => r as u64,
            _ if !justid => nack.count + 1,
            _ => nack.count,
        };
        claim_one(ctx, key, &h, group, owner, id, nack, time, count)?;
        out.push(if justid {
            id_reply(id)
        } else {
            entry_reply((id, pairs))
        });
    }
    Ok(Reply::Array(out))
}

/// `XAUTOCLAIM key group consumer min-idle start [COUNT n] [JUSTID]`
fn xautoclaim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (key, group, owner) = (&args[1], &args[2], &args[3]);
    let min_idle = crate::num::parse_i64_strict(&args[4])
        .ok_or_else(|| err("Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = range_start(&args[5])?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            let max = i64::MAX / 16;
            count = crate::num::parse_i64_strict(&args[j + 1])
                .filter(|c| (1..=max).contains(c))
                .ok_or_else(|| err("COUNT must be > 0"))?;
            j += 1;
        } else if is(&args[j], "justid") {
            justid = true;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    let (h, _) = group_or(ctx, key, group, b"")?;
    let now = ctx.txn.now();
    let mut attempts = count.saturating_mul(10);
    let mut claimed = Vec::new();
    let mut deleted = Vec::new();
    let mut next = Id::MIN;
    // The pending entries from `start` on, as many as the attempts may visit (and one more,
    // which says where the next call starts).
    let mut cand = Vec::new();
    sg::walk_pending(ctx.txn, ctx.db, key, &h, group, start, Id::MAX, |id, n| {
        cand.push((id, n));
        (cand.len() as i64) <= attempts
    })?;
    let mut it = cand.into_iter().peekable();
    let mut seen = false;
    while attempts > 0 && count > 0 {
        let Some((id, nack)) = it.next() else { break };
        attempts -= 1;
        let Some(pairs) = stream::entry(ctx.txn, ctx.db, key, &h, id)? else {
            sg::ack(ctx.txn, ctx.db, key, &h, group, id)?;
            deleted.push(id_reply(id));
            count -= 1;
            continue;
        };
        if min_idle != 0 && (now as i64 - nack.time as i64) < min_idle {
            continue;
        }
        if !seen {
            touch_consumer(ctx, key, &h, group, owner)?;
            seen = true;
        }
        let c = if justid { nack.count } else { nack.count + 1 };
        claim_one(ctx, key, &h, group, owner, id, nack, now, c)?;
        claimed.push(if justid {
            id_reply(id)
        } else {
            entry_reply((id, pairs))
        });
        count -= 1;
    }
    if let Some((id, _)) = it.next() {
        next = id;
    }
    Ok(Reply::Array(vec![
        id_reply(next),
        Reply::Array(claimed),
        Reply::Array(deleted),
    ]))
}

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn int_or_nil(v: Option<u64>) -> Reply {
    v.map_or(Reply::Nil, |n| Reply::Integer(n as i64))
}

fn lag_reply(v: Option<i64>) -> Reply {
    v.map_or(Reply::Nil, Reply::Integer)
}

/// `XINFO STREAM|GROUPS|CONSUMERS|HELP`.
fn xinfo(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let op = lower(&args[1]);
    if op == "help" {
        if args.len() != 2 {
            return Err(sub_syntax(&args[1], "XINFO"));
        }
        return Ok(help_lines(XINFO_HELP));
    }
    if !matches!(op.as_str(), "consumers" | "groups" | "stream") {
        return Err(unknown_subcommand(&args[1], "xinfo"));
    }
    if args.len() < 3 {
        return Err(sub_syntax(&args[1], "XINFO"));
    }
    let key = &args[2];
    let Some(h) = get(ctx, key)? else {
        return Err(err("no such key"));
    };
    match op.as_str() {
        "consumers" if args.len() == 4 => {
            let group = &args[3];
            if sg::group(ctx.txn, ctx.db, key, &h, group)?.is_none() {
                return Err(nogroup(cat(&[
                    b"No such consumer group '",
                    group,
                    b"' for key name '",
                    key,
                    b"'",
                ])));
            }
            let now = ctx.txn.now();
            let per = sg::pending_per_consumer(ctx.txn, ctx.db, key, &h, group)?;
            let mut out = Vec::new();
            for (name, seen) in sg::consumers(ctx.txn, ctx.db, key, &h, group)? {
                let pending = per.iter().find(|(n, _)| *n == name).map_or(0, |p| p.1);
                out.push(Reply::Map(vec![
                    (bulk("name"), Reply::Bulk(name)),
                    (bulk("pending"), Reply::Integer(pending as i64)),
                    (
                        bulk("idle"),
                        Reply::Integer(now.saturating_sub(seen) as i64),
                    ),
                ]));
            }
            Ok(Reply::Array(out))
        }
        "groups" if args.len() == 3 => {
            let mut out = Vec::new();
            for g in sg::groups(ctx.txn, ctx.db, key, &h)? {
                let consumers = sg::consumers(ctx.txn, ctx.db, key, &h, &g.name)?.len();
                let pending = sg::pending_count(ctx.txn, ctx.db, key, &h, &g.name)?;
                out.push(Reply::Map(vec![
                    (bulk("name"), Reply::Bulk(g.name.clone())),
                    (bulk("consumers"), Reply::Integer(consumers as i64)),
                    (bulk("pending"), Reply::Integer(pending as i64)),
                    (bulk("last-delivered-id"), id_reply(g.last)),
                    (bulk("entries-read"), int_or_nil(g.read)),
                    (bulk("lag"), lag_reply(sg::lag(&h, &g))),
                ]));
            }
            Ok(Reply::Array(out))
        }
        "stream" => stream_info(ctx, key, &h, &args[3..]),
        _ => Err(sub_syntax(&args[1], "XINFO")),
    }
}

/// `XINFO STREAM key [FULL [COUNT n]]`.
fn stream_info(ctx: &mut Ctx, key: &[u8], h: &Header, opts: &[Vec<u8>]) -> CmdResult {
    let bad = || sub_syntax(b"STREAM", "XINFO");
    let full = !opts.is_empty();
    let mut count: usize = 10;
    if full {
        if (opts.len() != 1 && opts.len() != 3) || !is(&opts[0], "full") {
            return Err(bad());
        }
        if opts.len() == 3 {
            if !is(&opts[1], "count") {
                return Err(bad());
            }
            let c = int(&opts[2])?;
            count = if c < 0 { 10 } else { c as usize };
        }
    }
    let nodes = stream::node_count(ctx.txn, ctx.db, key, h)?;
    let mut m = vec![
        (bulk("length"), Reply::Integer(h.length as i64)),
        (bulk("radix-tree-keys"), Reply::Integer(nodes as i64)),
        // Redis's radix tree has about one inner node per key as well.
        (
            bulk("radix-tree-nodes"),
            Reply::Integer((nodes * 2).max(1) as i64),
        ),
        (bulk("last-generated-id"), id_reply(h.last)),
        (bulk("max-deleted-entry-id"), id_reply(h.max_deleted)),
        (bulk("entries-added"), Reply::Integer(h.added as i64)),
        (bulk("recorded-first-entry-id"), id_reply(h.first)),
    ];
    let groups = sg::groups(ctx.txn, ctx.db, key, h)?;
    if !full {
        m.push((bulk("groups"), Reply::Integer(groups.len() as i64)));
        let first = stream::range(ctx.txn, ctx.db, key, h, Id::MIN, Id::MAX, 1, false)?;
        let last = stream::range(ctx.txn, ctx.db, key, h, Id::MIN, Id::MAX, 1, true)?;
        for (name, e) in [("first-entry", first), ("last-entry", last)] {
            let r = e.into_iter().next().map_or(Reply::Nil, entry_reply);
            m.push((bulk(name), r));
        }
        return Ok(Reply::Map(m));
    }
    let entries = stream::range(ctx.txn, ctx.db, key, h, Id::MIN, Id::MAX, count, false)?;
    m.push((bulk("entries"), entries_reply(entries)));
    let mut gs = Vec::new();
    for g in groups {
        let mut pel = Vec::new();
        let mut pel_count = 0u64;
        sg::walk_pending(
            ctx.txn,
            ctx.db,
            key,
            h,
            &g.name,
            Id::MIN,
            Id::MAX,
            |id, n| {
                pel_count += 1;
                if count == 0 || pel.len() < count {
                    pel.push(Reply::Array(vec![
                        id_reply(id),
                        Reply::Bulk(n.owner),
                        Reply::Integer(n.time as i64),
                        Reply::Integer(n.count as i64),
                    ]));
                }
                true
            },
        )?;
        let mut consumers = Vec::new();
        for (name, seen) in sg::consumers(ctx.txn, ctx.db, key, h, &g.name)? {
            let ids = sg::owned(ctx.txn, ctx.db, key, h, &g.name, &name, Id::MIN, 0)?;
            let mut own = Vec::new();
            for id in ids.iter().take(if count == 0 { usize::MAX } else { count }) {
                if let Some(n) = sg::pending(ctx.txn, ctx.db, key, h, &g.name, *id)? {
                    own.push(Reply::Array(vec![
                        id_reply(*id),
                        Reply::Integer(n.time as i64),
                        Reply::Integer(n.count as i64),
                    ]));
                }
            }
            consumers.push(Reply::Map(vec![
                (bulk("name"), Reply::Bulk(name)),
                (bulk("seen-time"), Reply::Integer(seen as i64)),
                (bulk("pel-count"), Reply::Integer(ids.len() as i64)),
                (bulk("pending"), Reply::Array(own)),
            ]));
        }
        gs.push(Reply::Map(vec![
            (bulk("name"), Reply::Bulk(g.name.clone())),
            (bulk("last-delivered-id"), id_reply(g.last)),
            (bulk("entries-read"), int_or_nil(g.read)),
            (bulk("lag"), lag_reply(sg::lag(h, &g))),
            (bulk("pel-count"), Reply::Integer(pel_count as i64)),
            (bulk("pending"), Reply::Array(pel)),
            (bulk("consumers"), Reply::Array(consumers)),
        ]));
    }
    m.push((bulk("groups"), Reply::Array(gs)));
    Ok(Reply::Map(m))
}

/// The consumer-group commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("xgroup", -2, [], [SLOW], [], Keys::Custom(super::keys::object_keys, 0, 0, 0), "stream", "5.0.0", "A container for consumer groups commands", Key(xgroup), &[
        sub!("create", -5, [WRITE DENYOOM], [WRITE STREAM SLOW], (2, 2, 1)),
        sub!("createconsumer", 5, [WRITE DENYOOM], [WRITE STREAM SLOW], (2, 2, 1)),
        sub!("delconsumer", 5, [WRITE], [WRITE STREAM SLOW], (2, 2, 1)),
        sub!("destroy", 4, [WRITE], [WRITE STREAM SLOW], (2, 2, 1)),
        sub!("setid", -5, [WRITE], [WRITE STREAM SLOW], (2, 2, 1)),
        sub!("help", 2, [LOADING STALE], [STREAM SLOW], (0, 0, 0)),
    ]),
    cmd!("xreadgroup", -7, [WRITE BLOCKING MOVABLEKEYS], [WRITE STREAM SLOW BLOCKING], [], Keys::Custom(read_keys, 0, 0, 0), "stream", "5.0.0", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.", Key(xreadgroup)),
    cmd!("xack", -4, [WRITE FAST], [WRITE STREAM FAST], [], KR(1, 1, 1), "stream", "5.0.0", "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.", Key(xack)),
    cmd!("xpending", -3, [READONLY], [READ STREAM SLOW], [], KR(1, 1, 1), "stream", "5.0.0", "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.", Key(xpending)),
    cmd!("xclaim", -6, [WRITE FAST], [WRITE STREAM FAST], [], KR(1, 1, 1), "stream", "5.0.0", "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.", Key(xclaim)),
    cmd!("xautoclaim", -6, [WRITE FAST], [WRITE STREAM FAST], [], KR(1, 1, 1), "stream", "6.2.0", "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.", Key(xautoclaim)),
    cmd!("xinfo", -2, [], [SLOW], [], Keys::Custom(super::keys::object_keys, 0, 0, 0), "stream", "5.0.0", "A container for stream introspection commands", Key(xinfo), &[
        sub!("consumers", 4, [READONLY], [READ STREAM SLOW], (2, 2, 1)),
        sub!("groups", 3, [READONLY], [READ STREAM SLOW], (2, 2, 1)),
        sub!("stream", -3, [READONLY], [READ STREAM SLOW], (2, 2, 1)),
        sub!("help", 2, [LOADING STALE], [STREAM SLOW], (0, 0, 0)),
    ]),
];

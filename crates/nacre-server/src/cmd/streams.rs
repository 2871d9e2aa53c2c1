//! Stream commands: XADD XRANGE XREVRANGE XLEN XDEL XTRIM XSETID XREAD, and the argument
//! forms the consumer-group commands (`stream_groups.rs`) share: ids, ranges, trimming.

use std::time::Duration;

use nacre_resp::Reply;

use super::args::{int, is};
use super::blocking::{Op, Request};
use super::registry::{cmd, Command, Keys, Keys::Range as KR, Run::Key};
use super::{arity_error, err, syntax, CmdResult, Ctx};
use crate::store::txn::Txn;
use crate::types::stream::{self, Entry, Header, Id, Limits, Strategy};

/// Redis's error for an id it cannot read.
pub fn invalid_id() -> Reply {
    err("Invalid stream ID specified as stream command argument")
}

/// An unsigned number as Redis's `string2ull` reads one: a plain non-negative integer, or
/// what C's `strtoull` takes whole (leading blanks and a sign).
fn ull(b: &[u8]) -> Option<u64> {
    if let Some(v) = crate::num::parse_i64_strict(b) {
        return u64::try_from(v).ok();
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Reads an id: `ms-seq`, or `ms` with `missing_seq`; `-` and `+` unless `strict`. With
/// `star`, `ms-*` is taken too, and the second value says whether the sequence was given.
fn parse_id_full(
    b: &[u8],
    missing_seq: u64,
    strict: bool,
    star: bool,
) -> Result<(Id, bool), Reply> {
    if b.len() > 127 {
        return Err(invalid_id());
    }
    match b {
        b"-" if !strict => return Ok((Id::MIN, true)),
        b"+" if !strict => return Ok((Id::MAX, true)),
        b"-" | b"+" => return Err(invalid_id()),
        _ => {}
    }
    let (ms, seq) = match b.iter().position(|&c| c == b'-') {
        Some(d) => (&b[..d], Some(&b[d + 1..])),
        None => (b, None),
    };
    let ms = ull(ms).ok_or_else(invalid_id)?;
    match seq {
        Some(b"*") if star => Ok((Id { ms, seq: 0 }, false)),
        Some(s) => Ok((
            Id {
                ms,
                seq: ull(s).ok_or_else(invalid_id)?,
            },
            true,
        )),
        None => Ok((
            Id {
                ms,
                seq: missing_seq,
            },
            true,
        )),
    }
}

/// An id where `-` and `+` are refused (`streamParseStrictIDOrReply`).
pub fn strict_id(b: &[u8]) -> Result<Id, Reply> {
    Ok(parse_id_full(b, 0, true, false)?.0)
}

/// An id where `-` and `+` are taken (`streamParseIDOrReply`).
pub fn loose_id(b: &[u8], missing_seq: u64) -> Result<Id, Reply> {
    Ok(parse_id_full(b, missing_seq, false, false)?.0)
}

/// The start of an interval (`(` for exclusive).
pub fn range_start(b: &[u8]) -> Result<Id, Reply> {
    if b.len() > 1 && b[0] == b'(' {
        let id = parse_id_full(&b[1..], 0, true, false)?.0;
        return id
            .next()
            .ok_or_else(|| err("invalid start ID for the interval"));
    }
    loose_id(b, 0)
}

/// The end of an interval (`(` for exclusive).
pub fn range_end(b: &[u8]) -> Result<Id, Reply> {
    if b.len() > 1 && b[0] == b'(' {
        let id = parse_id_full(&b[1..], u64::MAX, true, false)?.0;
        return id
            .prev()
            .ok_or_else(|| err("invalid end ID for the interval"));
    }
    loose_id(b, u64::MAX)
}

/// An id as a reply.
pub fn id_reply(id: Id) -> Reply {
    Reply::Bulk(id.text())
}

/// An entry as Redis replies with it: `[id, [field, value...]]`.
pub fn entry_reply((id, pairs): Entry) -> Reply {
    Reply::Array(vec![
        id_reply(id),
        Reply::Array(pairs.into_iter().map(Reply::Bulk).collect()),
    ])
}

/// Entries as an array.
pub fn entries_reply(entries: Vec<Entry>) -> Reply {
    Reply::Array(entries.into_iter().map(entry_reply).collect())
}

/// Node limits from the configuration.
fn limits(ctx: &Ctx) -> Limits {
    let cfg = ctx.shared.config.read();
    Limits {
        entries: cfg.params.uint("stream-node-max-entries"),
        bytes: cfg.params.uint("stream-node-max-bytes"),
    }
}

/// What XADD and XTRIM were asked to trim.
struct Trim {
    how: Option<Strategy>,
    approx: bool,
    limit: u64,
}

/// Parsed XADD / XTRIM options: the trim, NOMKSTREAM, and for XADD the id and where it is.
struct AddArgs {
    trim: Trim,
    nomkstream: bool,
    id: Option<(Id, bool)>,
    id_pos: usize,
}

fn parse_add_or_trim(ctx: &Ctx, args: &[Vec<u8>], xadd: bool) -> Result<AddArgs, Reply> {
    let mut a = AddArgs {
        trim: Trim {
            how: None,
            approx: false,
            limit: 0,
        },
        nomkstream: false,
        id: None,
        id_pos: args.len(),
    };
    let both = || err("syntax error, MAXLEN and MINID options at the same time are not compatible");
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i];
        if xadd && opt.as_slice() == b"*" {
            a.id_pos = i;
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if a.trim.how.is_some() {
                return Err(both());
            }
            a.trim.approx = false;
            let next = &args[i + 1];
            if more >= 2 && (next.as_slice() == b"~" || next.as_slice() == b"=") {
                a.trim.approx = next.as_slice() == b"~";
                i += 1;
            }
            let v = &args[i + 1];
            a.trim.how = Some(if is(opt, "maxlen") {
                let n = int(v)?;
                if n < 0 {
                    return Err(err("The MAXLEN argument must be >= 0."));
                }
                Strategy::MaxLen(n as u64)
            } else {
                Strategy::MinId(strict_id(v)?)
            });
            i += 2;
            continue;
        } else if is(opt, "limit") && more > 0 {
            let n = int(&args[i + 1])?;
            if n < 0 {
                return Err(err("The LIMIT argument must be >= 0."));
            }
            a.trim.limit = n as u64;
            limit_given = true;
            i += 2;
            continue;
        } else if xadd && is(opt, "nomkstream") {
            a.nomkstream = true;
        } else if xadd {
            a.id = Some(parse_id_full(opt, 0, true, true)?);
            a.id_pos = i;
            break;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if a.trim.limit != 0 && a.trim.how.is_none() {
        return Err(err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && a.trim.how.is_none() {
        return Err(err(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !a.trim.approx {
            return Err(err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if a.trim.approx {
        // As Redis: at most 100 nodes' worth of entries per trim.
        let l = 100u64.saturating_mul(limits(ctx).entries);
        a.trim.limit = if l == 0 { 10_000 } else { l.min(1_000_000) };
    } else {
        a.trim.limit = 0;
    }
    Ok(a)
}

/// Trims `h` as `t` asks, raising `xtrim` when entries went; how many did.
fn apply_trim(ctx: &mut Ctx, key: &[u8], h: &mut Header, t: &Trim) -> Result<u64, Reply> {
    let Some(how) = t.how else {
        return Ok(0);
    };
    let n = stream::trim(ctx.txn, ctx.db, key, h, how, t.approx, t.limit)?;
    if n > 0 {
        stream::save(ctx.txn, ctx.db, key, h)?;
        ctx.notify(key, "xtrim");
    }
    Ok(n)
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value...`
fn xadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let a = parse_add_or_trim(ctx, args, true)?;
    let fields = args.len().saturating_sub(a.id_pos + 1);
    if fields < 2 || fields % 2 == 1 {
        return Err(arity_error("xadd"));
    }
    if let Some((id, true)) = a.id {
        if id.is_zero() {
            return Err(err("The ID specified in XADD must be greater than 0-0"));
        }
    }
    let key = &args[1];
    let mut h = match stream::get(ctx.txn, ctx.db, key)? {
        Some(h) => h,
        None if a.nomkstream => return Ok(Reply::Nil),
        None => stream::create(ctx.txn, ctx.db, key)?,
    };
    if h.last == Id::MAX {
        return Err(err(
            "The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let smaller =
        || err("The ID specified in XADD is equal or smaller than the target stream top item");
    let id = match a.id {
        Some((id, true)) => id,
        Some((id, false)) if id.ms == h.last.ms => h
            .last
            .next()
            .filter(|n| n.ms == id.ms)
            .ok_or_else(smaller)?,
        Some((id, false)) => id,
        None => h.next_id(ctx.txn.now()).ok_or_else(smaller)?,
    };
    if id <= h.last {
        return Err(smaller());
    }
    stream::append(
        ctx.txn,
        ctx.db,
        key,
        &mut h,
        id,
        &args[a.id_pos + 1..],
        limits(ctx),
    )?;
    stream::save(ctx.txn, ctx.db, key, &h)?;
    ctx.notify(key, "xadd");
    apply_trim(ctx, key, &mut h, &a.trim)?;
    // As Redis: replicas get the id the entry was given.
    let text = id.text();
    let mut replicated: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    replicated[a.id_pos] = &text;
    ctx.propagate(&replicated);
    Ok(id_reply(id))
}

/// The stream at `key` for reading.
pub fn get(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Header>, Reply> {
    Ok(stream::get(ctx.txn, ctx.db, key)?)
}

fn range_generic(ctx: &mut Ctx, args: &[Vec<u8>], rev: bool) -> CmdResult {
    let (s, e) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = range_start(s)?;
    let end = range_end(e)?;
    let mut count: i64 = -1;
    let mut i = 4;
    while i < args.len() {
        if is(&args[i], "count") && i + 1 < args.len() {
            count = int(&args[i + 1])?.max(0);
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    let Some(h) = get(ctx, &args[1])? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::NilArray);
    }
    let n = if count < 0 { 0 } else { count as usize };
    let entries = stream::range(ctx.txn, ctx.db, &args[1], &h, start, end, n, rev)?;
    Ok(entries_reply(entries))
}

fn xrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    range_generic(ctx, args, true)
}

fn xlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(
        get(ctx, &args[1])?.map_or(0, |h| h.length as i64),
    ))
}

fn xdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let Some(mut h) = get(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    let ids = args[2..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let n = stream::delete(ctx.txn, ctx.db, &args[1], &mut h, &ids)?;
    if n > 0 {
        stream::save(ctx.txn, ctx.db, &args[1], &h)?;
        ctx.notify(&args[1], "xdel");
    }
    Ok(Reply::Integer(n as i64))
}

fn xtrim(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let a = parse_add_or_trim(ctx, args, false)?;
    let Some(mut h) = get(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    Ok(Reply::Integer(
        apply_trim(ctx, &args[1], &mut h, &a.trim)? as i64
    ))
}

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`
fn xsetid(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let id = strict_id(&args[2])?;
    let mut added = None;
    let mut max_deleted = None;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "entriesadded") && more {
            let n = int(&args[i + 1])?;
            if n < 0 {
                return Err(err("entries_added must be positive"));
            }
            added = Some(n as u64);
        } else if is(&args[i], "maxdeletedid") && more {
            let m = strict_id(&args[i + 1])?;
            if id < m {
                return Err(err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            max_deleted = Some(m);
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    let Some(mut h) = get(ctx, &args[1])? else {
        return Err(err("no such key"));
    };
    if h.length > 0 {
        let top = stream::last_present(&h).unwrap_or_default();
        if id < top {
            return Err(err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if added.is_some_and(|a| h.length > a) {
            return Err(err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    stream::set_last(&mut h, id, added, max_deleted.filter(|m| !m.is_zero()));
    stream::save(ctx.txn, ctx.db, &args[1], &h)?;
    ctx.notify(&args[1], "xsetid");
    Ok(super::ok())
}

/// The id argument of XREAD / XREADGROUP for one stream.
#[derive(Clone, Copy, Debug)]
pub enum ReadFrom {
    /// `$`: after the stream's last id when the command runs.
    Last,
    /// `>`: entries never delivered to the group.
    New,
    /// After this id.
    After(Id),
}

/// Parsed XREAD / XREADGROUP arguments.
pub struct ReadArgs {
    /// BLOCK in milliseconds (`None`: not given).
    pub block: Option<u64>,
    /// COUNT (0: no limit).
    pub count: usize,
    /// Streams and what to read of each.
    pub streams: Vec<(Vec<u8>, Vec<u8>)>,
    /// GROUP name and consumer.
    pub group: Option<(Vec<u8>, Vec<u8>)>,
    /// NOACK.
    pub noack: bool,
}

/// Parses XREAD's or XREADGROUP's options (ids are read later, as Redis reads them).
pub fn parse_read(args: &[Vec<u8>]) -> Result<ReadArgs, Reply> {
    let group_cmd = args[0].len() == 10;
    let mut r = ReadArgs {
        block: None,
        count: 0,
        streams: Vec::new(),
        group: None,
        noack: false,
    };
    let mut streams_at = None;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = &args[i];
        if is(o, "block") && more > 0 {
            i += 1;
            let t = crate::num::parse_i64_strict(&args[i])
                .ok_or_else(|| err("timeout is not an integer or out of range"))?;
            if t < 0 {
                return Err(err("timeout is negative"));
            }
            if t > 0 && t > i64::MAX - crate::shared::now_ms() as i64 {
                return Err(err("timeout is out of range"));
            }
            r.block = Some(t as u64);
        } else if is(o, "count") && more > 0 {
            i += 1;
            r.count = int(&args[i])?.max(0) as usize;
        } else if is(o, "streams") && more > 0 {
            streams_at = Some(i + 1);
            break;
        } else if is(o, "group") && more >= 2 {
            if !group_cmd {
                return Err(err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((args[i + 1].clone(), args[i + 2].clone()));
            i += 2;
        } else if is(o, "noack") {
            if !group_cmd {
                return Err(err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let Some(at) = streams_at else {
        return Err(syntax());
    };
    let n = args.len() - at;
    if n % 2 != 0 {
        return Err(err(
            "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
        ));
    }
    if group_cmd && r.group.is_none() {
        return Err(err("Missing GROUP option for XREADGROUP"));
    }
    let half = n / 2;
    r.streams = (0..half)
        .map(|j| (args[at + j].clone(), args[at + half + j].clone()))
        .collect();
    Ok(r)
}

/// Keys of XREAD / XREADGROUP: the streams, each once.
pub fn read_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let r = parse_read(args)?;
    let mut out: Vec<(usize, Vec<u8>)> = Vec::new();
    for (k, _) in r.streams {
        if !out.iter().any(|(_, o)| *o == k) {
            out.push((db, k));
        }
    }
    Ok(out)
}

/// XREAD's per-stream results as one reply: an array of `[key, entries]` (RESP2) or a map.
pub fn read_reply(resp: u8, found: Vec<(Vec<u8>, Reply)>) -> Reply {
    if resp >= 3 {
        Reply::Map(
            found
                .into_iter()
                .map(|(k, v)| (Reply::Bulk(k), v))
                .collect(),
        )
    } else {
        Reply::Array(
            found
                .into_iter()
                .map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), v]))
                .collect(),
        )
    }
}

/// Resolves XREAD's ids in order (`$` to the stream's last id now); WRONGTYPE for a key of
/// another type.
fn xread_ids(txn: &mut Txn<'_>, db: usize, r: &ReadArgs) -> Result<Vec<Id>, Reply> {
    let mut ids = Vec::with_capacity(r.streams.len());
    for (key, arg) in &r.streams {
        let h = stream::get(txn, db, key)?;
        let id = match arg.as_slice() {
            b"$" => h.map_or(Id::MIN, |h| h.last),
            b">" => {
                return Err(err("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."))
            }
            a => strict_id(a)?,
        };
        ids.push(id);
    }
    Ok(ids)
}

/// `XREAD [COUNT n] [BLOCK ms] STREAMS key... id...`
fn xread(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = parse_read(args)?;
    let ids = xread_ids(ctx.txn, ctx.db, &r)?;
    let mut found = Vec::new();
    for ((key, _), gt) in r.streams.iter().zip(&ids) {
        let Some(h) = get(ctx, key)? else { continue };
        if h.length == 0 {
            continue;
        }
        let top = stream::last_present(&h).unwrap_or_default();
        if top <= *gt {
            continue;
        }
        let from = gt.next().unwrap_or(Id::MAX);
        let entries = stream::range(ctx.txn, ctx.db, key, &h, from, Id::MAX, r.count, false)?;
        found.push((key.clone(), entries_reply(entries)));
    }
    if !found.is_empty() {
        return Ok(read_reply(ctx.resp, found));
    }
    // Nil parks the client (the dispatcher asks `block_request`); without BLOCK, a null.
    Ok(if r.block.is_some() {
        Reply::Nil
    } else {
        Reply::NilArray
    })
}

/// The parked form of an XREAD / XREADGROUP that found nothing, its ids resolved in `txn`
/// (where the first attempt ran).
pub fn block_request(txn: &mut Txn<'_>, db: usize, args: &[Vec<u8>]) -> Result<Request, Reply> {
    let r = parse_read(args)?;
    let ids = if r.group.is_some() {
        vec![Id::MAX; r.streams.len()]
    } else {
        xread_ids(txn, db, &r)?
    };
    let timeout = match r.block {
        Some(0) | None => None,
        Some(ms) => Some(Duration::from_millis(ms)),
    };
    Ok(Request {
        op: Op::XRead {
            ids,
            count: if r.count == 0 { 1000 } else { r.count },
            group: r.group.map(|(g, c)| (g, c, r.noack)),
        },
        keys: r.streams.into_iter().map(|(k, _)| k).collect(),
        timeout,
        args: args.to_vec(),
    })
}

/// Serves a parked XREAD / XREADGROUP on `key`, which a write touched: the reply when the
/// stream has entries past what the client waits for; an error for a group reader whose
/// stream or group is gone; `None` to stay parked.
pub fn serve_parked(
    ctx: &mut Ctx,
    key: &[u8],
    keys: &[Vec<u8>],
    ids: &[Id],
    count: usize,
    group: Option<&(Vec<u8>, Vec<u8>, bool)>,
) -> Result<Option<Reply>, Reply> {
    let h = match stream::get(ctx.txn, ctx.db, key) {
        Ok(Some(h)) => h,
        Ok(None) | Err(crate::types::Error::WrongType) if group.is_some() => {
            return Err(Reply::Error(
                "UNBLOCKED the stream key no longer exists".into(),
            ))
        }
        Ok(None) | Err(crate::types::Error::WrongType) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some(i) = keys.iter().position(|k| k.as_slice() == key) else {
        return Ok(None);
    };
    let entries = match group {
        Some((g, consumer, noack)) => {
            let Some(mut grp) = crate::types::stream_group::group(ctx.txn, ctx.db, key, &h, g)?
            else {
                return Err(Reply::Error(
                    "NOGROUP the consumer group this client was blocked on no longer exists".into(),
                ));
            };
            if h.last <= grp.last {
                return Ok(None);
            }
            // (What is written here is dropped with the transaction if nothing is served.)
            super::stream_groups::touch_consumer(ctx, key, &h, g, consumer)?;
            crate::types::stream_group::deliver(
                ctx.txn, ctx.db, key, &h, &mut grp, consumer, count, *noack,
            )?
        }
        None => {
            let gt = ids[i];
            if h.last <= gt {
                return Ok(None);
            }
            let from = gt.next().unwrap_or(Id::MAX);
            stream::range(ctx.txn, ctx.db, key, &h, from, Id::MAX, count, false)?
        }
    };
    // Any write to the key serves its readers (XDEL too): one with nothing new stays parked.
    if entries.is_empty() {
        return Ok(None);
    }
    Ok(Some(read_reply(
        ctx.resp,
        vec![(key.to_vec(), entries_reply(entries))],
    )))
}

/// The stream commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("xadd", -5, [WRITE DENYOOM FAST], [WRITE STREAM FAST], [], KR(1, 1, 1), "stream", "5.0.0", "Appends a new entry to a stream", Key(xadd)),
    cmd!("xrange", -4, [READONLY], [READ STREAM SLOW], [], KR(1, 1, 1), "stream", "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval", Key(xrange)),
    cmd!("xrevrange", -4, [READONLY], [READ STREAM SLOW], [], KR(1, 1, 1), "stream", "5.0.0", "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE", Key(xrevrange)),
    cmd!("xlen", 2, [READONLY FAST], [READ STREAM FAST], [], KR(1, 1, 1), "stream", "5.0.0", "Return the number of entries in a stream", Key(xlen)),
    cmd!("xdel", -3, [WRITE FAST], [WRITE STREAM FAST], [], KR(1, 1, 1), "stream", "5.0.0", "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.", Key(xdel)),
    cmd!("xtrim", -4, [WRITE], [WRITE STREAM SLOW], [], KR(1, 1, 1), "stream", "5.0.0", "Trims the stream to (approximately if '~' is passed) a certain size", Key(xtrim)),
    cmd!("xsetid", -3, [WRITE DENYOOM FAST], [WRITE STREAM FAST], [], KR(1, 1, 1), "stream", "5.0.0", "An internal command for replicating stream values", Key(xsetid)),
    cmd!("xread", -4, [READONLY BLOCKING MOVABLEKEYS], [READ STREAM SLOW BLOCKING], [], Keys::Custom(read_keys, 0, 0, 0), "stream", "5.0.0", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.", Key(xread)),
];

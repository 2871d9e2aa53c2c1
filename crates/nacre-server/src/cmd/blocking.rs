//! Blocking list and sorted-set pops: BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP BZPOPMIN
//! BZPOPMAX BZMPOP. Each runs first as its non-blocking form over its keys in order; when
//! nothing is there (and the client is not in `MULTI`, where it answers nil at once) the
//! connection parks it in `crate::waiters`, and writers serve parked clients of a key in
//! the order they blocked, as Redis does.

use std::time::Duration;

use nacre_resp::Reply;

use super::args::is;
use super::registry::{cmd, Command, Keys, Run::Key};
use super::{err, syntax, CmdResult, Ctx};
use crate::cmd::{lists, zsetops};

/// What a blocking command does once a key has something.
#[derive(Clone, Debug)]
pub enum Op {
    /// BLPOP / BRPOP: `[key, element]`.
    Pop { left: bool },
    /// BLMOVE / BRPOPLPUSH: the element moved.
    Move {
        dst: Vec<u8>,
        from_left: bool,
        to_left: bool,
    },
    /// BLMPOP: `[key, [element...]]`.
    MPop { left: bool, count: u64 },
    /// BZPOPMIN / BZPOPMAX: `[key, member, score]`.
    ZPop { max: bool },
    /// BZMPOP: `[key, [[member, score]...]]`.
    ZMPop { max: bool, count: u64 },
    /// XREAD / XREADGROUP: entries after an id per key (a group reader's is the group's
    /// last delivered id, read when served), at most `count`, and the group, consumer and
    /// NOACK.
    XRead {
        ids: Vec<crate::types::stream::Id>,
        count: usize,
        group: Option<(Vec<u8>, Vec<u8>, bool)>,
    },
}

impl Op {
    /// Whether clients parked behind one this op cannot serve may still be served (a stream
    /// reader waits for ids of its own; pops wait in turn).
    pub fn others_may_pass(&self) -> bool {
        matches!(self, Op::XRead { .. })
    }
}

/// A parsed blocking command.
#[derive(Clone, Debug)]
pub struct Request {
    /// What to do.
    pub op: Op,
    /// Keys watched for data, in order.
    pub keys: Vec<Vec<u8>>,
    /// How long to wait (`None`: forever).
    pub timeout: Option<Duration>,
    /// The command as given (for keyspace events when a writer serves it).
    pub args: Vec<Vec<u8>>,
}

/// A timeout in seconds as Redis reads one: as milliseconds in a signed 64-bit integer,
/// where anything too big for one (infinity included) wraps negative.
fn timeout(b: &[u8]) -> Result<Option<Duration>, Reply> {
    let v =
        super::args::parse_f64(b).ok_or_else(|| err("timeout is not a float or out of range"))?;
    let ms = v * 1000.0;
    // (NaN is refused by the parse.)
    if ms >= 9.223_372_036_854_776e18 || ms <= -1.0 {
        return Err(err("timeout is negative"));
    }
    let ms = ms.max(0.0) as u64;
    if ms == 0 {
        return Ok(None);
    }
    if ms > i64::MAX as u64 - crate::shared::now_ms() {
        return Err(err("timeout is out of range"));
    }
    Ok(Some(Duration::from_millis(ms)))
}

fn side(b: &[u8], a: &str, z: &str) -> Result<bool, Reply> {
    if is(b, a) {
        Ok(true)
    } else if is(b, z) {
        Ok(false)
    } else {
        Err(syntax())
    }
}

/// The parked form of a blocking command that found nothing, read in `txn` where its first
/// attempt ran (XREAD's `$` is the last id then).
pub fn request(
    txn: &mut crate::store::txn::Txn<'_>,
    db: usize,
    args: &[Vec<u8>],
) -> Result<Request, Reply> {
    if args[0].eq_ignore_ascii_case(b"xread") || args[0].eq_ignore_ascii_case(b"xreadgroup") {
        return super::streams::block_request(txn, db, args);
    }
    parse(args)
}

/// Parses a blocking command's arguments (`args[0]` names it).
pub fn parse(args: &[Vec<u8>]) -> Result<Request, Reply> {
    let name = super::args::lower(&args[0]);
    let last = args.len() - 1;
    let (op, keys, t) = match name.as_str() {
        "blpop" | "brpop" => (
            Op::Pop {
                left: name == "blpop",
            },
            args[1..last].to_vec(),
            &args[last],
        ),
        "bzpopmin" | "bzpopmax" => (
            Op::ZPop {
                max: name == "bzpopmax",
            },
            args[1..last].to_vec(),
            &args[last],
        ),
        "brpoplpush" => (
            Op::Move {
                dst: args[2].clone(),
                from_left: false,
                to_left: true,
            },
            vec![args[1].clone()],
            &args[3],
        ),
        "blmove" => {
            let from_left = side(&args[3], "left", "right")?;
            let to_left = side(&args[4], "left", "right")?;
            (
                Op::Move {
                    dst: args[2].clone(),
                    from_left,
                    to_left,
                },
                vec![args[1].clone()],
                &args[5],
            )
        }
        "blmpop" => {
            let t = timeout(&args[1])?;
            let (keys, left, count) = lists::mpop_args(args, 2)?;
            return Ok(Request {
                op: Op::MPop { left, count },
                keys,
                timeout: t,
                args: args.to_vec(),
            });
        }
        "bzmpop" => {
            let t = timeout(&args[1])?;
            let (keys, max, count) = zsetops::mpop_args(args, 2)?;
            return Ok(Request {
                op: Op::ZMPop { max, count },
                keys,
                timeout: t,
                args: args.to_vec(),
            });
        }
        _ => return Err(err("not a blocking command")),
    };
    Ok(Request {
        op,
        keys,
        timeout: timeout(t)?,
        args: args.to_vec(),
    })
}

/// Keys a blocking command locks: its keys, and a move's destination.
pub fn locked_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let r = parse(args)?;
    let mut out: Vec<(usize, Vec<u8>)> = r.keys.iter().map(|k| (db, k.clone())).collect();
    if let Op::Move { dst, .. } = &r.op {
        out.push((db, dst.clone()));
    }
    Ok(out)
}

/// Runs the non-blocking form over `keys` (the first with something is served): the reply,
/// or `None` when every key is empty. Replicas get the non-blocking command that did it, on
/// the key served (as Redis propagates a served BLPOP as an LPOP).
pub fn attempt(ctx: &mut Ctx, r: &Request, keys: &[Vec<u8>]) -> Result<Option<Reply>, Reply> {
    let out = attempt_op(ctx, r, keys)?;
    if let Some(reply) = &out {
        propagate_served(ctx, r, keys, reply);
    }
    Ok(out)
}

/// What replicas run for a blocking command served with `reply`.
fn propagate_served(ctx: &mut Ctx, r: &Request, keys: &[Vec<u8>], reply: &Reply) {
    let side = |left: bool| -> &'static [u8] {
        if left {
            b"LEFT"
        } else {
            b"RIGHT"
        }
    };
    let served = |i: usize| match reply {
        Reply::Array(items) => match items.get(i) {
            Some(Reply::Bulk(k)) => Some(k.clone()),
            _ => None,
        },
        _ => None,
    };
    let counted = || match reply {
        Reply::Array(items) => match items.get(1) {
            Some(Reply::Array(els)) => els.len(),
            _ => 1,
        },
        _ => 1,
    };
    match &r.op {
        Op::Pop { left } => {
            if let Some(k) = served(0) {
                ctx.propagate(&[if *left { b"LPOP" } else { b"RPOP" }, &k]);
            }
        }
        Op::MPop { left, .. } => {
            if let Some(k) = served(0) {
                let n = counted().to_string();
                ctx.propagate(&[if *left { b"LPOP" } else { b"RPOP" }, &k, n.as_bytes()]);
            }
        }
        Op::Move {
            dst,
            from_left,
            to_left,
        } => {
            let src = keys[0].clone();
            ctx.propagate(&[b"LMOVE", &src, dst, side(*from_left), side(*to_left)]);
        }
        Op::ZPop { max } => {
            if let Some(k) = served(0) {
                ctx.propagate(&[if *max { b"ZPOPMAX" } else { b"ZPOPMIN" }, &k]);
            }
        }
        Op::ZMPop { max, .. } => {
            if let Some(k) = served(0) {
                let n = counted().to_string();
                ctx.propagate(&[if *max { b"ZPOPMAX" } else { b"ZPOPMIN" }, &k, n.as_bytes()]);
            }
        }
        // A group read reaches replicas as the read of new entries that served it (the
        // group's state decides which, as on the master).
        Op::XRead {
            count,
            group: Some((g, consumer, noack)),
            ..
        } => {
            let n = count.to_string();
            let mut a: Vec<&[u8]> = vec![b"XREADGROUP", b"GROUP", g, consumer];
            if *count > 0 {
                a.extend([b"COUNT".as_slice(), n.as_bytes()]);
            }
            if *noack {
                a.push(b"NOACK");
            }
            a.extend([b"STREAMS".as_slice(), &keys[0], b">"]);
            ctx.propagate(&a);
        }
        Op::XRead { group: None, .. } => {}
    }
}

fn attempt_op(ctx: &mut Ctx, r: &Request, keys: &[Vec<u8>]) -> Result<Option<Reply>, Reply> {
    match &r.op {
        Op::Pop { left } => Ok(lists::mpop(ctx, keys, *left, 1)?.map(|(k, mut els)| {
            Reply::Array(vec![
                Reply::Bulk(k),
                Reply::Bulk(els.pop().unwrap_or_default()),
            ])
        })),
        Op::MPop { left, count } => {
            Ok(lists::mpop(ctx, keys, *left, *count)?.map(|found| lists::mpop_reply(Some(found))))
        }
        Op::Move {
            dst,
            from_left,
            to_left,
        } => Ok(lists::lmove_one(ctx, &keys[0], dst, *from_left, *to_left)?.map(Reply::Bulk)),
        Op::ZPop { max } => {
            for k in keys {
                if let Some(mut z) = super::zsets::zset(ctx, k)? {
                    let mut items = zsetops::pop(ctx, k, &mut z, *max, 1)?;
                    if let Some((m, s)) = items.pop() {
                        return Ok(Some(Reply::Array(vec![
                            Reply::Bulk(k.clone()),
                            Reply::Bulk(m),
                            Reply::Double(s),
                        ])));
                    }
                }
            }
            Ok(None)
        }
        Op::ZMPop { max, count } => zsetops::mpop(ctx, keys, *max, *count),
        Op::XRead { ids, count, group } => {
            super::streams::serve_parked(ctx, &keys[0], &r.keys, ids, *count, group.as_ref())
        }
    }
}

/// The handler every blocking command shares: the non-blocking attempt over all its keys;
/// nil when nothing is there (the dispatcher then parks the client, unless in `MULTI`).
pub fn run(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let r = parse(args)?;
    Ok(attempt(ctx, &r, &r.keys)?.unwrap_or(Reply::Nil))
}

/// The blocking commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("blpop", -3, [WRITE NOSCRIPT BLOCKING], [WRITE LIST SLOW BLOCKING], [], Keys::Custom(locked_keys, 1, -2, 1), "list", "2.0.0", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", Key(run)),
    cmd!("brpop", -3, [WRITE NOSCRIPT BLOCKING], [WRITE LIST SLOW BLOCKING], [], Keys::Custom(locked_keys, 1, -2, 1), "list", "2.0.0", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", Key(run)),
    cmd!("blmove", 6, [WRITE DENYOOM NOSCRIPT BLOCKING], [WRITE LIST SLOW BLOCKING], [], Keys::Custom(locked_keys, 1, 2, 1), "list", "6.2.0", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise.", Key(run)),
    cmd!("brpoplpush", 4, [WRITE DENYOOM NOSCRIPT BLOCKING], [WRITE LIST SLOW BLOCKING], [], Keys::Custom(locked_keys, 1, 2, 1), "list", "2.2.0", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise.", Key(run)),
    cmd!("blmpop", -5, [WRITE BLOCKING MOVABLEKEYS], [WRITE LIST SLOW BLOCKING], [], Keys::Custom(locked_keys, 0, 0, 0), "list", "7.0.0", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise.", Key(run)),
    cmd!("bzpopmin", -3, [WRITE NOSCRIPT BLOCKING FAST], [WRITE SORTEDSET FAST BLOCKING], [], Keys::Custom(locked_keys, 1, -2, 1), "sorted-set", "5.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise.", Key(run)),
    cmd!("bzpopmax", -3, [WRITE NOSCRIPT BLOCKING FAST], [WRITE SORTEDSET FAST BLOCKING], [], Keys::Custom(locked_keys, 1, -2, 1), "sorted-set", "5.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.", Key(run)),
    cmd!("bzmpop", -5, [WRITE BLOCKING MOVABLEKEYS], [WRITE SORTEDSET SLOW BLOCKING], [], Keys::Custom(locked_keys, 0, 0, 0), "sorted-set", "7.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise.", Key(run)),
];

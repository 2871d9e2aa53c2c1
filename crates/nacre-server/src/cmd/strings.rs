//! String and bitmap commands.

use nacre_resp::Reply;

use super::args::{int, is, lower, not_integer, parse_i64_strict};
use super::registry::{cmd, Command, Keys::Range as KR, Run::Key};
use super::{err, ok, syntax, wrongtype, CmdResult, Ctx};
use crate::bits::{self, BitOp, Overflow};
use crate::store::encoding::{Hint, Kind};
use crate::types::string;

/// Longest string (Redis: 512 MiB).
pub const MAX_STRING: usize = 512 << 20;

fn too_big() -> Reply {
    err("string exceeds maximum allowed size (proto-max-bulk-len)")
}

/// The string at `key`: `None` if missing, WRONGTYPE if another type.
fn string(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    Ok(string::get(ctx.txn, ctx.db, key)?)
}

/// Stores `v` at `key`, with expiry time `expire_at` (0: none) or keeping its expiry.
fn put(ctx: &mut Ctx, key: &[u8], v: Vec<u8>, expire_at: Option<u64>) -> Result<(), Reply> {
    put_hinted(ctx, key, v, expire_at, Hint::Auto)
}

/// Stores `v` at `key` as a string changed in place (`OBJECT ENCODING` says `raw`), keeping
/// its expiry.
fn put_raw(ctx: &mut Ctx, key: &[u8], v: Vec<u8>) -> Result<(), Reply> {
    put_hinted(ctx, key, v, None, Hint::Raw)
}

fn put_hinted(
    ctx: &mut Ctx,
    key: &[u8],
    v: Vec<u8>,
    expire_at: Option<u64>,
    hint: Hint,
) -> Result<(), Reply> {
    Ok(string::put(ctx.txn, ctx.db, key, v, expire_at, hint)?)
}

/// `GET key`.
pub fn get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(string(ctx, &args[1])?.map_or(Reply::Nil, Reply::Bulk))
}

/// Parses `EX|PX|EXAT|PXAT value` at `args[i]`: the expiry time, if the word is one of them.
fn expiry_option(args: &[Vec<u8>], i: usize, now: u64, cmd: &str) -> Result<Option<u64>, Reply> {
    let (unit, abs) = match lower(&args[i]).as_str() {
        "ex" => (1000, false),
        "px" => (1, false),
        "exat" => (1000, true),
        "pxat" => (1, true),
        _ => return Ok(None),
    };
    let Some(v) = args.get(i + 1) else {
        return Err(syntax());
    };
    super::args::expire_time(v, unit, abs, now, cmd).map(Some)
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]`.
pub fn set(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.txn.now();
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    let mut exp: Option<u64> = None;
    // Redis lets an option repeat, but not two expiry kinds together.
    let mut exp_kind: Option<String> = None;
    let mut i = 3;
    while i < args.len() {
        let a = lower(&args[i]);
        match a.as_str() {
            "nx" if !xx => nx = true,
            "xx" if !nx => xx = true,
            "get" => get = true,
            "keepttl" if exp_kind.is_none() => keepttl = true,
            "ex" | "px" | "exat" | "pxat"
                if exp_kind.as_deref().is_none_or(|k| k == a) && !keepttl && i + 1 < args.len() =>
            {
                exp = expiry_option(args, i, now, "set")?;
                exp_kind = Some(a);
                i += 1;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    let db = ctx.db;
    let key = &args[1];
    // The old value is copied only for GET.
    let (exists, old) = match ctx.txn.get(db, key)? {
        Some(m) if m.kind == Kind::String => (true, get.then(|| m.payload.clone())),
        Some(_) if get => return Err(wrongtype()),
        Some(_) => (true, None),
        None => (false, None),
    };
    let reply_old = || -> Reply {
        if get {
            old.clone().map_or(Reply::Nil, Reply::Bulk)
        } else {
            Reply::Nil
        }
    };
    if (nx && exists) || (xx && !exists) {
        return Ok(reply_old());
    }
    let expire_at = if keepttl {
        None
    } else {
        Some(exp.unwrap_or(0))
    };
    put(ctx, key, args[2].clone(), expire_at)?;
    ctx.notify(key, "set");
    if exp_kind.is_some() {
        ctx.notify(key, "expire");
    }
    // As Redis: a relative expiry reaches replicas as an absolute one.
    if let (Some(at), true) = (exp, exp_kind.as_deref() != Some("pxat")) {
        ctx.propagate(&[b"SET", key, &args[2], b"PXAT", at.to_string().as_bytes()]);
    }
    Ok(if get { reply_old() } else { ok() })
}

/// `SETNX key value`.
pub fn setnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx.txn.get(ctx.db, &args[1])?.is_some() {
        return Ok(Reply::Integer(0));
    }
    put(ctx, &args[1], args[2].clone(), Some(0))?;
    ctx.notify(&args[1], "set");
    Ok(Reply::Integer(1))
}

fn setex_generic(ctx: &mut Ctx, args: &[Vec<u8>], unit: i64, name: &str) -> CmdResult {
    let at = super::args::expire_time(&args[2], unit, false, ctx.txn.now(), name)?;
    put(ctx, &args[1], args[3].clone(), Some(at))?;
    ctx.notify(&args[1], "set");
    ctx.notify(&args[1], "expire");
    ctx.propagate(&[
        b"SET",
        &args[1],
        &args[3],
        b"PXAT",
        at.to_string().as_bytes(),
    ]);
    Ok(ok())
}

/// `SETEX key seconds value`.
pub fn setex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setex_generic(ctx, args, 1000, "setex")
}

/// `PSETEX key ms value`.
pub fn psetex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    setex_generic(ctx, args, 1, "psetex")
}

/// `MGET key...`.
pub fn mget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let db = ctx.db;
    let mut out = Vec::with_capacity(args.len() - 1);
    for k in &args[1..] {
        out.push(match ctx.txn.get(db, k)? {
            Some(m) if m.kind == Kind::String => Reply::Bulk(m.payload.clone()),
            _ => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// `MSET key value [key value ...]`.
pub fn mset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    for kv in args[1..].chunks(2) {
        put(ctx, &kv[0], kv[1].clone(), Some(0))?;
        ctx.notify(&kv[0], "set");
    }
    Ok(ok())
}

/// `MSETNX key value [key value ...]`.
pub fn msetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    for kv in args[1..].chunks(2) {
        if ctx.txn.get(ctx.db, &kv[0])?.is_some() {
            return Ok(Reply::Integer(0));
        }
    }
    mset(ctx, args)?;
    Ok(Reply::Integer(1))
}

/// `GETSET key value`.
pub fn getset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let old = string(ctx, &args[1])?;
    put(ctx, &args[1], args[2].clone(), Some(0))?;
    ctx.notify(&args[1], "set");
    Ok(old.map_or(Reply::Nil, Reply::Bulk))
}

/// `GETDEL key`.
pub fn getdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let old = string(ctx, &args[1])?;
    if old.is_some() {
        ctx.txn.set(ctx.db, &args[1], None)?;
        ctx.notify(&args[1], "del");
    }
    Ok(old.map_or(Reply::Nil, Reply::Bulk))
}

/// `GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]`.
pub fn getex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.txn.now();
    let mut change: Option<u64> = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "persist") && change.is_none() {
            change = Some(0);
            i += 1;
        } else if change.is_none() && i + 1 < args.len() {
            match expiry_option(args, i, now, "getex")? {
                Some(at) => change = Some(at),
                None => return Err(syntax()),
            }
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    let Some(v) = string(ctx, &args[1])? else {
        return Ok(Reply::Nil);
    };
    if let Some(at) = change {
        if let Some(m) = ctx.txn.get_mut(ctx.db, &args[1])? {
            m.expire_at = at;
        }
        ctx.notify(&args[1], if at == 0 { "persist" } else { "expire" });
        if at == 0 {
            ctx.propagate(&[b"PERSIST", &args[1]]);
        } else {
            ctx.propagate(&[b"PEXPIREAT", &args[1], at.to_string().as_bytes()]);
        }
    }
    Ok(Reply::Bulk(v))
}

fn incr_generic(ctx: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    let cur = match string(ctx, key)? {
        None => 0,
        Some(v) => parse_i64_strict(&v).ok_or_else(not_integer)?,
    };
    let new = cur
        .checked_add(by)
        .ok_or_else(|| err("increment or decrement would overflow"))?;
    put(ctx, key, new.to_string().into_bytes(), None)?;
    ctx.notify(key, "incrby");
    Ok(Reply::Integer(new))
}

/// `INCR key`.
pub fn incr(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    incr_generic(ctx, &args[1], 1)
}

/// `DECR key`.
pub fn decr(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    incr_generic(ctx, &args[1], -1)
}

/// `INCRBY key n`.
pub fn incrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = int(&args[2])?;
    incr_generic(ctx, &args[1], by)
}

/// `DECRBY key n`.
pub fn decrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = int(&args[2])?;
    let neg = by
        .checked_neg()
        .ok_or_else(|| err("decrement would overflow"))?;
    incr_generic(ctx, &args[1], neg)
}

/// `INCRBYFLOAT key n`: in C `long double` arithmetic, printed as Redis prints it.
pub fn incrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let by = super::args::long_double(&args[2]).ok_or_else(super::args::not_float)?;
    let cur = match string(ctx, &args[1])? {
        None => crate::longdouble::LongDouble::ZERO,
        Some(v) => super::args::long_double(&v).ok_or_else(super::args::not_float)?,
    };
    let new = cur.add(by);
    if new.is_nan() || new.is_infinite() {
        return Err(err("increment would produce NaN or Infinity"));
    }
    let s = new.to_human().into_bytes();
    put_hinted(ctx, &args[1], s.clone(), None, Hint::Emb)?;
    ctx.notify(&args[1], "incrbyfloat");
    // As Redis: replicas set the value (float arithmetic may differ between machines).
    ctx.propagate(&[b"SET", &args[1], &s, b"KEEPTTL"]);
    Ok(Reply::Bulk(s))
}

/// `APPEND key value`.
pub fn append(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let old = string(ctx, &args[1])?;
    let existed = old.is_some();
    let mut v = old.unwrap_or_default();
    if v.len() + args[2].len() > MAX_STRING {
        return Err(too_big());
    }
    v.extend_from_slice(&args[2]);
    let n = v.len();
    if existed {
        put_raw(ctx, &args[1], v)?;
    } else {
        put(ctx, &args[1], v, None)?;
    }
    ctx.notify(&args[1], "append");
    Ok(Reply::Integer(n as i64))
}

/// `STRLEN key`.
pub fn strlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(
        string(ctx, &args[1])?.map_or(0, |v| v.len() as i64),
    ))
}

/// `GETRANGE key start end` (and `SUBSTR`).
pub fn getrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let start = int(&args[2])?;
    let end = int(&args[3])?;
    let v = string(ctx, &args[1])?.unwrap_or_default();
    if start < 0 && end < 0 && start > end {
        return Ok(Reply::Bulk(Vec::new()));
    }
    // As Redis: negative indexes from the end, then both clamped at 0, the end at the last
    // byte.
    let len = v.len() as i64;
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let mut e = if end < 0 { (len + end).max(0) } else { end };
    if e >= len {
        e = len - 1;
    }
    if s > e || len == 0 {
        return Ok(Reply::Bulk(Vec::new()));
    }
    Ok(Reply::Bulk(v[s as usize..=e as usize].to_vec()))
}

/// `SETRANGE key offset value`.
pub fn setrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let off = int(&args[2])?;
    if off < 0 {
        return Err(err("offset is out of range"));
    }
    let cur = string(ctx, &args[1])?;
    let val = &args[3];
    if val.is_empty() {
        return Ok(Reply::Integer(cur.map_or(0, |v| v.len() as i64)));
    }
    let off = off as usize;
    if off.saturating_add(val.len()) > MAX_STRING {
        return Err(too_big());
    }
    let mut v = cur.unwrap_or_default();
    if v.len() < off + val.len() {
        v.resize(off + val.len(), 0);
    }
    v[off..off + val.len()].copy_from_slice(val);
    let n = v.len();
    put_raw(ctx, &args[1], v)?;
    ctx.notify(&args[1], "setrange");
    Ok(Reply::Integer(n as i64))
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`.
pub fn lcs(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut len, mut idx, mut withlen, mut minlen) = (false, false, false, 0i64);
    let mut i = 3;
    while i < args.len() {
        match lower(&args[i]).as_str() {
            "len" => len = true,
            "idx" => idx = true,
            "withmatchlen" => withlen = true,
            "minmatchlen" if i + 1 < args.len() => {
                minlen = int(&args[i + 1])?.max(0);
                i += 1;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    let db = ctx.db;
    let mut get = |k: &[u8]| -> Result<Vec<u8>, Reply> {
        match ctx.txn.get(db, k)? {
            None => Ok(Vec::new()),
            Some(m) if m.kind == Kind::String => Ok(m.payload.clone()),
            Some(_) => Err(err("The specified keys must contain string values")),
        }
    };
    let a = get(&args[1])?;
    let b = get(&args[2])?;
    if len && idx {
        return Err(err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    if crate::lcs::lcs_table_too_big(a.len(), b.len()) {
        return Err(err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let r = crate::lcs::lcs(&a, &b);
    if len {
        return Ok(Reply::Integer(r.string.len() as i64));
    }
    if !idx {
        return Ok(Reply::Bulk(r.string));
    }
    let pair = |(s, e): (usize, usize)| {
        Reply::Array(vec![Reply::Integer(s as i64), Reply::Integer(e as i64)])
    };
    let matches: Vec<Reply> = r
        .matches
        .iter()
        .filter(|m| m.len as i64 >= minlen)
        .map(|m| {
            let mut v = vec![pair(m.a), pair(m.b)];
            if withlen {
                v.push(Reply::Integer(m.len as i64));
            }
            Reply::Array(v)
        })
        .collect();
    let s = |x: &str| Reply::Bulk(x.as_bytes().to_vec());
    Ok(Reply::Map(vec![
        (s("matches"), Reply::Array(matches)),
        (s("len"), Reply::Integer(r.string.len() as i64)),
    ]))
}

fn bit_error(e: bits::BitError) -> Reply {
    Reply::Error(e.0.to_string())
}

/// `SETBIT key offset value`.
pub fn setbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let off = bits::parse_bit_offset(&args[2], false, 0).map_err(bit_error)?;
    let bit = match args[3].as_slice() {
        b"0" => false,
        b"1" => true,
        _ => return Err(err("bit is not an integer or out of range")),
    };
    let mut v = string(ctx, &args[1])?.unwrap_or_default();
    let old = bits::setbit(&mut v, off, bit);
    put_raw(ctx, &args[1], v)?;
    ctx.notify(&args[1], "setbit");
    Ok(Reply::Integer(old.into()))
}

/// `GETBIT key offset`.
pub fn getbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let off = bits::parse_bit_offset(&args[2], false, 0).map_err(bit_error)?;
    let v = string(ctx, &args[1])?.unwrap_or_default();
    Ok(Reply::Integer(bits::getbit(&v, off).into()))
}

fn unit(args: &[Vec<u8>], i: usize) -> Result<bool, Reply> {
    match args.get(i) {
        None => Ok(false),
        Some(a) if is(a, "byte") => Ok(false),
        Some(a) if is(a, "bit") => Ok(true),
        Some(_) => Err(syntax()),
    }
}

/// `BITCOUNT key [start end [BYTE|BIT]]`.
pub fn bitcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    // As Redis: a missing key is 0 whatever the other arguments.
    let Some(v) = string(ctx, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    let range = match args.len() {
        2 => None,
        4 | 5 => Some((int(&args[2])?, int(&args[3])?, unit(args, 4)?)),
        _ => return Err(syntax()),
    };
    Ok(Reply::Integer(bits::bitcount(&v, range) as i64))
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`.
pub fn bitpos(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let bit = match int(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(err("The bit argument must be 1 or 0.")),
    };
    if args.len() > 6 {
        return Err(syntax());
    }
    let start = args.get(3).map(|a| int(a)).transpose()?;
    let end = args.get(4).map(|a| int(a)).transpose()?;
    let is_bit = unit(args, 5)?;
    let Some(v) = string(ctx, &args[1])? else {
        return Ok(Reply::Integer(if bit { -1 } else { 0 }));
    };
    Ok(Reply::Integer(bits::bitpos(&v, bit, start, end, is_bit)))
}

/// `BITOP AND|OR|XOR|NOT destkey key...`.
pub fn bitop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let op = match lower(&args[1]).as_str() {
        "and" => BitOp::And,
        "or" => BitOp::Or,
        "xor" => BitOp::Xor,
        "not" => BitOp::Not,
        _ => return Err(syntax()),
    };
    if matches!(op, BitOp::Not) && args.len() != 4 {
        return Err(err("BITOP NOT must be called with a single source key."));
    }
    let mut srcs = Vec::new();
    for k in &args[3..] {
        srcs.push(string(ctx, k)?.unwrap_or_default());
    }
    let refs: Vec<&[u8]> = srcs.iter().map(Vec::as_slice).collect();
    let out = bits::bitop(op, &refs);
    let n = out.len();
    if n == 0 {
        ctx.delete(&args[2])?;
    } else {
        put_hinted(ctx, &args[2], out, Some(0), Hint::Raw)?;
        ctx.notify(&args[2], "set");
    }
    Ok(Reply::Integer(n as i64))
}

fn bitfield_generic(ctx: &mut Ctx, args: &[Vec<u8>], readonly: bool) -> CmdResult {
    enum Op {
        Get(bits::FieldType, u64),
        Set(bits::FieldType, u64, i64, Overflow),
        Incr(bits::FieldType, u64, i64, Overflow),
    }
    let mut ops = Vec::new();
    let mut ov = Overflow::Wrap;
    let mut i = 2;
    let mut writes = false;
    while i < args.len() {
        let left = args.len() - i - 1;
        let w = lower(&args[i]);
        match w.as_str() {
            "get" if left >= 2 => {
                let t = bits::parse_field_type(&args[i + 1]).map_err(bit_error)?;
                let off = bits::parse_bit_offset(&args[i + 2], true, t.bits).map_err(bit_error)?;
                ops.push(Op::Get(t, off));
                i += 3;
            }
            "set" | "incrby" if left >= 3 => {
                let t = bits::parse_field_type(&args[i + 1]).map_err(bit_error)?;
                let off = bits::parse_bit_offset(&args[i + 2], true, t.bits).map_err(bit_error)?;
                let v = int(&args[i + 3])?;
                ops.push(if w == "set" {
                    Op::Set(t, off, v, ov)
                } else {
                    Op::Incr(t, off, v, ov)
                });
                writes = true;
                i += 4;
            }
            "overflow" if left >= 1 => {
                ov = match lower(&args[i + 1]).as_str() {
                    "wrap" => Overflow::Wrap,
                    "sat" => Overflow::Sat,
                    "fail" => Overflow::Fail,
                    _ => return Err(err("Invalid OVERFLOW type specified")),
                };
                i += 2;
            }
            _ => return Err(syntax()),
        }
    }
    if readonly && writes {
        return Err(err("BITFIELD_RO only supports the GET subcommand"));
    }
    let existing = string(ctx, &args[1])?;
    let mut v = existing.unwrap_or_default();
    if writes {
        // As Redis: the key is created and grown to every written field first.
        for op in &ops {
            if let Op::Set(t, off, ..) | Op::Incr(t, off, ..) = op {
                bits::ensure_bits(&mut v, *off, t.bits);
            }
        }
    }
    let mut out = Vec::new();
    for op in ops {
        out.push(match op {
            Op::Get(t, off) => Reply::Integer(bits::get_field(&v, off, t)),
            Op::Set(t, off, val, ov) => bits::set_field_checked(&mut v, off, t, val, ov)
                .map_or(Reply::Nil, |(old, _)| Reply::Integer(old)),
            Op::Incr(t, off, by, ov) => {
                bits::incr_field(&mut v, off, t, by, ov).map_or(Reply::Nil, Reply::Integer)
            }
        });
    }
    if writes {
        put_raw(ctx, &args[1], v)?;
        ctx.notify(&args[1], "setbit");
    }
    Ok(Reply::Array(out))
}

/// `BITFIELD key [GET t o] [SET t o v] [INCRBY t o n] [OVERFLOW WRAP|SAT|FAIL]...`.
pub fn bitfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

/// `BITFIELD_RO key [GET t o]...`.
pub fn bitfield_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

/// The string and bitmap commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("get", 2, [READONLY FAST], [READ STRING FAST], [], KR(1, 1, 1), "string", "1.0.0", "Returns the string value of a key.", Key(get)),
    cmd!("set", -3, [WRITE DENYOOM], [WRITE STRING SLOW], [], KR(1, 1, 1), "string", "1.0.0", "Sets the string value of a key, ignoring its type.", Key(set)),
    cmd!("setnx", 3, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "1.0.0", "Set the string value of a key only when the key doesn't exist.", Key(setnx)),
    cmd!("setex", 4, [WRITE DENYOOM], [WRITE STRING SLOW], [], KR(1, 1, 1), "string", "2.0.0", "Sets the string value and expiration time of a key.", Key(setex)),
    cmd!("psetex", 4, [WRITE DENYOOM], [WRITE STRING SLOW], [], KR(1, 1, 1), "string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key.", Key(psetex)),
    cmd!("mget", -2, [READONLY FAST], [READ STRING FAST], [], KR(1, -1, 1), "string", "1.0.0", "Atomically returns the string values of one or more keys.", Key(mget)),
    cmd!("mset", -3, [WRITE DENYOOM], [WRITE STRING SLOW], [], KR(1, -1, 2), "string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.", Key(mset)),
    cmd!("msetnx", -3, [WRITE DENYOOM], [WRITE STRING SLOW], [], KR(1, -1, 2), "string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.", Key(msetnx)),
    cmd!("getset", 3, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "1.0.0", "Returns the previous string value of a key after setting it to a new value.", Key(getset)),
    cmd!("getdel", 2, [WRITE FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "6.2.0", "Returns the string value of a key after deleting the key.", Key(getdel)),
    cmd!("getex", -2, [WRITE FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "6.2.0", "Returns the string value of a key after setting its expiration time.", Key(getex)),
    cmd!("incr", 2, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "1.0.0", "Increments the integer value of a key by one.", Key(incr)),
    cmd!("decr", 2, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "1.0.0", "Decrements the integer value of a key by one.", Key(decr)),
    cmd!("incrby", 3, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "1.0.0", "Increments the integer value of a key by a number.", Key(incrby)),
    cmd!("decrby", 3, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "1.0.0", "Decrements a number from the integer value of a key.", Key(decrby)),
    cmd!("incrbyfloat", 3, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "2.6.0", "Increment the floating point value of a key by a number.", Key(incrbyfloat)),
    cmd!("append", 3, [WRITE DENYOOM FAST], [WRITE STRING FAST], [], KR(1, 1, 1), "string", "2.0.0", "Appends a string to the value of a key.", Key(append)),
    cmd!("strlen", 2, [READONLY FAST], [READ STRING FAST], [], KR(1, 1, 1), "string", "2.2.0", "Returns the length of a string value.", Key(strlen)),
    cmd!("getrange", 4, [READONLY], [READ STRING SLOW], [], KR(1, 1, 1), "string", "2.4.0", "Returns a substring of the string stored at a key.", Key(getrange)),
    cmd!("substr", 4, [READONLY], [READ STRING SLOW], [], KR(1, 1, 1), "string", "1.0.0", "Returns a substring from a string value.", Key(getrange)),
    cmd!("setrange", 4, [WRITE DENYOOM], [WRITE STRING SLOW], [], KR(1, 1, 1), "string", "2.2.0", "Overwrites a part of a string value with another by an offset.", Key(setrange)),
    cmd!("lcs", -3, [READONLY], [READ STRING SLOW], [], KR(1, 2, 1), "string", "7.0.0", "Finds the longest common substring.", Key(lcs)),
    cmd!("setbit", 4, [WRITE DENYOOM], [WRITE BITMAP SLOW], [], KR(1, 1, 1), "bitmap", "2.2.0", "Sets or clears the bit at offset of the string value.", Key(setbit)),
    cmd!("getbit", 3, [READONLY FAST], [READ BITMAP FAST], [], KR(1, 1, 1), "bitmap", "2.2.0", "Returns a bit value by offset.", Key(getbit)),
    cmd!("bitcount", -2, [READONLY], [READ BITMAP SLOW], [], KR(1, 1, 1), "bitmap", "2.6.0", "Counts the number of set bits (population counting) in a string.", Key(bitcount)),
    cmd!("bitpos", -3, [READONLY], [READ BITMAP SLOW], [], KR(1, 1, 1), "bitmap", "2.8.7", "Finds the first set (1) or clear (0) bit in a string.", Key(bitpos)),
    cmd!("bitop", -4, [WRITE DENYOOM], [WRITE BITMAP SLOW], [], KR(2, -1, 1), "bitmap", "2.6.0", "Performs bitwise operations on multiple strings, and stores the result.", Key(bitop)),
    cmd!("bitfield", -2, [WRITE DENYOOM], [WRITE BITMAP SLOW], [], KR(1, 1, 1), "bitmap", "3.2.0", "Performs arbitrary bitfield integer operations on strings.", Key(bitfield)),
    cmd!("bitfield_ro", -2, [READONLY FAST], [READ BITMAP FAST], [], KR(1, 1, 1), "bitmap", "6.0.0", "Performs arbitrary read-only bitfield integer operations on strings.", Key(bitfield_ro)),
];

//! HyperLogLog commands: PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST, with arguments, events
//! and replies around `types/hll.rs`. A HyperLogLog is a string holding Redis's exact layout.

use nacre_resp::Reply;

use super::registry::{cmd, Command, Keys::None as NK, Keys::Range as KR, Run::Conn, Run::Key};
use super::{err, ok, CmdResult, Ctx, Outcome};
use crate::client::Client;
use crate::shared::Shared;
use crate::store::encoding::Hint;
use crate::types::hll::{self, HllError};
use crate::types::string;

impl From<HllError> for Reply {
    fn from(e: HllError) -> Reply {
        Reply::Error(e.to_string())
    }
}

/// The HyperLogLog at `key` (`None` if missing; WRONGTYPE for another type or a string that
/// is not one).
fn get(ctx: &mut Ctx, key: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    match string::get(ctx.txn, ctx.db, key)? {
        None => Ok(None),
        Some(v) => {
            hll::check(&v)?;
            Ok(Some(v))
        }
    }
}

/// Stores `v` at `key`, keeping its expiry (a HyperLogLog is a string Redis calls `raw`).
fn put(ctx: &mut Ctx, key: &[u8], v: Vec<u8>) -> Result<(), Reply> {
    Ok(string::put(ctx.txn, ctx.db, key, v, None, Hint::Raw)?)
}

/// `hll-sparse-max-bytes`.
fn sparse_max(shared: &Shared) -> usize {
    shared.config.read().params.uint("hll-sparse-max-bytes") as usize
}

/// `PFADD key [element ...]`: 1 if the key was created or a register changed.
pub fn pfadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[1];
    let (mut v, mut updated) = match get(ctx, key)? {
        Some(v) => (v, false),
        None => (hll::empty(), true),
    };
    let max = sparse_max(ctx.shared);
    for e in &args[2..] {
        updated |= hll::add(&mut v, e, max)?;
    }
    if updated {
        hll::invalidate(&mut v);
        put(ctx, key, v)?;
        ctx.notify(key, "pfadd");
    }
    Ok(Reply::Integer(updated.into()))
}

/// `PFCOUNT key [key ...]`: one key's estimate (cached in the value, as Redis caches it), or
/// the estimate of the union of several.
pub fn pfcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 2 {
        let mut max = vec![0u8; hll::REGISTERS];
        for k in &args[1..] {
            if let Some(v) = get(ctx, k)? {
                hll::merge_into(&mut max, &v)?;
            }
        }
        return Ok(Reply::Integer(hll::count(&max) as i64));
    }
    let key = &args[1];
    let Some(mut v) = get(ctx, key)? else {
        return Ok(Reply::Integer(0));
    };
    if let Some(c) = hll::cached(&v) {
        return Ok(Reply::Integer(c as i64));
    }
    let c = hll::count(&hll::registers(&v)?);
    hll::cache(&mut v, c);
    put(ctx, key, v)?;
    Ok(Reply::Integer(c as i64))
}

/// `PFMERGE destkey [sourcekey ...]`: the destination (a source too) gets every register's
/// largest value; dense if any source is.
pub fn pfmerge(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut max = vec![0u8; hll::REGISTERS];
    let mut dense = false;
    for k in &args[1..] {
        if let Some(v) = get(ctx, k)? {
            dense |= hll::is_dense(&v);
            hll::merge_into(&mut max, &v)?;
        }
    }
    let key = &args[1];
    let mut v = get(ctx, key)?.unwrap_or_else(hll::empty);
    if dense {
        v = hll::to_dense(&v)?;
    }
    let limit = sparse_max(ctx.shared);
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            hll::set(&mut v, i, m, limit)?;
        }
    }
    hll::invalidate(&mut v);
    put(ctx, key, v)?;
    ctx.notify(key, "pfadd");
    Ok(ok())
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`.
pub fn pfdebug(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let key = &args[2];
    let Some(v) = get(ctx, key)? else {
        return Err(err("The specified key does not exist"));
    };
    let sub = super::args::lower(&args[1]);
    match sub.as_str() {
        "getreg" | "todense" => {
            let was_sparse = !hll::is_dense(&v);
            let d = hll::to_dense(&v)?;
            let regs = hll::registers(&d)?;
            if was_sparse {
                put(ctx, key, d)?;
            }
            Ok(if sub == "getreg" {
                Reply::Array(regs.into_iter().map(|r| Reply::Integer(r.into())).collect())
            } else {
                Reply::Integer(was_sparse.into())
            })
        }
        "decode" if hll::is_dense(&v) => Err(err("HLL encoding is not sparse")),
        "decode" => Ok(Reply::Simple(hll::decode(&v)?)),
        "encoding" => Ok(Reply::Simple(
            if hll::is_dense(&v) { "dense" } else { "sparse" }.into(),
        )),
        _ => Err(super::err_bytes(
            format!(
                "Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(&args[1])
            )
            .as_bytes(),
        )),
    }
}

/// `PFSELFTEST`: the internal checks Redis runs (`hll::selftest`), on a blocking thread (they
/// take a few seconds); `OK`, or the failed check.
pub fn pfselftest(shared: &Shared, _: &mut Client, _: &[Vec<u8>]) -> Outcome {
    let max = sparse_max(shared);
    Outcome::Blocking(Box::new(move || {
        match hll::selftest(max, crate::shared::random_u64) {
            Ok(()) => ok(),
            Err(e) => Reply::Error(e),
        }
    }))
}

/// The HyperLogLog commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("pfadd", -2, [WRITE DENYOOM FAST], [WRITE HYPERLOGLOG FAST], [], KR(1, 1, 1), "hyperloglog", "2.8.9", "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.", Key(pfadd)),
    cmd!("pfcount", -2, [READONLY], [READ HYPERLOGLOG SLOW], [], KR(1, -1, 1), "hyperloglog", "2.8.9", "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).", Key(pfcount)),
    cmd!("pfmerge", -2, [WRITE DENYOOM], [WRITE HYPERLOGLOG SLOW], [], KR(1, -1, 1), "hyperloglog", "2.8.9", "Merges one or more HyperLogLog values into a single key.", Key(pfmerge)),
    cmd!("pfselftest", 1, [ADMIN], [HYPERLOGLOG ADMIN SLOW DANGEROUS], [], NK, "hyperloglog", "2.8.9", "An internal command for testing HyperLogLog values.", Conn(pfselftest)),
    cmd!("pfdebug", 3, [WRITE DENYOOM ADMIN], [WRITE HYPERLOGLOG ADMIN SLOW DANGEROUS], [], KR(2, 2, 1), "hyperloglog", "2.8.9", "Internal commands for debugging HyperLogLog values.", Key(pfdebug)),
];

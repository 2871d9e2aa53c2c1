//! Geo commands on sorted sets: GEOADD GEOPOS GEODIST GEOHASH, with arguments, events and
//! replies around `types/geo.rs` and `types/zset.rs`. (The search commands, GEOSEARCH and
//! GEORADIUS and their relatives, are not built yet.)

use nacre_resp::Reply;

use super::args::is;
use super::registry::{cmd, Command, Keys::Range as KR, Run::Key};
use super::{err, syntax, CmdResult, Ctx};
use crate::longdouble::LongDouble;
use crate::types::{geo, zset};

/// A coordinate argument, as Redis reads one (`strtod`, no NaN).
fn coordinate(b: &[u8]) -> Result<f64, Reply> {
    crate::num::parse_f64(b)
        .or_else(|| {
            let s = std::str::from_utf8(b).ok()?.to_ascii_lowercase();
            match s.as_str() {
                "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
                "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
                _ => None,
            }
        })
        .ok_or_else(|| err("value is not a valid float"))
}

/// A coordinate as Redis prints one (`%.17Lf`, trailing zeros removed): text in RESP2, a
/// double in RESP3.
fn coord_reply(ctx: &Ctx, x: f64) -> Reply {
    if ctx.resp == 3 {
        Reply::Double(x)
    } else {
        Reply::Bulk(LongDouble::from_f64(x).to_human().into_bytes())
    }
}

/// The score of `member` in the sorted set at `key`, if both exist (WRONGTYPE for another
/// type).
fn score(ctx: &mut Ctx, key: &[u8], member: &[u8]) -> Result<Option<f64>, Reply> {
    let Some(z) = zset::get(ctx.txn, ctx.db, key)? else {
        return Ok(None);
    };
    Ok(zset::score(ctx.txn, ctx.db, key, &z, member)?)
}

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`: as `ZADD` with each position's
/// score (its reply and its `zadd` event).
pub fn geoadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut at = 2;
    while at < args.len() {
        if is(&args[at], "nx") {
            nx = true;
        } else if is(&args[at], "xx") {
            xx = true;
        } else if is(&args[at], "ch") {
            ch = true;
        } else {
            break;
        }
        at += 1;
    }
    let rest = &args[at..];
    if rest.is_empty() || rest.len() % 3 != 0 || (nx && xx) {
        return Err(syntax());
    }
    // Every position is checked before anything is written.
    let mut items = Vec::with_capacity(rest.len() / 3);
    for t in rest.chunks(3) {
        let (lon, lat) = (coordinate(&t[0])?, coordinate(&t[1])?);
        let s = geo::encode(lon, lat)
            .ok_or_else(|| err(format!("invalid longitude,latitude pair {lon:.6},{lat:.6}")))?;
        items.push((s, &t[2]));
    }
    let key = &args[1];
    let mut z = match zset::get(ctx.txn, ctx.db, key)? {
        Some(z) => z,
        None if xx => return Ok(Reply::Integer(0)),
        None => zset::get_or_new(ctx.txn, ctx.db, key)?,
    };
    let (mut added, mut updated) = (0, 0);
    for (s, member) in items {
        match zset::score(ctx.txn, ctx.db, key, &z, member)? {
            Some(_) if nx => {}
            Some(old) => {
                if old != s {
                    zset::set_score(ctx.txn, ctx.db, key, &mut z, member, Some(old), Some(s))?;
                    updated += 1;
                }
            }
            None if xx => {}
            None => {
                zset::set_score(ctx.txn, ctx.db, key, &mut z, member, None, Some(s))?;
                added += 1;
            }
        }
    }
    zset::save(ctx.txn, ctx.db, key, &z)?;
    if added + updated > 0 {
        ctx.notify(key, "zadd");
    }
    Ok(Reply::Integer(if ch { added + updated } else { added }))
}

/// `GEOPOS key member [member ...]`: each member's position, or a null array.
pub fn geopos(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        out.push(match score(ctx, &args[1], m)? {
            Some(s) => {
                let (lon, lat) = geo::decode(s);
                Reply::Array(vec![coord_reply(ctx, lon), coord_reply(ctx, lat)])
            }
            None => Reply::NilArray,
        });
    }
    Ok(Reply::Array(out))
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`: the distance, to four decimals.
pub fn geodist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let per_unit = match args.len() {
        4 => 1.0,
        5 => geo::unit(&args[4])
            .ok_or_else(|| err("unsupported unit provided. please use M, KM, FT, MI"))?,
        _ => return Err(syntax()),
    };
    let (Some(a), Some(b)) = (
        score(ctx, &args[1], &args[2])?,
        score(ctx, &args[1], &args[3])?,
    ) else {
        return Ok(Reply::Nil);
    };
    let ((x1, y1), (x2, y2)) = (geo::decode(a), geo::decode(b));
    let d = geo::distance(x1, y1, x2, y2) / per_unit;
    Ok(Reply::Bulk(format!("{d:.4}").into_bytes()))
}

/// `GEOHASH key member [member ...]`: each member's 11-character geohash, or nil.
pub fn geohash(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut out = Vec::with_capacity(args.len() - 2);
    for m in &args[2..] {
        out.push(match score(ctx, &args[1], m)? {
            Some(s) => Reply::Bulk(geo::geohash_string(s).into_bytes()),
            None => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// The geo commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("geoadd", -5, [WRITE DENYOOM], [WRITE GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", Key(geoadd)),
    cmd!("geopos", -2, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Returns the longitude and latitude of members from a geospatial index.", Key(geopos)),
    cmd!("geodist", -4, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Returns the distance between two members of a geospatial index.", Key(geodist)),
    cmd!("geohash", -2, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Returns members from a geospatial index as geohash strings.", Key(geohash)),
];

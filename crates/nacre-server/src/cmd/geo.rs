//! Geo commands on sorted sets: GEOADD GEOPOS GEODIST GEOHASH and the searches (GEOSEARCH,
//! GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their `_RO` forms), with arguments,
//! events and replies around `types/geo.rs` and `types/zset.rs`. A search reads the same
//! geohash cells Redis reads, in Redis's order, so even unsorted results come in Redis's
//! order.

use nacre_resp::Reply;

use super::args::is;
use super::registry::{cmd, Command, Keys, Keys::Range as KR, Run::Key};
use super::{err, syntax, CmdResult, Ctx};
use crate::longdouble::LongDouble;
use crate::types::geo::{Extent, Shape};
use crate::types::{geo, zset};

/// A coordinate argument, as Redis reads one (`strtod`, no NaN).
fn coordinate(b: &[u8]) -> Result<f64, Reply> {
    crate::num::parse_f64(b).ok_or_else(|| err("value is not a valid float"))
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

/// A distance and its unit at `args[0..2]`: (value, meters per unit).
fn distance_arg(args: &[Vec<u8>]) -> Result<(f64, f64), Reply> {
    let d = coordinate(&args[0])?;
    if d < 0.0 {
        return Err(err("radius cannot be negative"));
    }
    Ok((d, unit_arg(&args[1])?))
}

fn unit_arg(b: &[u8]) -> Result<f64, Reply> {
    geo::unit(b).ok_or_else(|| err("unsupported unit provided. please use M, KM, FT, MI"))
}

/// The position of `member` in the sorted set `z` at `key`.
fn member_position(
    ctx: &mut Ctx,
    key: &[u8],
    z: &zset::Z,
    member: &[u8],
) -> Result<(f64, f64), Reply> {
    match zset::score(ctx.txn, ctx.db, key, z, member)? {
        Some(s) => Ok(geo::decode(s)),
        None => Err(err("could not decode requested zset member")),
    }
}

/// Which search command runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `GEORADIUS[_RO] key lon lat radius unit ...` (`STORE` allowed unless read-only).
    Radius(bool),
    /// `GEORADIUSBYMEMBER[_RO] key member radius unit ...`.
    ByMember(bool),
    /// `GEOSEARCH key ...`.
    Area,
    /// `GEOSEARCHSTORE dst key ...`.
    AreaStore,
}

/// A point found: member, score, position, distance in meters.
type Found = (Vec<u8>, f64, (f64, f64), f64);

/// Keys of `GEORADIUS` and `GEORADIUSBYMEMBER`: the set, and the last `STORE`/`STOREDIST`.
pub fn georadius_keys(
    db: usize,
    args: &[Vec<u8>],
    _: usize,
) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let mut keys = vec![(db, args[1].clone())];
    let mut store = None;
    let mut i = 5;
    while i < args.len() {
        if (is(&args[i], "store") || is(&args[i], "storedist")) && i + 1 < args.len() {
            store = Some(args[i + 1].clone());
            i += 1;
        }
        i += 1;
    }
    keys.extend(store.map(|k| (db, k)));
    Ok(keys)
}

/// Every search command, parsed and answered as Redis's `georadiusGeneric`.
fn search(ctx: &mut Ctx, args: &[Vec<u8>], kind: Kind) -> CmdResult {
    let src = if kind == Kind::AreaStore {
        &args[2]
    } else {
        &args[1]
    };
    let z = zset::get(ctx.txn, ctx.db, src)?;
    let mut center: Option<(f64, f64)> = None;
    let mut extent: Option<(Extent, f64)> = None;
    let base = match kind {
        Kind::Radius(_) => {
            let (lon, lat) = (coordinate(&args[2])?, coordinate(&args[3])?);
            geo::encode(lon, lat)
                .ok_or_else(|| err(format!("invalid longitude,latitude pair {lon:.6},{lat:.6}")))?;
            center = Some((lon, lat));
            let (r, u) = distance_arg(&args[4..6])?;
            extent = Some((Extent::Radius(r), u));
            6
        }
        Kind::ByMember(_) => {
            if let Some(z) = &z {
                center = Some(member_position(ctx, src, z, &args[2])?);
                let (r, u) = distance_arg(&args[3..5])?;
                extent = Some((Extent::Radius(r), u));
            }
            5
        }
        Kind::Area => 2,
        Kind::AreaStore => 3,
    };
    let searching = matches!(kind, Kind::Area | Kind::AreaStore);
    let may_store = matches!(kind, Kind::Radius(false) | Kind::ByMember(false));
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort: Option<bool> = None;
    let mut count: i64 = 0;
    let mut store: Option<(Vec<u8>, bool)> =
        (kind == Kind::AreaStore).then(|| (args[1].clone(), false));
    let rest = &args[base..];
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        let left = rest.len() - i - 1;
        if is(a, "withdist") {
            withdist = true;
        } else if is(a, "withhash") {
            withhash = true;
        } else if is(a, "withcoord") {
            withcoord = true;
        } else if is(a, "any") {
            any = true;
        } else if is(a, "asc") {
            sort = Some(true);
        } else if is(a, "desc") {
            sort = Some(false);
        } else if is(a, "count") && left >= 1 {
            count = super::args::int(&rest[i + 1])?;
            if count <= 0 {
                return Err(err("COUNT must be > 0"));
            }
            i += 1;
        } else if (is(a, "store") || is(a, "storedist")) && left >= 1 && may_store {
            store = Some((rest[i + 1].clone(), is(a, "storedist")));
            i += 1;
        } else if is(a, "storedist") && kind == Kind::AreaStore {
            store = Some((args[1].clone(), true));
        } else if is(a, "frommember") && left >= 1 && searching && !fromloc {
            if let Some(z) = &z {
                center = Some(member_position(ctx, src, z, &rest[i + 1])?);
            }
            frommember = true;
            i += 1;
        } else if is(a, "fromlonlat") && left >= 2 && searching && !frommember {
            let (lon, lat) = (coordinate(&rest[i + 1])?, coordinate(&rest[i + 2])?);
            geo::encode(lon, lat)
                .ok_or_else(|| err(format!("invalid longitude,latitude pair {lon:.6},{lat:.6}")))?;
            center = Some((lon, lat));
            fromloc = true;
            i += 2;
        } else if is(a, "byradius") && left >= 2 && searching && !bybox {
            let (r, u) = distance_arg(&rest[i + 1..i + 3])?;
            extent = Some((Extent::Radius(r), u));
            byradius = true;
            i += 2;
        } else if is(a, "bybox") && left >= 3 && searching && !byradius {
            let (w, h) = (coordinate(&rest[i + 1])?, coordinate(&rest[i + 2])?);
            if w < 0.0 || h < 0.0 {
                return Err(err("height or width cannot be negative"));
            }
            extent = Some((Extent::Box(w, h), unit_arg(&rest[i + 3])?));
            bybox = true;
            i += 3;
        } else {
            return Err(super::syntax());
        }
        i += 1;
    }
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    if store.is_some() && (withdist || withhash || withcoord) {
        let what = if kind == Kind::AreaStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(err(format!(
            "{what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    if searching && !(frommember || fromloc) {
        return Err(err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if searching && !(byradius || bybox) {
        return Err(err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(err("the ANY argument requires COUNT argument"));
    }
    let (Some(z), Some((lon, lat)), Some((extent, per_unit))) = (z, center, extent) else {
        return match store {
            Some((dst, _)) => {
                ctx.delete(&dst)?;
                Ok(Reply::Integer(0))
            }
            None => Ok(Reply::Array(vec![])),
        };
    };
    if count != 0 && sort.is_none() && !any {
        sort = Some(true);
    }
    let shape = Shape {
        lon,
        lat,
        per_unit,
        extent,
    };
    let limit = if any { count as usize } else { 0 };
    let mut found: Vec<Found> = Vec::new();
    for (min, max) in geo::search_ranges(&shape) {
        if limit != 0 && found.len() >= limit {
            break;
        }
        let q = zset::Query {
            select: zset::Select::Score(zset::ScoreRange::half_open(min, max)),
            rev: false,
            offset: 0,
            limit: -1,
        };
        for (m, s) in zset::select(ctx.txn, ctx.db, src, &z, &q)? {
            if limit != 0 && found.len() >= limit {
                break;
            }
            let (x, y) = geo::decode(s);
            if let Some(d) = geo::within(&shape, x, y) {
                found.push((m, s, (x, y), d));
            }
        }
    }
    if let Some(asc) = sort {
        found.sort_by(|a, b| {
            let o = a.3.partial_cmp(&b.3).unwrap_or(std::cmp::Ordering::Equal);
            if asc {
                o
            } else {
                o.reverse()
            }
        });
    }
    if count != 0 {
        found.truncate(count as usize);
    }
    if let Some((dst, dist)) = store {
        let items: Vec<(Vec<u8>, f64)> = found
            .into_iter()
            .map(|(m, s, _, d)| (m, if dist { d / per_unit } else { s }))
            .collect();
        let n = items.len() as i64;
        if items.is_empty() {
            ctx.delete(&dst)?;
        } else {
            zset::replace(ctx.txn, ctx.db, &dst, &items)?;
            let event = if searching {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            ctx.notify(&dst, event);
        }
        return Ok(Reply::Integer(n));
    }
    let plain = !(withdist || withhash || withcoord);
    let mut out = Vec::with_capacity(found.len());
    for (m, s, (x, y), d) in found {
        if plain {
            out.push(Reply::Bulk(m));
            continue;
        }
        let mut item = vec![Reply::Bulk(m)];
        if withdist {
            item.push(Reply::Bulk(format!("{:.4}", d / per_unit).into_bytes()));
        }
        if withhash {
            item.push(Reply::Integer(s as i64));
        }
        if withcoord {
            item.push(Reply::Array(vec![coord_reply(ctx, x), coord_reply(ctx, y)]));
        }
        out.push(Reply::Array(item));
    }
    Ok(Reply::Array(out))
}

/// `GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]`.
pub fn georadius(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    search(ctx, args, Kind::Radius(false))
}

/// `GEORADIUS_RO`: `GEORADIUS` without `STORE`.
pub fn georadius_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    search(ctx, args, Kind::Radius(true))
}

/// `GEORADIUSBYMEMBER key member radius unit ...`.
pub fn georadiusbymember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    search(ctx, args, Kind::ByMember(false))
}

/// `GEORADIUSBYMEMBER_RO`: `GEORADIUSBYMEMBER` without `STORE`.
pub fn georadiusbymember_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    search(ctx, args, Kind::ByMember(true))
}

/// `GEOSEARCH key FROMMEMBER m|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit [ASC|DESC]
/// [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]`.
pub fn geosearch(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    search(ctx, args, Kind::Area)
}

/// `GEOSEARCHSTORE destination source ... [STOREDIST]`.
pub fn geosearchstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    search(ctx, args, Kind::AreaStore)
}

/// The geo commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("geoadd", -5, [WRITE DENYOOM], [WRITE GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", Key(geoadd)),
    cmd!("geopos", -2, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Returns the longitude and latitude of members from a geospatial index.", Key(geopos)),
    cmd!("geodist", -4, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Returns the distance between two members of a geospatial index.", Key(geodist)),
    cmd!("georadius", -6, [WRITE DENYOOM MOVABLEKEYS], [WRITE GEO SLOW], [], Keys::Custom(georadius_keys, 1, 1, 1), "geo", "3.2.0", "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", Key(georadius)),
    cmd!("georadius_ro", -6, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.10", "Returns members from a geospatial index that are within a distance from a coordinate.", Key(georadius_ro)),
    cmd!("georadiusbymember", -5, [WRITE DENYOOM MOVABLEKEYS], [WRITE GEO SLOW], [], Keys::Custom(georadius_keys, 1, 1, 1), "geo", "3.2.0", "Queries a geospatial index for members within a distance from a member, optionally stores the result.", Key(georadiusbymember)),
    cmd!("georadiusbymember_ro", -5, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.10", "Returns members from a geospatial index that are within a distance from a member.", Key(georadiusbymember_ro)),
    cmd!("geosearch", -7, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle.", Key(geosearch)),
    cmd!("geosearchstore", -8, [WRITE DENYOOM], [WRITE GEO SLOW], [], KR(1, 2, 1), "geo", "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", Key(geosearchstore)),
    cmd!("geohash", -2, [READONLY], [READ GEO SLOW], [], KR(1, 1, 1), "geo", "3.2.0", "Returns members from a geospatial index as geohash strings.", Key(geohash)),
];

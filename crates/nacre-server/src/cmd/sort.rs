//! SORT and SORT_RO over lists, sets and sorted sets, with BY, LIMIT, GET, ASC|DESC, ALPHA
//! and STORE as Redis 7.0 runs them. BY and GET patterns name other keys, known only once
//! the elements are read: such a SORT holds the whole keyspace (an exclusive transaction)
//! and takes those keys as it goes.

use std::cmp::Ordering;

use nacre_resp::Reply;

use super::args::{int, is, parse_f64};
use super::registry::{cmd, Command, Keys, Keys::Range as KR, Run::Key};
use super::{err, syntax, wrongtype, CmdResult, Ctx};
use crate::store::encoding::{Kind, Meta};
use crate::types::list;

/// What a SORT asked for.
struct Spec {
    by: Option<Vec<u8>>,
    dontsort: bool,
    limit: Option<(i64, i64)>,
    gets: Vec<Vec<u8>>,
    desc: bool,
    alpha: bool,
    store: Option<Vec<u8>>,
}

/// Parses SORT's options as Redis does, left to right; `every_key`: the user may read every
/// key, without which a `BY` pattern or a `GET` is refused where it stands.
fn parse(args: &[Vec<u8>], readonly: bool, every_key: bool) -> Result<Spec, Reply> {
    let mut s = Spec {
        by: None,
        dontsort: false,
        limit: None,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if is(a, "asc") {
            s.desc = false;
        } else if is(a, "desc") {
            s.desc = true;
        } else if is(a, "alpha") {
            s.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            s.limit = Some((int(&args[j + 1])?, int(&args[j + 2])?));
            j += 2;
        } else if is(a, "store") && left >= 1 && !readonly {
            s.store = Some(args[j + 1].clone());
            j += 1;
        } else if is(a, "by") && left >= 1 {
            let p = args[j + 1].clone();
            // A pattern without `*` means "do not sort".
            s.dontsort = !p.contains(&b'*');
            if !s.dontsort && !every_key {
                return Err(err(
                    "BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            s.by = Some(p);
            j += 1;
        } else if is(a, "get") && left >= 1 {
            if !every_key {
                return Err(err(
                    "GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            s.gets.push(args[j + 1].clone());
            j += 1;
        } else {
            return Err(syntax());
        }
        j += 1;
    }
    Ok(s)
}

/// Whether a SORT looks up other keys (and so must hold the whole keyspace).
pub fn uses_patterns(args: &[Vec<u8>]) -> bool {
    let mut j = 2;
    while j + 1 < args.len() {
        if (is(&args[j], "by") || is(&args[j], "get")) && args[j + 1].contains(&b'*') {
            return true;
        }
        j += 1;
    }
    false
}

/// Keys of `SORT key [... STORE destination]`.
pub fn sort_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    // As Redis: options are skipped with their arguments, and the last STORE counts.
    let mut store = None;
    let mut j = 2;
    while j < args.len() {
        let skip = if is(&args[j], "limit") {
            2
        } else if is(&args[j], "get") || is(&args[j], "by") {
            1
        } else if is(&args[j], "store") {
            if let Some(k) = args.get(j + 1) {
                store = Some(k.clone());
            }
            1
        } else {
            0
        };
        j += 1 + skip;
    }
    let mut keys = vec![(db, args[1].clone())];
    keys.extend(store.map(|k| (db, k)));
    Ok(keys)
}

/// The value a pattern names for element `e`: `#` is the element; `*` is replaced by it,
/// and `key->field` reads a hash field. Missing keys, wrong types and patterns without `*`
/// give nothing.
fn lookup(ctx: &mut Ctx, pattern: &[u8], e: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    if pattern == b"#" {
        return Ok(Some(e.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let arrow = pattern
        .windows(2)
        .rposition(|w| w == b"->")
        .filter(|&p| p > star && p + 2 < pattern.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(e);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    ctx.txn.add_key(ctx.db, &key)?;
    let Some(m) = ctx.txn.get(ctx.db, &key)?.cloned() else {
        return Ok(None);
    };
    match arrow {
        Some(a) if m.kind == Kind::Hash => {
            Ok(ctx.txn.member(ctx.db, &key, m.version, &pattern[a + 2..])?)
        }
        None if m.kind == Kind::String => Ok(Some(m.payload)),
        _ => Ok(None),
    }
}

/// The elements of the key to sort, in its own order.
fn elements(ctx: &mut Ctx, key: &[u8], m: &Meta) -> Result<Vec<Vec<u8>>, Reply> {
    Ok(match m.kind {
        Kind::List => match list::list(ctx.txn, ctx.db, key)? {
            Some(l) => list::read(ctx.txn, ctx.db, key, &l, 0, l.len())?,
            None => Vec::new(),
        },
        Kind::Set => ctx
            .txn
            .all_members(ctx.db, key, m.version)?
            .into_iter()
            .map(|(k, _)| k)
            .collect(),
        Kind::ZSet => {
            let z = super::zsets::zset(ctx, key)?.ok_or_else(wrongtype)?;
            let q = super::zsets::Query {
                select: super::zsets::Select::Rank(0, -1),
                rev: false,
                offset: 0,
                limit: -1,
            };
            super::zsets::select(ctx, key, &z, &q)?
                .into_iter()
                .map(|(m, _)| m)
                .collect()
        }
        _ => return Err(wrongtype()),
    })
}

fn generic(ctx: &mut Ctx, args: &[Vec<u8>], readonly: bool) -> CmdResult {
    let mut s = parse(args, readonly, ctx.every_key)?;
    let key = &args[1];
    let meta = ctx.txn.get(ctx.db, key)?.cloned();
    let mut items = match &meta {
        None => Vec::new(),
        Some(m) => elements(ctx, key, m)?,
    };
    // As Redis: a set stored, or handed to a script, unsorted would be in an arbitrary
    // order, so it is sorted.
    if s.dontsort
        && meta.as_ref().is_some_and(|m| m.kind == Kind::Set)
        && (s.store.is_some() || ctx.script)
    {
        s.dontsort = false;
        s.alpha = true;
        s.by = None;
    }
    // As Redis: a sorted set taken unsorted keeps its order, reversed by DESC.
    if s.dontsort && s.desc && meta.as_ref().is_some_and(|m| m.kind == Kind::ZSet) {
        items.reverse();
    }
    if !s.dontsort {
        // Sort keys: the BY value (or the element), as a number unless ALPHA.
        let mut keyed: Vec<(Vec<u8>, Option<Vec<u8>>, f64)> = Vec::with_capacity(items.len());
        for e in items {
            let v = match &s.by {
                Some(p) => lookup(ctx, p, &e)?,
                None => Some(e.clone()),
            };
            let score = if s.alpha {
                0.0
            } else {
                match &v {
                    None => 0.0,
                    Some(b) => parse_f64(b)
                        .filter(|f| !f.is_nan())
                        .ok_or_else(|| err("One or more scores can't be converted into double"))?,
                }
            };
            keyed.push((e, v, score));
        }
        let alpha = s.alpha;
        keyed.sort_by(|a, b| {
            let c = if alpha {
                // Missing BY values sort first.
                match (&a.1, &b.1) {
                    (None, None) => Ordering::Equal,
                    (None, _) => Ordering::Less,
                    (_, None) => Ordering::Greater,
                    (Some(x), Some(y)) => cstr(x).cmp(cstr(y)),
                }
            } else {
                a.2.partial_cmp(&b.2).unwrap_or(Ordering::Equal)
            };
            // Equal numbers: by the elements themselves, as Redis does, so the result is
            // deterministic (equal ALPHA keys keep their order).
            let c = if c == Ordering::Equal && !alpha {
                a.0.cmp(&b.0)
            } else {
                c
            };
            if s.desc {
                c.reverse()
            } else {
                c
            }
        });
        items = keyed.into_iter().map(|(e, _, _)| e).collect();
    }
    let n = items.len() as i64;
    let (start, count) = s.limit.unwrap_or((0, -1));
    let start = start.clamp(0, n);
    let end = if count < 0 {
        n
    } else {
        start.saturating_add(count).min(n)
    };
    let chosen = &items[start as usize..end as usize];
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    for e in chosen {
        if s.gets.is_empty() {
            out.push(Some(e.clone()));
        }
        for g in &s.gets {
            out.push(lookup(ctx, g, e)?);
        }
    }
    match &s.store {
        None => Ok(Reply::Array(
            out.into_iter()
                .map(|v| v.map_or(Reply::Nil, Reply::Bulk))
                .collect(),
        )),
        Some(dst) => {
            let vals: Vec<Vec<u8>> = out.into_iter().map(Option::unwrap_or_default).collect();
            let n = vals.len() as i64;
            if n > 0 {
                let mut l = list::replace(ctx.txn, ctx.db, dst)?;
                list::push(ctx.txn, ctx.db, dst, &mut l, false, &vals)?;
                ctx.notify(dst, "sortstore");
            } else {
                ctx.delete(dst)?;
            }
            Ok(Reply::Integer(n))
        }
    }
}

/// Bytes up to the first NUL, as C's `strcoll` in the C locale compares them.
fn cstr(b: &[u8]) -> &[u8] {
    b.iter().position(|&x| x == 0).map_or(b, |i| &b[..i])
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination]`.
pub fn sort(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    generic(ctx, args, false)
}

/// `SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]`.
pub fn sort_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    generic(ctx, args, true)
}

/// The sorting commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("sort", -2, [WRITE DENYOOM MOVABLEKEYS], [WRITE SET SORTEDSET LIST SLOW DANGEROUS], [PATTERNS], Keys::Custom(sort_keys, 1, 1, 1), "generic", "1.0.0", "Sorts the elements in a list, a set, or a sorted set, optionally storing the result.", Key(sort)),
    cmd!("sort_ro", -2, [READONLY MOVABLEKEYS], [READ SET SORTEDSET LIST SLOW DANGEROUS], [PATTERNS], KR(1, 1, 1), "generic", "7.0.0", "Returns the sorted elements of a list, a set, or a sorted set.", Key(sort_ro)),
];

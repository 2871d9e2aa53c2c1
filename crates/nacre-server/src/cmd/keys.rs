//! Generic key commands: DEL EXISTS TYPE EXPIRE… TTL… PERSIST RENAME KEYS SCAN RANDOMKEY
//! COPY MOVE OBJECT, and the whole-database DBSIZE FLUSHDB FLUSHALL SWAPDB.

use std::sync::atomic::Ordering;

use nacre::IterOptions;
use nacre_resp::Reply;

use super::args::{int, is, lower};
use super::registry::unknown_subcommand;
use super::registry::{cmd, sub, Command, Keys, Keys::None as NK, Keys::Range as KR, Run::Key};
use super::{arity_error, err, ok, syntax, CmdResult, Ctx};
use crate::glob::glob_match;
use crate::store::encoding::{self, Hint, Kind, Meta};
use crate::store::Store;
use crate::types::whole;

/// `DEL key...` (and `UNLINK`: deleting a collection is O(1) either way, its members are
/// the cleaner's).
pub fn del(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for key in &args[1..] {
        if ctx.delete(key)? {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

/// `EXISTS key...` (and `TOUCH`).
pub fn exists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for key in &args[1..] {
        if ctx.txn.get(ctx.db, key)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Integer(n))
}

/// `TYPE key`.
pub fn type_(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let t = ctx
        .txn
        .get(ctx.db, &args[1])?
        .map_or("none", |m| m.kind.name());
    Ok(Reply::Simple(t.into()))
}

fn expire_generic(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    unit: i64,
    absolute: bool,
    name: &str,
) -> CmdResult {
    let v = int(&args[2])?;
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &args[3..] {
        match lower(a).as_str() {
            "nx" => nx = true,
            "xx" => xx = true,
            "gt" => gt = true,
            "lt" => lt = true,
            _ => {
                return Err(err(format!(
                    "Unsupported option {}",
                    String::from_utf8_lossy(a)
                )))
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(err("GT and LT options at the same time are not compatible"));
    }
    let now = ctx.txn.now() as i64;
    let invalid = || err(format!("invalid expire time in '{name}' command"));
    let ms = v.checked_mul(unit).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        ms.checked_add(now).ok_or_else(invalid)?
    };
    let db = ctx.db;
    let Some(m) = ctx.txn.get(db, &args[1])? else {
        return Ok(Reply::Integer(0));
    };
    let cur = m.expire_at;
    if (nx && cur != 0) || (xx && cur == 0) {
        return Ok(Reply::Integer(0));
    }
    if gt && (cur == 0 || at <= cur as i64) {
        return Ok(Reply::Integer(0));
    }
    if lt && cur != 0 && at >= cur as i64 {
        return Ok(Reply::Integer(0));
    }
    if at <= now {
        ctx.txn.set(db, &args[1], None)?;
        ctx.notify(&args[1], "del");
        ctx.propagate(&[b"DEL", &args[1]]);
        return Ok(Reply::Integer(1));
    }
    if let Some(m) = ctx.txn.get_mut(db, &args[1])? {
        m.expire_at = at as u64;
    }
    ctx.notify(&args[1], "expire");
    // As Redis: replicas get the absolute time.
    ctx.propagate(&[b"PEXPIREAT", &args[1], at.to_string().as_bytes()]);
    Ok(Reply::Integer(1))
}

/// `EXPIRE key seconds [NX|XX|GT|LT]`.
pub fn expire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, 1000, false, "expire")
}

/// `PEXPIRE key ms [NX|XX|GT|LT]`.
pub fn pexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, 1, false, "pexpire")
}

/// `EXPIREAT key unix-seconds [NX|XX|GT|LT]`.
pub fn expireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, 1000, true, "expireat")
}

/// `PEXPIREAT key unix-ms [NX|XX|GT|LT]`.
pub fn pexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, args, 1, true, "pexpireat")
}

fn ttl_generic(ctx: &mut Ctx, args: &[Vec<u8>], ms: bool, absolute: bool) -> CmdResult {
    let now = ctx.txn.now();
    Ok(Reply::Integer(match ctx.txn.get(ctx.db, &args[1])? {
        None => -2,
        Some(m) if m.expire_at == 0 => -1,
        Some(m) if absolute => {
            if ms {
                m.expire_at as i64
            } else {
                // Rounded, as Redis does.
                (m.expire_at as i64 + 500) / 1000
            }
        }
        Some(m) => {
            let left = m.expire_at.saturating_sub(now) as i64;
            if ms {
                left
            } else {
                (left + 500) / 1000
            }
        }
    }))
}

/// `TTL key`.
pub fn ttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, false, false)
}

/// `PTTL key`.
pub fn pttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, true, false)
}

/// `EXPIRETIME key`.
pub fn expiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, false, true)
}

/// `PEXPIRETIME key`.
pub fn pexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, args, true, true)
}

/// `PERSIST key`.
pub fn persist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if ctx
        .txn
        .get(ctx.db, &args[1])?
        .is_none_or(|m| m.expire_at == 0)
    {
        return Ok(Reply::Integer(0));
    }
    match ctx.txn.get_mut(ctx.db, &args[1])? {
        Some(m) if m.expire_at != 0 => {
            m.expire_at = 0;
            ctx.notify(&args[1], "persist");
            Ok(Reply::Integer(1))
        }
        _ => Ok(Reply::Integer(0)),
    }
}

fn rename_generic(ctx: &mut Ctx, args: &[Vec<u8>], nx: bool) -> CmdResult {
    let db = ctx.db;
    let Some(m) = ctx.txn.get(db, &args[1])?.cloned() else {
        return Err(err("no such key"));
    };
    if args[1] == args[2] {
        return Ok(if nx { Reply::Integer(0) } else { ok() });
    }
    if nx && ctx.txn.get(db, &args[2])?.is_some() {
        return Ok(Reply::Integer(0));
    }
    // The collection moves with its version: no member is copied. As Redis, a key in the
    // way is deleted and the moved one added (`new`).
    ctx.txn.set(db, &args[1], None)?;
    ctx.txn.set(db, &args[2], None)?;
    ctx.txn.set(db, &args[2], Some(m))?;
    ctx.notify(&args[1], "rename_from");
    ctx.notify(&args[2], "rename_to");
    Ok(if nx { Reply::Integer(1) } else { ok() })
}

/// `RENAME key newkey`.
pub fn rename(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, args, false)
}

/// `RENAMENX key newkey`.
pub fn renamenx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// Keys of `COPY source destination [DB n] [REPLACE]`.
pub fn copy_keys(db: usize, args: &[Vec<u8>], dbs: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let mut dst_db = db;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "db") && i + 1 < args.len() {
            let d = int(&args[i + 1])?;
            if d < 0 || d as usize >= dbs {
                return Err(err("DB index is out of range"));
            }
            dst_db = d as usize;
            i += 2;
        } else if is(&args[i], "replace") {
            i += 1;
        } else {
            return Err(syntax());
        }
    }
    Ok(vec![(db, args[1].clone()), (dst_db, args[2].clone())])
}

/// `COPY source destination [DB n] [REPLACE]`.
pub fn copy(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let keys = copy_keys(ctx.db, args, ctx.shared.store.databases())?;
    let replace = args[3..].iter().any(|a| is(a, "replace"));
    let (sdb, ddb) = (keys[0].0, keys[1].0);
    if sdb == ddb && args[1] == args[2] {
        return Err(err("source and destination objects are the same"));
    }
    let Some(src) = ctx.txn.get(sdb, &args[1])?.cloned() else {
        return Ok(Reply::Integer(0));
    };
    if ctx.txn.get(ddb, &args[2])?.is_some() {
        if !replace {
            return Ok(Reply::Integer(0));
        }
        ctx.txn.set(ddb, &args[2], None)?;
    }
    if src.kind.is_collection() {
        let records = ctx.txn.all_records(sdb, &args[1], src.version)?;
        let m = ctx.txn.create(ddb, &args[2], src.kind)?;
        m.size = src.size;
        m.expire_at = src.expire_at;
        m.payload = src.payload.clone();
        m.hint = src.hint;
        let v = m.version;
        for (rest, val) in records {
            let mut sk = encoding::sub_prefix(v).to_vec();
            sk.extend_from_slice(&rest);
            ctx.txn.sub_put(ddb, &args[2], sk, Some(val))?;
        }
    } else {
        ctx.txn.set(ddb, &args[2], Some(src))?;
    }
    ctx.txn.event(ddb, &args[2], "copy_to");
    Ok(Reply::Integer(1))
}

/// Keys of `MOVE key db`.
pub fn move_keys(db: usize, args: &[Vec<u8>], dbs: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    let d = int(&args[2]).map_err(|_| err("value is not an integer or out of range"))?;
    if d < 0 || d as usize >= dbs {
        return Err(err("DB index is out of range"));
    }
    Ok(vec![(db, args[1].clone()), (d as usize, args[1].clone())])
}

/// `MOVE key db`.
pub fn move_(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let keys = move_keys(ctx.db, args, ctx.shared.store.databases())?;
    let dst = keys[1].0;
    if dst == ctx.db {
        return Err(err("source and destination objects are the same"));
    }
    let Some(m) = ctx.txn.get(ctx.db, &args[1])?.cloned() else {
        return Ok(Reply::Integer(0));
    };
    if ctx.txn.get(dst, &args[1])?.is_some() {
        return Ok(Reply::Integer(0));
    }
    ctx.txn.set(ctx.db, &args[1], None)?;
    ctx.txn.set(dst, &args[1], Some(m))?;
    ctx.notify(&args[1], "move_from");
    ctx.txn.event(dst, &args[1], "move_to");
    Ok(Reply::Integer(1))
}

/// `DUMP key`: the value in Redis 7.0's RDB encoding (`RESTORE` and Redis read it).
pub fn dump(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(match whole::read(ctx.txn, ctx.db, &args[1])? {
        Some((v, _)) => Reply::Bulk(crate::rdb::value::encode(&v)),
        None => Reply::Nil,
    })
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`,
/// checked in Redis's order. `IDLETIME` sets the key's access clock under an LRU policy,
/// `FREQ` its counter under an LFU policy (as Redis, each is ignored under the other).
pub fn restore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "replace") {
            replace = true;
        } else if is(&args[i], "absttl") {
            absttl = true;
        } else if is(&args[i], "idletime") && more && freq.is_none() {
            let n = int(&args[i + 1])?;
            if n < 0 {
                return Err(err("Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(n);
            i += 1;
        } else if is(&args[i], "freq") && more && idle.is_none() {
            let n = int(&args[i + 1])?;
            if !(0..=255).contains(&n) {
                return Err(err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(n);
            i += 1;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    let (db, key) = (ctx.db, &args[1]);
    let exists = ctx.txn.get(db, key)?.is_some();
    if exists && !replace {
        return Err(Reply::Error(
            "BUSYKEY Target key name already exists.".into(),
        ));
    }
    let ttl = int(&args[2])?;
    if ttl < 0 {
        return Err(err("Invalid TTL value, must be >= 0"));
    }
    let v = crate::rdb::value::decode(&args[3]).map_err(|e| err(e.to_string()))?;
    if whole::is_empty(&v) {
        return Err(err(crate::rdb::value::DumpError::Format.to_string()));
    }
    let now = ctx.txn.now() as i64;
    let at = match (ttl, absttl) {
        (0, _) => 0,
        (t, true) => t,
        (t, false) => t.saturating_add(now),
    };
    if exists {
        // As Redis: the old key goes first, so the restored one is added (`new`).
        ctx.txn.set(db, key, None)?;
    }
    if at != 0 && at <= now {
        // Already expired: nothing is created (a replaced key is deleted).
        if exists {
            ctx.notify(key, "del");
            ctx.propagate(&[b"DEL", key]);
        }
        return Ok(ok());
    }
    whole::write(ctx.txn, db, key, v, at as u64)?;
    if at != 0 && !absttl {
        // As Redis: replicas get the absolute expiry time.
        ctx.propagate(&[
            b"RESTORE",
            key,
            at.to_string().as_bytes(),
            &args[3],
            b"REPLACE",
            b"ABSTTL",
        ]);
    }
    let (clock, hash) = (&ctx.shared.store.access, Store::key_hash(db, key));
    if let Some(n) = idle {
        clock.set_idle(hash, n as u64);
    }
    if let Some(n) = freq {
        clock.set_freq(hash, n as u32);
    }
    ctx.notify(key, "restore");
    Ok(ok())
}

/// Keys of `OBJECT subcommand [key]`.
pub fn object_keys(db: usize, args: &[Vec<u8>], _: usize) -> Result<Vec<(usize, Vec<u8>)>, Reply> {
    Ok(args
        .get(2)
        .map(|k| vec![(db, k.clone())])
        .unwrap_or_default())
}

/// The encoding Redis would report for `m`.
pub fn encoding_of(m: &Meta) -> &'static str {
    match m.kind {
        Kind::String if m.hint == Hint::Raw => "raw",
        Kind::String if m.hint == Hint::Emb => {
            if m.payload.len() <= 44 {
                "embstr"
            } else {
                "raw"
            }
        }
        Kind::String => {
            if m.payload.len() <= 20 && super::args::parse_i64_strict(&m.payload).is_some() {
                "int"
            } else if m.payload.len() <= 44 {
                "embstr"
            } else {
                "raw"
            }
        }
        Kind::Hash if m.hint == Hint::Raw => "hashtable",
        Kind::Hash => "listpack",
        Kind::List => "quicklist",
        Kind::Set if m.hint == Hint::Raw => "hashtable",
        Kind::Set => "intset",
        Kind::ZSet if m.hint == Hint::Raw => "skiplist",
        Kind::ZSet => "listpack",
        Kind::Stream => "stream",
    }
}

/// `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP`.
pub fn object(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let sub = lower(&args[1]);
    if sub == "help" {
        return Ok(Reply::Array(
            [
                "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ENCODING <key>",
                "    Return the kind of internal representation used in order to store the value",
                "    associated with a <key>.",
                "FREQ <key>",
                "    Return the access frequency index of the <key>.",
                "IDLETIME <key>",
                "    Return the idle time of the <key>.",
                "REFCOUNT <key>",
                "    Return the number of references of the value associated with the specified",
                "    <key>.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|s| Reply::Simple(s.to_string()))
            .collect(),
        ));
    }
    if !matches!(sub.as_str(), "encoding" | "refcount" | "idletime" | "freq") {
        return Err(unknown_subcommand(&args[1], "object"));
    }
    if args.len() != 3 {
        return Err(arity_error(&format!("object|{sub}")));
    }
    let Some(m) = ctx.txn.get(ctx.db, &args[2])? else {
        return Ok(Reply::Nil);
    };
    let (clock, hash) = (&ctx.shared.store.access, Store::key_hash(ctx.db, &args[2]));
    Ok(match sub.as_str() {
        "encoding" => Reply::Bulk(encoding_of(m).as_bytes().to_vec()),
        "refcount" => Reply::Integer(1),
        "idletime" if clock.lfu() => {
            return Err(err(
                "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
            ))
        }
        "idletime" => Reply::Integer(clock.idle_secs(hash) as i64),
        _ if clock.lfu() => Reply::Integer(i64::from(clock.freq(hash))),
        _ => {
            return Err(err(
                "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
            ))
        }
    })
}

/// `DBSIZE`.
pub fn dbsize(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    ctx.txn.wait_all();
    Ok(Reply::Integer(ctx.shared.store.dbsize(ctx.db)))
}

fn flush_check(args: &[Vec<u8>]) -> Result<(), Reply> {
    match args.len() {
        1 => Ok(()),
        2 if is(&args[1], "sync") || is(&args[1], "async") => Ok(()),
        _ => Err(syntax()),
    }
}

fn flush_db(ctx: &mut Ctx, db: usize) -> Result<(), Reply> {
    let store = ctx.shared.store.clone();
    // Watchers of the keys it empties (read under the old namespace).
    ctx.txn.bump_watchers_of_db(db, None);
    let ns = ctx
        .txn
        .namespaces_mut()
        .ok_or_else(|| err("flush outside an exclusive transaction"))?;
    let old = ns.gens[db];
    ns.gens[db] = ns.next;
    ns.next = ns
        .next
        .checked_add(1)
        .filter(|&n| n < encoding::LONG_NS)
        .ok_or_else(|| err("namespaces exhausted"))?;
    let enc = ns.encode();
    let batch = ctx.txn.raw_batch();
    if !crate::store::mutated(crate::store::MUTATE_NO_NAMESPACE_RECORD) {
        batch.put(&store.subs.sys, crate::store::open::NAMESPACES, enc);
    }
    batch.put(&store.subs.gc, encoding::ns_prefix(old), []);
    store.gc_pending.fetch_add(1, Ordering::Relaxed);
    let n = store.counts[db].load(Ordering::Relaxed);
    ctx.txn.add_count(db, -n);
    Ok(())
}

/// `FLUSHDB [ASYNC|SYNC]`: the database gets a new, empty namespace; the old one's records
/// are the cleaner's. O(1) for the client either way.
pub fn flushdb(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    flush_check(args)?;
    flush_db(ctx, ctx.db)?;
    Ok(ok())
}

/// `FLUSHALL [ASYNC|SYNC]`.
pub fn flushall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    flush_check(args)?;
    for db in 0..ctx.shared.store.databases() {
        flush_db(ctx, db)?;
    }
    Ok(ok())
}

/// `SWAPDB index1 index2`.
pub fn swapdb(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let dbs = ctx.shared.store.databases() as i64;
    let a = int(&args[1]).map_err(|_| err("invalid first DB index"))?;
    let b = int(&args[2]).map_err(|_| err("invalid second DB index"))?;
    if a < 0 || a >= dbs || b < 0 || b >= dbs {
        return Err(err("DB index is out of range"));
    }
    let (a, b) = (a as usize, b as usize);
    let store = ctx.shared.store.clone();
    ctx.txn.bump_watchers_of_db(a, Some(b));
    ctx.txn.bump_watchers_of_db(b, Some(a));
    let ns = ctx
        .txn
        .namespaces_mut()
        .ok_or_else(|| err("swap outside an exclusive transaction"))?;
    ns.gens.swap(a, b);
    let enc = ns.encode();
    ctx.txn
        .raw_batch()
        .put(&store.subs.sys, crate::store::open::NAMESPACES, enc);
    let (na, nb) = (
        store.counts[a].load(Ordering::Relaxed),
        store.counts[b].load(Ordering::Relaxed),
    );
    ctx.txn.add_count(a, nb - na);
    ctx.txn.add_count(b, na - nb);
    Ok(ok())
}

/// Walks database `db`'s keys from hash `from`: calls `f` with each key and its metadata
/// until it returns false; the hash to go on from (0 when done).
fn walk(
    ctx: &mut Ctx,
    from: u64,
    mut f: impl FnMut(u64, &[u8], &Meta) -> bool,
) -> Result<u64, Reply> {
    let gen = ctx.txn.gen(ctx.db);
    ctx.txn.may_iterate()?;
    let store = &ctx.shared.store;
    let it = store
        .db
        .iter(
            &store.subs.meta,
            IterOptions {
                lower: Some(encoding::meta_seek(gen, from)),
                prefix: Some(encoding::ns_prefix(gen).to_vec()),
                ..Default::default()
            },
        )
        .map_err(crate::store::StoreError::from)?;
    for r in it {
        let (k, v) = r.map_err(crate::store::StoreError::from)?;
        let (_, h, _) =
            encoding::split_meta_key(&k).ok_or_else(|| err("corrupt record: key metadata key"))?;
        let key = encoding::user_key(&k, &v)?;
        let m = Meta::decode(&v)?;
        if !f(h, key, &m) {
            return Ok(h);
        }
    }
    Ok(0)
}

/// `KEYS pattern`.
pub fn keys(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = ctx.txn.now();
    let pat = args[1].clone();
    let all = pat == b"*";
    let mut out = Vec::new();
    walk(ctx, 0, |_, k, m| {
        if !m.expired(now) && (all || glob_match(&pat, k, false)) {
            out.push(Reply::Bulk(k.to_vec()));
        }
        true
    })?;
    Ok(Reply::Array(out))
}

/// Parses a SCAN-family cursor (Redis: `ERR invalid cursor`).
pub fn cursor(b: &[u8]) -> Result<u64, Reply> {
    std::str::from_utf8(b)
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| err("invalid cursor"))
}

/// SCAN options: MATCH, COUNT, TYPE (when allowed).
pub struct ScanOpts {
    /// Pattern.
    pub pattern: Option<Vec<u8>>,
    /// Work per call.
    pub count: usize,
    /// Type filter.
    pub kind: Option<String>,
    /// NOVALUES (HSCAN, 7.4) is not in 7.0: unused.
    pub novalues: bool,
}

/// Parses SCAN-family options from `args`.
pub fn scan_opts(args: &[Vec<u8>], allow_type: bool) -> Result<ScanOpts, Reply> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
        kind: None,
        novalues: false,
    };
    let mut i = 0;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(&args[i], "match") && more {
            o.pattern = Some(args[i + 1].clone()).filter(|p| p != b"*");
            i += 2;
        } else if is(&args[i], "count") && more {
            let c = int(&args[i + 1])?;
            if c < 1 {
                return Err(syntax());
            }
            o.count = c as usize;
            i += 2;
        } else if is(&args[i], "type") && more && allow_type {
            o.kind = Some(lower(&args[i + 1]));
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    Ok(o)
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: the cursor is a position in
/// hash order, so a key present for the whole iteration is returned, and returned once
/// (long keys sit at 2^63 and above).
pub fn scan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let from = cursor(&args[1])?;
    let o = scan_opts(&args[2..], true)?;
    let now = ctx.txn.now();
    let mut out = Vec::new();
    let mut seen = 0usize;
    let mut last = None;
    let next = walk(ctx, from, |h, k, m| {
        if seen >= o.count && last != Some(h) {
            return false;
        }
        seen += 1;
        last = Some(h);
        if !m.expired(now)
            && o.pattern.as_ref().is_none_or(|p| glob_match(p, k, false))
            && o.kind.as_ref().is_none_or(|t| t == m.kind.name())
        {
            out.push(Reply::Bulk(k.to_vec()));
        }
        true
    })?;
    Ok(Reply::Array(vec![
        Reply::Bulk(next.to_string().into_bytes()),
        Reply::Array(out),
    ]))
}

/// `RANDOMKEY`.
pub fn randomkey(ctx: &mut Ctx, _: &[Vec<u8>]) -> CmdResult {
    let now = ctx.txn.now();
    let start = crate::shared::random_u64() >> 1;
    let mut found = None;
    let mut scanned = 0u64;
    for from in [start, 0] {
        walk(ctx, from, |_, k, m| {
            scanned += 1;
            if !m.expired(now) {
                found = Some(k.to_vec());
                return false;
            }
            scanned < 1_000_000
        })?;
        if found.is_some() {
            break;
        }
    }
    Ok(found.map_or(Reply::Nil, Reply::Bulk))
}

/// The keyspace commands.
#[rustfmt::skip]
pub(crate) static COMMANDS: &[Command] = &[
    cmd!("dbsize", 1, [READONLY FAST], [KEYSPACE READ FAST], [COUNTS], NK, "server", "1.0.0", "Returns the number of keys in the database.", Key(dbsize)),
    cmd!("flushdb", -1, [WRITE], [KEYSPACE WRITE SLOW DANGEROUS], [EXCLUSIVE], NK, "server", "1.0.0", "Removes all keys from the current database.", Key(flushdb)),
    cmd!("flushall", -1, [WRITE], [KEYSPACE WRITE SLOW DANGEROUS], [EXCLUSIVE], NK, "server", "1.0.0", "Removes all keys from all databases.", Key(flushall)),
    cmd!("swapdb", 3, [WRITE FAST], [KEYSPACE WRITE FAST DANGEROUS], [EXCLUSIVE], NK, "server", "4.0.0", "Swaps two Redis databases.", Key(swapdb)),
    cmd!("del", -2, [WRITE], [KEYSPACE WRITE SLOW], [], KR(1, -1, 1), "generic", "1.0.0", "Deletes one or more keys.", Key(del)),
    cmd!("unlink", -2, [WRITE FAST], [KEYSPACE WRITE FAST], [], KR(1, -1, 1), "generic", "4.0.0", "Asynchronously deletes one or more keys.", Key(del)),
    cmd!("exists", -2, [READONLY FAST], [KEYSPACE READ FAST], [NO_TOUCH], KR(1, -1, 1), "generic", "1.0.0", "Determines whether one or more keys exist.", Key(exists)),
    cmd!("type", 2, [READONLY FAST], [KEYSPACE READ FAST], [NO_TOUCH], KR(1, 1, 1), "generic", "1.0.0", "Determines the type of value stored at a key.", Key(type_)),
    cmd!("expire", -3, [WRITE FAST], [KEYSPACE WRITE FAST], [], KR(1, 1, 1), "generic", "1.0.0", "Sets the expiration time of a key in seconds.", Key(expire)),
    cmd!("pexpire", -3, [WRITE FAST], [KEYSPACE WRITE FAST], [], KR(1, 1, 1), "generic", "2.6.0", "Sets the expiration time of a key in milliseconds.", Key(pexpire)),
    cmd!("expireat", -3, [WRITE FAST], [KEYSPACE WRITE FAST], [], KR(1, 1, 1), "generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", Key(expireat)),
    cmd!("pexpireat", -3, [WRITE FAST], [KEYSPACE WRITE FAST], [], KR(1, 1, 1), "generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", Key(pexpireat)),
    cmd!("ttl", 2, [READONLY FAST], [KEYSPACE READ FAST], [NO_TOUCH], KR(1, 1, 1), "generic", "1.0.0", "Returns the expiration time in seconds of a key.", Key(ttl)),
    cmd!("pttl", 2, [READONLY FAST], [KEYSPACE READ FAST], [NO_TOUCH], KR(1, 1, 1), "generic", "2.6.0", "Returns the expiration time in milliseconds of a key.", Key(pttl)),
    cmd!("expiretime", 2, [READONLY FAST], [KEYSPACE READ FAST], [NO_TOUCH], KR(1, 1, 1), "generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", Key(expiretime)),
    cmd!("pexpiretime", 2, [READONLY FAST], [KEYSPACE READ FAST], [NO_TOUCH], KR(1, 1, 1), "generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", Key(pexpiretime)),
    cmd!("persist", 2, [WRITE FAST], [KEYSPACE WRITE FAST], [], KR(1, 1, 1), "generic", "2.2.0", "Removes the expiration time of a key.", Key(persist)),
    cmd!("rename", 3, [WRITE], [KEYSPACE WRITE SLOW], [], KR(1, 2, 1), "generic", "1.0.0", "Renames a key and overwrites the destination.", Key(rename)),
    cmd!("renamenx", 3, [WRITE FAST], [KEYSPACE WRITE FAST], [], KR(1, 2, 1), "generic", "1.0.0", "Renames a key only when the target key name doesn't exist.", Key(renamenx)),
    cmd!("keys", 2, [READONLY], [KEYSPACE READ SLOW DANGEROUS], [WHOLE], NK, "generic", "1.0.0", "Returns all key names that match a pattern.", Key(keys)),
    cmd!("scan", -2, [READONLY], [KEYSPACE READ SLOW], [WHOLE], NK, "generic", "2.8.0", "Iterates over the key names in the database.", Key(scan)),
    cmd!("randomkey", 1, [READONLY], [KEYSPACE READ SLOW], [WHOLE], NK, "generic", "1.0.0", "Returns a random key name from the database.", Key(randomkey)),
    cmd!("dump", 2, [READONLY], [KEYSPACE READ SLOW], [], KR(1, 1, 1), "generic", "2.6.0", "Returns a serialized representation of the value stored at a key.", Key(dump)),
    cmd!("restore", -4, [WRITE DENYOOM], [KEYSPACE WRITE SLOW DANGEROUS], [], KR(1, 1, 1), "generic", "2.6.0", "Creates a key from the serialized representation of a value.", Key(restore)),
    cmd!("copy", -3, [WRITE DENYOOM], [KEYSPACE WRITE SLOW], [], Keys::Custom(copy_keys, 1, 2, 1), "generic", "6.2.0", "Copies the value of a key to a new key.", Key(copy)),
    cmd!("move", 3, [WRITE FAST], [KEYSPACE WRITE FAST], [], Keys::Custom(move_keys, 1, 1, 1), "generic", "1.0.0", "Moves a key to another database.", Key(move_)),
    cmd!("touch", -2, [READONLY FAST], [KEYSPACE READ FAST], [], KR(1, -1, 1), "generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", Key(exists)),
    cmd!("object", -2, [], [SLOW], [NO_TOUCH], Keys::Custom(object_keys, 0, 0, 0), "generic", "2.2.3", "A container for object introspection commands.", Key(object), &[
        sub!("help", 2, [LOADING STALE], [KEYSPACE SLOW], (0, 0, 0)),
        sub!("encoding", 3, [READONLY], [KEYSPACE READ SLOW], (2, 2, 1)),
        sub!("refcount", 3, [READONLY], [KEYSPACE READ SLOW], (2, 2, 1)),
        sub!("idletime", 3, [READONLY], [KEYSPACE READ SLOW], (2, 2, 1)),
        sub!("freq", 3, [READONLY], [KEYSPACE READ SLOW], (2, 2, 1)),
    ]),
];

//! Stream consumer groups over the keyspace transaction: groups, their consumers and the
//! pending entries lists (PEL), as `sub` records under the stream's version (see
//! `stream.rs` for the tags). A group's name is written length first (u32 big-endian), so one
//! group's records never run into another's:
//! - `GROUP` ++ name → last delivered id (16 bytes) ++ entries read (i64 big-endian, -1:
//!   unknown).
//! - `CONSUMER` ++ group ++ name → the time it was last seen (ms, u64 big-endian).
//! - `PENDING` ++ group ++ id → delivery time (ms) ++ delivery count ++ the owner's name.
//! - `OWNED` ++ group ++ owner (length first) ++ id → empty: the owner's own list.
//!
//! Invariants:
//! - G1: an id has a `PENDING` record in a group exactly when it has one `OWNED` record in
//!   that group, under the consumer the `PENDING` record names; that consumer exists.
//! - G2: deleting a group deletes its consumers and both lists; deleting a consumer deletes
//!   its pending entries from both lists.

use super::stream::{self, id_bounds, prefix_bounds, tag, Entry, Header, Id};
use super::Result;
use crate::store::txn::Txn;
use crate::store::StoreError;

fn corrupt(what: &str) -> super::Error {
    StoreError::Corrupt(format!("stream group: {what}")).into()
}

/// A name, length first.
fn named(name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + name.len());
    v.extend_from_slice(&(name.len() as u32).to_be_bytes());
    v.extend_from_slice(name);
    v
}

/// Splits a length-first name off the front of `b`.
fn split_named(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    Some((b.get(4..4 + n)?, &b[4 + n..]))
}

/// A consumer group.
#[derive(Clone, Debug)]
pub struct Group {
    /// Its name.
    pub name: Vec<u8>,
    /// The last id delivered to it.
    pub last: Id,
    /// Entries it has read (Redis's `entries_read`), when known.
    pub read: Option<u64>,
}

impl Group {
    fn decode(name: &[u8], v: &[u8]) -> Result<Group> {
        if v.len() != 24 {
            return Err(corrupt("group record"));
        }
        let read = i64::from_be_bytes(v[16..24].try_into().unwrap_or_default());
        Ok(Group {
            name: name.to_vec(),
            last: Id::from_bytes(&v[..16]).unwrap_or_default(),
            read: u64::try_from(read).ok(),
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = self.last.bytes().to_vec();
        let read = self.read.map_or(-1, |r| r as i64);
        v.extend_from_slice(&read.to_be_bytes());
        v
    }
}

/// Group `name` of the stream, if it has one.
pub fn group(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    name: &[u8],
) -> Result<Option<Group>> {
    match txn.sub_get(db, key, &stream::key(h.version, tag::GROUP, &[name]))? {
        Some(v) => Ok(Some(Group::decode(name, &v)?)),
        None => Ok(None),
    }
}

/// Writes group `g`.
pub fn put_group(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &Header, g: &Group) -> Result<()> {
    let k = stream::key(h.version, tag::GROUP, &[&g.name]);
    txn.sub_put(db, key, k, Some(g.encode()))?;
    Ok(())
}

/// Every group, by name.
pub fn groups(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &Header) -> Result<Vec<Group>> {
    let (lo, hi) = prefix_bounds(h.version, tag::GROUP, &[]);
    let mut raw = Vec::new();
    txn.sub_scan(db, key, lo, hi, false, |k, v| {
        raw.push((k[9..].to_vec(), v));
        Ok(true)
    })?;
    raw.iter().map(|(n, v)| Group::decode(n, v)).collect()
}

/// Deletes every record under `tag` ++ `prefix`; how many there were.
fn delete_under(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    tag: u8,
    prefix: &[u8],
) -> Result<u64> {
    let (lo, hi) = prefix_bounds(h.version, tag, prefix);
    let mut keys = Vec::new();
    txn.sub_scan(db, key, lo, hi, false, |k, _| {
        keys.push(k.to_vec());
        Ok(true)
    })?;
    let n = keys.len() as u64;
    for k in keys {
        txn.sub_put(db, key, k, None)?;
    }
    Ok(n)
}

/// XGROUP DESTROY: deletes group `name` and all it holds (G2); whether it existed.
pub fn destroy(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &Header, name: &[u8]) -> Result<bool> {
    if group(txn, db, key, h, name)?.is_none() {
        return Ok(false);
    }
    txn.sub_put(db, key, stream::key(h.version, tag::GROUP, &[name]), None)?;
    let g = named(name);
    for t in [tag::CONSUMER, tag::PENDING, tag::OWNED] {
        delete_under(txn, db, key, h, t, &g)?;
    }
    Ok(true)
}

fn consumer_key(h: &Header, group: &[u8], name: &[u8]) -> Vec<u8> {
    stream::key(h.version, tag::CONSUMER, &[&named(group), name])
}

/// When consumer `name` of `group` was last seen, if it exists.
pub fn consumer(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    name: &[u8],
) -> Result<Option<u64>> {
    match txn.sub_get(db, key, &consumer_key(h, group, name))? {
        Some(v) => Ok(Some(u64::from_be_bytes(
            v.as_slice()
                .try_into()
                .map_err(|_| corrupt("consumer record"))?,
        ))),
        None => Ok(None),
    }
}

/// Marks consumer `name` seen at `now`, creating it if missing; whether it was created.
pub fn touch(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    name: &[u8],
    now: u64,
) -> Result<bool> {
    let created = consumer(txn, db, key, h, group, name)?.is_none();
    txn.sub_put(
        db,
        key,
        consumer_key(h, group, name),
        Some(now.to_be_bytes().to_vec()),
    )?;
    Ok(created)
}

/// XGROUP CREATECONSUMER: creates consumer `name` unless it exists; whether it did.
pub fn create_consumer(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    name: &[u8],
    now: u64,
) -> Result<bool> {
    if consumer(txn, db, key, h, group, name)?.is_some() {
        return Ok(false);
    }
    touch(txn, db, key, h, group, name, now)
}

/// Every consumer of `group` with when it was last seen, by name.
pub fn consumers(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
) -> Result<Vec<(Vec<u8>, u64)>> {
    let g = named(group);
    let (lo, hi) = prefix_bounds(h.version, tag::CONSUMER, &g);
    let skip = 9 + g.len();
    let mut out = Vec::new();
    let mut bad = false;
    txn.sub_scan(db, key, lo, hi, false, |k, v| {
        match <[u8; 8]>::try_from(v.as_slice()) {
            Ok(b) => out.push((k[skip..].to_vec(), u64::from_be_bytes(b))),
            Err(_) => bad = true,
        }
        Ok(!bad)
    })?;
    if bad {
        return Err(corrupt("consumer record"));
    }
    Ok(out)
}

/// XGROUP DELCONSUMER: deletes consumer `name` and its pending entries (G2); how many it
/// had, or `None` when it did not exist.
pub fn delete_consumer(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    name: &[u8],
) -> Result<Option<u64>> {
    if consumer(txn, db, key, h, group, name)?.is_none() {
        return Ok(None);
    }
    let ids = owned(txn, db, key, h, group, name, Id::MIN, 0)?;
    for id in &ids {
        txn.sub_put(db, key, pending_key(h, group, *id), None)?;
        txn.sub_put(db, key, owned_key(h, group, name, *id), None)?;
    }
    txn.sub_put(db, key, consumer_key(h, group, name), None)?;
    Ok(Some(ids.len() as u64))
}

/// A pending entry: delivered, not yet acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// When it was last delivered (ms).
    pub time: u64,
    /// How many times it was delivered.
    pub count: u64,
    /// The consumer that owns it.
    pub owner: Vec<u8>,
}

impl Nack {
    fn decode(v: &[u8]) -> Result<Nack> {
        if v.len() < 16 {
            return Err(corrupt("pending record"));
        }
        Ok(Nack {
            time: u64::from_be_bytes(v[..8].try_into().unwrap_or_default()),
            count: u64::from_be_bytes(v[8..16].try_into().unwrap_or_default()),
            owner: v[16..].to_vec(),
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16 + self.owner.len());
        v.extend_from_slice(&self.time.to_be_bytes());
        v.extend_from_slice(&self.count.to_be_bytes());
        v.extend_from_slice(&self.owner);
        v
    }
}

fn pending_key(h: &Header, group: &[u8], id: Id) -> Vec<u8> {
    stream::key(h.version, tag::PENDING, &[&named(group), &id.bytes()])
}

fn owned_prefix(group: &[u8], owner: &[u8]) -> Vec<u8> {
    let mut p = named(group);
    p.extend_from_slice(&named(owner));
    p
}

fn owned_key(h: &Header, group: &[u8], owner: &[u8], id: Id) -> Vec<u8> {
    stream::key(
        h.version,
        tag::OWNED,
        &[&owned_prefix(group, owner), &id.bytes()],
    )
}

/// The pending entry `id` of `group`, if any.
pub fn pending(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    id: Id,
) -> Result<Option<Nack>> {
    match txn.sub_get(db, key, &pending_key(h, group, id))? {
        Some(v) => Ok(Some(Nack::decode(&v)?)),
        None => Ok(None),
    }
}

/// Writes pending entry `id` as `nack`, moving it from `was` (its previous owner, if it had
/// one) to `nack.owner` (G1).
// (The transaction, database, key and stream come first, as in every operation here.)
#[allow(clippy::too_many_arguments)]
pub fn set_pending(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    id: Id,
    nack: &Nack,
    was: Option<&[u8]>,
) -> Result<()> {
    if let Some(old) = was {
        if old != nack.owner.as_slice() {
            txn.sub_put(db, key, owned_key(h, group, old, id), None)?;
        }
    }
    if was != Some(nack.owner.as_slice())
        && !crate::store::mutated(crate::store::MUTATE_STREAM_NO_OWNER)
    {
        txn.sub_put(
            db,
            key,
            owned_key(h, group, &nack.owner, id),
            Some(Vec::new()),
        )?;
    }
    txn.sub_put(db, key, pending_key(h, group, id), Some(nack.encode()))?;
    Ok(())
}

/// Acknowledges `id` in `group`: deletes it from both lists (G1); whether it was pending.
pub fn ack(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    id: Id,
) -> Result<bool> {
    let Some(n) = pending(txn, db, key, h, group, id)? else {
        return Ok(false);
    };
    txn.sub_put(db, key, pending_key(h, group, id), None)?;
    txn.sub_put(db, key, owned_key(h, group, &n.owner, id), None)?;
    Ok(true)
}

/// Visits `group`'s pending entries with ids in `from..=to`, in id order, until `f` returns
/// false.
// (The transaction, database, key and stream come first, as in every operation here.)
#[allow(clippy::too_many_arguments)]
pub fn walk_pending(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    from: Id,
    to: Id,
    mut f: impl FnMut(Id, Nack) -> bool,
) -> Result<()> {
    if from > to {
        return Ok(());
    }
    let g = named(group);
    let (lo, hi) = id_bounds(h.version, tag::PENDING, &g, from, to);
    let skip = 9 + g.len();
    let mut bad = None;
    txn.sub_scan(db, key, lo, hi, false, |k, v| {
        match (Id::from_bytes(&k[skip..]), Nack::decode(&v)) {
            (Some(id), Ok(n)) => Ok(f(id, n)),
            _ => {
                bad = Some(corrupt("pending record"));
                Ok(false)
            }
        }
    })?;
    bad.map_or(Ok(()), Err)
}

/// The ids consumer `owner` of `group` has pending from `from` on, at most `count` (0: all).
// (The transaction, database, key and stream come first, as in every operation here.)
#[allow(clippy::too_many_arguments)]
pub fn owned(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    owner: &[u8],
    from: Id,
    count: usize,
) -> Result<Vec<Id>> {
    let p = owned_prefix(group, owner);
    let (lo, hi) = id_bounds(h.version, tag::OWNED, &p, from, Id::MAX);
    let skip = 9 + p.len();
    let mut out = Vec::new();
    txn.sub_scan(db, key, lo, hi, false, |k, _| {
        if let Some(id) = Id::from_bytes(&k[skip..]) {
            out.push(id);
        }
        Ok(count == 0 || out.len() < count)
    })?;
    Ok(out)
}

/// Pending entries of `group` per consumer, by consumer name (only those with some).
pub fn pending_per_consumer(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
) -> Result<Vec<(Vec<u8>, u64)>> {
    let g = named(group);
    let (lo, hi) = prefix_bounds(h.version, tag::OWNED, &g);
    let skip = 9 + g.len();
    let mut out: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut bad = false;
    txn.sub_scan(db, key, lo, hi, false, |k, _| {
        match split_named(&k[skip..]) {
            Some((owner, _)) => match out.last_mut() {
                Some((o, n)) if o.as_slice() == owner => *n += 1,
                _ => out.push((owner.to_vec(), 1)),
            },
            None => bad = true,
        }
        Ok(!bad)
    })?;
    if bad {
        return Err(corrupt("owned record"));
    }
    // Owners are keyed length first; Redis lists them by name.
    out.sort();
    Ok(out)
}

/// Moves `g`'s last delivered id to `id` if it is past it, keeping its read counter as
/// Redis does.
fn advance(h: &Header, g: &mut Group, id: Id) {
    if id <= g.last {
        return;
    }
    match g.read {
        Some(r) if !stream::has_tombstones(h, id) => g.read = Some(r + 1),
        _ if h.added > 0 => g.read = stream::entries_before(h, id),
        _ => {}
    }
    g.last = id;
}

/// XREADGROUP `>`: delivers up to `count` (0: all) entries after `g`'s last delivered id to
/// consumer `owner`, recording each as pending unless `noack` (an entry another consumer had
/// pending moves to `owner`, delivered once).
// (The transaction, database, key and stream come first, as in every operation here.)
#[allow(clippy::too_many_arguments)]
pub fn deliver(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    g: &mut Group,
    owner: &[u8],
    count: usize,
    noack: bool,
) -> Result<Vec<Entry>> {
    let Some(start) = g.last.next() else {
        return Ok(Vec::new());
    };
    let entries = stream::range(txn, db, key, h, start, Id::MAX, count, false)?;
    let now = txn.now();
    for (id, _) in &entries {
        advance(h, g, *id);
        if noack {
            continue;
        }
        let was = pending(txn, db, key, h, &g.name, *id)?.map(|n| n.owner);
        let nack = Nack {
            time: now,
            count: 1,
            owner: owner.to_vec(),
        };
        set_pending(txn, db, key, h, &g.name, *id, &nack, was.as_deref())?;
    }
    if !entries.is_empty() {
        put_group(txn, db, key, h, g)?;
    }
    Ok(entries)
}

/// Redelivered entries: each id with its pairs, or `None` for an entry deleted since.
pub type History = Vec<(Id, Option<Vec<Vec<u8>>>)>;

/// XREADGROUP with an id: consumer `owner`'s own pending entries after `after`, at most
/// `count` (0: all), each redelivered (`None` for an entry deleted since).
// (The transaction, database, key and stream come first, as in every operation here.)
#[allow(clippy::too_many_arguments)]
pub fn history(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
    owner: &[u8],
    after: Id,
    count: usize,
) -> Result<History> {
    let Some(from) = after.next() else {
        return Ok(Vec::new());
    };
    let now = txn.now();
    let mut out = Vec::new();
    for id in owned(txn, db, key, h, group, owner, from, count)? {
        let e = stream::entry(txn, db, key, h, id)?;
        if e.is_some() {
            if let Some(mut n) = pending(txn, db, key, h, group, id)? {
                n.time = now;
                n.count += 1;
                let owner = n.owner.clone();
                set_pending(txn, db, key, h, group, id, &n, Some(&owner))?;
            }
        }
        out.push((id, e));
    }
    Ok(out)
}

/// Group `g`'s lag (entries not yet delivered to it), when it can be known; negative, as
/// Redis reports it, when a group was told it read more than was ever added.
pub fn lag(h: &Header, g: &Group) -> Option<i64> {
    let lag = |read: u64| h.added as i64 - read as i64;
    if h.added == 0 {
        return Some(0);
    }
    if let Some(r) = g.read {
        if !stream::has_tombstones(h, g.last) {
            return Some(lag(r));
        }
    }
    stream::entries_before(h, g.last).map(lag)
}

/// Pending entries in `group`.
pub fn pending_count(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    group: &[u8],
) -> Result<u64> {
    let mut n = 0;
    walk_pending(txn, db, key, h, group, Id::MIN, Id::MAX, |_, _| {
        n += 1;
        true
    })?;
    Ok(n)
}

//! Streams over the keyspace transaction: entries, the nodes Redis trims by, and the stream's
//! counters. Consumer groups live in `stream_group.rs`.
//!
//! Layout: a metadata record (`Kind::Stream`) whose size is the stream's length and whose
//! payload holds its counters ([`Header`]), and `sub` records under its version, the byte
//! after the version naming what they are:
//! - `ENTRY` ++ id (16 bytes, big-endian ms then seq) → the entry's field-value pairs
//!   ([`encode_fields`]).
//! - `NODE` ++ the node's first id → the node: entries live and deleted in it, its size in
//!   bytes and its last id ([`Node`]). Redis keeps a stream as a tree of packed nodes of at
//!   most `stream-node-max-entries` entries; `~` trimming removes whole nodes only, so the
//!   nodes are kept to trim where Redis trims. An entry belongs to the last node whose first
//!   id is not above its own.
//! - Group records (`stream_group.rs`) under bytes of their own.
//!
//! Invariants:
//! - S1: the metadata size equals the entries present, and the sum of the nodes' live counts.
//! - S2: `first` is the lowest entry id present (0-0 when empty); every id is at most `last`,
//!   which never decreases.
//! - S3: a node whose live count reaches zero is deleted with its last entry.

use super::{typed, Result};
use crate::rdb::listpack::{int_size, item_size, LP_OVERHEAD};
pub use crate::store::encoding::stream_tag as tag;
use crate::store::encoding::{Kind, Meta};
use crate::store::txn::Txn;
use crate::store::StoreError;

/// A stream entry id: milliseconds and a sequence number, ordered as Redis orders them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

impl Id {
    /// The lowest id.
    pub const MIN: Id = Id { ms: 0, seq: 0 };
    /// The highest id.
    pub const MAX: Id = Id {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// Whether this is 0-0.
    pub fn is_zero(self) -> bool {
        self == Id::MIN
    }

    /// The 16 bytes that order as ids do.
    pub fn bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// Reads [`Id::bytes`].
    pub fn from_bytes(b: &[u8]) -> Option<Id> {
        if b.len() != 16 {
            return None;
        }
        Some(Id {
            ms: u64::from_be_bytes(b[..8].try_into().ok()?),
            seq: u64::from_be_bytes(b[8..].try_into().ok()?),
        })
    }

    /// The next id (`None` after the highest).
    pub fn next(self) -> Option<Id> {
        if self.seq < u64::MAX {
            Some(Id {
                ms: self.ms,
                seq: self.seq + 1,
            })
        } else if self.ms < u64::MAX {
            Some(Id {
                ms: self.ms + 1,
                seq: 0,
            })
        } else {
            None
        }
    }

    /// The previous id (`None` before the lowest).
    pub fn prev(self) -> Option<Id> {
        if self.seq > 0 {
            Some(Id {
                ms: self.ms,
                seq: self.seq - 1,
            })
        } else if self.ms > 0 {
            Some(Id {
                ms: self.ms - 1,
                seq: u64::MAX,
            })
        } else {
            None
        }
    }

    /// The id as Redis prints it (`ms-seq`).
    pub fn text(self) -> Vec<u8> {
        format!("{}-{}", self.ms, self.seq).into_bytes()
    }
}

/// The `sub` key of record `tag` ++ `rest` of stream `version`.
pub fn key(version: u64, tag: u8, rest: &[&[u8]]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + rest.iter().map(|r| r.len()).sum::<usize>());
    k.extend_from_slice(&version.to_be_bytes());
    k.push(tag);
    for r in rest {
        k.extend_from_slice(r);
    }
    k
}

/// The bounds `[lower, upper)` of ids `from..=to` under `tag` ++ `prefix`.
pub fn id_bounds(version: u64, tag: u8, prefix: &[u8], from: Id, to: Id) -> (Vec<u8>, Vec<u8>) {
    let lower = key(version, tag, &[prefix, &from.bytes()]);
    let mut upper = key(version, tag, &[prefix, &to.bytes()]);
    upper.push(0);
    (lower, upper)
}

/// The bounds of every record under `tag` ++ `prefix`.
pub fn prefix_bounds(version: u64, tag: u8, prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let lower = key(version, tag, &[prefix]);
    let mut upper = lower.clone();
    // The prefix's successor: its last byte below 0xFF raised, or the next tag.
    while let Some(b) = upper.pop() {
        if b < 0xFF {
            upper.push(b + 1);
            return (lower, upper);
        }
    }
    (lower, key(version.saturating_add(1), 0, &[]))
}

fn corrupt(what: &str) -> super::Error {
    StoreError::Corrupt(format!("stream: {what}")).into()
}

/// A stream's counters while a command works on it.
#[derive(Clone, Debug)]
pub struct Header {
    /// The version naming its records.
    pub version: u64,
    /// Entries present.
    pub length: u64,
    /// The last id ever added (or set by XSETID).
    pub last: Id,
    /// The first entry's id (0-0 when empty).
    pub first: Id,
    /// The highest id deleted by XDEL or XSETID (0-0: none).
    pub max_deleted: Id,
    /// Entries ever added.
    pub added: u64,
    /// The last entry's id (0-0 when empty): Redis's last valid id.
    pub top: Id,
    /// The last node's first id (0-0: no node), where the next entry goes if it has room.
    pub tail: Id,
}

const HEADER_LEN: usize = 88;

impl Header {
    fn of(m: &Meta) -> Result<Header> {
        let p = &m.payload;
        if p.len() != HEADER_LEN {
            return Err(corrupt("bad metadata payload"));
        }
        let id = |at: usize| Id::from_bytes(&p[at..at + 16]).unwrap_or_default();
        let h = Header {
            version: m.version,
            length: m.size,
            last: id(0),
            first: id(16),
            max_deleted: id(32),
            added: u64::from_be_bytes(p[48..56].try_into().unwrap_or_default()),
            top: id(56),
            tail: id(72),
        };
        let bad_ends = if h.length == 0 {
            !h.first.is_zero() || !h.top.is_zero()
        } else {
            h.first > h.top || h.top > h.last || h.tail > h.top
        };
        if bad_ends || h.added < h.length {
            return Err(corrupt("counters out of order"));
        }
        Ok(h)
    }

    fn payload(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(HEADER_LEN);
        p.extend_from_slice(&self.last.bytes());
        p.extend_from_slice(&self.first.bytes());
        p.extend_from_slice(&self.max_deleted.bytes());
        p.extend_from_slice(&self.added.to_be_bytes());
        p.extend_from_slice(&self.top.bytes());
        p.extend_from_slice(&self.tail.bytes());
        p
    }

    /// The id an XADD without one gets at `now_ms` (`None`: the last id is the highest).
    pub fn next_id(&self, now_ms: u64) -> Option<Id> {
        if self.last.ms < now_ms {
            Some(Id { ms: now_ms, seq: 0 })
        } else {
            self.last.next()
        }
    }
}

/// The stream at `key` (`None` if missing; WRONGTYPE for another type).
pub fn get(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<Header>> {
    match typed(txn, db, key, Kind::Stream)? {
        Some(m) => Ok(Some(Header::of(&m)?)),
        None => Ok(None),
    }
}

/// A new, empty stream at `key`, replacing whatever it held.
pub fn create(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Header> {
    let m = txn.create(db, key, Kind::Stream)?;
    let h = Header {
        version: m.version,
        length: 0,
        last: Id::MIN,
        first: Id::MIN,
        max_deleted: Id::MIN,
        added: 0,
        top: Id::MIN,
        tail: Id::MIN,
    };
    m.payload = h.payload();
    Ok(h)
}

/// Stores the stream's counters (an empty stream stays: streams outlive their entries).
pub fn save(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &Header) -> Result<()> {
    if let Some(m) = txn.get_mut(db, key)? {
        m.size = h.length;
        m.payload = h.payload();
    }
    Ok(())
}

/// Field-value pairs as an entry record holds them: each as a length (u32 LE) and bytes.
pub fn encode_fields(pairs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(pairs.iter().map(|p| p.len() + 4).sum());
    for p in pairs {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// Reads [`encode_fields`]; anything malformed, or not field-value pairs, is corruption.
pub fn decode_fields(b: &[u8]) -> Result<Vec<Vec<u8>>> {
    let out = decode_list(b)?;
    if out.is_empty() || out.len() % 2 != 0 {
        return Err(corrupt("entry without pairs"));
    }
    Ok(out)
}

/// Reads strings written by [`encode_fields`], any number of them.
fn decode_list(mut b: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 4 {
            return Err(corrupt("truncated entry"));
        }
        let n = u32::from_le_bytes(b[..4].try_into().unwrap_or_default()) as usize;
        if b.len() < 4 + n {
            return Err(corrupt("truncated entry"));
        }
        out.push(b[4..4 + n].to_vec());
        b = &b[4 + n..];
    }
    Ok(out)
}

/// An entry: its id and field-value pairs, flattened.
pub type Entry = (Id, Vec<Vec<u8>>);

/// Entries with ids in `from..=to`, in id order (descending when `rev`), at most `count`
/// (0: all).
// (The transaction, database, key and stream come first, as in every operation here.)
#[allow(clippy::too_many_arguments)]
pub fn range(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    from: Id,
    to: Id,
    count: usize,
    rev: bool,
) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    if from > to || h.length == 0 {
        return Ok(out);
    }
    let (lo, hi) = id_bounds(h.version, tag::ENTRY, &[], from, to);
    let mut bad = None;
    txn.sub_scan(db, key, lo, hi, rev, |k, v| {
        match (Id::from_bytes(&k[9..]), decode_fields(&v)) {
            (Some(id), Ok(f)) => out.push((id, f)),
            (None, _) => {
                bad = Some(corrupt("entry key"));
                return Ok(false);
            }
            (_, Err(e)) => {
                bad = Some(e);
                return Ok(false);
            }
        }
        Ok(count == 0 || out.len() < count)
    })?;
    match bad {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The entry `id`'s pairs, if present.
pub fn entry(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    id: Id,
) -> Result<Option<Vec<Vec<u8>>>> {
    match txn.sub_get(db, key, &key_of_entry(h.version, id))? {
        Some(v) => Ok(Some(decode_fields(&v)?)),
        None => Ok(None),
    }
}

fn key_of_entry(version: u64, id: Id) -> Vec<u8> {
    key(version, tag::ENTRY, &[&id.bytes()])
}

/// The first (or with `last`, the last) entry id present at or after `from` (before `to`).
fn edge(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    from: Id,
    to: Id,
    last: bool,
) -> Result<Option<Id>> {
    let (lo, hi) = id_bounds(h.version, tag::ENTRY, &[], from, to);
    let mut found = None;
    txn.sub_scan(db, key, lo, hi, last, |k, _| {
        found = Id::from_bytes(&k[9..]);
        Ok(false)
    })?;
    Ok(found)
}

/// The last entry id present (Redis's last valid id), if any.
pub fn last_present(h: &Header) -> Option<Id> {
    (h.length > 0).then_some(h.top)
}

/// A node of entries (see the module's notes), with what Redis's packed node would hold:
/// its size follows Redis's listpack encoding, so nodes end where Redis's end.
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// Its first id (its key).
    pub start: Id,
    /// Entries present in it.
    pub live: u64,
    /// Entries deleted from it (still counted in its size, as Redis keeps them flagged).
    pub deleted: u64,
    /// The bytes of its packed form but for the header and the two counts.
    pub body: u64,
    /// The last id added to it.
    pub last: Id,
    /// The field names of its first entry (entries with the same ones store values only).
    pub fields: Vec<Vec<u8>>,
}

impl Node {
    fn decode(k: &[u8], v: &[u8]) -> Result<Node> {
        let start = Id::from_bytes(&k[9..]).ok_or_else(|| corrupt("node key"))?;
        if v.len() < 40 {
            return Err(corrupt("node record"));
        }
        let n = |at: usize| u64::from_be_bytes(v[at..at + 8].try_into().unwrap_or_default());
        let fields = decode_list(&v[40..])?;
        Ok(Node {
            start,
            live: n(0),
            deleted: n(8),
            body: n(16),
            last: Id::from_bytes(&v[24..40]).unwrap_or_default(),
            fields,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(40);
        v.extend_from_slice(&self.live.to_be_bytes());
        v.extend_from_slice(&self.deleted.to_be_bytes());
        v.extend_from_slice(&self.body.to_be_bytes());
        v.extend_from_slice(&self.last.bytes());
        v.extend_from_slice(&encode_fields(&self.fields));
        v
    }

    /// A new node starting with entry `id` of `pairs` (not yet counted).
    pub fn starting(id: Id, pairs: &[Vec<u8>]) -> Node {
        let fields: Vec<Vec<u8>> = pairs.iter().step_by(2).cloned().collect();
        // The master entry: the field count, the fields and a zero.
        let body = int_size(fields.len() as i64)
            + fields.iter().map(|f| item_size(f)).sum::<u64>()
            + int_size(0);
        Node {
            start: id,
            body,
            last: id,
            fields,
            ..Node::default()
        }
    }

    /// Its size as Redis's packed node has it.
    pub fn bytes(&self) -> u64 {
        LP_OVERHEAD + int_size(self.live as i64) + int_size(self.deleted as i64) + self.body
    }

    /// The bytes entry `id` of `pairs` takes in this node.
    pub fn entry_size(&self, id: Id, pairs: &[Vec<u8>]) -> u64 {
        let same = pairs.len() == 2 * self.fields.len()
            && pairs
                .iter()
                .step_by(2)
                .zip(&self.fields)
                .all(|(a, b)| a == b);
        let nf = (pairs.len() / 2) as i64;
        let head = int_size(2)
            + int_size(id.ms.wrapping_sub(self.start.ms) as i64)
            + int_size(id.seq.wrapping_sub(self.start.seq) as i64);
        if same {
            head + pairs
                .iter()
                .skip(1)
                .step_by(2)
                .map(|v| item_size(v))
                .sum::<u64>()
                + int_size(nf + 3)
        } else {
            head + int_size(nf)
                + pairs.iter().map(|p| item_size(p)).sum::<u64>()
                + int_size(2 * nf + 4)
        }
    }
}

/// Writes node `n` (deleting it when nothing in it is live), keeping the header's tail.
fn put_node(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &mut Header, n: &Node) -> Result<()> {
    let k = self::key(h.version, tag::NODE, &[&n.start.bytes()]);
    if n.live > 0 {
        txn.sub_put(db, key, k, Some(n.encode()))?;
        if n.start > h.tail {
            h.tail = n.start;
        }
        return Ok(());
    }
    txn.sub_put(db, key, k, None)?;
    if n.start == h.tail {
        h.tail = node_of(txn, db, key, h.version, Id::MAX)?.map_or(Id::MIN, |t| t.start);
    }
    Ok(())
}

/// The node holding `id` (the last starting at or before it), if any.
fn node_of(txn: &mut Txn<'_>, db: usize, key: &[u8], version: u64, id: Id) -> Result<Option<Node>> {
    let (lo, hi) = id_bounds(version, tag::NODE, &[], Id::MIN, id);
    let mut found = None;
    txn.sub_scan(db, key, lo, hi, true, |k, v| {
        found = Some((k.to_vec(), v));
        Ok(false)
    })?;
    found.map(|(k, v)| Node::decode(&k, &v)).transpose()
}

/// Nodes from the first, in order, until `f` returns false.
fn nodes(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    version: u64,
    mut f: impl FnMut(Node) -> bool,
) -> Result<()> {
    let (lo, hi) = prefix_bounds(version, tag::NODE, &[]);
    let mut bad = None;
    txn.sub_scan(db, key, lo, hi, false, |k, v| match Node::decode(k, &v) {
        Ok(n) => Ok(f(n)),
        Err(e) => {
            bad = Some(e);
            Ok(false)
        }
    })?;
    bad.map_or(Ok(()), Err)
}

/// Every node, in order.
pub fn all_nodes(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &Header) -> Result<Vec<Node>> {
    let mut out = Vec::new();
    nodes(txn, db, key, h.version, |n| {
        out.push(n);
        true
    })?;
    Ok(out)
}

/// RESTORE: writes a node and its live entries as they were (the stream's counters are the
/// caller's).
pub fn restore_node(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &mut Header,
    node: &Node,
    entries: &[Entry],
) -> Result<()> {
    put_node(txn, db, key, h, node)?;
    for (id, pairs) in entries {
        txn.sub_put(
            db,
            key,
            key_of_entry(h.version, *id),
            Some(encode_fields(pairs)),
        )?;
    }
    Ok(())
}

/// Nodes in the stream (`XINFO STREAM`'s radix-tree-keys).
pub fn node_count(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &Header) -> Result<u64> {
    let mut n = 0;
    nodes(txn, db, key, h.version, |_| {
        n += 1;
        true
    })?;
    Ok(n)
}

/// Node limits: `stream-node-max-entries` and `stream-node-max-bytes` (0: no limit).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Entries (live and deleted) a node takes.
    pub entries: u64,
    /// Bytes a node takes.
    pub bytes: u64,
}

/// Appends entry `id` (above the last id) with `pairs`, counting it as added.
pub fn append(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &mut Header,
    id: Id,
    pairs: &[Vec<u8>],
    limits: Limits,
) -> Result<()> {
    let size: u64 = pairs.iter().map(|p| p.len() as u64).sum();
    // Redis's packed node: a new one once the last is full by bytes (its size and the new
    // entry's raw bytes) or by entries, live and deleted.
    let max_bytes = if limits.bytes == 0 || limits.bytes > 1 << 30 {
        1 << 30
    } else {
        limits.bytes
    };
    let tail = if h.tail.is_zero() {
        None
    } else {
        let k = self::key(h.version, tag::NODE, &[&h.tail.bytes()]);
        match txn.sub_get(db, key, &k)? {
            Some(v) => Some(Node::decode(&k, &v)?),
            None => return Err(corrupt("the tail node is missing")),
        }
    };
    let mut node = match tail {
        Some(n)
            if n.bytes() + size < max_bytes
                && (limits.entries == 0 || n.live + n.deleted < limits.entries) =>
        {
            n
        }
        _ => Node::starting(id, pairs),
    };
    node.body += node.entry_size(id, pairs);
    node.live += 1;
    node.last = id;
    put_node(txn, db, key, h, &node)?;
    txn.sub_put(
        db,
        key,
        key_of_entry(h.version, id),
        Some(encode_fields(pairs)),
    )?;
    if h.length == 0 {
        h.first = id;
    }
    h.length += 1;
    h.added += 1;
    h.last = id;
    h.top = id;
    Ok(())
}

/// Deletes entry `id` if present (XDEL); whether it was. The caller fixes `first`.
fn remove(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &mut Header, id: Id) -> Result<bool> {
    let k = key_of_entry(h.version, id);
    if txn.sub_get(db, key, &k)?.is_none() {
        return Ok(false);
    }
    txn.sub_put(db, key, k, None)?;
    if let Some(mut n) = node_of(txn, db, key, h.version, id)? {
        n.live = n.live.saturating_sub(1);
        n.deleted += 1;
        put_node(txn, db, key, h, &n)?;
    }
    h.length -= 1;
    if id == h.top {
        h.top = if h.length == 0 {
            Id::MIN
        } else {
            edge(txn, db, key, h, Id::MIN, id, true)?
                .ok_or_else(|| corrupt("length without entries"))?
        };
    }
    Ok(true)
}

/// Re-reads the first entry id after deletes (S2).
fn refresh_first(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &mut Header) -> Result<()> {
    h.first = if h.length == 0 {
        Id::MIN
    } else {
        edge(txn, db, key, h, h.first, Id::MAX, false)?
            .ok_or_else(|| corrupt("length without entries"))?
    };
    Ok(())
}

/// XDEL: deletes the entries present among `ids`; how many were.
pub fn delete(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &mut Header, ids: &[Id]) -> Result<u64> {
    let mut n = 0;
    let mut first_gone = false;
    for &id in ids {
        if remove(txn, db, key, h, id)? {
            first_gone |= id == h.first;
            if id > h.max_deleted {
                h.max_deleted = id;
            }
            n += 1;
        }
    }
    if n > 0 && (first_gone || h.length == 0) {
        refresh_first(txn, db, key, h)?;
    }
    Ok(n)
}

/// How far to trim.
#[derive(Clone, Copy, Debug)]
pub enum Strategy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Keep entries from this id on.
    MinId(Id),
}

/// Trims from the oldest entry as Redis does: whole nodes while they can go; then, unless
/// `approx`, entries of the next node one by one. `limit` (0: none) caps the entries
/// removed, counted by whole nodes. Returns how many entries went.
pub fn trim(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &mut Header,
    how: Strategy,
    approx: bool,
    limit: u64,
) -> Result<u64> {
    let mut all = Vec::new();
    nodes(txn, db, key, h.version, |n| {
        all.push(n);
        true
    })?;
    let mut deleted = 0u64;
    for (i, node) in all.iter().enumerate() {
        if let Strategy::MaxLen(max) = how {
            if h.length <= max {
                break;
            }
        }
        if limit != 0 && deleted + node.live > limit {
            break;
        }
        let whole = match how {
            Strategy::MaxLen(max) => h.length - node.live >= max,
            Strategy::MinId(min) => node.last < min,
        };
        let end = all
            .get(i + 1)
            .and_then(|n| n.start.prev())
            .unwrap_or(Id::MAX);
        if whole {
            let ids = ids_in(txn, db, key, h, node.start, end, 0)?;
            for id in &ids {
                txn.sub_put(db, key, key_of_entry(h.version, *id), None)?;
            }
            put_node(
                txn,
                db,
                key,
                h,
                &Node {
                    live: 0,
                    ..node.clone()
                },
            )?;
            h.length -= ids.len() as u64;
            deleted += ids.len() as u64;
            continue;
        }
        if approx {
            break;
        }
        let mut n = node.clone();
        for id in ids_in(txn, db, key, h, node.start, end, 0)? {
            let stop = match how {
                Strategy::MaxLen(max) => h.length <= max,
                Strategy::MinId(min) => id >= min,
            };
            if stop {
                break;
            }
            txn.sub_put(db, key, key_of_entry(h.version, id), None)?;
            n.live -= 1;
            n.deleted += 1;
            h.length -= 1;
            deleted += 1;
        }
        put_node(txn, db, key, h, &n)?;
        break;
    }
    if deleted > 0 {
        refresh_first(txn, db, key, h)?;
        if h.length == 0 {
            h.top = Id::MIN;
        }
    }
    Ok(deleted)
}

/// Ids of the entries in `from..=to`, at most `count` (0: all).
fn ids_in(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    h: &Header,
    from: Id,
    to: Id,
    count: usize,
) -> Result<Vec<Id>> {
    let mut out = Vec::new();
    let (lo, hi) = id_bounds(h.version, tag::ENTRY, &[], from, to);
    txn.sub_scan(db, key, lo, hi, false, |k, _| {
        if let Some(id) = Id::from_bytes(&k[9..]) {
            out.push(id);
        }
        Ok(count == 0 || out.len() < count)
    })?;
    Ok(out)
}

/// Whether ids from `start` on may include a deleted one (Redis's tombstone check, by the
/// highest deleted id).
pub fn has_tombstones(h: &Header, start: Id) -> bool {
    if h.length == 0 || h.max_deleted.is_zero() || h.first > h.max_deleted {
        return false;
    }
    start <= h.max_deleted
}

/// The number of entries added before and up to `id` when it can be known (Redis's
/// estimate of a read counter), else `None`.
pub fn entries_before(h: &Header, id: Id) -> Option<u64> {
    let raw = |i: Id| (i.ms, i.seq);
    crate::rdb::stream::read_estimate(
        h.added,
        h.length,
        (raw(h.last), raw(h.first), raw(h.max_deleted)),
        raw(id),
    )
}

/// XSETID: moves the last id (and optionally the added count and highest deleted id).
pub fn set_last(h: &mut Header, last: Id, added: Option<u64>, max_deleted: Option<Id>) {
    h.last = last;
    if let Some(a) = added {
        h.added = a;
    }
    if let Some(m) = max_deleted {
        h.max_deleted = m;
    }
}

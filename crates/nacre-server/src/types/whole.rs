//! Whole values, read and written at once (`DUMP`, `RESTORE`): any type, in the form Redis's
//! RDB encoding carries (`rdb::value`).

use std::collections::HashMap;

use super::stream::{self, Header, Id};
use super::stream_group::{self as sg, Group, Nack};
use super::{hash, list, set, string, zset, Result};
use crate::rdb::stream::{GroupValue, Node as RawNode, NodeEntry, RawId, StreamValue};
use crate::rdb::value::Value;
use crate::store::encoding::{Hint, Kind};
use crate::store::txn::Txn;

/// The value at `key` and its expiry time (0: none), if it exists.
pub fn read(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<(Value, u64)>> {
    let Some(m) = txn.get(db, key)?.cloned() else {
        return Ok(None);
    };
    let v = match m.kind {
        Kind::String => Value::String(m.payload),
        Kind::List => match list::list(txn, db, key)? {
            Some(l) => Value::List(list::read(txn, db, key, &l, 0, l.len())?),
            None => return Ok(None),
        },
        Kind::Set => Value::Set(set::members(txn, db, key)?),
        Kind::Hash => Value::Hash(hash::fields(txn, db, key)?),
        Kind::ZSet => match zset::get(txn, db, key)? {
            Some(z) => {
                let all = zset::Query {
                    select: zset::Select::Rank(0, -1),
                    rev: false,
                    offset: 0,
                    limit: -1,
                };
                Value::ZSet(zset::select(txn, db, key, &z, &all)?)
            }
            None => return Ok(None),
        },
        Kind::Stream => match stream::get(txn, db, key)? {
            Some(h) => Value::Stream(Box::new(read_stream(txn, db, key, &h)?)),
            None => return Ok(None),
        },
    };
    Ok(Some((v, m.expire_at)))
}

/// Whether `v` holds anything (Redis refuses to restore an empty collection).
pub fn is_empty(v: &Value) -> bool {
    match v {
        Value::String(_) => false,
        Value::List(i) | Value::Set(i) => i.is_empty(),
        Value::Hash(f) => f.is_empty(),
        Value::ZSet(m) => m.is_empty(),
        // Streams outlive their entries.
        Value::Stream(_) => false,
    }
}

/// Replaces whatever `key` holds with `v` (not empty), expiring at `expire_at` (0: never).
/// A member or field named twice keeps its last value, as loading it into Redis does.
pub fn write(txn: &mut Txn<'_>, db: usize, key: &[u8], v: Value, expire_at: u64) -> Result<()> {
    match v {
        // A string's record carries its expiry as it is written.
        Value::String(s) => return string::put(txn, db, key, s, Some(expire_at), Hint::Auto),
        Value::List(items) => {
            let mut l = list::replace(txn, db, key)?;
            list::push(txn, db, key, &mut l, false, &items)?;
        }
        Value::Set(members) => {
            set::replace(txn, db, key, &members)?;
        }
        Value::Hash(fields) => {
            txn.create(db, key, Kind::Hash)?;
            let flat: Vec<Vec<u8>> = fields.into_iter().flat_map(|(f, v)| [f, v]).collect();
            hash::set(txn, db, key, &flat)?;
        }
        Value::ZSet(members) => {
            let mut last: HashMap<Vec<u8>, f64> = HashMap::new();
            for (m, s) in members {
                last.insert(m, s);
            }
            let items: Vec<(Vec<u8>, f64)> = last.into_iter().collect();
            zset::replace(txn, db, key, &items)?;
        }
        Value::Stream(st) => write_stream(txn, db, key, &st)?,
    }
    if expire_at != 0 {
        if let Some(m) = txn.get_mut(db, key)? {
            m.expire_at = expire_at;
        }
    }
    Ok(())
}

fn raw(id: Id) -> RawId {
    (id.ms, id.seq)
}

fn id(r: RawId) -> Id {
    Id { ms: r.0, seq: r.1 }
}

/// The stream at `key` as RDB carries it: its nodes, counters and groups.
fn read_stream(txn: &mut Txn<'_>, db: usize, key: &[u8], h: &Header) -> Result<StreamValue> {
    let nodes = stream::all_nodes(txn, db, key, h)?;
    let mut out = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let end = nodes
            .get(i + 1)
            .and_then(|x| x.start.prev())
            .unwrap_or(Id::MAX);
        let entries = stream::range(txn, db, key, h, n.start, end, 0, false)?;
        if entries.is_empty() {
            continue;
        }
        out.push(RawNode {
            master: raw(n.start),
            entries: entries
                .into_iter()
                .map(|(i, pairs)| NodeEntry {
                    id: raw(i),
                    deleted: false,
                    pairs,
                })
                .collect(),
        });
    }
    let mut groups = Vec::new();
    for g in sg::groups(txn, db, key, h)? {
        let mut pending = Vec::new();
        sg::walk_pending(txn, db, key, h, &g.name, Id::MIN, Id::MAX, |i, n| {
            pending.push((raw(i), n.time, n.count));
            true
        })?;
        let mut consumers = Vec::new();
        for (name, seen) in sg::consumers(txn, db, key, h, &g.name)? {
            let ids = sg::owned(txn, db, key, h, &g.name, &name, Id::MIN, 0)?;
            consumers.push((name, seen, ids.into_iter().map(raw).collect()));
        }
        groups.push(GroupValue {
            name: g.name,
            last: raw(g.last),
            read: g.read,
            pending,
            consumers,
        });
    }
    Ok(StreamValue {
        nodes: out,
        length: h.length,
        last: raw(h.last),
        first: raw(h.first),
        max_deleted: raw(h.max_deleted),
        added: h.added,
        groups,
    })
}

/// Writes stream `st` (checked by the decoder) at `key`, keeping its nodes as they were.
fn write_stream(txn: &mut Txn<'_>, db: usize, key: &[u8], st: &StreamValue) -> Result<()> {
    let mut h = stream::create(txn, db, key)?;
    h.length = st.length;
    h.last = id(st.last);
    h.first = id(st.first);
    h.max_deleted = id(st.max_deleted);
    h.added = st.added;
    h.top = st
        .nodes
        .iter()
        .flat_map(|n| n.entries.iter().filter(|e| !e.deleted))
        .next_back()
        .map_or(Id::MIN, |e| id(e.id));
    for n in &st.nodes {
        let live: Vec<stream::Entry> = n
            .entries
            .iter()
            .filter(|e| !e.deleted)
            .map(|e| (id(e.id), e.pairs.clone()))
            .collect();
        // The node as Redis packed it: its master's fields, every entry (deleted ones too)
        // counted in its size.
        let Some(first) = n.entries.first() else {
            continue;
        };
        let mut node = stream::Node::starting(id(n.master), &first.pairs);
        for e in &n.entries {
            node.body += node.entry_size(id(e.id), &e.pairs);
        }
        node.live = live.len() as u64;
        node.deleted = (n.entries.len() - live.len()) as u64;
        node.last = n.entries.last().map_or(id(n.master), |e| id(e.id));
        stream::restore_node(txn, db, key, &mut h, &node, &live)?;
    }
    stream::save(txn, db, key, &h)?;
    for g in &st.groups {
        let group = Group {
            name: g.name.clone(),
            last: id(g.last),
            read: g.read,
        };
        sg::put_group(txn, db, key, &h, &group)?;
        for (name, seen, ids) in &g.consumers {
            sg::touch(txn, db, key, &h, &g.name, name, *seen)?;
            for i in ids {
                if let Ok(at) = g.pending.binary_search_by_key(i, |p| p.0) {
                    let (_, time, count) = g.pending[at];
                    let nack = Nack {
                        time,
                        count,
                        owner: name.clone(),
                    };
                    sg::set_pending(txn, db, key, &h, &g.name, id(*i), &nack, None)?;
                }
            }
        }
    }
    Ok(())
}

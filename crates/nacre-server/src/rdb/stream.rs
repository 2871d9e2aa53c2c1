//! A stream in Redis's RDB encoding (types 15, and 19 that Redis 7.0 writes): its entries as
//! listpack nodes, its counters, and its consumer groups with their pending entries and
//! consumers. Every read checks its bounds and the node format, so damaged input is refused,
//! never half-read.

use super::listpack::{lp_decode, lp_encode};
use super::{get_len, get_string, put_len, put_string};

/// An id as (ms, seq).
pub type RawId = (u64, u64);

/// An entry of a node: its id, whether the node marks it deleted, and its pairs.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeEntry {
    /// The id.
    pub id: RawId,
    /// Marked deleted (kept in the node, not in the stream).
    pub deleted: bool,
    /// Field-value pairs, flattened.
    pub pairs: Vec<Vec<u8>>,
}

/// A node: its first (master) id and its entries.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The master id.
    pub master: RawId,
    /// Entries in id order.
    pub entries: Vec<NodeEntry>,
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupValue {
    /// Name.
    pub name: Vec<u8>,
    /// Last delivered id.
    pub last: RawId,
    /// Entries read (`None`: unknown).
    pub read: Option<u64>,
    /// Pending entries: id, delivery time (ms), delivery count.
    pub pending: Vec<(RawId, u64, u64)>,
    /// Consumers: name, seen time (ms), the ids they own.
    pub consumers: Vec<(Vec<u8>, u64, Vec<RawId>)>,
}

/// A whole stream.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamValue {
    /// Entry nodes in id order.
    pub nodes: Vec<Node>,
    /// Entries present.
    pub length: u64,
    /// Last id.
    pub last: RawId,
    /// First entry id (0-0 when empty).
    pub first: RawId,
    /// Highest deleted id.
    pub max_deleted: RawId,
    /// Entries ever added.
    pub added: u64,
    /// Groups by name.
    pub groups: Vec<GroupValue>,
}

/// A group's read count where it can be known from the stream's counters alone, as Redis
/// estimates it (`streamEstimateDistanceFromFirstEverEntry`): for a group at `id` in a stream
/// of `length` entries, `added` ever, from `first` to `last`, highest deleted `max_deleted`.
pub fn read_estimate(
    added: u64,
    length: u64,
    (last, first, max_deleted): (RawId, RawId, RawId),
    id: RawId,
) -> Option<u64> {
    if added == 0 {
        return Some(0);
    }
    if length == 0 && id <= last {
        return Some(added);
    }
    match id.cmp(&last) {
        std::cmp::Ordering::Equal => return Some(added),
        std::cmp::Ordering::Greater => return None,
        std::cmp::Ordering::Less => {}
    }
    if max_deleted == (0, 0) || max_deleted < first {
        match id.cmp(&first) {
            std::cmp::Ordering::Less => return Some(added - length),
            std::cmp::Ordering::Equal => return Some(added - length + 1),
            std::cmp::Ordering::Greater => {}
        }
    }
    None
}

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;

fn num(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// A node as a listpack: the master entry (counts and the first entry's field names), then
/// each entry as flags, id deltas, fields unless they are the master's, values and the
/// entry's element count.
fn node_listpack(n: &Node) -> Vec<u8> {
    let master_fields: Vec<Vec<u8>> = n
        .entries
        .first()
        .map(|e| e.pairs.iter().step_by(2).cloned().collect())
        .unwrap_or_default();
    let live = n.entries.iter().filter(|e| !e.deleted).count() as i64;
    let dead = n.entries.len() as i64 - live;
    let mut items = vec![num(live), num(dead), num(master_fields.len() as i64)];
    items.extend(master_fields.iter().cloned());
    items.push(num(0));
    for e in &n.entries {
        let fields: Vec<&Vec<u8>> = e.pairs.iter().step_by(2).collect();
        let same = fields.len() == master_fields.len()
            && fields.iter().zip(&master_fields).all(|(a, b)| *a == b);
        let mut flags = if same { FLAG_SAMEFIELDS } else { 0 };
        if e.deleted {
            flags |= FLAG_DELETED;
        }
        items.push(num(flags));
        items.push(num(e.id.0.wrapping_sub(n.master.0) as i64));
        items.push(num(e.id.1.wrapping_sub(n.master.1) as i64));
        let nf = fields.len() as i64;
        if same {
            items.extend(e.pairs.iter().skip(1).step_by(2).cloned());
            items.push(num(nf + 3));
        } else {
            items.push(num(nf));
            items.extend(e.pairs.iter().cloned());
            items.push(num(2 * nf + 4));
        }
    }
    lp_encode(&items)
}

fn raw_id_bytes(id: RawId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.0.to_be_bytes());
    b[8..].copy_from_slice(&id.1.to_be_bytes());
    b
}

fn raw_id_of(b: &[u8]) -> Option<RawId> {
    Some((
        u64::from_be_bytes(b.get(..8)?.try_into().ok()?),
        u64::from_be_bytes(b.get(8..16)?.try_into().ok()?),
    ))
}

/// Appends the stream as RDB type 19 (after the type byte).
pub fn encode(s: &StreamValue, out: &mut Vec<u8>) {
    put_len(out, s.nodes.len() as u64);
    for n in &s.nodes {
        put_string(out, &raw_id_bytes(n.master));
        put_string(out, &node_listpack(n));
    }
    for v in [
        s.length,
        s.last.0,
        s.last.1,
        s.first.0,
        s.first.1,
        s.max_deleted.0,
        s.max_deleted.1,
        s.added,
    ] {
        put_len(out, v);
    }
    put_len(out, s.groups.len() as u64);
    for g in &s.groups {
        put_string(out, &g.name);
        put_len(out, g.last.0);
        put_len(out, g.last.1);
        // Redis writes an unknown count as -1 through its unsigned length.
        put_len(out, g.read.unwrap_or(u64::MAX));
        put_len(out, g.pending.len() as u64);
        for (id, time, count) in &g.pending {
            out.extend_from_slice(&raw_id_bytes(*id));
            out.extend_from_slice(&time.to_le_bytes());
            put_len(out, *count);
        }
        put_len(out, g.consumers.len() as u64);
        for (name, seen, ids) in &g.consumers {
            put_string(out, name);
            out.extend_from_slice(&seen.to_le_bytes());
            put_len(out, ids.len() as u64);
            for id in ids {
                out.extend_from_slice(&raw_id_bytes(*id));
            }
        }
    }
}

fn int_of(b: &[u8]) -> Option<i64> {
    crate::num::parse_i64_strict(b)
}

/// Reads a node's listpack (Redis's integrity rules: counts, the master terminator, each
/// entry's element count, nothing left over).
fn parse_node(master: RawId, lp: &[u8]) -> Option<Node> {
    let items = lp_decode(lp)?;
    let mut it = items.into_iter();
    let next_int = |it: &mut std::vec::IntoIter<Vec<u8>>| int_of(&it.next()?);
    let live = next_int(&mut it)?;
    let dead = next_int(&mut it)?;
    let nmaster = usize::try_from(next_int(&mut it)?).ok()?;
    let mut master_fields = Vec::new();
    for _ in 0..nmaster {
        master_fields.push(it.next()?);
    }
    if next_int(&mut it)? != 0 || live < 0 || dead < 0 {
        return None;
    }
    let total = live.checked_add(dead)?;
    let mut entries = Vec::new();
    let mut seen_live = 0;
    for _ in 0..total {
        let flags = next_int(&mut it)?;
        let ms = master.0.wrapping_add(next_int(&mut it)? as u64);
        let seq = master.1.wrapping_add(next_int(&mut it)? as u64);
        let mut pairs = Vec::new();
        let expect = if flags & FLAG_SAMEFIELDS != 0 {
            for f in &master_fields {
                pairs.push(f.clone());
                pairs.push(it.next()?);
            }
            master_fields.len() as i64 + 3
        } else {
            let nf = next_int(&mut it)?;
            if nf < 0 {
                return None;
            }
            for _ in 0..nf {
                pairs.push(it.next()?);
                pairs.push(it.next()?);
            }
            2 * nf + 4
        };
        if next_int(&mut it)? != expect || pairs.is_empty() {
            return None;
        }
        let deleted = flags & FLAG_DELETED != 0;
        if !deleted {
            seen_live += 1;
        }
        entries.push(NodeEntry {
            id: (ms, seq),
            deleted,
            pairs,
        });
    }
    if it.next().is_some() || seen_live != live {
        return None;
    }
    let ordered = entries.windows(2).all(|w| w[0].id < w[1].id);
    (ordered && entries.first().is_none_or(|e| e.id >= master)).then_some(Node { master, entries })
}

fn len_at(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let (n, special, at) = get_len(b, at)?;
    (!special).then_some((n, at))
}

/// A count that the rest of the payload could back (one byte an item at least).
fn count_at(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let (n, at) = len_at(b, at)?;
    let n = usize::try_from(n).ok()?;
    (n <= b.len().saturating_sub(at)).then_some((n, at))
}

fn id_at(b: &[u8], at: usize) -> Option<(RawId, usize)> {
    let (ms, at) = len_at(b, at)?;
    let (seq, at) = len_at(b, at)?;
    Some(((ms, seq), at))
}

fn raw_at(b: &[u8], at: usize) -> Option<(RawId, usize)> {
    Some((raw_id_of(b.get(at..at + 16)?)?, at + 16))
}

fn ms_at(b: &[u8], at: usize) -> Option<(u64, usize)> {
    Some((
        u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?),
        at + 8,
    ))
}

/// Reads a stream of RDB type 15 (`v2` false) or 19 at `at`; the value and where it ends.
pub fn decode(b: &[u8], at: usize, v2: bool) -> Option<(StreamValue, usize)> {
    let (nnodes, mut at) = count_at(b, at)?;
    let mut nodes: Vec<Node> = Vec::with_capacity(nnodes.min(1024));
    for _ in 0..nnodes {
        let (key, a) = get_string(b, at)?;
        let (lp, a) = get_string(b, a)?;
        at = a;
        if key.len() != 16 {
            return None;
        }
        let node = parse_node(raw_id_of(&key)?, &lp)?;
        if nodes.last().is_some_and(|p| p.master >= node.master) || node.entries.is_empty() {
            return None;
        }
        nodes.push(node);
    }
    let (length, a) = len_at(b, at)?;
    let (last, a) = id_at(b, a)?;
    at = a;
    let live: Vec<RawId> = nodes
        .iter()
        .flat_map(|n| n.entries.iter().filter(|e| !e.deleted).map(|e| e.id))
        .collect();
    let (first, max_deleted, added) = if v2 {
        let (first, a) = id_at(b, at)?;
        let (max_deleted, a) = id_at(b, a)?;
        let (added, a) = len_at(b, a)?;
        at = a;
        (first, max_deleted, added)
    } else {
        (live.first().copied().unwrap_or((0, 0)), (0, 0), length)
    };
    // The counters must describe the entries present.
    if live.len() as u64 != length
        || live.windows(2).any(|w| w[0] >= w[1])
        || live.last().is_some_and(|l| *l > last)
        || (v2 && live.first().copied().unwrap_or((0, 0)) != first)
        || added < length
    {
        return None;
    }
    let (ngroups, a) = count_at(b, at)?;
    at = a;
    let mut groups: Vec<GroupValue> = Vec::new();
    for _ in 0..ngroups {
        let (name, a) = get_string(b, at)?;
        let (glast, a) = id_at(b, a)?;
        at = a;
        // Before 7.0 (type 15) groups had no read count: Redis estimates it at load.
        let read = if v2 {
            let (r, a) = len_at(b, at)?;
            at = a;
            i64::try_from(r).ok().and_then(|r| u64::try_from(r).ok())
        } else {
            read_estimate(added, length, (last, first, max_deleted), glast)
        };
        let (npel, a) = count_at(b, at)?;
        at = a;
        let mut pending = Vec::with_capacity(npel.min(1024));
        for _ in 0..npel {
            let (id, a) = raw_at(b, at)?;
            let (time, a) = ms_at(b, a)?;
            let (count, a) = len_at(b, a)?;
            at = a;
            pending.push((id, time, count));
        }
        pending.sort_unstable_by_key(|p| p.0);
        if pending.windows(2).any(|w| w[0].0 == w[1].0) {
            return None;
        }
        let (ncons, a) = count_at(b, at)?;
        at = a;
        let mut consumers: Vec<(Vec<u8>, u64, Vec<RawId>)> = Vec::new();
        let mut owned = 0;
        for _ in 0..ncons {
            let (cname, a) = get_string(b, at)?;
            let (seen, a) = ms_at(b, a)?;
            let (nown, a) = count_at(b, a)?;
            at = a;
            let mut ids = Vec::with_capacity(nown.min(1024));
            for _ in 0..nown {
                let (id, a) = raw_at(b, at)?;
                at = a;
                // Each id a consumer owns is pending in the group, and owned once.
                pending.binary_search_by_key(&id, |p| p.0).ok()?;
                ids.push(id);
            }
            if consumers.iter().any(|c| c.0 == cname) {
                return None;
            }
            owned += ids.len();
            consumers.push((cname, seen, ids));
        }
        let mut all: Vec<RawId> = consumers.iter().flat_map(|c| c.2.iter().copied()).collect();
        all.sort_unstable();
        if owned != pending.len() || all.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        if groups.iter().any(|g| g.name == name) {
            return None;
        }
        groups.push(GroupValue {
            name,
            last: glast,
            read,
            pending,
            consumers,
        });
    }
    Some((
        StreamValue {
            nodes,
            length,
            last,
            first,
            max_deleted,
            added,
            groups,
        },
        at,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StreamValue {
        let e = |ms, deleted, pairs: &[&str]| NodeEntry {
            id: (ms, 1),
            deleted,
            pairs: pairs.iter().map(|p| p.as_bytes().to_vec()).collect(),
        };
        StreamValue {
            nodes: vec![
                Node {
                    master: (1, 1),
                    entries: vec![
                        e(1, false, &["a", "1", "b", "x"]),
                        e(2, true, &["a", "2", "b", "y"]),
                        e(3, false, &["c", "-70000"]),
                    ],
                },
                Node {
                    master: (9, 0),
                    entries: vec![e(9, false, &["a", "5000000000"])],
                },
            ],
            length: 3,
            last: (9, 1),
            first: (1, 1),
            max_deleted: (2, 1),
            added: 4,
            groups: vec![GroupValue {
                name: b"g".to_vec(),
                last: (3, 1),
                read: Some(3),
                pending: vec![((1, 1), 1000, 2), ((3, 1), 2000, 1)],
                consumers: vec![
                    (b"alice".to_vec(), 1500, vec![(1, 1)]),
                    (b"bob".to_vec(), 2500, vec![(3, 1)]),
                    (b"carol".to_vec(), 10, vec![]),
                ],
            }],
        }
    }

    #[test]
    fn streams_round_trip() {
        let s = sample();
        let mut out = Vec::new();
        encode(&s, &mut out);
        let (back, end) = decode(&out, 0, true).expect("decodes");
        assert_eq!(end, out.len());
        assert_eq!(back, s);
    }

    #[test]
    fn damaged_streams_are_refused_or_read_whole() {
        let mut out = Vec::new();
        encode(&sample(), &mut out);
        // Every truncation is refused; every flipped byte either is refused or still gives
        // a stream whose counters agree with its entries (never a panic).
        for n in 0..out.len() {
            assert!(decode(&out[..n], 0, true).is_none_or(|(_, end)| end <= n));
        }
        for i in 0..out.len() {
            for bit in [1u8, 0x80] {
                let mut d = out.clone();
                d[i] ^= bit;
                if let Some((s, _)) = decode(&d, 0, true) {
                    let live = s
                        .nodes
                        .iter()
                        .flat_map(|n| &n.entries)
                        .filter(|e| !e.deleted)
                        .count() as u64;
                    assert_eq!(live, s.length);
                }
            }
        }
        // An owned id that is not pending, and a pending one nobody owns, are refused.
        let mut s = sample();
        s.groups[0].consumers[0].2.push((7, 7));
        let mut o = Vec::new();
        encode(&s, &mut o);
        assert!(decode(&o, 0, true).is_none());
        let mut s = sample();
        s.groups[0].consumers[1].2.clear();
        let mut o = Vec::new();
        encode(&s, &mut o);
        assert!(decode(&o, 0, true).is_none());
    }
}

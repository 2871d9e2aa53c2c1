//! How Redis keys are laid out in the engine's subtables (shared/DESIGN.md §5).
//!
//! - `meta`: one record per key. Key: namespace (4 bytes, big-endian; one per logical
//!   database incarnation, so `FLUSHDB` is one new namespace) ++ the key's 63-bit hash
//!   (8 bytes, big-endian: `SCAN` cursors are positions in hash order) ++ the key. Value: a
//!   [`Meta`]. A key longer than [`LONG_KEY`] has the long form instead: namespace ++ its
//!   hash with the top bit set ++ its SHA-256, and its record holds the key itself (the
//!   `LONG` flag); every read checks that key (K8), so neither a collision nor damage
//!   makes one key's record another's.
//! - `sub`: the members of collections. Key: the owning key's version (8 bytes, big-endian,
//!   unique for every collection ever created, never reused) ++ the member's 63-bit hash ++
//!   the member. A key deleted or overwritten leaves its old version's members unreachable;
//!   a `gc` record names the version and the background cleaner deletes them.
//!   A list's elements are keyed instead by version ++ position (8 bytes, big-endian), its
//!   metadata payload holding the ends (see [`list_ends`]). A sorted set's member records
//!   hold the score (f64 LE), and its score index sits under the same version: version ++
//!   0xFF ++ the score in order-preserving bytes ([`score_bytes`]) ++ the member, empty.
//!   A stream's records are keyed by version ++ a [`stream_tag`] byte ++ what that record
//!   names (an entry's id, a group's name...), laid out in `types/stream.rs`.
//! - `expire`: the expiry index. Key: expiry time (ms, big-endian) ++ namespace ++ key; for
//!   a long key, expiry time ++ namespace with the top bit set ++ its `meta` key's hash and
//!   digest.
//! - `gc`: what the cleaner still has to delete: a version (8 bytes) or a whole dropped
//!   namespace (4 bytes).
//! - `sys`: the server's own records (namespace table, version high-water mark, clean
//!   shutdown counts).
//!
//! Meta record: byte 0 = the type (low 3 bits), `LONG` (0x08) and flags (high nibble:
//! `HAS_EXPIRE`, `HAS_VERSION`, and the `OBJECT ENCODING` hints `HINT_RAW`, `HINT_EMB`);
//! then, if `LONG`, the key's length (u32 LE) and the key; then the expiry time (u64 LE) if
//! flagged; then version and size (u64 LE each) if flagged (collections); then the payload: a string's bytes, or type-specific
//! fields that later types (lists) append. Part 2's types fit without a format change.

use crate::store::StoreError;

/// The type of a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    String = 0,
    /// A hash.
    Hash = 1,
    /// A list.
    List = 2,
    /// A set.
    Set = 3,
    /// A sorted set.
    ZSet = 4,
    /// A stream.
    Stream = 5,
}

impl Kind {
    fn from_nibble(n: u8) -> Option<Kind> {
        Some(match n {
            0 => Kind::String,
            1 => Kind::Hash,
            2 => Kind::List,
            3 => Kind::Set,
            4 => Kind::ZSet,
            5 => Kind::Stream,
            _ => return None,
        })
    }

    /// The name `TYPE` replies with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    /// Whether the key's contents live in `sub` records under a version.
    pub fn is_collection(self) -> bool {
        self != Kind::String
    }
}

const HAS_EXPIRE: u8 = 0x10;
const HAS_VERSION: u8 = 0x20;
const HINT_RAW: u8 = 0x40;
const HINT_EMB: u8 = 0x80;
const KNOWN_FLAGS: u8 = HAS_EXPIRE | HAS_VERSION | HINT_RAW | HINT_EMB;
/// In byte 0's low nibble: the record holds its key (long form).
const LONG: u8 = 0x08;

/// Keys longer than this are named by digest in `meta` and `expire` (long form): a record's
/// key must fit a zone with its value, and Redis takes keys up to 512 MB.
pub const LONG_KEY: usize = 4096;
/// The top bit of a long key's hash in its `meta` key (hashes are 63-bit).
const LONG_HASH: u64 = 1 << 63;
/// The top bit of the namespace in a long key's `expire` key: namespaces stay below it.
pub const LONG_NS: u32 = 1 << 31;

/// Whether `key` takes the long form.
pub fn is_long(key: &[u8]) -> bool {
    key.len() > LONG_KEY
}

/// A long key's name in `meta` after the namespace: its hash with the top bit set ++ its
/// SHA-256.
fn long_name(key: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    let mut k = Vec::with_capacity(40);
    k.extend_from_slice(&(hash63(key) | LONG_HASH).to_be_bytes());
    k.extend_from_slice(&sha2::Sha256::digest(key));
    k
}

/// How a key was last written, for `OBJECT ENCODING` (Redis reports an encoding from how a
/// value was made, not only from what it holds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hint {
    /// Set whole (SET, MSET, INCR…): `int`, `embstr` or `raw` from its bytes.
    #[default]
    Auto,
    /// Strings changed in place (APPEND, SETRANGE, SETBIT, BITOP, BITFIELD): `raw`.
    /// Collections that have outgrown their compact encoding (Redis never converts back):
    /// `hashtable` or `skiplist`.
    Raw,
    /// Made from a formatted number (INCRBYFLOAT): `embstr` when short.
    Emb,
}

/// A key's metadata record, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The type.
    pub kind: Kind,
    /// Expiry time in Unix milliseconds (0: none).
    pub expire_at: u64,
    /// Collections: the version naming their `sub` records (0 for strings).
    pub version: u64,
    /// Collections: members held.
    pub size: u64,
    /// A string's value; a collection's type-specific fields.
    pub payload: Vec<u8>,
    /// How the value was written (strings) or whether it outgrew its compact encoding
    /// (collections).
    pub hint: Hint,
}

impl Meta {
    /// A string key holding `v`.
    pub fn string(v: Vec<u8>) -> Meta {
        Meta {
            kind: Kind::String,
            expire_at: 0,
            version: 0,
            size: 0,
            payload: v,
            hint: Hint::Auto,
        }
    }

    /// An empty collection of `kind` under `version`.
    pub fn collection(kind: Kind, version: u64) -> Meta {
        Meta {
            kind,
            expire_at: 0,
            version,
            size: 0,
            payload: Vec::new(),
            hint: Hint::Auto,
        }
    }

    /// Whether the key has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// The record's bytes (a key of the short form's).
    pub fn encode(&self) -> Vec<u8> {
        self.encode_for(&[])
    }

    /// The record's bytes for `key`: a long key is written into it (K8).
    pub fn encode_for(&self, key: &[u8]) -> Vec<u8> {
        let long = is_long(key);
        let extra = if long { 4 + key.len() } else { 0 };
        let mut out = Vec::with_capacity(1 + extra + 24 + self.payload.len());
        let mut b0 = self.kind as u8;
        if long {
            b0 |= LONG;
        }
        if self.expire_at != 0 {
            b0 |= HAS_EXPIRE;
        }
        if self.kind.is_collection() {
            b0 |= HAS_VERSION;
        }
        match self.hint {
            Hint::Auto => {}
            Hint::Raw => b0 |= HINT_RAW,
            Hint::Emb => b0 |= HINT_EMB,
        }
        out.push(b0);
        if long {
            out.extend_from_slice(&(key.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
        }
        if self.expire_at != 0 {
            out.extend_from_slice(&self.expire_at.to_le_bytes());
        }
        if self.kind.is_collection() {
            out.extend_from_slice(&self.version.to_le_bytes());
            out.extend_from_slice(&self.size.to_le_bytes());
        }
        out.extend_from_slice(&self.payload);
        out
    }

    /// Decodes a record; anything malformed is corruption, never a value.
    pub fn decode(b: &[u8]) -> Result<Meta, StoreError> {
        let (m, at) = Meta::decode_header(b)?;
        Ok(Meta {
            payload: b[at..].to_vec(),
            ..m
        })
    }

    /// [`Meta::decode`] of a record read into `b`, whose payload is kept in `b`'s buffer.
    pub fn decode_owned(mut b: Vec<u8>) -> Result<Meta, StoreError> {
        let (m, at) = Meta::decode_header(&b)?;
        b.drain(..at);
        Ok(Meta { payload: b, ..m })
    }

    /// The record's fields with an empty payload, and where its payload starts.
    fn decode_header(rec: &[u8]) -> Result<(Meta, usize), StoreError> {
        let mut b = rec;
        let bad = |why: &str| StoreError::Corrupt(format!("key metadata record: {why}"));
        let (&b0, rest) = b.split_first().ok_or_else(|| bad("empty"))?;
        b = rest;
        if b0 & 0xF0 & !KNOWN_FLAGS != 0 {
            return Err(bad("unknown flags"));
        }
        let kind = Kind::from_nibble(b0 & 0x07).ok_or_else(|| bad("unknown type"))?;
        if b0 & LONG != 0 {
            let (_, rest) = split_key(b).ok_or_else(|| bad("truncated key"))?;
            b = rest;
        }
        if kind.is_collection() != (b0 & HAS_VERSION != 0) {
            return Err(bad("version flag does not match the type"));
        }
        let hint = match (b0 & HINT_RAW != 0, b0 & HINT_EMB != 0) {
            (false, false) => Hint::Auto,
            (true, false) => Hint::Raw,
            (false, true) if kind == Kind::String => Hint::Emb,
            _ => return Err(bad("embstr hint on a collection, or two hints")),
        };
        let take = |b: &mut &[u8]| -> Result<u64, StoreError> {
            if b.len() < 8 {
                return Err(bad("truncated"));
            }
            let (n, rest) = b.split_at(8);
            *b = rest;
            Ok(u64::from_le_bytes(n.try_into().unwrap_or([0; 8])))
        };
        let expire_at = if b0 & HAS_EXPIRE != 0 {
            let e = take(&mut b)?;
            if e == 0 {
                return Err(bad("zero expiry time flagged"));
            }
            e
        } else {
            0
        };
        let (version, size) = if kind.is_collection() {
            (take(&mut b)?, take(&mut b)?)
        } else {
            (0, 0)
        };
        let meta = Meta {
            kind,
            expire_at,
            version,
            size,
            payload: Vec::new(),
            hint,
        };
        Ok((meta, rec.len() - b.len()))
    }
}

/// A long-form record's key and what follows it (`b` starts after byte 0).
fn split_key(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let key = b.get(4..4 + n)?;
    Some((key, &b[4 + n..]))
}

/// The key a `meta` record holds (long form), if it holds one.
pub fn record_key(rec: &[u8]) -> Option<&[u8]> {
    let (&b0, rest) = rec.split_first()?;
    if b0 & LONG == 0 {
        return None;
    }
    split_key(rest).map(|(k, _)| k)
}

/// K8: `rec`, read under `key`'s `meta` key, belongs to `key`: a long key's record holds
/// it, a short key's holds none.
pub fn check_owner(key: &[u8], rec: &[u8]) -> Result<(), StoreError> {
    let ok = match record_key(rec) {
        Some(k) => is_long(key) && k == key,
        None => !is_long(key) && rec.first().is_some_and(|b| b & LONG == 0),
    };
    if ok {
        Ok(())
    } else {
        Err(StoreError::Corrupt(
            "key metadata record: it belongs to another key".into(),
        ))
    }
}

/// The user key of `meta` record `rec` stored under `mkey`: the key's tail (short form) or
/// what the record holds (long form, whose digest it must match).
pub fn user_key<'a>(mkey: &'a [u8], rec: &'a [u8]) -> Result<&'a [u8], StoreError> {
    let bad = |why: &str| StoreError::Corrupt(format!("key metadata: {why}"));
    let (ns, h, tail) = split_meta_key(mkey).ok_or_else(|| bad("short key"))?;
    if h & LONG_HASH == 0 {
        check_owner(tail, rec)?;
        return Ok(tail);
    }
    let key = record_key(rec).ok_or_else(|| bad("a long key's record without its key"))?;
    if meta_key(ns, key) != mkey {
        return Err(bad("a long key's record holds another key"));
    }
    Ok(key)
}

/// The stable 63-bit hash that orders keys and members (FNV-1a with a 64-bit finalizer; it
/// is part of the format: changing it reorders every subtable).
pub fn hash63(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= u64::from(x);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h >> 1
}

/// A namespace's prefix of `meta` keys.
pub fn ns_prefix(ns: u32) -> [u8; 4] {
    ns.to_be_bytes()
}

/// The namespace a `meta` key is in.
pub fn ns_of(mkey: &[u8]) -> u32 {
    u32::from_be_bytes(
        mkey.get(..4)
            .and_then(|b| b.try_into().ok())
            .unwrap_or([0; 4]),
    )
}

/// The `meta` key of `key` in namespace `ns`.
pub fn meta_key(ns: u32, key: &[u8]) -> Vec<u8> {
    if is_long(key) {
        let mut k = ns.to_be_bytes().to_vec();
        k.extend_from_slice(&long_name(key));
        return k;
    }
    let mut k = Vec::with_capacity(12 + key.len());
    k.extend_from_slice(&ns.to_be_bytes());
    k.extend_from_slice(&hash63(key).to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The `meta` key where namespace `ns`'s keys of hash `h` and above start.
pub fn meta_seek(ns: u32, h: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(12);
    k.extend_from_slice(&ns.to_be_bytes());
    k.extend_from_slice(&h.to_be_bytes());
    k
}

/// A `meta` key's namespace, hash and tail: the user key, or a long key's digest (the hash
/// has its top bit set: see [`user_key`]).
pub fn split_meta_key(k: &[u8]) -> Option<(u32, u64, &[u8])> {
    if k.len() < 12 {
        return None;
    }
    let ns = u32::from_be_bytes(k[..4].try_into().ok()?);
    let h = u64::from_be_bytes(k[4..12].try_into().ok()?);
    Some((ns, h, &k[12..]))
}

/// The prefix of every `sub` record of collection `version`.
pub fn sub_prefix(version: u64) -> [u8; 8] {
    version.to_be_bytes()
}

/// The `sub` key of `member` in collection `version`.
pub fn sub_key(version: u64, member: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(16 + member.len());
    k.extend_from_slice(&version.to_be_bytes());
    k.extend_from_slice(&hash63(member).to_be_bytes());
    k.extend_from_slice(member);
    k
}

/// Where collection `version`'s members of hash `h` and above start.
pub fn sub_seek(version: u64, h: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    k.extend_from_slice(&version.to_be_bytes());
    k.extend_from_slice(&h.to_be_bytes());
    k
}

/// The end (exclusive) of collection `version`'s member records: the records after them
/// under the same version (a sorted set's score index) start with a byte of 0x80 or more.
pub fn members_end(version: u64) -> Vec<u8> {
    sub_seek(version, 1 << 63)
}

/// Where a new list's first element goes: list elements sit at positions `[head, tail)`
/// and a push moves one end by one, so 2^62 pushes fit at either end.
pub const LIST_START: u64 = 1 << 62;

/// The `sub` key of the list element at position `pos` of list `version`.
pub fn elem_key(version: u64, pos: u64) -> Vec<u8> {
    sub_seek(version, pos)
}

/// A list's ends, kept in its metadata payload (two u64 LE): elements are at `[head, tail)`.
pub fn list_ends(payload: &[u8]) -> Result<(u64, u64), StoreError> {
    let bad = || StoreError::Corrupt("list metadata: bad ends".into());
    if payload.len() != 16 {
        return Err(bad());
    }
    let head = u64::from_le_bytes(payload[..8].try_into().map_err(|_| bad())?);
    let tail = u64::from_le_bytes(payload[8..].try_into().map_err(|_| bad())?);
    if head > tail || tail >= 1 << 63 {
        return Err(bad());
    }
    Ok((head, tail))
}

/// A list's metadata payload for ends `[head, tail)`.
pub fn list_payload(head: u64, tail: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(16);
    p.extend_from_slice(&head.to_le_bytes());
    p.extend_from_slice(&tail.to_le_bytes());
    p
}

/// What the byte after a stream's version names (`types/stream.rs` lays the records out).
pub mod stream_tag {
    /// An entry.
    pub const ENTRY: u8 = 1;
    /// A node of entries.
    pub const NODE: u8 = 2;
    /// A consumer group.
    pub const GROUP: u8 = 3;
    /// A consumer.
    pub const CONSUMER: u8 = 4;
    /// A group's pending entry.
    pub const PENDING: u8 = 5;
    /// A consumer's pending entry (an index of the group's).
    pub const OWNED: u8 = 6;
}

/// The byte after the version that starts a sorted set's score index (member records have
/// a hash below 2^63 there, so a byte below 0x80).
pub const SCORE_INDEX: u8 = 0xFF;

/// A score as 8 bytes that sort as the scores do (-0 as 0, so equal scores tie on member).
pub fn score_bytes(score: f64) -> [u8; 8] {
    let s = if score == 0.0 { 0.0 } else { score };
    let b = s.to_bits();
    let k = if b >> 63 == 1 { !b } else { b | 1 << 63 };
    k.to_be_bytes()
}

/// The score index key of `member` with `score` in sorted set `version`.
pub fn score_key(version: u64, score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = score_seek(version, score);
    k.extend_from_slice(member);
    k
}

/// Where sorted set `version`'s index entries of `score` start.
pub fn score_seek(version: u64, score: f64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17 + 16);
    k.extend_from_slice(&version.to_be_bytes());
    k.push(SCORE_INDEX);
    k.extend_from_slice(&score_bytes(score));
    k
}

/// The bounds `[start, end)` of sorted set `version`'s whole score index.
pub fn score_index(version: u64) -> (Vec<u8>, Vec<u8>) {
    let mut start = version.to_be_bytes().to_vec();
    start.push(SCORE_INDEX);
    (start, version.saturating_add(1).to_be_bytes().to_vec())
}

/// A score index key's score and member.
pub fn split_score_key(k: &[u8]) -> Option<(f64, &[u8])> {
    if k.len() < 17 || k[8] != SCORE_INDEX {
        return None;
    }
    let raw = u64::from_be_bytes(k[9..17].try_into().ok()?);
    let b = if raw >> 63 == 1 {
        raw & !(1 << 63)
    } else {
        !raw
    };
    Some((f64::from_bits(b), &k[17..]))
}

/// A sorted set's metadata payload: optional bounds on its score index entries (the part
/// after version ++ 0xFF), inclusive below and exclusive above, that pops move so that walks
/// from either end start past the deleted entries. Empty: no bounds.
pub fn zset_payload(lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<u8> {
    if lo.is_none() && hi.is_none() {
        return Vec::new();
    }
    let mut p = vec![u8::from(lo.is_some()) | (u8::from(hi.is_some()) << 1)];
    for b in [lo, hi].into_iter().flatten() {
        p.extend_from_slice(&(b.len() as u32).to_le_bytes());
        p.extend_from_slice(b);
    }
    p
}

/// A sorted set's bounds from its metadata payload (see [`zset_payload`]).
pub type ZsetBounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Decodes [`zset_payload`]; anything malformed is corruption.
pub fn zset_bounds(p: &[u8]) -> Result<ZsetBounds, StoreError> {
    let bad = || StoreError::Corrupt("sorted set metadata: bad index bounds".into());
    let Some((&flags, mut rest)) = p.split_first() else {
        return Ok((None, None));
    };
    if flags == 0 || flags > 3 {
        return Err(bad());
    }
    let mut take = |present: bool| -> Result<Option<Vec<u8>>, StoreError> {
        if !present {
            return Ok(None);
        }
        if rest.len() < 4 {
            return Err(bad());
        }
        let n = u32::from_le_bytes(rest[..4].try_into().map_err(|_| bad())?) as usize;
        if rest.len() < 4 + n || n < 8 {
            return Err(bad());
        }
        let b = rest[4..4 + n].to_vec();
        rest = &rest[4 + n..];
        Ok(Some(b))
    };
    let lo = take(flags & 1 != 0)?;
    let hi = take(flags & 2 != 0)?;
    if !rest.is_empty() || matches!((&lo, &hi), (Some(l), Some(h)) if l > h) {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// A sorted-set member record's value: its score (f64 LE); anything else is corruption.
pub fn decode_score(v: &[u8]) -> Result<f64, StoreError> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| StoreError::Corrupt("sorted set member: score is not 8 bytes".into()))?;
    let s = f64::from_le_bytes(b);
    if s.is_nan() {
        return Err(StoreError::Corrupt("sorted set member: NaN score".into()));
    }
    Ok(s)
}

/// A `sub` key's member hash and member.
pub fn split_sub_key(k: &[u8]) -> Option<(u64, &[u8])> {
    if k.len() < 16 {
        return None;
    }
    let h = u64::from_be_bytes(k[8..16].try_into().ok()?);
    Some((h, &k[16..]))
}

/// The `expire` key of `key` in namespace `ns`, expiring at `at` ms.
pub fn expire_key(at: u64, ns: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(12 + key.len().min(40));
    k.extend_from_slice(&at.to_be_bytes());
    if is_long(key) {
        k.extend_from_slice(&(ns | LONG_NS).to_be_bytes());
        k.extend_from_slice(&long_name(key));
    } else {
        k.extend_from_slice(&ns.to_be_bytes());
        k.extend_from_slice(key);
    }
    k
}

/// Whom an `expire` entry names.
#[derive(Debug, PartialEq, Eq)]
pub enum Expiring<'a> {
    /// A key of the short form.
    Key(&'a [u8]),
    /// A long key, by its `meta` key (its record holds the key).
    Long(Vec<u8>),
}

/// An `expire` key's time, namespace and key.
pub fn split_expire_key(k: &[u8]) -> Option<(u64, u32, Expiring<'_>)> {
    if k.len() < 12 {
        return None;
    }
    let at = u64::from_be_bytes(k[..8].try_into().ok()?);
    let ns = u32::from_be_bytes(k[8..12].try_into().ok()?);
    if ns & LONG_NS == 0 {
        return Some((at, ns, Expiring::Key(&k[12..])));
    }
    let ns = ns & !LONG_NS;
    let mut m = ns.to_be_bytes().to_vec();
    m.extend_from_slice(&k[12..]);
    Some((at, ns, Expiring::Long(m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_every_shape() {
        let mut metas = vec![Meta::string(b"hello".to_vec()), Meta::string(Vec::new())];
        let mut h = Meta::collection(Kind::Hash, 7);
        h.size = 3;
        metas.push(h.clone());
        h.expire_at = 1_700_000_000_000;
        metas.push(h);
        let mut s = Meta::string(vec![0, 255, 13, 10]);
        s.expire_at = 5;
        metas.push(s.clone());
        s.hint = Hint::Raw;
        metas.push(s.clone());
        s.hint = Hint::Emb;
        metas.push(s);
        let long = vec![7u8; LONG_KEY + 1];
        for m in metas {
            assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
            let rec = m.encode_for(&long);
            assert_eq!(Meta::decode(&rec).unwrap(), m);
            assert_eq!(Meta::decode_owned(rec.clone()).unwrap(), m);
            assert_eq!(Meta::decode_owned(m.encode()).unwrap(), m);
            assert_eq!(record_key(&rec), Some(&long[..]));
            assert_eq!(user_key(&meta_key(9, &long), &rec).unwrap(), &long[..]);
            assert!(check_owner(&long, &rec).is_ok());
            assert!(check_owner(b"short", &rec).is_err());
            assert!(user_key(&meta_key(9, b"short"), &rec).is_err());
            let short = m.encode_for(b"short");
            assert_eq!(short, m.encode());
            assert!(check_owner(&long, &short).is_err());
            assert!(user_key(&meta_key(9, &long), &short).is_err());
        }
    }

    #[test]
    fn long_keys_are_named_by_digest_apart_from_short_ones() {
        let long = vec![b'x'; LONG_KEY + 1];
        let edge = vec![b'x'; LONG_KEY];
        let m = meta_key(3, &long);
        assert_eq!(m.len(), 4 + 8 + 32);
        let (ns, h, _) = split_meta_key(&m).unwrap();
        assert_eq!((ns, h >> 63), (3, 1));
        let em = meta_key(3, &edge);
        let (_, h, tail) = split_meta_key(&em).unwrap();
        assert_eq!((h >> 63, tail), (0, &edge[..]));
        let e = expire_key(77, 3, &long);
        assert_eq!(split_expire_key(&e), Some((77, 3, Expiring::Long(m))));
        let e = expire_key(77, 3, &edge);
        assert_eq!(
            split_expire_key(&e),
            Some((77, 3, Expiring::Key(&edge[..])))
        );
    }

    #[test]
    fn malformed_meta_is_corruption() {
        for bad in [
            &[][..],
            &[0x0F],
            &[0x05],
            &[0x01],
            &[0x21, 1, 2, 3],
            &[0x10, 1, 2],
            &[0x10, 0, 0, 0, 0, 0, 0, 0, 0],
            &[0x20],
            &[0xC0],
            &[0xA1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ] {
            assert!(Meta::decode(bad).is_err(), "{bad:?}");
            assert!(Meta::decode_owned(bad.to_vec()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn score_bytes_sort_as_scores() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -1e-300,
            0.0,
            1e-300,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(score_bytes(w[0]) < score_bytes(w[1]), "{} < {}", w[0], w[1]);
        }
        assert_eq!(score_bytes(-0.0), score_bytes(0.0));
        let lo = score_key(0, 1.0, b"a")[9..].to_vec();
        let hi = score_key(0, 2.0, b"b")[9..].to_vec();
        for (l, h) in [
            (None, None),
            (Some(&lo[..]), None),
            (None, Some(&hi[..])),
            (Some(&lo[..]), Some(&hi[..])),
        ] {
            let p = zset_payload(l, h);
            assert_eq!(
                zset_bounds(&p).unwrap(),
                (l.map(<[u8]>::to_vec), h.map(<[u8]>::to_vec))
            );
        }
        assert!(zset_bounds(&zset_payload(Some(&hi), Some(&lo))).is_err());
        assert!(zset_bounds(&[4]).is_err());
        assert!(zset_bounds(&[1, 2, 0, 0, 0, 1]).is_err());
        for s in scores {
            let k = score_key(5, s, b"m");
            assert_eq!(split_score_key(&k), Some((s, &b"m"[..])));
            let (lo, hi) = score_index(5);
            assert!(k >= lo && k < hi);
            assert!(k >= members_end(5));
        }
    }

    #[test]
    fn malformed_list_ends_and_scores_are_corruption() {
        assert_eq!(list_ends(&list_payload(5, 9)).unwrap(), (5, 9));
        for bad in [
            Vec::new(),
            vec![0; 15],
            list_payload(9, 5),
            list_payload(1, 1 << 63),
        ] {
            assert!(list_ends(&bad).is_err(), "{bad:?}");
        }
        assert_eq!(decode_score(&2.5f64.to_le_bytes()).unwrap(), 2.5);
        assert!(decode_score(&f64::NAN.to_le_bytes()).is_err());
        assert!(decode_score(&[0; 7]).is_err());
    }

    #[test]
    fn keys_split_back() {
        let k = meta_key(3, b"user:1");
        let (ns, h, key) = split_meta_key(&k).unwrap();
        assert_eq!((ns, h, key), (3, hash63(b"user:1"), &b"user:1"[..]));
        assert!(k.starts_with(&meta_seek(3, h)));
        let s = sub_key(9, b"f");
        assert_eq!(split_sub_key(&s).unwrap(), (hash63(b"f"), &b"f"[..]));
        assert!(s.starts_with(&sub_prefix(9)));
        let e = expire_key(10, 2, b"k");
        assert_eq!(
            split_expire_key(&e).unwrap(),
            (10, 2, Expiring::Key(&b"k"[..]))
        );
        assert!(hash63(b"anything") < 1 << 63);
    }
}

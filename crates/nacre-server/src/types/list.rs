//! Lists over the keyspace transaction: a metadata record holding the list's ends and one
//! `sub` record per element keyed by its position (`store/encoding.rs`). Pushes and pops
//! move an end and touch one record each; a splice moves whichever side of the change holds
//! fewer elements. Commands (`cmd/lists.rs`, SORT's STORE, the blocking pops) parse
//! arguments and write replies around these operations.

use super::{typed, Result};
use crate::store::encoding::{self, Kind, LIST_START};
use crate::store::txn::Txn;
use crate::store::StoreError;

/// A list's state while a command works on it.
pub struct List {
    /// The version naming its element records.
    pub version: u64,
    /// Position of the first element.
    pub head: u64,
    /// Position after the last element.
    pub tail: u64,
}

impl List {
    /// Elements held.
    pub fn len(&self) -> u64 {
        self.tail - self.head
    }

    /// Whether it holds no element (it is then deleted).
    pub fn is_empty(&self) -> bool {
        self.tail == self.head
    }
}

/// The list at `key` (`None` if missing; WRONGTYPE for another type).
pub fn list(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<List>> {
    let Some(m) = typed(txn, db, key, Kind::List)? else {
        return Ok(None);
    };
    let (head, tail) = encoding::list_ends(&m.payload)?;
    if tail - head != m.size {
        return Err(
            StoreError::Corrupt("list metadata: size does not match its ends".into()).into(),
        );
    }
    Ok(Some(List {
        version: m.version,
        head,
        tail,
    }))
}

/// The list at `key`, created empty if missing.
pub fn list_or_new(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<List> {
    if let Some(l) = list(txn, db, key)? {
        return Ok(l);
    }
    replace(txn, db, key)
}

/// A new, empty list at `key`, replacing whatever it held.
pub fn replace(txn: &mut Txn<'_>, db: usize, key: &[u8]) -> Result<List> {
    let m = txn.create(db, key, Kind::List)?;
    m.payload = encoding::list_payload(LIST_START, LIST_START);
    Ok(List {
        version: m.version,
        head: LIST_START,
        tail: LIST_START,
    })
}

/// Records the list's ends (deleting the key when it is empty).
pub fn save(txn: &mut Txn<'_>, db: usize, key: &[u8], l: &List) -> Result<()> {
    if l.is_empty() {
        txn.set(db, key, None)?;
    } else if let Some(m) = txn.get_mut(db, key)? {
        m.size = l.len();
        m.payload = encoding::list_payload(l.head, l.tail);
    }
    Ok(())
}

pub fn put(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    l: &List,
    pos: u64,
    v: Option<Vec<u8>>,
) -> Result<()> {
    txn.sub_put(db, key, encoding::elem_key(l.version, pos), v)?;
    Ok(())
}

pub fn at(txn: &mut Txn<'_>, db: usize, key: &[u8], l: &List, pos: u64) -> Result<Vec<u8>> {
    txn.sub_get(db, key, &encoding::elem_key(l.version, pos))?
        .ok_or_else(|| StoreError::Corrupt("list element missing inside its ends".into()).into())
}

/// Elements at positions `from..to`, in order (from the end when `reverse`), visited until
/// `f` says stop.
pub fn walk(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    l: &List,
    std::ops::Range {
        start: from,
        end: to,
    }: std::ops::Range<u64>,
    reverse: bool,
    mut f: impl FnMut(u64, Vec<u8>) -> bool,
) -> Result<()> {
    let mut expect = if reverse { to } else { from };
    let mut broken = false;
    txn.sub_scan(
        db,
        key,
        encoding::elem_key(l.version, from),
        encoding::elem_key(l.version, to),
        reverse,
        |k, v| {
            let pos = encoding::split_sub_key(k).map_or(u64::MAX, |(p, _)| p);
            // Positions inside the ends are dense: a gap is damage, never a shorter list.
            let want = if reverse { expect - 1 } else { expect };
            if pos != want {
                broken = true;
                return Ok(false);
            }
            expect = if reverse { want } else { want + 1 };
            Ok(f(pos, v))
        },
    )?;
    if broken {
        return Err(StoreError::Corrupt("list element missing inside its ends".into()).into());
    }
    Ok(())
}

/// Elements `[from, to)` by index.
pub fn read(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    l: &List,
    from: u64,
    to: u64,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity((to - from).min(1024) as usize);
    walk(
        txn,
        db,
        key,
        l,
        l.head + from..l.head + to,
        false,
        |_, v| {
            out.push(v);
            true
        },
    )?;
    if out.len() as u64 != to - from {
        return Err(StoreError::Corrupt("list element missing inside its ends".into()).into());
    }
    Ok(out)
}

pub fn push(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    l: &mut List,
    left: bool,
    items: &[Vec<u8>],
) -> Result<()> {
    for it in items {
        if left {
            l.head -= 1;
            put(txn, db, key, l, l.head, Some(it.clone()))?;
        } else {
            put(txn, db, key, l, l.tail, Some(it.clone()))?;
            l.tail += 1;
        }
    }
    save(txn, db, key, l)
}

/// Removes up to `n` elements from one end; them, in pop order.
pub fn pop(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    l: &mut List,
    left: bool,
    n: u64,
) -> Result<Vec<Vec<u8>>> {
    let n = n.min(l.len());
    let mut out = if left {
        read(txn, db, key, l, 0, n)?
    } else {
        let mut v = read(txn, db, key, l, l.len() - n, l.len())?;
        v.reverse();
        v
    };
    for _ in 0..n {
        if left {
            put(txn, db, key, l, l.head, None)?;
            l.head += 1;
        } else {
            l.tail -= 1;
            put(txn, db, key, l, l.tail, None)?;
        }
    }
    save(txn, db, key, l)?;
    out.shrink_to_fit();
    Ok(out)
}

/// Replaces the elements at indexes `[a, b)` with `ins`, moving whichever side of the
/// change holds fewer elements.
pub fn splice(
    txn: &mut Txn<'_>,
    db: usize,
    key: &[u8],
    l: &mut List,
    a: u64,
    b: u64,
    ins: Vec<Vec<u8>>,
) -> Result<()> {
    let n = l.len();
    let k = ins.len() as u64;
    if a <= n - b {
        // The right part stays; the left part and `ins` end where `b` was.
        let mut moved = read(txn, db, key, l, 0, a)?;
        moved.extend(ins);
        let new_head = l.head + b - (a + k);
        for (i, v) in moved.into_iter().enumerate() {
            put(txn, db, key, l, new_head + i as u64, Some(v))?;
        }
        for p in l.head..new_head {
            put(txn, db, key, l, p, None)?;
        }
        l.head = new_head;
    } else {
        // The left part stays; `ins` and the right part start where `a` was.
        let mut moved = ins;
        moved.extend(read(txn, db, key, l, b, n)?);
        let start = l.head + a;
        let new_tail = start + moved.len() as u64;
        for (i, v) in moved.into_iter().enumerate() {
            put(txn, db, key, l, start + i as u64, Some(v))?;
        }
        for p in new_tail..l.tail {
            put(txn, db, key, l, p, None)?;
        }
        l.tail = new_tail;
    }
    save(txn, db, key, l)
}

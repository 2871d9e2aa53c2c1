//! The lock table of pessimistic transactions: shared and exclusive locks on (subtable, key),
//! striped by key hash, with a lock timeout and deadlock detection on a wait-for graph.
//!
//! Invariants:
//! - L1: a key is held by one transaction exclusively, or by any number shared, never both;
//!   a sole shared holder may upgrade in place.
//! - L2: a transaction has wait-for edges only while it waits for a lock, naming the holders
//!   it found when it last looked; they are removed before `lock` returns.
//! - L3: a transaction that would close a cycle of edges is refused ([`LockFail::Deadlock`])
//!   instead of waiting; the others keep waiting for locks that will be released.
//! - L4: locks live only in this table, in memory: nothing about them is persisted, and a
//!   database opens with none held.
//!
//! Thread safety: each stripe's map is behind its own mutex, with a condition variable its
//! waiters sleep on; the wait-for graph has a mutex of its own, taken after a stripe's (never
//! the other way round).

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A transaction's identity in the lock table.
pub(crate) type TxnId = u64;

/// What a lock is on: a subtable and a key.
pub(crate) type LockKey = (u32, Vec<u8>);

/// A lock's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    /// Any number of transactions may hold it; no one may write the key meanwhile.
    Shared,
    /// One transaction holds it.
    Exclusive,
}

/// What `lock` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Granted {
    /// The transaction holds a lock it did not hold before.
    New,
    /// It held the key shared and now holds it exclusively.
    Upgraded,
    /// It already held the key in this mode or a stronger one.
    Held,
}

/// Why `lock` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockFail {
    /// The timeout passed; how long it waited.
    Timeout(Duration),
    /// Waiting would close a cycle of this many transactions (L3).
    Deadlock(usize),
}

/// Who holds one key.
#[derive(Default)]
struct Held {
    exclusive: bool,
    holders: Vec<TxnId>,
}

#[derive(Default)]
struct Stripe {
    map: Mutex<HashMap<LockKey, Held>>,
    released: Condvar,
}

/// How far the deadlock search follows edges (as RocksDB's deadlock_detect_depth): a longer
/// chain is taken as a deadlock.
const MAX_DEPTH: usize = 50;

/// The lock table.
pub(crate) struct LockTable {
    stripes: Box<[Stripe]>,
    hasher: std::collections::hash_map::RandomState,
    /// Wait-for edges: a waiting transaction and the holders it waits for (L2).
    waits: Mutex<HashMap<TxnId, Vec<TxnId>>>,
    next_id: AtomicU64,
}

impl LockTable {
    /// A table of `stripes` stripes.
    pub fn new(stripes: usize) -> LockTable {
        LockTable {
            stripes: (0..stripes.max(1)).map(|_| Stripe::default()).collect(),
            hasher: Default::default(),
            waits: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// A fresh transaction identity.
    pub fn next_id(&self) -> TxnId {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn stripe(&self, key: &LockKey) -> &Stripe {
        &self.stripes[(self.hasher.hash_one(key) % self.stripes.len() as u64) as usize]
    }

    /// Locks `key` for `txn` in `mode`, waiting up to `timeout` (`None`: forever) for
    /// holders to release it; with `detect`, refuses to wait where waiting would deadlock.
    pub fn lock(
        &self,
        txn: TxnId,
        key: &LockKey,
        mode: Mode,
        timeout: Option<Duration>,
        detect: bool,
    ) -> Result<Granted, LockFail> {
        let stripe = self.stripe(key);
        let start = Instant::now();
        let deadline = timeout.and_then(|t| start.checked_add(t));
        let mut map = stripe.map.lock();
        let mut waiting = false;
        let outcome = loop {
            let blockers = match map.get_mut(key) {
                None => {
                    map.insert(
                        key.clone(),
                        Held {
                            exclusive: mode == Mode::Exclusive,
                            holders: vec![txn],
                        },
                    );
                    break Ok(Granted::New);
                }
                Some(h) => match try_grant(h, txn, mode) {
                    Ok(g) => break Ok(g),
                    Err(b) => b,
                },
            };
            if detect {
                if let Some(n) = self.wait_for(txn, blockers) {
                    break Err(LockFail::Deadlock(n));
                }
                waiting = true;
            }
            let now = Instant::now();
            match deadline {
                Some(d) if now >= d => break Err(LockFail::Timeout(now - start)),
                Some(d) => {
                    stripe.released.wait_for(&mut map, d - now);
                }
                None => stripe.released.wait(&mut map),
            }
        };
        drop(map);
        if waiting {
            self.waits.lock().remove(&txn);
        }
        outcome
    }

    /// Records that `txn` waits for `blockers` (L2); if that closes a cycle, removes the
    /// edges again and returns the cycle's length.
    fn wait_for(&self, txn: TxnId, blockers: Vec<TxnId>) -> Option<usize> {
        let mut waits = self.waits.lock();
        // Breadth first from the blockers along the edges: reaching `txn` is a cycle.
        let mut seen: HashMap<TxnId, usize> = HashMap::new();
        let mut todo: VecDeque<(TxnId, usize)> = blockers.iter().map(|&b| (b, 2)).collect();
        while let Some((t, len)) = todo.pop_front() {
            if t == txn || len > MAX_DEPTH {
                waits.remove(&txn);
                return Some(len - 1);
            }
            if seen.insert(t, len).is_some() {
                continue;
            }
            if let Some(next) = waits.get(&t) {
                todo.extend(next.iter().map(|&n| (n, len + 1)));
            }
        }
        waits.insert(txn, blockers);
        None
    }

    /// Releases `txn`'s lock on `key`, waking the key's stripe.
    pub fn unlock(&self, txn: TxnId, key: &LockKey) {
        let stripe = self.stripe(key);
        let mut map = stripe.map.lock();
        if let Some(h) = map.get_mut(key) {
            h.holders.retain(|&t| t != txn);
            if h.holders.is_empty() {
                map.remove(key);
            }
        }
        drop(map);
        stripe.released.notify_all();
    }

    /// Turns `txn`'s exclusive lock on `key` back into a shared one (undoing an upgrade).
    pub fn downgrade(&self, txn: TxnId, key: &LockKey) {
        let stripe = self.stripe(key);
        let mut map = stripe.map.lock();
        if let Some(h) = map.get_mut(key) {
            if h.holders == [txn] {
                h.exclusive = false;
            }
        }
        drop(map);
        stripe.released.notify_all();
    }

    /// Keys locked, over every stripe (for tests and stats).
    pub fn held(&self) -> usize {
        self.stripes.iter().map(|s| s.map.lock().len()).sum()
    }
}

/// Grants `txn` the lock `h` in `mode` if L1 allows it, else names the holders in the way.
fn try_grant(h: &mut Held, txn: TxnId, mode: Mode) -> Result<Granted, Vec<TxnId>> {
    let mine = h.holders.contains(&txn);
    let others = || h.holders.iter().copied().filter(|&t| t != txn).collect();
    match mode {
        Mode::Shared if mine => Ok(Granted::Held),
        Mode::Shared if !h.exclusive => {
            h.holders.push(txn);
            Ok(Granted::New)
        }
        Mode::Exclusive if mine && h.exclusive => Ok(Granted::Held),
        Mode::Exclusive if h.holders.len() == 1 && mine => {
            h.exclusive = true;
            Ok(Granted::Upgraded)
        }
        Mode::Exclusive if h.holders.is_empty() => {
            h.exclusive = true;
            h.holders.push(txn);
            Ok(Granted::New)
        }
        _ => Err(others()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> LockKey {
        (0, s.as_bytes().to_vec())
    }

    #[test]
    fn shared_locks_share_and_exclusive_ones_exclude() {
        let t = LockTable::new(4);
        let none = Some(Duration::ZERO);
        assert_eq!(
            t.lock(1, &k("a"), Mode::Shared, none, true),
            Ok(Granted::New)
        );
        assert_eq!(
            t.lock(2, &k("a"), Mode::Shared, none, true),
            Ok(Granted::New)
        );
        assert!(matches!(
            t.lock(3, &k("a"), Mode::Exclusive, none, true),
            Err(LockFail::Timeout(_))
        ));
        // Two holders: neither can upgrade.
        assert!(t.lock(1, &k("a"), Mode::Exclusive, none, true).is_err());
        t.unlock(2, &k("a"));
        assert_eq!(
            t.lock(1, &k("a"), Mode::Exclusive, none, true),
            Ok(Granted::Upgraded)
        );
        assert_eq!(
            t.lock(1, &k("a"), Mode::Shared, none, true),
            Ok(Granted::Held)
        );
        assert!(t.lock(2, &k("a"), Mode::Shared, none, true).is_err());
        t.downgrade(1, &k("a"));
        assert_eq!(
            t.lock(2, &k("a"), Mode::Shared, none, true),
            Ok(Granted::New)
        );
        t.unlock(1, &k("a"));
        t.unlock(2, &k("a"));
        assert_eq!(t.held(), 0);
    }

    #[test]
    fn a_waiter_gets_the_lock_when_it_is_released() {
        let t = std::sync::Arc::new(LockTable::new(1));
        t.lock(1, &k("a"), Mode::Exclusive, None, true)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.lock(2, &k("a"), Mode::Exclusive, None, true));
        std::thread::sleep(Duration::from_millis(20));
        t.unlock(1, &k("a"));
        assert_eq!(
            h.join().unwrap_or_else(|_| panic!("waiter")),
            Ok(Granted::New)
        );
    }

    #[test]
    fn a_cycle_of_waits_is_refused_to_the_transaction_closing_it() {
        let t = std::sync::Arc::new(LockTable::new(8));
        t.lock(1, &k("a"), Mode::Exclusive, None, true)
            .unwrap_or_else(|e| panic!("{e:?}"));
        t.lock(2, &k("b"), Mode::Exclusive, None, true)
            .unwrap_or_else(|e| panic!("{e:?}"));
        t.lock(3, &k("c"), Mode::Exclusive, None, true)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let t1 = t.clone();
        let w1 = std::thread::spawn(move || t1.lock(1, &k("b"), Mode::Exclusive, None, true));
        let t2 = t.clone();
        let w2 = std::thread::spawn(move || t2.lock(2, &k("c"), Mode::Exclusive, None, true));
        while t.waits.lock().len() < 2 {
            std::thread::yield_now();
        }
        // 3 waiting for 1 closes 1 -> 2 -> 3 -> 1.
        assert_eq!(
            t.lock(3, &k("a"), Mode::Exclusive, None, true),
            Err(LockFail::Deadlock(3))
        );
        t.unlock(3, &k("c"));
        assert_eq!(
            w2.join().unwrap_or_else(|_| panic!("waiter")),
            Ok(Granted::New)
        );
        t.unlock(2, &k("b"));
        t.unlock(2, &k("c"));
        assert_eq!(
            w1.join().unwrap_or_else(|_| panic!("waiter")),
            Ok(Granted::New)
        );
        assert!(t.waits.lock().is_empty());
    }

    #[test]
    fn without_detection_a_deadlock_ends_in_a_timeout() {
        let t = LockTable::new(8);
        t.lock(1, &k("a"), Mode::Exclusive, None, false)
            .unwrap_or_else(|e| panic!("{e:?}"));
        let r = t.lock(
            2,
            &k("a"),
            Mode::Exclusive,
            Some(Duration::from_millis(30)),
            false,
        );
        match r {
            Err(LockFail::Timeout(w)) => assert!(w >= Duration::from_millis(30)),
            other => panic!("{other:?}"),
        }
    }
}

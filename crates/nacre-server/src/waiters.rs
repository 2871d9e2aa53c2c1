//! Clients parked by a blocking command, and serving them.
//!
//! Invariants:
//! - W1: a parked client is in the queue of every key it waits on, and only there; it leaves
//!   all of them at once, under the registry lock, when it is served, times out, is killed or
//!   disconnects. So it is served at most once, and a served client's reply is in its channel
//!   before anyone can see it gone.
//! - W2: a key's queue is served in the order its clients parked (Redis's order): the first
//!   client is served while the key has something; the first that finds it empty stops the
//!   key's turn. Stream readers wait for ids of their own: one left parked does not stop
//!   those behind it.
//! - W3: no lost wake-up: a client parks, then its keys are served once; any write that
//!   commits after its failed first attempt either comes before it parks (and that serving
//!   finds the data) or serves the parked client itself.
//! - Serving runs without stripe locks held by the caller (the registry lock comes first,
//!   then the served command's stripes), so it cannot deadlock with running commands.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};

use nacre_resp::Reply;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::cmd::blocking::{attempt, Op, Request};
use crate::cmd::Ctx;
use crate::shared::{now_ms, Shared};
use crate::store::txn::Ticket;

/// A reply for a parked client and the commit it waits for.
pub type Served = (Reply, Ticket);

struct Waiter {
    db: usize,
    resp: u8,
    req: Request,
    tx: oneshot::Sender<Served>,
}

#[derive(Default)]
struct Inner {
    by_key: HashMap<(usize, Vec<u8>), VecDeque<u64>>,
    waiters: HashMap<u64, Waiter>,
    next: u64,
}

impl Inner {
    fn remove(&mut self, id: u64) -> Option<Waiter> {
        let w = self.waiters.remove(&id)?;
        for k in &w.req.keys {
            let key = (w.db, k.clone());
            if let Some(q) = self.by_key.get_mut(&key) {
                q.retain(|x| *x != id);
                if q.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
        Some(w)
    }
}

/// The registry of parked clients.
#[derive(Default)]
pub struct Waiters {
    inner: Mutex<Inner>,
    parked: AtomicUsize,
}

/// A parked client's ticket to its reply.
pub struct Parked {
    /// Its id in the registry.
    pub id: u64,
    /// Where its reply arrives.
    pub rx: oneshot::Receiver<Served>,
}

impl Waiters {
    /// Clients parked now.
    pub fn count(&self) -> usize {
        self.parked.load(Ordering::Relaxed)
    }

    /// Parks a client on its request's keys (W1).
    pub fn park(&self, db: usize, resp: u8, req: Request) -> Parked {
        let (tx, rx) = oneshot::channel();
        let mut g = self.inner.lock();
        g.next += 1;
        let id = g.next;
        for k in &req.keys {
            g.by_key.entry((db, k.clone())).or_default().push_back(id);
        }
        g.waiters.insert(id, Waiter { db, resp, req, tx });
        self.parked.fetch_add(1, Ordering::Relaxed);
        Parked { id, rx }
    }

    /// Takes a client out (timeout, kill, disconnect); false when it was served already
    /// (its reply is then in its channel).
    pub fn unpark(&self, id: u64) -> bool {
        let gone = self.inner.lock().remove(id).is_some();
        if gone {
            self.parked.fetch_sub(1, Ordering::Relaxed);
        }
        gone
    }

    /// Serves clients parked on any key (after a write that changed whole databases).
    pub fn serve_all(&self, shared: &Shared) {
        if self.count() == 0 {
            return;
        }
        let keys: Vec<(usize, Vec<u8>)> = self.inner.lock().by_key.keys().cloned().collect();
        self.serve(shared, &keys);
    }

    /// Serves clients parked on `keys` (after a write to them), and on the keys those
    /// serves write in turn (a BLMOVE's destination), in parking order (W2).
    pub fn serve<K: AsRef<[u8]>>(&self, shared: &Shared, keys: &[(usize, K)]) {
        // I1 (store/txn.rs): while the engine rebuilds its index, a pop would walk records;
        // the server serves every parked client once it is done.
        if self.count() == 0 || shared.store.db.rebuilding() {
            return;
        }
        let mut g = self.inner.lock();
        let mut ready: VecDeque<(usize, Vec<u8>)> = keys
            .iter()
            .map(|(db, k)| (*db, k.as_ref().to_vec()))
            .filter(|k| g.by_key.contains_key(k))
            .collect();
        while let Some(key) = ready.pop_front() {
            let queue: Vec<u64> = g
                .by_key
                .get(&key)
                .map(|q| q.iter().copied().collect())
                .unwrap_or_default();
            for id in queue {
                let Some(w) = g.waiters.get(&id) else {
                    continue;
                };
                let (db, resp, req) = (w.db, w.resp, w.req.clone());
                let Some((reply, ticket)) = serve_one(shared, db, resp, &req, &key.1) else {
                    if req.op.others_may_pass() {
                        continue;
                    }
                    break;
                };
                if let Some(w) = g.remove(id) {
                    self.parked.fetch_sub(1, Ordering::Relaxed);
                    let _ = w.tx.send((reply, ticket));
                }
                if let Op::Move { dst, .. } = &req.op {
                    let d = (db, dst.clone());
                    if g.by_key.contains_key(&d) && !ready.contains(&d) {
                        ready.push_back(d);
                    }
                }
            }
        }
    }
}

/// Runs a parked request on one key that a write made ready: its reply and ticket, or
/// `None` when the key has nothing (or no longer holds the right type: Redis leaves the
/// client parked then).
fn serve_one(shared: &Shared, db: usize, resp: u8, req: &Request, key: &[u8]) -> Option<Served> {
    let mut locked: Vec<(usize, &[u8])> = vec![(db, key)];
    if let Op::Move { dst, .. } = &req.op {
        locked.push((db, dst));
    }
    let mut txn = shared.store.txn(&locked, now_ms());
    if shared.notify_flags() != 0 && shared.pubsub.anyone() {
        txn.record_events();
    }
    let mut ctx = Ctx {
        txn: &mut txn,
        db,
        shared,
        resp,
        every_key: true,
        script: false,
    };
    let out = attempt(&mut ctx, req, &[key.to_vec()]);
    match out {
        Ok(Some(reply)) => {
            let raised = txn.take_raised(0);
            let changed = crate::cmd::tracking::changed(shared, &txn);
            let t = txn.commit();
            crate::notify::publish(shared, raised, t.0);
            crate::cmd::tracking::invalidate(shared, &changed, 0, t.0);
            Some((reply, t))
        }
        // As Redis: a move whose source has an element but whose destination holds another
        // type answers the error (nothing moves); a source of another type leaves the client
        // parked.
        Err(e) if matches!(req.op, Op::Move { .. }) && source_is_list(&mut txn, db, key) => {
            let t = txn.read_ticket();
            Some((e, t))
        }
        // A group reader whose stream or group is gone is told so.
        Err(e) if matches!(req.op, Op::XRead { group: Some(_), .. }) => {
            let t = txn.read_ticket();
            Some((e, t))
        }
        _ => None,
    }
}

fn source_is_list(txn: &mut crate::store::Txn<'_>, db: usize, key: &[u8]) -> bool {
    txn.get(db, key)
        .ok()
        .flatten()
        .is_some_and(|m| m.kind == crate::store::Kind::List)
}

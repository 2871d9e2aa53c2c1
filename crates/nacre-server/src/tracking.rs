//! Client-side caching (`CLIENT TRACKING`, Redis 7.0's `tracking.c`): which clients may
//! have cached which keys, and the invalidation messages sent when those keys change.
//!
//! Invariants:
//! - T1: a key is in the table with a client's id from the read that tracked it until the
//!   first write to it after that read (or a flush), which sends that client one
//!   invalidation and takes the id out (one message per read, as Redis).
//! - T2: an invalidation is queued once its write's commit is queued, with that commit's
//!   ticket, so it reaches the client after the write is durable and never before a reply
//!   the client waits for (the pub/sub queue's P2).
//! - T3: broadcast clients are told about every write to a key under one of their prefixes
//!   (every key without prefixes); their keys are not remembered.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nacre_resp::Reply;
use parking_lot::Mutex;

use crate::pubsub::{Message, Subscriber};

/// The channel RESP2 clients read invalidations on, through a redirect.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// A tracking client's settings.
#[derive(Clone)]
pub struct Tracked {
    /// Where its messages go: its own queue, or (redirected) the other client's.
    pub sink: Subscriber,
    /// Its own queue (for `tracking-redir-broken`).
    pub own: Subscriber,
    /// The client it redirects to (0: none).
    pub redirect: u64,
    /// The redirect target's protocol, or its own.
    pub resp: u8,
    /// BCAST.
    pub bcast: bool,
    /// OPTIN / OPTOUT.
    pub optin: bool,
    /// OPTOUT.
    pub optout: bool,
    /// NOLOOP: not told about its own writes.
    pub noloop: bool,
    /// BCAST prefixes (none: every key).
    pub prefixes: Vec<Vec<u8>>,
}

#[derive(Default)]
struct Inner {
    keys: HashMap<Vec<u8>, HashSet<u64>>,
    clients: HashMap<u64, Tracked>,
}

/// The tracking table.
#[derive(Default)]
pub struct Tracking {
    inner: Mutex<Inner>,
    active: AtomicUsize,
}

impl Tracking {
    /// Whether any client tracks (a cheap check before any work).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    /// Clients in tracking mode.
    pub fn clients(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Keys in the table.
    pub fn keys(&self) -> usize {
        self.inner.lock().keys.len()
    }

    /// Client ids in the table, over all keys.
    pub fn items(&self) -> usize {
        self.inner.lock().keys.values().map(HashSet::len).sum()
    }

    /// Prefixes of broadcast clients, counted once each.
    pub fn prefixes(&self) -> usize {
        let g = self.inner.lock();
        let set: HashSet<&Vec<u8>> = g
            .clients
            .values()
            .filter(|c| c.bcast)
            .flat_map(|c| &c.prefixes)
            .collect();
        set.len()
    }

    /// Turns tracking on for client `id` (replacing its settings).
    pub fn enable(&self, id: u64, t: Tracked) {
        if self.inner.lock().clients.insert(id, t).is_none() {
            self.active.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Turns tracking off for client `id` (its ids in the table are dropped lazily).
    pub fn disable(&self, id: u64) {
        if self.inner.lock().clients.remove(&id).is_some() {
            self.active.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Client `id`'s settings, if it tracks.
    pub fn get(&self, id: u64) -> Option<Tracked> {
        self.inner.lock().clients.get(&id).cloned()
    }

    /// Remembers that client `id` read `keys` (T1).
    pub fn remember(&self, id: u64, keys: &[Vec<u8>]) {
        let mut g = self.inner.lock();
        for k in keys {
            g.keys.entry(k.clone()).or_default().insert(id);
        }
    }

    /// Keys `keys` were written by client `writer` (0: the server) in the commit `ticket`:
    /// tells who tracked them (T1, T3).
    pub fn invalidate(
        &self,
        keys: &[Vec<u8>],
        writer: u64,
        ticket: u64,
        live: &dyn Fn(u64) -> bool,
    ) {
        if !self.active() || keys.is_empty() {
            return;
        }
        let mut per: Vec<(u64, Vec<Vec<u8>>)> = Vec::new();
        let mut g = self.inner.lock();
        for k in keys {
            if let Some(ids) = g.keys.remove(k) {
                for id in ids {
                    // Ids of clients that stopped tracking, or track by prefix now, are left
                    // over from earlier reads: skipped, as Redis skips them.
                    if g.clients.get(&id).is_some_and(|c| !c.bcast) {
                        match per.iter_mut().find(|(i, _)| *i == id) {
                            Some((_, ks)) => ks.push(k.clone()),
                            None => per.push((id, vec![k.clone()])),
                        }
                    }
                }
            }
        }
        // Broadcast clients: one message per prefix (in prefix order, as Redis groups them),
        // or one for all keys without prefixes.
        let mut bcast: Vec<(u64, Vec<Vec<u8>>)> = Vec::new();
        for (id, c) in &g.clients {
            if !c.bcast {
                continue;
            }
            let mut ps = c.prefixes.clone();
            ps.sort();
            for p in ps {
                let mine: Vec<Vec<u8>> =
                    keys.iter().filter(|k| k.starts_with(&p)).cloned().collect();
                if !mine.is_empty() {
                    bcast.push((*id, mine));
                }
            }
        }
        for (id, ks) in bcast {
            let Some(c) = g.clients.get(&id) else {
                continue;
            };
            if c.noloop && id == writer {
                continue;
            }
            send(c, Some(ks), ticket, live);
        }
        // Tracked reads: one message per key, as Redis sends them.
        for (id, ks) in per {
            let Some(c) = g.clients.get(&id) else {
                continue;
            };
            if c.noloop && id == writer {
                continue;
            }
            for k in ks {
                send(c, Some(vec![k]), ticket, live);
            }
        }
    }

    /// Keeps the table within `max` keys (0: no limit), invalidating keys taken out, as
    /// Redis's `tracking-table-max-keys` does.
    pub fn limit(&self, max: usize, ticket: u64, live: &dyn Fn(u64) -> bool) {
        if max == 0 || !self.active() {
            return;
        }
        let mut g = self.inner.lock();
        while g.keys.len() > max {
            let Some(k) = g.keys.keys().next().cloned() else {
                break;
            };
            let ids = g.keys.remove(&k).unwrap_or_default();
            for id in ids {
                if let Some(c) = g.clients.get(&id).filter(|c| !c.bcast) {
                    send(c, Some(vec![k.clone()]), ticket, live);
                }
            }
        }
    }

    /// A flush: every tracking client is told to drop everything; the table empties.
    pub fn flush(&self, ticket: u64, live: &dyn Fn(u64) -> bool) {
        let mut g = self.inner.lock();
        g.keys.clear();
        for c in g.clients.values() {
            send(c, None, ticket, live);
        }
    }
}

fn push(to: &Subscriber, reply: Reply, ticket: u64) {
    let m = Message {
        pattern: None,
        channel: CHANNEL.to_vec(),
        payload: Vec::new(),
        ticket,
        push: Some(reply),
    };
    let _ = crate::pubsub::deliver(to, Arc::new(m));
}

/// Sends one invalidation (`None`: everything) the way the client reads them: a RESP3 push,
/// or a message on [`CHANNEL`] to the client it redirects to.
fn send(c: &Tracked, keys: Option<Vec<Vec<u8>>>, ticket: u64, live: &dyn Fn(u64) -> bool) {
    if c.redirect != 0 && !live(c.redirect) {
        if c.own.info.resp.load(Ordering::Relaxed) > 2 {
            push(
                &c.own,
                Reply::Push(vec![
                    Reply::Bulk(b"tracking-redir-broken".to_vec()),
                    Reply::Integer(c.redirect as i64),
                ]),
                ticket,
            );
        }
        return;
    }
    let body = match keys {
        Some(ks) => Reply::Array(ks.into_iter().map(Reply::Bulk).collect()),
        None => Reply::Nil,
    };
    let resp = c.sink.info.resp.load(Ordering::Relaxed);
    let reply = if resp > 2 {
        Reply::Push(vec![Reply::Bulk(b"invalidate".to_vec()), body])
    } else if c.redirect != 0 && c.sink.info.subs.load(Ordering::Relaxed) > 0 {
        Reply::Push(vec![
            Reply::Bulk(b"message".to_vec()),
            Reply::Bulk(CHANNEL.to_vec()),
            body,
        ])
    } else {
        return;
    };
    push(&c.sink, reply, ticket);
}

//! Pub/sub: who listens to which channel or pattern, and delivering messages.
//!
//! Invariants:
//! - P1: a client is in the registry under a channel (pattern) exactly while its own
//!   subscription set holds it; the two change together on the client's task, and the
//!   client leaves every entry when it closes.
//! - P2: a message reaches a subscriber's queue in publish order, with the ticket of the
//!   write it reports (0 for PUBLISH), so a keyspace event is sent only once its write is
//!   durable and never ahead of a reply the client is still waiting for.
//! - P3: a subscriber that does not read is not buffered without bound: when the messages
//!   queued for it pass [`LIMIT`] bytes it is disconnected, as Redis's pubsub output-buffer
//!   limit (32 MiB hard) does.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::mpsc;

use crate::glob::glob_match;
use crate::shared::ClientInfo;

/// Message bytes queued for one subscriber before it is disconnected (P3).
pub const LIMIT: usize = 32 << 20;

/// One message as published.
#[derive(Debug)]
pub struct Message {
    /// The pattern it matched (`pmessage`), if delivered through one.
    pub pattern: Option<Vec<u8>>,
    /// The channel.
    pub channel: Vec<u8>,
    /// The payload.
    pub payload: Vec<u8>,
    /// The commit it reports (0: none).
    pub ticket: u64,
    /// A message of its own to send instead (client-side caching's invalidations).
    pub push: Option<nacre_resp::Reply>,
}

impl Message {
    /// What it counts against a subscriber's limit.
    pub fn size(&self) -> usize {
        64 + self.pattern.as_ref().map_or(0, Vec::len) + self.channel.len() + self.payload.len()
    }
}

/// A subscribed connection's two ends of its message channel.
pub type Inbox = (
    mpsc::UnboundedSender<Arc<Message>>,
    mpsc::UnboundedReceiver<Arc<Message>>,
);

/// A subscriber's end: where its messages go, and the client to disconnect when it lags.
#[derive(Clone)]
pub struct Subscriber {
    /// Its messages.
    pub tx: mpsc::UnboundedSender<Arc<Message>>,
    /// The client.
    pub info: Arc<ClientInfo>,
}

#[derive(Default)]
struct Inner {
    channels: HashMap<Vec<u8>, HashMap<u64, Subscriber>>,
    patterns: HashMap<Vec<u8>, HashMap<u64, Subscriber>>,
}

/// The registry.
#[derive(Default)]
pub struct PubSub {
    inner: RwLock<Inner>,
}

/// Queues `m` for `s` (P2), disconnecting a subscriber past [`LIMIT`] (P3); false if it
/// could not take it.
pub fn deliver(s: &Subscriber, m: Arc<Message>) -> bool {
    let size = m.size();
    let queued = s.info.pubsub_bytes.fetch_add(size, Ordering::Relaxed) + size;
    if queued > LIMIT {
        s.info.pubsub_bytes.fetch_sub(size, Ordering::Relaxed);
        if !s.info.killed.load(Ordering::Relaxed) {
            tracing::warn!(client = %s.info.addr, "disconnecting a subscriber with more than 32 MiB of messages unread");
        }
        s.info.kill();
        return false;
    }
    if s.tx.send(m).is_err() {
        s.info.pubsub_bytes.fetch_sub(size, Ordering::Relaxed);
        return false;
    }
    true
}

impl PubSub {
    /// Adds a channel (or pattern) subscription.
    pub fn subscribe(&self, pattern: bool, name: &[u8], id: u64, sub: Subscriber) {
        let mut g = self.inner.write();
        let map = if pattern {
            &mut g.patterns
        } else {
            &mut g.channels
        };
        map.entry(name.to_vec()).or_default().insert(id, sub);
    }

    /// Removes a channel (or pattern) subscription.
    pub fn unsubscribe(&self, pattern: bool, name: &[u8], id: u64) {
        let mut g = self.inner.write();
        let map = if pattern {
            &mut g.patterns
        } else {
            &mut g.channels
        };
        if let Some(m) = map.get_mut(name) {
            m.remove(&id);
            if m.is_empty() {
                map.remove(name);
            }
        }
    }

    /// How many clients a message on `channel` would reach now.
    pub fn receivers(&self, channel: &[u8]) -> i64 {
        let g = self.inner.read();
        let direct = g.channels.get(channel).map_or(0, |s| s.len());
        let by_pattern: usize = g
            .patterns
            .iter()
            .filter(|(p, _)| glob_match(p, channel, false))
            .map(|(_, s)| s.len())
            .sum();
        (direct + by_pattern) as i64
    }

    /// Publishes `payload` on `channel`; the number of clients it reached.
    pub fn publish(&self, channel: &[u8], payload: &[u8], ticket: u64) -> i64 {
        let g = self.inner.read();
        let mut n = 0;
        if let Some(subs) = g.channels.get(channel) {
            let m = Arc::new(Message {
                pattern: None,
                channel: channel.to_vec(),
                payload: payload.to_vec(),
                ticket,
                push: None,
            });
            for s in subs.values() {
                n += i64::from(deliver(s, m.clone()));
            }
        }
        for (p, subs) in &g.patterns {
            if glob_match(p, channel, false) {
                let m = Arc::new(Message {
                    pattern: Some(p.clone()),
                    channel: channel.to_vec(),
                    payload: payload.to_vec(),
                    ticket,
                    push: None,
                });
                for s in subs.values() {
                    n += i64::from(deliver(s, m.clone()));
                }
            }
        }
        n
    }

    /// Whether anyone listens at all (publishing keyspace events costs nothing otherwise).
    pub fn anyone(&self) -> bool {
        let g = self.inner.read();
        !g.channels.is_empty() || !g.patterns.is_empty()
    }

    /// Active channels matching `pattern` (all when `None`).
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let g = self.inner.read();
        g.channels
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of `channel` (patterns not counted).
    pub fn numsub(&self, channel: &[u8]) -> i64 {
        self.inner
            .read()
            .channels
            .get(channel)
            .map_or(0, |m| m.len() as i64)
    }

    /// Distinct patterns subscribed to.
    pub fn numpat(&self) -> i64 {
        self.inner.read().patterns.len() as i64
    }
}

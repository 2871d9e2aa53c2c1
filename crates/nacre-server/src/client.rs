//! One connection's state: database, protocol, authentication, transaction and watches.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::shared::{ClientInfo, Shared};

/// A watched key and what it was when watched.
pub struct WatchedKey {
    /// Database.
    pub db: usize,
    /// Key.
    pub key: Vec<u8>,
    /// Its watch epoch when watched.
    pub epoch: u64,
    /// Whether it existed (unexpired) when watched: its expiry since aborts `EXEC`.
    pub existed: bool,
}

/// A connection's state.
pub struct Client {
    /// What other clients see of it.
    pub info: Arc<ClientInfo>,
    /// Selected database.
    pub db: usize,
    /// Protocol version (2 or 3).
    pub resp: u8,
    /// Whether it has authenticated (or needs not).
    pub authed: bool,
    /// The user it runs as, with the users' generation it was read at (ACL A2).
    pub acl_user: Option<(u64, std::sync::Arc<crate::acl::User>)>,
    /// `CLIENT CACHING` was given for the next command.
    pub tracking_caching: bool,
    /// `REPLCONF listening-port` (a replica about to `PSYNC`).
    pub repl_port: u16,
    /// The address it announces (`REPLCONF ip-address`), if any.
    pub repl_ip: Option<String>,
    /// Commands queued by `MULTI`.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A queued command was refused: `EXEC` aborts.
    pub multi_failed: bool,
    /// Watched keys.
    pub watched: Vec<WatchedKey>,
    /// Channels subscribed to.
    pub subs: std::collections::BTreeSet<Vec<u8>>,
    /// Patterns subscribed to.
    pub psubs: std::collections::BTreeSet<Vec<u8>>,
    /// Where this client's pub/sub messages arrive, once it has subscribed.
    pub inbox: Option<crate::pubsub::Inbox>,
    /// Counts not yet added to the server's (commands, hits, misses, errors): added once per
    /// batch of requests rather than per command.
    pub counts: Cell<[u64; 4]>,
    /// The time commands see, read once per request.
    pub clock: Clock,
    /// This connection's per-command counts since the last round.
    pub cmdstats: crate::cmdstats::Local,
    /// The command the request running now named (and its subcommand), and whether it was
    /// refused before it ran: set by dispatch, counted once the request ends.
    pub running: Option<(&'static crate::cmd::Command, Option<&'static str>, bool)>,
    /// `CLIENT REPLY OFF`: command replies are not sent (pub/sub messages and subscription
    /// confirmations still are).
    pub reply_off: bool,
    /// `CLIENT REPLY SKIP` ran: the next command's reply is not sent.
    pub skip_armed: bool,
    /// The running command's reply is not sent (armed by the command before it).
    pub skip_this: bool,
    /// This is a replica's link to its master: its commands are the master's stream (no
    /// ACL, read-only or loading checks).
    pub master: bool,
}

/// The time as a connection's commands see it: the wall clock read once per round of
/// requests, advanced by the monotonic clock read once per request (as Redis reads the
/// time once per command), which also times each request for the slow log.
pub struct Clock {
    /// Wall-clock milliseconds at `base`.
    wall_ms: u64,
    base: Instant,
    /// When the running request started.
    mark: Instant,
}

impl Clock {
    /// A clock read now.
    pub fn new() -> Clock {
        let now = Instant::now();
        Clock {
            wall_ms: crate::shared::now_ms(),
            base: now,
            mark: now,
        }
    }

    /// Reads the wall clock again (once per round of requests).
    pub fn round(&mut self) {
        *self = Clock::new();
    }

    /// Ends the running request and starts the next one: how long it ran, in microseconds.
    pub fn lap(&mut self) -> u64 {
        let now = Instant::now();
        let micros = now.duration_since(self.mark).as_micros() as u64;
        self.mark = now;
        micros
    }

    /// Unix time in milliseconds at the start of the running request.
    pub fn now_ms(&self) -> u64 {
        self.wall_ms + self.mark.duration_since(self.base).as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

impl Client {
    /// A new client.
    pub fn new(info: Arc<ClientInfo>, authed: bool) -> Client {
        Client {
            info,
            db: 0,
            resp: 2,
            authed,
            acl_user: None,
            tracking_caching: false,
            repl_port: 0,
            repl_ip: None,
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            subs: Default::default(),
            psubs: Default::default(),
            inbox: None,
            counts: Cell::new([0; 4]),
            clock: Clock::new(),
            cmdstats: Default::default(),
            running: None,
            reply_off: false,
            skip_armed: false,
            skip_this: false,
            master: false,
        }
    }

    /// The queue its pushed messages go to (pub/sub, client-side caching), made on first use
    /// and published in its `ClientInfo` so a redirecting client can reach it.
    pub fn push_queue(&mut self) -> crate::pubsub::Subscriber {
        let tx = match &self.inbox {
            Some((tx, _)) => tx.clone(),
            None => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                self.inbox = Some((tx.clone(), rx));
                *self.info.push_tx.lock() = Some(tx.clone());
                tx
            }
        };
        crate::pubsub::Subscriber {
            tx,
            info: self.info.clone(),
        }
    }

    /// Counts one more of counter `i` (0 commands, 1 hits, 2 misses, 3 errors).
    pub fn count(&self, i: usize) {
        let mut c = self.counts.get();
        c[i] += 1;
        self.counts.set(c);
    }

    /// Adds the counts to the server's.
    pub fn flush_counters(&mut self, shared: &Shared) {
        self.cmdstats.flush(&shared.cmdstats);
        let c = self.counts.replace([0; 4]);
        let s = &shared.counters;
        for (i, a) in [&s.commands, &s.hits, &s.misses, &s.errors]
            .into_iter()
            .enumerate()
        {
            if c[i] > 0 {
                a.fetch_add(c[i], Ordering::Relaxed);
            }
        }
        self.info.ran_at(self.clock.mark);
    }

    /// Subscriptions held (channels and patterns).
    pub fn subscriptions(&self) -> usize {
        self.subs.len() + self.psubs.len()
    }

    /// Leaves every channel and pattern.
    pub fn unsubscribe_all(&mut self, shared: &Shared) {
        for c in std::mem::take(&mut self.subs) {
            shared.pubsub.unsubscribe(false, &c, self.info.id);
        }
        for p in std::mem::take(&mut self.psubs) {
            shared.pubsub.unsubscribe(true, &p, self.info.id);
        }
        self.info.subs.store(0, Ordering::Relaxed);
        self.info.psubs.store(0, Ordering::Relaxed);
    }

    /// Sets the selected database.
    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db, Ordering::Relaxed);
    }

    /// Forgets every watched key.
    pub fn unwatch_all(&mut self, shared: &Shared) {
        for w in self.watched.drain(..) {
            shared.store.unwatch(w.db, &w.key);
        }
        self.info.watching.store(0, Ordering::Relaxed);
    }

    /// Leaves `MULTI` (after `EXEC` or `DISCARD`) and forgets watches.
    pub fn end_multi(&mut self, shared: &Shared) {
        self.multi = None;
        self.multi_failed = false;
        self.info.multi.store(false, Ordering::Relaxed);
        self.unwatch_all(shared);
    }
}

//! Redis's replication protocol, both ways: this server as a master (`master.rs`: `PSYNC`,
//! `SYNC`, `REPLCONF`, the stream to each replica, `WAIT`) and as a replica of a Nacre or Redis
//! master (`replica.rs`: `REPLICAOF`, the link, loading the master's data, applying its
//! stream, acknowledging what is durable here). The stream itself and its backlog are the
//! store's (`store::repl_log`).
//!
//! Invariants:
//! - P1: the replication id and the offset always describe the data set: a master's data is
//!   the stream `replid` up to `master_repl_offset`; a replica takes its master's id and
//!   offset when it loads the master's data, and keeps them as it applies the stream.
//! - P2: a replica acknowledges only offsets whose writes are durable in its own pool.
//! - P3: with `min-replicas-to-write` N and `min-replicas-max-lag` S both set, a master runs
//!   no write command (nor a script that may write) while fewer than N online replicas have
//!   acknowledged within the last S seconds (`NOREPLICAS`, as Redis's
//!   `checkGoodReplicasStatus`).

pub mod failover;
pub mod master;
pub mod replica;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::watch;

/// A random replication id: 40 hex digits.
pub fn new_replid() -> String {
    (0..5)
        .map(|_| format!("{:08x}", crate::shared::random_u64() as u32))
        .collect()
}

/// The id Redis reports when there is none.
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

/// The replication ids (P1).
#[derive(Clone, Debug)]
pub struct Ids {
    /// `master_replid`.
    pub replid: String,
    /// `master_replid2`: the id this data set had before (a promoted replica's old master's).
    pub replid2: String,
    /// `second_repl_offset`: up to where `replid2` is valid (-1: none).
    pub second_offset: i64,
}

/// A replica attached to this server.
#[derive(Clone, Debug)]
pub struct Attached {
    /// Its address.
    pub ip: String,
    /// The port it listens on (`REPLCONF listening-port`).
    pub port: u16,
    /// `wait_bgsave`, `send_bulk` or `online`.
    pub state: &'static str,
    /// The offset it acknowledged last.
    pub ack: u64,
    /// When it last acknowledged.
    pub ack_at: Instant,
}

/// Replication state shared by the master and replica sides.
pub struct Replication {
    /// The ids (P1).
    pub ids: Mutex<Ids>,
    /// Replicas attached, by client id.
    pub attached: Mutex<BTreeMap<u64, Attached>>,
    /// Bumped whenever a replica acknowledges (WAIT waits on it).
    pub acked: watch::Sender<u64>,
    /// Full synchronizations served.
    pub full_syncs: std::sync::atomic::AtomicU64,
    /// Partial resynchronizations accepted, and refused.
    pub partial_ok: std::sync::atomic::AtomicU64,
    /// Partial resynchronizations refused.
    pub partial_err: std::sync::atomic::AtomicU64,
    /// This server as a replica: its master and the link.
    pub replica: replica::Link,
    /// Since when no replica is attached (`repl-backlog-ttl`); `None` while one is.
    pub alone_since: Mutex<Option<Instant>>,
    /// A `FAILOVER` in progress, if any.
    pub failover: failover::Failover,
    /// `min-replicas-to-write` and `min-replicas-max-lag` (P3).
    min_to_write: AtomicU64,
    min_max_lag: AtomicU64,
}

impl Default for Replication {
    fn default() -> Replication {
        Replication {
            ids: Mutex::new(Ids {
                replid: new_replid(),
                replid2: NO_REPLID.to_string(),
                second_offset: -1,
            }),
            attached: Mutex::new(BTreeMap::new()),
            acked: watch::Sender::new(0),
            full_syncs: Default::default(),
            partial_ok: Default::default(),
            partial_err: Default::default(),
            replica: Default::default(),
            alone_since: Mutex::new(None),
            failover: Default::default(),
            min_to_write: AtomicU64::new(0),
            min_max_lag: AtomicU64::new(10),
        }
    }
}

/// Redis's refusal of a write without enough good replicas (P3).
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

impl Replication {
    /// Takes `min-replicas-to-write` and `min-replicas-max-lag` from `cfg` (at start and
    /// after CONFIG SET).
    pub fn configure(&self, cfg: &crate::config::Config) {
        let num = |name: &str| cfg.get(name).and_then(|v| v.parse().ok()).unwrap_or(0);
        self.min_to_write
            .store(num("min-replicas-to-write"), Ordering::Relaxed);
        self.min_max_lag
            .store(num("min-replicas-max-lag"), Ordering::Relaxed);
    }

    /// Whether both settings are on, so writes need good replicas (P3).
    fn min_replicas(&self) -> Option<(u64, u64)> {
        let n = self.min_to_write.load(Ordering::Relaxed);
        let lag = self.min_max_lag.load(Ordering::Relaxed);
        (n > 0 && lag > 0).then_some((n, lag))
    }

    /// Online replicas that acknowledged within `max_lag` seconds.
    fn good_replicas(&self, max_lag: u64) -> u64 {
        self.attached
            .lock()
            .values()
            .filter(|a| a.state == "online" && a.ack_at.elapsed().as_secs() <= max_lag)
            .count() as u64
    }

    /// Whether this master may run a write now (P3); a master only: the caller knows this
    /// server has no master.
    pub fn enough_good_replicas(&self) -> bool {
        self.min_replicas()
            .is_none_or(|(n, lag)| self.good_replicas(lag) >= n)
    }

    /// Replicas whose acknowledged offset reaches `offset`.
    pub fn acked_at_least(&self, offset: u64) -> usize {
        self.attached
            .lock()
            .values()
            .filter(|a| a.state == "online" && a.ack >= offset)
            .count()
    }

    /// Records replica `id`'s acknowledgement of `offset`.
    pub fn ack(&self, id: u64, offset: u64) {
        if let Some(a) = self.attached.lock().get_mut(&id) {
            a.ack = a.ack.max(offset);
            a.ack_at = Instant::now();
        }
        self.acked.send_modify(|n| *n += 1);
    }
}

/// Once a second: a master with no replica for `repl-backlog-ttl` seconds frees its backlog
/// and takes a new replication id (a replica that comes back gets a full synchronization,
/// as from Redis: without a backlog the offset no longer describes the data set, P1).
/// Replicas keep theirs (they may be promoted).
pub async fn backlog_cron(shared: std::sync::Arc<crate::shared::Shared>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if shared.shutting_down.load(Ordering::Acquire) {
            return;
        }
        let log = &shared.store.repl;
        let replica = shared.store.replica.load(Ordering::Acquire);
        let ttl = shared.config.read().params.uint("repl-backlog-ttl");
        let since = {
            let mut alone = shared.repl.alone_since.lock();
            if !shared.repl.attached.lock().is_empty() {
                *alone = None;
                continue;
            }
            *alone.get_or_insert_with(Instant::now)
        };
        if replica || ttl == 0 || !log.on() || since.elapsed().as_secs() < ttl {
            continue;
        }
        log.stop();
        {
            let mut ids = shared.repl.ids.lock();
            ids.replid = new_replid();
            ids.replid2 = NO_REPLID.to_string();
            ids.second_offset = -1;
        }
        tracing::info!("Replication backlog freed after {ttl} seconds without connected replicas.");
    }
}

/// `INFO replication`, with Redis's fields.
pub fn info(shared: &crate::shared::Shared) -> String {
    let log = &shared.store.repl;
    let ids = shared.repl.ids.lock().clone();
    let end = log.end();
    let mut out = String::from("# Replication\r\n");
    match replica::info_fields(shared) {
        Some(fields) => {
            out.push_str("role:slave\r\n");
            out.push_str(&fields);
        }
        None => out.push_str("role:master\r\n"),
    }
    let attached = shared.repl.attached.lock().clone();
    out.push_str(&format!("connected_slaves:{}\r\n", attached.len()));
    if let Some((_, lag)) = shared.repl.min_replicas() {
        out.push_str(&format!(
            "min_slaves_good_slaves:{}\r\n",
            shared.repl.good_replicas(lag)
        ));
    }
    for (i, a) in attached.values().enumerate() {
        out.push_str(&format!(
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            a.ip,
            a.port,
            a.state,
            a.ack,
            a.ack_at.elapsed().as_secs()
        ));
    }
    let (first, histlen) = log.held();
    let active = log.on();
    out.push_str(&format!(
        "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{end}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{histlen}\r\n\r\n",
        shared.repl.failover.phase().name(),
        ids.replid,
        ids.replid2,
        ids.second_offset,
        u8::from(active),
        log.capacity(),
        if active { first } else { 0 },
    ));
    out
}

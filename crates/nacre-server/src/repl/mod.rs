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

pub mod master;
pub mod replica;

use std::collections::BTreeMap;
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
        }
    }
}

impl Replication {
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
        "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{end}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{histlen}\r\n\r\n",
        ids.replid,
        ids.replid2,
        ids.second_offset,
        u8::from(active),
        log.capacity(),
        if active { first } else { 0 },
    ));
    out
}

//! `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]`: a master hands its role to one of
//! its replicas without losing a write, as Redis 7.0 does it.
//!
//! 1. Writes are paused (`waiting-for-sync`); the master asks its replicas to acknowledge.
//! 2. Once the target (or any replica, without `TO`) has acknowledged the whole stream, the
//!    master becomes a replica of it (`failover-in-progress`) and its link asks with
//!    `PSYNC replid offset FAILOVER`: the target, whose replication id is the master's,
//!    promotes itself, then continues the old master's stream as a partial
//!    resynchronization.
//! 3. The target's answer ends it: accepted, the pause ends (paused writes are then refused
//!    as a replica refuses them); refused, or `FAILOVER ABORT`, or the timeout without
//!    `FORCE`, and the server is a master again, writes resumed.
//!
//! Invariants:
//! - F1: while a failover is in any state, no write runs on this server (the pause), so the
//!   offset the target acknowledged is the whole stream: nothing acknowledged to a client
//!   is missing on the new master.
//! - F2: the pause ends exactly when the state returns to `no-failover` ([`clear`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacre_resp::Reply;
use parking_lot::Mutex;

use crate::shared::Shared;

/// Where a failover stands (`INFO replication`'s `master_failover_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Phase {
    /// None.
    #[default]
    None,
    /// Writes paused, waiting for a replica to acknowledge everything.
    WaitForSync,
    /// This server is a replica of the target, its PSYNC FAILOVER on the way.
    InProgress,
}

impl Phase {
    /// Redis's name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}

/// A failover's state (in `Replication`).
#[derive(Default)]
pub struct Failover {
    state: Mutex<State>,
    /// Writes wait while this is set (F1).
    paused: AtomicBool,
}

#[derive(Default)]
struct State {
    phase: Phase,
    /// The replica asked for, or the one found caught up.
    target: Option<(String, u16)>,
    /// When waiting ends (`TIMEOUT`).
    deadline: Option<Instant>,
    force: bool,
    /// Bumped for each failover: a driving task stops when its failover is over.
    round: u64,
}

impl Failover {
    /// The phase now.
    pub fn phase(&self) -> Phase {
        self.state.lock().phase
    }

    /// Whether writes wait for the failover (F1).
    pub fn pauses_writes(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }
}

fn err(msg: &str) -> Reply {
    Reply::Error(format!("ERR {msg}"))
}

/// Whether `FAILOVER ABORT` is asked (it runs off the runtime's workers: it may stop the
/// link).
pub fn is_abort(args: &[Vec<u8>]) -> bool {
    args.len() == 2 && args[1].eq_ignore_ascii_case(b"abort")
}

/// `FAILOVER ABORT`. Blocks.
pub fn abort_command(shared: &Arc<Shared>) -> Reply {
    if shared.repl.failover.phase() == Phase::None {
        return err("No failover in progress.");
    }
    abort(shared, "Failover manually aborted");
    crate::cmd::ok()
}

/// `FAILOVER ...` but `ABORT`: the reply. Starts the task that drives it (on the runtime).
pub fn command(shared: &Arc<Shared>, args: &[Vec<u8>]) -> Reply {
    let f = &shared.repl.failover;
    let mut timeout_ms: i64 = 0;
    let mut force = false;
    let mut target: Option<(String, u16)> = None;
    let mut j = 1;
    while j < args.len() {
        let a = &args[j];
        if a.eq_ignore_ascii_case(b"timeout") && j + 1 < args.len() && timeout_ms == 0 {
            match crate::num::parse_i64_strict(&args[j + 1]) {
                Some(t) if t <= 0 => return err("FAILOVER timeout must be greater than 0"),
                Some(t) => timeout_ms = t,
                None => return err("value is not an integer or out of range"),
            }
            j += 2;
        } else if a.eq_ignore_ascii_case(b"to") && j + 2 < args.len() && target.is_none() {
            let port = match crate::num::parse_i64_strict(&args[j + 2]) {
                Some(p) => p,
                None => return err("value is not an integer or out of range"),
            };
            let host = String::from_utf8_lossy(&args[j + 1]).into_owned();
            // A port no replica can have matches none (as Redis's findReplica).
            target = Some((host, u16::try_from(port).unwrap_or(0)));
            j += 3;
        } else if a.eq_ignore_ascii_case(b"force") && !force {
            force = true;
            j += 1;
        } else {
            return crate::cmd::syntax();
        }
    }
    if f.phase() != Phase::None {
        return err("FAILOVER already in progress.");
    }
    if shared.store.replica.load(Ordering::Acquire) {
        return err("FAILOVER is not valid when server is a replica.");
    }
    if shared.repl.attached.lock().is_empty() {
        return err("FAILOVER requires connected replicas.");
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return err("FAILOVER with force option requires both a timeout and target HOST and IP.");
    }
    if let Some((host, port)) = &target {
        let attached = shared.repl.attached.lock();
        let Some(r) = attached
            .values()
            .find(|a| a.port == *port && a.ip.eq_ignore_ascii_case(host))
        else {
            return err("FAILOVER target HOST and PORT is not a replica.");
        };
        if r.state != "online" {
            return err("FAILOVER target replica is not online.");
        }
        tracing::info!("FAILOVER requested to {host}:{port}.");
    } else {
        tracing::info!("FAILOVER requested to any replica.");
    }
    let round = {
        let mut s = f.state.lock();
        s.round += 1;
        s.phase = Phase::WaitForSync;
        s.target = target;
        s.deadline =
            (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
        s.force = force;
        s.round
    };
    f.paused.store(true, Ordering::Release);
    let sh = shared.clone();
    tokio::spawn(drive(sh, round));
    crate::cmd::ok()
}

/// Waits for a replica to catch up (or the deadline), then hands over (steps 1-2).
async fn drive(shared: Arc<Shared>, round: u64) {
    let f = &shared.repl.failover;
    let log = &shared.store.repl;
    // Writes already running finish; then every replica is asked where it is.
    let _ = shared
        .store
        .commits
        .wait(&shared.store, shared.store.commits.last())
        .await;
    log.append_command(&[b"REPLCONF", b"GETACK", b"*"]);
    let mut acked = shared.repl.acked.subscribe();
    loop {
        let (target, deadline, force) = {
            let s = f.state.lock();
            if s.round != round || s.phase != Phase::WaitForSync {
                return;
            }
            (s.target.clone(), s.deadline, s.force)
        };
        let end = log.end();
        let caught_up = {
            let attached = shared.repl.attached.lock();
            match &target {
                Some((host, port)) => attached
                    .values()
                    .find(|a| a.port == *port && a.ip.eq_ignore_ascii_case(host))
                    .filter(|a| a.ack == end)
                    .map(|a| (a.ip.clone(), a.port)),
                None => attached
                    .values()
                    .find(|a| a.state == "online" && a.ack == end)
                    .map(|a| (a.ip.clone(), a.port)),
            }
        };
        let expired = deadline.is_some_and(|d| Instant::now() >= d);
        let hand_to = match (caught_up, expired) {
            (Some(t), _) => {
                tracing::info!("Failover target {}:{} is synced, failing over.", t.0, t.1);
                Some(t)
            }
            (None, true) if force => {
                let t = target.clone();
                if let Some((h, p)) = &t {
                    tracing::info!("FAILOVER to {h}:{p} time out exceeded, failing over.");
                }
                t
            }
            (None, true) => {
                let sh = shared.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    abort(&sh, "Replica never caught up before timeout")
                })
                .await;
                return;
            }
            (None, false) => None,
        };
        if let Some((host, port)) = hand_to {
            {
                let mut s = f.state.lock();
                if s.round != round || s.phase != Phase::WaitForSync {
                    return;
                }
                s.phase = Phase::InProgress;
                s.target = Some((host.clone(), port));
            }
            let sh = shared.clone();
            let _ = tokio::task::spawn_blocking(move || {
                super::replica::become_replica_for_failover(&sh, host, port)
            })
            .await;
            return;
        }
        tokio::select! {
            _ = acked.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

/// The target answered the link's `PSYNC ... FAILOVER`: `accepted` ends the failover (this
/// server stays its replica); a refusal aborts it (step 3). Called by the link task, so it
/// never waits for the link: an abort runs on a thread of its own.
pub fn target_answered(shared: &Arc<Shared>, accepted: bool) {
    let f = &shared.repl.failover;
    if f.phase() != Phase::InProgress {
        return;
    }
    if accepted {
        tracing::info!("FAILOVER to the new master accepted");
        clear(shared);
    } else {
        let sh = shared.clone();
        tokio::task::spawn_blocking(move || abort(&sh, "Failover target rejected psync request"));
    }
}

/// Ends a failover: a master again if it was handing over. Blocks (stops the link).
pub fn abort(shared: &Arc<Shared>, why: &str) {
    let f = &shared.repl.failover;
    let (phase, target) = {
        let s = f.state.lock();
        (s.phase, s.target.clone())
    };
    if phase == Phase::None {
        return;
    }
    match &target {
        Some((h, p)) => tracing::info!("FAILOVER to {h}:{p} aborted: {why}"),
        None => tracing::info!("FAILOVER to any replica aborted: {why}"),
    }
    if phase == Phase::InProgress {
        super::replica::replicaof(shared, None);
    }
    clear(shared);
}

/// Back to `no-failover`, writes resumed (F2).
fn clear(shared: &Shared) {
    let f = &shared.repl.failover;
    {
        let mut s = f.state.lock();
        s.phase = Phase::None;
        s.target = None;
        s.deadline = None;
        s.force = false;
    }
    f.paused.store(false, Ordering::Release);
    shared.unpaused.notify_waiters();
}

//! Tickets for queued commits and the task that learns when they are durable (K2, K4, K5 in
//! the parent module).

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;

use nacre::{WriteBatch, WriteFuture, WriteToken};
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::{mpsc, watch};

use super::{Store, StoreError};

/// The outcome of `fut` if it is already complete.
async fn poll_once(fut: &mut WriteFuture) -> Option<nacre::Result<()>> {
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *fut).poll(cx) {
        std::task::Poll::Ready(r) => std::task::Poll::Ready(Some(r)),
        std::task::Poll::Pending => std::task::Poll::Ready(None),
    })
    .await
}

/// The `sys` key of the version high-water mark.
pub const VERSION_MARK: &[u8] = b"version-mark";
/// Versions handed out between two marks.
pub const VERSION_STEP: u64 = 1 << 20;

/// A queued commit on its way to being durable.
pub struct InFlight {
    ticket: u64,
    /// Whether the batch frees space (its success makes a full pool writable again).
    frees: bool,
    fut: WriteFuture,
    /// (stripe, meta key) of every key it wrote: their pending entries go once it is durable.
    keys: Vec<(usize, Vec<u8>)>,
    /// Key count changes, counted when queued: undone if it fails.
    deltas: Deltas,
}

/// A batch's key count changes: per database (what `DBSIZE` reads), counted when queued,
/// and the count slot it took in PM with its changes per namespace (C2 in counts.rs).
#[derive(Default)]
pub struct Deltas {
    dbs: Vec<(usize, i64)>,
    slot: Option<super::counts::Taken>,
}

/// A batch given its ticket but not yet handed to the engine.
struct Staged {
    ticket: u64,
    batch: WriteBatch,
    /// The unresolved commits whose pending entries the command read (K7).
    deps: Vec<u64>,
    keys: Vec<(usize, Vec<u8>)>,
    deltas: Deltas,
}

/// What every command touches when it queues its batch: held for a few stores only (each
/// command takes it, and many threads queue at once).
struct Queue {
    next: u64,
    /// Versions below this are covered by a queued mark (K5).
    version_mark: u64,
    /// No completer takes commits any more (shutdown): commands commit in place.
    closed: bool,
    /// Batches in ticket order, handed to the engine together by the next
    /// [`Commits::flush`] (K2 holds: the engine gets them in this order).
    staged: Vec<Staged>,
}

/// What flushes keep about the batches they handed to the engine (locked after the queue
/// when both are held).
struct Handed {
    /// The last ticket handed to the engine's committer thread: commits are resolved on the
    /// flushing thread only once it is (K6).
    async_last: u64,
    tx: Option<mpsc::UnboundedSender<InFlight>>,
    /// The engine's token of every commit handed over and not known resolved when the
    /// last batches were taken: what a staged batch that read from it names (K7).
    tokens: VecDeque<(u64, WriteToken)>,
    /// Commits handed to the engine's committer thread since the start (`INFO nacre`'s
    /// `commits_via_committer`): on `dax` and `emulated` only those the engine could not
    /// commit on the flushing thread without waiting (K6).
    via_committer: u64,
}

/// How many times one flush takes the staged batches (K6): under a steady stream of
/// commands from other threads there is always more staged, and a flush that took it all
/// would hold its connection's replies as long as the stream lasts.
pub const FLUSH_ROUNDS: u32 = 4;

/// Rounds closer together than this (microseconds) count as a crowd.
pub const CROWD_GAP_US: u64 = 25;
/// Rounds in a row that make a crowd.
const CROWD_STREAK: u32 = 4;

/// When the last round of requests ended, and how many in a row came close together.
struct Crowd {
    start: std::time::Instant,
    last_us: std::sync::atomic::AtomicU64,
    streak: std::sync::atomic::AtomicU32,
}

impl Default for Crowd {
    fn default() -> Crowd {
        Crowd {
            start: std::time::Instant::now(),
            last_us: std::sync::atomic::AtomicU64::new(0),
            streak: std::sync::atomic::AtomicU32::new(0),
        }
    }
}

impl Crowd {
    fn note(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.start.elapsed().as_micros() as u64;
        let prev = self.last_us.swap(now, Relaxed);
        let streak = if now.saturating_sub(prev) < CROWD_GAP_US {
            (self.streak.load(Relaxed) + 1).min(CROWD_STREAK)
        } else {
            0
        };
        self.streak.store(streak, Relaxed);
        streak >= CROWD_STREAK
    }
}

/// Queued commits.
pub struct Commits {
    queue: Mutex<Queue>,
    handed: Mutex<Handed>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<InFlight>>>,
    durable: watch::Sender<u64>,
    failures: Mutex<HashMap<u64, CommitError>>,
    /// Whether `failures` holds anything: replies check it without taking the lock.
    any_failed: std::sync::atomic::AtomicBool,
    /// Whether `staged` may hold batches: flushes check it without taking the lock.
    any_staged: std::sync::atomic::AtomicBool,
    /// A commit failed for lack of space and no commit that frees space has succeeded
    /// since: commands that add data are refused with Redis's `-OOM`.
    full: std::sync::atomic::AtomicBool,
    /// Whether the backend's fence costs nanoseconds: flushes commit on their own thread.
    inline: bool,
    /// How close together rounds of requests come (see [`Commits::crowded`]).
    crowd: Crowd,
    /// Held by a flush while it takes the staged batches and gives them their places in
    /// the engine's commit order (K2, K6); their records are written outside it.
    resolving: Mutex<()>,
    /// The next ticket to resolve: every ticket below it is resolved, its pending entries
    /// dropped (K6).
    turn: std::sync::atomic::AtomicU64,
    /// Runs of consecutive commits a flush wrote, by first ticket, waiting for their turn:
    /// the flush leaves them here rather than wait, and whoever resolves the run before
    /// them resolves them too.
    ready: Mutex<std::collections::BTreeMap<u64, Outcomes>>,
    /// Held by the thread resolving `ready`'s runs.
    resolver: Mutex<()>,
    /// A flush that stopped after [`FLUSH_ROUNDS`] with batches still staged hands the
    /// flush on through this: one connection waiting for a ticket wakes and flushes.
    flush_turn: tokio::sync::Notify,
    /// The key count slots in PM (counts.rs), taken under `queue`'s lock.
    pub slots: super::counts::Slots,
}

/// Batches a flush gave their places in the engine's commit order (see
/// [`Commits::drain`]): what it resolves once their records are written.
struct Drained {
    /// The first ones, which the grants complete, with their futures.
    mine: Vec<(Meta, WriteFuture)>,
    grants: nacre::NowGrants,
    /// Those the completer could not take (it is gone), after `mine`.
    left: Vec<InFlight>,
}

/// What comes with a batch to [`Commits::submit`].
#[derive(Default)]
pub struct Submission {
    /// The highest collection version it uses (K5).
    pub max_version: u64,
    /// (stripe, meta key) of every key it writes.
    pub keys: Vec<(usize, Vec<u8>)>,
    /// Key count changes per database.
    pub deltas: Vec<(usize, i64)>,
    /// Key count changes per namespace (the metadata records it adds and removes): the
    /// batch carries a count slot's record with them (C1 in counts.rs).
    pub ns_deltas: Vec<(u32, i64)>,
    /// Commits it read from (K7).
    pub deps: Vec<u64>,
    /// What replicas run for it, encoded (R1 in repl_log.rs).
    pub effects: super::repl_log::Encoded,
}

/// A staged commit's ticket, whether it frees space, its keys and its count changes.
type Meta = (u64, bool, Vec<(usize, Vec<u8>)>, Deltas);

/// Consecutive commits with their outcomes, to resolve together.
type Outcomes = Vec<(Meta, nacre::Result<()>)>;

/// Hands a commit to the completer, which resolves commits in ticket order (K6 counts it as
/// handed to the committer); to `left` when the completer is gone (shutdown), where the
/// caller waits for it.
fn to_completer(q: &mut Handed, meta: Meta, fut: WriteFuture, left: &mut Vec<InFlight>) {
    let (ticket, frees, keys, deltas) = meta;
    let f = InFlight {
        ticket,
        frees,
        fut,
        keys,
        deltas,
    };
    q.async_last = ticket;
    q.via_committer += 1;
    match &q.tx {
        Some(tx) => {
            if let Err(e) = tx.send(f) {
                left.push(e.0);
            }
        }
        None => left.push(f),
    }
}

/// Redis's refusal of a command that adds data over `maxmemory`.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Why a commit failed; every command that waited for it answers [`CommitError::reply`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    /// The pool had no room for it (Redis's `-OOM`).
    #[error("the pool is full")]
    PoolFull,
    /// It read a write whose commit failed (K7).
    #[error("it read a write that failed")]
    Dependency,
    /// The disk levels cannot take data now (Redis's `-MISCONF`).
    #[error("the disk levels cannot take data now ({0})")]
    DiskLevels(String),
    /// Another engine error.
    #[error("{0}")]
    Engine(String),
}

impl CommitError {
    fn of(e: nacre::Error) -> CommitError {
        match e {
            nacre::Error::PoolFull { .. } => CommitError::PoolFull,
            nacre::Error::DependencyFailed => CommitError::Dependency,
            nacre::Error::SpillFailed { .. } => CommitError::DiskLevels(e.to_string()),
            e => CommitError::Engine(StoreError::Engine(e).to_string()),
        }
    }

    /// The error line (without the `-`) the command answers.
    pub fn reply(&self) -> String {
        match self {
            CommitError::PoolFull => OOM.to_string(),
            CommitError::DiskLevels(_) => {
                format!("MISCONF {self}; writes resume by themselves once the disk has room")
            }
            e => format!("ERR the write was not committed: {e}"),
        }
    }
}

impl Commits {
    /// Commit tracking starting after ticket 0, with versions below `version_mark` covered.
    /// `inline`: the backend's fence costs nanoseconds (`dax`, `emulated`), so a flush
    /// commits on its own thread rather than through the committer thread.
    pub fn new(version_mark: u64, inline: bool, slots: super::counts::Slots) -> Commits {
        let (tx, rx) = mpsc::unbounded_channel();
        Commits {
            queue: Mutex::new(Queue {
                next: 1,
                version_mark,
                closed: false,
                staged: Vec::new(),
            }),
            handed: Mutex::new(Handed {
                async_last: 0,
                tx: Some(tx),
                tokens: VecDeque::new(),
                via_committer: 0,
            }),
            rx: Mutex::new(Some(rx)),
            durable: watch::Sender::new(0),
            failures: Mutex::new(HashMap::new()),
            any_failed: std::sync::atomic::AtomicBool::new(false),
            any_staged: std::sync::atomic::AtomicBool::new(false),
            full: std::sync::atomic::AtomicBool::new(false),
            inline,
            crowd: Crowd::default(),
            resolving: Mutex::new(()),
            turn: std::sync::atomic::AtomicU64::new(1),
            ready: Mutex::new(std::collections::BTreeMap::new()),
            resolver: Mutex::new(()),
            flush_turn: tokio::sync::Notify::new(),
            slots,
        }
    }

    /// Queues `batch` (K2); a batch using versions up to `max_version` carries a new mark
    /// when it reaches the old one (K5); it fails if a commit in `deps` does (K7). Returns
    /// its ticket. The batch is staged: it reaches
    /// the engine with the next [`Commits::flush`], which whoever waits for a ticket calls
    /// (a connection flushes once per round of pipelined commands, so they share one
    /// hand-off to the committer instead of one each).
    pub fn submit(&self, store: &Store, mut batch: WriteBatch, c: Submission) -> u64 {
        let Submission {
            max_version,
            keys,
            deltas,
            ns_deltas,
            mut deps,
            effects,
        } = c;
        let mut q = self.queue.lock();
        if max_version >= q.version_mark {
            q.version_mark = max_version + VERSION_STEP;
            if !super::mutated(super::MUTATE_NO_VERSION_MARK) {
                batch.put(&store.subs.sys, VERSION_MARK, q.version_mark.to_le_bytes());
            }
        }
        let ticket = q.next;
        q.next += 1;
        // C1, C2 (counts.rs): the slot is taken under the queue's lock, in ticket order.
        let slot = (!ns_deltas.is_empty()).then(|| {
            let (taken, record, dep) = self.slots.take(ticket, ns_deltas);
            if !super::mutated(super::MUTATE_NO_COUNT_RECORD) {
                batch.put(&store.subs.sys, super::counts::slot_key(taken.slot), record);
            }
            deps.extend(dep.filter(|&d| !self.is_done(d)));
            taken
        });
        let deltas = Deltas { dbs: deltas, slot };
        // R1 (repl_log.rs): staged before any flush can take the batch.
        store.repl.stage(ticket, effects);
        q.staged.push(Staged {
            ticket,
            batch,
            deps,
            keys,
            deltas,
        });
        if q.closed {
            // No completer (shutdown, in-process use): commit in the caller, with anything
            // staged before it.
            self.hand_over(store, q);
            return ticket;
        }
        self.any_staged
            .store(true, std::sync::atomic::Ordering::Release);
        ticket
    }

    /// Takes the staged batches out of the queue `q` (a few stores: commands keep queueing
    /// while the caller works on them).
    fn take_queue(&self, q: &mut Queue) -> Vec<Staged> {
        self.any_staged
            .store(false, std::sync::atomic::Ordering::Release);
        std::mem::take(&mut q.staged)
    }

    /// `staged` (taken in ticket order) apart from what resolving them needs; each depends
    /// on the commits it read from (K7): by position among them, else by the token of one
    /// handed over before.
    fn take_staged(&self, staged: Vec<Staged>, h: &mut Handed) -> (Vec<Meta>, Vec<WriteBatch>) {
        // A batch that read a commit's pending entry was staged before that commit was
        // published (it held the entry's stripe, which the commit's resolution takes to
        // drop the entry), so once this take is done, no batch will name a commit resolved
        // now: their tokens go after it. `durable` is read under `handed`'s lock, after
        // any trim of the tokens: a token trimmed is durable by then.
        let durable = *self.durable.borrow();
        let first = staged.first().map_or(0, |s| s.ticket);
        let taken = staged
            .into_iter()
            .map(|mut s| {
                for &d in &s.deps {
                    if d >= first {
                        s.batch.after_batch((d - first) as usize);
                    } else if let Some((_, t)) = h.tokens.iter().rev().find(|(t, _)| *t == d) {
                        s.batch.after(t);
                    } else if d > durable || self.failed(d).is_some() {
                        // Not reached (see above): fail the batch rather than commit what
                        // may rest on a failed write.
                        tracing::error!(
                            ticket = s.ticket,
                            dep = d,
                            "a commit read from one whose outcome is unknown"
                        );
                        s.batch.after_batch(usize::MAX);
                    }
                }
                ((s.ticket, s.batch.frees_space(), s.keys, s.deltas), s.batch)
            })
            .unzip();
        while h.tokens.front().is_some_and(|(t, _)| *t <= durable) {
            h.tokens.pop_front();
        }
        taken
    }

    /// Hands every staged batch to the engine in ticket order, under the queue lock `q`,
    /// then releases it and waits for what the completer cannot take (it is gone).
    fn hand_over(&self, store: &Store, mut q: MutexGuard<'_, Queue>) {
        let staged = self.take_queue(&mut q);
        let mut h = self.handed.lock();
        let (meta, batches) = self.take_staged(staged, &mut h);
        if batches.is_empty() {
            return;
        }
        let futs = store.db.write_async_many(batches);
        let mut left = Vec::new();
        for (m, fut) in meta.into_iter().zip(futs) {
            h.tokens.push_back((m.0, fut.token()));
            to_completer(&mut h, m, fut, &mut left);
        }
        drop(h);
        drop(q);
        self.settle_left(store, left);
    }

    /// Resolves, in turn, commits the completer could not take (it is gone). Their pending
    /// entries stay (the caller may hold their stripes: a command queueing its batch after
    /// shutdown); they are durable, so readers of them wait for nothing.
    fn settle_left(&self, store: &Store, left: Vec<InFlight>) {
        for f in left {
            let InFlight {
                ticket,
                frees,
                fut,
                deltas,
                ..
            } = f;
            self.settle(
                store,
                vec![((ticket, frees, Vec::new(), deltas), fut.wait())],
            );
        }
    }

    /// Resolves consecutive commits whose outcomes are known, once it is their turn (waiting
    /// for it here): see [`Commits::resolve_run`].
    fn settle(&self, store: &Store, done: Outcomes) {
        let Some(first) = done.first().map(|d| d.0 .0) else {
            return;
        };
        nacre::wait_until(|| self.turn.load(std::sync::atomic::Ordering::Acquire) >= first);
        self.resolve_run(store, done);
        // Runs flushes left for their turn may follow these.
        self.resolve_ready(store);
    }

    /// Leaves consecutive commits whose outcomes are known to be resolved in their turn,
    /// by this thread if it is their turn and no other thread is resolving, else by the
    /// thread that resolves the commits before them (this one does not wait).
    fn offer(&self, store: &Store, done: Outcomes) {
        let Some(first) = done.first().map(|d| d.0 .0) else {
            return;
        };
        self.ready.lock().insert(first, done);
        self.resolve_ready(store);
    }

    /// Resolves the runs in `ready` whose turn it is, unless another thread is resolving
    /// (it looks again after it lets go, so a run left meanwhile is not forgotten).
    fn resolve_ready(&self, store: &Store) {
        // Every run whose turn has come, as one: consecutive runs resolve together (each
        // resolution locks the stripes of its keys, which a hot key's commands contend for).
        let next = |commits: &Commits| {
            let mut r = commits.ready.lock();
            let mut want = commits.turn.load(std::sync::atomic::Ordering::Acquire);
            let mut out: Outcomes = Vec::new();
            while let Some(e) = r.first_entry() {
                if *e.key() != want {
                    break;
                }
                let run = e.remove();
                want = run.last().map_or(want, |d| d.0 .0 + 1);
                out.extend(run);
            }
            out
        };
        // Under a steady stream other threads keep leaving runs: after FLUSH_ROUNDS, a
        // connection waiting for a ticket resolves the rest (K6).
        for _ in 0..FLUSH_ROUNDS {
            let Some(resolver) = self.resolver.try_lock() else {
                return;
            };
            let run = next(self);
            if !run.is_empty() {
                self.resolve_run(store, run);
            }
            drop(resolver);
            let turn = self.turn.load(std::sync::atomic::Ordering::Acquire);
            if self
                .ready
                .lock()
                .first_key_value()
                .is_none_or(|(k, _)| *k != turn)
            {
                return;
            }
        }
        self.hand_on();
    }

    /// Resolves consecutive commits whose turn it is: records failures, drops their
    /// pending entries, then publishes them (K6).
    fn resolve_run(&self, store: &Store, done: Outcomes) {
        let Some(first) = done.first().map(|d| d.0 .0) else {
            return;
        };
        let mut last = first;
        let mut resolved = Vec::new();
        for ((ticket, frees, keys, deltas), r) in done {
            self.resolve(store, ticket, frees, &deltas, r);
            resolved.extend(keys.into_iter().map(|(st, k)| (st, k, ticket)));
            last = ticket;
        }
        Self::drop_pending(store, &mut resolved);
        self.turn
            .store(last + 1, std::sync::atomic::Ordering::Release);
        self.publish(store, last);
    }

    /// Whether batches wait to be handed to the engine.
    pub fn staged(&self) -> bool {
        self.any_staged.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Notes that a connection finished a round of requests; whether rounds now come close
    /// together (several within [`CROWD_GAP_US`] of each other). A connection about to
    /// commit then lets the other ready connections run their rounds first, so that one
    /// commit carries them all; a lone client does not pay for that wait.
    pub fn crowded(&self) -> bool {
        self.crowd.note()
    }

    /// Hands the staged batches to the engine (see [`Commits::submit`]).
    pub fn flush(&self, store: &Store) {
        if !self.any_staged.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        if self.inline {
            self.commit_here(store);
        } else {
            self.hand_over(store, self.queue.lock());
        }
    }

    /// Commits the staged batches on this thread and resolves them (K6), as far as the
    /// engine can without waiting; what it cannot goes to the committer thread and the
    /// completer, in order. The caller holds no stripe lock.
    fn commit_here(&self, store: &Store) {
        // One flush at a time takes the staged batches and gives them their places in the
        // commit order; the others do not wait for it: it takes what they staged too, and
        // looks again once it lets go (what was staged before a flush found it busy is seen
        // by that look). The records are written after it lets go, so the next flush gives
        // its batches their places meanwhile and several write theirs at once.
        // Under a steady stream from other threads there is always more: after
        // FLUSH_ROUNDS takes, a connection waiting for a ticket flushes the rest.
        for _ in 0..FLUSH_ROUNDS {
            let Some(resolving) = self.resolving.try_lock() else {
                return;
            };
            let drained = self.drain(store);
            drop(resolving);
            if let Some(d) = drained {
                self.finish_drained(store, d);
            }
            if !self.any_staged.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
        }
        self.hand_on();
    }

    /// A flush stopped with batches staged, or a resolution with runs in turn: one
    /// connection waiting for a ticket goes on with both ([`Commits::help`]; a stored
    /// permit if none waits now, taken by the next).
    fn hand_on(&self) {
        if !super::mutated(super::MUTATE_NO_FLUSH_HANDOFF) {
            self.flush_turn.notify_one();
        }
    }

    /// What a connection handed the flush does (K6): flushes what is staged and resolves
    /// the runs whose turn has come.
    fn help(&self, store: &Store) {
        self.flush(store);
        self.resolve_ready(store);
    }

    /// Keeps every flush from starting until the guard goes, as a flush busy on another
    /// thread does (tests only).
    #[cfg(feature = "testing")]
    pub fn hold_flushes(&self) -> MutexGuard<'_, ()> {
        self.resolving.lock()
    }

    /// What a flush does when it stops after [`FLUSH_ROUNDS`] with batches staged (tests
    /// only, with [`Commits::hold_flushes`]).
    #[cfg(feature = "testing")]
    pub fn flush_stopped(&self) {
        self.hand_on();
    }

    /// The body of [`Commits::commit_here`] under `resolving`: takes the staged batches and
    /// has the engine give them their places in its commit order (`Db::write_now_begin`);
    /// the queue's lock is held only to take them and to pass some to the completer, so
    /// commands keep staging batches meanwhile. What the engine granted comes back, to be
    /// written and resolved outside the lock.
    fn drain(&self, store: &Store) -> Option<Drained> {
        let mut q = self.queue.lock();
        let mut h = self.handed.lock();
        if q.closed || *self.durable.borrow() < h.async_last {
            // Commits handed to the committer are unresolved: later ones follow them.
            drop(h);
            self.hand_over(store, q);
            return None;
        }
        let staged = self.take_queue(&mut q);
        drop(q);
        let (meta, batches) = self.take_staged(staged, &mut h);
        if batches.is_empty() {
            return None;
        }
        let (futs, here, grants) = store.db.write_now_begin(batches);
        let mut mine = Vec::with_capacity(here);
        let mut left = Vec::new();
        for (i, (m, fut)) in meta.into_iter().zip(futs).enumerate() {
            h.tokens.push_back((m.0, fut.token()));
            if i < here {
                mine.push((m, fut));
            } else {
                // The engine queued this one for its committer: it and every later one are
                // resolved by the completer, in order.
                to_completer(&mut h, m, fut, &mut left);
            }
        }
        drop(h);
        Some(Drained { mine, grants, left })
    }

    /// Writes and commits what [`Commits::drain`] was granted, then resolves it in turn.
    fn finish_drained(&self, store: &Store, d: Drained) {
        let Drained { mine, grants, left } = d;
        grants.finish();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let done = mine
            .into_iter()
            .map(|(m, mut fut)| {
                let r = match std::pin::Pin::new(&mut fut).poll(&mut cx) {
                    std::task::Poll::Ready(r) => r,
                    // Not reached: the grants complete every one of these.
                    std::task::Poll::Pending => fut.wait(),
                };
                (m, r)
            })
            .collect();
        self.offer(store, done);
        self.settle_left(store, left);
    }

    /// Whether `ticket` is resolved (durable or failed).
    pub fn is_done(&self, ticket: u64) -> bool {
        // Ticket 0 (nothing to wait for) without the watch's lock: most commands ask.
        ticket == 0 || *self.durable.borrow() >= ticket
    }

    /// Whether commands that add data are refused: the pool was found full and nothing has
    /// freed space since.
    pub fn full(&self) -> bool {
        self.full.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Something outside the commit queue freed space (the background cleaner deleted
    /// dropped records): commands that add data may try again.
    pub fn space_freed(&self) {
        self.full.store(false, std::sync::atomic::Ordering::Release);
    }

    /// Why `ticket`'s commit failed, if it did.
    pub fn failed(&self, ticket: u64) -> Option<CommitError> {
        if ticket == 0 || !self.any_failed.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        self.failures.lock().get(&ticket).cloned()
    }

    /// Records that `ticket`'s commit failed.
    fn record_failure(&self, ticket: u64, e: nacre::Error) {
        if matches!(e, nacre::Error::PoolFull { .. }) {
            tracing::warn!(ticket, error = %e, "the pool is full: commands that add data are refused until something frees space");
            self.full.store(true, std::sync::atomic::Ordering::Release);
        }
        let why = CommitError::of(e);
        tracing::error!(ticket, error = %why, "a commit failed");
        self.failures.lock().insert(ticket, why);
        self.any_failed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// How many commits went through the engine's committer thread (see
    /// `Handed::via_committer`).
    pub fn via_committer(&self) -> u64 {
        self.handed.lock().via_committer
    }

    /// The last ticket handed out.
    pub fn last(&self) -> u64 {
        self.queue.lock().next - 1
    }

    /// Waits until `ticket` is durable: `Err` with the reason if its commit failed.
    pub async fn wait(&self, store: &Store, ticket: u64) -> std::result::Result<(), CommitError> {
        if ticket == 0 {
            return Ok(());
        }
        if *self.durable.borrow() < ticket {
            self.flush(store);
            let mut rx = self.durable.subscribe();
            loop {
                tokio::select! {
                    // The sender lives as long as `self`.
                    _ = rx.wait_for(|d| *d >= ticket) => break,
                    // K6: a flush stopped with batches staged; this one may be among them.
                    () = self.flush_turn.notified() => self.help(store),
                }
            }
        }
        self.failed(ticket).map_or(Ok(()), Err)
    }

    /// Blocking [`Commits::wait`], for threads outside the runtime.
    pub fn wait_blocking(
        &self,
        store: &Store,
        ticket: u64,
    ) -> std::result::Result<(), CommitError> {
        self.flush(store);
        let mut rx = self.durable.subscribe();
        while *rx.borrow_and_update() < ticket {
            if self.durable.is_closed() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
            // K6: a flush may have stopped with this ticket's batch staged.
            self.help(store);
        }
        self.failed(ticket).map_or(Ok(()), Err)
    }

    /// Records how `ticket`'s commit ended (before it is published): a failure, or a
    /// success that frees space and so ends the pool-full state.
    fn resolve(
        &self,
        store: &Store,
        ticket: u64,
        frees: bool,
        deltas: &Deltas,
        r: nacre::Result<()>,
    ) {
        if let Some(t) = &deltas.slot {
            self.slots.release(ticket, t, r.is_ok());
        }
        match r {
            Err(e) => {
                for &(db, d) in &deltas.dbs {
                    store.counts[db].fetch_sub(d, std::sync::atomic::Ordering::Relaxed);
                }
                self.record_failure(ticket, e)
            }
            Ok(()) if frees => self.full.store(false, std::sync::atomic::Ordering::Release),
            Ok(()) => {}
        }
    }

    /// Makes everything up to `ticket` durable for waiters, and its writes part of the
    /// replication stream (R1 in repl_log.rs).
    fn publish(&self, store: &Store, ticket: u64) {
        store.repl.publish(ticket, |t| self.failed(t).is_some());
        self.durable.send_modify(|d| *d = (*d).max(ticket));
    }

    /// Drops the pending entries of resolved commits (before they are published): each
    /// stripe is locked once for all of them (a hot key's stripe would otherwise be taken
    /// once per commit, against the commands running on it). An entry goes only if the
    /// commit that wrote it last is among them.
    fn drop_pending(store: &Store, resolved: &mut Vec<(usize, Vec<u8>, u64)>) {
        resolved.sort_unstable_by_key(|e| e.0);
        let mut i = 0;
        while i < resolved.len() {
            let stripe = resolved[i].0;
            let mut s = store.stripes[stripe].lock();
            while i < resolved.len() && resolved[i].0 == stripe {
                let (_, mkey, ticket) = &resolved[i];
                if s.pending.get(mkey).is_some_and(|p| p.ticket == *ticket) {
                    s.pending.remove(mkey);
                }
                i += 1;
            }
        }
        resolved.clear();
    }

    /// The task that awaits queued commits in order and publishes each one durable.
    pub async fn run_completer(store: Arc<Store>) {
        let Some(mut rx) = store.commits.rx.lock().take() else {
            return;
        };
        // Commits of one group complete together: resolve every one already done before
        // waking waiters once, rather than once per commit.
        let mut batch = Vec::with_capacity(256);
        let commits = &store.commits;
        let turn = |t: u64| commits.turn.load(std::sync::atomic::Ordering::Acquire) >= t;
        let settle = |done: &mut Outcomes| {
            if !done.is_empty() {
                commits.resolve_run(&store, std::mem::take(done));
                // Runs flushes left for their turn may follow these.
                commits.resolve_ready(&store);
            }
        };
        let mut done: Outcomes = Vec::new();
        while rx.recv_many(&mut batch, 256).await > 0 {
            for mut f in batch.drain(..) {
                let r = match poll_once(&mut f.fut).await {
                    Some(r) => r,
                    None => {
                        settle(&mut done);
                        (&mut f.fut).await
                    }
                };
                if done.last().is_none_or(|(m, _)| m.0 + 1 != f.ticket) {
                    // K6: a flush that committed the tickets before this one on its own
                    // thread resolves them first (it is writing them now: microseconds).
                    settle(&mut done);
                    while !turn(f.ticket) {
                        tokio::task::yield_now().await;
                    }
                }
                done.push(((f.ticket, f.frees, f.keys, f.deltas), r));
            }
            settle(&mut done);
        }
    }

    /// Stops queueing through the completer; later commits complete in the caller.
    pub fn close(&self, store: &Store) {
        self.flush(store);
        self.queue.lock().closed = true;
        self.handed.lock().tx = None;
    }
}

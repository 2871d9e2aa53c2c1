//! The write path (`CommitPath`, working on the engine's `Shared` state, core.rs):
//! leader/follower buckets group `WriteBatch`es, and each group goes through
//! the Reorder Ring (seed 000 §3.2.2): grant space (stage 2), copy and persist records (stage
//! 3, parallel across groups, indexing the records too), commit `gidx` and `commit_id` and
//! publish the group's sequence numbers to readers (stage 4, serial).
//!
//! Invariants:
//! - C3: `write` returns only after its group's stage 4 persisted `commit_id` (and, in the
//!   same or an earlier fence, its records and commit points).
//! - At most one group is in stage 4 at a time, and a group enters it only after the previous
//!   group's stage-4 fences returned: a crash cuts the commit of one group at most.
//! - C4: readers see sequence numbers up to `visible`, which stage 4 advances over whole
//!   groups in grant (= sequence) order, after their commit is persisted and after their
//!   index entries were inserted in stage 3; no reader sees part of a group or a group that
//!   is not committed.
//! - A failed group (pool full) consumes no sequence numbers and undoes its reservations in
//!   stage 2 (giving back the zones they took), so nothing of it is ever committed. A failed
//!   fence poisons the database: no later group commits.
//! - A group's records for one subtable that exceed a zone are cut into several items, each
//!   in one zone, consecutive in each memtable and continued in the subtable's next memtable
//!   when one fills (sealed with the group's last sequence number, so it is merged only once
//!   the group committed). The group is still one ring slot, one run of sequence numbers and
//!   one stage 4, which stores each memtable's `gidx` once over all its items there: the
//!   invariants above hold for it unchanged, and recovery counts its items across memtables
//!   (docs/format.md, "Groups larger than a zone").
//! - C5 (transactions): a batch with a [`Check`] is validated in stage 2, before its group is
//!   numbered, against every version that can be newer than the check's read points: the
//!   batches earlier in its own group, the groups granted and not yet through stage 4
//!   (`in_flight`, pushed in stage 2 and popped in stage 4, both serial), and the subtable's
//!   indexes and disk levels (which hold every group that left `in_flight`: stage 3 indexed it
//!   before its stage 4). A batch that fails takes no sequence number and writes nothing; the
//!   rest of its group commits without it.
//!
//! Thread safety: a bucket's queue is a mutex-guarded deque; each waiter and group is completed
//! through its own `OneShot`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::art::ArtIndex;
use crate::batch::{Op, WriteBatch};
use crate::core::Shared;
use crate::error::{Error, Result};
use crate::index::MemIndex;
use crate::memtable::{Memtable, Reservation};
use crate::oneshot::OneShot;
use crate::options::{CommitMode, Options};
use crate::record::{encode_item_header, encode_record, record_size, ITEM_HEADER};
use crate::ring::Ring;
use crate::subtable::Subtable;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

/// Why a group failed; cloned to every writer in it.
#[derive(Clone, Debug)]
pub(crate) enum GroupError {
    /// The writer's own batch failed its [`Check`] (the rest of its group is unaffected).
    Conflict {
        subtable: String,
        key: Vec<u8>,
    },
    PoolFull(crate::error::FullCause),
    /// Only the zones kept for the cleaner are free: wait for merges and cleaning, retry.
    NoSpace {
        free: u64,
        keep: u64,
    },
    /// A read of the disk levels failed (checking a batch for conflicts).
    Disk {
        what: &'static str,
        path: std::path::PathBuf,
        reason: String,
    },
    /// Metadata failed a check.
    Corrupt {
        what: String,
        at: Option<u64>,
    },
    TooLarge {
        len: usize,
        max: usize,
    },
    Poisoned(String),
}

impl From<GroupError> for Error {
    fn from(e: GroupError) -> Error {
        match e {
            GroupError::Conflict { subtable, key } => Error::Conflict { subtable, key },
            GroupError::PoolFull(cause) => Error::PoolFull {
                cause,
                free_zones: 0,
            },
            GroupError::NoSpace { free, keep } => Error::NoSpace { free, keep },
            GroupError::Corrupt { what, at } => Error::Corrupt { what, at },
            GroupError::Disk { what, path, reason } => Error::Disk { what, path, reason },
            GroupError::TooLarge { len, max } => Error::TooLarge {
                what: "batch records for one subtable",
                len,
                max,
            },
            GroupError::Poisoned(m) => Error::Poisoned(m),
        }
    }
}

/// Why a queued writer wakes up.
#[derive(Clone)]
enum Wake {
    /// It is now the bucket's leader.
    Lead,
    /// A leader committed (or failed) its batch.
    Done(Result<(), GroupError>),
}

/// What a transaction's batch must pass to commit (C5): no version of any of its keys newer
/// than the key's read point.
#[derive(Clone, Debug, Default)]
pub(crate) struct Check {
    /// (subtable, key, read point): the batch conflicts if the key has a version with a
    /// sequence number above the read point.
    pub keys: Vec<(u32, Vec<u8>, u64)>,
}

pub(crate) struct Waiter {
    batch: WriteBatch,
    bytes: Vec<(u32, usize)>,
    check: Option<Check>,
    /// Set in stage 2 when the batch fails its check: it is left out of its group.
    conflict: std::sync::OnceLock<GroupError>,
    wake: OneShot<Wake>,
}

impl Waiter {
    /// This writer's outcome when its group's is `r`.
    fn outcome(&self, r: &Result<(), GroupError>) -> Result<(), GroupError> {
        match self.conflict.get() {
            Some(e) => Err(e.clone()),
            None => r.clone(),
        }
    }
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Arc<Waiter>>,
    leader: bool,
}

/// One leader/follower bucket.
#[derive(Default)]
pub(crate) struct Bucket {
    q: Mutex<Queue>,
    /// Writers queued (mirrors `q.pending.len()`, read without the lock while a leader waits).
    queued: std::sync::atomic::AtomicUsize,
}

/// An operation of a group: (position in the group, waiter index, op index in its batch).
/// Its sequence number is the group's first plus its position.
type OpRef = (u64, usize, usize);

/// A record the cleaner moves: its key, value, kind and original sequence number.
pub(crate) struct Moved {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub seq: u64,
    pub kind: crate::record::Kind,
}

/// What an item's records are.
enum Records {
    /// Operations of the group's batches, numbered from the group's first sequence number.
    Batch(Vec<OpRef>),
    /// Records the cleaner relocates, with their own sequence numbers.
    Moved(Vec<Moved>),
}

/// The records a group adds to one subtable, laid out before the group enters the ring so
/// that the serial stage 2 only numbers them and reserves space.
struct Part {
    subtable: u32,
    records: Records,
    /// Item bytes: header and records.
    len: usize,
}

/// Splits a group's operations by subtable, in operation order, leaving out batches that
/// failed their check; returns the parts and the number of operations.
fn layout(group: &[Arc<Waiter>]) -> (Vec<Part>, u64) {
    let mut parts: Vec<Part> = Vec::new();
    let mut k = 0u64;
    for (wi, w) in group.iter().enumerate() {
        if w.conflict.get().is_some() {
            continue;
        }
        for (oi, op) in w.batch.ops.iter().enumerate() {
            let size = crate::record::record_size(op.key.len(), op.value.len());
            match parts.iter_mut().find(|p| p.subtable == op.subtable) {
                Some(p) => {
                    if let Records::Batch(ops) = &mut p.records {
                        ops.push((k, wi, oi));
                    }
                    p.len += size;
                }
                None => parts.push(Part {
                    subtable: op.subtable,
                    records: Records::Batch(vec![(k, wi, oi)]),
                    len: ITEM_HEADER + size,
                }),
            }
            k += 1;
        }
    }
    (parts, k)
}

/// Space granted for one item: its memtable, the memtable's index (users' writes only) and
/// the reservation.
type Granted = (Arc<Memtable>, Option<Arc<ArtIndex>>, Reservation);

/// One item of a group: the records of one subtable, its memtable (and index, for users'
/// writes) and space.
struct Item {
    memtable: Arc<Memtable>,
    index: Option<Arc<ArtIndex>>,
    res: Reservation,
    records: Records,
}

/// What stage 4 needs, shared through the ring.
pub(crate) struct Group {
    plan: Mutex<Plan>,
    done: OneShot<Result<(), GroupError>>,
}

/// A granted group: its sequence numbers `seq_start..=seq_end` and its items. Written in
/// stage 2, read by the owner in stage 3 and by the committing thread in stage 4 (never at
/// the same time: stage 4 of a group starts after its stage 3 ended).
#[derive(Default)]
struct Plan {
    seq_start: u64,
    seq_end: u64,
    items: Vec<Item>,
}

impl Group {
    fn finish(&self, r: Result<(), GroupError>) {
        self.done.set(r);
    }

    fn wait(&self, patience: std::time::Duration) -> Result<(), GroupError> {
        self.done.wait(patience)
    }
}

/// Wakes the next queued writer as leader, or marks the bucket leaderless.
fn pass_leadership(q: &mut Queue) {
    match q.pending.front() {
        Some(next) => next.wake.set(Wake::Lead),
        None => q.leader = false,
    }
}

thread_local! {
    /// Stage 3's item buffer, reused across groups.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    static BUCKET: usize = {
        use std::sync::atomic::AtomicUsize;
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// The commit path's own state: the Reorder Ring, the leader/follower buckets and the
/// sequence numbers it grants. Its methods work on the shared state they are given.
pub(crate) struct CommitPath {
    ring: Ring<Arc<Group>>,
    buckets: Vec<Bucket>,
    /// The last sequence number granted (stage 2 only).
    next_seq: AtomicU64,
    /// The engine run this instance writes (stamped on every item).
    run: u64,
    /// How stage 4 fences (resolved: never `Auto`).
    pub commit_mode: CommitMode,
    /// Whether buckets pass leadership on at take (resolved `Options::pipelining`).
    pipelined: bool,
    /// How long a writer waiting for its group yields before blocking. None on `msync`, where
    /// the wait is a file sync and a yielding thread delays the kernel threads completing it.
    /// Long elsewhere, where a commit takes microseconds: a wait that long means the committer
    /// lost its core, and a blocked writer woken by the committer is moved to the committer's
    /// core by the scheduler, after which the two share one core and keep waking each other.
    patience: std::time::Duration,
    /// Groups that committed records (each one durable commit: one fence, or two).
    pub groups: AtomicU64,
    /// Writers of the groups between stage 2 and stage 4, with their group's last sequence
    /// number, in grant order (C5).
    in_flight: Mutex<VecDeque<(u64, Arc<Waiter>)>>,
}

impl CommitPath {
    /// The commit path of a database opened on `backend` whose last committed sequence number
    /// is `commit_id`, writing engine run `run`.
    pub fn new(
        opts: &Options,
        backend: nacre_pmem::ActiveBackend,
        commit_id: u64,
        run: u64,
    ) -> CommitPath {
        let pipelined = opts.pipelining.resolve(backend);
        CommitPath {
            ring: Ring::new(opts.ring_capacity),
            // Unpipelined, every writer queues in one bucket: one group in flight at a time.
            buckets: (0..if pipelined { opts.commit_buckets } else { 1 })
                .map(|_| Bucket::default())
                .collect(),
            next_seq: AtomicU64::new(commit_id),
            run,
            commit_mode: opts.commit_mode.resolve(backend),
            pipelined,
            patience: if backend == nacre_pmem::ActiveBackend::Msync {
                std::time::Duration::ZERO
            } else {
                std::time::Duration::from_micros(1000)
            },
            groups: AtomicU64::new(0),
            in_flight: Mutex::new(VecDeque::new()),
        }
    }
}

impl CommitPath {
    /// Queues `batch` in this thread's bucket and returns when its group is committed (C3),
    /// or, if it fails `check` (C5), with [`Error::Conflict`] and nothing applied. `bytes` is
    /// `batch.bytes_per_subtable()`, already computed by the caller's checks.
    pub(crate) fn write_batch(
        &self,
        sh: &Shared,
        batch: WriteBatch,
        bytes: Vec<(u32, usize)>,
        check: Option<Check>,
    ) -> Result<()> {
        // Deletes (and batches declared to free space) are how a full pool frees space:
        // they are not slowed for lack of it.
        let frees = batch.frees_space();
        sh.space.throttle(sh.store.zones.free_zones(), !frees);
        let mut w = Arc::new(Waiter {
            batch,
            bytes,
            check,
            conflict: std::sync::OnceLock::new(),
            wake: OneShot::new(),
        });
        let mut verdicts = 0;
        loop {
            match self.queue(sh, &w) {
                Err(GroupError::NoSpace { free, .. }) => {
                    sh.wait_for_room(free, &mut verdicts)?;
                    w = Arc::new(Waiter {
                        batch: w.batch.clone(),
                        bytes: w.bytes.clone(),
                        check: w.check.clone(),
                        conflict: std::sync::OnceLock::new(),
                        wake: OneShot::new(),
                    });
                }
                r => return r.map_err(Error::from),
            }
        }
    }

    /// Queues `w` in this thread's bucket and returns its group's result.
    fn queue(&self, sh: &Shared, w: &Arc<Waiter>) -> Result<(), GroupError> {
        let bucket = &self.buckets[BUCKET.with(|b| *b) % self.buckets.len()];
        let lead = {
            let mut q = lock(&bucket.q);
            q.pending.push_back(w.clone());
            bucket.queued.store(q.pending.len(), Ordering::Release);
            !std::mem::replace(&mut q.leader, true)
        };
        if !lead {
            if let Wake::Done(r) = w.wake.wait(self.patience) {
                return r;
            }
        }
        self.lead(sh, bucket)
    }

    /// Takes a group from the front of the queue, hands leadership on (at once when
    /// pipelined, else once the group has committed), commits the group and completes its
    /// other writers. The caller is at the front of the queue (so in the group)
    /// and gets the group's result.
    fn lead(&self, sh: &Shared, bucket: &Bucket) -> Result<(), GroupError> {
        if !sh.opts.batch_wait.is_zero() {
            // Wait up to `batch_wait` for more writers to queue (a full batch ends the wait).
            let start = std::time::Instant::now();
            while bucket.queued.load(Ordering::Acquire) < sh.opts.batch_size
                && start.elapsed() < sh.opts.batch_wait
            {
                std::hint::spin_loop();
            }
        }
        let group: Vec<Arc<Waiter>> = {
            let mut q = lock(&bucket.q);
            let mut sums: Vec<(u32, usize)> = Vec::new();
            let mut take = 0;
            for w in q.pending.iter().take(sh.opts.batch_size) {
                let fits = w.bytes.iter().all(|(s, b)| {
                    let have = sums.iter().find(|x| x.0 == *s).map_or(0, |x| x.1);
                    have + b + ITEM_HEADER <= sh.store.zone_size as usize
                });
                if take > 0 && !fits {
                    break;
                }
                for (s, b) in &w.bytes {
                    match sums.iter_mut().find(|x| x.0 == *s) {
                        Some(x) => x.1 += b,
                        None => sums.push((*s, *b)),
                    }
                }
                take += 1;
            }
            let group: Vec<_> = q.pending.drain(..take).collect();
            bucket.queued.store(q.pending.len(), Ordering::Release);
            if self.pipelined {
                pass_leadership(&mut q);
            }
            group
        };
        let r = self.commit_group(sh, &group);
        if !self.pipelined {
            pass_leadership(&mut lock(&bucket.q));
        }
        for w in group.iter().skip(1) {
            w.wake.set(Wake::Done(w.outcome(&r)));
        }
        group[0].outcome(&r)
    }

    /// Runs one stage of the commit path; a panic in it poisons the database and comes back
    /// as the reason.
    fn guard<R>(&self, sh: &Shared, stage: &str, f: impl FnOnce() -> R) -> Result<R, String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
            let msg = crate::error::panic_message(&*panic);
            let why = format!("{stage} of the commit path panicked: {msg}");
            sh.poison(why.clone());
            why
        })
    }

    /// Stage 2: sequence numbers and space for every subtable the group touches (`n`
    /// operations, laid out in `parts`), recorded in the group's plan.
    fn stage2(
        &self,
        sh: &Shared,
        group: &[Arc<Waiter>],
        (mut parts, mut n): (Vec<Part>, u64),
        keep: u64,
        g: &Group,
    ) -> Result<(), GroupError> {
        if let Some(why) = sh.poisoned() {
            return Err(GroupError::Poisoned(why));
        }
        let checked = sh.opts.inject != Some(crate::options::Inject::SkipConflictCheck);
        if checked && group.iter().any(|w| w.check.is_some()) && self.validate(sh, group) {
            (parts, n) = layout(group);
        }
        // Only stage 2 (serial, ordered by the ring) touches `next_seq`.
        let last = self.next_seq.load(Ordering::Acquire);
        let (seq_start, seq_end) = (last + 1, last + n);
        // A group that cannot have the zones it needs fails before it takes any (or seals a
        // memtable): its writer waits for room and tries again.
        let (free, needs) = (sh.store.zones.free_zones(), self.zones_needed(sh, &parts));
        if needs > 0 && needs > free.saturating_sub(keep) {
            return Err(GroupError::NoSpace { free, keep });
        }
        let mut items: Vec<Item> = Vec::with_capacity(parts.len());
        // Memtables this group sealed after reserving in them (their merge waits for it).
        let mut spanned: Vec<(u32, Arc<Memtable>)> = Vec::new();
        for p in parts {
            let r = self.reserve_part(
                sh,
                group,
                p,
                keep,
                (last, seq_end),
                &mut items,
                &mut spanned,
            );
            if let Err(e) = r {
                self.undo(sh, &items, &spanned, last);
                // The zones the group took before it ran out are back: the writer waits for
                // more than are free now, not more than were free when it ran out (else
                // the worker would count their return as zones freed, and the writer would
                // try again and again without anything being freed).
                return Err(match e {
                    GroupError::NoSpace { keep, .. } => GroupError::NoSpace {
                        free: sh.store.zones.free_zones(),
                        keep,
                    },
                    e => e,
                });
            }
        }
        self.next_seq.store(seq_end, Ordering::Release);
        if !group.is_empty() && !items.is_empty() {
            let mut f = lock(&self.in_flight);
            for w in group.iter().filter(|w| w.conflict.get().is_none()) {
                f.push_back((seq_end, w.clone()));
            }
        }
        *lock(&g.plan) = Plan {
            seq_start,
            seq_end,
            items,
        };
        Ok(())
    }

    /// C5: checks every batch of `group` that carries a [`Check`], in group order, marking
    /// those that fail; whether any failed. Runs in stage 2, so no group is granted meanwhile.
    fn validate(&self, sh: &Shared, group: &[Arc<Waiter>]) -> bool {
        // Versions no index may hold yet: the writes of groups granted and not committed,
        // then those of this group's batches accepted so far.
        let others: Vec<Arc<Waiter>> = lock(&self.in_flight)
            .iter()
            .map(|(_, w)| w.clone())
            .collect();
        let mut pending: std::collections::HashSet<(u32, &[u8])> = others
            .iter()
            .flat_map(|w| w.batch.ops.iter())
            .map(|op| (op.subtable, op.key.as_slice()))
            .collect();
        let mut any = false;
        for w in group {
            if let Some(check) = &w.check {
                let hit = check.keys.iter().find_map(|(sub, key, since)| {
                    if pending.contains(&(*sub, key.as_slice())) {
                        return Some((*sub, key, None));
                    }
                    match sh.newer_than(*sub, key, *since) {
                        Ok(false) => None,
                        Ok(true) => Some((*sub, key, None)),
                        Err(e) => Some((*sub, key, Some(e))),
                    }
                });
                if let Some((sub, key, err)) = hit {
                    let e = match err {
                        // A read that failed decides nothing: the batch fails with its error.
                        Some(Error::Disk { what, path, reason }) => {
                            GroupError::Disk { what, path, reason }
                        }
                        Some(Error::Corrupt { what, at }) => GroupError::Corrupt { what, at },
                        Some(other) => GroupError::Corrupt {
                            what: other.to_string(),
                            at: None,
                        },
                        None => GroupError::Conflict {
                            subtable: sh
                                .with_subtable(sub, |s| s.name().to_string())
                                .unwrap_or_default(),
                            key: key.clone(),
                        },
                    };
                    let _ = w.conflict.set(e);
                    any = true;
                    continue;
                }
            }
            pending.extend(
                w.batch
                    .ops
                    .iter()
                    .map(|op| (op.subtable, op.key.as_slice())),
            );
        }
        any
    }

    /// Stage 2 for one part: its items, appended to `items`. A part that fits one zone is one
    /// item. A longer one (a batch's records for one subtable) is cut into items that each
    /// fit a zone, in operation order: the first fills what is left of the zone being
    /// filled, each next one a zone, and when the active memtable is full it is sealed and the
    /// items go on in the next one. A memtable sealed after this group reserved in it is
    /// sealed with `end` (this group's last sequence number), so it is merged only once this
    /// group has committed; it is noted in `spanned` (its seal is corrected if the group
    /// fails). `last` is the last sequence number granted before this group.
    #[allow(clippy::too_many_arguments)]
    fn reserve_part(
        &self,
        sh: &Shared,
        group: &[Arc<Waiter>],
        p: Part,
        keep: u64,
        (last, end): (u64, u64),
        items: &mut Vec<Item>,
        spanned: &mut Vec<(u32, Arc<Memtable>)>,
    ) -> Result<(), GroupError> {
        let zs = sh.store.zone_size as usize;
        let ops = match p.records {
            Records::Batch(ops) if p.len > zs => ops,
            records => {
                let moved = matches!(records, Records::Moved(_));
                let (memtable, index, res) =
                    self.reserve(sh, p.subtable, p.len, keep, moved, last)?;
                items.push(Item {
                    memtable,
                    index,
                    res,
                    records,
                });
                return Ok(());
            }
        };
        let size = |&(_, wi, oi): &OpRef| {
            let op: &Op = &group[wi].batch.ops[oi];
            record_size(op.key.len(), op.value.len())
        };
        let fail = |e: Error| self.reserve_failed(sh, e);
        let store = &sh.store;
        let visible = sh.visible.load(Ordering::Acquire);
        let span = |st: &Subtable| {
            let st = &st.inner;
            let (mut start, mut full, mut mine, mut misses) = (0, false, false, 0);
            while start < ops.len() {
                let sealed_mine = full && mine;
                let before = st.view.load().active.as_ref().map(|a| a.mem.clone());
                let a = st
                    .active_for_write(
                        store,
                        &sh.space,
                        &sh.tickets,
                        full,
                        if sealed_mine { end } else { last },
                        visible,
                    )
                    .map_err(fail)?;
                if sealed_mine {
                    if let Some(m) = before {
                        spanned.push((p.subtable, m));
                    }
                    mine = false;
                }
                let m = a.mem;
                let first = size(&ops[start]);
                let room = match m.room_left(store.zone_size) as usize {
                    room if room >= ITEM_HEADER + first => room,
                    _ => zs,
                };
                let (mut len, mut stop) = (ITEM_HEADER, start);
                while stop < ops.len() && len + size(&ops[stop]) <= room {
                    len += size(&ops[stop]);
                    stop += 1;
                }
                if stop == start {
                    return Err(GroupError::TooLarge {
                        len: ITEM_HEADER + first,
                        max: zs,
                    });
                }
                match m.reserve(store, len, keep).map_err(fail)? {
                    Some(res) => {
                        items.push(Item {
                            memtable: m,
                            index: Some(a.index),
                            res,
                            records: Records::Batch(ops[start..stop].to_vec()),
                        });
                        (start, full, mine, misses) = (stop, false, true, 0);
                    }
                    // The memtable is full: seal it, go on in the next (a fresh memtable
                    // takes any item that fits a zone, so this happens at most twice in a row).
                    None if misses == 0 => (full, misses) = (true, 1),
                    None => return Err(GroupError::TooLarge { len, max: zs }),
                }
            }
            Ok(())
        };
        sh.with_subtable(p.subtable, span).unwrap_or_else(|| {
            Err(GroupError::Poisoned(format!(
                "unknown subtable {}",
                p.subtable
            )))
        })
    }

    /// At least how many new zones the parts longer than a zone need (stage 2): the first of
    /// their items may fill what is left of the zone being filled, each next one at most a
    /// zone. (Parts that fit a zone take at most one each, as they always did.)
    fn zones_needed(&self, sh: &Shared, parts: &[Part]) -> u64 {
        let zs = sh.store.zone_size;
        let room = zs - ITEM_HEADER as u64;
        parts
            .iter()
            .filter(|p| p.len as u64 > zs && matches!(p.records, Records::Batch(_)))
            .map(|p| {
                let left = sh
                    .with_subtable(p.subtable, |st| {
                        st.inner
                            .view
                            .load()
                            .active
                            .as_ref()
                            .map_or(0, |a| a.mem.room_left(zs))
                    })
                    .unwrap_or(0);
                let records = (p.len - ITEM_HEADER) as u64;
                records
                    .saturating_sub(left.saturating_sub(ITEM_HEADER as u64))
                    .div_ceil(room)
            })
            .sum()
    }

    /// Undoes a failed group's stage 2 (T2 in memtable.rs): its reservations, newest first,
    /// and the seal of each memtable it sealed after reserving in it, which no longer waits
    /// for its sequence numbers (`last` is the last one granted before it).
    fn undo(&self, sh: &Shared, items: &[Item], spanned: &[(u32, Arc<Memtable>)], last: u64) {
        for it in items.iter().rev() {
            if let Err(e) = it.memtable.unreserve(&sh.store, &it.res) {
                // A store or fence that failed: the media can no longer be trusted.
                sh.poison(format!("undoing a reservation failed: {e}"));
            }
        }
        for (sub, mem) in spanned {
            sh.with_subtable(*sub, |st| {
                st.inner
                    .reseal(&sh.tickets, sh.visible.load(Ordering::Acquire), mem, last)
            });
        }
    }

    /// What a failed reservation means for the group.
    fn reserve_failed(&self, sh: &Shared, e: Error) -> GroupError {
        match e {
            Error::PoolFull { cause, .. } => GroupError::PoolFull(cause),
            Error::NoSpace { free, keep } => GroupError::NoSpace { free, keep },
            Error::Corrupt { what, at } => GroupError::Corrupt { what, at },
            // A fence or store that failed: the media can no longer be trusted.
            other => {
                let why = format!("reserving space failed: {other}");
                sh.poison(why.clone());
                GroupError::Poisoned(why)
            }
        }
    }

    /// Space for `len` bytes (one item, at most a zone) in subtable `sub`: in its active
    /// memtable, or (`moved`) in its relocation memtable. New zones only while more than
    /// `keep` are free. `last` is the last sequence number granted before this group.
    fn reserve(
        &self,
        sh: &Shared,
        sub: u32,
        len: usize,
        keep: u64,
        moved: bool,
        last: u64,
    ) -> Result<Granted, GroupError> {
        let max = sh.store.zone_size as usize;
        if len > max {
            return Err(GroupError::TooLarge { len, max });
        }
        let fail = |e: Error| self.reserve_failed(sh, e);
        let store = &sh.store;
        let visible = sh.visible.load(Ordering::Acquire);
        let reserve = |st: &Subtable| {
            let st = &st.inner;
            for full in [false, true] {
                let (m, index) = if moved {
                    (st.reloc_for_write(store, full).map_err(fail)?, None)
                } else {
                    let a = st
                        .active_for_write(store, &sh.space, &sh.tickets, full, last, visible)
                        .map_err(fail)?;
                    (a.mem, Some(a.index))
                };
                if let Some(r) = m.reserve(store, len, keep).map_err(fail)? {
                    return Ok((m, index, r));
                }
            }
            Err(GroupError::TooLarge { len, max })
        };
        sh.with_subtable(sub, reserve)
            .unwrap_or_else(|| Err(GroupError::Poisoned(format!("unknown subtable {sub}"))))
    }

    /// Stage 3: builds, writes and flushes each item, and indexes its records. The fence that
    /// makes them durable is stage 4's first one when this thread commits its own group, else
    /// the hand-off fence. Index entries are invisible until stage 4 advances `visible` past
    /// their sequence numbers (C4).
    fn stage3(&self, sh: &Shared, group: &[Arc<Waiter>], plan: &Plan) {
        let pool = &sh.store.pool;
        let items = &plan.items;
        let (mut pm, mut user) = (0u64, 0u64);
        let inject_panic = sh.opts.inject == Some(crate::options::Inject::CommitPanic);
        SCRATCH.with(|buf| {
            let mut buf = buf.borrow_mut();
            for it in items {
                buf.clear();
                buf.resize(ITEM_HEADER, 0);
                let count = match &it.records {
                    Records::Batch(ops) => {
                        for &(k, wi, oi) in ops {
                            let op: &Op = &group[wi].batch.ops[oi];
                            if inject_panic && op.key.starts_with(b"panic") {
                                panic!("injected commit panic");
                            }
                            user += (op.key.len() + op.value.len()) as u64;
                            encode_record(
                                &mut buf,
                                plan.seq_start + k,
                                op.kind,
                                &op.key,
                                &op.value,
                            );
                        }
                        ops.len()
                    }
                    Records::Moved(recs) => {
                        for r in recs {
                            encode_record(&mut buf, r.seq, r.kind, &r.key, &r.value);
                        }
                        recs.len()
                    }
                };
                let place = it.memtable.place(it.res.pos);
                encode_item_header(
                    &mut buf,
                    place,
                    plan.seq_start,
                    self.run,
                    count as u32,
                    items.len() as u32,
                    self.commit_mode == CommitMode::TwoFence,
                );
                pm += buf.len() as u64;
                // SAFETY: stage 2 granted this reservation to this group alone (T2), and
                // readers read no position before stage 4 commits it (C4).
                unsafe { pool.copy_nt(it.res.at, &buf) };
                if let Some((m, marker)) = it.res.marker {
                    pool.store_u64(m, marker);
                }
                if let (Some(index), Records::Batch(ops)) = (&it.index, &it.records) {
                    let mut at = it.res.at.add(ITEM_HEADER as u64);
                    for &(k, wi, oi) in ops {
                        let op: &Op = &group[wi].batch.ops[oi];
                        index.insert(&op.key, plan.seq_start + k, at);
                        at = at.add(record_size(op.key.len(), op.value.len()) as u64);
                    }
                }
            }
        });
        sh.space.pm_bytes.fetch_add(pm, Ordering::Relaxed);
        if user > 0 {
            sh.space.user_bytes.fetch_add(user, Ordering::Relaxed);
        }
    }

    /// Stage 4 (Alg. 3): advance every `gidx` and persist `commit_id`. Two-fence mode fences
    /// between them, so a crash can cut only `commit_id`; single-fence mode fences once, so a
    /// crash in that fence can leave any part of this group (records, headers, `gidx` words,
    /// `commit_id`) durable and recovery must tell a whole group from a torn one. Either way
    /// only this group can be cut: stage 4 is serial, and each earlier group's fence completed
    /// before this one began (and the records of a group committed by another thread were
    /// fenced by the hand-off).
    fn stage4(&self, sh: &Shared, g: &Group) {
        // The plan (and its memtable references) is dropped by the group's owner, outside
        // this serial stage.
        let plan = lock(&g.plan);
        if plan.items.is_empty() {
            // Every batch of the group failed its check: nothing to commit.
            g.finish(Ok(()));
            return;
        }
        {
            let mut f = lock(&self.in_flight);
            while f.front().is_some_and(|(end, _)| *end <= plan.seq_end) {
                f.pop_front();
            }
        }
        if let Some(why) = sh.poisoned() {
            g.finish(Err(GroupError::Poisoned(why)));
            return;
        }
        // One `gidx` store per memtable, over all of the group's items in it (T1): they are
        // consecutive in the plan.
        for (i, it) in plan.items.iter().enumerate() {
            let next = plan.items.get(i + 1);
            if next.is_none_or(|n| !Arc::ptr_eq(&n.memtable, &it.memtable)) {
                it.memtable.commit(&sh.store, it.res.end);
            }
        }
        let pool = &sh.store.pool;
        let r = match self.commit_mode {
            CommitMode::SingleFence => {
                sh.store.set_commit_id(plan.seq_end);
                pool.fence()
            }
            CommitMode::TwoFence | CommitMode::Auto => pool.fence().and_then(|_| {
                sh.store.set_commit_id(plan.seq_end);
                pool.fence()
            }),
        };
        match r {
            Ok(()) => {
                if !plan.items.is_empty() {
                    self.groups.fetch_add(1, Ordering::Relaxed);
                }
                // Groups reach here in grant order, so `visible` only moves forward and covers
                // whole groups (C4).
                sh.visible.store(plan.seq_end, Ordering::Release);
                g.finish(Ok(()))
            }
            Err(e) => {
                sh.poison(format!("commit fence failed: {e}"));
                g.finish(Err(GroupError::Poisoned(e.to_string())));
            }
        }
    }

    fn commit_group(&self, sh: &Shared, group: &[Arc<Waiter>]) -> Result<(), GroupError> {
        let (parts, n) = layout(group);
        let frees = group.iter().all(|w| w.batch.frees_space());
        // Deletes may dig into the cleaner's reserve: they are how a full pool frees space.
        let keep = if frees {
            sh.space.keep / 2
        } else {
            sh.space.keep
        };
        self.run_group(sh, group, parts, n, keep).map(|_| ())
    }

    /// Writes `records` (moved by the cleaner, with their own sequence numbers) into
    /// subtable `sub`'s relocation memtable through the ring, as one group of one item that
    /// takes one sequence number of its own. Returns where each record now is.
    pub(crate) fn commit_moved(
        &self,
        sh: &Shared,
        sub: u32,
        records: Vec<Moved>,
    ) -> Result<Vec<nacre_pmem::PmOffset>, GroupError> {
        let sizes: Vec<usize> = records
            .iter()
            .map(|r| record_size(r.key.len(), r.value.len()))
            .collect();
        let part = Part {
            subtable: sub,
            len: ITEM_HEADER + sizes.iter().sum::<usize>(),
            records: Records::Moved(records),
        };
        let at = self.run_group(sh, &[], vec![part], 1, 0)?;
        let mut out = Vec::with_capacity(sizes.len());
        let mut off = at.add(ITEM_HEADER as u64);
        for n in sizes {
            out.push(off);
            off = off.add(n as u64);
        }
        Ok(out)
    }

    /// Seals subtable `sub`'s active memtable (if it holds anything) in stage 2 of a group
    /// that writes nothing, so no group is reserving in it meanwhile. Whether it sealed one.
    pub(crate) fn seal(&self, sh: &Shared, sub: u32) -> bool {
        let g = Arc::new(Group {
            plan: Mutex::new(Plan::default()),
            done: OneShot::new(),
        });
        let (h, sealed) = self.ring.grant(g.clone(), || {
            let last = self.next_seq.load(Ordering::Acquire);
            let visible = sh.visible.load(Ordering::Acquire);
            sh.with_subtable(sub, |st| {
                st.inner
                    .seal(&sh.store, &sh.space, &sh.tickets, last, visible)
            })
            .unwrap_or(Ok(false))
            .unwrap_or_else(|e| {
                tracing::debug!(error = %e, "sealing a memtable failed");
                false
            })
        });
        // Nothing to commit: stage 4 only passes the handle on.
        g.finish(Ok(()));
        self.ring.finish(h, &|| {}, &|x: &Arc<Group>| {
            if !x.done.is_set() {
                self.stage4(sh, x)
            }
        });
        sealed
    }

    /// Runs one group through the ring; returns where its first item starts.
    fn run_group(
        &self,
        sh: &Shared,
        group: &[Arc<Waiter>],
        parts: Vec<Part>,
        n: u64,
        keep: u64,
    ) -> Result<nacre_pmem::PmOffset, GroupError> {
        let (h, g, planned) = self.grant_group(sh, group, parts, n, keep);
        self.finish_group(sh, group, h, &g, planned.is_ok());
        planned?;
        g.wait(self.patience)?;
        let plan = lock(&g.plan);
        Ok(plan
            .items
            .first()
            .map_or(nacre_pmem::PmOffset::NULL, |it| it.res.at))
    }

    /// Stages 1 and 2 of a group: its handle, its group state and whether it was granted.
    fn grant_group(
        &self,
        sh: &Shared,
        group: &[Arc<Waiter>],
        parts: Vec<Part>,
        n: u64,
        keep: u64,
    ) -> (u64, Arc<Group>, Result<(), GroupError>) {
        let g = Arc::new(Group {
            plan: Mutex::new(Plan::default()),
            done: OneShot::new(),
        });
        // A panic in any stage poisons the database and fails the group, and the ring still
        // moves on: no writer waits forever behind a stage that will never finish.
        let (h, planned) = self.ring.grant(g.clone(), || {
            self.guard(sh, "stage 2", || {
                self.stage2(sh, group, (parts, n), keep, &g)
            })
            .unwrap_or_else(|why| Err(GroupError::Poisoned(why)))
        });
        (h, g, planned)
    }

    /// Stages 3 and 4 of a group [`CommitPath::grant_group`] handed `h` (`granted`: its stage
    /// 2 succeeded; else stage 4 only passes the handle on). Stage 4 may run on another
    /// thread: [`Group::wait`] gives the outcome.
    fn finish_group(&self, sh: &Shared, group: &[Arc<Waiter>], h: u64, g: &Group, granted: bool) {
        if granted {
            // A failure here is caught by stage 4, which sees the poison.
            let _ = self.guard(sh, "stage 3", || self.stage3(sh, group, &lock(&g.plan)));
        } else {
            // Nothing reserved or numbered: stage 4 only has to pass the handle on.
            g.finish(Ok(()));
        }
        let handoff = || {
            if let Err(e) = sh.store.pool.fence() {
                sh.poison(format!("record fence failed: {e}"));
            }
        };
        self.ring.finish(h, &handoff, &|x: &Arc<Group>| {
            if !x.done.is_set() {
                if let Err(why) = self.guard(sh, "stage 4", || self.stage4(sh, x)) {
                    x.finish(Err(GroupError::Poisoned(why)));
                }
            }
        });
    }

    /// Stages 1 and 2 of `batch` alone, for a caller that must not wait (a server's runtime
    /// thread): its place in the commit order, as a [`NowGroup`] whose records
    /// [`CommitPath::finish_now`] writes and commits, on any thread. The batch comes back
    /// untouched, as `Err(Err(batch))`, where it would have to wait for the background
    /// worker or for room; `Err(Ok(error))` if it failed.
    pub(crate) fn grant_now(
        &self,
        sh: &Shared,
        batch: WriteBatch,
        bytes: Vec<(u32, usize)>,
    ) -> std::result::Result<NowGroup, std::result::Result<Error, WriteBatch>> {
        let frees = batch.frees_space();
        if sh.space.would_throttle(sh.store.zones.free_zones(), !frees) {
            return Err(Err(batch));
        }
        let w = Arc::new(Waiter {
            batch,
            bytes,
            check: None,
            conflict: std::sync::OnceLock::new(),
            wake: OneShot::new(),
        });
        let group = vec![w];
        let (parts, n) = layout(&group);
        // Deletes may dig into the cleaner's reserve: they are how a full pool frees space.
        let keep = if frees {
            sh.space.keep / 2
        } else {
            sh.space.keep
        };
        let (h, g, planned) = self.grant_group(sh, &group, parts, n, keep);
        match planned {
            Ok(()) => Ok(NowGroup { h, g, group }),
            Err(e) => {
                self.finish_group(sh, &group, h, &g, false);
                match e {
                    GroupError::NoSpace { .. } => {
                        // Nothing of the batch was written: it goes back whole.
                        let w = group.into_iter().next();
                        Err(Err(w.map_or_else(WriteBatch::new, |w| {
                            Arc::try_unwrap(w).map_or_else(|w| w.batch.clone(), |w| w.batch)
                        })))
                    }
                    e => Err(Ok(Error::from(e))),
                }
            }
        }
    }

    /// Stages 3 and 4 of a group [`CommitPath::grant_now`] granted; returns once it is
    /// committed (C3) or failed. Groups granted before it commit before it, whichever
    /// thread finishes them.
    pub(crate) fn finish_now(&self, sh: &Shared, now: NowGroup) -> Result<()> {
        let NowGroup { h, g, group } = now;
        self.finish_group(sh, &group, h, &g, true);
        g.wait(self.patience).map_err(Error::from)
    }
}

/// A batch granted its place in the commit order by [`CommitPath::grant_now`]: its handle
/// in the ring, its group state, and its writer.
pub(crate) struct NowGroup {
    h: u64,
    g: Arc<Group>,
    group: Vec<Arc<Waiter>>,
}

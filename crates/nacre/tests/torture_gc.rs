//! Power-failure torture across the background work: merges into the Global Index and zone
//! cleaning (relocation through the commit path, zones given back and reused within a run).
//! A small pool that starts nearly full makes every run merge and clean. Two writer threads
//! put and delete fixed-size values over their own keys; the power fails at a random fence
//! with a random subset of unflushed words kept; the database is recovered and checked:
//! every acknowledged write is there (the last acknowledged state of each key, or the state
//! the thread's one unacknowledged write would leave), no deleted key comes back, forward and
//! reverse scans agree with gets (no duplicate or missing rows), and every zone is free or
//! owned by exactly one memtable slot or blob with the Global Index consistent. Some keys hold
//! values stored out of line (blobs), so blob zones are written, given back and reused too. Then a second phase
//! writes on the recovered database and crashes again, so a state recovery built is also
//! crashed through. Mutation tests switch off one recovery rule at a time.
//!
//! The same torture runs with compaction on request (`Db::compact_pm`): a larger pool that
//! never runs short of zones, so that the cleaner moves zones only because a third thread
//! keeps asking for compaction while the writers run.

mod common;
mod crash_check;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crash_check::{Expect, State};
use nacre::{Db, IterOptions, Options, RecoveryMutation, WriteBatch};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions, SplitMix64};

const THREADS: u64 = 2;
const KEYS: u64 = 12;
const OPS: u64 = 300;
const VALUE: usize = 1000;
/// Out of line in one zone, and in two.
const BLOB_SMALL: usize = 12 << 10;
const BLOB_LARGE: usize = 70 << 10;

/// What drives the cleaner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cleaning {
    /// A small pool that starts nearly full: free zones run low.
    Pressure,
    /// A pool that never runs short, and a thread asking for compaction.
    Requested,
    /// As `Pressure`, with the persistent index on (checked against the volatile one after
    /// every recovery, by `Db::check`).
    PressureIndexed,
}

fn opts(mutation: Option<RecoveryMutation>) -> Options {
    opts_for(mutation, Cleaning::Pressure)
}

fn opts_for(mutation: Option<RecoveryMutation>, cleaning: Cleaning) -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.recovery_mutation = mutation;
    o.commit_mode = nacre::CommitMode::SingleFence;
    o.pool_size = match cleaning {
        Cleaning::Pressure => 2 << 20,
        Cleaning::Requested => 8 << 20,
        // The index's nodes take their share of the pool.
        Cleaning::PressureIndexed => (2 << 20) + (512 << 10),
    };
    o.persistent_index = cleaning == Cleaning::PressureIndexed;
    o.audit_persistent_index = o.persistent_index;
    // Point reads go to the tree: every check after a recovery reads through it.
    o.persistent_index_reads = o.persistent_index;
    // Every recovery's gets run first while the Global Index is rebuilt (gi/pending.rs).
    o.hold_rebuild = o.persistent_index;
    o.zone_size = 64 << 10;
    o.memtable_size = 128 << 10;
    o.ring_capacity = 4;
    o.batch_size = 2;
    o.commit_buckets = 2;
    o.recovery_threads = 2;
    o
}

fn key(t: u64, k: u64) -> Vec<u8> {
    format!("t{t}/k{k:02}").into_bytes()
}

/// Thread 1's keys live in subtable `gc1`, everything else in `gc0`: zones move between
/// subtables as they are given back and reused, so an item read at the wrong place would
/// show keys in the wrong subtable.
fn subtable_of(key: &[u8]) -> usize {
    usize::from(key.starts_with(b"t1/"))
}

fn subtables(db: &Db) -> [nacre::Subtable; 2] {
    [
        db.subtable("gc0").expect("subtable"),
        db.subtable("gc1").expect("subtable"),
    ]
}

/// Op `j` of thread `t` in phase `p`: the key it touches and the value it leaves (none for a
/// delete). Values have one size, so items line up in reused zones, except on two keys per
/// thread, which hold values stored out of line (blobs) of one or two zones.
fn op(p: u64, t: u64, j: u64) -> (u64, Option<Vec<u8>>) {
    let k = (j * 7 + t * 3 + p * 5) % KEYS;
    if (j + p) % 6 == 5 {
        return (k, None);
    }
    let len = match (k % 6, j % 2) {
        (1, 0) => BLOB_SMALL,
        (1, _) => BLOB_LARGE,
        _ => VALUE,
    };
    let mut v = format!("p{p}/t{t}/j{j}/").into_bytes();
    v.resize(len, (j as u8) ^ (t as u8) << 4 ^ p as u8);
    (k, Some(v))
}

fn open_image(
    image: Vec<u8>,
    mutation: Option<RecoveryMutation>,
    cleaning: Cleaning,
) -> Result<Db, String> {
    let pool = Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim))
        .map_err(|e| format!("image: {e}"))?;
    Db::open_pool(pool, opts_for(mutation, cleaning)).map_err(|e| format!("recovery failed: {e}"))
}

/// The base image: a pool aged by a prefix workload so that free zones are low (or, with
/// compaction on request, zones mix live and dead records).
fn base(mutation: Option<RecoveryMutation>, cleaning: Cleaning) -> (Vec<u8>, State) {
    let db = Db::open(opts_for(mutation, cleaning)).expect("open");
    let subs = subtables(&db);
    let mut state = State::new();
    for j in 0..700u64 {
        for t in 0..THREADS {
            let (k, v) = op(9, t, j);
            let sub = &subs[t as usize];
            match &v {
                Some(v) => db.put(sub, key(t, k), v).expect("put"),
                None => db.delete(sub, key(t, k)).expect("delete"),
            }
            state.insert(key(t, k), v);
        }
        if j % 5 == 0 {
            // Cold keys, never written again: their zones mix live and dead records, so
            // the cleaner must move them.
            let (k, mut v) = (format!("cold/{j:04}").into_bytes(), vec![j as u8; VALUE]);
            v[..8].copy_from_slice(&j.to_le_bytes());
            db.put(&subs[0], &k, &v).expect("put");
            state.insert(k, Some(v));
        }
        if j >= 100 && (j - 100) % 10 == 0 {
            // Some cold keys are deleted for good: their tombstones and their older puts lie
            // in different zones.
            let k = format!("cold/{:04}", j - 100).into_bytes();
            db.delete(&subs[0], &k).expect("delete");
            state.insert(k, None);
        }
    }
    // The cleaner runs in the background: wait for its first freed zone (on a loaded
    // machine it may not have run yet when the writes end; once it has, it may go on freeing
    // zones, so how many are free depends on timing).
    if cleaning == Cleaning::Requested {
        db.merge_memtables().expect("merge");
        db.compact_pm().expect("compact");
    }
    let s = common::eventually(&db, "the cleaner freed a zone", |s| {
        s.cleaner_zones_freed > 0
    });
    assert!(
        s.live_bytes > 0 && s.zones_free < s.zones,
        "the prefix aged the pool: {s:#?}"
    );
    let image = db.sim().expect("sim").crash(CrashPolicy::KeepNone);
    (image, state)
}

/// Runs phase `p` on `db` with a power failure at a random fence; returns the crash image and
/// what each key may hold.
fn phase(
    db: Db,
    p: u64,
    state: &State,
    rng: &mut SplitMix64,
    cov: &mut Coverage,
    cleaning: Cleaning,
) -> Result<(Vec<u8>, Expect), String> {
    let subs = subtables(&db);
    let sim = db.sim().expect("sim");
    let start = sim.fence_count();
    let stop = 1 + rng.next_u64() % 1100;
    sim.stop_at_fence(start + stop);
    let acked: Mutex<Vec<u64>> = Mutex::new(vec![0; THREADS as usize]);
    let failed: Mutex<Option<String>> = Mutex::new(None);
    let writing = AtomicU64::new(THREADS);
    let compactions = AtomicU64::new(0);
    std::thread::scope(|s| {
        if cleaning == Cleaning::Requested {
            let (db, sim, failed, writing, compactions) =
                (&db, &sim, &failed, &writing, &compactions);
            s.spawn(move || {
                while writing.load(Ordering::Acquire) > 0 && !sim.is_stopped() {
                    if let Err(e) = db.compact_pm() {
                        *failed.lock().expect("lock") = Some(format!("phase {p}: compact: {e}"));
                        return;
                    }
                    compactions.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            });
        }
        for t in 0..THREADS {
            let (db, sub, acked, sim, failed) = (&db, &subs[t as usize], &acked, &sim, &failed);
            let writing = &writing;
            s.spawn(move || {
                let _done = Done(writing);
                for j in 0..OPS {
                    let (k, v) = op(p, t, j);
                    let mut b = WriteBatch::new();
                    match &v {
                        Some(v) => b.put(sub, key(t, k), v),
                        None => b.delete(sub, key(t, k)),
                    };
                    if let Err(e) = db.write(b) {
                        *failed.lock().expect("lock") = Some(format!("phase {p}: write: {e}"));
                        return;
                    }
                    if sim.is_stopped() {
                        return;
                    }
                    acked.lock().expect("lock")[t as usize] = j + 1;
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().expect("failed") {
        return Err(format!("{e}: {:#?}", db.stats()));
    }
    db.check()?;
    let st = db.stats();
    if !sim.is_stopped() && st.persistent_index.as_ref().is_some_and(|p| p.stale) {
        return Err(format!("phase {p}: the persistent index went stale"));
    }
    cov.phases += 1;
    cov.stopped += u64::from(sim.is_stopped());
    cov.cleaned += u64::from(st.cleaner_moved_bytes > 0);
    cov.freed += u64::from(st.cleaner_zones_freed > 0);
    cov.compactions += compactions.into_inner();
    let image = sim.crash(CrashPolicy::KeepRandom {
        seed: rng.next_u64(),
        keep: rng.next_f64(),
    });
    drop(subs);
    drop(db);
    let acked = acked.into_inner().expect("acked");
    let expect = crash_check::expected(state, &acked, OPS, |t, j| {
        let (k, v) = op(p, t, j);
        (key(t, k), v)
    });
    Ok((image, expect))
}

/// Counts a writer thread out when it ends, however it ends.
struct Done<'a>(&'a AtomicU64);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the phases went through.
#[derive(Debug, Default)]
struct Coverage {
    /// Compactions on request that finished before the writers did.
    compactions: u64,
    phases: u64,
    /// The power failed mid-phase (else after it).
    stopped: u64,
    /// The cleaner moved records before the failure.
    cleaned: u64,
    /// The cleaner gave zones back before the failure.
    freed: u64,
}

std::thread_local! {
    /// Recoveries on this test thread that left the Global Index's rebuild to the
    /// background and were read through its stand-ins (R1 in gi/pending.rs).
    static READ_WHILE_REBUILDING: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Of those, recoveries that left memtables' records to the rebuild.
    static SCANS_LEFT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn verify(db: &Db, expect: &Expect) -> Result<State, String> {
    if crash_check::verify_while_rebuilding(db, &subtables(db), subtable_of, expect)? {
        READ_WHILE_REBUILDING.set(READ_WHILE_REBUILDING.get() + 1);
        if db.recovery_report().deferred_memtables > 0 {
            SCANS_LEFT.set(SCANS_LEFT.get() + 1);
        }
    }
    let state = crash_check::verify(db, &subtables(db), subtable_of, expect)?;
    // Recovery rebuilt the persistent index to match (M3), so `check` compared it.
    if db.stats().persistent_index.is_some_and(|p| p.stale) {
        return Err("the persistent index went stale".into());
    }
    Ok(state)
}

fn run_once(
    base: &[u8],
    base_state: &State,
    seed: u64,
    mutation: Option<RecoveryMutation>,
    cov: &mut Coverage,
    cleaning: Cleaning,
) -> Result<(), String> {
    let mut rng = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) + 11);
    let db = open_image(base.to_vec(), mutation, cleaning)?;
    let mut state = verify(
        &db,
        &base_state
            .iter()
            .map(|(k, v)| (k.clone(), vec![v.clone()]))
            .collect(),
    )
    .map_err(|e| format!("seed {seed}: base: {e}"))?;
    let mut db = Some(db);
    for p in 0..2 {
        let (image, expect) = phase(db.take().expect("db"), p, &state, &mut rng, cov, cleaning)
            .map_err(|e| format!("seed {seed}: {e}"))?;
        let recovered = open_image(image, mutation, cleaning)
            .map_err(|e| format!("seed {seed} phase {p}: {e}"))?;
        state = verify(&recovered, &expect).map_err(|e| format!("seed {seed} phase {p}: {e}"))?;
        db = Some(recovered);
    }
    Ok(())
}

fn torture(crashes: u64, mutation: Option<RecoveryMutation>) -> Result<Coverage, String> {
    torture_with(crashes, mutation, Cleaning::Pressure)
}

fn torture_with(
    crashes: u64,
    mutation: Option<RecoveryMutation>,
    cleaning: Cleaning,
) -> Result<Coverage, String> {
    let (base, state) = base(mutation, cleaning);
    let mut cov = Coverage::default();
    let only: Option<u64> = std::env::var("NACRE_TORTURE_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    for seed in (0..crashes).filter(|s| only.is_none_or(|o| o == *s)) {
        run_once(&base, &state, seed, mutation, &mut cov, cleaning)?;
    }
    Ok(cov)
}

#[test]
fn power_failures_during_merges_and_cleaning_lose_nothing_and_leak_no_zone() {
    let cov = torture(260, None).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cov:?}");
    assert!(
        cov.stopped > cov.phases / 2 && cov.cleaned > cov.phases / 4 && cov.freed > cov.phases / 4,
        "crashes hit the cleaner at work: {cov:?}"
    );
}

#[test]
#[ignore = "long run: cargo test -p nacre --release --test torture_gc -- --ignored"]
fn power_failures_during_merges_and_cleaning_long() {
    let cov = torture(5_000, None).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cov:?}");
}

#[test]
fn power_failures_with_the_persistent_index_leave_it_equal_to_the_volatile_one() {
    let cov = torture_with(120, None, Cleaning::PressureIndexed).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cov:?}");
    assert!(
        cov.cleaned > cov.phases / 4,
        "crashes hit the cleaner at work: {cov:?}"
    );
    // Most recoveries served their gets before the volatile Global Index was rebuilt.
    let deferred = READ_WHILE_REBUILDING.get();
    assert!(
        deferred > cov.phases / 2,
        "recoveries read while rebuilding: {deferred} of {}",
        cov.phases
    );
    let left = SCANS_LEFT.get();
    eprintln!("recoveries read while rebuilding: {deferred}, leaving scans: {left}");
    assert!(
        left > 0,
        "no recovery left a memtable's records to the rebuild"
    );
}

#[test]
#[ignore = "long run: cargo test -p nacre --release --test torture_gc -- --ignored"]
fn power_failures_with_the_persistent_index_long() {
    let cov =
        torture_with(3_000, None, Cleaning::PressureIndexed).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cov:?}");
}

#[test]
fn power_failures_during_compaction_on_request_lose_nothing_and_leak_no_zone() {
    let cov = torture_with(260, None, Cleaning::Requested).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cov:?}");
    // Without the thread asking for compaction, the cleaner moves records in about a sixth
    // of the phases (blobs make the pool short for a while).
    assert!(
        cov.stopped > cov.phases / 2 && cov.cleaned > cov.phases / 4 && cov.compactions > 0,
        "crashes hit compaction at work: {cov:?}"
    );
}

#[test]
#[ignore = "long run: cargo test -p nacre --release --test torture_gc -- --ignored"]
fn power_failures_during_compaction_on_request_long() {
    let cov = torture_with(5_000, None, Cleaning::Requested).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cov:?}");
}

/// Timing decides whether a compaction drops a tombstone early in a phase a crash cuts: in
/// 600 crashes the mutation was caught in most runs but not all, so it is not in CI yet.
#[test]
#[ignore = "probabilistic: cargo test -p nacre --release --test torture_gc -- --ignored under_compaction"]
fn torture_catches_tombstones_dropped_while_older_copies_remain_under_compaction() {
    match torture_with(
        260,
        Some(RecoveryMutation::IgnoreGhosts),
        Cleaning::Requested,
    ) {
        Ok(cov) => panic!("torture passed without the ghost rule under compaction: {cov:?}"),
        Err(e) => eprintln!("without IgnoreGhosts: {e}"),
    }
}

/// Torture with `mutation` must fail within `crashes` crash points.
#[test]
fn torture_catches_an_index_that_misses_relocations() {
    mutation_is_caught_with(
        RecoveryMutation::MirrorSkipsRelocation,
        40,
        Cleaning::PressureIndexed,
    );
}

#[test]
fn torture_catches_an_index_not_reconciled_at_open() {
    mutation_is_caught_with(
        RecoveryMutation::SkipIndexReconcile,
        40,
        Cleaning::PressureIndexed,
    );
}

#[test]
fn torture_catches_reads_that_skip_unmerged_memtables_while_rebuilding() {
    mutation_is_caught_with(
        RecoveryMutation::NoShadowIndexes,
        40,
        Cleaning::PressureIndexed,
    );
}

#[test]
fn torture_catches_merged_memtables_left_unread_when_the_commit_id_is_lowered() {
    mutation_is_caught_with(
        RecoveryMutation::ScanMergedLater,
        60,
        Cleaning::PressureIndexed,
    );
}

#[test]
fn torture_catches_a_memtable_marked_merged_before_its_keys_are_in() {
    mutation_is_caught_with(
        RecoveryMutation::MarkMergedEarly,
        60,
        Cleaning::PressureIndexed,
    );
}

fn mutation_is_caught(mutation: RecoveryMutation, crashes: u64) {
    mutation_is_caught_with(mutation, crashes, Cleaning::Pressure)
}

fn mutation_is_caught_with(mutation: RecoveryMutation, crashes: u64, cleaning: Cleaning) {
    match torture_with(crashes, Some(mutation), cleaning) {
        Ok(_) => panic!("torture passed without the {mutation:?} rule in {crashes} crashes"),
        Err(e) => eprintln!("without {mutation:?}: {e}"),
    }
}

/// A zone given back and reused within one run still holds its earlier owner's items. Here
/// subtable `a`'s single-record items fill zones, die (deleted) and are cleaned; subtable
/// `b`'s first write lands at the start of one of those zones; the crash image then keeps
/// `b`'s commit point but not its item (a single-fence commit cut in its fence), so the
/// bytes there are `a`'s old item of the same length and run. Recovery must see a torn tail,
/// never `a`'s key in `b`. Returns what `b` held after recovery.
///
/// Which free zone `b` gets depends on the order the background worker gave zones back (it
/// may be one that held the deletes or the filler, not `a`'s puts): the scenario is run again
/// until `b`'s item lands on one of `a`'s items.
fn reused_zone_after_crash(mutation: Option<RecoveryMutation>) -> Vec<(Vec<u8>, Vec<u8>)> {
    for _ in 0..20 {
        if let Some(b) = try_reused_zone_after_crash(mutation) {
            return b;
        }
    }
    panic!("in 20 runs, b's item never landed where one of a's items was");
}

fn try_reused_zone_after_crash(
    mutation: Option<RecoveryMutation>,
) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut o = opts(mutation);
    o.pool_size = 3 << 20;
    let db = Db::open(o.clone()).expect("open");
    let (a, b) = (db.subtable("a").expect("a"), db.subtable("b").expect("b"));
    let value = |i: u64| {
        let mut v = format!("value-{i:06}-").into_bytes();
        v.resize(700, b'x');
        v
    };
    for i in 0..600u64 {
        db.put(&a, format!("a{i:05}"), value(i)).expect("put");
    }
    let sim = db.sim().expect("sim");
    let before = sim.crash(CrashPolicy::KeepNone);
    for i in 0..600u64 {
        db.delete(&a, format!("a{i:05}")).expect("delete");
    }
    // Writes push the deletes through merges; the cleaner gives a's zones back.
    let mut n = 0;
    while db.stats().cleaner_zones_freed < 4 {
        db.put(&a, "filler", value(n)).expect("put");
        n += 1;
        assert!(n < 100_000, "the cleaner never ran: {:#?}", db.stats());
    }
    db.put(&b, "b0000", value(999_999)).expect("put");
    let mut after = sim.crash(CrashPolicy::KeepNone);
    drop((a, b));
    drop(db);
    let needle = value(999_999);
    let found = after
        .windows(needle.len())
        .position(|w| w == &needle[..])
        .expect("b's value in the image");
    let item = found - 24 - 5 - 40;
    if &before[item..item + 4] != b"NCRI" {
        return None;
    }
    let len = 40 + (24 + 5 + 700usize).next_multiple_of(8);
    after[item..item + len].copy_from_slice(&before[item..item + len]);
    let db = open_image(after, mutation, Cleaning::Pressure).expect("recovery");
    let b = db.subtable("b").expect("b");
    Some(
        db.iter(&b, IterOptions::default())
            .expect("iter")
            .map(|r| r.expect("record"))
            .collect(),
    )
}

#[test]
fn a_zone_reused_within_a_run_never_passes_its_old_items_off() {
    let b = reused_zone_after_crash(None);
    assert!(b.is_empty(), "b's cut write is rolled back: {:?}", b.len());
}

#[test]
fn torture_catches_items_not_bound_to_their_place() {
    let b = reused_zone_after_crash(Some(RecoveryMutation::SkipPlaceCheck));
    assert!(
        b.iter().any(|(k, _)| k.starts_with(b"a")),
        "without the place check, a's old item shows up in b"
    );
}

#[test]
fn torture_catches_tombstones_dropped_while_older_copies_remain() {
    mutation_is_caught(RecoveryMutation::IgnoreGhosts, 260);
}

#[test]
fn torture_catches_relocated_copies_counted_once() {
    mutation_is_caught(RecoveryMutation::CountCopiesOnce, 260);
}

#[test]
fn torture_catches_blobs_registered_that_are_not_newest() {
    mutation_is_caught(RecoveryMutation::ClaimEveryBlob, 260);
}

#[test]
fn torture_catches_blobs_not_registered() {
    mutation_is_caught(RecoveryMutation::SkipBlobClaims, 260);
}

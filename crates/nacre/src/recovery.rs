//! Opening a database after a clean close or a crash: find the subtables and their memtable
//! lists, release what a crash left allocated but unreachable, roll back the one group whose
//! commit a crash may have cut (C1), and rebuild the indexes in parallel (C5): each
//! subtable's newest user memtable becomes its active memtable again, and every other
//! memtable (immutable, merged, or holding relocated records) is scanned into the Global
//! Index. A record and its relocated copy (same key and sequence) may both be found after a
//! crash mid-relocation: the Global Index keeps one and counts the other as a ghost (GI2).
//! The work is proportional to the data in PM, never to the write history. Once the indexes
//! are built, the blobs that are their key's newest version are registered (B3 in blob.rs)
//! and every committed zone that no memtable slot and no such blob names is given back.
//!
//! Order of the steps, each safe to redo after a crash during recovery: (1) read every
//! memtable's tail in parallel; (2) decide and persist the rollbacks; (3) rebuild indexes in
//! parallel; (4) lower `commit_id` if it names a group that is not visible; (5) record the run
//! as settled; (6) collapse every `gidx` to `(cur, cur)` (T4); (7) start the next run.
//! Until (5) a crash makes the next open decide again, on a state where the decided
//! rollbacks are partly applied, which leads to the same decision; after (5) it only redoes
//! (6) and (7).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nacre_halloc::ObjId;
use nacre_pmem::PmOffset;

use crate::art::ArtIndex;
use crate::blob::Blobs;
use crate::error::{Error, Result};
use crate::gi::index::KeyEntry;
use crate::gi::pending::{IndexReady, Pending};
use crate::gi::{fresh, GlobalIndex, Version};
use crate::index::MemIndex;
use crate::memtable::{Found, Memtable, Role, ScanStats, Tail, TailFacts};
use crate::options::RecoveryMutation;
use crate::record::ItemHeader;
use crate::space::cleaner::register_zones;
use crate::space::Space;
use crate::store::Store;
use crate::subtable::Subtable;
use crate::view::{MemSource, Tickets, View};

/// What recovery did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// Wall time from the start of recovery to a usable database.
    pub elapsed: Duration,
    /// Whether the previous close was clean (no rollback check needed).
    pub clean: bool,
    /// Whether this open created the database (a new pool, or one whose engine root was
    /// never written): there was nothing to recover, and `clean` is false.
    pub created: bool,
    /// The persisted commit id (last committed sequence number).
    pub commit_id: u64,
    /// Subtables found.
    pub subtables: usize,
    /// Memtables scanned.
    pub memtables: usize,
    /// Items (group extents) scanned.
    pub items: u64,
    /// Records indexed.
    pub records: u64,
    /// Bytes of items scanned.
    pub bytes_scanned: u64,
    /// Memtables whose last group was rolled back.
    pub rolled_back: usize,
    /// Items of the newest group that PM no longer showed because their memtables had been
    /// spilled and given back, while the disk levels proved the group committed: it was kept
    /// whole instead of rolled back (S1 in docs/format.md).
    pub spilled_items: usize,
    /// Whether `commit_id` named a group that was rolled back or never became visible, and was
    /// lowered to the last visible sequence number.
    pub lowered_commit_id: bool,
    /// The run this open started (items written from now on carry it).
    pub run: u64,
    /// Committed but unreachable memtables released.
    pub released_memtables: usize,
    /// Committed but unreferenced zones released.
    pub released_zones: usize,
    /// Records whose value failed its checksum (identity intact): indexed, and reads of their
    /// keys fail with [`Error::Corrupt`]. Each is logged with its subtable, key and offset.
    pub damaged_records: u64,
    /// Unreferenced zones kept instead of released because a blob record's descriptor was
    /// damaged (it may name them), or because a salvage open lost subtables (they may be
    /// theirs).
    pub quarantined_zones: usize,
    /// Memtables no intact subtable reaches, kept (salvage open).
    pub quarantined_memtables: usize,
    /// Subtables a salvage open ([`crate::Options::salvage`]) could not validate and left out:
    /// none of their data is served. Empty on every other open (damage there fails it).
    pub lost: Vec<LostSubtable>,
    /// Threads that rebuilt indexes.
    pub threads: usize,
    /// Time spent scanning memtables (and rebuilding active memtables' indexes).
    pub scan_elapsed: Duration,
    /// Time spent building the Global Indexes from the scanned records (the reconcile
    /// included).
    pub gi_elapsed: Duration,
    /// Whether open left the Global Index's rebuild to the background worker
    /// (`Options::background_index_rebuild`, gi/pending.rs): reads were served at once,
    /// and `gi_elapsed` covers only what open did.
    pub background_rebuild: bool,
    /// Memtables merged into the persistent index whose records open left to the
    /// background rebuild (it read their tails only).
    pub deferred_memtables: usize,
    /// Of `gi_elapsed`, the time spent bringing the persistent index's trees to the rebuilt
    /// Global Indexes (M3 in gi/mirror.rs); zero without `Options::persistent_index`.
    pub reconcile_elapsed: Duration,
    /// Memtables whose records a spill had made durable on disk when the database last
    /// stopped: their zones were given back, nothing in them was indexed.
    pub spilled_memtables: usize,
}

/// A subtable as found in PM: id, name, object and memtables (newest first).
type Found0 = (u64, String, ObjId, Vec<Arc<Memtable>>);

/// How to recover: the options that matter to it.
pub(crate) struct How {
    pub threads: usize,
    pub mutation: Option<RecoveryMutation>,
    pub salvage: bool,
    /// With disk levels: what their newest spills hold.
    pub spilled: Option<OnDisk>,
    /// Set once the volatile Global Indexes are installed (pending.rs); recovery sets it
    /// unless it leaves the rebuild to the background worker.
    pub ready: Arc<IndexReady>,
}

/// What the disk levels hold, from each subtable's newest spill marker.
#[derive(Clone, Debug, Default)]
pub(crate) struct OnDisk {
    /// Per subtable id, the memtables (by birth) its newest spill holds.
    pub births: HashMap<u64, HashSet<u64>>,
    /// The highest sequence number of a record on disk: the last visible group is at least
    /// this one, whatever PM still holds (the newest records may all have been spilled).
    pub max_seq: u64,
    /// Salvage: subtables whose disk levels failed to open, with the failure. They are lost
    /// to this open like a subtable whose memtables fail their checks.
    pub lost: HashMap<u64, String>,
}

pub(crate) fn recover(
    store: &Store,
    how: How,
    db: u64,
    tickets: &Arc<Tickets>,
    space: &Space,
    blobs: &Blobs,
) -> Result<(Vec<Subtable>, RecoveryReport, Option<Deferred>)> {
    let How {
        threads,
        mutation,
        salvage,
        spilled,
        ready,
    } = how;
    let t0 = Instant::now();
    let mut rep = RecoveryReport {
        commit_id: store.commit_id(),
        clean: store.clean(),
        created: store.created,
        ..Default::default()
    };
    let mut found: Vec<Found0> = Vec::new();
    let mut all: Vec<Arc<Memtable>> = Vec::new();
    // `owner[i]`: the index in `found` of the subtable `all[i]` belongs to.
    let mut owner: Vec<usize> = Vec::new();
    let mut reachable: HashSet<ObjId> = HashSet::new();
    let mut ids: HashSet<u64> = HashSet::new();
    let mut lost: Vec<LostSubtable> = Vec::new();
    // Indexes in `all` of memtables whose records a registered spill holds (G2 in disk/mod.rs):
    // they take part in deciding rollbacks like any other, but are not indexed, and their
    // zones go back once the run is settled.
    let mut on_disk: HashSet<usize> = HashSet::new();
    // Subtables lost to this salvage open after their object loaded (by index in `found`),
    // with the reason: nothing of theirs is indexed, rolled back or freed.
    let mut gone: HashMap<usize, String> = HashMap::new();
    let lost_disk = spilled.as_ref().map(|s| &s.lost);
    for obj in store.subs.objects().committed_ids() {
        let loaded = load_subtable(store, obj, &mut ids, &reachable);
        match loaded {
            Ok((f, objs)) => {
                reachable.extend(objs);
                let births = spilled
                    .as_ref()
                    .and_then(|s| s.births.get(&f.0))
                    .filter(|_| mutation != Some(RecoveryMutation::SkipSpilledRelease));
                if let Some(why) = lost_disk.and_then(|l| l.get(&f.0)) {
                    gone.insert(found.len(), why.clone());
                }
                for m in &f.3 {
                    if births.is_some_and(|b| b.contains(&m.birth)) {
                        on_disk.insert(all.len());
                    }
                    all.push(m.clone());
                    owner.push(found.len());
                }
                found.push(f);
            }
            Err(e) if salvage => lost.push(LostSubtable::of(store, obj, &e)),
            Err(e) => return Err(e),
        }
    }
    // Disk levels that failed to open and that no subtable found here owns.
    for (id, why) in lost_disk.into_iter().flatten() {
        if !found.iter().any(|f| f.0 == *id) && !lost.iter().any(|l| l.id == Some(*id)) {
            lost.push(LostSubtable {
                id: Some(*id),
                name: None,
                reason: why.clone(),
            });
        }
    }
    // Committed memtables no list reaches: a crash between commit and link (a new memtable:
    // zones come only once it is linked), or between unlinking and releasing one (its
    // zones were all given back first). Either way it holds no zone; one that does was cut
    // off by damage to a list or a subtable, and releasing it would lose its data for good.
    for m in store.mems.objects().committed_ids() {
        if reachable.contains(&m) {
            continue;
        }
        let holds = (0..store.mems.slots()).try_fold(false, |any, s| {
            store.mems.zone(m, s).map(|z| any || z.is_some())
        });
        match holds {
            Ok(false) if lost.is_empty() || !salvage => {
                store.mems.release(m)?;
                rep.released_memtables += 1;
            }
            // A lost subtable's memtables are kept as they are (salvage frees nothing it
            // could not validate). One holding zones that no lost subtable accounts for
            // belongs to a subtable whose object is gone: name it by the id it records.
            _ if salvage => {
                rep.quarantined_memtables += 1;
                if let (Ok(true), Ok(head)) = (holds, store.mems.head(m)) {
                    let known = lost.iter().any(|l| l.id == Some(head.subtable))
                        || found.iter().any(|f| f.0 == head.subtable);
                    if let Some(l) = lost.iter_mut().find(|l| l.id.is_none()).filter(|_| !known) {
                        // Most likely the subtable whose object could not be read.
                        l.id = Some(head.subtable);
                    } else if !known {
                        lost.push(LostSubtable {
                            id: Some(head.subtable),
                            name: None,
                            reason: "memtables holding data are reached by no subtable \
                                     (its object is gone or uncommitted)"
                                .into(),
                        });
                    }
                }
            }
            Ok(_) => {
                return Err(Error::corrupt_at(
                    "a memtable holding zones is in no subtable's list (a damaged list or \
                     subtable object?)",
                    store.mems.objects().offset(m),
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }

    let threads = threads.clamp(1, all.len().max(1));
    let run = store.run();
    // Clean close, or a crash after this run's rollbacks were decided and applied: nothing to
    // decide, only the steps after it to redo.
    let settled = rep.clean || store.settled_run() == run;
    let check = (!settled).then_some(run);
    let facts = salvaged(
        parallel_each(all.len(), threads, |i| {
            all[i].scan_tail(
                store,
                check,
                mutation == Some(RecoveryMutation::OneItemPerMemtable),
            )
        }),
        salvage,
        &owner,
        &mut gone,
    )?;
    let live: Vec<usize> = (0..all.len()).filter(|&i| facts[i].is_some()).collect();
    let facts: Vec<TailFacts> = facts.into_iter().flatten().collect();
    let mut cur: Vec<u64> = vec![0; all.len()];
    for (k, &i) in live.iter().enumerate() {
        cur[i] = facts[k].cur;
    }
    if !settled {
        // `decide` numbers the live memtables; `live` maps them back to `all`.
        let on_disk_seq = spilled.as_ref().map_or(0, |s| s.max_seq);
        let (roll, spilled_items) = decide(&facts, run, rep.commit_id, on_disk_seq, mutation)?;
        rep.spilled_items = spilled_items;
        if spilled_items > 0 {
            tracing::info!(
                items = spilled_items,
                run,
                "kept the newest group: its missing items were spilled"
            );
        }
        for &k in &roll {
            let i = live[k];
            all[i].roll_back(store, &facts[k]);
            cur[i] = facts[k].prev;
        }
        if !roll.is_empty() {
            store.pool.fence()?;
            tracing::info!(
                memtables = roll.len(),
                run,
                "rolled back a group a crash cut"
            );
        }
        rep.rolled_back = roll.len();
    }
    // The active memtable of each subtable: its newest user memtable (S3).
    let active: HashSet<ObjId> = found
        .iter()
        .filter_map(|(_, _, _, list)| list.iter().find(|m| m.role == Role::User))
        .map(|m| m.obj)
        .collect();
    // R1 in gi/pending.rs: with trusted trees, reads need only the memtables not marked
    // merged besides the trees, and the rest of the rebuild can wait.
    let defer = store.background_rebuild
        && !salvage
        && !store.created
        && store.gi_forest.as_ref().is_some_and(|f| !f.is_stale())
        && (store.index_trusted() || mutation == Some(RecoveryMutation::TrustIndexAlways));
    let shadow: Vec<bool> = if defer {
        all.iter()
            .map(|m| Ok(!store.mems.merged(m.obj)?))
            .collect::<Result<_>>()?
    } else {
        vec![false; all.len()]
    };
    let t_scan = Instant::now();
    let rebuilt = parallel_each(all.len(), threads, |i| {
        let m = &all[i];
        if gone.contains_key(&owner[i]) || on_disk.contains(&i) {
            Ok((ScanStats::default(), Rebuilt::Taken))
        } else if active.contains(&m.obj) {
            let (index, st, blobs) = m.rebuild_index(store, cur[i], |r: &Found| r.blob)?;
            Ok((st, Rebuilt::Active(Arc::new(index), blobs)))
        } else if defer && !shadow[i] {
            // Merged into the trees: its records wait for the background rebuild.
            m.prepare(store, cur[i])?;
            Ok((ScanStats::default(), Rebuilt::Later))
        } else if shadow[i] {
            let (index, st, recs) = m.rebuild_index(store, cur[i], |_: &Found| true)?;
            Ok((st, Rebuilt::Shadow(Arc::new(index), recs)))
        } else {
            let mut recs = Vec::new();
            let st = m.rebuild(store, cur[i], |r| recs.push(r))?;
            Ok((st, Rebuilt::Global(recs)))
        }
    });
    let rebuilt: Vec<(ScanStats, Rebuilt)> = salvaged(rebuilt, salvage, &owner, &mut gone)?
        .into_iter()
        .map(|r| r.unwrap_or((ScanStats::default(), Rebuilt::Taken)))
        .collect();
    // Records spilled to disk count too: the newest groups may live only there.
    let mut max_seq = spilled
        .as_ref()
        .filter(|_| mutation != Some(RecoveryMutation::IgnoreDiskSequences))
        .map_or(0, |s| s.max_seq);
    let mut by_mem: Vec<Rebuilt> = Vec::with_capacity(all.len());
    let mut stats: Vec<ScanStats> = Vec::with_capacity(all.len());
    for (st, r) in rebuilt {
        stats.push(st);
        by_mem.push(r);
    }
    // The commit id is lowered to the newest record found (below). Records of memtables
    // left to the background rebuild are below the commit id, so they cannot change that
    // while the newest record scanned reaches it; where it does not, they are read now.
    let scanned = stats
        .iter()
        .map(|s| s.max_seq)
        .max()
        .unwrap_or(0)
        .max(max_seq);
    if !settled
        && scanned < rep.commit_id
        && mutation != Some(RecoveryMutation::ScanMergedLater)
        && by_mem.iter().any(|r| matches!(r, Rebuilt::Later))
    {
        let now = parallel_each(all.len(), threads, |i| match by_mem[i] {
            Rebuilt::Later => {
                let mut recs = Vec::new();
                let st = all[i].rebuild(store, cur[i], |r| recs.push(r))?;
                Ok(Some((st, recs)))
            }
            _ => Ok(None),
        });
        for (i, r) in now.into_iter().enumerate() {
            if let Some((st, recs)) = r? {
                stats[i] = st;
                by_mem[i] = Rebuilt::Global(recs);
            }
        }
    }
    rep.deferred_memtables = by_mem
        .iter()
        .filter(|r| matches!(r, Rebuilt::Later))
        .count();
    for st in stats {
        let st: ScanStats = st;
        rep.items += st.items;
        rep.records += st.records;
        rep.damaged_records += st.damaged;
        rep.bytes_scanned += st.bytes;
        max_seq = max_seq.max(st.max_seq);
    }
    if max_seq > rep.commit_id {
        return Err(Error::corrupt(format!(
            "record sequence {max_seq} above commit id {}",
            rep.commit_id
        )));
    }
    if !settled {
        // The single-fence commit can leave `commit_id` naming a group that recovery rolled
        // back or that never became visible; new groups must continue right after the last
        // visible one.
        // (Not when subtables were lost: their records, unread, may lie above `max_seq`.)
        if max_seq < rep.commit_id
            && gone.is_empty()
            && mutation != Some(RecoveryMutation::SkipCommitIdLowering)
        {
            tracing::info!(from = rep.commit_id, to = max_seq, "lowered commit id");
            store.persist_commit_id(max_seq)?;
            rep.commit_id = max_seq;
            rep.lowered_commit_id = true;
        }
        store.set_settled_run(run)?;
    }
    // T4: every memtable starts the next run with `prev == cur`.
    let mut collapsed = false;
    for (i, m) in all.iter().enumerate() {
        if !gone.contains_key(&owner[i]) {
            collapsed |= m.collapse(store)?;
        }
    }
    if collapsed {
        store.pool.fence()?;
    }
    store.set_run(run + 1)?;
    rep.run = run + 1;
    // M2 in gi/mirror.rs: a crash after a spill reached the disk but before it finished
    // left the frozen generation's tree, whose entries point into the zones given back
    // here. Which of the subtable's two trees that is is not recorded, so both go (the
    // reconcile below rebuilds the live one).
    let spilled_subs: HashSet<u64> = on_disk.iter().map(|&i| found[owner[i]].0).collect();
    if let Some(f) = store
        .gi_forest
        .as_ref()
        .filter(|_| mutation != Some(RecoveryMutation::KeepSpilledTrees))
    {
        for &id in &spilled_subs {
            f.drop_subtable(u32::try_from(id).unwrap_or(u32::MAX));
        }
    }
    for &i in &on_disk {
        for (slot, _) in all[i].zones() {
            all[i].reclaim_slot(store, slot)?;
        }
    }
    rep.spilled_memtables = on_disk.len();
    let pos = |m: &Arc<Memtable>| all.iter().position(|x| Arc::ptr_eq(x, m));
    let every_blob = mutation == Some(RecoveryMutation::ClaimEveryBlob);
    // Records naming blobs whose zones stay (B3 in blob.rs): each key's newest version.
    let mut claims: Vec<Claim> = Vec::new();
    let mut parts: Vec<Part> = Vec::new();
    for (fi, (id, name, obj, list)) in found.into_iter().enumerate() {
        if gone.contains_key(&fi) {
            lost.push(LostSubtable {
                id: Some(id),
                name: Some(name),
                reason: gone.get(&fi).cloned().unwrap_or_default(),
            });
            continue;
        }
        let mut act = None;
        let mut recs = Vec::new();
        let mut shadows = Vec::new();
        let mut later_mems = Vec::new();
        let mut unmarked = Vec::new();
        // The audit's view of what the trees must hold (trusted trees of a subtable whose
        // trees stayed).
        let mut expect =
            (store.audit_index && store.index_trusted() && !spilled_subs.contains(&id))
                .then(Completeness::default);
        for m in &list {
            let Some(i) = pos(m) else { continue };
            match std::mem::replace(&mut by_mem[i], Rebuilt::Taken) {
                Rebuilt::Active(index, blobs) => {
                    // The active memtable is the newest: its newest version of a key is the
                    // key's newest.
                    claims.extend(
                        blobs
                            .iter()
                            .filter(|r| {
                                every_blob || index.get(&r.key, u64::MAX) == Some((r.seq, r.at))
                            })
                            .map(|r| (r.at, r.size)),
                    );
                    act = Some(MemSource {
                        mem: m.clone(),
                        index,
                    })
                }
                Rebuilt::Global(r) => {
                    register_zones(space, id as u32, m, 0);
                    if let Some(e) = expect.as_mut() {
                        e.add(&r, store.mems.merged(m.obj)?);
                    }
                    recs.extend(r);
                }
                Rebuilt::Shadow(index, r) => {
                    register_zones(space, id as u32, m, 0);
                    if let Some(e) = expect.as_mut() {
                        e.add(&r, store.mems.merged(m.obj)?);
                    }
                    recs.extend(r);
                    if mutation != Some(RecoveryMutation::NoShadowIndexes) {
                        shadows.push(index);
                    }
                    unmarked.push(m.clone());
                }
                Rebuilt::Later => {
                    register_zones(space, id as u32, m, 0);
                    if let Some(e) = expect.as_mut() {
                        // The audit reads now what the rebuild reads again later.
                        let mut r = Vec::new();
                        m.rebuild(store, cur[i], |x| r.push(x))?;
                        e.add(&r, store.mems.merged(m.obj)?);
                    }
                    later_mems.push((m.clone(), cur[i]));
                }
                Rebuilt::Taken => {}
            }
        }
        parts.push((
            (id, name, obj, list),
            act,
            recs,
            expect,
            (shadows, later_mems, unmarked),
        ));
    }
    rep.scan_elapsed = t_scan.elapsed();
    let t_gi = Instant::now();
    if let Some(f) = &store.gi_forest {
        if store.audit_index && store.index_failed() {
            // The audit's runs expect no failure of the trees before a crash (one after it
            // cannot reach the pool).
            return Err(Error::corrupt(
                "persistent index: a tree failed in the last run (M4), so it is not trusted",
            ));
        }
        if !store.index_trusted() && mutation != Some(RecoveryMutation::TrustIndexAlways) {
            // A run without the index or a stale tree: entries may name zones given back
            // since, so the trees start over (the reconcile below writes them again).
            f.drop_others(store.max_subtables, &[]);
        } else if store.audit_index {
            let n = f.audit(store)?;
            tracing::debug!(entries = n, "persistent index audited before reconciling");
        }
        for ((id, ..), _, _, expect, _) in &parts {
            if let Some(e) = expect {
                f.check_complete(*id as u32, &e.keys)?;
            }
        }
    }
    // Disk levels present; tombstones kept for them.
    let disk = (
        spilled.is_some(),
        spilled.is_some() && mutation != Some(RecoveryMutation::DropTombstonesAboveDisk),
    );
    let mut subtables = Vec::new();
    let mut later: Vec<DeferredSub> = Vec::new();
    for ((id, name, obj, list), act, recs, _, (shadows, later_mems, unmarked)) in parts {
        let active_mem = act.as_ref().map(|a| a.mem.clone());
        // What the background rebuild takes (gi/pending.rs), and the stand-in views hold.
        let mut deferred = None;
        let (gi, revisit) = if defer {
            // R1: reads answer from the shadows and the tree until the worker installs
            // the rebuilt index; a subtable whose trees recovery dropped waits for it.
            // With two trees or none, the tree is picked once the index is rebuilt.
            let mirror = store
                .gi_forest
                .as_ref()
                .filter(|f| {
                    !spilled_subs.contains(&id)
                        && (f.one_tree(id as u32)
                            || mutation == Some(RecoveryMutation::ReadsFromEitherTree))
                })
                .and_then(|f| f.pick(id as u32))
                .map(Arc::new);
            let gi = Arc::new(GlobalIndex::pending(Pending {
                shadows,
                mirror: mirror.clone(),
                ready: ready.clone(),
                rebuilt: std::sync::OnceLock::new(),
            }));
            deferred = Some((recs, mirror, gi.clone()));
            (gi, Vec::new())
        } else {
            let active = act.as_ref().map(|a| (&*a.index, u64::MAX));
            let (built, reconciled) =
                index_subtable(store, space, (id, recs, active), (threads, disk), None)?;
            rep.reconcile_elapsed += reconciled;
            claims.extend(built.blobs);
            (Arc::new(built.gi), built.revisit)
        };
        let index = act.as_ref().map(|a| a.index.clone());
        let view = View {
            active: act,
            immutables: Vec::new(),
            gi,
            frozen: None,
            _ticket: tickets.issue(rep.commit_id),
        };
        let sub = Subtable::new(db, id as u32, name, obj, list.clone(), view);
        sub.inner.revisit.lock().extend(revisit);
        if let Some((recs, mirror, pending)) = deferred {
            later.push(DeferredSub {
                sub: sub.clone(),
                recs,
                mems: later_mems,
                unmarked,
                active: index,
                mirror,
                pending,
            });
        }
        // Memtables left without zones (a crash after their last zone was given back).
        for m in &list {
            let is_active = active_mem.as_ref().is_some_and(|a| Arc::ptr_eq(a, m));
            if m.zones().is_empty() && !is_active {
                sub.inner.unlink(store, m)?;
            }
        }
        subtables.push(sub);
    }
    if let Some(f) = &store.gi_forest {
        let live: Vec<u32> = subtables.iter().map(|s: &Subtable| s.id()).collect();
        f.drop_others(store.max_subtables, &live);
        // Every tree follows the volatile index from here (M1), unless one failed (M4).
        if !f.is_stale() && !store.index_trusted() {
            store.set_index_trusted(true)?;
        }
    }
    // B3: the newest blobs keep their zones; every other zone no memtable names goes.
    let referenced: HashSet<ObjId> = all.iter().flat_map(|m| m.zones()).map(|(_, z)| z).collect();
    // Zones no memtable names now: only these can be orphans (zones taken after open belong
    // to writes made since).
    let unnamed: Vec<ObjId> = store
        .zones
        .objects()
        .committed_ids()
        .into_iter()
        .filter(|z| !referenced.contains(z))
        .collect();
    let deferred = if defer {
        rep.background_rebuild = true;
        Some(Deferred {
            subs: later,
            claims,
            referenced,
            unnamed,
            threads,
            disk,
            bound: rep.commit_id,
        })
    } else {
        let rel = release_orphans(
            store,
            blobs,
            mutation,
            (claims, &referenced, unnamed),
            &lost,
        )?;
        (rep.released_zones, rep.quarantined_zones) = rel;
        None
    };
    for l in &lost {
        tracing::warn!(id = ?l.id, name = ?l.name, reason = %l.reason, "salvage: subtable lost");
    }
    rep.lost = lost;
    rep.subtables = subtables.len();
    rep.memtables = all.len();
    rep.threads = threads;
    rep.gi_elapsed = t_gi.elapsed();
    rep.elapsed = t0.elapsed();
    Ok((subtables, rep, deferred))
}

/// B3 at the end of recovery: registers the zones of each key's newest blob (`claims`)
/// and gives back every zone of `unnamed` (no memtable names it) that no blob holds.
/// Returns the zones released and the zones quarantined instead (damaged blob descriptors,
/// or a salvage open that lost subtables).
pub(crate) fn release_orphans(
    store: &Store,
    blobs: &Blobs,
    mutation: Option<RecoveryMutation>,
    (claims, referenced, unnamed): (Vec<Claim>, &HashSet<ObjId>, Vec<ObjId>),
    lost: &[LostSubtable],
) -> Result<(usize, usize)> {
    let mut unreadable = 0usize;
    if mutation != Some(RecoveryMutation::SkipBlobClaims) {
        for (at, size) in claims {
            match crate::record::read_record(&store.pool, at, size as usize) {
                Ok(rec) => blobs.claim(store, &rec.value, referenced)?,
                Err(Error::Corrupt { .. }) => unreadable += 1,
                Err(e) => return Err(e),
            }
        }
    }
    let (registered, _) = blobs.zones();
    let orphans: Vec<ObjId> = unnamed
        .into_iter()
        .filter(|z| !registered.contains_key(&z.0))
        .collect();
    if unreadable == 0 && lost.is_empty() {
        store.zones.reclaim(&orphans)?;
        Ok((orphans.len(), 0))
    } else if !lost.is_empty() {
        // Lost subtables' zones are among them: keep every one (salvage frees nothing).
        blobs.quarantine(&orphans);
        Ok((0, orphans.len()))
    } else {
        // Damaged descriptors may name any of them: keep them all for this run.
        tracing::warn!(
            blobs = unreadable,
            zones = orphans.len(),
            "blob records with damaged descriptors: unnamed zones kept, not freed"
        );
        blobs.quarantine(&orphans);
        Ok((0, orphans.len()))
    }
}

/// What recovery leaves to the background worker when it defers the Global Index's
/// rebuild (gi/pending.rs): per subtable, the records to index; the blob claims and the
/// zones to judge once the claims are in (B3).
pub(crate) struct Deferred {
    pub subs: Vec<DeferredSub>,
    pub claims: Vec<Claim>,
    pub referenced: HashSet<ObjId>,
    pub unnamed: Vec<ObjId>,
    pub threads: usize,
    /// Disk levels present; tombstones kept for them.
    pub disk: (bool, bool),
    /// The commit id at open: the active memtable's versions above it were written since.
    pub bound: u64,
}

/// One subtable's share of [`Deferred`].
pub(crate) struct DeferredSub {
    pub sub: Subtable,
    pub recs: Vec<Found>,
    /// Memtables merged into the trees, with their commit points: their records are read
    /// by the rebuild.
    pub mems: Vec<(Arc<Memtable>, u64)>,
    /// Memtables not marked merged: once the tree is reconciled, every key of theirs is in
    /// it (M1), so they are marked (M6) and the next open need not read them.
    pub unmarked: Vec<Arc<Memtable>>,
    /// The active memtable's index (its versions up to `bound` shadow older blobs).
    pub active: Option<Arc<ArtIndex>>,
    /// The tree to bring to the rebuilt index (M3); none: picked then, as open does.
    pub mirror: Option<Arc<crate::gi::mirror::Mirror>>,
    /// The stand-in the subtable's views hold until then.
    pub pending: Arc<GlobalIndex>,
}

/// Builds subtable `id`'s Global Index from `recs` ([`build_gi`], the active memtable's
/// index with its bound) and brings its tree to it (M3): `picked`, the tree open already
/// chose, or the one chosen now. The index holds the tree unless that failed (M4). Also
/// how long the reconcile took.
pub(crate) fn index_subtable(
    store: &Store,
    space: &Space,
    (id, recs, active): (u64, Vec<Found>, Option<(&ArtIndex, u64)>),
    (threads, disk): (usize, (bool, bool)),
    picked: Option<Arc<crate::gi::mirror::Mirror>>,
) -> Result<(Built, Duration)> {
    let mut built = build_gi(store, space, recs, active, (threads, disk.0, disk.1))?;
    let t = Instant::now();
    let mirror = match (&store.gi_forest, picked) {
        (Some(f), Some(m)) => f.reconcile_picked(&m, &built.gi, &built.cuts).then_some(m),
        (Some(f), None) => f.reconcile(id as u32, &built.gi, &built.cuts).map(Arc::new),
        (None, _) => None,
    };
    built.gi.set_mirror(mirror);
    Ok((built, t.elapsed()))
}

/// A subtable a salvage open left out, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LostSubtable {
    /// Its id, when its object could be read.
    pub id: Option<u64>,
    /// Its name, when its object could be read.
    pub name: Option<String>,
    /// The check that failed.
    pub reason: String,
}

impl LostSubtable {
    fn of(store: &Store, obj: ObjId, e: &Error) -> LostSubtable {
        let (id, name) = store
            .subs
            .read(obj)
            .map_or((None, None), |(i, n)| (Some(i), Some(n)));
        LostSubtable {
            id,
            name,
            reason: e.to_string(),
        }
    }
}

/// Loads subtable object `obj` and its memtable list; the memtable objects it reaches.
fn load_subtable(
    store: &Store,
    obj: ObjId,
    ids: &mut HashSet<u64>,
    reachable: &HashSet<ObjId>,
) -> Result<(Found0, Vec<ObjId>)> {
    let (id, name) = store.subs.read(obj)?;
    if id >= store.max_subtables || !ids.insert(id) {
        return Err(Error::corrupt_at(
            format!("subtable {name:?} has a bad or duplicate id {id}"),
            store.subs.objects().offset(obj),
        ));
    }
    let mut list = Vec::new();
    let mut mine = Vec::new();
    let mut at = store.subs.memlist(obj)?;
    while !at.is_null() {
        let m = store
            .mems
            .objects()
            .id_at(at)
            .filter(|m| store.mems.objects().check(*m).unwrap_or(false))
            .ok_or_else(|| {
                Error::corrupt(format!("subtable {name:?} links a bad memtable at {at}"))
            })?;
        if reachable.contains(&m) || mine.contains(&m) {
            return Err(Error::corrupt(format!("memtable list of {name:?} loops")));
        }
        mine.push(m);
        let mt = Arc::new(Memtable::load(store, m)?);
        if mt.subtable != id {
            return Err(Error::corrupt_at(
                format!("subtable {name:?} links a memtable of another subtable"),
                at,
            ));
        }
        list.push(mt);
        at = store.mems.next(m)?;
    }
    Ok(((id, name, obj, list), mine))
}

/// Per-memtable results: on a salvage open, a memtable's failure marks its subtable (`owner`)
/// gone, with the reason; otherwise the first failure is the result.
fn salvaged<T>(
    results: Vec<Result<T>>,
    salvage: bool,
    owner: &[usize],
    gone: &mut HashMap<usize, String>,
) -> Result<Vec<Option<T>>> {
    let mut out = Vec::with_capacity(results.len());
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(v) if !gone.contains_key(&owner[i]) => out.push(Some(v)),
            Ok(_) => out.push(None),
            Err(e) if salvage => {
                gone.entry(owner[i]).or_insert_with(|| e.to_string());
                out.push(None);
            }
            Err(e) => return Err(e),
        }
    }
    // A subtable marked gone by a later memtable: drop its earlier results too.
    for (i, o) in out.iter_mut().enumerate() {
        if gone.contains_key(&owner[i]) {
            *o = None;
        }
    }
    Ok(out)
}

/// A subtable on its way through recovery: what was found, its active memtable, its Global
/// Index's records, and the audit's expectations of its trees.
type Part = (
    Found0,
    Option<MemSource>,
    Vec<Found>,
    Option<Completeness>,
    (
        Vec<Arc<ArtIndex>>,
        Vec<(Arc<Memtable>, u64)>,
        Vec<Arc<Memtable>>,
    ),
);

/// Per key of a subtable's Global Index memtables (the audit of `Options::
/// audit_persistent_index`): the newest version found anywhere, and the newest found in a
/// memtable not marked merged into the persistent index.
#[derive(Default)]
struct Completeness {
    keys: HashMap<Vec<u8>, crate::gi::mirror::Expected>,
}

impl Completeness {
    fn add(&mut self, recs: &[Found], marked: bool) {
        let newer = |cur: Option<(u64, bool, bool)>, r: &Found| {
            if cur.is_none_or(|(s, _, _)| s < r.seq) {
                Some((r.seq, r.tomb, r.blob))
            } else {
                cur
            }
        };
        for r in recs {
            let e = self.keys.entry(r.key.clone()).or_default();
            e.newest = newer(e.newest, r);
            e.values += u64::from(!r.tomb);
            if !marked {
                e.unmarked = newer(e.unmarked, r);
            }
        }
    }
}

/// A record naming a blob whose zones stay (B3 in blob.rs): where it is and its size.
pub(crate) type Claim = (PmOffset, u32);

/// What rebuilding one memtable produced.
enum Rebuilt {
    /// The index of an active memtable, and its records that name blobs.
    Active(Arc<ArtIndex>, Vec<Found>),
    /// The records of a memtable that belongs to the Global Index.
    Global(Vec<Found>),
    /// Those of one not marked merged into the persistent index, with an index for reads
    /// while the Global Index is rebuilt in the background (R1 in gi/pending.rs).
    Shadow(Arc<ArtIndex>, Vec<Found>),
    /// One marked merged: read by the background rebuild.
    Later,
    Taken,
}

/// Builds a subtable's Global Index from every record found in its Global Index memtables:
/// per key, the newest version stays (nobody reads older ones yet), the other copies count
/// as ghosts (GI2), and a tombstone with no other copy goes (GI3). Also returns the records
/// naming blobs that are their key's newest version in the Global Index (in PM-only mode, none
/// shadowed by the `active` memtable).
fn build_gi(
    store: &Store,
    space: &Space,
    recs: Vec<Found>,
    active: Option<(&ArtIndex, u64)>,
    (threads, disk, keep_tombstones): (usize, bool, bool),
) -> Result<Built> {
    // Every copy of a key goes to one bucket; buckets are sorted and inserted in parallel
    // (the index is a concurrent skip list).
    let buckets = threads.max(1);
    let mut parts: Vec<Vec<Found>> = (0..buckets).map(|_| Vec::new()).collect();
    for r in recs {
        let b = crc32c::crc32c(&r.key) as usize % buckets;
        parts[b].push(r);
    }
    let parts: Vec<Mutex<Vec<Found>>> = parts.into_iter().map(Mutex::new).collect();
    let gi = GlobalIndex::default();
    let ignore_ghosts = store.mutation == Some(RecoveryMutation::IgnoreGhosts);

    let count_dups = store.mutation != Some(RecoveryMutation::CountCopiesOnce);
    let every_blob = store.mutation == Some(RecoveryMutation::ClaimEveryBlob);
    // A version the active memtable shadows is never read in PM-only mode, so its blob's
    // zones can go; with disk levels it is spilled, value and all, so its blob stays.
    let shadowed = |k: &[u8]| !disk && active.is_some_and(|(a, bound)| a.get(k, bound).is_some());
    let zone_of = |at| store.zones.zone_of(at).map_or(u64::MAX, |z| z.0);
    let built = parallel(buckets, buckets, |b| {
        let mut recs = std::mem::take(&mut *parts[b].lock().unwrap_or_else(|e| e.into_inner()));
        // Sort positions by each key's first eight bytes first: most comparisons then never
        // leave the array (keys live on the heap).
        let prefix = |k: &[u8]| {
            let mut p = [0u8; 8];
            let n = k.len().min(8);
            p[..n].copy_from_slice(&k[..n]);
            u64::from_be_bytes(p)
        };
        let mut order: Vec<(u64, u32)> = recs
            .iter()
            .enumerate()
            .map(|(i, r)| (prefix(&r.key), i as u32))
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                let (x, y) = (&recs[a.1 as usize], &recs[b.1 as usize]);
                x.key.cmp(&y.key).then(y.seq.cmp(&x.seq))
            })
        });
        // A bucket holds keys drawn by hash, so its quantiles cut the whole key space into
        // runs of about as many keys: the persistent index's reconcile splits there.
        let cuts: Vec<Vec<u8>> = if b == 0 && order.len() >= buckets {
            (1..buckets)
                .map(|i| {
                    recs[order[order.len() * i / buckets].1 as usize]
                        .key
                        .clone()
                })
                .collect()
        } else {
            Vec::new()
        };
        // Per zone: live bytes and the largest live record.
        let mut live: std::collections::HashMap<u64, (u64, u32)> = std::collections::HashMap::new();
        let mut revisit: Vec<Vec<u8>> = Vec::new();
        let mut blobs: Vec<Claim> = Vec::new();
        let mut versions: Vec<Version> = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let first = order[i].1 as usize;
            let mut j = i;
            versions.clear();
            let mut dups = 0;
            while j < order.len() && recs[order[j].1 as usize].key == recs[first].key {
                let r = &recs[order[j].1 as usize];
                if every_blob && r.blob {
                    blobs.push((r.at, r.size));
                }
                if versions.last().is_some_and(|v| v.seq == r.seq) {
                    // A record and its relocated copy: one is indexed, the other is a ghost.
                    dups += u64::from(count_dups);
                } else {
                    versions.push(Version {
                        seq: r.seq,
                        at: r.at,
                        size: r.size,
                        tomb: r.tomb,
                        blob: r.blob,
                    });
                }
                j += 1;
            }
            if let Some((v, ghosts, born)) = fresh(&versions, dups, ignore_ghosts, keep_tombstones)
            {
                let key = std::mem::take(&mut recs[first].key);
                if v.blob && !every_blob && !shadowed(&key) {
                    blobs.push((v.at, v.size));
                }
                let z = live.entry(zone_of(v.at)).or_insert((0, 0));
                z.0 += u64::from(v.size);
                z.1 = z.1.max(v.size);
                if v.tomb {
                    // A tombstone waits for its ghosts to leave PM.
                    revisit.push(key.clone());
                }
                gi.put_entry(key, KeyEntry::new(vec![v], ghosts, born));
                gi.count_versions(1, 0);
            }
            i = j;
        }
        Ok((live, revisit, blobs, cuts))
    })?;
    let mut zones = space.zones.lock();
    let mut revisit = Vec::new();
    let mut blobs = Vec::new();
    let mut cuts = Vec::new();
    for (live, r, b, c) in built {
        revisit.extend(r);
        blobs.extend(b);
        cuts.extend(c);
        for (z, (n, max)) in live {
            if let Some(info) = zones.get_mut(&z) {
                info.live += n;
                info.max_record = info.max_record.max(max);
            }
        }
    }
    Ok(Built {
        gi,
        revisit,
        blobs,
        cuts,
    })
}

/// What [`build_gi`] gives: the subtable's Global Index, the tombstones to look at again
/// once their ghosts leave PM, the blob claims, and keys in order that cut the index into
/// runs of about as many keys (one fewer than the recovery threads, or none).
pub(crate) struct Built {
    pub gi: GlobalIndex,
    pub revisit: Vec<Vec<u8>>,
    pub blobs: Vec<Claim>,
    pub cuts: Vec<Vec<u8>>,
}

/// Runs `f(0..n)` on up to `threads` threads; results in index order, the first error wins.
pub(crate) fn parallel<T: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    parallel_each(n, threads, f).into_iter().collect()
}

/// Runs `f(0..n)` on up to `threads` threads; every result, in index order.
fn parallel_each<T: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(usize) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<(usize, Result<T>)>> = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                out.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
            });
        }
    });
    let mut out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    out.sort_unstable_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// Decides which memtables to roll back after a crash in run `run` (docs/format.md, "Commit
/// and recovery rules"). Only the last group whose stage 4 began can be torn: stage 4 is
/// serial and every earlier group's fence completed. So:
/// 1. a torn item in `[prev, cur)` is that group's: its memtable rolls back;
/// 2. the newest group of `run` still showing as a memtable's last items (the items in
///    `[prev, cur)`, or those before them where step 1 rolled back) rolls back everywhere if
///    fewer of its items show, summed over the memtables, than its headers count (a group
///    writes one item per memtable, or several consecutive ones where its records for a
///    subtable exceed a zone), or if it lies above `commit_id`. An older group is never
///    touched: if the last group left no whole item, the newest one showing is its
///    predecessor, which is whole because nothing after it survived.
///
///    Except for the item count when the disk levels hold a record of that group or of a
///    later one (`on_disk_seq`, the highest sequence number spilled, is at or above its group
///    seq): records reach disk only from merged memtables, and a memtable merges only once
///    every group granted into it committed, so the group committed whole and its items
///    missing from PM were spilled with their memtables, which were then given back.
///
/// Returns the memtables to roll back, and the items of a group kept that way.
fn decide(
    facts: &[TailFacts],
    run: u64,
    commit_id: u64,
    on_disk_seq: u64,
    mutation: Option<RecoveryMutation>,
) -> Result<(Vec<usize>, usize)> {
    let mut roll: Vec<usize> = (0..facts.len())
        .filter(|&i| facts[i].tail == Tail::Torn)
        .collect();
    // A memtable's last items once torn items are gone, if `run` wrote them: a header, how
    // many items of its group end the memtable, and whether they are the items in
    // `[prev, cur)`.
    let last = |f: &TailFacts| -> Option<(ItemHeader, u32, bool)> {
        match f.tail {
            Tail::Whole(h, n) => Some((h, n, true)),
            Tail::Torn | Tail::None => f.before.map(|(h, n)| (h, n, false)),
        }
        .filter(|(h, _, _)| h.run == run)
    };
    let Some(newest) = facts.iter().filter_map(&last).map(|(h, _, _)| h.seq).max() else {
        return Ok((roll, 0));
    };
    // Damage, not a torn write: a torn item whose whole header names a group older than one
    // that committed after it (that group's stage 4 began only once this one's fences had
    // returned, so this item was durable).
    let latest = facts
        .iter()
        .filter_map(|f| f.torn_header.map(|h| h.seq))
        .fold(newest, u64::max);
    // Likewise a group committed in two fences whose sequence number `commit_id` covers: its
    // records were fenced before `commit_id` was written.
    // And a group the disk levels hold a record of, or of a later group, committed (S1).
    let spilled_seq = match mutation {
        Some(RecoveryMutation::IgnoreSpilledItems) => 0,
        _ => on_disk_seq,
    };
    if mutation != Some(RecoveryMutation::SkipTornCheck) {
        if let Some(h) = facts
            .iter()
            .filter_map(|f| f.torn_header)
            .find(|h| h.seq < latest || (h.two_fence && h.seq <= commit_id) || h.seq <= spilled_seq)
        {
            return Err(Error::corrupt(format!(
                "an item of group {} fails its checksum although it was durable (a later \
                 group {latest} committed, commit id {commit_id} covers it, or the disk \
                 levels hold sequence {on_disk_seq}): damaged media, not a torn write",
                h.seq
            )));
        }
    }
    let group: Vec<(usize, ItemHeader, u32, bool)> = (0..facts.len())
        .filter_map(|i| last(&facts[i]).map(|(h, n, tail)| (i, h, n, tail)))
        .filter(|(_, h, _, _)| h.seq == newest)
        .collect();
    let items = group.first().map_or(0, |g| g.1.items) as u64;
    let agree = group.iter().all(|g| u64::from(g.1.items) == items);
    let shown: u64 = group.iter().map(|g| u64::from(g.2)).sum();
    if agree && shown > items {
        return Err(Error::corrupt(format!(
            "group {newest} of run {run} shows {shown} items, its headers say {items}"
        )));
    }
    // Spilled: some of its items (or a later group's) are on disk, so it committed whole.
    let spilled = newest <= spilled_seq;
    let short = (!agree || (shown < items && !spilled))
        && mutation != Some(RecoveryMutation::SkipItemCount);
    let above = newest > commit_id && mutation != Some(RecoveryMutation::SkipAboveCommitId);
    if short || above {
        for (i, _, _, tail) in group {
            if !tail {
                return Err(Error::corrupt(format!(
                    "group {newest} of run {run} is incomplete but not the last group"
                )));
            }
            roll.push(i);
        }
        return Ok((roll, 0));
    }
    let kept = if spilled && agree {
        items.saturating_sub(shown) as usize
    } else {
        0
    };
    Ok((roll, kept))
}

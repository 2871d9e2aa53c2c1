//! Opening a database after a clean close or a crash: find the subtables and their memtable
//! lists, release what a crash left allocated but unreachable, roll back the one group whose
//! commit a crash may have cut (C1), and rebuild every memtable's index in parallel (C5).
//! The work is proportional to the data in PM, never to the write history.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nacre_halloc::ObjId;

use crate::error::{Error, Result};
use crate::memtable::{Memtable, ScanStats};
use crate::store::Store;
use crate::subtable::Subtable;

/// What recovery did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// Wall time from the start of recovery to a usable database.
    pub elapsed: Duration,
    /// Whether the previous close was clean (no rollback check needed).
    pub clean: bool,
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
    /// Committed but unreachable memtables released.
    pub released_memtables: usize,
    /// Committed but unreferenced zones released.
    pub released_zones: usize,
    /// Threads that rebuilt indexes.
    pub threads: usize,
}

pub(crate) fn recover(
    store: &Store,
    threads: usize,
    db: u64,
) -> Result<(Vec<Subtable>, RecoveryReport)> {
    let t0 = Instant::now();
    let mut rep = RecoveryReport {
        commit_id: store.commit_id(),
        clean: store.clean(),
        ..Default::default()
    };
    let mut subtables = Vec::new();
    let mut all: Vec<Arc<Memtable>> = Vec::new();
    let mut reachable: HashSet<ObjId> = HashSet::new();
    let mut ids: HashSet<u64> = HashSet::new();
    for obj in store.subs.objects().committed_ids() {
        let (id, name) = store.subs.read(obj);
        if id > u64::from(u32::MAX) || !ids.insert(id) {
            return Err(Error::Corrupt(format!(
                "subtable {name:?} has a bad or duplicate id {id}"
            )));
        }
        let mut list = Vec::new();
        let mut at = store.subs.memlist(obj);
        while !at.is_null() {
            let m = store
                .mems
                .objects()
                .id_at(at)
                .filter(|m| store.mems.objects().check(*m).unwrap_or(false))
                .ok_or_else(|| {
                    Error::Corrupt(format!("subtable {name:?} links a bad memtable at {at}"))
                })?;
            if !reachable.insert(m) {
                return Err(Error::Corrupt(format!("memtable list of {name:?} loops")));
            }
            let mt = Arc::new(Memtable::load(store, m)?);
            all.push(mt.clone());
            list.push(mt);
            at = store.mems.next(m);
        }
        subtables.push(Subtable::new(db, id as u32, name, obj, list));
    }
    // Committed memtables no list reaches: a crash between commit and link. Release them and
    // their zones.
    for m in store.mems.objects().committed_ids() {
        if reachable.contains(&m) {
            continue;
        }
        let zones: Vec<ObjId> = (0..store.mems.slots())
            .filter_map(|s| store.mems.zone(m, s).ok().flatten())
            .filter(|z| store.zones.is_owned(*z).unwrap_or(false))
            .collect();
        store.zones.reclaim(&zones)?;
        store.mems.release(m)?;
        rep.released_memtables += 1;
        rep.released_zones += zones.len();
    }
    let referenced: HashSet<ObjId> = all.iter().flat_map(|m| m.zones()).collect();
    let orphans: Vec<ObjId> = store
        .zones
        .objects()
        .committed_ids()
        .into_iter()
        .filter(|z| !referenced.contains(z))
        .collect();
    store.zones.reclaim(&orphans)?;
    rep.released_zones += orphans.len();

    let commit_id = if rep.clean { u64::MAX } else { rep.commit_id };
    let threads = threads.clamp(1, all.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Result<ScanStats>>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(m) = all.get(i) else { break };
                let r = m.recover(store, commit_id);
                results.lock().unwrap_or_else(|e| e.into_inner()).push(r);
            });
        }
    });
    for r in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        let st = r?;
        rep.items += st.items;
        rep.records += st.records;
        rep.bytes_scanned += st.bytes;
        rep.rolled_back += usize::from(st.rolled_back);
        if st.max_seq > rep.commit_id {
            return Err(Error::Corrupt(format!(
                "record sequence {} above commit id {}",
                st.max_seq, rep.commit_id
            )));
        }
    }
    rep.subtables = subtables.len();
    rep.memtables = all.len();
    rep.threads = threads;
    rep.elapsed = t0.elapsed();
    Ok((subtables, rep))
}

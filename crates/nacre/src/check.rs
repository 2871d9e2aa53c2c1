//! A full consistency check of what the engine holds, for tests after recovery and after
//! background work: every committed zone is owned by exactly one memtable slot (no leak, no
//! double ownership), no slot names a free zone, every Global Index version list is strictly
//! ordered (GI1) and points into a zone of its subtable's memtables, and the live bytes the
//! cleaner steers by match what the Global Index points at (P1), and every committed memtable
//! object is in a subtable's list. Blob zones are checked
//! against the blobs that keys' newest versions name (B2, B3 in blob.rs).

use std::collections::HashMap;

use crate::blob::{room_in_zone, Desc, QUARANTINE};
use crate::engine::Engine;
use crate::index::MemIndex;
use crate::record::{read_value, Kind};

impl Engine {
    /// Runs the check with the background worker paused; the first violation found.
    pub(crate) fn check(&self) -> Result<(), String> {
        // R3 in gi/pending.rs: the rebuilt Global Index is what is checked.
        self.index_ready.wait().map_err(|e| e.to_string())?;
        let _paused = self.pause.lock();
        if let Some(why) = self.poisoned() {
            return Err(format!("poisoned: {why}"));
        }
        let store = &self.store;
        let mut owner: HashMap<u64, (u32, u64)> = HashMap::new();
        let mut zone_sub: HashMap<u64, u32> = HashMap::new();
        for sub in self.all_subtables() {
            let st = sub.inner.lock();
            for m in &st.chain {
                for (slot, z) in m.zones() {
                    if let Some(prev) = owner.insert(z.0, (sub.id(), slot)) {
                        return Err(format!(
                            "zone {} owned twice: {prev:?} and ({}, {slot})",
                            z.0,
                            sub.id()
                        ));
                    }
                    if !store.zones.is_owned(z).map_err(|e| e.to_string())? {
                        return Err(format!("zone {} in a slot but free", z.0));
                    }
                    zone_sub.insert(z.0, sub.id());
                }
            }
        }
        // No committed memtable object outside every subtable's list (a leak).
        let listed: std::collections::HashSet<u64> = self
            .all_subtables()
            .iter()
            .flat_map(|sub| {
                let st = sub.inner.lock();
                st.chain.iter().map(|m| m.obj.0).collect::<Vec<_>>()
            })
            .collect();
        for m in store.mems.objects().committed_ids() {
            if !listed.contains(&m.0) {
                return Err(format!("memtable object {} committed but in no list", m.0));
            }
        }
        // B2: blob zones are the blobs' alone, and no committed zone is nobody's.
        let (blobs, retired) = self.blobs.zones();
        for z in blobs.keys().chain(&retired) {
            if owner.contains_key(z) {
                return Err(format!("zone {z} is a memtable's and a blob's"));
            }
            if !store
                .zones
                .is_owned(nacre_halloc::ObjId(*z))
                .map_err(|e| e.to_string())?
            {
                return Err(format!("blob zone {z} is free"));
            }
        }
        for z in store.zones.objects().committed_ids() {
            if !owner.contains_key(&z.0) && !blobs.contains_key(&z.0) && !retired.contains(&z.0) {
                return Err(format!(
                    "zone {} committed but owned by no memtable or blob",
                    z.0
                ));
            }
        }
        self.check_blobs(&blobs)?;
        let mut live: HashMap<u64, u64> = HashMap::new();
        for sub in self.all_subtables() {
            let view = sub.inner.view.load_full();
            let gis = std::iter::once(&view.gi).chain(view.frozen.as_ref().map(|f| &f.gi));
            for gi in gis {
                // M1 (gi/mirror.rs): the persistent index holds what the volatile one does.
                if let Some(m) = gi.mirror() {
                    m.compare(gi)?;
                } else if self.store.gi_forest.as_ref().is_some_and(|f| !f.is_stale()) {
                    return Err(format!("subtable {} has no persistent index", sub.id()));
                }
                let mut at = gi.next(std::ops::Bound::Unbounded);
                while let Some((k, _)) = at {
                    let e = gi
                        .entry(&k.key)
                        .ok_or_else(|| format!("key {:?} vanished", k.key))?;
                    let vs = e.value().versions();
                    if vs.is_empty() || vs.windows(2).any(|w| w[0].seq <= w[1].seq) {
                        return Err(format!(
                            "versions of {:?} not strictly newest first: {:?}",
                            k.key,
                            vs.iter().map(|v| v.seq).collect::<Vec<_>>()
                        ));
                    }
                    for v in vs.iter() {
                        let z = store
                            .zones
                            .zone_of(v.at)
                            .ok_or_else(|| format!("version of {:?} outside the zones", k.key))?;
                        if zone_sub.get(&z.0) != Some(&sub.id()) {
                            return Err(format!(
                                "version {} of {:?} points into zone {} not owned by its subtable",
                                v.seq, k.key, z.0
                            ));
                        }
                        *live.entry(z.0).or_insert(0) += u64::from(v.size);
                    }
                    let last = vs.last().map_or(0, |v| v.seq);
                    at = gi.next(std::ops::Bound::Excluded(&crate::index::IKey {
                        key: k.key.clone(),
                        seq: last,
                    }));
                }
            }
        }
        let zones = self.space.zones.lock();
        for (z, info) in zones.iter() {
            let want = live.get(z).copied().unwrap_or(0);
            if info.live != want {
                return Err(format!(
                    "zone {z}: {} live bytes accounted, {want} pointed at",
                    info.live
                ));
            }
        }
        if let Some(z) = live.keys().find(|z| !zones.contains_key(z)) {
            return Err(format!(
                "zone {z} holds indexed versions but is not accounted"
            ));
        }
        if self.disk.is_some() {
            // Ghosts decide only when a tombstone may go (GI3), which with disk levels it
            // does at the last level on disk instead (G4).
            return Ok(());
        }
        // GI2: recount every key's ghosts from the records in the Global Index zones, and in
        // the zones the cleaner retired that are not given back yet (their copies are counted
        // out only then).
        let mut scan: Vec<(
            crate::Subtable,
            std::sync::Arc<crate::memtable::Memtable>,
            u64,
        )> = Vec::new();
        for info in zones.values() {
            let Some(sub) = self.with_subtable(info.sub, crate::Subtable::clone) else {
                return Err(format!("zone of unknown subtable {}", info.sub));
            };
            scan.push((sub, info.mem.clone(), info.slot));
        }
        let accounted: std::collections::HashSet<u64> = zones.keys().copied().collect();
        // Not held while subtables' states are locked below.
        drop(zones);
        for sub in self.all_subtables() {
            let view = sub.inner.view.load_full();
            let user = |m: &std::sync::Arc<crate::memtable::Memtable>| {
                view.active
                    .as_ref()
                    .is_some_and(|a| std::sync::Arc::ptr_eq(&a.mem, m))
                    || view
                        .immutables
                        .iter()
                        .any(|i| std::sync::Arc::ptr_eq(&i.src.mem, m))
            };
            let chain = sub.inner.lock().chain.clone();
            for m in chain.iter().filter(|m| !user(m)) {
                for (slot, z) in m.zones() {
                    if !accounted.contains(&z.0) {
                        scan.push((sub.clone(), m.clone(), slot));
                    }
                }
            }
        }
        let mut ghosts: HashMap<(u32, Vec<u8>), u64> = HashMap::new();
        for (sub, mem, slot) in scan {
            mem.scan_slot(store, slot, |r| {
                if let Some(e) = sub.inner.gi().entry(&r.key) {
                    let pointed = e.value().versions().iter().any(|v| v.at == r.at);
                    if !pointed && r.seq >= e.value().born() {
                        *ghosts.entry((sub.id(), r.key)).or_insert(0) += 1;
                    }
                }
                Ok(())
            })
            .map_err(|e| format!("scanning zone for ghosts: {e}"))?;
        }
        for sub in self.all_subtables() {
            for e in sub.inner.gi().entries() {
                let want = ghosts
                    .get(&(sub.id(), e.key().to_vec()))
                    .copied()
                    .unwrap_or(0);
                if e.value().ghosts() != want {
                    return Err(format!(
                        "key {:?}: ghost count {}, {want} copies in PM",
                        e.key(),
                        e.value().ghosts()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every key's newest version that names a blob has its zones registered to it, and
    /// every registered zone belongs to a blob some indexed version names (B2, B3).
    fn check_blobs(&self, registered: &HashMap<u64, u64>) -> Result<(), String> {
        let store = &self.store;
        let mut named: HashMap<u64, u64> = HashMap::new();
        for sub in self.all_subtables() {
            let view = sub.inner.view.load();
            let mut sources: Vec<&dyn MemIndex> =
                view.indexes().map(|ix| &**ix as &dyn MemIndex).collect();
            sources.push(&*view.gi);
            if let Some(f) = &view.frozen {
                sources.push(&*f.gi);
            }
            for ix in &sources {
                let mut at = ix.next(std::ops::Bound::Unbounded);
                while let Some((k, pos)) = at {
                    let room = room_in_zone(&store.zones, pos).map_err(|e| e.to_string())?;
                    if let Ok(Some((Kind::Blob, desc))) = read_value(&store.pool, pos, room, true) {
                        let d = Desc::decode(&desc, &store.zones).map_err(|e| e.to_string())?;
                        let newest = sources.iter().find_map(|ix| ix.get(&k.key, u64::MAX));
                        for z in &d.zones {
                            if registered.get(z) == Some(&d.id) {
                                named.insert(*z, d.id);
                            } else if newest == Some((k.seq, pos)) {
                                return Err(format!(
                                    "blob {:#x} of {:?} names zone {z}, registered to {:?}",
                                    d.id,
                                    k.key,
                                    registered.get(z)
                                ));
                            }
                        }
                    }
                    at = ix.next(std::ops::Bound::Excluded(&k));
                }
            }
        }
        if let Some(z) = registered
            .iter()
            .find(|(z, id)| **id != QUARANTINE && !named.contains_key(z))
            .map(|(z, _)| z)
        {
            return Err(format!("zone {z} registered to a blob no version names"));
        }
        Ok(())
    }
}

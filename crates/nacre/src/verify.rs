//! `Db::verify`: a full scrub. With background work paused (so no zone is cleaned or given
//! back meanwhile), it re-checks the engine root, every subtable and memtable object (every
//! checked word and head crc), every item and record up to each memtable's commit point and
//! every blob a registered descriptor names, and that every committed zone has exactly one
//! owner, and reports each failure it finds. It writes
//! nothing: a damaged record stays where it is, and reads of its key keep failing.

use std::time::{Duration, Instant};

use nacre_pmem::PmOffset;

use crate::blob;
use crate::engine::Engine;

/// One thing [`crate::Db::verify`] found damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What failed its check, and how.
    pub what: String,
    /// Where in the pool.
    pub at: Option<u64>,
    /// The subtable it belongs to, when known.
    pub subtable: Option<String>,
    /// The key whose newest or an older version it is, when known (a damaged value).
    pub key: Option<Vec<u8>>,
}

/// What [`crate::Db::verify`] read and found.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Subtables checked.
    pub subtables: u64,
    /// Memtables checked (objects, zones, items).
    pub memtables: u64,
    /// Items read.
    pub items: u64,
    /// Records read.
    pub records: u64,
    /// Bytes of items read (headers and records).
    pub bytes: u64,
    /// Values stored out of line that were read and checked.
    pub blobs: u64,
    /// Their bytes.
    pub blob_bytes: u64,
    /// Disk tables read through (databases with disk levels).
    pub disk_tables: u64,
    /// Their bytes.
    pub disk_bytes: u64,
    /// Everything found damaged; empty when the database is whole.
    pub problems: Vec<Problem>,
    /// Wall time.
    pub elapsed: Duration,
}

impl VerifyReport {
    /// Bytes read and checked per second (items and blobs), in GB/s.
    pub fn gb_per_sec(&self) -> f64 {
        (self.bytes + self.blob_bytes + self.disk_bytes) as f64
            / self.elapsed.as_secs_f64().max(1e-9)
            / 1e9
    }
}

impl Engine {
    pub(crate) fn verify(&self) -> VerifyReport {
        let t0 = Instant::now();
        let _paused = self.pause.lock();
        let store = &self.store;
        let mut rep = VerifyReport::default();
        let mut problems = Vec::new();
        let mut problem = |what: String, at: Option<u64>, sub: Option<&str>, key| {
            problems.push(Problem {
                what,
                at,
                subtable: sub.map(str::to_string),
                key,
            })
        };
        if let Err(e) = store.verify_root() {
            problem(e.to_string(), None, None, None);
        }
        let (registered, _) = self.blobs.zones();
        let mut descs: Vec<(String, Vec<u8>)> = Vec::new();
        let (mut items, mut records, mut bytes, mut memtables) = (0, 0, 0, 0);
        let subs = self.all_subtables();
        for sub in &subs {
            let name = sub.name().to_string();
            if let Err(e) = store.subs.read(sub.inner.obj) {
                problem(e.to_string(), None, Some(&name), None);
            }
            if let Err(e) = store.subs.memlist(sub.inner.obj) {
                problem(e.to_string(), None, Some(&name), None);
            }
            let chain = sub.inner.lock().chain.clone();
            for m in chain {
                memtables += 1;
                let obj = m.obj;
                let obj_at = store.mems.objects().offset(obj);
                let checks = [
                    store.mems.head(obj).err(),
                    store.mems.gidx(obj).err(),
                    store.mems.next(obj).err(),
                ];
                let slots = (0..store.mems.slots()).filter_map(|s| store.mems.slot(obj, s).err());
                for e in checks.into_iter().flatten().chain(slots) {
                    problem(
                        crate::Error::from(e).to_string(),
                        Some(obj_at.get()),
                        Some(&name),
                        None,
                    );
                }
                let mut bad = |what: String, at: PmOffset, key: Option<Vec<u8>>| {
                    problem(what, Some(at.get()), Some(&name), key)
                };
                let mut blob = |d: Vec<u8>| descs.push((name.clone(), d));
                let (i, r, b) = m.verify(store, m.committed(), &mut bad, &mut blob);
                items += i;
                records += r;
                bytes += b;
            }
        }
        // Only blobs whose zones are still theirs: an older version's zones may have been
        // given back and reused.
        for (name, d) in descs {
            let Ok(desc) = blob::Desc::decode(&d, &store.zones) else {
                problem("bad blob descriptor".into(), None, Some(&name), None);
                continue;
            };
            if !desc
                .zones
                .iter()
                .all(|z| registered.get(z) == Some(&desc.id))
            {
                continue;
            }
            match blob::verify(&store.pool, &store.zones, &d) {
                Ok(n) => {
                    rep.blobs += 1;
                    rep.blob_bytes += n;
                }
                Err(e) => problem(e.to_string(), None, Some(&name), None),
            }
        }
        // The disk levels: every table read through, its checksums checked.
        if let Some(disk) = &self.disk {
            for (id, t) in disk.trees() {
                let name = subs
                    .iter()
                    .find(|s| s.id() == id)
                    .map(|s| s.name().to_string());
                let (tables, bytes, bad) = t.verify();
                rep.disk_tables += tables;
                rep.disk_bytes += bytes;
                for what in bad {
                    problem(what, None, name.as_deref(), None);
                }
            }
        }
        // Zone ownership: every committed zone is named by exactly one memtable slot or
        // registered blob (or waits, retired, for readers), and every named zone is committed.
        let mut owner: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
        for sub in &subs {
            for m in sub.inner.lock().chain.iter() {
                for (_, z) in m.zones() {
                    *owner.entry(z.0).or_default() += 1;
                }
            }
        }
        let (blob_zones, retired) = self.blobs.zones();
        for z in blob_zones.keys().chain(&retired) {
            *owner.entry(*z).or_default() += 1;
        }
        let committed = store.zones.objects().committed_ids();
        // A long value being written holds committed zones it registers only once its batch
        // commits (B1).
        let writing = self
            .blobs
            .in_flight
            .load(std::sync::atomic::Ordering::Acquire)
            > 0;
        for z in &committed {
            match owner.get(&z.0) {
                Some(1) => {}
                None if writing => {}
                n => problem(
                    format!(
                        "zone {} committed and owned {} times",
                        z.0,
                        n.copied().unwrap_or(0)
                    ),
                    Some(store.zones.offset(*z).get()),
                    None,
                    None,
                ),
            }
        }
        if owner.len() > committed.len() {
            let c: std::collections::HashSet<u64> = committed.iter().map(|z| z.0).collect();
            for z in owner.keys().filter(|z| !c.contains(z)) {
                problem(format!("zone {z} in use but free"), None, None, None);
            }
        }
        drop(_paused);
        rep.problems = problems;
        rep.subtables = subs.len() as u64;
        rep.memtables = memtables;
        rep.items = items;
        rep.records = records;
        rep.bytes = bytes;
        rep.elapsed = t0.elapsed();
        rep
    }
}

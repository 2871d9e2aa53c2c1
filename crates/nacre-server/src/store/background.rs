//! Background work: the active expire cycle (keys whose time has come are deleted even if
//! nobody reads them) and the cleaner (records of dropped collection versions and flushed
//! namespaces are deleted).
//!
//! Invariants:
//! - B1: an expired key is deleted through a [`super::Txn`] like any command's delete, so it
//!   takes the key's lock, bumps its watchers and commits in order with the key's writes.
//! - B2: the cleaner deletes only records no command can reach: a version named in `gc` is
//!   never used again (K5) and a dropped namespace is never handed out again; it reads `gc`
//!   through the engine, which shows only durable records, so every write to a dropped
//!   version was queued before the drop and is durable before the cleaner looks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nacre::{IterOptions, WriteBatch};

use super::encoding::{self, Expiring, Meta};
use super::{Result, Store};
use crate::shared::now_ms;

/// Keys looked at per expire step.
const EXPIRE_STEP: usize = 256;
/// Records deleted per cleaner batch.
const GC_BATCH: usize = 512;
/// Records the cleaner deletes before it merges the memtables and compacts the pool once its
/// queue is empty: a record deleted in the memtable that holds it takes room until a merge
/// drops both, which would otherwise wait for the memtable to fill, and a deleted record
/// and its tombstone stay in PM (the tombstone in the Global Index too) until their zones
/// are cleaned, which would otherwise wait for the pool to fill (an UNLINK of a big set
/// would free nothing for a while).
const MERGE_AFTER: u64 = 4096;

/// Told of each key the active expire cycle deletes: its database and name, and the ticket
/// of the delete.
pub type OnExpired<'a> = &'a mut dyn FnMut(usize, &[u8], u64);

/// Runs the background loop until `stop` is set.
pub fn run(store: Arc<Store>, stop: Arc<AtomicBool>, on_expired: OnExpired<'_>) {
    let mut last_gc = Instant::now();
    let mut merged_at = store.gc_records.load(Ordering::Relaxed);
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(100));
        // Both passes walk records, which wait for the engine's background index rebuild
        // after a start: they start once it is done (reads see expired keys gone already).
        if store.db.rebuilding() {
            continue;
        }
        let t = Instant::now();
        loop {
            match expire_step(&store, on_expired) {
                Ok(n) if n >= EXPIRE_STEP && t.elapsed() < Duration::from_millis(25) => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "active expire cycle failed");
                    break;
                }
            }
        }
        // A full pool waits for what the cleaner can free, and a queue that is not empty
        // holds records still taking room: clean at every round then.
        if store.commits.full()
            || store.gc_pending.load(Ordering::Relaxed) > 0
            || last_gc.elapsed() >= Duration::from_millis(500)
        {
            last_gc = Instant::now();
            match gc_pass(&store, &stop, Duration::from_millis(200)) {
                Ok(true) => {
                    let deleted = store.gc_records.load(Ordering::Relaxed);
                    if deleted - merged_at >= MERGE_AFTER {
                        merged_at = deleted;
                        if let Err(e) = store.db.merge_memtables() {
                            tracing::warn!(error = %e, "merging the memtables after cleaning failed");
                        } else if let Err(e) = store.db.compact_pm() {
                            tracing::warn!(error = %e, "compacting the pool after cleaning failed");
                        }
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cleaning old versions failed"),
            }
        }
    }
}

/// Deletes up to [`EXPIRE_STEP`] keys whose expiry time has passed; how many entries it
/// looked at.
pub fn expire_step(store: &Store, on_expired: OnExpired<'_>) -> Result<usize> {
    // A replica's keys expire when its master says (Redis's rule): reads already see them
    // gone once their time has passed.
    if store.replica.load(Ordering::Acquire) {
        return Ok(0);
    }
    // Its deletes are writes: none while a freeze holds (F1).
    let Some(_writing) = store.enter_write() else {
        return Ok(0);
    };
    let now = now_ms();
    let it = store.db.iter(
        &store.subs.expire,
        IterOptions {
            upper: Some((now + 1).to_be_bytes().to_vec()),
            ..Default::default()
        },
    )?;
    let mut due = Vec::new();
    for r in it.take(EXPIRE_STEP) {
        let (k, _) = r?;
        due.push(k);
    }
    let n = due.len();
    let mut stale = WriteBatch::new();
    for k in due {
        let Some((at, gen, name)) = encoding::split_expire_key(&k) else {
            stale.delete(&store.subs.expire, &k);
            continue;
        };
        let long;
        let key = match name {
            Expiring::Key(key) => key,
            Expiring::Long(mkey) => {
                // A long key: its record holds it (a record not durable yet, or gone, leaves
                // the entry to the change that queued it).
                let Some(rec) = store.db.get(&store.subs.meta, &mkey)? else {
                    stale.delete(&store.subs.expire, &k);
                    continue;
                };
                long = encoding::user_key(&mkey, &rec)?.to_vec();
                &long[..]
            }
        };
        let db = store.ns.read().gens.iter().position(|&g| g == gen);
        let Some(db) = db else {
            // A flushed namespace: the cleaner drops its keys.
            stale.delete(&store.subs.expire, &k);
            continue;
        };
        let mut txn = store.txn(&[(db, key)], now);
        let meta = txn.get(db, key)?.map(|m| m.expire_at);
        let expired = txn.expired(db, key)?;
        if expired {
            txn.set(db, key, None)?;
            // As Redis: replicas delete it when told.
            txn.propagate(db, vec![b"DEL".to_vec(), key.to_vec()]);
            store.expired_keys.fetch_add(1, Ordering::Relaxed);
            let t = txn.commit();
            on_expired(db, key, t.0);
        } else if meta != Some(at) {
            // Left over from a change whose batch deleted another entry.
            drop(txn);
            stale.delete(&store.subs.expire, &k);
        }
    }
    // Nobody waits for these commits' tickets: hand them to the engine now.
    store.commits.flush(store);
    if !stale.is_empty() {
        store.db.write(stale)?;
    }
    Ok(n)
}

/// Deletes records of dropped versions and namespaces for at most `budget`; whether the
/// queue of dropped ones is empty now. Sets [`Store::gc_pending`] to what is left.
pub fn gc_pass(store: &Store, stop: &AtomicBool, budget: Duration) -> Result<bool> {
    let t = Instant::now();
    let entries: Vec<Vec<u8>> = store
        .db
        .iter(&store.subs.gc, IterOptions::default())?
        .take(PENDING_COUNTED)
        .map(|r| r.map(|(k, _)| k))
        .collect::<nacre::Result<_>>()?;
    let mut left = entries.len();
    store.gc_pending.store(left as u64, Ordering::Relaxed);
    for e in entries {
        if stop.load(Ordering::Acquire) || t.elapsed() > budget {
            return Ok(false);
        }
        let done = match e.len() {
            8 => drop_prefix(store, &store.subs.sub, &e, t, budget)?,
            4 => drop_namespace(store, &e, t, budget)?,
            _ => true,
        };
        if done {
            store.db.delete(&store.subs.gc, &e)?;
            if e.len() == 8 {
                store.gc_objects.fetch_add(1, Ordering::Relaxed);
            }
            left -= 1;
            store.gc_pending.store(left as u64, Ordering::Relaxed);
        }
    }
    if left > 0 {
        return Ok(false);
    }
    // A namespace's keys queue their collections as they go: look again.
    let more = store
        .db
        .iter(&store.subs.gc, IterOptions::default())?
        .take(PENDING_COUNTED)
        .count();
    store.gc_pending.store(more as u64, Ordering::Relaxed);
    Ok(more == 0)
}

/// Dropped collections and namespaces counted at most (INFO's `lazyfree_pending_objects`
/// reads `PENDING_COUNTED` or more as that).
const PENDING_COUNTED: usize = 4096;

/// Deletes `sub`'s records under `prefix`; true once none is left. Each batch reads on from
/// the last key the previous one deleted (nothing is written under a dropped prefix, B2), so
/// it does not step over the tombstones of the batches before it again.
fn drop_prefix(
    store: &Store,
    sub: &nacre::Subtable,
    prefix: &[u8],
    t: Instant,
    budget: Duration,
) -> Result<bool> {
    let mut lower: Option<Vec<u8>> = None;
    loop {
        let keys: Vec<Vec<u8>> = store
            .db
            .iter(
                sub,
                IterOptions {
                    prefix: Some(prefix.to_vec()),
                    lower: lower.take(),
                    ..Default::default()
                },
            )?
            .take(GC_BATCH)
            .map(|r| r.map(|(k, _)| k))
            .collect::<nacre::Result<_>>()?;
        if keys.is_empty() {
            return Ok(true);
        }
        let mut b = WriteBatch::new();
        for k in &keys {
            b.delete(sub, k);
        }
        store.db.write(b)?;
        store.commits.space_freed();
        store
            .gc_records
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        if t.elapsed() > budget {
            return Ok(false);
        }
        // The smallest key after the last one deleted.
        lower = keys.last().map(|k| {
            let mut next = k.clone();
            next.push(0);
            next
        });
    }
}

/// Deletes a dropped namespace's keys with their members and expiry entries.
fn drop_namespace(store: &Store, ns: &[u8], t: Instant, budget: Duration) -> Result<bool> {
    let gen = u32::from_be_bytes(ns.try_into().unwrap_or([0; 4]));
    loop {
        let metas: Vec<(Vec<u8>, Vec<u8>)> = store
            .db
            .iter(
                &store.subs.meta,
                IterOptions {
                    prefix: Some(ns.to_vec()),
                    ..Default::default()
                },
            )?
            .take(GC_BATCH)
            .collect::<nacre::Result<_>>()?;
        if metas.is_empty() {
            store.commits.slots.forget(gen);
            return Ok(true);
        }
        let mut b = WriteBatch::new();
        for (k, v) in &metas {
            if let Ok(m) = Meta::decode(v) {
                if m.kind.is_collection() {
                    b.put(&store.subs.gc, encoding::sub_prefix(m.version), []);
                }
                if m.expire_at != 0 {
                    if let Ok(key) = encoding::user_key(k, v) {
                        b.delete(
                            &store.subs.expire,
                            encoding::expire_key(m.expire_at, gen, key),
                        );
                    }
                }
            }
            b.delete(&store.subs.meta, k);
        }
        // Drops a namespace's keys (with a marker per collection): frees space.
        b.mark_frees_space();
        store.db.write(b)?;
        store.commits.space_freed();
        store
            .gc_records
            .fetch_add(metas.len() as u64, Ordering::Relaxed);
        if t.elapsed() > budget {
            return Ok(false);
        }
    }
}

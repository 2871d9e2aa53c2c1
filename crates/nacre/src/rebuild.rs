//! The second half of an open that left the Global Index's rebuild to the background
//! (gi/pending.rs): the worker runs it before anything else, so merges, the cleaner and
//! spills start only once every subtable's view holds its rebuilt index (R2).
//!
//! Per subtable, in order: the index is built from the records recovery read (as open
//! does otherwise), the tree is brought to it (M3 in gi/mirror.rs), and it is installed in
//! the subtable's view (under the subtable's lock, so no seal or merge installs a view
//! over it). Then the newest blobs' zones are claimed and the zones no memtable and no
//! blob names are given back (B3 in blob.rs), exactly as open would have; only then is
//! the index reported ready. A crash anywhere in between leaves PM as open found it but
//! for what the reconcile wrote, which the next open's trees take as they are (R1).

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::recovery::{index_subtable, release_orphans, Deferred};

/// Builds and installs every deferred subtable's Global Index, then settles the zones.
pub(crate) fn finish(db: &Engine, d: Deferred) -> Result<()> {
    let t0 = Instant::now();
    let Deferred {
        subs,
        mut claims,
        referenced,
        unnamed,
        threads,
        disk,
        bound,
    } = d;
    let mutation = db.opts.recovery_mutation;
    let mut records = 0usize;
    for s in subs {
        let mut recs = s.recs;
        // The memtables merged into the trees, read now (open read their tails only).
        let read = crate::recovery::parallel(s.mems.len(), threads, |i| {
            let (m, cur) = &s.mems[i];
            let mut recs = Vec::new();
            let st = m.rebuild(&db.store, *cur, |r| recs.push(r))?;
            Ok((st, recs))
        })?;
        for (st, more) in read {
            if st.max_seq > bound {
                return Err(Error::corrupt(format!(
                    "record sequence {} above commit id {bound}",
                    st.max_seq
                )));
            }
            if st.damaged > 0 {
                tracing::warn!(
                    records = st.damaged,
                    "records whose values fail their checksums"
                );
            }
            recs.extend(more);
        }
        records += recs.len();
        let active = s.active.as_deref().map(|a| (a, bound));
        let id = u64::from(s.sub.id());
        let (built, _) = index_subtable(
            &db.store,
            &db.space,
            (id, recs, active),
            (threads, disk),
            s.mirror,
        )?;
        claims.extend(built.blobs);
        if built.gi.mirror().is_some_and(|m| m.following()) {
            // M6: the reconciled tree holds every key of these memtables.
            for m in &s.unmarked {
                db.store.mems.set_merged(m.obj)?;
            }
        }
        let gi = std::sync::Arc::new(built.gi);
        let sub = s.sub;
        sub.inner.revisit.lock().extend(built.revisit);
        let visible = db.visible.load(Ordering::Acquire);
        sub.inner
            .replace_tiers(&db.tickets, visible, |v, _| (gi.clone(), v.frozen.clone()));
        if let Some(p) = s.pending.pending_state() {
            let _ = p.rebuilt.set(gi);
        }
    }
    let (released, quarantined) = release_orphans(
        &db.store,
        &db.blobs,
        mutation,
        (claims, &referenced, unnamed),
        &[],
    )?;
    tracing::info!(
        micros = t0.elapsed().as_micros() as u64,
        records,
        released_zones = released,
        quarantined_zones = quarantined,
        "rebuilt the Global Index in the background"
    );
    Ok(())
}

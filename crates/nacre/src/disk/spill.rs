//! A spill: a frozen Global Index streamed, key by key and each key's versions newest first
//! (D1 in tree.rs), into its subtable's disk levels, values read from PM (blobs included).

use std::sync::Arc;
use std::time::Instant;

use nacre_halloc::ZonePool;
use nacre_pmem::Pool;

use crate::blob::value_at;
use crate::disk::tree::{Entry, Marker, StepError};
use crate::disk::DiskTree;
use crate::error::Result;
use crate::view::Frozen;

/// What a finished spill wrote.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Spilled {
    pub entries: u64,
    pub bytes: u64,
    pub took: std::time::Duration,
}

/// Writes every version `frozen` indexes into `tree`, with a marker naming its memtables,
/// and registers the tables (durable on return). `seq`: the marker's sequence number, above
/// every earlier marker's (D4 in tree.rs). A transient failure (D5 in tree.rs) leaves
/// `frozen` to spill again with the same `seq`.
pub(crate) fn spill(
    pool: &Pool,
    zones: &ZonePool,
    verify: bool,
    frozen: &Arc<Frozen>,
    tree: &DiskTree,
    seq: u64,
) -> std::result::Result<Spilled, StepError> {
    let t0 = Instant::now();
    let marker = Marker {
        seq,
        max_seq: frozen
            .gi
            .entries()
            .filter_map(|e| e.value().versions().first().map(|v| v.seq))
            .max()
            .unwrap_or(0),
        births: frozen.mems.iter().map(|m| m.birth).collect(),
    };
    let mut entries = 0u64;
    let stream = frozen.gi.entries().flat_map(|e| {
        let key = e.key().clone();
        let versions = e.value().versions();
        (0..versions.len()).map(move |i| {
            let v = versions[i];
            let value = if v.tomb {
                None
            } else {
                value_at(pool, zones, v.at, verify)?
            };
            Ok(Entry {
                key: key.to_vec(),
                seq: v.seq,
                value,
            })
        })
    });
    let counted = stream.inspect(|_| entries += 1);
    // A simulated power failure stops the registration too (nothing runs after a crash).
    let gate = |register: &mut dyn FnMut() -> Result<()>| match pool.sim() {
        None => register(),
        Some(sim) => sim.unless_stopped(register).unwrap_or_else(|| {
            Err(crate::error::Error::Poisoned(
                "the simulated power failed before the spill was registered".into(),
            ))
        }),
    };
    let bytes = tree.spill(counted, &marker, gate)?;
    Ok(Spilled {
        entries,
        bytes,
        took: t0.elapsed(),
    })
}

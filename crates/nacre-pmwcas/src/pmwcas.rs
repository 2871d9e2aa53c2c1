//! `Pmwcas`: the public face. Opens (creating on first use) the descriptor region and the node
//! pools, runs recovery, and hands out descriptors.
//!
//! Why a reserved region rather than a Halloc object pool for descriptors: a descriptor's
//! status word already says whether it is free, and recovery reads every descriptor anyway;
//! a Halloc committed bit would be a second copy of the same fact that every crash could tear
//! from the first. The region is found by name (`pmwcas.<name>`) in the pool's region table.
//!
//! Formatting writes the descriptor array (zeros: all free), then every header word but the
//! magic, then the magic. A region whose header is all zero, or holds every word but the
//! magic (a torn format), is formatted again; any other header must pass its checksum and
//! agree with the region, or the open fails with `Corrupt`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nacre_halloc::Halloc;
use nacre_pmem::{PmOffset, Pool};

use crate::descriptor::Descriptor;
use crate::engine::Engine;
use crate::epoch::Epochs;
use crate::error::{PmwcasError, Result};
use crate::free_list::FreeList;
use crate::layout::{header_checksum, header_words, region_len, LAYOUT_VERSION, MAGIC};
use crate::nodes::NodePool;
use crate::options::PmwcasOptions;
use crate::protocol::{Protocol, ProtocolHooks};
use crate::recovery::{recover, RecoveryStats};
use crate::table::DescTable;

/// An epoch guard of one PMwCAS instance (see [`Pmwcas::pin`]). It belongs to the thread that
/// took it.
pub struct EpochGuard {
    _guard: crate::epoch::Guard,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl std::fmt::Debug for EpochGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EpochGuard")
    }
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// A persistent multi-word compare-and-swap instance over one pool.
///
/// Thread safety: `Pmwcas` is `Send + Sync`; share it by reference or `Arc`. Every method may
/// run concurrently with every other.
pub struct Pmwcas {
    engine: Engine,
}

impl std::fmt::Debug for Pmwcas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmwcas")
            .field("descriptors", &self.engine.protocol.table.count)
            .field("node_pools", &self.engine.nodes)
            .finish()
    }
}

fn region_name(name: &str) -> String {
    format!("pmwcas.{name}")
}

fn header_corrupt(base: PmOffset, detail: String) -> PmwcasError {
    PmwcasError::Corrupt {
        structure: "descriptor region header",
        offset: base.get(),
        detail,
    }
}

/// Finds or creates the descriptor region; returns its base and descriptor count.
fn open_region(pool: &Pool, opts: &PmwcasOptions) -> Result<(PmOffset, u32)> {
    let name = region_name(&opts.name);
    let region = match pool.region(&name) {
        Some(r) => r,
        None => pool.reserve_region(&name, region_len(opts.descriptors), 4096, 0)?,
    };
    let base = region.offset;
    let mut h = [0u64; 8];
    for (k, w) in h.iter_mut().enumerate() {
        *w = pool.load_u64(base.add(8 * k as u64));
    }
    if h[0] != MAGIC {
        // Unformatted: all zero, or a format torn before its last store (the magic).
        let expected = header_words(opts.descriptors);
        let torn = h[0] == 0 && h[1..] == expected[1..];
        if !torn && h.iter().any(|&w| w != 0) {
            return Err(header_corrupt(base, format!("bad magic {:#x}", h[0])));
        }
        if region.len < region_len(opts.descriptors) {
            return Err(PmwcasError::InvalidOptions(format!(
                "region {name} holds {} bytes, {} descriptors need {}",
                region.len,
                opts.descriptors,
                region_len(opts.descriptors)
            )));
        }
        format(pool, base, opts.descriptors)?;
        tracing::info!(region = %name, descriptors = opts.descriptors, "pmwcas formatted");
        return Ok((base, opts.descriptors));
    }
    if h[7] != header_checksum(&h) {
        return Err(header_corrupt(
            base,
            format!("checksum {:#x} mismatch", h[7]),
        ));
    }
    if h[1] != LAYOUT_VERSION {
        return Err(header_corrupt(base, format!("layout version {}", h[1])));
    }
    let count = u32::try_from(h[2])
        .map_err(|_| header_corrupt(base, format!("descriptor count {}", h[2])))?;
    if header_words(count) != h || region.len < region_len(count) {
        return Err(header_corrupt(
            base,
            format!("shape {h:?} does not fit region of {} bytes", region.len),
        ));
    }
    if count != opts.descriptors {
        return Err(PmwcasError::InvalidOptions(format!(
            "{name} holds {count} descriptors, options ask for {}",
            opts.descriptors
        )));
    }
    Ok((base, count))
}

fn format(pool: &Pool, base: PmOffset, count: u32) -> Result<()> {
    let zeros = vec![0u8; 64 * 1024];
    let body = region_len(count);
    let mut at = 0;
    while at < body {
        let n = (body - at).min(zeros.len() as u64) as usize;
        // SAFETY: the region is being formatted before any instance uses it; nothing else
        // reads or writes it.
        unsafe { pool.copy_nt(base.add(at), &zeros[..n]) };
        at += n as u64;
    }
    pool.fence()?;
    let h = header_words(count);
    for (k, w) in h.iter().enumerate().skip(1) {
        pool.store_u64(base.add(8 * k as u64), *w);
    }
    pool.fence()?;
    pool.persist_u64(base, h[0])?;
    Ok(())
}

impl Pmwcas {
    /// Opens the instance `opts.name` on `halloc`'s pool, creating its descriptor region and
    /// node pools on first use, and recovers every operation a crash interrupted.
    pub fn open_or_create(
        halloc: &Halloc,
        opts: &PmwcasOptions,
    ) -> Result<(Pmwcas, RecoveryStats)> {
        opts.validate()?;
        let pool = halloc.pmem().clone();
        let id = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        let gate = Arc::new(Mutex::new(()));
        let mut nodes = Vec::with_capacity(opts.node_pools.len());
        for (k, spec) in opts.node_pools.iter().enumerate() {
            let objs = halloc.object_pool(&spec.name, spec.object_size, spec.count)?;
            nodes.push(NodePool::new(k as u8, id, objs, gate.clone()));
        }
        let (base, count) = open_region(&pool, opts)?;
        let table = DescTable { pool, base, count };
        let stats = recover(&table, &nodes, opts.recovery_mutation)?;
        let all: Vec<u32> = (0..count).collect();
        let engine = Engine {
            id,
            protocol: Protocol::new(
                table,
                ProtocolHooks {
                    crash_at_condition: opts.crash_at_condition,
                },
            ),
            epochs: Epochs::new(opts.max_threads),
            free: FreeList::new(count, &all),
            nodes,
            gate,
            seq: AtomicU64::new(stats.max_seq + 1),
            reclaim_batch: opts.reclaim_batch,
        };
        Ok((Pmwcas { engine }, stats))
    }

    /// Takes a free descriptor for a new operation (reclaiming finished ones if needed).
    pub fn descriptor(&self) -> Result<Descriptor<'_>> {
        let i = self.engine.take()?;
        Ok(Descriptor::new(&self.engine, i))
    }

    /// Takes a free descriptor if one is free now or after one reclamation pass, without
    /// waiting. For callers inside an epoch guard ([`Pmwcas::pin`]): waiting there could wait
    /// on the caller's own guard, so such a caller gives its attempt up on `None`, drops the
    /// guard and retries.
    pub fn try_descriptor(&self) -> Result<Option<Descriptor<'_>>> {
        Ok(self
            .engine
            .try_take()?
            .map(|i| Descriptor::new(&self.engine, i)))
    }

    /// Reads the word at `addr`: its value once no operation is in flight on it (helping any
    /// that is) and once it is durable (flushing it if dirty). `addr` must be 8-aligned and
    /// inside the pool.
    pub fn read(&self, addr: PmOffset) -> Result<u64> {
        let _g = self.engine.epochs.pin()?;
        self.engine.protocol.read(addr)
    }

    /// Keeps the calling thread inside the instance's epoch until the guard drops: no object a
    /// memory policy frees while the guard is held is released (and so reused) before it
    /// drops, and no descriptor is reclaimed under it. A data structure holds one across each
    /// traversal of the nodes it reads (seed 002 §6.3, epoch-protected garbage collection).
    /// Guards nest. Hold one only briefly: descriptors retired while it is held wait for it.
    pub fn pin(&self) -> Result<EpochGuard> {
        Ok(EpochGuard {
            _guard: self.engine.epochs.pin()?,
            _not_send: std::marker::PhantomData,
        })
    }

    /// The node pool at `index` in [`PmwcasOptions::node_pools`].
    pub fn node_pool(&self, index: usize) -> Option<&NodePool> {
        self.engine.nodes.get(index)
    }

    /// Reclaims every finished descriptor the epochs allow now; returns how many.
    pub fn collect(&self) -> Result<usize> {
        self.engine.collect()
    }

    /// Descriptors in the persistent pool.
    pub fn descriptor_count(&self) -> u32 {
        self.engine.protocol.table.count
    }

    /// Finished operations whose descriptors await reclamation.
    pub fn pending_reclamation(&self) -> usize {
        self.engine.epochs.pending()
    }

    /// The pool underneath.
    pub fn pmem(&self) -> &Arc<Pool> {
        &self.engine.protocol.table.pool
    }

    /// Reclaims every finished descriptor (waiting for other threads' epochs) and closes.
    /// Dropping without `close` is safe: recovery finishes the reclamation at the next open.
    pub fn close(self) -> Result<()> {
        for _ in 0..1000 {
            if self.engine.epochs.pending() == 0 {
                return Ok(());
            }
            self.engine.collect()?;
            if self.engine.epochs.pending() > 0 {
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}

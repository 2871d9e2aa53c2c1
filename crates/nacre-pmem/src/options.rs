//! `PoolOptions`: how a pool is mapped and made durable.

use crate::backend::Backend;
use crate::flush::FlushInstr;

/// Options for creating or opening a pool. `PoolOptions::default()` picks `auto` (dax if the
/// file supports `MAP_SYNC`, else msync), the best flush instruction, and no added latency.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolOptions {
    /// Durability backend.
    pub backend: Backend,
    /// Force a cache-flush instruction instead of detecting the best one. Opening fails with
    /// [`crate::PmemError::BackendUnavailable`] if this CPU lacks it.
    pub flush_instr: Option<FlushInstr>,
    /// Busy-wait this many nanoseconds per flushed cache line, to emulate media slower than
    /// DRAM (0 = off).
    pub flush_delay_ns: u64,
}

impl PoolOptions {
    /// Options with the given backend and every other field at its default.
    pub fn with_backend(backend: Backend) -> Self {
        PoolOptions {
            backend,
            ..Default::default()
        }
    }
}

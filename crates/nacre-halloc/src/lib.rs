//! `nacre-halloc`: Halloc, the persistent-memory allocator (seed 000 §3.4).
//!
//! Allocation is log-free: an object is taken with [`ObjectPool::get`], filled and persisted by
//! the caller, then made permanent with [`ObjectPool::commit`], a single 8-byte persistent
//! store (one flush, one fence). A crash before `commit` returns the object to the freelist at
//! the next open; nothing leaks and nothing is handed out twice (invariants H1, H2 in
//! `object_pool.rs` and DESIGN §3).
//!
//! ```
//! use std::sync::Arc;
//! use nacre_pmem::{Backend, Pool, PoolOptions};
//! use nacre_halloc::Halloc;
//! let pool = Arc::new(Pool::create_sim(8 << 20, &PoolOptions::with_backend(Backend::Sim))?);
//! let halloc = Halloc::open(pool.clone())?;
//! let objs = halloc.object_pool("nodes", 256, 1000)?;
//! let id = objs.get()?;
//! // SAFETY: the object was just taken: nothing else reads or writes it before the commit.
//! unsafe { pool.copy_persist(objs.offset(id), b"node contents")? };
//! objs.commit(id)?;
//! assert!(objs.check(id)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_docs)]

mod error;
mod halloc;
mod meta_pools;
mod object_pool;
mod registry;
mod zone_pool;

pub use error::{HallocError, Result};
pub use halloc::{Halloc, PoolKind};
pub use meta_pools::{MemtableHead, MemtablePool, Slot, SubtablePool, GIDX_POS_MAX};
pub use object_pool::{
    ObjId, ObjectPool, PoolShape, RecoveryStats, MAX_OBJECT_SIZE, MIN_OBJECT_SIZE,
};
pub use registry::{Entry as RegistryEntry, MAX_POOLS, NAME_MAX, REGISTRY_ROOT};
pub use zone_pool::ZonePool;

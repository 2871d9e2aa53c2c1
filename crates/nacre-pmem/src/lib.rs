//! `nacre-pmem`: persistent-memory pools for Nacre.
//!
//! A [`Pool`] is one file (or device-DAX device) mapped anywhere in the address space and
//! addressed by [`PmOffset`]. Bytes become durable only through the pool's `flush`, `fence`,
//! `persist`, `copy_persist` and `persist_u64`; how that happens depends on the
//! [`Backend`] (docs/durability.md):
//!
//! | backend | persist | survives |
//! |---|---|---|
//! | `dax` | clwb/clflushopt/clflush + sfence on a `MAP_SYNC` mapping | power loss |
//! | `msync` | `msync(MS_SYNC)` of the dirty pages at each fence | power loss |
//! | `emulated` | clwb + sfence on an ordinary shared mapping | process crash |
//! | `sim` | power-failure simulator with crash images ([`SimControl`]) | tests only |
//!
//! ```
//! use nacre_pmem::{Pool, PoolOptions, Backend, PmOffset};
//! let pool = Pool::create_sim(1 << 20, &PoolOptions::with_backend(Backend::Sim))?;
//! let r = pool.reserve_region("demo", 4096, 64, 0)?;
//! // SAFETY: the region was just reserved; nothing else touches it.
//! unsafe { pool.write(r.offset, b"hello") };
//! pool.persist(r.offset, 5)?;
//! # Ok::<(), nacre_pmem::PmemError>(())
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_docs)]

mod backend;
mod create;
mod error;
pub mod flush;
mod mapping;
mod offset;
mod open;
mod options;
mod pool;
mod sim;
mod superblock;

pub use backend::{ActiveBackend, Backend, BackendReport};
pub use error::{PmemError, Result};
pub use flush::FlushInstr;
pub use offset::PmOffset;
pub use options::PoolOptions;
pub use pool::Pool;
pub use sim::{CrashPolicy, SimControl, SplitMix64};
pub use superblock::{Region, DATA_START, FORMAT_VERSION, MIN_POOL_SIZE, ROOT_SLOTS};

//! `nacre-pmwcas`: persistent multi-word compare-and-swap (PMwCAS) over a Nacre pool (seed 002
//! §6.1; Wang, Levandoski, Larson, ICDE 2018), the primitive a BzTree is built on.
//!
//! A [`Pmwcas`] instance keeps a fixed array of descriptors in the pool. An operation takes a
//! [`Descriptor`], adds up to [`MAX_ENTRIES`] (word, old, new) entries, and executes: either
//! every word changes from old to new, durably, or none does, and after a power failure
//! [`Pmwcas::open_or_create`] finishes or undoes whatever was in flight, touching only the
//! descriptors and their target words. Readers use [`Pmwcas::read`], which helps operations in
//! flight and never returns a value that is not durable. Memory policies ([`Policy`],
//! [`NodePool`]) free replaced objects exactly once, even across crashes.
//!
//! ```
//! use std::sync::Arc;
//! use nacre_pmem::{Backend, Pool, PoolOptions};
//! use nacre_halloc::Halloc;
//! use nacre_pmwcas::{Pmwcas, PmwcasOptions};
//! let pool = Arc::new(Pool::create_sim(4 << 20, &PoolOptions::with_backend(Backend::Sim))?);
//! let words = pool.reserve_region("accounts", 4096, 64, 0)?.offset;
//! let halloc = Halloc::open(pool.clone())?;
//! let (pmwcas, _) = Pmwcas::open_or_create(&halloc, &PmwcasOptions::default())?;
//! let (a, b) = (words, words.add(8));
//! let mut d = pmwcas.descriptor()?;
//! d.add(a, 0, 10)?;
//! d.add(b, 0, 20)?;
//! assert!(d.execute()?);
//! assert_eq!((pmwcas.read(a)?, pmwcas.read(b)?), (10, 20));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod descriptor;
mod engine;
mod epoch;
mod error;
mod free_list;
mod layout;
mod nodes;
mod options;
mod pmwcas;
mod protocol;
mod recovery;
mod table;
mod word;

pub use descriptor::Descriptor;
pub use error::{PmwcasError, Result};
pub use layout::{region_len, Policy, State, DESC_SIZE, MAX_ENTRIES};
pub use nodes::{NodePool, NodePoolSpec};
pub use options::{PmwcasOptions, RecoveryMutation, NAME_MAX};
pub use pmwcas::{EpochGuard, Pmwcas};
pub use recovery::RecoveryStats;
pub use word::{is_plain, DIRTY, FLAGS, MAX_VALUE, MWCAS, RDCSS};

//! `nacre-bztree`: the BzTree (seed 002 ch. 6; Arulraj, Levandoski, Minhas, Larson, VLDB
//! 2018), a latch-free B+-tree whose nodes live in a persistent-memory pool and whose every
//! change is a persistent multi-word CAS ([`nacre_pmwcas`]). The tree on media is always
//! consistent: opening it after a crash costs PMwCAS recovery and an epoch bump, with no
//! traversal, no rebuild and no DRAM index.
//!
//! Keys are byte strings up to [`BzTreeOptions::max_key_len`]; values are u64 below 2^61
//! (Nacre stores pool offsets of records or version lists there).
//!
//! ```
//! use std::sync::Arc;
//! use nacre_pmem::{Backend, Pool, PoolOptions};
//! use nacre_halloc::Halloc;
//! use nacre_bztree::{BzTree, BzTreeOptions};
//! let pool = Arc::new(Pool::create_sim(8 << 20, &PoolOptions::with_backend(Backend::Sim))?);
//! let halloc = Halloc::open(pool)?;
//! let opts = BzTreeOptions { nodes: 256, ..BzTreeOptions::default() };
//! let (tree, _) = BzTree::open(&halloc, &opts)?;
//! assert!(tree.insert(b"apple", 1)?);
//! assert!(!tree.insert(b"apple", 2)?);
//! assert_eq!(tree.upsert(b"pear", 3)?, None);
//! assert_eq!(tree.get(b"apple")?, Some(1));
//! assert_eq!(tree.delete(b"apple")?, Some(1));
//! assert_eq!(tree.scan(b"", None, 10)?, vec![(b"pear".to_vec(), 3)]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod check;
mod error;
mod inner_cache;
mod layout;
mod leaf;
mod node;
mod options;
mod scan;
mod smo;
mod tree;

pub use check::TreeCheck;
pub use error::{BzError, Result};
pub use layout::{KEY_LEN_LIMIT, NODE_SIZE_MAX, NODE_SIZE_MIN};
pub use options::{BzMutation, BzTreeOptions, TREES_MAX, TREE_NAME_MAX};
pub use tree::{BzForest, BzTree, OpenStats, Shared, SmoStats};

//! Shared setup for the BzTree tests: small `sim` pools, trees with small nodes (so a few
//! hundred keys already make a tree of several levels), keys, and a check that Halloc's
//! committed node set is exactly the set of nodes reachable from the root.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nacre_bztree::{BzTree, BzTreeOptions, OpenStats};
use nacre_halloc::Halloc;
use nacre_pmem::{Backend, Pool, PoolOptions};

pub const POOL_SIZE: u64 = 2 << 20;

pub fn pool_opts() -> PoolOptions {
    PoolOptions::with_backend(Backend::Sim)
}

/// 512-byte nodes (about 14 records of a 9-byte key per leaf), keys up to 24 bytes.
pub fn options() -> BzTreeOptions {
    BzTreeOptions {
        name: "t".into(),
        node_size: 512,
        max_key_len: 24,
        nodes: 1024,
        descriptors: 64,
        max_threads: 16,
        reclaim_batch: 4,
        ..BzTreeOptions::default()
    }
}

pub fn new_pool(size: u64) -> Arc<Pool> {
    Arc::new(Pool::create_sim(size, &pool_opts()).expect("sim pool"))
}

pub fn open(pool: &Arc<Pool>, opts: &BzTreeOptions) -> nacre_bztree::Result<(BzTree, OpenStats)> {
    let halloc = Halloc::open(pool.clone())?;
    BzTree::open(&halloc, opts)
}

pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:08}").into_bytes()
}

/// Everything in the tree, by a full scan.
pub fn contents(t: &BzTree) -> BTreeMap<Vec<u8>, u64> {
    t.scan(b"", None, usize::MAX)
        .expect("scan")
        .into_iter()
        .collect()
}

/// Everything in the tree, or what the scan reported.
pub fn try_contents(t: &BzTree) -> Result<BTreeMap<Vec<u8>, u64>, String> {
    Ok(t.scan(b"", None, usize::MAX)
        .map_err(|e| format!("scan: {e}"))?
        .into_iter()
        .collect())
}

/// The structural check passes and the committed node set equals the reachable set.
/// (Finished descriptors are reclaimed first: their policies release replaced nodes.)
pub fn check_memory(t: &BzTree) -> Result<nacre_bztree::TreeCheck, String> {
    for _ in 0..8 {
        if t.pmwcas().pending_reclamation() == 0 {
            break;
        }
        t.pmwcas().collect().map_err(|e| format!("collect: {e}"))?;
    }
    let c = t.check().map_err(|e| format!("check: {e}"))?;
    let nodes = t.node_pool();
    nodes.verify().map_err(|e| format!("H1: {e}"))?;
    let committed: BTreeSet<u64> = nodes.committed().iter().map(|o| o.get()).collect();
    let reachable: BTreeSet<u64> = c.nodes.iter().map(|o| o.get()).collect();
    if committed != reachable {
        let leaked: Vec<_> = committed.difference(&reachable).collect();
        let freed: Vec<_> = reachable.difference(&committed).collect();
        return Err(format!(
            "committed nodes differ from reachable ones: leaked {leaked:x?}, freed but \
             reachable {freed:x?}"
        ));
    }
    Ok(c)
}

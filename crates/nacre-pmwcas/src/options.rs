//! `PmwcasOptions`: the shape of a PMwCAS instance, validated before anything is created.

use crate::error::{PmwcasError, Result};
use crate::nodes::NodePoolSpec;

/// Longest instance name (its region is named `pmwcas.<name>`, within the pool's 24 bytes).
pub const NAME_MAX: usize = 17;

/// How a PMwCAS instance is shaped. Defaults: name `"pmwcas"`, 1024 descriptors, 256 threads,
/// reclamation every 16 finished operations, no node pools.
#[derive(Clone, Debug)]
pub struct PmwcasOptions {
    /// Instance name; several instances may share a pool under different names.
    pub name: String,
    /// Descriptors in the persistent pool (fixed at creation): at least the number of
    /// operations in flight at once, plus those awaiting reclamation.
    pub descriptors: u32,
    /// Most threads that may use the instance at once (epoch slots).
    pub max_threads: usize,
    /// Finished operations that accumulate before reclamation runs (one fence per batch).
    pub reclaim_batch: usize,
    /// Pools of policy-managed objects, in a fixed order (a descriptor names a pool by its
    /// index in this list, so the order must not change between opens).
    pub node_pools: Vec<NodePoolSpec>,
    #[doc(hidden)]
    pub recovery_mutation: Option<RecoveryMutation>,
    #[doc(hidden)]
    pub crash_at_condition: Option<u64>,
}

impl Default for PmwcasOptions {
    fn default() -> Self {
        PmwcasOptions {
            name: "pmwcas".into(),
            descriptors: 1024,
            max_threads: 256,
            reclaim_batch: 16,
            node_pools: Vec::new(),
            recovery_mutation: None,
            crash_at_condition: None,
        }
    }
}

impl PmwcasOptions {
    /// Checks every field against its range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(PmwcasError::InvalidOptions(m));
        if self.name.is_empty() || self.name.len() > NAME_MAX || self.name.contains('\0') {
            return bad(format!(
                "name {:?}: 1 to {NAME_MAX} bytes, no NUL",
                self.name
            ));
        }
        if !(1..=1 << 20).contains(&self.descriptors) {
            return bad(format!(
                "descriptors {} not in 1..=1048576",
                self.descriptors
            ));
        }
        if !(1..=4096).contains(&self.max_threads) {
            return bad(format!("max_threads {} not in 1..=4096", self.max_threads));
        }
        if !(1..=4096).contains(&self.reclaim_batch) {
            return bad(format!(
                "reclaim_batch {} not in 1..=4096",
                self.reclaim_batch
            ));
        }
        if self.node_pools.len() > 255 {
            return bad(format!("{} node pools, at most 255", self.node_pools.len()));
        }
        Ok(())
    }
}

/// A recovery rule switched off, so a test can show that the power-failure torture catches
/// its absence. Never set outside such tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMutation {
    /// Roll every in-flight descriptor back, even a Succeeded one.
    RollBackSucceeded,
    /// Leave the pointers of Undecided and Failed descriptors in their words.
    SkipRollBack,
    /// Leave dirty bits on target words.
    SkipDirtyClear,
    /// Leave condition (RDCSS) pointers in their words.
    SkipConditionRestore,
    /// Apply no memory policy.
    SkipPolicies,
    /// Release policy objects without checking that Halloc still has them committed.
    IgnoreCommittedCheck,
    /// Set statuses free before the repaired words and releases are durable.
    FreeBeforeRepairsDurable,
}

//! The Global Index (seed 000 §3.3): one globally sorted level per subtable whose records
//! stay in PM where they were written. Full memtables are merged into it by moving pointers
//! (G1: record bytes are never copied by a merge); versions no reader can need are dropped as
//! they are superseded.

pub(crate) mod index;
pub(crate) mod merge;
pub(crate) mod mirror;
pub(crate) mod pending;
pub(crate) mod persistent;

pub(crate) use index::{GlobalIndex, Version};
pub(crate) use merge::{apply, fresh, Horizon};

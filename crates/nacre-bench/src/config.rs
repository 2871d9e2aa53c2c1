//! Parameters of `nacre-bench pmem`: which subjects to measure and how long.

use std::path::{Path, PathBuf};

use crate::bench::BLOCK;
use crate::error::{BenchError, Result};

/// A subject the benchmark can measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// nacre-pmem `emulated` backend on a file in the shm directory.
    Emulated,
    /// nacre-pmem `msync` backend on a file in the disk directory.
    Msync,
    /// nacre-pmem `dax` backend (reported unavailable without `MAP_SYNC`).
    Dax,
    /// nacre-pmem `sim` backend, in memory.
    Sim,
    /// Raw `MAP_SHARED` mapping of a shm file: cache write-backs or non-temporal stores.
    RawShm,
    /// Raw `pwrite` + `fdatasync` on a disk file.
    RawFdatasync,
}

impl Target {
    /// Every target, in report order.
    pub const ALL: [Target; 6] = [
        Target::Emulated,
        Target::RawShm,
        Target::Msync,
        Target::RawFdatasync,
        Target::Dax,
        Target::Sim,
    ];

    /// Whether each operation is a system call (msync, fdatasync), bounded by `sync_ops`.
    pub fn syscall_bound(self) -> bool {
        matches!(self, Target::Msync | Target::RawFdatasync)
    }
}

/// Parameters of a run. `PmemConfig::default()` is the CLI's defaults.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PmemConfig {
    /// Region size for cache-flush backends, the raw mapping and sim.
    pub region_bytes: usize,
    /// Region size for the syscall-bound subjects (msync, fdatasync).
    pub sync_region_bytes: usize,
    /// Seconds per measurement.
    pub seconds: f64,
    /// Operation cap per measurement of the syscall-bound loops.
    pub sync_ops: u64,
    /// Repeats of each measurement; reports take the median.
    pub repeats: usize,
    /// Directory for the emulated pool and the raw mapping (tmpfs).
    pub shm_dir: PathBuf,
    /// Directory for the msync pool and the fdatasync file.
    pub disk_dir: PathBuf,
    /// Directory where the dax backend is attempted.
    pub dax_dir: PathBuf,
    /// Subjects to measure.
    pub targets: Vec<Target>,
    /// Seed of the random-offset generator (repeat `r` uses `seed + r`).
    pub seed: u64,
}

impl Default for PmemConfig {
    fn default() -> Self {
        let shm = Path::new("/dev/shm");
        PmemConfig {
            region_bytes: 64 << 20,
            sync_region_bytes: 8 << 20,
            seconds: 1.0,
            sync_ops: 4000,
            repeats: 3,
            shm_dir: if shm.is_dir() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            },
            disk_dir: PathBuf::from("bench-results"),
            dax_dir: PathBuf::from("bench-results"),
            targets: Target::ALL.to_vec(),
            seed: 0x6E61_6372_6521,
        }
    }
}

impl PmemConfig {
    /// Checks that the parameters can produce a meaningful run.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(BenchError::InvalidParams(m.into()));
        if self.region_bytes < BLOCK || self.sync_region_bytes < BLOCK {
            return bad("regions must hold at least one 4 KiB block");
        }
        if !(self.seconds.is_finite() && self.seconds > 0.0) {
            return bad("--seconds must be a positive number");
        }
        if self.repeats == 0 || self.sync_ops == 0 {
            return bad("--repeats and --sync-ops must be at least 1");
        }
        Ok(())
    }
}

//! Helpers shared by the integration tests: where to put pool files for each backend.
#![allow(dead_code)]

use nacre_pmem::{Backend, Pool, PoolOptions};
use std::path::{Path, PathBuf};

/// A temporary directory on /dev/shm when it exists (the `emulated` backend's home), else the
/// system temp dir.
pub fn shm_dir() -> tempfile::TempDir {
    let base = Path::new("/dev/shm");
    if base.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(base) {
            return d;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

/// A temporary directory on a disk-backed file system for the `msync` backend.
pub fn disk_dir() -> tempfile::TempDir {
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tempfile::tempdir_in(target).expect("tempdir in target")
}

/// The file backends this machine can run, each with a directory to hold its pool.
pub fn file_backends() -> Vec<(Backend, tempfile::TempDir)> {
    vec![
        (Backend::Emulated, shm_dir()),
        (Backend::Msync, disk_dir()),
        (Backend::Auto, disk_dir()),
    ]
}

/// Creates a pool of `size` bytes for `backend`; file backends live in `dir`.
pub fn create(backend: Backend, dir: &Path, size: u64) -> Pool {
    let opts = PoolOptions::with_backend(backend);
    if backend == Backend::Sim {
        Pool::create_sim(size, &opts).expect("create sim")
    } else {
        Pool::create(dir.join("t.pool"), size, &opts).expect("create")
    }
}

/// Reopens what `create` made (for sim: from the media image, i.e. after a clean crash).
pub fn reopen(backend: Backend, dir: &Path, pool: Pool) -> Pool {
    let opts = PoolOptions::with_backend(backend);
    if backend == Backend::Sim {
        let image = pool
            .sim()
            .expect("sim")
            .crash(nacre_pmem::CrashPolicy::KeepNone);
        drop(pool);
        Pool::open_sim(image, &opts).expect("open sim")
    } else {
        drop(pool);
        Pool::open(dir.join("t.pool"), &opts).expect("open")
    }
}

//! A pool file appears at its path only once it is whole; what an unfinished creation left
//! under the temporary name is removed by the next create or open of that path, unless a
//! creator still holds it.

mod common;

use common::{disk_dir, shm_dir};
use nacre_pmem::{Backend, PmemError, Pool, PoolOptions, SplitMix64, MIN_POOL_SIZE};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn garbage(path: &Path, len: u64, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    std::fs::write(path, bytes).expect("write leftover");
}

/// Every kind of leftover a killed creator can leave: empty (killed right after creating
/// it), reserved but unwritten, random bytes, and a pool whose superblock never got written.
fn leftovers(tmp: &Path, kind: usize) {
    match kind {
        0 => std::fs::write(tmp, b"").expect("empty"),
        1 => {
            let f = std::fs::File::create(tmp).expect("create");
            f.set_len(4 * MIB).expect("set_len");
        }
        2 => garbage(tmp, 2 * MIB, 9),
        _ => {
            // A whole pool made elsewhere, then its header wiped: the state just before the
            // superblock write.
            let dir = tempfile::tempdir().expect("tempdir");
            let other = dir.path().join("o.pool");
            drop(
                Pool::create(&other, 2 * MIB, &PoolOptions::with_backend(Backend::Msync))
                    .expect("create"),
            );
            let mut bytes = std::fs::read(&other).expect("read");
            bytes[..4096].fill(0);
            std::fs::write(tmp, bytes).expect("write");
        }
    }
}

#[test]
fn an_unfinished_creation_is_removed_and_the_pool_made_afresh() {
    for (backend, dir) in [(Backend::Emulated, shm_dir()), (Backend::Msync, disk_dir())] {
        let opts = PoolOptions::with_backend(backend);
        for kind in 0..4 {
            let path = dir.path().join(format!("p{kind}.pool"));
            let tmp = Pool::creating_path(&path).expect("tmp");
            assert_eq!(tmp, dir.path().join(format!("p{kind}.pool.nacre-creating")));
            leftovers(&tmp, kind);
            // `open` alone does not create, but it clears the leftover all the same.
            match Pool::open(&path, &opts) {
                Err(PmemError::NotFound { .. }) => {}
                r => panic!("{backend} kind {kind}: open of a missing pool gave {r:?}"),
            }
            assert!(
                !tmp.exists(),
                "{backend} kind {kind}: open left the leftover"
            );
            leftovers(&tmp, kind);
            let pool = Pool::open_or_create(&path, 2 * MIB, &opts)
                .unwrap_or_else(|e| panic!("{backend} kind {kind}: {e}"));
            assert_eq!(pool.path(), path);
            pool.set_root(0, nacre_pmem::PmOffset(0x4000))
                .expect("root");
            assert!(
                !tmp.exists(),
                "{backend} kind {kind}: create left the leftover"
            );
            drop(pool);
            let pool = Pool::open(&path, &opts).expect("reopen");
            assert_eq!(pool.root(0).expect("root"), nacre_pmem::PmOffset(0x4000));
        }
    }
}

#[test]
fn opening_a_whole_pool_removes_a_leftover_beside_it() {
    let dir = shm_dir();
    let opts = PoolOptions::with_backend(Backend::Emulated);
    let path = dir.path().join("p.pool");
    drop(Pool::create(&path, 2 * MIB, &opts).expect("create"));
    let tmp = Pool::creating_path(&path).expect("tmp");
    garbage(&tmp, MIB, 3);
    drop(Pool::open(&path, &opts).expect("open"));
    assert!(!tmp.exists());
    // `create` refuses the existing pool and leaves it alone.
    garbage(&tmp, MIB, 4);
    match Pool::create(&path, 2 * MIB, &opts) {
        Err(PmemError::AlreadyExists { path: p }) => assert_eq!(p, path),
        r => panic!("create over a pool gave {r:?}"),
    }
    drop(Pool::open(&path, &opts).expect("the pool is untouched"));
    assert!(!tmp.exists());
}

#[test]
fn a_creation_in_progress_is_left_alone() {
    let dir = shm_dir();
    let opts = PoolOptions::with_backend(Backend::Emulated);
    let path = dir.path().join("p.pool");
    let tmp = Pool::creating_path(&path).expect("tmp");
    garbage(&tmp, MIB, 5);
    // Another creator: holds the temporary file's lock.
    let held = std::fs::File::open(&tmp).expect("open");
    // SAFETY: flock on a valid descriptor has no memory effects.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    match Pool::create(&path, MIN_POOL_SIZE, &opts) {
        Err(PmemError::CreationInProgress { path: p, temporary }) => {
            assert_eq!((p, temporary), (path.clone(), tmp.clone()))
        }
        r => panic!("create beside a creation in progress gave {r:?}"),
    }
    assert!(matches!(
        Pool::open(&path, &opts),
        Err(PmemError::NotFound { .. })
    ));
    assert!(tmp.exists(), "a held temporary file was removed");
    assert!(!path.exists());
    drop(held);
    drop(Pool::open_or_create(&path, MIN_POOL_SIZE, &opts).expect("create once released"));
    assert!(!tmp.exists());
}

#[test]
fn a_failed_creation_leaves_nothing() {
    let dir = shm_dir();
    let path = dir.path().join("p.pool");
    // More than the file system has: refused before anything is written.
    let e = Pool::create(
        &path,
        1 << 50,
        &PoolOptions::with_backend(Backend::Emulated),
    )
    .expect_err("too large");
    assert!(
        matches!(e, PmemError::NoSpace { .. } | PmemError::InvalidOptions(_)),
        "{e:?}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
}

#[test]
fn a_path_without_a_file_name_is_refused() {
    assert!(matches!(
        Pool::creating_path("/"),
        Err(PmemError::InvalidOptions(_))
    ));
}

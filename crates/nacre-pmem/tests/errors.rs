//! Every way a file can fail to be a usable pool gives a typed error, never a panic or a
//! silent re-format, and never changes the file.

mod common;

use common::{disk_dir, shm_dir};
use nacre_pmem::{Backend, PmemError, Pool, PoolOptions, SplitMix64, MIN_POOL_SIZE};
use std::path::Path;

const MIB: u64 = 1 << 20;

/// Held by every test here that opens a pool file. The lock test spawns flock(1): the forked
/// child holds a copy of every descriptor the process has open until it execs, so another
/// test's pool, closed and reopened meanwhile, would find itself locked by that copy.
static FILES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn files() -> std::sync::MutexGuard<'static, ()> {
    FILES.lock().unwrap_or_else(|e| e.into_inner())
}

fn emu() -> PoolOptions {
    PoolOptions::with_backend(Backend::Emulated)
}

fn make_pool(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("p.pool");
    let pool = Pool::create(&p, 2 * MIB, &emu()).expect("create");
    // one metadata update, so both superblock slots hold a valid generation
    pool.set_root(0, nacre_pmem::PmOffset(0x4000))
        .expect("root");
    p
}

/// Opens `path` with every backend that reads files, expecting the same error each time, and
/// checks the file was not modified.
fn open_fails(path: &Path, check: impl Fn(&PmemError) -> bool) {
    let before = std::fs::read(path).expect("read");
    for b in [
        Backend::Emulated,
        Backend::Msync,
        Backend::Auto,
        Backend::Sim,
    ] {
        let e = Pool::open(path, &PoolOptions::with_backend(b)).expect_err("must fail");
        assert!(check(&e), "{b}: unexpected error {e:?}");
        assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");
    }
    assert_eq!(std::fs::read(path).expect("read"), before, "file modified");
}

#[test]
fn random_bytes_are_not_a_pool() {
    let _files = files();
    let dir = shm_dir();
    let p = dir.path().join("random.bin");
    let mut rng = SplitMix64::new(1);
    let bytes: Vec<u8> = (0..2 * MIB).map(|_| rng.next_u64() as u8).collect();
    std::fs::write(&p, bytes).expect("write");
    open_fails(&p, |e| matches!(e, PmemError::NotAPool { .. }));
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, b"").expect("write");
    open_fails(&empty, |e| matches!(e, PmemError::NotAPool { .. }));
}

#[test]
fn truncated_pool_is_reported_with_both_sizes() {
    let _files = files();
    let dir = shm_dir();
    let p = make_pool(dir.path());
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .expect("open");
    f.set_len(MIB + 4096).expect("truncate");
    drop(f);
    open_fails(&p, |e| {
        matches!(e, PmemError::Truncated { expected, actual, .. }
            if *expected == 2 * MIB && *actual == MIB + 4096)
    });
    // cut inside the superblock itself
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .expect("open");
    f.set_len(100).expect("truncate");
    drop(f);
    open_fails(&p, |e| matches!(e, PmemError::Truncated { .. }));
}

#[test]
fn corrupt_header_and_metadata_fail_their_checksums() {
    let _files = files();
    let dir = shm_dir();
    let p = make_pool(dir.path());
    let good = std::fs::read(&p).expect("read");

    let mut bad = good.clone();
    bad[30] ^= 0x40; // inside the UUID
    std::fs::write(&p, &bad).expect("write");
    open_fails(
        &p,
        |e| matches!(e, PmemError::BadChecksum { what, .. } if *what == "superblock header"),
    );

    // the newer metadata slot (B) torn: the older one is used (crash-atomic updates)
    let mut one = good.clone();
    one[8192 + 8] ^= 1;
    std::fs::write(&p, &one).expect("write");
    let pool = Pool::open(&p, &emu()).expect("one good slot suffices");
    assert_eq!(
        pool.root(0).expect("root").get(),
        0,
        "older generation in use"
    );
    drop(pool);

    let mut both = good.clone();
    both[4096 + 8] ^= 1;
    both[8192 + 100] ^= 0xAB;
    std::fs::write(&p, &both).expect("write");
    open_fails(
        &p,
        |e| matches!(e, PmemError::BadChecksum { what, .. } if *what == "superblock metadata"),
    );
}

#[test]
fn other_format_version_is_refused() {
    let _files = files();
    let dir = shm_dir();
    let p = make_pool(dir.path());
    let mut b = std::fs::read(&p).expect("read");
    b[8..12].copy_from_slice(&7u32.to_le_bytes());
    let c = u64::from(crc32c::crc32c(&b[..4088]));
    b[4088..4096].copy_from_slice(&c.to_le_bytes());
    std::fs::write(&p, &b).expect("write");
    open_fails(&p, |e| {
        matches!(
            e,
            PmemError::UnsupportedVersion {
                found: 7,
                supported: nacre_pmem::FORMAT_VERSION,
                ..
            }
        )
    });
}

#[test]
fn second_opener_is_locked_out_until_the_first_closes() {
    let _files = files();
    for dir in [shm_dir(), disk_dir()] {
        let p = dir.path().join("l.pool");
        let first = Pool::create(&p, MIB, &emu()).expect("create");
        for b in [Backend::Emulated, Backend::Msync, Backend::Auto] {
            let e = Pool::open(&p, &PoolOptions::with_backend(b)).expect_err("locked");
            assert!(matches!(e, PmemError::Locked { .. }), "{e:?}");
            assert!(e.to_string().contains("locked"), "{e}");
        }
        // a second process, not just a second handle
        let status = std::process::Command::new("flock")
            .args(["-n", "-E", "99", p.to_str().expect("utf8"), "true"])
            .status();
        if let Ok(s) = status {
            assert_eq!(s.code(), Some(99), "flock(1) should find the pool locked");
        }
        drop(first);
        Pool::open(&p, &emu()).expect("open after close");
    }
}

#[test]
fn too_small_existing_missing_and_unwritable_paths() {
    let _files = files();
    let dir = shm_dir();
    let e = Pool::create(dir.path().join("s.pool"), MIN_POOL_SIZE - 1, &emu()).expect_err("small");
    assert!(
        matches!(e, PmemError::TooSmall { min, .. } if min == MIN_POOL_SIZE),
        "{e}"
    );
    assert!(!dir.path().join("s.pool").exists());
    let e = Pool::create_sim(4096, &PoolOptions::with_backend(Backend::Sim)).expect_err("small");
    assert!(matches!(e, PmemError::TooSmall { .. }));

    let p = make_pool(dir.path());
    let e = Pool::create(&p, MIB, &emu()).expect_err("exists");
    assert!(matches!(e, PmemError::AlreadyExists { .. }), "{e}");
    Pool::open(&p, &emu()).expect("existing pool untouched by failed create");

    let e = Pool::open(dir.path().join("missing.pool"), &emu()).expect_err("missing");
    assert!(matches!(e, PmemError::NotFound { .. }), "{e}");

    // sysfs refuses new files even to root
    let e = Pool::create("/sys/nacre-test.pool", MIB, &emu()).expect_err("unwritable");
    assert!(matches!(e, PmemError::NotWritable { .. }), "{e:?}");
    assert!(e.to_string().contains("not writable"), "{e}");

    let e = Pool::create(
        dir.path().join("x.pool"),
        MIB,
        &PoolOptions::with_backend(Backend::Sim),
    )
    .expect_err("sim create on a path");
    assert!(matches!(e, PmemError::InvalidOptions(_)), "{e}");
}

#[test]
fn sim_images_are_validated_like_files() {
    let opts = PoolOptions::with_backend(Backend::Sim);
    let e = Pool::open_sim(vec![0u8; 2 * MIB as usize], &opts).expect_err("zeros");
    assert!(matches!(e, PmemError::NotAPool { .. }));
    let pool = Pool::create_sim(2 * MIB, &opts).expect("sim");
    let mut image = pool.sim().expect("sim").media();
    image.truncate(MIB as usize);
    let e = Pool::open_sim(image, &opts).expect_err("truncated");
    assert!(matches!(e, PmemError::Truncated { .. }), "{e}");
}

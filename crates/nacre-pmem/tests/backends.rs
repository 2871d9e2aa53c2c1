//! Every pool API on every backend this machine can run.

mod common;

use common::{create, file_backends, reopen, shm_dir};
use nacre_pmem::{
    ActiveBackend, Backend, FlushInstr, PmOffset, PmemError, Pool, PoolOptions, ROOT_SLOTS,
};
use std::time::Instant;

const MIB: u64 = 1 << 20;

fn all_backends() -> Vec<(Backend, tempfile::TempDir)> {
    let mut v = file_backends();
    v.push((Backend::Sim, shm_dir()));
    v
}

#[test]
fn data_written_and_persisted_survives_reopen() {
    for (backend, dir) in all_backends() {
        let pool = create(backend, dir.path(), 4 * MIB);
        assert_eq!(pool.size(), 4 * MIB);
        let r = pool.reserve_region("data", MIB, 4096, 7).expect("reserve");
        assert_eq!(r.offset.get() % 4096, 0);
        // plain write + persist
        let msg = b"the quick brown fox jumps over the lazy dog";
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.write(r.offset, msg) };
        pool.persist(r.offset, msg.len()).expect("persist");
        // non-temporal copies of awkward sizes and alignments
        let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.copy_persist(r.offset.add(101), &big) }.expect("copy_persist");
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.copy_nt(r.offset.add(20_000), &big[..77]) };
        pool.fence().expect("fence");
        // atomic words
        let w = r.offset.add(65_536);
        pool.persist_u64(w, 0xDEAD_BEEF_CAFE_F00D)
            .expect("persist_u64");
        pool.store_u64(w.add(8), 42);
        pool.fence().expect("fence");
        assert_eq!(pool.load_u64(w), 0xDEAD_BEEF_CAFE_F00D);
        pool.set_root(3, r.offset).expect("set_root");
        let uuid = pool.uuid();

        let pool = reopen(backend, dir.path(), pool);
        assert_eq!(pool.uuid(), uuid, "{backend}");
        let mut got = vec![0u8; msg.len()];
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.read(r.offset, &mut got) };
        assert_eq!(&got, msg, "{backend}");
        let mut got = vec![0u8; big.len()];
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.read(r.offset.add(101), &mut got) };
        assert_eq!(got, big, "{backend}");
        let mut got = vec![0u8; 77];
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.read(r.offset.add(20_000), &mut got) };
        assert_eq!(&got[..], &big[..77], "{backend}");
        assert_eq!(pool.load_u64(w), 0xDEAD_BEEF_CAFE_F00D, "{backend}");
        assert_eq!(pool.load_u64(w.add(8)), 42, "{backend}");
        assert_eq!(pool.root(3).expect("root"), r.offset);
        assert_eq!(pool.region("data"), Some(r.clone()));
        assert_eq!(pool.regions(), vec![r]);
    }
}

#[test]
fn regions_and_roots_are_checked() {
    for (backend, dir) in all_backends() {
        let pool = create(backend, dir.path(), 2 * MIB);
        let free = pool.unreserved();
        let a = pool.reserve_region("a", 1000, 64, 0).expect("a");
        let b = pool.reserve_region("b", 10, 4096, 0).expect("b");
        assert!(b.offset.get() >= a.offset.get() + 1000 && b.offset.get() % 4096 == 0);
        assert!(pool.unreserved() < free);
        assert!(matches!(
            pool.reserve_region("a", 10, 8, 0),
            Err(PmemError::RegionExists { .. })
        ));
        assert!(matches!(
            pool.reserve_region("", 10, 8, 0),
            Err(PmemError::BadRegionName { .. })
        ));
        assert!(matches!(
            pool.reserve_region(&"x".repeat(40), 10, 8, 0),
            Err(PmemError::BadRegionName { .. })
        ));
        assert!(matches!(
            pool.reserve_region("c", 10, 3, 0),
            Err(PmemError::InvalidOptions(_))
        ));
        let e = pool.reserve_region("huge", 4 * MIB, 8, 0).unwrap_err();
        assert!(matches!(e, PmemError::PoolFull { .. }), "{e}");
        assert!(e.to_string().contains("huge"), "{e}");
        assert!(matches!(
            pool.root(ROOT_SLOTS),
            Err(PmemError::BadRootIndex { .. })
        ));
        assert!(pool.set_root(ROOT_SLOTS, PmOffset(1)).is_err());
        for i in 0..30 {
            if pool.reserve_region(&format!("r{i}"), 8, 8, 0).is_err() {
                assert!(matches!(
                    pool.reserve_region(&format!("s{i}"), 8, 8, 0),
                    Err(PmemError::RegionTableFull { .. })
                ));
                break;
            }
        }
        assert!(pool.check_range(PmOffset(0), pool.size()).is_ok());
        assert!(matches!(
            pool.check_range(PmOffset(pool.size() - 8), 16),
            Err(PmemError::OutOfBounds { .. })
        ));
        assert!(pool.check_range(PmOffset(u64::MAX), 16).is_err());
        // every metadata change above was durable: a reopen sees the same table
        let before = pool.regions();
        let pool = reopen(backend, dir.path(), pool);
        assert_eq!(pool.regions(), before, "{backend}");
    }
}

#[test]
fn auto_falls_back_to_msync_and_says_why_when_map_sync_fails() {
    let dir = common::disk_dir();
    let path = dir.path().join("auto.pool");
    let pool = Pool::create(&path, MIB, &PoolOptions::default()).expect("create");
    let rep = pool.report().clone();
    assert_eq!(rep.requested, Backend::Auto);
    match rep.active {
        ActiveBackend::Dax => assert!(rep.fallback_reason.is_none()),
        ActiveBackend::Msync => {
            let why = rep.fallback_reason.clone().expect("reason");
            assert!(why.contains("MAP_SYNC"), "{why}");
            assert!(rep.to_string().contains("dax unavailable"), "{rep}");
        }
        other => panic!("auto chose {other}"),
    }
    drop(pool);
    // explicit dax on a non-DAX file is an error naming the reason, never a silent fallback
    if rep.active == ActiveBackend::Msync {
        let e = Pool::open(&path, &PoolOptions::with_backend(Backend::Dax)).unwrap_err();
        assert!(
            matches!(e, PmemError::BackendUnavailable { backend: "dax", .. }),
            "{e}"
        );
        let p2 = dir.path().join("dax.pool");
        let e = Pool::create(&p2, MIB, &PoolOptions::with_backend(Backend::Dax)).unwrap_err();
        assert!(matches!(e, PmemError::BackendUnavailable { .. }), "{e}");
        assert!(!p2.exists(), "failed create must not leave a file behind");
    }
}

#[test]
fn every_supported_flush_instruction_can_be_forced() {
    for instr in FlushInstr::ALL {
        let dir = shm_dir();
        let opts = PoolOptions {
            backend: Backend::Emulated,
            flush_instr: Some(instr),
            flush_delay_ns: 0,
        };
        let r = Pool::create(dir.path().join("f.pool"), MIB, &opts);
        if !instr.is_supported() {
            assert!(matches!(r, Err(PmemError::BackendUnavailable { .. })));
            continue;
        }
        let pool = r.expect("create");
        assert_eq!(pool.flush_instr(), instr);
        let off = pool.data_start();
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.write(off, &[9u8; 300]) };
        pool.persist(off, 300).expect("persist");
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.copy_persist(off.add(1000), &[5u8; 5000]) }.expect("copy");
        drop(pool);
        let pool = Pool::open(dir.path().join("f.pool"), &opts).expect("open");
        let mut b = [0u8; 300];
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.read(off, &mut b) };
        assert_eq!(b, [9u8; 300]);
    }
}

#[test]
fn flush_delay_slows_each_flushed_line() {
    let dir = shm_dir();
    let opts = PoolOptions {
        backend: Backend::Emulated,
        flush_instr: None,
        flush_delay_ns: 20_000,
    };
    let pool = Pool::create(dir.path().join("d.pool"), MIB, &opts).expect("create");
    assert!(pool.report().to_string().contains("20000 ns"));
    let t = Instant::now();
    pool.persist(pool.data_start(), 64 * 50).expect("persist"); // 50 lines x 20 us = 1 ms
    assert!(t.elapsed().as_micros() >= 1000, "{:?}", t.elapsed());
}

#[test]
fn fences_are_per_thread_and_threads_can_share_a_pool() {
    for (backend, dir) in all_backends() {
        let pool = std::sync::Arc::new(create(backend, dir.path(), 2 * MIB));
        let r = pool
            .reserve_region("t", 8 * 4096, 4096, 0)
            .expect("reserve");
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    for i in 0..512u64 {
                        let off = r.offset.add(t * 8192 + i * 8);
                        pool.persist_u64(off, t << 32 | i).expect("persist");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("join");
        }
        let pool = std::sync::Arc::into_inner(pool).expect("sole owner");
        let pool = reopen(backend, dir.path(), pool);
        for t in 0..4u64 {
            for i in 0..512u64 {
                assert_eq!(pool.load_u64(r.offset.add(t * 8192 + i * 8)), t << 32 | i);
            }
        }
    }
}

#[test]
#[should_panic(expected = "outside pool")]
fn out_of_range_access_panics_like_slice_indexing() {
    let pool = Pool::create_sim(MIB, &PoolOptions::with_backend(Backend::Sim)).expect("sim");
    // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
    unsafe { pool.write(PmOffset(MIB - 4), &[0u8; 8]) };
}

#[test]
fn open_or_create_creates_then_opens() {
    let dir = shm_dir();
    let p = dir.path().join("oc.pool");
    let opts = PoolOptions::with_backend(Backend::Emulated);
    let a = Pool::open_or_create(&p, MIB, &opts).expect("create");
    let uuid = a.uuid();
    a.close().expect("close");
    let b = Pool::open_or_create(&p, 2 * MIB, &opts).expect("open");
    assert_eq!(b.uuid(), uuid);
    assert_eq!(b.size(), MIB, "existing pool keeps its size");
}

#[test]
fn report_says_a_pool_in_ram_survives_only_a_process_crash() {
    let dir = std::path::Path::new("/dev/shm");
    if !dir.is_dir() {
        return;
    }
    let dir = tempfile::tempdir_in(dir).expect("tempdir");
    for b in [Backend::Emulated, Backend::Msync] {
        let p = dir.path().join(format!("{b}.pool"));
        let pool = Pool::create(&p, MIB, &PoolOptions::with_backend(b)).expect("create");
        assert!(pool.report().volatile_fs, "{b}");
        assert!(
            pool.report().survives().contains("process crash only"),
            "{b}"
        );
    }
}

/// Extents of `path` as (length, unwritten) via `FS_IOC_FIEMAP`; None where the file system
/// cannot report them.
fn extents(path: &std::path::Path) -> Option<Vec<(u64, bool)>> {
    use std::os::fd::AsRawFd;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
    const MAX: usize = 512;
    // struct fiemap (32 bytes) followed by MAX struct fiemap_extent (56 bytes each).
    let mut buf = vec![0u64; (32 + 56 * MAX) / 8];
    let f = std::fs::File::open(path).ok()?;
    {
        let b: &mut [u8] = bytemuck_bytes(&mut buf);
        b[8..16].copy_from_slice(&u64::MAX.to_ne_bytes()); // fm_length
        b[16..20].copy_from_slice(&FIEMAP_FLAG_SYNC.to_ne_bytes()); // fm_flags
        b[24..28].copy_from_slice(&(MAX as u32).to_ne_bytes()); // fm_extent_count
    }
    // SAFETY: `buf` is a properly sized, 8-aligned struct fiemap with room for MAX extents.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    let b = bytemuck_bytes(&mut buf);
    let n = u32::from_ne_bytes(b[20..24].try_into().unwrap()) as usize;
    Some(
        (0..n)
            .map(|i| {
                let e = &b[32 + 56 * i..32 + 56 * (i + 1)];
                let len = u64::from_ne_bytes(e[16..24].try_into().unwrap());
                let flags = u32::from_ne_bytes(e[40..44].try_into().unwrap());
                (len, flags & FIEMAP_EXTENT_UNWRITTEN != 0)
            })
            .collect(),
    )
}

fn bytemuck_bytes(v: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64 has no padding and any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 8) }
}

#[test]
fn a_new_msync_pool_has_every_block_written() {
    // Unwritten (fallocated) extents would put a journal commit into the fence of every
    // commit that first reaches a block.
    let dir = common::disk_dir();
    let path = dir.path().join("blocks.pool");
    let pool =
        Pool::create(&path, 8 * MIB, &PoolOptions::with_backend(Backend::Msync)).expect("create");
    let Some(ext) = extents(&path) else {
        eprintln!("file system reports no extents: nothing to check");
        return;
    };
    assert!(!ext.is_empty());
    assert_eq!(ext.iter().map(|e| e.0).sum::<u64>(), 8 * MIB, "{ext:?}");
    assert!(ext.iter().all(|e| !e.1), "unwritten extents left: {ext:?}");
    // and the zeros really are zeros: a region reserved later reads as zero
    let r = pool.reserve_region("z", MIB, 4096, 1).expect("reserve");
    let mut b = vec![1u8; 4096];
    // SAFETY: this test's own pool; no other thread touches these bytes.
    unsafe { pool.read(r.offset, &mut b) };
    assert!(b.iter().all(|&x| x == 0));
}

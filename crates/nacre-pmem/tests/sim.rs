//! The power-failure simulator: fence counting, stop-at-fence, crash images, per-thread
//! fences, and proof that it catches a missing flush.

mod common;

use nacre_pmem::{Backend, CrashPolicy, PmOffset, Pool, PoolOptions, Region, SplitMix64};

const MIB: u64 = 1 << 20;
const VALUE_LEN: usize = 200;
const PUBLISHES: u64 = 12;

fn sim_opts() -> PoolOptions {
    PoolOptions::with_backend(Backend::Sim)
}

fn value_for(i: u64) -> Vec<u8> {
    (0..VALUE_LEN)
        .map(|j| (i as u8).wrapping_mul(31).wrapping_add(j as u8) | 1)
        .collect()
}

/// "Write a value, then publish a pointer to it." The buggy variant forgets to persist the
/// value before publishing.
fn publish_workload(pool: &Pool, r: &Region, persist_value: bool) {
    let ptr = r.offset;
    for i in 1..=PUBLISHES {
        let slot = r.offset.add(4096 + i * 256);
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.write(slot, &value_for(i)) };
        if persist_value {
            pool.persist(slot, VALUE_LEN).expect("persist value");
        }
        pool.persist_u64(ptr, slot.get() | i << 48)
            .expect("publish");
    }
}

/// Whatever the published pointer names must be the whole value.
fn published_value_intact(image: Vec<u8>) -> bool {
    let pool = Pool::open_sim(image, &sim_opts()).expect("crash image must open");
    let r = pool.region("pub").expect("region survives");
    let word = pool.load_u64(r.offset);
    if word == 0 {
        return true;
    }
    let (slot, i) = (PmOffset(word & ((1 << 48) - 1)), word >> 48);
    pool.check_range(slot, VALUE_LEN as u64)
        .expect("pointer in range");
    let mut got = vec![0u8; VALUE_LEN];
    // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
    unsafe { pool.read(slot, &mut got) };
    got == value_for(i)
}

/// Runs the workload crashing at a seeded fence with a seeded subset of volatile words kept;
/// returns how many of `crashes` images had a published pointer to a damaged value.
fn count_lost_values(persist_value: bool, crashes: u64) -> u64 {
    let setup = Pool::create_sim(MIB, &sim_opts()).expect("sim");
    setup
        .reserve_region("pub", 64 * 1024, 4096, 0)
        .expect("region");
    let base = setup.sim().expect("sim").crash(CrashPolicy::KeepNone);
    drop(setup);
    let mut lost = 0;
    for seed in 0..crashes {
        let pool = Pool::open_sim(base.clone(), &sim_opts()).expect("open");
        let r = pool.region("pub").expect("region");
        let sim = pool.sim().expect("sim");
        let mut rng = SplitMix64::new(seed);
        // each publish costs 1 or 2 fences; crash anywhere in the run, or after it
        let fence = 1 + rng.next_u64() % (PUBLISHES * 2 + 1);
        sim.stop_at_fence(sim.fence_count() + fence);
        publish_workload(&pool, &r, persist_value);
        let policy = match seed % 4 {
            0 => CrashPolicy::KeepNone,
            _ => CrashPolicy::KeepRandom {
                seed,
                keep: rng.next_f64(),
            },
        };
        if !published_value_intact(sim.crash(policy)) {
            lost += 1;
        }
    }
    lost
}

#[test]
fn simulator_catches_a_missing_flush_and_passes_the_correct_protocol() {
    let crashes = 1000;
    let buggy = count_lost_values(false, crashes);
    let correct = count_lost_values(true, crashes);
    assert!(
        buggy > crashes / 10,
        "missing flush found in only {buggy} of {crashes} crash images"
    );
    assert_eq!(correct, 0, "correct protocol lost a value");
}

#[test]
fn fence_counter_and_stop_at_fence_freeze_media() {
    let pool = Pool::create_sim(MIB, &sim_opts()).expect("sim");
    let sim = pool.sim().expect("sim");
    let start = sim.fence_count();
    assert!(start >= 2, "formatting fences");
    let off = pool.data_start();
    pool.persist_u64(off, 1).expect("p");
    assert_eq!(sim.fence_count(), start + 1);
    sim.stop_at_fence(start + 3);
    pool.persist_u64(off.add(8), 2).expect("p"); // fence start+2: completes
    assert!(!sim.is_stopped());
    pool.persist_u64(off.add(16), 3).expect("p"); // fence start+3: power fails here
    assert!(sim.is_stopped());
    pool.persist_u64(off.add(24), 4).expect("p"); // after the failure: never happened
    assert_eq!(sim.fence_count(), start + 4);

    let all = Pool::open_sim(sim.crash(CrashPolicy::KeepAll), &sim_opts()).expect("open");
    assert_eq!(all.load_u64(off), 1);
    assert_eq!(all.load_u64(off.add(8)), 2);
    assert_eq!(
        all.load_u64(off.add(16)),
        3,
        "KeepAll keeps flushed-unfenced words"
    );
    assert_eq!(
        all.load_u64(off.add(24)),
        0,
        "stores after the failure are dropped"
    );
    let none = Pool::open_sim(sim.crash(CrashPolicy::KeepNone), &sim_opts()).expect("open");
    assert_eq!(none.load_u64(off.add(8)), 2);
    assert_eq!(
        none.load_u64(off.add(16)),
        0,
        "KeepNone drops the unfenced word"
    );
}

#[test]
fn unflushed_stores_never_reach_media_and_random_keeps_are_seeded() {
    let pool = Pool::create_sim(MIB, &sim_opts()).expect("sim");
    let sim = pool.sim().expect("sim");
    let off = pool.data_start();
    // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
    unsafe { pool.write(off, &[0xEE; 4096]) };
    pool.fence().expect("fence");
    assert_eq!(sim.volatile_words(), 512);
    let media = sim.media();
    assert!(media[off.get() as usize..][..4096].iter().all(|&b| b == 0));
    let p = CrashPolicy::KeepRandom { seed: 9, keep: 0.5 };
    let a = sim.crash(p);
    assert_eq!(a, sim.crash(p), "same seed, same image");
    let kept = a[off.get() as usize..][..4096]
        .chunks_exact(8)
        .filter(|w| w.iter().all(|&b| b == 0xEE))
        .count();
    assert!(
        (150..362).contains(&kept),
        "kept {kept} of 512 words at p=0.5"
    );
    // words are never torn
    assert!(a[off.get() as usize..][..4096]
        .chunks_exact(8)
        .all(|w| w.iter().all(|&b| b == 0xEE) || w.iter().all(|&b| b == 0)));
}

#[test]
fn a_fence_completes_only_its_own_threads_flushes() {
    let pool = Pool::create_sim(MIB, &sim_opts()).expect("sim");
    let off = pool.data_start();
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
            unsafe { pool.write(off, &[1u8; 64]) };
            pool.flush(off, 64); // flushed, never fenced by this thread
        });
    });
    pool.fence().expect("fence on another thread");
    let media = pool.sim().expect("sim").media();
    assert_eq!(
        media[off.get() as usize],
        0,
        "other thread's flush was completed"
    );
    pool.persist(off, 64).expect("persist");
    assert_eq!(pool.sim().expect("sim").media()[off.get() as usize], 1);
}

#[test]
fn crash_image_saved_to_a_file_reopens_like_a_pool_file() {
    let pool = Pool::create_sim(2 * MIB, &sim_opts()).expect("sim");
    let r = pool.reserve_region("keep", 4096, 64, 5).expect("region");
    // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
    unsafe { pool.copy_persist(r.offset, b"durable").expect("persist") };
    // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
    unsafe { pool.write(r.offset.add(100), b"volatile") };
    let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let dir = common::shm_dir();
    let path = dir.path().join("crash.pool");
    std::fs::write(&path, &image).expect("write");
    for b in [Backend::Sim, Backend::Emulated] {
        let p = Pool::open(&path, &PoolOptions::with_backend(b)).expect("open image file");
        let r = p.region("keep").expect("region");
        assert_eq!(r.tag, 5);
        let mut got = [0u8; 8];
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { p.read(r.offset, &mut got[..7]) };
        assert_eq!(&got[..7], b"durable");
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { p.read(r.offset.add(100), &mut got) };
        assert_eq!(got, [0u8; 8], "{b}: unfenced data must be gone");
    }
}

/// Power-failure torture of the superblock's own persistent structure: root and region
/// updates must be crash-atomic, and every acknowledged update must survive.
#[test]
fn superblock_updates_are_crash_atomic_under_torture() {
    torture_superblock(300);
}

#[test]
#[ignore = "long run: cargo test -p nacre-pmem --release -- --ignored"]
fn superblock_updates_are_crash_atomic_under_long_torture() {
    torture_superblock(20_000);
}

fn torture_superblock(crashes: u64) {
    let base = Pool::create_sim(MIB, &sim_opts())
        .expect("sim")
        .sim()
        .expect("sim")
        .crash(CrashPolicy::KeepNone);
    for seed in 0..crashes {
        let mut rng = SplitMix64::new(seed ^ 0xA5A5);
        let pool = Pool::open_sim(base.clone(), &sim_opts()).expect("open");
        let sim = pool.sim().expect("sim");
        sim.stop_at_fence(sim.fence_count() + 1 + rng.next_u64() % 24);
        // model: (root values, region names) acknowledged before the failure
        let mut acked_roots = [0u64; 4];
        let mut acked_regions: Vec<String> = Vec::new();
        // the update whose fence the power failure hit may or may not have reached media
        let mut in_flight_roots = acked_roots;
        for op in 0..20u64 {
            let was_stopped = sim.is_stopped();
            if rng.next_u64() % 3 == 0 {
                let name = format!("r{op}");
                pool.reserve_region(&name, 4096, 64, op).expect("reserve");
                if !sim.is_stopped() {
                    acked_regions.push(name);
                }
            } else {
                let i = (rng.next_u64() % 4) as usize;
                let v = 0x1000 * (op + 1);
                pool.set_root(i, PmOffset(v)).expect("set_root");
                if !was_stopped {
                    in_flight_roots[i] = v;
                }
                if !sim.is_stopped() {
                    acked_roots[i] = v;
                }
            }
        }
        let image = sim.crash(CrashPolicy::KeepRandom {
            seed,
            keep: rng.next_f64(),
        });
        let after = Pool::open_sim(image, &sim_opts())
            .unwrap_or_else(|e| panic!("seed {seed}: crash image failed to open: {e}"));
        for (i, &acked) in acked_roots.iter().enumerate() {
            let got = after.root(i).expect("root").get();
            assert!(
                got == acked || got == in_flight_roots[i],
                "seed {seed}: root {i} = {got:#x}, acked {acked:#x}"
            );
        }
        let names: Vec<String> = after.regions().into_iter().map(|r| r.name).collect();
        assert!(
            names.starts_with(&acked_regions) && names.len() <= acked_regions.len() + 1,
            "seed {seed}: regions {names:?}, acked {acked_regions:?}"
        );
    }
}

#[test]
fn an_older_write_back_never_overwrites_a_newer_one() {
    // Thread A flushes a line, thread B then changes a word in it and persists; A fences last.
    // Media must keep B's value: the line is coherent, and B's write-back is the later one.
    let pool = Pool::create_sim(MIB, &sim_opts()).expect("sim");
    let off = pool.data_start();
    let (a_flushed, b_done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    std::thread::scope(|s| {
        s.spawn(|| {
            pool.store_u64(off, 1); // flushed, fenced only after B
            a_flushed.wait();
            b_done.wait();
            pool.fence().expect("fence");
        });
        s.spawn(|| {
            a_flushed.wait();
            pool.persist_u64(off.add(8), 2).expect("persist");
            b_done.wait();
        });
    });
    let media = pool.sim().expect("sim").media();
    let at = off.get() as usize;
    assert_eq!(media[at], 1);
    assert_eq!(
        media[at + 8],
        2,
        "A's older snapshot of the line regressed B's word"
    );
}

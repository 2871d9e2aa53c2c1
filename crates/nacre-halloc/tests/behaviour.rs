//! Halloc behaviour: a model test over random get/commit/release/abort/reopen, concurrent
//! allocation, the customised pools, and every error case.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nacre_halloc::{Halloc, HallocError, ObjId, Slot, MAX_OBJECT_SIZE};
use nacre_pmem::{Backend, CrashPolicy, PmOffset, Pool, PoolOptions, SplitMix64};

fn sim_pool(size: u64) -> Arc<Pool> {
    Arc::new(Pool::create_sim(size, &PoolOptions::with_backend(Backend::Sim)).expect("sim"))
}

/// Clean reopen of a sim pool: everything fenced is kept.
fn reopen(pool: Arc<Pool>) -> Arc<Pool> {
    let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    drop(pool);
    Arc::new(Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("open"))
}

#[test]
fn model_random_operations_and_reopens() {
    for seed in 0..20u64 {
        let mut rng = SplitMix64::new(seed);
        let mut pool = sim_pool(2 << 20);
        let count = 40;
        // model: committed id -> content tag; gotten ids
        let mut committed: BTreeMap<u64, u64> = BTreeMap::new();
        let mut gotten: BTreeSet<u64> = BTreeSet::new();
        for round in 0..6 {
            let h = Halloc::open(pool.clone()).expect("halloc");
            let objs = h.object_pool("m", 96, count).expect("pool");
            assert_eq!(
                objs.free_count(),
                count - committed.len() as u64,
                "seed {seed} round {round}"
            );
            for (&id, &tag) in &committed {
                assert!(objs.check(ObjId(id)).expect("check"));
                assert_eq!(pool.load_u64(objs.offset(ObjId(id))), tag);
            }
            objs.verify().expect("H1");
            for step in 0..150u64 {
                match rng.next_u64() % 5 {
                    0 | 1 => match objs.get() {
                        Ok(id) => {
                            assert!(!committed.contains_key(&id.0) && gotten.insert(id.0));
                        }
                        Err(HallocError::Exhausted { .. }) => {
                            assert_eq!(committed.len() + gotten.len(), count as usize)
                        }
                        Err(e) => panic!("{e}"),
                    },
                    2 => {
                        if let Some(&id) = gotten.iter().next() {
                            let tag = seed << 32 | round << 16 | step;
                            pool.persist_u64(objs.offset(ObjId(id)), tag)
                                .expect("persist");
                            objs.commit(ObjId(id)).expect("commit");
                            gotten.remove(&id);
                            committed.insert(id, tag);
                        }
                    }
                    3 => {
                        if let Some((&id, _)) = committed.iter().nth((rng.next_u64() % 4) as usize)
                        {
                            objs.release(ObjId(id)).expect("release");
                            committed.remove(&id);
                        }
                    }
                    _ => {
                        if let Some(&id) = gotten.iter().next_back() {
                            objs.abort(ObjId(id)).expect("abort");
                            gotten.remove(&id);
                        }
                    }
                }
                assert_eq!(
                    objs.free_count() + (committed.len() + gotten.len()) as u64,
                    count
                );
            }
            drop((objs, h));
            gotten.clear(); // uncommitted objects return to the freelist on reopen
            pool = reopen(pool);
        }
    }
}

#[test]
fn threads_allocate_and_release_without_loss_or_double_allocation() {
    let pool = sim_pool(4 << 20);
    let h = Halloc::open(pool.clone()).expect("halloc");
    let objs = h.object_pool("c", 64, 200).expect("pool");
    let owned: Arc<Vec<AtomicBool>> = Arc::new((0..200).map(|_| AtomicBool::new(false)).collect());
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (objs, owned, pool) = (objs.clone(), owned.clone(), pool.clone());
            s.spawn(move || {
                let mut mine = Vec::new();
                let mut rng = SplitMix64::new(t);
                for i in 0..3000u64 {
                    if mine.len() < 40 && rng.next_u64() % 3 != 0 {
                        let Ok(id) = objs.get() else { continue };
                        assert!(
                            !owned[id.0 as usize].swap(true, Ordering::AcqRel),
                            "{id:?} handed out twice"
                        );
                        let tag = t << 32 | i;
                        pool.persist_u64(objs.offset(id), tag).expect("persist");
                        objs.commit(id).expect("commit");
                        mine.push((id, tag));
                    } else if let Some((id, tag)) = mine.pop() {
                        assert_eq!(pool.load_u64(objs.offset(id)), tag, "object overwritten");
                        owned[id.0 as usize].store(false, Ordering::Release);
                        objs.release(id).expect("release");
                    }
                }
                for (id, _) in mine {
                    owned[id.0 as usize].store(false, Ordering::Release);
                    objs.release(id).expect("release");
                }
            });
        }
    });
    assert_eq!(objs.free_count(), 200);
    objs.verify().expect("H1 after concurrency");
    drop((objs, h));
    let pool = reopen(pool);
    let objs = Halloc::open(pool)
        .expect("h")
        .object_pool("c", 64, 200)
        .expect("p");
    assert_eq!(objs.free_count(), 200);
    assert_eq!(objs.recovery().committed, 0);
}

#[test]
fn errors_are_typed_and_leave_the_freelist_intact() {
    let pool = sim_pool(2 << 20);
    let h = Halloc::open(pool.clone()).expect("halloc");
    let objs = h.object_pool("e", 128, 3).expect("pool");
    let ids: Vec<ObjId> = (0..3).map(|_| objs.get().expect("get")).collect();
    let e = objs.get().expect_err("exhausted");
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            HallocError::Exhausted {
                count: 3,
                object_size: 128,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("\"e\"") && msg.contains("128"), "{msg}");
    objs.commit(ids[0]).expect("commit");
    // release of objects that are not allocated: detected, nothing changes
    objs.release(ids[0]).expect("release");
    let e = objs.release(ids[0]).expect_err("double release");
    assert!(
        matches!(e, HallocError::BadObjectState { state: "free", .. }),
        "{e}"
    );
    let e = objs.release(ids[1]).expect_err("release uncommitted");
    assert!(matches!(e, HallocError::BadObjectState { .. }), "{e}");
    let e = objs
        .release_many(&[ids[1], ObjId(99)])
        .expect_err("batch with a bad id");
    assert!(matches!(e, HallocError::BadObjectState { .. }), "{e}");
    assert!(matches!(
        objs.commit(ObjId(3)),
        Err(HallocError::NoSuchObject { .. })
    ));
    assert!(matches!(
        objs.commit(ids[0]),
        Err(HallocError::BadObjectState { .. })
    ));
    objs.abort(ids[1]).expect("abort");
    assert!(objs.abort(ids[1]).is_err());
    objs.abort(ids[2]).expect("abort");
    assert_eq!(objs.free_count(), 3);
    objs.verify()
        .expect("freelist intact after refused operations");

    for size in [0, 7, MAX_OBJECT_SIZE + 1] {
        let e = h
            .object_pool(&format!("s{size}"), size, 4)
            .expect_err("size");
        assert!(matches!(e, HallocError::ObjectSizeOutOfRange { .. }), "{e}");
    }
    assert!(matches!(
        h.object_pool("zero", 64, 0),
        Err(HallocError::EmptyPool { .. })
    ));
    assert!(matches!(
        h.object_pool("", 64, 1),
        Err(HallocError::BadName { .. })
    ));
    assert!(matches!(
        h.object_pool(&"n".repeat(30), 64, 1),
        Err(HallocError::BadName { .. })
    ));
    let e = h.object_pool("e", 256, 3).expect_err("shape");
    assert!(matches!(e, HallocError::ShapeMismatch { .. }), "{e}");
    let e = h.object_pool("big", 1 << 20, 100).expect_err("pool full");
    assert!(
        matches!(e, HallocError::Pmem(nacre_pmem::PmemError::PoolFull { .. })),
        "{e}"
    );
    drop(h);
    let pool = reopen(pool);
    let h = Halloc::open(pool.clone()).expect("reopen");
    let e = h
        .memtable_pool("e", 4, 3)
        .expect_err("kind mismatch after reopen");
    assert!(matches!(e, HallocError::ShapeMismatch { .. }), "{e}");
    // a root pointing somewhere else is refused, not trusted
    pool.set_root(
        nacre_halloc::REGISTRY_ROOT,
        PmOffset(pool.data_start().get() + 8192 * 4),
    )
    .expect("root");
    assert!(matches!(Halloc::open(pool), Err(HallocError::Corrupt(_))));
}

#[test]
fn registry_zone_memtable_and_subtable_pools_survive_reopen() {
    let pool = sim_pool(8 << 20);
    let h = Halloc::open(pool.clone()).expect("halloc");
    let zones = h.zone_pool("zones", 1 << 20, 4).expect("zones");
    let mems = h.memtable_pool("memt", 8, 16).expect("memt");
    let subs = h.subtable_pool("subt", 16).expect("subt");
    assert_eq!(zones.zone_size(), 1 << 20);
    assert_eq!(zones.offset(ObjId(0)).get() % 4096, 0);

    let st = subs.get(7, "orders").expect("subtable");
    let m = mems.get(7, 3, 1).expect("memtable");
    let z1 = zones.grant().expect("zone");
    let z2 = zones.grant().expect("zone");
    mems.set_zone(m, 0, Some(z1)).expect("slot");
    mems.set_zone(m, 1, Some(z2)).expect("slot");
    zones.commit(z1).expect("commit");
    zones.commit(z2).expect("commit");
    mems.set_gidx(m, 4096, 12344).expect("gidx");
    assert!(mems.set_gidx(m, 0, 12345).is_err(), "not a multiple of 8");
    mems.commit(m).expect("commit");
    subs.set_memlist(st, mems.objects().offset(m))
        .expect("memlist");
    subs.commit(st).expect("commit");
    let z3 = zones.grant().expect("granted, never committed");
    pool.fence()
        .expect("the new freelist head reaches media, so z3 is off the list");
    assert!(mems.set_zone(m, 8, Some(z3)).is_err(), "slot out of range");
    assert!(subs.get(1, &"x".repeat(41)).is_err());
    drop((zones, mems, subs, h));

    let pool = reopen(pool);
    let h = Halloc::open(pool.clone()).expect("halloc");
    let names: Vec<(String, &str)> = h
        .registered()
        .expect("registry")
        .into_iter()
        .map(|e| (e.name, Halloc::kind_name(e.shape.kind)))
        .collect();
    assert_eq!(
        names,
        vec![
            ("zones".to_string(), "zone"),
            ("memt".to_string(), "memtable"),
            ("subt".to_string(), "subtable")
        ]
    );
    let zones = h.zone_pool("zones", 1 << 20, 4).expect("zones");
    let mems = h.memtable_pool("memt", 8, 16).expect("memt");
    let subs = h.subtable_pool("subt", 16).expect("subt");
    assert!(
        !zones.is_owned(z3).expect("z3"),
        "the uncommitted zone is free again"
    );
    assert_eq!(zones.free_zones(), 2);
    assert_eq!(subs.read(st).expect("subtable"), (7, "orders".to_string()));
    let m_off = subs.memlist(st).expect("memlist");
    let m = mems.objects().id_at(m_off).expect("memtable id");
    assert_eq!(mems.gidx(m).expect("gidx"), (4096, 12344));
    let head = mems.head(m).expect("head");
    assert_eq!((head.subtable, head.birth, head.role), (7, 3, 1));
    assert_eq!(mems.zone(m, 0).expect("slot"), Some(z1));
    assert_eq!(mems.zone(m, 1).expect("slot"), Some(z2));
    assert_eq!(mems.zone(m, 2).expect("slot"), None);
    assert!(zones.is_owned(z1).expect("owned") && zones.is_owned(z2).expect("owned"));
    zones.reclaim(&[z1, z2]).expect("batch reclaim");
    assert_eq!(zones.free_zones(), 4);
    zones.objects().verify().expect("H1");
}

#[test]
fn crash_during_pool_creation_is_repaired_by_the_next_open() {
    // power fails at every fence of registry + pool creation; the next open must succeed and
    // end with exactly one usable pool.
    let base = sim_pool(2 << 20);
    let image = base.sim().expect("sim").crash(CrashPolicy::KeepNone);
    let opts = PoolOptions::with_backend(Backend::Sim);
    for stop in 1..40u64 {
        let pool = Arc::new(Pool::open_sim(image.clone(), &opts).expect("open"));
        let sim = pool.sim().expect("sim");
        sim.stop_at_fence(sim.fence_count() + stop);
        if let Ok(h) = Halloc::open(pool.clone()) {
            let _ = h.object_pool("p", 64, 100);
        }
        let crashed = sim.crash(CrashPolicy::KeepRandom {
            seed: stop,
            keep: 0.5,
        });
        drop(pool);
        let pool = Arc::new(Pool::open_sim(crashed, &opts).expect("reopen"));
        let h = Halloc::open(pool).expect("halloc after crash");
        let p = h.object_pool("p", 64, 100).expect("pool after crash");
        assert_eq!(p.free_count(), 100, "stop {stop}");
        p.verify().expect("H1");
        assert_eq!(h.registered().expect("reg").len(), 1, "stop {stop}");
    }
}

#[test]
fn memtable_birth_role_and_reclaimed_slots_survive_reopen() {
    let pool = sim_pool(8 << 20);
    let h = Halloc::open(pool.clone()).expect("halloc");
    let zones = h.zone_pool("zones", 1 << 20, 4).expect("zones");
    let mems = h.memtable_pool("memt", 4, 8).expect("memt");
    let m = mems.get(2, 77, 5).expect("memtable");
    let z = zones.grant().expect("zone");
    mems.set_zone(m, 0, Some(z)).expect("slot");
    zones.commit(z).expect("commit");
    mems.set_zone(m, 1, Some(zones.grant().expect("zone")))
        .expect("slot");
    mems.set_reclaimed(m, 1).expect("reclaim");
    mems.commit(m).expect("commit");
    drop((zones, mems, h));
    let pool = reopen(pool);
    let h = Halloc::open(pool).expect("halloc");
    let mems = h.memtable_pool("memt", 4, 8).expect("memt");
    let head = mems.head(m).expect("head");
    assert_eq!((head.birth, head.role, head.subtable), (77, 5, 2));
    assert_eq!(mems.slot(m, 0).expect("slot"), Slot::Zone(z));
    assert_eq!(mems.slot(m, 1).expect("slot"), Slot::Reclaimed);
    assert_eq!(mems.zone(m, 1).expect("slot"), None);
    assert_eq!(mems.slot(m, 2).expect("slot"), Slot::Empty);
}

#[test]
fn every_metadata_word_detects_a_flipped_bit_or_a_zeroed_object() {
    let pool = sim_pool(8 << 20);
    let h = Halloc::open(pool.clone()).expect("halloc");
    let zones = h.zone_pool("zones", 1 << 20, 4).expect("zones");
    let mems = h.memtable_pool("memt", 4, 8).expect("memt");
    let subs = h.subtable_pool("subt", 8).expect("subt");
    let st = subs.get(3, "users").expect("subtable");
    let m = mems.get(3, 9, 1).expect("memtable");
    let m2 = mems.get(3, 10, 1).expect("memtable");
    let z = zones.grant().expect("zone");
    mems.set_zone(m, 0, Some(z)).expect("slot");
    mems.set_reclaimed(m, 1).expect("slot");
    mems.set_next(m, mems.objects().offset(m2)).expect("next");
    mems.set_gidx(m, 64, 128).expect("gidx");
    subs.set_memlist(st, mems.objects().offset(m))
        .expect("memlist");
    let moff = mems.objects().offset(m);
    let soff = subs.objects().offset(st);
    // Every byte of both objects, one bit at a time: each read either fails with
    // DamagedWord or (for bytes no check covers: the reserved word) returns the same value.
    let reads = |mems: &nacre_halloc::MemtablePool, subs: &nacre_halloc::SubtablePool| {
        let mut damaged = 0;
        let mut check = |r: Result<String, nacre_halloc::HallocError>, want: &str| match r {
            Ok(v) => assert_eq!(v, want),
            Err(nacre_halloc::HallocError::DamagedWord { .. }) => damaged += 1,
            Err(e) => panic!("{e}"),
        };
        check(mems.gidx(m).map(|g| format!("{g:?}")), "(64, 128)");
        check(
            mems.next(m).map(|n| format!("{n:?}")),
            &format!("{:?}", mems.objects().offset(m2)),
        );
        check(
            mems.head(m)
                .map(|h| format!("{:?}", (h.subtable, h.birth, h.role))),
            "(3, 9, 1)",
        );
        for (s, want) in [
            (0, Slot::Zone(z)),
            (1, Slot::Reclaimed),
            (2, Slot::Empty),
            (3, Slot::Empty),
        ] {
            check(
                mems.slot(m, s).map(|x| format!("{x:?}")),
                &format!("{want:?}"),
            );
        }
        check(subs.read(st).map(|x| format!("{x:?}")), "(3, \"users\")");
        check(
            subs.memlist(st).map(|x| format!("{x:?}")),
            &format!("{moff:?}"),
        );
        damaged
    };
    assert_eq!(reads(&mems, &subs), 0);
    let obj_len = nacre_halloc::MemtablePool::object_size(4);
    for (base, len) in [(moff, obj_len), (soff, 64)] {
        for byte in 0..len {
            if base == moff && ((56..64).contains(&byte) || byte >= 64 + 8 * 4) {
                continue; // reserved, padding
            }
            for bit in 0..8 {
                let at = base.add(byte);
                let mut b = [0u8; 1];
                // SAFETY: this test's own pool, one thread.
                unsafe { pool.read(at, &mut b) };
                let flipped = [b[0] ^ (1 << bit)];
                // SAFETY: as above.
                unsafe { pool.write(at, &flipped) };
                assert_eq!(reads(&mems, &subs), 1, "byte {byte} bit {bit} of {base:?}");
                // SAFETY: as above.
                unsafe { pool.write(at, &b) };
            }
        }
        // A zeroed object: every word of it fails.
        let mut saved = vec![0u8; len as usize];
        // SAFETY: as above.
        unsafe { pool.read(base, &mut saved) };
        // SAFETY: as above.
        unsafe { pool.write(base, &vec![0u8; len as usize]) };
        assert!(reads(&mems, &subs) >= if base == moff { 7 } else { 2 });
        // SAFETY: as above.
        unsafe { pool.write(base, &saved) };
    }
    assert_eq!(reads(&mems, &subs), 0);
}

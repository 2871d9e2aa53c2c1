//! Power-failure torture of Halloc on the `sim` backend: random get / commit / release /
//! abort sequences on an object pool and a zone pool, a power failure at a random fence with a
//! random subset of unflushed words kept, recovery, then invariants H1 and H2 and the model.

use std::collections::HashMap;
use std::sync::Arc;

use nacre_halloc::{Halloc, ObjId, ObjectPool, ZonePool};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions, SplitMix64};

const OBJECTS: u64 = 48;
const OBJ_SIZE: u64 = 128;
const ZONES: u64 = 12;
const ZONE_SIZE: u64 = 16 * 1024;
const OPS: u64 = 80;

fn opts() -> PoolOptions {
    PoolOptions::with_backend(Backend::Sim)
}

#[derive(Clone, Debug, PartialEq)]
enum Durable {
    Free,
    Committed(u64),
    /// The operation the power failure interrupted: either outcome is allowed, but a
    /// committed object must hold this content or the previous one.
    Either(Option<u64>, Option<u64>),
}

fn content(tag: u64, len: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(tag);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

struct Side<'a> {
    pool: &'a Pool,
    objs: &'a ObjectPool,
    zones: Option<&'a ZonePool>,
    len: usize,
    model: HashMap<u64, Durable>,
    gotten: Vec<ObjId>,
    committed: Vec<ObjId>,
}

impl Side<'_> {
    fn step(&mut self, rng: &mut SplitMix64, stopped: &dyn Fn() -> bool, tag: u64) {
        let was = stopped();
        match rng.next_u64() % 4 {
            0 | 1 => {
                let Ok(id) = self.objs.get() else { return };
                // SAFETY: a fresh object of this thread's own pool, not yet committed.
                unsafe {
                    self.pool
                        .copy_persist(self.objs.offset(id), &content(tag, self.len))
                }
                .expect("persist");
                self.objs.commit(id).expect("commit");
                self.committed.push(id);
                // after the failure nothing reaches media: the model stays as it was
                if !was {
                    let now = if stopped() {
                        Durable::Either(None, Some(tag))
                    } else {
                        Durable::Committed(tag)
                    };
                    self.model.insert(id.0, now);
                }
            }
            2 if !self.committed.is_empty() => {
                let k = (rng.next_u64() % self.committed.len() as u64) as usize;
                let n = 1 + (rng.next_u64() % 3) as usize;
                let batch: Vec<ObjId> = self
                    .committed
                    .drain(k..(k + n).min(self.committed.len()))
                    .collect();
                match self.zones {
                    Some(z) => z.reclaim(&batch).expect("reclaim"),
                    None => {
                        for &id in &batch {
                            self.objs.release(id).expect("release");
                        }
                    }
                }
                for id in batch.into_iter().filter(|_| !was) {
                    let old = match self.model.get(&id.0) {
                        Some(Durable::Committed(t)) => Some(*t),
                        _ => None,
                    };
                    let now = if stopped() {
                        Durable::Either(old, None)
                    } else {
                        Durable::Free
                    };
                    self.model.insert(id.0, now);
                }
            }
            _ => {
                if let Ok(id) = self.objs.get() {
                    self.gotten.push(id);
                }
                if rng.next_u64() % 2 == 0 {
                    if let Some(id) = self.gotten.pop() {
                        self.objs.abort(id).expect("abort");
                    }
                }
            }
        }
    }
}

fn check_side(
    pool: &Pool,
    objs: &ObjectPool,
    len: usize,
    model: &HashMap<u64, Durable>,
    seed: u64,
) {
    objs.verify()
        .unwrap_or_else(|e| panic!("seed {seed}: H1 violated: {e}"));
    let count = objs.shape().count;
    let mut committed = 0;
    for i in 0..count {
        let id = ObjId(i);
        let is = objs.check(id).expect("check");
        committed += u64::from(is);
        let mut got = vec![0u8; len];
        // SAFETY: this test's own pool; no other thread touches these bytes meanwhile.
        unsafe { pool.read(objs.offset(id), &mut got) };
        let ok = |t: &Option<u64>| t.is_some_and(|t| got == content(t, len));
        match model.get(&i).unwrap_or(&Durable::Free) {
            Durable::Free => assert!(!is, "seed {seed}: object {i} should be free"),
            Durable::Committed(t) => {
                assert!(is, "seed {seed}: acknowledged object {i} lost");
                assert!(
                    ok(&Some(*t)),
                    "seed {seed}: object {i} contents damaged (H2)"
                );
            }
            Durable::Either(a, b) => {
                if is {
                    assert!(
                        ok(a) || ok(b),
                        "seed {seed}: object {i} committed with bad contents"
                    );
                }
            }
        }
    }
    assert_eq!(
        committed + objs.free_count(),
        count,
        "seed {seed}: objects not conserved"
    );
    // no object is handed out twice: drain the freelist, every id distinct and uncommitted
    let mut seen = std::collections::HashSet::new();
    while let Ok(id) = objs.get() {
        assert!(seen.insert(id), "seed {seed}: {id:?} handed out twice");
        assert!(
            !objs.check(id).expect("check"),
            "seed {seed}: committed {id:?} handed out"
        );
    }
    assert_eq!(seen.len() as u64 + committed, count);
}

fn base_image() -> Vec<u8> {
    let pool = Arc::new(Pool::create_sim(1 << 20, &opts()).expect("sim"));
    let h = Halloc::open(pool.clone()).expect("halloc");
    h.object_pool("obj", OBJ_SIZE, OBJECTS).expect("obj");
    h.zone_pool("zones", ZONE_SIZE, ZONES).expect("zones");
    let image = pool.sim().expect("sim").crash(CrashPolicy::KeepNone);
    image
}

fn torture(crashes: u64) {
    let base = base_image();
    let mut max_fences = 200;
    for seed in 0..crashes {
        let mut rng = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9));
        let pool = Arc::new(Pool::open_sim(base.clone(), &opts()).expect("open"));
        let h = Halloc::open(pool.clone()).expect("halloc");
        let objs = h.object_pool("obj", OBJ_SIZE, OBJECTS).expect("obj");
        let zones = h.zone_pool("zones", ZONE_SIZE, ZONES).expect("zones");
        let sim = pool.sim().expect("sim");
        let start = sim.fence_count();
        sim.stop_at_fence(start + 1 + rng.next_u64() % max_fences);
        let stopped = || sim.is_stopped();
        let mut a = Side {
            pool: &pool,
            objs: &objs,
            zones: None,
            len: OBJ_SIZE as usize,
            model: HashMap::new(),
            gotten: vec![],
            committed: vec![],
        };
        let mut b = Side {
            pool: &pool,
            objs: zones.objects(),
            zones: Some(&zones),
            len: 256,
            model: HashMap::new(),
            gotten: vec![],
            committed: vec![],
        };
        for op in 0..OPS {
            let tag = seed << 16 | op;
            if rng.next_u64() % 3 == 0 {
                b.step(&mut rng, &stopped, tag);
            } else {
                a.step(&mut rng, &stopped, tag);
            }
        }
        if !sim.is_stopped() {
            max_fences = max_fences.min(sim.fence_count() - start + 1);
        }
        let policy = CrashPolicy::KeepRandom {
            seed,
            keep: rng.next_f64(),
        };
        let image = sim.crash(policy);
        let (ma, mb) = (a.model, b.model);
        drop((objs, zones, h, pool));

        let pool =
            Arc::new(Pool::open_sim(image, &opts()).unwrap_or_else(|e| panic!("seed {seed}: {e}")));
        let h = Halloc::open(pool.clone()).expect("halloc reopen");
        let objs = h.object_pool("obj", OBJ_SIZE, OBJECTS).expect("obj");
        let zones = h.zone_pool("zones", ZONE_SIZE, ZONES).expect("zones");
        check_side(&pool, &objs, OBJ_SIZE as usize, &ma, seed);
        check_side(&pool, zones.objects(), 256, &mb, seed);
    }
}

#[test]
fn power_failures_never_leak_or_double_allocate() {
    torture(2000);
}

#[test]
#[ignore = "long run: cargo test -p nacre-halloc --release -- --ignored"]
fn power_failures_never_leak_or_double_allocate_long() {
    torture(50_000);
}

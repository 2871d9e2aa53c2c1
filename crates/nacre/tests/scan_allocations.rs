//! An iterator allocates for the rows it returns (each row's key and value are the caller's),
//! not for the index entries it steps over: key buffers are reused from step to step.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use nacre::{Db, IterOptions, Options};
use nacre_pmem::Backend;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn scans_allocate_per_row_not_per_step() {
    let dir = tempfile::tempdir().expect("dir");
    let mut o = Options::new(dir.path().join("pool")).backend(Backend::Emulated);
    o.pool_size = 64 << 20;
    o.memtable_size = 1 << 20;
    o.zone_size = 256 << 10;
    let db = Db::open(o).expect("open");
    let sub = db.subtable("s").expect("subtable");
    const KEYS: u64 = 5_000;
    // Three versions of every key, spread over the Global Index and the memtables.
    for round in 0..3u64 {
        for k in 0..KEYS {
            db.put(&sub, format!("key{k:06}"), format!("v{round}"))
                .expect("put");
        }
    }
    // The background worker allocates too: let it finish merging first.
    let start = std::time::Instant::now();
    while db
        .stats()
        .subtables
        .iter()
        .any(|s| s.immutable_memtables > 0)
    {
        assert!(start.elapsed().as_secs() < 60, "merges never finished");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for reverse in [false, true] {
        let mut it = db
            .iter(
                &sub,
                IterOptions {
                    reverse,
                    ..Default::default()
                },
            )
            .expect("iter");
        // Warm up: the first rows size the reused buffers.
        for _ in 0..10 {
            it.next().expect("row").expect("ok");
        }
        let before = ALLOCS.load(Ordering::Relaxed);
        let mut rows = 0u64;
        for r in it {
            let (k, v) = r.expect("row");
            assert_eq!(v, b"v2", "{k:?}");
            rows += 1;
        }
        let per_row = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / rows as f64;
        eprintln!("reverse {reverse}: {rows} rows, {per_row:.2} allocations per row");
        assert_eq!(rows, KEYS - 10);
        // The row's key and value, and little else.
        assert!(
            per_row < 2.5,
            "reverse {reverse}: {per_row:.2} allocations per row"
        );
    }
}

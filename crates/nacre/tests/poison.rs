//! Failures that stop writes: a panic in the background worker and a fence that fails. Every
//! writer, waiting or new, gets an error naming the cause promptly; none hangs; reads of what
//! was acknowledged still work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nacre::{Db, Error, Inject, Options, WriteBatch};
use nacre_pmem::Backend;

fn small() -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.pool_size = 4 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 128 << 10;
    o
}

#[test]
fn a_background_panic_gives_the_waiting_writer_the_error() {
    let mut o = small();
    o.inject = Some(Inject::BackgroundPanic);
    let db = Db::open(o).expect("open");
    let s = db.subtable("p").expect("subtable");
    let start = Instant::now();
    let mut n = 0u64;
    // Distinct keys fill the pool; the first writer that waits for space wakes the worker,
    // which panics.
    let err = loop {
        match db.put(&s, format!("k{n:06}"), [7u8; 2000]) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 100_000, "the pool never filled");
    };
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(matches!(err, Error::Poisoned(_)), "{err}");
    assert!(
        err.to_string().contains("injected background panic"),
        "{err}"
    );
    let again = db.put(&s, "more", b"x").expect_err("still poisoned");
    assert!(
        again.to_string().contains("injected background panic"),
        "{again}"
    );
    assert_eq!(
        db.get(&s, "k000000").expect("reads work").as_deref(),
        Some(&[7u8; 2000][..])
    );
}

#[test]
fn a_failed_fence_gives_every_writer_the_error() {
    let db = Db::open(small()).expect("open");
    let s = db.subtable("f").expect("subtable");
    for i in 0..50u64 {
        db.put(&s, format!("before{i}"), b"v").expect("put");
    }
    let sim = db.sim().expect("sim");
    let failed = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (db, s, failed) = (&db, &s, &failed);
            scope.spawn(move || {
                for i in 0.. {
                    let mut b = WriteBatch::new();
                    b.put(s, format!("t{t}/{i}"), [1u8; 300]);
                    if let Err(e) = db.write(b) {
                        let text = e.to_string();
                        assert!(text.contains("injected media error"), "{text}");
                        failed.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    assert!(i < 1_000_000, "writes never failed");
                }
            });
        }
        std::thread::sleep(Duration::from_millis(20));
        sim.fail_fences_from(sim.fence_count() + 3);
    });
    assert_eq!(
        failed.load(Ordering::Relaxed),
        4,
        "every writer got the error"
    );
    let e = db.put(&s, "after", b"v").expect_err("poisoned");
    assert!(e.to_string().contains("injected media error"), "{e}");
    assert_eq!(
        db.get(&s, "before7").expect("get").as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn a_panic_in_the_commit_path_gives_every_writer_the_error() {
    let mut o = small();
    o.inject = Some(Inject::CommitPanic);
    let db = Db::open(o).expect("open");
    let s = db.subtable("c").expect("subtable");
    db.put(&s, "before", b"v").expect("put");
    let failed = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (db, s, failed) = (&db, &s, &failed);
            scope.spawn(move || {
                for i in 0.. {
                    let key = if t == 0 && i == 200 {
                        "panic!".to_string()
                    } else {
                        format!("t{t}/{i}")
                    };
                    if let Err(e) = db.put(s, key, [1u8; 100]) {
                        let text = e.to_string();
                        assert!(text.contains("injected commit panic"), "{text}");
                        failed.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    assert!(i < 10_000_000, "writes never failed");
                }
            });
        }
    });
    assert!(start.elapsed() < Duration::from_secs(30));
    assert_eq!(
        failed.load(Ordering::Relaxed),
        4,
        "every writer got the error"
    );
    assert_eq!(
        db.get(&s, "before").expect("get").as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(db.get(&s, "panic!").expect("get"), None);
}

//! `Db::write_async`: batches queued without blocking commit in order, merged into shared
//! group commits; a bad batch fails alone; every future completes, also when the database
//! closes with batches queued.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use nacre::{Db, Error, Options, WriteBatch};
use nacre_pmem::Backend;

fn open(dir: &std::path::Path) -> Db {
    let mut o = Options::new(dir.join("db.pool")).backend(Backend::Emulated);
    o.pool_size = 32 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o.recovery_threads = 2;
    Db::open(o).unwrap()
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `f` to completion on this thread (a minimal executor: park until woken).
fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn queued_batches_commit_in_order_and_share_commits() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = open(dir.path());
    let t = db.subtable("t").unwrap();
    let before = db.stats().commit_groups;
    let mut futs = Vec::new();
    for i in 0..2000u32 {
        let mut b = WriteBatch::new();
        b.put(&t, "counter", i.to_string());
        b.put(&t, format!("k{i:05}"), i.to_le_bytes());
        futs.push(db.write_async(b));
    }
    for f in futs {
        block_on(f).unwrap();
    }
    assert_eq!(db.get(&t, "counter").unwrap().unwrap(), b"1999");
    for i in 0..2000u32 {
        assert_eq!(
            db.get(&t, format!("k{i:05}")).unwrap().unwrap(),
            i.to_le_bytes()
        );
    }
    let groups = db.stats().commit_groups - before;
    assert!(groups < 2000, "{groups} commits for 2000 queued batches");
}

#[test]
fn many_threads_queue_and_every_write_lands() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = open(dir.path());
    let t = db.subtable("t").unwrap();
    std::thread::scope(|s| {
        for th in 0..8u32 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let futs: Vec<_> = (0..300u32)
                    .map(|i| {
                        let mut b = WriteBatch::new();
                        b.put(t, format!("{th}/{i}"), format!("v{th}.{i}"));
                        db.write_async(b)
                    })
                    .collect();
                for f in futs {
                    f.wait().unwrap();
                }
            });
        }
    });
    for th in 0..8u32 {
        for i in 0..300u32 {
            let v = db.get(&t, format!("{th}/{i}")).unwrap().unwrap();
            assert_eq!(v, format!("v{th}.{i}").into_bytes());
        }
    }
}

#[test]
fn a_bad_batch_fails_alone() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = open(dir.path());
    let t = db.subtable("t").unwrap();
    let mut good = WriteBatch::new();
    good.put(&t, "a", "1");
    // A record must fit a zone (256 KiB here).
    let mut bad = WriteBatch::new();
    bad.put(&t, "big0", "v").put(&t, vec![b'k'; 300 << 10], "v");
    // A batch's records for one subtable may exceed a zone: it commits alone.
    let mut big = WriteBatch::new();
    for i in 0..40 {
        big.put(&t, format!("big{i}"), vec![7u8; 20_000]);
    }
    let mut good2 = WriteBatch::new();
    good2.put(&t, "b", "2");
    let (f1, f2, f3, f4) = (
        db.write_async(good),
        db.write_async(bad),
        db.write_async(big),
        db.write_async(good2),
    );
    assert!(f1.wait().is_ok());
    assert!(matches!(f2.wait(), Err(Error::TooLarge { .. })));
    f3.wait().expect("a batch larger than a zone");
    assert!(f4.wait().is_ok());
    assert_eq!(db.get(&t, "b").unwrap().unwrap(), b"2");
    assert_eq!(db.get(&t, "big0").unwrap().unwrap(), vec![7u8; 20_000]);
    assert_eq!(db.get(&t, "big39").unwrap().unwrap(), vec![7u8; 20_000]);
}

#[test]
fn batches_queued_together_commit_in_order_and_fail_alone() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = open(dir.path());
    let t = db.subtable("t").unwrap();
    let mut batches = Vec::new();
    for i in 0..500u32 {
        let mut b = WriteBatch::new();
        if i == 250 {
            // A record too large for one zone: this batch fails, its neighbours do not.
            b.put(&t, "big0", "v").put(&t, vec![b'k'; 300 << 10], "v");
        } else if i == 260 {
            // Larger than a zone together: this batch commits alone, in its place.
            for j in 0..20 {
                b.put(&t, format!("big{j}"), vec![7u8; 20_000]);
            }
        } else {
            b.put(&t, "last", i.to_string());
            b.put(&t, format!("k{i:05}"), i.to_le_bytes());
        }
        batches.push(b);
    }
    let futs = db.write_async_many(batches);
    assert_eq!(futs.len(), 500);
    for (i, f) in futs.into_iter().enumerate() {
        let r = block_on(f);
        if i == 250 {
            assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");
        } else {
            r.unwrap();
        }
    }
    assert_eq!(db.get(&t, "last").unwrap().unwrap(), b"499");
    assert_eq!(db.get(&t, "big0").unwrap().unwrap(), vec![7u8; 20_000]);
    assert_eq!(db.get(&t, "big19").unwrap().unwrap(), vec![7u8; 20_000]);
    for i in (0..500u32).filter(|&i| i != 250 && i != 260) {
        assert_eq!(
            db.get(&t, format!("k{i:05}")).unwrap().unwrap(),
            i.to_le_bytes()
        );
    }
    assert!(db.write_async_many(Vec::new()).is_empty());
}

#[test]
fn closing_with_batches_queued_completes_every_future() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = open(dir.path());
    let t = db.subtable("t").unwrap();
    let futs: Vec<_> = (0..500u32)
        .map(|i| {
            let mut b = WriteBatch::new();
            b.put(&t, format!("k{i}"), "v");
            db.write_async(b)
        })
        .collect();
    db.close().unwrap();
    // Each either landed before the close or says the database closed; none hangs.
    let ok = futs
        .into_iter()
        .map(|f| f.wait())
        .filter(Result::is_ok)
        .count();
    let db = open(dir.path());
    let t = db.subtable("t").unwrap();
    let present = (0..500u32)
        .filter(|i| db.get(&t, format!("k{i}")).unwrap().is_some())
        .count();
    assert!(present >= ok, "{ok} acknowledged, {present} present");
}

#[test]
fn a_poisoned_database_fails_every_queued_future_promptly() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut o = Options::new(dir.path().join("db.pool")).backend(Backend::Emulated);
    o.pool_size = 32 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o.inject = Some(nacre::Inject::CommitPanic);
    let db = Db::open(o).unwrap();
    let t = db.subtable("t").unwrap();
    let mut ok = WriteBatch::new();
    ok.put(&t, "fine", "1");
    assert!(db.write_async(ok).wait().is_ok());
    let futs: Vec<_> = (0..50)
        .map(|i| {
            let mut b = WriteBatch::new();
            b.put(
                &t,
                if i == 0 {
                    "panic-now".to_string()
                } else {
                    format!("k{i}")
                },
                "v",
            );
            db.write_async(b)
        })
        .collect();
    let start = std::time::Instant::now();
    for f in futs {
        assert!(matches!(f.wait(), Err(Error::Poisoned(_))));
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn a_durable_batch_means_every_earlier_one_is_durable_with_many_committers() {
    // Several committer threads write runs in parallel; commit order stays queue order:
    // when batch i is durable, the counter reads i or later, never earlier.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = Arc::new(open(dir.path()));
    let t = db.subtable("t").unwrap();
    let writers: Vec<_> = (0..4u32)
        .map(|w| {
            let (db, t) = (db.clone(), t.clone());
            std::thread::spawn(move || {
                let key = format!("counter{w}");
                let mut futs = std::collections::VecDeque::new();
                for i in 0..5000u32 {
                    let mut b = WriteBatch::new();
                    b.put(&t, &key, i.to_be_bytes());
                    futs.push_back((i, db.write_async(b)));
                    if futs.len() > 64 {
                        let (j, f) = futs.pop_front().unwrap();
                        block_on(f).unwrap();
                        let v = db.get(&t, &key).unwrap().unwrap();
                        let seen = u32::from_be_bytes(v.try_into().unwrap());
                        assert!(seen >= j, "batch {j} is durable but the key reads {seen}");
                    }
                }
                for (_, f) in futs {
                    block_on(f).unwrap();
                }
                let v = db.get(&t, &key).unwrap().unwrap();
                assert_eq!(u32::from_be_bytes(v.try_into().unwrap()), 4999);
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
}

fn ready(f: &mut nacre::WriteFuture) -> Option<nacre::Result<()>> {
    let mut cx = Context::from_waker(Waker::noop());
    match std::pin::Pin::new(f).poll(&mut cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

#[test]
fn write_now_commits_on_the_calling_thread_in_order_with_queued_batches() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = Arc::new(open(dir.path()));
    let t = db.subtable("t").unwrap();
    // Alone, every batch commits before write_now returns, merged into few groups.
    let before = db.stats().commit_groups;
    let batches: Vec<WriteBatch> = (0..200u32)
        .map(|i| {
            let mut b = WriteBatch::new();
            b.put(&t, "counter", i.to_string());
            b.put(&t, format!("k{i:05}"), i.to_le_bytes());
            b
        })
        .collect();
    for mut f in db.write_now(batches) {
        assert!(matches!(ready(&mut f), Some(Ok(()))));
    }
    assert_eq!(db.get(&t, "counter").unwrap().unwrap(), b"199");
    assert!(db.stats().commit_groups - before < 20);
    // Handed over right behind batches queued for the committer, a batch commits after
    // them.
    for round in 0..200u32 {
        let mut futs = Vec::new();
        for i in 0..3u32 {
            let mut b = WriteBatch::new();
            b.put(&t, "behind", format!("{round}-{i}"));
            futs.push(db.write_async(b));
        }
        let mut b = WriteBatch::new();
        b.put(&t, "behind", format!("{round}-now"));
        futs.extend(db.write_now(vec![b]));
        for f in futs {
            f.wait().unwrap();
        }
        let v = db.get(&t, "behind").unwrap().unwrap();
        assert_eq!(v, format!("{round}-now").as_bytes(), "round {round}");
    }
    // Mixed with batches queued for the committer, from several threads, each thread's
    // batches commit in the order it handed them over (A1, A4).
    let threads: Vec<_> = (0..4u32)
        .map(|th| {
            let db = db.clone();
            let t = t.clone();
            std::thread::spawn(move || {
                let mut futs = Vec::new();
                for i in 0..500u32 {
                    let mut b = WriteBatch::new();
                    b.put(&t, format!("last{th}"), i.to_string());
                    if i % 3 == 0 || i == 499 {
                        futs.extend(db.write_now(vec![b]));
                    } else {
                        futs.push(db.write_async(b));
                    }
                }
                for f in futs {
                    f.wait().unwrap();
                }
            })
        })
        .collect();
    for h in threads {
        h.join().unwrap();
    }
    for th in 0..4u32 {
        let v = db.get(&t, format!("last{th}")).unwrap().unwrap();
        assert_eq!(v, b"499", "thread {th}");
    }
}

#[test]
fn write_now_never_waits_for_room_and_a_full_pool_batch_goes_to_the_committer() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut o = Options::new(dir.path().join("db.pool")).backend(Backend::Emulated);
    o.pool_size = 8 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    let db = Db::open(o).unwrap();
    let t = db.subtable("t").unwrap();
    // Fill the pool with distinct keys until it refuses.
    let mut i = 0u32;
    loop {
        let mut b = WriteBatch::new();
        b.put(&t, format!("fill{i:06}"), vec![7u8; 1000]);
        match db.write(b) {
            Ok(()) => i += 1,
            Err(Error::PoolFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    // write_now returns at once; its batch ends with the committer's outcome.
    let started = std::time::Instant::now();
    let mut b = WriteBatch::new();
    b.put(&t, "late", vec![1u8; 1000]);
    let mut futs = db.write_now(vec![b]);
    assert!(started.elapsed() < std::time::Duration::from_millis(200));
    let r = futs.pop().unwrap().wait();
    assert!(matches!(r, Err(Error::PoolFull { .. })), "{r:?}");
}

/// A batch of `key=val` in `t`; `bad` adds a record too large for a zone (the batch fails).
fn batch(t: &nacre::Subtable, key: &str, val: &str, bad: bool) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(t, key, val);
    if bad {
        b.put(t, vec![b'k'; 300 << 10], "v");
    }
    b
}

#[test]
fn a_batch_that_depends_on_a_failed_one_fails_and_others_do_not() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = Arc::new(open(dir.path()));
    let t = db.subtable("t").unwrap();
    for now in [false, true] {
        // 0 fails; 1 depends on 0; 2 on 1 (transitively failed); 3 is independent; 4
        // depends on 3; 5 names a position after it.
        let mut bs = vec![
            batch(&t, "a", "0", true),
            batch(&t, "b", "1", false),
            batch(&t, "c", "2", false),
            batch(&t, "d", "3", false),
            batch(&t, "e", "4", false),
            batch(&t, "f", "5", false),
        ];
        bs[1].after_batch(0);
        bs[2].after_batch(1);
        bs[4].after_batch(3);
        bs[5].after_batch(5);
        let futs = if now {
            db.write_now(bs)
        } else {
            db.write_async_many(bs)
        };
        let tokens: Vec<_> = futs.iter().map(|f| f.token()).collect();
        let rs: Vec<_> = futs.into_iter().map(|f| f.wait()).collect();
        assert!(matches!(rs[0], Err(Error::TooLarge { .. })), "{rs:?}");
        assert!(matches!(rs[1], Err(Error::DependencyFailed)), "{rs:?}");
        assert!(matches!(rs[2], Err(Error::DependencyFailed)), "{rs:?}");
        assert!(rs[3].is_ok() && rs[4].is_ok(), "{rs:?}");
        assert!(matches!(rs[5], Err(Error::InvalidOptions(_))), "{rs:?}");
        assert_eq!(tokens[0].failed(), Some(true));
        assert_eq!(tokens[3].failed(), Some(false));
        for k in ["a", "b", "c", "f"] {
            assert_eq!(
                db.get(&t, k).unwrap(),
                None,
                "{k} of a failed batch (now: {now})"
            );
        }
        assert_eq!(db.get(&t, "e").unwrap().unwrap(), b"4");
        // Across calls, by token: a failed one fails its dependants, queued or written
        // on the caller's thread; a committed one does not.
        let mut late = batch(&t, "g", "6", false);
        late.after(&tokens[2]);
        assert!(matches!(db.write(late), Err(Error::DependencyFailed)));
        let mut late = batch(&t, "h", "7", false);
        late.after(&tokens[0]);
        let f = db.write_async(late);
        assert!(matches!(f.wait(), Err(Error::DependencyFailed)));
        let mut fine = batch(&t, "i", "8", false);
        fine.after(&tokens[4]);
        db.write_async(fine).wait().unwrap();
        assert_eq!(db.get(&t, "g").unwrap(), None);
        assert_eq!(db.get(&t, "h").unwrap(), None);
        assert_eq!(db.get(&t, "i").unwrap().unwrap(), b"8");
        for k in ["a", "b", "c", "d", "e", "f", "i"] {
            db.delete(&t, k).unwrap();
        }
    }
}

#[test]
fn batches_that_depend_on_each_other_still_share_group_commits() {
    // A hot key: every batch depends on the one before (a counter's INCRs read each
    // other's queued writes); they still commit in few groups.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = Arc::new(open(dir.path()));
    let t = db.subtable("t").unwrap();
    let before = db.stats().commit_groups;
    let bs: Vec<WriteBatch> = (0..200usize)
        .map(|i| {
            let mut b = batch(&t, "counter", &i.to_string(), false);
            if i > 0 {
                b.after_batch(i - 1);
            }
            b
        })
        .collect();
    for f in db.write_now(bs) {
        f.wait().unwrap();
    }
    assert!(db.stats().commit_groups - before < 10);
    assert_eq!(db.get(&t, "counter").unwrap().unwrap(), b"199");
}

/// `Db::write_now_begin`: threads take turns giving their batches places in the commit order
/// (under a lock of their own, as a server's flush does), then write them at the same time.
/// Each batch depends on the one granted before it (often another thread's, still being
/// written): every batch commits, in grant order (a reader never sees the counter go back),
/// and the last one wins, also after the database is reopened.
#[test]
fn write_now_begin_grants_in_order_and_threads_write_at_once() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let db = Arc::new(open(dir.path()));
    let t = db.subtable("t").unwrap();
    let order = Arc::new(std::sync::Mutex::new((0u64, None::<nacre::WriteToken>)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, t, stop) = (db.clone(), t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut last = 0u64;
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                if let Some(v) = db.get(&t, "counter").unwrap() {
                    let n: u64 = String::from_utf8(v).unwrap().parse().unwrap();
                    assert!(n >= last, "the counter went back from {last} to {n}");
                    last = n;
                }
                reads += 1;
            }
            reads
        })
    };
    let writers: Vec<_> = (0..4u64)
        .map(|th| {
            let (db, t, order) = (db.clone(), t.clone(), order.clone());
            std::thread::spawn(move || {
                let mut granted_here = 0;
                for _ in 0..300 {
                    let (futs, here, grants) = {
                        let mut o = order.lock().unwrap();
                        let mut batches = Vec::new();
                        for _ in 0..3 {
                            o.0 += 1;
                            let mut b = WriteBatch::new();
                            b.put(&t, "counter", o.0.to_string());
                            b.put(&t, format!("k{}", o.0), th.to_le_bytes());
                            if let Some(tok) = &o.1 {
                                b.after(tok);
                            }
                            batches.push(b);
                        }
                        let (futs, here, grants) = db.write_now_begin(batches);
                        o.1 = futs.last().map(|f| f.token());
                        (futs, here, grants)
                    };
                    granted_here += here;
                    grants.finish();
                    for (i, mut f) in futs.into_iter().enumerate() {
                        if i < here {
                            assert!(matches!(ready(&mut f), Some(Ok(()))), "granted: done");
                        } else {
                            f.wait().unwrap();
                        }
                    }
                }
                granted_here
            })
        })
        .collect();
    let granted: usize = writers.into_iter().map(|h| h.join().unwrap()).sum();
    stop.store(true, std::sync::atomic::Ordering::Release);
    assert!(reader.join().unwrap() > 0);
    assert!(
        granted > 3600 / 2,
        "most batches were granted on their threads: {granted}"
    );
    assert_eq!(db.get(&t, "counter").unwrap().unwrap(), b"3600");
    for i in 1..=3600u64 {
        assert!(db.get(&t, format!("k{i}")).unwrap().is_some(), "k{i}");
    }
    drop(t);
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
    let db = open(dir.path());
    let t = db.subtable("t").unwrap();
    assert_eq!(db.get(&t, "counter").unwrap().unwrap(), b"3600");
}

/// One `Db::write_now_begin` call with more runs than the Reorder Ring has slots (batches
/// that free space and batches that add data never merge): its own unfinished groups must
/// not hold the ring it waits for room in. It used to hang there.
#[test]
fn write_now_begin_with_more_runs_than_ring_slots_completes() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut o = Options::new(dir.path().join("db.pool")).backend(Backend::Emulated);
    o.pool_size = 32 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o.ring_capacity = 4;
    let db = Arc::new(Db::open(o).unwrap());
    let t = db.subtable("t").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let db = db.clone();
        std::thread::spawn(move || {
            let batches: Vec<WriteBatch> = (0..40u32)
                .map(|i| {
                    let mut b = WriteBatch::new();
                    if i % 2 == 0 {
                        b.put(&t, format!("k{i}"), "v");
                    } else {
                        b.delete(&t, format!("k{}", i - 1));
                        b.mark_frees_space();
                    }
                    b
                })
                .collect();
            let (futs, here, grants) = db.write_now_begin(batches);
            grants.finish();
            for f in futs {
                f.wait().unwrap();
            }
            tx.send(here).unwrap();
        })
    };
    let here = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("write_now_begin hung on its own groups");
    worker.join().unwrap();
    assert_eq!(here, 40, "every run was granted on the calling thread");
    let t = db.subtable("t").unwrap();
    for i in (0..40).step_by(2) {
        assert_eq!(db.get(&t, format!("k{i}")).unwrap(), None);
    }
}

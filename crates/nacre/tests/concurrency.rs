//! Many writers and readers at once: readers see every batch whole (C4) through gets,
//! snapshots and iterators, never a later write before an earlier one of the same writer, and
//! the final state holds every acknowledged write.

use std::sync::atomic::{AtomicBool, Ordering};

use nacre::{Db, IterOptions, Options, Pipelining, WriteBatch};
use nacre_pmem::{Backend, SplitMix64};

#[test]
fn readers_see_whole_batches_while_pipelined_writers_commit() {
    readers_see_whole_batches(Pipelining::On);
}

#[test]
fn readers_see_whole_batches_while_unpipelined_writers_commit() {
    readers_see_whole_batches(Pipelining::Off);
}

fn readers_see_whole_batches(pipelining: Pipelining) {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.pipelining = pipelining;
    o.pool_size = 64 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    let db = Db::open(o).expect("open");
    let a = db.subtable("a").expect("a");
    let b = db.subtable("b").expect("b");
    let stop = AtomicBool::new(false);
    const WRITERS: u64 = 4;
    const ROUNDS: u64 = 400;
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (db, a, b) = (&db, &a, &b);
            s.spawn(move || {
                for r in 1..=ROUNDS {
                    // the same counter under two keys in two subtables, atomically
                    let mut batch = WriteBatch::new();
                    let v = r.to_le_bytes();
                    batch.put(a, format!("w{w}"), v).put(b, format!("w{w}"), v);
                    batch.put(a, format!("w{w}/r{r:04}"), v);
                    db.write(batch).expect("write");
                }
            });
        }
        for t in 0..3u64 {
            let (db, a, b, stop) = (&db, &a, &b, &stop);
            s.spawn(move || {
                let mut rng = SplitMix64::new(t);
                let mut last = [0u64; WRITERS as usize];
                let mut reads = 0u32;
                while !stop.load(Ordering::Acquire) || reads < 200 {
                    reads += 1;
                    let w = rng.next_u64() % WRITERS;
                    let snap = db.snapshot();
                    let ka = db.get_at(a, format!("w{w}"), &snap).expect("get");
                    let kb = db.get_at(b, format!("w{w}"), &snap).expect("get");
                    assert_eq!(ka, kb, "batch seen half-applied");
                    let n = ka.map_or(0, |v| u64::from_le_bytes(v.try_into().expect("8 bytes")));
                    assert!(n >= last[w as usize], "went back in time");
                    last[w as usize] = n;
                    // every per-round key up to n is visible at the snapshot, none beyond
                    let prefix = format!("w{w}/").into_bytes();
                    let rounds = db
                        .iter(
                            a,
                            IterOptions {
                                snapshot: Some(&snap),
                                prefix: Some(prefix),
                                ..Default::default()
                            },
                        )
                        .expect("iter")
                        .count() as u64;
                    assert_eq!(rounds, n, "iterator disagrees with the snapshot");
                }
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        s.spawn(|| {
            while db.latest_sequence() < WRITERS * ROUNDS * 3 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            stop.store(true, Ordering::Release);
        });
    });
    for w in 0..WRITERS {
        assert_eq!(
            db.get(&a, format!("w{w}")).expect("get"),
            Some(ROUNDS.to_le_bytes().to_vec())
        );
        let n = db
            .iter(
                &a,
                IterOptions {
                    prefix: Some(format!("w{w}/").into_bytes()),
                    ..Default::default()
                },
            )
            .expect("iter")
            .count();
        assert_eq!(n as u64, ROUNDS);
    }
}

/// The `msync` backend's defaults (single fence, unpipelined: one bucket whatever
/// `commit_buckets` says, writers that block while a sync runs): concurrent writers all return, and everything is there after a reopen.
#[test]
fn msync_writers_commit_together_and_survive_reopen() {
    let dir = tempfile::tempdir().expect("dir");
    let opts = || {
        let mut o = Options::new(dir.path().join("db.pool")).backend(Backend::Msync);
        o.pool_size = 32 << 20;
        o.zone_size = 256 << 10;
        o.memtable_size = 1 << 20;
        o
    };
    const WRITERS: u64 = 3;
    const PUTS: u64 = 40;
    {
        let db = Db::open(opts()).expect("open");
        assert_eq!(db.commit_mode(), nacre::CommitMode::SingleFence);
        let t = db.subtable("t").expect("t");
        std::thread::scope(|s| {
            for w in 0..WRITERS {
                let (db, t) = (&db, &t);
                s.spawn(move || {
                    for i in 0..PUTS {
                        db.put(t, format!("w{w}/{i:03}"), i.to_le_bytes())
                            .expect("put");
                    }
                });
            }
        });
        assert_eq!(db.latest_sequence(), WRITERS * PUTS);
    }
    let db = Db::open(opts()).expect("reopen");
    let t = db.subtable("t").expect("t");
    for w in 0..WRITERS {
        for i in 0..PUTS {
            let got = db.get(&t, format!("w{w}/{i:03}")).expect("get");
            assert_eq!(got, Some(i.to_le_bytes().to_vec()), "w{w}/{i}");
        }
    }
}

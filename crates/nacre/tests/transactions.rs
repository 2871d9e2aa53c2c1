//! Transactions: read-your-own-writes in gets and iterators, savepoints, conflicts (with
//! other transactions, with plain writes, with versions spilled to disk), locks (shared,
//! exclusive, timeouts, deadlocks), and concurrency tests that fail without isolation: lost
//! updates on a counter and a bank whose total must stay constant, for both kinds of
//! transaction and for both at once. The same tests with the conflict check switched off
//! (`Inject::SkipConflictCheck`) must fail.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nacre::{Db, Error, Inject, IterOptions, Options, Subtable, Transaction, TxnOptions};
use nacre_pmem::{Backend, SplitMix64};

fn sim() -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.pool_size = 64 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o
}

fn open() -> (Db, Subtable) {
    let db = Db::open(sim()).expect("open");
    let s = db.subtable("t").expect("subtable");
    (db, s)
}

fn rows(it: impl Iterator<Item = nacre::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(String, String)> {
    it.map(|r| {
        let (k, v) = r.expect("row");
        (
            String::from_utf8(k).expect("utf8"),
            String::from_utf8(v).expect("utf8"),
        )
    })
    .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pess() -> TxnOptions {
    TxnOptions::default()
}

#[test]
fn a_transaction_reads_its_own_writes_in_gets_and_iterators() {
    let (db, s) = open();
    for k in ["a", "c", "e", "g"] {
        db.put(&s, k, format!("db-{k}")).expect("put");
    }
    for mut t in [db.begin_optimistic(), db.begin_pessimistic(pess())] {
        t.put(&s, "b", "t-b").expect("put");
        t.put(&s, "c", "t-c").expect("put");
        t.delete(&s, "e").expect("delete");
        t.put(&s, "h", "t-h").expect("put");
        t.delete(&s, "zz").expect("delete of an absent key");
        assert_eq!(t.get(&s, "c").expect("get"), Some(b"t-c".to_vec()));
        assert_eq!(t.get(&s, "e").expect("get"), None);
        assert_eq!(t.get(&s, "a").expect("get"), Some(b"db-a".to_vec()));
        let all = pairs(&[
            ("a", "db-a"),
            ("b", "t-b"),
            ("c", "t-c"),
            ("g", "db-g"),
            ("h", "t-h"),
        ]);
        assert_eq!(rows(t.iter(&s, IterOptions::default()).expect("iter")), all);
        let mut rev = all.clone();
        rev.reverse();
        let o = IterOptions {
            reverse: true,
            ..Default::default()
        };
        assert_eq!(rows(t.iter(&s, o).expect("iter")), rev);
        let o = IterOptions {
            lower: Some(b"b".to_vec()),
            upper: Some(b"g".to_vec()),
            ..Default::default()
        };
        assert_eq!(rows(t.iter(&s, o).expect("iter")), all[1..3].to_vec());
        let o = IterOptions {
            prefix: Some(b"h".to_vec()),
            reverse: true,
            ..Default::default()
        };
        assert_eq!(rows(t.iter(&s, o).expect("iter")), all[4..].to_vec());
        // Nobody else sees any of it before the commit.
        assert_eq!(db.get(&s, "b").expect("get"), None);
        t.rollback();
        assert_eq!(db.get(&s, "b").expect("get"), None);
        assert_eq!(db.get(&s, "e").expect("get"), Some(b"db-e".to_vec()));
    }
    let mut t = db.begin_optimistic();
    t.put(&s, "b", "t-b").expect("put");
    t.delete(&s, "e").expect("delete");
    let seq = db.latest_sequence();
    t.commit().expect("commit");
    assert_eq!(db.get(&s, "b").expect("get"), Some(b"t-b".to_vec()));
    assert_eq!(db.get(&s, "e").expect("get"), None);
    // One atomic group: both writes took consecutive sequence numbers.
    assert_eq!(db.latest_sequence(), seq + 2);
    assert_eq!(db.stats().locked_keys, 0);
}

#[test]
fn a_transaction_reads_at_its_snapshot() {
    let (db, s) = open();
    db.put(&s, "k", "old").expect("put");
    let t = db.begin_optimistic();
    db.put(&s, "k", "new").expect("put");
    db.put(&s, "n", "new").expect("put");
    assert_eq!(t.get(&s, "k").expect("get"), Some(b"old".to_vec()));
    assert_eq!(t.get(&s, "n").expect("get"), None);
    assert_eq!(
        rows(t.iter(&s, IterOptions::default()).expect("iter")),
        pairs(&[("k", "old")])
    );
    let snap = db.snapshot();
    let o = IterOptions {
        snapshot: Some(&snap),
        ..Default::default()
    };
    assert!(matches!(t.iter(&s, o), Err(Error::InvalidOptions(_))));
}

#[test]
fn savepoints_undo_writes_reads_for_update_and_locks() {
    let (db, s) = open();
    db.put(&s, "x", "0").expect("put");
    let mut t = db.begin_pessimistic(pess());
    assert!(matches!(t.rollback_to_savepoint(), Err(Error::NoSavepoint)));
    assert!(matches!(t.pop_savepoint(), Err(Error::NoSavepoint)));
    t.put(&s, "a", "1").expect("put");
    t.get_for_share(&s, "x").expect("share");
    t.set_savepoint();
    t.put(&s, "a", "2").expect("put");
    t.put(&s, "b", "2").expect("put");
    t.get_for_update(&s, "x").expect("upgrade");
    t.set_savepoint();
    t.delete(&s, "a").expect("delete");
    t.put(&s, "c", "3").expect("put");
    assert_eq!(db.stats().locked_keys, 4);
    t.rollback_to_savepoint().expect("inner");
    assert_eq!(t.get(&s, "a").expect("get"), Some(b"2".to_vec()));
    assert_eq!(t.get(&s, "c").expect("get"), None);
    assert_eq!(db.stats().locked_keys, 3, "the lock on c is released");
    t.rollback_to_savepoint().expect("outer");
    assert_eq!(t.get(&s, "a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(t.get(&s, "b").expect("get"), None);
    assert_eq!(db.stats().locked_keys, 2);
    // x is held shared again: another reader may share it, no writer may take it.
    let mut other = db.begin_pessimistic(TxnOptions {
        lock_timeout: Some(Duration::ZERO),
        ..pess()
    });
    other.get_for_share(&s, "x").expect("shared again");
    assert!(matches!(
        other.put(&s, "x", "9"),
        Err(Error::LockTimeout { .. })
    ));
    other.rollback();
    t.commit().expect("commit");
    assert_eq!(db.get(&s, "a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(db.get(&s, "b").expect("get"), None);
    assert_eq!(db.get(&s, "c").expect("get"), None);
    assert_eq!(db.stats().locked_keys, 0);

    // pop_savepoint keeps what was done.
    let mut t = db.begin_optimistic();
    t.set_savepoint();
    t.put(&s, "p", "1").expect("put");
    t.pop_savepoint().expect("pop");
    assert!(matches!(t.rollback_to_savepoint(), Err(Error::NoSavepoint)));
    t.commit().expect("commit");
    assert_eq!(db.get(&s, "p").expect("get"), Some(b"1".to_vec()));
}

#[test]
fn an_optimistic_commit_fails_whole_when_a_key_it_wrote_or_read_for_update_changed() {
    let (db, s) = open();
    let other = db.subtable("other").expect("subtable");
    db.put(&s, "x", "1").expect("put");
    // Written by another transaction after the snapshot.
    let mut t1 = db.begin_optimistic();
    let mut t2 = db.begin_optimistic();
    t1.put(&s, "x", "t1").expect("put");
    t1.put(&other, "y", "t1").expect("put");
    t2.put(&s, "x", "t2").expect("put");
    t2.commit().expect("first committer wins");
    match t1.commit() {
        Err(Error::Conflict { subtable, key }) => {
            assert_eq!(subtable, "t");
            assert_eq!(key, b"x");
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(db.get(&s, "x").expect("get"), Some(b"t2".to_vec()));
    assert_eq!(db.get(&other, "y").expect("get"), None, "nothing applied");
    // Read for update, then written by a plain write (deletes count).
    let mut t = db.begin_optimistic();
    assert_eq!(
        t.get_for_update(&s, "x").expect("get"),
        Some(b"t2".to_vec())
    );
    t.put(&other, "z", "1").expect("put");
    db.delete(&s, "x").expect("delete");
    assert!(matches!(t.commit(), Err(Error::Conflict { .. })));
    assert_eq!(db.get(&other, "z").expect("get"), None);
    // A plain get is not checked: writes to it do not fail the commit.
    db.put(&s, "x", "again").expect("put");
    let mut t = db.begin_optimistic();
    t.get(&s, "x").expect("get");
    t.put(&other, "z", "1").expect("put");
    db.put(&s, "x", "later").expect("put");
    t.commit().expect("plain reads are not checked");
    // A read-only transaction with a read for update is checked too.
    let mut t = db.begin_optimistic();
    t.get_for_update(&s, "x").expect("get");
    db.put(&s, "x", "changed").expect("put");
    assert!(matches!(t.commit(), Err(Error::Conflict { .. })));
}

#[test]
fn write_skew_is_allowed_by_plain_reads_and_prevented_by_reads_for_update() {
    // The classic anomaly of snapshot isolation: two on-call doctors each see the other on
    // call and go off call; with plain reads both commit, with reads for update one fails.
    for for_update in [false, true] {
        let (db, s) = open();
        db.put(&s, "alice", "on").expect("put");
        db.put(&s, "bob", "on").expect("put");
        let mut ta = db.begin_optimistic();
        let mut tb = db.begin_optimistic();
        let read = |t: &mut Transaction<'_>, k: &str| {
            if for_update {
                t.get_for_update(&s, k).expect("get")
            } else {
                t.get(&s, k).expect("get")
            }
        };
        assert_eq!(read(&mut ta, "bob"), Some(b"on".to_vec()));
        assert_eq!(read(&mut tb, "alice"), Some(b"on".to_vec()));
        ta.put(&s, "alice", "off").expect("put");
        tb.put(&s, "bob", "off").expect("put");
        ta.commit().expect("first commit");
        let r = tb.commit();
        if for_update {
            assert!(matches!(r, Err(Error::Conflict { .. })), "{r:?}");
        } else {
            r.expect("write skew commits under snapshot isolation");
            assert_eq!(db.get(&s, "alice").expect("get"), Some(b"off".to_vec()));
            assert_eq!(db.get(&s, "bob").expect("get"), Some(b"off".to_vec()));
        }
    }
}

#[test]
fn a_pessimistic_commit_fails_if_a_plain_write_changed_a_locked_key() {
    let (db, s) = open();
    db.put(&s, "x", "1").expect("put");
    let mut t = db.begin_pessimistic(pess());
    // Written after the snapshot, before the lock: the locking read sees it.
    db.put(&s, "x", "2").expect("put");
    assert_eq!(
        t.get(&s, "x").expect("get"),
        Some(b"1".to_vec()),
        "snapshot read"
    );
    assert_eq!(
        t.get_for_update(&s, "x").expect("get"),
        Some(b"2".to_vec()),
        "locking read"
    );
    t.put(&s, "x", "3").expect("put");
    t.commit().expect("commit");
    // A plain write takes no lock: the commit's check catches it.
    let mut t = db.begin_pessimistic(pess());
    t.get_for_update(&s, "x").expect("get");
    t.put(&s, "y", "1").expect("put");
    db.put(&s, "x", "plain").expect("put");
    assert!(matches!(t.commit(), Err(Error::Conflict { .. })));
    assert_eq!(db.get(&s, "y").expect("get"), None);
    assert_eq!(db.stats().locked_keys, 0);
}

#[test]
fn locks_time_out_and_deadlocks_are_refused() {
    let (db, s) = open();
    let short = TxnOptions {
        lock_timeout: Some(Duration::from_millis(50)),
        deadlock_detect: true,
    };
    let mut t1 = db.begin_pessimistic(short.clone());
    t1.put(&s, "a", "1").expect("lock a");
    let mut t2 = db.begin_pessimistic(short.clone());
    let start = std::time::Instant::now();
    match t2.get_for_update(&s, "a") {
        Err(Error::LockTimeout { key, waited, .. }) => {
            assert_eq!(key, b"a");
            assert!(waited >= Duration::from_millis(50));
        }
        r => panic!("{r:?}"),
    }
    assert!(start.elapsed() >= Duration::from_millis(50));
    // The failed operation did nothing; the transaction goes on.
    t2.put(&s, "b", "2").expect("lock b");
    // Shared locks share.
    let mut r1 = db.begin_pessimistic(short.clone());
    let mut r2 = db.begin_pessimistic(short.clone());
    r1.get_for_share(&s, "c").expect("share");
    r2.get_for_share(&s, "c").expect("share");
    drop((r1, r2));
    // t1 waits for b (held by t2) in a thread; t2 asking for a closes the cycle.
    let long = TxnOptions {
        lock_timeout: Some(Duration::from_secs(30)),
        deadlock_detect: true,
    };
    let mut t1 = {
        drop(t1);
        let mut t = db.begin_pessimistic(long.clone());
        t.put(&s, "a", "1").expect("lock a");
        t
    };
    let mut t2 = {
        drop(t2);
        let mut t = db.begin_pessimistic(long.clone());
        t.put(&s, "b", "2").expect("lock b");
        t
    };
    std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            t1.get_for_update(&s, "b")
                .expect("granted once t2 gives up");
            t1.commit().expect("commit");
        });
        std::thread::sleep(Duration::from_millis(100));
        let start = std::time::Instant::now();
        match t2.get_for_update(&s, "a") {
            Err(Error::Deadlock { cycle, key, .. }) => {
                assert_eq!(cycle, 2);
                assert_eq!(key, b"a");
            }
            r => panic!("{r:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(5), "refused at once");
        t2.rollback();
        h.join().expect("t1");
    });
    assert_eq!(db.get(&s, "a").expect("get"), Some(b"1".to_vec()));
    assert_eq!(db.stats().locked_keys, 0);
}

#[test]
fn bad_input_is_refused_with_clear_errors() {
    let (db, s) = open();
    let other = Db::open(sim()).expect("open");
    let foreign = other.subtable("t").expect("subtable");
    let mut t = db.begin_optimistic();
    assert!(matches!(
        t.put(&foreign, "k", "v"),
        Err(Error::InvalidOptions(_))
    ));
    assert!(matches!(
        t.get(&foreign, "k"),
        Err(Error::InvalidOptions(_))
    ));
    assert!(matches!(
        t.get_for_update(&foreign, "k"),
        Err(Error::InvalidOptions(_))
    ));
    let huge = vec![0u8; nacre::MAX_VALUE + 1];
    assert!(matches!(t.put(&s, "k", &huge), Err(Error::TooLarge { .. })));
    // A record longer than a zone fails the commit, and nothing is applied.
    t.put(&s, "small", "v").expect("put");
    t.put(&s, vec![b'k'; 300 << 10], "v").expect("buffered");
    assert!(matches!(t.commit(), Err(Error::TooLarge { .. })));
    assert_eq!(db.get(&s, "small").expect("get"), None);
    // Values stored out of line commit with the rest.
    let big = vec![7u8; 1 << 20];
    let mut t = db.begin_pessimistic(pess());
    t.put(&s, "big", &big).expect("put");
    t.put(&s, "small", "v").expect("put");
    t.commit().expect("commit");
    assert_eq!(db.get(&s, "big").expect("get"), Some(big));
}

#[test]
fn a_conflicting_commit_gives_back_the_zones_of_its_long_values() {
    let (db, s) = open();
    db.put(&s, "x", "1").expect("put");
    let before = db.stats().blob_zones;
    let mut t = db.begin_optimistic();
    t.get_for_update(&s, "x").expect("get");
    t.put(&s, "big", vec![3u8; 1 << 20]).expect("put");
    db.put(&s, "x", "2").expect("put");
    assert!(matches!(t.commit(), Err(Error::Conflict { .. })));
    assert_eq!(db.get(&s, "big").expect("get"), None);
    let start = std::time::Instant::now();
    while db.stats().blob_zones != before {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            db.stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_conflict_with_a_version_spilled_to_disk_is_found() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut o = sim();
    o.disk_dir = Some(dir.path().to_path_buf());
    let db = Db::open(o).expect("open");
    let s = db.subtable("t").expect("subtable");
    db.put(&s, "x", "1").expect("put");
    let mut t = db.begin_optimistic();
    t.get_for_update(&s, "x").expect("get");
    let mut quiet = db.begin_optimistic();
    quiet.get_for_update(&s, "y").expect("get");
    db.put(&s, "x", "2").expect("put");
    db.flush().expect("flush");
    assert!(db.stats().disk.expect("disk").spills > 0);
    assert!(matches!(t.commit(), Err(Error::Conflict { .. })));
    // A key untouched since the snapshot, whose versions are all on disk, commits.
    quiet.put(&s, "y", "1").expect("put");
    quiet.commit().expect("no conflict");
}

/// Increments one counter from many threads, retrying conflicts: the total must be exact.
fn counter(db: &Db, s: &Subtable, pessimistic: Option<bool>, threads: u64, each: u64) -> u64 {
    let retries = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for th in 0..threads {
            let retries = &retries;
            sc.spawn(move || {
                for i in 0..each {
                    loop {
                        let mine = pessimistic.unwrap_or((th + i) % 2 == 0);
                        let mut t = if mine {
                            db.begin_pessimistic(TxnOptions {
                                lock_timeout: Some(Duration::from_secs(30)),
                                deadlock_detect: true,
                            })
                        } else {
                            db.begin_optimistic()
                        };
                        let n = match t.get_for_update(s, "counter").expect("get") {
                            Some(v) => u64::from_le_bytes(v.try_into().expect("8 bytes")),
                            None => 0,
                        };
                        t.put(s, "counter", (n + 1).to_le_bytes()).expect("put");
                        match t.commit() {
                            Ok(()) => break,
                            Err(Error::Conflict { .. }) => {
                                retries.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    let v = db.get(s, "counter").expect("get").expect("counter");
    u64::from_le_bytes(v.try_into().expect("8 bytes"))
}

#[test]
fn no_update_is_lost_on_a_contended_counter() {
    for kind in [Some(false), Some(true), None] {
        let (db, s) = open();
        assert_eq!(counter(&db, &s, kind, 8, 200), 1600, "{kind:?}");
        assert_eq!(db.stats().locked_keys, 0);
    }
}

#[test]
fn without_the_conflict_check_updates_are_lost() {
    let mut o = sim();
    o.inject = Some(Inject::SkipConflictCheck);
    let db = Db::open(o).expect("open");
    // Optimistic transactions read at their snapshot: without the check, concurrent
    // increments overwrite each other. Threads may happen not to overlap in one round (a
    // loaded machine runs them one after another): rounds go on until an update is lost.
    let lost = (0..20).any(|round| {
        let s = db.subtable(&format!("t{round}")).expect("subtable");
        counter(&db, &s, Some(false), 8, 200) < 1600
    });
    assert!(lost, "no update lost without the check in 20 rounds");
}

const ACCOUNTS: u64 = 40;
const OPENING: i64 = 1000;

fn account(i: u64) -> Vec<u8> {
    format!("acct{i:03}").into_bytes()
}

fn balance(v: Option<Vec<u8>>) -> i64 {
    i64::from_le_bytes(v.expect("account").try_into().expect("8 bytes"))
}

/// Transfers between accounts spread over two subtables from many threads while auditors
/// sum every balance at a snapshot; returns (transfers committed, audits that found the
/// total wrong).
fn bank(db: &Db, kinds: &[bool], threads: u64, each: u64) -> (u64, u64) {
    let subs = [
        db.subtable("bank0").expect("subtable"),
        db.subtable("bank1").expect("subtable"),
    ];
    let sub = |i: u64| &subs[(i % 2) as usize];
    for i in 0..ACCOUNTS {
        db.put(sub(i), account(i), OPENING.to_le_bytes())
            .expect("open account");
    }
    let done = AtomicU64::new(0);
    let bad = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let mut writers = Vec::new();
        for th in 0..threads {
            let (done, subs) = (&done, &subs);
            let _ = subs;
            writers.push(sc.spawn(move || {
                let mut rng = SplitMix64::new(th + 1);
                for i in 0..each {
                    let (a, b) = (rng.next_u64() % ACCOUNTS, rng.next_u64() % ACCOUNTS);
                    if a == b {
                        continue;
                    }
                    let amount = (rng.next_u64() % 50) as i64;
                    loop {
                        let pess = kinds[((th + i) % kinds.len() as u64) as usize];
                        let mut t = if pess {
                            db.begin_pessimistic(TxnOptions {
                                lock_timeout: Some(Duration::from_secs(30)),
                                deadlock_detect: true,
                            })
                        } else {
                            db.begin_optimistic()
                        };
                        let r = (|| {
                            let x = balance(t.get_for_update(sub(a), account(a))?);
                            let y = balance(t.get_for_update(sub(b), account(b))?);
                            t.put(sub(a), account(a), (x - amount).to_le_bytes())?;
                            t.put(sub(b), account(b), (y + amount).to_le_bytes())?;
                            Ok::<(), Error>(())
                        })();
                        let r = r.and_then(|()| t.commit());
                        match r {
                            Ok(()) => {
                                done.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            Err(Error::Conflict { .. } | Error::Deadlock { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            }));
        }
        for _ in 0..2 {
            let (bad, stop) = (&bad, &stop);
            sc.spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    let t = db.begin_optimistic();
                    let total: i64 = (0..ACCOUNTS)
                        .map(|i| balance(t.get(sub(i), account(i)).expect("get")))
                        .sum();
                    if total != OPENING * ACCOUNTS as i64 {
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        for w in writers {
            w.join().expect("writer");
        }
        stop.store(true, Ordering::Release);
    });
    let total: i64 = (0..ACCOUNTS)
        .map(|i| balance(db.get(sub(i), account(i)).expect("get")))
        .sum();
    if total != OPENING * ACCOUNTS as i64 {
        bad.fetch_add(1, Ordering::Relaxed);
    }
    (done.into_inner(), bad.into_inner())
}

#[test]
fn bank_transfers_keep_the_total_constant_under_optimistic_transactions() {
    let (db, _) = open();
    let (done, bad) = bank(&db, &[false], 8, 300);
    assert!(done > 2000, "{done}");
    assert_eq!(bad, 0);
}

#[test]
fn bank_transfers_keep_the_total_constant_under_pessimistic_transactions() {
    let (db, _) = open();
    let (done, bad) = bank(&db, &[true], 8, 300);
    assert!(done > 2000, "{done}");
    assert_eq!(bad, 0);
    assert_eq!(db.stats().locked_keys, 0);
}

#[test]
fn bank_transfers_keep_the_total_constant_with_both_kinds_at_once() {
    let (db, _) = open();
    let (_, bad) = bank(&db, &[true, false], 8, 300);
    assert_eq!(bad, 0);
}

#[test]
fn without_the_conflict_check_the_bank_loses_money() {
    let mut o = sim();
    o.inject = Some(Inject::SkipConflictCheck);
    let db = Db::open(o).expect("open");
    // As above: rounds (each opens the accounts again) until a total comes out wrong.
    let lost = (0..20).any(|_| bank(&db, &[false], 8, 300).1 > 0);
    assert!(
        lost,
        "the total stayed constant without the check in 20 rounds"
    );
}

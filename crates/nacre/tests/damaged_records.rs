//! A byte of a record damaged while the database is open (a failing DIMM, a stray write):
//! every read of that key fails with `Corrupt`, never returns wrong bytes, and every other key
//! still reads. The pool file is changed behind the engine's back through the file, which the
//! `emulated` backend maps shared.

use std::os::unix::fs::FileExt;
use std::path::Path;

use nacre::{Db, Error, IterOptions, Options};
use nacre_pmem::Backend;

const KEYS: u32 = 200;
/// Record header: seq u64 | klen u32 | vlen u32 | kind u8 | pad[3] | crc u32.
const HEADER: u64 = 24;

fn open(path: &Path, verify: bool) -> Db {
    let mut o = small_opts(path);
    o.verify_checksums = verify;
    Db::open(o).expect("open")
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let mut v = format!("<value of {i:05}>").into_bytes();
    v.resize(300, b'a' + (i % 26) as u8);
    v
}

/// Where the value of key `i` starts in the pool file (it is written once, so found once).
fn value_offset(path: &Path, i: u32) -> u64 {
    let bytes = std::fs::read(path).expect("read pool");
    let needle = format!("<value of {i:05}>").into_bytes();
    let hits: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == &needle[..])
        .map(|(at, _)| at)
        .collect();
    assert_eq!(hits.len(), 1, "value {i} found {} times", hits.len());
    hits[0] as u64
}

fn flip(path: &Path, at: u64, mask: u8) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open pool file");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).expect("read byte");
    b[0] ^= mask;
    f.write_all_at(&b, at).expect("write byte");
}

fn fill(db: &Db) -> nacre::Subtable {
    let t = db.subtable("t").expect("subtable");
    for i in 0..KEYS {
        db.put(&t, key(i), value(i)).expect("put");
    }
    t
}

/// Every read path on key `bad` fails with `Corrupt`; every other key reads its value.
fn assert_only_key_fails(db: &Db, t: &nacre::Subtable, bad: u32, total: u32, what: &str) {
    let is_corrupt = |r: &Error| matches!(r, Error::Corrupt { .. });
    match db.get(t, key(bad)) {
        Err(e) => assert!(is_corrupt(&e), "{what}: get gave {e}"),
        Ok(v) => panic!("{what}: get returned {:?}", v.map(|v| v.len())),
    }
    let snap = db.snapshot();
    assert!(db.get_at(t, key(bad), &snap).is_err(), "{what}: get_at");
    for reverse in [false, true] {
        let mut seen = 0;
        let mut failed = 0;
        for row in db
            .iter(
                t,
                IterOptions {
                    reverse,
                    ..IterOptions::default()
                },
            )
            .expect("iter")
        {
            match row {
                Ok((k, v)) => {
                    assert_ne!(k, key(bad), "{what}: a scan returned the damaged key");
                    let i: u32 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                    assert_eq!(v, value(i), "{what}: key {i} in a scan");
                    seen += 1;
                }
                Err(e) => {
                    assert!(is_corrupt(&e), "{what}: scan gave {e}");
                    failed += 1;
                }
            }
        }
        assert_eq!((seen, failed), (total - 1, 1), "{what}, reverse {reverse}");
    }
    for i in (0..total).filter(|&i| i != bad) {
        assert_eq!(
            db.get(t, key(i)).expect("get"),
            Some(value(i)),
            "{what}: key {i}"
        );
    }
}

#[test]
fn a_damaged_value_key_or_length_fails_its_key_alone() {
    // (which key, where relative to its value's first byte, xor mask, what it is)
    let cases: [(u32, i64, u8, &str); 6] = [
        (17, 0, 0x01, "first value byte"),
        (42, 299, 0x80, "last value byte"),
        (63, -1, 0x20, "last key byte"),
        (88, -8, 0x01, "first key byte"),
        (
            120,
            -8 - HEADER as i64 + 14,
            0x01,
            "value length, third byte (x65536)",
        ),
        (150, -8 - HEADER as i64 + 20, 0xff, "record crc"),
    ];
    for (i, rel, mask, what) in cases {
        let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
        let path = dir.path().join("db.pool");
        let db = open(&path, true);
        let t = fill(&db);
        let at = (value_offset(&path, i) as i64 + rel) as u64;
        flip(&path, at, mask);
        assert_only_key_fails(&db, &t, i, KEYS, what);
        drop(db);
    }
}

#[test]
fn a_length_damaged_to_beyond_its_zone_is_an_error_even_unverified() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let db = open(&path, false);
    let t = fill(&db);
    // The value length's top byte: 300 becomes 300 + 2^24 bytes, past any zone.
    let at = value_offset(&path, 9) - 8 - HEADER + 15;
    flip(&path, at, 0x01);
    match db.get(&t, key(9)) {
        Err(Error::Corrupt { what, at: Some(_) }) => assert!(what.contains("overruns"), "{what}"),
        other => panic!("{:?}", other.map(|v| v.map(|v| v.len()))),
    }
    assert_eq!(db.get(&t, key(10)).unwrap(), Some(value(10)));
}

#[test]
fn verification_off_is_what_it_says() {
    // Off, a damaged value byte is returned as it is in PM: the option is only for runs that
    // say they measure without checks.
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let db = open(&path, false);
    let t = fill(&db);
    flip(&path, value_offset(&path, 5), 0x01);
    let got = db.get(&t, key(5)).unwrap().unwrap();
    assert_ne!(got, value(5));
}

/// Writes `n` more keys (from `KEYS` on) so the first ones are sealed and merged into the
/// Global Index.
fn push_out(db: &Db, t: &nacre::Subtable, n: u32) {
    for i in KEYS..KEYS + n {
        db.put(t, key(i), value(i)).expect("put");
    }
}

#[test]
fn a_pool_with_a_damaged_value_opens_and_fails_only_that_key() {
    for merged in [false, true] {
        let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
        let path = dir.path().join("db.pool");
        let db = open(&path, true);
        let t = fill(&db);
        if merged {
            push_out(&db, &t, 6000);
        }
        let at = value_offset(&path, 33) + 100;
        drop(db);
        flip(&path, at, 0x04);
        let db = open(&path, true);
        assert_eq!(db.recovery_report().damaged_records, 1, "merged {merged}");
        let t = db.subtable("t").unwrap();
        let total = if merged { KEYS + 6000 } else { KEYS };
        if merged {
            let gi: u64 = db.stats().subtables.iter().map(|s| s.gi_keys).sum();
            assert!(gi > 0, "nothing was merged");
        }
        assert_only_key_fails(&db, &t, 33, total, "after reopen");
        db.check().expect("consistent");
        // The key can be written again, and then reads its new value.
        db.put(&t, key(33), b"fresh").unwrap();
        assert_eq!(db.get(&t, key(33)).unwrap().as_deref(), Some(&b"fresh"[..]));
    }
}

#[test]
fn the_cleaner_leaves_a_zone_with_a_damaged_live_value_alone() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let db = open(&path, true);
    let t = fill(&db);
    push_out(&db, &t, 6000);
    flip(&path, value_offset(&path, 21) + 7, 0x10);
    // Overwrite everything else once: the damaged record's zone holds one live record among
    // dead ones. Then add new keys until the pool is tight: the cleaner frees the dead zones
    // first and must then move that zone's one live record, the damaged one.
    for i in (0..KEYS + 6000).filter(|&i| i != 21) {
        db.put(&t, key(i), value(i)).expect("overwrite");
    }
    let mut damaged_zones = 0;
    let mut n = KEYS + 6000;
    while damaged_zones == 0 && n < KEYS + 100_000 {
        match db.put(&t, key(n), value(n)) {
            Ok(()) => n += 1,
            Err(Error::PoolFull { .. }) => break,
            Err(e) => panic!("{e}"),
        }
        if n % 256 == 0 {
            damaged_zones = db.stats().damaged_zones;
        }
    }
    damaged_zones = db.stats().damaged_zones;
    assert_eq!(damaged_zones, 1, "{:#?}", db.stats());
    assert!(db.stats().cleaner_zones_freed > 0);
    assert!(matches!(db.get(&t, key(21)), Err(Error::Corrupt { .. })));
    assert_eq!(db.get(&t, key(20)).unwrap(), Some(value(20)));
    db.check().expect("consistent");
}

#[test]
fn a_pool_with_a_damaged_key_refuses_to_open_with_a_typed_error() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let db = open(&path, true);
    fill(&db);
    let at = value_offset(&path, 44) - 3;
    drop(db);
    flip(&path, at, 0x01);
    match Db::open(small_opts(&path)) {
        Err(Error::Corrupt { what, at: Some(_) }) => {
            assert!(what.contains("identity"), "{what}")
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

fn small_opts(path: &Path) -> Options {
    let mut o = Options::new(path).backend(Backend::Emulated);
    o.pool_size = 16 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o.recovery_threads = 2;
    o
}

#[test]
fn a_damaged_blob_descriptor_fails_its_key_and_frees_nothing_on_open() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let db = open(&path, true);
    let t = fill(&db);
    let big = vec![0x5au8; 600 << 10];
    db.put(&t, b"the-blob-key", &big).unwrap();
    let free_before = db.stats().zones_free;
    drop(db);
    // The descriptor is the record's value, right after the key.
    let bytes = std::fs::read(&path).unwrap();
    let k = b"the-blob-key";
    let hits: Vec<usize> = bytes
        .windows(k.len())
        .enumerate()
        .filter(|(_, w)| *w == &k[..])
        .map(|(at, _)| at)
        .collect();
    assert_eq!(hits.len(), 1);
    flip(&path, (hits[0] + k.len() + 9) as u64, 0x01);
    let db = open(&path, true);
    let rep = db.recovery_report();
    assert_eq!(rep.damaged_records, 1);
    assert!(rep.quarantined_zones >= 3, "{rep:?}");
    assert!(
        db.stats().zones_free <= free_before,
        "the blob's zones were freed"
    );
    let t = db.subtable("t").unwrap();
    assert!(matches!(
        db.get(&t, b"the-blob-key"),
        Err(Error::Corrupt { .. })
    ));
    for i in 0..KEYS {
        assert_eq!(db.get(&t, key(i)).unwrap(), Some(value(i)));
    }
    db.check().expect("consistent");
}

#[test]
fn verify_reads_everything_and_reports_exactly_what_is_damaged() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let db = open(&path, true);
    let t = fill(&db);
    push_out(&db, &t, 3000);
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    db.put(&t, b"big", &big).unwrap();
    let whole = db.verify();
    assert!(whole.problems.is_empty(), "{:#?}", whole.problems);
    assert!(whole.records >= u64::from(KEYS + 3000), "{whole:?}");
    assert_eq!((whole.blobs, whole.blob_bytes), (1, big.len() as u64));
    assert!(whole.bytes > 3000 * 300 && whole.gb_per_sec() > 0.0);

    // A damaged value and a damaged byte of the blob.
    flip(&path, value_offset(&path, 77) + 3, 0x02);
    let bytes = std::fs::read(&path).unwrap();
    let blob_at = bytes
        .windows(64)
        .position(|w| w == &big[1000..1064])
        .expect("blob bytes");
    flip(&path, blob_at as u64, 0x40);
    let rep = db.verify();
    assert_eq!(rep.problems.len(), 2, "{:#?}", rep.problems);
    let p = rep
        .problems
        .iter()
        .find(|p| p.key.is_some())
        .expect("the record");
    assert_eq!(p.key.as_deref(), Some(&key(77)[..]));
    assert_eq!(p.subtable.as_deref(), Some("t"));
    assert!(
        rep.problems.iter().any(|p| p.what.contains("blob")),
        "{:#?}",
        rep.problems
    );
    // Nothing was changed: the damaged reads still fail, the rest still read.
    assert!(matches!(db.get(&t, key(77)), Err(Error::Corrupt { .. })));
    assert!(matches!(db.get(&t, b"big"), Err(Error::Corrupt { .. })));
    assert_eq!(db.get(&t, key(78)).unwrap(), Some(value(78)));
}

//! Damage to what a disk-levels tree opens from: `current` (the version's id and the xxh3-128
//! of its file) and the version file `v<N>` (lsm-tree's list of levels, runs and tables, each
//! table with its checksum and its `global_seqno`). lsm-tree 3.1.10 records the checksum but
//! does not check it, and a flipped `global_seqno` shifts every sequence number of a table so
//! that its keys read as missing. Every flipped byte must fail the open with `Corrupt` naming
//! the file, or leave every key reading back exactly; `Db::verify` must name a version file
//! damaged while the database is open; a salvage open loses only the damaged tree's
//! subtable, which a normal open serves again once the file is repaired; and with Nacre's
//! check switched off (`RecoveryMutation::SkipDiskVersionCheck`) some flip hides keys.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nacre::{Db, Error, IterOptions, Options, RecoveryMutation};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions, SplitMix64};

const SUBTABLES: [&str; 2] = ["a", "b"];
const KEYS: u64 = 1200;

fn opts(disk: &Path) -> Options {
    let mut o = Options::new("sim").backend(Backend::Sim);
    o.pool_size = 3 << 20;
    o.zone_size = 64 << 10;
    o.memtable_size = 128 << 10;
    o.gi_size_limit = 256 << 10;
    o.recovery_threads = 1;
    o.disk_dir = Some(disk.to_path_buf());
    o
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A closed database whose data lies in the disk levels, spilled in several rounds (so each
/// tree's version lists several tables), and what it holds.
struct Spilled {
    dir: tempfile::TempDir,
    image: Vec<u8>,
    model: Vec<BTreeMap<Vec<u8>, Vec<u8>>>,
    /// The work copy may differ from the pristine disk levels.
    stale: std::cell::Cell<bool>,
}

impl Spilled {
    fn disk(&self) -> PathBuf {
        self.dir.path().join("disk")
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn new() -> Spilled {
        let dir = tempfile::tempdir().expect("dir");
        let disk = dir.path().join("disk");
        let db = Db::open(opts(&disk)).expect("open");
        let subs: Vec<_> = SUBTABLES
            .iter()
            .map(|n| db.subtable(n).expect("subtable"))
            .collect();
        let mut model = vec![BTreeMap::new(); SUBTABLES.len()];
        let mut rng = SplitMix64::new(25);
        for round in 0..4 {
            for _ in 0..600 {
                for (s, m) in subs.iter().zip(model.iter_mut()) {
                    let k = key(rng.next_u64() % KEYS);
                    if round > 0 && rng.next_u64() % 5 == 0 {
                        db.delete(s, &k).expect("delete");
                        m.remove(&k);
                    } else {
                        let v = format!("r{round}-{}", rng.next_u64()).into_bytes();
                        db.put(s, &k, &v).expect("put");
                        m.insert(k, v);
                    }
                }
            }
            // Every round's writes go to disk: the keys live only in the tables.
            db.flush().expect("flush");
        }
        let sim = db.sim().expect("sim");
        db.close().expect("close");
        let image = sim.crash(CrashPolicy::KeepNone);
        Spilled {
            dir,
            image,
            model,
            stale: std::cell::Cell::new(true),
        }
    }

    /// Opens a copy of the database whose disk levels are `work()`: a copy of the pristine
    /// ones, with `damage` applied to the file `file` in it.
    fn open_copy(
        &self,
        o: Options,
        file: &str,
        damage: impl FnOnce(&mut Vec<u8>),
    ) -> nacre::Result<Db> {
        let work = self.work();
        // A failed open leaves the copy as it was, but for the damaged file: restore only that
        // one (copying every table each time is most of the test's time); an open that went
        // on may have changed anything (lsm-tree deletes what its version does not name).
        if self.stale.get() || listing(&work) != listing(&self.disk()) {
            if work.exists() {
                std::fs::remove_dir_all(&work).expect("remove the work copy");
            }
            copy_dir(&self.disk(), &work);
            self.stale.set(false);
        }
        let path = work.join(file);
        let mut b = std::fs::read(self.disk().join(file)).expect("read");
        damage(&mut b);
        std::fs::write(&path, &b).expect("write");
        let pool = Pool::open_sim(self.image.clone(), &PoolOptions::with_backend(Backend::Sim))
            .expect("image");
        let mut o = o;
        o.disk_dir = Some(work);
        // Until it fails cleanly, the open may change anything (or panic).
        self.stale.set(true);
        let opened = Db::open_pool(pool, o);
        if opened.is_err() {
            std::fs::copy(self.disk().join(file), &path).expect("restore");
            self.stale.set(false);
        }
        opened
    }
}

/// Every key of every subtable, by get and by a scan: `None` if all read back exactly,
/// else the first difference. A read error counts as a difference.
fn difference(db: &Db, model: &[BTreeMap<Vec<u8>, Vec<u8>>]) -> Option<String> {
    for (name, m) in SUBTABLES.iter().zip(model) {
        let t = db.subtable(name).expect("subtable");
        for i in 0..KEYS {
            let k = key(i);
            match db.get(&t, &k) {
                Ok(v) if v.as_ref() == m.get(&k) => {}
                Ok(v) => {
                    return Some(format!(
                        "{name}/k{i:05} reads {:?}, wrote {:?}",
                        v.map(|v| String::from_utf8_lossy(&v).into_owned()),
                        m.get(&k).map(|v| String::from_utf8_lossy(v).into_owned())
                    ))
                }
                Err(e) => return Some(format!("{name}/k{i:05}: read error {e}")),
            }
        }
        let rows: Result<Vec<(Vec<u8>, Vec<u8>)>, _> =
            db.iter(&t, IterOptions::default()).expect("iter").collect();
        match rows {
            Ok(rows) if rows.iter().cloned().eq(m.clone()) => {}
            Ok(rows) => {
                return Some(format!(
                    "{name}: a scan reads {} rows, wrote {}",
                    rows.len(),
                    m.len()
                ))
            }
            Err(e) => return Some(format!("{name}: scan error {e}")),
        }
    }
    None
}

/// Every file under `dir` with its length (empty if it is missing).
fn listing(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd {
        let e = e.expect("entry");
        let m = e.metadata().expect("metadata");
        if m.is_dir() {
            let sub = Path::new(&e.file_name()).to_path_buf();
            out.extend(
                listing(&e.path())
                    .into_iter()
                    .map(|(p, l)| (sub.join(p), l)),
            );
        } else {
            out.push((e.file_name().into(), m.len()));
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dest = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy");
        }
    }
}

/// The version file `current` names in a tree's directory (relative to the disk levels).
fn version_file(disk: &Path, tree: &str) -> String {
    let cur = std::fs::read(disk.join(tree).join("current")).expect("current");
    let id = u64::from_le_bytes(cur[..8].try_into().expect("8 bytes"));
    format!("{tree}/v{id}")
}

fn tree_name(tree: &Path) -> String {
    tree.file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned()
}

/// What each byte of a version file is, from its sfa table of contents and lsm-tree
/// 3.1.10's encoding of the `tables` section (level count u8; per level a run count u8; per
/// run a table count u32 and per table its id u64, checksum type u8, checksum u128 and
/// `global_seqno` u64).
fn classes(path: &Path) -> Vec<&'static str> {
    let len = std::fs::metadata(path).expect("len").len() as usize;
    let mut class = vec!["sfa toc and trailer"; len];
    let reader = sfa::Reader::new(path).expect("an sfa archive");
    for s in reader.toc().iter() {
        let what = match s.name() {
            b"tables" => "tables section",
            b"blob_files" => "blob files section",
            b"blob_gc_stats" => "blob gc section",
            _ => "header sections",
        };
        for c in &mut class[s.pos() as usize..(s.pos() + s.len()) as usize] {
            *c = what;
        }
    }
    let tables = reader.toc().section(b"tables").expect("tables section");
    let bytes = std::fs::read(path).expect("read");
    let mut at = tables.pos() as usize;
    let mut mark = |at: &mut usize, n: usize, what: &'static str| {
        for c in &mut class[*at..*at + n] {
            *c = what;
        }
        *at += n;
    };
    let levels = bytes[at];
    mark(&mut at, 1, "level count");
    for _ in 0..levels {
        let runs = bytes[at];
        mark(&mut at, 1, "run count");
        for _ in 0..runs {
            let n = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
            mark(&mut at, 4, "table count");
            for _ in 0..n {
                mark(&mut at, 8, "table id");
                mark(&mut at, 1, "table checksum type");
                mark(&mut at, 16, "table checksum");
                mark(&mut at, 8, "table global_seqno");
            }
        }
    }
    assert_eq!(
        at as u64,
        tables.pos() + tables.len(),
        "tables section parsed"
    );
    class
}

/// What one flip did.
enum Outcome {
    /// The open failed with this error.
    Refused(Error),
    /// Every key read back exactly.
    Exact,
    /// The open succeeded and a key read back wrong, missing or failing.
    Wrong(String),
    /// The open or a read panicked.
    Panicked(String),
}

fn flip(s: &Spilled, o: &Options, file: &str, at: usize, mask: u8) -> Outcome {
    let run = || match s.open_copy(o.clone(), file, |b| b[at] ^= mask) {
        Err(e) => Outcome::Refused(e),
        Ok(db) => match difference(&db, &s.model) {
            None => Outcome::Exact,
            Some(d) => Outcome::Wrong(d),
        },
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Outcome::Panicked(msg)
    })
}

/// Bytes of the newest version file and of `current` of each tree, flipped one at a time
/// (the mask varies with the position so that each field sees low and high bits).
fn every_flip(s: &Spilled, o: &Options) -> Vec<(String, usize, &'static str, Outcome)> {
    let mut out = Vec::new();
    for tree in SUBTABLES
        .iter()
        .enumerate()
        .map(|(i, _)| format!("subtable-{}", i + 1))
    {
        let v = version_file(&s.disk(), &tree);
        let class = classes(&s.disk().join(&v));
        let current = format!("{tree}/current");
        let cur_class = |at: usize| match at {
            0..8 => "current: version id",
            8..24 => "current: checksum",
            _ => "current: checksum type",
        };
        let targets = class
            .iter()
            .enumerate()
            .map(|(at, c)| (v.clone(), at, *c))
            .chain((0..25).map(|at| (current.clone(), at, cur_class(at))));
        // Every byte of every field, but only every 7th of the long uniform runs (the sfa table
        // of contents and trailer, the tables' own checksums), which would be most of the run.
        let sampled = |at: usize, what: &str| {
            !matches!(what, "sfa toc and trailer" | "table checksum") || at % 7 == 0
        };
        for (file, at, what) in targets.filter(|(_, at, what)| sampled(*at, what)) {
            let mask = [0x80, 0x01, 0xff, 0x10][at % 4];
            let outcome = flip(s, o, &file, at, mask);
            out.push((file, at, what, outcome));
        }
    }
    out
}

#[test]
fn a_flipped_byte_in_a_version_file_or_current_fails_the_open_naming_the_file() {
    let s = Spilled::new();
    let o = opts(&s.disk());
    {
        let db = s
            .open_copy(o.clone(), "NACRE-DISK-ID", |_| {})
            .expect("undamaged open");
        assert_eq!(difference(&db, &s.model), None, "undamaged");
        assert!(db.verify().problems.is_empty(), "{:?}", db.verify());
    }
    let outcomes = every_flip(&s, &o);
    let mut per_class: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    let mut bad = Vec::new();
    for (file, at, what, outcome) in &outcomes {
        let c = per_class.entry(what).or_default();
        match outcome {
            Outcome::Refused(Error::Corrupt { what: w, .. })
                if w.contains(&s.work().join(file).display().to_string()) =>
            {
                c.0 += 1
            }
            Outcome::Exact => c.1 += 1,
            Outcome::Refused(e) => bad.push(format!("{file} byte {at} ({what}): refused with {e}")),
            Outcome::Wrong(d) => bad.push(format!("{file} byte {at} ({what}): opened, {d}")),
            Outcome::Panicked(p) => bad.push(format!("{file} byte {at} ({what}): panicked: {p}")),
        }
    }
    eprintln!("per class (refused naming the file, read back exactly): {per_class:?}");
    assert!(
        per_class.contains_key("table global_seqno") && per_class.contains_key("table id"),
        "the flips covered the tables: {per_class:?}"
    );
    assert!(
        bad.is_empty(),
        "{} of {} flips neither failed the open with Corrupt naming the file nor read back \
         exactly:\n{}",
        bad.len(),
        outcomes.len(),
        bad.join("\n")
    );
}

/// Mutation check: with Nacre's version check switched off, some flip (a table's
/// `global_seqno`) opens the database and hides keys without an error.
#[test]
fn without_the_version_check_a_flipped_global_seqno_hides_keys() {
    let s = Spilled::new();
    let mut o = opts(&s.disk());
    o.recovery_mutation = Some(RecoveryMutation::SkipDiskVersionCheck);
    let v = version_file(&s.disk(), "subtable-1");
    let class = classes(&s.disk().join(&v));
    let mut silent = None;
    for at in (0..class.len()).filter(|&at| class[at] == "table global_seqno") {
        if let Outcome::Wrong(d) = flip(&s, &o, &v, at, 0x80) {
            silent = Some(format!("{v} byte {at}: {d}"));
            break;
        }
    }
    let silent = silent.expect("some flipped global_seqno hides keys without the check");
    eprintln!("without the check: {silent}");
}

/// A version file, or `current`, damaged while the database is open: `Db::verify` names it.
#[test]
fn verify_names_a_version_file_damaged_after_open() {
    let s = Spilled::new();
    let db = s
        .open_copy(opts(&s.disk()), "NACRE-DISK-ID", |_| {})
        .expect("open");
    assert!(db.verify().problems.is_empty(), "{:?}", db.verify());
    let work = s.work();
    let flip_at = |path: &Path, at: usize, mask: u8| {
        let mut b = std::fs::read(path).expect("read");
        b[at] ^= mask;
        std::fs::write(path, &b).expect("write");
    };
    // A compaction may replace a tree's version (and write a new file and `current`) at any
    // moment, which undoes the damage: then damage the new one.
    let verified = |damage: &dyn Fn() -> (PathBuf, Vec<u8>)| {
        for _ in 0..20 {
            let (path, damaged) = damage();
            let rep = db.verify();
            let tree = path.parent().expect("tree");
            let named = version_file(tree.parent().expect("disk"), &tree_name(tree));
            let current =
                path.ends_with("current") || tree.parent().expect("disk").join(named) == path;
            if std::fs::read(&path).ok() != Some(damaged) || !current {
                continue;
            }
            return (path, rep);
        }
        panic!("compactions replaced the damaged file every time");
    };
    let (path, rep) = verified(&|| {
        let path = work.join(version_file(&work, "subtable-2"));
        let at = classes(&path)
            .iter()
            .position(|c| *c == "table global_seqno")
            .expect("a table");
        flip_at(&path, at + 7, 0x40);
        let damaged = std::fs::read(&path).expect("read");
        (path, damaged)
    });
    let name = path.display().to_string();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.what.contains(&name) && p.subtable.as_deref() == Some("b")),
        "verify names {name}: {:?}",
        rep.problems
    );
    let (cur, rep) = verified(&|| {
        let cur = work.join("subtable-1").join("current");
        flip_at(&cur, 12, 0x01);
        (cur.clone(), std::fs::read(&cur).expect("read"))
    });
    assert!(
        rep.problems
            .iter()
            .any(|p| p.what.contains(&cur.display().to_string())
                && p.subtable.as_deref() == Some("a")),
        "verify names {}: {:?}",
        cur.display(),
        rep.problems
    );
}

fn open_image(image: Vec<u8>, o: Options) -> nacre::Result<Db> {
    let pool = Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("image");
    Db::open_pool(pool, o)
}

/// A salvage open with a damaged version file (or `current`) in subtable `a`'s tree: the
/// open without salvage fails; with it, `a` is lost (refused by name, reported with the
/// damaged file) and nothing is freed, while `b` serves exactly what it held and takes
/// writes, across salvage reopens; once the file is repaired, a normal open serves both
/// exactly, the writes included.
#[test]
fn a_salvage_open_loses_only_the_subtable_whose_version_file_is_damaged() {
    let s = Spilled::new();
    let v = version_file(&s.disk(), "subtable-1");
    let class = classes(&s.disk().join(&v));
    let first = |what: &str| class.iter().position(|c| *c == what).expect(what);
    let targets = [
        (v.clone(), first("table global_seqno") + 7, 0x80),
        (v.clone(), first("table id"), 0x01),
        (v.clone(), first("level count"), 0x01),
        (v.clone(), class.len() - 1, 0x01),
        ("subtable-1/current".to_string(), 3, 0x01),
    ];
    let work = s.work();
    for (file, at, mask) in targets {
        let what = format!("{file} byte {at}");
        if work.exists() {
            std::fs::remove_dir_all(&work).expect("remove the work copy");
        }
        copy_dir(&s.disk(), &work);
        let path = work.join(&file);
        let mut b = std::fs::read(&path).expect("read");
        b[at] ^= mask;
        std::fs::write(&path, &b).expect("write");
        let mut o = opts(&work);
        match open_image(s.image.clone(), o.clone()) {
            Err(Error::Corrupt { .. }) => {}
            other => panic!("{what}: a normal open: {:?}", other.map(|_| ())),
        }
        o.salvage = true;
        let mut image = s.image.clone();
        let mut model = s.model.clone();
        for round in 0..2 {
            let db = open_image(image, o.clone()).expect("salvage open");
            let rep = db.recovery_report();
            assert_eq!(rep.lost.len(), 1, "{what}: {:?}", rep.lost);
            assert_eq!(rep.lost[0].name.as_deref(), Some("a"), "{what}");
            assert!(
                rep.lost[0].reason.contains(&path.display().to_string()),
                "{what}: {:?}",
                rep.lost[0]
            );
            assert_eq!(rep.released_zones, 0, "{what}: salvage freed zones");
            assert!(
                matches!(db.subtable("a"), Err(Error::Corrupt { .. })),
                "{what}: a is refused"
            );
            let t = db.subtable("b").expect("b");
            for (k, v) in &model[1] {
                assert_eq!(db.get(&t, k).expect("get").as_ref(), Some(v), "{what}");
            }
            let k = format!("after-salvage-{round}").into_bytes();
            db.put(&t, &k, b"written").expect("put");
            model[1].insert(k, b"written".to_vec());
            let sim = db.sim().expect("sim");
            db.close().expect("close");
            image = sim.crash(CrashPolicy::KeepNone);
        }
        // Repaired: everything is back, the writes made meanwhile included.
        std::fs::copy(s.disk().join(&file), &path).expect("repair");
        o.salvage = false;
        let db = open_image(image, o).expect("open once repaired");
        assert!(db.recovery_report().lost.is_empty());
        assert_eq!(difference(&db, &model), None, "{what}: once repaired");
    }
}

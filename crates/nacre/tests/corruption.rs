//! A damaged pool never returns wrong data and never crashes the process (DESIGN §4.7).
//!
//! A database with several subtables, merged memtables, overwrites, deletes and blobs is
//! closed; then, one mutation at a time, a copy of its pool file gets one flipped bit (in the
//! pool superblock, the engine root, the Halloc registry and object pools, the memtable and
//! subtable objects, and the records in zones) or a zeroed page, and a child process opens it
//! and reads every key and every subtable in full. Each run must end in one of two ways: the
//! open fails with an error, or it succeeds and every read returns the right value or an
//! error. A wrong value, a missing or extra key, a panic, an abort or a hang fails the test.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nacre::{Db, IterOptions, Options, WriteBatch};
use nacre_pmem::{Backend, Pool, PoolOptions, SplitMix64};

const CHILD_ENV: &str = "NACRE_CORRUPTION_CHILD";
const SUBTABLES: [&str; 3] = ["alpha", "beta", "a-longer-subtable-name-of-40-bytes-exact"];

type Model = BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>;

fn opts(path: &Path) -> Options {
    let mut o = Options::new(path).backend(Backend::Emulated);
    o.pool_size = 12 << 20;
    o.zone_size = 128 << 10;
    o.memtable_size = 256 << 10;
    o.recovery_threads = 2;
    o
}

fn value(rng: &mut SplitMix64, tag: &str) -> Vec<u8> {
    let n = 20 + (rng.next_u64() % 500) as usize;
    let mut v = format!("<{tag}>").into_bytes();
    v.extend((0..n).map(|i| b'a' + ((i as u64 + rng.next_u64()) % 26) as u8));
    v
}

/// Builds the database at `path` and returns what it holds; closed cleanly, or left as a
/// process crash leaves it (`crash`: never closed, so the next open recovers the last run).
fn build(path: &Path, crash: bool) -> Model {
    assert_eq!(SUBTABLES[2].len(), 40);
    let db = Db::open(opts(path)).expect("open");
    let subs: Vec<_> = SUBTABLES.iter().map(|n| db.subtable(n).unwrap()).collect();
    let mut model = Model::new();
    let mut rng = SplitMix64::new(42);
    for round in 0..4 {
        let mut b = WriteBatch::new();
        for i in 0..1200u32 {
            let s = (i % 3) as usize;
            let k = format!("key{:05}", rng.next_u64() % 1500).into_bytes();
            if round > 0 && i % 11 == 0 {
                b.delete(&subs[s], &k);
                model.insert((SUBTABLES[s].to_string(), k), None);
            } else {
                let v = value(&mut rng, &format!("{round}.{i}"));
                b.put(&subs[s], &k, &v);
                model.insert((SUBTABLES[s].to_string(), k), Some(v));
            }
            if i % 40 == 39 {
                db.write(std::mem::take(&mut b)).expect("write");
            }
        }
        db.write(b).expect("write");
    }
    // Two values stored out of line (longer than an eighth of a zone).
    for (s, k) in [(0usize, "blob-a"), (1, "blob-b")] {
        let mut v = vec![0u8; 40_000];
        for (i, x) in v.iter_mut().enumerate() {
            *x = (i * 7 + s) as u8;
        }
        db.put(&subs[s], k, &v).unwrap();
        model.insert((SUBTABLES[s].to_string(), k.as_bytes().to_vec()), Some(v));
    }
    // Full memtables merge in the background: wait for the first merge rather than race it.
    let merged = || -> u64 { db.stats().subtables.iter().map(|s| s.gi_keys).sum() };
    let t = std::time::Instant::now();
    while merged() == 0 && t.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(merged() > 0, "nothing reached the Global Index");
    if crash {
        // Everything acknowledged is in the file (emulated: a shared mapping); the database
        // is never closed, as after a SIGKILL. Its threads idle until this process ends.
        let copy = path.with_extension("crashed");
        std::thread::sleep(Duration::from_millis(200));
        std::fs::copy(path, &copy).unwrap();
        std::mem::forget(db);
        std::fs::rename(&copy, path).unwrap();
    } else {
        db.close().expect("close");
    }
    model
}

fn save_model(model: &Model, path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    for ((s, k), v) in model {
        let v = v.as_deref().map_or("-".to_string(), hex);
        writeln!(f, "{s} {} {v}", hex(k)).unwrap();
    }
}

fn load_model(path: &Path) -> Model {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut p = l.split(' ');
            let s = p.next().unwrap().to_string();
            let k = unhex(p.next().unwrap());
            let v = p.next().unwrap();
            ((s, k), (v != "-").then(|| unhex(v)))
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Not a test on its own: the child's body, run only when the parent sets
/// `NACRE_CORRUPTION_CHILD=<pool path>|<model path>`. Prints `OPEN-ERR`, or `READ` with
/// counts, and one `WRONG` line per wrong answer.
#[test]
fn corruption_child_body() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (pool, model) = spec.split_once('|').expect("spec");
    let model = load_model(Path::new(model));
    let db = match Db::open(opts(Path::new(pool))) {
        Ok(db) => db,
        Err(e) => {
            println!("OPEN-ERR {e}");
            return;
        }
    };
    let rep = db.recovery_report();
    println!("OPENED clean={} rolled_back={}", rep.clean, rep.rolled_back);
    let (mut ok, mut err, mut wrong) = (0u64, 0u64, Vec::new());
    let names = db.subtables();
    for s in SUBTABLES {
        if !names.iter().any(|n| n == s) {
            wrong.push(format!("subtable {s} missing"));
        }
    }
    for n in &names {
        if !SUBTABLES.contains(&n.as_str()) && n != nacre::DEFAULT_SUBTABLE {
            wrong.push(format!("extra subtable {n:?}"));
        }
    }
    for s in SUBTABLES {
        let Ok(t) = db.subtable(s) else {
            err += 1;
            continue;
        };
        for ((ms, k), want) in model.range((s.to_string(), Vec::new())..) {
            if ms != s {
                break;
            }
            match db.get(&t, k) {
                Ok(got) if got == *want => ok += 1,
                Ok(got) => wrong.push(format!(
                    "get {s}/{}: {:?} bytes, want {:?}",
                    String::from_utf8_lossy(k),
                    got.map(|v| v.len()),
                    want.as_ref().map(|v| v.len())
                )),
                Err(_) => err += 1,
            }
        }
        let mut seen = BTreeMap::new();
        match db.iter(&t, IterOptions::default()) {
            Ok(it) => {
                for row in it {
                    match row {
                        Ok((k, v)) => {
                            seen.insert(k, v);
                        }
                        Err(_) => err += 1,
                    }
                }
            }
            Err(_) => err += 1,
        }
        for (k, v) in &seen {
            if model.get(&(s.to_string(), k.clone())) != Some(&Some(v.clone())) {
                wrong.push(format!(
                    "scan {s}: {:?} wrong or extra",
                    String::from_utf8_lossy(k)
                ));
            }
        }
        let present = model
            .range((s.to_string(), Vec::new())..)
            .take_while(|((ms, _), _)| ms == s)
            .filter(|(_, v)| v.is_some())
            .count();
        if seen.len() < present && err == 0 {
            wrong.push(format!(
                "scan {s}: {} rows of {present}, no error",
                seen.len()
            ));
        }
    }
    println!("READ ok={ok} err={err} wrong={}", wrong.len());
    for w in wrong {
        println!("WRONG {w}");
    }
}

/// One damaged copy: what the child said, or why it failed.
fn run_child(exe: &Path, pool: &Path, model: &Path) -> Result<String, String> {
    let mut child = Command::new(exe)
        .args([
            "corruption_child_body",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{}|{}", pool.display(), model.display()))
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if !status.success() {
                return Err(format!(
                    "child exited with {status}: {}{}",
                    text,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            return Ok(text);
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            return Err("child hung".into());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A mutation of the pool file (`what` names the place, for the failure report).
#[derive(Clone, Debug)]
#[allow(dead_code)]
enum Mutation {
    Flip { at: u64, bit: u8, what: String },
    Zero { at: u64, len: u64, what: String },
}

/// Regions of the pool file by name, and the superblock.
fn layout(path: &Path) -> Vec<(String, u64, u64)> {
    let pool = Pool::open(path, &PoolOptions::with_backend(Backend::Emulated)).expect("pool");
    let mut v = vec![("pool superblock".to_string(), 0, 16384)];
    v.extend(
        pool.regions()
            .into_iter()
            .map(|r| (r.name.clone(), r.offset.get(), r.len)),
    );
    v
}

fn mutations(golden: &[u8], regions: &[(String, u64, u64)], per_region: usize) -> Vec<Mutation> {
    let mut rng = SplitMix64::new(7);
    let mut out = Vec::new();
    for (name, off, len) in regions {
        let end = (off + len).min(golden.len() as u64);
        // Bytes in use: non-zero ones, and the zero bytes next to them (lengths, padding).
        let used: Vec<u64> = (*off..end)
            .filter(|&a| {
                let lo = a.saturating_sub(8) as usize;
                let hi = ((a + 8) as usize).min(golden.len());
                golden[lo..hi].iter().any(|&b| b != 0)
            })
            .collect();
        if used.is_empty() {
            continue;
        }
        let n = per_region.min(used.len());
        for i in 0..n {
            // Evenly over the used bytes, with a random bit.
            let at = used[i * used.len() / n];
            out.push(Mutation::Flip {
                at,
                bit: (rng.next_u64() % 8) as u8,
                what: format!("{name} +{}", at - off),
            });
        }
        // Zeroed pages: every used page of the metadata regions, a few of the zones.
        let mut pages: Vec<u64> = used.iter().map(|a| a / 4096 * 4096).collect();
        pages.dedup();
        let zones = name.contains("zones");
        let take = if zones {
            6.min(pages.len())
        } else {
            pages.len()
        };
        for i in 0..take {
            let p = pages[i * pages.len() / take];
            out.push(Mutation::Zero {
                at: p,
                len: 4096,
                what: format!("{name} page +{}", p - off),
            });
        }
    }
    out
}

fn suite(per_region: usize, crash: bool) {
    let exe = std::env::current_exe().expect("exe");
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let golden_path = dir.path().join("golden.pool");
    let model = build(&golden_path, crash);
    let model_path = dir.path().join("model.txt");
    save_model(&model, &model_path);
    let regions = layout(&golden_path);
    let golden = std::fs::read(&golden_path).unwrap();
    let muts = mutations(&golden, &regions, per_region);
    // Sanity: the undamaged pool reads back entirely.
    let clean = run_child(&exe, &golden_path, &model_path).expect("clean run");
    assert!(
        clean.contains("READ") && clean.contains("err=0 wrong=0"),
        "{clean}"
    );
    assert!(
        clean.contains(&format!("OPENED clean={}", !crash)),
        "{clean}"
    );

    let workers = 2;
    let chunks: Vec<Vec<Mutation>> = (0..workers)
        .map(|w| muts.iter().skip(w).step_by(workers).cloned().collect())
        .collect();
    let results: Vec<(usize, usize, Vec<String>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = chunks
            .into_iter()
            .enumerate()
            .map(|(w, chunk)| {
                let (exe, golden, model_path) = (&exe, &golden, &model_path);
                let path: PathBuf = dir.path().join(format!("work{w}.pool"));
                sc.spawn(move || {
                    let (mut refused, mut served, mut bad) = (0, 0, Vec::new());
                    for m in chunk {
                        let mut img = golden.clone();
                        match &m {
                            Mutation::Flip { at, bit, .. } => img[*at as usize] ^= 1 << bit,
                            Mutation::Zero { at, len, .. } => {
                                img[*at as usize..(*at + *len) as usize].fill(0)
                            }
                        }
                        std::fs::write(&path, &img).unwrap();
                        match run_child(exe, &path, model_path) {
                            Ok(out) if out.contains("OPEN-ERR") => refused += 1,
                            Ok(out) if out.contains("READ") && !out.contains("WRONG") => {
                                served += 1
                            }
                            Ok(out) => bad.push(format!("{m:?}: {out}")),
                            Err(e) => bad.push(format!("{m:?}: {e}")),
                        }
                    }
                    (refused, served, bad)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let refused: usize = results.iter().map(|r| r.0).sum();
    let served: usize = results.iter().map(|r| r.1).sum();
    let bad: Vec<&String> = results.iter().flat_map(|r| &r.2).collect();
    eprintln!(
        "{} mutations: {refused} refused at open, {served} opened and read without a wrong \
         answer, {} failed",
        muts.len(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "{} failures, first: {:#?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}

#[test]
fn damaged_pools_give_errors_never_wrong_answers_or_crashes() {
    suite(24, false);
}

#[test]
fn damaged_crashed_pools_give_errors_never_wrong_answers_or_crashes() {
    suite(24, true);
}

#[test]
#[ignore = "long run: cargo test -p nacre --release --test corruption -- --ignored"]
fn damaged_pools_give_errors_never_wrong_answers_or_crashes_long() {
    suite(1500, false);
    suite(1500, true);
}

/// The last item of a memtable that fails its checksum after a crash is a torn write only if
/// it belongs to the last group; an older group's item was durable before a later group
/// committed, so its failure is damage and must not roll acknowledged writes back.
#[test]
fn damage_to_an_older_groups_last_item_is_not_taken_for_a_torn_write() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
    let path = dir.path().join("db.pool");
    let db = Db::open(opts(&path)).unwrap();
    let (a, b) = (db.subtable("alpha").unwrap(), db.subtable("beta").unwrap());
    db.put(&a, "before", "x").unwrap();
    // Group G: alpha's last item. Group G' (later): beta's last item.
    db.put(&a, "marker-key", "the acknowledged value of the marker")
        .unwrap();
    db.put(&b, "later", "a later group").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let image = path.with_extension("crashed");
    std::fs::copy(&path, &image).unwrap();
    std::mem::forget(db);
    let mut bytes = std::fs::read(&image).unwrap();
    let needle = b"the acknowledged value of the marker";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("marker");
    bytes[at + 5] ^= 0x01;
    let run = |mutation: Option<nacre::RecoveryMutation>| {
        let p = dir.path().join(format!("try-{}.pool", mutation.is_some()));
        std::fs::write(&p, &bytes).unwrap();
        let mut o = opts(&p);
        o.recovery_mutation = mutation;
        Db::open(o).map(|db| {
            let a = db.subtable("alpha").unwrap();
            db.get(&a, "marker-key").unwrap()
        })
    };
    match run(None) {
        Err(nacre::Error::Corrupt { what, .. }) => assert!(what.contains("damaged"), "{what}"),
        other => panic!("{other:?}"),
    }
    // The rule switched off: the acknowledged marker silently vanishes.
    assert_eq!(
        run(Some(nacre::RecoveryMutation::SkipTornCheck)).unwrap(),
        None
    );
}

//! Power failures under the server's own persistent structures, on the `sim` backend: real
//! commands (strings, counters, hashes, lists, sets, sorted sets, streams with consumer
//! groups, DEL of collections, expiry,
//! FLUSHDB, MULTI/EXEC, EVAL, FUNCTION LOAD/DELETE) run
//! in-process, the power fails at a random fence, the keyspace is reopened from the crash
//! image, and then: the keyspace is the state after the last acknowledged command or after
//! one of the later ones, each command whole (whole-keyspace comparison); collection versions are never reused
//! (K5: the version mark is above every version in use); no member is left under a version
//! that is neither live nor queued for the cleaner; key counts, read from their records at
//! once, match the keys (and the background count agrees). A mutation check per recovery rule
//! (version mark, namespace record, stream owner, key count records) shows the test catches
//! its loss.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nacre::{Db, IterOptions, Options};
use nacre_pmem::{Backend, CrashPolicy, Pool, PoolOptions};
use nacre_resp::Reply;
use nacre_server::client::Client;
use nacre_server::cmd::{execute, Outcome};
use nacre_server::shared::{ClientInfo, Shared};
use nacre_server::store::{self, encoding, Kind, Meta};

const DBS: usize = 3;
const OPS: usize = 60;

fn opts() -> Options {
    let mut o = Options::new("unused-for-sim").backend(Backend::Sim);
    o.pool_size = 48 << 20;
    o.zone_size = 256 << 10;
    o.memtable_size = 1 << 20;
    o.recovery_threads = 2;
    o
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A keyspace on `db`, serving in-process, commits completing in the caller; and after a
/// crash, whether its key counts came from their records and what the background count found
/// wrong in them (C3, C4 in counts.rs).
fn serve(db: Db) -> (Arc<Shared>, bool, Vec<(u32, i64, i64)>) {
    let (st, report, job) = store::open::open_db(db, DBS, Default::default()).expect("open");
    let st = Arc::new(st);
    st.commits.close(&st);
    let disagreed = match job {
        Some(j) => st.count_keys(j).expect("count").disagreed,
        None => Vec::new(),
    };
    let cfg = nacre_server::Config {
        databases: DBS as u64,
        ..Default::default()
    };
    let kept = report.counts_kept;
    (Shared::new(st, cfg, report).into_arc(), kept, disagreed)
}

fn run(shared: &Shared, c: &mut Client, args: &[&str]) -> Reply {
    let args = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    match execute(shared, c, args) {
        Outcome::Reply(r, t) => {
            shared
                .store
                .commits
                .wait_blocking(&shared.store, t.0)
                .expect("commit");
            r
        }
        _ => panic!("unexpected outcome"),
    }
}

/// The whole keyspace: (db, key) → type and contents (a string's value, or a collection's
/// records: members, list elements by position, a sorted set's members and index entries).
type State = BTreeMap<(usize, Vec<u8>), (Kind, Vec<(Vec<u8>, Vec<u8>)>)>;

fn state(shared: &Shared) -> Result<State, String> {
    let st = &shared.store;
    let mut out = State::new();
    let gens = st.ns.read().gens.clone();
    for (db, gen) in gens.into_iter().enumerate() {
        let metas: Vec<(Vec<u8>, Vec<u8>)> = st
            .db
            .iter(
                &st.subs.meta,
                IterOptions {
                    prefix: Some(encoding::ns_prefix(gen).to_vec()),
                    ..Default::default()
                },
            )
            .expect("iter")
            .map(|r| r.expect("meta"))
            .collect();
        for (k, v) in metas {
            let key = encoding::user_key(&k, &v).expect("meta key");
            let m = Meta::decode(&v).expect("meta");
            let mut contents = if m.kind.is_collection() {
                let mut t = st.txn(&[(db, key)], 0);
                t.all_records(db, key, m.version).expect("records")
            } else {
                vec![(Vec::new(), m.payload.clone())]
            };
            contents.sort();
            check_collection(&m, &contents)?;
            out.insert((db, key.to_vec()), (m.kind, contents));
        }
    }
    // The function libraries (F1): one record, whole or not at all.
    if let Some(rec) = st.db.get(&st.subs.sys, b"functions").expect("functions") {
        out.insert(
            (usize::MAX, b"functions".to_vec()),
            (Kind::String, vec![(Vec::new(), rec)]),
        );
    }
    Ok(out)
}

/// What differs between two states, key by key (long keys shortened).
fn differences(got: &State, want: &State) -> String {
    let name = |(db, k): &(usize, Vec<u8>)| {
        let shown = String::from_utf8_lossy(&k[..k.len().min(24)]).into_owned();
        if k.len() > 24 {
            format!("{db}:{shown}...({} bytes)", k.len())
        } else {
            format!("{db}:{shown}")
        }
    };
    let mut out = String::new();
    for (k, v) in got {
        match want.get(k) {
            Some(w) if w == v => {}
            Some(w) => out.push_str(&format!("  {} is {v:?}, acknowledged {w:?}\n", name(k))),
            None => out.push_str(&format!(
                "  {} is {v:?}, absent when acknowledged\n",
                name(k)
            )),
        }
    }
    for k in want.keys().filter(|k| !got.contains_key(*k)) {
        out.push_str(&format!(
            "  {} is absent, acknowledged {:?}\n",
            name(k),
            want[k]
        ));
    }
    out
}

/// A collection's records agree with its metadata: the count, a list's dense positions
/// between its ends, a sorted set's index entry for each member's score.
fn check_collection(m: &Meta, records: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
    let n = records.len() as u64;
    match m.kind {
        Kind::String => {}
        Kind::Hash | Kind::Set => {
            assert_eq!(n, m.size, "{:?}: count disagrees with members", m.kind)
        }
        Kind::List => {
            let (head, tail) = encoding::list_ends(&m.payload).expect("list ends");
            assert_eq!(n, tail - head, "list: ends disagree with elements");
            for (i, (k, _)) in records.iter().enumerate() {
                let pos = u64::from_be_bytes(k[..8].try_into().expect("position"));
                assert_eq!(pos, head + i as u64, "list: a gap between its ends");
            }
        }
        Kind::ZSet => {
            assert_eq!(
                n,
                2 * m.size,
                "sorted set: count disagrees with members and index"
            );
            for (k, v) in records
                .iter()
                .filter(|(k, _)| k[0] != encoding::SCORE_INDEX)
            {
                let score = encoding::decode_score(v).expect("score");
                let mut full = m.version.to_be_bytes().to_vec();
                full.extend_from_slice(k);
                let (_, member) = encoding::split_sub_key(&full).expect("member key");
                let want = encoding::score_key(m.version, score, member);
                assert!(
                    records.iter().any(|(k2, _)| k2[..] == want[8..]),
                    "sorted set: member without its index entry"
                );
            }
        }
        Kind::Stream => {
            use encoding::stream_tag as tag;
            let of = |t: u8| records.iter().filter(move |(k, _)| k[0] == t);
            // S1: the length is the entries present and the nodes' live counts.
            let entries = of(tag::ENTRY).count() as u64;
            let live: u64 = of(tag::NODE)
                .map(|(_, v)| u64::from_be_bytes(v[..8].try_into().expect("node")))
                .sum();
            if entries != m.size || live != m.size {
                return Err(format!(
                    "stream: length {}, entries {entries}, nodes' live counts {live}",
                    m.size
                ));
            }
            // G1: each pending entry has its owner's record, and no more.
            let (pending, owned) = (of(tag::PENDING).count(), of(tag::OWNED).count());
            if pending != owned {
                return Err(format!(
                    "stream: group and consumer pending lists disagree ({pending} and {owned})"
                ));
            }
        }
    }
    Ok(())
}

/// A random command on a small key space.
fn command(r: &mut Rng) -> Vec<String> {
    // Key 3 of each kind is long: named by digest, its record holding it (K8).
    let key = |r: &mut Rng, p: &str| match r.next() % 4 {
        3 => format!("{p}3{}", "x".repeat(encoding::LONG_KEY)),
        i => format!("{p}{i}"),
    };
    let v = format!("v{}", r.next() % 1000);
    let m = format!("m{}", r.next() % 5);
    match r.next() % 36 {
        0 => vec!["SELECT".into(), (r.next() % DBS as u64).to_string()],
        1 | 2 => vec!["SET".into(), key(r, "s"), v],
        3 => vec!["INCR".into(), key(r, "n")],
        4 | 5 => vec![
            "HSET".into(),
            key(r, "h"),
            format!("f{}", r.next() % 5),
            v,
            format!("g{}", r.next() % 5),
            "x".into(),
        ],
        6 => vec!["HDEL".into(), key(r, "h"), format!("f{}", r.next() % 5)],
        7 => vec!["DEL".into(), key(r, "h"), key(r, "s")],
        8 => vec!["EXPIRE".into(), key(r, "s"), "100000".into()],
        9 => vec!["FLUSHDB".into()],
        10 => {
            let p = ["h", "l", "t", "z", "x"][(r.next() % 5) as usize];
            vec!["RENAME".into(), key(r, p), key(r, p)]
        }
        11 => vec!["HINCRBY".into(), key(r, "h"), "c".into(), "3".into()],
        12 | 13 => vec!["RPUSH".into(), key(r, "l"), v, m],
        14 => vec!["LPUSH".into(), key(r, "l"), v],
        15 => vec!["LPOP".into(), key(r, "l"), "2".into()],
        16 => vec!["LINSERT".into(), key(r, "l"), "BEFORE".into(), m, v],
        17 => vec!["LREM".into(), key(r, "l"), "1".into(), m],
        18 => vec!["SADD".into(), key(r, "t"), m, v],
        19 => vec!["SREM".into(), key(r, "t"), m],
        20 | 21 => vec!["ZADD".into(), key(r, "z"), (r.next() % 7).to_string(), m],
        22 => vec!["ZINCRBY".into(), key(r, "z"), "2".into(), m],
        // A script's writes: all of them or none (S1), on declared and undeclared keys.
        26 | 27 => vec![
            "EVAL".into(),
            "redis.call('set', KEYS[1], ARGV[1]); redis.call('rpush', KEYS[2], ARGV[1]); \
             return redis.call('incr', 'n1')"
                .into(),
            "2".into(),
            key(r, "s"),
            key(r, "l"),
            v,
        ],
        // Function libraries, durable in the pool (F1).
        28 => vec![
            "FUNCTION".into(),
            "LOAD".into(),
            "REPLACE".into(),
            format!(
                "#!lua name=lib{}\nredis.register_function('f{}', function() return {} end)",
                r.next() % 2,
                r.next() % 2,
                r.next() % 100
            ),
        ],
        29 => vec![
            "FUNCTION".into(),
            "DELETE".into(),
            format!("lib{}", r.next() % 2),
        ],
        // Streams: entries, nodes and trimming, groups, deliveries, claims (S1, G1).
        30 | 31 => {
            let mut c = vec!["XADD".into(), key(r, "x")];
            if r.next() % 3 == 0 {
                c.extend(["MAXLEN".into(), "~".into(), "4".into()]);
            }
            c.extend(["*".into(), "f".into(), v]);
            c
        }
        32 => vec!["XTRIM".into(), key(r, "x"), "MAXLEN".into(), "2".into()],
        33 => vec![
            "XGROUP".into(),
            "CREATE".into(),
            key(r, "x"),
            "g".into(),
            "0".into(),
            "MKSTREAM".into(),
        ],
        34 => vec![
            "XREADGROUP".into(),
            "GROUP".into(),
            "g".into(),
            format!("c{}", r.next() % 2),
            "COUNT".into(),
            "2".into(),
            "STREAMS".into(),
            key(r, "x"),
            ">".into(),
        ],
        35 => vec![
            "XAUTOCLAIM".into(),
            key(r, "x"),
            "g".into(),
            format!("c{}", r.next() % 2),
            "0".into(),
            "0-0".into(),
            "COUNT".into(),
            "1".into(),
        ],
        _ => vec![
            "ZREMRANGEBYSCORE".into(),
            key(r, "z"),
            "2".into(),
            "4".into(),
        ],
    }
}

/// One workload with a power failure at a random fence, then the checks.
fn run_once(base: &[u8], seed: u64) -> Result<(), String> {
    let mut r = Rng(seed);
    let pool =
        Pool::open_sim(base.to_vec(), &PoolOptions::with_backend(Backend::Sim)).expect("image");
    let db = Db::open_pool(pool, opts()).expect("open");
    let sim = db.sim().expect("sim");
    let (shared, ..) = serve(db);
    let start = sim.fence_count();
    sim.stop_at_fence(start + 1 + r.next() % 120);
    let mut c = Client::new(Arc::new(ClientInfo::detached(1)), true);
    // The state after the last acknowledged command, and after each later one: commits
    // after the power failed may still reach the image (the lines they wrote can be kept),
    // but only in commit order, so the image holds one of these states.
    let mut acked = state(&shared).map_err(|e| format!("seed {seed}: {e}"))?;
    let mut later: Vec<State> = Vec::new();
    for i in 0..OPS {
        let cmd = command(&mut r);
        let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
        // FUNCTION writes its record apart from EXEC's batch, so a power failure can keep
        // one without the other (a known gap, in docs/server.md): not inside MULTI here.
        let transfer = i % 7 == 6 && cmd[0] != "FUNCTION";
        if transfer {
            // MULTI/EXEC: two keys change together or not at all.
            run(&shared, &mut c, &["MULTI"]);
            run(&shared, &mut c, &refs);
            run(&shared, &mut c, &["INCR", "n0"]);
            run(&shared, &mut c, &["EXEC"]);
        } else {
            run(&shared, &mut c, &refs);
        }
        if i % 10 == 9 {
            let stop = std::sync::atomic::AtomicBool::new(false);
            store::background::gc_pass(&shared.store, &stop, std::time::Duration::from_secs(5))
                .expect("gc");
            store::background::expire_step(&shared.store, &mut |_, _, _| {}).expect("expire");
        }
        let now = state(&shared).map_err(|e| format!("seed {seed}: {e}"))?;
        if sim.is_stopped() {
            later.push(now);
        } else {
            acked = now;
        }
    }
    let versions_before = shared.store.versions.load(Ordering::Relaxed);
    let image = sim.crash(CrashPolicy::KeepRandom {
        seed,
        keep: (r.next() % 100) as f64 / 100.0,
    });
    drop(c);
    drop(shared);
    let pool =
        Pool::open_sim(image, &PoolOptions::with_backend(Backend::Sim)).expect("crash image");
    let db =
        Db::open_pool(pool, opts()).map_err(|e| format!("seed {seed}: engine recovery: {e}"))?;
    let (shared, kept, disagreed) = serve(db);
    // C3: a crash's start reads the counts from their records, and C4's count agrees.
    if !kept {
        return Err(format!(
            "seed {seed}: the start did not read the key count records"
        ));
    }
    if !disagreed.is_empty() {
        return Err(format!(
            "seed {seed}: the key count records disagree with the keys (namespace, recorded, counted): {disagreed:?}"
        ));
    }
    shared
        .functions
        .restore(&shared)
        .map_err(|e| format!("seed {seed}: the function libraries do not load: {e}"))?;
    let got = state(&shared).map_err(|e| format!("seed {seed}: after recovery, {e}"))?;
    if got != acked && !later.contains(&got) {
        return Err(format!(
            "seed {seed}: after the crash the keyspace is neither the acknowledged state nor one after later commands ({} later); against the acknowledged state:\n{}",
            later.len(),
            differences(&got, &acked)
        ));
    }
    // K5: every version in use is below the next one handed out.
    let next = shared.store.versions.load(Ordering::Relaxed);
    let st = &shared.store;
    let mut live = Vec::new();
    for r in st
        .db
        .iter(&st.subs.meta, IterOptions::default())
        .expect("iter")
    {
        let (_, v) = r.expect("meta");
        let m = Meta::decode(&v).expect("meta");
        if m.kind.is_collection() {
            if m.version >= next {
                return Err(format!(
                    "seed {seed}: version {} in use but the next version handed out is {next} (handed out {versions_before} before the crash)",
                    m.version
                ));
            }
            live.push(m.version);
        }
    }
    // Members live under a live version or one queued for the cleaner.
    let queued: Vec<Vec<u8>> = st
        .db
        .iter(&st.subs.gc, IterOptions::default())
        .expect("iter")
        .map(|r| r.expect("gc").0)
        .collect();
    for r in st
        .db
        .iter(&st.subs.sub, IterOptions::default())
        .expect("iter")
    {
        let (k, _) = r.expect("sub");
        let ver = u64::from_be_bytes(k[..8].try_into().expect("version"));
        if !live.contains(&ver) && !queued.iter().any(|q| q.as_slice() == &k[..8]) {
            return Err(format!(
                "seed {seed}: members of version {ver} are orphaned"
            ));
        }
    }
    // Key counts match the keys.
    for db in 0..DBS {
        let n = got.keys().filter(|(d, _)| *d == db).count() as i64;
        if st.dbsize(db) != n {
            return Err(format!(
                "seed {seed}: DBSIZE of db {db} is {} for {n} keys",
                st.dbsize(db)
            ));
        }
    }
    Ok(())
}

fn base_image() -> Vec<u8> {
    let db = Db::open(opts()).expect("open");
    let sim = db.sim().expect("sim");
    let (shared, ..) = serve(db);
    drop(shared);
    sim.crash(CrashPolicy::KeepNone)
}

fn torture(crashes: u64, seed0: u64) -> Result<(), String> {
    let base = base_image();
    for i in 0..crashes {
        run_once(
            &base,
            seed0.wrapping_add(i).wrapping_mul(0x2545_F491_4F6C_DD1D) | 1,
        )?;
    }
    Ok(())
}

/// The clean run, then one run per recovery rule switched off, which must fail (in one test:
/// the switch is process-wide).
#[test]
fn power_failures_lose_no_acknowledged_command_and_each_rule_matters() {
    store::MUTATION.store(0, Ordering::Relaxed);
    torture(60, 1).unwrap();
    // The seed that found member records left with a key's old name after RENAMEs.
    run_once(&base_image(), 1739688407509099153).unwrap();
    for (m, what) in [
        (store::MUTATE_NO_VERSION_MARK, "version"),
        (
            store::MUTATE_NO_NAMESPACE_RECORD,
            "neither the acknowledged state",
        ),
        (store::MUTATE_STREAM_NO_OWNER, "pending lists disagree"),
        (store::MUTATE_NO_COUNT_RECORD, "key count records disagree"),
    ] {
        store::MUTATION.store(m, Ordering::Relaxed);
        let r = torture(60, 1);
        store::MUTATION.store(0, Ordering::Relaxed);
        let e = r.expect_err("the torture test passed with a recovery rule switched off");
        assert!(
            e.contains(what),
            "mutation {m} failed for another reason: {e}"
        );
    }
}

#[test]
#[ignore = "long: 2,000 crashes"]
fn power_failures_lose_no_acknowledged_command_long() {
    store::MUTATION.store(0, Ordering::Relaxed);
    torture(2000, 7).unwrap();
}

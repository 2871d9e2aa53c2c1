//! Opening the keyspace at start and closing it at `SHUTDOWN`.
//!
//! A clean close leaves a `clean` record in `sys` with every database's key count and the
//! next collection version; the next start reads it (and deletes it, durably, before serving)
//! instead of counting keys. After a crash there is no such record: the start reads the
//! key counts from their records in PM (counts.rs) and checks them with a count of each
//! database's keys in the background (one pass over the `meta` subtable); a pool without
//! those records waits for that count instead.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nacre::{Db, IterOptions, Options, WriteBatch};

use super::commits::{Commits, VERSION_MARK};
use super::{counts, encoding};
use super::{Namespaces, Result, Store, StoreError, Subtables, STRIPES};
use crate::config::Config;

pub const NAMESPACES: &[u8] = b"namespaces";
/// The `sys` record holding the ACL users (`crate::acl::Users::encode`).
pub const ACL: &[u8] = b"acl";
const CLEAN: &[u8] = b"clean";

/// The pool file inside the data directory.
pub const POOL_FILE: &str = "nacre.pool";

/// What the start found, for its log lines and `INFO`.
#[derive(Clone, Debug)]
pub struct StartReport {
    /// The engine's open, recovery included.
    pub recovery: Duration,
    /// Counting keys before serving (zero: after a clean shutdown the counts are read from
    /// its record; after a crash they are counted in the background while serving).
    pub counting: Duration,
    /// Whether the previous run shut down cleanly.
    pub clean: bool,
    /// Whether this start created the database (nothing to recover, no keys to count).
    pub created: bool,
    /// Whether the key counts came from their records in PM after a crash (checked by a
    /// count in the background) rather than from a clean shutdown or that count.
    pub counts_kept: bool,
    /// Keys in all databases.
    pub keys: u64,
    /// The backend in use.
    pub backend: String,
    /// What an acknowledged write survives.
    pub survives: String,
}

impl StartReport {
    /// Where the start's key counts came from (`INFO nacre`'s `key_counts_at_start`):
    /// `created`, `clean` (the clean shutdown's record), `records` (their records in PM,
    /// after a crash) or `counted` (a count in the background, which commands that read
    /// the counts wait for).
    pub fn counts_source(&self) -> &'static str {
        if self.created {
            "created"
        } else if self.clean {
            "clean"
        } else if self.counts_kept {
            "records"
        } else {
            "counted"
        }
    }
}

fn le_u64(b: &[u8], at: usize) -> Result<u64> {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| StoreError::Corrupt("server record too short".into()))
}

/// Opens (or creates) the keyspace under `cfg.dir`.
pub fn open(cfg: &Config) -> Result<Opened> {
    std::fs::create_dir_all(&cfg.dir)
        .map_err(|e| StoreError::Corrupt(format!("cannot create {}: {e}", cfg.dir.display())))?;
    open_with(cfg.engine_options(&cfg.dir, false), cfg.databases as usize)
}

/// Opens the keyspace on engine options `opts` with `databases` logical databases.
pub fn open_with(opts: Options, databases: usize) -> Result<Opened> {
    let t0 = Instant::now();
    let db = Db::open(opts)?;
    open_db(db, databases, t0.elapsed())
}

/// Opens the keyspace on an open engine (`recovery`: how long its open took).
pub fn open_db(db: Db, databases: usize, recovery: Duration) -> Result<Opened> {
    let subs = Subtables {
        meta: db.subtable("meta")?,
        sub: db.subtable("sub")?,
        expire: db.subtable("expire")?,
        gc: db.subtable("gc")?,
        sys: db.subtable("sys")?,
    };
    let mut first = WriteBatch::new();
    let mut ns = match db.get(&subs.sys, NAMESPACES)? {
        Some(b) => Namespaces::decode(&b)?,
        None => Namespaces {
            gens: Vec::new(),
            next: 1,
            barrier: 0,
        },
    };
    if ns.gens.len() < databases {
        while ns.gens.len() < databases {
            ns.gens.push(ns.next);
            ns.next += 1;
        }
        first.put(&subs.sys, NAMESPACES, ns.encode());
    }
    let mark = match db.get(&subs.sys, VERSION_MARK)? {
        Some(b) => le_u64(&b, 0)?,
        None => 1,
    };
    let t1 = Instant::now();
    let clean = db.get(&subs.sys, CLEAN)?;
    let (clean_counts, next_version) = match clean.map(|c| decode_clean(&c, &ns)) {
        Some(Ok(Some((counts, next)))) => (Some(counts), next),
        Some(Err(e)) => return Err(e),
        _ => (None, mark),
    };
    let was_clean = clean_counts.is_some();
    if was_clean {
        first.delete(&subs.sys, CLEAN);
    }
    // A new database has no keys: nothing to count.
    let created = db.recovery_report().created;
    let mut slots = counts::read(&db, &subs.sys)?;
    for &s in &slots.malformed {
        first.delete(&subs.sys, counts::slot_key(s));
    }
    // Dropped namespaces' counts are left out (their slots' records lose them when next
    // written).
    for m in &mut slots.slots {
        m.retain(|g, _| ns.gens.contains(g));
    }
    let kept = slots.kept && slots.malformed.is_empty();
    let recorded: Vec<(u32, i64)> = ns.gens.iter().map(|&g| (g, slots.total(g))).collect();
    let (counts, counted, job) = match clean_counts {
        // C3: the counts are known; the records are made to agree with them.
        Some(known) => {
            let mut fix = false;
            for (&(g, r), &n) in recorded.iter().zip(&known) {
                if n != r {
                    if kept {
                        tracing::error!(
                            namespace = g,
                            recorded = r,
                            counted = n,
                            "the key count records disagree with the clean shutdown's counts"
                        );
                    }
                    counts::add(&mut slots.slots[0], g, n - r);
                    fix = true;
                }
            }
            if fix {
                first.put(
                    &subs.sys,
                    counts::slot_key(0),
                    counts::encode(&slots.slots[0]),
                );
            }
            if !kept {
                first.put(&subs.sys, counts::KEPT, []);
            }
            (known, true, None)
        }
        None if created => {
            first.put(&subs.sys, counts::KEPT, []);
            (vec![0; ns.gens.len()], true, None)
        }
        // C3, C4: the records' counts at once, checked in the background.
        None if kept => (recorded.iter().map(|&(_, n)| n).collect(), true, Some(true)),
        // Counted in the background (see `Store::count_keys`).
        None => (vec![0; ns.gens.len()], false, Some(false)),
    };
    let counting = t1.elapsed();
    if !first.is_empty() {
        // A few bytes of metadata, which a full pool must still take to start.
        first.mark_frees_space();
        db.write(first)?;
    }
    let keys = counts.iter().sum::<i64>().max(0) as u64;
    // Taken before anything is written: the background count reads this snapshot, and every
    // later change is in `counts` as a delta.
    let job = job.map(|check| Count {
        snap: db.snapshot(),
        recorded,
        check,
    });
    let backend = db.backend_report();
    let report = StartReport {
        recovery,
        counting,
        clean: was_clean,
        created,
        counts_kept: counted && !was_clean && !created,
        keys,
        backend: backend.active.to_string(),
        survives: backend.survives().to_string(),
    };
    let store = Store {
        counts: counts.into_iter().map(AtomicI64::new).collect(),
        counted: tokio::sync::watch::Sender::new(counted),
        ns: parking_lot::RwLock::new(ns),
        versions: AtomicU64::new(next_version.max(1)),
        stripes: (0..STRIPES).map(|_| Default::default()).collect(),
        commits: Commits::new(
            mark,
            backend.active.uses_cache_flush(),
            counts::Slots::new(slots.slots),
        ),
        expired_keys: AtomicU64::new(0),
        gc_records: AtomicU64::new(0),
        gc_pending: AtomicU64::new(0),
        access: Default::default(),
        repl: Default::default(),
        replica: Default::default(),
        frozen: Default::default(),
        writers: Default::default(),
        gc_objects: AtomicU64::new(0),
        counts_checked: Default::default(),
        db,
        subs,
    };
    Ok((store, report, job))
}

/// What [`open`] returns: the keyspace, the start's report, and the count to run in the
/// background after a crash (see [`Store::count_keys`]).
pub type Opened = (Store, StartReport, Option<Count>);

/// A background count of every namespace's keys (C3, C4 in counts.rs).
pub struct Count {
    /// Taken at open, before any write.
    snap: nacre::Snapshot,
    /// Per namespace, what the count records said at open.
    recorded: Vec<(u32, i64)>,
    /// Whether the counts came from the records (the count checks them) rather than
    /// waiting for it.
    check: bool,
}

/// What a background count found.
#[derive(Debug, Default)]
pub struct Counted {
    /// Keys in all databases at the snapshot.
    pub keys: u64,
    /// Namespaces whose records disagreed with the count: (namespace, recorded, counted).
    /// Always empty after a crash unless something is wrong (C4).
    pub disagreed: Vec<(u32, i64, i64)>,
}

impl Store {
    /// Counts every database's keys in the job's snapshot (taken at open, before any
    /// write). Without count records, adds them to the counts, which hold the changes made
    /// since, and marks them whole; with them, compares (C4). Either way the records are
    /// then put right and marked whole (C3).
    pub fn count_keys(&self, job: Count) -> Result<Counted> {
        let Count {
            snap,
            recorded,
            check,
        } = job;
        let gens: Vec<u32> = recorded.iter().map(|&(g, _)| g).collect();
        let mut total = 0u64;
        let mut base = Vec::with_capacity(gens.len());
        for g in gens {
            let it = self.db.iter(
                &self.subs.meta,
                IterOptions {
                    snapshot: Some(&snap),
                    prefix: Some(encoding::ns_prefix(g).to_vec()),
                    ..Default::default()
                },
            )?;
            let mut n = 0i64;
            for r in it {
                r?;
                n += 1;
            }
            base.push((g, n));
            total += n as u64;
        }
        // A FLUSHDB or SWAPDB while counting changed the namespace table; they hold it
        // exclusively, so hold it shared while the counts become whole.
        // The count of a namespace goes to the database that has it now (SWAPDB moves
        // namespaces; a flushed one is gone, its database restarted from zero).
        let ns = self.ns.read();
        let mut out = Counted {
            keys: total,
            disagreed: Vec::new(),
        };
        let mut fixes = Vec::new();
        for ((g, n), &(_, r)) in base.into_iter().zip(&recorded) {
            let Some(i) = ns.gens.iter().position(|&x| x == g) else {
                continue;
            };
            if !check {
                self.counts[i].fetch_add(n, Ordering::Relaxed);
            } else if n != r {
                tracing::error!(
                    namespace = g,
                    recorded = r,
                    counted = n,
                    "the key count records disagree with the keys: corrected"
                );
                self.counts[i].fetch_add(n - r, Ordering::Relaxed);
                out.disagreed.push((g, r, n));
            }
            if n != r {
                fixes.push((g, n - r));
            }
        }
        drop(ns);
        self.counted.send_replace(true);
        let outcome = match (check, out.disagreed.is_empty()) {
            (false, _) => 3,
            (true, true) => 1,
            (true, false) => 2,
        };
        self.counts_checked.store(outcome, Ordering::Release);
        if !fixes.is_empty() || !check {
            let mut b = WriteBatch::new();
            b.put(&self.subs.sys, counts::KEPT, []);
            // A few bytes that make counting unnecessary next time: a full pool takes them.
            b.mark_frees_space();
            let t = self.commits.submit(
                self,
                b,
                super::commits::Submission {
                    ns_deltas: fixes,
                    ..Default::default()
                },
            );
            self.commits
                .wait_blocking(self, t)
                .map_err(|e| StoreError::Commit(e.to_string()))?;
        }
        Ok(out)
    }
}

/// The `clean` record: per database its namespace and key count, then the next version.
fn encode_clean(store: &Store) -> Vec<u8> {
    let ns = store.ns.read();
    let mut v = Vec::new();
    v.extend_from_slice(&(ns.gens.len() as u32).to_le_bytes());
    for (i, g) in ns.gens.iter().enumerate() {
        v.extend_from_slice(&g.to_le_bytes());
        v.extend_from_slice(&store.counts[i].load(Ordering::Relaxed).to_le_bytes());
    }
    v.extend_from_slice(&store.versions.load(Ordering::Relaxed).to_le_bytes());
    v
}

/// Counts and next version from a `clean` record; `None` if it does not match `ns`.
fn decode_clean(b: &[u8], ns: &Namespaces) -> Result<Option<(Vec<i64>, u64)>> {
    let bad = || StoreError::Corrupt("clean shutdown record".into());
    let n = u32::from_le_bytes(b.get(..4).ok_or_else(bad)?.try_into().map_err(|_| bad())?) as usize;
    if b.len() != 4 + n * 12 + 8 {
        return Err(bad());
    }
    if n != ns.gens.len() {
        return Ok(None);
    }
    let mut counts = Vec::with_capacity(n);
    for (i, &gen) in ns.gens.iter().enumerate() {
        let at = 4 + i * 12;
        let g = u32::from_le_bytes(b[at..at + 4].try_into().map_err(|_| bad())?);
        if g != gen {
            return Ok(None);
        }
        counts.push(le_u64(b, at + 4)? as i64);
    }
    Ok(Some((counts, le_u64(b, 4 + n * 12)?)))
}

impl Store {
    /// Writes the `clean` record once every queued commit is done; nothing may write after
    /// it (the counts it holds would go stale). `quiet`: every client has finished, so
    /// nothing can; else the counts are not recorded and the next start counts again.
    pub fn close_ref(&self, quiet: bool) -> Result<()> {
        // Counts still being counted are not recorded: the next start counts again.
        let counted = quiet && self.is_counted();
        self.commits.close(self);
        let last = self.commits.last();
        let _ = self.commits.wait_blocking(self, last);
        let mut b = WriteBatch::new();
        if counted {
            b.put(&self.subs.sys, CLEAN, encode_clean(self));
        }
        let next = self.versions.load(Ordering::Relaxed);
        b.put(&self.subs.sys, VERSION_MARK, next.to_le_bytes());
        // A clean shutdown of a full pool still records itself.
        b.mark_frees_space();
        self.db.write(b)?;
        Ok(())
    }

    /// Closes the engine (after [`Store::close_ref`]).
    pub fn close_engine(self) -> Result<()> {
        drop(self.subs);
        self.db.close()?;
        Ok(())
    }
}

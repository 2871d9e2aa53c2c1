//! Writing the keyspace as an RDB file Redis 7.0 loads: every database, every type, expiry
//! times and the function libraries, as of one engine snapshot (every write acknowledged
//! before it, nothing after), read without locks (`Txn::at_snapshot`), so clients go on
//! writing meanwhile and no fork is needed. Keys whose expiry time has passed are left out.
//!
//! The file is written under a temporary name beside its destination, synced, and renamed
//! over it: a failed or interrupted export leaves any earlier file whole.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use nacre::IterOptions;

use super::TransferError;
use crate::rdb::file::RdbWriter;
use crate::shared::now_ms;
use crate::store::encoding::{self, Meta};
use crate::store::{Namespaces, Store, Txn};
use crate::types::whole;

/// What an export wrote.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Keys written per database.
    pub per_db: Vec<u64>,
    /// Function libraries written.
    pub functions: usize,
    /// Bytes of the file.
    pub bytes: u64,
    /// Time taken.
    pub elapsed: Duration,
}

impl Summary {
    /// Keys written in all.
    pub fn keys(&self) -> u64 {
        self.per_db.iter().sum()
    }
}

/// Writes a snapshot of `store` to `path` (replacing it once complete); `progress` is called
/// now and then with the keys and bytes written so far.
pub fn export(
    store: &Store,
    path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, TransferError> {
    let tmp = super::temp_path(path);
    let r = write_file(store, &tmp, progress).and_then(|sum| {
        let io = |source| TransferError::Io {
            path: path.to_path_buf(),
            source,
        };
        std::fs::rename(&tmp, path).map_err(io)?;
        // The rename is durable once the directory is.
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
        File::open(dir.unwrap_or(Path::new(".")))
            .and_then(|d| d.sync_all())
            .map_err(io)?;
        Ok(sum)
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

fn write_file(
    store: &Store,
    tmp: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Summary, TransferError> {
    let t0 = Instant::now();
    let io = |source| TransferError::Io {
        path: tmp.to_path_buf(),
        source,
    };
    let snap = store.db.snapshot();
    let file = File::create(tmp).map_err(io)?;
    let (f, mut sum) = write_snapshot(store, snap, file, &[], tmp, progress)?;
    f.sync_all().map_err(io)?;
    sum.bytes = f.metadata().map_err(io)?.len();
    sum.elapsed = t0.elapsed();
    progress(sum.keys(), sum.bytes);
    Ok(sum)
}

/// Writes the keyspace as engine snapshot `snap` holds it to `out` as an RDB stream, with
/// `extra_aux` fields after the standard ones (a replication payload's `repl-id` and
/// `repl-offset`); `path` names `out` in errors. Returns `out`, flushed.
pub fn write_snapshot<W: Write>(
    store: &Store,
    snap: nacre::Snapshot,
    out: W,
    extra_aux: &[(&str, String)],
    path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(W, Summary), TransferError> {
    let io = |source| TransferError::Io {
        path: path.to_path_buf(),
        source,
    };
    let ns = match store
        .db
        .get_at(&store.subs.sys, crate::store::open::NAMESPACES, &snap)?
    {
        Some(b) => Namespaces::decode(&b)?,
        None => store.ns.read().clone(),
    };
    let now = now_ms();
    let mut w = RdbWriter::new(out);
    let ctime = (now / 1000).to_string();
    let aux: [(&str, &str); 5] = [
        ("redis-ver", crate::REDIS_VERSION),
        ("redis-bits", "64"),
        ("ctime", &ctime),
        ("used-mem", "0"),
        ("aof-base", "0"),
    ];
    for (k, v) in aux {
        w.aux(k.as_bytes(), v.as_bytes()).map_err(io)?;
    }
    for (k, v) in extra_aux {
        w.aux(k.as_bytes(), v.as_bytes()).map_err(io)?;
    }
    let mut sum = Summary {
        per_db: vec![0; ns.gens.len()],
        ..Default::default()
    };
    let libs = store
        .db
        .get_at(&store.subs.sys, crate::script::functions::RECORD, &snap)?;
    if let Some(rec) = libs {
        let codes = crate::script::functions::record_codes(&rec)
            .map_err(crate::store::StoreError::Corrupt)?;
        for code in &codes {
            w.function(code).map_err(io)?;
        }
        sum.functions = codes.len();
    }
    let mut last_report = Instant::now();
    for (db, &gen) in ns.gens.iter().enumerate() {
        let it = store.db.iter(
            &store.subs.meta,
            IterOptions {
                snapshot: Some(&snap),
                prefix: Some(encoding::ns_prefix(gen).to_vec()),
                ..Default::default()
            },
        )?;
        let mut selected = false;
        for r in it {
            let (mk, rec) = r?;
            let key = encoding::user_key(&mk, &rec)?.to_vec();
            if Meta::decode(&rec)?.expired(now) {
                continue;
            }
            let mut txn = Txn::at_snapshot(store, &snap, ns.clone(), &[(db, &key)], now);
            let Some((v, expire_at)) = whole::read(&mut txn, db, &key).map_err(|e| match e {
                crate::types::Error::Store(s) => TransferError::Store(s),
                e => TransferError::Store(crate::store::StoreError::Corrupt(e.to_string())),
            })?
            else {
                continue;
            };
            drop(txn);
            if whole::is_empty(&v) {
                continue;
            }
            if !selected {
                // The size hint is the database's key count now (Redis sizes its tables by
                // it); expiring keys are not counted apart.
                w.select_db(db as u64, store.dbsize(db) as u64, 0)
                    .map_err(io)?;
                selected = true;
            }
            w.key(&key, &v, expire_at).map_err(io)?;
            sum.per_db[db] += 1;
            if last_report.elapsed() >= Duration::from_secs(1) {
                last_report = Instant::now();
                progress(sum.keys(), w.written());
            }
        }
    }
    drop(snap);
    sum.bytes = w.written();
    let mut f = w.finish().map_err(io)?;
    f.flush().map_err(io)?;
    Ok((f, sum))
}

//! `SAVE`/`BGSAVE`: a consistent copy of the keyspace in a directory of its own, which
//! `nacre-server --dir <dir>/checkpoint` opens. No fork and no pause: the copy reads one
//! engine snapshot (every acknowledged write up to one commit, nothing after), while clients
//! go on writing.
//!
//! The copy is written into `checkpoint.tmp`, closed cleanly, and renamed over `checkpoint`:
//! a crash leaves the previous checkpoint whole.

use std::path::{Path, PathBuf};

use nacre::{IterOptions, Options, Snapshot, Subtable, WriteBatch};

use super::encoding::{self, Meta};
use super::{Result, Store, StoreError};

/// Where checkpoints go, inside the data directory.
pub const CHECKPOINT_DIR: &str = "checkpoint";

/// Bytes per batch while copying (well under one zone).
const CHUNK: usize = 512 << 10;

struct Copier<'a> {
    dst: &'a nacre::Db,
    batch: WriteBatch,
    bytes: usize,
    records: u64,
}

impl Copier<'_> {
    fn put(&mut self, sub: &Subtable, k: &[u8], v: &[u8]) -> Result<()> {
        self.batch.put(sub, k, v);
        self.bytes += k.len() + v.len() + 32;
        self.records += 1;
        if self.bytes >= CHUNK || v.len() >= CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.batch.is_empty() {
            self.dst.write(std::mem::take(&mut self.batch))?;
        }
        self.bytes = 0;
        Ok(())
    }
}

/// What a checkpoint wrote.
pub struct Saved {
    /// Where.
    pub dir: PathBuf,
    /// Keys copied.
    pub keys: u64,
    /// Records copied.
    pub records: u64,
}

/// The pool a checkpoint gets: room for the live data twice over and the memtables, at
/// least 256 MiB, at most the pool it copies (a pool file takes its whole size on disk, so
/// a checkpoint sized like its source could not be written beside a large pool that is
/// mostly free).
fn checkpoint_pool_size(live: u64, template: u64) -> u64 {
    let want = live.saturating_mul(2).saturating_add(256 << 20);
    want.min(template).max((256u64 << 20).min(template))
}

/// Writes a checkpoint of `store` into `data_dir/checkpoint`, with engine options like
/// `template`'s (backend; a pool sized to the data, see [`checkpoint_pool_size`], or the
/// source's size if that proves too small).
pub fn save(store: &Store, data_dir: &Path, template: &Options) -> Result<Saved> {
    let live = store.db.stats().live_bytes;
    let size = checkpoint_pool_size(live, template.pool_size);
    match save_sized(store, data_dir, template, size) {
        Err(StoreError::Engine(nacre::Error::PoolFull { .. })) if size < template.pool_size => {
            tracing::warn!(
                size,
                live,
                "the checkpoint did not fit a pool sized to the data; saving it again in one the size of the source's"
            );
            save_sized(store, data_dir, template, template.pool_size)
        }
        r => r,
    }
}

fn save_sized(store: &Store, data_dir: &Path, template: &Options, size: u64) -> Result<Saved> {
    let snap: Snapshot = store.db.snapshot();
    let ns = match store
        .db
        .get_at(&store.subs.sys, super::open::NAMESPACES, &snap)?
    {
        Some(b) => super::Namespaces::decode(&b)?,
        None => store.ns.read().clone(),
    };
    let io = |e: std::io::Error| StoreError::Corrupt(format!("checkpoint: {e}"));
    let tmp = data_dir.join("checkpoint.tmp");
    let fin = data_dir.join(CHECKPOINT_DIR);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io)?;
    }
    std::fs::create_dir_all(&tmp).map_err(io)?;
    let mut opts = Options::new(tmp.join(super::open::POOL_FILE)).backend(template.pool.backend);
    opts.pool_size = size;
    opts.gi_size_limit = template.gi_size_limit;
    opts.persistent_index = template.persistent_index;
    // A checkpoint of a database with disk levels keeps its own in `disk` inside it.
    opts.disk_dir = template.disk_dir.as_ref().map(|_| tmp.join("disk"));
    let dst = nacre::Db::open(opts)?;
    let subs = super::Subtables {
        meta: dst.subtable("meta")?,
        sub: dst.subtable("sub")?,
        expire: dst.subtable("expire")?,
        gc: dst.subtable("gc")?,
        sys: dst.subtable("sys")?,
    };
    let mut c = Copier {
        dst: &dst,
        batch: WriteBatch::new(),
        bytes: 0,
        records: 0,
    };
    let mut keys = 0u64;
    let src = &store.subs;
    for &gen in &ns.gens {
        let it = store.db.iter(
            &src.meta,
            IterOptions {
                snapshot: Some(&snap),
                prefix: Some(encoding::ns_prefix(gen).to_vec()),
                ..Default::default()
            },
        )?;
        for r in it {
            let (k, v) = r?;
            let m = Meta::decode(&v)?;
            c.put(&subs.meta, &k, &v)?;
            keys += 1;
            if m.expire_at != 0 {
                if let Ok(key) = encoding::user_key(&k, &v) {
                    c.put(
                        &subs.expire,
                        &encoding::expire_key(m.expire_at, gen, key),
                        &[],
                    )?;
                }
            }
            if m.kind.is_collection() {
                let members = store.db.iter(
                    &src.sub,
                    IterOptions {
                        snapshot: Some(&snap),
                        prefix: Some(encoding::sub_prefix(m.version).to_vec()),
                        ..Default::default()
                    },
                )?;
                for r in members {
                    let (mk, mv) = r?;
                    c.put(&subs.sub, &mk, &mv)?;
                }
            }
        }
    }
    for key in [
        super::open::NAMESPACES,
        super::commits::VERSION_MARK,
        super::open::ACL,
        super::repl_mark::RECORD,
    ] {
        if let Some(v) = store.db.get_at(&src.sys, key, &snap)? {
            c.put(&subs.sys, key, &v)?;
        }
    }
    // The version mark in the snapshot covers every version the snapshot holds (K5).
    c.flush()?;
    let records = c.records;
    drop(snap);
    drop(subs);
    dst.close()?;
    if fin.exists() {
        let old = data_dir.join("checkpoint.old");
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(&fin, &old).map_err(io)?;
        std::fs::rename(&tmp, &fin).map_err(io)?;
        std::fs::remove_dir_all(&old).map_err(io)?;
    } else {
        std::fs::rename(&tmp, &fin).map_err(io)?;
    }
    Ok(Saved {
        dir: fin,
        keys,
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::checkpoint_pool_size as size;

    #[test]
    fn a_checkpoint_pool_is_sized_to_the_data() {
        let gib = 1u64 << 30;
        assert_eq!(size(0, 8 * gib), 256 << 20);
        assert_eq!(size(gib, 8 * gib), 2 * gib + (256 << 20));
        assert_eq!(size(6 * gib, 8 * gib), 8 * gib);
        assert_eq!(size(0, 64 << 20), 64 << 20);
    }
}

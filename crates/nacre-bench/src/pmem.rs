//! The nacre-pmem subjects: a pool on the backend under test with one region the loops write,
//! made durable only through the pool's API (`write` + `persist`, `copy_persist`,
//! `persist_u64`).

use std::path::Path;

use nacre_pmem::{Backend, BackendReport, PmOffset, Pool, PoolOptions, MIN_POOL_SIZE};

use crate::bench::{PersistOps, TempFile};
use crate::error::Result;

/// Pool bytes beyond the region: superblock plus alignment slack.
const POOL_OVERHEAD: u64 = 64 << 10;
/// Chunk used to pre-fault the region before measuring.
const PREFILL_CHUNK: usize = 1 << 20;

/// How [`PoolSubject::put`] writes a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    /// `pool.write` then `pool.persist` (cached stores, line write-backs, fence).
    Persist,
    /// `pool.copy_persist` (non-temporal stores where the backend flushes cache lines, fence).
    CopyPersist,
}

/// A pool with one reserved, pre-faulted region.
///
/// Field order matters: the pool closes before its file is removed.
#[derive(Debug)]
pub struct PoolSubject {
    pool: Pool,
    base: PmOffset,
    len: usize,
    mode: PoolMode,
    _tmp: Option<TempFile>,
}

fn pool_size(len: usize) -> u64 {
    (len as u64 + POOL_OVERHEAD).max(MIN_POOL_SIZE)
}

impl PoolSubject {
    /// Creates a pool file at `path` (which must not exist) on `backend`, with a `len`-byte
    /// region. The file is removed when the subject drops.
    pub fn create_file(path: &Path, len: usize, backend: Backend, mode: PoolMode) -> Result<Self> {
        let pool = Pool::create(path, pool_size(len), &PoolOptions::with_backend(backend))?;
        let tmp = TempFile::new(path.to_path_buf());
        Self::init(pool, len, mode, Some(tmp))
    }

    /// Creates an in-memory pool on the `sim` backend with a `len`-byte region.
    pub fn create_sim(len: usize, mode: PoolMode) -> Result<Self> {
        let pool = Pool::create_sim(pool_size(len), &PoolOptions::with_backend(Backend::Sim))?;
        Self::init(pool, len, mode, None)
    }

    fn init(pool: Pool, len: usize, mode: PoolMode, tmp: Option<TempFile>) -> Result<Self> {
        let region = pool.reserve_region("bench", len as u64, 4096, 0)?;
        let mut s = PoolSubject {
            pool,
            base: region.offset,
            len,
            mode: PoolMode::Persist,
            _tmp: tmp,
        };
        let zeros = vec![0u8; PREFILL_CHUNK];
        for off in (0..len).step_by(PREFILL_CHUNK) {
            s.put(off, &zeros[..PREFILL_CHUNK.min(len - off)])?;
        }
        s.mode = mode;
        Ok(s)
    }

    /// The backend in use, its flush instruction and what it survives.
    pub fn report(&self) -> &BackendReport {
        self.pool.report()
    }

    /// Path of the pool file (`<sim>` for the simulator).
    pub fn path(&self) -> &Path {
        self.pool.path()
    }
}

impl PersistOps for PoolSubject {
    fn region_len(&self) -> usize {
        self.len
    }

    #[inline]
    fn put(&mut self, off: usize, data: &[u8]) -> Result<()> {
        let at = self.base.add(off as u64);
        match self.mode {
            PoolMode::Persist => {
                // SAFETY: the subject's region is its own (one pool per subject, used by one
                // thread through `&mut self`).
                unsafe { self.pool.write(at, data) };
                self.pool.persist(at, data.len())?;
            }
            // SAFETY: as above.
            PoolMode::CopyPersist => unsafe { self.pool.copy_persist(at, data)? },
        }
        Ok(())
    }

    #[inline]
    fn put_u64(&mut self, off: usize, v: u64) -> Result<()> {
        self.pool.persist_u64(self.base.add(off as u64), v)?;
        Ok(())
    }
}

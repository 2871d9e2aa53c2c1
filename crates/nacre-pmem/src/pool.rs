//! `Pool`: a mapped persistent-memory pool and the only way Nacre makes bytes durable.
//!
//! Durability protocol: store into the pool, `flush` the range, `fence`. After `fence` returns
//! `Ok`, everything this thread flushed before it survives what the backend survives
//! (`BackendReport::active.survives()`). `persist` is `flush` + `fence`; `copy_persist` does a
//! non-temporal copy then `fence`; `persist_u64` is an 8-byte atomic store made durable.
//!
//! Thread safety: `Pool` is `Send + Sync`. Flushes are per thread: a `fence` completes only the
//! calling thread's flushes, as `sfence` does on real hardware. The bytes of the pool are
//! shared memory; structures built on it own the discipline for concurrent access to them.
//!
//! Offsets passed to the accessors are trusted: out-of-range offsets panic like slice indexing
//! does. Offsets read back from media must be checked first with [`Pool::check_range`].

use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::backend::{ActiveBackend, BackendReport};
use crate::error::{PmemError, Result};
use crate::flush::{self, lines_spanned, FlushInstr};
use crate::mapping::{page_size, Mapping};
use crate::offset::PmOffset;
use crate::sim::SimControl;
use crate::superblock::{
    Header, Meta, Region, DATA_START, MAX_REGIONS, META_SLOT_OFFSET, META_SLOT_SIZE,
    REGION_NAME_MAX, ROOT_SLOTS,
};

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// msync backend: page ranges this thread flushed and has not fenced, as (pool, start, end).
    static MSYNC_DIRTY: RefCell<Vec<(u64, usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// A persistent-memory pool mapped into this process.
pub struct Pool {
    id: u64,
    // Field order matters: `sim` points into `map`, so it must drop first.
    sim: Option<SimControl>,
    map: Mapping,
    report: BackendReport,
    header: Header,
    meta: Mutex<(usize, Meta)>,
    path: PathBuf,
    _lock: Option<File>,
    /// Set by `close`, which has already written everything back.
    closed: bool,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("path", &self.path)
            .field("size", &self.header.pool_size)
            .field("backend", &self.report.active)
            .finish()
    }
}

pub(crate) struct PoolParts {
    pub map: Mapping,
    pub report: BackendReport,
    pub path: PathBuf,
    pub lock: Option<File>,
    pub sim_media: Option<Vec<u8>>,
}

impl Pool {
    /// Assembles a pool over a mapping whose header has been validated (or is about to be
    /// formatted). `meta` is the current slot index and its contents.
    pub(crate) fn assemble(parts: PoolParts, header: Header, meta: (usize, Meta)) -> Pool {
        let id = NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed);
        let sim = parts
            .sim_media
            .map(|m| SimControl::new(id, parts.map.ptr(), parts.map.len(), m));
        Pool {
            id,
            sim,
            map: parts.map,
            report: parts.report,
            header,
            meta: Mutex::new(meta),
            path: parts.path,
            _lock: parts.lock,
            closed: false,
        }
    }

    /// Pool size in bytes.
    pub fn size(&self) -> u64 {
        self.header.pool_size
    }

    /// First offset available to regions.
    pub fn data_start(&self) -> PmOffset {
        PmOffset(DATA_START)
    }

    /// The random identity assigned when the pool was created.
    pub fn uuid(&self) -> [u8; 16] {
        self.header.uuid
    }

    /// Path of the pool file (`<sim>` for in-memory pools).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which backend is in use, why, and what it survives.
    pub fn report(&self) -> &BackendReport {
        &self.report
    }

    /// The backend in use.
    pub fn backend(&self) -> ActiveBackend {
        self.report.active
    }

    /// The simulator's controls, for `sim` pools.
    pub fn sim(&self) -> Option<&SimControl> {
        self.sim.as_ref()
    }

    /// Checks that `[off, off + len)` lies inside the pool. Use it on every offset or length
    /// read from media before dereferencing.
    pub fn check_range(&self, off: PmOffset, len: u64) -> Result<()> {
        match off.get().checked_add(len) {
            Some(end) if end <= self.size() => Ok(()),
            _ => Err(PmemError::OutOfBounds {
                offset: off.get(),
                len,
                pool_size: self.size(),
            }),
        }
    }

    #[inline]
    #[track_caller]
    fn bounds(&self, off: PmOffset, len: usize) -> usize {
        let o = off.get() as usize;
        assert!(
            o.checked_add(len).is_some_and(|e| e <= self.map.len()),
            "pool access {off}+{len} outside pool of {} bytes",
            self.map.len()
        );
        o
    }

    /// Raw pointer to `off`, valid for `len` bytes.
    ///
    /// # Panics
    /// If the range leaves the pool.
    #[inline]
    #[track_caller]
    pub fn ptr(&self, off: PmOffset, len: usize) -> *mut u8 {
        let o = self.bounds(off, len);
        // SAFETY: `o + len <= map.len()` was just checked.
        unsafe { self.map.ptr().add(o) }
    }

    /// Copies `buf.len()` bytes at `off` into `buf`.
    ///
    /// # Safety
    /// The pool is memory shared between threads (and processes): no other thread may write
    /// any byte of `[off, off + buf.len())` while this runs. A reader that may race a writer
    /// uses [`Pool::load_u64`].
    ///
    /// # Panics
    /// If the range leaves the pool.
    #[track_caller]
    pub unsafe fn read(&self, off: PmOffset, buf: &mut [u8]) {
        let p = self.ptr(off, buf.len());
        // SAFETY: `p` is valid for `buf.len()` bytes (bounds checked) and cannot overlap a
        // Rust-owned buffer.
        unsafe { std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
    }

    /// Stores `data` at `off` through the cache. Not durable until flushed and fenced.
    ///
    /// # Safety
    /// No other thread may read or write any byte of `[off, off + data.len())` while this
    /// runs (the bytes belong to the caller until it publishes them, e.g. with a release
    /// store of an 8-byte word through [`Pool::store_u64`]).
    ///
    /// # Panics
    /// If the range leaves the pool.
    #[track_caller]
    pub unsafe fn write(&self, off: PmOffset, data: &[u8]) {
        let p = self.ptr(off, data.len());
        // SAFETY: `p` is valid for `data.len()` bytes and cannot overlap a Rust-owned slice.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
    }

    #[track_caller]
    fn atomic_u64(&self, off: PmOffset) -> &AtomicU64 {
        assert!(off.get() % 8 == 0, "unaligned 8-byte access at {off}");
        let p = self.ptr(off, 8);
        // SAFETY: `p` is in bounds, 8-byte aligned (mapping is page-aligned), and lives as
        // long as `&self`; AtomicU64 has the layout of u64.
        unsafe { &*(p as *const AtomicU64) }
    }

    /// Atomically loads the 8-byte word at `off` (acquire).
    ///
    /// # Panics
    /// If `off` is not 8-aligned or leaves the pool.
    #[track_caller]
    pub fn load_u64(&self, off: PmOffset) -> u64 {
        self.atomic_u64(off).load(Ordering::Acquire)
    }

    /// Atomically stores the 8-byte word at `off` (release) and flushes its line. Durable at the
    /// next `fence`; never torn by a crash.
    ///
    /// # Panics
    /// If `off` is not 8-aligned or leaves the pool.
    #[track_caller]
    pub fn store_u64(&self, off: PmOffset, v: u64) {
        self.atomic_u64(off).store(v, Ordering::Release);
        self.flush(off, 8);
    }

    /// Atomically stores the 8-byte word at `off` (release) without flushing it: it reaches
    /// media whenever the CPU evicts the line, or never. For words whose loss recovery
    /// tolerates (hints, lazily maintained links).
    ///
    /// # Panics
    /// If `off` is not 8-aligned or leaves the pool.
    #[track_caller]
    pub fn store_u64_unflushed(&self, off: PmOffset, v: u64) {
        self.atomic_u64(off).store(v, Ordering::Release);
    }

    /// [`Pool::store_u64`] followed by [`Pool::fence`].
    #[track_caller]
    pub fn persist_u64(&self, off: PmOffset, v: u64) -> Result<()> {
        self.store_u64(off, v);
        self.fence()
    }

    /// Starts writing back the cache lines of `[off, off + len)`. Durable at the next `fence`
    /// of this thread.
    ///
    /// # Panics
    /// If the range leaves the pool.
    #[track_caller]
    pub fn flush(&self, off: PmOffset, len: usize) {
        let o = self.bounds(off, len);
        if len == 0 {
            return;
        }
        match self.report.active {
            ActiveBackend::Dax | ActiveBackend::Emulated => {
                // SAFETY: range bounds-checked; the instruction was verified supported at open.
                unsafe { flush::flush_range(self.report.flush_instr, self.map.ptr().add(o), len) }
            }
            ActiveBackend::Msync => self.record_dirty(o, len),
            ActiveBackend::Sim => {
                if let Some(s) = &self.sim {
                    s.flush(o, len);
                }
                return;
            }
        }
        self.media_delay(lines_spanned(o, len));
    }

    fn media_delay(&self, lines: usize) {
        let ns = self.report.flush_delay_ns;
        if ns > 0 {
            let until = Instant::now() + Duration::from_nanos(ns.saturating_mul(lines as u64));
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }

    fn record_dirty(&self, off: usize, len: usize) {
        let page = page_size();
        let start = off & !(page - 1);
        let end = (off + len).div_ceil(page) * page;
        MSYNC_DIRTY.with(|d| {
            let mut d = d.borrow_mut();
            if let Some(last) = d.last_mut() {
                if last.0 == self.id && start <= last.2 && end >= last.1 {
                    last.1 = last.1.min(start);
                    last.2 = last.2.max(end);
                    return;
                }
            }
            d.push((self.id, start, end));
        });
    }

    /// The span of every range this thread flushed on this pool since its last fence, taken
    /// off the thread's list.
    fn take_dirty(&self) -> Option<(usize, usize)> {
        MSYNC_DIRTY.with(|d| {
            let mut d = d.borrow_mut();
            let mut span: Option<(usize, usize)> = None;
            d.retain(|&(id, s, e)| {
                if id == self.id {
                    span = Some(span.map_or((s, e), |(a, b)| (a.min(s), b.max(e))));
                    false
                } else {
                    true
                }
            });
            // Every range shares one msync: each call is a file sync (a journal commit and a
            // device flush), while a wider range costs only the kernel's walk of the file's
            // dirty pages in it (it finds them by tag, not page by page). A commit that
            // touches several memtables far apart in the pool still waits for one flush.
            span
        })
    }

    /// Completes every flush this thread issued on this pool: afterwards they survive what the
    /// backend survives. Fails only on the msync backend, when the kernel reports an I/O error
    /// (the data must then be treated as not durable).
    pub fn fence(&self) -> Result<()> {
        match self.report.active {
            ActiveBackend::Dax | ActiveBackend::Emulated => {
                flush::sfence();
                Ok(())
            }
            ActiveBackend::Msync => {
                if let Some((s, e)) = self.take_dirty() {
                    self.map.msync(s, e - s).map_err(|source| PmemError::Io {
                        op: "msync",
                        path: self.path.clone(),
                        source,
                    })?;
                }
                Ok(())
            }
            ActiveBackend::Sim => match &self.sim {
                Some(s) => s.fence(),
                None => Ok(()),
            },
        }
    }

    /// Asks the kernel to map `[off, off + len)` writable now (`MADV_POPULATE_WRITE`), so the
    /// first stores there do not take page faults (which can sleep on tmpfs and stall every
    /// thread waiting on this one). Contents are unchanged. Best effort: kernels without the
    /// advice simply fault later.
    ///
    /// # Panics
    /// If the range leaves the pool.
    #[track_caller]
    pub fn prefault(&self, off: PmOffset, len: usize) {
        let o = self.bounds(off, len);
        if len > 0 {
            self.map.populate_write(o, len);
        }
    }

    /// `flush(off, len)` then `fence()`.
    #[track_caller]
    pub fn persist(&self, off: PmOffset, len: usize) -> Result<()> {
        self.flush(off, len);
        self.fence()
    }

    /// Copies `src` to `off` with non-temporal stores (bypassing the cache where the backend
    /// flushes cache lines; copies shorter than [`flush::NT_MIN_LEN`] go through the cache and
    /// are flushed, which is faster for them). Durable at the next `fence`, like a flush.
    ///
    /// # Safety
    /// As for [`Pool::write`]: the destination range is the caller's alone while this runs.
    ///
    /// # Panics
    /// If the range leaves the pool.
    #[track_caller]
    pub unsafe fn copy_nt(&self, off: PmOffset, src: &[u8]) {
        let o = self.bounds(off, src.len());
        if self.report.active.uses_cache_flush() {
            // SAFETY: destination bounds-checked, cannot overlap the Rust-owned `src`; the
            // instruction was verified at open.
            unsafe { flush::copy_nt(self.report.flush_instr, self.map.ptr().add(o), src) };
            self.media_delay(lines_spanned(o, src.len()));
        } else {
            // SAFETY: the caller owns the range (this function's contract).
            unsafe { self.write(off, src) };
            self.flush(off, src.len());
        }
    }

    /// `copy_nt(off, src)` then `fence()`.
    ///
    /// # Safety
    /// As for [`Pool::copy_nt`].
    #[track_caller]
    pub unsafe fn copy_persist(&self, off: PmOffset, src: &[u8]) -> Result<()> {
        // SAFETY: the caller owns the range (this function's contract).
        unsafe { self.copy_nt(off, src) };
        self.fence()
    }

    fn meta(&self) -> MutexGuard<'_, (usize, Meta)> {
        // Metadata updates write a whole slot and swap the in-memory copy only after success,
        // so a poisoned lock still guards consistent data.
        self.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `next` into the slot that is not current and makes it current (invariant S2).
    fn commit_meta(&self, cur: &mut (usize, Meta), mut next: Meta) -> Result<()> {
        next.seq = cur.1.seq + 1;
        let slot = 1 - cur.0;
        let off = PmOffset(META_SLOT_OFFSET + (slot * META_SLOT_SIZE) as u64);
        // SAFETY: metadata slots are written only here, under the metadata lock, and read
        // only at open (before the pool is shared).
        unsafe { self.write(off, &next.encode()) };
        self.persist(off, META_SLOT_SIZE)?;
        *cur = (slot, next);
        Ok(())
    }

    /// The root offset in slot `index` (NULL until set).
    pub fn root(&self, index: usize) -> Result<PmOffset> {
        if index >= ROOT_SLOTS {
            return Err(PmemError::BadRootIndex {
                index,
                max: ROOT_SLOTS,
            });
        }
        Ok(PmOffset(self.meta().1.roots[index]))
    }

    /// Sets root slot `index` durably and crash-atomically.
    pub fn set_root(&self, index: usize, off: PmOffset) -> Result<()> {
        if index >= ROOT_SLOTS {
            return Err(PmemError::BadRootIndex {
                index,
                max: ROOT_SLOTS,
            });
        }
        let mut cur = self.meta();
        let mut next = cur.1.clone();
        next.roots[index] = off.get();
        self.commit_meta(&mut cur, next)
    }

    /// The region named `name`, if reserved.
    pub fn region(&self, name: &str) -> Option<Region> {
        self.meta()
            .1
            .regions
            .iter()
            .find(|r| r.name == name)
            .cloned()
    }

    /// Every reserved region, in reservation order.
    pub fn regions(&self) -> Vec<Region> {
        self.meta().1.regions.clone()
    }

    /// Bytes not yet reserved by any region.
    pub fn unreserved(&self) -> u64 {
        self.size() - self.meta().1.next_free
    }

    /// Durably reserves `len` bytes aligned to `align` (a power of two) under `name`. The
    /// reservation is crash-atomic; the region's bytes are whatever the file held (zero for a
    /// fresh pool).
    pub fn reserve_region(&self, name: &str, len: u64, align: u64, tag: u64) -> Result<Region> {
        if name.is_empty() || name.len() > REGION_NAME_MAX || name.as_bytes().contains(&0) {
            return Err(PmemError::BadRegionName {
                name: name.to_string(),
                max: REGION_NAME_MAX,
            });
        }
        if !align.is_power_of_two() {
            return Err(PmemError::InvalidOptions(format!(
                "region alignment {align} is not a power of two"
            )));
        }
        let mut cur = self.meta();
        if cur.1.regions.iter().any(|r| r.name == name) {
            return Err(PmemError::RegionExists {
                name: name.to_string(),
            });
        }
        if cur.1.regions.len() >= MAX_REGIONS {
            return Err(PmemError::RegionTableFull { max: MAX_REGIONS });
        }
        let start = cur.1.next_free.next_multiple_of(align);
        let end = start.checked_add(len).filter(|&e| e <= self.size());
        let Some(end) = end else {
            return Err(PmemError::PoolFull {
                name: name.to_string(),
                len,
                free: self.size() - cur.1.next_free,
                pool_size: self.size(),
            });
        };
        let region = Region {
            name: name.to_string(),
            offset: PmOffset(start),
            len,
            tag,
        };
        let mut next = cur.1.clone();
        next.next_free = end;
        next.regions.push(region.clone());
        self.commit_meta(&mut cur, next)?;
        Ok(region)
    }

    /// Closes the pool, reporting a failed final write-back (msync backend) instead of only
    /// logging it as `drop` does.
    pub fn close(mut self) -> Result<()> {
        let r = self.sync_all();
        self.closed = true;
        r
    }

    fn sync_all(&self) -> Result<()> {
        if self.report.active == ActiveBackend::Msync {
            self.take_dirty();
            self.map
                .msync(0, self.map.len())
                .map_err(|source| PmemError::Io {
                    op: "msync",
                    path: self.path.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The flush instruction this pool uses.
    pub fn flush_instr(&self) -> FlushInstr {
        self.report.flush_instr
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(s) = &self.sim {
            s.discard_pending();
        }
        if self.closed {
            return;
        }
        if let Err(e) = self.sync_all() {
            tracing::error!(error = %e, "final msync failed while closing pool");
        }
    }
}

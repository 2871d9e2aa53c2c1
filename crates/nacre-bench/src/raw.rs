//! The anchors: the same persisted loops written without nacre-pmem.
//!
//! - [`RawMap`]: a `MAP_SHARED` mapping of a file (on /dev/shm), made durable with a cache-line
//!   write-back per 64-byte line (`clwb`, else `clflushopt`, else `clflush`) and `sfence`, or
//!   with non-temporal stores and `sfence`. This is the physical limit the emulated backend is
//!   compared with.
//! - [`RawSync`]: `pwrite` at the offset, then `fdatasync`, on a disk file: the anchor for the
//!   msync backend.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::bench::{PersistOps, TempFile};
use crate::error::{io_err, BenchError, Result};

const LINE: usize = 64;
/// Creates `path` (which must not exist) for reading and writing; it is removed when the
/// returned guard drops.
fn create_scratch(path: &Path) -> Result<(File, TempFile)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err("create", path))?;
    Ok((file, TempFile::new(path.to_path_buf())))
}

/// Chunk used to pre-fault and pre-write regions before measuring.
const PREFILL_CHUNK: usize = 1 << 20;

/// Cache-line write-back instruction chosen by CPUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFlush {
    /// `clwb`: CPUID.(EAX=7,ECX=0):EBX bit 24.
    Clwb,
    /// `clflushopt`: CPUID.(EAX=7,ECX=0):EBX bit 23.
    Clflushopt,
    /// `clflush`: CPUID.1:EDX bit 19.
    Clflush,
}

impl LineFlush {
    /// The best write-back instruction this CPU has, if any.
    pub fn detect() -> Option<LineFlush> {
        #[cfg(target_arch = "x86_64")]
        {
            let l7 = std::arch::x86_64::__cpuid_count(7, 0);
            let l1 = std::arch::x86_64::__cpuid(1);
            if l7.ebx & (1 << 24) != 0 {
                Some(LineFlush::Clwb)
            } else if l7.ebx & (1 << 23) != 0 {
                Some(LineFlush::Clflushopt)
            } else if l1.edx & (1 << 19) != 0 {
                Some(LineFlush::Clflush)
            } else {
                None
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// Lower-case mnemonic.
    pub fn name(self) -> &'static str {
        match self {
            LineFlush::Clwb => "clwb",
            LineFlush::Clflushopt => "clflushopt",
            LineFlush::Clflush => "clflush",
        }
    }
}

/// Writes back every line of `[p, p + len)` with `kind`, then `sfence`.
///
/// # Safety
/// The range must be mapped and `kind` supported by this CPU (as [`LineFlush::detect`] checks).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flush_fence(kind: LineFlush, p: *const u8, len: usize) {
    use std::arch::asm;
    let mut line = p as usize & !(LINE - 1);
    let end = p as usize + len;
    // A store to a cached line between the data stores and their write-back. On the Sapphire
    // Rapids guest this was written on, `clwb` issued right behind a store that misses the cache
    // costs ~80 ns more (random 8 B persist: ~260 vs ~180 ns per op), while nacre-pmem's path
    // has such stores there anyway (call frames). Without it the anchor would be slower than
    // what it anchors, which no physical limit can be.
    let mut scratch = 0usize;
    // SAFETY: a volatile store to a live local.
    unsafe { std::ptr::write_volatile(&mut scratch, line) };
    // SAFETY: every `line` overlaps the caller's mapped range and the instruction exists (caller
    // contract); write-backs and `sfence` touch no memory contents or registers but the input.
    unsafe {
        match kind {
            LineFlush::Clwb => {
                while line < end {
                    asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags));
                    line += LINE;
                }
            }
            LineFlush::Clflushopt => {
                while line < end {
                    asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags));
                    line += LINE;
                }
            }
            LineFlush::Clflush => {
                while line < end {
                    asm!("clflush [{0}]", in(reg) line, options(nostack, preserves_flags));
                    line += LINE;
                }
            }
        }
        asm!("sfence", options(nostack, preserves_flags));
    }
}

/// Copies `src` to the 16-byte aligned `dst` with non-temporal stores (16-byte multiples), then
/// `sfence`.
///
/// # Safety
/// `dst..dst + src.len()` must be mapped, writable, 16-byte aligned, not overlap `src`, and
/// `src.len()` a multiple of 16.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_fence(dst: *mut u8, src: &[u8]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    debug_assert!(dst as usize % 16 == 0 && src.len() % 16 == 0);
    let mut i = 0;
    // SAFETY: caller contract: both ranges are valid and `dst + i` stays 16-byte aligned; SSE2
    // is part of the x86-64 baseline.
    unsafe {
        while i < src.len() {
            let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            _mm_stream_si128(dst.add(i) as *mut __m128i, v);
            i += 16;
        }
        _mm_sfence();
    }
}

/// How [`RawMap`] makes a write durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawMode {
    /// `memcpy`, then a write-back per line, then `sfence`.
    FlushFence(LineFlush),
    /// Non-temporal stores (16-byte `movntdq`, 8-byte `movnti`), then `sfence`.
    Stream,
}

/// A shared file mapping written with CPU stores and cache write-backs, no nacre-pmem.
///
/// Invariant: `ptr..ptr + len` is a live `MAP_SHARED` mapping of `_file` until drop.
#[derive(Debug)]
pub struct RawMap {
    ptr: *mut u8,
    len: usize,
    mode: RawMode,
    _file: File,
    tmp: TempFile,
}

impl RawMap {
    /// Creates `path` (which must not exist) with `len` bytes, maps it shared and pre-faults
    /// every page. Fails on CPUs other than x86-64.
    pub fn create(path: &Path, len: usize, mode: RawMode) -> Result<RawMap> {
        if !cfg!(target_arch = "x86_64") {
            return Err(BenchError::InvalidParams(
                "raw cache-flush loops need x86-64".into(),
            ));
        }
        let (file, tmp) = create_scratch(path)?;
        // SAFETY: posix_fallocate on a valid descriptor has no memory effects.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
        if rc != 0 {
            file.set_len(len as u64).map_err(io_err("set_len", path))?;
        }
        // SAFETY: a fresh shared mapping of `len` bytes of a file that is `len` bytes long; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io_err("mmap", path)(std::io::Error::last_os_error()));
        }
        let mut map = RawMap {
            ptr: p.cast(),
            len,
            mode,
            _file: file,
            tmp,
        };
        let zeros = vec![0u8; PREFILL_CHUNK];
        for off in (0..len).step_by(PREFILL_CHUNK) {
            map.put(off, &zeros[..PREFILL_CHUNK.min(len - off)])?;
        }
        Ok(map)
    }

    /// The mapped file.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }
}

impl Drop for RawMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `create`; nothing borrows it past drop.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl PersistOps for RawMap {
    fn region_len(&self) -> usize {
        self.len
    }

    #[inline]
    fn put(&mut self, off: usize, data: &[u8]) -> Result<()> {
        assert!(off + data.len() <= self.len, "raw write outside mapping");
        #[cfg(target_arch = "x86_64")]
        match self.mode {
            // SAFETY: the range was bounds-checked against the live mapping, `data` is
            // Rust-owned so cannot overlap it, and `k` came from `LineFlush::detect`.
            RawMode::FlushFence(k) => unsafe {
                let dst = self.ptr.add(off);
                std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len());
                flush_fence(k, dst, data.len());
            },
            // SAFETY: as above; the mapping is page-aligned, and the loops use 16-byte
            // multiples at 16-byte aligned offsets (checked in debug builds).
            RawMode::Stream => unsafe { stream_fence(self.ptr.add(off), data) },
        }
        Ok(())
    }

    #[inline]
    fn put_u64(&mut self, off: usize, v: u64) -> Result<()> {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "raw store outside mapping"
        );
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: `off` is in bounds and 8-aligned within a page-aligned mapping, so the
            // store is a single untorn 8-byte write; `k` is supported (see `put`).
            unsafe {
                let p = self.ptr.add(off);
                match self.mode {
                    RawMode::FlushFence(k) => {
                        std::ptr::write_volatile(p as *mut u64, v);
                        flush_fence(k, p, 8);
                    }
                    RawMode::Stream => {
                        std::arch::x86_64::_mm_stream_si64(p as *mut i64, v as i64);
                        std::arch::x86_64::_mm_sfence();
                    }
                }
            }
        }
        Ok(())
    }
}

/// A disk file written with `pwrite` and made durable with `fdatasync` after every write.
#[derive(Debug)]
pub struct RawSync {
    file: File,
    len: usize,
    tmp: TempFile,
}

impl RawSync {
    /// Creates `path` (which must not exist), writes `len` zero bytes and syncs them, so the
    /// measured loop overwrites allocated blocks as the msync pool does.
    pub fn create(path: &Path, len: usize) -> Result<RawSync> {
        let (file, tmp) = create_scratch(path)?;
        let zeros = vec![0u8; PREFILL_CHUNK];
        for off in (0..len).step_by(PREFILL_CHUNK) {
            file.write_all_at(&zeros[..PREFILL_CHUNK.min(len - off)], off as u64)
                .map_err(io_err("pwrite", path))?;
        }
        file.sync_all().map_err(io_err("fsync", path))?;
        Ok(RawSync { file, len, tmp })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    fn fdatasync(&self) -> Result<()> {
        // SAFETY: fdatasync on a descriptor this struct owns; no memory effects.
        if unsafe { libc::fdatasync(self.file.as_raw_fd()) } != 0 {
            return Err(io_err("fdatasync", self.tmp.path())(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }
}

impl PersistOps for RawSync {
    fn region_len(&self) -> usize {
        self.len
    }

    fn put(&mut self, off: usize, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, off as u64)
            .map_err(io_err("pwrite", self.tmp.path()))?;
        self.fdatasync()
    }

    fn put_u64(&mut self, off: usize, v: u64) -> Result<()> {
        self.put(off, &v.to_le_bytes())
    }
}

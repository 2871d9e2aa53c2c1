//! Owned memory mappings: a file mapped shared (optionally with `MAP_SYNC`), or anonymous
//! memory for the simulator's view image. Unmapped on drop.

use std::io;
use std::os::fd::RawFd;

/// `MAP_SHARED_VALIDATE` (Linux): like `MAP_SHARED` but unknown flags fail instead of being
/// ignored, so `MAP_SYNC` is either honoured or refused.
const MAP_SHARED_VALIDATE: libc::c_int = 0x03;
/// `MAP_SYNC` (Linux): page faults make file metadata durable, so cache flushes alone make
/// data durable. Only DAX files accept it.
const MAP_SYNC: libc::c_int = 0x80000;

/// A live mapping of `len` bytes at `ptr`.
///
/// Thread safety: the mapping itself is immutable after creation; the bytes it covers are
/// shared memory whose access discipline belongs to the structures built on the pool.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: `Mapping` owns an address range; the pointer is never reassigned, and unmapping
// happens only in `drop`, which has exclusive access.
unsafe impl Send for Mapping {}
// SAFETY: shared references only read `ptr`/`len`; the mapped bytes are accessed through raw
// pointers under the callers' own synchronisation.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared; with `sync`, requests `MAP_SHARED_VALIDATE | MAP_SYNC`.
    pub(crate) fn file(fd: RawFd, len: usize, sync: bool) -> io::Result<Mapping> {
        let flags = if sync {
            MAP_SHARED_VALIDATE | MAP_SYNC
        } else {
            libc::MAP_SHARED
        };
        Self::map(fd, len, flags)
    }

    /// Maps `len` zeroed bytes of private anonymous memory.
    pub(crate) fn anonymous(len: usize) -> io::Result<Mapping> {
        Self::map(-1, len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS)
    }

    fn map(fd: RawFd, len: usize, flags: libc::c_int) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping at a kernel-chosen address touches no existing memory; the
        // result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: p.cast::<u8>(),
            len,
        })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Synchronously writes back `[off, off + len)` (page-aligned by the caller or not).
    pub(crate) fn msync(&self, off: usize, len: usize) -> io::Result<()> {
        let page = page_size();
        let start = off & !(page - 1);
        let end = (off + len).min(self.len);
        if end <= start {
            return Ok(());
        }
        // SAFETY: `start..end` lies inside this mapping and `start` is page-aligned as msync
        // requires.
        let rc = unsafe {
            libc::msync(
                self.ptr.add(start).cast::<libc::c_void>(),
                end - start,
                libc::MS_SYNC,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from a successful mmap and nothing refers to the range once
        // its owner is dropped.
        unsafe {
            libc::munmap(self.ptr.cast::<libc::c_void>(), self.len);
        }
    }
}

impl Mapping {
    /// Asks the kernel to read this mapping's file one page per fault (`MADV_RANDOM`): the page
    /// cache then holds the file in single pages, so a sync writes back the pages that were
    /// stored to, not the large folios that readahead would group them into.
    pub(crate) fn advise_single_pages(&self) {
        // SAFETY: the whole mapping; the advice changes readahead only, never contents.
        let rc =
            unsafe { libc::madvise(self.ptr.cast::<libc::c_void>(), self.len, libc::MADV_RANDOM) };
        if rc != 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "MADV_RANDOM refused");
        }
    }

    /// Populates `[off, off + len)` writable (`MADV_POPULATE_WRITE`, Linux 5.14+), rounded out
    /// to pages. Errors (old kernels) are ignored: the pages then fault on first use.
    pub(crate) fn populate_write(&self, off: usize, len: usize) {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        let page = page_size();
        let start = off & !(page - 1);
        let end = (off + len).min(self.len);
        if end <= start {
            return;
        }
        // Pages not in the page cache are read first in one batch (`MADV_WILLNEED`): the
        // faults below would otherwise read them one at a time (`MADV_RANDOM` on msync pools).
        // SAFETY: as below; the advice starts reads into the page cache only.
        let rc = unsafe {
            libc::madvise(
                self.ptr.add(start).cast::<libc::c_void>(),
                end - start,
                libc::MADV_WILLNEED,
            )
        };
        if rc != 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "MADV_WILLNEED refused");
        }
        // SAFETY: `start..end` lies inside this mapping and `start` is page-aligned; the advice
        // only populates page tables and never changes contents.
        let rc = unsafe {
            libc::madvise(
                self.ptr.add(start).cast::<libc::c_void>(),
                end - start,
                MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "MADV_POPULATE_WRITE refused");
        }
    }
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

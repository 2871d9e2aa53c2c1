//! Creating a pool so that a crash at any moment leaves either no pool or a whole one.
//!
//! A pool file is built under a temporary name beside it (`<name>.nacre-creating`, see
//! [`Pool::creating_path`]) and renamed into place, without replacing anything, only once it
//! is whole: space reserved, blocks written, superblock persisted, file fsynced. The directory
//! is fsynced after the rename. The creator holds the temporary file's flock from the moment
//! it exists (and, since the inode becomes the pool, for as long as the pool is open).
//!
//! Invariants:
//! - C1: a pool path names nothing or a file whose superblock was durable before it got the
//!   name. A kill during creation leaves at most the temporary file.
//! - C2: a temporary file whose flock can be taken has no live creator (flock locks die with
//!   their process). It is removed, under that lock and only if the name still names the
//!   locked inode, by the next `create` or `open` of the pool path.
//! - C3: a creator checks, once it holds the lock, that the temporary name still names its
//!   inode; a remover that caught the file between its creation and its lock makes the
//!   creator start again rather than build an unnamed file.
//!
//! A device-DAX character device cannot be renamed: it is formatted in place.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::backend::ActiveBackend;
use crate::error::{PmemError, Result};
use crate::flush::FlushInstr;
use crate::open::{
    checked_size, device_or_file_len, flush_instr, format, io_err, is_not_writable, lock_exclusive,
    map_for_backend, new_header,
};
use crate::options::PoolOptions;
use crate::pool::{Pool, PoolParts};
use crate::superblock::Meta;
use crate::Backend;

/// Appended to a pool file's name to name the file it is built under.
const CREATING_SUFFIX: &str = ".nacre-creating";

/// Creators that found their temporary file removed under them (C3) try this many times.
const CREATE_TRIES: usize = 3;

/// What [`remove_unfinished`] found at a temporary name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unfinished {
    /// Nothing there (or it went away meanwhile).
    None,
    /// A file left by a creation that did not finish; removed.
    Removed,
    /// A creation in progress in another process (or another handle here) holds it.
    InProgress,
}

/// Removes the file at `tmp` if no creator holds it (C2).
pub(crate) fn remove_unfinished(tmp: &Path) -> Result<Unfinished> {
    let file = match File::open(tmp) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Unfinished::None),
        Err(e) => return Err(io_err("open unfinished pool file", tmp)(e)),
    };
    match lock_exclusive(&file, tmp) {
        Ok(()) => {}
        Err(PmemError::Locked { .. }) => return Ok(Unfinished::InProgress),
        Err(e) => return Err(e),
    }
    let held = file.metadata().map_err(io_err("stat", tmp))?;
    let named = match std::fs::symlink_metadata(tmp) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Unfinished::None),
        Err(e) => return Err(io_err("stat", tmp)(e)),
    };
    if (named.dev(), named.ino()) != (held.dev(), held.ino()) {
        return Ok(Unfinished::None);
    }
    match std::fs::remove_file(tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Unfinished::None),
        Err(e) => return Err(io_err("remove unfinished pool file", tmp)(e)),
    }
    tracing::warn!(
        path = %tmp.display(), bytes = held.len(),
        "removed a pool file whose creation did not finish (its creator stopped before the pool was whole)"
    );
    Ok(Unfinished::Removed)
}

/// Removes an unfinished temporary file beside the regular file `path` names (or would
/// name), if there is one no creator holds. Failures are logged: they never stop an open.
pub(crate) fn clean_up_beside(path: &Path) {
    if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device()) {
        return;
    }
    let Ok(tmp) = Pool::creating_path(path) else {
        return;
    };
    if let Err(e) = remove_unfinished(&tmp) {
        tracing::warn!(path = %tmp.display(), error = %e, "could not remove an unfinished pool file");
    }
}

/// Renames `from` to `to` unless `to` exists, atomically where the file system allows.
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: both arguments are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(e);
    }
    // No RENAME_NOREPLACE here: a hard link also refuses an existing name.
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

/// Bytes an unprivileged writer may still allocate on `file`'s file system, if known.
fn free_bytes(file: &File) -> Option<u64> {
    // SAFETY: `statvfs` is plain data; fstatvfs fills it for a valid descriptor.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and a pointer to a properly sized statvfs.
    let rc = unsafe { libc::fstatvfs(file.as_raw_fd(), &mut st) };
    (rc == 0).then(|| (st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Writes zeros over a new `msync` pool file and drops them from the page cache. `fallocate`
/// leaves unwritten extents, and the first write-back of each block then converts its extent
/// in the file system's journal: a journal commit inside the fence of every commit that reaches
/// a new block. Written extents make a fence cost the pages it syncs and one device flush.
/// Dropping the cached zeros lets the mapping fault the file back in single pages (see
/// `Mapping::advise_single_pages`).
fn write_zeros(file: &File, path: &Path, size: u64) -> Result<()> {
    const CHUNK: usize = 1 << 20;
    let started = std::time::Instant::now();
    let zeros = vec![0u8; CHUNK];
    let mut off = 0u64;
    let mut next_report = 1u64 << 30;
    while off < size {
        let n = CHUNK.min((size - off) as usize);
        file.write_all_at(&zeros[..n], off)
            .map_err(io_err("write zeros", path))?;
        off += n as u64;
        if off >= next_report && off < size {
            tracing::info!(path = %path.display(), written = off, size, "writing the new pool's blocks");
            next_report += 1 << 30;
        }
    }
    file.sync_data().map_err(io_err("fdatasync", path))?;
    // SAFETY: posix_fadvise on a valid descriptor has no memory effects.
    let rc = unsafe {
        libc::posix_fadvise(
            file.as_raw_fd(),
            0,
            size as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        )
    };
    if rc != 0 {
        tracing::debug!(error = rc, "POSIX_FADV_DONTNEED refused");
    }
    tracing::info!(path = %path.display(), size, ms = started.elapsed().as_millis() as u64, "wrote the new pool's blocks");
    Ok(())
}

fn sync_parent_dir(path: &Path) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = File::open(parent).map_err(io_err("open directory", parent))?;
    dir.sync_all().map_err(io_err("fsync directory", parent))
}

/// Reserves `size` bytes for a new regular pool file (errors name the pool's `path`).
fn reserve(file: &File, path: &Path, size: u64) -> Result<()> {
    // A size beyond the free space fails now, not after filling the file system (tmpfs and
    // ext4 allocate block by block before they report ENOSPC).
    if let Some(avail) = free_bytes(file) {
        if avail < size {
            return Err(PmemError::NoSpace {
                path: path.to_path_buf(),
                size,
                source: io::Error::other(format!("the file system has {avail} bytes free")),
            });
        }
    }
    // SAFETY: posix_fallocate on a valid descriptor has no memory effects.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size as libc::off_t) };
    match rc {
        0 => Ok(()),
        libc::EOPNOTSUPP | libc::EINVAL => file.set_len(size).map_err(io_err("set_len", path)),
        libc::ENOSPC => Err(PmemError::NoSpace {
            path: path.to_path_buf(),
            size,
            source: io::Error::from_raw_os_error(rc),
        }),
        e => Err(io_err("fallocate", path)(io::Error::from_raw_os_error(e))),
    }
}

fn create_error(path: &Path) -> impl FnOnce(io::Error) -> PmemError + '_ {
    move |e| match e.kind() {
        io::ErrorKind::AlreadyExists => PmemError::AlreadyExists {
            path: path.to_path_buf(),
        },
        _ if is_not_writable(&e) => PmemError::NotWritable {
            path: path.to_path_buf(),
            source: e,
        },
        _ => io_err("create", path)(e),
    }
}

/// Creates and locks the temporary file `tmp` for the pool at `path` (C2, C3).
fn claim_temporary(path: &Path, tmp: &Path) -> Result<File> {
    for _ in 0..CREATE_TRIES {
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if remove_unfinished(tmp)? == Unfinished::InProgress {
                    return Err(PmemError::CreationInProgress {
                        path: path.to_path_buf(),
                        temporary: tmp.to_path_buf(),
                    });
                }
                continue;
            }
            Err(e) => return Err(create_error(path)(e)),
        };
        match lock_exclusive(&file, tmp) {
            Ok(()) => {}
            // A remover holds it for a moment and will unlink it (C3).
            Err(PmemError::Locked { .. }) => continue,
            Err(e) => return Err(e),
        }
        let held = file.metadata().map_err(io_err("stat", tmp))?;
        let still_ours = std::fs::symlink_metadata(tmp)
            .is_ok_and(|m| (m.dev(), m.ino()) == (held.dev(), held.ino()));
        if still_ours {
            return Ok(file);
        }
    }
    Err(PmemError::CreationInProgress {
        path: path.to_path_buf(),
        temporary: tmp.to_path_buf(),
    })
}

impl Pool {
    /// The temporary name a pool file at `path` is built under before it is renamed into
    /// place: `<name>.nacre-creating` in the same directory. A file left there by a creation
    /// that did not finish is removed by the next [`Pool::create`] or [`Pool::open`] of
    /// `path`.
    pub fn creating_path(path: impl AsRef<Path>) -> Result<PathBuf> {
        let path = path.as_ref();
        let name = path.file_name().ok_or_else(|| {
            PmemError::InvalidOptions(format!("{}: a pool path must name a file", path.display()))
        })?;
        let mut tmp = name.to_os_string();
        tmp.push(CREATING_SUFFIX);
        Ok(path.with_file_name(tmp))
    }

    /// Creates and formats a new pool of `size` bytes (rounded up to 4 KiB) at `path`, which
    /// must not exist (a device-DAX character device is formatted in place). A regular file
    /// appears at `path` only once the pool is whole (see [`Pool::creating_path`]).
    pub fn create(path: impl AsRef<Path>, size: u64, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let size = checked_size(size)?;
        let instr = flush_instr(opts)?;
        if opts.backend == Backend::Sim {
            return Err(PmemError::InvalidOptions(
                "the sim backend keeps pools in memory: use Pool::create_sim".into(),
            ));
        }
        if std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device()) {
            return Self::create_on_device(path, size, opts, instr);
        }
        match std::fs::symlink_metadata(path) {
            Ok(_) => {
                return Err(PmemError::AlreadyExists {
                    path: path.to_path_buf(),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("stat", path)(e)),
        }
        let tmp = Self::creating_path(path)?;
        let file = claim_temporary(path, &tmp)?;
        let built = Self::build_file(&file, path, &tmp, size, opts, instr);
        if built.is_err() {
            // Still locked by `file`: no one else removes or reuses the name meanwhile.
            if let Err(e) = std::fs::remove_file(&tmp) {
                tracing::warn!(path = %tmp.display(), error = %e, "could not remove the unfinished pool file");
            }
        }
        built
    }

    /// Builds the pool in `file` (named `tmp`) and renames it to `path`.
    fn build_file(
        file: &File,
        path: &Path,
        tmp: &Path,
        size: u64,
        opts: &PoolOptions,
        instr: FlushInstr,
    ) -> Result<Pool> {
        reserve(file, path, size)?;
        let pool = Self::format_in(file, path, size, opts, instr, false)?;
        file.sync_all().map_err(io_err("fsync", tmp))?;
        rename_no_replace(tmp, path).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => PmemError::AlreadyExists {
                path: path.to_path_buf(),
            },
            _ => io_err("rename the new pool into place", path)(e),
        })?;
        if let Err(e) = sync_parent_dir(path) {
            // Not known to be durable: take it back while the lock keeps others out.
            drop(pool);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        tracing::info!(path = %path.display(), size, report = %pool.report(), "created pool");
        Ok(pool)
    }

    fn create_on_device(
        path: &Path,
        size: u64,
        opts: &PoolOptions,
        instr: FlushInstr,
    ) -> Result<Pool> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(create_error(path))?;
        lock_exclusive(&file, path)?;
        let (dev_len, _) = device_or_file_len(&file, path)?;
        if dev_len < size {
            return Err(PmemError::InvalidOptions(format!(
                "device {} has {dev_len} bytes, {size} requested",
                path.display()
            )));
        }
        let pool = Self::format_in(&file, path, size, opts, instr, true)?;
        tracing::info!(path = %path.display(), size, report = %pool.report(), "created pool");
        Ok(pool)
    }

    /// Maps `size` bytes of the locked `file` and writes a fresh superblock. The pool takes
    /// `path` as its name and a duplicate of `file` as its lock.
    fn format_in(
        file: &File,
        path: &Path,
        size: u64,
        opts: &PoolOptions,
        instr: FlushInstr,
        is_dev: bool,
    ) -> Result<Pool> {
        let (map, report) = map_for_backend(file, path, size as usize, opts, instr)?;
        if !is_dev && report.active == ActiveBackend::Msync {
            write_zeros(file, path, size)?;
        }
        let lock = file.try_clone().map_err(io_err("dup", path))?;
        let pool = Pool::assemble(
            PoolParts {
                map,
                report,
                path: path.to_path_buf(),
                lock: Some(lock),
                sim_media: None,
            },
            new_header(size),
            (0, Meta::fresh()),
        );
        format(&pool)?;
        Ok(pool)
    }
}

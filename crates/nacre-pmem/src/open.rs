//! Opening pools, and what creating them shares: file handling, locking, backend selection,
//! formatting and superblock validation (creation itself is in `create.rs`). Every failure is a
//! typed [`PmemError`]; nothing here panics on bad files.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::backend::{ActiveBackend, Backend, BackendReport};
use crate::error::{PmemError, Result};
use crate::flush::FlushInstr;
use crate::mapping::Mapping;
use crate::offset::PmOffset;
use crate::options::PoolOptions;
use crate::pool::{Pool, PoolParts};
use crate::superblock::{
    pick_meta, Header, Meta, DATA_START, FORMAT_VERSION, HEADER_SIZE, META_SLOT_OFFSET,
    META_SLOT_SIZE, MIN_POOL_SIZE,
};

const SIM_PATH: &str = "<sim>";

pub(crate) fn io_err<'a>(
    op: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> PmemError + 'a {
    move |source| PmemError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn is_not_writable(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EROFS)
}

/// Resolves the flush instruction for `opts`, failing if a backend that flushes cache lines
/// cannot get one.
pub(crate) fn flush_instr(opts: &PoolOptions) -> Result<FlushInstr> {
    let needs = matches!(
        opts.backend,
        Backend::Auto | Backend::Dax | Backend::Emulated
    );
    match opts.flush_instr {
        Some(i) if !i.is_supported() => Err(PmemError::BackendUnavailable {
            backend: opts.backend.name(),
            reason: format!("this CPU does not support {i}"),
        }),
        Some(i) => Ok(i),
        None => match FlushInstr::detect() {
            Some(i) => Ok(i),
            None if !needs => Ok(FlushInstr::Clflush),
            None => Err(PmemError::BackendUnavailable {
                backend: opts.backend.name(),
                reason: "this CPU has no cache-line flush instruction".into(),
            }),
        },
    }
}

fn describe_map_sync_failure(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => {
            "MAP_SYNC refused (EOPNOTSUPP): the file is not on a DAX-mounted file system".into()
        }
        Some(libc::EINVAL) => "MAP_SYNC unknown to this kernel (EINVAL)".into(),
        _ => format!("MAP_SYNC mapping failed: {e}"),
    }
}

/// Maps `len` bytes of `file` for the requested backend, falling back from dax under `auto`.
pub(crate) fn map_for_backend(
    file: &File,
    path: &Path,
    len: usize,
    opts: &PoolOptions,
    instr: FlushInstr,
) -> Result<(Mapping, BackendReport)> {
    let fd = file.as_raw_fd();
    let plain = |b: ActiveBackend| -> Result<Mapping> {
        Mapping::file(fd, len, false).map_err(|source| PmemError::Io {
            op: if b == ActiveBackend::Msync {
                "mmap (msync backend)"
            } else {
                "mmap (emulated backend)"
            },
            path: path.to_path_buf(),
            source,
        })
    };
    let (map, active, reason) = match opts.backend {
        Backend::Dax => match Mapping::file(fd, len, true) {
            Ok(m) => (m, ActiveBackend::Dax, None),
            Err(e) => {
                return Err(PmemError::BackendUnavailable {
                    backend: "dax",
                    reason: format!("{}: {}", path.display(), describe_map_sync_failure(&e)),
                })
            }
        },
        Backend::Auto => match Mapping::file(fd, len, true) {
            Ok(m) => (m, ActiveBackend::Dax, None),
            Err(e) => {
                let why = describe_map_sync_failure(&e);
                tracing::info!(path = %path.display(), reason = %why, "auto backend: dax unavailable, using msync");
                (
                    plain(ActiveBackend::Msync)?,
                    ActiveBackend::Msync,
                    Some(why),
                )
            }
        },
        Backend::Msync => (plain(ActiveBackend::Msync)?, ActiveBackend::Msync, None),
        Backend::Emulated => (
            plain(ActiveBackend::Emulated)?,
            ActiveBackend::Emulated,
            None,
        ),
        Backend::Sim => {
            return Err(PmemError::InvalidOptions(
                "the sim backend keeps pools in memory: use Pool::create_sim or Pool::open_sim"
                    .into(),
            ))
        }
    };
    if active == ActiveBackend::Msync {
        map.advise_single_pages();
    }
    let report = BackendReport {
        requested: opts.backend,
        active,
        fallback_reason: reason,
        flush_instr: instr,
        flush_delay_ns: opts.flush_delay_ns,
        volatile_fs: is_ram_fs(file),
    };
    Ok((map, report))
}

/// Whether `file` lives on tmpfs or ramfs.
fn is_ram_fs(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    // SAFETY: `statfs` is plain data; fstatfs fills it for a valid descriptor.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and a pointer to a properly sized statfs.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    rc == 0 && matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
}

pub(crate) fn lock_exclusive(file: &File, path: &Path) -> Result<()> {
    // SAFETY: flock on a valid descriptor has no memory effects.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Err(PmemError::Locked {
            path: path.to_path_buf(),
        })
    } else {
        Err(io_err("flock", path)(e))
    }
}

/// Size of a file or, for a device-DAX character device, of the device.
pub(crate) fn device_or_file_len(file: &File, path: &Path) -> Result<(u64, bool)> {
    let md = file.metadata().map_err(io_err("stat", path))?;
    if md.file_type().is_char_device() {
        let rdev = md.rdev();
        let sys = format!(
            "/sys/dev/char/{}:{}/size",
            libc::major(rdev),
            libc::minor(rdev)
        );
        let text =
            std::fs::read_to_string(&sys).map_err(io_err("read device size", Path::new(&sys)))?;
        let len = text.trim().parse::<u64>().map_err(|e| PmemError::Io {
            op: "parse device size",
            path: PathBuf::from(&sys),
            source: io::Error::new(io::ErrorKind::InvalidData, e),
        })?;
        return Ok((len, true));
    }
    Ok((md.len(), false))
}

fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    // SAFETY: getrandom writes at most `u.len()` bytes into `u`.
    let n = unsafe { libc::getrandom(u.as_mut_ptr().cast(), u.len(), 0) };
    if n != u.len() as isize {
        // Extremely old kernels: fall back to time and pid, still unique enough for identity.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        u.copy_from_slice(&(t ^ (u128::from(std::process::id()) << 64)).to_le_bytes());
    }
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

/// Writes a fresh superblock: metadata slot A first, then the header (invariant S1).
pub(crate) fn format(pool: &Pool) -> Result<()> {
    let slot_a = PmOffset(META_SLOT_OFFSET);
    // SAFETY: the pool is being created; no other thread has it yet.
    unsafe {
        pool.write(slot_a, &Meta::fresh().encode());
        pool.write(slot_a.add(META_SLOT_SIZE as u64), &[0u8; META_SLOT_SIZE]);
    }
    pool.persist(slot_a, 2 * META_SLOT_SIZE)?;
    let header = Header {
        version: FORMAT_VERSION,
        pool_size: pool.size(),
        uuid: pool.uuid(),
        data_start: DATA_START,
    };
    // SAFETY: as above.
    unsafe { pool.write(PmOffset(0), &header.encode()) };
    pool.persist(PmOffset(0), HEADER_SIZE)
}

/// `n` zero bytes, or None where the allocator refuses (a simulated pool larger than memory)
/// instead of aborting. Zeroed allocation leaves the pages untouched until used.
fn zeroed(n: usize) -> Option<Vec<u8>> {
    let layout = std::alloc::Layout::array::<u8>(n).ok()?;
    if n == 0 {
        return Some(Vec::new());
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` was allocated by the global allocator with this exact layout (capacity `n`
    // bytes of u8) and all `n` bytes are initialised (zero).
    Some(unsafe { Vec::from_raw_parts(p, n, n) })
}

pub(crate) fn checked_size(size: u64) -> Result<u64> {
    if size < MIN_POOL_SIZE {
        return Err(PmemError::TooSmall {
            size,
            min: MIN_POOL_SIZE,
        });
    }
    usize::try_from(size)
        .map_err(|_| PmemError::InvalidOptions(format!("size {size} too large")))?;
    Ok(size.next_multiple_of(4096))
}

pub(crate) fn new_header(size: u64) -> Header {
    Header {
        version: FORMAT_VERSION,
        pool_size: size,
        uuid: random_uuid(),
        data_start: DATA_START,
    }
}

/// Reads both metadata slots through the pool's mapping and picks the current one.
fn load_meta(pool_map: &Mapping, path: &Path, pool_size: u64) -> Result<(usize, Meta)> {
    let mut a = vec![0u8; META_SLOT_SIZE];
    let mut b = vec![0u8; META_SLOT_SIZE];
    // SAFETY: both slots lie inside the first 16 KiB, which every validated pool has.
    unsafe {
        let base = pool_map.ptr().add(META_SLOT_OFFSET as usize);
        std::ptr::copy_nonoverlapping(base, a.as_mut_ptr(), META_SLOT_SIZE);
        std::ptr::copy_nonoverlapping(base.add(META_SLOT_SIZE), b.as_mut_ptr(), META_SLOT_SIZE);
    }
    let (slot, meta) = pick_meta(&a, &b).ok_or_else(|| PmemError::BadChecksum {
        path: path.to_path_buf(),
        what: "superblock metadata",
    })?;
    meta.validate(path, pool_size)?;
    Ok((slot, meta))
}

impl Pool {
    /// Opens an existing pool. The `sim` backend loads the file into an in-memory simulator
    /// (writes never reach the file), which is how saved crash images are reopened.
    pub fn open(path: impl AsRef<Path>, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        let instr = flush_instr(opts)?;
        if opts.backend != Backend::Sim {
            crate::create::clean_up_beside(path);
        }
        if opts.backend == Backend::Sim {
            let image = std::fs::read(path).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => PmemError::NotFound {
                    path: path.to_path_buf(),
                },
                _ => io_err("read", path)(e),
            })?;
            return Self::open_image(image, path, opts, instr);
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => PmemError::NotFound {
                    path: path.to_path_buf(),
                },
                _ if is_not_writable(&e) => PmemError::NotWritable {
                    path: path.to_path_buf(),
                    source: e,
                },
                _ => io_err("open", path)(e),
            })?;
        lock_exclusive(&file, path)?;
        let (file_len, _) = device_or_file_len(&file, path)?;
        let mut head = vec![0u8; HEADER_SIZE.min(file_len as usize)];
        file.read_exact_at(&mut head, 0)
            .map_err(io_err("read", path))?;
        let header = Header::decode(path, &head, file_len)?;
        let (map, report) = map_for_backend(&file, path, header.pool_size as usize, opts, instr)?;
        let meta = load_meta(&map, path, header.pool_size)?;
        let pool = Pool::assemble(
            PoolParts {
                map,
                report,
                path: path.to_path_buf(),
                lock: Some(file),
                sim_media: None,
            },
            header,
            meta,
        );
        tracing::info!(path = %path.display(), size = pool.size(), report = %pool.report(), "opened pool");
        Ok(pool)
    }

    /// Opens `path` if it exists, else creates it with `size` bytes.
    pub fn open_or_create(path: impl AsRef<Path>, size: u64, opts: &PoolOptions) -> Result<Pool> {
        let path = path.as_ref();
        match Self::open(path, opts) {
            Err(PmemError::NotFound { .. }) => Self::create(path, size, opts),
            r => r,
        }
    }

    /// Creates a formatted in-memory pool on the `sim` backend.
    pub fn create_sim(size: u64, opts: &PoolOptions) -> Result<Pool> {
        let size = checked_size(size)?;
        let instr = flush_instr(opts)?;
        let path = PathBuf::from(SIM_PATH);
        let map = Mapping::anonymous(size as usize).map_err(io_err("mmap", &path))?;
        let media = zeroed(size as usize).ok_or_else(|| PmemError::NoSpace {
            path: path.clone(),
            size,
            source: io::Error::from(io::ErrorKind::OutOfMemory),
        })?;
        let pool = Pool::assemble(
            PoolParts {
                map,
                report: sim_report(opts, instr),
                path,
                lock: None,
                sim_media: Some(media),
            },
            new_header(size),
            (0, Meta::fresh()),
        );
        format(&pool)?;
        Ok(pool)
    }

    /// Opens a `sim` pool from an image (typically from [`crate::SimControl::crash`]), with the
    /// same validation as opening a file.
    pub fn open_sim(image: Vec<u8>, opts: &PoolOptions) -> Result<Pool> {
        let instr = flush_instr(opts)?;
        Self::open_image(image, Path::new(SIM_PATH), opts, instr)
    }

    fn open_image(
        mut image: Vec<u8>,
        path: &Path,
        opts: &PoolOptions,
        instr: FlushInstr,
    ) -> Result<Pool> {
        let head = &image[..HEADER_SIZE.min(image.len())];
        let header = Header::decode(path, head, image.len() as u64)?;
        image.truncate(header.pool_size as usize);
        let map = Mapping::anonymous(image.len()).map_err(io_err("mmap", path))?;
        // SAFETY: the fresh anonymous mapping has exactly `image.len()` bytes and is private.
        unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), map.ptr(), image.len()) };
        let meta = load_meta(&map, path, header.pool_size)?;
        Ok(Pool::assemble(
            PoolParts {
                map,
                report: sim_report(opts, instr),
                path: path.to_path_buf(),
                lock: None,
                sim_media: Some(image),
            },
            header,
            meta,
        ))
    }
}

fn sim_report(opts: &PoolOptions, instr: FlushInstr) -> BackendReport {
    BackendReport {
        requested: opts.backend,
        active: ActiveBackend::Sim,
        fallback_reason: None,
        flush_instr: instr,
        flush_delay_ns: 0,
        volatile_fs: false,
    }
}

//! Minimal FFI to RocksDB's C API (Debian's librocksdb-dev, RocksDB 7.8.3), for the embedded
//! RocksDB anchor of the YCSB and recovery benchmarks. Built only with the `rocksdb` feature.
//!
//! [`RocksDb`] opens a database with the write-ahead log on and every write synced or not
//! ([`RocksDb::open`]'s `sync`): `sync = false` survives a process crash (the WAL is in the
//! page cache), `sync = true` survives power loss (the WAL is fsynced before a put returns).

use std::ffi::{c_char, c_int, c_uchar, c_void, CStr, CString};
use std::path::Path;

use crate::error::{BenchError, Result};

#[repr(C)]
pub(crate) struct RdbT {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct RdbOptions {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct RdbWriteOptions {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct RdbReadOptions {
    _private: [u8; 0],
}
#[repr(C)]
pub(crate) struct RdbIterator {
    _private: [u8; 0],
}

#[link(name = "rocksdb")]
extern "C" {
    pub(crate) fn rocksdb_options_create() -> *mut RdbOptions;
    pub(crate) fn rocksdb_options_destroy(o: *mut RdbOptions);
    pub(crate) fn rocksdb_options_set_create_if_missing(o: *mut RdbOptions, v: c_uchar);
    pub(crate) fn rocksdb_options_increase_parallelism(o: *mut RdbOptions, threads: c_int);
    pub(crate) fn rocksdb_open(
        o: *const RdbOptions,
        name: *const c_char,
        err: *mut *mut c_char,
    ) -> *mut RdbT;
    pub(crate) fn rocksdb_close(db: *mut RdbT);
    pub(crate) fn rocksdb_writeoptions_create() -> *mut RdbWriteOptions;
    pub(crate) fn rocksdb_writeoptions_destroy(o: *mut RdbWriteOptions);
    pub(crate) fn rocksdb_writeoptions_set_sync(o: *mut RdbWriteOptions, v: c_uchar);
    pub(crate) fn rocksdb_readoptions_create() -> *mut RdbReadOptions;
    pub(crate) fn rocksdb_readoptions_destroy(o: *mut RdbReadOptions);
    pub(crate) fn rocksdb_put(
        db: *mut RdbT,
        o: *const RdbWriteOptions,
        key: *const c_char,
        klen: usize,
        val: *const c_char,
        vlen: usize,
        err: *mut *mut c_char,
    );
    pub(crate) fn rocksdb_get(
        db: *mut RdbT,
        o: *const RdbReadOptions,
        key: *const c_char,
        klen: usize,
        vlen: *mut usize,
        err: *mut *mut c_char,
    ) -> *mut c_char;
    pub(crate) fn rocksdb_create_iterator(
        db: *mut RdbT,
        o: *const RdbReadOptions,
    ) -> *mut RdbIterator;
    pub(crate) fn rocksdb_iter_destroy(it: *mut RdbIterator);
    pub(crate) fn rocksdb_iter_seek(it: *mut RdbIterator, k: *const c_char, klen: usize);
    pub(crate) fn rocksdb_iter_valid(it: *const RdbIterator) -> c_uchar;
    pub(crate) fn rocksdb_iter_next(it: *mut RdbIterator);
    pub(crate) fn rocksdb_iter_key(it: *const RdbIterator, klen: *mut usize) -> *const c_char;
    pub(crate) fn rocksdb_iter_value(it: *const RdbIterator, vlen: *mut usize) -> *const c_char;
    pub(crate) fn rocksdb_iter_get_error(it: *const RdbIterator, err: *mut *mut c_char);
    pub(crate) fn rocksdb_free(p: *mut c_void);
}

/// Turns a RocksDB error string (if any) into an error, freeing it.
pub(crate) fn check(err: *mut c_char, what: &str) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: RocksDB set `err` to a NUL-terminated string it allocated; we own it and free
    // it exactly once below.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `err` came from RocksDB's allocator, which `rocksdb_free` releases.
    unsafe { rocksdb_free(err.cast()) };
    Err(BenchError::Process {
        what: format!("RocksDB {what}"),
        why: msg,
    })
}

/// Copies and frees a value RocksDB returned (`None` for a null pointer: no value).
///
/// # Safety
/// `p` is null or a buffer of `len` bytes RocksDB allocated for the caller, not yet freed.
pub(crate) unsafe fn take_value(p: *mut c_char, len: usize) -> Option<Vec<u8>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's promise: `p` holds `len` bytes RocksDB allocated, freed once here.
    unsafe {
        let v = std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec();
        rocksdb_free(p.cast());
        Some(v)
    }
}

/// An open RocksDB database (WAL on). Thread-safe: RocksDB's `DB` allows concurrent calls.
pub struct RocksDb {
    db: *mut RdbT,
    opts: *mut RdbOptions,
    write: *mut RdbWriteOptions,
    read: *mut RdbReadOptions,
}

// SAFETY: RocksDB documents `DB` as safe for concurrent use from many threads, and the option
// objects are only read after `open`.
unsafe impl Send for RocksDb {}
// SAFETY: as above; every method takes `&self` and RocksDB synchronises internally.
unsafe impl Sync for RocksDb {}

impl RocksDb {
    /// Opens (creating if missing) the database in `dir`, syncing the WAL on every write if
    /// `sync`, with `threads` background threads.
    pub fn open(dir: &Path, sync: bool, threads: usize) -> Result<RocksDb> {
        let name = CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| {
            BenchError::InvalidParams(format!("RocksDB path {} holds a NUL", dir.display()))
        })?;
        // SAFETY: plain constructors and setters on objects we own; `name` outlives the call;
        // `err` is written only on failure.
        unsafe {
            let opts = rocksdb_options_create();
            rocksdb_options_set_create_if_missing(opts, 1);
            rocksdb_options_increase_parallelism(opts, threads.clamp(1, 64) as c_int);
            let mut err = std::ptr::null_mut();
            let db = rocksdb_open(opts, name.as_ptr(), &mut err);
            if let Err(e) = check(err, &format!("open {}", dir.display())) {
                rocksdb_options_destroy(opts);
                return Err(e);
            }
            let write = rocksdb_writeoptions_create();
            rocksdb_writeoptions_set_sync(write, u8::from(sync));
            let read = rocksdb_readoptions_create();
            Ok(RocksDb {
                db,
                opts,
                write,
                read,
            })
        }
    }

    /// Writes `key` = `value` (durable as [`RocksDb::open`]'s `sync` says when it returns).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut err = std::ptr::null_mut();
        // SAFETY: `db` and `write` are live until drop; the slices outlive the call, which
        // copies them.
        unsafe {
            rocksdb_put(
                self.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        check(err, "put")
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut err = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: `db` and `read` are live; RocksDB returns a malloc'd copy of the value (or
        // NULL) that we copy and free once.
        unsafe {
            let p = rocksdb_get(
                self.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            );
            check(err, "get")?;
            Ok(take_value(p, len))
        }
    }

    /// Calls `f(key, value)` for up to `count` entries from the first key at or after
    /// `start`, stopping at the first error `f` returns; returns how many it visited.
    pub fn scan(
        &self,
        start: &[u8],
        count: usize,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<usize> {
        // SAFETY: the iterator is created from the live `db`, used only here, and destroyed
        // on every path before returning; key and value pointers are valid until the next
        // iterator move.
        unsafe {
            let it = rocksdb_create_iterator(self.db, self.read);
            rocksdb_iter_seek(it, start.as_ptr().cast(), start.len());
            let mut n = 0;
            let mut visited = Ok(());
            while n < count && rocksdb_iter_valid(it) != 0 {
                let (mut kl, mut vl) = (0usize, 0usize);
                let k = rocksdb_iter_key(it, &mut kl);
                let v = rocksdb_iter_value(it, &mut vl);
                visited = f(
                    std::slice::from_raw_parts(k.cast(), kl),
                    std::slice::from_raw_parts(v.cast(), vl),
                );
                if visited.is_err() {
                    break;
                }
                n += 1;
                rocksdb_iter_next(it);
            }
            let mut err = std::ptr::null_mut();
            rocksdb_iter_get_error(it, &mut err);
            rocksdb_iter_destroy(it);
            check(err, "scan")?;
            visited.map(|()| n)
        }
    }
}

impl Drop for RocksDb {
    fn drop(&mut self) {
        // SAFETY: every object was created in `open`, is destroyed once, database first.
        unsafe {
            rocksdb_close(self.db);
            rocksdb_writeoptions_destroy(self.write);
            rocksdb_readoptions_destroy(self.read);
            rocksdb_options_destroy(self.opts);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_scan_reopen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("db");
        {
            let db = RocksDb::open(&path, true, 2).unwrap_or_else(|e| panic!("{e}"));
            for i in 0..100u32 {
                db.put(format!("k{i:03}").as_bytes(), &i.to_le_bytes())
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            assert_eq!(
                db.get(b"k042").unwrap_or_else(|e| panic!("{e}")),
                Some(42u32.to_le_bytes().to_vec())
            );
            assert_eq!(db.get(b"nope").unwrap_or_else(|e| panic!("{e}")), None);
            let mut keys = Vec::new();
            let n = db
                .scan(b"k050", 5, |k, _| {
                    keys.push(k.to_vec());
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(n, 5);
            assert_eq!(keys[0], b"k050");
            assert_eq!(keys[4], b"k054");
        }
        let db = RocksDb::open(&path, false, 1).unwrap_or_else(|e| panic!("{e}"));
        assert!(db.get(b"k099").unwrap_or_else(|e| panic!("{e}")).is_some());
    }

    #[test]
    fn open_errors_are_clear() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap_or_else(|e| panic!("{e}"));
        let Err(e) = RocksDb::open(&file.join("db"), false, 1) else {
            panic!("opened a database under a plain file")
        };
        assert!(e.to_string().contains("RocksDB open"), "{e}");
    }
}

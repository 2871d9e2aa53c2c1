//! Minimal FFI to PMDK's libpmemobj (Debian's libpmemobj-dev), for the allocator anchor.
//! Built only with the `pmdk` feature.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use crate::error::{BenchError, Result};

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PmemOid {
    pool_uuid_lo: u64,
    off: u64,
}

#[repr(C)]
struct PmemObjPool {
    _private: [u8; 0],
}

type Constructor =
    Option<unsafe extern "C" fn(*mut PmemObjPool, *mut c_void, *mut c_void) -> c_int>;

#[link(name = "pmemobj")]
extern "C" {
    fn pmemobj_create(
        path: *const c_char,
        layout: *const c_char,
        size: usize,
        mode: u32,
    ) -> *mut PmemObjPool;
    fn pmemobj_close(pop: *mut PmemObjPool);
    fn pmemobj_alloc(
        pop: *mut PmemObjPool,
        oidp: *mut PmemOid,
        size: usize,
        type_num: u64,
        ctor: Constructor,
        arg: *mut c_void,
    ) -> c_int;
    fn pmemobj_free(oidp: *mut PmemOid);
    fn pmemobj_errormsg() -> *const c_char;
}

fn last_error(op: &str) -> BenchError {
    // SAFETY: pmemobj_errormsg returns a thread-local NUL-terminated string (never NULL).
    let msg = unsafe { CStr::from_ptr(pmemobj_errormsg()) }
        .to_string_lossy()
        .into_owned();
    BenchError::InvalidParams(format!("libpmemobj {op}: {msg}"))
}

/// An open libpmemobj pool; closed on drop.
pub struct PmdkPool {
    pop: *mut PmemObjPool,
    oids: Vec<PmemOid>,
}

impl PmdkPool {
    /// Creates a pool file of `size` bytes at `path`.
    pub fn create(path: &Path, size: usize) -> Result<PmdkPool> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|e| BenchError::InvalidParams(format!("pool path: {e}")))?;
        let layout = c"nacre-bench";
        // SAFETY: both strings are NUL-terminated and outlive the call.
        let pop = unsafe { pmemobj_create(c.as_ptr(), layout.as_ptr(), size, 0o600) };
        if pop.is_null() {
            return Err(last_error("create"));
        }
        Ok(PmdkPool {
            pop,
            oids: Vec::new(),
        })
    }

    /// Allocates one object of `size` bytes, keeping its handle for [`PmdkPool::free_all`].
    pub fn alloc(&mut self, size: usize) -> Result<()> {
        let mut oid = PmemOid::default();
        // SAFETY: `pop` is open; `oid` is a valid out-pointer in DRAM (allowed by PMDK).
        let rc = unsafe { pmemobj_alloc(self.pop, &mut oid, size, 0, None, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(last_error("alloc"));
        }
        self.oids.push(oid);
        Ok(())
    }

    /// Frees everything allocated so far.
    pub fn free_all(&mut self) {
        for oid in &mut self.oids {
            // SAFETY: each oid came from a successful pmemobj_alloc on this open pool.
            unsafe { pmemobj_free(oid) };
        }
        self.oids.clear();
    }
}

impl Drop for PmdkPool {
    fn drop(&mut self) {
        // SAFETY: `pop` is open and closed exactly once.
        unsafe { pmemobj_close(self.pop) };
    }
}

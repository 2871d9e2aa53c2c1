//! CPU cache write-back primitives: `clwb`, `clflushopt`, `clflush`, `sfence` and non-temporal
//! copies. The instruction is chosen once per pool by CPU feature detection, or forced by
//! [`crate::PoolOptions::flush_instr`] so tests can exercise every path.
//!
//! Ordering rules (x86-64): `clwb` and `clflushopt` are weakly ordered and complete only at the
//! next `sfence`; `clflush` is ordered with other stores but we still fence for uniformity.
//! Non-temporal stores bypass the cache and likewise need an `sfence` to be ordered.

use std::fmt;
use std::str::FromStr;

/// Cache-line size assumed for flushing. Every x86-64 CPU with PM support uses 64 bytes.
pub const CACHE_LINE: usize = 64;

/// Which instruction writes a cache line back to the persistence domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlushInstr {
    /// Write back and keep the line cached (fastest; Skylake-SP and later).
    Clwb,
    /// Write back and invalidate, weakly ordered.
    Clflushopt,
    /// Write back and invalidate, serialising (every x86-64 CPU).
    Clflush,
}

impl FlushInstr {
    /// Every instruction, best first.
    pub const ALL: [FlushInstr; 3] = [
        FlushInstr::Clwb,
        FlushInstr::Clflushopt,
        FlushInstr::Clflush,
    ];

    /// The best instruction this CPU supports, or `None` on a CPU without cache flushes.
    pub fn detect() -> Option<FlushInstr> {
        Self::ALL.into_iter().find(|i| i.is_supported())
    }

    /// Whether this CPU executes the instruction.
    pub fn is_supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            // CPUID leaf 7 EBX: bit 23 clflushopt, bit 24 clwb; leaf 1 EDX bit 19: clflush.
            let (l1, l7) = (
                std::arch::x86_64::__cpuid(1),
                std::arch::x86_64::__cpuid_count(7, 0),
            );
            match self {
                FlushInstr::Clwb => l7.ebx & (1 << 24) != 0,
                FlushInstr::Clflushopt => l7.ebx & (1 << 23) != 0,
                FlushInstr::Clflush => l1.edx & (1 << 19) != 0,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Lower-case mnemonic.
    pub fn name(self) -> &'static str {
        match self {
            FlushInstr::Clwb => "clwb",
            FlushInstr::Clflushopt => "clflushopt",
            FlushInstr::Clflush => "clflush",
        }
    }
}

impl fmt::Display for FlushInstr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FlushInstr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown flush instruction {s:?} (clwb, clflushopt, clflush)"))
    }
}

/// Number of cache lines touched by `[addr, addr + len)`.
pub fn lines_spanned(addr: usize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let first = addr & !(CACHE_LINE - 1);
    let last = (addr + len - 1) & !(CACHE_LINE - 1);
    (last - first) / CACHE_LINE + 1
}

/// Writes back every cache line overlapping `[ptr, ptr + len)`.
///
/// # Safety
/// The range must lie in mapped memory and `instr` must be supported by this CPU.
pub unsafe fn flush_range(instr: FlushInstr, ptr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let start = (ptr as usize) & !(CACHE_LINE - 1);
    let end = ptr as usize + len;
    let mut line = start;
    while line < end {
        // SAFETY: `line` lies within a line overlapping the caller's mapped range, and the caller
        // guarantees `instr` is supported.
        unsafe { flush_line(instr, line as *const u8) };
        line += CACHE_LINE;
    }
}

/// # Safety
/// `p` must point into mapped memory and `instr` must be supported by this CPU.
#[inline(always)]
unsafe fn flush_line(instr: FlushInstr, p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller guarantees `p` is mapped and the instruction exists; these
        // instructions only write back cache contents and touch no registers besides the input.
        unsafe {
            match instr {
                FlushInstr::Clwb => {
                    std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                FlushInstr::Clflushopt => {
                    std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                FlushInstr::Clflush => {
                    std::arch::asm!("clflush [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (instr, p);
    }
}

/// Orders and completes all earlier flushes and non-temporal stores of this thread.
#[inline(always)]
pub fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and exists on every x86-64 CPU.
    unsafe {
        std::arch::asm!("sfence", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Copies shorter than this go through the cache and are flushed line by line; longer ones
/// use non-temporal stores. Measured on a Xeon with DRAM-backed pools (docs/benchmarks.md,
/// fillrandom): a 540-byte commit item was 1.05-1.2x faster through the cache (either way the
/// next locked instruction waits for the lines to reach memory), a 4 KiB one 1.06-1.2x faster
/// with non-temporal stores.
pub const NT_MIN_LEN: usize = 1024;

/// Copies `src` to `dst`: below [`NT_MIN_LEN`] bytes with ordinary stores and line flushes,
/// otherwise with non-temporal stores where the destination is 16-byte aligned, and ordinary
/// stores plus a line flush for the unaligned head and tail. The data is durable after the
/// next [`sfence`].
///
/// # Safety
/// `dst..dst + src.len()` must be valid for writes, must not overlap `src`, and `instr` must be
/// supported by this CPU.
pub unsafe fn copy_nt(instr: FlushInstr, dst: *mut u8, src: &[u8]) {
    let len = src.len();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        if len >= NT_MIN_LEN {
            let head = (16 - (dst as usize & 15)) & 15;
            let body = (len - head) & !15;
            let tail = len - head - body;
            // SAFETY: all ranges below are inside `dst..dst+len` / `src`, which the caller
            // guarantees valid and disjoint; `dst + head` is 16-byte aligned as the stream store
            // requires; SSE2 is part of the x86-64 baseline.
            unsafe {
                if head > 0 {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
                    flush_range(instr, dst, head);
                }
                let mut i = head;
                while i < head + body {
                    let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
                    _mm_stream_si128(dst.add(i) as *mut __m128i, v);
                    i += 16;
                }
                if tail > 0 {
                    std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), tail);
                    flush_range(instr, dst.add(i), tail);
                }
            }
            return;
        }
    }
    // SAFETY: as above; short copies go through the cache and are flushed.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, len);
        flush_range(instr, dst, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_spanned_counts_partial_lines() {
        assert_eq!(lines_spanned(0, 0), 0);
        assert_eq!(lines_spanned(0, 1), 1);
        assert_eq!(lines_spanned(0, 64), 1);
        assert_eq!(lines_spanned(0, 65), 2);
        assert_eq!(lines_spanned(63, 2), 2);
        assert_eq!(lines_spanned(64, 128), 2);
    }

    #[test]
    fn parse_names() {
        for i in FlushInstr::ALL {
            assert_eq!(i.name().parse::<FlushInstr>(), Ok(i));
        }
        assert!("movnti".parse::<FlushInstr>().is_err());
    }

    #[test]
    fn every_supported_instruction_flushes_and_nt_copy_copies() {
        for instr in FlushInstr::ALL.into_iter().filter(|i| i.is_supported()) {
            for len in [0usize, 1, 15, 63, 64, 65, 200, 4096 + 7] {
                for mis in [0usize, 1, 8, 13] {
                    let src: Vec<u8> = (0..len).map(|i| (i * 7 + mis) as u8).collect();
                    let mut dst = vec![0u8; len + 32];
                    // SAFETY: `dst` has `mis + len` bytes available and does not overlap `src`.
                    unsafe {
                        copy_nt(instr, dst.as_mut_ptr().add(mis), &src);
                        flush_range(instr, dst.as_ptr(), dst.len());
                    }
                    sfence();
                    assert_eq!(
                        &dst[mis..mis + len],
                        &src[..],
                        "{instr} len {len} mis {mis}"
                    );
                }
            }
        }
    }
}

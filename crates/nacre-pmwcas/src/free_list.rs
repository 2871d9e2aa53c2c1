//! `FreeList`: a lock-free stack of free descriptor indices, in DRAM, rebuilt at open.
//!
//! Hand-written: a Treiber stack over a fixed index array is a few lines, where a general
//! queue crate would allocate per push.
//!
//! Invariants:
//! - F1: an index is on the stack at most once; `pop` hands it to exactly one caller.
//! - F2: the head word packs a 32-bit tag with the index + 1 (0 = empty); every successful
//!   push or pop bumps the tag, so a head read before another thread popped and pushed the
//!   same index no longer compares equal (no ABA).
//!
//! Thread safety: `push` and `pop` are lock-free; `next[i]` is written only by the thread that
//! owns index `i` (it popped it, or holds it to push).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub(crate) struct FreeList {
    head: AtomicU64,
    next: Box<[AtomicU32]>,
}

fn pack(tag: u64, idx_plus_one: u32) -> u64 {
    tag << 32 | u64::from(idx_plus_one)
}

impl FreeList {
    /// A stack of `n` slots holding every index in `free` (first one on top).
    pub fn new(n: u32, free: &[u32]) -> Self {
        let fl = FreeList {
            head: AtomicU64::new(0),
            next: (0..n).map(|_| AtomicU32::new(0)).collect(),
        };
        for &i in free.iter().rev() {
            fl.push(i);
        }
        fl
    }

    pub fn push(&self, i: u32) {
        let mut h = self.head.load(Ordering::Acquire);
        loop {
            self.next[i as usize].store(h as u32, Ordering::Relaxed);
            let n = pack((h >> 32).wrapping_add(1), i + 1);
            match self
                .head
                .compare_exchange_weak(h, n, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(cur) => h = cur,
            }
        }
    }

    pub fn pop(&self) -> Option<u32> {
        let mut h = self.head.load(Ordering::Acquire);
        loop {
            let top = h as u32;
            if top == 0 {
                return None;
            }
            let next = self.next[(top - 1) as usize].load(Ordering::Relaxed);
            let n = pack((h >> 32).wrapping_add(1), next);
            match self
                .head
                .compare_exchange_weak(h, n, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(top - 1),
                Err(cur) => h = cur,
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    #[test]
    fn concurrent_pops_and_pushes_never_duplicate() {
        let fl = FreeList::new(64, &(0..64).collect::<Vec<_>>());
        let seen = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    for round in 0..2000 {
                        if let Some(i) = fl.pop() {
                            mine.push(i);
                        }
                        if round % 3 == 0 {
                            if let Some(i) = mine.pop() {
                                fl.push(i);
                            }
                        }
                    }
                    seen.lock().expect("lock").extend(mine);
                });
            }
        });
        let mut held: Vec<u32> = seen.into_inner().expect("lock");
        while let Some(i) = fl.pop() {
            held.push(i);
        }
        let set: HashSet<u32> = held.iter().copied().collect();
        assert_eq!(set.len(), held.len(), "an index was handed out twice");
        assert_eq!(set.len(), 64, "an index was lost");
    }
}

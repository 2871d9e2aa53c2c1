//! When keys were last used, and how often (`OBJECT IDLETIME`, `OBJECT FREQ`, `RESTORE ...
//! IDLETIME|FREQ`): Redis keeps a 24-bit clock in every object; Nacre keeps no per-key state
//! in DRAM beyond its index, so the clock lives in a fixed table of slots that keys share by
//! hash (4 MiB, whatever the number of keys).
//!
//! Invariants:
//! - C1: a slot holds the last use of any key that hashes to it, so a key's idle time is never
//!   overstated: it is exact unless another key of its slot was used since (1 slot in
//!   [`SLOTS`]), and then the more recent use is reported. Frequencies, likewise, are never
//!   understated.
//! - C2: a slot written under one policy (LRU or LFU, `maxmemory-policy`) reads as unused under
//!   the other, as Redis's data "takes some time to adjust" when the policy changes; an unused
//!   slot reads as used when the server started (Redis's clock for keys it loaded).
//! - Slots are plain relaxed atomics: a use racing another loses one of the two stamps, which
//!   C1 allows.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

/// Slots in the table.
pub const SLOTS: usize = 1 << 20;
/// Marks a slot written under the LFU policy.
const LFU_TAG: u32 = 1 << 31;
/// A new key's frequency counter (Redis's `LFU_INIT_VAL`).
pub const LFU_INIT: u32 = 5;

/// The table.
pub struct AccessClock {
    slots: Box<[AtomicU32]>,
    /// Unix seconds when the server started.
    start: u64,
    /// Whether `maxmemory-policy` is an LFU policy.
    lfu: AtomicBool,
    /// `lfu-log-factor`.
    log_factor: AtomicU32,
    /// `lfu-decay-time` (minutes).
    decay: AtomicU32,
    /// State of the generator behind the counter's logarithmic increments.
    rand: AtomicU32,
}

fn unix_secs() -> u64 {
    crate::shared::now_ms() / 1000
}

/// Minutes on Redis's 16-bit LFU clock.
fn minutes(secs: u64) -> u32 {
    ((secs / 60) & 0xffff) as u32
}

impl Default for AccessClock {
    fn default() -> AccessClock {
        AccessClock {
            slots: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
            start: unix_secs(),
            lfu: AtomicBool::new(false),
            log_factor: AtomicU32::new(10),
            decay: AtomicU32::new(1),
            rand: AtomicU32::new(0x9E37_79B9),
        }
    }
}

impl AccessClock {
    fn slot(&self, hash: u64) -> &AtomicU32 {
        &self.slots[(hash >> 10) as usize % SLOTS]
    }

    /// Follows `maxmemory-policy`, `lfu-log-factor` and `lfu-decay-time`.
    pub fn configure(&self, policy: &str, log_factor: u32, decay_minutes: u32) {
        self.lfu.store(policy.contains("lfu"), Relaxed);
        self.log_factor.store(log_factor, Relaxed);
        self.decay.store(decay_minutes, Relaxed);
    }

    /// Whether an LFU policy is selected.
    pub fn lfu(&self) -> bool {
        self.lfu.load(Relaxed)
    }

    /// Where LRU stamps count from: 2^30 seconds (34 years) before the server started, so
    /// that `RESTORE ... IDLETIME` can set a use long before it.
    fn epoch(&self) -> u64 {
        self.start.saturating_sub(1 << 30)
    }

    /// Seconds since [`AccessClock::epoch`] (0 marks an unused slot).
    fn lru_stamp(&self, secs: u64) -> u32 {
        secs.saturating_sub(self.epoch())
            .clamp(1, u64::from(LFU_TAG - 1)) as u32
    }

    /// A use of the key whose hash is `hash` at `now_ms` (Unix milliseconds).
    pub fn touch(&self, hash: u64, now_ms: u64) {
        let slot = self.slot(hash);
        let now = now_ms / 1000;
        if !self.lfu() {
            slot.store(self.lru_stamp(now), Relaxed);
            return;
        }
        let counter = self.log_incr(self.decayed(slot.load(Relaxed), now));
        slot.store(LFU_TAG | (minutes(now) << 8) | counter, Relaxed);
    }

    /// Seconds since the key whose hash is `hash` was last used (LRU policies).
    pub fn idle_secs(&self, hash: u64) -> u64 {
        let v = self.slot(hash).load(Relaxed);
        let now = unix_secs();
        let used = if v == 0 || v & LFU_TAG != 0 {
            self.start
        } else {
            self.epoch() + u64::from(v)
        };
        now.saturating_sub(used)
    }

    /// The key's frequency counter, decayed to now (LFU policies).
    pub fn freq(&self, hash: u64) -> u32 {
        self.decayed(self.slot(hash).load(Relaxed), unix_secs())
    }

    /// `RESTORE ... IDLETIME seconds`: the key was last used that long ago.
    pub fn set_idle(&self, hash: u64, secs: u64) {
        if !self.lfu() {
            let at = unix_secs().saturating_sub(secs);
            self.slot(hash).store(self.lru_stamp(at), Relaxed);
        }
    }

    /// `RESTORE ... FREQ n`: the key's counter.
    pub fn set_freq(&self, hash: u64, freq: u32) {
        if self.lfu() {
            let v = LFU_TAG | (minutes(unix_secs()) << 8) | freq.min(255);
            self.slot(hash).store(v, Relaxed);
        }
    }

    /// Redis's `LFUDecrAndReturn`: the counter less one per `lfu-decay-time` minutes since
    /// it was last stamped. An unused slot (or one of the LRU policy) starts at
    /// [`LFU_INIT`] when the server started.
    fn decayed(&self, v: u32, now: u64) -> u32 {
        let (ldt, counter) = if v & LFU_TAG == 0 {
            (minutes(self.start), LFU_INIT)
        } else {
            ((v >> 8) & 0xffff, v & 0xff)
        };
        let now_min = minutes(now);
        let elapsed = if now_min >= ldt {
            now_min - ldt
        } else {
            65535 - ldt + now_min
        };
        let periods = elapsed.checked_div(self.decay.load(Relaxed)).unwrap_or(0);
        counter.saturating_sub(periods)
    }

    /// Redis's `LFULogIncr`: one more, with a probability that falls as the counter grows.
    fn log_incr(&self, counter: u32) -> u32 {
        if counter >= 255 {
            return 255;
        }
        // xorshift32: one relaxed update; a lost race only repeats a number.
        let mut x = self.rand.load(Relaxed);
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rand.store(x, Relaxed);
        let r = f64::from(x) / f64::from(u32::MAX);
        let base = counter.saturating_sub(LFU_INIT);
        let p = 1.0 / (f64::from(base) * f64::from(self.log_factor.load(Relaxed)) + 1.0);
        if r < p {
            counter + 1
        } else {
            counter
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touched_key_is_not_idle_and_an_untouched_one_is_idle_since_the_start() {
        let c = AccessClock {
            start: unix_secs() - 100,
            ..AccessClock::default()
        };
        assert!(c.idle_secs(7 << 10) >= 100);
        c.touch(7 << 10, crate::shared::now_ms());
        assert!(c.idle_secs(7 << 10) <= 1);
        c.set_idle(8 << 10, 5000);
        let idle = c.idle_secs(8 << 10);
        assert!((5000..=5001).contains(&idle), "{idle}");
    }

    #[test]
    fn lfu_counters_grow_slowly_decay_and_read_as_unused_across_policies() {
        let c = AccessClock::default();
        c.configure("allkeys-lfu", 10, 1);
        assert_eq!(c.freq(1 << 10), LFU_INIT);
        for _ in 0..1000 {
            c.touch(1 << 10, crate::shared::now_ms());
        }
        let f = c.freq(1 << 10);
        assert!(f > LFU_INIT && f < 255, "{f}");
        c.set_freq(2 << 10, 100);
        assert_eq!(c.freq(2 << 10), 100);
        // Stamped two minutes ago with a decay of one minute: two less.
        let old = LFU_TAG | (minutes(unix_secs() - 120) << 8) | 100;
        assert_eq!(c.decayed(old, unix_secs()), 98);
        c.configure("allkeys-lru", 10, 1);
        c.touch(3 << 10, crate::shared::now_ms());
        c.configure("allkeys-lfu", 10, 1);
        assert_eq!(c.freq(3 << 10), LFU_INIT, "an LRU stamp reads as unused");
    }
}

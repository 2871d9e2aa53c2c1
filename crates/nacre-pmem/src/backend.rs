//! Durability backends: how `flush` and `fence` make pool bytes durable, and what each survives.

use std::fmt;
use std::str::FromStr;

use crate::flush::FlushInstr;

/// The backend asked for in [`crate::PoolOptions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// `dax` when the file accepts `MAP_SYNC`, otherwise `msync`.
    #[default]
    Auto,
    /// `MAP_SHARED_VALIDATE | MAP_SYNC` on a DAX file system or device; cache flushes + `sfence`.
    Dax,
    /// Ordinary shared mapping; `flush` records dirty pages, `fence` runs `msync(MS_SYNC)`.
    Msync,
    /// Ordinary shared mapping (e.g. on /dev/shm); cache flushes + `sfence`, no syscalls.
    Emulated,
    /// In-memory power-failure simulator for tests (see [`crate::SimControl`]).
    Sim,
}

impl Backend {
    /// Every backend, in the order documented.
    pub const ALL: [Backend; 5] = [
        Backend::Auto,
        Backend::Dax,
        Backend::Msync,
        Backend::Emulated,
        Backend::Sim,
    ];

    /// Lower-case name, as accepted by `FromStr`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Dax => "dax",
            Backend::Msync => "msync",
            Backend::Emulated => "emulated",
            Backend::Sim => "sim",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|b| b.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown backend {s:?} (auto, dax, msync, emulated, sim)"))
    }
}

/// The backend a pool actually runs on (never `Auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActiveBackend {
    /// See [`Backend::Dax`].
    Dax,
    /// See [`Backend::Msync`].
    Msync,
    /// See [`Backend::Emulated`].
    Emulated,
    /// See [`Backend::Sim`].
    Sim,
}

impl ActiveBackend {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ActiveBackend::Dax => "dax",
            ActiveBackend::Msync => "msync",
            ActiveBackend::Emulated => "emulated",
            ActiveBackend::Sim => "sim",
        }
    }

    /// What an acknowledged (fenced) write survives on this backend, in plain words.
    pub fn survives(self) -> &'static str {
        match self {
            ActiveBackend::Dax => "power loss (data is in the persistence domain after each fence)",
            ActiveBackend::Msync => "power loss (each fence waits for msync to reach the device)",
            ActiveBackend::Emulated => {
                "process crash only (data sits in the page cache; power loss loses it)"
            }
            ActiveBackend::Sim => "simulated power loss only (test backend, memory only)",
        }
    }

    /// Whether `flush` issues CPU cache write-back instructions on this backend.
    pub fn uses_cache_flush(self) -> bool {
        matches!(self, ActiveBackend::Dax | ActiveBackend::Emulated)
    }
}

impl fmt::Display for ActiveBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a pool was asked for, what it got, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendReport {
    /// Backend in the options.
    pub requested: Backend,
    /// Backend in use.
    pub active: ActiveBackend,
    /// Why `active` differs from `requested` (set when `auto` fell back from `dax`).
    pub fallback_reason: Option<String>,
    /// Cache-flush instruction used by `flush` (only meaningful where
    /// [`ActiveBackend::uses_cache_flush`]).
    pub flush_instr: FlushInstr,
    /// Artificial delay added per flushed cache line, in nanoseconds.
    pub flush_delay_ns: u64,
    /// The pool file lives in RAM (tmpfs, ramfs): whatever the backend, it cannot outlive a
    /// power loss or reboot.
    pub volatile_fs: bool,
}

impl BackendReport {
    /// What an acknowledged write on this pool survives, accounting for the file system.
    pub fn survives(&self) -> &'static str {
        if self.volatile_fs && self.active != ActiveBackend::Sim {
            "process crash only (the pool file is in RAM: tmpfs/ramfs)"
        } else {
            self.active.survives()
        }
    }
}

impl fmt::Display for BackendReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "backend {} (asked {})", self.active, self.requested)?;
        if self.active.uses_cache_flush() {
            write!(f, ", flush {}", self.flush_instr)?;
        }
        if self.flush_delay_ns > 0 {
            write!(f, ", +{} ns per flushed line", self.flush_delay_ns)?;
        }
        if let Some(r) = &self.fallback_reason {
            write!(f, "; dax unavailable: {r}")?;
        }
        write!(f, "; survives {}", self.survives())
    }
}

//! Values stored out of line (blobs). A value longer than [`inline_max`] goes into whole
//! zones of its own, and its record ([`Kind::Blob`]) holds a descriptor naming them; small
//! records never come here. Layout of a descriptor:
//!
//! ```text
//! desc := id u64 | len u64 | crc32c(value) u32 | n u32 | zone id u64 * n
//! ```
//! The value fills the `n` zones in order (the last one partly). `id` is unique among every
//! blob the database ever made: the engine run in the high 32 bits, a counter in the low ones.
//!
//! Invariants:
//! - B1: a blob's bytes are durable and its zones committed before the group whose record
//!   names it commits, so an acknowledged blob survives any crash; a crash before that
//!   leaves committed zones no record claims, which recovery gives back (B3).
//! - B2: the registry maps each zone of each blob an index may still read to the blob's id,
//!   and no other zone. A blob's zones leave it (and are given back once no ticket that could
//!   have read them lives, V3 in view.rs) when the version naming it leaves the indexes (a
//!   merge or the horizon drops it, gi/merge.rs), or when the write that made it failed.
//!   Dropping a version gives back only the zones the registry still maps to its blob, so a
//!   record whose blob was never registered again after a restart gives back nothing.
//! - B3: recovery registers the blobs that are the newest version of their key (the only
//!   versions readable after a restart): a zone claimed twice, named by a memtable slot or not
//!   committed is corruption. Every other committed zone no memtable slot names is given back.
//!
//! Thread safety: the registry and the retired list are mutexes; writers register, the
//! background worker and failed writes unregister.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use nacre_halloc::{ObjId, ZonePool};
use nacre_pmem::{PmOffset, Pool};
use parking_lot::Mutex;

use crate::error::{Error, FullCause, Result};
use crate::gi::Version;
use crate::record::{read_record, read_value, Kind};
use crate::store::Store;

/// The longest value accepted: Redis's largest (`proto-max-bulk-len`, 512 MiB) and room for
/// the framing a caller such as nacre-server puts around it.
pub const MAX_VALUE: usize = (512 << 20) + (64 << 10);

/// Bytes of a descriptor before its zone list.
const DESC_HEAD: usize = 24;

/// The longest value stored inline in a record, for zones of `zone_size` bytes.
pub(crate) fn inline_max(zone_size: u64) -> usize {
    (zone_size / 8) as usize
}

/// A decoded descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Desc {
    pub id: u64,
    pub len: u64,
    pub crc: u32,
    pub zones: Vec<u64>,
}

impl Desc {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(DESC_HEAD + 8 * self.zones.len());
        b.extend_from_slice(&self.id.to_le_bytes());
        b.extend_from_slice(&self.len.to_le_bytes());
        b.extend_from_slice(&self.crc.to_le_bytes());
        b.extend_from_slice(&(self.zones.len() as u32).to_le_bytes());
        for z in &self.zones {
            b.extend_from_slice(&z.to_le_bytes());
        }
        b
    }

    /// Decodes and checks a descriptor against the zone pool's shape.
    pub fn decode(b: &[u8], zones: &ZonePool) -> Result<Desc> {
        let bad = |why: &str| Error::corrupt(format!("blob descriptor {why}"));
        if b.len() < DESC_HEAD {
            return Err(bad("too short"));
        }
        let w = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let (id, len) = (w(0), w(8));
        let crc = u32::from_le_bytes([b[16], b[17], b[18], b[19]]);
        let n = u32::from_le_bytes([b[20], b[21], b[22], b[23]]) as usize;
        let zs = zones.zone_size();
        let count = zones.objects().shape().count;
        if b.len() != DESC_HEAD + 8 * n || len.div_ceil(zs) != n as u64 || len == 0 {
            return Err(bad("has a bad length"));
        }
        let list: Vec<u64> = (0..n).map(|i| w(DESC_HEAD + 8 * i)).collect();
        if list.iter().any(|&z| z >= count) {
            return Err(bad("names a zone outside the pool"));
        }
        Ok(Desc {
            id,
            len,
            crc,
            zones: list,
        })
    }
}

/// Reads the value a descriptor names and checks it against the descriptor's checksum.
pub(crate) fn read(pool: &Pool, zones: &ZonePool, desc: &[u8]) -> Result<Vec<u8>> {
    let d = Desc::decode(desc, zones)?;
    let zs = zones.zone_size() as usize;
    let mut v = vec![0u8; d.len as usize];
    for (chunk, &z) in v.chunks_mut(zs).zip(&d.zones) {
        // SAFETY: a blob's zones are written once, before the record naming them commits
        // (B1), and given back only once no reader can hold that record (B2).
        unsafe { pool.read(zones.offset(ObjId(z)), chunk) };
    }
    if crc32c::crc32c(&v) != d.crc {
        return Err(Error::corrupt(format!(
            "blob {:#x} ({} bytes) fails its checksum",
            d.id, d.len
        )));
    }
    Ok(v)
}

/// `Db::verify`: checks the value a descriptor names against its checksum, a zone at a time
/// (no copy of the whole value); returns its length.
pub(crate) fn verify(pool: &Pool, zones: &ZonePool, desc: &[u8]) -> Result<u64> {
    let d = Desc::decode(desc, zones)?;
    let zs = zones.zone_size();
    let mut buf = vec![0u8; zs.min(d.len) as usize];
    let mut crc = 0u32;
    let mut left = d.len;
    for &z in &d.zones {
        let n = left.min(zs) as usize;
        // SAFETY: as in `read`.
        unsafe { pool.read(zones.offset(ObjId(z)), &mut buf[..n]) };
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        left -= n as u64;
    }
    if crc != d.crc {
        return Err(Error::corrupt(format!(
            "blob {:#x} ({} bytes) fails its checksum",
            d.id, d.len
        )));
    }
    Ok(d.len)
}

/// Bytes from `off` to the end of its zone: what a record there may occupy at most.
pub(crate) fn room_in_zone(zones: &ZonePool, off: PmOffset) -> Result<usize> {
    let z = zones
        .zone_of(off)
        .ok_or_else(|| Error::corrupt_at("an index points outside every zone", off))?;
    Ok((zones.offset(z).get() + zones.zone_size() - off.get()) as usize)
}

/// The value of the record at `off`, blobs read from their zones; `None` for a tombstone.
/// With `verify`, the record's checksum is checked (a blob's value is always checked).
pub(crate) fn value_at(
    pool: &Pool,
    zones: &ZonePool,
    off: PmOffset,
    verify: bool,
) -> Result<Option<Vec<u8>>> {
    match read_value(pool, off, room_in_zone(zones, off)?, verify)? {
        None => Ok(None),
        Some((Kind::Blob, desc)) => read(pool, zones, &desc).map(Some),
        Some((_, v)) => Ok(Some(v)),
    }
}

/// Zones given back once the ticket is gone.
struct Retired {
    ticket: u64,
    zones: Vec<ObjId>,
}

/// The blob id quarantined zones are registered to (see [`Blobs::quarantine`]); no blob has
/// it (its run part would be run 2^32 - 1).
pub(crate) const QUARANTINE: u64 = u64::MAX;

/// The blob registry (B2) and the zones waiting for readers.
pub(crate) struct Blobs {
    registry: Mutex<HashMap<u64, u64>>,
    retired: Mutex<Vec<Retired>>,
    next: AtomicU64,
    /// Writes of long values under way: zones they hold or will free once they finish
    /// (their keys' older blobs go only after them).
    pub in_flight: AtomicU64,
    /// Bytes of values written as blobs.
    pub written: AtomicU64,
}

impl Blobs {
    /// An empty registry for engine run `run`.
    pub fn new(run: u64) -> Blobs {
        Blobs {
            registry: Mutex::new(HashMap::new()),
            retired: Mutex::new(Vec::new()),
            next: AtomicU64::new(run << 32),
            in_flight: AtomicU64::new(0),
            written: AtomicU64::new(0),
        }
    }

    /// Writes `value` into fresh zones, leaving at least `keep` free (P2 in space/mod.rs), and
    /// returns its descriptor. [`Error::NoSpace`] when too few zones are free now,
    /// [`Error::PoolFull`] when the pool could never hold it.
    pub fn write(&self, store: &Store, keep: u64, value: &[u8]) -> Result<Vec<u8>> {
        let zs = store.zone_size as usize;
        let n = value.len().div_ceil(zs) as u64;
        let total = store.zones.objects().shape().count;
        if n + keep > total {
            return Err(Error::PoolFull {
                cause: FullCause::ValueLargerThanPool {
                    len: value.len() as u64,
                    needs: n,
                    zones: total,
                    kept: keep,
                },
                free_zones: store.zones.free_zones(),
            });
        }
        let free = store.zones.free_zones();
        if free < n + keep {
            return Err(Error::NoSpace { free, keep });
        }
        let mut got: Vec<ObjId> = Vec::with_capacity(n as usize);
        let abort = |got: &[ObjId]| {
            for &z in got {
                let _ = store.zones.abort(z);
            }
        };
        for _ in 0..n {
            match store.zones.grant() {
                Ok(z) => got.push(z),
                Err(e) => {
                    abort(&got);
                    return Err(match Error::from_alloc(e) {
                        Error::PoolFull { .. } => Error::NoSpace { free, keep },
                        other => other,
                    });
                }
            }
        }
        for (chunk, &z) in value.chunks(zs).zip(&got) {
            // SAFETY: the zone was just granted to this write: no record names it yet.
            unsafe { store.pool.copy_nt(store.zones.offset(z), chunk) };
        }
        // B1: the first commit's fence makes the bytes durable with it.
        for (i, &z) in got.iter().enumerate() {
            if let Err(e) = store.zones.commit(z) {
                abort(&got[i..]);
                // Committed zones stay: no record names them, recovery gives them back.
                return Err(e.into());
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let d = Desc {
            id,
            len: value.len() as u64,
            crc: crc32c::crc32c(value),
            zones: got.iter().map(|z| z.0).collect(),
        };
        let mut reg = self.registry.lock();
        for z in &d.zones {
            reg.insert(*z, id);
        }
        drop(reg);
        self.written
            .fetch_add(value.len() as u64, Ordering::Relaxed);
        Ok(d.encode())
    }

    /// The write that made the blob `desc` failed: its zones are given back now (no index
    /// ever pointed at it).
    pub fn forget(&self, store: &Store, desc: &[u8]) -> Result<()> {
        let d = Desc::decode(desc, &store.zones)?;
        let zones = self.unregister(&d);
        store.zones.reclaim(&zones)?;
        Ok(())
    }

    fn unregister(&self, d: &Desc) -> Vec<ObjId> {
        let mut reg = self.registry.lock();
        let mut out = Vec::new();
        for &z in &d.zones {
            if reg.get(&z) == Some(&d.id) {
                reg.remove(&z);
                out.push(ObjId(z));
            }
        }
        out
    }

    /// Versions naming blobs left the indexes (B2): their zones are given back once no
    /// ticket up to `ticket` lives.
    pub fn dropped(&self, store: &Store, versions: &[Version], ticket: u64) -> Result<()> {
        let mut zones = Vec::new();
        for v in versions {
            let rec = read_record(&store.pool, v.at, v.size as usize)?;
            if rec.kind == Kind::Blob {
                zones.extend(self.unregister(&Desc::decode(&rec.value, &store.zones)?));
            }
        }
        if !zones.is_empty() {
            self.retired.lock().push(Retired { ticket, zones });
        }
        Ok(())
    }

    /// Gives back the retired zones of tickets up to `oldest` (the oldest live ticket); how
    /// many.
    pub fn free_retired(&self, store: &Store, oldest: u64) -> Result<u64> {
        let zones: Vec<ObjId> = {
            let mut r = self.retired.lock();
            let (go, stay): (Vec<Retired>, Vec<Retired>) =
                r.drain(..).partition(|x| x.ticket <= oldest);
            *r = stay;
            go.into_iter().flat_map(|x| x.zones).collect()
        };
        store.zones.reclaim(&zones)?;
        Ok(zones.len() as u64)
    }

    /// Recovery (B3): registers the blob `desc` names. `named` holds the zones memtable slots
    /// name.
    pub fn claim(
        &self,
        store: &Store,
        desc: &[u8],
        named: &std::collections::HashSet<ObjId>,
    ) -> Result<()> {
        let d = Desc::decode(desc, &store.zones)?;
        let mut reg = self.registry.lock();
        for &z in &d.zones {
            let owned = store.zones.is_owned(ObjId(z))?;
            if !owned || named.contains(&ObjId(z)) || reg.contains_key(&z) {
                return Err(Error::corrupt(format!(
                    "blob {:#x} names zone {z}, which is {}",
                    d.id,
                    if !owned {
                        "free"
                    } else if named.contains(&ObjId(z)) {
                        "a memtable's"
                    } else {
                        "another blob's"
                    }
                )));
            }
            reg.insert(z, d.id);
        }
        Ok(())
    }

    /// Recovery: keeps `zones` (committed, named by no memtable and no readable blob) for this
    /// run, because a blob record whose descriptor is damaged may name them: recovery never
    /// frees space on the word of a structure it could not read. They are registered to
    /// [`QUARANTINE`], which no version names, and the next open decides again.
    pub fn quarantine(&self, zones: &[ObjId]) {
        let mut reg = self.registry.lock();
        for z in zones {
            reg.insert(z.0, QUARANTINE);
        }
    }

    /// Zones registered to blobs, and zones retired and not yet given back.
    pub fn zones(&self) -> (HashMap<u64, u64>, Vec<u64>) {
        let reg = self.registry.lock().clone();
        let retired = self
            .retired
            .lock()
            .iter()
            .flat_map(|r| r.zones.iter().map(|z| z.0))
            .collect();
        (reg, retired)
    }

    /// Zones retired and not yet given back.
    pub fn retired_count(&self) -> usize {
        self.retired.lock().iter().map(|r| r.zones.len()).sum()
    }

    /// Zones registered to blobs.
    pub fn zone_count(&self) -> u64 {
        self.registry.lock().len() as u64
    }
}

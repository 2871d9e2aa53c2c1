//! HyperLogLog in Redis's exact layout (a string value): a 16-byte header (`HYLL`, the
//! encoding, the cached cardinality with its top bit marking it stale), then 16384 registers
//! of 6 bits, either dense (packed, 12288 bytes) or sparse (runs: `ZERO` 00xxxxxx, `XZERO`
//! 01xxxxxx yyyyyyyy, `VAL` 1vvvvvxx). Elements hash with MurmurHash64A and the estimate is
//! Ertl's, as Redis 7.0 computes it, so a value built here is byte for byte the one Redis
//! builds from the same elements, and counts match. Updates to the sparse form follow
//! Redis's steps (split the run, then merge equal neighbours), and the form turns dense
//! once it outgrows `hll-sparse-max-bytes` or a register passes 32.
//!
//! Every read checks the value: a damaged or hostile string is an error, never a panic or a
//! wrong count from outside the registers.

/// Registers: 2^14.
const P: u32 = 14;
pub const REGISTERS: usize = 1 << P;
/// Bits per register.
const BITS: usize = 6;
const MAX_REG: u8 = (1 << BITS) - 1;
/// The header: magic, encoding, 3 unused bytes, the cached cardinality (8 bytes, LE).
pub const HDR: usize = 16;
/// A dense value's length.
pub const DENSE_LEN: usize = HDR + (REGISTERS * BITS).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
/// Largest value and run a sparse `VAL` holds; longest `ZERO` run (longer ones are `XZERO`).
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;

/// Why a value cannot be used, in Redis's words.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HllError {
    /// Not a HyperLogLog at all.
    #[error("WRONGTYPE Key is not a valid HyperLogLog string value.")]
    NotHll,
    /// A sparse value whose runs do not cover the registers.
    #[error("INVALIDOBJ Corrupted HLL object detected")]
    Corrupt,
}

/// A new, empty HyperLogLog (sparse: one `XZERO` run over every register).
pub fn empty() -> Vec<u8> {
    let mut v = b"HYLL".to_vec();
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    xzero(&mut v, REGISTERS);
    v
}

/// Checks that `v` is a HyperLogLog as Redis checks it.
pub fn check(v: &[u8]) -> Result<(), HllError> {
    if v.len() < HDR || &v[..4] != b"HYLL" || v[4] > SPARSE {
        return Err(HllError::NotHll);
    }
    if v[4] == DENSE && v.len() != DENSE_LEN {
        return Err(HllError::NotHll);
    }
    Ok(())
}

/// Whether `v` (checked) is dense.
pub fn is_dense(v: &[u8]) -> bool {
    v[4] == DENSE
}

/// MurmurHash64A, as Redis uses it (seed 0xadc83b19, little-endian blocks).
fn murmur64a(key: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h: u64 = 0xadc8_3b19 ^ (key.len() as u64).wrapping_mul(M);
    let blocks = key.len() / 8;
    for c in key[..blocks * 8].chunks_exact(8) {
        let mut k = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = &key[blocks * 8..];
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element sets and the value it offers (the run of zeros after the index
/// bits, plus one).
fn position(ele: &[u8]) -> (usize, u8) {
    let h = murmur64a(ele);
    let index = (h & (REGISTERS as u64 - 1)) as usize;
    let rest = (h >> P) | (1u64 << (64 - P));
    (index, rest.trailing_zeros() as u8 + 1)
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, fb) = (i * BITS / 8, (i * BITS) % 8);
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) as u8) & MAX_REG
}

fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let (byte, fb) = (i * BITS / 8, (i * BITS) % 8);
    let v = u16::from(val);
    regs[byte] &= !((u16::from(MAX_REG) << fb) as u8);
    regs[byte] |= (v << fb) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next &= !((u16::from(MAX_REG) >> (8 - fb)) as u8);
        *next |= (v >> (8 - fb)) as u8;
    }
}

fn xzero(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    out.push(0x40 | (l >> 8) as u8);
    out.push(l as u8);
}

fn zero_op(len: usize) -> u8 {
    (len - 1) as u8
}

fn val_op(val: u8, len: usize) -> u8 {
    0x80 | ((val - 1) << 2) | (len - 1) as u8
}

/// One sparse opcode at `b[0]`: (its bytes, registers it covers, their value).
fn op(b: &[u8]) -> Option<(usize, usize, u8)> {
    let c = *b.first()?;
    Some(if c & 0x80 != 0 {
        (1, usize::from(c & 0x3) + 1, ((c >> 2) & 0x1f) + 1)
    } else if c & 0x40 != 0 {
        (
            2,
            ((usize::from(c & 0x3f) << 8) | usize::from(*b.get(1)?)) + 1,
            0,
        )
    } else {
        (1, usize::from(c & 0x3f) + 1, 0)
    })
}

/// Every register of `v` (checked), in order; `Corrupt` if sparse runs do not cover them.
pub fn registers(v: &[u8]) -> Result<Vec<u8>, HllError> {
    let body = &v[HDR..];
    if is_dense(v) {
        return Ok((0..REGISTERS).map(|i| dense_get(body, i)).collect());
    }
    let mut out = Vec::with_capacity(REGISTERS);
    let mut at = 0;
    while at < body.len() {
        let (bytes, len, val) = op(&body[at..]).ok_or(HllError::Corrupt)?;
        if out.len() + len > REGISTERS {
            return Err(HllError::Corrupt);
        }
        out.extend(std::iter::repeat_n(val, len));
        at += bytes;
    }
    if out.len() != REGISTERS {
        return Err(HllError::Corrupt);
    }
    Ok(out)
}

/// `v` (checked) turned dense (a copy of the header, the cache kept).
pub fn to_dense(v: &[u8]) -> Result<Vec<u8>, HllError> {
    if is_dense(v) {
        return Ok(v.to_vec());
    }
    let regs = registers(v)?;
    let mut d = vec![0u8; DENSE_LEN];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    for (i, &r) in regs.iter().enumerate() {
        if r != 0 {
            dense_set(&mut d[HDR..], i, r);
        }
    }
    Ok(d)
}

/// Raises register `index` of `v` (checked) to `count` if it is below it, as Redis does for
/// each form; whether it changed. `sparse_max` is `hll-sparse-max-bytes`.
pub fn set(v: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, HllError> {
    if is_dense(v) {
        let regs = &mut v[HDR..];
        if dense_get(regs, index) >= count {
            return Ok(false);
        }
        dense_set(regs, index, count);
        return Ok(true);
    }
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: the opcode covering `index`, and the one before it.
    let end = v.len();
    let (mut p, mut first, mut prev) = (HDR, 0usize, None);
    let (bytes, span, value) = loop {
        let Some((bytes, span, value)) = op(&v[p..end]) else {
            return Err(HllError::Corrupt);
        };
        if index < first + span {
            break (bytes, span, value);
        }
        prev = Some(p);
        p += bytes;
        first += span;
        if p >= end {
            return Err(HllError::Corrupt);
        }
    };
    let is_val = v[p] & 0x80 != 0;
    let is_xzero = !is_val && v[p] & 0x40 != 0;
    // Step 2: the trivial cases, then the split.
    if is_val && value >= count {
        return Ok(false);
    }
    let mut merged_from = prev.unwrap_or(HDR);
    if span == 1 && !is_xzero {
        v[p] = val_op(count, 1);
    } else {
        let last = first + span - 1;
        let mut seq: Vec<u8> = Vec::with_capacity(5);
        let side = |seq: &mut Vec<u8>, len: usize| {
            if is_val {
                seq.push(val_op(value, len));
            } else if len > ZERO_MAX_LEN {
                xzero(seq, len);
            } else {
                seq.push(zero_op(len));
            }
        };
        if index != first {
            side(&mut seq, index - first);
        }
        seq.push(val_op(count, 1));
        if index != last {
            side(&mut seq, last - index);
        }
        // Step 3: put the sequence in the opcode's place, or turn dense if it grows too big.
        if seq.len() > bytes && v.len() + seq.len() - bytes > sparse_max {
            return promote(v, index, count);
        }
        v.splice(p..p + bytes, seq);
        merged_from = prev.unwrap_or(HDR);
    }
    // Step 4: merge adjacent VAL opcodes of one value, scanning up to 5 opcodes.
    let mut q = merged_from;
    let mut scan = 5;
    while q < v.len() && scan > 0 {
        scan -= 1;
        let c = v[q];
        if c & 0x80 == 0 {
            q += if c & 0x40 != 0 { 2 } else { 1 };
            continue;
        }
        if q + 1 < v.len() && v[q + 1] & 0x80 != 0 {
            let (_, l1, v1) = op(&v[q..]).ok_or(HllError::Corrupt)?;
            let (_, l2, v2) = op(&v[q + 1..]).ok_or(HllError::Corrupt)?;
            if v1 == v2 && l1 + l2 <= VAL_MAX_LEN {
                v[q + 1] = val_op(v1, l1 + l2);
                v.remove(q);
                continue;
            }
        }
        q += 1;
    }
    Ok(true)
}

/// Turns `v` dense and raises register `index` to `count`.
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    *v = to_dense(v)?;
    dense_set(&mut v[HDR..], index, count);
    Ok(true)
}

/// Adds `ele` to `v` (checked); whether a register changed.
pub fn add(v: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, HllError> {
    let (index, count) = position(ele);
    set(v, index, count, sparse_max)
}

/// Marks the cached cardinality stale.
pub fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// The cached cardinality, if it is current.
pub fn cached(v: &[u8]) -> Option<u64> {
    (v[15] & 0x80 == 0).then(|| u64::from_le_bytes(v[8..16].try_into().unwrap_or([0; 8])))
}

/// Stores `card` as the cached cardinality.
pub fn cache(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate of `regs` (Ertl's estimator, as Redis 7.0).
pub fn count(regs: &[u8]) -> u64 {
    let m = REGISTERS as f64;
    let q = 64 - P as usize;
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[usize::from(r & MAX_REG)] += 1;
    }
    let mut z = m * tau((m - f64::from(histo[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    (ALPHA_INF * m * m / z).round() as u64
}

/// `max[i] = max(max[i], v's register i)` for `v` (checked).
pub fn merge_into(max: &mut [u8], v: &[u8]) -> Result<(), HllError> {
    for (m, r) in max.iter_mut().zip(registers(v)?) {
        *m = (*m).max(r);
    }
    Ok(())
}

/// The sparse opcodes of `v` as `PFDEBUG DECODE` writes them (`z:len`, `Z:len`, `v:val,len`).
pub fn decode(v: &[u8]) -> Result<String, HllError> {
    let body = &v[HDR..];
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let (bytes, len, val) = op(&body[at..]).ok_or(HllError::Corrupt)?;
        out.push(match (body[at] & 0x80 != 0, bytes) {
            (true, _) => format!("v:{val},{len}"),
            (false, 2) => format!("Z:{len}"),
            _ => format!("z:{len}"),
        });
        at += bytes;
    }
    Ok(out.join(" "))
}

/// Redis's `PFSELFTEST`: registers keep what is set in them without touching their
/// neighbours (1000 rounds of random values), and over 10 million distinct elements added to
/// a dense and a sparse HyperLogLog at once, both give one count, the sparse one stays sparse
/// while small, and the count stays within six standard errors at every power of ten.
/// `Err` names the failed check as Redis does.
pub fn selftest(sparse_max: usize, mut random: impl FnMut() -> u64) -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_LEN - HDR];
    let mut want = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, w) in want.iter_mut().enumerate() {
            *w = (random() & u64::from(MAX_REG)) as u8;
            dense_set(&mut regs, i, *w);
        }
        for (i, &w) in want.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != w {
                return Err(format!(
                    "TESTFAILED Register {i} should be {w} but is {got}"
                ));
            }
        }
    }
    let mut dense = empty();
    dense = to_dense(&dense).map_err(|e| e.to_string())?;
    let mut sparse = empty();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed = random();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_ne_bytes();
        add(&mut dense, &ele, sparse_max).map_err(|e| e.to_string())?;
        add(&mut sparse, &ele, sparse_max).map_err(|e| e.to_string())?;
        if j != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max / 2 && is_dense(&sparse) {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let d = count(&registers(&dense).map_err(|e| e.to_string())?);
        let s = count(&registers(&sparse).map_err(|e| e.to_string())?);
        if d != s {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = checkpoint.abs_diff(d);
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_registers_pack_six_bits() {
        let mut regs = vec![0u8; DENSE_LEN - HDR];
        for i in [0, 1, 2, 3, 4, 5, 1000, REGISTERS - 1] {
            dense_set(&mut regs, i, (i % 63) as u8 + 1);
        }
        for i in [0, 1, 2, 3, 4, 5, 1000, REGISTERS - 1] {
            assert_eq!(dense_get(&regs, i), (i % 63) as u8 + 1, "{i}");
        }
        assert_eq!(dense_get(&regs, 6), 0);
    }

    #[test]
    fn sparse_and_dense_agree() {
        let mut s = empty();
        let mut d = to_dense(&s).unwrap();
        for i in 0..2000u32 {
            let e = i.to_string();
            add(&mut s, e.as_bytes(), usize::MAX).unwrap();
            add(&mut d, e.as_bytes(), usize::MAX).unwrap();
        }
        assert!(!is_dense(&s));
        assert_eq!(registers(&s).unwrap(), registers(&d).unwrap());
        let c = count(&registers(&s).unwrap());
        assert!((1900..2100).contains(&c), "{c}");
        // A sparse value over its limit turns dense.
        let mut t = empty();
        for i in 0..2000u32 {
            add(&mut t, i.to_string().as_bytes(), 300).unwrap();
        }
        assert!(is_dense(&t));
        assert_eq!(registers(&t).unwrap(), registers(&d).unwrap());
    }

    #[test]
    fn damage_is_detected() {
        assert_eq!(check(b"HYLX\x01"), Err(HllError::NotHll));
        let mut s = empty();
        s.truncate(HDR + 1);
        assert!(check(&s).is_ok());
        assert_eq!(registers(&s), Err(HllError::Corrupt));
        let mut long = empty();
        long.push(0x7f);
        long.push(0xff);
        assert_eq!(registers(&long), Err(HllError::Corrupt));
    }
}

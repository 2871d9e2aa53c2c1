//! Pieces of Redis's RDB format that Nacre reads and writes: length-prefixed strings (LZF
//! compressed or integer encoded ones too, as Redis writes them), the footer of a
//! `DUMP` / `FUNCTION DUMP` payload (RDB version, CRC-64/Redis), the compact encodings
//! inside values ([`listpack`]), whole values ([`value`]) and whole RDB files ([`file`], read
//! as a stream through [`frame`]).

pub mod file;
pub mod frame;
pub mod listpack;
pub mod stream;
pub mod value;

/// CRC-64 as Redis computes it (Jones polynomial, reflected), sixteen bytes a step.
static CRC64: crc::Crc<u64, crc::Table<16>> =
    crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// Appends a length in RDB's encoding.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends `s` as a plain RDB string.
pub fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A length at `at`: (value, whether it is a special encoding, next position).
pub fn get_len(b: &[u8], at: usize) -> Option<(u64, bool, usize)> {
    let first = *b.get(at)?;
    Some(match first >> 6 {
        0 => (u64::from(first & 0x3f), false, at + 1),
        1 => (
            (u64::from(first & 0x3f) << 8) | u64::from(*b.get(at + 1)?),
            false,
            at + 2,
        ),
        2 => match first {
            0x80 => (
                u64::from(u32::from_be_bytes(b.get(at + 1..at + 5)?.try_into().ok()?)),
                false,
                at + 5,
            ),
            0x81 => (
                u64::from_be_bytes(b.get(at + 1..at + 9)?.try_into().ok()?),
                false,
                at + 9,
            ),
            _ => return None,
        },
        _ => (u64::from(first & 0x3f), true, at + 1),
    })
}

/// The string at `at` and the position after it; `None` if malformed.
pub fn get_string(b: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    let (n, special, at) = get_len(b, at)?;
    if !special {
        let end = at.checked_add(usize::try_from(n).ok()?)?;
        return Some((b.get(at..end)?.to_vec(), end));
    }
    match n {
        0 => Some(((*b.get(at)? as i8).to_string().into_bytes(), at + 1)),
        1 => {
            let v = i16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?);
            Some((v.to_string().into_bytes(), at + 2))
        }
        2 => {
            let v = i32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
            Some((v.to_string().into_bytes(), at + 4))
        }
        3 => {
            let (clen, _, at) = get_len(b, at)?;
            let (ulen, _, at) = get_len(b, at)?;
            let end = at.checked_add(usize::try_from(clen).ok()?)?;
            let out = lzf_decompress(b.get(at..end)?, usize::try_from(ulen).ok()?)?;
            Some((out, end))
        }
        _ => None,
    }
}

/// LZF decompression (the format Redis compresses RDB strings with) into exactly `len`
/// bytes; `None` if the input is malformed.
pub fn lzf_decompress(inp: &[u8], len: usize) -> Option<Vec<u8>> {
    // No LZF input expands more than 88 times (a 3-byte back reference copies 264 bytes): a
    // length beyond that is a lie, refused before anything is reserved for it.
    if len > inp.len().saturating_mul(88) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut ip = 0;
    while ip < inp.len() {
        let ctrl = usize::from(inp[ip]);
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            out.extend_from_slice(inp.get(ip..ip + run)?);
            ip += run;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*inp.get(ip)?);
                ip += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*inp.get(ip)?) + 1;
            ip += 1;
            let from = out.len().checked_sub(back)?;
            for i in 0..n + 2 {
                let byte = out[from + i];
                out.push(byte);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

/// Appends a payload's footer: the RDB version (LE) and the CRC-64 (LE) of everything
/// before the checksum.
pub fn put_footer(out: &mut Vec<u8>, version: u16) {
    out.extend_from_slice(&version.to_le_bytes());
    let crc = CRC64.checksum(out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// A payload's body if its footer names a version up to `max_version` and its checksum
/// matches (a zero checksum is not checked, as Redis allows).
pub fn check_footer(p: &[u8], max_version: u16) -> Option<&[u8]> {
    if p.len() < 10 {
        return None;
    }
    let (rest, crc) = p.split_at(p.len() - 8);
    let version = u16::from_le_bytes(rest[rest.len() - 2..].try_into().ok()?);
    if version > max_version {
        return None;
    }
    let crc = u64::from_le_bytes(crc.try_into().ok()?);
    if crc != 0 && CRC64.checksum(rest) != crc {
        return None;
    }
    Some(&rest[..rest.len() - 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_lengths_round_trip() {
        for n in [0usize, 1, 63, 64, 16383, 16384, 70000] {
            let s = vec![b'x'; n];
            let mut out = Vec::new();
            put_string(&mut out, &s);
            assert_eq!(get_string(&out, 0), Some((s, out.len())));
        }
        assert_eq!(get_string(&[0xC0, 0xFE], 0), Some((b"-2".to_vec(), 2)));
        assert_eq!(
            get_string(&[0xC1, 0x39, 0x30], 0),
            Some((b"12345".to_vec(), 3))
        );
        assert_eq!(get_string(&[0x05, b'a'], 0), None);
    }

    #[test]
    fn lzf_lengths_beyond_any_expansion_are_refused_without_reserving_them() {
        assert_eq!(lzf_decompress(&[0, b'a'], usize::MAX / 2), None);
        assert_eq!(lzf_decompress(&[0x32, 0x00], 1 << 40), None);
    }

    #[test]
    fn lzf_runs_and_back_references() {
        // "abcabcabc": literal "abc", then a back reference of 6 bytes at distance 3.
        let c = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(lzf_decompress(&c, 9), Some(b"abcabcabc".to_vec()));
        assert_eq!(lzf_decompress(&c, 8), None);
        assert_eq!(lzf_decompress(&[0x20, 5], 3), None);
    }

    #[test]
    fn the_footer_is_checked() {
        let mut p = vec![245, 1, b'x'];
        put_footer(&mut p, 10);
        assert_eq!(check_footer(&p, 10), Some(&[245, 1, b'x'][..]));
        assert_eq!(check_footer(&p, 9), None);
        p[1] ^= 1;
        assert_eq!(check_footer(&p, 10), None);
        // The CRC-64/Redis check value.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }
}

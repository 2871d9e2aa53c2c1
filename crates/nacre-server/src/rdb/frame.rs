//! Reading an RDB file as a stream: [`Input`] hands out its bytes through a buffer of its own,
//! counting the offset and the CRC-64 of everything consumed, and [`frame_value`] gathers the
//! exact bytes of one value by following its structure (lengths, strings, fixed fields), so
//! that `rdb::value` decodes it from a slice. Only the value being read is held in memory,
//! never the file; a length larger than what follows is found when the input ends, so a
//! hostile one reserves nothing.

use std::io::Read;

use super::file::RdbFileError;
use super::value as t;

/// Bytes read from the source at a time.
const BUF: usize = 1 << 20;
/// Most bytes of a long string copied per step (its whole length is not reserved at once).
const STEP: usize = 16 << 20;

/// A byte source with its offset and running checksum.
pub struct Input<R> {
    src: R,
    buf: Vec<u8>,
    /// Next unread byte of `buf`.
    at: usize,
    /// Bytes of `buf` that hold data.
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    /// `buf[crc_from..at]` is consumed but not yet in `digest`.
    crc_from: usize,
    digest: crc::Digest<'static, u64, crc::Table<16>>,
}

impl<R: Read> Input<R> {
    /// Reads `src` from its start (offset 0).
    pub fn new(src: R) -> Input<R> {
        Input {
            src,
            buf: vec![0; BUF],
            at: 0,
            end: 0,
            base: 0,
            crc_from: 0,
            digest: super::CRC64.digest(),
        }
    }

    /// Offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.at as u64
    }

    /// Reads more from the source into the buffer (keeping what is unread); false at its end.
    fn refill(&mut self) -> Result<bool, RdbFileError> {
        self.digest.update(&self.buf[self.crc_from..self.at]);
        self.buf.copy_within(self.at..self.end, 0);
        self.base += self.at as u64;
        self.end -= self.at;
        self.at = 0;
        self.crc_from = 0;
        loop {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(RdbFileError::Io {
                        offset: self.base + self.end as u64,
                        source,
                    })
                }
            }
        }
    }

    /// One byte.
    pub fn byte(&mut self, what: &'static str) -> Result<u8, RdbFileError> {
        if self.at == self.end && !self.refill()? {
            return Err(self.truncated(what));
        }
        self.at += 1;
        Ok(self.buf[self.at - 1])
    }

    /// `N` bytes.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], RdbFileError> {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.byte(what)?;
        }
        Ok(out)
    }

    /// Appends the next `n` bytes to `out`.
    pub fn take(
        &mut self,
        out: &mut Vec<u8>,
        n: u64,
        what: &'static str,
    ) -> Result<(), RdbFileError> {
        let mut left = n;
        while left > 0 {
            if self.at == self.end && !self.refill()? {
                return Err(self.truncated(what));
            }
            let chunk = (self.end - self.at).min(usize::try_from(left).unwrap_or(usize::MAX));
            let chunk = chunk.min(STEP);
            out.extend_from_slice(&self.buf[self.at..self.at + chunk]);
            self.at += chunk;
            left -= chunk as u64;
        }
        Ok(())
    }

    /// The CRC-64 of everything consumed so far.
    pub fn checksum(&mut self) -> u64 {
        self.digest.update(&self.buf[self.crc_from..self.at]);
        self.crc_from = self.at;
        self.digest.clone().finalize()
    }

    /// The input ends at the current offset inside `what`.
    fn truncated(&self, what: &'static str) -> RdbFileError {
        RdbFileError::Truncated {
            offset: self.offset(),
            what,
            started: self.offset(),
        }
    }

    /// A length in RDB's encoding: (value, whether it marks a special string encoding).
    /// Its bytes are appended to `out` when given.
    pub fn len_into(
        &mut self,
        out: Option<&mut Vec<u8>>,
        what: &'static str,
    ) -> Result<(u64, bool), RdbFileError> {
        let at = self.offset();
        let first = self.byte(what)?;
        let mut bytes = [first, 0, 0, 0, 0, 0, 0, 0, 0];
        let (v, special, used) = match first >> 6 {
            0 => (u64::from(first & 0x3f), false, 1),
            1 => {
                bytes[1] = self.byte(what)?;
                (
                    (u64::from(first & 0x3f) << 8) | u64::from(bytes[1]),
                    false,
                    2,
                )
            }
            2 => match first {
                0x80 => {
                    let b: [u8; 4] = self.array(what)?;
                    bytes[1..5].copy_from_slice(&b);
                    (u64::from(u32::from_be_bytes(b)), false, 5)
                }
                0x81 => {
                    let b: [u8; 8] = self.array(what)?;
                    bytes[1..9].copy_from_slice(&b);
                    (u64::from_be_bytes(b), false, 9)
                }
                byte => return Err(RdbFileError::Length { offset: at, byte }),
            },
            _ => (u64::from(first & 0x3f), true, 1),
        };
        if let Some(o) = out {
            o.extend_from_slice(&bytes[..used]);
        }
        Ok((v, special))
    }

    /// A plain length (not a special encoding), its bytes appended to `out` when given.
    pub fn plain_len(
        &mut self,
        out: Option<&mut Vec<u8>>,
        what: &'static str,
    ) -> Result<u64, RdbFileError> {
        let at = self.offset();
        match self.len_into(out, what)? {
            (n, false) => Ok(n),
            (n, true) => Err(RdbFileError::Length {
                offset: at,
                byte: 0xC0 | n as u8,
            }),
        }
    }

    /// Appends one RDB string as it is encoded (plain, integer or LZF).
    pub fn string_into(
        &mut self,
        out: &mut Vec<u8>,
        what: &'static str,
    ) -> Result<(), RdbFileError> {
        let at = self.offset();
        let (n, special) = self.len_into(Some(out), what)?;
        if !special {
            return self.take(out, n, what);
        }
        match n {
            0 => self.take(out, 1, what),
            1 => self.take(out, 2, what),
            2 => self.take(out, 4, what),
            3 => {
                let clen = self.plain_len(Some(out), what)?;
                self.plain_len(Some(out), what)?;
                self.take(out, clen, what)
            }
            n => Err(RdbFileError::Length {
                offset: at,
                byte: 0xC0 | n as u8,
            }),
        }
    }

    /// One RDB string, decoded.
    pub fn string(&mut self, what: &'static str) -> Result<Vec<u8>, RdbFileError> {
        let at = self.offset();
        let mut raw = Vec::new();
        self.string_into(&mut raw, what)?;
        match super::get_string(&raw, 0) {
            Some((s, end)) if end == raw.len() => Ok(s),
            _ => Err(RdbFileError::String { offset: at, what }),
        }
    }
}

/// Appends to `out` the encoded bytes of one value of RDB type `kind` (after its key).
pub fn frame_value<R: Read>(
    inp: &mut Input<R>,
    kind: u8,
    out: &mut Vec<u8>,
) -> Result<(), RdbFileError> {
    const W: &str = "a value";
    match kind {
        t::STRING
        | t::SET_INTSET
        | t::LIST_ZIPLIST
        | t::ZSET_ZIPLIST
        | t::HASH_ZIPLIST
        | t::HASH_LISTPACK
        | t::ZSET_LISTPACK => inp.string_into(out, W),
        t::LIST | t::SET | t::LIST_QUICKLIST | t::HASH => {
            let n = inp.plain_len(Some(out), W)?;
            let per = if kind == t::HASH { 2 } else { 1 };
            for _ in 0..n {
                for _ in 0..per {
                    inp.string_into(out, W)?;
                }
            }
            Ok(())
        }
        t::ZSET | t::ZSET_2 => {
            let n = inp.plain_len(Some(out), W)?;
            for _ in 0..n {
                inp.string_into(out, W)?;
                if kind == t::ZSET_2 {
                    inp.take(out, 8, W)?;
                } else {
                    // A length byte (253-255: NaN and infinities, nothing follows), then text.
                    let l = inp.byte(W)?;
                    out.push(l);
                    if l < 253 {
                        inp.take(out, u64::from(l), W)?;
                    }
                }
            }
            Ok(())
        }
        t::LIST_QUICKLIST_2 => {
            let n = inp.plain_len(Some(out), W)?;
            for _ in 0..n {
                inp.plain_len(Some(out), W)?;
                inp.string_into(out, W)?;
            }
            Ok(())
        }
        t::STREAM_LISTPACKS | t::STREAM_LISTPACKS_2 => {
            frame_stream(inp, kind == t::STREAM_LISTPACKS_2, out)
        }
        _ => Err(RdbFileError::UnknownType {
            offset: inp.offset().saturating_sub(1),
            kind,
        }),
    }
}

/// A stream (type 15, or 19 with `v2`): nodes, counters, groups with their pending entries
/// and consumers.
fn frame_stream<R: Read>(
    inp: &mut Input<R>,
    v2: bool,
    out: &mut Vec<u8>,
) -> Result<(), RdbFileError> {
    const W: &str = "a stream";
    let nodes = inp.plain_len(Some(out), W)?;
    for _ in 0..nodes {
        inp.string_into(out, W)?;
        inp.string_into(out, W)?;
    }
    // Length, last id; with v2 the first id, the largest deleted id and entries added.
    let counters = if v2 { 8 } else { 3 };
    for _ in 0..counters {
        inp.plain_len(Some(out), W)?;
    }
    let groups = inp.plain_len(Some(out), W)?;
    for _ in 0..groups {
        inp.string_into(out, W)?;
        // Last delivered id; with v2 the entries read.
        for _ in 0..if v2 { 3 } else { 2 } {
            inp.plain_len(Some(out), W)?;
        }
        let pending = inp.plain_len(Some(out), W)?;
        for _ in 0..pending {
            // Id (16 bytes), delivery time (8), delivery count.
            inp.take(out, 24, W)?;
            inp.plain_len(Some(out), W)?;
        }
        let consumers = inp.plain_len(Some(out), W)?;
        for _ in 0..consumers {
            inp.string_into(out, W)?;
            // Seen time.
            inp.take(out, 8, W)?;
            let owned = inp.plain_len(Some(out), W)?;
            for _ in 0..owned {
                inp.take(out, 16, W)?;
            }
        }
    }
    Ok(())
}

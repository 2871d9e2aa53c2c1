//! Whole RDB files as Redis 7.0 writes and reads them (version 10): the `REDIS0010` header,
//! opcodes (AUX fields, database selection and size hints, expiry times, LRU/LFU hints,
//! function libraries, module data, EOF) around the keys, each a type byte, a key and a
//! value in `rdb::value`'s encoding, then the CRC-64 of everything before it.
//!
//! [`RdbReader`] streams a file item by item through [`Input`] (its memory is one buffer and
//! the value being read); every error names the byte offset where it was found. Versions 1
//! to 10 are read (older files' value types are `rdb::value`'s); a checksum of zero is not
//! checked, as Redis allows. [`RdbWriter`] writes what Redis 7.0 loads.

use std::io::{Read, Write};

use super::frame::{frame_value, Input};
use super::value::{self, Value};

/// The RDB version Nacre writes, and the newest it reads.
pub const FILE_VERSION: u32 = 10;

const OP_FUNCTION2: u8 = 0xF5;
const OP_FUNCTION_PRE_GA: u8 = 0xF6;
const OP_MODULE_AUX: u8 = 0xF7;
const OP_IDLE: u8 = 0xF8;
const OP_FREQ: u8 = 0xF9;
const OP_AUX: u8 = 0xFA;
const OP_RESIZEDB: u8 = 0xFB;
const OP_EXPIRETIME_MS: u8 = 0xFC;
const OP_EXPIRETIME: u8 = 0xFD;
const OP_SELECTDB: u8 = 0xFE;
const OP_EOF: u8 = 0xFF;

/// Why an RDB file cannot be read; each names the offset where the problem is.
#[derive(Debug, thiserror::Error)]
pub enum RdbFileError {
    /// The source failed.
    #[error("cannot read the RDB file at offset {offset}: {source}")]
    Io {
        /// Offset of the read.
        offset: u64,
        /// Why.
        source: std::io::Error,
    },
    /// The file ends inside an item.
    #[error("the RDB file ends at offset {offset}, inside {what} that starts at offset {started} (the file is truncated, or a length in it is damaged)")]
    Truncated {
        /// Where the file ends.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// Where the item being read starts.
        started: u64,
    },
    /// No `REDIS` signature.
    #[error("not an RDB file: no REDIS signature at offset 0")]
    Signature,
    /// A version Nacre does not read.
    #[error("RDB version {version} (offset 5) is not supported: Nacre reads versions 1 to 10 (Redis up to 7.0)")]
    Version {
        /// The version the header names.
        version: u32,
    },
    /// A length byte that is no length.
    #[error("malformed length (first byte {byte:#04x}) at offset {offset}")]
    Length {
        /// Its offset.
        offset: u64,
        /// Its first byte.
        byte: u8,
    },
    /// A string that does not decode (a bad LZF stream).
    #[error("malformed string ({what}) at offset {offset}")]
    String {
        /// Its offset.
        offset: u64,
        /// What it is.
        what: &'static str,
    },
    /// A byte that is neither an opcode nor a value type.
    #[error("unknown value type or opcode {kind} at offset {offset}")]
    UnknownType {
        /// Its offset.
        offset: u64,
        /// The byte.
        kind: u8,
    },
    /// Something Nacre does not load.
    #[error("{what} at offset {offset} cannot be loaded: {why}")]
    Unsupported {
        /// Its offset.
        offset: u64,
        /// What it is.
        what: &'static str,
        /// Why.
        why: &'static str,
    },
    /// A value that does not parse.
    #[error("the value of key '{key}' (RDB type {kind}) at offset {offset} is malformed")]
    Value {
        /// Offset of its type byte.
        offset: u64,
        /// Its type.
        kind: u8,
        /// Its key, printable.
        key: String,
    },
    /// The checksum does not match.
    #[error("checksum mismatch: the CRC-64 stored at offset {offset} is {stored:#018x}, the file's contents give {computed:#018x}")]
    Checksum {
        /// Offset of the stored checksum.
        offset: u64,
        /// The stored one.
        stored: u64,
        /// The one computed.
        computed: u64,
    },
}

impl RdbFileError {
    /// The offset the error names.
    pub fn offset(&self) -> u64 {
        match self {
            RdbFileError::Signature => 0,
            RdbFileError::Version { .. } => 5,
            RdbFileError::Io { offset, .. }
            | RdbFileError::Truncated { offset, .. }
            | RdbFileError::Length { offset, .. }
            | RdbFileError::String { offset, .. }
            | RdbFileError::UnknownType { offset, .. }
            | RdbFileError::Unsupported { offset, .. }
            | RdbFileError::Value { offset, .. }
            | RdbFileError::Checksum { offset, .. } => *offset,
        }
    }
}

/// A key read from a file.
#[derive(Debug, PartialEq)]
pub struct Entry {
    /// Its database.
    pub db: u64,
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Value,
    /// Expiry time, Unix ms (`None`: none; it may be in the past, or negative).
    pub expire_ms: Option<i64>,
    /// Offset of the item (its first opcode or its type byte).
    pub offset: u64,
}

/// One item of a file.
#[derive(Debug, PartialEq)]
pub enum Item {
    /// An AUX field.
    Aux(Vec<u8>, Vec<u8>),
    /// The database the next keys are in.
    SelectDb(u64),
    /// Size hints of the current database.
    ResizeDb {
        /// Keys.
        keys: u64,
        /// Keys with an expiry.
        expires: u64,
    },
    /// A function library's code.
    Function(Vec<u8>),
    /// A key.
    Key(Entry),
    /// The end; whether a checksum was checked (false: the file has none, or it is zero).
    Eof {
        /// Whether the checksum was checked.
        checked: bool,
    },
}

/// A key, printable in an error (lossy, at most 64 bytes shown).
fn printable(key: &[u8]) -> String {
    let shown = String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned();
    if key.len() > 64 {
        format!("{shown}...")
    } else {
        shown
    }
}

/// Reads an RDB file item by item.
pub struct RdbReader<R> {
    inp: Input<R>,
    version: u32,
    db: u64,
    done: bool,
    /// The value bytes of the last key, reused.
    scratch: Vec<u8>,
}

impl<R: Read> RdbReader<R> {
    /// Reads the header of `src`.
    pub fn new(src: R) -> Result<RdbReader<R>, RdbFileError> {
        let mut inp = Input::new(src);
        let mut head = [0u8; 9];
        for i in 0..head.len() {
            head[i] = match inp.byte("the header") {
                Ok(b) => b,
                // A short file that does not start as an RDB file is not one.
                Err(RdbFileError::Truncated { .. }) if !b"REDIS".starts_with(&head[..i.min(5)]) => {
                    return Err(RdbFileError::Signature)
                }
                Err(e) => return Err(e),
            };
        }
        if &head[..5] != b"REDIS" {
            return Err(RdbFileError::Signature);
        }
        let digits = std::str::from_utf8(&head[5..])
            .ok()
            .filter(|d| d.bytes().all(|b| b.is_ascii_digit()));
        let version: u32 = digits
            .and_then(|d| d.parse().ok())
            .ok_or(RdbFileError::Signature)?;
        if !(1..=FILE_VERSION).contains(&version) {
            return Err(RdbFileError::Version { version });
        }
        Ok(RdbReader {
            inp,
            version,
            db: 0,
            done: false,
            scratch: Vec::new(),
        })
    }

    /// The file's RDB version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.inp.offset()
    }

    /// The next item; after [`Item::Eof`], `Eof` again.
    pub fn next_item(&mut self) -> Result<Item, RdbFileError> {
        if self.done {
            return Ok(Item::Eof { checked: false });
        }
        let start = self.inp.offset();
        self.item(start).map_err(|e| match e {
            RdbFileError::Truncated { offset, what, .. } => RdbFileError::Truncated {
                offset,
                what,
                started: start,
            },
            e => e,
        })
    }

    fn item(&mut self, start: u64) -> Result<Item, RdbFileError> {
        let mut expire_ms = None;
        loop {
            let at = self.inp.offset();
            let op = self.inp.byte("an opcode or value type")?;
            match op {
                OP_EXPIRETIME_MS => {
                    let b = self.inp.array::<8>("an expiry time")?;
                    expire_ms = Some(i64::from_le_bytes(b));
                }
                OP_EXPIRETIME => {
                    let b = self.inp.array::<4>("an expiry time")?;
                    expire_ms = Some(i64::from(i32::from_le_bytes(b)) * 1000);
                }
                // LFU and LRU hints: Nacre keeps no access times.
                OP_FREQ => {
                    self.inp.byte("an LFU frequency")?;
                }
                OP_IDLE => {
                    self.inp.plain_len(None, "an LRU idle time")?;
                }
                OP_AUX => {
                    let k = self.inp.string("an AUX field")?;
                    let v = self.inp.string("an AUX field")?;
                    return Ok(Item::Aux(k, v));
                }
                OP_SELECTDB => {
                    self.db = self.inp.plain_len(None, "a database number")?;
                    return Ok(Item::SelectDb(self.db));
                }
                OP_RESIZEDB => {
                    let keys = self.inp.plain_len(None, "a database size hint")?;
                    let expires = self.inp.plain_len(None, "a database size hint")?;
                    return Ok(Item::ResizeDb { keys, expires });
                }
                OP_FUNCTION2 => {
                    return Ok(Item::Function(self.inp.string("a function library")?));
                }
                OP_FUNCTION_PRE_GA => {
                    return Err(RdbFileError::Unsupported {
                        offset: at,
                        what: "a function library in the format of Redis 7.0's release candidates (opcode 246)",
                        why: "Redis 7.0 itself no longer loads it",
                    })
                }
                OP_MODULE_AUX => {
                    return Err(RdbFileError::Unsupported {
                        offset: at,
                        what: "module data (opcode 247)",
                        why: "Nacre has no modules",
                    })
                }
                OP_EOF => {
                    let checked = if self.version >= 5 {
                        let computed = self.inp.checksum();
                        let offset = self.inp.offset();
                        let stored = u64::from_le_bytes(self.inp.array::<8>("the checksum")?);
                        if stored != 0 && stored != computed {
                            return Err(RdbFileError::Checksum {
                                offset,
                                stored,
                                computed,
                            });
                        }
                        stored != 0
                    } else {
                        false
                    };
                    self.done = true;
                    return Ok(Item::Eof { checked });
                }
                value::MODULE | value::MODULE_2 => {
                    return Err(RdbFileError::Unsupported {
                        offset: at,
                        what: "a module value",
                        why: "Nacre has no modules",
                    })
                }
                value::HASH_ZIPMAP => {
                    return Err(RdbFileError::Unsupported {
                        offset: at,
                        what: "a hash in the zipmap encoding (type 9, Redis before 2.6)",
                        why: "Nacre reads the encodings of Redis 2.6 and later",
                    })
                }
                kind => return self.key(kind, at, start, expire_ms),
            }
        }
    }

    fn key(
        &mut self,
        kind: u8,
        at: u64,
        start: u64,
        expire_ms: Option<i64>,
    ) -> Result<Item, RdbFileError> {
        if kind > value::STREAM_LISTPACKS_2 {
            return Err(RdbFileError::UnknownType { offset: at, kind });
        }
        let key = self.inp.string("a key")?;
        self.scratch.clear();
        let mut raw = std::mem::take(&mut self.scratch);
        let framed = frame_value(&mut self.inp, kind, &mut raw);
        let decoded = framed.and_then(|()| match value::decode_at(kind, &raw, 0) {
            Some((v, end)) if end == raw.len() => Ok(v),
            _ => Err(RdbFileError::Value {
                offset: at,
                kind,
                key: printable(&key),
            }),
        });
        self.scratch = raw;
        Ok(Item::Key(Entry {
            db: self.db,
            key,
            value: decoded?,
            expire_ms,
            offset: start,
        }))
    }
}

/// Writes an RDB file: the header, then what the caller adds, then [`RdbWriter::finish`].
pub struct RdbWriter<W: Write> {
    out: W,
    digest: crc::Digest<'static, u64, crc::Table<16>>,
    buf: Vec<u8>,
    written: u64,
}

/// Bytes gathered before a write to the destination.
const WRITE_CHUNK: usize = 1 << 20;

impl<W: Write> RdbWriter<W> {
    /// Starts a file on `out` with its header.
    pub fn new(out: W) -> RdbWriter<W> {
        let mut w = RdbWriter {
            out,
            digest: super::CRC64.digest(),
            buf: Vec::with_capacity(WRITE_CHUNK * 2),
            written: 0,
        };
        w.buf
            .extend_from_slice(format!("REDIS{FILE_VERSION:04}").as_bytes());
        w
    }

    /// Bytes written so far (buffered ones included).
    pub fn written(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    fn spill(&mut self) -> std::io::Result<()> {
        if self.buf.len() >= WRITE_CHUNK {
            self.drain()?;
        }
        Ok(())
    }

    fn drain(&mut self) -> std::io::Result<()> {
        self.digest.update(&self.buf);
        self.out.write_all(&self.buf)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// An AUX field.
    pub fn aux(&mut self, k: &[u8], v: &[u8]) -> std::io::Result<()> {
        self.buf.push(OP_AUX);
        super::put_string(&mut self.buf, k);
        super::put_string(&mut self.buf, v);
        self.spill()
    }

    /// A function library's code.
    pub fn function(&mut self, code: &[u8]) -> std::io::Result<()> {
        self.buf.push(OP_FUNCTION2);
        super::put_string(&mut self.buf, code);
        self.spill()
    }

    /// Selects database `db`, with its size hints.
    pub fn select_db(&mut self, db: u64, keys: u64, expires: u64) -> std::io::Result<()> {
        self.buf.push(OP_SELECTDB);
        super::put_len(&mut self.buf, db);
        self.buf.push(OP_RESIZEDB);
        super::put_len(&mut self.buf, keys);
        super::put_len(&mut self.buf, expires);
        self.spill()
    }

    /// Key `key` holding `v`, expiring at `expire_ms` (Unix ms; 0: never).
    pub fn key(&mut self, key: &[u8], v: &Value, expire_ms: u64) -> std::io::Result<()> {
        if expire_ms != 0 {
            self.buf.push(OP_EXPIRETIME_MS);
            self.buf.extend_from_slice(&expire_ms.to_le_bytes());
        }
        self.buf.push(value::type_of(v));
        super::put_string(&mut self.buf, key);
        value::put_value(v, &mut self.buf);
        self.spill()
    }

    /// Ends the file (EOF and checksum), flushes it and returns the destination.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.buf.push(OP_EOF);
        self.drain()?;
        let crc = self.digest.clone().finalize();
        self.out.write_all(&crc.to_le_bytes())?;
        self.written += 8;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;

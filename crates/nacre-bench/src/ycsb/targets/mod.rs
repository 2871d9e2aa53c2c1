//! The stores the YCSB runner can drive: embedded Nacre ([`nacre`]) and embedded RocksDB
//! ([`rocksdb`], with the `rocksdb` feature), both through the record mapping of [`kv`], and
//! any RESP server ([`resp`]) with YCSB's Redis mapping.

pub mod kv;
pub mod nacre;
pub mod resp;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;

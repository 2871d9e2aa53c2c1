//! The stores the YCSB runner can drive: embedded Nacre ([`nacre`]), embedded RocksDB
//! ([`rocksdb`], with the `rocksdb` feature), both through the record mapping of [`kv`].

pub mod kv;
pub mod nacre;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;

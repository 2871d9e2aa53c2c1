//! `cargo +nightly fuzz run rdb`: Redis's RDB encoding on arbitrary bytes, as a `RESTORE`
//! payload and as an RDB file. Nothing may panic; a payload that decodes must encode to one
//! that decodes to the same value (no wrong import), and a file must end in an error or its
//! end marker, never loop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nacre_server::rdb::file::{Item, RdbReader};
use nacre_server::rdb::value::{decode, encode};

fuzz_target!(|data: &[u8]| {
    // As a DUMP payload (a valid footer is added half the time, so the value parser is
    // reached, not only the checksum).
    if let Ok(v) = decode(data) {
        assert_eq!(decode(&encode(&v)).ok(), Some(v));
    }
    let mut framed = data.to_vec();
    nacre_server::rdb::put_footer(&mut framed, 10);
    if let Ok(v) = decode(&framed) {
        assert_eq!(decode(&encode(&v)).ok(), Some(v));
    }
    // As an RDB file, with and without a valid header.
    for bytes in [data.to_vec(), [b"REDIS0010".as_slice(), data].concat()] {
        let Ok(mut r) = RdbReader::new(bytes.as_slice()) else {
            continue;
        };
        for _ in 0..=bytes.len() {
            match r.next_item() {
                Ok(Item::Eof { .. }) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
});

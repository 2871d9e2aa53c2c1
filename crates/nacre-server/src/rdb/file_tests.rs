use super::*;
use crate::rdb::stream::{GroupValue, Node, NodeEntry, StreamValue};

fn stream() -> StreamValue {
    StreamValue {
        nodes: vec![Node {
            master: (5, 0),
            entries: vec![
                NodeEntry {
                    id: (5, 0),
                    deleted: false,
                    pairs: vec![b"f".to_vec(), b"1".to_vec()],
                },
                NodeEntry {
                    id: (6, 0),
                    deleted: false,
                    pairs: vec![b"g".to_vec(), b"two".to_vec()],
                },
            ],
        }],
        length: 2,
        last: (6, 0),
        first: (5, 0),
        max_deleted: (0, 0),
        added: 2,
        groups: vec![GroupValue {
            name: b"grp".to_vec(),
            last: (5, 0),
            read: Some(1),
            pending: vec![((5, 0), 1234, 1)],
            consumers: vec![(b"alice".to_vec(), 1234, vec![(5, 0)])],
        }],
    }
}

/// Items of a small file with a key of every type, two databases and a library.
fn items() -> Vec<Item> {
    let key = |db, k: &str, value, expire_ms| {
        Item::Key(Entry {
            db,
            key: k.as_bytes().to_vec(),
            value,
            expire_ms,
            offset: 0,
        })
    };
    let b = |s: &str| s.as_bytes().to_vec();
    vec![
        Item::Aux(b("redis-ver"), b("7.0.15")),
        Item::Function(b(
            "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        )),
        Item::SelectDb(0),
        Item::ResizeDb {
            keys: 6,
            expires: 1,
        },
        key(0, "s", Value::String(b("hello")), Some(4_000_000_000_000)),
        key(
            0,
            "l",
            Value::List(vec![b("a"), b("12"), vec![b'x'; 300]]),
            None,
        ),
        key(0, "set", Value::Set(vec![b("m1"), b("m2")]), None),
        key(0, "h", Value::Hash(vec![(b("f"), b("v"))]), None),
        key(
            0,
            "z",
            Value::ZSet(vec![(b("a"), -1.5), (b("b"), f64::INFINITY)]),
            None,
        ),
        key(0, "x", Value::Stream(Box::new(stream())), None),
        Item::SelectDb(3),
        Item::ResizeDb {
            keys: 1,
            expires: 0,
        },
        key(3, "other", Value::String(b("db3")), None),
        Item::Eof { checked: true },
    ]
}

fn write(items: &[Item]) -> Vec<u8> {
    let mut w = RdbWriter::new(Vec::new());
    for it in items {
        match it {
            Item::Aux(k, v) => w.aux(k, v).unwrap(),
            Item::Function(c) => w.function(c).unwrap(),
            Item::SelectDb(_) => {}
            Item::ResizeDb { keys, expires } => {
                let db = items
                    .iter()
                    .take_while(|i| !std::ptr::eq(*i, it))
                    .filter_map(|i| match i {
                        Item::SelectDb(d) => Some(*d),
                        _ => None,
                    })
                    .last()
                    .unwrap();
                w.select_db(db, *keys, *expires).unwrap()
            }
            Item::Key(e) => w
                .key(&e.key, &e.value, e.expire_ms.map_or(0, |m| m as u64))
                .unwrap(),
            Item::Eof { .. } => {}
        }
    }
    w.finish().unwrap()
}

/// Every item of `file`, or the first error.
fn read(file: &[u8]) -> Result<Vec<Item>, RdbFileError> {
    let mut r = RdbReader::new(file)?;
    let mut out = Vec::new();
    loop {
        let it = r.next_item()?;
        let end = matches!(it, Item::Eof { .. });
        out.push(it);
        if end {
            return Ok(out);
        }
    }
}

fn without_offsets(items: Vec<Item>) -> Vec<Item> {
    items
        .into_iter()
        .map(|i| match i {
            Item::Key(mut e) => {
                e.offset = 0;
                Item::Key(e)
            }
            i => i,
        })
        .collect()
}

#[test]
fn files_round_trip() {
    let want = items();
    let file = write(&want);
    assert!(file.starts_with(b"REDIS0010"));
    assert_eq!(without_offsets(read(&file).unwrap()), want);
    // A zero checksum is not checked.
    let mut zero = file.clone();
    let n = zero.len();
    zero[n - 8..].fill(0);
    let back = read(&zero).unwrap();
    assert_eq!(back.last(), Some(&Item::Eof { checked: false }));
}

#[test]
fn every_truncation_is_an_error_naming_where_the_file_ends() {
    let file = write(&items());
    for n in 0..file.len() {
        let e = read(&file[..n]).expect_err("a truncated file is refused");
        match e {
            RdbFileError::Truncated { offset, .. } => assert_eq!(offset, n as u64, "{e}"),
            // Fewer than five bytes that are not a prefix of REDIS cannot occur here.
            e => panic!("cut at {n}: {e}"),
        }
        assert!(e.to_string().contains(&format!("offset {n}")), "{e}");
    }
}

#[test]
fn flipped_bytes_are_errors_never_panics() {
    let file = write(&items());
    let n = file.len();
    for i in 0..n {
        for bit in [0x01u8, 0x10, 0x80] {
            let mut d = file.clone();
            d[i] ^= bit;
            // With the checksum, every flip is found; the error names an offset in the file.
            let e = read(&d).expect_err("a damaged file is refused");
            assert!(e.offset() <= n as u64, "{e}");
            // Without it, a flip is an error or reads as some file, never a panic.
            d[n - 8..].fill(0);
            if let Err(e) = read(&d) {
                assert!(e.offset() <= n as u64, "{e}");
            }
        }
    }
}

#[test]
fn headers_opcodes_and_strangers() {
    assert!(matches!(read(b"RED"), Err(RdbFileError::Truncated { .. })));
    assert!(matches!(read(b"HELLO"), Err(RdbFileError::Signature)));
    assert!(matches!(read(b"REDISxxxx"), Err(RdbFileError::Signature)));
    assert!(matches!(
        read(b"REDIS0011\xff"),
        Err(RdbFileError::Version { version: 11 })
    ));
    let mut f = b"REDIS0010".to_vec();
    // Module values and module data are refused with their offset.
    f.push(7);
    assert!(matches!(
        read(&f),
        Err(RdbFileError::Unsupported { offset: 9, .. })
    ));
    f[9] = 0xF7;
    assert!(matches!(
        read(&f),
        Err(RdbFileError::Unsupported { offset: 9, .. })
    ));
    f[9] = 42;
    assert!(matches!(
        read(&f),
        Err(RdbFileError::UnknownType {
            offset: 9,
            kind: 42
        })
    ));
    // An old file: seconds expiry, LRU/LFU hints, no checksum before version 5.
    let mut old = b"REDIS0004".to_vec();
    old.push(0xFD);
    old.extend_from_slice(&2_000_000_000i32.to_le_bytes());
    old.extend_from_slice(&[0xF9, 5, 0xF8, 7]);
    old.extend_from_slice(&[0, 1, b'k', 1, b'v', 0xFF]);
    let got = read(&old).unwrap();
    assert_eq!(
        got[0],
        Item::Key(Entry {
            db: 0,
            key: b"k".to_vec(),
            value: Value::String(b"v".to_vec()),
            expire_ms: Some(2_000_000_000_000),
            offset: 9,
        })
    );
    // A checksum mismatch names where the checksum is.
    let mut file = write(&items());
    let n = file.len();
    file[n - 1] ^= 1;
    match read(&file) {
        Err(RdbFileError::Checksum { offset, .. }) => assert_eq!(offset, n as u64 - 8),
        other => panic!("{other:?}"),
    }
    // A value that frames but does not decode names the key and its offset.
    let mut bad = b"REDIS0010".to_vec();
    bad.extend_from_slice(&[value::SET_INTSET, 1, b'k', 2, 0xAA, 0xBB]);
    match read(&bad) {
        Err(RdbFileError::Value { offset, kind, key }) => {
            assert_eq!((offset, kind, key.as_str()), (9, value::SET_INTSET, "k"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_values_stream_through_the_buffer() {
    // Values larger than the reader's buffer, and many small keys across refills.
    let big = vec![b'q'; 3 << 20];
    let mut w = RdbWriter::new(Vec::new());
    w.select_db(0, 0, 0).unwrap();
    w.key(b"big", &Value::String(big.clone()), 0).unwrap();
    for i in 0..50_000u32 {
        w.key(
            format!("k{i}").as_bytes(),
            &Value::String(i.to_string().into_bytes()),
            0,
        )
        .unwrap();
    }
    let file = w.finish().unwrap();
    let got = read(&file).unwrap();
    // SelectDb, ResizeDb, the keys, Eof.
    assert_eq!(got.len(), 50_004);
    assert!(matches!(&got[2], Item::Key(e) if e.value == Value::String(big)));
    assert_eq!(got.last(), Some(&Item::Eof { checked: true }));
}

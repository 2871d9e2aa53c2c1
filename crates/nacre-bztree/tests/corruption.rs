//! Corruption: a flipped byte in a node's status word, info word or a record metadata word
//! is either reported as a typed `Corrupt` error or leaves every answer correct; never a
//! wrong value, never a panic. A flipped byte in the tree header fails the open with
//! `Corrupt`.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use nacre_bztree::BzError;
use nacre_pmem::{CrashPolicy, Pool};
use nacre_pmwcas::PmwcasError;

/// An image of a tree of three levels with deleted records, its contents and its nodes.
fn image() -> (Vec<u8>, BTreeMap<Vec<u8>, u64>, Vec<u64>, u64) {
    let pool = new_pool(POOL_SIZE);
    let (t, _) = open(&pool, &options()).expect("open");
    let mut m = BTreeMap::new();
    for i in 0..400 {
        t.insert(&key(i), i * 10).expect("insert");
        m.insert(key(i), i * 10);
    }
    for i in (0..400).step_by(7) {
        t.delete(&key(i)).expect("delete");
        m.remove(&key(i));
    }
    let c = check_memory(&t).expect("check");
    assert!(c.depth >= 3);
    let nodes = c.nodes.iter().map(|o| o.get()).collect();
    let header = pool.region("bzt.t").expect("header").offset.get();
    drop(t);
    (
        pool.sim().expect("sim").crash(CrashPolicy::KeepAll),
        m,
        nodes,
        header,
    )
}

fn is_corrupt(e: &BzError) -> bool {
    matches!(
        e,
        BzError::Corrupt { .. } | BzError::Pmwcas(PmwcasError::Corrupt { .. })
    )
}

/// Opens the image with byte `at` flipped and reads everything; `Err` describes a wrong
/// answer or an untyped failure.
fn probe(img: &[u8], at: u64, xor: u8, m: &BTreeMap<Vec<u8>, u64>) -> Result<bool, String> {
    let mut img = img.to_vec();
    img[at as usize] ^= xor;
    let pool = Arc::new(Pool::open_sim(img, &pool_opts()).map_err(|e| e.to_string())?);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let t = match open(&pool, &options()) {
            Ok((t, _)) => t,
            Err(e) if is_corrupt(&e) => return Ok(true),
            Err(e) => return Err(format!("open: untyped error {e}")),
        };
        let mut detected = false;
        for i in 0..400 {
            match t.get(&key(i)) {
                Ok(v) if v == m.get(&key(i)).copied() => {}
                Ok(v) => return Err(format!("get {i} returned {v:?}")),
                Err(e) if is_corrupt(&e) => detected = true,
                Err(e) => return Err(format!("get {i}: untyped error {e}")),
            }
        }
        match t.scan(b"", None, usize::MAX) {
            Ok(all) if all.iter().cloned().collect::<BTreeMap<_, _>>() == *m => {}
            Ok(_) => return Err("scan returned wrong contents".into()),
            Err(e) if is_corrupt(&e) => detected = true,
            Err(e) => return Err(format!("scan: untyped error {e}")),
        }
        Ok(detected)
    }));
    outcome.unwrap_or_else(|_| Err("panicked".into()))
}

#[test]
fn flipped_node_header_and_metadata_bytes_are_detected_or_harmless() {
    let (img, m, nodes, _) = image();
    let (mut detected, mut harmless) = (0, 0);
    for (n, &node) in nodes.iter().enumerate().step_by(3) {
        // Status word, info word, and the first four metadata words.
        for byte in 0..48u64 {
            let xor = [0xFF, 0x01, 0x80, 0x5A][(byte as usize + n) % 4];
            match probe(&img, node + byte, xor, &m) {
                Ok(true) => detected += 1,
                Ok(false) => harmless += 1,
                Err(e) => panic!("node {node:#x} byte {byte} xor {xor:#x}: {e}"),
            }
        }
    }
    eprintln!("{detected} flips detected as Corrupt, {harmless} harmless");
    assert!(
        detected > harmless,
        "{detected} detected, {harmless} harmless"
    );
}

/// Searches compare keys unchecked and then check the keys that decide the answer
/// (`search_sorted`): a flipped byte in any record's key or key checksum must still be
/// caught or harmless. (Value words carry no checksum of their own: the tree returns what
/// they hold, and its users check what a value points at.)
#[test]
fn flipped_key_bytes_are_detected_or_harmless() {
    let (img, m, nodes, _) = image();
    let node_size = options().node_size as usize;
    let (mut detected, mut harmless) = (0, 0);
    for (n, &node) in nodes.iter().enumerate() {
        let node = node as usize;
        let bytes = &img[node..node + node_size];
        // Every record's key ("k" and 8 digits) and the 4 checksum bytes before it.
        let keys: Vec<usize> = (4..bytes.len().saturating_sub(9))
            .filter(|&i| bytes[i] == b'k' && bytes[i + 1..i + 9].iter().all(u8::is_ascii_digit))
            .collect();
        for (j, &at) in keys.iter().enumerate().step_by(2) {
            let byte = at - 4 + (j + n) % 13;
            let xor = [0x01, 0x20, 0x80][(j + n) % 3];
            match probe(&img, (node + byte) as u64, xor, &m) {
                Ok(true) => detected += 1,
                Ok(false) => harmless += 1,
                Err(e) => panic!("node {node:#x} byte {byte} xor {xor:#x}: {e}"),
            }
        }
    }
    eprintln!("{detected} key and checksum flips detected as Corrupt, {harmless} harmless");
    assert!(detected > 100, "{detected} detected, {harmless} harmless");
}

#[test]
fn a_flipped_tree_header_byte_fails_the_open_with_corrupt() {
    let (img, _, _, header) = image();
    // Magic, shape, checksum, epoch and tree count words (the root word is PMwCAS's and is
    // validated as a node pointer).
    for at in (0..24).chain(32..48) {
        let mut bad = img.clone();
        bad[(header + at) as usize] ^= 0x10;
        let pool = Arc::new(Pool::open_sim(bad, &pool_opts()).expect("pool"));
        match open(&pool, &options()) {
            Err(e) if is_corrupt(&e) => {}
            Err(BzError::InvalidOptions(_)) if (8..16).contains(&at) => {
                panic!("a shape flip must fail the checksum first")
            }
            other => panic!("header byte {at}: expected Corrupt, got {:?}", other.err()),
        }
    }
    // Root word bytes whose flip cannot land on another node: the low byte (nodes are
    // 512-byte aligned) and the bytes above the pool's size. (The root and child words are
    // PMwCAS targets holding plain offsets, validated as node objects only: a flip onto
    // another node's offset is not detected; see docs/format.md.)
    for at in [24].into_iter().chain(27..32) {
        let mut bad = img.clone();
        bad[(header + at) as usize] ^= 0x08;
        let pool = Arc::new(Pool::open_sim(bad, &pool_opts()).expect("pool"));
        match open(&pool, &options()) {
            Err(e) if is_corrupt(&e) => {}
            other => panic!("root byte {at}: expected Corrupt, got {:?}", other.err()),
        }
    }
}

//! Corruption: flipped bytes in the descriptor region are reported at open as
//! `PmwcasError::Corrupt` naming the structure and its offset, never applied as values and
//! never a panic.

mod common;

use std::sync::Arc;

use common::*;
use nacre_pmem::{CrashPolicy, Pool, SplitMix64};
use nacre_pmwcas::{PmwcasError, DESC_SIZE};

/// An image with descriptors in flight (the power failed in the middle of the workload, with
/// every volatile word kept), and the offset of the descriptor region.
fn image_with_descriptors_in_flight() -> (Vec<u8>, u64, Vec<u64>) {
    let pool = Arc::new(Pool::open_sim(base_image(), &pool_opts()).expect("image"));
    let (pm, _) = open(&pool, &options()).expect("open");
    let mut rng = SplitMix64::new(7);
    let sim = pool.sim().expect("sim");
    for k in 0..6 {
        step(&pm, &mut rng, 500 + k);
    }
    sim.stop_at_fence(sim.fence_count() + 3);
    step(&pm, &mut rng, 600);
    drop(pm);
    let image = sim.crash(CrashPolicy::KeepAll);
    let region = pool.region("pmwcas.pmwcas").expect("region").offset.get();
    let word = |img: &[u8], at: u64| {
        u64::from_le_bytes(
            img[at as usize..at as usize + 8]
                .try_into()
                .expect("8 bytes"),
        )
    };
    let in_use: Vec<u64> = (0..options().descriptors as u64)
        .map(|i| region + 64 + DESC_SIZE * i)
        .filter(|&d| word(&image, d) != 0)
        .collect();
    assert!(!in_use.is_empty(), "the image has descriptors in flight");
    (image, region, in_use)
}

fn open_flipped(image: &[u8], at: u64, xor: u8) -> nacre_pmwcas::Result<()> {
    let mut img = image.to_vec();
    img[at as usize] ^= xor;
    let pool = Arc::new(Pool::open_sim(img, &pool_opts()).expect("pool opens"));
    open(&pool, &options()).map(|_| ())
}

fn expect_corrupt(r: nacre_pmwcas::Result<()>, what: &str) -> (String, u64) {
    match r {
        Err(PmwcasError::Corrupt {
            structure, offset, ..
        }) => (structure.to_string(), offset),
        other => panic!("{what}: expected Corrupt, got {other:?}"),
    }
}

#[test]
fn undamaged_image_recovers() {
    let (image, _, _) = image_with_descriptors_in_flight();
    let pool = Arc::new(Pool::open_sim(image, &pool_opts()).expect("pool"));
    let (_, stats) = open(&pool, &options()).expect("recovery");
    assert!(stats.in_flight > 0);
}

#[test]
fn every_byte_of_an_in_flight_descriptor_is_checked() {
    let (image, _, in_use) = image_with_descriptors_in_flight();
    for &d in &in_use {
        let count = u64::from_le_bytes(
            image[d as usize + 8..d as usize + 16]
                .try_into()
                .expect("8 bytes"),
        );
        // status, count, seq, checksum, then the used entries
        let bytes = (0..32).chain(64..64 + 32 * count);
        for b in bytes {
            for xor in [0xFF, 0x01, 0x80] {
                if b == 7 && xor == 0x80 {
                    // The status word's dirty bit: both values are states a crash leaves.
                    continue;
                }
                let (structure, offset) =
                    expect_corrupt(open_flipped(&image, d + b, xor), &format!("byte {b}"));
                assert_eq!(structure, "descriptor");
                assert_eq!(offset, d, "the error names the damaged descriptor");
            }
        }
    }
}

#[test]
fn bad_status_count_and_address_are_named() {
    let (image, _, in_use) = image_with_descriptors_in_flight();
    let d = in_use[0] as usize;
    let set = |at: usize, v: u64| {
        let mut img = image.clone();
        img[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let pool = Arc::new(Pool::open_sim(img, &pool_opts()).expect("pool"));
        open(&pool, &options()).map(|_| ())
    };
    let msg = |r: nacre_pmwcas::Result<()>| match r {
        Err(e @ PmwcasError::Corrupt { .. }) => e.to_string(),
        other => panic!("expected Corrupt, got {other:?}"),
    };
    assert!(msg(set(d, 0x77)).contains("sequence number"));
    assert!(msg(set(d + 8, 200)).contains("entry count 200"));
    assert!(msg(set(d + 64, POOL_SIZE + 64)).contains("checksum"));
}

#[test]
fn a_flipped_status_of_a_free_descriptor_is_corrupt() {
    let (image, region, in_use) = image_with_descriptors_in_flight();
    let free = (0..options().descriptors as u64)
        .map(|i| region + 64 + DESC_SIZE * i)
        .find(|d| !in_use.contains(d))
        .expect("a free descriptor");
    for b in 0..8 {
        expect_corrupt(open_flipped(&image, free + b, 0xFF), "free status");
    }
}

#[test]
fn a_flipped_region_header_is_corrupt() {
    let (image, region, _) = image_with_descriptors_in_flight();
    for b in 0..64 {
        let (structure, offset) = expect_corrupt(
            open_flipped(&image, region + b, 0x10),
            &format!("header byte {b}"),
        );
        assert_eq!(structure, "descriptor region header");
        assert_eq!(offset, region);
    }
}

//! Statistical and determinism tests of the YCSB generators and workloads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;

use nacre_pmem::SplitMix64;

use super::generators::{zeta_approx, SCRAMBLED_ITEM_COUNT, SCRAMBLED_ZETAN};
use super::*;

fn counts(gen: &mut impl NumberGenerator, rng: &mut SplitMix64, n: usize) -> HashMap<u64, u64> {
    let mut c = HashMap::new();
    for _ in 0..n {
        *c.entry(gen.next_value(rng)).or_insert(0) += 1;
    }
    c
}

fn hottest(c: &HashMap<u64, u64>) -> (u64, u64) {
    c.iter()
        .map(|(&k, &v)| (k, v))
        .max_by_key(|&(k, v)| (v, std::cmp::Reverse(k)))
        .unwrap()
}

/// Probability of 0-based index `k` under Gray et al.'s method as YCSB draws it: indices 0 and
/// 1 are exact (`u * zetan < 1`, `< 1 + 0.5^theta`); index `k >= 2` gets the `u` for which
/// `floor(n * (eta * u - eta + 1)^alpha) == k`, found by inverting that map.
fn gray_p(k: u64, n: u64, theta: f64, zetan: f64) -> f64 {
    let ideal = |k: u64| 1.0 / (((k + 1) as f64).powf(theta) * zetan);
    if k < 2 {
        return ideal(k);
    }
    let z2 = 1.0 + 0.5f64.powf(theta);
    let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - z2 / zetan);
    let u_at = |x: u64| ((x as f64 / n as f64).powf(1.0 - theta) - 1.0 + eta) / eta;
    (u_at(k + 1).min(1.0) - u_at(k).max(z2 / zetan)).max(0.0)
}

#[test]
fn zipfian_top_ranks_match_theory() {
    let (n, samples, theta) = (1000u64, 200_000usize, 0.99);
    let zetan = zeta(n, theta);
    let mut rng = SplitMix64::new(7);
    let mut z = Zipfian::with_theta(0, n, theta);
    let c = counts(&mut z, &mut rng, samples);
    let freq = |k: u64| c.get(&k).copied().unwrap_or(0) as f64 / samples as f64;
    let ideal = |k: u64| 1.0 / (((k + 1) as f64).powf(theta) * zetan);
    // Ranks 1 and 2 are exact in Gray's method: compare with p(k) = 1 / (k^theta zeta(n)).
    for k in 0..2u64 {
        let rel = (freq(k) - ideal(k)).abs() / ideal(k);
        assert!(
            rel < 0.03,
            "rank {}: p {:.5} vs {:.5}",
            k + 1,
            freq(k),
            ideal(k)
        );
    }
    // Ranks 3..10: Gray's closed form over-weights them (rank 3 by ~17%, as in YCSB);
    // the draws must follow that closed form.
    for k in 2..10u64 {
        let want = gray_p(k, n, theta, zetan);
        let rel = (freq(k) - want).abs() / want;
        assert!(
            rel < 0.05,
            "rank {}: p {:.5} vs {want:.5} ({:.1}% off)",
            k + 1,
            freq(k),
            rel * 100.0
        );
        assert!(
            want > ideal(k) && want < 1.2 * ideal(k),
            "rank {}: closed form {want}",
            k + 1
        );
    }
    // Past rank 10 the method is within ~1.5% of p(k): ranks 11..=100 together.
    let (got, want): (f64, f64) = (10..100u64)
        .map(|k| (freq(k), ideal(k)))
        .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert!(
        (got - want).abs() / want < 0.03,
        "ranks 11..=100: {got:.4} vs {want:.4}"
    );
    let total: f64 = (0..n).map(|k| gray_p(k, n, theta, zetan)).sum();
    assert!((total - 1.0).abs() < 1e-9, "closed form sums to {total}");
}

#[test]
fn zipfian_extends_zeta_when_items_grow() {
    let mut rng = SplitMix64::new(1);
    let mut z = Zipfian::new(5, 100);
    for items in [100u64, 250, 1000] {
        for _ in 0..10_000 {
            let v = z.next_with_items(&mut rng, items);
            assert!(
                (5..5 + items).contains(&v),
                "{v} outside [5, {})",
                5 + items
            );
        }
        let exact = zeta(items, ZIPFIAN_CONSTANT);
        assert!(
            (z.zetan() - exact).abs() < 1e-9 * exact,
            "zetan {} vs {exact}",
            z.zetan()
        );
    }
}

#[test]
fn zeta_approximation_reproduces_ycsb_zetan() {
    let approx = zeta_approx(SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT);
    let rel = (approx - SCRAMBLED_ZETAN).abs() / SCRAMBLED_ZETAN;
    assert!(
        rel < 1e-6,
        "zeta(1e10, 0.99) ~ {approx}, YCSB {SCRAMBLED_ZETAN}"
    );
    // The approximation agrees with the exact sum where both can be computed.
    let (exact, approx) = (zeta(1_000_000, 0.8), zeta_approx(1_000_000, 0.8));
    assert!((exact - approx).abs() < 1e-9 * exact, "{exact} vs {approx}");
}

#[test]
fn every_generator_stays_in_bounds() {
    let mut rng = SplitMix64::new(3);
    let draws = 50_000;
    let mut check = |name: &str, g: &mut dyn FnMut(&mut SplitMix64) -> u64, lo: u64, hi: u64| {
        for _ in 0..draws {
            let v = g(&mut rng);
            assert!((lo..=hi).contains(&v), "{name}: {v} outside [{lo}, {hi}]");
        }
    };
    let mut u = Uniform::new(10, 20);
    check("uniform", &mut |r| u.next_value(r), 10, 20);
    let mut z = Zipfian::new(100, 50);
    check("zipfian", &mut |r| z.next_value(r), 100, 149);
    let mut s = ScrambledZipfian::new(1000, 1999);
    check("scrambled", &mut |r| s.next_value(r), 1000, 1999);
    let mut s8 = ScrambledZipfian::with_theta(0, 9, 0.8);
    check("scrambled 0.8", &mut |r| s8.next_value(r), 0, 9);
    let mut h = Hotspot::new(50, 149, 0.2, 0.8);
    check("hotspot", &mut |r| h.next_value(r), 50, 149);
    let mut h1 = Hotspot::new(0, 9, 1.5, -1.0);
    check("hotspot clamped", &mut |r| h1.next_value(r), 0, 9);
    let basis = Arc::new(Counter::new(500));
    let mut l = SkewedLatest::new(Arc::clone(&basis));
    check("latest", &mut |r| l.next_value(r), 1, 499);
    basis.next();
    check("latest grown", &mut |r| l.next_value(r), 1, 500);
    let w = Workload::e(100, 1000);
    let mut scan = w.scan_length_chooser();
    check("scan uniform", &mut |r| scan.next_value(r), 1, 100);
    let wz = Workload {
        scan_length_distribution: ScanLengthDistribution::Zipfian,
        ..w
    };
    let mut scan_z = wz.scan_length_chooser();
    check("scan zipfian", &mut |r| scan_z.next_value(r), 1, 100);
}

#[test]
fn scrambled_zipfian_spreads_hot_keys() {
    let (n, samples) = (1000u64, 200_000usize);
    let mut rng = SplitMix64::new(11);
    let mut s = ScrambledZipfian::new(0, n - 1);
    let c = counts(&mut s, &mut rng, samples);
    let (key, count) = hottest(&c);
    // Rank 0 of the 10^10-item zipfian lands on fnvhash64(0) mod n, not on key 0.
    assert_eq!(key, fnvhash64(0) % n);
    assert_ne!(key, 0);
    let p1 = 1.0 / SCRAMBLED_ZETAN;
    let got = count as f64 / samples as f64;
    assert!(
        (got - p1).abs() / p1 < 0.10,
        "hottest key p {got:.5} vs p(1) {p1:.5}"
    );
    // The hot keys are scattered: the ten hottest are not a contiguous run.
    let mut top: Vec<(u64, u64)> = c.iter().map(|(&k, &v)| (k, v)).collect();
    top.sort_by_key(|&(k, v)| (std::cmp::Reverse(v), k));
    let keys: Vec<u64> = top.iter().take(10).map(|&(k, _)| k).collect();
    let span = keys.iter().max().unwrap() - keys.iter().min().unwrap();
    assert!(span > 100, "ten hottest keys within {span}: {keys:?}");
}

#[test]
fn latest_favours_newest_keys() {
    let (n, samples) = (1000u64, 100_000usize);
    let w = Workload::d(n, 1000);
    let inserted = w.insert_sequence();
    let mut keys = w.key_chooser(Arc::clone(&inserted));
    let mut rng = SplitMix64::new(5);
    let mut c: HashMap<u64, u64> = HashMap::new();
    for _ in 0..samples {
        let k = keys.next_key(&mut rng);
        assert!(k < n);
        *c.entry(k).or_insert(0) += 1;
    }
    assert_eq!(hottest(&c).0, n - 1);
    let newest: u64 = c
        .iter()
        .filter(|(&k, _)| k >= n - n / 10)
        .map(|(_, &v)| v)
        .sum();
    let frac = newest as f64 / samples as f64;
    assert!(frac > 0.5, "newest 10% drew {frac:.3}");
    // An acknowledged insert becomes the hottest key.
    let k = inserted.next();
    assert_eq!(k, n);
    inserted.acknowledge(k);
    let c2 = counts_keys(&mut keys, &mut rng, samples);
    assert_eq!(hottest(&c2).0, n);
}

fn counts_keys(keys: &mut KeyChooser, rng: &mut SplitMix64, n: usize) -> HashMap<u64, u64> {
    let mut c = HashMap::new();
    for _ in 0..n {
        *c.entry(keys.next_key(rng)).or_insert(0) += 1;
    }
    c
}

#[test]
fn hotspot_sends_hot_op_fraction_to_hot_set() {
    let samples = 100_000usize;
    let mut h = Hotspot::new(1000, 1999, 0.2, 0.8);
    assert_eq!(h.hot_interval(), 200);
    let mut rng = SplitMix64::new(9);
    let c = counts(&mut h, &mut rng, samples);
    let hot: u64 = c.iter().filter(|(&k, _)| k < 1200).map(|(_, &v)| v).sum();
    let frac = hot as f64 / samples as f64;
    assert!((frac - 0.8).abs() < 0.01, "hot set drew {frac:.4}");
}

#[test]
fn uniform_mean_is_midpoint() {
    let samples = 100_000usize;
    let mut u = Uniform::new(100, 300);
    let mut rng = SplitMix64::new(13);
    let sum: u64 = (0..samples).map(|_| u.next_value(&mut rng)).sum();
    let mean = sum as f64 / samples as f64;
    assert!((mean - 200.0).abs() < 1.0, "mean {mean}");
}

#[test]
fn workload_operation_proportions_match() {
    let samples = 100_000usize;
    let cases: [(&str, Workload, [f64; 5]); 6] = [
        ("A", Workload::a(1000, 1000), [0.5, 0.5, 0.0, 0.0, 0.0]),
        ("B", Workload::b(1000, 1000), [0.95, 0.05, 0.0, 0.0, 0.0]),
        ("C", Workload::c(1000, 1000), [1.0, 0.0, 0.0, 0.0, 0.0]),
        ("D", Workload::d(1000, 1000), [0.95, 0.0, 0.05, 0.0, 0.0]),
        ("E", Workload::e(1000, 1000), [0.0, 0.0, 0.05, 0.95, 0.0]),
        ("F", Workload::f(1000, 1000), [0.5, 0.0, 0.0, 0.0, 0.5]),
    ];
    let ops = [
        Op::Read,
        Op::Update,
        Op::Insert,
        Op::Scan,
        Op::ReadModifyWrite,
    ];
    for (i, (name, w, expected)) in cases.iter().enumerate() {
        let chooser = w.operation_chooser();
        let mut rng = SplitMix64::new(100 + i as u64);
        let mut c: HashMap<Op, u64> = HashMap::new();
        for _ in 0..samples {
            *c.entry(chooser.next_op(&mut rng)).or_insert(0) += 1;
        }
        for (op, want) in ops.iter().zip(expected) {
            let got = c.get(op).copied().unwrap_or(0) as f64 / samples as f64;
            assert!(
                (got - want).abs() < 0.01,
                "workload {name} {op:?}: {got:.4} vs {want}"
            );
        }
    }
    let e = Workload::e(1000, 1000);
    assert_eq!(
        (e.max_scan_length, e.scan_length_distribution),
        (100, ScanLengthDistribution::Uniform)
    );
    assert_eq!(
        Workload::d(1, 1).request_distribution,
        RequestDistribution::Latest
    );
    assert_eq!(
        Workload::a(1, 1).request_distribution,
        RequestDistribution::Zipfian
    );
}

fn run_trace(seed: u64, w: &Workload) -> (Vec<Op>, Vec<u64>, Vec<Vec<u8>>) {
    let mut rng = SplitMix64::new(seed);
    let ops = w.operation_chooser();
    let inserted = w.insert_sequence();
    let mut keys = w.key_chooser(Arc::clone(&inserted));
    let mut trace = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2000 {
        let op = ops.next_op(&mut rng);
        let key = if op == Op::Insert {
            let k = inserted.next();
            inserted.acknowledge(k);
            k
        } else {
            keys.next_key(&mut rng)
        };
        trace.0.push(op);
        trace.1.push(key);
        trace.2.push(w.field_value(&mut rng));
    }
    trace
}

#[test]
fn seeded_runs_are_deterministic() {
    for w in [
        Workload::a(500, 2000),
        Workload::d(500, 2000),
        Workload::e(500, 2000),
    ] {
        assert_eq!(run_trace(42, &w), run_trace(42, &w));
        assert_ne!(run_trace(42, &w).1, run_trace(43, &w).1);
    }
    let hot = Workload {
        request_distribution: RequestDistribution::Hotspot,
        ..Workload::b(500, 2000)
    };
    assert_eq!(run_trace(1, &hot), run_trace(1, &hot));
}

#[test]
fn key_chooser_never_passes_acknowledged_inserts() {
    // Workload E leaves zipfian room for 2 * 5% of the operations beyond record_count.
    let w = Workload::e(100, 10_000);
    let inserted = w.insert_sequence();
    let mut keys = w.key_chooser(Arc::clone(&inserted));
    let mut rng = SplitMix64::new(21);
    let pending = inserted.next(); // in flight, not acknowledged
    let acked = inserted.next();
    inserted.acknowledge(acked);
    assert_eq!(
        inserted.last_value(),
        Some(99),
        "a gap holds the limit back"
    );
    assert!((0..20_000).all(|_| keys.next_key(&mut rng) < 100));
    inserted.acknowledge(pending);
    assert_eq!(inserted.last_value(), Some(101));
    let c = counts_keys(&mut keys, &mut rng, 50_000);
    assert!(c.keys().all(|&k| k <= 101) && c.contains_key(&101));
}

#[test]
fn key_name_hashed_vs_ordered() {
    assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
    assert_eq!(fnvhash64(42), 55_488_592_825_689_361);
    assert_eq!(key_name(42, true), "user42");
    assert_eq!(key_name(42, false), "user55488592825689361");
    assert_ne!(key_name(7, true), key_name(7, false));
}

#[test]
fn field_values_have_field_length_and_fields_are_chosen() {
    let w = Workload::a(10, 10);
    let mut rng = SplitMix64::new(2);
    let rec = w.record_values(&mut rng);
    assert_eq!(rec.len(), 10);
    assert!(rec
        .iter()
        .all(|f| f.len() == 100 && f.iter().all(|b| (b' '..=b'_').contains(b))));
    assert_ne!(rec[0], rec[1]);
    assert_eq!(w.fields(true, &mut rng), (0..10).collect::<Vec<_>>());
    let one = w.fields(false, &mut rng);
    assert!(one.len() == 1 && one[0] < 10);
}

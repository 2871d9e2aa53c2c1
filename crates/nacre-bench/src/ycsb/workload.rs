//! YCSB's `CoreWorkload` parameters, the core workloads A-F, and the choosers that turn a
//! [`SplitMix64`] into operations, keys, scan lengths and field values.

use std::sync::Arc;

use nacre_pmem::SplitMix64;

use super::generators::{
    AcknowledgedCounter, Hotspot, LastValue, NumberGenerator, ScrambledZipfian, SkewedLatest,
    Uniform, Zipfian, ZIPFIAN_CONSTANT,
};

/// One YCSB operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read one record (all fields or one).
    Read,
    /// Overwrite one record (all fields or one).
    Update,
    /// Insert a new record.
    Insert,
    /// Read a run of records starting at a key.
    Scan,
    /// Read a record, then update it.
    ReadModifyWrite,
}

/// How keys are picked for reads, updates, scans and read-modify-writes
/// (`requestdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestDistribution {
    /// Every existing key equally likely.
    Uniform,
    /// Scrambled zipfian: a few keys, scattered over the key space, are hot.
    Zipfian,
    /// The most recently inserted keys are hot.
    Latest,
    /// A fixed fraction of the key space receives a fixed fraction of the requests.
    Hotspot,
}

/// How scan lengths are drawn (`scanlengthdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanLengthDistribution {
    /// Uniform over `1..=max_scan_length`.
    Uniform,
    /// Zipfian over `1..=max_scan_length`, short scans most likely.
    Zipfian,
}

/// A YCSB core workload (`site.ycsb.workloads.CoreWorkload` properties).
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Records loaded before the run (`recordcount`).
    pub record_count: u64,
    /// Operations in the run (`operationcount`).
    pub operation_count: u64,
    /// Fields per record (`fieldcount`, default 10).
    pub field_count: usize,
    /// Bytes per field (`fieldlength`, default 100).
    pub field_length: usize,
    /// Share of reads (`readproportion`).
    pub read_proportion: f64,
    /// Share of updates (`updateproportion`).
    pub update_proportion: f64,
    /// Share of inserts (`insertproportion`).
    pub insert_proportion: f64,
    /// Share of scans (`scanproportion`).
    pub scan_proportion: f64,
    /// Share of read-modify-writes (`readmodifywriteproportion`).
    pub read_modify_write_proportion: f64,
    /// Key distribution (`requestdistribution`).
    pub request_distribution: RequestDistribution,
    /// Zipfian constant for the zipfian distributions (0.99).
    pub zipfian_constant: f64,
    /// Longest scan (`maxscanlength`, default 100).
    pub max_scan_length: u64,
    /// Scan length distribution (`scanlengthdistribution`, default uniform).
    pub scan_length_distribution: ScanLengthDistribution,
    /// Hot share of the key space for [`RequestDistribution::Hotspot`] (default 0.2).
    pub hotspot_data_fraction: f64,
    /// Share of requests to the hot keys for [`RequestDistribution::Hotspot`] (default 0.8).
    pub hotspot_op_fraction: f64,
    /// Reads fetch every field (`readallfields`); otherwise one random field.
    pub read_all_fields: bool,
    /// Updates write every field (`writeallfields`); otherwise one random field.
    pub write_all_fields: bool,
    /// Key names use the key number as is (`insertorder=ordered`) instead of its hash.
    pub ordered_inserts: bool,
}

impl Workload {
    /// CoreWorkload's defaults (95% reads, 5% updates, uniform) with the given sizes.
    pub fn core(record_count: u64, operation_count: u64) -> Self {
        Workload {
            record_count,
            operation_count,
            field_count: 10,
            field_length: 100,
            read_proportion: 0.95,
            update_proportion: 0.05,
            insert_proportion: 0.0,
            scan_proportion: 0.0,
            read_modify_write_proportion: 0.0,
            request_distribution: RequestDistribution::Uniform,
            zipfian_constant: ZIPFIAN_CONSTANT,
            max_scan_length: 100,
            scan_length_distribution: ScanLengthDistribution::Uniform,
            hotspot_data_fraction: 0.2,
            hotspot_op_fraction: 0.8,
            read_all_fields: true,
            write_all_fields: false,
            ordered_inserts: false,
        }
    }

    fn mix(
        record_count: u64,
        operation_count: u64,
        props: [f64; 5],
        dist: RequestDistribution,
    ) -> Self {
        let [read, update, insert, scan, rmw] = props;
        Workload {
            read_proportion: read,
            update_proportion: update,
            insert_proportion: insert,
            scan_proportion: scan,
            read_modify_write_proportion: rmw,
            request_distribution: dist,
            ..Self::core(record_count, operation_count)
        }
    }

    /// Workload A, update heavy: 50% reads, 50% updates, zipfian.
    pub fn a(record_count: u64, operation_count: u64) -> Self {
        Self::mix(
            record_count,
            operation_count,
            [0.5, 0.5, 0.0, 0.0, 0.0],
            RequestDistribution::Zipfian,
        )
    }

    /// Workload B, read mostly: 95% reads, 5% updates, zipfian.
    pub fn b(record_count: u64, operation_count: u64) -> Self {
        Self::mix(
            record_count,
            operation_count,
            [0.95, 0.05, 0.0, 0.0, 0.0],
            RequestDistribution::Zipfian,
        )
    }

    /// Workload C, read only: 100% reads, zipfian.
    pub fn c(record_count: u64, operation_count: u64) -> Self {
        Self::mix(
            record_count,
            operation_count,
            [1.0, 0.0, 0.0, 0.0, 0.0],
            RequestDistribution::Zipfian,
        )
    }

    /// Workload D, read latest: 95% reads, 5% inserts, latest.
    pub fn d(record_count: u64, operation_count: u64) -> Self {
        Self::mix(
            record_count,
            operation_count,
            [0.95, 0.0, 0.05, 0.0, 0.0],
            RequestDistribution::Latest,
        )
    }

    /// Workload E, short ranges: 95% scans, 5% inserts, zipfian, scans of 1..=100 uniform.
    pub fn e(record_count: u64, operation_count: u64) -> Self {
        Workload {
            max_scan_length: 100,
            scan_length_distribution: ScanLengthDistribution::Uniform,
            ..Self::mix(
                record_count,
                operation_count,
                [0.0, 0.0, 0.05, 0.95, 0.0],
                RequestDistribution::Zipfian,
            )
        }
    }

    /// Workload F, read-modify-write: 50% reads, 50% read-modify-writes, zipfian.
    pub fn f(record_count: u64, operation_count: u64) -> Self {
        Self::mix(
            record_count,
            operation_count,
            [0.5, 0.0, 0.0, 0.0, 0.5],
            RequestDistribution::Zipfian,
        )
    }

    /// The operation mix.
    pub fn operation_chooser(&self) -> OperationChooser {
        OperationChooser::new(self)
    }

    /// The insert key sequence: starts at `record_count`, keys below it count as loaded.
    pub fn insert_sequence(&self) -> Arc<AcknowledgedCounter> {
        Arc::new(AcknowledgedCounter::new(self.record_count))
    }

    /// The key chooser for the request distribution, bounded by what `inserted` has
    /// acknowledged (see [`Workload::insert_sequence`]).
    pub fn key_chooser(&self, inserted: Arc<AcknowledgedCounter>) -> KeyChooser {
        KeyChooser::new(self, inserted)
    }

    /// The scan length generator.
    ///
    /// # Panics
    /// If `max_scan_length` is 0.
    pub fn scan_length_chooser(&self) -> ScanLength {
        assert!(self.max_scan_length >= 1, "Workload: max_scan_length is 0");
        match self.scan_length_distribution {
            ScanLengthDistribution::Uniform => {
                ScanLength::Uniform(Uniform::new(1, self.max_scan_length))
            }
            ScanLengthDistribution::Zipfian => ScanLength::Zipfian(Zipfian::with_theta(
                1,
                self.max_scan_length,
                self.zipfian_constant,
            )),
        }
    }

    /// The fields an operation touches: all of them, or one chosen uniformly.
    pub fn fields(&self, all: bool, rng: &mut SplitMix64) -> Vec<usize> {
        if all || self.field_count == 0 {
            (0..self.field_count).collect()
        } else {
            vec![(rng.next_u64() % self.field_count as u64) as usize]
        }
    }

    /// One field value: `field_length` printable random bytes (as YCSB's `RandomByteIterator`).
    pub fn field_value(&self, rng: &mut SplitMix64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.field_length);
        while out.len() < self.field_length {
            let mut bits = rng.next_u64();
            for _ in 0..8 {
                if out.len() == self.field_length {
                    break;
                }
                out.push(b' ' + (bits & 63) as u8);
                bits >>= 8;
            }
        }
        out
    }

    /// A full record: `field_count` values.
    pub fn record_values(&self, rng: &mut SplitMix64) -> Vec<Vec<u8>> {
        (0..self.field_count)
            .map(|_| self.field_value(rng))
            .collect()
    }
}

/// Draws operations with a workload's proportions (YCSB's `DiscreteGenerator`).
#[derive(Clone, Debug)]
pub struct OperationChooser {
    weights: Vec<(f64, Op)>,
    sum: f64,
}

impl OperationChooser {
    /// The chooser for `w`'s proportions; zero proportions are left out as in YCSB.
    ///
    /// # Panics
    /// If no proportion is positive.
    pub fn new(w: &Workload) -> Self {
        let weights: Vec<(f64, Op)> = [
            (w.read_proportion, Op::Read),
            (w.update_proportion, Op::Update),
            (w.insert_proportion, Op::Insert),
            (w.scan_proportion, Op::Scan),
            (w.read_modify_write_proportion, Op::ReadModifyWrite),
        ]
        .into_iter()
        .filter(|(p, _)| *p > 0.0)
        .collect();
        let sum: f64 = weights.iter().map(|(p, _)| p).sum();
        assert!(sum > 0.0, "OperationChooser: no positive proportion");
        OperationChooser { weights, sum }
    }

    /// The next operation.
    pub fn next_op(&self, rng: &mut SplitMix64) -> Op {
        let mut val = rng.next_f64();
        for &(p, op) in &self.weights {
            let share = p / self.sum;
            if val < share {
                return op;
            }
            val -= share;
        }
        // Rounding left `val` past the last share.
        self.weights.last().map_or(Op::Read, |&(_, op)| op)
    }
}

/// Scan length generator.
#[derive(Clone, Debug)]
pub enum ScanLength {
    /// Uniform over `1..=max`.
    Uniform(Uniform),
    /// Zipfian over `1..=max`.
    Zipfian(Zipfian),
}

impl NumberGenerator for ScanLength {
    fn next_value(&mut self, rng: &mut SplitMix64) -> u64 {
        match self {
            ScanLength::Uniform(g) => g.next_value(rng),
            ScanLength::Zipfian(g) => g.next_value(rng),
        }
    }
}

#[derive(Debug)]
enum KeyDist {
    Uniform(Uniform),
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest<AcknowledgedCounter>),
    Hotspot(Hotspot),
}

/// Picks the key number for a read, update, scan or read-modify-write (YCSB's
/// `CoreWorkload.nextKeynum`): redraws anything past the last acknowledged insert.
#[derive(Debug)]
pub struct KeyChooser {
    dist: KeyDist,
    inserted: Arc<AcknowledgedCounter>,
}

impl KeyChooser {
    /// The chooser for `w.request_distribution` over keys `0..record_count` plus what
    /// `inserted` acknowledges later.
    ///
    /// # Panics
    /// If `w.record_count` is 0.
    pub fn new(w: &Workload, inserted: Arc<AcknowledgedCounter>) -> Self {
        assert!(w.record_count > 0, "KeyChooser: record_count is 0");
        let last = w.record_count - 1;
        let dist = match w.request_distribution {
            RequestDistribution::Uniform => KeyDist::Uniform(Uniform::new(0, last)),
            RequestDistribution::Zipfian => {
                // YCSB leaves room for the keys this run inserts (fudge factor 2).
                let expected_new = (w.operation_count as f64 * w.insert_proportion * 2.0) as u64;
                KeyDist::Zipfian(ScrambledZipfian::with_theta(
                    0,
                    w.record_count + expected_new,
                    w.zipfian_constant,
                ))
            }
            RequestDistribution::Latest => {
                KeyDist::Latest(SkewedLatest::new(Arc::clone(&inserted)))
            }
            RequestDistribution::Hotspot => KeyDist::Hotspot(Hotspot::new(
                0,
                last,
                w.hotspot_data_fraction,
                w.hotspot_op_fraction,
            )),
        };
        KeyChooser { dist, inserted }
    }

    /// The next key number.
    pub fn next_key(&mut self, rng: &mut SplitMix64) -> u64 {
        let limit = self.inserted.last_value().unwrap_or(0);
        loop {
            let k = match &mut self.dist {
                KeyDist::Uniform(g) => g.next_value(rng),
                KeyDist::Zipfian(g) => g.next_value(rng),
                KeyDist::Latest(g) => g.next_value(rng),
                KeyDist::Hotspot(g) => g.next_value(rng),
            };
            if k <= limit {
                return k;
            }
        }
    }
}

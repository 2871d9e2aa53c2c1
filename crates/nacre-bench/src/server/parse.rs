//! redis-benchmark's full (not `--csv`) output: per test, the throughput and the latency
//! percentiles, p99.9 included (the CSV has no p99.9).

/// One test's numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct TestResult {
    /// Test name as redis-benchmark prints it (`SET`, `MSET (10 keys)`).
    pub test: String,
    /// Requests per second.
    pub rps: f64,
    /// Median latency, ms.
    pub p50: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// 99.9th percentile, ms.
    pub p999: f64,
    /// Maximum, ms.
    pub max: f64,
}

/// Every test in `out`.
pub fn parse_benchmark(out: &str) -> Vec<TestResult> {
    let mut res = Vec::new();
    for section in out.split("====== ").skip(1) {
        let Some((name, body)) = section.split_once(" ======") else {
            continue;
        };
        let lines: Vec<&str> = body.split(['\r', '\n']).map(str::trim).collect();
        let mut r = TestResult {
            test: name.trim().to_string(),
            rps: 0.0,
            p50: 0.0,
            p99: 0.0,
            p999: 0.0,
            max: 0.0,
        };
        let mut p999 = None;
        for (i, l) in lines.iter().enumerate() {
            if let Some(rest) = l.strip_prefix("throughput summary:") {
                r.rps = rest
                    .split_whitespace()
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0.0);
            }
            // "99.900% <= 1.023 milliseconds (cumulative count 99902)"
            if p999.is_none() {
                if let Some((pct, rest)) = l.split_once("% <= ") {
                    if pct.parse::<f64>().is_ok_and(|p| p >= 99.9) {
                        p999 = rest.split_whitespace().next().and_then(|x| x.parse().ok());
                    }
                }
            }
            if l.starts_with("avg") && l.contains("p50") && l.contains("max") {
                let names: Vec<&str> = l.split_whitespace().collect();
                let vals: Vec<f64> = lines
                    .get(i + 1)
                    .map(|v| {
                        v.split_whitespace()
                            .filter_map(|x| x.parse().ok())
                            .collect()
                    })
                    .unwrap_or_default();
                for (n, v) in names.iter().zip(vals) {
                    match *n {
                        "p50" => r.p50 = v,
                        "p99" => r.p99 = v,
                        "max" => r.max = v,
                        _ => {}
                    }
                }
            }
        }
        r.p999 = p999.unwrap_or(r.max);
        if r.rps > 0.0 {
            res.push(r);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_redis_benchmark_report() {
        let out = "SET: rps=0.0 (overall: -nan) avg_msec=-nan\r====== SET ======\n  100000 requests completed in 1.05 seconds\n  50 parallel clients\n\nLatency by percentile distribution:\n0.000% <= 0.103 milliseconds (cumulative count 1)\n50.000% <= 0.255 milliseconds (cumulative count 50617)\n99.000% <= 0.503 milliseconds (cumulative count 99000)\n99.902% <= 1.023 milliseconds (cumulative count 99902)\n100.000% <= 2.111 milliseconds (cumulative count 100000)\n\nSummary:\n  throughput summary: 95238.10 requests per second\n  latency summary (msec):\n          avg       min       p50       p95       p99       max\n        0.266     0.096     0.255     0.375     0.503     2.111\n====== MSET (10 keys) ======\nSummary:\n  throughput summary: 10.00 requests per second\n  latency summary (msec):\n          avg       min       p50       p95       p99       max\n        1.0     1.0     1.0     1.0     2.0     3.0\n";
        let r = parse_benchmark(out);
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            TestResult {
                test: "SET".into(),
                rps: 95238.10,
                p50: 0.255,
                p99: 0.503,
                p999: 1.023,
                max: 2.111
            }
        );
        assert_eq!(r[1].test, "MSET (10 keys)");
        assert_eq!(r[1].p999, 3.0);
    }
}

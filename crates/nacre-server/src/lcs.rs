//! Longest common subsequence of two byte strings, as computed by the LCS
//! command, including the matched ranges that `LCS ... IDX` reports.
//!
//! The classic dynamic-programming table is built in full (one `u32` per
//! cell) and then walked back from the end of both strings, so matches come
//! out from the end of the strings toward their start, exactly in the order
//! Redis 7.0 replies with them.

/// One matched range: bytes `a.0..=a.1` of the first string equal bytes
/// `b.0..=b.1` of the second, both `len` bytes long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcsMatch {
    /// Inclusive `(start, end)` byte range in the first string.
    pub a: (usize, usize),
    /// Inclusive `(start, end)` byte range in the second string.
    pub b: (usize, usize),
    /// Length of the range in bytes.
    pub len: usize,
}

/// Result of [`lcs`]: the subsequence itself and its matched ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lcs {
    /// The longest common subsequence.
    pub string: Vec<u8>,
    /// Maximal contiguous matched ranges, last ones first.
    pub matches: Vec<LcsMatch>,
}

/// Largest number of table cells, `(a_len + 1) * (b_len + 1)`, that [`lcs`]
/// agrees to build.
pub const MAX_LCS_CELLS: u64 = 1 << 32;

/// Returns true when the table for strings of these lengths would have more
/// than [`MAX_LCS_CELLS`] cells (or its size overflows), so the caller should
/// refuse the command with an error instead of calling [`lcs`].
pub fn lcs_table_too_big(a_len: usize, b_len: usize) -> bool {
    match (a_len as u128 + 1).checked_mul(b_len as u128 + 1) {
        Some(cells) => cells > u128::from(MAX_LCS_CELLS),
        None => true,
    }
}

/// Computes the LCS of `a` and `b`, or `None` when the table is too big
/// (see [`lcs_table_too_big`]) or its memory cannot be allocated.
pub fn try_lcs(a: &[u8], b: &[u8]) -> Option<Lcs> {
    if lcs_table_too_big(a.len(), b.len()) {
        return None;
    }
    let width = b.len() + 1;
    let cells = (a.len() + 1).checked_mul(width)?;
    let mut table: Vec<u32> = Vec::new();
    table.try_reserve_exact(cells).ok()?;
    table.resize(cells, 0);

    // table[i * width + j] = LCS length of a[..i] and b[..j].
    for (i, &ca) in a.iter().enumerate() {
        let (done, rest) = table.split_at_mut((i + 1) * width);
        let prev = &done[i * width..];
        let cur = &mut rest[..width];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = if ca == cb {
                prev[j] + 1
            } else {
                prev[j + 1].max(cur[j])
            };
        }
    }
    let at = |i: usize, j: usize| table[i * width + j];

    let total = at(a.len(), b.len()) as usize;
    let mut reversed = Vec::with_capacity(total);
    let mut matches = Vec::new();
    // Range being grown backward: (a_start, a_end, b_start, b_end).
    let mut run: Option<(usize, usize, usize, usize)> = None;
    let flush = |run: &mut Option<(usize, usize, usize, usize)>, out: &mut Vec<LcsMatch>| {
        if let Some((a_start, a_end, b_start, b_end)) = run.take() {
            out.push(LcsMatch {
                a: (a_start, a_end),
                b: (b_start, b_end),
                len: a_end - a_start + 1,
            });
        }
    };

    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        if a[i - 1] == b[j - 1] {
            reversed.push(a[i - 1]);
            match run.as_mut() {
                // Directly before the current range in both strings: grow it.
                Some(r) if r.0 == i && r.2 == j => {
                    r.0 = i - 1;
                    r.2 = j - 1;
                }
                _ => {
                    flush(&mut run, &mut matches);
                    run = Some((i - 1, i - 1, j - 1, j - 1));
                }
            }
            i -= 1;
            j -= 1;
        } else {
            // Follow the larger neighbour; on a tie move along `b`.
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            flush(&mut run, &mut matches);
        }
    }
    flush(&mut run, &mut matches);

    reversed.reverse();
    Some(Lcs {
        string: reversed,
        matches,
    })
}

/// Computes the LCS of `a` and `b` and its matched ranges.
///
/// Uses `O(a.len() * b.len())` memory; callers must check
/// [`lcs_table_too_big`] first. If the table is too big or cannot be
/// allocated anyway, an empty result is returned (use [`try_lcs`] to tell
/// the cases apart).
pub fn lcs(a: &[u8], b: &[u8]) -> Lcs {
    try_lcs(a, b).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(a: (usize, usize), b: (usize, usize), len: usize) -> LcsMatch {
        LcsMatch { a, b, len }
    }

    /// Length of the LCS by plain recursion with memoisation, independent
    /// of the table layout above.
    fn reference_len(a: &[u8], b: &[u8]) -> usize {
        let mut memo = vec![vec![None; b.len() + 1]; a.len() + 1];
        fn go(a: &[u8], b: &[u8], i: usize, j: usize, memo: &mut [Vec<Option<usize>>]) -> usize {
            if i == a.len() || j == b.len() {
                return 0;
            }
            if let Some(v) = memo[i][j] {
                return v;
            }
            let v = if a[i] == b[j] {
                1 + go(a, b, i + 1, j + 1, memo)
            } else {
                go(a, b, i + 1, j, memo).max(go(a, b, i, j + 1, memo))
            };
            memo[i][j] = Some(v);
            v
        }
        go(a, b, 0, 0, &mut memo)
    }

    /// Checks the structural invariants of a result.
    fn check_consistent(a: &[u8], b: &[u8], r: &Lcs) {
        assert_eq!(r.string.len(), reference_len(a, b));
        let mut rebuilt = Vec::new();
        let mut prev: Option<&LcsMatch> = None;
        for mt in &r.matches {
            assert!(mt.a.0 <= mt.a.1 && mt.b.0 <= mt.b.1);
            assert_eq!(mt.a.1 - mt.a.0 + 1, mt.len);
            assert_eq!(mt.b.1 - mt.b.0 + 1, mt.len);
            assert_eq!(&a[mt.a.0..=mt.a.1], &b[mt.b.0..=mt.b.1]);
            if let Some(p) = prev {
                // Strictly before the previous range in both strings, and
                // not diagonally adjacent (otherwise it would be merged).
                assert!(mt.a.1 < p.a.0 && mt.b.1 < p.b.0);
                assert!(!(mt.a.1 + 1 == p.a.0 && mt.b.1 + 1 == p.b.0));
            }
            prev = Some(mt);
        }
        for mt in r.matches.iter().rev() {
            rebuilt.extend_from_slice(&a[mt.a.0..=mt.a.1]);
        }
        assert_eq!(rebuilt, r.string);
    }

    /// Step-by-step walk mirroring the documented reply order, used as a
    /// second opinion on range grouping: every match step is recorded as a
    /// one-byte range, then diagonal neighbours are merged.
    fn grouped_walk(a: &[u8], b: &[u8]) -> Vec<LcsMatch> {
        let n = a.len();
        let w = b.len() + 1;
        let mut t = vec![0u32; (n + 1) * w];
        for i in 1..=n {
            for j in 1..w {
                t[i * w + j] = if a[i - 1] == b[j - 1] {
                    t[(i - 1) * w + j - 1] + 1
                } else {
                    t[(i - 1) * w + j].max(t[i * w + j - 1])
                };
            }
        }
        let mut pairs = Vec::new();
        let (mut i, mut j) = (n, b.len());
        while i > 0 && j > 0 {
            if a[i - 1] == b[j - 1] {
                pairs.push((i - 1, j - 1));
                i -= 1;
                j -= 1;
            } else if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
        }
        let mut out: Vec<LcsMatch> = Vec::new();
        for (x, y) in pairs {
            match out.last_mut() {
                Some(last) if last.a.0 == x + 1 && last.b.0 == y + 1 => {
                    last.a.0 = x;
                    last.b.0 = y;
                    last.len += 1;
                }
                _ => out.push(m((x, x), (y, y), 1)),
            }
        }
        out
    }

    #[test]
    fn docs_example() {
        let r = lcs(b"ohmytext", b"mynewtext");
        assert_eq!(r.string, b"mytext");
        assert_eq!(r.matches, vec![m((4, 7), (5, 8), 4), m((2, 3), (0, 1), 2)]);
        // LEN.
        assert_eq!(r.string.len(), 6);
        // MINMATCHLEN 4 keeps only the first range.
        let long: Vec<_> = r.matches.iter().filter(|x| x.len >= 4).collect();
        assert_eq!(long, vec![&m((4, 7), (5, 8), 4)]);
        check_consistent(b"ohmytext", b"mynewtext", &r);
    }

    #[test]
    fn empty_inputs() {
        assert_eq!(lcs(b"", b""), Lcs::default());
        assert_eq!(lcs(b"abc", b""), Lcs::default());
        assert_eq!(lcs(b"", b"abc"), Lcs::default());
        assert_eq!(lcs(b"abc", b"xyz"), Lcs::default());
    }

    #[test]
    fn identical_and_single() {
        let r = lcs(b"a", b"a");
        assert_eq!(r.string, b"a");
        assert_eq!(r.matches, vec![m((0, 0), (0, 0), 1)]);
        let r = lcs(b"hello", b"hello");
        assert_eq!(r.string, b"hello");
        assert_eq!(r.matches, vec![m((0, 4), (0, 4), 5)]);
    }

    #[test]
    fn substring_positions() {
        let r = lcs(b"xxabcxx", b"abc");
        assert_eq!(r.string, b"abc");
        assert_eq!(r.matches, vec![m((2, 4), (0, 2), 3)]);
        let r = lcs(b"abc", b"zzabczz");
        assert_eq!(r.matches, vec![m((0, 2), (2, 4), 3)]);
    }

    #[test]
    fn tie_breaking_moves_along_second_string() {
        // With "ab" vs "ba" both "a" and "b" are valid; the walk prefers
        // stepping back in the second string, which yields "b".
        let r = lcs(b"ab", b"ba");
        assert_eq!(r.string, b"b");
        assert_eq!(r.matches, vec![m((1, 1), (0, 0), 1)]);
        let r = lcs(b"ba", b"ab");
        assert_eq!(r.string, b"a");
        assert_eq!(r.matches, vec![m((1, 1), (0, 0), 1)]);
    }

    #[test]
    fn split_ranges() {
        let r = lcs(b"abXcd", b"abYcd");
        assert_eq!(r.string, b"abcd");
        assert_eq!(r.matches, vec![m((3, 4), (3, 4), 2), m((0, 1), (0, 1), 2)]);
        let r = lcs(b"a1b2c", b"abc");
        assert_eq!(r.string, b"abc");
        assert_eq!(
            r.matches,
            vec![
                m((4, 4), (2, 2), 1),
                m((2, 2), (1, 1), 1),
                m((0, 0), (0, 0), 1)
            ]
        );
    }

    #[test]
    fn binary_bytes() {
        let a = b"\x00\xff\x00\x01";
        let b = b"\xff\x00\x01\x00";
        let r = lcs(a, b);
        assert_eq!(r.string, b"\xff\x00\x01");
        assert_eq!(r.matches, vec![m((1, 3), (0, 2), 3)]);
    }

    #[test]
    fn exhaustive_small_cross_check() {
        // All strings over {a, b} up to length 5, against each other.
        let mut words: Vec<Vec<u8>> = vec![Vec::new()];
        let mut frontier: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..5 {
            let mut next = Vec::new();
            for w in &frontier {
                for c in [b'a', b'b'] {
                    let mut x = w.clone();
                    x.push(c);
                    next.push(x);
                }
            }
            words.extend(next.iter().cloned());
            frontier = next;
        }
        for a in &words {
            for b in &words {
                let r = lcs(a, b);
                check_consistent(a, b, &r);
                assert_eq!(r.matches, grouped_walk(a, b));
            }
        }
    }

    #[test]
    fn pseudo_random_cross_check() {
        let mut seed: u32 = 12345;
        let mut next = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            seed >> 16
        };
        for _ in 0..200 {
            let la = (next() % 40) as usize;
            let lb = (next() % 40) as usize;
            let a: Vec<u8> = (0..la).map(|_| b"ACGT"[(next() % 4) as usize]).collect();
            let b: Vec<u8> = (0..lb).map(|_| b"ACGT"[(next() % 4) as usize]).collect();
            let r = lcs(&a, &b);
            check_consistent(&a, &b, &r);
            assert_eq!(r.matches, grouped_walk(&a, &b));
        }
    }

    #[test]
    fn table_size_limit() {
        assert!(!lcs_table_too_big(0, 0));
        assert!(!lcs_table_too_big(65535, 65535));
        assert!(lcs_table_too_big(65536, 65536));
        assert!(!lcs_table_too_big((1 << 32) - 1, 0));
        assert!(lcs_table_too_big(1 << 32, 0));
        assert!(lcs_table_too_big(usize::MAX, usize::MAX));
        assert!(lcs_table_too_big(usize::MAX, 0));
        assert!(lcs_table_too_big(0, usize::MAX));
        // Too big inputs are refused without allocating.
        let big = vec![b'x'; 70_000];
        assert_eq!(try_lcs(&big, &big), None);
        assert_eq!(lcs(&big, &big), Lcs::default());
        assert!(try_lcs(b"ab", b"b").is_some());
    }

    #[test]
    fn moderately_long_inputs() {
        let a: Vec<u8> = (0..600u32).map(|i| (i * 7 % 13) as u8).collect();
        let b: Vec<u8> = (0..500u32).map(|i| (i * 5 % 11) as u8).collect();
        let r = lcs(&a, &b);
        check_consistent(&a, &b, &r);
    }
}

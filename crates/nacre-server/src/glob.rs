//! Glob-style pattern matching as used by KEYS, SCAN MATCH and CONFIG GET.
//!
//! Supported syntax, following Redis 7.0:
//!
//! * `*` matches any sequence of bytes (including none);
//! * `?` matches exactly one byte;
//! * `[abc]` matches one byte from the set, `[^abc]` one byte not in it;
//! * `[a-z]` matches a byte range; reversed ranges such as `[z-a]` are
//!   treated as `[a-z]`;
//! * `\x` matches `x` literally, both outside and inside brackets;
//! * a `[` with no closing `]` takes every remaining pattern byte as part
//!   of the set.
//!
//! The pattern is first split into single-byte tokens and stars, then matched
//! with a backtracking scheme that only ever remembers the most recent star,
//! so matching takes at most `O(pattern.len() * s.len())` steps for any
//! input.

/// One item of a bracket expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClassItem {
    /// A single byte (plain or escaped).
    Byte(u8),
    /// An inclusive byte range, stored as written (possibly reversed).
    Range(u8, u8),
}

/// One element of a parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// `*`: any run of bytes.
    Star,
    /// `?`: any single byte.
    Any,
    /// A literal byte (plain or escaped).
    Byte(u8),
    /// A bracket expression.
    Class {
        negated: bool,
        items: Vec<ClassItem>,
    },
}

/// Lower-cases ASCII letters only, like the C locale does.
fn fold(b: u8, nocase: bool) -> u8 {
    if nocase {
        b.to_ascii_lowercase()
    } else {
        b
    }
}

impl Token {
    /// Whether this single-byte token accepts `c`. Never called for `Star`.
    fn matches(&self, c: u8, nocase: bool) -> bool {
        match self {
            Token::Star | Token::Any => true,
            Token::Byte(b) => fold(*b, nocase) == fold(c, nocase),
            Token::Class { negated, items } => {
                let hit = items.iter().any(|item| match *item {
                    ClassItem::Byte(b) => fold(b, nocase) == fold(c, nocase),
                    ClassItem::Range(lo, hi) => {
                        // Order the bounds first, then fold case, as Redis
                        // 7.0 does (so folding can make a range empty).
                        let (lo, hi) = if lo > hi { (hi, lo) } else { (lo, hi) };
                        let (lo, hi, c) = (fold(lo, nocase), fold(hi, nocase), fold(c, nocase));
                        lo <= c && c <= hi
                    }
                });
                hit != *negated
            }
        }
    }
}

/// Parses a bracket expression whose opening `[` has already been consumed;
/// `rest` is the pattern after it. Returns the token and how many bytes of
/// `rest` were used (including the closing `]` when present).
fn parse_class(rest: &[u8]) -> (Token, usize) {
    let mut i = 0;
    let negated = rest.first() == Some(&b'^');
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    while i < rest.len() {
        let left = rest.len() - i;
        match rest[i] {
            b'\\' if left >= 2 => {
                items.push(ClassItem::Byte(rest[i + 1]));
                i += 2;
            }
            b']' => {
                i += 1;
                return (Token::Class { negated, items }, i);
            }
            lo if left >= 3 && rest[i + 1] == b'-' => {
                items.push(ClassItem::Range(lo, rest[i + 2]));
                i += 3;
            }
            b => {
                items.push(ClassItem::Byte(b));
                i += 1;
            }
        }
    }
    // Unterminated: everything up to the end of the pattern is in the set.
    (Token::Class { negated, items }, i)
}

/// Splits a pattern into tokens, collapsing runs of `*`.
fn tokenize(pattern: &[u8]) -> Vec<Token> {
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'*' => {
                if tokens.last() != Some(&Token::Star) {
                    tokens.push(Token::Star);
                }
                i += 1;
            }
            b'?' => {
                tokens.push(Token::Any);
                i += 1;
            }
            b'[' => {
                let (tok, used) = parse_class(&pattern[i + 1..]);
                tokens.push(tok);
                i += 1 + used;
            }
            b'\\' if i + 1 < pattern.len() => {
                tokens.push(Token::Byte(pattern[i + 1]));
                i += 2;
            }
            b => {
                tokens.push(Token::Byte(b));
                i += 1;
            }
        }
    }
    tokens
}

/// Returns whether `s` matches the glob-style `pattern`.
///
/// With `nocase`, ASCII letters compare case-insensitively (CONFIG GET uses
/// this). Byte ranges compare bytes as unsigned values. A pattern made only
/// of `*` (or the empty pattern) matches the empty string.
pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let tokens = tokenize(pattern);
    let (mut p, mut i) = (0usize, 0usize);
    // Position just after the last star seen, and the string index that
    // star is currently assumed to stop at.
    let mut backtrack: Option<(usize, usize)> = None;
    while i < s.len() {
        match tokens.get(p) {
            Some(Token::Star) => {
                p += 1;
                backtrack = Some((p, i));
            }
            Some(tok) if tok.matches(s[i], nocase) => {
                p += 1;
                i += 1;
            }
            _ => match backtrack {
                Some((star_p, star_i)) => {
                    // Let the last star swallow one more byte and retry.
                    p = star_p;
                    i = star_i + 1;
                    backtrack = Some((star_p, star_i + 1));
                }
                None => return false,
            },
        }
    }
    tokens[p..].iter().all(|t| *t == Token::Star)
}

#[cfg(test)]
mod tests {
    use super::glob_match;
    use std::time::Instant;

    fn m(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), false)
    }

    fn mi(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), true)
    }

    #[test]
    fn literals() {
        assert!(m("", ""));
        assert!(!m("", "a"));
        assert!(!m("a", ""));
        assert!(m("hello", "hello"));
        assert!(!m("hello", "hellO"));
        assert!(!m("hello", "hell"));
        assert!(!m("hell", "hello"));
    }

    #[test]
    fn star() {
        assert!(m("*", ""));
        assert!(m("**", ""));
        assert!(m("*", "anything"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h*", "h"));
        assert!(m("*o", "hello"));
        assert!(!m("*x", "hello"));
        assert!(m("a*b*c", "abc"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("a***b", "ab"));
        assert!(m("*a*", "banana"));
        assert!(m("*ana", "banana"));
        assert!(!m("*anab", "banana"));
        assert!(m("user:*:name", "user:1000:name"));
        assert!(!m("user:*:name", "user:1000:names"));
    }

    #[test]
    fn question_mark() {
        assert!(m("h?llo", "hello"));
        assert!(m("h?llo", "hallo"));
        assert!(!m("h?llo", "hllo"));
        assert!(!m("?", ""));
        assert!(m("??", "ab"));
        assert!(!m("??", "abc"));
        assert!(m("?*", "a"));
        assert!(!m("?*", ""));
        assert!(m("*?", "abc"));
    }

    #[test]
    fn brackets() {
        assert!(m("h[ae]llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(m("h[^e]llo", "hbllo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hallo"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("[0-9][0-9]", "42"));
        assert!(!m("[0-9][0-9]", "4x"));
        assert!(m("[a-cx-z]", "y"));
        assert!(!m("[a-cx-z]", "m"));
        assert!(m("[^a-c]", "d"));
        assert!(!m("[^a-c]", "b"));
        // Empty set never matches; negated empty set matches anything.
        assert!(!m("[]", "a"));
        assert!(m("[^]", "a"));
        // `]` right after `[` closes the (empty) set.
        assert!(!m("[]a]", "a]"));
        assert!(!m("[]a]", "xa]"));
        // A leading `-` is literal.
        assert!(m("[-a]", "-"));
        assert!(m("[-a]", "a"));
        // `[a-]` is a range from `a` to `]` (unterminated afterwards).
        assert!(m("[a-]", "]"));
        assert!(m("[a-]", "_"));
        assert!(m("[a-]", "a"));
        assert!(!m("[a-]", "-"));
        assert!(!m("[a-]", "b"));
        // Brackets consume exactly one byte.
        assert!(!m("[abc]", "ab"));
        assert!(!m("[abc]", ""));
    }

    #[test]
    fn reversed_range() {
        assert!(m("[z-a]", "m"));
        assert!(m("[z-a]", "a"));
        assert!(m("[z-a]", "z"));
        assert!(!m("[z-a]", "A"));
        assert!(m("[9-0]x", "5x"));
        assert!(!m("[^z-a]", "q"));
    }

    #[test]
    fn escapes() {
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
        assert!(m("a\\?b", "a?b"));
        assert!(!m("a\\?b", "axb"));
        assert!(m("\\[a]", "[a]"));
        assert!(m("\\\\", "\\"));
        assert!(m("\\a", "a"));
        // Trailing lone backslash is literal.
        assert!(m("a\\", "a\\"));
        assert!(!m("a\\", "a"));
        // Escapes inside brackets.
        assert!(m("[\\]]", "]"));
        assert!(m("[\\^a]", "^"));
        assert!(m("[\\-]", "-"));
        assert!(!m("[\\-]", "a"));
        assert!(m("[a\\-z]", "-"));
        assert!(!m("[a\\-z]", "m"));
        assert!(m("[\\\\]", "\\"));
        // Escaped star at end of string is not a wildcard.
        assert!(!m("a\\*", "a"));
        assert!(m("a\\*", "a*"));
    }

    #[test]
    fn unterminated_bracket() {
        assert!(m("[abc", "a"));
        assert!(m("[abc", "c"));
        assert!(!m("[abc", "d"));
        assert!(!m("[abc", "ab"));
        assert!(m("x[ab", "xb"));
        assert!(!m("[", "["));
        assert!(!m("[", ""));
        assert!(m("[^", "q"));
        assert!(!m("[^", ""));
        assert!(m("[^a", "b"));
        assert!(!m("[^a", "a"));
        // Two-byte tail cannot form a range.
        assert!(m("[a-", "-"));
        assert!(m("[a-", "a"));
        assert!(!m("[a-", "b"));
        assert!(m("[a-c", "b"));
        // Trailing backslash in unterminated set is literal.
        assert!(m("[a\\", "\\"));
        // A star inside brackets is literal.
        assert!(m("[*", "*"));
        assert!(!m("[*", "ab"));
    }

    #[test]
    fn nocase() {
        assert!(mi("HELLO", "hello"));
        assert!(mi("hello", "HeLLo"));
        assert!(!m("HELLO", "hello"));
        assert!(mi("h?LLO", "Hello"));
        assert!(mi("[A-C]x", "bX"));
        assert!(mi("[a-c]x", "BX"));
        assert!(!m("[a-c]x", "BX"));
        assert!(mi("[^A]", "b"));
        assert!(!mi("[^A]", "a"));
        assert!(mi("max*", "MAXMEMORY"));
        assert!(mi("\\M*", "maxmemory"));
        assert!(mi("[\\M]", "m"));
        // Non-letters are untouched by case folding.
        assert!(!mi("@", "`"));
        assert!(!mi("[", "{"));
        // Folding happens after ordering: [A-z] becomes [a-z], so `[`
        // no longer matches.
        assert!(m("[A-z]", "["));
        assert!(!mi("[A-z]", "["));
    }

    #[test]
    fn binary_bytes() {
        let p = b"\x00*\xff";
        assert!(glob_match(p, b"\x00\x01\x02\xff", false));
        assert!(glob_match(p, b"\x00\xff", false));
        assert!(!glob_match(p, b"\x00\xfe", false));
        assert!(glob_match(b"[\x80-\xff]", b"\x90", false));
        assert!(!glob_match(b"[\x80-\xff]", b"\x7f", false));
        assert!(glob_match(b"[\xff-\x80]", b"\xc0", true));
        assert!(glob_match(b"?", b"\x00", false));
        assert!(glob_match(b"a\x00b", b"a\x00b", false));
        assert!(!glob_match(b"a\x00b", b"a", false));
        assert!(glob_match(b"[^\x00]", b"\x01", false));
        assert!(!glob_match(b"[^\x00]", b"\x00", false));
        // High bytes are not case folded.
        assert!(!glob_match(b"\xc0", b"\xe0", true));
    }

    #[test]
    fn star_backtracking_correctness() {
        assert!(m("*ab*ab", "abxabab"));
        assert!(m("a*a*a", "aaa"));
        assert!(!m("a*a*a", "aa"));
        assert!(m("*?*?*", "ab"));
        assert!(!m("*?*?*", "a"));
        assert!(m("*[ab]c", "xxbc"));
        assert!(m("**x", "yyx"));
        assert!(m("a*", "a"));
        assert!(!m("a*b", "a"));
        assert!(m("*.txt", "notes.txt"));
        assert!(!m("*.txt", "notes.txt.bak"));
    }

    /// Straightforward exponential reference matcher over tokens, used to
    /// cross-check the fast matcher on small inputs.
    fn reference(p: &[u8], s: &[u8]) -> bool {
        let toks = super::tokenize(p);
        fn go(t: &[super::Token], s: &[u8]) -> bool {
            match t.split_first() {
                None => s.is_empty(),
                Some((super::Token::Star, rest)) => (0..=s.len()).any(|k| go(rest, &s[k..])),
                Some((tok, rest)) => match s.split_first() {
                    Some((c, srest)) => tok.matches(*c, false) && go(rest, srest),
                    None => false,
                },
            }
        }
        go(&toks, s)
    }

    #[test]
    fn cross_check_against_reference() {
        let alphabet: &[u8] = b"ab*?[]^-\\";
        let strs: &[&[u8]] = &[
            b"", b"a", b"b", b"ab", b"ba", b"aab", b"abab", b"-", b"]", b"a]b", b"\\",
        ];
        // Enumerate all patterns up to length 4 over the alphabet.
        let mut patterns: Vec<Vec<u8>> = vec![Vec::new()];
        let mut frontier: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for p in &frontier {
                for &c in alphabet {
                    let mut q = p.clone();
                    q.push(c);
                    next.push(q);
                }
            }
            patterns.extend(next.iter().cloned());
            frontier = next;
        }
        for p in &patterns {
            for s in strs {
                assert_eq!(
                    glob_match(p, s, false),
                    reference(p, s),
                    "pattern {:?} string {:?}",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(s)
                );
            }
        }
    }

    #[test]
    fn pathological_patterns_are_fast() {
        let mut pattern = Vec::new();
        for _ in 0..200 {
            pattern.extend_from_slice(b"*a");
        }
        pattern.extend_from_slice(b"*b");
        let s = vec![b'a'; 20_000];
        let start = Instant::now();
        assert!(!glob_match(&pattern, &s, false));
        let mut s2 = s.clone();
        s2.push(b'b');
        assert!(glob_match(&pattern, &s2, false));
        let qs = "*?".repeat(500);
        assert!(glob_match(qs.as_bytes(), &s, false));
        assert!(!glob_match(format!("{qs}c").as_bytes(), &s, true));
        assert!(start.elapsed().as_secs() < 10);
    }
}

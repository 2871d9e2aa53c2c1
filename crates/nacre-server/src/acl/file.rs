//! ACL files (`aclfile`, `ACL LOAD`, `ACL SAVE`) and `user` lines of the configuration file:
//! Redis 7.0's format, one `user <name> <rules...>` line per user, read as Redis reads it
//! (blank lines skipped, every error of the file reported, nothing applied if one is
//! found) and written as `ACL LIST` shows users.
//!
//! Invariant F1: a file is written whole or not at all (a temporary file, synced, renamed over
//! the old one), so a crash during `ACL SAVE` leaves the old file or the new one.

use std::io::Write;
use std::path::Path;

use super::User;

/// Joins selector rules split on spaces (`(+get`, `~x)`) into one each, as Redis merges the
/// arguments of `ACL SETUSER` and of ACL file lines. `Err` holds the argument that opens a
/// selector that is never closed.
pub fn merge_selectors(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::new();
    let mut open: Option<(Vec<u8>, &[u8])> = None;
    for a in args {
        match open.as_mut() {
            Some((buf, _)) => {
                buf.push(b' ');
                buf.extend_from_slice(a);
                if a.last() == Some(&b')') {
                    out.extend(open.take().map(|(b, _)| b));
                }
            }
            None if a.first() == Some(&b'(') && a.last() != Some(&b')') => {
                open = Some((a.clone(), a));
            }
            None => out.push(a.clone()),
        }
    }
    match open {
        Some((_, start)) => Err(start.to_vec()),
        None => Ok(out),
    }
}

/// A user of a `user <name> <rules...>` line (its words after `user`), checked as Redis
/// checks users it loads: `Err` with Redis's reason.
pub fn user_of_words(words: &[Vec<u8>]) -> Result<User, String> {
    let Some((name, rules)) = words.split_first() else {
        return Err("should start with user keyword followed by the username".into());
    };
    if name.iter().any(|&b| b == b' ' || b == 0) {
        return Err(format!(
            "username '{}' contains invalid characters",
            String::from_utf8_lossy(name)
        ));
    }
    let rules = merge_selectors(rules)
        .map_err(|_| "Unmatched parenthesis in selector definition.".to_string())?;
    let mut u = User::new(name);
    for r in &rules {
        u.apply(r).map_err(|why| {
            format!(
                "Error in applying operation '{}': {why}",
                String::from_utf8_lossy(r)
            )
        })?;
    }
    Ok(u)
}

/// The users of an ACL file's text, as Redis's `ACLLoadFromFile` reads them: `Err` with every
/// problem found, each prefixed with the file name and line, as Redis words them.
pub fn parse(text: &str, filename: &str) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    let mut errors = String::new();
    for (i, line) in text.split('\n').enumerate() {
        let line_no = i + 1;
        let line = line.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
        if line.is_empty() {
            continue;
        }
        let words: Vec<Vec<u8>> = line
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| w.as_bytes().to_vec())
            .collect();
        if words.first().map(Vec::as_slice) != Some(b"user".as_slice()) || words.len() < 2 {
            errors.push_str(&format!(
                "{filename}:{line_no} should start with user keyword followed by the username. "
            ));
            continue;
        }
        if users.iter().any(|u| u.name == words[1]) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {line_no}. ",
                String::from_utf8_lossy(&words[1])
            ));
            continue;
        }
        match user_of_words(&words[1..]) {
            Ok(u) => users.push(u),
            Err(why) => errors.push_str(&format!("{filename}:{line_no}: {why}. ")),
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

/// The text `ACL SAVE` writes: a line per user, as `ACL LIST` shows it.
pub fn render(users: &[std::sync::Arc<User>]) -> Vec<u8> {
    let mut out = Vec::new();
    for u in users {
        out.extend_from_slice(b"user ");
        out.extend_from_slice(&u.name);
        out.push(b' ');
        out.extend_from_slice(u.describe().as_bytes());
        out.push(b'\n');
    }
    out
}

/// An I/O error as C's `strerror` words it (without Rust's ` (os error N)`).
pub fn os_error_text(e: &std::io::Error) -> String {
    let t = e.to_string();
    match t.rfind(" (os error ") {
        Some(i) if t.ends_with(')') => t[..i].to_string(),
        _ => t,
    }
}

/// Writes `bytes` to `path` whole or not at all (F1).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "acl".into());
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_parse_as_redis_reads_them() {
        let users = parse(
            "user alice on >pw ~k* +get\n\n  user bob off (+set ~w*) (+get ~r*)\r\n",
            "f.acl",
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users[1].selectors.len(), 3);
        let e = parse(
            "user a on\nfoo bar\nuser a off\nuser b +nosuch\nuser c (+get\n",
            "f.acl",
        )
        .unwrap_err();
        assert!(e.contains("f.acl:2 should start with user keyword"), "{e}");
        assert!(e.contains("Duplicate user 'a' found on line 3"), "{e}");
        assert!(
            e.contains("f.acl:4: Error in applying operation '+nosuch'"),
            "{e}"
        );
        assert!(e.contains("f.acl:5: Unmatched parenthesis"), "{e}");
    }

    #[test]
    fn rendered_users_parse_back_the_same() {
        let users = parse(
            "user alice on #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 ~k* %R~r* &ch +@read -keys (+set ~w*)\nuser default on nopass ~* &* +@all\n",
            "f.acl",
        )
        .unwrap();
        let arcs: Vec<_> = users.into_iter().map(std::sync::Arc::new).collect();
        let text = render(&arcs);
        let again = parse(std::str::from_utf8(&text).unwrap(), "f.acl").unwrap();
        assert_eq!(again.len(), 2);
        for (a, b) in arcs.iter().zip(&again) {
            assert_eq!(**a, *b);
        }
    }

    #[test]
    fn a_file_is_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("nacre-aclfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("users.acl");
        write_atomically(&p, b"user a on\n").unwrap();
        write_atomically(&p, b"user b on\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"user b on\n");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

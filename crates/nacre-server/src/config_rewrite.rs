//! `CONFIG REWRITE`: the config file rewritten with the running values. Lines of directives
//! the server knows are replaced in place (the first occurrence; later ones dropped),
//! comments and unknown lines are kept, and directives not in the file are appended.

use crate::config::{Config, DIRECTIVES};

fn quote(v: &str) -> String {
    if !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\')
    {
        return v.to_string();
    }
    let mut s = String::from("\"");
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// The directive line for `name` with `cfg`'s value.
fn line(cfg: &Config, name: &str) -> String {
    let v = cfg.get(name).unwrap_or_default();
    if name == "bind" {
        return format!("bind {}", v);
    }
    format!("{name} {}", quote(&v))
}

/// Rewrites `cfg.file` with `cfg`'s values and `users`' lines (`user <name> <rules>`, in
/// place of the file's first `user` line, the others dropped; appended when it has none).
/// With an `aclfile` the users live there: pass none, and the file's `user` lines go.
pub fn rewrite(cfg: &Config, users: &[String]) -> Result<(), String> {
    let Some(path) = &cfg.file else {
        return Err("The server is running without a config file".into());
    };
    let old = std::fs::read_to_string(path).map_err(|e| format!("Rewriting config file: {e}"))?;
    let mut done: Vec<&str> = Vec::new();
    let mut out = String::new();
    for l in old.lines() {
        let first = l
            .split_whitespace()
            .next()
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        let known = DIRECTIVES
            .iter()
            .copied()
            .chain(crate::params::names())
            .find(|d| *d == first);
        if first == "user" {
            if !done.contains(&"user") {
                for u in users {
                    out.push_str(u);
                    out.push('\n');
                }
                done.push("user");
            }
            continue;
        }
        match known {
            Some(d) if !l.trim_start().starts_with('#') => {
                if !done.contains(&d) {
                    out.push_str(&line(cfg, d));
                    out.push('\n');
                    done.push(d);
                }
            }
            _ => {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    let defaults = Config::default();
    let canonical = DIRECTIVES
        .iter()
        .copied()
        .chain(crate::params::PARAMS.iter().map(|p| p.name));
    for d in canonical {
        let alias = crate::params::find(d).and_then(|p| p.alias);
        let written = done.contains(&d) || alias.is_some_and(|a| done.contains(&a));
        if !written && cfg.get(d) != defaults.get(d) {
            out.push_str(&line(cfg, d));
            out.push('\n');
        }
    }
    if !done.contains(&"user") {
        for u in users {
            out.push_str(u);
            out.push('\n');
        }
    }
    let tmp = path.with_extension("rewrite.tmp");
    std::fs::write(&tmp, out).map_err(|e| format!("Rewriting config file: {e}"))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("Rewriting config file: {e}"))?;
    Ok(())
}

//! An ACL selector: the commands, keys and channels a set of rules allows (Redis 7.0's
//! `aclSelector`). A user has a root selector and any number of extra ones; a command runs
//! when one of them allows all of it.

use crate::cmd::flags::ACL_NAMES;
use crate::cmd::registry::{self, Acl, Command, Sub};

/// One command or subcommand that permissions name.
pub struct Entry {
    /// `get`, or `config|get`.
    pub name: String,
    /// Its categories.
    pub acl: Acl,
    /// For a container, the ids of its subcommands.
    pub subs: Vec<usize>,
    /// Whether any user may run it (AUTH, HELLO: Redis's `no-auth` commands).
    pub no_auth: bool,
}

/// Every command and subcommand, numbered: a selector's permissions are a bit per number.
pub fn table() -> &'static Vec<Entry> {
    static T: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = Vec::new();
        for c in registry::all() {
            let id = t.len();
            t.push(Entry {
                name: c.name.to_string(),
                acl: c.acl,
                subs: Vec::new(),
                no_auth: c.flags.contains(registry::Flags::NO_AUTH),
            });
            for s in c.subs {
                let sid = t.len();
                t.push(Entry {
                    name: format!("{}|{}", c.name, s.name),
                    acl: s.acl,
                    subs: Vec::new(),
                    no_auth: s.flags.contains(registry::Flags::NO_AUTH),
                });
                t[id].subs.push(sid);
            }
        }
        t
    })
}

/// The number of `name` (`get`, `config|get`, any case).
pub fn id_of(name: &str) -> Option<usize> {
    static M: std::sync::OnceLock<std::collections::HashMap<String, usize>> =
        std::sync::OnceLock::new();
    M.get_or_init(|| {
        table()
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect()
    })
    .get(&name.to_ascii_lowercase())
    .copied()
}

/// The number of a command as it runs.
pub fn id_running(cmd: &Command, sub: Option<&Sub>) -> Option<usize> {
    match sub {
        Some(s) => id_of(&format!("{}|{}", cmd.name, s.name)),
        None => id_of(cmd.name),
    }
}

/// The category named `name` (without `@`).
pub fn category(name: &str) -> Option<Acl> {
    ACL_NAMES
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(name))
        .map(|(a, _)| *a)
}

/// Key permission: read.
pub const READ: u8 = 1;
/// Key permission: write.
pub const WRITE: u8 = 2;

/// Why a rule was refused (Redis's texts, after "Error in ACL SETUSER modifier '...': ").
#[derive(Debug, PartialEq, Eq)]
pub enum RuleError {
    /// An unknown command or category.
    Unknown,
    /// Not a rule.
    Syntax,
    /// A key pattern after `allkeys`.
    AfterAllKeys,
    /// A channel pattern after `allchannels`.
    AfterAllChannels,
    /// `+cmd|arg` of a command without subcommands.
    FirstArg,
}

impl RuleError {
    /// Redis's message.
    pub fn text(&self) -> &'static str {
        match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::AfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::AfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::FirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// A selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// A bit per command number.
    pub allowed: Vec<bool>,
    /// Every command is allowed (`+@all` and nothing removed since): no bit is checked.
    pub all_commands: bool,
    /// `+@all` (not `-@all`) was the last word on all commands: commands Nacre adds later
    /// would be allowed too, and descriptions start from `+@all`.
    pub future: bool,
    /// Every key, for reading and writing.
    pub all_keys: bool,
    /// Key patterns with their permissions.
    pub keys: Vec<(u8, Vec<u8>)>,
    /// Every channel.
    pub all_channels: bool,
    /// Channel patterns.
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// A selector allowing nothing.
    pub fn empty() -> Selector {
        Selector {
            allowed: vec![false; table().len()],
            ..Selector::default()
        }
    }

    fn set(&mut self, id: usize, on: bool) {
        if let Some(b) = self.allowed.get_mut(id) {
            *b = on;
        }
        if !on {
            self.all_commands = false;
        }
    }

    /// Allows or denies a command and its subcommands.
    fn change(&mut self, id: usize, on: bool) {
        self.set(id, on);
        for s in table()[id].subs.clone() {
            self.set(s, on);
        }
    }

    fn change_category(&mut self, cat: Acl, on: bool) {
        for (id, e) in table().iter().enumerate() {
            if e.acl.contains(cat) {
                self.change(id, on);
            }
        }
    }

    /// Applies one rule (`~pattern`, `+@read`, `allkeys`...).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let text = String::from_utf8_lossy(op);
        let lower = text.to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            "allcommands" | "+@all" => {
                self.allowed.iter_mut().for_each(|b| *b = true);
                self.all_commands = true;
                self.future = true;
                return Ok(());
            }
            "nocommands" | "-@all" => {
                self.allowed.iter_mut().for_each(|b| *b = false);
                self.all_commands = false;
                self.future = false;
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~') | Some(b'%') => self.key_rule(op),
            Some(b'&') => {
                if self.all_channels {
                    return Err(RuleError::AfterAllChannels);
                }
                let p = op[1..].to_vec();
                if !self.channels.contains(&p) {
                    self.channels.push(p);
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) => {
                let on = sign == b'+';
                let rest = &text[1..];
                if let Some(cat) = rest.strip_prefix('@') {
                    let c = category(cat).ok_or(RuleError::Unknown)?;
                    self.change_category(c, on);
                    return Ok(());
                }
                match rest.split_once('|') {
                    Some((c, sub)) => {
                        let cid = id_of(c).ok_or(RuleError::Unknown)?;
                        if table()[cid].subs.is_empty() {
                            // Redis 7.0 allowed first arguments here; Nacre refuses them.
                            return Err(if on {
                                RuleError::FirstArg
                            } else {
                                RuleError::Unknown
                            });
                        }
                        if sub.contains('|') {
                            return Err(RuleError::Unknown);
                        }
                        let id = id_of(rest).ok_or(RuleError::Unknown)?;
                        self.change(id, on);
                        Ok(())
                    }
                    None => {
                        let id = id_of(rest).ok_or(RuleError::Unknown)?;
                        self.change(id, on);
                        Ok(())
                    }
                }
            }
            _ => Err(RuleError::Syntax),
        }
    }

    fn key_rule(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::AfterAllKeys);
        }
        let (flags, pattern) = if op[0] == b'%' {
            let tilde = op
                .iter()
                .position(|&b| b == b'~')
                .ok_or(RuleError::Syntax)?;
            let mut f = 0;
            for &c in &op[1..tilde] {
                f |= match c.to_ascii_uppercase() {
                    b'R' => READ,
                    b'W' => WRITE,
                    _ => return Err(RuleError::Syntax),
                };
            }
            if f == 0 {
                return Err(RuleError::Syntax);
            }
            (f, op[tilde + 1..].to_vec())
        } else {
            (READ | WRITE, op[1..].to_vec())
        };
        if flags == READ | WRITE && pattern == b"*" {
            self.all_keys = true;
            self.keys.clear();
            return Ok(());
        }
        match self.keys.iter_mut().find(|(_, p)| *p == pattern) {
            Some((f, _)) => *f |= flags,
            None => self.keys.push((flags, pattern)),
        }
        Ok(())
    }

    /// Whether command number `id` is allowed.
    pub fn allows_command(&self, id: usize) -> bool {
        self.all_commands || self.allowed.get(id).copied().unwrap_or(false)
    }

    /// Whether `key` may be used with `need` (read and/or write) permissions.
    pub fn allows_key(&self, key: &[u8], need: u8) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|(f, p)| f & need == need && crate::glob::glob_match(p, key, false))
    }

    /// Whether `channel` may be used; a pattern (PSUBSCRIBE's) must be allowed as written.
    pub fn allows_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p == channel
                } else {
                    crate::glob::glob_match(p, channel, false)
                }
            })
    }

    /// Rules that rebuild this selector from an empty one exactly (bytes kept as given).
    pub fn rules(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if self.all_keys {
            out.push(b"~*".to_vec());
        }
        for (f, p) in &self.keys {
            let mut w = match *f {
                x if x == READ | WRITE => b"~".to_vec(),
                READ => b"%R~".to_vec(),
                _ => b"%W~".to_vec(),
            };
            w.extend_from_slice(p);
            out.push(w);
        }
        if self.all_channels {
            out.push(b"&*".to_vec());
        }
        for c in &self.channels {
            let mut w = b"&".to_vec();
            w.extend_from_slice(c);
            out.push(w);
        }
        out.extend(
            self.describe_commands()
                .split(' ')
                .map(|w| w.as_bytes().to_vec()),
        );
        out
    }

    /// The rules as Redis describes them: keys, channels, commands.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        out.push_str(&self.describe_keys());
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&self.describe_channels());
        out.push(' ');
        out.push_str(&self.describe_commands());
        out
    }

    /// Key patterns (`~*`, `%R~x`), space separated; empty when none.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let words: Vec<String> = self
            .keys
            .iter()
            .map(|(f, p)| {
                let p = String::from_utf8_lossy(p);
                match *f {
                    x if x == READ | WRITE => format!("~{p}"),
                    READ => format!("%R~{p}"),
                    _ => format!("%W~{p}"),
                }
            })
            .collect();
        words.join(" ")
    }

    /// Channel patterns (`&*`, or `resetchannels` and the patterns).
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let mut s = String::from("resetchannels");
        for c in &self.channels {
            s.push_str(" &");
            s.push_str(&String::from_utf8_lossy(c));
        }
        s
    }

    /// Command rules as Redis derives them: `+@all` or `-@all`, then the categories that
    /// fit best, then single commands.
    pub fn describe_commands(&self) -> String {
        let additive = !self.future;
        let mut fake = Selector::empty();
        let mut rules = Vec::new();
        if additive {
            rules.push("-@all".to_string());
        } else {
            rules.push("+@all".to_string());
            fake.apply(b"+@all").ok();
        }
        let mut temp = self.clone();
        let mut applied = vec![false; ACL_NAMES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0usize);
            for (j, (cat, _)) in ACL_NAMES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0usize, 0usize);
                for (id, e) in table().iter().enumerate() {
                    if e.acl.contains(*cat) {
                        if temp.allowed[id] {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let (cat, name) = ACL_NAMES[j];
            fake.change_category(cat, additive);
            temp.change_category(cat, !additive);
            rules.push(format!("{}@{name}", if additive { '+' } else { '-' }));
            applied[j] = true;
        }
        for (id, e) in table().iter().enumerate() {
            let want = self.allowed[id];
            if fake.allowed[id] != want {
                rules.push(format!("{}{}", if want { '+' } else { '-' }, e.name));
                fake.change(id, want);
            }
        }
        rules.join(" ")
    }
}

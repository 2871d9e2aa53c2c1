//! Access control lists (Redis 7.0's ACL): users with passwords and selectors, the check every
//! command passes before it runs (from a connection, in MULTI, from a script), and the log
//! of what was refused.
//!
//! Invariants:
//! - A1: the `default` user always exists; every other user exists until `ACL DELUSER`,
//!   which also disconnects its clients.
//! - A2: a change to a user applies to the next command of every client authenticated as it
//!   (clients hold a user's name, and the registry's generation tells them to look again).

pub mod file;
pub mod selector;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sha2::Digest;

pub use selector::{RuleError, Selector};

/// A user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: Vec<u8>,
    /// May authenticate.
    pub enabled: bool,
    /// Any password authenticates it.
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)), `skip-sanitize-payload` (Some(false)), or neither.
    pub sanitize: Option<bool>,
    /// SHA-256 digests of its passwords, lowercase hex, in the order added.
    pub passwords: Vec<String>,
    /// The root selector, then the others.
    pub selectors: Vec<Selector>,
}

/// The hex SHA-256 of a password, as ACL rules write it.
pub fn hash_password(p: &[u8]) -> String {
    sha2::Sha256::digest(p)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Why a user's rules were refused: the rule and why.
#[derive(Debug)]
pub struct SetUserError {
    /// The rule as given.
    pub rule: Vec<u8>,
    /// Redis's reason.
    pub why: &'static str,
}

impl User {
    /// A new user: off, no password, no permissions.
    pub fn new(name: &[u8]) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::empty()],
        }
    }

    /// The default user: on, no password, everything.
    pub fn default_user() -> User {
        let mut u = User::new(b"default");
        for r in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(r.as_bytes());
        }
        u
    }

    /// Applies one rule (Redis's `ACLSetUser`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), &'static str> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "sanitize-payload" => self.sanitize = Some(true),
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.truncate(1),
            "reset" => {
                for r in [
                    "resetpass",
                    "resetkeys",
                    "resetchannels",
                    "off",
                    "sanitize-payload",
                    "clearselectors",
                    "-@all",
                ] {
                    self.apply(r.as_bytes())?;
                }
            }
            _ => match op[0] {
                b'>' | b'#' => {
                    let h = if op[0] == b'>' {
                        hash_password(&op[1..])
                    } else {
                        valid_hash(&op[1..])?
                    };
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let h = if op[0] == b'<' {
                        hash_password(&op[1..])
                    } else {
                        valid_hash(&op[1..])?
                    };
                    let Some(at) = self.passwords.iter().position(|p| *p == h) else {
                        return Err(
                            "The password you are trying to remove from the user does not exist",
                        );
                    };
                    self.passwords.remove(at);
                }
                b'(' if op.last() == Some(&b')') => {
                    let mut s = Selector::empty();
                    for w in op[1..op.len() - 1].split(|&b| b == b' ') {
                        if !w.is_empty() {
                            s.apply(w).map_err(|e| e.text())?;
                        }
                    }
                    self.selectors.push(s);
                }
                _ => self.selectors[0].apply(op).map_err(|e| e.text())?,
            },
        }
        Ok(())
    }

    /// Whether `pass` authenticates this user (enabled, and nopass or a matching password).
    pub fn accepts(&self, pass: &[u8]) -> bool {
        self.enabled && (self.nopass || self.passwords.contains(&hash_password(pass)))
    }

    /// The flags `ACL GETUSER` lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(true) => f.push("sanitize-payload"),
            Some(false) => f.push("skip-sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user as `ACL LIST` writes it, without the leading `user name`.
    pub fn describe(&self) -> String {
        let mut words: Vec<String> = self.flags().iter().map(|s| s.to_string()).collect();
        words.extend(self.passwords.iter().map(|p| format!("#{p}")));
        let mut out = words.join(" ");
        out.push(' ');
        out.push_str(&self.selectors[0].describe());
        for s in &self.selectors[1..] {
            out.push_str(&format!(" ({})", s.describe()));
        }
        out
    }

    /// Rules that rebuild this user from a new one ([`User::new`]) exactly (what the pool
    /// keeps).
    pub fn rules(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for f in self.flags() {
            out.push(f.as_bytes().to_vec());
        }
        for p in &self.passwords {
            out.push(format!("#{p}").into_bytes());
        }
        out.extend(self.selectors[0].rules());
        for s in &self.selectors[1..] {
            let mut w = b"(".to_vec();
            w.extend(s.rules().join(&b' '));
            w.push(b')');
            out.push(w);
        }
        out
    }

    /// Whether its root selector allows everything (no check is needed).
    pub fn unrestricted(&self) -> bool {
        let r = &self.selectors[0];
        r.all_commands && r.all_keys && r.all_channels
    }
}

fn valid_hash(h: &[u8]) -> Result<String, &'static str> {
    if h.len() != 64
        || !h
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
    {
        return Err(
            "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
        );
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// What a refused command was refused for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The command.
    Command,
    /// A key (the argument's index).
    Key(usize),
    /// A channel (the argument's index).
    Channel(usize),
}

/// What a command needs: its number, and its keys and channels with positions.
pub struct Request<'a> {
    /// The command's number.
    pub id: usize,
    /// Keys: argument index and the read/write permission it needs.
    pub keys: Vec<(usize, u8)>,
    /// Channels: argument index and whether it is a pattern.
    pub channels: Vec<(usize, bool)>,
    /// The arguments.
    pub args: &'a [Vec<u8>],
}

impl User {
    /// Checks a command against each selector: allowed when one allows all of it; else what
    /// the root selector refuses.
    pub fn check(&self, req: &Request<'_>) -> Result<(), Denied> {
        if self.unrestricted() || selector::table()[req.id].no_auth {
            return Ok(());
        }
        let mut first = None;
        for s in &self.selectors {
            let r = check_selector(s, req);
            if r.is_ok() {
                return Ok(());
            }
            first.get_or_insert(r);
        }
        first.unwrap_or(Err(Denied::Command))
    }
}

impl User {
    /// Whether a selector that allows the command `req` also allows every key with `need`
    /// (`allkeys`, or a `*` pattern with those permissions): what Redis asks of SORT's `BY`
    /// and `GET` patterns, which name keys nobody can check in advance.
    pub fn every_key(&self, req: &Request<'_>, need: u8) -> bool {
        self.unrestricted()
            || self.selectors.iter().any(|s| {
                check_selector(s, req).is_ok()
                    && (s.all_keys || s.keys.iter().any(|(f, p)| f & need == need && p == b"*"))
            })
    }
}

fn check_selector(s: &Selector, req: &Request<'_>) -> Result<(), Denied> {
    if !s.allows_command(req.id) {
        return Err(Denied::Command);
    }
    for &(i, need) in &req.keys {
        if !s.allows_key(&req.args[i], need) {
            return Err(Denied::Key(i));
        }
    }
    for &(i, pat) in &req.channels {
        if !s.allows_channel(&req.args[i], pat) {
            return Err(Denied::Channel(i));
        }
    }
    Ok(())
}

/// One `ACL LOG` entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    /// Times it happened (within a minute of the last).
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi`, `lua`.
    pub context: &'static str,
    /// The command, key or channel (the user name for `auth`).
    pub object: Vec<u8>,
    /// The user.
    pub username: Vec<u8>,
    /// When it last happened (ms).
    pub at_ms: u64,
    /// The client's `CLIENT LIST` line.
    pub client: String,
}

/// The users and the log.
pub struct Users {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    /// Bumped at every change (A2).
    generation: AtomicU64,
    log: Mutex<VecDeque<LogEntry>>,
}

impl Default for Users {
    fn default() -> Users {
        let mut m = BTreeMap::new();
        m.insert(b"default".to_vec(), Arc::new(User::default_user()));
        Users {
            users: RwLock::new(m),
            generation: AtomicU64::new(1),
            log: Mutex::new(VecDeque::new()),
        }
    }
}

impl Users {
    /// The generation now (A2).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// User `name`.
    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    /// Every user, by name.
    pub fn all(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Replaces (or adds) a user.
    pub fn put(&self, u: User) {
        self.users.write().insert(u.name.clone(), Arc::new(u));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Every user as the pool keeps them: per user, its name and the rules that rebuild it,
    /// each length-prefixed (u32 LE).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let put = |out: &mut Vec<u8>, b: &[u8]| {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        };
        for u in self.all() {
            let rules = u.rules();
            put(&mut out, &u.name);
            out.extend_from_slice(&(rules.len() as u32).to_le_bytes());
            for r in &rules {
                put(&mut out, r);
            }
        }
        out
    }

    /// Replaces the users with those of [`Users::encode`]'s record; an error names what is
    /// malformed (and changes nothing).
    pub fn load(&self, rec: &[u8]) -> Result<usize, String> {
        fn take<'a>(b: &mut &'a [u8]) -> Result<&'a [u8], String> {
            let n = b
                .get(..4)
                .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize)
                .ok_or("truncated")?;
            let v = b.get(4..4 + n).ok_or("truncated")?;
            *b = &b[4 + n..];
            Ok(v)
        }
        let mut b = rec;
        let mut users = BTreeMap::new();
        while !b.is_empty() {
            let name = take(&mut b)?.to_vec();
            let count = b
                .get(..4)
                .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize)
                .ok_or("truncated")?;
            b = &b[4..];
            let mut u = User::new(&name);
            for _ in 0..count {
                let r = take(&mut b)?;
                u.apply(r)
                    .map_err(|e| format!("user {}: {e}", String::from_utf8_lossy(&name)))?;
            }
            users.insert(name, Arc::new(u));
        }
        if !users.contains_key(b"default".as_slice()) {
            users.insert(b"default".to_vec(), Arc::new(User::default_user()));
        }
        let n = users.len();
        *self.users.write() = users;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(n)
    }

    /// Replaces every user with `users` (an ACL file's), adding a default user with
    /// Redis's defaults when they hold none (A1).
    pub fn replace_all(&self, users: Vec<User>) -> usize {
        let mut m: BTreeMap<Vec<u8>, Arc<User>> = users
            .into_iter()
            .map(|u| (u.name.clone(), Arc::new(u)))
            .collect();
        m.entry(b"default".to_vec())
            .or_insert_with(|| Arc::new(User::default_user()));
        let n = m.len();
        *self.users.write() = m;
        self.generation.fetch_add(1, Ordering::AcqRel);
        n
    }

    /// Deletes a user (never `default`, A1); whether it existed.
    pub fn delete(&self, name: &[u8]) -> bool {
        let gone = name != b"default" && self.users.write().remove(name).is_some();
        if gone {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        gone
    }

    /// `requirepass`: the default user's one password (none: `nopass`).
    pub fn set_default_password(&self, pass: Option<&str>) {
        let mut u = self
            .get(b"default")
            .map_or_else(User::default_user, |u| (*u).clone());
        let _ = u.apply(b"resetpass");
        match pass {
            Some(p) => {
                let mut r = b">".to_vec();
                r.extend_from_slice(p.as_bytes());
                let _ = u.apply(&r);
            }
            None => {
                let _ = u.apply(b"nopass");
            }
        }
        self.put(u);
    }

    /// Whether a new connection starts authenticated (the default user takes no password).
    pub fn default_open(&self) -> bool {
        self.get(b"default").is_some_and(|u| u.enabled && u.nopass)
    }

    /// Records a refusal, folding it into an entry of the last minute with the same reason,
    /// context, object and user.
    pub fn log(&self, mut e: LogEntry, max: usize) {
        let mut log = self.log.lock();
        if let Some(at) = log.iter().position(|x| {
            x.reason == e.reason
                && x.context == e.context
                && x.object == e.object
                && x.username == e.username
                && e.at_ms.saturating_sub(x.at_ms) < 60_000
        }) {
            if let Some(old) = log.remove(at) {
                e.count = old.count + 1;
            }
        }
        log.push_front(e);
        log.truncate(max);
    }

    /// The newest `n` entries.
    pub fn log_entries(&self, n: usize) -> Vec<LogEntry> {
        self.log.lock().iter().take(n).cloned().collect()
    }

    /// Empties the log.
    pub fn log_reset(&self) {
        self.log.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new(b"u");
        for r in rules {
            u.apply(r.as_bytes()).unwrap();
        }
        u
    }

    fn req<'a>(cmd: &str, keys: &[(usize, u8)], args: &'a [Vec<u8>]) -> Request<'a> {
        Request {
            id: selector::id_of(cmd).unwrap(),
            keys: keys.to_vec(),
            channels: Vec::new(),
            args,
        }
    }

    #[test]
    fn rules_allow_and_refuse() {
        let u = user(&["on", ">p", "+@scripting", "+set", "~x*"]);
        assert!(u.accepts(b"p") && !u.accepts(b"q"));
        let args: Vec<Vec<u8>> = vec![b"set".to_vec(), b"xx".to_vec(), b"1".to_vec()];
        assert_eq!(u.check(&req("set", &[(1, 2)], &args)), Ok(()));
        assert_eq!(
            u.check(&req("hset", &[(1, 2)], &args)),
            Err(Denied::Command)
        );
        let yy: Vec<Vec<u8>> = vec![b"set".to_vec(), b"yy".to_vec(), b"1".to_vec()];
        assert_eq!(u.check(&req("set", &[(1, 2)], &yy)), Err(Denied::Key(1)));
        // A selector that allows it.
        let mut u2 = u.clone();
        u2.apply(b"(+hset ~yy)").unwrap();
        assert_eq!(u2.check(&req("hset", &[(1, 2)], &yy)), Ok(()));
        // Read-only keys.
        let r = user(&["on", "+@all", "%R~k*"]);
        let kk: Vec<Vec<u8>> = vec![b"get".to_vec(), b"kk".to_vec()];
        assert_eq!(r.check(&req("get", &[(1, READ_)], &kk)), Ok(()));
        assert_eq!(
            r.check(&req("set", &[(1, WRITE_)], &kk)),
            Err(Denied::Key(1))
        );
    }

    #[test]
    fn users_survive_their_record() {
        let users = Users::default();
        let mut u = user(&[
            "on",
            ">p1",
            ">p2",
            "+@all",
            "-@dangerous",
            "+flushall",
            "%R~r*",
            "%W~w*",
            "~k\u{e9}",
            "&ch*",
            "(+get ~sel* &x)",
            "skip-sanitize-payload",
        ]);
        u.name = b"u".to_vec();
        users.put(u.clone());
        users.set_default_password(Some("secret"));
        let rec = users.encode();
        let again = Users::default();
        assert_eq!(again.load(&rec), Ok(2));
        assert_eq!(*again.get(b"u").unwrap(), u);
        assert!(again.get(b"default").unwrap().accepts(b"secret"));
        // A damaged record changes nothing.
        assert!(again.load(&rec[..rec.len() - 3]).is_err());
        assert_eq!(*again.get(b"u").unwrap(), u);
    }

    const READ_: u8 = selector::READ;
    const WRITE_: u8 = selector::WRITE;

    #[test]
    fn descriptions_follow_redis() {
        assert_eq!(User::default_user().describe(), "on nopass ~* &* +@all");
        let u = user(&["on", "+@all", "-get"]);
        assert_eq!(u.selectors[0].describe_commands(), "+@all -get");
        let v = user(&["+set", "+get"]);
        assert_eq!(v.selectors[0].describe_commands(), "-@all +get +set");
        assert_eq!(v.selectors[0].describe(), "resetchannels -@all +get +set");
        let mut bad = User::new(b"x");
        assert_eq!(bad.apply(b"+nosuchcmd"), Err(RuleError::Unknown.text()));
        assert_eq!(bad.apply(b"bogus"), Err(RuleError::Syntax.text()));
        bad.apply(b"~*").unwrap();
        assert_eq!(bad.apply(b"~foo"), Err(RuleError::AfterAllKeys.text()));
    }
}

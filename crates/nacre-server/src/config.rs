//! The server's configuration, read as Redis reads its own: `nacre-server [config-file]
//! [--directive value ...]`. The file holds one directive per line (words split with Redis's
//! quoting, `#` comments); each `--name args` on the command line is one more line after the
//! file's. Directives are case-insensitive; a bad one stops the start with Redis's message
//! naming the line. [`Config::set`] is the same per-directive check, for `CONFIG SET`.

use std::path::{Path, PathBuf};

use nacre::Backend;
use nacre_resp::split_args;

/// How much the server logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// Everything.
    Debug,
    /// Much, but less than `debug`.
    Verbose,
    /// What a production server should log (the default).
    Notice,
    /// Only what matters.
    Warning,
    /// Nothing.
    Nothing,
}

impl LogLevel {
    fn parse(s: &str) -> Option<LogLevel> {
        Some(match s.to_ascii_lowercase().as_str() {
            "debug" => LogLevel::Debug,
            "verbose" => LogLevel::Verbose,
            "notice" => LogLevel::Notice,
            "warning" => LogLevel::Warning,
            "nothing" => LogLevel::Nothing,
            _ => return None,
        })
    }

    /// The name as a directive takes it.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Verbose => "verbose",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Nothing => "nothing",
        }
    }
}

/// Everything the server is configured with.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The config file read at start, if any (for `CONFIG REWRITE`).
    pub file: Option<PathBuf>,
    /// TCP port (`port`, default 6379; 0 does not listen on TCP).
    pub port: u16,
    /// Addresses to listen on (`bind`, default 127.0.0.1).
    pub bind: Vec<String>,
    /// Where the pool and checkpoints live (`dir`, default ./nacre-data).
    pub dir: PathBuf,
    /// Password every client must give (`requirepass`, default none).
    pub requirepass: Option<String>,
    /// Most clients connected at once (`maxclients`, default 10000).
    pub maxclients: u64,
    /// Longest bulk string a client may send (`proto-max-bulk-len`, default 512mb).
    pub proto_max_bulk_len: u64,
    /// Most bytes buffered from one client (`client-query-buffer-limit`, default 1gb).
    pub client_query_buffer_limit: u64,
    /// Logical databases for SELECT (`databases`, default 16).
    pub databases: u64,
    /// `loglevel` (default notice).
    pub loglevel: LogLevel,
    /// `logfile` (default empty: standard output).
    pub logfile: String,
    /// Nacre: pool size when the pool is created (`pmem-size`, default 1gb).
    pub pmem_size: u64,
    /// Nacre: durability backend (`pmem-backend`, default auto).
    pub pmem_backend: Backend,
    /// Nacre: directory of the disk levels (`disk-dir`, default empty: PM only). With one,
    /// data the pool cannot hold spills to lsm-tree tables there; once used, the database
    /// must always start with it.
    pub disk_dir: Option<PathBuf>,
    /// Nacre: PM bytes a subtable's Global Index takes before it spills to the disk levels
    /// (`gi-size-limit`, default 0: half the pool).
    pub gi_size_limit: u64,
    /// Nacre: keep the Global Index's copy in PM beside the volatile one
    /// (`persistent-index`, default no; `Options::persistent_index`). Fixed when the pool
    /// is created: a pool created without it cannot turn it on. With it, a restart serves
    /// as soon as the memtables not yet merged into it are indexed; the volatile index is
    /// rebuilt in the background (key counts after a crash wait for it).
    pub persistent_index: bool,
    /// Keyspace notification classes (`notify-keyspace-events`, default none; flags of
    /// `crate::notify`).
    pub notify_keyspace_events: u32,
    /// Who may run `DEBUG` (`enable-debug-command`, default no; set only at start).
    pub enable_debug_command: DebugAccess,
    /// Output limits per client class (`client-output-buffer-limit`, default
    /// `normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60`).
    pub client_output_buffer_limit: OutputLimits,
    /// Threads serving clients (`io-threads`; 0, the default: one fewer than the cores, at
    /// least one, leaving a core to the engine's background work). Fixed at start.
    pub io_threads: u64,
    /// Every other Redis parameter (see `crate::params`).
    pub params: crate::params::Values,
    /// `user <name> <rules...>` lines: the words after `user`, checked when read.
    pub users: Vec<Vec<Vec<u8>>>,
}

/// Tests only (the `testing` feature): the engine's background index rebuild after a start
/// is held back for this many milliseconds (`nacre::Options::hold_rebuild`), so that tests
/// can see what the server does meanwhile.
#[cfg(feature = "testing")]
pub const HOLD_REBUILD_ENV: &str = "NACRE_TEST_HOLD_REBUILD_MS";

impl Config {
    /// `latency-monitor-threshold` in milliseconds (0: the monitor is off).
    pub fn latency_threshold_ms(&self) -> u64 {
        self.params.uint("latency-monitor-threshold")
    }

    /// The threads that serve clients (see [`Config::io_threads`]).
    pub fn worker_threads(&self) -> usize {
        match self.io_threads {
            0 => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .saturating_sub(1)
                .max(1),
            n => n as usize,
        }
    }
}

/// Who may run a protected command (`enable-debug-command`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugAccess {
    /// Nobody.
    No,
    /// Every client.
    Yes,
    /// Clients connected from the loopback interface or a Unix socket.
    Local,
}

impl DebugAccess {
    fn parse(s: &str) -> Option<DebugAccess> {
        Some(match s.to_ascii_lowercase().as_str() {
            "no" => DebugAccess::No,
            "yes" => DebugAccess::Yes,
            "local" => DebugAccess::Local,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            DebugAccess::No => "no",
            DebugAccess::Yes => "yes",
            DebugAccess::Local => "local",
        }
    }

    /// Whether a client whose peer address is `addr` may run it.
    pub fn allows(self, addr: &str) -> bool {
        match self {
            DebugAccess::No => false,
            DebugAccess::Yes => true,
            DebugAccess::Local => {
                addr.starts_with("127.") || addr.starts_with("[::1]") || addr == "in-process"
            }
        }
    }
}

/// One class's output limits: bytes at once (`hard`), or `soft` bytes for `soft_seconds`
/// (0: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OutputLimit {
    /// Disconnect as soon as the output passes this.
    pub hard: u64,
    /// Disconnect once the output has stayed above this for `soft_seconds`.
    pub soft: u64,
    /// How long the soft limit may be passed.
    pub soft_seconds: u64,
}

/// `client-output-buffer-limit` for each class of client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    /// Ordinary clients.
    pub normal: OutputLimit,
    /// Replicas.
    pub replica: OutputLimit,
    /// Clients subscribed to pub/sub channels.
    pub pubsub: OutputLimit,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            normal: OutputLimit::default(),
            replica: OutputLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
            pubsub: OutputLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
        }
    }
}

impl OutputLimits {
    /// Applies `class hard soft seconds` groups, Redis's syntax; nothing changes on an error.
    fn set(&mut self, words: &[String]) -> Result<(), String> {
        const WRONG: &str = "Wrong number of arguments in buffer limit configuration.";
        if words.is_empty() || words.len() % 4 != 0 {
            return Err(WRONG.into());
        }
        let mut next = *self;
        for g in words.chunks(4) {
            let slot = match g[0].to_ascii_lowercase().as_str() {
                "normal" => &mut next.normal,
                "replica" | "slave" => &mut next.replica,
                "pubsub" => &mut next.pubsub,
                _ => {
                    return Err(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    )
                }
            };
            let (Some(hard), Some(soft), Ok(secs)) = (
                parse_memory(&g[1]),
                parse_memory(&g[2]),
                g[3].parse::<u64>(),
            ) else {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                );
            };
            *slot = OutputLimit {
                hard,
                soft,
                soft_seconds: secs,
            };
        }
        *self = next;
        Ok(())
    }

    fn format(&self) -> String {
        let f = |l: &OutputLimit| format!("{} {} {}", l.hard, l.soft, l.soft_seconds);
        format!(
            "normal {} slave {} pubsub {}",
            f(&self.normal),
            f(&self.replica),
            f(&self.pubsub)
        )
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            file: None,
            port: 6379,
            bind: vec!["127.0.0.1".into()],
            dir: PathBuf::from("./nacre-data"),
            requirepass: None,
            maxclients: 10_000,
            proto_max_bulk_len: 512 << 20,
            client_query_buffer_limit: 1 << 30,
            databases: 16,
            loglevel: LogLevel::Notice,
            logfile: String::new(),
            pmem_size: 1 << 30,
            pmem_backend: Backend::Auto,
            disk_dir: None,
            gi_size_limit: 0,
            persistent_index: false,
            notify_keyspace_events: 0,
            enable_debug_command: DebugAccess::No,
            client_output_buffer_limit: OutputLimits::default(),
            io_threads: 0,
            params: Default::default(),
            users: Vec::new(),
        }
    }
}

/// A configuration the server refuses to start with, in Redis's words.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A line of the file or the command line is wrong.
    #[error(
        "\n*** FATAL CONFIG FILE ERROR (nacre-server) ***\nReading the configuration file, at line {line}\n>>> '{text}'\n{reason}"
    )]
    Line {
        /// Line number (command-line directives count after the file's lines).
        line: usize,
        /// The line as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The config file cannot be read.
    #[error("Fatal error, can't open config file '{path}': {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
}

/// Every directive, as `CONFIG GET` names them.
pub const DIRECTIVES: [&str; 19] = [
    "port",
    "bind",
    "dir",
    "requirepass",
    "maxclients",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "databases",
    "loglevel",
    "logfile",
    "pmem-size",
    "pmem-backend",
    "disk-dir",
    "gi-size-limit",
    "persistent-index",
    "notify-keyspace-events",
    "enable-debug-command",
    "client-output-buffer-limit",
    "io-threads",
];

/// A memory amount as Redis writes it: digits and an optional unit (`b`, `k` 1000, `kb` 1024,
/// `m`, `mb`, `g`, `gb`; any case).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &lower[digits.len()..];
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

/// A number in `lo..=hi`, refused with Redis's words: text that is not an integer, or an
/// integer out of range (negative ones included).
fn number(s: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match s.parse::<i128>() {
        Ok(v) if (i128::from(lo)..=i128::from(hi)).contains(&v) => Ok(v as u64),
        Ok(_) => Err(format!("argument must be between {lo} and {hi} inclusive")),
        Err(_) => Err("argument couldn't be parsed into an integer".into()),
    }
}

fn memory(s: &str, lo: u64) -> Result<u64, String> {
    match parse_memory(s) {
        Some(v) if v >= lo => Ok(v),
        Some(_) => Err(format!("argument must be at least {lo} bytes")),
        None => Err("argument must be a memory value".into()),
    }
}

impl Config {
    /// The engine options for the pool under `dir` (the data directory, or a checkpoint's
    /// directory: a checkpoint keeps its disk levels in `disk` inside it).
    pub fn engine_options(&self, dir: &Path, checkpoint: bool) -> nacre::Options {
        let mut o =
            nacre::Options::new(dir.join(crate::store::open::POOL_FILE)).backend(self.pmem_backend);
        o.pool_size = self.pmem_size;
        o.gi_size_limit = self.gi_size_limit;
        o.persistent_index = self.persistent_index;
        #[cfg(feature = "testing")]
        {
            o.hold_rebuild = std::env::var_os(HOLD_REBUILD_ENV).is_some();
        }
        o.disk_dir = match (&self.disk_dir, checkpoint) {
            (None, _) => None,
            (Some(_), true) => Some(dir.join("disk")),
            (Some(d), false) => Some(d.clone()),
        };
        o
    }

    /// The configuration from the program's arguments (without the program name):
    /// an optional config file first, then `--directive args...` groups.
    pub fn from_args(args: &[String]) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        let mut lines: Vec<String> = Vec::new();
        let mut rest = args;
        if let Some(first) = args.first().filter(|a| !a.starts_with("--")) {
            let path = Path::new(first);
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            cfg.file = Some(path.to_path_buf());
            lines.extend(text.lines().map(str::to_string));
            rest = &args[1..];
        }
        // `--name a b --other c`: each `--name` starts a line; its words are quoted so that
        // they split back exactly (Redis does the same).
        let mut cur: Option<String> = None;
        for a in rest {
            if let Some(name) = a.strip_prefix("--") {
                lines.extend(cur.take());
                cur = Some(name.to_string());
            } else {
                let line = cur.get_or_insert_with(String::new);
                line.push(' ');
                line.push_str(&quote(a));
            }
        }
        lines.extend(cur);
        for (i, text) in lines.iter().enumerate() {
            cfg.apply_line(text).map_err(|reason| ConfigError::Line {
                line: i + 1,
                text: text.clone(),
                reason,
            })?;
        }
        Ok(cfg)
    }

    /// One line of a config file: a directive and its arguments, a comment or nothing.
    pub fn apply_line(&mut self, text: &str) -> Result<(), String> {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(());
        }
        let words =
            split_args(trimmed.as_bytes()).ok_or("Unbalanced quotes in configuration line")?;
        let words: Vec<String> = words
            .into_iter()
            .map(|w| String::from_utf8_lossy(&w).into_owned())
            .collect();
        let Some((name, args)) = words.split_first() else {
            return Ok(());
        };
        self.set(name, args)
    }

    /// Sets directive `name` (any case) to `args`, checked as at start.
    pub fn set(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        let name = name.to_ascii_lowercase();
        let one = || -> Result<&str, String> {
            match args {
                [a] => Ok(a.as_str()),
                _ => Err("Bad directive or wrong number of arguments".into()),
            }
        };
        match name.as_str() {
            "port" => self.port = number(one()?, 0, 65535)? as u16,
            "bind" => {
                if args.is_empty() {
                    return Err("Bad directive or wrong number of arguments".into());
                }
                self.bind = args.to_vec();
            }
            "dir" => self.dir = PathBuf::from(one()?),
            "user" => {
                let words: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
                if let Err(why) = crate::acl::file::user_of_words(&words) {
                    return Err(format!(
                        "Error in user declaration '{}': {why}",
                        args.first().map_or("", String::as_str)
                    ));
                }
                self.users.push(words);
            }
            "requirepass" => {
                let p = one()?;
                self.requirepass = (!p.is_empty()).then(|| p.to_string());
            }
            "maxclients" => self.maxclients = number(one()?, 1, u64::from(u32::MAX))?,
            "proto-max-bulk-len" => self.proto_max_bulk_len = memory(one()?, 1 << 20)?,
            "client-query-buffer-limit" => {
                self.client_query_buffer_limit = memory(one()?, 1 << 20)?
            }
            "databases" => self.databases = number(one()?, 1, i32::MAX as u64)?,
            "io-threads" => self.io_threads = number(one()?, 1, 128)?,
            "loglevel" => {
                self.loglevel = LogLevel::parse(one()?).ok_or(
                    "argument(s) must be one of the following: debug, verbose, notice, warning, nothing",
                )?
            }
            "logfile" => self.logfile = one()?.to_string(),
            "notify-keyspace-events" => {
                let v = match args {
                    [] => "",
                    [a] => a.as_str(),
                    _ => return Err("Bad directive or wrong number of arguments".into()),
                };
                self.notify_keyspace_events = crate::notify::parse(v)
                    .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?;
            }
            "pmem-size" => self.pmem_size = memory(one()?, 16 << 20)?,
            "pmem-backend" => {
                self.pmem_backend = match one()?.to_ascii_lowercase().as_str() {
                    "auto" => Backend::Auto,
                    "dax" => Backend::Dax,
                    "msync" => Backend::Msync,
                    "emulated" => Backend::Emulated,
                    _ => {
                        return Err(
                            "argument(s) must be one of the following: auto, dax, msync, emulated"
                                .into(),
                        )
                    }
                }
            }
            "disk-dir" => {
                let d = one()?;
                self.disk_dir = (!d.is_empty()).then(|| PathBuf::from(d));
            }
            "gi-size-limit" => {
                let v = one()?;
                self.gi_size_limit = if v == "0" { 0 } else { memory(v, 64 << 10)? };
            }
            "persistent-index" => {
                self.persistent_index = match one()?.to_ascii_lowercase().as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err("argument must be 'yes' or 'no'".into()),
                }
            }
            "enable-debug-command" => {
                self.enable_debug_command = DebugAccess::parse(one()?)
                    .ok_or("argument(s) must be one of the following: no, yes, local")?
            }
            "client-output-buffer-limit" => self.client_output_buffer_limit.set(args)?,
            n => match crate::params::find(n) {
                Some(p) => self.params.set(p, args)?,
                None => return Err("Bad directive or wrong number of arguments".into()),
            },
        }
        Ok(())
    }

    /// The value of directive `name` as `CONFIG GET` shows it.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name.to_ascii_lowercase().as_str() {
            "port" => self.port.to_string(),
            "bind" => self.bind.join(" "),
            "dir" => self.dir.display().to_string(),
            "requirepass" => self.requirepass.clone().unwrap_or_default(),
            "maxclients" => self.maxclients.to_string(),
            "proto-max-bulk-len" => self.proto_max_bulk_len.to_string(),
            "client-query-buffer-limit" => self.client_query_buffer_limit.to_string(),
            "databases" => self.databases.to_string(),
            "io-threads" => self.worker_threads().to_string(),
            "loglevel" => self.loglevel.name().to_string(),
            "logfile" => self.logfile.clone(),
            "pmem-size" => self.pmem_size.to_string(),
            "pmem-backend" => self.pmem_backend.to_string(),
            "disk-dir" => self
                .disk_dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            "gi-size-limit" => self.gi_size_limit.to_string(),
            "persistent-index" => if self.persistent_index { "yes" } else { "no" }.to_string(),
            "notify-keyspace-events" => crate::notify::format(self.notify_keyspace_events),
            "enable-debug-command" => self.enable_debug_command.name().to_string(),
            "client-output-buffer-limit" => self.client_output_buffer_limit.format(),
            n => self.params.get(crate::params::find(n)?),
        })
    }
}

/// `s` in double quotes with every byte that needs it escaped, so [`split_args`] gives it
/// back exactly.
fn quote(s: &str) -> String {
    let mut q = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' | b'\\' => {
                q.push('\\');
                q.push(b as char);
            }
            0x20..=0x7e => q.push(b as char),
            _ => q.push_str(&format!("\\x{b:02x}")),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn defaults_without_arguments() {
        let c = Config::from_args(&[]).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.get("port").as_deref(), Some("6379"));
        assert_eq!(c.get("pmem-backend").as_deref(), Some("auto"));
        for d in DIRECTIVES {
            assert!(c.get(d).is_some(), "{d}");
        }
    }

    #[test]
    fn file_then_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("nacre.conf");
        std::fs::write(
            &f,
            "# a comment\n\nPORT 7000\nbind 127.0.0.1 ::1\nrequirepass \"s3 cr\\\"et\"\n\
             proto-max-bulk-len 64mb\nLogLevel warning\npmem-size 2gb\npmem-backend emulated\n",
        )
        .unwrap();
        let c = Config::from_args(&args(&[
            f.to_str().unwrap(),
            "--port",
            "7001",
            "--dir",
            "/tmp/with space",
            "--databases",
            "4",
        ]))
        .unwrap();
        assert_eq!(c.port, 7001, "the command line comes after the file");
        assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
        assert_eq!(c.requirepass.as_deref(), Some("s3 cr\"et"));
        assert_eq!(c.proto_max_bulk_len, 64 << 20);
        assert_eq!(c.loglevel, LogLevel::Warning);
        assert_eq!(c.pmem_size, 2 << 30);
        assert_eq!(c.pmem_backend, Backend::Emulated);
        assert_eq!(c.dir, PathBuf::from("/tmp/with space"));
        assert_eq!(c.databases, 4);
        assert_eq!(c.file.as_deref(), Some(f.as_path()));
    }

    #[test]
    fn disk_levels_directives_reach_the_engine_options() {
        let c = Config::from_args(&args(&[
            "--dir",
            "/data",
            "--disk-dir",
            "/levels",
            "--gi-size-limit",
            "256mb",
        ]))
        .unwrap();
        assert_eq!(c.get("disk-dir").as_deref(), Some("/levels"));
        assert_eq!(c.get("gi-size-limit").as_deref(), Some("268435456"));
        let o = c.engine_options(&c.dir, false);
        assert_eq!(o.disk_dir.as_deref(), Some(std::path::Path::new("/levels")));
        assert_eq!(o.gi_size_limit, 256 << 20);
        // A checkpoint keeps its disk levels inside its own directory.
        let ck = c.engine_options(std::path::Path::new("/data/checkpoint"), true);
        assert_eq!(
            ck.disk_dir.as_deref(),
            Some(std::path::Path::new("/data/checkpoint/disk"))
        );
        // PM only by default, and an empty disk-dir turns the disk levels off again.
        assert_eq!(
            Config::default().engine_options(&c.dir, false).disk_dir,
            None
        );
        let mut off = c.clone();
        off.set("disk-dir", &[String::new()]).unwrap();
        assert_eq!(off.disk_dir, None);
        assert!(off.set("gi-size-limit", &["1kb".to_string()]).is_err());
        assert!(off.set("gi-size-limit", &["0".to_string()]).is_ok());
    }

    #[test]
    fn bad_lines_are_refused_with_their_number_and_reason() {
        for (line, reason) in [
            ("port 70000", "between 0 and 65535"),
            ("port -1", "between 0 and 65535"),
            ("port abc", "couldn't be parsed into an integer"),
            ("port", "wrong number of arguments"),
            ("frobnicate yes", "Bad directive"),
            ("maxclients 0", "between 1"),
            ("proto-max-bulk-len 1kb", "at least"),
            ("proto-max-bulk-len lots", "memory value"),
            ("loglevel loud", "one of the following"),
            ("pmem-backend tape", "one of the following"),
            ("dir \"unbalanced", "Unbalanced quotes"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("bad.conf");
            std::fs::write(&f, format!("port 6380\n{line}\n")).unwrap();
            match Config::from_args(&args(&[f.to_str().unwrap()])) {
                Err(ConfigError::Line {
                    line: 2,
                    text,
                    reason: r,
                }) => {
                    assert_eq!(text, line);
                    assert!(r.contains(reason), "{line}: {r}");
                }
                other => panic!("{line}: {other:?}"),
            }
        }
        assert!(matches!(
            Config::from_args(&args(&["/no/such/file.conf"])),
            Err(ConfigError::Read { .. })
        ));
    }

    #[test]
    fn memory_units_as_redis_reads_them() {
        for (s, v) in [
            ("100", 100),
            ("1k", 1000),
            ("1KB", 1024),
            ("5m", 5_000_000),
            ("5mb", 5 << 20),
            ("1g", 1_000_000_000),
            ("1Gb", 1 << 30),
        ] {
            assert_eq!(parse_memory(s), Some(v), "{s}");
        }
        for s in ["", "kb", "-1", "1tb", "1.5gb", "99999999999999999999gb"] {
            assert_eq!(parse_memory(s), None, "{s}");
        }
    }

    #[test]
    fn command_line_words_with_any_bytes_come_back_exactly() {
        let odd = "a \"b\" \\ c\t\u{1}é";
        let c = Config::from_args(&args(&["--requirepass", odd])).unwrap();
        assert_eq!(c.requirepass.as_deref(), Some(odd));
    }
}

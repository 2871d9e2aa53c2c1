//! [`RedisServer`]: a throwaway `redis-server` on a free loopback port, for tests and
//! benchmarks, killed when dropped.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Connection, Reply, RespError};

/// Where Debian's `redis-server` package installs the server.
pub const DEFAULT_REDIS_SERVER: &str = "/usr/bin/redis-server";

/// How long [`RedisServer::start`] waits for the server to answer `PING`.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How many ports [`RedisServer::start`] tries when the server exits at once (the free port
/// it picked may have been taken in between).
const START_ATTEMPTS: usize = 3;

/// Why a `redis-server` could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The binary does not exist.
    #[error("{} not found (Debian: apt-get install redis-server)", binary.display())]
    BinaryMissing {
        /// The path tried.
        binary: PathBuf,
    },
    /// Finding a free port, creating the scratch directory or its log file failed.
    #[error("{what}: {source}")]
    Setup {
        /// What was being done.
        what: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The process could not be started.
    #[error("starting {}: {source}", binary.display())]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The server exited before answering `PING`.
    #[error("{} exited ({status}) before answering PING; its output:\n{log}", binary.display())]
    Exited {
        /// The binary.
        binary: PathBuf,
        /// How it exited.
        status: ExitStatus,
        /// The end of its output.
        log: String,
    },
    /// The server kept running but did not answer `PING` in time.
    #[error(
        "{} on {addr} did not answer PING within {waited:?} (last: {last}); its output:\n{log}",
        binary.display()
    )]
    NoAnswer {
        /// The binary.
        binary: PathBuf,
        /// Where it should listen.
        addr: String,
        /// How long it was given.
        waited: Duration,
        /// The last connection error or reply.
        last: String,
        /// The end of its output.
        log: String,
    },
}

/// A `redis-server` child listening on `127.0.0.1` at a free port, with persistence off
/// (`--save '' --appendonly no`) and its working directory in a scratch directory of its
/// own. Dropping it kills the server and removes the directory.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    binary: PathBuf,
    addr: String,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts `binary` (usually [`DEFAULT_REDIS_SERVER`]) with `extra_args` after the
    /// defaults (later options win), and waits until it answers `PING`.
    pub fn start(binary: impl AsRef<Path>, extra_args: &[&str]) -> Result<Self, ServerError> {
        let binary = binary.as_ref();
        if !binary.exists() {
            return Err(ServerError::BinaryMissing {
                binary: binary.to_path_buf(),
            });
        }
        let mut attempt = 1;
        loop {
            match Self::start_once(binary, extra_args) {
                Err(ServerError::Exited { .. }) if attempt < START_ATTEMPTS => attempt += 1,
                result => return result,
            }
        }
    }

    fn start_once(binary: &Path, extra_args: &[&str]) -> Result<Self, ServerError> {
        let port = free_port()?;
        let dir = scratch_dir(port)?;
        let log_path = dir.join("redis.log");
        let setup = |what: String| move |source| ServerError::Setup { what, source };
        let log =
            File::create(&log_path).map_err(setup(format!("creating {}", log_path.display())))?;
        let log2 = log
            .try_clone()
            .map_err(setup(format!("duplicating {}", log_path.display())))?;
        let port_arg = port.to_string();
        let mut args: Vec<&str> = vec![
            "--port",
            &port_arg,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
        ];
        let dir_arg = dir.to_string_lossy().into_owned();
        args.extend(["--dir", &dir_arg]);
        args.extend_from_slice(extra_args);
        let spawned = Command::new(binary)
            .args(&args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(source) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(ServerError::Spawn {
                    binary: binary.to_path_buf(),
                    source,
                });
            }
        };
        // From here on, dropping `server` kills the child and removes the directory.
        let mut server = RedisServer {
            child,
            binary: binary.to_path_buf(),
            addr: format!("127.0.0.1:{port}"),
            port,
            dir,
        };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), ServerError> {
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(ServerError::Exited {
                    binary: self.binary.clone(),
                    status,
                    log: self.log_tail(),
                });
            }
            let last = match self.ping() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if start.elapsed() >= STARTUP_TIMEOUT {
                return Err(ServerError::NoAnswer {
                    binary: self.binary.clone(),
                    addr: self.addr.clone(),
                    waited: STARTUP_TIMEOUT,
                    last,
                    log: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ping(&self) -> Result<(), String> {
        let mut conn = self
            .connect(Duration::from_secs(1))
            .map_err(|e| e.to_string())?;
        match conn.command(&[b"PING"]) {
            Ok(Reply::Simple(s)) if s == "PONG" => Ok(()),
            Ok(other) => Err(format!("PING answered with {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The scratch directory (the server's `--dir`, and its `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new connection to the server.
    pub fn connect(&self, timeout: Duration) -> Result<Connection, RespError> {
        Connection::connect(&self.addr, timeout)
    }

    /// The last 4 KiB of the server's output (its log), for error messages.
    pub fn log_tail(&self) -> String {
        let bytes = std::fs::read(self.dir.join("redis.log")).unwrap_or_default();
        let from = bytes.len().saturating_sub(4096);
        String::from_utf8_lossy(&bytes[from..]).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // Nothing is persisted, so SIGKILL loses nothing; wait to reap the child.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A loopback port that was free a moment ago.
/// A TCP port on 127.0.0.1 nothing listens on right now.
pub fn free_port() -> Result<u16, ServerError> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|source| ServerError::Setup {
            what: "binding 127.0.0.1:0 to find a free port".into(),
            source,
        })?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|source| ServerError::Setup {
            what: "reading the free port".into(),
            source,
        })
}

/// A new, empty directory under the system temp dir.
fn scratch_dir(port: u16) -> Result<PathBuf, ServerError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("nacre-redis-{}-{port}-{n}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|source| ServerError::Setup {
        what: format!("creating {}", dir.display()),
        source,
    })?;
    Ok(dir)
}

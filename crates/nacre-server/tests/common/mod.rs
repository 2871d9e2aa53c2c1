//! Starting the real `nacre-server` binary (and, where installed, `redis-server`) for
//! integration tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1.
/// Never the same port twice in one test process: the kernel may hand a released port out
/// again before the server meant for it has bound it.
pub fn free_port() -> u16 {
    static HANDED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed = HANDED.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        if !handed.contains(&port) {
            handed.push(port);
            return port;
        }
    }
}

/// A running server process.
pub struct Server {
    /// Its port.
    pub port: u16,
    /// Its data directory.
    pub dir: PathBuf,
    child: Option<Child>,
    _tmp: Option<tempfile::TempDir>,
    args: Vec<String>,
    /// Environment variables later starts get.
    env: Vec<(String, String)>,
    /// Where the server's standard error goes (every start of it), checked for panics when
    /// the server is dropped.
    stderr: tempfile::NamedTempFile,
}

impl Server {
    /// Starts nacre-server on a fresh directory (emulated backend, 256 MiB pool) with extra
    /// `--directive value` arguments.
    pub fn start(extra: &[&str]) -> Server {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().to_path_buf();
        let mut s = Server {
            port: free_port(),
            dir,
            child: None,
            _tmp: Some(tmp),
            args: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            stderr: tempfile::NamedTempFile::new().expect("stderr file"),
        };
        s.spawn();
        s
    }

    /// Starts nacre-server on `dir` (kept by the caller).
    pub fn start_in(dir: &Path, extra: &[&str]) -> Server {
        let mut s = Server {
            port: free_port(),
            dir: dir.to_path_buf(),
            child: None,
            _tmp: None,
            args: extra.iter().map(|s| s.to_string()).collect(),
            env: Vec::new(),
            stderr: tempfile::NamedTempFile::new().expect("stderr file"),
        };
        s.spawn();
        s
    }

    /// Starts the process; another test's server may have taken the port in the meantime,
    /// so the one answering must report our process id.
    fn spawn(&mut self) {
        for _ in 0..10 {
            self.spawn_once();
            if self.answering_pid() == self.child.as_ref().map(|c| c.id()) {
                return;
            }
            self.kill();
            self.port = free_port();
        }
        panic!("could not start nacre-server on a port of its own");
    }

    fn answering_pid(&self) -> Option<u32> {
        let mut pre = Vec::new();
        for (k, v) in self
            .args
            .chunks(2)
            .filter_map(|c| Some((c.first()?, c.get(1)?)))
        {
            if k == "--requirepass" {
                pre.extend_from_slice(format!("AUTH {v}\r\n").as_bytes());
            }
        }
        answering_pid(self.port, pre)
    }

    fn spawn_once(&mut self) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nacre-server"));
        cmd.arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(&self.dir)
            .arg("--pmem-size")
            .arg("256mb")
            .arg("--pmem-backend")
            .arg("emulated")
            .arg("--loglevel")
            .arg("warning")
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(self.stderr.path())
                    .expect("stderr file"),
            );
        self.child = Some(cmd.spawn().expect("start nacre-server"));
        wait_ready(self.port);
    }

    /// `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate connection. Its reads give up after [`REPLY_WAIT`], so a server that
    /// stops answering fails the test instead of holding it forever.
    pub fn conn(&self) -> redis::Connection {
        let c = redis::Client::open(self.url())
            .expect("client")
            .get_connection()
            .expect("connect");
        c.set_read_timeout(Some(REPLY_WAIT)).expect("read timeout");
        c
    }

    /// A raw TCP connection.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        s
    }

    /// Kills the process with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends the process `signal` (a name `kill` takes: `TERM`, `INT`).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(ok.success(), "kill -{signal} {pid}");
    }

    /// Waits for the process to exit (after SHUTDOWN); its exit status.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let t = Instant::now();
        let c = self.child.as_mut()?;
        while t.elapsed() < within {
            if let Ok(Some(s)) = c.try_wait() {
                self.child = None;
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The extra arguments later starts use.
    pub fn set_args(&mut self, extra: &[&str]) {
        self.args = extra.iter().map(|s| s.to_string()).collect();
    }

    /// The environment variables later starts get.
    pub fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Starts the process again on the same directory and port.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

/// The longest any test waits for one reply from a server under test.
pub const REPLY_WAIT: Duration = Duration::from_secs(60);

impl Drop for Server {
    /// Stops the server; a panic anywhere in it (a connection's task survives its own panic,
    /// so a reply may look fine) fails the test.
    fn drop(&mut self) {
        self.kill();
        let mut log = String::new();
        let _ =
            std::fs::File::open(self.stderr.path()).and_then(|mut f| f.read_to_string(&mut log));
        if log.contains("panicked at") && !std::thread::panicking() {
            panic!("nacre-server panicked:\n{log}");
        }
    }
}

/// The process id that the server answering on `port` reports in `INFO server`, after
/// sending `pre` (an AUTH, say).
pub fn answering_pid(port: u16, mut pre: Vec<u8>) -> Option<u32> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    pre.extend_from_slice(b"INFO server\r\n");
    s.write_all(&pre).ok()?;
    let t = Instant::now();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while t.elapsed() < Duration::from_secs(5) && !text.contains("tcp_port") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    text.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
}

/// Waits until a server answers PING on `port`.
pub fn wait_ready(port: u16) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(2))).ok();
            if s.write_all(b"PING\r\n").is_ok() {
                let mut line = String::new();
                if BufReader::new(&mut s).read_line(&mut line).is_ok()
                    && (line.starts_with("+PONG") || line.starts_with("-NOAUTH"))
                {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("server on port {port} did not come up");
}

/// A running redis-server 7 (no persistence) if one is installed.
pub struct RedisServer {
    /// Its port.
    pub port: u16,
    child: Child,
    _tmp: tempfile::TempDir,
}

impl RedisServer {
    /// Starts redis-server if the binary exists.
    pub fn start() -> Option<RedisServer> {
        Self::start_with(&[])
    }

    /// Starts redis-server, with extra `--directive value` arguments, if the binary exists.
    /// Like nacre's servers, it must be our process that answers on the port.
    pub fn start_with(extra: &[&str]) -> Option<RedisServer> {
        for _ in 0..10 {
            let r = RedisServer::start_once(extra)?;
            if answering_pid(r.port, Vec::new()) == Some(r.child.id()) {
                return Some(r);
            }
        }
        panic!("could not start redis-server on a port of its own");
    }

    fn start_once(extra: &[&str]) -> Option<RedisServer> {
        let tmp = tempfile::tempdir().ok()?;
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(tmp.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        wait_ready(port);
        Some(RedisServer {
            port,
            child,
            _tmp: tmp,
        })
    }

    /// A `redis` crate connection.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .expect("client")
            .get_connection()
            .expect("connect")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends raw bytes and reads what comes back until the server closes or `wait` passes.
pub fn raw_exchange(s: &mut TcpStream, bytes: &[u8], wait: Duration) -> Vec<u8> {
    s.write_all(bytes).expect("write");
    s.set_read_timeout(Some(wait)).ok();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    out
}

/// Runs a command, returning its reply or its error as a string `ERR:<message>`.
pub fn run(con: &mut redis::Connection, args: &[&[u8]]) -> redis::Value {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).unwrap_or("?"));
    for a in &args[1..] {
        c.arg(*a);
    }
    match c.query::<redis::Value>(con) {
        Ok(v) => v,
        Err(e) => redis::Value::SimpleString(format!(
            "ERR:{}",
            e.detail().map_or_else(
                || e.to_string(),
                |d| format!("{} {d}", e.code().unwrap_or(""))
            )
        )),
    }
}

/// One command's reply (or error), with the command, as text (differential tests compare
/// these line by line).
pub fn run_text(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let r: redis::RedisResult<redis::Value> = cmd.query(c);
    match r {
        Ok(v) => format!("{args:?} -> {v:?}"),
        Err(e) => format!("{args:?} -> error {e}"),
    }
}

/// Runs a command given as text words (errors come back as `ERR:...` strings, see [`run`]).
pub fn q(c: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let b: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    run(c, &b)
}

/// A reply as text: bulk and simple strings as they are, arrays and sets as `[a,b]`, maps as
/// `{k=v}`, nil as `nil`.
pub fn text(v: &redis::Value) -> String {
    use redis::Value;
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        Value::Array(items) | Value::Set(items) => {
            let parts: Vec<String> = items.iter().map(text).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Map(pairs) => {
            let parts: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}={}", text(k), text(v)))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Nil => "nil".into(),
        Value::Okay => "OK".into(),
        v => format!("{v:?}"),
    }
}

/// Field `field` of `INFO section` ("" when absent).
pub fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> String {
    let all = text(&q(c, &["INFO", section]));
    all.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// Waits until `f` holds, failing the test after `within`.
pub fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < within, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The server's keyspace and shared state in this process, on an engine opened with `o`
/// (one database), for tests that drive commands and commits directly; its commit completer
/// runs on a thread of its own, as the server runs it on its runtime.
pub fn in_process(o: nacre::Options) -> std::sync::Arc<nacre_server::shared::Shared> {
    let db = nacre::Db::open(o).expect("open");
    let (st, report, snap) =
        nacre_server::store::open::open_db(db, 1, Default::default()).expect("keyspace");
    let st = std::sync::Arc::new(st);
    let cfg = nacre_server::Config {
        databases: 1,
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    std::thread::spawn({
        let store = st.clone();
        move || rt.block_on(nacre_server::store::Commits::run_completer(store))
    });
    // After the completer starts: the count may correct the key count records.
    if let Some(s) = snap {
        st.count_keys(s).expect("count");
    }
    nacre_server::shared::Shared::new(st, cfg, report).into_arc()
}

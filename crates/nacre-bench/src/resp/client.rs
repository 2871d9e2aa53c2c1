//! [`Connection`]: one blocking TCP connection to a RESP server, with pipelining.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::{encode_command, Limits, Parser, Reply, RespError};

/// The read buffer's first size; it doubles while one reply does not fit.
const INITIAL_READ_BUF: usize = 64 << 10;

/// A blocking connection to a RESP server.
///
/// Commands are [`queue`](Connection::queue)d into a write buffer and sent together by
/// [`flush_replies`](Connection::flush_replies), which then reads exactly one reply per
/// command. Replies are parsed in place in a read buffer whose consumed bytes are dropped
/// by moving the unconsumed tail to the front when the buffer fills, so the buffer grows
/// only when a single reply does not fit.
///
/// RESP3 push messages (`>`) that arrive between replies are not replies to any command:
/// they are set aside and handed out by [`take_pushes`](Connection::take_pushes). (So a
/// command whose only answer is a push, `SUBSCRIBE` under RESP3, cannot go through
/// `flush_replies`.)
///
/// Everything is written before anything is read, so one flush should not queue more
/// replies than the server will buffer; Redis buffers a normal client's replies without
/// limit.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    addr: String,
    /// Encoded commands not yet sent.
    wbuf: Vec<u8>,
    /// Commands in `wbuf`.
    queued: usize,
    /// Received bytes; `rbuf[rstart..rend]` are not yet consumed by the parser.
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    parser: Parser,
    /// Push messages received and not yet taken.
    pushes: Vec<Reply>,
    /// Set by any error that leaves the stream out of step.
    broken: bool,
}

impl Connection {
    /// Connects to `addr` (`host:port`), trying each address it resolves to in turn.
    ///
    /// `timeout` bounds the connect and every later read and write, and must not be zero.
    /// `TCP_NODELAY` is set, so a flush goes out at once.
    pub fn connect(addr: &str, timeout: Duration) -> Result<Self, RespError> {
        let connect_err = |source| RespError::Connect {
            addr: addr.to_string(),
            source,
        };
        let mut last = None;
        let mut stream = None;
        for sa in addr.to_socket_addrs().map_err(connect_err)? {
            match TcpStream::connect_timeout(&sa, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = match (stream, last) {
            (Some(s), _) => s,
            (None, Some(e)) => return Err(connect_err(e)),
            (None, None) => {
                return Err(connect_err(std::io::Error::new(
                    ErrorKind::NotFound,
                    "the address resolved to nothing",
                )))
            }
        };
        stream.set_nodelay(true).map_err(connect_err)?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(connect_err)?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(connect_err)?;
        Ok(Connection {
            stream,
            addr: addr.to_string(),
            wbuf: Vec::new(),
            queued: 0,
            rbuf: Vec::new(),
            rstart: 0,
            rend: 0,
            parser: Parser::new(),
            pushes: Vec::new(),
            broken: false,
        })
    }

    /// The address as given to [`Connection::connect`].
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Replaces the parser's limits (before the first read, or between replies).
    pub fn set_limits(&mut self, limits: Limits) {
        self.parser = Parser::with_limits(limits);
    }

    /// Sets the read and write timeouts (`None`: block for ever; zero is refused).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<(), RespError> {
        let io = |source| RespError::Io {
            op: "setting timeouts on",
            addr: self.addr.clone(),
            source,
        };
        self.stream.set_read_timeout(timeout).map_err(io)?;
        self.stream.set_write_timeout(timeout).map_err(io)
    }

    /// Appends a command to the pipeline; nothing is sent until
    /// [`flush_replies`](Connection::flush_replies).
    pub fn queue(&mut self, args: &[&[u8]]) {
        encode_command(&mut self.wbuf, args);
        self.queued += 1;
    }

    /// Commands queued and not yet sent.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Sends every queued command in one write and reads exactly one reply for each,
    /// returned in order. Error replies come back as [`Reply::Error`] or
    /// [`Reply::BlobError`], not as `Err`; `Err` means the connection failed, the server
    /// closed it ([`RespError::Closed`]) or sent something that is not RESP, after which
    /// the connection refuses further use ([`RespError::Broken`]).
    pub fn flush_replies(&mut self) -> Result<Vec<Reply>, RespError> {
        self.usable()?;
        let owed = std::mem::take(&mut self.queued);
        let result = self.send_and_read(owed);
        self.wbuf.clear();
        if result.is_err() {
            self.broken = true;
        }
        result
    }

    /// Sends one command and returns its reply (an error reply included, as `Ok`).
    /// Fails with [`RespError::Queued`] if pipelined commands are waiting.
    pub fn command(&mut self, args: &[&[u8]]) -> Result<Reply, RespError> {
        if self.queued > 0 {
            return Err(RespError::Queued {
                queued: self.queued,
            });
        }
        self.queue(args);
        let mut replies = self.flush_replies()?;
        replies.pop().ok_or_else(|| RespError::Broken {
            addr: self.addr.clone(),
        })
    }

    /// [`Connection::command`], with an error reply turned into [`RespError::Server`].
    pub fn command_ok(&mut self, args: &[&[u8]]) -> Result<Reply, RespError> {
        self.command(args)?.into_result().map_err(RespError::Server)
    }

    /// The push messages received so far, oldest first; the connection forgets them.
    pub fn take_pushes(&mut self) -> Vec<Reply> {
        std::mem::take(&mut self.pushes)
    }

    /// The read buffer's size, for tests of its growth.
    #[cfg(test)]
    pub(crate) fn read_buffer_len(&self) -> usize {
        self.rbuf.len()
    }

    fn usable(&self) -> Result<(), RespError> {
        if self.broken {
            return Err(RespError::Broken {
                addr: self.addr.clone(),
            });
        }
        Ok(())
    }

    fn send_and_read(&mut self, owed: usize) -> Result<Vec<Reply>, RespError> {
        if owed == 0 {
            return Ok(Vec::new());
        }
        self.stream
            .write_all(&self.wbuf)
            .map_err(|source| RespError::Io {
                op: "writing commands to",
                addr: self.addr.clone(),
                source,
            })?;
        let mut replies = Vec::with_capacity(owed);
        while replies.len() < owed {
            match self.read_reply(owed - replies.len())? {
                push @ Reply::Push(_) => self.pushes.push(push),
                reply => replies.push(reply),
            }
        }
        Ok(replies)
    }

    /// Parses the next reply, reading as needed; `owed` only words the error if the
    /// server hangs up.
    fn read_reply(&mut self, owed: usize) -> Result<Reply, RespError> {
        loop {
            if self.rstart < self.rend {
                let (used, reply) = self
                    .parser
                    .feed(&self.rbuf[self.rstart..self.rend])
                    .map_err(|e| match RespError::from(e) {
                        RespError::Protocol(msg) => {
                            RespError::Protocol(format!("from {}: {msg}", self.addr))
                        }
                        e => e,
                    })?;
                self.rstart += used;
                if let Some(reply) = reply {
                    return Ok(reply);
                }
            }
            self.fill(owed)?;
        }
    }

    /// Reads at least one byte into the read buffer, making room first.
    fn fill(&mut self, owed: usize) -> Result<(), RespError> {
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend == self.rbuf.len() {
            if self.rstart > 0 {
                // Drop what the parser consumed: each byte is moved at most once per
                // reply it belongs to, since the parser consumes every complete element.
                self.rbuf.copy_within(self.rstart..self.rend, 0);
                self.rend -= self.rstart;
                self.rstart = 0;
            } else {
                let len = (self.rbuf.len() * 2).max(INITIAL_READ_BUF);
                self.rbuf.resize(len, 0);
            }
        }
        loop {
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    return Err(RespError::Closed {
                        addr: self.addr.clone(),
                        owed,
                    })
                }
                Ok(n) => {
                    self.rend += n;
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(RespError::Io {
                        op: "reading replies from",
                        addr: self.addr.clone(),
                        source,
                    })
                }
            }
        }
    }
}

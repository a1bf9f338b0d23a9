//! ZooKeeper's wire protocol (jute), the few requests a rule source needs:
//! a connection with its session, framed requests and replies, watch
//! events and pings.
//!
//! Every frame is a big-endian `i32` length and that many bytes. A client
//! opens with a `ConnectRequest` (protocol version, last zxid seen, the
//! session timeout it asks for, session id 0 for a new session, a 16-byte
//! password, read-only flag) and the server answers with the timeout it
//! grants. Then each request is a header (`xid`, opcode) and its record;
//! each reply a header (`xid`, `zxid`, error code) and, without an error,
//! its record. Replies come in the order of the requests; watch events
//! (`xid` -1) and ping replies (`xid` -2) come between them.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// `create`: a node that must not exist yet.
pub(super) const OP_CREATE: i32 = 1;
/// `exists`: a node's `Stat`, a watch on it (on its creation if missing).
pub(super) const OP_EXISTS: i32 = 3;
/// `getData`: a node's data and `Stat`, a watch on it.
pub(super) const OP_GET_DATA: i32 = 4;
/// `setData`, guarded by the version the writer read (-1: any).
pub(super) const OP_SET_DATA: i32 = 5;
/// `sync`: the server catches up with the leader.
pub(super) const OP_SYNC: i32 = 9;
/// `ping`: keeps the session alive.
const OP_PING: i32 = 11;
/// `closeSession`.
const OP_CLOSE: i32 = -11;

/// The `xid` of watch events.
const XID_EVENT: i32 = -1;
/// The `xid` of pings and their replies.
const XID_PING: i32 = -2;

/// No node at the path.
pub(super) const NO_NODE: i32 = -101;
/// The node's version is not the one the request named.
pub(super) const BAD_VERSION: i32 = -103;
/// The node exists already.
pub(super) const NODE_EXISTS: i32 = -110;

/// The watcher event state of a session the server expired.
const STATE_EXPIRED: i32 = -112;
/// The watcher event type of a change of the connection, not of a node.
const EVENT_NONE: i32 = -1;

/// How long opening a TCP connection to one server may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one request may wait for its reply, and one frame may take to
/// arrive whole once its first byte came (a frame over the size cap is
/// drained, not kept, within this time too).
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The bytes a frame may have besides a node's data: reply header (16),
/// the data's length (4), its `Stat` (68), with room to spare. Frames are
/// refused (or, for a node's data, drained unread) past the data limit
/// plus this.
pub(super) const HEADER_ALLOWANCE: usize = 1024;

/// The frames of the handshake, before any data is read.
const HANDSHAKE_CAP: usize = 1024;

/// ZooKeeper's error codes, by name, for messages.
pub(super) fn code_name(code: i32) -> String {
    let name = match code {
        -1 => "SystemError",
        -2 => "RuntimeInconsistency",
        -3 => "DataInconsistency",
        -4 => "ConnectionLoss",
        -5 => "MarshallingError",
        -6 => "Unimplemented",
        -7 => "OperationTimeout",
        -8 => "BadArguments",
        -13 => "NewConfigNoQuorum",
        -14 => "ReconfigInProgress",
        -101 => "NoNode",
        -102 => "NoAuth",
        -103 => "BadVersion",
        -108 => "NoChildrenForEphemerals",
        -110 => "NodeExists",
        -111 => "NotEmpty",
        -112 => "SessionExpired",
        -114 => "InvalidACL",
        -115 => "AuthFailed",
        -118 => "SessionMoved",
        -119 => "NotReadOnly",
        -121 => "NoWatcher",
        -123 => "QuotaExceeded",
        -124 => "Throttled",
        _ => "",
    };
    if name.is_empty() {
        format!("error {code}")
    } else {
        format!("{name} ({code})")
    }
}

/// A request's record, written in jute.
#[derive(Default)]
pub(super) struct Record(Vec<u8>);

impl Record {
    pub(super) fn int(mut self, value: i32) -> Self {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }

    fn long(mut self, value: i64) -> Self {
        self.0.extend_from_slice(&value.to_be_bytes());
        self
    }

    pub(super) fn boolean(mut self, value: bool) -> Self {
        self.0.push(u8::from(value));
        self
    }

    /// A byte buffer or a string: its length, then its bytes.
    pub(super) fn bytes(mut self, value: &[u8]) -> Self {
        let len = i32::try_from(value.len()).unwrap_or(i32::MAX);
        self = self.int(len);
        self.0.extend_from_slice(value);
        self
    }

    /// `world:anyone` may do everything (`OPEN_ACL_UNSAFE`), as a list of
    /// one ACL: what Sentinel's `ZookeeperDataSource` creates nodes with.
    pub(super) fn open_acl(self) -> Self {
        self.int(1).int(31).bytes(b"world").bytes(b"anyone")
    }
}

/// Reads a reply's record.
pub(super) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(super) fn new(body: &'a [u8]) -> Self {
        Reader(body)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("a malformed reply (shorter than its record)".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub(super) fn int(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn long(&mut self) -> Result<i64, String> {
        let hi = self.int()?;
        let lo = self.int()?;
        Ok((i64::from(hi) << 32) | i64::from(lo as u32))
    }

    /// A buffer (length -1: none, read as empty).
    pub(super) fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.int()?;
        if len < 0 {
            return Ok(&[]);
        }
        self.take(len as usize)
    }

    /// The `Stat` of a node.
    pub(super) fn stat(&mut self) -> Result<Stat, String> {
        let _czxid = self.long()?;
        let mzxid = self.long()?;
        let _ctime = self.long()?;
        let _mtime = self.long()?;
        let version = self.int()?;
        let _cversion = self.int()?;
        let _aversion = self.int()?;
        let _ephemeral_owner = self.long()?;
        let data_length = self.int()?;
        let _children = self.int()?;
        let _pzxid = self.long()?;
        Ok(Stat {
            mzxid,
            version,
            data_length,
        })
    }
}

/// What a rule source needs of a node's `Stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stat {
    /// The transaction that last changed the node.
    pub(super) mzxid: i64,
    /// The data's version, raised by every `setData`.
    pub(super) version: i32,
    /// The data's length in bytes.
    pub(super) data_length: i32,
}

/// A reply to one request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reply {
    /// Done: the reply's record.
    Done(Vec<u8>),
    /// Refused with this error code.
    Failed(i32),
    /// A reply over the frame cap, drained unread: for `getData`, the
    /// length of the node's data.
    Oversized(u64),
}

/// One connection to a server, with its session.
pub(super) struct Connection {
    stream: TcpStream,
    addr: SocketAddr,
    next_xid: i32,
    /// The session timeout the server granted.
    session_timeout: Duration,
    last_sent: Instant,
    last_heard: Instant,
    /// A watch fired since it was last taken.
    changed: bool,
    /// The largest frame kept whole; see [`HEADER_ALLOWANCE`].
    frame_cap: usize,
    /// The highest transaction id the server reported.
    zxid: i64,
}

impl Connection {
    /// Connects to `host` (`name:port`; resolved by the system's resolver,
    /// each address tried for at most [`CONNECT_TIMEOUT`]) and opens a new
    /// session asking for `session_timeout` (the server grants a timeout
    /// within its own bounds).
    pub(super) fn open(host: &str, session_timeout: Duration) -> Result<Self, String> {
        let addrs = host
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host}: {e}"))?;
        let mut last = format!("{host} resolves to no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => return Self::handshake(stream, addr, session_timeout),
                Err(e) => last = format!("cannot connect to {addr}: {e}"),
            }
        }
        Err(last)
    }

    fn handshake(
        stream: TcpStream,
        addr: SocketAddr,
        session_timeout: Duration,
    ) -> Result<Self, String> {
        let io = |e: io::Error| format!("{addr}: {e}");
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT)).map_err(io)?;
        stream
            .set_write_timeout(Some(REQUEST_TIMEOUT))
            .map_err(io)?;
        let asked = i32::try_from(session_timeout.as_millis()).unwrap_or(i32::MAX);
        let now = Instant::now();
        let mut connection = Connection {
            stream,
            addr,
            next_xid: 1,
            session_timeout,
            last_sent: now,
            last_heard: now,
            changed: false,
            frame_cap: HANDSHAKE_CAP,
            zxid: 0,
        };
        let request = Record::default()
            .int(0)
            .long(0)
            .int(asked)
            .long(0)
            .bytes(&[0; 16])
            .boolean(false);
        connection.write_frame(&request.0).map_err(io)?;
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let mut len = [0; 4];
        connection
            .read_exact_by(&mut len, deadline)
            .map_err(|e| format!("the server did not answer the session request ({e})"))?;
        let len = i32::from_be_bytes(len);
        if !(0..=HANDSHAKE_CAP as i32).contains(&len) {
            return Err(format!(
                "{addr}: a session reply of {len} bytes (at most {HANDSHAKE_CAP}): not a ZooKeeper server?"
            ));
        }
        let mut body = vec![0; len as usize];
        connection.read_exact_by(&mut body, deadline)?;
        let mut reply = Reader::new(&body);
        let _protocol = reply.int()?;
        let granted = reply.int()?;
        if granted <= 0 {
            return Err(format!("{addr}: the server refused the session"));
        }
        connection.session_timeout = Duration::from_millis(granted as u64);
        connection.last_heard = Instant::now();
        Ok(connection)
    }

    /// The session timeout the server granted.
    pub(super) fn session_timeout(&self) -> Duration {
        self.session_timeout
    }

    /// The highest transaction id the server reported so far.
    pub(super) fn zxid(&self) -> i64 {
        self.zxid
    }

    /// Frames longer than `data + HEADER_ALLOWANCE` are not kept.
    pub(super) fn set_data_cap(&mut self, data: usize) {
        self.frame_cap = data.saturating_add(HEADER_ALLOWANCE);
    }

    /// How long the server may stay silent before the connection is taken
    /// for lost: two thirds of the session timeout, as ZooKeeper's own
    /// client does (the pings every third keep an idle link talking).
    fn silence_limit(&self) -> Duration {
        self.session_timeout * 2 / 3
    }

    fn ping_interval(&self) -> Duration {
        self.session_timeout / 3
    }

    /// Whether the server has been silent so long that the session may be
    /// gone (a connection used only now and then).
    pub(super) fn is_stale(&self) -> bool {
        self.last_heard.elapsed() >= self.silence_limit()
    }

    fn write_frame(&mut self, payload: &[u8]) -> io::Result<()> {
        let len = i32::try_from(payload.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a request over 2 GiB"))?;
        let mut frame = Vec::with_capacity(4 + payload.len());
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(payload);
        // Whole within the request timeout, however slowly the server
        // takes it (a write timeout alone is per call).
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        let mut rest = frame.as_slice();
        while !rest.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("a request not taken within {REQUEST_TIMEOUT:?}"),
                ));
            }
            self.stream.set_write_timeout(Some(left))?;
            match self.stream.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.last_sent = Instant::now();
        Ok(())
    }

    /// Sends a request; its reply is [`receive`](Self::receive)d later, in
    /// the order requests were sent.
    pub(super) fn send(&mut self, op: i32, record: Record) -> Result<i32, String> {
        let xid = self.next_xid;
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        let mut payload = Vec::with_capacity(8 + record.0.len());
        payload.extend_from_slice(&xid.to_be_bytes());
        payload.extend_from_slice(&op.to_be_bytes());
        payload.extend_from_slice(&record.0);
        self.write_frame(&payload).map_err(|e| self.lost(&e))?;
        Ok(xid)
    }

    /// The reply to request `xid`; watch events met on the way are noted.
    pub(super) fn receive(&mut self, xid: i32) -> Result<Reply, String> {
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        loop {
            let frame = self.read_frame(deadline)?;
            if frame.xid == xid {
                return Ok(frame.reply);
            }
            if frame.xid != XID_PING && frame.xid != XID_EVENT {
                return Err(format!(
                    "{}: a reply to request {} where {xid} was awaited",
                    self.addr, frame.xid
                ));
            }
        }
    }

    /// Sends a request and waits for its reply.
    pub(super) fn call(&mut self, op: i32, record: Record) -> Result<Reply, String> {
        let xid = self.send(op, record)?;
        self.receive(xid)
    }

    /// Waits at most `timeout` for a watch event, pinging the server when
    /// the session needs it: `Ok(true)` when a watch fired (since the last
    /// call too), `Err` when the connection is lost, the server stays
    /// silent past [`silence_limit`](Self::silence_limit), or the session
    /// expired.
    pub(super) fn wait(&mut self, timeout: Duration) -> Result<bool, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if std::mem::take(&mut self.changed) {
                return Ok(true);
            }
            let now = Instant::now();
            let silent = now.duration_since(self.last_heard);
            if silent >= self.silence_limit() {
                return Err(format!(
                    "{}: no word from the server for {silent:?} (session timeout {:?})",
                    self.addr, self.session_timeout
                ));
            }
            if now.duration_since(self.last_sent) >= self.ping_interval() {
                let ping = Record::default().int(XID_PING).int(OP_PING);
                self.write_frame(&ping.0).map_err(|e| self.lost(&e))?;
            }
            if now >= deadline {
                return Ok(false);
            }
            let next_ping = self
                .ping_interval()
                .saturating_sub(self.last_sent.elapsed());
            let silence_left = self.silence_limit().saturating_sub(silent);
            let slice = (deadline - now)
                .min(next_ping)
                .min(silence_left)
                .max(Duration::from_millis(1));
            self.stream
                .set_read_timeout(Some(slice))
                .map_err(|e| self.lost(&e))?;
            let mut first = [0; 1];
            let peeked = self.stream.peek(&mut first);
            self.stream
                .set_read_timeout(Some(REQUEST_TIMEOUT))
                .map_err(|e| self.lost(&e))?;
            match peeked {
                Ok(0) => return Err(format!("{}: the server closed the connection", self.addr)),
                Ok(_) => {
                    let frame = self.read_frame(Instant::now() + REQUEST_TIMEOUT)?;
                    if frame.xid != XID_PING && frame.xid != XID_EVENT {
                        return Err(format!(
                            "{}: a reply to request {} nothing awaited",
                            self.addr, frame.xid
                        ));
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.lost(&e)),
            }
        }
    }

    fn lost(&self, error: &io::Error) -> String {
        format!("{}: {error}", self.addr)
    }

    /// Fills `buf` by `deadline`, however the server trickles its bytes
    /// (a read timeout alone is per call).
    fn read_exact_by(&mut self, mut buf: &mut [u8], deadline: Instant) -> Result<(), String> {
        let late = || {
            format!(
                "{}: a reply not whole within {REQUEST_TIMEOUT:?}",
                self.addr
            )
        };
        while !buf.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(late());
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| self.lost(&e))?;
            match self.stream.read(buf) {
                Ok(0) => return Err(format!("{}: the server closed the connection", self.addr)),
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(late());
                }
                Err(e) => return Err(self.lost(&e)),
            }
        }
        Ok(())
    }

    /// Reads one frame whole (or drains one over the cap), by `deadline`;
    /// a watch event is noted and returned as a frame of `xid` -1.
    fn read_frame(&mut self, deadline: Instant) -> Result<Frame, String> {
        let mut len = [0; 4];
        self.read_exact_by(&mut len, deadline)?;
        let len = i32::from_be_bytes(len);
        if len < 16 {
            return Err(format!(
                "{}: a reply frame of {len} bytes (a header is 16)",
                self.addr
            ));
        }
        let len = len as usize;
        let mut header = [0; 16];
        self.read_exact_by(&mut header, deadline)?;
        let mut head = Reader::new(&header);
        let (xid, zxid, err) = (head.int()?, head.long()?, head.int()?);
        self.last_heard = Instant::now();
        if zxid > self.zxid {
            self.zxid = zxid;
        }
        let rest = len - 16;
        let reply = if len > self.frame_cap {
            // A node's data past the limit: its length, and the rest
            // drained through a small buffer, never kept.
            let mut data_len = [0; 4];
            let mut drained = 0;
            if rest >= 4 {
                self.read_exact_by(&mut data_len, deadline)?;
                drained = 4;
            }
            let mut chunk = [0; 8192];
            while drained < rest {
                let n = (rest - drained).min(chunk.len());
                self.read_exact_by(&mut chunk[..n], deadline)?;
                drained += n;
            }
            if xid == XID_EVENT {
                return Err(format!(
                    "{}: a watch event of {len} bytes, over the frame limit",
                    self.addr
                ));
            }
            Reply::Oversized(u64::from(u32::from_be_bytes(data_len)))
        } else {
            let mut body = vec![0; rest];
            self.read_exact_by(&mut body, deadline)?;
            if xid == XID_EVENT {
                self.event(&body)?;
            }
            if err != 0 {
                Reply::Failed(err)
            } else {
                Reply::Done(body)
            }
        };
        self.last_heard = Instant::now();
        Ok(Frame { xid, reply })
    }

    /// A watch event: a node changed (noted), or the session expired.
    fn event(&mut self, body: &[u8]) -> Result<(), String> {
        let mut event = Reader::new(body);
        let kind = event.int()?;
        let state = event.int()?;
        if state == STATE_EXPIRED {
            return Err(format!("{}: the session expired", self.addr));
        }
        if kind != EVENT_NONE {
            self.changed = true;
        }
        Ok(())
    }
}

impl Drop for Connection {
    /// Closes the session at once rather than leaving the server to expire
    /// it (best effort: no wait for the reply).
    fn drop(&mut self) {
        let _ = self
            .stream
            .set_write_timeout(Some(Duration::from_millis(100)));
        let close = Record::default().int(self.next_xid).int(OP_CLOSE);
        let _ = self.write_frame(&close.0);
    }
}

struct Frame {
    xid: i32,
    reply: Reply,
}

#[cfg(test)]
mod tests;

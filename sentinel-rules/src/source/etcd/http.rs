//! A small HTTP/1.1 client for etcd's JSON gateway: `POST` with a JSON
//! body on a kept-alive connection, every read bounded in size and time.
//!
//! Bounds: connecting, each read and each write wait at most the source's
//! timeout; the status line and each header line at most [`MAX_LINE`]
//! bytes, at most [`MAX_HEADERS`] headers; a chunk-size line at most
//! [`MAX_CHUNK_LINE`] bytes. How much of a body is kept is the caller's
//! bound (see `read_capped`).

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The longest status or header line read.
pub(super) const MAX_LINE: usize = 8 * 1024;
/// The most header lines (or chunked trailer lines) read.
pub(super) const MAX_HEADERS: usize = 64;
/// The longest chunk-size line read (hex digits and extensions).
pub(super) const MAX_CHUNK_LINE: usize = 1024;
/// How much of an error answer's body is kept for the message.
const MAX_ERROR_BODY: usize = 4 * 1024;

/// One connection to the gateway.
pub(super) struct Connection {
    reader: BufReader<TcpStream>,
    /// The server said it closes the connection after this answer.
    closing: bool,
}

/// How an answer's body is framed, and how much of it is left.
pub(super) enum Body {
    /// `Content-Length`: bytes left.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunk),
}

/// Where a chunked body's decoding stands; partial lines are kept, so a
/// read that times out loses nothing.
pub(super) enum Chunk {
    Size(Vec<u8>),
    Data(u64),
    DataEnd(Vec<u8>),
    Trailer(Vec<u8>, usize),
    Done,
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, message.into())
}

impl Connection {
    /// Connects to `authority` (`host:port`), each address tried for at
    /// most `timeout`; reads and writes then wait at most `timeout`.
    pub(super) fn open(authority: &str, timeout: Duration) -> io::Result<Self> {
        let mut last = invalid(format!("{authority} resolves to no address"));
        for address in authority.to_socket_addrs()? {
            match TcpStream::connect_timeout(&address, timeout) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(timeout))?;
                    stream.set_write_timeout(Some(timeout))?;
                    stream.set_nodelay(true)?;
                    return Ok(Connection {
                        reader: BufReader::with_capacity(16 * 1024, stream),
                        closing: false,
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Whether the connection may carry another request.
    pub(super) fn reusable(&self) -> bool {
        !self.closing
    }

    pub(super) fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        let timeout = timeout.max(Duration::from_millis(1));
        self.reader.get_ref().set_read_timeout(Some(timeout))
    }

    /// Sends `POST path` with `body` and reads the answer's head: its body
    /// on success (status 200), else an error with the gateway's message.
    pub(super) fn post(&mut self, authority: &str, path: &str, body: &[u8]) -> io::Result<Body> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let stream = self.reader.get_mut();
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        stream.flush()?;
        let mut line = Vec::new();
        read_line(&mut self.reader, MAX_LINE, &mut line)?;
        let status = parse_status(&line)?;
        let mut framing = None;
        for _ in 0..=MAX_HEADERS {
            line.clear();
            read_line(&mut self.reader, MAX_LINE, &mut line)?;
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end();
            if text.is_empty() {
                let Some(body) = framing else {
                    return Err(invalid("an answer with neither a length nor chunks"));
                };
                if status != 200 {
                    return Err(self.error_answer(status, body));
                }
                return Ok(body);
            }
            let Some((name, value)) = text.split_once(':') else {
                return Err(invalid(format!("a malformed header line {text:?}")));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                let length = value
                    .parse()
                    .map_err(|_| invalid(format!("a bad Content-Length {value:?}")))?;
                framing.get_or_insert(Body::Length(length));
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                if !value.eq_ignore_ascii_case("chunked") {
                    return Err(invalid(format!("an unknown Transfer-Encoding {value:?}")));
                }
                framing = Some(Body::Chunked(Chunk::Size(Vec::new())));
            } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close")
            {
                self.closing = true;
            }
        }
        Err(invalid(format!("more than {MAX_HEADERS} header lines")))
    }

    /// A non-200 answer as an error, with the start of its body.
    fn error_answer(&mut self, status: u16, mut body: Body) -> io::Error {
        self.closing = true;
        let text = match read_capped(self, &mut body, MAX_ERROR_BODY) {
            Ok((text, _)) => String::from_utf8_lossy(&text).into_owned(),
            Err(e) => format!("(its body unread: {e})"),
        };
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or(text);
        io::Error::other(format!("the gateway answered {status}: {message}"))
    }

    /// Reads some of `body` into `buf`: `Ok(0)` at its end.
    pub(super) fn read_body(&mut self, body: &mut Body, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match body {
            Body::Length(0) => Ok(0),
            Body::Length(left) => {
                let want = usize::try_from(*left).map_or(buf.len(), |l| l.min(buf.len()));
                let n = self.reader.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(ErrorKind::UnexpectedEof.into());
                }
                *left -= n as u64;
                Ok(n)
            }
            Body::Chunked(chunk) => read_chunked(&mut self.reader, chunk, buf),
        }
    }
}

fn parse_status(line: &[u8]) -> io::Result<u16> {
    let text = String::from_utf8_lossy(line);
    let mut parts = text.split_ascii_whitespace();
    match (parts.next(), parts.next().map(str::parse::<u16>)) {
        (Some(version), Some(Ok(status))) if version.starts_with("HTTP/1.") => Ok(status),
        _ => Err(invalid(format!(
            "not an HTTP/1.1 status line: {:?}",
            text.trim_end()
        ))),
    }
}

/// Appends to `line` up to and including a `\n`, failing past `max`
/// bytes; what was read before an error (a timeout) stays in `line`.
fn read_line(reader: &mut impl BufRead, max: usize, line: &mut Vec<u8>) -> io::Result<()> {
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if line.len() + take > max {
            return Err(invalid(format!("a line longer than {max} bytes")));
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take);
        if done {
            return Ok(());
        }
    }
}

fn read_chunked(
    reader: &mut BufReader<TcpStream>,
    chunk: &mut Chunk,
    buf: &mut [u8],
) -> io::Result<usize> {
    loop {
        match chunk {
            Chunk::Size(line) => {
                read_line(reader, MAX_CHUNK_LINE, line)?;
                let text = String::from_utf8_lossy(line);
                let hex = text.split(';').next().unwrap_or("").trim();
                let size = u64::from_str_radix(hex, 16)
                    .map_err(|_| invalid(format!("a bad chunk size {hex:?}")))?;
                *chunk = if size == 0 {
                    Chunk::Trailer(Vec::new(), 0)
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::Data(left) => {
                let want = usize::try_from(*left).map_or(buf.len(), |l| l.min(buf.len()));
                let n = reader.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(ErrorKind::UnexpectedEof.into());
                }
                *left -= n as u64;
                if *left == 0 {
                    *chunk = Chunk::DataEnd(Vec::new());
                }
                return Ok(n);
            }
            Chunk::DataEnd(line) => {
                read_line(reader, MAX_CHUNK_LINE, line)?;
                if !line.trim_ascii().is_empty() {
                    return Err(invalid("a chunk longer than its size"));
                }
                *chunk = Chunk::Size(Vec::new());
            }
            Chunk::Trailer(line, count) => {
                read_line(reader, MAX_LINE, line)?;
                if line.trim_ascii().is_empty() {
                    *chunk = Chunk::Done;
                } else if *count >= MAX_HEADERS {
                    return Err(invalid(format!("more than {MAX_HEADERS} trailer lines")));
                } else {
                    line.clear();
                    *count += 1;
                }
            }
            Chunk::Done => return Ok(0),
        }
    }
}

/// Reads `body` keeping at most `cap` bytes: the whole body and `true`,
/// or its first `cap + 1` bytes (one more says it goes on) and `false`,
/// the rest left unread.
pub(super) fn read_capped(
    connection: &mut Connection,
    body: &mut Body,
    cap: usize,
) -> io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let room = (cap - out.len()).min(buf.len());
        if room == 0 {
            // One byte more says whether the body goes on.
            let mut probe = [0u8; 1];
            let n = connection.read_body(body, &mut probe)?;
            if n == 0 {
                return Ok((out, true));
            }
            out.push(probe[0]);
            return Ok((out, false));
        }
        let n = connection.read_body(body, &mut buf[..room])?;
        if n == 0 {
            return Ok((out, true));
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A server on a free port that answers the first request on its
    /// first connection with `answer`.
    fn serve(answer: Vec<u8>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(&answer);
            // Held open until the client is done.
            let _ = stream.read(&mut request);
        });
        authority
    }

    fn post(answer: &[u8]) -> io::Result<(Vec<u8>, bool)> {
        post_capped(answer, 1 << 20)
    }

    fn post_capped(answer: &[u8], cap: usize) -> io::Result<(Vec<u8>, bool)> {
        let authority = serve(answer.to_vec());
        let mut connection = Connection::open(&authority, Duration::from_secs(2))?;
        let mut body = connection.post(&authority, "/v3/kv/range", b"{}")?;
        read_capped(&mut connection, &mut body, cap)
    }

    #[test]
    fn chunked_and_sized_bodies_are_read_whole() {
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: 1\r\n\r\n";
        assert_eq!(post(chunked).unwrap(), (b"hello world".to_vec(), true));
        let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        assert_eq!(post(sized).unwrap(), (b"hello".to_vec(), true));
    }

    #[test]
    fn a_body_over_the_cap_is_cut_and_said_so() {
        let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world";
        assert_eq!(post_capped(sized, 5).unwrap(), (b"hello ".to_vec(), false));
        assert_eq!(
            post_capped(sized, 11).unwrap(),
            (b"hello world".to_vec(), true)
        );
    }

    #[test]
    fn oversized_or_malformed_heads_and_chunks_are_refused() {
        let long_header = format!(
            "HTTP/1.1 200 OK\r\nX-Long: {}\r\nContent-Length: 0\r\n\r\n",
            "a".repeat(MAX_LINE)
        );
        let many_headers = format!(
            "HTTP/1.1 200 OK\r\n{}Content-Length: 0\r\n\r\n",
            "X-A: 1\r\n".repeat(MAX_HEADERS + 1)
        );
        let long_chunk_line = format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;{}\r\na\r\n0\r\n\r\n",
            "x".repeat(MAX_CHUNK_LINE)
        );
        let cases: [(&[u8], &str); 7] = [
            (long_header.as_bytes(), "a line longer than 8192 bytes"),
            (many_headers.as_bytes(), "more than 64 header lines"),
            (long_chunk_line.as_bytes(), "a line longer than 1024 bytes"),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "a bad chunk size",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
                "longer than its size",
            ),
            (b"HTTP/1.1 200 OK\r\n\r\n", "neither a length nor chunks"),
            (b"SSH-2.0-OpenSSH\r\n", "not an HTTP/1.1 status line"),
        ];
        for (answer, why) in cases {
            let error = post(answer).unwrap_err().to_string();
            assert!(error.contains(why), "{why}: {error}");
        }
    }

    #[test]
    fn an_error_answer_gives_the_gateways_message() {
        let body = r#"{"error":"etcdserver: mvcc: required revision has been compacted","message":"etcdserver: mvcc: required revision has been compacted","code":11}"#;
        let answer = format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let error = post(answer.as_bytes()).unwrap_err().to_string();
        assert_eq!(
            error,
            "the gateway answered 400: etcdserver: mvcc: required revision has been compacted"
        );
    }
}

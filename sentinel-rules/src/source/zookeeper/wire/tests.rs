//! The client against a scripted server: what a real ZooKeeper seldom
//! does on demand (a reply past the limit, a malformed frame, silence).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Connection, OP_GET_DATA, Record, Reply};

/// A server on a free loopback port running `script` on its one
/// connection, after answering the session request with `granted` ms.
fn server(
    granted: i32,
    script: impl FnOnce(&mut TcpStream) + Send + 'static,
) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let thread = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let request = frame(&mut stream);
        assert_eq!(
            request.len(),
            4 + 8 + 4 + 8 + 4 + 16 + 1,
            "a ConnectRequest"
        );
        let reply = Record::default()
            .int(0)
            .int(granted)
            .long(7)
            .bytes(&[0; 16])
            .boolean(false);
        send(&mut stream, &reply.0);
        script(&mut stream);
    });
    (addr, thread)
}

fn frame(stream: &mut TcpStream) -> Vec<u8> {
    let mut len = [0; 4];
    stream.read_exact(&mut len).unwrap();
    let mut body = vec![0; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).unwrap();
    body
}

fn send(stream: &mut TcpStream, payload: &[u8]) {
    let mut out = (payload.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    stream.write_all(&out).unwrap();
}

fn xid_of(request: &[u8]) -> i32 {
    i32::from_be_bytes([request[0], request[1], request[2], request[3]])
}

fn header(xid: i32, err: i32) -> Record {
    Record::default().int(xid).long(42).int(err)
}

fn stat(data_length: i32) -> Record {
    Record::default()
        .long(1)
        .long(2)
        .long(0)
        .long(0)
        .int(3)
        .int(0)
        .int(0)
        .long(0)
        .int(data_length)
        .int(0)
        .long(2)
}

fn get_data_reply(xid: i32, data: &[u8]) -> Vec<u8> {
    let mut reply = header(xid, 0).bytes(data).0;
    reply.extend_from_slice(&stat(data.len() as i32).0);
    reply
}

#[test]
fn a_data_reply_over_the_cap_is_drained_unread_and_the_connection_stays_usable() {
    let (addr, thread) = server(4000, |stream| {
        let request = frame(stream);
        send(stream, &get_data_reply(xid_of(&request), &[b'x'; 50_000]));
        let request = frame(stream);
        send(stream, &get_data_reply(xid_of(&request), b"small"));
    });
    let mut connection = Connection::open(&addr, Duration::from_secs(4)).unwrap();
    assert_eq!(connection.session_timeout(), Duration::from_secs(4));
    connection.set_data_cap(100);
    let get = || Record::default().bytes(b"/a").boolean(true);
    assert_eq!(
        connection.call(OP_GET_DATA, get()).unwrap(),
        Reply::Oversized(50_000)
    );
    let Reply::Done(body) = connection.call(OP_GET_DATA, get()).unwrap() else {
        panic!("the second reply is not read");
    };
    assert_eq!(super::Reader::new(&body).bytes().unwrap(), b"small");
    assert_eq!(connection.zxid(), 42);
    thread.join().unwrap();
}

#[test]
fn a_frame_shorter_than_a_reply_header_loses_the_connection() {
    let (addr, thread) = server(4000, |stream| {
        let _ = frame(stream);
        stream.write_all(&3i32.to_be_bytes()).unwrap();
        stream.write_all(&[0; 3]).unwrap();
    });
    let mut connection = Connection::open(&addr, Duration::from_secs(4)).unwrap();
    let error = connection
        .call(OP_GET_DATA, Record::default().bytes(b"/a").boolean(true))
        .unwrap_err();
    assert!(error.contains("a reply frame of 3 bytes"), "{error}");
    thread.join().unwrap();
}

#[test]
fn a_session_reply_past_its_cap_is_refused_unread() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let thread = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let _ = frame(&mut stream);
        stream.write_all(&(1i32 << 30).to_be_bytes()).unwrap();
    });
    let error = Connection::open(&addr, Duration::from_secs(4))
        .err()
        .unwrap();
    assert!(error.contains("not a ZooKeeper server?"), "{error}");
    thread.join().unwrap();
}

#[test]
fn a_watch_event_before_a_reply_is_noted_for_the_next_wait() {
    let (addr, thread) = server(4000, |stream| {
        let request = frame(stream);
        let event = header(-1, 0).int(3).int(3).bytes(b"/a");
        send(stream, &event.0);
        send(stream, &get_data_reply(xid_of(&request), b"v"));
    });
    let mut connection = Connection::open(&addr, Duration::from_secs(4)).unwrap();
    connection.set_data_cap(100);
    let reply = connection
        .call(OP_GET_DATA, Record::default().bytes(b"/a").boolean(true))
        .unwrap();
    assert!(matches!(reply, Reply::Done(_)));
    assert_eq!(connection.wait(Duration::ZERO), Ok(true));
    assert_eq!(connection.wait(Duration::ZERO), Ok(false));
    thread.join().unwrap();
}

#[test]
fn an_idle_session_is_pinged_within_its_timeout_and_kept() {
    let (addr, thread) = server(600, |stream| {
        // Every ping answered until the session is closed.
        let mut pings = 0;
        loop {
            let request = frame(stream);
            if request[4..8] == (-11i32).to_be_bytes() {
                break;
            }
            assert_eq!(xid_of(&request), -2);
            assert_eq!(&request[4..8], &11i32.to_be_bytes());
            send(stream, &header(-2, 0).0);
            pings += 1;
        }
        // Each within a third of 600 ms.
        assert!(pings >= 6, "{pings} pings in 1.5 s of a 600 ms session");
    });
    let mut connection = Connection::open(&addr, Duration::from_secs(30)).unwrap();
    assert_eq!(connection.session_timeout(), Duration::from_millis(600));
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        assert_eq!(connection.wait(Duration::from_millis(100)), Ok(false));
    }
    drop(connection);
    thread.join().unwrap();
}

#[test]
fn a_server_silent_past_two_thirds_of_the_session_timeout_loses_the_connection() {
    let (addr, thread) = server(600, |stream| {
        // Reads the pings, answers none.
        let _ = frame(stream);
        std::thread::sleep(Duration::from_millis(800));
    });
    let mut connection = Connection::open(&addr, Duration::from_secs(30)).unwrap();
    let start = Instant::now();
    let error = loop {
        match connection.wait(Duration::from_millis(100)) {
            Ok(false) => assert!(start.elapsed() < Duration::from_secs(2)),
            other => break other.unwrap_err(),
        }
    };
    assert!(error.contains("no word from the server"), "{error}");
    assert!(
        start.elapsed() >= Duration::from_millis(390),
        "{:?}",
        start.elapsed()
    );
    thread.join().unwrap();
}

#[test]
fn a_session_the_server_expired_is_an_error() {
    let (addr, thread) = server(4000, |stream| {
        let event = header(-1, 0).int(-1).int(-112).bytes(b"");
        send(stream, &event.0);
    });
    let mut connection = Connection::open(&addr, Duration::from_secs(4)).unwrap();
    let error = connection.wait(Duration::from_secs(2)).unwrap_err();
    assert!(error.contains("the session expired"), "{error}");
    thread.join().unwrap();
}

#[test]
fn a_reply_trickled_a_byte_at_a_time_is_given_up_within_the_request_timeout() {
    let (addr, thread) = server(4000, |stream| {
        let request = frame(stream);
        let reply = get_data_reply(xid_of(&request), &[b'x'; 64]);
        let mut out = (reply.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&reply);
        // A byte every 300 ms: each read waits less than its timeout.
        for byte in out {
            if stream.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    let mut connection = Connection::open(&addr, Duration::from_secs(4)).unwrap();
    connection.set_data_cap(100);
    let start = Instant::now();
    let error = connection
        .call(OP_GET_DATA, Record::default().bytes(b"/a").boolean(true))
        .unwrap_err();
    let took = start.elapsed();
    assert!(error.contains("not whole within"), "{error}");
    assert!(
        took < super::REQUEST_TIMEOUT + Duration::from_millis(500),
        "{took:?}"
    );
    drop(connection);
    thread.join().unwrap();
}

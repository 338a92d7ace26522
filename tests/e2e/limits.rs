//! Input and limits, through the real binary: the name rule on every name
//! a request brings in (topics, racks, param keys, assignor references,
//! module names and versions), an upload body cut short, the caps on
//! groups and on uploaded modules, and the connection cap printed at start
//! as the docs give its formula.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use common::{ADMIN_TOKEN, Server};
use serde_json::Value;

/// A raw TCP connection to `server`.
fn connect(server: &Server) -> TcpStream {
    let address = server.base.strip_prefix("http://").expect("http base");
    let stream = TcpStream::connect(address).expect("connect");
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads until the server closes `stream` (EOF or reset); panics if it is
/// still open at `deadline`.
fn read_until_closed(stream: &mut TcpStream, deadline: Instant) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the server did not close the connection");
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return received,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("reading: {e}"),
        }
    }
}

#[test]
fn an_upload_body_cut_short_is_400_incomplete_body_not_413() {
    let server = Server::start(&common::scratch("limits-short-upload"), &[]);
    let mut stream = connect(&server);
    let head = format!(
        "POST /v1/assignors?name=short&version=1 HTTP/1.1\r\nhost: test\r\n\
         authorization: Bearer {ADMIN_TOKEN}\r\ncontent-type: application/wasm\r\n\
         content-length: 1000\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(b"\0asm\x0d\0\x01\0\0\0").unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    let received = read_until_closed(&mut stream, Instant::now() + Duration::from_secs(30));
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    let body: Value = serde_json::from_str(text.split_once("\r\n\r\n").expect("a body").1)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(body["error"]["code"], "incomplete_body", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("cut short"), "{message}");
    let (status, list) = server.call("GET", "/v1/assignors", None);
    assert_eq!(status, 200);
    assert!(
        list["assignors"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["name"] != "short"),
        "nothing stored: {list}"
    );
}

//! One watcher's HTTP/1.1 connection, kept alive and written by hand: a
//! GET, then the answer's head and its `Content-Length` body. A pooled
//! client may open a second connection when a watcher asks again before
//! its answer's connection went back to the pool, so ten thousand
//! watchers would hold more than ten thousand connections, and the
//! host's memory per watcher would count the extra ones. It owns the
//! socket and its read buffer; nothing else about the host.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest answer head read.
const HEAD_BYTES_MAX: usize = 16 * 1024;
/// The longest answer body read (a table of a big group is kilobytes).
const BODY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// An answer: its status, `Retry-After` if any, and its body.
pub(super) struct Answer {
    pub status: u16,
    pub retry_after: Option<Duration>,
    pub body: Vec<u8>,
}

/// A kept-alive connection to one host, opened on first use and again
/// after the host closed it.
pub(super) struct Connection {
    /// `host:port`.
    authority: String,
    stream: Option<TcpStream>,
    buffer: Vec<u8>,
}

impl Connection {
    /// A connection to `http://host:port` (no TLS).
    pub fn new(base_url: &str) -> Result<Self, String> {
        let authority = base_url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{base_url}: the watchers speak plain http:// only"))?
            .trim_end_matches('/');
        Ok(Connection {
            authority: authority.to_owned(),
            stream: None,
            buffer: Vec::new(),
        })
    }

    /// `GET path` with a bearer token; on any failure the connection is
    /// dropped (the next request opens another).
    pub async fn get(&mut self, path: &str, token: &str) -> Result<Answer, String> {
        let answer = self.exchange(path, token).await;
        if answer.is_err() {
            self.stream = None;
        }
        answer
    }

    async fn exchange(&mut self, path: &str, token: &str) -> Result<Answer, String> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(&self.authority)
                .await
                .map_err(|e| format!("connect {}: {e}", self.authority))?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            self.stream = Some(stream);
            self.buffer.clear();
        }
        let stream = self.stream.as_mut().expect("connected above");
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {token}\r\n\r\n",
            self.authority
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let head_len = read_head(stream, &mut self.buffer).await?;
        let head = std::str::from_utf8(&self.buffer[..head_len])
            .map_err(|_| "an answer head that is not UTF-8".to_owned())?;
        let parsed = Head::parse(head)?;
        let body_len = parsed.content_length;
        while self.buffer.len() < head_len + body_len {
            read_more(stream, &mut self.buffer).await?;
        }
        let body = self.buffer[head_len..head_len + body_len].to_vec();
        self.buffer.drain(..head_len + body_len);
        if parsed.close {
            self.stream = None;
        }
        Ok(Answer {
            status: parsed.status,
            retry_after: parsed.retry_after,
            body,
        })
    }
}

/// Reads until the buffer holds a whole head; returns its length with the
/// blank line.
async fn read_head(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<usize, String> {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(end + 4);
        }
        if buffer.len() > HEAD_BYTES_MAX {
            return Err("an answer head past 16 KiB".into());
        }
        read_more(stream, buffer).await?;
    }
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<(), String> {
    let mut chunk = [0u8; 16 * 1024];
    let read = stream
        .read(&mut chunk)
        .await
        .map_err(|e| format!("read: {e}"))?;
    if read == 0 {
        return Err("the host closed the connection".into());
    }
    buffer.extend_from_slice(&chunk[..read]);
    Ok(())
}

/// What a watcher needs of an answer's head.
#[derive(Debug, PartialEq)]
struct Head {
    status: u16,
    content_length: usize,
    retry_after: Option<Duration>,
    /// `Connection: close`: the host closes after this answer.
    close: bool,
}

impl Head {
    fn parse(head: &str) -> Result<Head, String> {
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.strip_prefix("HTTP/1.1 "))
            .and_then(|rest| rest.get(..3)?.parse().ok())
            .ok_or_else(|| format!("not an HTTP/1.1 status line: {head:.40}"))?;
        let mut parsed = Head {
            status,
            content_length: 0,
            retry_after: None,
            close: false,
        };
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                parsed.content_length = value
                    .parse()
                    .ok()
                    .filter(|&n| n <= BODY_BYTES_MAX)
                    .ok_or_else(|| format!("content-length {value:?}"))?;
            } else if name.eq_ignore_ascii_case("retry-after") {
                parsed.retry_after = value.parse().ok().map(Duration::from_secs);
            } else if name.eq_ignore_ascii_case("connection") {
                parsed.close = value.eq_ignore_ascii_case("close");
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err("a chunked answer: the watchers read Content-Length bodies".into());
            }
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Head;

    #[test]
    fn an_answer_head_gives_its_status_length_retry_and_close() {
        let head = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nContent-Length: 42\r\nretry-after: 2\r\nconnection: close\r\n\r\n";
        assert_eq!(
            Head::parse(head),
            Ok(Head {
                status: 503,
                content_length: 42,
                retry_after: Some(Duration::from_secs(2)),
                close: true,
            })
        );
        let chunked = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        assert!(Head::parse(chunked).is_err());
        assert!(Head::parse("SSH-2.0\r\n\r\n").is_err());
    }
}

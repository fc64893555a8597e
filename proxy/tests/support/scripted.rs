//! A scripted HTTP/1.1 backend that answers with exact bytes and records the raw requests it
//! read, and raw-socket helpers for clients that must send or read exact bytes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::DEADLINE;

/// What a scripted backend answers to one request: the exact bytes, and whether it closes
/// the connection after them.
pub struct Answer {
    /// The bytes written.
    pub bytes: Vec<u8>,
    /// Whether the connection closes after them.
    pub close: bool,
}

impl Answer {
    /// These bytes, and the connection stays open.
    pub fn keep(bytes: &str) -> Self {
        Self {
            bytes: bytes.as_bytes().to_vec(),
            close: false,
        }
    }

    /// These bytes, then the connection closes.
    pub fn close(bytes: &str) -> Self {
        Self {
            bytes: bytes.as_bytes().to_vec(),
            close: true,
        }
    }
}

/// One request a scripted backend read: its connection's number and its raw bytes.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The backend connection it came on, from 1.
    pub conn: usize,
    /// Its head.
    pub head: String,
    /// Its body (de-chunked).
    pub body: Vec<u8>,
}

/// A backend answering the `n`th request (over all connections, from 0) with `script(n)`.
pub struct Scripted {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    /// Starts it on a fresh port.
    pub async fn start(script: impl Fn(usize, &Seen) -> Answer + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let all = Arc::clone(&seen);
        tokio::spawn(async move {
            let mut conns = 0;
            // Ends with the test's runtime.
            while let Ok((stream, _)) = listener.accept().await {
                conns += 1;
                tokio::spawn(serve(stream, conns, Arc::clone(&all), Arc::clone(&script)));
            }
        });
        Self { addr, seen }
    }

    /// A backend answering the `n`th request with the body `r{n}`, keeping the connection.
    pub async fn numbered() -> Self {
        Self::start(|n, _| {
            Answer::keep(&format!("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nr{n}"))
        })
        .await
    }

    /// The requests read so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }
}

/// Serves one backend connection: reads request heads (and `Content-Length` bodies) and
/// answers each by the script.
async fn serve(
    mut stream: TcpStream,
    conn: usize,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<impl Fn(usize, &Seen) -> Answer + Send + Sync + 'static>,
) {
    let mut buf = Vec::new();
    loop {
        let (head_len, length, chunked) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            if let Ok(httparse::Status::Complete(n)) = req.parse(&buf) {
                let value = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| String::from_utf8_lossy(h.value).into_owned())
                };
                let length = value("content-length").map_or(0, |v| v.parse().expect("length"));
                break (n, length, value("transfer-encoding").is_some());
            }
            if !read_more(&mut stream, &mut buf).await {
                return;
            }
        };
        // A chunked body (the test's chunks have no extensions or trailers) ends at `0\r\n\r\n`.
        let body_len = if chunked {
            loop {
                let body = &buf[head_len..];
                if let Some(end) = body.windows(5).position(|w| w == b"0\r\n\r\n") {
                    break end + 5;
                }
                if !read_more(&mut stream, &mut buf).await {
                    return;
                }
            }
        } else {
            length
        };
        while buf.len() < head_len + body_len {
            if !read_more(&mut stream, &mut buf).await {
                return;
            }
        }
        let raw = &buf[head_len..head_len + body_len];
        let request = Seen {
            conn,
            head: String::from_utf8_lossy(&buf[..head_len]).into_owned(),
            body: if chunked { dechunk(raw) } else { raw.to_vec() },
        };
        buf.drain(..head_len + body_len);
        let answer = {
            let mut all = seen.lock().expect("seen");
            let answer = script(all.len(), &request);
            all.push(request);
            answer
        };
        if stream.write_all(&answer.bytes).await.is_err() || answer.close {
            return;
        }
    }
}

/// Reads more bytes into `buf`: false at the end of the stream.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0_u8; 4096];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

/// The data of a chunked body without extensions or trailers.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    // Bounded: every round consumes a chunk of `raw` or ends.
    loop {
        let line = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("size line");
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line]).expect("hex"), 16)
            .expect("size");
        if size == 0 {
            return data;
        }
        data.extend_from_slice(&raw[line + 2..line + 2 + size]);
        raw = &raw[line + 4 + size..];
    }
}

/// Reads from `client` until `buf` holds `want` (a substring), within the deadline.
pub async fn read_until(client: &mut TcpStream, buf: &mut Vec<u8>, want: &str) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let shown = |buf: &[u8]| {
        let text = String::from_utf8_lossy(buf).into_owned();
        text.chars().take(600).collect::<String>()
    };
    // Bounded by the deadline.
    while !String::from_utf8_lossy(buf).contains(want) {
        let mut chunk = [0_u8; 4096];
        let read = tokio::time::timeout_at(deadline, client.read(&mut chunk)).await;
        match read {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            Ok(_) => panic!("closed before {want:?}: {:?}", shown(buf)),
            Err(_) => panic!("no {want:?} in time: {:?}", shown(buf)),
        }
    }
}

/// Writes `text` to the proxy.
pub async fn send(client: &mut TcpStream, text: &str) {
    client.write_all(text.as_bytes()).await.expect("write");
}

/// Reads until the proxy closes the connection; returns everything read.
pub async fn read_to_close(client: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(DEADLINE, client.read_to_end(&mut bytes)).await;
    assert!(read.is_ok(), "the proxy did not close the connection");
    String::from_utf8_lossy(&bytes).into_owned()
}

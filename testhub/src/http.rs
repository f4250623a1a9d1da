//! A small blocking HTTP/1.1 client over a Unix socket, for the daemon's inference endpoint
//! (the tests and the chaos runner): one request per connection (`connection: close`), the
//! head parsed, the body handed over chunk by chunk as it arrives (chunked transfer decoded).
//! It tells a body that ended properly from one cut short, which is what a caller checking
//! "never a cut answer passed off as whole" needs.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A response's status line and headers (names lowercased).
#[derive(Clone, Debug)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn cut(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, what.to_string())
}

/// Send `method path` with `body` (JSON) to the HTTP server on `socket`, waiting at most
/// `timeout` for each read. Every piece of the body goes to `each` as it arrives. `Ok` only
/// for a body that ended properly (its last chunk, its whole `content-length`, or the close of
/// a body without either); a body cut short is `UnexpectedEof`, with `each` having seen what
/// came.
pub fn send(
    socket: &Path,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
    mut each: impl FnMut(&[u8]),
) -> io::Result<Head> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut r = BufReader::new(s);
    let head = read_head(&mut r)?;
    if head
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        read_chunked(&mut r, &mut each)?;
    } else if let Some(n) = head
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut buf = vec![0; n];
        r.read_exact(&mut buf)?;
        each(&buf);
    } else {
        let mut buf = Vec::new();
        r.read_to_end(&mut buf)?;
        each(&buf);
    }
    Ok(head)
}

fn read_line(r: &mut impl BufRead, what: &str) -> io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(cut(what));
    }
    Ok(line)
}

fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let line = read_line(r, "the connection closed before the status line")?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(r, "the connection closed in the headers")?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok(Head { status, headers })
}

fn read_chunked(r: &mut impl BufRead, each: &mut impl FnMut(&[u8])) -> io::Result<()> {
    loop {
        let size = read_line(r, "the body was cut before its last chunk")?;
        let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| bad(format!("bad chunk size {size:?}")))?;
        if n == 0 {
            // Trailers (none expected), then the empty line.
            while !read_line(r, "the body was cut in its trailer")?
                .trim_end()
                .is_empty()
            {}
            return Ok(());
        }
        let mut chunk = vec![0; n];
        r.read_exact(&mut chunk)?;
        let mut crlf = [0; 2];
        r.read_exact(&mut crlf)?;
        each(&chunk);
    }
}

//! `Content-Length` framing (LSP base protocol, also used by DAP), with a cap on the frame
//! size: servers do write garbage to stdout, and a bogus length must not make us allocate it.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Default cap on one frame's payload (64 MiB: rust-analyzer's semantic tokens of a large file
/// run to a few MiB; nothing legitimate comes near this).
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024 * 1024;

/// Longest header line accepted.
const MAX_HEADER_LINE: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the cap of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("malformed frame header: {0}")]
    BadHeader(String),
    #[error("stream ended inside a frame")]
    Truncated,
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// The next frame's payload from a child's output, skipping (and logging) stray lines such
/// as crash reports or debug prints; `Err(reason)` once the stream is over or unreadable.
/// The one read loop of the LSP and DAP transports.
///
/// # Cancel safety
///
/// Not cancel safe, like [`read_frame`].
pub async fn next_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    label: &str,
) -> Result<Vec<u8>, String> {
    loop {
        match read_frame(reader, max).await {
            Ok(Some(payload)) => return Ok(payload),
            Ok(None) => return Err("end of stream".to_string()),
            Err(FrameError::BadHeader(what)) => {
                tracing::warn!(label, what, "garbage on the child's output; skipped");
            }
            Err(e) => return Err(format!("unreadable output: {e}")),
        }
    }
}

/// Reads one frame's payload; `Ok(None)` at a clean end of stream (between frames).
///
/// # Cancel safety
///
/// Not cancel safe: a frame half read is lost. The transport calls it from one task that
/// owns the reader and never drops the future midway.
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, FrameError> {
    let mut length: Option<usize> = None;
    let mut line = Vec::new();
    let mut first = true;
    loop {
        line.clear();
        let n = (&mut *reader)
            .take(MAX_HEADER_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return if first {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        if line.len() > MAX_HEADER_LINE {
            return Err(FrameError::BadHeader(format!(
                "header line longer than {MAX_HEADER_LINE} bytes"
            )));
        }
        first = false;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(FrameError::BadHeader(format!("{:?}", truncate(text))));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let len: usize = value.trim().parse().map_err(|_| {
                FrameError::BadHeader(format!("bad Content-Length {:?}", truncate(value)))
            })?;
            if len > max {
                return Err(FrameError::TooLarge { len, max });
            }
            length = Some(len);
        }
        // Other headers (Content-Type) are accepted and ignored.
    }
    let Some(len) = length else {
        return Err(FrameError::BadHeader("no Content-Length header".into()));
    };
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    })?;
    Ok(Some(payload))
}

/// Writes one frame and flushes it.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    payload: &[u8],
) -> std::io::Result<()> {
    let header = format!("Content-Length: {}\r\n\r\n", payload.len());
    let mut frame = Vec::with_capacity(header.len() + payload.len());
    frame.extend_from_slice(header.as_bytes());
    frame.extend_from_slice(payload);
    writer.write_all(&frame).await?;
    writer.flush().await
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn read_all(bytes: &[u8], max: usize) -> Vec<Result<Option<Vec<u8>>, String>> {
        let mut r = BufReader::new(bytes);
        let mut out = Vec::new();
        loop {
            let item = read_frame(&mut r, max).await.map_err(|e| e.to_string());
            let stop = !matches!(item, Ok(Some(_)));
            out.push(item);
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn reads_frames_with_and_without_content_type() {
        let bytes = b"Content-Length: 2\r\n\r\n{}Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 4\r\n\r\nnull";
        let frames = read_all(bytes, 100).await;
        assert_eq!(frames[0], Ok(Some(b"{}".to_vec())));
        assert_eq!(frames[1], Ok(Some(b"null".to_vec())));
        assert_eq!(frames[2], Ok(None));
    }

    #[tokio::test]
    async fn caps_the_length_and_rejects_garbage() {
        let frames = read_all(b"Content-Length: 999999999\r\n\r\n", 1000).await;
        assert!(frames[0].as_ref().unwrap_err().contains("exceeds the cap"));
        let frames = read_all(b"hello world\r\n\r\n", 1000).await;
        assert!(frames[0].as_ref().unwrap_err().contains("malformed"));
        let frames = read_all(b"Content-Length: 10\r\n\r\nabc", 1000).await;
        assert!(frames[0].as_ref().unwrap_err().contains("ended inside"));
        let frames = read_all(b"Content-Length: x\r\n\r\n", 1000).await;
        assert!(
            frames[0]
                .as_ref()
                .unwrap_err()
                .contains("bad Content-Length")
        );
        let long = vec![b'a'; 5000];
        let frames = read_all(&long, 1000).await;
        assert!(frames[0].as_ref().unwrap_err().contains("longer than"));
    }

    #[tokio::test]
    async fn write_then_read_round_trips() {
        let mut buf = Vec::new();
        write_frame(&mut buf, "{\"한\":1}".as_bytes())
            .await
            .unwrap();
        let frames = read_all(&buf, 100).await;
        assert_eq!(frames[0], Ok(Some("{\"한\":1}".as_bytes().to_vec())));
    }
}

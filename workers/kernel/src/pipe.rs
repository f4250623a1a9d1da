//! The kernel pipe: length-prefixed JSON frames between the daemon and an embedded driver,
//! over the child's own stdin and stdout. Private to this crate and the two driver scripts;
//! never seen by clients.
//!
//! A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. Frames from a
//! driver are capped ([`MAX_FRAME`]); a longer or undecodable frame means the driver is broken,
//! and the kernel is ended rather than resynchronised.
//!
//! No port and no secret: a kernel speaks only over its own stdin and stdout. The drivers move the
//! protocol off fds 0 and 1 before any cell runs (private duplicates; fd 0 then reads `/dev/null`
//! and fd 1 writes to fd 2; the Node driver gets fds 3 and 4 from its `sh` wrapper), so a cell, a
//! subprocess or native code writing to a file descriptor can never corrupt the pipe: that output
//! reaches the daemon through stderr. Besides `protocol`'s wire types and the read-only config
//! file, this pipe is the one serde-encoded channel, private between the daemon and its drivers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use tokio::io::AsyncReadExt;

use crate::{KernelError, Result};

/// Cap on one frame from a driver (figures travel as base64 PNG inside frames).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Daemon → driver.
#[derive(Debug, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ToKernel<'a> {
    /// Run one cell. `rows` bounds table renderings (pandas).
    Exec {
        cell: u64,
        code: &'a str,
        rows: u32,
        /// TypeScript: the driver strips the types first.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        typescript: bool,
    },
    /// The caller of cell N went away: skip it if it has not started (a started cell is
    /// interrupted with SIGINT).
    Cancel { cell: u64 },
    /// The answer to a `bridge` request: exactly one of `ok` and `err`.
    BridgeResult {
        id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        ok: Option<Json>,
        #[serde(skip_serializing_if = "Option::is_none")]
        err: Option<Json>,
    },
}

/// Driver → daemon.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromKernel {
    /// The driver is up; sent once, first.
    Ready {
        pid: u32,
        version: String,
        executable: String,
    },
    /// Text a cell wrote to stdout or stderr.
    Stream {
        cell: Option<u64>,
        name: String,
        text: String,
    },
    /// A rich output: a MIME bundle (`text/plain`, `text/html`, `image/png` as base64, ...).
    /// `result` marks the echo of the cell's last expression.
    Display {
        cell: Option<u64>,
        data: Map<String, Json>,
        #[serde(default)]
        result: bool,
    },
    /// The cell raised.
    Error {
        cell: Option<u64>,
        ename: String,
        evalue: String,
        traceback: String,
    },
    /// `tool(name, args)` inside a cell.
    Bridge {
        cell: Option<u64>,
        id: u64,
        tool: String,
        args: Json,
    },
    /// The cell finished: `ok`, `error` or `interrupted`.
    Done { cell: u64, status: String },
}

/// One encoded frame.
pub(crate) fn encode(msg: &ToKernel<'_>) -> Vec<u8> {
    // Serializing these plain types cannot fail.
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Reads frames from a driver's stdout.
pub(crate) struct FrameReader<R> {
    inner: R,
}

impl<R: AsyncReadExt + Unpin> FrameReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        FrameReader { inner }
    }

    /// The next frame; `Ok(None)` at a clean end of stream.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a frame half read is lost. It runs in its own task, never in a
    /// `select!`.
    pub(crate) async fn next(&mut self) -> Result<Option<FromKernel>> {
        let mut head = [0u8; 4];
        match self.inner.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(KernelError::Protocol(format!("reading a frame: {e}"))),
        }
        let len = u32::from_be_bytes(head) as usize;
        if len > MAX_FRAME {
            return Err(KernelError::Protocol(format!(
                "the driver sent a frame of {len} bytes (the cap is {MAX_FRAME}); its first bytes were {:?}",
                String::from_utf8_lossy(&head)
            )));
        }
        let mut body = vec![0u8; len];
        self.inner
            .read_exact(&mut body)
            .await
            .map_err(|e| KernelError::Protocol(format!("reading a frame of {len} bytes: {e}")))?;
        serde_json::from_slice(&body).map(Some).map_err(|e| {
            let shown: String = String::from_utf8_lossy(&body).chars().take(120).collect();
            KernelError::Protocol(format!("an undecodable frame ({e}): {shown:?}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn frames_round_trip_and_garbage_is_refused() {
        let exec = encode(&ToKernel::Exec {
            cell: 3,
            code: "1+1",
            rows: 50,
            typescript: false,
        });
        assert_eq!(&exec[..4], &((exec.len() - 4) as u32).to_be_bytes());
        let body: Json = serde_json::from_slice(&exec[4..]).unwrap();
        assert_eq!(
            body,
            json!({"op": "exec", "cell": 3, "code": "1+1", "rows": 50})
        );
        let result = encode(&ToKernel::BridgeResult {
            id: 1,
            ok: Some(json!({"a": 1})),
            err: None,
        });
        let body: Json = serde_json::from_slice(&result[4..]).unwrap();
        assert_eq!(
            body,
            json!({"op": "bridge_result", "id": 1, "ok": {"a": 1}})
        );

        let mut bytes = Vec::new();
        for msg in [
            json!({"op": "done", "cell": 1, "status": "ok"}),
            json!({"op": "stream", "cell": null, "name": "stdout", "text": "hi"}),
        ] {
            let body = serde_json::to_vec(&msg).unwrap();
            bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
            bytes.extend_from_slice(&body);
        }
        let mut reader = FrameReader::new(&bytes[..]);
        assert_eq!(
            reader.next().await.unwrap(),
            Some(FromKernel::Done {
                cell: 1,
                status: "ok".into()
            })
        );
        assert!(matches!(
            reader.next().await.unwrap(),
            Some(FromKernel::Stream { cell: None, .. })
        ));
        assert_eq!(reader.next().await.unwrap(), None);

        let garbage = b"hello world, not a frame";
        let err = FrameReader::new(&garbage[..]).next().await.unwrap_err();
        assert!(err.to_string().contains("cap"), "{err}");
        let mut bad = 5u32.to_be_bytes().to_vec();
        bad.extend_from_slice(b"{nope");
        let err = FrameReader::new(&bad[..]).next().await.unwrap_err();
        assert!(err.to_string().contains("undecodable"), "{err}");
    }
}

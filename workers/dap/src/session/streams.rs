//! A debug adapter's byte streams other than DAP: its stderr (a tail kept for crash
//! reports), and for a `tcp-listen` adapter (delve) its stdout: the loopback address it
//! prints (read within `start_timeout_s`, then connected to) and, after it, the program's
//! output.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, oneshot, watch};
use toolvisor_kit::process::ExitStatus;
use toolvisor_protocol::{ErrorKind, ToolError};

use super::{Session, lock};
use crate::adapters::Resolved;

/// Bytes of the adapter's own stderr kept for crash reports.
const TAIL_BYTES: usize = 4096;
/// Bytes a `tcp-listen` adapter may print before the address it listens on.
const ADDRESS_SEARCH_BYTES: usize = 64 * 1024;

pub(super) async fn read_stderr(mut rx: tokio::net::unix::pipe::Receiver, session: Arc<Session>) {
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match rx.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        tracing::debug!(session = session.id, stderr = %text.trim_end(), "debug adapter stderr");
        let mut tail = lock(&session.stderr_tail);
        tail.push_str(&text);
        if tail.len() > TAIL_BYTES * 2 {
            let mut cut = tail.len() - TAIL_BYTES;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.drain(..cut);
        }
    }
}

/// What a `tcp-listen` adapter printed before its address; `None` on end of stream.
enum Heard {
    /// The address, and the bytes after its line (the program's output already).
    At(SocketAddr, Vec<u8>),
    Eof,
    TooLong,
}

/// Reads the adapter's stdout until a complete line names a loopback address.
///
/// # Cancel safety
///
/// Not cancel safe: bytes read are kept in `seen`, which the caller reads after a timeout.
async fn hear_address(stdout: &mut tokio::net::unix::pipe::Receiver, seen: &mut Vec<u8>) -> Heard {
    let mut buf = [0u8; 4096];
    loop {
        let mut start = 0;
        while let Some(nl) = seen[start..].iter().position(|b| *b == b'\n') {
            if let Some(addr) = listen_address(&String::from_utf8_lossy(&seen[start..start + nl])) {
                return Heard::At(addr, seen[start + nl + 1..].to_vec());
            }
            start += nl + 1;
        }
        if seen.len() > ADDRESS_SEARCH_BYTES {
            return Heard::TooLong;
        }
        match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => return Heard::Eof,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// The first loopback `host:port` in `line` (`127.0.0.1:PORT`, `localhost:PORT`,
/// `[::1]:PORT`), the address a `tcp-listen` adapter says it listens at. Other hosts are
/// never connected to.
pub(crate) fn listen_address(line: &str) -> Option<SocketAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let hosts = [
        ("127.0.0.1:", IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ("localhost:", IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ("[::1]:", IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ];
    let mut best: Option<(usize, SocketAddr)> = None;
    for (host, ip) in hosts {
        for (at, _) in line.match_indices(host) {
            // A whole host: `1127.0.0.1:` or `x.localhost:` is not one.
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-') {
                continue;
            }
            let digits: String = line[at + host.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let Some(port) = digits.parse::<u16>().ok().filter(|p| *p > 0) else {
                continue;
            };
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, SocketAddr::new(ip, port)));
            }
        }
    }
    best.map(|(_, addr)| addr)
}

/// A `tcp-listen` adapter's connection: waits up to `wait` for the address it prints on
/// stdout, then connects. Fails `resource_failed` naming the adapter, what it printed (stdout
/// and stderr) and what to do.
pub(super) async fn connect_listening(
    session: &Arc<Session>,
    resolved: &Resolved,
    stdout: &mut tokio::net::unix::pipe::Receiver,
    mut exit: watch::Receiver<Option<ExitStatus>>,
    wait: Duration,
) -> Result<(tokio::net::TcpStream, Vec<u8>), ToolError> {
    let command = resolved.command_line();
    let name = &resolved.name;
    let mut seen = Vec::new();
    let heard = tokio::time::timeout(wait, hear_address(stdout, &mut seen)).await;
    let said = |session: &Session, seen: &[u8]| {
        let out = String::from_utf8_lossy(seen);
        let err = lock(&session.stderr_tail).clone();
        format!(
            "stdout: {}; stderr: {}",
            ends(out.trim(), 400),
            ends(err.trim(), 400)
        )
    };
    let hint = format!(
        "run `{command}` by hand in the project: it must print the address it listens at (delve: `DAP server listening at: 127.0.0.1:PORT`); an adapter that speaks DAP on stdin and stdout needs `transport = \"stdio\"` in `[debug.adapters.{name}]`"
    );
    let addr = match heard {
        Ok(Heard::At(addr, rest)) => (addr, rest),
        Ok(Heard::Eof) => {
            // Its stdout closed: it exited, or is about to. Let its stderr and exit arrive.
            let status =
                tokio::time::timeout(Duration::from_secs(2), exit.wait_for(Option::is_some))
                    .await
                    .ok()
                    .and_then(|s| s.ok().and_then(|s| *s));
            let how = status.map_or("closed its stdout".to_string(), |s| format!("exited ({s})"));
            return Err(ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) {how} before printing the address it listens at; {}",
                    said(session, &seen)
                ),
                hint,
            ));
        }
        Ok(Heard::TooLong) => {
            return Err(ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) printed {} bytes without a 127.0.0.1:PORT line to connect to; {}",
                    seen.len(),
                    said(session, &seen)
                ),
                hint,
            ));
        }
        Err(_) => {
            return Err(ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) printed no address to connect to (127.0.0.1:PORT) within {} s; {}",
                    wait.as_secs(),
                    said(session, &seen)
                ),
                format!("{hint}; `[debug] start_timeout_s` sets the wait"),
            ));
        }
    };
    let (addr, rest) = addr;
    let stream = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| "took longer than 5 s".to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .map_err(|why| {
            ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) said it listens at {addr}, but connecting there failed: {why}; {}",
                    said(session, &seen)
                ),
                hint.clone(),
            )
        })?;
    let _ = stream.set_nodelay(true);
    tracing::info!(session = session.id, %addr, "connected to the debug adapter's port");
    Ok((stream, rest))
}

/// `text`, or its first and last `keep` characters when longer (a usage text names the bad
/// flag first, a crash says why last); "(nothing)" when empty.
fn ends(text: &str, keep: usize) -> String {
    let chars = text.chars().count();
    if chars == 0 {
        return "(nothing)".into();
    }
    if chars <= 2 * keep {
        return text.to_string();
    }
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(chars - keep).collect();
    format!("{head} [… {} characters …] {tail}", chars - 2 * keep)
}

/// A `tcp-listen` adapter's stdout after its address: the program's output (delve's debuggee
/// inherits it), until the pipe ends. A request on `drains` reads what the pipe holds at that
/// moment before it is answered: the session's end winds the adapter down at once (its words
/// after `disconnect` are not the program's), while the program's last line, written before it
/// exited, may still wait in the pipe — on a loaded machine this reader runs after the DAP
/// stream's `terminated`, and that line was lost with `eof` said.
pub(super) async fn read_program_output(
    rx: tokio::net::unix::pipe::Receiver,
    first: Vec<u8>,
    session: Arc<Session>,
    drains: mpsc::Receiver<oneshot::Sender<()>>,
) {
    if !first.is_empty() {
        session.append_output(&first);
    }
    pump_output(rx, drains, &mut |bytes| session.append_output(bytes)).await;
    session.update(|s| s.program_output_open = false);
}

/// Everything read from `rx` goes to `sink`, until the pipe ends; a request on `drains` is
/// answered once what the pipe held at that moment went to `sink`.
async fn pump_output(
    mut rx: tokio::net::unix::pipe::Receiver,
    mut drains: mpsc::Receiver<oneshot::Sender<()>>,
    sink: &mut (dyn FnMut(&[u8]) + Send),
) {
    let mut buf = vec![0u8; 8192];
    loop {
        tokio::select! {
            // Cancel safe: a read that lost the race read nothing.
            read = rx.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => sink(&buf[..n]),
            },
            Some(done) = drains.recv() => {
                let ended = drain(&rx, &mut buf, sink);
                let _ = done.send(());
                if ended {
                    return;
                }
            }
        }
    }
}

/// Read what `rx` holds now into `sink`, without waiting; true at its end. The read goes to
/// the pipe itself, not through tokio's readiness (which may not know yet of bytes written
/// moments ago); the pipe is non-blocking, so an empty one answers `EAGAIN`.
fn drain(
    rx: &tokio::net::unix::pipe::Receiver,
    buf: &mut [u8],
    sink: &mut (dyn FnMut(&[u8]) + Send),
) -> bool {
    loop {
        match nix::unistd::read(rx, buf) {
            Ok(0) => return true,
            Ok(n) => sink(&buf[..n]),
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => return false,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found under load (delve): the program's last line, written before it exited, was
    /// still in the pipe when the session's end set output aside as the adapter's, and
    /// `output` said `eof` without it. A drain asked at the end returns with it read.
    #[tokio::test(flavor = "current_thread")]
    async fn a_drain_returns_with_what_the_pipe_held_read() {
        use std::io::Write as _;
        use std::sync::Mutex;
        let (tx, rx) = tokio::net::unix::pipe::pipe().unwrap();
        let mut writer = tx.into_blocking_fd().map(std::fs::File::from).unwrap();
        let (drain, drains) = mpsc::channel(1);
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        let pump = tokio::spawn(async move {
            pump_output(rx, drains, &mut |b| {
                sink.lock().unwrap().extend_from_slice(b)
            })
            .await
        });
        tokio::task::yield_now().await;
        writer.write_all(b"total 6\n").unwrap();
        // No chance for the reader to run between the write and the drain's request.
        let (done, read) = oneshot::channel();
        drain.try_send(done).unwrap();
        read.await.unwrap();
        assert_eq!(&*got.lock().unwrap(), b"total 6\n");
        drop(writer);
        drop(drain);
        pump.await.unwrap();
    }

    #[test]
    fn a_drain_reads_to_the_end_without_waiting() {
        use std::io::Write as _;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        rt.block_on(async {
            let (tx, rx) = tokio::net::unix::pipe::pipe().unwrap();
            let mut writer = tx.into_blocking_fd().map(std::fs::File::from).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; 4];
            writer.write_all(b"0123456789").unwrap();
            assert!(!drain(&rx, &mut buf, &mut |b| got.extend_from_slice(b)));
            assert_eq!(got, b"0123456789", "read in pieces, all of it");
            drop(writer);
            assert!(
                drain(&rx, &mut buf, &mut |b| got.extend_from_slice(b)),
                "the end"
            );
        });
    }

    #[test]
    fn listen_addresses_are_loopback_host_ports_on_a_line() {
        assert_eq!(
            listen_address("DAP server listening at: 127.0.0.1:39167"),
            Some("127.0.0.1:39167".parse().unwrap())
        );
        assert_eq!(
            listen_address("listening on [::1]:5678 (and 127.0.0.1:9)"),
            Some("[::1]:5678".parse().unwrap())
        );
        assert_eq!(
            listen_address("at localhost:4711."),
            Some("127.0.0.1:4711".parse().unwrap())
        );
        for no in [
            "DAP server listening at: 10.0.0.2:39167",
            "listening at 1127.0.0.1:80",
            "api.localhost:80",
            "127.0.0.1:0",
            "127.0.0.1:70000",
            "127.0.0.1:",
            "starting up",
        ] {
            assert_eq!(listen_address(no), None, "{no:?}");
        }
    }

    #[test]
    fn long_texts_keep_both_ends() {
        assert_eq!(ends("", 3), "(nothing)");
        assert_eq!(ends("abcdef", 3), "abcdef");
        assert_eq!(ends("abcdefgh", 3), "abc [… 2 characters …] fgh");
    }
}

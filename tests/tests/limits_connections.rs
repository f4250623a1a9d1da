//! Per-connection costs stay bounded under abuse: a cap on sessions answered with
//! `busy`, a deadline to finish a started frame, a cap on calls in flight, a budget of queued
//! output past which a client that does not read is not read either, and a new client still
//! answered when the daemon's file descriptors run low.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::DEFAULT_MAX_FRAME;
use toolvisor_protocol::client::{Client, ClientError};
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ApprovalAnswer, ClientFrame, DaemonFrame, Outcome, Tier};
use toolvisor_tests::{TestDaemon, bin, ok_of, options, wait_for};

/// A field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Connect in a thread, so a daemon that never answers fails the test instead of hanging it.
fn connect_within(socket: &Path, codec: Codec, wait: Duration) -> Result<Client, ClientError> {
    let (tx, rx) = mpsc::channel();
    let socket = socket.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(Client::connect(&socket, options(codec, Tier::Exec, true)));
    });
    rx.recv_timeout(wait).unwrap_or_else(|_| {
        panic!("the daemon neither welcomed nor refused a new client within {wait:?}")
    })
}

fn refused_busy(result: Result<Client, ClientError>) -> toolvisor_protocol::ToolError {
    match result {
        Err(ClientError::Refused(e)) => {
            assert_eq!(e.kind, ErrorKind::Busy, "{e}");
            e
        }
        Err(e) => panic!("expected a busy refusal, got {e}"),
        Ok(_) => panic!("expected a busy refusal, got a Welcome"),
    }
}

#[test]
fn a_connection_past_max_sessions_is_refused_busy_naming_the_cap() {
    let d = TestDaemon::start("[limits]\nmax_sessions = 3\n");
    // The place of the start-up probe's connection (TestDaemon::start waits by connecting) is
    // given back a moment after it closed: a held client refused `busy` meanwhile tries again,
    // so the three places are surely ours before the cap is tested (a fresh clone under load
    // failed here).
    let held: Vec<Client> = (0..3)
        .map(|_| {
            wait_for("a place for a held client", Duration::from_secs(30), || {
                Client::connect(&d.socket, options(Codec::Bincode, Tier::Exec, true)).ok()
            })
        })
        .collect();
    for codec in [Codec::Json, Codec::Bincode] {
        // The refusal is in the codec of the client's Hello, so either client reads it.
        let e = refused_busy(connect_within(&d.socket, codec, Duration::from_secs(30)));
        assert!(e.message.contains("maximum of 3"), "{e}");
        assert!(e.message.contains("max_sessions"), "{e}");
        assert!(e.hint.contains("max_sessions"), "{e}");
    }
    // A place freed is a place taken.
    drop(held);
    let mut c = wait_for("a place under the cap", Duration::from_secs(30), || {
        connect_within(&d.socket, Codec::Json, Duration::from_secs(30)).ok()
    });
    let r = c
        .call_with("c", "bash", json!({"command": "echo in"}), |_| true)
        .unwrap();
    assert_eq!(ok_of(&r)["stdout"], "in\n");
}

#[test]
fn connections_that_never_say_hello_make_room_for_one_that_does() {
    let d = TestDaemon::start("[limits]\nmax_sessions = 4\nhello_timeout_s = 600\n");
    // Four connections take every place and say nothing.
    let mut squatters: Vec<UnixStream> = (0..4)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    // A client that says Hello is served: the oldest silent connection goes.
    let mut c = connect_within(&d.socket, Codec::Bincode, Duration::from_secs(30))
        .expect("a client saying Hello is served while silent connections hold every place");
    let r = c
        .call_with("c", "bash", json!({"command": "echo served"}), |_| true)
        .unwrap();
    assert_eq!(ok_of(&r)["stdout"], "served\n");
    // The one shed was told why.
    let mut told = None;
    for s in &mut squatters {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        if let Ok(payload) = codec::read_frame(s, DEFAULT_MAX_FRAME)
            && let Ok(DaemonFrame::Refused(e)) = codec::decode(Codec::Json, &payload)
        {
            told = Some(e);
            break;
        }
    }
    let e = told.expect("a shed connection gets a refusal");
    assert_eq!(e.kind, ErrorKind::Busy, "{e}");
    assert!(e.hint.contains("Hello"), "{e}");
}

#[test]
fn a_frame_stalled_mid_way_is_closed_after_the_deadline_without_its_declared_size() {
    let d = TestDaemon::start("[limits]\nframe_deadline_s = 2\n");
    let pid = d.pid();
    let hwm_before = vm_kib(pid, "VmHWM");
    // Twenty connections declare a 16 MiB frame and send one byte of it.
    let mut stalled: Vec<Client> = (0..20)
        .map(|_| {
            let c = d.client(Codec::Bincode, Tier::Read, false);
            let mut raw = c.raw().unwrap();
            raw.write_all(&DEFAULT_MAX_FRAME.to_be_bytes()).unwrap();
            raw.write_all(&[0]).unwrap();
            c
        })
        .collect();
    for c in &mut stalled {
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        match c.recv() {
            Ok(DaemonFrame::Error(e)) => {
                assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
                assert!(e.message.contains("within 2 s"), "{e}");
                assert!(e.hint.contains("frame_deadline_s"), "{e}");
            }
            other => panic!("expected a timeout error for a stalled frame, got {other:?}"),
        }
        assert!(
            c.recv().is_err(),
            "the connection is closed after the deadline"
        );
    }
    // Declared lengths were never allocated: 20 x 16 MiB would be 320 MiB.
    let grew_mib = vm_kib(pid, "VmHWM").saturating_sub(hwm_before) / 1024;
    assert!(
        grew_mib < 64,
        "the daemon's peak RSS grew {grew_mib} MiB for 20 stalled frames"
    );
    // Others are served throughout.
    let mut other = d.client(Codec::Json, Tier::Exec, true);
    let r = other
        .call_with("c", "bash", json!({"command": "echo ok"}), |_| true)
        .unwrap();
    assert_eq!(ok_of(&r)["stdout"], "ok\n");
}

#[test]
fn a_call_past_max_calls_in_flight_is_answered_busy_at_once() {
    let d = TestDaemon::start("[limits]\nmax_calls_in_flight = 2\n");
    let mut c = d.client(Codec::Bincode, Tier::Exec, true);
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let a = c
        .start_call("a", "bash", json!({"command": "sleep 600"}))
        .unwrap();
    let b = c
        .start_call("b", "bash", json!({"command": "sleep 600"}))
        .unwrap();
    let third = c
        .start_call("c", "bash", json!({"command": "echo never"}))
        .unwrap();
    // The first two ask for approval (granted); the third is answered without running.
    loop {
        match c.recv().unwrap() {
            DaemonFrame::ApprovalRequest(req) => {
                assert_ne!(req.call_id, third, "the third call must not start");
                c.send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                    request_id: req.request_id,
                    approved: true,
                    reason: None,
                }))
                .unwrap();
            }
            DaemonFrame::Result {
                id,
                outcome: Outcome::Err(e),
            } if id == third => {
                assert_eq!(e.kind, ErrorKind::Busy, "{e}");
                assert!(e.message.contains("2 calls are already in flight"), "{e}");
                assert!(e.hint.contains("max_calls_in_flight"), "{e}");
                break;
            }
            other => panic!("expected call {third} refused busy, got {other:?}"),
        }
    }
    // Once a place is free, calls run again.
    for id in [a, b] {
        c.send(&ClientFrame::Cancel { id }).unwrap();
    }
    let mut ended = 0;
    while ended < 2 {
        // An approval request still on its way when its call was cancelled is left
        // unanswered.
        if let DaemonFrame::Result { id, .. } = c.recv().unwrap() {
            assert!(id == a || id == b, "unexpected result {id}");
            ended += 1;
        }
    }
    let r = c
        .call_with("c", "bash", json!({"command": "echo again"}), |_| true)
        .unwrap();
    assert_eq!(ok_of(&r)["stdout"], "again\n");
}

/// An incompressible PNG of about `w * h * 3` bytes.
fn noise_png(w: u32, h: u32) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let img = image::RgbImage::from_fn(w, h, |_, _| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        image::Rgb([state as u8, (state >> 8) as u8, (state >> 16) as u8])
    });
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(img)
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

#[test]
fn a_client_that_never_reads_is_held_to_its_output_budget_and_loses_nothing() {
    let d =
        TestDaemon::start("[limits]\nmax_queued_output_bytes = 2097152\nmax_calls_in_flight = 4\n");
    let pid = d.pid();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("noise.png"), noise_png(700, 700)).unwrap();
    let path = dir.path().join("noise.png").display().to_string();
    let rss_before = vm_kib(pid, "VmRSS");

    // 150 reads of a ~1.5 MB image, and never a byte read back.
    let mut lazy = d.client(Codec::Bincode, Tier::Exec, true);
    let raw = lazy.raw().unwrap();
    raw.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut sent = Vec::new();
    for _ in 0..150 {
        match lazy.start_call("lazy", "read", json!({"path": path})) {
            Ok(id) => sent.push(id),
            // The daemon stopped reading and the socket's buffer is full: that is the point.
            Err(_) => break,
        }
    }

    // The daemon stops reading that client...
    let mut watcher = d.client(Codec::Json, Tier::Read, false);
    wait_for(
        "the daemon to pause reading the client that does not read",
        Duration::from_secs(120),
        || match watcher.request(&ClientFrame::Tree).ok()? {
            DaemonFrame::Tree(t) => t
                .root
                .children
                .iter()
                .flat_map(|n| n.children.iter())
                .any(|n| n.kind == "session" && n.detail.contains("output full"))
                .then_some(()),
            _ => None,
        },
    );
    // ...serves everyone else...
    let mut other = d.client(Codec::Json, Tier::Exec, true);
    let r = other
        .call_with("c", "bash", json!({"command": "echo fine"}), |_| true)
        .unwrap();
    assert_eq!(ok_of(&r)["stdout"], "fine\n");
    // ...and holds about the budget plus the calls in flight, not 150 results.
    let grew_mib = vm_kib(pid, "VmRSS").saturating_sub(rss_before) / 1024;
    assert!(
        grew_mib < 96,
        "the daemon's RSS grew {grew_mib} MiB for a client that does not read (budget 2 MiB, 4 calls in flight)"
    );

    // Nothing was dropped: once the client reads, every call it sent has its result.
    lazy.set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < sent.len() {
        match lazy
            .recv()
            .expect("every result arrives once the client reads")
        {
            DaemonFrame::Result { id, outcome } => {
                if let Outcome::Err(e) = &outcome {
                    assert_eq!(e.kind, ErrorKind::Busy, "{e}");
                }
                assert!(answered.insert(id), "call {id} answered twice");
            }
            DaemonFrame::Event { .. } => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
    assert_eq!(answered, sent.into_iter().collect());
}

/// A daemon run through `prlimit --nofile=N`, killed on drop.
struct Limited {
    child: std::process::Child,
    socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_with_nofile(nofile: u32) -> Limited {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("toolvisor.sock");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("state_dir = {:?}\n", dir.path().join("state").display()),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
    let child = Command::new("prlimit")
        .arg(format!("--nofile={nofile}"))
        .arg("--")
        .arg(bin())
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("prlimit (util-linux) runs the daemon");
    let d = Limited {
        child,
        socket,
        _dir: dir,
    };
    wait_for("the daemon to accept", Duration::from_secs(20), || {
        Client::connect(&d.socket, options(Codec::Json, Tier::Read, false)).ok()
    });
    d
}

#[test]
fn with_file_descriptors_nearly_exhausted_a_new_client_is_still_answered() {
    let d = start_with_nofile(96);
    let socket = &d.socket;

    // Idle clients open more connections than the daemon has fds for.
    let mut idle = Vec::new();
    let mut refused = 0;
    for _ in 0..120 {
        match connect_within(socket, Codec::Bincode, Duration::from_secs(30)) {
            Ok(c) => idle.push(c),
            Err(ClientError::Refused(e)) => {
                assert_eq!(e.kind, ErrorKind::Busy, "{e}");
                refused += 1;
            }
            Err(e) => panic!("an idle client got neither a Welcome nor `busy`: {e}"),
        }
    }
    assert!(refused > 0, "96 fds cannot hold 120 sessions");
    // A new client hears at once why it cannot be served...
    let e = refused_busy(connect_within(socket, Codec::Json, Duration::from_secs(30)));
    assert!(e.hint.contains("max_sessions"), "{e}");
    // ...and is served as soon as a place is free.
    idle.truncate(idle.len() - 1);
    let mut c = wait_for(
        "a place once an idle client left",
        Duration::from_secs(30),
        || connect_within(socket, Codec::Json, Duration::from_secs(30)).ok(),
    );
    let r = c
        .call_with("c", "bash", json!({"command": "echo served"}), |_| true)
        .unwrap();
    assert_eq!(ok_of(&r)["stdout"], "served\n");
}

#[test]
fn when_accept_runs_out_of_fds_silent_connections_go_first_then_clients_hear_busy() {
    let d = start_with_nofile(96);
    // Tracked processes take the fds the session cap left for tools (3 each).
    let mut owner = connect_within(&d.socket, Codec::Bincode, Duration::from_secs(30)).unwrap();
    for _ in 0..22 {
        let r = owner
            .call_with(
                "fds",
                "process",
                json!({"op": "start", "command": "sleep 600"}),
                |_| true,
            )
            .unwrap();
        ok_of(&r);
    }
    // Silent connections, then idle sessions, until accept fails for want of fds.
    let mut silent: Vec<UnixStream> = (0..6)
        .map(|_| UnixStream::connect(&d.socket).unwrap())
        .collect();
    // Only a connection silent for 250 ms is shed (a client is not shed for being slow by a
    // few milliseconds).
    let opened = std::time::Instant::now();
    wait_for(
        "the silent connections to have waited past the shedding threshold",
        Duration::from_secs(5),
        || (opened.elapsed() > Duration::from_millis(300)).then_some(()),
    );
    let mut idle = Vec::new();
    let mut out_of_fds = None;
    for _ in 0..80 {
        match connect_within(&d.socket, Codec::Bincode, Duration::from_secs(30)) {
            Ok(c) => idle.push(c),
            Err(ClientError::Refused(e)) => {
                assert_eq!(e.kind, ErrorKind::Busy, "{e}");
                if e.message.contains("file descriptors") {
                    out_of_fds = Some(e);
                    break;
                }
            }
            Err(e) => panic!("a client got neither a Welcome nor `busy`: {e}"),
        }
    }
    let e = out_of_fds.expect("accept ran out of fds and the client was told so");
    assert!(e.hint.contains("ulimit -n"), "{e}");
    // The silent connections were closed first, each told why.
    for s in &mut silent {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let payload = codec::read_frame(s, DEFAULT_MAX_FRAME)
            .expect("a silent connection is closed with a refusal when fds run out");
        match codec::decode(Codec::Json, &payload) {
            Ok(DaemonFrame::Refused(e)) => assert_eq!(e.kind, ErrorKind::Busy, "{e}"),
            other => panic!("expected a busy refusal, got {other:?}"),
        }
    }
    // Once clients leave, the fds are back and the session that stayed is served.
    drop(idle);
    let r = wait_for(
        "a call to run once fds are free",
        Duration::from_secs(30),
        || {
            let r = owner
                .call_with("fds", "bash", json!({"command": "echo still"}), |_| true)
                .unwrap();
            matches!(r.outcome, Outcome::Ok(_)).then_some(r)
        },
    );
    assert_eq!(ok_of(&r)["stdout"], "still\n");
}

//! Unfinished frames share one daemon-wide budget (`limits.max_partial_frame_bytes`): many
//! connections each sending part of a large frame cannot pin `max_sessions × max_frame` of
//! memory until `frame_deadline_s`. The connection that would pass the budget is told so,
//! naming the key, and closed; the others are untouched; other clients are served meanwhile.

use std::io::Write;
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::DEFAULT_MAX_FRAME;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{DaemonFrame, Tier};
use toolvisor_tests::{TestDaemon, ok_of};

/// A field of /proc/<pid>/status in KiB (VmHWM).
fn vm_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("daemon status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[test]
fn partial_frames_past_the_daemon_wide_budget_are_refused_naming_the_key() {
    const CONNECTIONS: usize = 16;
    const SENT: usize = 6 << 20;
    let d =
        TestDaemon::start("[limits]\nmax_partial_frame_bytes = 8388608\nframe_deadline_s = 10\n");
    let pid = d.pid();
    let hwm_before = vm_kib(pid, "VmHWM");
    // Each connection declares a 16 MiB frame and sends 6 MiB of it: 96 MiB in all against
    // a budget of 8 MiB.
    let mut clients: Vec<Client> = (0..CONNECTIONS)
        .map(|_| d.client(Codec::Bincode, Tier::Read, false))
        .collect();
    let writers: Vec<_> = clients
        .iter()
        .map(|c| {
            let mut raw = c.raw().unwrap();
            std::thread::spawn(move || {
                // A connection refused mid-way is closed under the writer: its error is
                // expected and read below.
                let _ = raw.write_all(&DEFAULT_MAX_FRAME.to_be_bytes());
                let _ = raw.write_all(&vec![0u8; SENT]);
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    // Others are served while the partial frames are held.
    let mut other = d.client(Codec::Json, Tier::Exec, true);
    let r = other
        .call_with("c", "bash", json!({"command": "echo ok"}), |_| true)
        .unwrap();
    assert_eq!(ok_of(&r)["stdout"], "ok\n");
    // Every connection hears exactly one thing: the budget refused it, or (untouched by the
    // budget) its own frame deadline passed.
    let (mut refused, mut timed_out) = (0, 0);
    for c in &mut clients {
        c.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        match c.recv() {
            Ok(DaemonFrame::Error(e)) if e.kind == ErrorKind::Busy => {
                assert!(e.message.contains("8388608 bytes"), "{e}");
                assert!(e.message.contains("limits.max_partial_frame_bytes"), "{e}");
                assert!(e.hint.contains("max_partial_frame_bytes"), "{e}");
                refused += 1;
            }
            Ok(DaemonFrame::Error(e)) if e.kind == ErrorKind::Timeout => {
                assert!(e.hint.contains("frame_deadline_s"), "{e}");
                timed_out += 1;
            }
            other => panic!("expected a budget refusal or a frame timeout, got {other:?}"),
        }
        assert!(
            c.recv().is_err(),
            "the connection is closed after its error"
        );
    }
    assert!(refused >= 1, "no connection was refused by the budget");
    assert!(
        timed_out >= 1,
        "every connection was refused: one within the budget should have been left alone"
    );
    // Without the budget the daemon would have held about 96 MiB at its peak.
    let grew_mib = vm_kib(pid, "VmHWM").saturating_sub(hwm_before) / 1024;
    assert!(
        grew_mib < 48,
        "the daemon's peak RSS grew {grew_mib} MiB for {CONNECTIONS} partial frames of 6 MiB under a budget of 8 MiB"
    );
    // Every byte was given back: a new connection may send a frame of nearly the whole
    // budget (garbage, so it is answered as malformed, not refused by the budget).
    let mut after = d.client(Codec::Bincode, Tier::Read, false);
    let mut raw = after.raw().unwrap();
    let len: u32 = 7 << 20;
    raw.write_all(&len.to_be_bytes()).unwrap();
    raw.write_all(&vec![0xff; len as usize]).unwrap();
    after
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    match after.recv() {
        Ok(DaemonFrame::Error(e)) => assert_eq!(e.kind, ErrorKind::Protocol, "{e}"),
        other => panic!("expected a malformed-frame error, got {other:?}"),
    }
}

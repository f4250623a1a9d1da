//! A kernel that dies answers its cell with `kernel_died` naming the cause (killed from
//! outside mid-cell, `os._exit`, a segfault, the memory cap) and that the state is lost;
//! the next call starts a fresh kernel. An idle kernel is stopped by its TTL and the next
//! call says so.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Event, Outcome, Tier};
use toolvisor_tests::eval::{self, args};
use toolvisor_tests::{alive, wait_for};

#[test]
fn a_kernel_killed_from_outside_mid_cell_answers_kernel_died_and_the_next_call_starts_fresh() {
    let d = eval::daemon("");
    eval::ok(&d, "c", "kept = 1");
    let mut c = d.client(Codec::Bincode, Tier::Exec, true);
    let id = c
        .start_call(
            "c",
            "eval",
            args(
                "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)",
                json!({}),
            ),
        )
        .unwrap();
    let mut pid = None;
    let outcome = loop {
        match c.recv().unwrap() {
            DaemonFrame::ApprovalRequest(req) => c
                .send(&ClientFrame::ApprovalAnswer(
                    toolvisor_protocol::wire::ApprovalAnswer {
                        request_id: req.request_id,
                        approved: true,
                        reason: None,
                    },
                ))
                .unwrap(),
            DaemonFrame::Event {
                event: Event::Output { text, .. },
                ..
            } if pid.is_none() => {
                let p: i32 = text.trim().parse().expect("the cell prints its pid");
                pid = Some(p);
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
            }
            DaemonFrame::Result { id: got, outcome } if got == id => break outcome,
            _ => {}
        }
    };
    let Outcome::Err(e) = outcome else {
        panic!("expected kernel_died, got {outcome:?}");
    };
    assert_eq!(e.kind, ErrorKind::KernelDied, "{e}");
    assert!(e.message.contains("signal 9 (SIGKILL)"), "{e}");
    assert!(
        e.message.contains("state") && e.message.contains("is lost"),
        "{e}"
    );
    assert!(
        e.message.contains(&pid.unwrap().to_string()),
        "the output so far is shown: {e}"
    );
    let v = eval::ok(&d, "c", "'kept' in globals()");
    assert_eq!(v["text"], "False\n");
    assert_eq!(v["kernel"]["fresh"], true);
    // The death was reported by the call that saw it; no second note.
    assert!(v.get("note").is_none(), "{v}");
}

#[test]
fn os_exit_and_a_segfault_are_named() {
    let d = eval::daemon("");
    let e = eval::err_with(&d, "c", args("import os\nos._exit(3)", json!({})));
    assert_eq!(e.kind, ErrorKind::KernelDied);
    assert!(e.message.contains("exited with code 3"), "{e}");
    let e = eval::err_with(
        &d,
        "c",
        args("import ctypes\nctypes.string_at(0)", json!({})),
    );
    assert_eq!(e.kind, ErrorKind::KernelDied);
    assert!(e.message.contains("SIGSEGV"), "{e}");
    assert!(
        e.message.contains("Fatal Python error"),
        "stderr's last words: {e}"
    );
    assert_eq!(eval::ok(&d, "c", "2 + 2")["text"], "4\n");
}

#[test]
fn the_memory_cap_kills_the_kernel_and_says_so() {
    let d = eval::daemon("memory_mb = 200");
    let e = eval::err_with(
        &d,
        "c",
        args(
            "chunks = []\nwhile True:\n    chunks.append(bytearray(32 * 1024 * 1024))",
            json!({}),
        ),
    );
    assert_eq!(e.kind, ErrorKind::KernelDied, "{e}");
    assert!(e.message.contains("memory cap of 200 MiB"), "{e}");
    assert_eq!(eval::ok(&d, "c", "len('fresh')")["text"], "5\n");
}

#[test]
fn an_idle_kernel_is_stopped_and_the_next_call_says_its_state_was_lost() {
    let d = eval::daemon("idle_ttl_s = 1");
    let v = eval::ok(&d, "c", "kept = 1");
    let pid = v["kernel"]["pid"].as_u64().unwrap() as u32;
    wait_for(
        "the idle kernel to be stopped",
        Duration::from_secs(20),
        || (!alive(pid)).then_some(()),
    );
    let v = eval::ok(&d, "c", "'kept' in globals()");
    assert_eq!(v["text"], "False\n");
    let note = v["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("idle TTL") && note.contains("state was lost"),
        "{v}"
    );
}

#[test]
fn output_written_just_before_the_kernel_dies_is_in_the_answer() {
    let d = eval::daemon("");
    // Flushed, then os._exit: the driver's writer had not written it yet.
    let e = eval::err_with(
        &d,
        "c",
        args(
            "print('bye', flush=True)\nimport os\nos._exit(7)",
            json!({}),
        ),
    );
    assert_eq!(e.kind, ErrorKind::KernelDied, "{e}");
    assert!(e.message.contains("exited with code 7"), "{e}");
    assert!(e.message.contains("bye"), "the flushed line is lost: {e}");
    // Not flushed: os._exit still lets the queued output out first.
    let e = eval::err_with(
        &d,
        "c",
        args(
            "for i in range(3):\n    print('line', i)\nimport os\nos._exit(8)",
            json!({}),
        ),
    );
    assert!(e.message.contains("exited with code 8"), "{e}");
    assert!(
        e.message.contains("line 2"),
        "unflushed lines are lost: {e}"
    );
    // A segfault: the flushed line, then the crash's traceback of the cell itself.
    let e = eval::err_with(
        &d,
        "c",
        args(
            "print('last words', flush=True)\nimport ctypes\nctypes.string_at(0)",
            json!({}),
        ),
    );
    assert!(e.message.contains("SIGSEGV"), "{e}");
    assert!(e.message.contains("last words"), "{e}");
    assert!(
        e.message.contains("<cell"),
        "the crash's traceback shows the cell's frames: {e}"
    );
}

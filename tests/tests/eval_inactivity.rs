//! The inactivity budget of a cell: output resets it, so a cell that keeps printing runs past
//! it; a silent cell is interrupted and its kernel keeps its state; a cell that ignores the
//! interrupt costs its kernel, and a fresh one is started. No test asserts a duration.

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::alive;
use toolvisor_tests::eval::{self, args};

#[test]
fn a_cell_that_keeps_printing_outlives_its_budget() {
    let d = eval::daemon("");
    // Twelve prints a sixth of a budget apart: twice the budget in all, never silent for one.
    let v = eval::ok_with(
        &d,
        "c",
        args(
            "import time\nfor i in range(12):\n    print(i, flush=True)\n    time.sleep(0.5)\n'finished'",
            json!({"timeout_s": 3}),
        ),
    );
    let expected: String = (0..12).map(|i| format!("{i}\n")).collect();
    assert_eq!(v["text"], format!("{expected}'finished'\n"));
}

#[test]
fn a_silent_cell_is_interrupted_and_the_kernel_keeps_its_state() {
    let d = eval::daemon("");
    let first = eval::ok(&d, "c", "kept = 5");
    let e = eval::err_with(
        &d,
        "c",
        args(
            "print('started', flush=True)\nimport time\ntime.sleep(600)",
            json!({"timeout_s": 1}),
        ),
    );
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(
        e.message.contains("no output for 1 s") && e.message.contains("interrupted"),
        "{e}"
    );
    assert!(e.message.contains("state are kept"), "{e}");
    assert!(
        e.message.contains("KeyboardInterrupt") && e.message.contains("started"),
        "{e}"
    );
    assert!(!e.message.contains("on_sigint"), "driver frames leak: {e}");
    let v = eval::ok(&d, "c", "kept");
    assert_eq!(v["text"], "5\n");
    assert_eq!(v["kernel"]["pid"], first["kernel"]["pid"]);
}

#[test]
fn a_cell_that_ignores_the_interrupt_costs_its_kernel_and_a_fresh_one_starts() {
    let d = eval::daemon("interrupt_grace_s = 1");
    let first = eval::ok(&d, "c", "kept = 5");
    let old = first["kernel"]["pid"].as_u64().unwrap() as u32;
    let e = eval::err_with(
        &d,
        "c",
        args(
            "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(600)",
            json!({"timeout_s": 1}),
        ),
    );
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(
        e.message.contains("did not stop when interrupted")
            && e.message.contains("state")
            && e.message.contains("is lost"),
        "{e}"
    );
    toolvisor_tests::wait_for(
        "the stuck kernel to be killed",
        std::time::Duration::from_secs(10),
        || (!alive(old)).then_some(()),
    );
    let v = eval::ok(&d, "c", "'kept' in globals()");
    assert_eq!(v["text"], "False\n");
    assert_ne!(v["kernel"]["pid"], first["kernel"]["pid"]);
}

#[test]
fn a_timeout_beyond_the_cap_is_refused() {
    let d = eval::daemon("inactivity_s = 30\ninactivity_max_s = 60");
    let e = eval::err_with(&d, "c", args("1", json!({"timeout_s": 61})));
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(e.message.contains("1..=60"), "{e}");
}

#[test]
fn cancelling_a_cell_interrupts_it_and_keeps_the_kernel() {
    use toolvisor_protocol::codec::Codec;
    use toolvisor_protocol::wire::{
        ApprovalAnswer, ClientFrame, DaemonFrame, Event, Outcome, Tier,
    };

    let d = eval::daemon("");
    let first = eval::ok(&d, "c", "kept = 5");
    let mut c = d.client(Codec::Bincode, Tier::Exec, true);
    let id = c
        .start_call(
            "c",
            "eval",
            args(
                "import time\nprint('going', flush=True)\ntime.sleep(600)",
                json!({}),
            ),
        )
        .unwrap();
    let outcome = loop {
        match c.recv().unwrap() {
            DaemonFrame::ApprovalRequest(req) => c
                .send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                    request_id: req.request_id,
                    approved: true,
                    reason: None,
                }))
                .unwrap(),
            DaemonFrame::Event {
                event: Event::Output { .. },
                ..
            } => c.send(&ClientFrame::Cancel { id }).unwrap(),
            DaemonFrame::Result { id: got, outcome } if got == id => break outcome,
            _ => {}
        }
    };
    let Outcome::Err(e) = outcome else {
        panic!("expected cancelled, got {outcome:?}")
    };
    assert_eq!(e.kind, ErrorKind::Cancelled);
    // Had the sleeping cell not been interrupted, this one would wait behind it and time out.
    let v = eval::ok_with(&d, "c", args("kept", json!({"timeout_s": 30})));
    assert_eq!(v["text"], "5\n");
    assert_eq!(v["kernel"]["pid"], first["kernel"]["pid"]);
}

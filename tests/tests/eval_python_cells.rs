//! `eval` with a real Python kernel: state persists across calls and connections, the last
//! expression is echoed, display() keeps its order, errors keep the kernel, reset discards
//! state, conversations are isolated, the description rule is enforced before approval, and
//! the kernel shows in the tree.

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Event, Stream, Tier};
use toolvisor_tests::eval::{self, args};
use toolvisor_tests::{alive, err_of, ok_of};

#[test]
fn state_persists_across_calls_and_connections_and_the_last_expression_is_echoed() {
    let d = eval::daemon("");
    let first = eval::ok(&d, "c", "x = 41\nimport math");
    assert_eq!(first["text"], "");
    assert_eq!(first["kernel"]["fresh"], true);
    let pid = first["kernel"]["pid"].as_u64().unwrap() as u32;
    assert!(alive(pid));
    // Every `eval::ok` is a new client connection: state is per conversation.
    let v = eval::ok(&d, "c", "x + 1");
    assert_eq!(v["text"], "42\n");
    assert_eq!(v["outputs"][0]["type"], "result");
    assert_eq!(v["outputs"][0]["data"]["text/plain"], "42");
    assert_eq!(v["kernel"]["pid"], pid);
    assert_eq!(v["kernel"]["fresh"], false);
    assert_eq!(v["kernel"]["cells"], 2);
    // A trailing semicolon silences the echo, as in a notebook; `_` holds the last echo.
    let v = eval::ok(&d, "c", "y = math.floor(2.5) + _\ny;");
    assert_eq!(v["text"], "");
    let v = eval::ok(&d, "c", "y");
    assert_eq!(v["text"], "44\n");
}

#[test]
fn prints_stream_as_events_and_display_keeps_its_order() {
    let d = eval::daemon("");
    let mut c = d.client(Codec::Json, Tier::Exec, true);
    let mut asked = Vec::new();
    let reply = eval::run(
        &mut c,
        "c",
        args(
            "print('a')\ndisplay({'k': 1}, 'two')\nprint('b', flush=True)\nimport sys\nprint('warned', file=sys.stderr)\n3 * 3",
            json!({}),
        ),
        &mut asked,
    );
    let v = ok_of(&reply);
    assert_eq!(v["text"], "a\n{'k': 1}\n'two'\nb\nwarned\n9\n");
    let kinds: Vec<_> = v["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["display", "display", "result"]);
    // Each output's `at` points at its text.
    let text = v["text"].as_str().unwrap();
    let at = v["outputs"][2]["at"].as_u64().unwrap() as usize;
    assert_eq!(&text[at..], "9\n");
    let streamed: Vec<_> = reply
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Output { stream, text } => Some((*stream, text.clone())),
            _ => None,
        })
        .collect();
    let out: String = streamed
        .iter()
        .filter(|(s, _)| *s == Stream::Stdout)
        .map(|(_, t)| t.as_str())
        .collect();
    assert_eq!(out, "a\nb\n");
    assert!(
        streamed.contains(&(Stream::Stderr, "warned\n".to_string())),
        "{streamed:?}"
    );
    assert_eq!(asked.len(), 1, "eval asks for approval once: {asked:?}");
    assert!(
        asked[0].starts_with("eval python: run a cell for the test suite | print('a')"),
        "{asked:?}"
    );
}

#[test]
fn an_exception_is_a_result_with_its_traceback_and_the_kernel_keeps_its_state() {
    let d = eval::daemon("");
    eval::ok(&d, "c", "kept = 'yes'");
    let v = eval::result_with(
        &d,
        "c",
        args(
            "print('before')\ndef f():\n    return 1 / 0\nf()",
            json!({}),
        ),
    );
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"]["ename"], "ZeroDivisionError");
    let tb = v["error"]["traceback"].as_str().unwrap();
    assert!(tb.contains("<cell") && tb.contains("line 3, in f"), "{tb}");
    assert!(
        !tb.contains("toolvisor") && !tb.contains("run_cell"),
        "driver frames leak: {tb}"
    );
    assert!(
        v["text"].as_str().unwrap().starts_with("before\nTraceback"),
        "{}",
        v["text"]
    );
    let syntax = eval::result_with(&d, "c", args("def broken(:\n  pass", json!({})));
    assert_eq!(syntax["error"]["ename"], "SyntaxError");
    assert_eq!(eval::ok(&d, "c", "kept")["text"], "'yes'\n");
}

#[test]
fn the_description_must_be_five_to_ten_words_and_is_checked_before_approval() {
    let d = eval::daemon("");
    let mut c = d.client(Codec::Bincode, Tier::Exec, true);
    let mut asked = Vec::new();
    let reply = eval::run(
        &mut c,
        "c",
        json!({"code": "1", "description": "compute"}),
        &mut asked,
    );
    let e = err_of(&reply);
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message
            .contains("`description` must be 5 to 10 words, got 1"),
        "{e}"
    );
    assert!(
        asked.is_empty(),
        "asked for approval of an invalid call: {asked:?}"
    );
    let reply = eval::run(&mut c, "c", json!({"code": "1"}), &mut asked);
    assert!(
        err_of(&reply)
            .message
            .contains("missing required argument `description`")
    );
    let reply = eval::run(
        &mut c,
        "c",
        args("1", json!({"language": "ruby"})),
        &mut asked,
    );
    assert!(
        err_of(&reply).message.contains("expected one of"),
        "{}",
        err_of(&reply)
    );
}

#[test]
fn reset_discards_the_interpreter_and_conversations_are_isolated() {
    let d = eval::daemon("");
    let a = eval::ok(&d, "alice", "secret = 42");
    let b = eval::ok(&d, "bob", "'secret' in globals()");
    assert_eq!(b["text"], "False\n");
    assert_ne!(a["kernel"]["pid"], b["kernel"]["pid"]);
    let old_pid = a["kernel"]["pid"].as_u64().unwrap() as u32;
    let v = eval::ok_with(
        &d,
        "alice",
        args("'secret' in globals()", json!({"reset": true})),
    );
    assert_eq!(v["text"], "False\n");
    assert_eq!(v["kernel"]["fresh"], true);
    assert!(v["note"].as_str().unwrap().contains("reset"), "{v}");
    assert_ne!(v["kernel"]["pid"], old_pid);
    toolvisor_tests::wait_for(
        "the reset kernel's process to be gone",
        std::time::Duration::from_secs(10),
        || (!alive(old_pid)).then_some(()),
    );
    assert_eq!(
        eval::ok(&d, "bob", "'secret' in globals()")["text"],
        "False\n"
    );
}

#[test]
fn an_unknown_magic_is_refused_naming_the_supported_ones() {
    let d = eval::daemon("");
    let e = eval::err_with(&d, "c", args("x = 1\n%load_ext autoreload", json!({})));
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message.contains("`%load_ext`")
            && e.message.contains("%pip")
            && e.message.contains("%%timeit"),
        "{e}"
    );
}

#[test]
fn the_kernel_shows_in_the_tree_with_pid_cells_ttl_and_rss() {
    let d = eval::daemon("");
    let v = eval::ok(&d, "treeconv", "1");
    let pid = v["kernel"]["pid"].as_u64().unwrap() as u32;
    // An ops client, like `toolvisor tree`: a harness sees only its own conversations' details.
    let mut opts = toolvisor_tests::options(Codec::Json, Tier::Read, false);
    opts.client_kind = toolvisor_protocol::wire::ClientKind::Ops;
    let mut c = toolvisor_protocol::client::Client::connect(&d.socket, opts).unwrap();
    let DaemonFrame::Tree(tree) = c.request(&ClientFrame::Tree).unwrap() else {
        panic!("expected a tree");
    };
    let kernels = tree
        .root
        .children
        .iter()
        .find(|n| n.id == "kernels")
        .expect("a kernels supervisor");
    let node = kernels
        .children
        .iter()
        .find(|n| n.id == "treeconv/python")
        .unwrap_or_else(|| panic!("no kernel node in {kernels:?}"));
    assert_eq!(node.kind, "kernel");
    assert_eq!(node.pid, Some(pid));
    assert!(node.detail.contains("1 cells"), "{}", node.detail);
    assert!(node.ttl_left_ms.is_some_and(|t| t > 0), "{node:?}");
    assert!(node.rss_bytes.is_some_and(|r| r > 0), "{node:?}");
}

/// The tree's MBOX column was always 0. It is CALLS now, and a kernel counts the
/// cell it runs.
#[test]
fn a_running_cell_counts_on_its_kernels_node() {
    let d = std::sync::Arc::new(eval::daemon(""));
    eval::ok(&d, "callsconv", "1");
    // The cell runs until the test releases it (a file it waits for), not for a fixed time
    // the test must catch it within.
    let release = tempfile::tempdir().unwrap();
    let gate = release.path().join("go");
    let runner = {
        let d = d.clone();
        let code = format!(
            "import os, time\nwhile not os.path.exists({:?}):\n    time.sleep(0.02)\n",
            gate.display().to_string()
        );
        std::thread::spawn(move || eval::ok(&d, "callsconv", &code))
    };
    let mut opts = toolvisor_tests::options(Codec::Json, Tier::Read, false);
    opts.client_kind = toolvisor_protocol::wire::ClientKind::Ops;
    let mut c = toolvisor_protocol::client::Client::connect(&d.socket, opts).unwrap();
    let mut calls = || {
        let DaemonFrame::Tree(tree) = c.request(&ClientFrame::Tree).unwrap() else {
            panic!("expected a tree");
        };
        tree.root
            .walk()
            .into_iter()
            .find(|(_, n)| n.id == "callsconv/python")
            .map(|(_, n)| n.mailbox)
    };
    toolvisor_tests::wait_for(
        "the kernel node to count the running cell",
        std::time::Duration::from_secs(20),
        || (calls() == Some(1)).then_some(()),
    );
    std::fs::write(&gate, "").unwrap();
    runner.join().unwrap();
    assert_eq!(calls(), Some(0), "the finished cell still counts");
}

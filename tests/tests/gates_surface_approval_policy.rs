//! The gates in front of every tool: tier visibility, approval (denied by default, granted
//! per call), operator policy with its audit log, and the CLI's exit codes.

use std::process::Command;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Tier;
use toolvisor_tests::{TestDaemon, bin, err_of, ok_of};

#[test]
fn a_read_surface_never_sees_or_calls_write_or_exec_tools() {
    let d = TestDaemon::start("");
    let c = d.client(Codec::Bincode, Tier::Read, true);
    assert!(
        c.welcome().tools.iter().all(|t| t.tier == Tier::Read),
        "{:?}",
        c.welcome().tools
    );
    let mut c = c;
    let r = c
        .call_with("c", "bash", json!({"command": "touch nope"}), |_| true)
        .unwrap();
    let e = err_of(&r);
    assert_eq!(e.kind, ErrorKind::SurfaceDenied);
    assert!(
        e.message.contains("exec tier") && e.hint.contains("exec"),
        "{e}"
    );
    let exec = d.client(Codec::Bincode, Tier::Exec, true);
    let names: Vec<_> = exec
        .welcome()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(names.contains(&"bash".to_string()) && names.contains(&"process".to_string()));
}

#[test]
fn approval_is_denied_without_a_handler_and_asked_per_call_with_one() {
    let d = TestDaemon::start("");
    let marker = d.dir.path().join("ran");
    let cmd = json!({"command": format!("touch {}", marker.display())});

    let mut no_handler = d.client(Codec::Json, Tier::Exec, false);
    let r = no_handler.call("c", "bash", cmd.clone()).unwrap();
    assert_eq!(err_of(&r).kind, ErrorKind::ApprovalDenied);
    assert!(err_of(&r).hint.contains("--approve"), "{}", err_of(&r));
    assert!(!marker.exists(), "a denied call must not run");

    let mut handler = d.client(Codec::Json, Tier::Exec, true);
    let mut asked = Vec::new();
    let r = handler
        .call_with("c", "bash", cmd.clone(), |req| {
            asked.push(req.summary.clone());
            false
        })
        .unwrap();
    assert_eq!(err_of(&r).kind, ErrorKind::ApprovalDenied);
    assert_eq!(asked.len(), 1);
    assert!(asked[0].starts_with("bash: touch"), "{asked:?}");
    assert!(!marker.exists());

    let r = handler.call_with("c", "bash", cmd, |_| true).unwrap();
    assert_eq!(ok_of(&r)["exit_code"], 0);
    assert!(marker.exists());

    // Reading a process list changes nothing and needs no approval.
    let r = no_handler
        .call("c", "process", json!({"op": "list"}))
        .unwrap();
    ok_of(&r);

    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap();
    assert_eq!(
        audit
            .lines()
            .filter(|l| l.contains("approval_denied"))
            .count(),
        2,
        "{audit}"
    );
    // The granted call is on record too, with who granted it.
    let approved: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["event"] == "approved")
        .collect();
    assert_eq!(approved.len(), 1, "{audit}");
    assert_eq!(approved[0]["tool"], "bash");
    assert!(
        approved[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("approved by the client (session "),
        "{audit}"
    );
}

#[test]
fn policy_denied_tools_vanish_and_calls_are_audited() {
    let d = TestDaemon::start("[policy]\ndeny = [\"bash\"]\n");
    let mut c = d.client(Codec::Bincode, Tier::Exec, true);
    assert!(!c.welcome().tools.iter().any(|t| t.name == "bash"));
    let r = c
        .call_with("conv-9", "bash", json!({"command": "true"}), |_| true)
        .unwrap();
    let e = err_of(&r);
    assert_eq!(e.kind, ErrorKind::PolicyDenied);
    let audit = std::fs::read_to_string(d.state_dir().join("audit.jsonl")).unwrap();
    let line: serde_json::Value =
        serde_json::from_str(audit.lines().next().expect("one audit line")).unwrap();
    assert_eq!(line["event"], "policy_denied");
    assert_eq!(line["tool"], "bash");
    assert_eq!(line["conversation"], "conv-9");
    assert!(d.log_text().contains("call denied by policy"));
}

#[test]
fn the_cli_prints_json_and_exits_0_1_or_2() {
    let d = TestDaemon::start("");
    let run = |args: &[&str]| {
        let out = Command::new(bin()).args(args).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        (out.status.code().unwrap(), v)
    };
    let sock = d.socket.display().to_string();
    let (code, v) = run(&[
        "call",
        "bash",
        "--socket",
        &sock,
        "--approve",
        "--args",
        r#"{"command":"echo cli"}"#,
    ]);
    assert_eq!(
        (code, v["ok"].clone(), v["result"]["stdout"].clone()),
        (0, json!(true), json!("cli\n"))
    );
    let (code, v) = run(&[
        "call",
        "bash",
        "--socket",
        &sock,
        "--args",
        r#"{"command":"echo cli"}"#,
    ]);
    assert_eq!(
        (code, v["error"]["kind"].clone()),
        (1, json!("approval_denied"))
    );
    let (code, v) = run(&[
        "call",
        "bash",
        "--socket",
        "/nonexistent/toolvisor.sock",
        "--args",
        "{}",
    ]);
    assert_eq!((code, v["ok"].clone()), (2, json!(false)));
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("toolvisor serve")
    );
    // State is keyed by conversation, not connection: two CLI runs share it.
    let (_, v) = run(&[
        "call",
        "process",
        "--socket",
        &sock,
        "--approve",
        "--conversation",
        "k",
        "--args",
        r#"{"op":"start","command":"sleep 60"}"#,
    ]);
    let id = v["result"]["id"].as_str().unwrap().to_string();
    let (_, v) = run(&[
        "call",
        "process",
        "--socket",
        &sock,
        "--conversation",
        "k",
        "--args",
        r#"{"op":"list"}"#,
    ]);
    assert_eq!(v["result"]["processes"][0]["id"], json!(id));
    let out = Command::new(bin())
        .args(["tools", "--socket", &sock, "--surface", "read", "--json"])
        .output()
        .unwrap();
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["tier"] == "read")
    );
}

//! Stored results through the real daemon: a 1 MB multi-byte `bash` result projected and
//! paged back by its ref with no character lost or duplicated; refs scoped to their
//! conversation (`out_of_scope`), malformed (`invalid_ref`), unknown (`not_found`), kept
//! across a daemon restart; `grep` and `process read` projected too; secrets masked.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, options, wait_for};

fn client(d: &TestDaemon, workdir: &Path) -> Client {
    let mut o = options(Codec::Bincode, Tier::Exec, true);
    o.workdir = workdir.display().to_string();
    Client::connect(&d.socket, o).expect("connect")
}

fn call(c: &mut Client, conv: &str, tool: &str, args: Json) -> Result<Json, ToolError> {
    match c
        .call_with(conv, tool, args, |_| true)
        .expect("call")
        .outcome
    {
        Outcome::Ok(v) => Ok(v.0),
        Outcome::Err(e) => Err(e),
    }
}

fn ok(c: &mut Client, conv: &str, tool: &str, args: Json) -> Json {
    call(c, conv, tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
}

/// Read a stored result to its end in pages of `limit` characters.
fn page_all(c: &mut Client, conv: &str, r: &str, limit: Option<u64>) -> (String, usize) {
    let mut text = String::new();
    let mut offset = 0u64;
    let mut pages = 0;
    loop {
        let mut args = json!({"ref": r, "offset": offset});
        if let Some(l) = limit {
            args["limit"] = json!(l);
        }
        let v = ok(c, conv, "tool_result_read", args);
        assert_eq!(v["offset"], offset);
        assert_eq!(v["source_tool"], "bash");
        assert_eq!(v["storage_kind"], "inspectable");
        let page = v["text"].as_str().unwrap();
        let n = page.chars().count() as u64;
        if let Some(l) = limit {
            assert!(n <= l);
        }
        text.push_str(page);
        pages += 1;
        assert_eq!(v["next_offset"], offset + n);
        offset += n;
        if v["eof"] == true {
            assert_eq!(v["total_chars"], offset);
            break;
        }
        assert!(n > 0, "a page before the end was empty");
    }
    (text, pages)
}

#[test]
fn a_1_mb_multibyte_result_pages_back_exactly() {
    let d = TestDaemon::start("[limits]\nbash_output_bytes = 4194304\n");
    let t = tempfile::tempdir().unwrap();
    // Numbered lines of 1-, 2-, 3- and 4-byte characters: a lost or repeated character
    // anywhere breaks equality.
    let mut body = String::new();
    let mut i = 0;
    while body.len() < 1_000_000 {
        body.push_str(&format!("{i:06} ascii é ñ 한글 漢字 🦀🎉 end\n"));
        i += 1;
    }
    std::fs::write(t.path().join("multi.txt"), &body).unwrap();
    let mut c = client(&d, t.path());
    let v = ok(&mut c, "c1", "bash", json!({"command": "cat multi.txt"}));
    let p = &v["projected"]["stdout"];
    assert_eq!(p["storage_kind"], "inspectable", "{v:.2000}");
    assert_eq!(p["content_type"], "text/plain");
    assert_eq!(p["total_chars"], body.chars().count());
    let r = p["ref"].as_str().unwrap().to_string();
    let shown = v["stdout"].as_str().unwrap();
    assert!(
        shown.starts_with("000000 ascii"),
        "the projection starts at the head"
    );
    assert!(
        shown.contains(&r) && shown.contains("omitted"),
        "the projection names its ref"
    );
    assert!(shown.chars().count() < 13_000);
    assert!(serde_json::to_string(&v).unwrap().len() < 100_000);

    let (paged, pages) = page_all(&mut c, "c1", &r, Some(48_000));
    assert!(paged == body, "paged text differs from the original");
    assert!(pages > 5);
    let (paged, _) = page_all(&mut c, "c1", &r, Some(12_345));
    assert!(paged == body);
    let (paged, _) = page_all(&mut c, "c1", &r, None);
    assert!(paged == body);

    // Errors, each by kind.
    let e = call(&mut c, "c2", "tool_result_read", json!({"ref": r})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfScope);
    for bad in [
        "tr_example",
        "/tmp/results/x.txt",
        "TR_0123456789abcdef0123",
    ] {
        let e = call(&mut c, "c1", "tool_result_read", json!({"ref": bad})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidRef, "{bad}: {e}");
    }
    let e = call(
        &mut c,
        "c1",
        "tool_result_read",
        json!({"ref": "tr_0123456789abcdef0123"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    let e = call(
        &mut c,
        "c1",
        "tool_result_read",
        json!({"ref": r, "limit": 48_001}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    let e = call(
        &mut c,
        "c1",
        "tool_result_read",
        json!({"ref": r, "offset": 5_000_000}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    drop(c);

    // Refs outlive the daemon: the next one reads the same evidence.
    let mut d = d;
    d.kill_hard();
    d.spawn("[limits]\nbash_output_bytes = 4194304\n");
    let mut c = client(&d, t.path());
    let near_end = body.chars().count() - 5000;
    let v = ok(
        &mut c,
        "c1",
        "tool_result_read",
        json!({"ref": r, "offset": near_end}),
    );
    assert_eq!(
        v["text"].as_str().unwrap(),
        body.chars().skip(near_end).collect::<String>()
    );
    assert_eq!(v["eof"], true);
    let e = call(&mut c, "c2", "tool_result_read", json!({"ref": r})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfScope);
    let dir = d.state_dir().join("results");
    assert!(dir.is_dir(), "results live under the state dir");
    // A stored result whose text went missing is not_available, never a reconstruction.
    for conv in std::fs::read_dir(&dir).unwrap() {
        for f in std::fs::read_dir(conv.unwrap().path()).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "txt") {
                std::fs::remove_file(f).unwrap();
            }
        }
    }
    let e = call(&mut c, "c1", "tool_result_read", json!({"ref": r})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
}

#[test]
fn grep_and_process_read_results_are_projected_too() {
    let d = TestDaemon::start("[result_store]\ninline_chars = 8000\nprojection_chars = 2000\n");
    let t = tempfile::tempdir().unwrap();
    let body: String = (0..5000).map(|i| format!("match line {i}\n")).collect();
    std::fs::write(t.path().join("many.txt"), &body).unwrap();
    let mut c = client(&d, t.path());
    let v = ok(
        &mut c,
        "c",
        "grep",
        json!({"pattern": "match", "max_results": 100000}),
    );
    assert_eq!(v["matches"], 5000);
    let p = &v["projected"]["output"];
    let r = p["ref"].as_str().unwrap();
    let all = ok(
        &mut c,
        "c",
        "tool_result_read",
        json!({"ref": r, "offset": 0, "limit": 48000}),
    );
    assert!(
        all["text"]
            .as_str()
            .unwrap()
            .starts_with("many.txt:1:match line 0\n")
    );
    assert_eq!(all["source_tool"], "grep");

    let v = ok(&mut c, "c", "find", json!({"pattern": "*"}));
    assert!(
        v.get("projected").is_none(),
        "small results pass untouched: {v}"
    );

    let started = ok(
        &mut c,
        "c",
        "process",
        json!({"op": "start", "command": "seq 1 20000"}),
    );
    let id = started["id"].as_str().unwrap().to_string();
    let v = wait_for("the process to end", Duration::from_secs(20), || {
        let v = ok(
            &mut c,
            "c",
            "process",
            json!({"op": "read", "id": id, "offset": 0, "limit": 1048576}),
        );
        (v["eof"] == true).then_some(v)
    });
    let r = v["projected"]["text"]["ref"]
        .as_str()
        .expect("process read projected");
    let tail = ok(
        &mut c,
        "c",
        "tool_result_read",
        json!({"ref": r, "offset": 108_880}),
    );
    assert!(
        tail["text"].as_str().unwrap().ends_with("19999\n20000\n"),
        "{tail}"
    );
}

#[test]
fn known_secrets_are_masked_and_recorded() {
    // The daemon's PATH stands in for a secret: configured by name, long enough to mask.
    let d = TestDaemon::start(
        "[secrets]\nenv = [\"PATH\"]\n[result_store]\ninline_chars = 4000\nprojection_chars = 1000\n",
    );
    let path = std::env::var("PATH").unwrap();
    assert!(path.len() >= 8);
    let t = tempfile::tempdir().unwrap();
    let mut c = client(&d, t.path());
    let v = ok(&mut c, "c", "bash", json!({"command": "echo \"p=$PATH\""}));
    assert_eq!(v["stdout"], "p=[masked:PATH]\n");
    assert_eq!(v["masked"], json!(["PATH"]));
    // Streamed output events are masked too, not only the result.
    let reply = c
        .call_with("c", "bash", json!({"command": "echo \"s=$PATH\""}), |_| {
            true
        })
        .unwrap();
    let streamed: String = reply
        .events
        .iter()
        .filter_map(|e| match e {
            toolvisor_protocol::wire::Event::Output { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "s=[masked:PATH]\n");
    let v = ok(
        &mut c,
        "c",
        "bash",
        json!({"command": "for i in $(seq 1 400); do echo \"$i $PATH\"; done"}),
    );
    let r = v["projected"]["stdout"]["ref"].as_str().unwrap();
    let page = ok(
        &mut c,
        "c",
        "tool_result_read",
        json!({"ref": r, "limit": 48000}),
    );
    let text = page["text"].as_str().unwrap();
    assert!(!text.contains(&path), "a stored page leaked the secret");
    assert!(text.contains("400 [masked:PATH]"));
    assert_eq!(page["masked"]["PATH"], 400);
    let on_disk: String = walk(&d.state_dir().join("results"));
    assert!(!on_disk.contains(&path), "the secret was written to disk");
}

fn walk(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push_str(&walk(&p));
        } else {
            out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
        }
    }
    out
}

#[test]
fn a_state_dir_under_the_workdir_is_out_of_every_file_tools_reach() {
    // The state dir is d.dir/state; this client works in d.dir, so it lies inside the
    // workdir: another conversation's stored results must stay its own.
    let d = TestDaemon::start("[result_store]\ninline_chars = 8000\nprojection_chars = 2000\n");
    let mut c = client(&d, d.dir.path());
    let marker = "only-conversation-a-may-see-this";
    let v = ok(
        &mut c,
        "a",
        "bash",
        json!({"command": format!("for i in $(seq 2000); do echo {marker} $i; done")}),
    );
    assert!(v.to_string().contains("tool_result_read"), "stored: {v}");
    let stored: Vec<_> = files_under(&d.state_dir().join("results"));
    assert!(!stored.is_empty(), "a stored result under the state dir");
    for file in &stored {
        let e = call(
            &mut c,
            "b",
            "read",
            json!({"path": file.display().to_string()}),
        )
        .expect_err("read of another conversation's stored result");
        assert_eq!(e.kind, ErrorKind::OutOfScope, "{e}");
    }
    let g = ok(
        &mut c,
        "b",
        "grep",
        json!({"pattern": marker, "path": d.dir.path().display().to_string()}),
    );
    assert!(!g.to_string().contains(&format!("{marker} 1")), "{g}");
    assert!(g["skipped_protected"].as_u64().unwrap_or(0) >= 1, "{g}");
}

/// Every file under `dir`.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

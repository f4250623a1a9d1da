//! The client packages keep their frame types in step with `protocol/src/wire.rs`: every
//! `ClientFrame` and `DaemonFrame` variant (names taken from serde itself), the fields of each
//! (from serializing one example of every variant to JSON), the structures nested in them, and
//! every `ErrorKind`, compared with the manifest each client declares: the Python package's
//! `toolvisor.frames.manifest()` (derived from its TypedDicts) and the TypeScript package's
//! `MANIFEST` (which `tsc` checks against its interfaces). A variant added to wire.rs and
//! missing from a client fails here, naming it.

use std::collections::BTreeMap;
use std::process::Command;

use serde::de::DeserializeOwned;
use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tree::{NodeState, TreeNode, TreeSnapshot};
use toolvisor_protocol::wire::*;
use toolvisor_tests::clients;

/// Section name -> item name -> sorted field names (`None` for a unit frame or a plain name).
type Manifest = BTreeMap<String, BTreeMap<String, Option<Vec<String>>>>;

/// The variant names serde knows for `T`, from its "unknown variant" error: no list in this
/// test can fall behind the enum.
fn variants<T: DeserializeOwned>(what: &str) -> Vec<String> {
    let err = match serde_json::from_str::<T>("\"__no_such_variant__\"") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{what} accepted a made-up variant"),
    };
    // serde says "expected `a`", "expected `a` or `b`", or "expected one of `a`, `b`, …".
    let (_, list) = err
        .split_once("expected ")
        .unwrap_or_else(|| panic!("{what}: unexpected serde error {err:?}"));
    let list = list.split(" at line").next().unwrap();
    let list = list.strip_prefix("one of ").unwrap_or(list);
    list.split(", ")
        .flat_map(|v| v.split(" or "))
        .map(|v| v.trim_matches(|c| c == '`' || c == ' ').to_string())
        .collect()
}

fn value(v: Json) -> toolvisor_protocol::Value {
    toolvisor_protocol::Value(v)
}

fn node() -> TreeNode {
    TreeNode {
        kind: "root".into(),
        id: "toolvisor".into(),
        pid: Some(1),
        state: NodeState::Ready,
        uptime_ms: 1,
        ttl_left_ms: None,
        restarts: 0,
        mailbox: 0,
        rss_bytes: None,
        detail: String::new(),
        conversation: None,
        last_error: None,
        children: vec![],
    }
}

fn tool_error() -> ToolError {
    ToolError::new(ErrorKind::NotFound, "m", "h")
}

fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "bash".into(),
        description: "d".into(),
        tier: Tier::Exec,
        parallel_safe: true,
        requires_approval: true,
        resource: "processes".into(),
        schema: value(json!({})),
        available: true,
        unavailable_reason: None,
        destructive: true,
        idempotent: false,
        open_world: true,
        output_schema: Some(value(json!({"type": "object"}))),
        follow: Some(toolvisor_protocol::wire::JobFollow {
            id: "job_id".into(),
            poll: "list_downloads".into(),
            poll_args: value(json!({"job_id": "{id}"})),
            stop: "cancel_download".into(),
            stop_args: value(json!({"job_id": "{id}"})),
            entries: Some("jobs".into()),
            ended: vec!["done".into()],
            ok: "done".into(),
        }),
        long_running: true,
    }
}

/// One example of every client frame. The match makes this stop compiling when wire.rs gains
/// a variant; the serde list below catches it too.
fn client_examples() -> Vec<ClientFrame> {
    let frames = vec![
        ClientFrame::Hello(Hello {
            protocol_version: 1,
            codec: Codec::Json,
            client_kind: ClientKind::Harness,
            run_id: String::new(),
            workdir: String::new(),
            surface: Surface {
                max_tier: Tier::Read,
                approvals: false,
                questions: false,
                bridge_tools: vec![],
            },
            run_token: None,
        }),
        ClientFrame::Call(Call {
            id: 1,
            conversation: "c".into(),
            tool: "bash".into(),
            args: value(json!({})),
        }),
        ClientFrame::Cancel { id: 1 },
        ClientFrame::ApprovalAnswer(ApprovalAnswer {
            request_id: 1,
            approved: true,
            reason: None,
        }),
        ClientFrame::QuestionAnswer(QuestionAnswer {
            question_id: 1,
            selected: vec![],
            text: None,
            skipped: false,
            no_person: None,
        }),
        ClientFrame::BridgeResult {
            bridge_id: 1,
            outcome: Outcome::Ok(value(json!(1))),
        },
        ClientFrame::ListTools { all: false },
        ClientFrame::Tree,
        ClientFrame::Subscribe { topic: Topic::Tree },
        ClientFrame::Unsubscribe { topic: Topic::Tree },
        ClientFrame::Status,
        ClientFrame::Ping { nonce: 1 },
        ClientFrame::EndConversation {
            conversation: "c".into(),
        },
    ];
    for f in &frames {
        match f {
            ClientFrame::Hello(_)
            | ClientFrame::Call(_)
            | ClientFrame::Cancel { .. }
            | ClientFrame::ApprovalAnswer(_)
            | ClientFrame::QuestionAnswer(_)
            | ClientFrame::BridgeResult { .. }
            | ClientFrame::ListTools { .. }
            | ClientFrame::Tree
            | ClientFrame::Subscribe { .. }
            | ClientFrame::Unsubscribe { .. }
            | ClientFrame::Status
            | ClientFrame::Ping { .. }
            | ClientFrame::EndConversation { .. } => {}
        }
    }
    frames
}

fn daemon_examples() -> Vec<DaemonFrame> {
    let snapshot = TreeSnapshot {
        generation: 1,
        taken_at_ms: 1,
        root: node(),
    };
    let frames = vec![
        DaemonFrame::Welcome(Welcome {
            protocol_version: 1,
            daemon_version: "0".into(),
            daemon_pid: 1,
            session_id: 1,
            codec: Codec::Json,
            max_frame: 1024,
            tools: vec![tool_info()],
        }),
        DaemonFrame::Refused(tool_error()),
        DaemonFrame::Event {
            id: 1,
            event: Event::Output {
                stream: Stream::Stdout,
                text: "t".into(),
            },
        },
        DaemonFrame::Event {
            id: 1,
            event: Event::Progress {
                message: "m".into(),
                fraction: None,
            },
        },
        DaemonFrame::Result {
            id: 1,
            outcome: Outcome::Err(tool_error()),
        },
        DaemonFrame::ApprovalRequest(ApprovalRequest {
            request_id: 1,
            call_id: 1,
            conversation: "c".into(),
            tool: "bash".into(),
            tier: Tier::Exec,
            summary: "s".into(),
            args: value(json!({})),
        }),
        DaemonFrame::Question(Question {
            question_id: 1,
            run_id: "r".into(),
            conversation: "c".into(),
            question: "q".into(),
            context: None,
            options: vec![QuestionOption {
                label: "l".into(),
                description: None,
            }],
            allow_free_text: false,
            multi_select: false,
        }),
        DaemonFrame::BridgeCall(BridgeCall {
            bridge_id: 1,
            call_id: 1,
            conversation: "c".into(),
            tool: "t".into(),
            args: value(json!({})),
        }),
        DaemonFrame::Tools {
            tools: vec![tool_info()],
        },
        DaemonFrame::Tree(snapshot.clone()),
        DaemonFrame::TreeUpdate(snapshot),
        DaemonFrame::Status(StatusReport {
            daemon_version: "0".into(),
            protocol_version: 1,
            pid: 1,
            uptime_ms: 1,
            socket: "s".into(),
            state_dir: "d".into(),
            config: "c".into(),
            sessions: 1,
            conversations: 1,
            lanes: 1,
            resources: 1,
            rss_bytes: 1,
            calls_total: 1,
            calls_failed: 0,
        }),
        DaemonFrame::Pong { nonce: 1 },
        DaemonFrame::Error(tool_error()),
    ];
    for f in &frames {
        match f {
            DaemonFrame::Welcome(_)
            | DaemonFrame::Refused(_)
            | DaemonFrame::Event { .. }
            | DaemonFrame::Result { .. }
            | DaemonFrame::ApprovalRequest(_)
            | DaemonFrame::Question(_)
            | DaemonFrame::BridgeCall(_)
            | DaemonFrame::Tools { .. }
            | DaemonFrame::Tree(_)
            | DaemonFrame::TreeUpdate(_)
            | DaemonFrame::Status(_)
            | DaemonFrame::Pong { .. }
            | DaemonFrame::Error(_) => {}
        }
    }
    frames
}

fn keys(v: &Json) -> Option<Vec<String>> {
    v.as_object().map(|o| o.keys().cloned().collect())
}

/// (name, payload) of a frame as the JSON codec writes it.
fn split(frame: Json) -> (String, Json) {
    match frame {
        Json::String(name) => (name, Json::Null),
        Json::Object(o) if o.len() == 1 => o.into_iter().next().unwrap(),
        other => panic!("a frame of an unexpected shape: {other}"),
    }
}

/// What wire.rs says, in the manifests' shape.
fn expected() -> Manifest {
    let mut m = Manifest::new();
    let section = |name: &str,
                   frames: Vec<Json>,
                   all: Vec<String>,
                   nested: &mut BTreeMap<String, Option<Vec<String>>>| {
        let mut out = BTreeMap::new();
        for f in frames {
            let (n, body) = split(f);
            if n == "hello" {
                nested.insert("Surface".into(), keys(&body["surface"]));
            }
            if n == "welcome" {
                nested.insert("ToolInfo".into(), keys(&body["tools"][0]));
                nested.insert("JobFollow".into(), keys(&body["tools"][0]["follow"]));
            }
            if n == "question" {
                nested.insert("QuestionOption".into(), keys(&body["options"][0]));
            }
            if n == "tree" {
                nested.insert("TreeNode".into(), keys(&body["root"]));
            }
            if n == "error" {
                nested.insert("ToolError".into(), keys(&body));
            }
            if n == "event" {
                let (ev, payload) = split(body["event"].clone());
                nested.insert(ev, keys(&payload));
            }
            out.insert(n, keys(&body));
        }
        for v in &all {
            assert!(
                out.contains_key(v),
                "wire.rs has the {name} frame `{v}` and this test has no example of it: add one here, then to clients/python/src/toolvisor/frames.py and clients/typescript/src/frames.ts"
            );
        }
        out
    };
    let mut nested = BTreeMap::new();
    let client = section(
        "client",
        client_examples()
            .into_iter()
            .map(|f| serde_json::to_value(f).unwrap())
            .collect(),
        variants::<ClientFrame>("ClientFrame"),
        &mut nested,
    );
    let daemon = section(
        "daemon",
        daemon_examples()
            .into_iter()
            .map(|f| serde_json::to_value(f).unwrap())
            .collect(),
        variants::<DaemonFrame>("DaemonFrame"),
        &mut nested,
    );
    for ev in variants::<Event>("Event") {
        assert!(
            nested.contains_key(&ev),
            "wire.rs has the event `{ev}` and this test has no example of it"
        );
    }
    m.insert("client".into(), client);
    m.insert("daemon".into(), daemon);
    m.insert("nested".into(), nested);
    m.insert(
        "error_kinds".into(),
        variants::<ErrorKind>("ErrorKind")
            .into_iter()
            .map(|k| (k, None))
            .collect(),
    );
    m
}

fn parse(which: &str, text: &str) -> Manifest {
    let v: Json = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{which}'s manifest is not JSON ({e}): {text}"));
    let mut m = Manifest::new();
    for (section, items) in v.as_object().expect("manifest object") {
        let mut out = BTreeMap::new();
        for (name, fields) in items.as_object().expect("section object") {
            let fields = fields.as_array().map(|a| {
                let mut f: Vec<String> =
                    a.iter().map(|x| x.as_str().unwrap().to_string()).collect();
                f.sort();
                f
            });
            out.insert(name.clone(), fields);
        }
        m.insert(section.clone(), out);
    }
    m
}

/// Every difference between wire.rs and a client, one line each.
fn differences(which: &str, want: &Manifest, got: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    for (section, items) in want {
        let empty = BTreeMap::new();
        let theirs = got.get(section).unwrap_or(&empty);
        for (name, fields) in items {
            match theirs.get(name) {
                None => out.push(format!(
                    "{which} lacks {section} `{name}` (fields {fields:?})"
                )),
                Some(f) if f != fields => out.push(format!(
                    "{which}: {section} `{name}` has fields {f:?}, wire.rs has {fields:?}"
                )),
                Some(_) => {}
            }
        }
        for name in theirs.keys() {
            if !items.contains_key(name) {
                out.push(format!(
                    "{which} declares {section} `{name}`, which wire.rs does not have"
                ));
            }
        }
    }
    out
}

fn python_manifest() -> Manifest {
    let src = clients::repo().join("clients/python/src");
    let out = Command::new("python3")
        .args([
            "-B",
            "-c",
            "import json; from toolvisor.frames import manifest; print(json.dumps(manifest()))",
        ])
        .env("PYTHONPATH", &src)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse("clients/python", &String::from_utf8_lossy(&out.stdout))
}

fn typescript_manifest() -> Manifest {
    let path = clients::repo().join("clients/typescript/src/frames.ts");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find("export const MANIFEST = ")
        .expect("frames.ts declares `export const MANIFEST = `")
        + "export const MANIFEST = ".len();
    let end = text[start..]
        .find(" as const;\n// manifest:end")
        .expect("MANIFEST ends with ` as const;` then `// manifest:end`")
        + start;
    parse("clients/typescript", &text[start..end])
}

#[test]
fn the_python_client_declares_every_frame_of_wire_rs() {
    let want = expected();
    let diff = differences("clients/python", &want, &python_manifest());
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[test]
fn the_typescript_client_declares_every_frame_of_wire_rs() {
    let want = expected();
    let diff = differences("clients/typescript", &want, &typescript_manifest());
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[test]
fn a_missing_frame_or_field_is_reported() {
    // The comparison itself: drop a frame and a field from a correct manifest.
    let want = expected();
    let mut got = want.clone();
    got.get_mut("daemon").unwrap().remove("pong");
    got.get_mut("client")
        .unwrap()
        .insert("call".into(), Some(vec!["id".into()]));
    let diff = differences("x", &want, &got);
    assert!(
        diff.iter().any(|d| d.contains("lacks daemon `pong`")),
        "{diff:?}"
    );
    assert!(
        diff.iter().any(|d| d.contains("client `call` has fields")),
        "{diff:?}"
    );
    assert_eq!(diff.len(), 2, "{diff:?}");
}

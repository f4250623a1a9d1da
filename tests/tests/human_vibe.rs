//! `vibe_*` against a real worker program written by the test: a shell script that reads its
//! brief (stdin, and `{brief}` as its argument), edits files as the brief says and prints a
//! summary. Spawn, list, wait, send (the rerun sees the appended message), kill (the whole
//! process group is gone), crash (failed with exit status and stderr tail, not restarted),
//! the queue beyond the cap, conversation isolation, and registration only in vibe mode.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ClientKind, Outcome, Surface, Tier};
use toolvisor_tests::{TestDaemon, alive, bin, wait_for};

/// The worker: one instruction per line of the brief.
///   write FILE TEXT...   write TEXT to FILE (in the workdir)
///   hold FILE            start a background `sleep 300` (pid to bg.pids), then wait for FILE
///   crash WORDS...       print "boom: WORDS" to stderr and exit 3
/// Other lines are ignored. It records its pid and the brief it saw, then prints a summary.
const WORKER: &str = r#"#!/bin/sh
brief=$(cat)
if [ "$brief" != "$1" ]; then echo "stdin and the {brief} argument differ" >&2; exit 9; fi
echo $$ >> worker.pids
printf '%s\n' "$brief" > last-brief.txt
edits=0
while IFS= read -r line; do
    set -- $line
    case "$1" in
        write) f=$2; shift 2; printf '%s\n' "$*" > "$f"; edits=$((edits + 1)) ;;
        hold) sleep 300 & echo $! >> bg.pids; while [ ! -e "$2" ]; do sleep 0.02; done ;;
        crash) shift; echo "working..." >&2; echo "boom: $*" >&2; exit 3 ;;
    esac
done <<EOF
$brief
EOF
echo "summary: $edits file(s) edited"
"#;

struct Vibe {
    d: TestDaemon,
    work: PathBuf,
}

fn start(extra: &str) -> Vibe {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("worker.sh");
    std::fs::write(&script, WORKER).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let config = format!(
        "[vibe]\n{extra}\n[vibe.tiers.fast]\ncommand = [{:?}, \"{{brief}}\"]\n",
        script.display().to_string()
    );
    let d = TestDaemon::start_in(dir, &config);
    Vibe { d, work }
}

impl Vibe {
    fn client(&self) -> Client {
        let c = Client::connect(
            &self.d.socket,
            ClientOptions {
                codec: Codec::Json,
                client_kind: ClientKind::Harness,
                run_id: "vibe-run".into(),
                workdir: self.work.display().to_string(),
                surface: Surface {
                    max_tier: Tier::Read,
                    approvals: false,
                    questions: false,
                    bridge_tools: vec![],
                },
                ..ClientOptions::default()
            },
        )
        .unwrap();
        // A daemon that never answers fails the test instead of hanging it.
        c.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
        c
    }

    fn call(&self, conv: &str, tool: &str, args: Json) -> Outcome {
        self.client().call(conv, tool, args).unwrap().outcome
    }

    fn ok(&self, conv: &str, tool: &str, args: Json) -> Json {
        match self.call(conv, tool, args.clone()) {
            Outcome::Ok(v) => v.0,
            Outcome::Err(e) => panic!(
                "{tool} {args} failed: {e}\n--- daemon log ---\n{}",
                self.d.log_text()
            ),
        }
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.work.join(name)).unwrap_or_default()
    }

    fn pids(&self, name: &str) -> Vec<u32> {
        self.file(name)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    fn touch(&self, name: &str) {
        std::fs::write(self.work.join(name), "").unwrap();
    }
}

fn err(outcome: Outcome) -> toolvisor_protocol::ToolError {
    match outcome {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("expected an error, got {}", v.0),
    }
}

fn wait_dead(what: &str, pids: &[u32]) {
    wait_for(what, Duration::from_secs(10), || {
        pids.iter().all(|p| !alive(*p)).then_some(())
    });
}

#[test]
fn a_worker_edits_files_and_is_listed_and_waited_for() {
    let v = start("");
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "write notes.txt hello from the worker\nwrite todo.txt step two", "label": "writer"}),
    );
    let id = w["worker_id"].as_str().unwrap().to_string();
    assert_eq!(w["tier"], "fast", "fast is the default tier");
    assert_eq!(w["label"], "writer");
    assert!(
        ["running", "done"].contains(&w["state"].as_str().unwrap()),
        "{w}"
    );
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["timed_out"], false);
    assert_eq!(done["exit_code"], 0);
    assert_eq!(done["result"], "summary: 2 file(s) edited\n");
    assert_eq!(v.file("notes.txt"), "hello from the worker\n");
    assert_eq!(v.file("todo.txt"), "step two\n");

    let list = v.ok("c1", "vibe_list", json!({}));
    let workers = list["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{list}");
    let item = &workers[0];
    assert_eq!(item["worker_id"], id);
    assert_eq!(item["tier"], "fast");
    assert_eq!(item["state"], "done");
    assert!(item["elapsed_ms"].is_u64());
    assert_eq!(item["result"], "summary: 2 file(s) edited\n");
    assert_eq!(item["attempts"], 1);

    // Workers belong to their conversation.
    let other = v.ok("c2", "vibe_list", json!({}));
    assert_eq!(other["workers"], json!([]));
    let e = err(v.call("c2", "vibe_wait", json!({"worker_id": id})));
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.message.contains("conversation \"c2\""), "{}", e.message);

    // A tier without a command is refused with what is configured.
    let e = err(v.call(
        "c1",
        "vibe_spawn",
        json!({"brief": "x", "label": "y", "tier": "good"}),
    ));
    assert_eq!(e.kind, ErrorKind::NotAvailable);
    assert!(e.hint.contains("fast"), "{}", e.hint);

    // The tree shows the worker under the vibe supervisor.
    let out = Command::new(bin())
        .args(["tree", "--json", "--socket"])
        .arg(&v.d.socket)
        .output()
        .unwrap();
    let tree: Json = serde_json::from_slice(&out.stdout).unwrap();
    let sup = tree["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "vibe")
        .cloned()
        .expect("a vibe supervisor in the tree");
    assert_eq!(sup["children"][0]["kind"], "vibe");
    assert_eq!(sup["children"][0]["id"], id.as_str());
}

#[test]
fn vibe_wait_returns_at_its_timeout_while_the_worker_runs_on() {
    let v = start("");
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "hold gate\nwrite out.txt late", "label": "slow"}),
    );
    let id = w["worker_id"].as_str().unwrap();
    let waited = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 0}),
    );
    assert_eq!(waited["state"], "running");
    assert_eq!(waited["timed_out"], true);
    assert!(
        waited["note"]
            .as_str()
            .unwrap()
            .contains("call vibe_wait again")
    );
    v.touch("gate");
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "done");
    assert_eq!(v.file("out.txt"), "late\n");
}

#[test]
fn vibe_send_stops_the_running_attempt_and_reruns_with_the_appended_message() {
    let v = start("");
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "write first.txt one\nhold gate", "label": "iterating"}),
    );
    let id = w["worker_id"].as_str().unwrap();
    let first_bg = wait_for(
        "the first attempt's background job",
        Duration::from_secs(10),
        || {
            let pids = v.pids("bg.pids");
            (!pids.is_empty()).then_some(pids)
        },
    );
    let first_worker = v.pids("worker.pids");
    let sent = v.ok(
        "c1",
        "vibe_send",
        json!({"worker_id": id, "message": "write second.txt from the follow-up"}),
    );
    assert_eq!(sent["messages"], 1);
    assert_eq!(sent["attempts"], 2, "{sent}");
    // The first attempt's whole group is gone.
    wait_dead(
        "the first attempt's processes to die",
        &[first_bg, first_worker].concat(),
    );
    v.touch("gate");
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["result"], "summary: 2 file(s) edited\n");
    let brief = v.file("last-brief.txt");
    assert!(
        brief.starts_with("write first.txt one\nhold gate\n\n[follow-up message 1]\nwrite second.txt from the follow-up"),
        "the rerun saw: {brief:?}"
    );
    assert_eq!(v.file("second.txt"), "from the follow-up\n");

    // A send to a finished worker reruns it too.
    let again = v.ok(
        "c1",
        "vibe_send",
        json!({"worker_id": id, "message": "write third.txt once more"}),
    );
    assert_eq!(again["attempts"], 3);
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "done");
    assert_eq!(v.file("third.txt"), "once more\n");
}

#[test]
fn vibe_kill_stops_the_worker_and_its_whole_process_group() {
    let v = start("");
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "hold never", "label": "stuck"}),
    );
    let id = w["worker_id"].as_str().unwrap();
    let bg = wait_for(
        "the worker's background job",
        Duration::from_secs(10),
        || {
            let pids = v.pids("bg.pids");
            (!pids.is_empty()).then_some(pids)
        },
    );
    let worker_pid = w["pid"].as_u64().expect("a running worker has a pid") as u32;
    assert_eq!(v.pids("worker.pids"), vec![worker_pid]);
    assert!(alive(worker_pid) && bg.iter().all(|p| alive(*p)));
    let killed = v.ok("c1", "vibe_kill", json!({"worker_id": id}));
    assert_eq!(killed["state"], "killed", "{killed}");
    assert_eq!(killed["pid"], Json::Null);
    wait_dead(
        "the killed worker's process group to be gone",
        &[bg, vec![worker_pid]].concat(),
    );
    let listed = v.ok("c1", "vibe_list", json!({}));
    assert_eq!(listed["workers"][0]["state"], "killed");
    // Killing again is harmless.
    assert_eq!(
        v.ok("c1", "vibe_kill", json!({"worker_id": id}))["state"],
        "killed"
    );
}

#[test]
fn a_crash_is_reported_failed_with_exit_status_and_stderr_tail_and_not_restarted() {
    let v = start("");
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "write partial.txt half\ncrash disk on fire", "label": "crashy"}),
    );
    let id = w["worker_id"].as_str().unwrap();
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["exit_code"], 3);
    assert!(
        done["error"].as_str().unwrap().contains("exit code 3"),
        "{done}"
    );
    assert_eq!(done["stderr_tail"], "working...\nboom: disk on fire\n");
    assert_eq!(done["attempts"], 1);
    // Not restarted: still failed, still one attempt, the worker ran once.
    let listed = v.ok("c1", "vibe_list", json!({}));
    assert_eq!(listed["workers"][0]["state"], "failed");
    assert_eq!(listed["workers"][0]["attempts"], 1);
    assert_eq!(v.pids("worker.pids").len(), 1);
}

#[test]
fn an_attempt_past_its_limit_is_killed_and_reported_failed() {
    let v = start("attempt_timeout_s = 1\n");
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "hold never", "label": "forever"}),
    );
    let worker_pid = w["pid"].as_u64().expect("running") as u32;
    let bg = wait_for(
        "the worker's background job",
        Duration::from_secs(10),
        || {
            let pids = v.pids("bg.pids");
            (!pids.is_empty()).then_some(pids)
        },
    );
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": w["worker_id"], "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "failed", "{done}");
    assert!(
        done["error"]
            .as_str()
            .unwrap()
            .contains("ran past the limit of 1 s"),
        "{done}"
    );
    wait_dead(
        "the timed-out worker's process group to be gone",
        &[bg, vec![worker_pid]].concat(),
    );
}

#[test]
fn beyond_the_cap_workers_queue_and_start_when_a_slot_frees() {
    let v = start("max_running = 1\n");
    let a = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "hold gate-a\nwrite a.txt A", "label": "a"}),
    );
    let b = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "write b.txt B", "label": "b"}),
    );
    assert_eq!(a["state"], "running");
    assert_eq!(b["state"], "queued", "{b}");
    assert!(b["note"].as_str().unwrap().contains("cap"), "{b}");
    let list = v.ok("c1", "vibe_list", json!({}));
    assert_eq!(list["workers"][1]["state"], "queued");
    // Killing a queued worker takes it out of the queue; a fresh one queues behind `a`.
    let c = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "write c.txt C", "label": "c"}),
    );
    assert_eq!(c["state"], "queued");
    let killed = v.ok("c1", "vibe_kill", json!({"worker_id": c["worker_id"]}));
    assert_eq!(killed["state"], "killed");
    v.touch("gate-a");
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": b["worker_id"], "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(v.file("b.txt"), "B\n");
    assert_eq!(v.file("c.txt"), "", "a killed queued worker never runs");
}

#[test]
fn vibe_tools_exist_only_in_vibe_mode_and_tools_all_says_why() {
    let tools_all = |d: &TestDaemon| {
        let out = Command::new(bin())
            .args(["tools", "--all", "--socket"])
            .arg(&d.socket)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let advertised = |d: &TestDaemon| -> Vec<String> {
        d.client(Codec::Json, Tier::Exec, false)
            .welcome()
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    let off = TestDaemon::start("");
    assert!(!advertised(&off).iter().any(|t| t.starts_with("vibe_")));
    let text = tools_all(&off);
    let line = text.lines().find(|l| l.starts_with("vibe_spawn")).unwrap();
    assert!(
        line.contains("vibe mode is off: no worker command is configured"),
        "{line}"
    );
    let e = err(off.call("c", "vibe_list", json!({})));
    assert_eq!(e.kind, ErrorKind::NotAvailable);

    let missing = TestDaemon::start(
        "[vibe.tiers.good]\ncommand = [\"no-such-vibe-worker-xyz\", \"{brief}\"]\n",
    );
    assert!(!advertised(&missing).iter().any(|t| t.starts_with("vibe_")));
    let text = tools_all(&missing);
    let line = text.lines().find(|l| l.starts_with("vibe_wait")).unwrap();
    assert!(
        line.contains("[vibe.tiers.good]: \"no-such-vibe-worker-xyz\" is not on PATH"),
        "{line}"
    );

    let on = start("");
    let names = advertised(&on.d);
    for t in [
        "vibe_spawn",
        "vibe_send",
        "vibe_wait",
        "vibe_kill",
        "vibe_list",
    ] {
        assert!(names.contains(&t.to_string()), "{t} missing from {names:?}");
    }
}

/// What a worker written in Python needs to speak the JSON frames: `send`, `recv`.
const PY_FRAMES: &str = r#"
import json, os, socket, struct

def send(s, frame):
    data = json.dumps(frame).encode()
    s.sendall(struct.pack(">I", len(data)) + data)

def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("daemon closed the connection")
        buf += chunk
    return buf

def recv(s):
    (n,) = struct.unpack(">I", recv_exact(s, 4))
    return json.loads(recv_exact(s, n))
"#;

/// A worker written in Python (`body` after the frame helpers) as `name` in a new temp dir
/// with a `work` directory beside it: (the dir, the system python3, the script, the workdir).
fn python_worker(name: &str, body: &str) -> (tempfile::TempDir, &'static str, PathBuf, PathBuf) {
    let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("python3 for the worker");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join(name);
    std::fs::write(&script, format!("{PY_FRAMES}{body}")).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    (dir, python, script, work)
}

/// A worker that calls the daemon back: it says Hello on `$TOOLVISOR_SOCKET` with its
/// credential while claiming the exec tier, approvals and another run, calls `bash`
/// (approving its own requests) and `lsp status`, then tries a made-up credential, and prints
/// what it saw as JSON.
const CALLBACK_WORKER: &str = r#"
def hello(token):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["TOOLVISOR_SOCKET"])
    h = {"protocol_version": 1, "codec": "json", "client_kind": "harness",
         "run_id": "vibe-run", "workdir": os.getcwd(),
         "surface": {"max_tier": "exec", "approvals": True, "questions": False}}
    if token is not None:
        h["run_token"] = token
    send(s, {"hello": h})
    return s, recv(s)

s, welcome = hello(os.environ["TOOLVISOR_RUN_TOKEN"])
out = {"tiers": sorted({t["tier"] for t in welcome["welcome"]["tools"]})}
send(s, {"call": {"id": 1, "conversation": "w", "tool": "bash",
                  "args": {"command": "touch bash-ran.txt"}}})
while True:
    frame = recv(s)
    if "approval_request" in frame:
        req = frame["approval_request"]
        send(s, {"approval_answer": {"request_id": req["request_id"], "approved": True, "reason": None}})
    elif "result" in frame and frame["result"]["id"] == 1:
        out["bash"] = frame["result"]["outcome"]
        break
send(s, {"call": {"id": 2, "conversation": "w", "tool": "lsp", "args": {"op": "status"}}})
while True:
    frame = recv(s)
    if "result" in frame and frame["result"]["id"] == 2:
        out["status"] = frame["result"]["outcome"]
        break
_, refused = hello("0" * 64)
out["forged"] = refused
print(json.dumps(out))
"#;

#[test]
fn a_worker_calling_back_gets_its_tiers_surface_whatever_its_hello_claims() {
    let (dir, python, script, work) = python_worker("callback.py", CALLBACK_WORKER);
    // No `surface` key: the default, `read`, applies.
    let config = format!(
        "[vibe.tiers.fast]\ncommand = [{python:?}, {:?}]\n",
        script.display().to_string()
    );
    let v = Vibe {
        d: TestDaemon::start_in(dir, &config),
        work,
    };
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "call back", "label": "caller"}),
    );
    let id = w["worker_id"].as_str().unwrap().to_string();
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "done", "{done}");
    let seen: Json = serde_json::from_str(done["result"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("worker output is not JSON ({e}): {done}"));
    // Its Welcome lists read tools only, and its bash call is refused by the surface gate.
    assert_eq!(seen["tiers"], json!(["read"]), "{seen}");
    assert_eq!(seen["bash"]["err"]["kind"], "surface_denied", "{seen}");
    assert!(
        !v.work.join("bash-ran.txt").exists(),
        "the worker's bash call ran"
    );
    // Its run is its own, not the `vibe-run` it claimed: no trust granted to another run.
    let status = seen["status"]["ok"]["text"].as_str().unwrap_or_default();
    assert!(status.contains(&format!("(run vibe:{id})")), "{seen}");
    // A credential the daemon did not hand out is refused.
    assert_eq!(seen["forged"]["refused"]["kind"], "policy_denied", "{seen}");
}

/// A worker that calls back with its credential and tries to leave its pin: a Hello whose
/// workdir is outside its own, then (in its own workdir) `tool_result_read` of a result its
/// parent conversation stored, naming that conversation (its ref is the brief), and `read` of
/// a file beside its workdir. Prints what it saw as JSON.
const ESCAPING_WORKER: &str = r#"
import sys

def hello(workdir):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["TOOLVISOR_SOCKET"])
    send(s, {"hello": {"protocol_version": 1, "codec": "json", "client_kind": "harness",
             "run_id": "vibe-run", "workdir": workdir,
             "surface": {"max_tier": "read", "approvals": False, "questions": False},
             "run_token": os.environ["TOOLVISOR_RUN_TOKEN"]}})
    return s, recv(s)

def call(s, i, conversation, tool, args):
    send(s, {"call": {"id": i, "conversation": conversation, "tool": tool, "args": args}})
    while True:
        frame = recv(s)
        if "result" in frame and frame["result"]["id"] == i:
            return frame["result"]["outcome"]

out = {}
_, out["outside"] = hello(os.path.dirname(os.getcwd()))
s, _ = hello(os.getcwd())
out["stored"] = call(s, 1, "c1", "tool_result_read", {"ref": sys.argv[1]})
out["beside"] = call(s, 2, "c1", "read", {"path": "../beside.txt"})
out["own"] = call(s, 3, "c1", "read", {"path": "mine.txt"})
print(json.dumps(out))
"#;

#[test]
fn a_worker_is_pinned_to_its_workdir_and_its_own_conversation() {
    let (dir, python, script, work) = python_worker("escape.py", ESCAPING_WORKER);
    std::fs::write(work.join("mine.txt"), "the worker's own file\n").unwrap();
    std::fs::write(dir.path().join("beside.txt"), "not the worker's\n").unwrap();
    let lines: String = (0..5000).map(|i| format!("parentsecret {i}\n")).collect();
    std::fs::write(work.join("big.txt"), lines).unwrap();
    let config = format!(
        "[result_store]\ninline_chars = 8000\nprojection_chars = 2000\n[vibe.tiers.fast]\ncommand = [{python:?}, {:?}, \"{{brief}}\"]\n",
        script.display().to_string()
    );
    let v = Vibe {
        d: TestDaemon::start_in(dir, &config),
        work,
    };
    // The parent conversation stores a large result.
    let g = v.ok(
        "c1",
        "grep",
        json!({"pattern": "parentsecret", "max_results": 100000}),
    );
    let r = g["projected"]["output"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("a stored grep result: {g:.2000}"))
        .to_string();
    let w = v.ok("c1", "vibe_spawn", json!({"brief": r, "label": "escaper"}));
    let id = w["worker_id"].as_str().unwrap().to_string();
    let done = v.ok(
        "c1",
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 60}),
    );
    assert_eq!(done["state"], "done", "{done}");
    let seen: Json = serde_json::from_str(done["result"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("worker output is not JSON ({e}): {done}"));
    // A workdir outside its own is refused, naming why.
    assert_eq!(
        seen["outside"]["refused"]["kind"], "policy_denied",
        "{seen}"
    );
    assert!(
        seen["outside"]["refused"]["message"]
            .as_str()
            .unwrap()
            .contains("is outside it"),
        "{seen}"
    );
    // Naming the parent's conversation does not make its calls the parent's.
    assert_eq!(seen["stored"]["err"]["kind"], "out_of_scope", "{seen}");
    assert!(!seen.to_string().contains("parentsecret 1"), "{seen}");
    assert_eq!(seen["beside"]["err"]["kind"], "out_of_scope", "{seen}");
    assert!(
        seen["own"]["ok"]
            .to_string()
            .contains("the worker's own file"),
        "{seen}"
    );
    // The parent still reads its own result.
    let own = v.ok("c1", "tool_result_read", json!({"ref": r}));
    assert!(own.to_string().contains("parentsecret"), "{own:.300}");
}

#[test]
fn vibe_send_and_vibe_kill_refuse_bad_input_naming_it_and_change_nothing() {
    let v = start("");
    let w = v.ok(
        "c1",
        "vibe_spawn",
        json!({"brief": "hold gate.txt", "label": "held"}),
    );
    let id = w["worker_id"].as_str().unwrap().to_string();
    // An empty message, an unknown id, a malformed id, another conversation's worker.
    let e = err(v.call(
        "c1",
        "vibe_send",
        json!({"worker_id": id, "message": "  \n"}),
    ));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("`message` is empty"), "{e}");
    for bad in ["w999", "nope", "", "w-1", "w18446744073709551616"] {
        let e = err(v.call(
            "c1",
            "vibe_send",
            json!({"worker_id": bad, "message": "more"}),
        ));
        assert_eq!(e.kind, ErrorKind::NotFound, "send {bad:?}: {e}");
        let e = err(v.call("c1", "vibe_kill", json!({"worker_id": bad})));
        assert_eq!(e.kind, ErrorKind::NotFound, "kill {bad:?}: {e}");
    }
    let e = err(v.call(
        "c2",
        "vibe_send",
        json!({"worker_id": id, "message": "more"}),
    ));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    let e = err(v.call("c2", "vibe_kill", json!({"worker_id": id})));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    // Wrong types and missing or unknown fields are refused before anything runs.
    for (tool, args) in [
        ("vibe_send", json!({"worker_id": id})),
        ("vibe_send", json!({"worker_id": 7, "message": "x"})),
        (
            "vibe_send",
            json!({"worker_id": id, "message": "x", "force": true}),
        ),
        ("vibe_kill", json!({})),
        ("vibe_kill", json!({"worker_id": ["w1"]})),
    ] {
        let e = err(v.call("c1", tool, args.clone()));
        assert_eq!(e.kind, ErrorKind::InvalidArgs, "{tool} {args}: {e}");
    }
    // None of it touched the worker: it still runs its first attempt with the first brief.
    let listed = v.ok("c1", "vibe_list", json!({}));
    let mine = &listed["workers"][0];
    assert_eq!(mine["state"], "running", "{listed}");
    assert!(!v.file("last-brief.txt").contains("more"), "{listed}");
    // Killed twice: the second answers the same ended worker.
    let k1 = v.ok("c1", "vibe_kill", json!({"worker_id": id}));
    assert_eq!(k1["state"], "killed", "{k1}");
    let k2 = v.ok("c1", "vibe_kill", json!({"worker_id": id}));
    assert_eq!(k2["state"], "killed", "{k2}");
}

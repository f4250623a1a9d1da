//! Each tool family's handler built with only the services its context names — no daemon, no
//! session, no socket: the proof that the narrowing is real. A fake `Caller`
//! stands in for the session: it records events and hands eval cells a bridge that echoes.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use serde_json::{Value as Json, json};
use toolvisor_kernel::{Bridge, BridgeFuture};
use toolvisor_kit::ids::IdCounter;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{KindSupervisor, SupervisorArgs, SupervisorMsg};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ClientKind, DaemonFrame, Event, QuestionAnswer};

use super::{BoxFuture, CallCtx, Caller};
use crate::config::Config;

/// Stands in for the session: events are recorded, and a cell's `tool()` calls are recorded
/// and answered with their own arguments.
#[derive(Default)]
struct FakeCaller {
    events: Mutex<Vec<(u64, Event)>>,
    bridged: Arc<Mutex<Vec<(String, Json)>>>,
}

struct EchoBridge(Arc<Mutex<Vec<(String, Json)>>>);

impl Bridge for EchoBridge {
    fn call(&self, tool: String, args: Json) -> BridgeFuture {
        self.0.lock().unwrap().push((tool, args.clone()));
        Box::pin(async move { Ok(args) })
    }
}

impl Caller for FakeCaller {
    fn event(&self, call: u64, event: Event) -> BoxFuture<'_, ()> {
        self.events.lock().unwrap().push((call, event));
        Box::pin(async {})
    }

    fn bridge(&self, _ctx: &CallCtx) -> Arc<dyn Bridge> {
        Arc::new(EchoBridge(self.bridged.clone()))
    }
}

fn call(workdir: &Path, conversation: &str, caller: &Arc<FakeCaller>) -> CallCtx {
    CallCtx {
        id: 7,
        conversation: conversation.into(),
        workdir: workdir.to_path_buf(),
        run_id: "run-1".into(),
        surface: toolvisor_protocol::wire::Tier::Exec,
        caller: caller.clone(),
    }
}

/// The file tools' state of a default configuration, its stores under `state`.
fn files(state: &Path) -> Arc<toolvisor_files::Files> {
    Arc::new(super::files::open(&Config::default(), state).expect("open the file tools' state"))
}

fn launcher() -> Launcher {
    Launcher::from_current_env(None, &Config::default().env.allow, None)
}

/// A kind supervisor of its own, as the root would start it.
async fn supervisor(kind: &str) -> ActorRef<SupervisorMsg> {
    let notifier = TreeNotifier::default();
    let status = NodeStatus::new("supervisor", kind, String::new(), notifier.clone());
    let args = SupervisorArgs {
        kind: kind.into(),
        notifier,
        keep_ended: Duration::from_secs(60),
        status,
    };
    Actor::spawn(None, KindSupervisor, args)
        .await
        .expect("spawn a kind supervisor")
        .0
}

fn ids(state: &Path, name: &str) -> IdCounter {
    IdCounter::open(&state.join("ids").join(name)).expect("open an id counter")
}

#[tokio::test]
async fn file_tools_need_only_the_files_state_and_stay_in_their_scope() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let files = files(state.path());
    let cx = super::files::FileTools {
        files: &files,
        max_frame: 1 << 20,
        diagnostics: None,
    };
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let wrote = super::files::run_write(
        &cx,
        &ctx,
        super::parse("write", json!({"path": "a/b.txt", "content": "one\ntwo\n"})).unwrap(),
    )
    .await
    .expect("write inside the workdir");
    assert_eq!(
        wrote.status,
        toolvisor_protocol::results::ChangeStatus::Created,
        "{wrote:?}"
    );
    assert!(
        wrote.diagnostics.is_none(),
        "no language servers, no diagnostics: {wrote:?}"
    );
    let read = super::files::run_read(
        &cx,
        &ctx,
        super::parse("read", json!({"path": "a/b.txt"})).unwrap(),
    )
    .await
    .expect("read it back");
    let toolvisor_protocol::results::ReadResult::Text(read) = read else {
        panic!("a text file reads as text: {read:?}");
    };
    assert!(read.content.contains("two"), "{read:?}");
    let outside = super::files::run_write(
        &cx,
        &ctx,
        super::parse("write", json!({"path": "../escape.txt", "content": "x"})).unwrap(),
    )
    .await
    .expect_err("a path above the workdir is refused");
    assert_eq!(outside.kind, ErrorKind::OutOfScope, "{outside:?}");
}

#[tokio::test]
async fn tool_result_read_pages_a_stored_result_for_its_own_conversation_only() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let files = files(state.path());
    let big = "line of output\n".repeat(5_000);
    let projected = super::files::finish(
        &files,
        "mine",
        "bash",
        super::spec::Passage::Stored,
        json!({"stdout": big.clone()}),
    )
    .await
    .unwrap();
    let reference = projected["projected"]["stdout"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("a large result is stored with a ref: {projected}"))
        .to_string();
    let cx = super::files::FileTools {
        files: &files,
        max_frame: 1 << 20,
        diagnostics: None,
    };
    let caller = Arc::new(FakeCaller::default());
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let page = super::files::run_tool_result_read(
            &cx,
            &call(work.path(), "mine", &caller),
            super::parse(
                "tool_result_read",
                json!({"ref": reference, "offset": offset, "limit": 20_000}),
            )
            .unwrap(),
        )
        .await
        .expect("the conversation that made the result reads it");
        text.push_str(&page.text);
        if page.eof {
            break;
        }
        offset = page.next_offset as usize;
    }
    assert_eq!(text, big, "the pages put together are the stored text");
    let theirs = super::files::run_tool_result_read(
        &cx,
        &call(work.path(), "theirs", &caller),
        super::parse("tool_result_read", json!({"ref": reference})).unwrap(),
    )
    .await
    .expect_err("another conversation's ref is refused");
    assert_eq!(theirs.kind, ErrorKind::OutOfScope, "{theirs:?}");
}

#[tokio::test]
async fn structural_tools_stage_and_accept_with_files_and_the_edit_store_only() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(work.path().join("m.py"), "print(old(1))\n").unwrap();
    let files = files(state.path());
    let edits = Arc::new(
        toolvisor_structural::store::EditStore::open(&state.path().join("edits"), &|dir| {
            files.scope(dir)
        })
        .expect("open the edit store"),
    );
    let cx = super::structural::StructuralTools {
        cache: None,
        files: &files,
        edits: &edits,
        diagnostics: None,
        limits: Default::default(),
    };
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let staged = super::structural::ast_edit(
        &cx,
        &ctx,
        super::parse(
            "ast_edit",
            json!({"pattern": "old($A)", "rewrite": "new($A)", "language": "python"}),
        )
        .unwrap(),
    )
    .await
    .expect("stage the edit");
    let id = staged.edit_id.expect("an edit id");
    let accepted = super::structural::resolve(
        &cx,
        &ctx,
        super::parse("resolve", json!({"edit_id": id, "action": "accept"})).unwrap(),
    )
    .await
    .expect("accept the edit");
    assert_eq!(accepted.replacements, Some(1), "{accepted:?}");
    assert_eq!(
        std::fs::read_to_string(work.path().join("m.py")).unwrap(),
        "print(new(1))\n"
    );
}

#[tokio::test]
async fn lsp_tools_confine_paths_with_the_servers_and_the_files_state_only() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(work.path().join("notes.txt"), "no server reads this\n").unwrap();
    let files = files(state.path());
    let config = Config::default();
    let lsp = toolvisor_lsp::LanguageServers::new(
        supervisor("language_servers").await,
        launcher(),
        config.lsp.clone(),
        TreeNotifier::default(),
        config.restart.policy(),
        &[],
    );
    let cx = super::lsp::LspTools {
        lsp: &lsp,
        files: &files,
    };
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let outside = super::lsp::synced_write(
        &cx,
        &ctx,
        super::parse("synced_write", json!({"path": "/etc/hostname"})).unwrap(),
    )
    .await
    .expect_err("a file outside the workdir is refused");
    assert_eq!(outside.kind, ErrorKind::OutOfScope, "{outside:?}");
    let synced = super::lsp::synced_write(
        &cx,
        &ctx,
        super::parse("synced_write", json!({"path": "notes.txt"})).unwrap(),
    )
    .await
    .expect("a file no server serves is synced with nothing to report");
    assert_eq!(synced.path, "notes.txt", "{synced:?}");
}

#[tokio::test]
async fn eval_runs_a_cell_whose_tool_calls_reach_the_bridge_its_caller_gave() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = Config::default();
    let sup = supervisor("kernels").await;
    let kernels = toolvisor_kernel::Kernels::new(
        sup.clone(),
        launcher(),
        config.kernels.limits(),
        TreeNotifier::default(),
    );
    let files = files(state.path());
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let cx = super::eval::EvalTools {
        kernels: &kernels,
        config: &config.kernels,
        secrets: files.store.secrets(),
        bridge: ctx.caller.bridge(&ctx),
    };
    let result = super::eval::run(&cx, &ctx, super::parse("eval", json!({"code": "r = tool('echo_tool', {'n': 21})\nprint(r['n'] * 2)", "description": "bridge"})).unwrap())
    .await
    .expect("the cell runs");
    assert!(result.text.contains("42"), "{result:?}");
    assert_eq!(
        *caller.bridged.lock().unwrap(),
        vec![("echo_tool".to_string(), json!({"n": 21}))],
        "the cell's tool() call went to the caller's bridge"
    );
    // The kernel's guard kills and reaps it as its actor stops.
    sup.stop_children_and_wait(None, Some(Duration::from_secs(10)))
        .await;
}

#[tokio::test]
async fn bash_streams_its_output_to_the_caller_with_the_launcher_and_limits_only() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let files = files(state.path());
    let config = Config::default();
    let launcher = launcher();
    let cx = super::BashTool {
        launcher: &launcher,
        limits: &config.limits,
        secrets: files.store.secrets(),
    };
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let args = super::parse("bash", json!({"command": "echo streamed"})).unwrap();
    let result = super::run_bash(&cx, &ctx, args).await.expect("bash runs");
    assert_eq!(result.exit_code, Some(0), "{result:?}");
    let events = caller.events.lock().unwrap();
    assert!(
        events.iter().any(|(id, e)| *id == 7
            && matches!(e, Event::Output { text, .. } if text.contains("streamed"))),
        "the output was streamed to the caller as events of call 7: {events:?}"
    );
}

#[tokio::test]
async fn process_tools_need_only_the_processes() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = Config::default();
    let limits = toolvisor_jobs::tracked::ProcessLimits {
        buffer_bytes: 1 << 16,
        keep_ended: Duration::from_secs(60),
        max_per_conversation: 4,
        idle_ttl: None,
        restart: config.restart.policy(),
    };
    let processes = toolvisor_jobs::tracked::Processes::new(
        supervisor("processes").await,
        launcher(),
        limits,
        TreeNotifier::default(),
        ids(state.path(), "processes"),
    );
    let caller = Arc::new(FakeCaller::default());
    let mine = call(work.path(), "mine", &caller);
    let args = |v| super::parse("process", v).unwrap();
    let started = super::run_process(
        &processes,
        &mine,
        args(json!({"op": "start", "command": "sleep 30"})),
    )
    .await
    .expect("start a process");
    let started = serde_json::to_value(started).unwrap();
    let id = started["id"].as_str().expect("a process id").to_string();
    let listed = super::run_process(&processes, &mine, args(json!({"op": "list"})))
        .await
        .unwrap();
    let listed = serde_json::to_value(listed).unwrap();
    assert!(listed.to_string().contains(&id), "{listed}");
    let theirs = call(work.path(), "theirs", &caller);
    let other = super::run_process(&processes, &theirs, args(json!({"op": "list"})))
        .await
        .unwrap();
    let other = serde_json::to_value(other).unwrap();
    assert!(!other.to_string().contains(&id), "{other}");
    super::run_process(&processes, &mine, args(json!({"op": "kill", "id": id})))
        .await
        .expect("kill it");
}

#[tokio::test]
async fn debug_needs_only_the_debuggers() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = Config::default();
    let debug = toolvisor_dap::Debuggers::new(
        supervisor("debug_adapters").await,
        launcher(),
        config.debug.clone(),
        TreeNotifier::default(),
        ids(state.path(), "debug_sessions"),
    );
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let adapters = super::debug::run(
        &debug,
        &ctx,
        super::parse("debug", json!({"op": "adapters"})).unwrap(),
    )
    .await
    .expect("list the adapters");
    let toolvisor_protocol::results::DebugResult::Adapters(adapters) = adapters else {
        panic!("`adapters` answers the adapters: {adapters:?}");
    };
    assert!(
        adapters.adapters.iter().any(|a| a.name == "debugpy"),
        "{adapters:?}"
    );
}

#[tokio::test]
async fn vibe_tools_need_only_the_roster() {
    let (work, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = Config::default();
    let vibes = toolvisor_jobs::vibe::Vibes::new(
        supervisor("vibe").await,
        launcher(),
        super::human::vibe_limits(&config.vibe),
        TreeNotifier::default(),
        ids(state.path(), "vibe_workers"),
    );
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let listed =
        super::human::run_vibe_list(&vibes, &ctx, toolvisor_protocol::tools::VibeListArgs {})
            .await
            .expect("list the workers");
    assert_eq!(
        serde_json::to_value(&listed).unwrap(),
        json!({"workers": []})
    );
}

#[tokio::test]
async fn ask_user_needs_only_the_question_ports() {
    let work = tempfile::tempdir().unwrap();
    let questions = crate::questions::QuestionPorts::default();
    let (port, mut drain) =
        crate::outbox::outbox(toolvisor_protocol::codec::Codec::Json, 1 << 20, 1 << 20);
    questions.attach(3, ClientKind::Operator, "run-1", port);
    let cx = super::human::AskUser {
        questions: &questions,
        timeout: Duration::from_secs(600),
    };
    let caller = Arc::new(FakeCaller::default());
    let ctx = call(work.path(), "c1", &caller);
    let args = super::parse("ask_user", json!({"question": "go on?"})).unwrap();
    let asking = super::human::ask_user(&cx, &ctx, args);
    let answering = async {
        let Some(DaemonFrame::Question(q)) = drain.next_frame().await else {
            panic!("the port got no question");
        };
        assert_eq!(q.run_id, "run-1", "the run comes from the call context");
        questions
            .answer(
                3,
                QuestionAnswer {
                    question_id: q.question_id,
                    selected: Vec::new(),
                    text: Some("yes".into()),
                    skipped: false,
                    no_person: None,
                },
            )
            .expect("the answer is taken");
    };
    let (answer, ()) = tokio::join!(asking, answering);
    let answer = answer.expect("ask_user gets the answer");
    assert_eq!(answer.text.as_deref(), Some("yes"), "{answer:?}");
}
